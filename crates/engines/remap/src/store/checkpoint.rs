//! Checkpoint: remap every committed pair onto its home file (FICLONERANGE of journal blocks,
//! batched into runs per home file; or a copy in copy-checkpoint mode), sync the home files,
//! then make the "checkpointed" mark durable — a new snapshot whose generation retires every
//! record of the journal — and only then reclaim the journal.
//!
//! A crash anywhere before the snapshot rename is durable leaves the old snapshot and the
//! journal: recovery remaps the same pairs again (a torn clone is simply redone). After it,
//! the journal's records belong to an older generation and are ignored.

use super::Inner;
use crate::format::{BLOCK, BLOCK_USIZE};
use crate::ftl::TraceEvent;
use crate::store::recovery::write_snapshot;
use crate::{host_err, CheckpointMode};
use hostfs::HostFs;
use std::collections::HashSet;
use store::{FileKind, Ino, Result};

impl<H: HostFs> Inner<H> {
    /// Checkpoint everything; false when an open transaction or a pending O_ATOMIC write
    /// holds it back (their pre-images still name journal blocks).
    pub(crate) fn checkpoint(&mut self) -> Result<bool> {
        self.healthy()?;
        if !self.st.quiescent() {
            return Ok(false);
        }
        let dirty: Vec<Ino> = self
            .st
            .inodes
            .iter()
            .filter(|(_, i)| i.meta.kind == FileKind::File && i.dirty)
            .map(|(&ino, _)| ino)
            .collect();
        for &ino in &dirty {
            self.checkpoint_file(ino)?;
        }
        self.media.sync_files_dir()?;
        let generation = self.journal.generation() + 1;
        let snapshot_len =
            write_snapshot(&self.media, &self.st, generation, self.mode, self.format)?;
        self.record(TraceEvent::SnapshotWrite {
            blocks: snapshot_len.div_ceil(BLOCK),
        });
        self.record(TraceEvent::CheckpointEnd);
        for &ino in &dirty {
            if let Some(i) = self.st.inodes.get_mut(&ino) {
                i.atree.clear();
                i.home_blocks = i.meta.size.div_ceil(BLOCK);
                i.dirty = false;
            }
        }
        self.journal.reset(&self.media, generation)?;
        self.remove_dead_homes()?;
        self.counters.checkpoints += 1;
        Ok(true)
    }

    /// Remap (or copy) one file's committed pairs home and sync it.
    fn checkpoint_file(&mut self, ino: Ino) -> Result<()> {
        let Some(i) = self.st.inodes.get(&ino) else {
            return Ok(());
        };
        assert!(
            i.atree.pending_count() == 0,
            "a quiescent store has no pending pair"
        );
        let (size, keep, runs) = (i.meta.size, i.home_blocks * BLOCK, i.atree.committed_runs());
        let hole_runs = i.atree.committed_hole_runs();
        let Some(home) = self.media.home(ino, true)? else {
            return Ok(());
        };
        let len = self.media.fs.file_stat(&home).map_err(host_err)?.len;
        if len > keep {
            self.media.fs.set_len(&home, keep).map_err(host_err)?;
        }
        for (b, j, n) in runs {
            let fs = &self.media.fs;
            match self.mode {
                CheckpointMode::Remap => {
                    fs.clone_range(&self.media.journal, j * BLOCK, &home, b * BLOCK, n * BLOCK)
                        .map_err(host_err)?;
                    self.counters.remap_calls += 1;
                    self.counters.remapped_blocks += n;
                    self.record(TraceEvent::Remap {
                        ino,
                        file_block: b,
                        journal_block: j,
                        blocks: n,
                    });
                }
                CheckpointMode::Copy => {
                    let mut buf = vec![0u8; n as usize * BLOCK_USIZE];
                    fs.read_full_at(&self.media.journal, j * BLOCK, &mut buf)
                        .map_err(host_err)?;
                    fs.write_all_at(&home, b * BLOCK, &buf).map_err(host_err)?;
                    self.counters.copied_blocks += n;
                    self.record(TraceEvent::HomeWrite {
                        ino,
                        file_block: b,
                        blocks: n,
                    });
                }
            }
        }
        for &(b, n) in &hole_runs {
            self.punch_home(&home, b, n)?;
        }
        let fs = &self.media.fs;
        fs.set_len(&home, size).map_err(host_err)?;
        // persist: the home file holds every committed pair before the snapshot that retires
        // the journal records naming them is written.
        fs.sync_data(&home).map_err(host_err)?;
        self.note_home_holes(ino, &hole_runs);
        Ok(())
    }

    /// Punch blocks `b..b + n` out of a home file (zeros written where the file system
    /// cannot punch).
    fn punch_home(&mut self, home: &H::File, b: u64, n: u64) -> Result<()> {
        let fs = &self.media.fs;
        match fs.fallocate(home, hostfs::FallocateHow::PunchHole, b * BLOCK, n * BLOCK) {
            Ok(()) => {}
            Err(e) if e.errno() == libc::EOPNOTSUPP => {
                let zeros = vec![0u8; BLOCK_USIZE];
                for k in b..b + n {
                    fs.write_all_at(home, k * BLOCK, &zeros).map_err(host_err)?;
                }
            }
            Err(e) => return Err(host_err(e)),
        }
        self.counters.punched_blocks += n;
        Ok(())
    }

    /// After the checkpoint of `ino`: its home file's holes are the earlier ones not
    /// written since, and the committed hole pairs `hole_runs`.
    fn note_home_holes(&mut self, ino: Ino, hole_runs: &[(u64, u64)]) {
        let Some(i) = self.st.inodes.get_mut(&ino) else {
            return;
        };
        let written: Vec<u64> = i.atree.committed().map(|(b, _)| b).collect();
        for b in written {
            i.home_holes.remove(&b);
        }
        let blocks = i.meta.size.div_ceil(BLOCK);
        for &(b, n) in hole_runs {
            i.home_holes.extend((b..b + n).filter(|&k| k < blocks));
        }
        i.home_holes.split_off(&blocks);
    }

    /// Delete the home files of inodes that are gone (their removal is durable in the
    /// snapshot just written).
    pub(crate) fn remove_dead_homes(&mut self) -> Result<()> {
        let dir = self.media.names.files_dir.clone();
        let entries = self.media.fs.read_dir(&dir).map_err(host_err)?;
        let live: HashSet<Ino> = self.st.inodes.keys().copied().collect();
        let mut removed = false;
        for e in entries {
            let Some(name) = std::str::from_utf8(&e.name).ok() else {
                continue;
            };
            if name.ends_with(crate::journal::media::STAGE_SUFFIX) {
                // A staging file: the snapshot just written retired its exchange record.
                self.media.fs.unlink(&dir.join(name)).map_err(host_err)?;
                removed = true;
                continue;
            }
            let Ok(ino) = name.parse::<Ino>() else {
                continue;
            };
            if live.contains(&ino) {
                continue;
            }
            self.media.forget_home(ino);
            self.media.fs.unlink(&dir.join(name)).map_err(host_err)?;
            removed = true;
        }
        if removed {
            // persist: the removals are durable (a crash before it only leaves files that
            // the next checkpoint removes again).
            self.media.fs.sync_dir(&dir).map_err(host_err)?;
        }
        Ok(())
    }
}
