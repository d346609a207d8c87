//! Transaction bookkeeping of the store: the table of open transactions, binding files,
//! commit and abort with their DRAM follow-up (TLVI, directory indexes, orphans).

use crate::api::pool_store::{Handle, PoolStore};
use crate::config::Mode;
use crate::core::InodeState;
use crate::log::transaction::{Tx, TxCell};
use crate::media::layout::*;
use parking_lot::Mutex;
use pmem::Region;
use smallvec::SmallVec;
use std::sync::Arc;
use store::{Error, Result};

/// What the DRAM follow-up of a commit needs, copied out of the transaction (inline, no
/// allocation for an ordinary transaction) so that its lock is not held while the inodes'
/// locks are taken.
struct Committed {
    group: u64,
    ids: SmallVec<[u64; 4]>,
    inodes: SmallVec<[u64; 4]>,
    slots: SmallVec<[(u64, u64); 4]>,
    orphans: SmallVec<[u64; 4]>,
    /// (ino, lbn) of every pending version the transaction made.
    blocks: SmallVec<[(u64, u64); 16]>,
    /// The commit time and the inodes it is the new mtime and ctime of (`Tx::redo_times`).
    time: u64,
    redo_times: SmallVec<[u64; 4]>,
}

impl<R: Region> PoolStore<R> {
    /// Register a new open transaction.
    pub(crate) fn begin_tx(&self) -> Result<(Arc<TxCell>, u64)> {
        let mut txs = self.txs.lock();
        if txs.open.len() >= self.core.cfg.open_transactions_max {
            return Err(Error::TooMany {
                what: "open transactions",
                max: self.core.cfg.open_transactions_max as u64,
            });
        }
        let cell =
            (txs.spare.pop()).unwrap_or_else(|| Arc::new(Mutex::new(self.core.take_spare_tx())));
        let mut tx = cell.lock();
        if let Err(e) = self.core.tx_start(&mut tx) {
            drop(tx);
            txs.spare.push(cell);
            return Err(e);
        }
        tx.early_entries = true;
        let id = tx.id;
        drop(tx);
        txs.open.insert(id, cell.clone());
        Ok((cell, id))
    }

    pub(crate) fn tx_cell(&self, id: u64) -> Result<Arc<TxCell>> {
        self.txs
            .lock()
            .open
            .get(&id)
            .cloned()
            .ok_or(Error::NoSuchTransaction(id))
    }

    /// Bind the file of `handle` to transaction `cell`. The file must still exist (checked
    /// here, under the inode lock this takes anyway: `tx_begin` takes no lock of its own).
    pub(crate) fn bind(&self, cell: &Arc<TxCell>, id: u64, handle: &Handle) -> Result<()> {
        let mut st = handle.cell.lock_spinning();
        crate::api::pool_store::check_live(&st, handle.ino)?;
        if st.bound_id == id {
            return Ok(());
        }
        if st.bound_id != 0 {
            return Err(Error::FileInTransaction(st.bound_id));
        }
        // A file whose create has not committed joins no transaction but its creator's.
        self.core.creates.check(st.ino, id)?;
        let mut tx = cell.lock();
        if !tx.state.is_open() {
            return Err(Error::NoSuchTransaction(id));
        }
        st.bound = Some(cell.clone());
        st.bound_id = id;
        self.core.touch(&mut tx, st.ino);
        Ok(())
    }

    /// Remove the versions of transactions `ids` that are still uncommitted from a pending
    /// list (their blocks are freed by `abort_persist`).
    fn drop_versions(st: &mut InodeState, id: u64) {
        for list in st.pending.values_mut() {
            list.retain(|v| v.committed || v.txid != id);
        }
        st.pending.retain(|_, l| !l.is_empty());
    }

    /// Commit an open transaction (taken out of the table by the caller or not in it).
    pub(crate) fn commit_cell(&self, cell: &Arc<TxCell>) -> Result<()> {
        let done = {
            let mut tx = cell.lock();
            if !tx.state.is_open() {
                return Err(Error::NoSuchTransaction(tx.id));
            }
            if tx.state.is_doomed() {
                let id = tx.id;
                drop(tx);
                let _ns = self.core.ns.lock();
                self.abort_cell(cell)?;
                return Err(Error::NoSpace(format!(
                    "transaction {id} ran out of space and was rolled back"
                )));
            }
            self.core.commit_persist(&mut tx)?;
            self.core.release_deferred(&mut tx);
            self.core.creates.ended(&tx.allocated_inodes);
            self.txs.lock().open.remove(&tx.id);
            committed_info(&tx)
        };
        let result = self.finalize(done);
        self.recycle_cell(cell);
        result
    }

