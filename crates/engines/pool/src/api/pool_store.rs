//! `PoolStore`: the pool engine behind the `store::Store` trait.

use crate::alloc::U64Map;
use crate::checkpoint::checkpoint_thread;
use crate::config::{Mode, PoolConfig};
use crate::core::{Core, InodeCell};
use crate::log::transaction::{Tx, TxCell};
use crate::media::layout::*;
use crate::recovery::recover::{self as recovery, RecoveryReport};
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use store::path::check_entry_name;
use store::*;

/// An open file.
pub(crate) struct Handle {
    pub(crate) ino: u64,
    pub(crate) flags: OpenFlags,
    pub(crate) cell: Arc<InodeCell>,
    pub(crate) atomic: AtomicBool,
    /// The O_ATOMIC transaction collecting this handle's writes since the last fsync.
    pub(crate) implicit: Mutex<Option<Arc<TxCell>>>,
}

/// The open explicit (and O_ATOMIC) transactions by id, and finished cells kept for reuse.
#[derive(Default)]
pub(crate) struct TxTable {
    pub(crate) open: U64Map<Arc<TxCell>>,
    /// Cells of committed transactions that nobody else referenced any more, their `Tx`
    /// reset (`Core::reset_tx`): a transaction reuses one instead of allocating a cell and
    /// moving a `Tx` into it and out of it again (`PoolStore::begin_tx`).
    pub(crate) spare: Vec<Arc<TxCell>>,
}

/// A pool over a persistent-memory region.
pub struct PoolStore<R: Region> {
    pub(crate) core: Arc<Core<R>>,
    pub(crate) handles: RwLock<U64Map<Arc<Handle>>>,
    next_fh: AtomicU64,
    pub(crate) txs: Mutex<TxTable>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    report: RecoveryReport,
}

impl<R: Region> PoolStore<R> {
    /// Format `region` as an empty pool (geometry from `cfg`) and open it.
    pub fn format(region: Arc<R>, cfg: &PoolConfig) -> Result<Self> {
        recovery::format(&*region, cfg)?;
        Self::open(region, cfg)
    }

    /// Open a formatted pool, running recovery. Geometry comes from the superblock, runtime
    /// knobs from `cfg`.
    pub fn open(region: Arc<R>, cfg: &PoolConfig) -> Result<Self> {
        let (core, report) = recovery::open_core(region, cfg)?;
        let core = Arc::new(core);
        let threads = match cfg.mode {
            Mode::Nc | Mode::FgWal | Mode::Scsp | Mode::Sync => 0,
            Mode::Soc => cfg.checkpoint_threads.min(1),
            Mode::Fcfs => cfg.checkpoint_threads,
        };
        let mut handles = Vec::new();
        for i in 0..threads {
            let (c, q) = (core.clone(), core.checkpointer.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("pool-ckpt-{i}"))
                .spawn(move || checkpoint_thread(c, q));
            handles.push(spawned.map_err(|e| Error::Io {
                path: "checkpoint thread".into(),
                op: "spawn",
                source: e,
            })?);
        }
        Ok(PoolStore {
            core,
            handles: RwLock::new(U64Map::default()),
            next_fh: AtomicU64::new(1),
            txs: Mutex::new(TxTable::default()),
            threads: Mutex::new(handles),
            report,
        })
    }

    /// What the recovery of the last open did.
    pub fn last_recovery(&self) -> RecoveryReport {
        self.report.clone()
    }

    /// Checkpoint every committed version now.
    pub fn checkpoint_all(&self) -> Result<()> {
        self.core.checkpoint_all()
    }

    /// The region the pool lives in.
    pub fn region(&self) -> &Arc<R> {
        &self.core.region
    }

    /// The configuration in force.
    pub fn config(&self) -> &PoolConfig {
        &self.core.cfg
    }

