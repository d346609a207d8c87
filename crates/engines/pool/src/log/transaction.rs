//! Transactions: byte-granularity undo logging of metadata (seed §III-D), the commit
//! protocol and abort. See docs/format.md "Commit protocol" for the crash case analysis.

use crate::config::Mode;
use crate::core::Core;
use crate::data::reservation::Reservation;
use crate::log::commits::CommitRecord;
use crate::log::entry::*;
use crate::log::logged_ranges::LoggedRanges;
use crate::log::tx_state::TxState;
use crate::media::layout::{I_CTIME, I_MTIME};
use parking_lot::Mutex;
use pmem::Region;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use store::{Error, Result};

/// A pending version a transaction created, as the commit writes its data entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxVersion {
    pub(crate) ino: u64,
    pub(crate) lbn: u64,
    pub(crate) pbn: u64,
    pub(crate) slot: u64,
    pub(crate) ptr_addr: u64,
    pub(crate) bitmap: u64,
    /// What the data entry in `slot` says (`Tx::early_entries`): its bitmap (0 = no entry
    /// stored), times flag and txid. The commit stores the entry again where they differ.
    pub(crate) logged: (u64, bool, u64),
}

/// One running transaction (explicit, O_ATOMIC implicit, or the automatic transaction of a
/// call outside any transaction). Finished transactions are recycled (`Core::recycle_tx`)
/// so that their vectors keep their capacity: a transaction allocates nothing once the
/// engine has run a while.
#[derive(Default)]
pub(crate) struct Tx {
    pub(crate) id: u64,
    /// Where the transaction is in its life (log/tx_state.rs).
    pub(crate) state: TxState,
    next_seq: u32,
    /// Metadata log slots holding this transaction's undo entries, in sequence order.
    pub(crate) undo_slots: Vec<u64>,
    /// Metadata bytes undo-logged so far (each byte once).
    pub(crate) logged: LoggedRanges,
    /// Reserved at begin so that the commit cannot run out of log space.
    pub(crate) commit_slot: u64,
    /// Member transactions merged into this one (syncv) and the slots of their entries.
    pub(crate) members: Vec<(u64, u64)>,
    /// Pending versions (None once dropped by a truncate inside the transaction).
    pub(crate) versions: Vec<Option<TxVersion>>,
    /// Blocks allocated (index, hole-filling, pending and shadow blocks): freed on abort.
    pub(crate) allocated_blocks: Vec<u64>,
    /// Inodes allocated: freed on abort.
    pub(crate) allocated_inodes: Vec<u64>,
    /// Blocks whose last reference the transaction removed: freed after the commit point.
    pub(crate) deferred_blocks: Vec<u64>,
    /// Directory slots the transaction freed: reusable after the commit point.
    pub(crate) deferred_slots: Vec<(u64, u64)>,
    /// Inodes whose last link the transaction removed: freed after commit when closed.
    pub(crate) orphans: Vec<u64>,
    /// Unnamed (O_TMPFILE) inodes the transaction gave their first name: unnamed again if
    /// it aborts.
    pub(crate) first_names: Vec<u64>,
    /// Every inode whose DRAM state the transaction touched (bound files, directories).
    pub(crate) inodes: Vec<u64>,
    /// What the running write reserved, and whether the running operation may fail short
    /// of room and be retried (data/reservation.rs). Empty between operations.
    pub(crate) reservation: Reservation,
    /// SCSP: shadow blocks this transaction made (written in place until commit).
    pub(crate) shadows: HashSet<u64>,
    /// Inodes whose new mtime and ctime a pure overwrite staged: the undo entry of the old
    /// times is written (durable at the next fence), the new times go in place after that
    /// fence (`Core::fenced`).
    pub(crate) staged_times: Vec<u64>,
    /// Inodes whose new mtime and ctime are redone from the log (a pure overwrite in a redo
    /// mode: FCFS, SOC, SYNC): no undo entry and nothing written before the commit point.
    /// Their data entries carry the `times` flag and the commit entry the time, which
    /// `PoolStore::finalize_inode` then writes in place. Every inode here has a pending
    /// version in `versions` (so a data entry to carry the flag); an operation that sets the
    /// times itself (a size change, setattr) takes the inode out.
    pub(crate) redo_times: Vec<u64>,
    /// The commit time of `redo_times` (set by `commit_persist`; 0 = none).
    pub(crate) commit_time: u64,
    /// Undo entries of staged times not yet stored in their log slots (slot, entry). They
    /// are stored by `Core::emit_deferred_undo` right before the fence that ends the
    /// operation (`reflush_unfenced`) or at an abort, after the operation's allocations and
    /// data copies: a locked instruction (a free-list pop, a counter) waits for every
    /// non-temporal store in flight, so an entry stored first would be waited for by each
    /// of them. Nothing writes the times in place before that fence (`Core::fenced`).
    pub(crate) deferred_undo: Vec<(u64, UndoEntry)>,
    /// In-place metadata ranges written and flushed after a fence, not yet covered by one.
    /// Whoever fences for this transaction next flushes them again first
    /// (`Core::reflush_unfenced`): a fence orders only its own thread's flushes, and the
    /// transaction may be continued or committed by another thread.
    pub(crate) unfenced: Vec<(u64, u64)>,
    /// NC and FG-WAL: their own undo state (modes/mod.rs).
    pub(crate) modes: crate::modes::ModeLog,
    /// An explicit (or O_ATOMIC) transaction stores each version's data entry with the
    /// write that changes it, so that the operation's own fence makes it durable and the
    /// commit usually has nothing left to store before its commit entry (one persistence
    /// point instead of two). An automatic transaction commits right after its only
    /// operation, unfenced: it stores its entries at the commit, as before.
    pub(crate) early_entries: bool,
    /// Everything this transaction stored is durable: the operation that stored it ended
    /// with a fence (`PoolStore::data_op`, `ns_op`). Cleared when an operation starts.
    pub(crate) fenced_all: bool,
}

