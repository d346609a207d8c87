//! Transactions of the store (one cache unit for the data, undo records for the namespace)
//! and the `Store` trait, delegating to the operations of ops.rs and handles.rs.

use super::{CacheStore, Tables, TxState, Undo, TRASH_NAME};
use crate::home::host_err;
use hostfs::HostFs;
use pmem::Region;
use std::any::Any;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use store::{
    DirEntry, Error, Fh, FsckReport, Ino, Metadata, OpenFlags, Result, SetAttr, StatFs, Store,
    TxId, NAME_MAX,
};

impl<R: Region, H: HostFs> CacheStore<R, H> {
    fn bind(t: &mut Tables, tx: u64, fh: Fh) -> Result<()> {
        let h = Self::handle(t, fh)?;
        if let Some(&other) = t.bound.get(&h.ino) {
            if other != tx {
                return Err(Error::FileInTransaction(other));
            }
            return Ok(());
        }
        if let Some(&creator) = t.created_by.get(&h.ino) {
            if creator != tx {
                return Err(Error::FileInTransaction(creator));
            }
        }
        t.bound.insert(h.ino, tx);
        if let Some(s) = t.txs.get_mut(&tx) {
            s.files.push(h.ino);
        }
        Ok(())
    }

    fn unbind(t: &mut Tables, tx: u64, state: &TxState) {
        for ino in &state.files {
            if t.bound.get(ino) == Some(&tx) {
                t.bound.remove(ino);
            }
        }
        t.created_by.retain(|_, c| *c != tx);
    }

    fn trash_path(name: &[u8]) -> std::path::PathBuf {
        Path::new(TRASH_NAME).join(OsStr::from_bytes(name))
    }

    /// Commit: the unit (data and the commit point), then finish the namespace changes
    /// (trash emptied) and free their intents. A crash after the commit point finishes them
    /// at recovery.
    fn commit_tx(&self, tx: u64) -> Result<()> {
        let mut t = self.t.lock();
        let state = t.txs.remove(&tx).ok_or(Error::NoSuchTransaction(tx))?;
        Self::unbind(&mut t, tx, &state);
        if let Some(unit) = state.unit {
            self.cache.commit(unit)?;
        }
        for (undo, slot) in &state.undo {
            if let Undo::Removed { ino, trash, .. } = undo {
                self.before_name_goes(&t, *ino)?;
                remove_path(&*self.host, &Self::trash_path(trash))?;
                if t.keys.contains_key(ino) && !t.names.contains(*ino) {
                    self.drop_file(&mut t, *ino)?;
                }
            }
            self.unintend(*slot);
        }
        Ok(())
    }

    /// Abort: the namespace changes undone in reverse (each intent freed after its undo),
    /// then the unit (its word cleared last: a crash before leaves it open, and recovery
    /// undoes the remaining intents).
    fn abort_tx(&self, tx: u64) -> Result<()> {
        let mut t = self.t.lock();
        let state = t.txs.remove(&tx).ok_or(Error::NoSuchTransaction(tx))?;
        Self::unbind(&mut t, tx, &state);
        for (undo, slot) in state.undo.iter().rev() {
            self.undo(&mut t, undo)?;
            self.unintend(*slot);
        }
        if let Some(unit) = state.unit {
            self.cache.abort(unit)?;
        }
        Ok(())
    }