    pub(crate) fn handle(&self, fh: Fh) -> Result<Arc<Handle>> {
        let h = self.open_handle(fh)?;
        check_live(&h.cell.lock(), h.ino)?;
        Ok(h)
    }

    /// `handle` without the check that its file still exists, for the read and write paths,
    /// which check it under the inode lock they take anyway (`check_live`).
    pub(crate) fn open_handle(&self, fh: Fh) -> Result<Arc<Handle>> {
        self.core.check_open()?;
        self.handles
            .read()
            .get(&fh.0)
            .cloned()
            .ok_or(Error::BadHandle(fh.0))
    }

    fn stop_threads(&self) {
        self.core.checkpointer.stop.store(true, Ordering::Release);
        self.core.checkpointer.wake.notify_all();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }

    /// Make room before a data operation needing about `blocks` blocks: when free blocks or
    /// log slots run short, checkpoint here just until they no longer are (the background
    /// threads did not keep up); when they run low, wake the background threads (or, with
    /// none, checkpoint everything here). No lock is held here.
    fn make_room(&self, blocks: u64) {
        let core = &self.core;
        // An operation takes at most `blocks + 16` numbers of any list (`short_of_room`'s
        // margins). While the credit lasts, no list can have reached a low-water mark since
        // the last look, so the free counts (which sum lines the checkpoint threads write)
        // are not read on every operation.
        let need = (blocks + 16) as i64;
        if core.room_credit.fetch_sub(need, Ordering::Relaxed) >= need {
            return;
        }
        let short = || self.short_of_room(blocks, 1);
        if short() {
            core.counters
                .foreground_checkpoints
                .fetch_add(1, Ordering::Relaxed);
            core.checkpointer.push_all();
            let _ = core.checkpoint_while(short);
            return;
        }
        let room = core.room_headroom();
        if room < 0 {
            // A low-water mark passed (`blocks_low` or `logs_low`).
            if core.cfg.checkpoint_threads == 0 {
                let _ = core.checkpoint_all();
            } else {
                core.checkpointer.push_all();
            }
        } else {
            // Half the distance to the nearest mark: numbers taken outside data operations
            // (commit slots, namespace operations) do not count against the credit.
            core.room_credit.store(room / 2, Ordering::Relaxed);
        }
    }

    /// Run a data operation (write, set_len) on the file of `fh` in the transaction its
    /// file is bound to, else in an O_ATOMIC implicit transaction, else in its own. When the
    /// operation finds too little room before it changed anything (another thread took the
    /// room `make_room` made), room is made again and it runs again, `ROOM_RETRIES` times at
    /// most; the last try fails the transaction as a full pool does.
    pub(crate) fn data_op<T>(
        &self,
        h: &Handle,
        fh: Fh,
        blocks: u64,
        op: impl Fn(&Core<R>, &mut crate::core::InodeState, &mut Tx) -> Result<T>,
    ) -> Result<T> {
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        self.make_room(blocks);
        let mut tries = 0;
        loop {
            tries += 1;
            match self.data_op_once(h, &op, tries < ROOM_RETRIES) {
                Some(result) => return result,
                None => self.make_more_room(blocks, tries),
            }
        }
    }

    /// After a data operation found too little room: checkpoint in this thread until twice
    /// the operation's needs are free, and everything on the third shortage in a row.
    fn make_more_room(&self, blocks: u64, tries: u32) {
        let core = &self.core;
        core.counters
            .foreground_checkpoints
            .fetch_add(1, Ordering::Relaxed);
        core.checkpointer.push_all();
        if tries >= 3 {
            let _ = core.checkpoint_all();
        } else {
            let _ = core.checkpoint_while(|| self.short_of_room(blocks, 2));
        }
    }

    /// Fewer than `times` × what an operation needing `blocks` blocks may take (plus a
    /// margin) free blocks, data log slots or metadata log slots?
    fn short_of_room(&self, blocks: u64, times: u64) -> bool {
        let core = &self.core;
        core.blocks.free_count() < times * (blocks + 8)
            || core.data_slots.free_count() < times * (blocks + 2)
            || core.meta_slots.free_count() < times * (blocks + 16)
    }

