//! FG-WAL, the seed's "fine-grained WAL" comparison protocol (§VI-C; cache-line undo
//! journaling as in PMFS): before a transaction overwrites lines of an existing data block in
//! place, it saves the old lines whole into an *undo block* (the same offsets as in the
//! target block) and writes one 64-byte line undo entry in the data log naming the target,
//! the undo block, the lines and the crc32c of the saved lines. One fence per write call
//! makes all of that durable; then the lines are overwritten in place. The transaction's
//! commit entry (log/transaction.rs) is its commit point; afterwards the entries are freed and the undo
//! blocks go back to the allocator. Abort and recovery copy the saved lines back (newest
//! entry first; idempotent). A line is saved once per transaction (its first old value is
//! the one to restore), so the entries of one transaction name disjoint lines.
//!
//! The crc lets the log be written with a single fence: an entry whose lines did not all
//! reach the media before a crash fails its crc, and then nothing it protects was
//! overwritten yet (the in-place writes come after the fence). docs/format.md has the byte
//! layout and the case analysis.

use crate::alloc::U64Map;
use crate::core::Core;
use crate::data::tlvi::line_mask;
use crate::log::entry::{Entry, LinesEntry};
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::recovery::recover::RecoveryReport;
use pmem::Region;
use std::collections::{HashMap, HashSet};
use store::{Error, FsckReport, Result};

/// Bytes from `I_SIZE` that `Core::finish_data_op` writes: size, mtime, ctime, blocks.
const ATTRS_LEN: usize = 32;

/// The FG-WAL undo state of one transaction.
#[derive(Default)]
pub(crate) struct LineLog {
    /// Target block -> (its undo block, lines saved so far).
    targets: U64Map<(u64, u64)>,
    /// Data-log slots of the transaction's line undo entries, oldest first.
    slots: Vec<u64>,
    /// Undo blocks, freed after the commit point or the abort.
    undo_blocks: Vec<u64>,
    next_seq: u32,
}

impl LineLog {
    /// Take over the entries of a transaction merged into this one (syncv).
    pub(crate) fn absorb(&mut self, other: LineLog) {
        self.targets.extend(other.targets);
        self.slots.extend(other.slots);
        self.undo_blocks.extend(other.undo_blocks);
    }

    /// What saving lines `want` of block `target` takes (`Core::log_lines`): an undo
    /// block, a data-log slot.
    pub(crate) fn needs(&self, target: u64, want: u64) -> (bool, bool) {
        match self.targets.get(&target) {
            Some(&(_, have)) => (false, want & !have != 0),
            None => (want != 0, want != 0),
        }
    }

    /// Empty, keeping the allocations for the next transaction.
    pub(crate) fn clear(&mut self) {
        self.targets.clear();
        self.slots.clear();
        self.undo_blocks.clear();
        self.next_seq = 0;
    }
}

/// The runs of set bits of a line bitmap: (first line, number of lines).
fn runs(mut bits: u64) -> impl Iterator<Item = (u64, u64)> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let first = u64::from(bits.trailing_zeros());
        let count = u64::from((bits >> first).trailing_ones());
        bits &= !line_mask(first, first + count - 1);
        Some((first, count))
    })
}

/// The lines `[boff, boff + len)` of a block touch (len > 0).
pub(crate) fn lines_of(boff: u64, len: u64) -> u64 {
    line_mask(boff / LINE, (boff + len - 1) / LINE)
}

