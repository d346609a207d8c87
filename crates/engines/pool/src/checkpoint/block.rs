//! Concurrently selective checkpointing (seed §III-E, Algorithm 1, Fig. 5).
//!
//! All committed versions of one block are checkpointed in one group, under the inode's lock;
//! different blocks (of different files) are checkpointed in parallel by the background
//! threads. For one block:
//! 1. pick as the new permanent block the version (or the old permanent block) holding the
//!    most latest cache lines;
//! 2. copy into it only the latest lines it lacks, persist;
//! 3. if it is not the old permanent block, swing the 8-byte block pointer (atomic store),
//!    persist;
//! 4. free the data entries in commit order, each persisted before the next (ordering
//!    property 1), then the blocks; a transaction's undo, member and commit entries go once
//!    its last data entry is gone (ordering property 2, `Core::data_entry_retired`).
//!
//! Crash safety (docs/format.md, "Checkpoint"): until step 4 every committed entry is still
//! valid, and every line written in step 2 is the latest copy of that line, so whatever the
//! TLVI rebuilt by recovery picks for a line is the latest copy. Step 4 leaves a suffix (in
//! commit order) of the entries valid, which again resolves every line to its latest copy.
//! A second checkpoint after recovery does the same again: the algorithm is idempotent.

use crate::config::Mode;
use crate::core::{Core, InodeState};
use crate::media::layout::*;
use pmem::Region;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use store::Result;

/// Blocks checkpointed together (sharing fences) under one inode lock. Small enough that a
/// transaction on the file never waits long for the lock.
pub(super) const CHECKPOINT_BATCH: usize = 4;

/// Most versions of one block checkpointed in one go (the rest wait for the next checkpoint
/// of the block).
const PLAN_VERSIONS_MAX: usize = 256;

/// A committed version as the checkpoint of its block needs it.
#[derive(Clone, Copy)]
struct PlanVersion {
    pbn: u64,
    bitmap: u64,
    slot: u64,
    txid: u64,
    /// Commit time redone as the file's mtime and ctime (0 = none).
    time: u64,
    /// `Version::from_permanent`.
    from_permanent: bool,
}

/// The plan for one block: its committed versions and the new permanent block.
struct CheckpointPlan {
    lbn: u64,
    k: usize,
    versions: SmallVec<[PlanVersion; 2]>,
    /// For each version, the lines whose latest copy it holds (its lines that no newer
    /// version has).
    latest: SmallVec<[u64; 2]>,
    /// The lines whose latest copy the permanent block holds (no version has them).
    permanent_lines: u64,
    permanent: u64,
    target: u64,
    ptr: u64,
    /// The pointer's word when the plan was made (naming `permanent`): step 3 asserts it is
    /// still there before it swings the pointer.
    old_word: u64,
    /// The word step 3 stores into the pointer: the target, in a checksummed pool with
    /// its crc (set by step 2, `copy_for`).
    word: u64,
}

impl CheckpointPlan {
    /// Every block holding latest copies and the lines it holds: the versions, then the
    /// permanent block.
    fn sources(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.versions
            .iter()
            .zip(&self.latest)
            .map(|(v, &lines)| (v.pbn, lines))
            .chain([(self.permanent, self.permanent_lines)])
    }
}

/// The new permanent block of a checksummed block (docs/format.md, "Data checksums"): the
/// version holding most latest lines, never the old permanent block, whose crc could not
/// change atomically with a copy into it. A version that is the permanent block already (a
/// crash after the swing, before its entries were freed) holds every latest line but those
/// of newer versions: it is not chosen either, unless every version is that block (then
/// nothing is copied and its crc stands).
fn checksummed_target(versions: &[PlanVersion], latest: &[u64], permanent: u64) -> u64 {
    let mut best: Option<(u64, u32)> = None;
    for (v, lines) in versions.iter().zip(latest) {
        let count = lines.count_ones();
        if v.pbn != permanent && best.is_none_or(|(_, c)| count > c) {
            best = Some((v.pbn, count));
        }
    }
    best.map_or(permanent, |(pbn, _)| pbn)
}