    /// Nobody uses a finished transaction again: keep its vectors for the next one. Its
    /// cell too, when the caller's reference is the only one left: then nobody can reach
    /// the cell (the table and the files no longer name it), so the next transaction may
    /// take it over. A cell someone else still holds (a thread that looked the id up just
    /// before the commit) is left to them; they find it finished.
    fn recycle_cell(&self, cell: &Arc<TxCell>) {
        if Arc::strong_count(cell) == 1 {
            self.core.reset_tx(&mut cell.lock());
            let mut txs = self.txs.lock();
            if txs.spare.len() < crate::log::transaction::SPARE_TXS_MAX {
                txs.spare.push(cell.clone());
            }
        } else {
            let finished = std::mem::take(&mut *cell.lock());
            self.core.recycle_tx(finished);
        }
    }

    fn finalize(&self, done: Committed) -> Result<()> {
        let mut result = Ok(());
        for &ino in &done.inodes {
            let cell = self.core.cell(ino);
            let mut st = cell.lock_spinning();
            let lbns = done.blocks.iter().filter(|b| b.0 == ino).map(|b| b.1);
            let time = if done.redo_times.contains(&ino) {
                done.time
            } else {
                0
            };
            let finalized =
                self.finalize_inode(&mut st, done.group, &done.ids, &done.slots, lbns, time);
            if let Err(e) = finalized {
                result = Err(e);
            }
        }
        if !done.orphans.is_empty() {
            let _ns = self.core.ns.lock();
            self.core.orphans_settled(&done.orphans);
            for &ino in &done.orphans {
                self.reap(ino)?;
            }
        }
        self.core.checkpointer.note_commit();
        result
    }

    /// DRAM follow-up of a commit on one inode: versions become committed (in commit order
    /// they already are), the inode is unbound, freed directory slots become reusable, and
    /// long pending lists are checkpointed. `time` (0 = none): the commit time the
    /// transaction's data entries of this inode redo as its mtime and ctime, written in place
    /// here (under the inode's lock, like every write of its attributes).
    pub(crate) fn finalize_inode(
        &self,
        st: &mut InodeState,
        group: u64,
        ids: &[u64],
        slots: &[(u64, u64)],
        lbns: impl Iterator<Item = u64>,
        time: u64,
    ) -> Result<()> {
        if time != 0 {
            self.core.redo_times(st.ino, time);
        }
        let max = self.core.cfg.pending_versions_max;
        let sync = self.core.mode() == Mode::Sync;
        let mut due: SmallVec<[u64; 8]> = SmallVec::new();
        // Only the blocks the transaction wrote (not every pending list of the file).
        for lbn in lbns {
            let Some(list) = st.pending.get_mut(&lbn) else {
                continue;
            };
            if due.contains(&lbn) {
                continue;
            }
            let mut mine = false;
            for v in list.iter_mut() {
                if !v.committed && ids.contains(&v.txid) {
                    v.committed = true;
                    v.txid = group;
                    v.time = time;
                    mine = true;
                }
            }
            if (sync && mine) || list.len() > max {
                due.push(lbn);
            }
        }
        if ids.contains(&st.bound_id) {
            st.bound = None;
            st.bound_id = 0;
        }
        for &(dir, slot) in slots {
            if dir == st.ino && st.dir_reserved.remove(&slot) {
                if let Some(index) = st.dir.as_mut() {
                    index.free.push(slot);
                }
            }
        }
        if due.is_empty() {
            return Ok(());
        }
        if sync || self.core.cfg.checkpoint_threads == 0 {
            self.core.checkpoint_blocks(st, &due)?;
        } else {
            for lbn in due {
                self.core.checkpointer.push(st.ino, lbn);
            }
        }
        Ok(())
    }