    /// One try of `data_op`: None when the operation found too little room before it
    /// changed anything (only with `may_retry`; the transaction stays as it was).
    fn data_op_once<T>(
        &self,
        h: &Handle,
        op: &impl Fn(&Core<R>, &mut crate::core::InodeState, &mut Tx) -> Result<T>,
        may_retry: bool,
    ) -> Option<Result<T>> {
        if h.atomic.load(Ordering::Acquire) {
            if let Err(e) = self.open_implicit(h) {
                return Some(Err(e));
            }
        }
        let mut st = h.cell.lock_spinning();
        if let Err(e) = check_live(&st, h.ino) {
            return Some(Err(e));
        }
        if let Some(cell) = st.bound.clone() {
            let mut tx = cell.lock();
            if tx.state.is_open() {
                tx.fenced_all = false;
                tx.reservation.allow_retry(may_retry);
                let result = op(&self.core, &mut st, &mut tx);
                let short = tx.reservation.take_shortage();
                self.core.reflush_unfenced(&mut tx);
                // persist: the operation's data, log entries and flushes are durable (a fence
                // orders only its own thread's flushes, and another thread may commit).
                self.core.region.fence();
                self.core.fenced(&mut tx);
                tx.fenced_all = true;
                if result.is_err() && short && !tx.state.is_doomed() {
                    return None;
                }
                if result.is_err() && tx.state.is_doomed() {
                    let id = tx.id;
                    drop(tx);
                    drop(st);
                    let _ = self.abort_id(id);
                }
                return Some(result);
            }
        }
        // Nor is an automatic one (namespace/creates.rs: the file would outlive an aborted create).
        if let Err(e) = self.core.creates.check(h.ino, 0) {
            return Some(Err(e));
        }
        let core = &self.core;
        let mut short = false;
        // An automatic transaction that fell short changed nothing: its abort is empty.
        let result = self.auto_tx(&mut st, |st, tx| {
            tx.reservation.allow_retry(may_retry);
            let result = op(core, st, tx);
            short = result.is_err() && tx.reservation.take_shortage() && !tx.state.is_doomed();
            result
        });
        if short {
            None
        } else {
            Some(result)
        }
    }

    /// Open the O_ATOMIC implicit transaction of a handle if it has none (or its last one
    /// ended) and its file is not bound to a transaction.
    fn open_implicit(&self, h: &Handle) -> Result<()> {
        let mut implicit = h.implicit.lock();
        let unbound = {
            let st = h.cell.lock();
            check_live(&st, h.ino)?;
            st.bound_id == 0
        };
        if implicit.as_ref().is_none_or(|t| !t.lock().state.is_open()) && unbound {
            // An implicit transaction is never the one that created the file.
            self.core.creates.check(h.ino, 0)?;
            let (cell, id) = self.begin_tx()?;
            if let Err(e) = self.bind(&cell, id, h) {
                let _ = self.abort_id(id);
                return Err(e);
            }
            *implicit = Some(cell);
        }
        Ok(())
    }

    /// Run a namespace operation in `tx`, or in its own transaction.
    pub(crate) fn ns_op<T>(
        &self,
        tx: Option<TxId>,
        op: impl FnOnce(&Core<R>, &mut Tx) -> Result<T>,
    ) -> Result<T> {
        self.core.check_open()?;
        let _ns = self.core.ns.lock();
        match tx {
            Some(id) => {
                let cell = self.tx_cell(id.0)?;
                let mut t = cell.lock();
                if !t.state.is_open() {
                    return Err(Error::NoSuchTransaction(id.0));
                }
                t.fenced_all = false;
                let result = op(&self.core, &mut t);
                self.core.reflush_unfenced(&mut t);
                // persist: as in data_op, nothing of this thread stays unfenced.
                self.core.region.fence();
                self.core.fenced(&mut t);
                t.fenced_all = true;
                if result.is_err() && t.state.is_doomed() {
                    drop(t);
                    let _ = self.abort_cell(&cell);
                }
                result
            }
            None => {
                let cell = Arc::new(Mutex::new(self.core.tx_new()?));
                let result = op(&self.core, &mut cell.lock());
                match result {
                    Ok(v) => {
                        drop(_ns);
                        self.commit_cell(&cell)?;
                        Ok(v)
                    }
                    Err(e) => {
                        self.abort_cell(&cell)?;
                        Err(e)
                    }
                }
            }
        }
    }