/// Runs of set bits of `mask`: (first line, number of lines).
fn runs(mut mask: u64) -> impl Iterator<Item = (u64, u64)> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let start = mask.trailing_zeros();
        let len = (!(mask >> start)).trailing_zeros().min(64 - start);
        mask &= !(u64::MAX >> (64 - len) << start);
        Some((u64::from(start), u64::from(len)))
    })
}

/// What the checkpoint of a batch gives back once its entries are freed.
#[derive(Default)]
struct Released {
    blocks: SmallVec<[u64; 64]>,
    slots: SmallVec<[u64; 64]>,
    txids: SmallVec<[u64; 64]>,
}

impl<R: Region> Core<R> {
    /// Checkpoint every committed version of block `lbn` of `st.ino`.
    pub(crate) fn checkpoint_block(&self, st: &mut InodeState, lbn: u64) -> Result<()> {
        self.checkpoint_blocks(st, &[lbn])
    }

    /// Checkpoint blocks `lbns` of `st.ino` as one batch: Algorithm 1 for each block, with
    /// one fence per step for the whole batch (and one per round of entry frees).
    pub(crate) fn checkpoint_blocks(&self, st: &mut InodeState, lbns: &[u64]) -> Result<()> {
        // The batch's blocks are far apart in the pool: every block pointer, source and
        // target is a cache and TLB miss. Their prefetches are issued together, so that the
        // misses and page walks overlap instead of following one another.
        for &lbn in lbns {
            if let Some(v) = st.pending.get(&lbn).and_then(|list| list.first()) {
                self.region.prefetch(v.ptr_addr);
            }
        }
        let mut plans: SmallVec<[CheckpointPlan; 8]> = SmallVec::new();
        for &lbn in lbns {
            if let Some(plan) = self.plan_block(st, lbn)? {
                plans.push(plan);
            }
        }
        if plans.is_empty() {
            return Ok(());
        }
        for plan in &plans {
            self.prefetch_copies(plan);
        }
        // Step 2: copy the missing latest lines into each new permanent block.
        let copied = plans
            .iter_mut()
            .map(|plan| self.copy_for(st.ino, plan))
            .sum::<u64>();
        // Times redone from the entries about to be freed (`Tx::redo_times`): in place
        // unless a later change superseded them, and flushed by this thread (the commit
        // wrote them unflushed), durable at the fence below.
        let time = plans
            .iter()
            .flat_map(|p| p.versions.iter().map(|v| v.time))
            .max()
            .unwrap_or(0);
        if time != 0 {
            self.redo_times(st.ino, time);
            self.region.flush(self.geo.inode(st.ino) + I_MTIME, 16);
        }
        // persist: every new permanent block holds the latest copy of each of its lines, and
        // the times its entries redo are in place. In a checksummed pool this is also what
        // makes the crc about to be stored with the pointer true of the durable block: the
        // block is whole before its pointer and crc name it.
        self.region.fence();
        // Step 3: swing the pointers (with the new blocks' crcs in a checksummed pool: the
        // block and its checksum change in one 8-byte atomic store).
        let mut swung = 0;
        for plan in plans.iter().filter(|p| p.target != p.permanent) {
            self.swing_pointer(plan);
            if let Some(map) = st.map.as_mut() {
                map.set(plan.lbn, plan.target);
            }
            swung += 1;
        }
        if swung > 0 {
            // persist: block pointers (and their crcs, in the same 8-byte store) name the new
            // permanent blocks before any redo entry of theirs is freed.
            self.region.fence();
        }
        // Step 4: free the entries in commit order: round r frees the r-th version of every
        // block, fenced before round r + 1 (ordering property 1).
        let rounds = plans.iter().map(|p| p.k).max().unwrap_or(0);
        for round in 0..rounds {
            for plan in plans.iter().filter(|p| p.k > round) {
                self.clear_entry(self.geo.data_entry(plan.versions[round].slot));
            }
            // persist: the versions of round r are freed before those of round r + 1.
            self.region.fence();
        }
        let mut released = Released::default();
        for plan in &plans {
            self.release_plan(st, plan, &mut released);
        }
        self.blocks.free_many(&released.blocks);
        self.data_slots.free_many(&released.slots);
        let retired = self.data_entries_done(&released.txids);
        self.retire_commits(retired);
        self.counters
            .checkpoints
            .fetch_add(plans.len() as u64, Ordering::Relaxed);
        self.counters
            .checkpoint_lines_copied
            .fetch_add(copied, Ordering::Relaxed);
        self.counters
            .checkpoint_pointer_swings
            .fetch_add(swung, Ordering::Relaxed);
        Ok(())
    }