    /// Abort an open transaction. The caller holds the namespace lock.
    pub(crate) fn abort_cell(&self, cell: &Arc<TxCell>) -> Result<()> {
        let (id, inodes) = {
            let mut tx = cell.lock();
            if !tx.state.is_open() {
                return Err(Error::NoSuchTransaction(tx.id));
            }
            tx.state.abort();
            (tx.id, tx.inodes.clone())
        };
        self.txs.lock().open.remove(&id);
        // First take the versions out of the TLVI, so no reader or writer uses a pending
        // block after it is freed.
        for &ino in &inodes {
            let c = self.core.cell(ino);
            let mut st = c.lock();
            Self::drop_versions(&mut st, id);
            st.drop_map();
            if st.bound_id == id {
                st.bound = None;
                st.bound_id = 0;
            }
        }
        let mut tx = cell.lock();
        let created: SmallVec<[u64; 4]> = tx.allocated_inodes.iter().copied().collect();
        let grown = self.core.grown_dir_blocks(&created);
        let result = self.core.abort_persist(&mut tx);
        if result.is_ok() {
            // Their links are back. (After a failed undo they stay counted: never freed
            // before the next mount's recovery has looked at them.)
            self.core.orphans_settled(&tx.orphans);
            // The new directories are free on the media (abort_persist fenced the undo).
            for pbn in grown {
                self.core.blocks.free(pbn);
            }
        }
        // After the inodes are freed or marked gone: no write slips in between.
        self.core.creates.ended(&created);
        for &ino in &tx.first_names {
            self.core.cell(ino).lock().naming = crate::core::Naming::Unnamed;
        }
        for &ino in &tx.inodes {
            let c = self.core.cell(ino);
            let mut st = c.lock();
            Self::drop_versions(&mut st, id);
            // The undo may have changed entries and block pointers: rebuild the directory
            // index and the block map on next use.
            st.dir = None;
            st.drop_map();
            for &(dir, slot) in &tx.deferred_slots {
                if dir == ino {
                    st.dir_reserved.remove(&slot);
                }
            }
            if st.bound_id == id {
                st.bound = None;
                st.bound_id = 0;
            }
        }
        let finished = std::mem::take(&mut *tx);
        drop(tx);
        self.core.recycle_tx(finished);
        result
    }

    /// Abort by id, taking the namespace lock.
    pub(crate) fn abort_id(&self, id: u64) -> Result<()> {
        let cell = self.tx_cell(id)?;
        let _ns = self.core.ns.lock();
        self.abort_cell(&cell)
    }

    /// Run `op` in the automatic transaction of a call made outside any transaction, with
    /// the inode `st` locked: commit on success, roll back on failure.
    pub(crate) fn auto_tx<T>(
        &self,
        st: &mut InodeState,
        op: impl FnOnce(&mut InodeState, &mut Tx) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.core.tx_new()?;
        match op(st, &mut tx) {
            Ok(v) => {
                self.core.commit_persist(&mut tx)?;
                self.core.release_deferred(&mut tx);
                let id = tx.id;
                let lbns = tx.versions.iter().flatten().map(|v| v.lbn);
                let time = if tx.redo_times.contains(&st.ino) {
                    tx.commit_time
                } else {
                    0
                };
                self.finalize_inode(st, id, &[id], &[], lbns, time)?;
                self.core.checkpointer.note_commit();
                self.core.recycle_tx(tx);
                Ok(v)
            }
            Err(e) => {
                Self::drop_versions(st, tx.id);
                // The undo may put block pointers back.
                st.drop_map();
                self.core.abort_persist(&mut tx)?;
                self.core.recycle_tx(tx);
                Err(e)
            }
        }
    }