    fn undo(&self, t: &mut Tables, undo: &Undo) -> Result<()> {
        match undo {
            Undo::Created {
                parent,
                name,
                ino,
                dir,
            } => {
                let p = t.names.child(*parent, name)?;
                if *dir {
                    self.host.rmdir(&p).map_err(host_err)?;
                } else {
                    self.before_name_goes(t, *ino)?;
                    self.host.unlink(&p).map_err(host_err)?;
                }
                self.sync_dir(p.parent().unwrap_or(Path::new("")))?;
                t.names.remove(*ino, *parent, name);
                if !*dir {
                    if t.open_count.get(ino).copied().unwrap_or(0) > 0 {
                        t.gone.insert(*ino);
                    }
                    self.drop_file(t, *ino)?;
                }
            }
            Undo::Removed {
                parent,
                name,
                ino,
                trash,
            } => {
                let to = t.names.child(*parent, name)?;
                self.host
                    .rename(&Self::trash_path(trash), &to)
                    .map_err(host_err)?;
                self.cache.backing().moved(&Self::trash_path(trash), &to);
                self.sync_dir(to.parent().unwrap_or(Path::new("")))?;
                t.names.add(*ino, *parent, name);
                t.orphans.remove(ino);
            }
            Undo::Moved { from, to, ino } => {
                let (a, b) = (t.names.child(to.0, &to.1)?, t.names.child(from.0, &from.1)?);
                self.host.rename(&a, &b).map_err(host_err)?;
                self.cache.backing().moved(&a, &b);
                self.sync_dir(a.parent().unwrap_or(Path::new("")))?;
                self.sync_dir(b.parent().unwrap_or(Path::new("")))?;
                t.names.rename(*ino, to.0, &to.1, from.0, &from.1);
            }
            Undo::Attr {
                ino,
                perm,
                atime,
                mtime,
            } => {
                let p = t.names.path(*ino)?;
                self.host.set_perm(&p, *perm).map_err(host_err)?;
                self.set_times_cached(t, *ino, &p, Some(*atime), Some(*mtime))?;
                // persist: the old attributes are back for good before the intent goes.
                self.host.sync_node(&p).map_err(host_err)?;
            }
            Undo::Linked { parent, name, ino } => {
                let p = t.names.child(*parent, name)?;
                self.host.unlink(&p).map_err(host_err)?;
                self.sync_dir(p.parent().unwrap_or(Path::new("")))?;
                t.names.remove(*ino, *parent, name);
                self.after_name_gone(t, *ino)?;
            }
        }
        Ok(())
    }
}

/// Remove a file or an (empty) directory, durably; nothing when it is gone already.
pub(super) fn remove_path<H: HostFs>(host: &H, p: &Path) -> Result<()> {
    let is_dir = match host.stat(p) {
        Ok(st) => st.kind == hostfs::FileKind::Dir,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(host_err(e)),
    };
    if is_dir {
        host.rmdir(p).map_err(host_err)?;
    } else {
        host.unlink(p).map_err(host_err)?;
    }
    // persist: the removal is durable.
    host.sync_dir(p.parent().unwrap_or(Path::new("")))
        .map_err(host_err)
}