    /// Step 3 for one block: store the new word into the block pointer and flush it. The
    /// pointer must still name the old permanent block (nothing changes a pointer while
    /// its inode is locked); the new block is neither that one nor a hole.
    fn swing_pointer(&self, plan: &CheckpointPlan) {
        let now = self.read_u64(plan.ptr);
        assert_eq!(
            now, plan.old_word,
            "checkpoint: block pointer at {:#x} changed under its plan",
            plan.ptr
        );
        assert!(
            plan.target != 0 && plan.target != plan.permanent,
            "checkpoint: swing of the pointer at {:#x} to block {}",
            plan.ptr,
            plan.target
        );
        self.region.store_u64(plan.ptr, plan.word);
        self.region.flush(plan.ptr, 8);
    }

    /// Step 1 of Algorithm 1 for one block: the committed versions, who holds the latest
    /// copy of each line, and the block (old permanent or a version) holding most of them
    /// (ties keep the permanent block).
    fn plan_block(&self, st: &InodeState, lbn: u64) -> Result<Option<CheckpointPlan>> {
        let Some(list) = st.pending.get(&lbn) else {
            return Ok(None);
        };
        let k = list
            .iter()
            .take_while(|v| v.committed)
            .count()
            .min(PLAN_VERSIONS_MAX);
        if k == 0 {
            return Ok(None);
        }
        let versions: SmallVec<[PlanVersion; 2]> = list[..k]
            .iter()
            .map(|v| PlanVersion {
                pbn: v.pbn,
                bitmap: v.bitmap,
                slot: v.slot,
                txid: v.txid,
                time: v.time,
                from_permanent: v.from_permanent,
            })
            .collect();
        // The pointer address comes from the engine's own index (made by a write, or by
        // recovery after checking it against the tree): no tree walk on this path.
        let ptr = list[0].ptr_addr;
        debug_assert_eq!(
            self.permanent_block(st.ino, lbn).ok().and_then(|p| p.1),
            Some(ptr),
            "inode {} block {lbn}: redo entry names another pointer",
            st.ino
        );
        let old_word = self.read_u64(ptr);
        let permanent = self.geo.leaf_pbn(old_word, ptr)?;
        // The newest version with a line's bit set holds its latest copy.
        let mut latest: SmallVec<[u64; 2]> = SmallVec::from_elem(0, k);
        let mut newer = 0u64;
        for i in (0..k).rev() {
            latest[i] = versions[i].bitmap & !newer;
            newer |= versions[i].bitmap;
        }
        let permanent_lines = !newer;
        let mut best = None;
        let mut best_count = permanent_lines.count_ones();
        if permanent == 0 || self.mode() != Mode::Soc {
            for (i, lines) in latest.iter().enumerate() {
                let count = lines.count_ones();
                if count > best_count || (best.is_none() && permanent == 0) {
                    best = Some(i);
                    best_count = count;
                }
            }
        }
        let mut target = best.map_or(permanent, |i| versions[i].pbn);
        if self.geo.data_checksums && permanent != 0 {
            target = checksummed_target(&versions, &latest, permanent);
        }
        Ok(Some(CheckpointPlan {
            lbn,
            k,
            versions,
            latest,
            permanent_lines,
            permanent,
            target,
            ptr,
            old_word,
            word: target,
        }))
    }