    /// Free inode `ino` if it has no link, no open handle, and no open transaction may
    /// still give it its link back. The caller holds the namespace lock.
    pub(crate) fn reap(&self, ino: u64) -> Result<()> {
        let cell = self.core.cells.read().get(&ino).cloned();
        if let Some(cell) = cell {
            let st = cell.lock();
            if st.gone {
                if st.open_handles == 0 {
                    // Created by an aborted transaction: free on the media already, its
                    // number was held back for the handles (log/transaction.rs abort_persist).
                    drop(st);
                    self.core.cells.write().remove(&ino);
                    self.core.inodes_free.free(ino);
                }
                return Ok(());
            }
        }
        let kind = self.core.read_u8(self.core.geo.inode(ino) + I_KIND);
        if kind == KIND_FREE || self.core.read_u32(self.core.geo.inode(ino) + I_NLINK) != 0 {
            return Ok(());
        }
        // An open transaction took its last link: it frees the inode when it commits, or
        // gives the link back when it aborts.
        if self.core.unlinking.lock().contains_key(&ino) {
            return Ok(());
        }
        let cell = self.core.cell(ino);
        let mut st = cell.lock();
        if st.open_handles > 0 {
            return Ok(());
        }
        self.core.free_inode(&mut st)?;
        self.core.cells.write().remove(&ino);
        Ok(())
    }

    /// Merge the O_ATOMIC transactions `cells` into the first one (syncv): the others become
    /// members, committed by the group's commit entry.
    pub(crate) fn merge_group(&self, cells: &[Arc<TxCell>]) -> Result<()> {
        let Some((group_cell, members)) = cells.split_first() else {
            return Ok(());
        };
        let mut group = group_cell.lock();
        for member_cell in members {
            let mut m = member_cell.lock();
            if !m.state.is_open() {
                continue;
            }
            let Some(slot) = self.core.meta_slots.alloc() else {
                Self::doom_group(&mut group);
                return Err(Error::LogFull("metadata log (member entry)".into()));
            };
            let member_doomed = m.state.is_doomed();
            m.state.merge();
            self.txs.lock().open.remove(&m.id);
            if m.commit_slot != u64::MAX {
                self.core.meta_slots.free(m.commit_slot);
            }
            let mid = m.id;
            group.members.push((mid, slot));
            let mm = std::mem::take(&mut m.members);
            group.members.extend(mm);
            macro_rules! take_all {
                ($($f:ident),*) => { $( let v = std::mem::take(&mut m.$f); group.$f.extend(v); )* };
            }
            take_all!(
                undo_slots,
                versions,
                allocated_blocks,
                allocated_inodes,
                deferred_blocks,
                deferred_slots,
                orphans,
                inodes,
                staged_times,
                redo_times,
                unfenced
            );
            let logged = std::mem::take(&mut m.logged);
            group.logged.extend(&logged);
            group.modes.absorb(std::mem::take(&mut m.modes));
            if member_doomed {
                Self::doom_group(&mut group);
            }
            group.fenced_all = false;
        }
        Ok(())
    }

    /// The group of a syncv cannot commit: it is aborted like any doomed transaction (a
    /// group that has ended meanwhile is left as it is).
    fn doom_group(group: &mut Tx) {
        if group.state.is_open() {
            group.state.doom();
        }
    }
}

/// What `finalize` needs of a committed transaction.
fn committed_info(tx: &Tx) -> Committed {
    let mut ids = SmallVec::new();
    ids.push(tx.id);
    ids.extend(tx.members.iter().map(|m| m.0));
    Committed {
        group: tx.id,
        ids,
        inodes: tx.inodes.iter().copied().collect(),
        slots: tx.deferred_slots.iter().copied().collect(),
        orphans: tx.orphans.iter().copied().collect(),
        blocks: tx
            .versions
            .iter()
            .flatten()
            .map(|v| (v.ino, v.lbn))
            .collect(),
        time: tx.commit_time,
        redo_times: tx.redo_times.iter().copied().collect(),
    }
}

#[cfg(test)]
mod tests {
    use crate::{PoolConfig, PoolStore};
    use pmem::DramRegion;
    use std::sync::Arc;
    use store::{Error, OpenFlags, Store, ROOT_INO};

    /// A small pool with the files `a` and `b`, and read-write open flags.
    fn pool_with_two_files() -> (PoolStore<DramRegion>, OpenFlags, u64, u64) {
        let s = PoolStore::format(Arc::new(DramRegion::new(8 << 20)), &PoolConfig::test_min())
            .expect("format");
        let rw = OpenFlags {
            read: true,
            write: true,
            ..OpenFlags::default()
        };
        let a = s.create(ROOT_INO, b"a", 0o644, None).expect("create a").ino;
        let b = s.create(ROOT_INO, b"b", 0o644, None).expect("create b").ino;
        (s, rw, a, b)
    }