    /// Take the handle's O_ATOMIC transaction, if it is still open (one rolled back by a
    /// failed write has nothing left to commit or drop).
    fn implicit_of(&self, fh: Fh) -> Result<Option<Arc<TxCell>>> {
        let taken = self.handle(fh)?.implicit.lock().take();
        Ok(taken.filter(|cell| cell.lock().state.is_open()))
    }
}

impl<R: Region> Drop for PoolStore<R> {
    fn drop(&mut self) {
        // Dropping without unmount is an unclean stop: nothing more is written.
        self.stop_threads();
    }
}

impl<R: Region> Store for PoolStore<R> {
    fn engine_name(&self) -> String {
        match self.core.mode() {
            Mode::Fcfs => "pool".into(),
            m => format!("pool-{}", m.name()),
        }
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.core.check_open()?;
        let slot = self.core.lookup_slot(parent, name)?;
        self.core.metadata(slot.ino)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.core.check_open()?;
        self.core.metadata(ino)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.ns_op(tx, |core, t| core.set_attr(t, ino, attr))?;
        self.core.metadata(ino)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        check_entry_name(name)?;
        let ino = self.ns_op(tx, |core, t| {
            core.create_node(t, parent, name, KIND_FILE, perm)
        })?;
        self.core.metadata(ino)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        check_entry_name(name)?;
        let ino = self.ns_op(tx, |core, t| {
            core.create_node(t, parent, name, KIND_DIR, perm)
        })?;
        self.core.metadata(ino)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_entry_name(name)?;
        self.ns_op(tx, |core, t| core.remove_entry(t, parent, name, false))
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_entry_name(name)?;
        self.ns_op(tx, |core, t| core.remove_entry(t, parent, name, true))
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        self.ns_op(tx, |core, t| {
            core.rename_entry(t, parent, name, new_parent, new_name)
        })
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(new_name)?;
        self.ns_op(tx, |core, t| core.link_entry(t, ino, new_parent, new_name))?;
        self.core.metadata(ino)
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.make_symlink(parent, name, target, tx)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.core.check_open()?;
        self.core.read_target(ino)
    }

    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.make_special(parent, name, kind, perm, rdev, tx)
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        self.unnamed_file(parent, perm, flags, tx)
    }

    fn rename_with(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.rename_in_mode(parent, name, new_parent, new_name, mode, tx)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        self.core.check_open()?;
        self.core.list_dir(ino)
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.core.check_open()?;
        let kind = self.core.inode_kind(ino)?;
        match kind {
            KIND_FILE => {}
            KIND_DIR => return Err(Error::IsDir(format!("inode {ino}"))),
            KIND_SYMLINK => {
                return Err(Error::SymlinkLoop(format!(
                    "inode {ino} is a symbolic link (the store never follows one)"
                )))
            }
            other => {
                let kind = crate::namespace::dir::kind_of(other);
                return Err(Error::special_open(ino, kind));
            }
        }
        let mut handles = self.handles.write();
        if handles.len() >= self.core.cfg.open_files_max {
            return Err(Error::TooMany {
                what: "open files",
                max: self.core.cfg.open_files_max as u64,
            });
        }
        let cell = self.core.cell(ino);
        cell.lock().open_handles += 1;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let handle = Handle {
            ino,
            flags,
            cell,
            atomic: AtomicBool::new(flags.atomic),
            implicit: Mutex::new(None),
        };
        handles.insert(fh, Arc::new(handle));
        Ok(Fh(fh))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        self.core.check_open()?;
        let h = self
            .handles
            .write()
            .remove(&fh.0)
            .ok_or(Error::BadHandle(fh.0))?;
        let implicit = h.implicit.lock().take();
        let _ns = self.core.ns.lock();
        if let Some(cell) = implicit {
            let _ = self.abort_cell(&cell);
        }
        let last = {
            let mut st = h.cell.lock();
            st.open_handles = st.open_handles.saturating_sub(1);
            st.open_handles == 0
        };
        if last {
            self.reap(h.ino)?;
        }
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let h = self.open_handle(fh)?;
        if !h.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        let st = h.cell.lock_spinning();
        check_live(&st, h.ino)?;
        self.core.read_data(&st, off, buf)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let h = self.open_handle(fh)?;
        if data.is_empty() {
            // As write(2) with no bytes: EBADF on a handle not open for writing.
            if !h.flags.write {
                return Err(Error::BadMode(fh.0, "writing"));
            }
            check_live(&h.cell.lock(), h.ino)?;
            return Ok(0);
        }
        let append = h.flags.append;
        let blocks = data.len() as u64 / BLOCK_SIZE + 2;
        self.data_op(&h, fh, blocks, |core, st, tx| {
            let off = if append {
                core.read_u64(core.geo.inode(st.ino) + I_SIZE)
            } else {
                off
            };
            core.write_data(st, tx, off, data)
        })?;
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let h = self.open_handle(fh)?;
        self.data_op(&h, fh, 2, |core, st, tx| core.set_len_data(st, tx, len))
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let h = self.open_handle(fh)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        let blocks = (len / BLOCK_SIZE).min(1 << 16) + 2;
        self.data_op(&h, fh, blocks, |core, st, tx| {
            core.fallocate_data(st, tx, op, off, len)
        })
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        // Every call outside a transaction is durable when it returns; an O_ATOMIC file
        // commits its implicit transaction here.
        match self.implicit_of(fh)? {
            Some(cell) => self.commit_cell(&cell),
            None => Ok(()),
        }
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let h = self.handle(fh)?;
        self.core.metadata(h.ino)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let h = self.handle(fh)?;
        h.atomic.store(atomic, Ordering::Release);
        if !atomic {
            if let Some(cell) = h.implicit.lock().take() {
                return self.commit_cell(&cell);
            }
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut cells: Vec<(u64, Arc<TxCell>)> = Vec::new();
        for &fh in fhs {
            if let Some(cell) = self.implicit_of(fh)? {
                let id = cell.lock().id;
                if !cells.iter().any(|(i, _)| *i == id) {
                    cells.push((id, cell));
                }
            }
        }
        cells.sort_by_key(|(id, _)| *id);
        let cells: Vec<_> = cells.into_iter().map(|(_, c)| c).collect();
        if cells.is_empty() {
            return Ok(());
        }
        self.merge_group(&cells)?;
        self.commit_cell(&cells[0])
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        for &fh in fhs {
            if let Some(cell) = self.implicit_of(fh)? {
                let _ns = self.core.ns.lock();
                self.abort_cell(&cell)?;
            }
        }
        Ok(())
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.xattr_get(ino, name)
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.xattr_change(ino, name, Some(value), how, tx)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.xattr_list(ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.xattr_change(ino, name, None, XattrSet::Either, tx)
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.core.check_open()?;
        let (cell, id) = self.begin_tx()?;
        for &fh in files {
            // `bind` checks that the file still exists, under the inode lock it takes.
            if let Err(e) = self.open_handle(fh).and_then(|h| self.bind(&cell, id, &h)) {
                let _ = self.abort_id(id);
                return Err(e);
            }
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let cell = self.tx_cell(tx.0)?;
        let h = self.open_handle(fh)?;
        self.bind(&cell, tx.0, &h)
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.core.check_open()?;
        // Out of the table at once (`commit_cell` would take it out anyway): the table's
        // reference becomes this call's, no second lookup or count.
        let cell = (self.txs.lock().open.remove(&tx.0)).ok_or(Error::NoSuchTransaction(tx.0))?;
        self.commit_cell(&cell)
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        self.core.check_open()?;
        self.abort_id(tx.0)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.core.check_open()?;
        let core = &self.core;
        Ok(StatFs {
            block_size: BLOCK_SIZE,
            blocks_total: core.geo.block_count - 1,
            blocks_free: core.blocks.free_count(),
            inodes_total: core.geo.inode_count - 1,
            inodes_free: core.inodes_free.free_count(),
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        crate::recovery::inspect::counters(&self.core, self.txs.lock().open.len() as u64)
    }

    fn limits(&self) -> Result<Vec<store::Limit>> {
        use store::Limit;
        let mut all = store::common_limits(&self.statfs()?);
        let (core, cfg) = (&self.core, &self.core.cfg);
        let stat = |name: &str| {
            self.stats()
                .into_iter()
                .find_map(|(k, v)| (k == name).then_some(v))
        };
        all.push(Limit::new(
            "open files",
            cfg.open_files_max as u64,
            Some(self.handles.read().len() as u64),
            "EMFILE",
        ));
        all.push(Limit::new(
            "open transactions",
            cfg.open_transactions_max as u64,
            Some(self.txs.lock().open.len() as u64),
            "EMFILE",
        ));
        // What one transaction (or several at once) may change: its namespace and inode
        // records take metadata log entries, its new block versions data log entries; the
        // write that does not fit fails, and the transaction can be aborted cleanly.
        all.push(Limit::new(
            "metadata log entries (inodes, names, ranges per transaction)",
            core.meta_slots.total(),
            stat("metadata_log_used"),
            "ENOSPC",
        ));
        all.push(Limit::new(
            "data log entries (blocks rewritten per transaction)",
            core.data_slots.total(),
            stat("data_log_used"),
            "ENOSPC",
        ));
        all.push(Limit::new(
            "extended attribute record bytes per inode (names + values + 5 each)",
            crate::namespace::xattr_record::XATTR_STREAM_MAX as u64,
            None,
            "ENOSPC",
        ));
        all.push(Limit::new(
            "pending versions (checkpoint backlog: past it, writes checkpoint first)",
            cfg.pending_versions_max as u64,
            stat("pending_versions"),
            "none",
        ));
        Ok(all)
    }

    fn fsck(&self) -> Result<FsckReport> {
        self.core.check_open()?;
        // Background checkpointing waits (it takes no other lock while holding `pause`).
        let _paused = self.core.checkpointer.pause.write();
        let _ns = self.core.ns.lock();
        let open: Vec<u64> = self.txs.lock().open.keys().copied().collect();
        crate::recovery::fsck::fsck(&self.core, &open)
    }

    fn unmount(&self) -> Result<()> {
        self.core.check_open()?;
        let open: Vec<u64> = self.txs.lock().open.keys().copied().collect();
        for id in open {
            let _ = self.abort_id(id);
        }
        self.stop_threads();
        self.core.checkpoint_all()?;
        self.core.closed.store(true, Ordering::Release);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Tries of a data operation that finds too little room (`PoolStore::data_op`).
const ROOM_RETRIES: u32 = 4;

/// A handle's file is gone when the transaction that created it aborted while the handle was
/// open (log/transaction.rs `abort_persist`): every operation through it is NotFound.
pub(crate) fn check_live(st: &crate::core::InodeState, ino: u64) -> Result<()> {
    if st.gone {
        return Err(Error::NotFound(format!("inode {ino}")));
    }
    Ok(())
}
