//! Data paths of the comparison protocols (seed §VI-C). Each is a correct implementation of
//! its own protocol on the same layout, metadata undo log and commit entry:
//! - NC writes in place (`Core::write_in_place`), with no log at all (`meta_update`).
//! - FG-WAL undo-logs the old contents of every cache line it overwrites, persists the log,
//!   then writes in place.
//! - SCSP copies a whole block to a shadow block on its first write in a transaction, writes
//!   the shadow, and swaps the 8-byte block pointer under the undo log; the old block is
//!   freed after the commit point.
//! - SOC and SYNC use the FCFS data path and differ in checkpointing (checkpoint.rs,
//!   txn.rs).

use crate::core::{Core, InodeState};
use crate::layout::*;
use crate::tx::Tx;
use pmem::Region;
use store::Result;

impl<R: Region> Core<R> {
    /// FG-WAL: log the old lines, persist the log, write in place.
    pub fn write_fg_wal(&self, tx: &mut Tx, pbn: u64, boff: u64, chunk: &[u8]) -> Result<()> {
        let first = boff / LINE * LINE;
        let end = (boff + chunk.len() as u64).div_ceil(LINE) * LINE;
        let addr = self.geo.block(pbn);
        if self.log_old_bytes(tx, addr + first, (end - first) as usize)? {
            // persist: the old lines are in the log before they are overwritten.
            self.region.fence();
        }
        self.write_in_place(pbn, boff, chunk);
        Ok(())
    }

    /// SCSP: copy-on-write of the whole block into a shadow, pointer swapped under the undo
    /// log.
    #[allow(clippy::too_many_arguments)]
    pub fn write_shadow(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        lbn: u64,
        ptr: u64,
        pbn: u64,
        boff: u64,
        chunk: &[u8],
    ) -> Result<()> {
        let _ = (st, lbn);
        if tx.shadows.contains(&pbn) {
            self.write_in_place(pbn, boff, chunk);
            return Ok(());
        }
        let shadow = self.alloc_block(tx)?;
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        self.region.read(self.geo.block(pbn), &mut block);
        block[boff as usize..boff as usize + chunk.len()].copy_from_slice(chunk);
        self.region.write_nt(self.geo.block(shadow), &block);
        tx.shadows.insert(shadow);
        tx.deferred_blocks.push(pbn);
        self.meta_u64(tx, ptr, shadow)
    }
}