impl<R: Region> Core<R> {
    /// FG-WAL, before the in-place writes of `[off, end)` of file `ino`: save the old lines
    /// of every existing block the range touches (holes and blocks past the end are written
    /// fresh and need no undo), in a checksummed pool their pointers (and crcs), and with
    /// them, the old attributes `finish_data_op` will
    /// change (so that its undo entry needs no fence of its own), then one fence.
    pub(crate) fn fg_wal_log_range(&self, tx: &mut Tx, ino: u64, off: u64, end: u64) -> Result<()> {
        let mut logged = false;
        let mut pos = off;
        while pos < end {
            let boff = pos % BLOCK_SIZE;
            let n = (BLOCK_SIZE - boff).min(end - pos);
            let (pbn, ptr) = self.permanent_block(ino, pos / BLOCK_SIZE)?;
            if pbn != 0 {
                logged |= self.log_lines(tx, ino, pbn, lines_of(boff, n))?;
            }
            if let (true, Some(ptr)) = (pbn != 0 && self.geo.data_checksums, ptr) {
                // The pointer's crc changes with the lines (`write_pieces`).
                // persist: its old word is saved under the same fence as the old lines,
                // before either is changed in place.
                logged |= self.log_old_bytes(tx, ptr, 8)?;
            }
            pos += n;
        }
        if logged {
            self.log_old_bytes(tx, self.geo.inode(ino) + I_SIZE, ATTRS_LEN)?;
            // persist: the old lines, their entries and the old attributes are durable
            // before any of them is overwritten in place.
            self.region.fence();
        }
        Ok(())
    }

    /// FG-WAL: overwrite in place lines `fg_wal_log_range` has saved (any line it has not,
    /// which the range walk makes impossible, is saved and fenced here first).
    pub(crate) fn write_fg_wal(
        &self,
        tx: &mut Tx,
        ino: u64,
        pbn: u64,
        boff: u64,
        chunk: &[u8],
    ) -> Result<()> {
        if self.log_lines(tx, ino, pbn, lines_of(boff, chunk.len() as u64))? {
            // persist: as in fg_wal_log_range.
            self.region.fence();
        }
        self.write_in_place(pbn, boff, chunk);
        Ok(())
    }

    /// Save the lines `want` of block `target` not yet saved by `tx` and write their line
    /// undo entry (no fence). Returns false when there was nothing new to save.
    fn log_lines(&self, tx: &mut Tx, ino: u64, target: u64, want: u64) -> Result<bool> {
        let log = &mut tx.modes.lines;
        let (undo, have) = log.targets.get(&target).copied().unwrap_or((0, 0));
        let new = want & !have;
        if new == 0 {
            return Ok(false);
        }
        // From the write's reservation (`Core::reserve`), which counted them.
        let Some(slot) = tx
            .reservation
            .pop_slot()
            .or_else(|| self.data_slots.alloc())
        else {
            tx.state.doom();
            return Err(Error::LogFull("data log (FG-WAL line undo)".into()));
        };
        let undo = match undo {
            0 => match tx.reservation.pop_block().or_else(|| self.blocks.alloc()) {
                Some(block) => {
                    log.undo_blocks.push(block);
                    block
                }
                None => {
                    self.data_slots.free(slot);
                    tx.state.doom();
                    return Err(Error::NoSpace("no free block for FG-WAL undo lines".into()));
                }
            },
            block => block,
        };
        let crc = self.save_lines(target, undo, new);
        let entry = LinesEntry {
            txid: tx.id,
            seq: log.next_seq,
            ino,
            target,
            undo,
            bitmap: new,
            crc,
        };
        log.next_seq = log.next_seq.wrapping_add(1);
        log.slots.push(slot);
        log.targets.insert(target, (undo, have | new));
        self.put_entry(self.geo.data_entry(slot), &Entry::Lines(entry));
        Ok(true)
    }

    /// Copy lines `bitmap` of block `from` to the same offsets of block `to` with
    /// non-temporal stores (durable at the next fence). Returns their crc32c in line order.
    fn save_lines(&self, from: u64, to: u64, bitmap: u64) -> u32 {
        let mut buf = [0u8; BLOCK_SIZE as usize];
        let mut crc = 0;
        for (first, count) in runs(bitmap) {
            let (off, len) = (first * LINE, (count * LINE) as usize);
            self.region
                .read(self.geo.block(from) + off, &mut buf[..len]);
            crc = crc32c::crc32c_append(crc, &buf[..len]);
            self.region.write_nt(self.geo.block(to) + off, &buf[..len]);
        }
        crc
    }