pub(crate) type TxCell = Mutex<Tx>;

/// Finished transactions kept for reuse.
pub(crate) const SPARE_TXS_MAX: usize = 64;

impl<R: Region> Core<R> {
    /// Begin a transaction: a fresh id and a reserved commit slot.
    pub(crate) fn tx_new(&self) -> Result<Tx> {
        let mut tx = self.take_spare_tx();
        self.tx_start(&mut tx)?;
        Ok(tx)
    }

    /// A reset transaction to start (`tx_start`): a recycled one if there is one.
    pub(crate) fn take_spare_tx(&self) -> Tx {
        self.spare_txs.lock().pop().unwrap_or_default()
    }

    /// Begin a transaction in `tx`, a fresh or reset one (`Core::reset_tx`): a fresh id and
    /// a reserved commit slot.
    pub(crate) fn tx_start(&self, tx: &mut Tx) -> Result<()> {
        assert!(tx.id == 0, "a transaction starts reset");
        assert!(
            tx.undo_slots.is_empty() && tx.versions.is_empty() && tx.allocated_blocks.is_empty(),
            "a transaction starts with nothing logged or allocated"
        );
        let id = self.next_txid.fetch_add(1, Ordering::Relaxed);
        if id > TXID_MAX {
            return Err(Error::NoSpace("transaction ids exhausted".into()));
        }
        let commit_slot = if self.mode() == Mode::Nc {
            u64::MAX
        } else {
            self.meta_slots
                .alloc()
                .ok_or_else(|| Error::LogFull("metadata log (commit entry)".into()))?
        };
        tx.id = id;
        tx.state.begin();
        tx.commit_slot = commit_slot;
        Ok(())
    }

    /// Keep a finished transaction's vectors for the next one (a bounded number of them).
    pub(crate) fn recycle_tx(&self, mut tx: Tx) {
        self.reset_tx(&mut tx);
        let mut spare = self.spare_txs.lock();
        if spare.len() < SPARE_TXS_MAX {
            spare.push(tx);
        }
    }