    /// An unlinked file whose last handle closes is freed at once, even while another
    /// thread is inside an operation of an unrelated open transaction (holding its lock).
    /// `reap` used to look into every open transaction for the inode and gave up on one it
    /// could not lock, leaking the inode and its blocks until the next mount.
    #[test]
    fn an_orphan_is_freed_at_its_last_close_while_another_transaction_is_busy() {
        let (s, rw, a, b) = pool_with_two_files();
        let fa = s.open(a, rw).expect("open a");
        s.write(fa, 0, &[7u8; 9000]).expect("write a");
        let fb = s.open(b, rw).expect("open b");
        let before = s.statfs().expect("statfs");
        let tx = s.tx_begin(&[fb]).expect("begin");
        s.unlink(ROOT_INO, b"a", None).expect("unlink a");
        let busy = s.tx_cell(tx.0).expect("open transaction");
        let held = busy.lock();
        s.release(fa).expect("close a");
        drop(held);
        let after = s.statfs().expect("statfs");
        assert_eq!(
            after.inodes_free,
            before.inodes_free + 1,
            "the inode is free"
        );
        assert!(
            after.blocks_free >= before.blocks_free + 3,
            "its blocks are free"
        );
        // An orphan of a transaction that is still open waits for it.
        let c = s.create(ROOT_INO, b"c", 0o644, None).expect("create c").ino;
        let fc = s.open(c, rw).expect("open c");
        s.unlink(ROOT_INO, b"c", Some(tx))
            .expect("unlink c in the transaction");
        s.release(fc).expect("close c");
        let waiting = s.statfs().expect("statfs").inodes_free;
        s.tx_commit(tx).expect("commit");
        assert_eq!(s.statfs().expect("statfs").inodes_free, waiting + 1);
        assert!(s.fsck().expect("fsck").is_clean());
    }

    /// A committed transaction's cell is reused by the next transaction (`TxTable::spare`),
    /// but the old id stays dead: commit, abort and add by it fail, and the new
    /// transaction's work is its own. A cell that another caller still holds is not reused.
    #[test]
    fn a_reused_transaction_cell_never_revives_the_old_id() {
        let (s, rw, a, b) = pool_with_two_files();
        let (fa, fb) = (
            s.open(a, rw).expect("open a"),
            s.open(b, rw).expect("open b"),
        );
        // (The creates' automatic transactions left their cells already.)
        let spare = || s.txs.lock().spare.len();
        let first = s.tx_begin(&[fa]).expect("begin first");
        let kept = spare();
        s.write(fa, 0, b"first").expect("write a");
        s.tx_commit(first).expect("commit first");
        assert_eq!(spare(), kept + 1, "the committed cell is kept");
        let second = s.tx_begin(&[fb]).expect("begin second");
        assert_ne!(second, first);
        assert_eq!(spare(), kept, "and reused");
        assert!(matches!(
            s.tx_commit(first),
            Err(Error::NoSuchTransaction(_))
        ));
        assert!(matches!(
            s.tx_abort(first),
            Err(Error::NoSuchTransaction(_))
        ));
        assert!(matches!(
            s.tx_add(first, fa),
            Err(Error::NoSuchTransaction(_))
        ));
        s.write(fb, 0, b"second").expect("write b");
        // The file of the first transaction is free again: a third may take it.
        let third = s.tx_begin(&[fa]).expect("begin third");
        s.write(fa, 0, b"THIRD").expect("write a again");
        s.tx_abort(third).expect("abort third");
        s.tx_commit(second).expect("commit second");
        let mut buf = [0u8; 6];
        assert_eq!(s.read(fa, 0, &mut buf[..5]).expect("read a"), 5);
        assert_eq!(&buf[..5], b"first");
        assert_eq!(s.read(fb, 0, &mut buf).expect("read b"), 6);
        assert_eq!(&buf, b"second");
        // A cell still held elsewhere when its transaction commits is left to its holder.
        let fourth = s.tx_begin(&[fa]).expect("begin fourth");
        let before = spare();
        let held = s.tx_cell(fourth.0).expect("open transaction");
        s.tx_commit(fourth).expect("commit fourth");
        assert!(!held.lock().state.is_open());
        assert_eq!(spare(), before, "not put back while held");
        assert!(s.fsck().expect("fsck").is_clean());
    }
}

