//! Recovery (seed §3.7), run by every open. Every step is idempotent, so a crash during
//! recovery is recovered by the next open.
//!
//! | state found                               | action                                        |
//! |-------------------------------------------|-----------------------------------------------|
//! | swap record armed (crc holds)             | write both headers, disarm                     |
//! | swap record torn or clear                 | nothing (its headers were not touched)        |
//! | header in [p_first, p_checkpoint), valid  | a committed version: old/latest by order       |
//! | header in [p_first, p_checkpoint), invalid| garbage for GC                                |
//! | header in [p_first, p_checkpoint), free   | corrupt journal (committed area never free)    |
//! | header in [p_checkpoint, p_first + N)     | commit area or free: discarded, flags free     |
//! | a third valid version of a home block     | older than old: flagged invalid                |
//! | two headers mapping one journal block     | corrupt journal                                |

use super::{Journal, State};
use crate::layout::superblock::Superblock;
use crate::layout::swap_record::SwapRecord;
use crate::layout::{Flags, Header};
use crate::{JournalError, JournalResult};
use hostfs::HostFs;
use pmem::Region;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Bring the PM journal to a clean state and rebuild the DRAM state from it.
    pub(super) fn recover(&self, st: &mut State) -> JournalResult<()> {
        let sb = Superblock::read(&self.region)?;
        assert_eq!(
            sb.geometry(),
            self.geometry,
            "recovery on another journal's geometry"
        );
        if let Some(record) = SwapRecord::decode(&self.read_swap_record(), &self.geometry)? {
            self.apply_swap(&record);
        }
        let headers = self.read_all_headers()?;
        let ptrs = sb.pointers(&self.region)?;
        st.p_first = ptrs.p_first;
        st.p_checkpoint = ptrs.p_checkpoint;
        st.p_commit = ptrs.p_checkpoint;
        st.versions.clear();
        st.free.clear();
        for pos in st.p_first..st.p_checkpoint {
            let slot = self.geometry.slot(pos);
            let h = headers[slot as usize];
            if !h.flags.occupied() {
                return Err(JournalError::corrupt(
                    format!("free header {slot} inside the checkpoint area"),
                    self.geometry.header_off(slot),
                ));
            }
            if h.flags.valid() {
                if let Some(older) = st.versions.push(h.home, pos) {
                    self.put_flags(self.geometry.slot(older), Flags::INVALID);
                }
            }
        }
        self.fix_latest_flags(st);
        for pos in st.p_checkpoint..st.p_first + self.geometry.blocks() as u64 {
            let slot = self.geometry.slot(pos);
            self.put_flags(slot, Flags::FREE);
            st.free.insert(slot, headers[slot as usize].write_count);
        }
        if self
            .region
            .load_u64(crate::layout::superblock::P_COMMIT_OFF)
            != st.p_checkpoint
        {
            self.store_checkpoint_pointer(st.p_checkpoint);
        }
        // persist: flag repairs (hints) of this recovery.
        self.region.fence();
        st.stats.checkpoints = self
            .region
            .load_u64(crate::layout::superblock::CHECKPOINTS_OFF);
        Ok(())
    }

    /// Every header, decoded and checked; the block mapping must be a permutation.
    fn read_all_headers(&self) -> JournalResult<Vec<Header>> {
        let n = self.geometry.blocks();
        let mut headers = Vec::with_capacity(n as usize);
        let mut seen = vec![false; n as usize];
        for slot in 0..n {
            let h = self.header(slot)?;
            let used = seen.get_mut(h.j_blocknr as usize).ok_or_else(|| {
                JournalError::corrupt("journal block out of range", self.geometry.header_off(slot))
            })?;
            if *used {
                return Err(JournalError::corrupt(
                    format!("journal block {} matched by two headers", h.j_blocknr),
                    self.geometry.header_off(slot) + 8,
                ));
            }
            *used = true;
            headers.push(h);
        }
        Ok(headers)
    }

    /// Set the l flag hints to what the order says.
    fn fix_latest_flags(&self, st: &State) {
        for (key, latest) in st.versions.latest_sorted() {
            self.put_flags(self.geometry.slot(latest), Flags::LATEST);
            if let Some(old) = st.versions.get(&key).and_then(|v| v.old) {
                self.put_flags(self.geometry.slot(old), Flags::OLD);
            }
        }
    }
}