    /// Reset a finished transaction for reuse, keeping its vectors' capacity.
    pub(crate) fn reset_tx(&self, tx: &mut Tx) {
        tx.id = 0;
        tx.state.reset();
        tx.next_seq = 0;
        tx.commit_slot = u64::MAX;
        assert!(
            tx.reservation.is_empty(),
            "a finished transaction holds no reservation"
        );
        tx.reservation.allow_retry(false);
        tx.logged = LoggedRanges::default();
        tx.undo_slots.clear();
        tx.members.clear();
        tx.versions.clear();
        tx.allocated_blocks.clear();
        tx.allocated_inodes.clear();
        tx.deferred_blocks.clear();
        tx.deferred_slots.clear();
        tx.orphans.clear();
        tx.first_names.clear();
        tx.inodes.clear();
        tx.shadows.clear();
        tx.staged_times.clear();
        tx.redo_times.clear();
        tx.commit_time = 0;
        tx.deferred_undo.clear();
        tx.unfenced.clear();
        tx.modes.clear();
        tx.early_entries = false;
        tx.fenced_all = false;
    }

    /// Store the data entry of every version of `tx` whose entry is missing or says
    /// something else than it must (bitmap, times flag, txid), durable at this thread's
    /// next fence. Returns how many were stored (the commit's pass).
    pub(crate) fn store_data_entries(&self, tx: &mut Tx) -> u64 {
        let (txid, redo) = (tx.id, &tx.redo_times);
        let mut stored = 0;
        for v in tx.versions.iter_mut().flatten() {
            stored += u64::from(self.store_data_entry(txid, redo.contains(&v.ino), v));
        }
        stored
    }

    /// Store the data entry of version `v` of transaction `txid` unless the one in its slot
    /// already says this (bitmap, `times` flag, txid); durable at this thread's next fence.
    /// Returns whether it stored. A version with no line written yet has no entry.
    pub(crate) fn store_data_entry(&self, txid: u64, times: bool, v: &mut TxVersion) -> bool {
        let want = (v.bitmap, times, txid);
        if v.bitmap == 0 || v.logged == want {
            return false;
        }
        let entry = DataEntry {
            txid,
            ino: v.ino,
            lbn: v.lbn,
            ptr_addr: v.ptr_addr,
            pbn: v.pbn,
            bitmap: v.bitmap,
            times,
        };
        self.put_entry(self.geo.data_entry(v.slot), &Entry::Data(entry));
        v.logged = want;
        true
    }

