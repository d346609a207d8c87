//! `ModelStore`: the reference model of the Store API — **a test oracle, not an engine**.
//!
//! Everything lives in one `Mutex`-guarded in-memory state: a map of inodes (files hold a
//! sparse map of 4 KiB blocks, directories a sorted map of names, symbolic links their
//! target), a map of open handles and a map of open transactions. A transaction keeps, for every inode it touched, a snapshot of the
//! inode as it was before its first change (`None` when the transaction created it); abort puts
//! the snapshots back. An inode a transaction created is that transaction's until it ends: a
//! change to it from outside fails with FileInTransaction (`State::check_owner`). O_ATOMIC
//! files keep a snapshot of the file at their first pending write; `fsync`/`syncv` drop it,
//! `abortv`/`release`/a crash put it back.
//!
//! "Durable" in the model means: every transaction that returned from `tx_commit`, every
//! auto-committed call, every fsynced O_ATOMIC write. [`ModelStore::crash`] builds the store a
//! crash at this instant must recover to (open transactions rolled back, pending O_ATOMIC writes
//! dropped, handles closed); the crash harness uses it as its oracle and the conformance suite
//! runs against it, so the suite and the model check each other.
//!
//! It is also the volatile store the front ends (Rust API, FUSE) are tested over when no
//! persistent engine is needed: it has symbolic links (which not every engine has), an
//! optional byte capacity so that "no space" paths can be reached, and `stats` counts the
//! `write` calls it served and the largest one.
//!
//! Nothing here is fast or persistent; it is written to be obviously right.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use store::{
    now_ns, DirEntry, Error, Fallocate, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags,
    RenameMode, Result, SetAttr, StatFs, Store, TxId, XattrSet, NAME_MAX, ROOT_INO,
};

mod posix;
mod state;

use state::{bind, check_name, name_str, Inode, State, Tx};
pub use state::{MODEL_BLOCK, MODEL_FILE_SIZE_MAX};

/// The reference model (see the module documentation). A test oracle, not an engine.
pub struct ModelStore {
    state: Mutex<State>,
    /// `write` calls served and the largest one in bytes (`stats`): front-end tests check
    /// how their calls reach the store. Not part of the state a crash keeps.
    writes: AtomicU64,
    write_max: AtomicU64,
}

impl Default for ModelStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelStore {
    /// An empty store (a root directory only) with unlimited capacity.
    pub fn new() -> Self {
        Self::with_capacity(None)
    }

    /// An empty store holding at most `capacity` bytes of file data (whole 4 KiB blocks,
    /// counting every version a transaction keeps); `None` for unlimited.
    pub fn with_capacity(capacity: Option<u64>) -> Self {
        let mut inodes = HashMap::new();
        inodes.insert(
            ROOT_INO,
            Inode::new(ROOT_INO, FileKind::Dir, 0o755, ROOT_INO),
        );
        Self::from_state(State {
            inodes,
            next_ino: ROOT_INO + 1,
            handles: HashMap::new(),
            next_fh: 1,
            txs: HashMap::new(),
            next_tx: 1,
            atomic_base: HashMap::new(),
            capacity,
            closed: false,
        })
    }