impl<R: Region, H: HostFs> Store for CacheStore<R, H> {
    fn engine_name(&self) -> String {
        "cache".into()
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.check_open()?;
        self.do_lookup(parent, name)
    }
    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.check_open()?;
        let t = self.t.lock();
        if let Some(&key) = t.keys.get(&ino) {
            // The seed's stat() rule: the home file is brought up to date first (written,
            // not synced: the data is durable in PM already).
            let _ = self.cache.show_file(key);
        }
        self.meta(&t, ino)
    }
    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.check_open()?;
        self.do_setattr(ino, attr, tx)
    }
    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check_open()?;
        self.do_create(parent, name, perm, tx, false)
    }
    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check_open()?;
        self.do_create(parent, name, perm, tx, true)
    }
    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check_open()?;
        self.do_remove(parent, name, tx, false)
    }
    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check_open()?;
        self.do_remove(parent, name, tx, true)
    }
    fn rename(&self, parent: Ino, name: &[u8], np: Ino, nn: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check_open()?;
        self.do_rename(parent, name, np, nn, tx)
    }
    fn link(&self, ino: Ino, np: Ino, nn: &[u8], tx: Option<TxId>) -> Result<Metadata> {
        self.check_open()?;
        self.do_link(ino, np, nn, tx)
    }
    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        self.check_open()?;
        self.do_read_dir(ino)
    }
    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.check_open()?;
        self.do_open(ino, flags)
    }
    fn release(&self, fh: Fh) -> Result<()> {
        self.check_open()?;
        self.do_release(fh)
    }
    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_open()?;
        self.do_read(fh, off, buf)
    }
    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.check_open()?;
        self.do_write(fh, off, data)
    }
    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.check_open()?;
        self.do_set_len(fh, len)
    }
    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        self.check_open()?;
        self.do_fsync(fh)
    }
    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        self.check_open()?;
        let t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if let Some(&key) = t.keys.get(&h.ino) {
            // The seed's stat() rule: the home file is brought up to date first (written,
            // not synced: the data is durable in PM already).
            let _ = self.cache.show_file(key);
        }
        self.meta(&t, h.ino)
    }
    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        self.check_open()?;
        self.do_set_atomic(fh, atomic)
    }
    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        self.check_open()?;
        if fhs.is_empty() {
            // Nothing to commit: this engine takes it as sync(2) of the store — every
            // dirty chunk home, synced (`atomfs flush` through a serving process).
            return self.cache.flush_all().map(|_| ());
        }
        self.do_syncv(fhs, true)
    }
    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        self.check_open()?;
        self.do_syncv(fhs, false)
    }
    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.check_open()?;
        let mut t = self.t.lock();
        for fh in files {
            let h = Self::handle(&t, *fh)?;
            if let Some(&other) = t.bound.get(&h.ino) {
                return Err(Error::FileInTransaction(other));
            }
            if let Some(&creator) = t.created_by.get(&h.ino) {
                return Err(Error::FileInTransaction(creator));
            }
        }
        let id = self.next_tx.fetch_add(1, Ordering::Relaxed);
        t.txs.insert(
            id,
            TxState {
                unit: None,
                files: Vec::new(),
                undo: Vec::new(),
            },
        );
        for fh in files {
            Self::bind(&mut t, id, *fh)?;
        }
        Ok(TxId(id))
    }
    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        self.check_open()?;
        let mut t = self.t.lock();
        if !t.txs.contains_key(&tx.0) {
            return Err(Error::NoSuchTransaction(tx.0));
        }
        Self::bind(&mut t, tx.0, fh)
    }
    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.check_open()?;
        self.commit_tx(tx.0)
    }
    fn tx_abort(&self, tx: TxId) -> Result<()> {
        self.check_open()?;
        self.abort_tx(tx.0)
    }
    fn statfs(&self) -> Result<StatFs> {
        self.check_open()?;
        let s = self.host.statfs().map_err(host_err)?;
        // What the store holds: its files' data, wherever it is now (PM or home).
        let own: u64 = {
            let t = self.t.lock();
            t.keys
                .keys()
                .filter_map(|&ino| self.meta(&t, ino).ok())
                .map(|m| m.size.div_ceil(4096) * 4096)
                .sum()
        };
        let (total, free) = self.usage.free(&s, own);
        let bs = s.block_size.max(1);
        Ok(StatFs {
            block_size: bs,
            blocks_total: total / bs,
            blocks_free: free / bs,
            inodes_total: self.cache.geometry().files_max(),
            inodes_free: self
                .cache
                .geometry()
                .files_max()
                .saturating_sub(self.t.lock().keys.len() as u64),
            name_max: NAME_MAX as u64,
        })
    }
    fn stats(&self) -> Vec<(String, u64)> {
        let mut out = self.cache.stats();
        let home = self.cache.backing();
        let io = home.flush_io();
        out.push((
            "flush_direct".into(),
            u64::from(io == crate::home::FlushIo::Direct),
        ));
        // 0 direct; 1 no O_DIRECT; 2 no untorn direct 4 KiB write; 3 a direct write failed.
        out.push(("flush_buffered_reason".into(), io.reason_code()));
        out.push(("flush_direct_writes".into(), home.direct_writes()));
        out
    }
    fn limits(&self) -> Result<Vec<store::Limit>> {
        let mut all = store::common_limits(&self.statfs()?);
        all.extend(self.cache.limits()?);
        let (open, max) = self.cache.backing().descriptors();
        all.push(store::Limit::new(
            "home files open (descriptors; past it one is closed, reopened by path when needed)",
            max,
            Some(open),
            "none",
        ));
        Ok(all)
    }
    fn fsck(&self) -> Result<FsckReport> {
        self.check_open()?;
        let _t = self.t.lock();
        self.cache.fsck()
    }
    fn unmount(&self) -> Result<()> {
        self.check_open()?;
        let txs: Vec<u64> = self.t.lock().txs.keys().copied().collect();
        for tx in txs {
            self.abort_tx(tx)?;
        }
        let units: Vec<_> = self.t.lock().atomic_units.drain().map(|(_, u)| u).collect();
        for unit in units {
            self.cache.abort(unit)?;
        }
        self.flusher.lock().take();
        self.cache.flush_all()?;
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    /// Write every dirty chunk home, the home files synced (`atomfs flush`): other readers
    /// of the home directory see every write acknowledged before this call. Chunks of open
    /// transactions wait for their commit. Returns the chunks written.
    pub fn flush_home(&self) -> Result<usize> {
        self.check_open()?;
        self.cache.flush_all()
    }
}

impl<R: Region, H: HostFs> Drop for CacheStore<R, H> {
    fn drop(&mut self) {
        // Stop the flusher before the cache goes (nothing else: a drop is a crash).
        self.flusher.lock().take();
    }
}
