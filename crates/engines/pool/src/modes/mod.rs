//! Data paths of the comparison protocols (seed §VI-C). Each is a correct implementation of
//! its own protocol on the same layout, metadata undo log and commit entry:
//! - NC writes in place (`Core::write_in_place`) with no log at all (`meta_update`); a
//!   transaction keeps the old bytes in DRAM only, for an abort (modes/nc.rs).
//! - FG-WAL saves the old contents of every cache line it overwrites whole in an undo block
//!   under a line undo entry, persists them once per write call, then writes in place
//!   (modes/fg_wal.rs).
//! - SCSP copies a whole block to a shadow block on its first write in a transaction, writes
//!   the shadow, and swaps the 8-byte block pointer under the undo log; the old block is
//!   freed after the commit point.
//! - SOC and SYNC use the FCFS data path and differ in checkpointing (checkpoint/,
//!   api/transaction_table.rs).
//!
//! The hooks below are what the shared transaction code (log/transaction.rs) calls for them.

pub(crate) mod fg_wal;
pub(crate) mod nc;

use crate::config::Mode;
use crate::core::{Core, InodeState};
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::modes::fg_wal::LineLog;
use crate::modes::nc::VolatileUndo;
use pmem::Region;
use store::Result;

/// What a transaction of a comparison mode keeps besides the shared undo log.
#[derive(Default)]
pub(crate) struct ModeLog {
    /// NC: old bytes of everything written in place (DRAM only).
    pub(crate) nc: VolatileUndo,
    /// FG-WAL: the line undo entries and undo blocks.
    pub(crate) lines: LineLog,
}

impl ModeLog {
    /// Take over the state of a transaction merged into this one (syncv).
    pub(crate) fn absorb(&mut self, other: ModeLog) {
        self.nc.absorb(other.nc);
        self.lines.absorb(other.lines);
    }

    /// Empty, keeping the allocations (a recycled transaction).
    pub(crate) fn clear(&mut self) {
        self.nc.clear();
        self.lines.clear();
    }
}

impl<R: Region> Core<R> {
    /// Right after the commit point.
    pub(crate) fn modes_committed(&self, tx: &mut Tx) {
        self.lines_committed(tx);
    }

    /// After the commit's last fence (`release_deferred`): reusable log slots go back.
    pub(crate) fn modes_release(&self, tx: &mut Tx) {
        self.lines_release(tx);
        if self.mode() == Mode::Nc {
            // NC writes no member entry: the slots merge_group reserved are simply unused.
            for member in tx.members.iter_mut() {
                if member.1 != u64::MAX {
                    self.meta_slots.free(member.1);
                    member.1 = u64::MAX;
                }
            }
        }
    }

    /// First step of an abort: NC's DRAM undo and FG-WAL's line undo are applied (before the
    /// shared metadata undo entries).
    pub(crate) fn modes_abort(&self, tx: &mut Tx) -> Result<()> {
        self.nc_abort(tx);
        self.lines_abort(tx)
    }

    /// SCSP: copy-on-write of the whole block into a shadow, pointer swapped under the undo
    /// log.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_shadow(
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
        let range = boff as usize..boff as usize + chunk.len();
        if tx.shadows.contains(&pbn) {
            if !self.geo.data_checksums {
                self.write_in_place(pbn, boff, chunk);
                return Ok(());
            }
            let mut old = vec![0u8; chunk.len()];
            self.region.read(self.geo.block(pbn) + boff, &mut old);
            self.write_in_place(pbn, boff, chunk);
            // The shadow's pointer is already under this transaction's undo entry.
            // persist: the shadow's bytes and its new word are durable at the operation's
            // fence; a crash before the commit puts the old block's word back (undo), and
            // the shadow is then unreferenced.
            let word = self.word_after_write(ptr, boff, &old, chunk);
            return self.meta_u64(tx, ptr, word);
        }
        let shadow = self.alloc_block(tx)?;
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        self.region.read(self.geo.block(pbn), &mut block);
        // The shadow's crc from the old block's (a corruption of the lines not written
        // stays detectable in the shadow).
        let crc = if self.geo.data_checksums {
            let old_crc = self.geo.leaf_crc(self.read_u64(ptr));
            crate::data::checksum::crc_after_write(old_crc, boff, &block[range.clone()], chunk)
        } else {
            0
        };
        block[range].copy_from_slice(chunk);
        self.region.write_nt(self.geo.block(shadow), &block);
        tx.shadows.insert(shadow);
        tx.deferred_blocks.push(pbn);
        // persist: the shadow is written (non-temporal) before `meta_u64` fences the undo
        // entry of the old word and stores the new one (block and crc in one word): durable
        // at the operation's fence.
        self.meta_u64(tx, ptr, self.geo.leaf_word(shadow, crc))
    }
}