    /// Clear the stored data entries of `versions` (durable at this thread's next fence,
    /// which must come before their slots are reused).
    pub(crate) fn clear_data_entries<'a>(&self, versions: impl Iterator<Item = &'a TxVersion>) {
        for v in versions.filter(|v| v.logged.0 != 0) {
            self.clear_entry(self.geo.data_entry(v.slot));
        }
    }

    /// Write a log entry into a slot (see log/entry.rs), checked by decoding it first.
    pub(crate) fn put_entry(&self, addr: u64, entry: &Entry) {
        let line = entry.encode_checked();
        // One non-temporal store of the whole line (body and seal): no read of the cold log
        // line, durable at this thread's next fence. Its words may reach the media in any
        // order; the seal's crc tells a partly written line from a complete one.
        self.region.write_line_nt(addr, &line);
    }

    /// Free a log entry: atomic store of 0 to its seal, non-temporal (the cold log line is
    /// not read into the cache), durable at this thread's next fence.
    pub(crate) fn clear_entry(&self, addr: u64) {
        self.region.store_u64_nt(addr + SEAL_OFFSET, 0);
    }

    /// Append undo entries holding the current bytes of `[addr, addr+len)` that this
    /// transaction has not logged yet (no fence): every byte is logged at most once, so every
    /// entry holds bytes from before the transaction (log/logged_ranges.rs says why that matters).
    /// Returns false when every byte was logged already.
    pub(crate) fn log_old_bytes(&self, tx: &mut Tx, addr: u64, len: usize) -> Result<bool> {
        self.log_old_bytes_as(tx, addr, len, false)
    }

    /// `log_old_bytes`; with `defer`, the entries are kept in `tx.deferred_undo` and stored
    /// at the end of the operation (only for bytes written in place after that operation's
    /// fence: the staged times).
    fn log_old_bytes_as(&self, tx: &mut Tx, addr: u64, len: usize, defer: bool) -> Result<bool> {
        if !self.geo.is_metadata_range(addr, len as u64) || addr > ADDR_MAX {
            return Err(Error::InvalidArgument(format!(
                "undo log outside metadata at {addr:#x}"
            )));
        }
        let parts = tx.logged.uncovered(addr, addr + len as u64);
        for &(start, end) in &parts {
            let mut at = start;
            while at < end {
                let n = ((end - at) as usize).min(UNDO_DATA_MAX);
                self.log_undo_entry(tx, at, n, defer)?;
                at += n as u64;
            }
            tx.logged.insert(start, end);
        }
        Ok(!parts.is_empty())
    }

    /// Write one undo entry holding the current `n` bytes at `addr` (n <= UNDO_DATA_MAX), or
    /// with `defer` keep it for `emit_deferred_undo` (its slot is taken now).
    fn log_undo_entry(&self, tx: &mut Tx, addr: u64, n: usize, defer: bool) -> Result<()> {
        if tx.next_seq > u32::from(u16::MAX) {
            tx.state.doom();
            return Err(Error::LogFull(format!(
                "transaction {} has too many undo entries",
                tx.id
            )));
        }
        let Some(slot) = tx
            .reservation
            .pop_meta()
            .or_else(|| self.meta_slots.alloc())
        else {
            tx.state.doom();
            return Err(Error::LogFull("metadata undo log".into()));
        };
        let mut data = [0u8; UNDO_DATA_MAX];
        self.region.read(addr, &mut data[..n]);
        let entry = UndoEntry {
            txid: tx.id,
            addr,
            seq: tx.next_seq as u16,
            size: n as u8,
            data,
        };
        tx.next_seq += 1;
        if defer {
            tx.deferred_undo.push((slot, entry));
        } else {
            self.put_entry(self.geo.meta_entry(slot), &Entry::Undo(entry));
        }
        tx.undo_slots.push(slot);
        self.counters.undo_entries.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Change metadata in place under the undo log: log the old bytes of every range not yet
    /// logged by `tx`, persist the log, then write and flush the new bytes (durable at the
    /// commit's first fence). In NC mode the bytes are written in place with no log.
    pub(crate) fn meta_update(&self, tx: &mut Tx, writes: &[(u64, &[u8])]) -> Result<()> {
        if self.mode() != Mode::Nc {
            // Entries deferred by `stage_times` may cover these ranges (a shrink's zeroing
            // write stages the times, then the shrink sets them in place): they are stored
            // now, under the fence below, like the entries logged here.
            let mut logged = !tx.deferred_undo.is_empty();
            self.emit_deferred_undo(tx);
            for (addr, bytes) in writes {
                logged |= self.log_old_bytes(tx, *addr, bytes.len())?;
            }
            if logged {
                // persist: the undo entries (old bytes) are durable before any byte they
                // protect is changed in place.
                self.region.fence();
            }
        } else {
            self.nc_save_meta(tx, writes);
        }
        for (addr, bytes) in writes {
            self.region.write(*addr, bytes);
            self.region.flush(*addr, bytes.len() as u64);
        }
        Ok(())
    }

    /// A data write that changed only the times of inode `ino` (no size, block count or
    /// pointer change): the old times are undo-logged now without a fence of their own; the
    /// new times are written in place once a fence has made that entry durable
    /// (`Core::fenced`, called after the fence that ends the operation or the commit's).
    pub(crate) fn stage_times(&self, tx: &mut Tx, ino: u64) -> Result<()> {
        self.log_old_bytes_as(tx, self.geo.inode(ino) + I_MTIME, 16, true)?;
        if !tx.staged_times.contains(&ino) {
            tx.staged_times.push(ino);
        }
        Ok(())
    }

    /// A pure overwrite of `ino` in a redo mode: its new times are redone from the log at
    /// commit (`Tx::redo_times`) instead of undo-logged now.
    pub(crate) fn redo_times_at_commit(&self, tx: &mut Tx, ino: u64) {
        if !tx.redo_times.contains(&ino) {
            tx.redo_times.push(ino);
        }
    }

    /// The times of `ino` are set in place by an undo-logged change of `tx`: they are no
    /// longer redone at its commit.
    pub(crate) fn times_set_in_place(&self, tx: &mut Tx, ino: u64) {
        tx.redo_times.retain(|&i| i != ino);
    }

    /// Make `time` the mtime and ctime of inode `ino` unless a later change of its
    /// attributes superseded it (ctime > `time`) or this redo is done already (both equal
    /// `time`): written in place, not flushed. Returns whether it wrote. The redo of a pure
    /// overwrite's times (`Tx::redo_times`): after the commit point (for readers: the log
    /// keeps them durable), by recovery, and by the checkpoint, which flushes the line and
    /// fences before it frees the entries that carry them. No flush here: a `clwb` of the
    /// freshly written line would hold up the commit's next locked instruction (an unlock)
    /// until the line is written back. A later change always has a later ctime
    /// (`Core::now`), so the newest change wins.
    ///
    /// A ctime equal to `time` alone does not show the redo done: a later call that changes
    /// the ctime only (rename, link, chmod) undo-logs it as the cache holds it, `time`, while
    /// the line may not have reached the media; if that call does not commit, recovery's
    /// undo puts ctime `time` back beside the older mtime on the media. `time` comes from the
    /// pool's strictly increasing clock and only this redo writes it, so a ctime equal to it
    /// means the committed times are `time` and `time`.
    pub(crate) fn redo_times(&self, ino: u64, time: u64) -> bool {
        let addr = self.geo.inode(ino);
        let (mtime, ctime) = (self.read_u64(addr + I_MTIME), self.read_u64(addr + I_CTIME));
        if ctime > time || (ctime == time && mtime == time) {
            return false;
        }
        let mut times = [0u8; 16];
        times[..8].copy_from_slice(&time.to_le_bytes());
        times[8..].copy_from_slice(&time.to_le_bytes());
        self.region.write(addr + I_MTIME, &times);
        true
    }

    /// Store the undo entries `tx` deferred (`Tx::deferred_undo`) in their slots, durable
    /// at this thread's next fence.
    pub(crate) fn emit_deferred_undo(&self, tx: &mut Tx) {
        for (slot, entry) in tx.deferred_undo.drain(..) {
            self.put_entry(self.geo.meta_entry(slot), &Entry::Undo(entry));
        }
    }

    /// Store the deferred undo entries of `tx` and flush again its in-place metadata not yet
    /// covered by a fence (see `Tx::unfenced`). Call right before a fence that must cover
    /// the transaction.
    pub(crate) fn reflush_unfenced(&self, tx: &mut Tx) {
        self.emit_deferred_undo(tx);
        for &(addr, len) in &tx.unfenced {
            self.region.flush(addr, len);
        }
    }

    /// After a fence covering `tx` (preceded by `reflush_unfenced`): nothing of it is left
    /// unfenced, and the staged times, whose undo entries that fence made durable, are
    /// written in place (flushed; durable at the next fence, which the commit issues).
    pub(crate) fn fenced(&self, tx: &mut Tx) {
        assert!(
            tx.deferred_undo.is_empty(),
            "the times' undo entries are stored before the fence that precedes their change"
        );
        tx.unfenced.clear();
        if tx.staged_times.is_empty() {
            return;
        }
        let now = self.now();
        let mut times = [0u8; 16];
        times[..8].copy_from_slice(&now.to_le_bytes());
        times[8..].copy_from_slice(&now.to_le_bytes());
        for ino in std::mem::take(&mut tx.staged_times) {
            let addr = self.geo.inode(ino) + I_MTIME;
            self.region.write(addr, &times);
            self.region.flush(addr, 16);
            tx.unfenced.push((addr, 16));
        }
    }

    /// Shorthand for one 8-byte metadata update.
    pub(crate) fn meta_u64(&self, tx: &mut Tx, addr: u64, value: u64) -> Result<()> {
        self.meta_update(tx, &[(addr, &value.to_le_bytes())])
    }

    /// The persistent part of a commit. Returns the commit record's data-entry count.
    /// Afterwards the caller releases deferred resources and finalises the DRAM state.
    pub(crate) fn commit_persist(&self, tx: &mut Tx) -> Result<()> {
        assert!(
            tx.state == TxState::Running && tx.id != 0,
            "commit of transaction {} that is not running ({:?})",
            tx.id,
            tx.state
        );
        assert!(
            tx.reservation.is_empty(),
            "commit of transaction {} inside a write",
            tx.id
        );
        tx.state.commit();
        if self.mode() == Mode::Nc {
            // persist: NC makes each call durable and nothing atomic.
            self.region.fence();
            return Ok(());
        }
        // What earlier operations (maybe on other threads) left unfenced: this thread's
        // fences below must cover it.
        self.reflush_unfenced(tx);
        if !tx.staged_times.is_empty() {
            // persist: the undo entries of the staged times are durable before the times
            // change in place (an automatic transaction commits right after its write).
            self.region.fence();
            self.fenced(tx);
        }
        // Only inodes with a data entry to carry the flag can have their times redone.
        let versions = &tx.versions;
        tx.redo_times
            .retain(|&ino| versions.iter().flatten().any(|v| v.ino == ino));
        tx.commit_time = if tx.redo_times.is_empty() {
            0
        } else {
            self.now()
        };
        // Entries the writes stored and that still say what they must are left as they
        // are (`Tx::early_entries`); the others are stored now.
        let stored = self.store_data_entries(tx);
        let data_entries = tx.versions.iter().flatten().count() as u64;
        for &(member, slot) in &tx.members {
            self.put_entry(
                self.geo.meta_entry(slot),
                &Entry::Member(MemberEntry {
                    group: tx.id,
                    member,
                }),
            );
        }
        // persist: data lines of pending and new blocks, in-place metadata, data entries and
        // member entries are all durable before the commit entry can be. Nothing to wait
        // for when every operation of the transaction ended with its fence and the commit
        // stored nothing since (no entry, no member entry, nothing left unfenced).
        if stored > 0 || !tx.members.is_empty() || !tx.fenced_all || !tx.unfenced.is_empty() {
            self.region.fence();
        }
        tx.unfenced.clear();
        let commit_seq = self.commit_seq.fetch_add(1, Ordering::Relaxed);
        let commit = CommitEntry {
            txid: tx.id,
            commit_seq,
            data_entries,
            members: tx.members.len() as u64,
            time: tx.commit_time,
        };
        let commit_addr = self.geo.meta_entry(tx.commit_slot);
        self.put_entry(commit_addr, &Entry::Commit(commit));
        // persist: COMMIT POINT. The transaction is durable from here on.
        self.region.fence();
        self.modes_committed(tx);
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        let record = CommitRecord {
            data_remaining: data_entries,
            commit_slot: tx.commit_slot,
            undo_slots: tx.undo_slots.iter().copied().collect(),
            member_slots: tx.members.iter().map(|m| m.1).collect(),
        };
        tx.undo_slots.clear();
        if data_entries == 0 {
            self.retire_commit(record);
        } else {
            self.commits.push(tx.id, record);
        }
        Self::assert_committed(tx);
        Ok(())
    }

    /// What a commit leaves: nothing unlogged, unfenced or staged, no undo entry held.
    fn assert_committed(tx: &Tx) {
        assert!(
            tx.state == TxState::Committed
                && tx.undo_slots.is_empty()
                && tx.deferred_undo.is_empty()
                && tx.staged_times.is_empty()
                && tx.unfenced.is_empty(),
            "transaction {} left state behind its commit",
            tx.id
        );
    }

    /// What an abort leaves: every log slot, block and version given back.
    fn assert_aborted(tx: &Tx) {
        assert!(
            tx.state == TxState::Aborted
                && tx.undo_slots.is_empty()
                && tx.members.is_empty()
                && tx.versions.is_empty()
                && tx.allocated_blocks.is_empty()
                && tx.allocated_inodes.is_empty()
                && tx.deferred_undo.is_empty()
                && tx.unfenced.is_empty(),
            "transaction {} left state behind its abort",
            tx.id
        );
    }

    /// Free the log entries of a committed transaction whose data entries are all gone
    /// (ordering property 2: undo and member entries first, the commit entry last).
    pub(crate) fn retire_commit(&self, record: CommitRecord) {
        self.retire_commits(vec![record]);
    }

    /// `retire_commit` for several transactions with one fence per step.
    pub(crate) fn retire_commits(&self, records: Vec<CommitRecord>) {
        if records.is_empty() {
            return;
        }
        for record in &records {
            for &slot in &record.undo_slots {
                self.clear_entry(self.geo.meta_entry(slot));
            }
        }
        // persist: undo entries are freed before the member entries naming their transaction.
        self.region.fence();
        if records.iter().any(|r| !r.member_slots.is_empty()) {
            for record in &records {
                for &slot in &record.member_slots {
                    self.clear_entry(self.geo.meta_entry(slot));
                }
            }
            // persist: member entries are freed before the commit entries.
            self.region.fence();
        }
        // The slots go back in one batch (one update of the shared free count).
        let mut freed: smallvec::SmallVec<[u64; 16]> = smallvec::SmallVec::new();
        for record in records {
            // The commit entry's free needs no fence: a commit entry left valid by a crash
            // names no remaining entry and recovery frees it.
            self.clear_entry(self.geo.meta_entry(record.commit_slot));
            let slots = record.undo_slots.into_iter().chain(record.member_slots);
            freed.extend(slots.chain([record.commit_slot]));
        }
        self.meta_slots.free_many(&freed);
    }

    /// One data entry of committed transaction `txid` has been freed durably; returns its
    /// commit record when that was the last one (the caller retires it).
    pub(crate) fn data_entry_done(&self, txid: u64) -> Option<CommitRecord> {
        self.commits.entry_done(txid)
    }

    /// Data entries of the committed transactions `txids` (one per entry) have been freed
    /// durably; returns the commit records of the transactions whose last entry that was.
    pub(crate) fn data_entries_done(&self, txids: &[u64]) -> Vec<CommitRecord> {
        self.commits.entries_done(txids)
    }

    /// One data entry of committed transaction `txid` has been freed durably.
    pub(crate) fn data_entry_retired(&self, txid: u64) {
        if let Some(record) = self.data_entry_done(txid) {
            self.retire_commit(record);
        }
    }

    /// Release what a committed transaction freed (after its commit point).
    pub(crate) fn release_deferred(&self, tx: &mut Tx) {
        self.modes_release(tx);
        for pbn in tx.deferred_blocks.drain(..) {
            self.blocks.free(pbn);
        }
    }

    /// Undo the persistent effects of an uncommitted transaction: apply its undo entries in
    /// reverse sequence order, persist, free them; free every block, slot and inode it
    /// allocated. The caller fixes the DRAM state of the inodes involved.
    pub(crate) fn abort_persist(&self, tx: &mut Tx) -> Result<()> {
        assert!(tx.id != 0, "abort of a transaction never begun");
        // Open, or already taken out of the table by `abort_cell` (Aborting).
        tx.state.abort();
        // An operation that failed before its fence (an automatic transaction aborts at
        // once) may have left entries deferred: the undo below reads every slot.
        self.emit_deferred_undo(tx);
        let mut first_error = self.modes_abort(tx).err();
        for &slot in tx.undo_slots.iter().rev() {
            let addr = self.geo.meta_entry(slot);
            let mut line = [0u8; 64];
            self.region.read(addr, &mut line);
            match Entry::decode(&line) {
                Entry::Undo(u)
                    if u.txid == tx.id && self.geo.is_metadata_range(u.addr, u64::from(u.size)) =>
                {
                    self.region.write(u.addr, &u.data[..u.size as usize]);
                    self.region.flush(u.addr, u64::from(u.size));
                }
                _ => {
                    first_error = first_error.or(Some(Error::corrupt(
                        "undo entry changed under its transaction",
                        addr,
                    )))
                }
            }
        }
        // persist: every old byte is back in place before the undo entries go away.
        self.region.fence();
        for &slot in &tx.undo_slots {
            self.clear_entry(self.geo.meta_entry(slot));
        }
        // The data entries the writes stored go too (fenced below, before their slots are
        // freed: a slot's next entry must not be overwritten by this clear).
        self.clear_data_entries(tx.versions.iter().flatten());
        // persist: the undo entries are freed before their slots are reused.
        self.region.fence();
        for slot in tx.undo_slots.drain(..) {
            self.meta_slots.free(slot);
        }
        if tx.commit_slot != u64::MAX {
            self.meta_slots.free(tx.commit_slot);
        }
        for (_, slot) in tx.members.drain(..) {
            self.meta_slots.free(slot);
        }
        for v in tx.versions.drain(..).flatten() {
            self.data_slots.free(v.slot);
            self.blocks.free(v.pbn);
        }
        for pbn in tx.allocated_blocks.drain(..) {
            self.blocks.free(pbn);
        }
        for ino in tx.allocated_inodes.drain(..) {
            // A file this transaction created may still have open handles: its number must
            // not go to another file while they exist (they share the inode's DRAM state).
            // It is freed when the last of them is released (`PoolStore::reap`).
            let cell = self.cells.read().get(&ino).cloned();
            let held = cell.is_some_and(|cell| {
                let mut st = cell.lock();
                if st.open_handles > 0 {
                    st.gone = true;
                    true
                } else {
                    false
                }
            });
            if !held {
                self.inodes_free.free(ino);
            }
        }
        tx.deferred_blocks.clear();
        tx.staged_times.clear();
        tx.deferred_undo.clear();
        tx.unfenced.clear();
        tx.state.aborted();
        Self::assert_aborted(tx);
        self.counters.aborts.fetch_add(1, Ordering::Relaxed);
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Allocate a block for `tx` (freed again if the transaction aborts): from the running
    /// write's reservation, else from the free list.
    pub(crate) fn alloc_block(&self, tx: &mut Tx) -> Result<u64> {
        match tx.reservation.pop_block().or_else(|| self.blocks.alloc()) {
            Some(pbn) => {
                tx.allocated_blocks.push(pbn);
                Ok(pbn)
            }
            None => {
                tx.state.doom();
                Err(Error::NoSpace("no free block in the pool".into()))
            }
        }
    }

    /// Record that `tx` touches the DRAM state of `ino`.
    pub(crate) fn touch(&self, tx: &mut Tx, ino: u64) {
        if !tx.inodes.contains(&ino) {
            tx.inodes.push(ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tx;
    use crate::log::tx_state::TxState;
    use crate::{PoolConfig, PoolStore};
    use pmem::DramRegion;
    use std::sync::Arc;

    fn pool() -> PoolStore<DramRegion> {
        PoolStore::format(Arc::new(DramRegion::new(8 << 20)), &PoolConfig::test_min())
            .expect("format")
    }

    #[test]
    fn commit_and_abort_leave_their_transactions_empty() {
        let s = pool();
        let mut tx = s.core.tx_new().expect("begin");
        s.core.commit_persist(&mut tx).expect("commit");
        assert_eq!(tx.state, TxState::Committed);
        s.core.recycle_tx(tx);
        let mut tx = s.core.tx_new().expect("begin");
        s.core.abort_persist(&mut tx).expect("abort");
        assert_eq!(tx.state, TxState::Aborted);
    }

    #[test]
    #[should_panic(expected = "that is not running")]
    fn a_commit_of_a_committed_transaction_is_caught() {
        let s = pool();
        let mut tx = s.core.tx_new().expect("begin");
        s.core.commit_persist(&mut tx).expect("commit");
        let _ = s.core.commit_persist(&mut tx);
    }

    #[test]
    #[should_panic(expected = "that is not running")]
    fn a_commit_of_a_doomed_transaction_is_caught() {
        let s = pool();
        let mut tx = s.core.tx_new().expect("begin");
        tx.state.doom();
        let _ = s.core.commit_persist(&mut tx);
    }

    #[test]
    #[should_panic(expected = "Committed -> Aborting")]
    fn an_abort_of_a_committed_transaction_is_caught() {
        let s = pool();
        let mut tx = s.core.tx_new().expect("begin");
        s.core.commit_persist(&mut tx).expect("commit");
        let _ = s.core.abort_persist(&mut tx);
    }

    #[test]
    #[should_panic(expected = "never begun")]
    fn an_abort_of_a_transaction_never_begun_is_caught() {
        let _ = pool().core.abort_persist(&mut Tx::default());
    }

    #[test]
    #[should_panic(expected = "starts reset")]
    fn a_transaction_started_twice_is_caught() {
        let s = pool();
        let mut tx = s.core.tx_new().expect("begin");
        let _ = s.core.tx_start(&mut tx);
    }
}