    /// The crc32c of the lines an entry saved, as they are in its undo block now, and the
    /// lines themselves at their block offsets. None when a block number is impossible.
    fn saved_lines(&self, l: &LinesEntry, buf: &mut [u8; BLOCK_SIZE as usize]) -> Option<u32> {
        let valid = self.geo.valid_pbn(l.target) && self.geo.valid_pbn(l.undo);
        if !valid || l.target == l.undo {
            return None;
        }
        let mut crc = 0;
        for (first, count) in runs(l.bitmap) {
            let range = (first * LINE) as usize..((first + count) * LINE) as usize;
            self.region.read(
                self.geo.block(l.undo) + first * LINE,
                &mut buf[range.clone()],
            );
            crc = crc32c::crc32c_append(crc, &buf[range]);
        }
        Some(crc)
    }

    /// Copy an entry's saved lines back into its target block (non-temporal, durable at the
    /// next fence). False when the entry is torn (its lines fail the crc) or impossible.
    fn restore_lines(&self, l: &LinesEntry) -> bool {
        let mut buf = [0u8; BLOCK_SIZE as usize];
        if self.saved_lines(l, &mut buf) != Some(l.crc) {
            return false;
        }
        for (first, count) in runs(l.bitmap) {
            let range = (first * LINE) as usize..((first + count) * LINE) as usize;
            self.region
                .write_nt(self.geo.block(l.target) + first * LINE, &buf[range]);
        }
        true
    }

    /// After the commit point: free the transaction's line undo entries (no fence: the fence
    /// that frees its undo entries orders them before the commit entry's free, see
    /// `retire_commits`); its undo blocks are released with the deferred blocks.
    pub(crate) fn lines_committed(&self, tx: &mut Tx) {
        for &slot in &tx.modes.lines.slots {
            self.clear_entry(self.geo.data_entry(slot));
        }
        let log = &mut tx.modes.lines;
        tx.deferred_blocks.append(&mut log.undo_blocks);
        log.targets.clear();
    }

    /// After the commit's last fence: the entries' slots can be reused.
    pub(crate) fn lines_release(&self, tx: &mut Tx) {
        for slot in tx.modes.lines.slots.drain(..) {
            self.data_slots.free(slot);
        }
    }

