//! A small simulated SSD: a page-mapped FTL with ACCFS's SHARE command, so a user without
//! such an SSD can see what remapping saves (the seed's Figure 3: flash page writes for one
//! update of two files — ordered journaling 6, data journaling 8, SDJ 4 + 1 share command).
//!
//! Every write goes out of place to a fresh flash page and remaps its LBA; SHARE points a
//! set of LBAs at the pages of others (one command for a whole batch) and writes nothing.
//! [`Ftl::replay`] drives it with a block trace of the engine ([`TraceEvent`], recorded by
//! `RemapStore::start_trace`): journal appends, snapshot writes, and per checkpoint either
//! the remap pairs (one SHARE) or the copied blocks (copy-checkpoint).

use std::collections::HashMap;

/// One block-level event of the engine, in journal and home-file blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// `blocks` journal blocks written from journal block `block` (a commit record).
    JournalWrite { block: u64, blocks: u64 },
    /// Home blocks `file_block..+blocks` of inode `ino` now share journal blocks from
    /// `journal_block` (a checkpoint's remap run).
    Remap {
        ino: u64,
        file_block: u64,
        journal_block: u64,
        blocks: u64,
    },
    /// Home blocks written by copy (copy-checkpoint).
    HomeWrite {
        ino: u64,
        file_block: u64,
        blocks: u64,
    },
    /// The snapshot (checkpoint mark) written: `blocks` blocks of metadata.
    SnapshotWrite { blocks: u64 },
    /// A checkpoint ended: its remap runs form one SHARE command.
    CheckpointEnd,
}

/// Flash activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashCounts {
    /// Flash pages programmed.
    pub page_writes: u64,
    /// SHARE commands issued.
    pub share_commands: u64,
    /// LBAs remapped by them.
    pub shared_pages: u64,
}

/// The page-mapped FTL.
#[derive(Debug, Default)]
pub struct Ftl {
    map: HashMap<u64, u64>,
    next_page: u64,
    counts: FlashCounts,
    pending_share: Vec<(u64, u64)>,
}

/// LBA of journal block `j` (the journal's region of the simulated device).
const JOURNAL_LBA: u64 = 1 << 40;
/// LBA region of the snapshot.
const SNAPSHOT_LBA: u64 = 1 << 41;

fn home_lba(ino: u64, file_block: u64) -> u64 {
    (ino << 24) | (file_block & 0xff_ffff)
}

impl Ftl {
    pub fn new() -> Ftl {
        Ftl::default()
    }

    /// Program a fresh page for `lba`.
    pub fn write(&mut self, lba: u64) {
        self.map.insert(lba, self.next_page);
        self.next_page += 1;
        self.counts.page_writes += 1;
    }

    /// One SHARE command: each `(dst, src)` LBA pair makes `dst` map to `src`'s page.
    pub fn share(&mut self, pairs: &[(u64, u64)]) {
        if pairs.is_empty() {
            return;
        }
        for &(dst, src) in pairs {
            if let Some(&page) = self.map.get(&src) {
                self.map.insert(dst, page);
            }
        }
        self.counts.share_commands += 1;
        self.counts.shared_pages += pairs.len() as u64;
    }

    /// The physical page of `lba`, if it was ever written.
    pub fn page_of(&self, lba: u64) -> Option<u64> {
        self.map.get(&lba).copied()
    }

    pub fn counts(&self) -> FlashCounts {
        self.counts
    }

    /// Apply one engine event.
    pub fn apply(&mut self, e: &TraceEvent) {
        match *e {
            TraceEvent::JournalWrite { block, blocks } => {
                (block..block + blocks).for_each(|j| self.write(JOURNAL_LBA + j))
            }
            TraceEvent::Remap {
                ino,
                file_block,
                journal_block,
                blocks,
            } => self.pending_share.extend((0..blocks).map(|i| {
                (
                    home_lba(ino, file_block + i),
                    JOURNAL_LBA + journal_block + i,
                )
            })),
            TraceEvent::HomeWrite {
                ino,
                file_block,
                blocks,
            } => (0..blocks).for_each(|i| self.write(home_lba(ino, file_block + i))),
            TraceEvent::SnapshotWrite { blocks } => {
                (0..blocks).for_each(|i| self.write(SNAPSHOT_LBA + i))
            }
            TraceEvent::CheckpointEnd => {
                let pairs = std::mem::take(&mut self.pending_share);
                self.share(&pairs);
            }
        }
    }

    /// Replay a whole trace.
    pub fn replay(trace: &[TraceEvent]) -> FlashCounts {
        let mut ftl = Ftl::new();
        trace.iter().for_each(|e| ftl.apply(e));
        ftl.counts()
    }
}

/// The journaling modes of the seed's Figure 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedMode {
    /// ext4 data=ordered: data home, then JD + metadata + JC; metadata home at checkpoint.
    OrderedJournal,
    /// ext4 data=journal: JD + data + metadata + JC; all of it home at checkpoint.
    DataJournal,
    /// ACCFS SDJ: the journal writes of DJ, the checkpoint one SHARE command.
    SingleDataJournal,
}

/// The seed's Figure 3 scenario on the FTL: files A and B each get one updated data block;
/// their inodes share one metadata block M; a commit, then a checkpoint.
pub fn figure3(mode: SeedMode) -> FlashCounts {
    const A: u64 = 100;
    const B: u64 = 101;
    const M: u64 = 10;
    let j = |n: u64| JOURNAL_LBA + n;
    let mut ftl = Ftl::new();
    match mode {
        SeedMode::OrderedJournal => {
            [A, B, j(0), j(1), j(2)].iter().for_each(|&l| ftl.write(l)); // A', B', JD, M', JC
            ftl.write(M); // checkpoint: M' home
        }
        SeedMode::DataJournal => {
            [j(0), j(1), j(2), j(3), j(4)]
                .iter()
                .for_each(|&l| ftl.write(l)); // JD A' B' M' JC
            [A, B, M].iter().for_each(|&l| ftl.write(l)); // checkpoint: copies home
        }
        SeedMode::SingleDataJournal => {
            // JD (with the commit mark), A', B', M'; checkpoint: one SHARE of three pairs.
            [j(0), j(1), j(2), j(3)].iter().for_each(|&l| ftl.write(l));
            ftl.share(&[(A, j(1)), (B, j(2)), (M, j(3))]);
        }
    }
    ftl.counts()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure3_counts_of_the_seed() {
        let c = |mode| {
            let f = figure3(mode);
            (f.page_writes, f.share_commands)
        };
        assert_eq!(c(SeedMode::OrderedJournal), (6, 0));
        assert_eq!(c(SeedMode::DataJournal), (8, 0));
        assert_eq!(c(SeedMode::SingleDataJournal), (4, 1));
    }

    #[test]
    fn share_maps_without_writing() {
        let mut f = Ftl::new();
        f.write(JOURNAL_LBA + 3);
        f.share(&[(home_lba(2, 0), JOURNAL_LBA + 3)]);
        assert_eq!(f.page_of(home_lba(2, 0)), f.page_of(JOURNAL_LBA + 3));
        assert_eq!(f.counts().page_writes, 1);
        f.write(JOURNAL_LBA + 3);
        assert_ne!(f.page_of(home_lba(2, 0)), f.page_of(JOURNAL_LBA + 3));
    }
}
