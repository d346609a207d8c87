//! Garbage collection (seed §3.6): compact the checkpoint area by swapping invalid headers
//! behind the valid ones, then shrink it with one 8-byte store of p_checkpoint.
//!
//! The seed swaps the first invalid with the last valid header; that reorders versions,
//! and atomfs derives old/latest from the order, so this GC is a stable compaction: a write
//! cursor `w` and a read cursor `r`, every valid header at `r` swapped to `w` (all of
//! [w, r) is invalid). Each swap is atomic (reserved headers); a crash leaves the area
//! partly compacted, valid versions in their order, which recovery reads as it is.

use super::{CheckpointPhase, Journal, State};
use crate::layout::{Flags, Header};
use crate::JournalResult;
use hostfs::HostFs;
use parking_lot::MutexGuard;
use pmem::Region;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Compact the checkpoint area. No-op while a checkpoint writes home (positions of its
    /// snapshot must not move). Returns the blocks freed.
    pub(super) fn gc(&self, st: &mut State) -> u64 {
        if st.phase != CheckpointPhase::Idle {
            return 0;
        }
        assert_eq!(st.p_commit, st.p_checkpoint, "GC with a commit in flight");
        let mut w = st.p_first;
        for r in st.p_first..st.p_checkpoint {
            let hr = self.header_known(self.geometry.slot(r));
            if !hr.flags.valid() {
                continue;
            }
            if w != r {
                let hw = self.header_known(self.geometry.slot(w));
                assert!(!hw.flags.valid(), "GC write cursor on a valid header");
                let to_w = Header {
                    jh_number: hw.jh_number,
                    ..hr
                };
                let to_r = Header {
                    jh_number: hr.jh_number,
                    ..hw
                };
                self.swap_headers(to_w, to_r);
                st.stats.gc_swaps += 1;
            }
            w += 1;
        }
        st.stats.gc_runs += 1;
        let freed = st.p_checkpoint - w;
        if freed == 0 {
            return 0;
        }
        self.store_checkpoint_pointer(w);
        for pos in w..st.p_checkpoint {
            let slot = self.geometry.slot(pos);
            self.put_flags(slot, Flags::FREE);
            st.free.insert(slot, self.header_known(slot).write_count);
        }
        st.p_checkpoint = w;
        st.p_commit = w;
        self.rebuild_versions(st);
        freed
    }

    /// Make room for `needed` journal blocks: GC, then a checkpoint if still short.
    /// Returns the state, locked, with the room.
    pub(super) fn make_room(&self, needed: u64) -> JournalResult<MutexGuard<'_, State>> {
        loop {
            let mut st = self.state.lock();
            if st.free_blocks(&self.geometry) >= needed {
                return Ok(st);
            }
            if self.config.variant.gc {
                self.gc(&mut st);
                if st.free_blocks(&self.geometry) >= needed {
                    return Ok(st);
                }
            }
            drop(st);
            self.checkpoint()?;
        }
    }

    /// Free space is low after a commit: GC, and checkpoint if it stays below the threshold.
    pub(super) fn relieve(&self) -> JournalResult<()> {
        let mut st = self.state.lock();
        if self.config.variant.gc {
            self.gc(&mut st);
        }
        let low = st.free_blocks(&self.geometry) < self.low_water();
        drop(st);
        if !low {
            return Ok(());
        }
        match self.wake.lock().clone() {
            Some(wake) => wake.checkpoint_soon(),
            None => self.checkpoint()?,
        }
        Ok(())
    }

    /// Rebuild the version table from the checkpoint area's headers (after GC moved them).
    pub(super) fn rebuild_versions(&self, st: &mut State) {
        st.versions.clear();
        for pos in st.p_first..st.p_checkpoint {
            let h = self.header_known(self.geometry.slot(pos));
            if h.flags.valid() {
                let _ = st.versions.push(h.home, pos);
            }
        }
    }
}