#[cfg(test)]
mod room_tests {
    use crate::{PoolConfig, PoolStore};
    use pmem::DramRegion;
    use std::sync::Arc;
    use store::{OpenFlags, Store, ROOT_INO};

    const BLOCKS: u64 = 320;
    /// Blocks one overwrite spans (one version each).
    const SPAN: u64 = 32;

    /// A pool with one file of `BLOCKS` blocks, all checkpointed (no version pending), and
    /// no background checkpoint thread: `make_room` checkpoints in the writer's thread.
    fn pool_with_checkpointed_file(high: u64) -> (PoolStore<DramRegion>, store::Fh) {
        let cfg = PoolConfig {
            data_log_entries: 1024,
            metadata_log_entries: 1024,
            checkpoint_pending_high: high,
            ..PoolConfig::test_min()
        };
        let s = PoolStore::format(Arc::new(DramRegion::new(16 << 20)), &cfg).expect("format");
        let rw = OpenFlags {
            read: true,
            write: true,
            ..OpenFlags::default()
        };
        let ino = s.create(ROOT_INO, b"a", 0o644, None).expect("create").ino;
        let fh = s.open(ino, rw).expect("open");
        s.write(fh, 0, &vec![1u8; (BLOCKS * 4096) as usize])
            .expect("fill");
        s.checkpoint_all().expect("checkpoint");
        (s, fh)
    }

    fn pending(s: &PoolStore<DramRegion>) -> u64 {
        let slots = &s.core.data_slots;
        slots.total() - slots.free_count()
    }

    /// Overwrite `SPAN` blocks from block `first` (all but 100 bytes at each end), with
    /// `byte`.
    fn overwrite(s: &PoolStore<DramRegion>, fh: store::Fh, first: u64, byte: u8) {
        let data = vec![byte; (SPAN * 4096 - 200) as usize];
        s.write(fh, first * 4096 + 100, &data).expect("overwrite");
    }

    /// With `checkpoint_pending_high`, more pending versions than the mark start a
    /// checkpoint, and `make_room`'s credit (which skips reading the free counts) never lets
    /// an operation start past the mark unseen: after every overwrite at most one
    /// operation's versions beyond the mark are pending. Without the mark, versions pile up
    /// to the log's own mark.
    #[test]
    fn the_pending_mark_starts_checkpoints_and_the_room_credit_never_hides_it() {
        let high = 64;
        let (s, fh) = pool_with_checkpointed_file(high);
        assert_eq!(pending(&s), 0);
        assert_eq!(s.core.room_headroom(), high as i64);
        let mut most = 0;
        for round in 0..3u64 {
            for first in (0..BLOCKS).step_by(SPAN as usize) {
                overwrite(&s, fh, first, (round * 16 + first / SPAN) as u8);
                most = most.max(pending(&s));
                assert!(
                    pending(&s) <= high + SPAN,
                    "{} versions pending after blocks {first}.., mark {high}",
                    pending(&s)
                );
            }
        }
        assert!(most > high, "the writes passed the mark ({most} at most)");
        let checkpoints = s
            .stats()
            .into_iter()
            .find(|(k, _)| k == "checkpoints")
            .map(|(_, v)| v)
            .unwrap_or(0);
        assert!(checkpoints > 0, "the mark started no checkpoint");
        let mut buf = vec![0u8; (SPAN * 4096 - 200) as usize];
        for first in [0, BLOCKS / 2, BLOCKS - SPAN] {
            s.read(fh, first * 4096 + 100, &mut buf).expect("read");
            let want = (2 * 16 + first / SPAN) as u8;
            assert!(buf.iter().all(|&b| b == want), "blocks {first}.. read back");
        }

        let (s, fh) = pool_with_checkpointed_file(0);
        for first in (0..BLOCKS).step_by(SPAN as usize) {
            overwrite(&s, fh, first, 9);
        }
        assert_eq!(
            pending(&s),
            BLOCKS,
            "without the mark nothing was checkpointed"
        );
    }
}