    /// Abort: copy every saved line back (newest entry first), then free the entries, their
    /// slots and the undo blocks.
    pub(crate) fn lines_abort(&self, tx: &mut Tx) -> Result<()> {
        let log = std::mem::take(&mut tx.modes.lines);
        if log.slots.is_empty() && log.undo_blocks.is_empty() {
            return Ok(());
        }
        let ours = |txid: u64| txid == tx.id || tx.members.iter().any(|m| m.0 == txid);
        let mut first_error = None;
        for &slot in log.slots.iter().rev() {
            let addr = self.geo.data_entry(slot);
            let mut line = [0u8; 64];
            self.region.read(addr, &mut line);
            let restored = match Entry::decode(&line) {
                Entry::Lines(l) => ours(l.txid) && self.restore_lines(&l),
                _ => false,
            };
            if !restored {
                first_error = first_error.or(Some(Error::corrupt(
                    "FG-WAL line undo entry changed under its transaction",
                    addr,
                )));
            }
        }
        // persist: every old line is back in place before the entries saving it are freed.
        self.region.fence();
        for &slot in &log.slots {
            self.clear_entry(self.geo.data_entry(slot));
        }
        // persist: the entries are freed before their slots and undo blocks are reused.
        self.region.fence();
        for &slot in &log.slots {
            self.data_slots.free(slot);
        }
        for &block in &log.undo_blocks {
            self.blocks.free(block);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Recovery: copy back the saved lines of every transaction that did not commit (newest
/// entry first), fence, then free every line undo entry. A torn entry (crc mismatch: the
/// crash came before its fence, so nothing it protects was overwritten) is only freed.
/// Idempotent: a crash before the frees are durable applies the same old lines again.
pub(crate) fn recover_lines<R: Region>(
    core: &Core<R>,
    entries: &[(u64, LinesEntry)],
    committed: &HashMap<u64, u64>,
    undone: &mut HashSet<u64>,
    report: &mut RecoveryReport,
) {
    if entries.is_empty() {
        return;
    }
    let mut order: Vec<&(u64, LinesEntry)> = entries.iter().collect();
    order.sort_by_key(|(slot, l)| (l.txid, l.seq, *slot));
    for (_, l) in order.iter().rev() {
        if committed.contains_key(&l.txid) {
            continue;
        }
        if core.restore_lines(l) {
            report.line_records_applied += 1;
            undone.insert(l.txid);
        } else {
            report.torn_entries += 1;
        }
    }
    // persist: the old lines of every uncommitted transaction are back before the entries
    // saving them are freed.
    core.region.fence();
    for (slot, _) in entries {
        core.clear_entry(core.geo.data_entry(*slot));
    }
    // persist: the entries are freed before the commit and member entries naming their
    // transactions (freed after this) and before the allocators hand out their slots.
    core.region.fence();
}

/// fsck of the line undo entries in the data log. Returns their undo blocks (in use while
/// the entry is valid). `owner` maps a block to the inode whose tree holds it (0: none).
pub(crate) fn fsck_lines<R: Region>(
    c: &Core<R>,
    owner: &[u64],
    quiet: bool,
    report: &mut FsckReport,
) -> HashSet<u64> {
    let mut undo_of: HashMap<u64, u64> = HashMap::new();
    for slot in 0..c.geo.data_log_entries {
        let addr = c.geo.data_entry(slot);
        let mut line = [0u8; 64];
        c.region.read(addr, &mut line);
        let Entry::Lines(l) = Entry::decode(&line) else {
            continue;
        };
        let at = || format!("data log slot {slot} (offset {addr:#x})");
        if quiet {
            let what = format!("FG-WAL line undo entry of transaction {} left", l.txid);
            report.problem(what, at());
        }
        let mut buf = [0u8; BLOCK_SIZE as usize];
        let Some(crc) = c.saved_lines(&l, &mut buf) else {
            let what = format!("line undo entry names blocks {} and {}", l.target, l.undo);
            report.problem(what, at());
            continue;
        };
        if crc != l.crc {
            report.problem("line undo entry's saved lines fail its checksum", at());
        }
        if owner[l.undo as usize] != 0 {
            let what = format!("undo block {} is also a file block", l.undo);
            report.problem(what, at());
        }
        let holder = owner[l.target as usize];
        if holder != 0 && holder != l.ino {
            let what = format!("line undo target {} belongs to inode {holder}", l.target);
            report.problem(what, at());
        }
        if *undo_of.entry(l.undo).or_insert(l.target) != l.target {
            let what = format!("undo block {} serves two target blocks", l.undo);
            report.problem(what, at());
        }
    }
    undo_of.into_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_exactly_the_set_bits() {
        for bits in [
            0u64,
            1,
            0b1011_0110,
            u64::MAX,
            1 << 63,
            0xF0F0_0000_0000_0F0F,
        ] {
            let mut back = 0u64;
            for (first, count) in runs(bits) {
                let mask = line_mask(first, first + count - 1);
                assert_eq!(back & mask, 0, "runs of {bits:#x} overlap");
                back |= mask;
            }
            assert_eq!(back, bits);
        }
        assert_eq!(runs(0b0111_0011).collect::<Vec<_>>(), vec![(0, 2), (4, 3)]);
        assert_eq!(lines_of(63, 2), 0b11);
        assert_eq!(lines_of(0, BLOCK_SIZE), u64::MAX);
    }
}