    /// Prefetch the first line of every run `copy_for` will copy, at its source and at its
    /// target (the line is stored whole, so the target's copy only brings the page's
    /// translation in).
    fn prefetch_copies(&self, plan: &CheckpointPlan) {
        let target = self.geo.block(plan.target);
        let sources = plan.sources();
        for (src, lines) in sources {
            if src == plan.target || src == 0 || lines == 0 {
                continue;
            }
            let at = u64::from(lines.trailing_zeros()) * LINE;
            self.region.prefetch(self.geo.block(src) + at);
            self.region.prefetch(target + at);
        }
    }

    /// Step 2 for one block. Returns the lines copied.
    fn copy_for(&self, ino: u64, plan: &mut CheckpointPlan) -> u64 {
        if self.geo.data_checksums && plan.target != plan.permanent {
            return self.merge_checksummed(ino, plan);
        }
        if self.mode() == Mode::Soc && plan.target == plan.permanent {
            self.apply_in_order(&plan.versions, plan.target)
        } else {
            self.copy_latest(plan)
        }
    }

    /// Step 2 in a checksummed pool (docs/format.md, "Data checksums"): the new block is
    /// put together in DRAM — the old permanent block, checked against its crc when any of
    /// its lines is still the latest or a version took bytes of it into an edge line, with
    /// every version's latest lines over it — its crc
    /// taken there, and the lines the target lacks stored into it non-temporally. Each
    /// source line is read once and the target is never read back. Sets `plan.word` to the
    /// target with that crc, carrying a mismatch of the old block (`permanent_poison`).
    fn merge_checksummed(&self, ino: u64, plan: &mut CheckpointPlan) -> u64 {
        let mut block = [0u8; BLOCK_SIZE as usize];
        let mut poison = 0;
        let took_from_permanent = plan.versions.iter().any(|v| v.from_permanent);
        if plan.permanent != 0 && (plan.permanent_lines != 0 || took_from_permanent) {
            self.region.read(self.geo.block(plan.permanent), &mut block);
            poison = self.permanent_poison(ino, plan, &block);
        }
        for (v, &lines) in plan.versions.iter().zip(&plan.latest) {
            for (line, count) in runs(lines) {
                let (at, len) = ((line * LINE) as usize, (count * LINE) as usize);
                let src = self.geo.block(v.pbn) + at as u64;
                self.region.read(src, &mut block[at..at + len]);
            }
        }
        let crc = crate::data::checksum::block_crc(&block) ^ poison;
        plan.word = self.geo.leaf_word(plan.target, crc);
        let mut copied = 0;
        let target = self.geo.block(plan.target);
        let sources: SmallVec<[(u64, u64); 4]> = plan.sources().collect();
        for (src, lines) in sources {
            if src == plan.target {
                continue;
            }
            for (line, count) in runs(lines) {
                let (at, len) = ((line * LINE) as usize, (count * LINE) as usize);
                self.region
                    .write_nt(target + at as u64, &block[at..at + len]);
            }
            copied += u64::from(lines.count_ones());
        }
        copied
    }

    /// Zero when the old permanent block (`block`, as read) matches the crc its pointer
    /// holds, else the difference, so that the new block fails its check too (a checkpoint
    /// never turns corrupt bytes into checksummed ones); one line on stderr for it.
    fn permanent_poison(&self, ino: u64, plan: &CheckpointPlan, block: &[u8]) -> u32 {
        let stored = self.geo.leaf_crc(self.read_u64(plan.ptr));
        let found = crate::data::checksum::block_crc(block);
        if stored != found {
            eprintln!(
                "atomfs: pool: data checksum mismatch in inode {ino} at offset {} (block {}) \
                 found by the checkpoint: the new block {} keeps failing its check",
                plan.lbn * BLOCK_SIZE,
                plan.permanent,
                plan.target
            );
        }
        stored ^ found
    }

