//! The file data path (seed §III-D): cache-line redo logging into pending blocks for blocks
//! that exist, direct allocation for holes and blocks past the end of file, reads through
//! the TLVI. The comparison modes branch here too (modes/mod.rs).

use crate::config::Mode;
use crate::core::{capacity, Core, InodeState};
use crate::data::tlvi::{line_mask, source_of, Version};
use crate::data::write_plan::{Piece, WritePlan};
use crate::log::transaction::{Tx, TxVersion};
use crate::media::layout::*;
use pmem::Region;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use store::{Error, Result};

/// Smallest copy whose whole lines `Core::copy_durable` stores non-temporally.
pub const NT_COPY_MIN: usize = 256;

/// Largest file size (the deepest tree).
pub(crate) const FILE_SIZE_MAX: u64 = 1 << 46;

/// Attribute changes one data operation makes, written together at its end.
pub(crate) struct InodeDelta {
    pub(crate) size: u64,
    pub(crate) blocks: u64,
    pub(crate) pointer_writes: Vec<(u64, u64)>,
    /// The new mtime and ctime (`Core::now`), taken before the operation's data stores:
    /// the clock's locked update would otherwise wait for their non-temporal stores.
    pub(crate) time: u64,
}

impl<R: Region> Core<R> {
    /// Address of the block pointer of `lbn`, growing the tree and creating index blocks
    /// as needed (all undo-logged in `tx`).
    pub(crate) fn pointer_addr_create(
        &self,
        tx: &mut Tx,
        ino: u64,
        lbn: u64,
        delta: &mut InodeDelta,
    ) -> Result<u64> {
        if lbn >= capacity(TREE_HEIGHT_MAX) || lbn * BLOCK_SIZE >= FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("block {lbn} of inode {ino}")));
        }
        let ioff = self.geo.inode(ino);
        let (mut root, mut height) = self.tree_root(ino)?;
        let grow = height == 0 || lbn >= capacity(height);
        while height == 0 || lbn >= capacity(height) {
            let node = self.new_zero_block(tx)?;
            if root != 0 {
                self.region.store_u64(self.geo.block(node), root);
                self.region.flush(self.geo.block(node), 8);
            }
            root = node;
            height += 1;
            delta.blocks += 1;
        }
        if grow {
            let mut bytes = [0u8; 12];
            bytes[..4].copy_from_slice(&height.to_le_bytes());
            bytes[4..].copy_from_slice(&root.to_le_bytes());
            self.meta_update(tx, &[(ioff + I_HEIGHT, &bytes)])?;
        }
        let mut node = root;
        for level in (1..=height).rev() {
            let idx = (lbn / capacity(level - 1)) % POINTERS_PER_BLOCK;
            let addr = self.geo.block(node) + idx * 8;
            if level == 1 {
                return Ok(addr);
            }
            let child = self.read_u64(addr);
            node = if child == 0 {
                let fresh = self.new_zero_block(tx)?;
                self.meta_u64(tx, addr, fresh)?;
                delta.blocks += 1;
                fresh
            } else {
                self.geo.check_pbn(child, addr)?
            };
        }
        Err(Error::corrupt("empty block-pointer tree", ioff))
    }

    /// A zero-filled block allocated for `tx` (flushed, durable at the next fence).
    pub(crate) fn new_zero_block(&self, tx: &mut Tx) -> Result<u64> {
        let pbn = self.alloc_block(tx)?;
        self.region.fill(self.geo.block(pbn), BLOCK_SIZE, 0);
        self.region.flush(self.geo.block(pbn), BLOCK_SIZE);
        Ok(pbn)
    }

    /// Write `data` at `off` of file `st.ino` inside `tx`.
    ///
    /// Reserve, then act (data/write_plan.rs): the blocks the write covers are resolved read-only and
    /// everything it will allocate is reserved in one batch before it changes anything, so
    /// that a shortage can be retried (`Reservation::allow_retry`); a pure overwrite in a redo
    /// mode leaves that to `claim_versions`, which takes its own batch. Then in three
    /// passes, so that nothing waits between the stores of the data: the missing block
    /// pointers (growing the tree as needed); the pending versions of the overwritten
    /// blocks (allocations and locks, which on x86 would wait for non-temporal stores
    /// already issued), with prefetches of the lines the partial edge lines are completed
    /// from and of the pending blocks' pages; then the copies.
    pub(crate) fn write_data(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        let ino = st.ino;
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= FILE_SIZE_MAX);
        let Some(end) = end else {
            return Err(Error::FileTooLarge(format!(
                "write to {off} of inode {ino}"
            )));
        };
        let size = self.inode_size(ino)?;
        let plan = match self.plan_cached(st, off, end)? {
            Some(plan) => plan,
            None => self.plan_write(ino, off, end)?,
        };
        if plan.index_blocks > 0 || plan.pieces.iter().any(|p| p.pbn == 0) {
            // The write adds blocks to the tree. The copy has them as holes, which is safe
            // (their plans walk the tree) but slow: rebuild it with them.
            st.drop_map();
        }
        // A pure overwrite (every block exists, neither the size nor the tree changes).
        let pure = !matches!(self.mode(), Mode::Nc | Mode::FgWal)
            && end <= size
            && plan.index_blocks == 0
            && plan.pieces.iter().all(|p| p.pbn != 0);
        if pure && self.redo_mode() {
            return self.write_pieces(st, tx, plan, size, data, pure);
        }
        let needs = self.write_needs(st, tx, &plan);
        self.reserve(tx, needs)?;
        let undo_before = tx.undo_slots.len();
        let result = self.write_pieces(st, tx, plan, size, data, pure);
        assert!(
            result.is_err() || tx.undo_slots.len() - undo_before <= needs.meta,
            "a write takes at most the metadata-log slots it reserved ({} > {})",
            tx.undo_slots.len() - undo_before,
            needs.meta
        );
        assert!(
            result.is_err() || tx.reservation.data_taken(),
            "a write takes exactly what it reserved"
        );
        self.release_reserved(tx);
        result
    }

    /// FCFS, SOC and SYNC: data goes through pending versions (cache-line redo).
    fn redo_mode(&self) -> bool {
        matches!(self.mode(), Mode::Fcfs | Mode::Soc | Mode::Sync)
    }

    /// The passes of `write_data` after its plan (and reservation) on a file of `size`
    /// bytes.
    fn write_pieces(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        plan: WritePlan,
        size: u64,
        data: &[u8],
        pure: bool,
    ) -> Result<()> {
        let ino = st.ino;
        let mut pieces = plan.pieces;
        let mut delta = InodeDelta {
            size: size.max(plan.end),
            blocks: self.inode_blocks(ino)?,
            pointer_writes: Vec::new(),
            time: 0,
        };
        if self.mode() == Mode::FgWal {
            self.fg_wal_log_range(tx, ino, plan.off, plan.end)?;
        }
        self.create_paths(tx, ino, &mut pieces, &mut delta)?;
        let redo = self.redo_mode();
        // In a redo mode the new times of a pure overwrite are redone from the log with its
        // data (`Tx::redo_times`): no undo entry, nothing in place before the commit point.
        let redo_times = pure && redo && !pieces.is_empty();
        if !pure {
            delta.time = self.now();
        }
        // Else a pure overwrite in a logging mode (SCSP, or no bytes) changes only the
        // times: their undo entry is written now, so that its log slot is taken (a lock)
        // before the data's non-temporal stores are in flight (a locked instruction waits
        // for them). FG-WAL has no need: fg_wal_log_range saved the old attributes under its
        // fence, so finish_data_op writes the times in place at once.
        if pure && !redo_times {
            self.stage_times(tx, ino)?;
        }
        if redo {
            // A pure overwrite takes its versions in a batch of its own (it reserved none).
            self.claim_versions(st, tx, &mut pieces, pure)?;
        }
        if redo_times {
            self.redo_times_at_commit(tx, ino);
        }
        // Each piece's data entry is stored after its copies (`write_redo`).
        for p in &pieces {
            let chunk = &data[p.at..p.at + p.len];
            if p.pbn == 0 {
                self.fill_hole(tx, p.ptr, p.boff, chunk, &mut delta)?;
                continue;
            }
            let old = self.old_bytes_for_crc(p, chunk.len());
            match self.mode() {
                Mode::Nc => self.write_nc(tx, p.pbn, p.boff, chunk),
                Mode::FgWal => self.write_fg_wal(tx, ino, p.pbn, p.boff, chunk)?,
                Mode::Scsp => self.write_shadow(st, tx, p.lbn, p.ptr, p.pbn, p.boff, chunk)?,
                Mode::Fcfs | Mode::Soc | Mode::Sync => self.write_redo(st, tx, p, chunk),
            }
            if let Some(old) = old {
                // The in-place write's new crc, with the pointer under the write's undo
                // (`finish_data_op`).
                // persist: NC: the data and the new word are stored in place and made
                // durable by the operation's one fence (NC promises nothing across a crash;
                // a crash between them is a mismatch a read reports). FG-WAL: the old lines
                // and the old word were logged under one fence (`fg_wal_log_range`) before
                // either changes, so recovery or an abort restores both; the new word is
                // durable at the operation's fence, the data before the commit's.
                let word = self.word_after_write(p.ptr, p.boff, &old, chunk);
                delta.pointer_writes.push((p.ptr, word));
            }
        }
        if pure {
            return Ok(());
        }
        self.finish_data_op(tx, ino, &delta)
    }

    /// In a checksummed pool, NC and FG-WAL (which overwrite the permanent block in place):
    /// the bytes a piece is about to overwrite, from which its block's crc is updated.
    fn old_bytes_for_crc(&self, p: &Piece, len: usize) -> Option<Vec<u8>> {
        if !self.geo.data_checksums || !matches!(self.mode(), Mode::Nc | Mode::FgWal) {
            return None;
        }
        let mut old = vec![0u8; len];
        self.region.read(self.geo.block(p.pbn) + p.boff, &mut old);
        Some(old)
    }

    /// The block pointers of the pieces whose path `plan_write` found missing: the tree
    /// grown and index blocks created (from the reservation), undo-logged in `tx`.
    fn create_paths(
        &self,
        tx: &mut Tx,
        ino: u64,
        pieces: &mut [Piece],
        delta: &mut InodeDelta,
    ) -> Result<()> {
        for p in pieces.iter_mut().filter(|p| p.ptr == 0) {
            p.ptr = self.pointer_addr_create(tx, ino, p.lbn, delta)?;
        }
        Ok(())
    }

    /// Prefetch the permanent copies of the partial lines at the two ends of a write (a redo
    /// write completes them from the latest copy, which is the permanent block's unless a
    /// pending version holds the line), so that their cache misses overlap the TLVI work of
    /// `claim_versions` instead of stalling the copy.
    fn prefetch_edges(&self, pieces: &[Piece]) {
        let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
            return;
        };
        let last_end = last.boff + last.len as u64;
        let edges = [
            (first, first.boff / LINE, !first.boff.is_multiple_of(LINE)),
            (last, (last_end - 1) / LINE, !last_end.is_multiple_of(LINE)),
        ];
        for (piece, line, partial) in edges {
            if partial && piece.pbn != 0 {
                self.region
                    .prefetch(self.geo.block(piece.pbn) + line * LINE);
            }
        }
    }

    /// Write the pointer changes and the inode's size, times and block count of one data
    /// operation: one batch of undo entries, one fence. A pure overwrite in a logging mode
    /// changes only the times: their undo entry is written now (made durable by the fence
    /// that ends the operation, `PoolStore::data_op`, or by the commit's first fence) and the
    /// new times are staged, written in place after that fence (`Core::fenced`). Not in
    /// FG-WAL: its range log saved the old attributes under its own fence already.
    pub(crate) fn finish_data_op(&self, tx: &mut Tx, ino: u64, delta: &InodeDelta) -> Result<()> {
        let ioff = self.geo.inode(ino);
        if !matches!(self.mode(), Mode::Nc | Mode::FgWal)
            && delta.pointer_writes.is_empty()
            && delta.size == self.read_u64(ioff + I_SIZE)
            && delta.blocks == self.read_u64(ioff + I_BLOCKS)
        {
            return self.stage_times(tx, ino);
        }
        self.times_set_in_place(tx, ino);
        let now = delta.time;
        assert!(now != 0, "the operation took its time before its stores");
        let mut attrs = [0u8; 32];
        attrs[..8].copy_from_slice(&delta.size.to_le_bytes());
        attrs[8..16].copy_from_slice(&now.to_le_bytes());
        attrs[16..24].copy_from_slice(&now.to_le_bytes());
        attrs[24..].copy_from_slice(&delta.blocks.to_le_bytes());
        // Neighbouring pointers are written as one run (fewer undo entries).
        let mut pointers = delta.pointer_writes.clone();
        pointers.sort_unstable();
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        for (addr, value) in pointers {
            match runs.last_mut() {
                Some((start, bytes)) if *start + bytes.len() as u64 == addr => {
                    bytes.extend_from_slice(&value.to_le_bytes())
                }
                _ => runs.push((addr, value.to_le_bytes().to_vec())),
            }
        }
        let mut writes: Vec<(u64, &[u8])> = runs.iter().map(|(a, b)| (*a, &b[..])).collect();
        writes.push((ioff + I_SIZE, &attrs));
        self.meta_update(tx, &writes)
    }

    /// A write into a hole or past the end: a new block written directly (no redo copy);
    /// the pointer change is undo-logged metadata (written by `finish_data_op`).
    fn fill_hole(
        &self,
        tx: &mut Tx,
        ptr: u64,
        boff: u64,
        chunk: &[u8],
        delta: &mut InodeDelta,
    ) -> Result<()> {
        let pbn = self.alloc_block(tx)?;
        let base = self.geo.block(pbn);
        if boff > 0 {
            self.region.fill(base, boff, 0);
        }
        let tail = boff + chunk.len() as u64;
        if tail < BLOCK_SIZE {
            self.region.fill(base + tail, BLOCK_SIZE - tail, 0);
        }
        if boff == 0 && chunk.len() as u64 == BLOCK_SIZE {
            self.region.write_nt(base, chunk);
        } else {
            self.region.write(base + boff, chunk);
            self.region.flush(base, BLOCK_SIZE);
        }
        let crc = if self.geo.data_checksums {
            crate::data::checksum::hole_crc(boff, chunk)
        } else {
            0
        };
        // persist: the block is flushed here and the pointer (with its crc) is changed by
        // `finish_data_op` after its undo entry's fence; both are durable at that
        // operation's fence, before the commit entry, and an abort or recovery puts the old
        // word (a hole) back.
        delta
            .pointer_writes
            .push((ptr, self.geo.leaf_word(pbn, crc)));
        delta.blocks += 1;
        Ok(())
    }

    /// NC: overwrite in place (durable at the call's fence).
    pub(crate) fn write_in_place(&self, pbn: u64, boff: u64, chunk: &[u8]) {
        self.copy_durable(self.geo.block(pbn) + boff, chunk);
    }

    /// Copy `data` to `addr`, durable at this thread's next fence: the whole cache lines of
    /// a copy of at least `NT_COPY_MIN` bytes with non-temporal stores (no read of the old
    /// line, no flush), partial lines at its ends through the cache and flushed. The same
    /// policy as PMDK's `pmem_memcpy_persist`, used by every mode's data path (and by the
    /// micro-benchmark's floor).
    pub(crate) fn copy_durable(&self, addr: u64, data: &[u8]) {
        let end = addr + data.len() as u64;
        let lo = addr.next_multiple_of(LINE);
        let hi = end / LINE * LINE;
        if data.len() < NT_COPY_MIN || hi <= lo {
            self.region.write(addr, data);
            self.region.flush(addr, data.len() as u64);
            return;
        }
        let (head, rest) = data.split_at((lo - addr) as usize);
        let (middle, tail) = rest.split_at((hi - lo) as usize);
        if !head.is_empty() {
            self.region.write(addr, head);
            self.region.flush(addr, head.len() as u64);
        }
        self.region.write_nt(lo, middle);
        if !tail.is_empty() {
            self.region.write(hi, tail);
            self.region.flush(hi, tail.len() as u64);
        }
    }

    /// FCFS: redo the lines of one piece into the transaction's pending version of its block
    /// (`p.version`, made by `own_version`).
    fn write_redo(&self, st: &mut InodeState, tx: &mut Tx, p: &Piece, chunk: &[u8]) {
        let (lbn, vi, permanent, boff) = (p.lbn, p.version, p.pbn, p.boff);
        let Some(list) = st.pending.get_mut(&lbn) else {
            unreachable!("claim_versions made the version of every overwritten piece");
        };
        let mine = list[vi];
        let older = &list[..vi];
        let base = self.geo.block(mine.pbn);
        let end = boff + chunk.len() as u64;
        let first = boff / LINE;
        let last = (end - 1) / LINE;
        // Edge lines not fully covered and not yet in the version: the whole line is made
        // once in DRAM from the latest copy and the new bytes, then stored whole with a
        // non-temporal store (no read of the pending block's old line, no flush).
        let (mut lo, mut hi) = (boff, end);
        let mut from_permanent = false;
        for line in [first, last] {
            let lstart = line * LINE;
            let lend = lstart + LINE;
            let covered = boff <= lstart && end >= lend;
            if covered || mine.bitmap & (1 << line) != 0 || (line == last && lo >= hi) {
                continue;
            }
            let mut buf = [0u8; LINE as usize];
            let src = source_of(older, permanent, line);
            if src != 0 {
                self.region.read(self.geo.block(src) + lstart, &mut buf);
            }
            from_permanent |= src == permanent && src != 0;
            let (from, to) = (boff.max(lstart), end.min(lend));
            buf[(from - lstart) as usize..(to - lstart) as usize]
                .copy_from_slice(&chunk[(from - boff) as usize..(to - boff) as usize]);
            self.region.write_line_nt(base + lstart, &buf);
            if line == first {
                lo = lo.max(lend);
            }
            if line == last {
                hi = hi.min(lstart);
            }
        }
        if lo < hi {
            self.copy_durable(
                base + lo,
                &chunk[(lo - boff) as usize..(hi - boff) as usize],
            );
        }
        let bitmap = mine.bitmap | line_mask(first, last);
        list[vi].bitmap = bitmap;
        list[vi].from_permanent |= from_permanent;
        let (txid, early, times) = (tx.id, tx.early_entries, tx.redo_times.contains(&st.ino));
        if let Some(Some(tv)) = tx
            .versions
            .iter_mut()
            .rev()
            .find(|v| matches!(v, Some(t) if t.ino == st.ino && t.lbn == lbn))
        {
            tv.bitmap = bitmap;
            // The entry of the version this piece changed (`Tx::early_entries`): not a pass
            // over every version of the transaction per write.
            if early {
                self.store_data_entry(txid, times, tv);
            }
        }
    }

    /// The transaction's own pending version of every overwritten piece of a write
    /// (`Piece::version`), created where missing. With `own_batch` (a pure overwrite, which
    /// reserved nothing) the blocks and log slots are taken here in one batch before
    /// anything changes, so a shortage can be retried; otherwise they come from the write's
    /// reservation (data/write_plan.rs). Then the edge lines' sources and the new pending blocks are
    /// prefetched.
    ///
    /// The prefetches come after the allocators' locks and before the TLVI lookups: in the
    /// steady state of random writes over a large pool, the old block, the pending block and
    /// the TLVI entry are each a cache and TLB miss, and a page walk was most of a write's
    /// cost on the test machine (perf put the first non-temporal store into a pending
    /// block, stalled on its translation, at 10 % of a transaction). Issued together, the
    /// walks and misses overlap.
    fn claim_versions(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        pieces: &mut [Piece],
        own_batch: bool,
    ) -> Result<()> {
        let mut slots: SmallVec<[u64; 8]> = SmallVec::new();
        let mut blocks: SmallVec<[u64; 8]> = SmallVec::new();
        let mut result = Ok(());
        if own_batch {
            let wanted = pieces.iter().filter(|p| p.pbn != 0).count();
            if !self.data_slots.alloc_many(wanted, &mut slots) {
                result = Err(Error::LogFull("data redo log".into()));
            } else if !self.blocks.alloc_many(wanted, &mut blocks) {
                result = Err(Error::NoSpace("no free block for a pending version".into()));
            }
            if result.is_err() && !tx.reservation.fell_short() {
                tx.state.doom();
            }
        }
        // After the allocators' locked instructions (which wait for every earlier
        // instruction to retire, a prefetch's page walk included), so that the walks and
        // misses of these prefetches overlap each other and the TLVI lookups below.
        self.prefetch_edges(pieces);
        // Each new pending block's page (its translation, walked here instead of at the
        // first non-temporal store into it): its last line, which a write rarely stores to.
        // `own_version` takes the batch's blocks, then the reservation's from its end.
        let reserved = tx.reservation.next_blocks(pieces.len());
        for &pbn in blocks.iter().chain(reserved) {
            self.region
                .prefetch(self.geo.block(pbn) + BLOCK_SIZE - LINE);
        }
        if result.is_ok() {
            result = self.own_versions(st, tx, pieces, &mut slots, &mut blocks);
        }
        self.data_slots.free_many(&slots);
        self.blocks.free_many(&blocks);
        result
    }

    /// `own_version` for every overwritten piece.
    fn own_versions(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        pieces: &mut [Piece],
        slots: &mut SmallVec<[u64; 8]>,
        blocks: &mut SmallVec<[u64; 8]>,
    ) -> Result<()> {
        let mut created = 0;
        let mut result = Ok(());
        for p in pieces.iter_mut().filter(|p| p.pbn != 0) {
            match self.own_version(st, tx, p, slots, blocks) {
                Ok((version, new)) => {
                    p.version = version;
                    created += u64::from(new);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if created > 0 {
            self.touch(tx, st.ino);
            self.counters
                .versions_created
                .fetch_add(created, Ordering::Relaxed);
        }
        result
    }

    /// Index of the transaction's own (uncommitted) version of the piece's block, created
    /// if missing from `slots` and `blocks` (`claim_versions`' batch), else from the
    /// write's reservation, else (neither counted it: not expected) from the free lists,
    /// dooming the transaction when they are empty. Returns the index and whether it was
    /// created.
    fn own_version(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        p: &Piece,
        slots: &mut SmallVec<[u64; 8]>,
        blocks: &mut SmallVec<[u64; 8]>,
    ) -> Result<(usize, bool)> {
        let list = st.pending.list_mut(p.lbn);
        if let Some(last) = list.last() {
            if !last.committed && last.txid == tx.id {
                return Ok((list.len() - 1, false));
            }
        }
        let slot = (slots.pop())
            .or_else(|| tx.reservation.pop_slot())
            .or_else(|| self.data_slots.alloc());
        let pbn = (blocks.pop())
            .or_else(|| tx.reservation.pop_block())
            .or_else(|| self.blocks.alloc());
        let (Some(slot), Some(pbn)) = (slot, pbn) else {
            if list.is_empty() {
                st.pending.remove(&p.lbn);
            }
            self.data_slots.free_many(slot.as_slice());
            self.blocks.free_many(pbn.as_slice());
            tx.state.doom();
            return Err(match slot {
                None => Error::LogFull("data redo log".into()),
                Some(_) => Error::NoSpace("no free block for a pending version".into()),
            });
        };
        list.push(Version {
            pbn,
            bitmap: 0,
            txid: tx.id,
            committed: false,
            slot,
            ptr_addr: p.ptr,
            time: 0,
            from_permanent: false,
        });
        tx.versions.push(Some(TxVersion {
            ino: st.ino,
            lbn: p.lbn,
            pbn,
            slot,
            ptr_addr: p.ptr,
            bitmap: 0,
            logged: (0, false, 0),
        }));
        Ok((list.len() - 1, true))
    }

    /// Read `buf.len()` bytes at `off` (clipped to the size) of file `st.ino`.
    pub(crate) fn read_data(&self, st: &InodeState, off: u64, buf: &mut [u8]) -> Result<usize> {
        let size = self.inode_size(st.ino)?;
        if off >= size {
            return Ok(0);
        }
        let end = size.min(off + buf.len() as u64);
        let mut pos = off;
        while pos < end {
            let lbn = pos / BLOCK_SIZE;
            let boff = pos % BLOCK_SIZE;
            let n = (BLOCK_SIZE - boff).min(end - pos);
            let out = &mut buf[(pos - off) as usize..(pos - off + n) as usize];
            let (permanent, ptr) = self.permanent_block(st.ino, lbn)?;
            let list = st.pending.get(&lbn).filter(|l| !l.is_empty());
            if let (true, Some(ptr)) = (self.geo.data_checksums && permanent != 0, ptr) {
                // A line read from a pending version is covered by the log; one read from
                // the permanent block is checked with its whole block.
                let pending = list.map_or(0, |l| l.iter().fold(0, |m, v| m | v.bitmap));
                if crate::modes::fg_wal::lines_of(boff, n) & !pending != 0 {
                    self.verify_block(st.ino, lbn, permanent, ptr)?;
                }
            }
            match list {
                Some(list) => self.read_versions(list, permanent, boff, out),
                _ if permanent == 0 => out.fill(0),
                _ => self.region.read(self.geo.block(permanent) + boff, out),
            }
            pos += n;
        }
        Ok((end - off) as usize)
    }

    /// Read a range of one block line by line from the newest holder of each line, one
    /// region read per run of lines with the same holder.
    fn read_versions(&self, list: &[Version], permanent: u64, boff: u64, out: &mut [u8]) {
        let end = boff + out.len() as u64;
        let mut pos = boff;
        while pos < end {
            let line = pos / LINE;
            let src = source_of(list, permanent, line);
            let mut run_end = ((line + 1) * LINE).min(end);
            while run_end < end && source_of(list, permanent, run_end / LINE) == src {
                run_end = ((run_end / LINE + 1) * LINE).min(end);
            }
            let dst = &mut out[(pos - boff) as usize..(run_end - boff) as usize];
            if src == 0 {
                dst.fill(0);
            } else {
                self.region.read(self.geo.block(src) + pos, dst);
            }
            pos = run_end;
        }
    }

    /// Change the size of file `st.ino` inside `tx`.
    pub(crate) fn set_len_data(&self, st: &mut InodeState, tx: &mut Tx, len: u64) -> Result<()> {
        if len > FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("length {len}")));
        }
        let time = self.now();
        let size = self.inode_size(st.ino)?;
        // A shrink frees blocks (and its undo may put them back).
        st.drop_map();
        if len < size {
            // Committed versions of the blocks that go away are checkpointed first, so that
            // dropping a block never loses a committed redo entry.
            let first_lbn = len / BLOCK_SIZE;
            let lbns: Vec<u64> = st.pending.keys().filter(|&l| l >= first_lbn).collect();
            for lbn in lbns {
                self.checkpoint_block(st, lbn)?;
            }
            self.drop_own_versions(st, tx, len.div_ceil(BLOCK_SIZE)..u64::MAX);
            let (partial, _) = self.permanent_block(st.ino, len / BLOCK_SIZE)?;
            if !len.is_multiple_of(BLOCK_SIZE) && partial != 0 {
                let zero_end = size.min((len / BLOCK_SIZE + 1) * BLOCK_SIZE);
                let zeros = vec![0u8; (zero_end - len) as usize];
                self.write_data(st, tx, len, &zeros)?;
            }
            let mut delta = InodeDelta {
                size: len,
                blocks: self.inode_blocks(st.ino)?,
                pointer_writes: Vec::new(),
                time,
            };
            // Only the allocated blocks past the new end (walking the tree, not every lbn).
            let first_gone = len.div_ceil(BLOCK_SIZE);
            let mut gone = Vec::new();
            self.walk_tree(st.ino, &mut |_, index, lbn| {
                if !index && lbn >= first_gone {
                    gone.push(lbn);
                }
                Ok(())
            })?;
            for lbn in gone {
                let (pbn, ptr) = self.permanent_block(st.ino, lbn)?;
                if let (true, Some(ptr)) = (pbn != 0, ptr) {
                    delta.pointer_writes.push((ptr, 0));
                    tx.deferred_blocks.push(pbn);
                    delta.blocks = delta.blocks.saturating_sub(1);
                }
            }
            self.finish_data_op(tx, st.ino, &delta)
        } else {
            let delta = InodeDelta {
                size: len,
                blocks: self.inode_blocks(st.ino)?,
                pointer_writes: Vec::new(),
                time,
            };
            self.finish_data_op(tx, st.ino, &delta)
        }
    }

    /// Drop the transaction's own pending versions of blocks `lbns` (a truncate or a
    /// punched hole inside the transaction): they were never committed, so their block and
    /// slot go back.
    pub(crate) fn drop_own_versions(
        &self,
        st: &mut InodeState,
        tx: &mut Tx,
        lbns: std::ops::Range<u64>,
    ) {
        for (lbn, list) in st.pending.iter_mut() {
            if !lbns.contains(&lbn) {
                continue;
            }
            list.retain(|v| v.committed || v.txid != tx.id);
        }
        st.pending.retain(|_, list| !list.is_empty());
        let ino = st.ino;
        let dropped = |t: &TxVersion| t.ino == ino && lbns.contains(&t.lbn);
        // Their stored data entries are cleared, durably, before the slots can be reused.
        self.clear_data_entries(tx.versions.iter().flatten().filter(|t| dropped(t)));
        if tx
            .versions
            .iter()
            .flatten()
            .any(|t| dropped(t) && t.logged.0 != 0)
        {
            // persist: the cleared entries are gone before their slots go back.
            self.region.fence();
        }
        for v in tx.versions.iter_mut() {
            if let Some(t) = v.filter(|t| dropped(t)) {
                self.data_slots.free(t.slot);
                self.blocks.free(t.pbn);
                *v = None;
            }
        }
    }
}