    fn from_state(state: State) -> Self {
        ModelStore {
            state: Mutex::new(state),
            writes: AtomicU64::new(0),
            write_max: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only mutated by complete steps; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        Ok(st)
    }

    /// The store a crash at this instant recovers to: open transactions rolled back, pending
    /// O_ATOMIC writes dropped, no open handles, no open transactions. Works on a closed
    /// store too (then it is the clean reopen).
    pub fn crash(&self) -> ModelStore {
        let mut st = self.lock().clone();
        let txs: Vec<u64> = st.txs.keys().copied().collect();
        for id in txs {
            st.rollback(id);
        }
        let bases: Vec<(Ino, Inode)> = st.atomic_base.drain().collect();
        for (ino, base) in bases {
            if st.inodes.contains_key(&ino) {
                st.inodes.insert(ino, base);
            }
        }
        st.handles.clear();
        st.closed = false;
        st.collect_orphans();
        Self::from_state(st)
    }

    /// A deep copy of the store, handles and transactions included.
    pub fn fork(&self) -> ModelStore {
        Self::from_state(self.lock().clone())
    }

    /// Replace this store's whole state by `other`'s (undo to a [`fork`](Self::fork)).
    pub fn restore(&self, other: ModelStore) {
        let state = other.state.into_inner().unwrap_or_else(|p| p.into_inner());
        *self.lock() = state;
    }

    /// Number of open transactions.
    pub fn open_transactions(&self) -> usize {
        self.lock().txs.len()
    }
}

impl Store for ModelStore {
    fn engine_name(&self) -> String {
        "model".into()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let st = self.live()?;
        check_name(name)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        Ok(st.inode(ino)?.meta)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        Ok(self.live()?.inode(ino)?.meta)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut st = self.live()?;
        st.tx_check(tx)?;
        st.inode(ino)?;
        st.check_owner(&[ino], tx.map(|t| t.0))?;
        st.save(tx.map(|t| t.0), ino);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let m = &mut inode.meta;
        if let Some(perm) = attr.perm {
            m.perm = perm & 0o7777;
        }
        if let Some(uid) = attr.uid {
            m.uid = uid;
        }
        if let Some(gid) = attr.gid {
            m.gid = gid;
        }
        if let Some(t) = attr.atime {
            m.atime = t;
        }
        if let Some(t) = attr.mtime {
            m.mtime = t;
        }
        m.ctime = now_ns();
        Ok(*m)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.live()?
            .new_inode(parent, name, FileKind::File, perm, tx)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.live()?
            .new_inode(parent, name, FileKind::Dir, perm, tx)
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        store::check_symlink_target(target)?;
        let mut st = self.live()?;
        let mut meta = st.new_inode(parent, name, FileKind::Symlink, 0o777, tx)?;
        meta.size = target.len() as u64;
        if let Some(link) = st.inodes.get_mut(&meta.ino) {
            link.meta.size = meta.size;
            link.target = target.to_vec();
        }
        Ok(meta)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let st = self.live()?;
        let inode = st.inode(ino)?;
        if inode.meta.kind != FileKind::Symlink {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symlink"
            )));
        }
        Ok(inode.target.clone())
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
        self.live()?.mknod(parent, name, kind, perm, rdev, tx)
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        self.live()?.tmpfile(parent, perm, flags, tx)
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
        self.live()?
            .rename_with(parent, name, new_parent, new_name, mode, tx)
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        self.live()?.fallocate(fh, op, off, len)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.live()?.getxattr(ino, name)
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.live()?.setxattr(ino, name, value, how, tx)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.live()?.listxattr(ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.live()?.removexattr(ino, name, tx)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut st = self.live()?;
        check_name(name)?;
        st.tx_check(tx)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        if st.inode(ino)?.meta.kind == FileKind::Dir {
            return Err(Error::IsDir(name_str(name)));
        }
        st.check_owner(&[parent, ino], tx.map(|t| t.0))?;
        st.drop_entry(parent, name, tx.map(|t| t.0));
        Ok(())
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut st = self.live()?;
        check_name(name)?;
        st.tx_check(tx)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        let inode = st.inode(ino)?;
        if inode.meta.kind != FileKind::Dir {
            return Err(Error::NotDir(name_str(name)));
        }
        if !inode.entries.is_empty() {
            return Err(Error::NotEmpty(name_str(name)));
        }
        st.check_owner(&[parent, ino], tx.map(|t| t.0))?;
        st.drop_entry(parent, name, tx.map(|t| t.0));
        Ok(())
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.live()?.rename(parent, name, new_parent, new_name, tx)
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut st = self.live()?;
        check_name(new_name)?;
        st.tx_check(tx)?;
        let inode = st.inode(ino)?;
        if inode.meta.kind == FileKind::Dir {
            return Err(Error::NotPermitted("hard link to a directory".into()));
        }
        if inode.meta.nlink == 0 && !inode.linkable {
            // As linkat(2): a file whose last name is gone gets no new one (an unnamed
            // O_TMPFILE file does).
            return Err(Error::NotFound(format!("inode {ino} has no name")));
        }
        if st.dir(new_parent)?.entries.contains_key(new_name) {
            return Err(Error::Exists(name_str(new_name)));
        }
        let tx = tx.map(|t| t.0);
        st.check_owner(&[ino, new_parent], tx)?;
        st.save(tx, new_parent);
        st.save(tx, ino);
        let now = now_ns();
        if let Some(p) = st.inodes.get_mut(&new_parent) {
            p.entries.insert(new_name.to_vec(), ino);
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.meta.nlink += 1;
        inode.meta.ctime = now;
        inode.linkable = false;
        Ok(inode.meta)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let st = self.live()?;
        let dir = st.dir(ino)?;
        dir.entries
            .iter()
            .map(|(name, &child)| {
                Ok(DirEntry {
                    name: name.clone(),
                    ino: child,
                    kind: st.inode(child)?.meta.kind,
                })
            })
            .collect()
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut st = self.live()?;
        let kind = st.inode(ino)?.meta.kind;
        if kind == FileKind::Dir {
            return Err(Error::IsDir(format!("inode {ino}")));
        }
        if kind == FileKind::Symlink {
            // The store never follows a link: opening one is open(O_NOFOLLOW) on it.
            return Err(Error::SymlinkLoop(format!(
                "inode {ino} is a symbolic link"
            )));
        }
        if kind.is_special() {
            return Err(Error::special_open(ino, kind));
        }
        Ok(st.new_handle(ino, flags))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut st = self.live()?;
        let h = st.handle(fh)?;
        if h.flags.atomic && st.open_count(h.ino) == 1 {
            // Pending O_ATOMIC writes not fsynced are dropped, as a crash would drop them.
            if let Some(base) = st.atomic_base.remove(&h.ino) {
                st.inodes.insert(h.ino, base);
            }
        }
        if let Some(tx) = h.tx.and_then(|id| st.txs.get_mut(&id)) {
            tx.handles.remove(&fh.0);
        }
        st.handles.remove(&fh.0);
        st.collect_orphans();
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let st = self.live()?;
        let h = st.handle(fh)?;
        if !h.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        Ok(st.inode(h.ino)?.read(off, buf))
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut st = self.live()?;
        let (ino, h) = st.begin_data_change(fh)?;
        if !data.is_empty() {
            // (A write of no bytes changes nothing: the pool answers it without looking.)
            st.check_owner(&[ino], st.data_tx(ino, &h))?;
        }
        let off = if h.flags.append {
            st.inode(ino)?.meta.size
        } else {
            off
        };
        if off
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > MODEL_FILE_SIZE_MAX)
        {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        st.check_space(ino, off, data.len() as u64)?;
        st.record_change(ino, &h);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.write(off, data);
        inode.touch_data();
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_max
            .fetch_max(data.len() as u64, Ordering::Relaxed);
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut st = self.live()?;
        let (ino, h) = st.begin_data_change(fh)?;
        st.check_owner(&[ino], st.data_tx(ino, &h))?;
        if len > MODEL_FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        st.record_change(ino, &h);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.set_len(len);
        inode.touch_data();
        Ok(())
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut st = self.live()?;
        let h = st.live_handle(fh)?;
        st.atomic_base.remove(&h.ino);
        Ok(())
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let st = self.live()?;
        let h = st.handle(fh)?;
        Ok(st.inode(h.ino)?.meta)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut st = self.live()?;
        let h = st.live_handle(fh)?;
        if !atomic {
            st.atomic_base.remove(&h.ino);
        }
        if let Some(h) = st.handles.get_mut(&fh.0) {
            h.flags.atomic = atomic;
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut st = self.live()?;
        let inos = fhs
            .iter()
            .map(|&fh| st.live_handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        for ino in inos {
            st.atomic_base.remove(&ino);
        }
        Ok(())
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut st = self.live()?;
        let inos = fhs
            .iter()
            .map(|&fh| st.live_handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        for ino in inos {
            if let Some(base) = st.atomic_base.remove(&ino) {
                st.inodes.insert(ino, base);
            }
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut st = self.live()?;
        for &fh in files {
            let h = st.handle(fh)?;
            // A handle on a file whose create was aborted has no file to bind.
            st.inode(h.ino)?;
            if let Some(other) = h.tx {
                return Err(Error::FileInTransaction(other));
            }
            if let Some((&other, _)) = st.txs.iter().find(|(_, t)| {
                t.files.contains(&h.ino)
                    || t.handles
                        .iter()
                        .any(|f| st.handles.get(f).is_some_and(|o| o.ino == h.ino))
            }) {
                return Err(Error::FileInTransaction(other));
            }
            st.check_owner(&[h.ino], None)?;
        }
        let id = st.next_tx;
        st.next_tx += 1;
        st.txs.insert(id, Tx::default());
        for &fh in files {
            bind(&mut st, id, fh);
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut st = self.live()?;
        st.tx_check(Some(tx))?;
        let h = st.handle(fh)?;
        st.inode(h.ino)?;
        if let Some(other) = h.tx {
            return Err(Error::FileInTransaction(other));
        }
        let bound_elsewhere = st
            .txs
            .iter()
            .find(|(&id, t)| {
                id != tx.0
                    && (t.files.contains(&h.ino)
                        || t.handles
                            .iter()
                            .any(|f| st.handles.get(f).is_some_and(|o| o.ino == h.ino)))
            })
            .map(|(&id, _)| id);
        if let Some(other) = bound_elsewhere {
            return Err(Error::FileInTransaction(other));
        }
        st.check_owner(&[h.ino], Some(tx.0))?;
        bind(&mut st, tx.0, fh);
        Ok(())
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut st = self.live()?;
        let t = st.txs.remove(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        for fh in t.handles {
            if let Some(h) = st.handles.get_mut(&fh) {
                h.tx = None;
            }
        }
        st.collect_orphans();
        Ok(())
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut st = self.live()?;
        st.tx_check(Some(tx))?;
        st.rollback(tx.0);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let st = self.live()?;
        let total = st.capacity.unwrap_or(u64::MAX / 2) / MODEL_BLOCK;
        let used = st.used_bytes() / MODEL_BLOCK;
        Ok(StatFs {
            block_size: MODEL_BLOCK,
            blocks_total: total,
            blocks_free: total.saturating_sub(used),
            inodes_total: u64::MAX / 2,
            inodes_free: u64::MAX / 2 - st.inodes.len() as u64,
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let st = self.lock();
        vec![
            ("inodes".into(), st.inodes.len() as u64),
            ("open_handles".into(), st.handles.len() as u64),
            ("open_transactions".into(), st.txs.len() as u64),
            ("writes".into(), self.writes.load(Ordering::Relaxed)),
            (
                "write_max_bytes".into(),
                self.write_max.load(Ordering::Relaxed),
            ),
        ]
    }

    fn fsck(&self) -> Result<FsckReport> {
        Ok(self.lock().fsck())
    }

    fn unmount(&self) -> Result<()> {
        let mut st = self.live()?;
        st.closed = true;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
