//! A DRAM copy of a file's block map (`InodeState::map`), so that the plan of an overwrite
//! finds its permanent blocks without walking the block-pointer tree in the pool.
//!
//! Why: in the steady state of small random overwrites over many files, the leaf pointer of
//! the block written is a cold line of a cold page of the pool: a cache miss behind a page
//! walk on every write, which a library writing into one contiguous object (PMDK) never
//! takes. Here the lookup is one 4-byte entry of a dense array (1 KB per MB of file), and
//! the arrays of a few hundred busy files stay in the caches and the TLB.
//!
//! The pool stays the only truth; the copy is the tree as the pool holds it:
//! - read in one pass (`BlockMap::build`) once `REBUILD_AFTER` plans of the file found no
//!   copy, so that a file written once or whose map keeps changing (an appended log) never
//!   pays for one per write;
//! - kept in step by the checkpoint, which swings a block's pointer to one of its versions
//!   (`BlockMap::set`, under the inode's lock like the swing itself);
//! - dropped by every other change of the inode's tree: a write that fills a hole or grows
//!   the tree, a truncate, an abort (its undo may put pointers back), the inode's free. SCSP,
//!   which moves a pointer on every overwrite, never builds one.
//!
//! Debug builds check every planned block against the tree (`Core::plan_cached`).

use crate::core::Core;
use crate::media::layout::*;
use pmem::Region;
use store::Result;

/// Plans that found no copy before one is built.
pub(crate) const REBUILD_AFTER: u32 = 32;
/// Files of more blocks than this (1 GB) are not copied (a 1 MB array at most).
const BLOCKS_MAX: u64 = 1 << 18;

/// A file's block map as of its last change.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BlockMap {
    /// Address of the leaf index block of the blocks `i * POINTERS_PER_BLOCK ..` (0 =
    /// missing).
    leaves: Vec<u64>,
    /// Permanent block of each logical block (0 = hole). Block numbers fit in 32 bits:
    /// pools of more blocks are not copied.
    pbns: Box<[u32]>,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mapped {
    /// Address of the block pointer.
    pub(crate) ptr: u64,
    /// The permanent block.
    pub(crate) pbn: u64,
}

impl BlockMap {
    /// The permanent block of `lbn` and its pointer's address, when the block exists and is
    /// inside the map; None for a hole or a block past it (the caller walks the tree).
    #[inline]
    pub(crate) fn lookup(&self, lbn: u64) -> Option<Mapped> {
        let pbn = *self.pbns.get(usize::try_from(lbn).ok()?)?;
        if pbn == 0 {
            return None;
        }
        let leaf = self.leaves[(lbn / POINTERS_PER_BLOCK) as usize];
        Some(Mapped {
            ptr: leaf + (lbn % POINTERS_PER_BLOCK) * 8,
            pbn: u64::from(pbn),
        })
    }

    /// The checkpoint made `pbn` the permanent block of `lbn` (a block the map holds).
    pub(crate) fn set(&mut self, lbn: u64, pbn: u64) {
        match (usize::try_from(lbn).ok(), u32::try_from(pbn)) {
            (Some(i), Ok(p)) if i < self.pbns.len() && self.pbns[i] != 0 => self.pbns[i] = p,
            // Not a block of the map (cannot happen: the map holds every block of the
            // tree below its end, and a swing replaces a block): keep the copy true anyway.
            _ => debug_assert!(false, "block map: no block {lbn} to set to {pbn}"),
        }
    }
}

impl<R: Region> Core<R> {
    /// Read the block map of `ino` for the blocks below `blocks`, each leaf found with
    /// `pointer_addr`. Ok(None) when the file or the pool is too large to copy. Every
    /// pointer read is validated (an out-of-range one is the corruption error the tree walk
    /// reports).
    pub(crate) fn read_block_map(&self, ino: u64, blocks: u64) -> Result<Option<BlockMap>> {
        if self.geo.block_count > u64::from(u32::MAX) || blocks > BLOCKS_MAX {
            return Ok(None);
        }
        let nleaves = blocks.div_ceil(POINTERS_PER_BLOCK);
        let mut map = BlockMap {
            leaves: Vec::with_capacity(nleaves as usize),
            pbns: vec![0u32; blocks as usize].into_boxed_slice(),
        };
        let mut buf = vec![0u8; BLOCK_SIZE as usize];
        for i in 0..nleaves {
            let first = i * POINTERS_PER_BLOCK;
            // The first pointer of a leaf is at the leaf's start.
            let Some(leaf) = self.pointer_addr(ino, first)? else {
                map.leaves.push(0);
                continue;
            };
            map.leaves.push(leaf);
            let n = (blocks - first).min(POINTERS_PER_BLOCK) as usize;
            self.region.read(leaf, &mut buf[..n * 8]);
            for (j, b) in buf[..n * 8].chunks_exact(8).enumerate() {
                let word = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                let pbn = self.geo.leaf_pbn(word, leaf + j as u64 * 8)?;
                if pbn != 0 {
                    // Below block_count, which fits in 32 bits (checked above).
                    map.pbns[first as usize + j] = pbn as u32;
                }
            }
        }
        Ok(Some(map))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Mode, PoolConfig, PoolStore};
    use pmem::DramRegion;
    use std::sync::Arc;
    use store::{Fh, OpenFlags, Store, ROOT_INO};

    /// Deterministic xorshift64*.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const BLOCK: u64 = 4096;