    /// After the entries are freed: collect the blocks and slots to give back and the
    /// transactions whose data entries went, and drop the versions from the pending list.
    fn release_plan(&self, st: &mut InodeState, plan: &CheckpointPlan, out: &mut Released) {
        let start = out.blocks.len();
        for pbn in plan.versions.iter().map(|v| v.pbn).chain([plan.permanent]) {
            if pbn != 0 && pbn != plan.target && !out.blocks[start..].contains(&pbn) {
                out.blocks.push(pbn);
            }
        }
        for v in &plan.versions {
            out.slots.push(v.slot);
            out.txids.push(v.txid);
        }
        if let Some(list) = st.pending.get_mut(&plan.lbn) {
            list.drain(..plan.k);
            if list.is_empty() {
                st.pending.remove(&plan.lbn);
            }
        }
    }

    /// Copy into the plan's target every line whose latest copy lives elsewhere, a run of
    /// lines from the same block at a time. Returns the lines copied.
    fn copy_latest(&self, plan: &CheckpointPlan) -> u64 {
        let mut copied = 0;
        let target = self.geo.block(plan.target);
        let sources = plan.sources();
        for (src, lines) in sources {
            if src == plan.target || lines == 0 {
                continue;
            }
            for (line, count) in runs(lines) {
                let (at, len) = (line * LINE, count * LINE);
                if src == 0 {
                    self.region.fill(target + at, len, 0);
                    self.region.flush(target + at, len);
                } else {
                    // Whole lines: non-temporal stores (no read of the target's old lines),
                    // durable at this thread's fence that ends step 2.
                    self.region
                        .copy_nt_within(self.geo.block(src) + at, target + at, len);
                }
            }
            copied += u64::from(lines.count_ones());
        }
        copied
    }

    /// SOC: apply every version's lines onto the permanent block, oldest first.
    fn apply_in_order(&self, versions: &[PlanVersion], target: u64) -> u64 {
        let mut copied = 0;
        for v in versions {
            let mut bits = v.bitmap;
            while bits != 0 {
                let at = u64::from(bits.trailing_zeros()) * LINE;
                bits &= bits - 1;
                self.region.copy_nt_within(
                    self.geo.block(v.pbn) + at,
                    self.geo.block(target) + at,
                    LINE,
                );
                copied += 1;
            }
        }
        copied
    }
}

#[cfg(test)]
mod tests {
    use super::{runs, CheckpointPlan};
    use crate::{PoolConfig, PoolStore};
    use pmem::{DramRegion, Region};
    use smallvec::SmallVec;
    use std::sync::Arc;

    /// A plan that swings the pointer at `ptr` from `old_word` to block `target`.
    fn plan(ptr: u64, old_word: u64, target: u64) -> CheckpointPlan {
        CheckpointPlan {
            lbn: 0,
            k: 0,
            versions: SmallVec::new(),
            latest: SmallVec::new(),
            permanent_lines: 0,
            permanent: old_word,
            target,
            ptr,
            old_word,
            word: target,
        }
    }

    #[test]
    fn a_swing_stores_the_new_word_over_the_old_one() {
        let s = PoolStore::format(Arc::new(DramRegion::new(8 << 20)), &PoolConfig::test_min())
            .expect("format");
        let ptr = s.core.geo.block(5);
        s.core.region.store_u64(ptr, 9);
        s.core.swing_pointer(&plan(ptr, 9, 11));
        assert_eq!(s.core.read_u64(ptr), 11);
    }

    #[test]
    #[should_panic(expected = "changed under its plan")]
    fn a_swing_over_another_pointer_than_planned_is_caught() {
        let s = PoolStore::format(Arc::new(DramRegion::new(8 << 20)), &PoolConfig::test_min())
            .expect("format");
        let ptr = s.core.geo.block(5);
        s.core.region.store_u64(ptr, 10);
        s.core.swing_pointer(&plan(ptr, 9, 11));
    }

    #[test]
    fn runs_of_a_line_mask() {
        assert_eq!(runs(0).count(), 0);
        assert_eq!(runs(u64::MAX).collect::<Vec<_>>(), vec![(0, 64)]);
        assert_eq!(
            runs(0b1110_0110 | 1 << 63).collect::<Vec<_>>(),
            vec![(1, 2), (5, 3), (63, 1)]
        );
        assert_eq!(runs(u64::MAX << 1).collect::<Vec<_>>(), vec![(1, 63)]);
    }
}
