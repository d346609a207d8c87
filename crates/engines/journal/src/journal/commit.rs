//! Transaction commit (seed §3.4, with §3.3 allocation and §3.5 delta updates).
//!
//! 1. sync_data every home file the transaction appended to;
//! 2. write each journaled block at the head of the free area (p_commit), after swapping the
//!    least-worn free block there; a block with an old and a latest version instead swaps its
//!    old version out to the head and writes only the differing bytes onto it;
//! 3. fence: every journal block and header of the transaction is durable;
//! 4. store p_checkpoint = p_commit and persist: the commit point;
//! 5. update the version table (and the l-flag hints).

use super::{Journal, State};
use crate::delta;
use crate::layout::{BlockKey, Flags, Header, BLOCK_LEN};
use crate::{JournalError, JournalResult};
use hostfs::HostFs;
use pmem::Region;

/// Delta runs closer than this are written as one.
const DELTA_MERGE_GAP: usize = 8;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Commit `tx`: durable and atomic when this returns `Ok`. On an error nothing of the
    /// transaction is committed (its appends lie past the durable ends, unpublished).
    pub fn commit(&self, tx: super::Tx) -> JournalResult<()> {
        let (blocks, appended, appended_bytes) = tx.into_parts();
        let file_id_max = self.geometry.format().file_id_max();
        if let Some(key) = blocks.keys().find(|k| k.file > file_id_max) {
            return Err(JournalError::Config(format!(
                "home file id {} past this journal format's {file_id_max}",
                key.file
            )));
        }
        for &file in &appended {
            // persist: appended home blocks are durable before the commit point publishes
            // the sizes that reach them.
            self.home.sync(file)?;
        }
        let needed = blocks.len() as u64;
        if needed == 0 {
            self.state.lock().stats.appended_bytes += appended_bytes;
            return Ok(());
        }
        let capacity = self.geometry.blocks() as u64;
        if needed > capacity {
            return Err(JournalError::TooLarge { needed, capacity });
        }
        let mut st = self.make_room(needed)?;
        let first = st.p_commit;
        for (key, data) in &blocks {
            self.journal_block(&mut st, *key, data);
        }
        // persist: every journal block and header of the transaction (flushed by
        // journal_block), before the commit point below.
        self.region.fence();
        self.store_checkpoint_pointer(st.p_commit);
        st.p_checkpoint = st.p_commit;
        for (i, key) in blocks.keys().enumerate() {
            self.publish(&mut st, *key, first + i as u64);
        }
        st.stats.commits += 1;
        st.stats.appended_bytes += appended_bytes;
        let low = st.free_blocks(&self.geometry) < self.low_water();
        drop(st);
        if low && self.relieve().is_err() {
            // The transaction is committed; a checkpoint that failed (a home write or sync)
            // keeps every version and is retried by the next one.
            self.state.lock().stats.checkpoint_errors += 1;
        }
        Ok(())
    }

    /// Write one journaled block at the head of the free area.
    fn journal_block(&self, st: &mut State, key: BlockKey, data: &[u8]) {
        self.allocate_head(st);
        let head_slot = self.geometry.slot(st.p_commit);
        let versions = st.versions.get(&key);
        let delta_base = versions
            .and_then(|v| v.old)
            .filter(|&old| self.config.variant.delta && !self.too_worn(st, old));
        let mut head = match delta_base {
            Some(old) => self.delta_write(st, head_slot, old, key, data),
            None => {
                let head = self.header_known(head_slot);
                self.region
                    .write_nt(self.geometry.block_off(head.j_blocknr), data);
                st.stats.full_blocks += 1;
                if let Some(old) = versions.and_then(|v| v.old) {
                    // No delta: the old version is garbage from now on (never read again).
                    self.put_flags(self.geometry.slot(old), Flags::INVALID);
                }
                head
            }
        };
        head.flags = Flags::LATEST;
        head.write_count = head.write_count.saturating_add(1);
        head.home = key;
        self.put_header(&head);
        st.p_commit += 1;
    }

    /// Case 3 of §3.5: swap the old version out of the checkpoint area to the head (the
    /// head's free block goes to the old slot, invalid) and write the delta onto it.
    fn delta_write(
        &self,
        st: &mut State,
        head_slot: u32,
        old: u64,
        key: BlockKey,
        data: &[u8],
    ) -> Header {
        let old_slot = self.geometry.slot(old);
        let (h_old, h_head) = (self.header_known(old_slot), self.header_known(head_slot));
        assert!(
            h_old.flags.valid() && h_old.home == key,
            "old version of {key:?} not at {old}"
        );
        assert!(
            !h_head.flags.occupied(),
            "head of the free area is occupied"
        );
        let to_old = Header {
            flags: Flags::INVALID,
            jh_number: old_slot,
            write_count: h_head.write_count,
            j_blocknr: h_head.j_blocknr,
            home: BlockKey { file: 0, block: 0 },
        };
        let to_head = Header {
            flags: Flags::FREE,
            jh_number: head_slot,
            write_count: h_old.write_count,
            j_blocknr: h_old.j_blocknr,
            home: key,
        };
        self.swap_headers(to_old, to_head);
        st.versions.drop_old(&key);
        st.stats.delta_swaps += 1;
        let off = self.geometry.block_off(to_head.j_blocknr);
        let mut base = vec![0u8; BLOCK_LEN as usize];
        self.read_jblock(to_head.j_blocknr, &mut base);
        let runs = delta::diff_runs(&base, data, DELTA_MERGE_GAP);
        for &(start, len) in &runs {
            self.region
                .write(off + start as u64, &data[start..start + len]);
            self.region.flush(off + start as u64, len as u64);
        }
        st.stats.delta_blocks += 1;
        st.stats.delta_bytes += delta::delta_len(&runs) as u64;
        to_head
    }

    /// A delta update writes onto the old version's block again and again while a home
    /// block stays hot; when that block has been written more than `wear_slack` times more
    /// than the least-worn free block, the new version goes whole to a fresh block instead
    /// (wear levelling wins over the delta).
    fn too_worn(&self, st: &State, old: u64) -> bool {
        if !self.config.variant.wear {
            return false;
        }
        let worn = self.header_known(self.geometry.slot(old)).write_count;
        st.free
            .least_worn()
            .is_some_and(|(_, wc)| worn > wc.saturating_add(self.config.wear_slack))
    }

    /// Put the least-worn free block at the head of the free area (§3.3) and take the head
    /// off the free list.
    fn allocate_head(&self, st: &mut State) {
        let head_slot = self.geometry.slot(st.p_commit);
        let head = self.header_known(head_slot);
        assert!(
            !head.flags.occupied(),
            "head of the free area {} is occupied",
            st.p_commit
        );
        let least = st.free.least_worn();
        let swap_with = least.filter(|&(slot, wc)| {
            self.config.variant.wear
                && slot != head_slot
                && head.write_count > wc.saturating_add(self.config.wear_slack)
        });
        match swap_with {
            Some((slot, wc)) => {
                let other = self.header_known(slot);
                let new_head = Header {
                    write_count: wc,
                    j_blocknr: other.j_blocknr,
                    ..head
                };
                let new_other = Header {
                    write_count: head.write_count,
                    j_blocknr: head.j_blocknr,
                    ..other
                };
                self.swap_headers(new_head, new_other);
                st.free.remove(slot, wc);
                st.free.remove(head_slot, head.write_count);
                st.free.insert(slot, head.write_count);
                st.stats.wear_swaps += 1;
            }
            None => st.free.remove(head_slot, head.write_count),
        }
    }

    /// After the commit point: the block at `pos` is the latest version of `key`.
    fn publish(&self, st: &mut State, key: BlockKey, pos: u64) {
        if let Some(prev) = st.versions.get(&key) {
            // Hint only (recovery derives it from the order): the previous latest is old now.
            self.put_flags(self.geometry.slot(prev.latest), Flags::OLD);
        }
        let _dropped = st.versions.push(key, pos);
    }
}