    fn write_model(model: &mut Vec<u8>, off: u64, data: &[u8]) {
        let end = off as usize + data.len();
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(data);
    }

    fn check(s: &PoolStore<DramRegion>, fh: Fh, model: &[u8], what: &str) {
        let mut buf = vec![0xEEu8; model.len() + 100];
        let n = s.read(fh, 0, &mut buf).expect("read");
        assert_eq!(n, model.len(), "{what}: size");
        assert!(buf[..n] == *model, "{what}: contents differ from the model");
    }

    /// The copy of a block map stays the tree's through everything that changes the tree:
    /// overwrites whose checkpoint swings pointers (a version holding most of a block),
    /// hole fills and appends, truncates, aborted transactions that filled holes, in every
    /// mode. A stale copy sends a write to a block the file no longer owns: the file's
    /// contents then differ from the model (and debug builds fail at once, in
    /// `Core::plan_cached`, which checks each planned block against the tree).
    #[test]
    fn the_block_map_copy_follows_every_change_of_the_tree() {
        for mode in Mode::ALL {
            for seed in 1..=3u64 {
                run(mode, seed);
            }
        }
    }

    fn run(mode: Mode, seed: u64) {
        let cfg = PoolConfig {
            metadata_log_entries: 2048,
            data_log_entries: 512,
            pending_versions_max: 4,
            ..PoolConfig::test_min().with_mode(mode)
        };
        let s = PoolStore::format(Arc::new(DramRegion::new(16 << 20)), &cfg).expect("format");
        let rw = OpenFlags {
            read: true,
            write: true,
            ..OpenFlags::default()
        };
        let ino = s.create(ROOT_INO, b"f", 0o644, None).expect("create").ino;
        let fh = s.open(ino, rw).expect("open");
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut model = Vec::new();
        let first: Vec<u8> = (0..24 * BLOCK).map(|i| (i % 251) as u8).collect();
        s.write(fh, 0, &first).expect("first write");
        write_model(&mut model, 0, &first);
        let mut was_built = false;
        let what = |step: usize| format!("{} seed {seed} step {step}", mode.name());
        for step in 0..700 {
            let byte = (step % 250) as u8 + 1;
            let size = model.len() as u64;
            match rng.below(20) {
                // Bursts of small overwrites inside the file: the plans that build and use
                // the copy.
                0..=8 if size > 0 => {
                    for _ in 0..rng.below(40) + 1 {
                        let len = rng.below(3000) + 1;
                        let off = rng.below(size.saturating_sub(len).max(1));
                        let data = vec![byte; len.min(size - off) as usize];
                        s.write(fh, off, &data).expect("overwrite");
                        write_model(&mut model, off, &data);
                    }
                }
                // Most of one block: its checkpoint makes the version the permanent block
                // (a pointer swing, which updates the copy).
                9..=11 if size >= BLOCK => {
                    let lbn = rng.below(size / BLOCK);
                    let data = vec![byte; 3 * BLOCK as usize / 4];
                    s.write(fh, lbn * BLOCK + 64, &data)
                        .expect("most of a block");
                    write_model(&mut model, lbn * BLOCK + 64, &data);
                }
                12 => s.checkpoint_all().expect("checkpoint"),
                // Shrink (frees blocks) or extend (a hole).
                13 => {
                    let len = rng.below(32 * BLOCK);
                    s.set_len(fh, len).expect("set_len");
                    model.resize(len as usize, 0);
                }
                // A write past the end, leaving a hole: new blocks in the tree.
                14 => {
                    let off = size + rng.below(3 * BLOCK);
                    let data = vec![byte; rng.below(2 * BLOCK) as usize + 1];
                    if off + data.len() as u64 <= 40 * BLOCK {
                        s.write(fh, off, &data).expect("append");
                        write_model(&mut model, off, &data);
                    }
                }
                // A transaction that fills holes and extends the file, then overwrites
                // enough to rebuild the copy from its uncommitted tree, and aborts: the
                // undo takes those blocks out of the tree again.
                15 | 16 => {
                    let tx = s.tx_begin(&[fh]).expect("begin");
                    let off = size + BLOCK;
                    s.write(fh, off, &vec![byte; 2 * BLOCK as usize])
                        .expect("write in tx");
                    for _ in 0..crate::data::block_map::REBUILD_AFTER + 2 {
                        let o = off + rng.below(BLOCK);
                        s.write(fh, o, &[byte; 100]).expect("overwrite in tx");
                    }
                    was_built |= s.core.cell(ino).lock().map.is_some();
                    s.tx_abort(tx).expect("abort");
                }
                // The same, committed.
                17 => {
                    let tx = s.tx_begin(&[fh]).expect("begin");
                    let off = size + 2 * BLOCK;
                    let data = vec![byte; BLOCK as usize + 7];
                    s.write(fh, off, &data).expect("write in tx");
                    write_model(&mut model, off, &data);
                    s.tx_commit(tx).expect("commit");
                }
                _ => {}
            }
            if step % 50 == 49 {
                check(&s, fh, &model, &what(step));
            }
            was_built |= s.core.cell(ino).lock().map.is_some();
        }
        check(&s, fh, &model, &what(700));
        s.checkpoint_all().expect("checkpoint");
        check(&s, fh, &model, &what(701));
        if mode != Mode::Scsp {
            assert!(was_built, "{}: the copy was never built", what(700));
        } else {
            assert!(!was_built, "SCSP builds no copy");
        }
        s.release(fh).expect("close");
    }
}
