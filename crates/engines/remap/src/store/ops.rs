//! The [`Store`] implementation: the namespace semantics of `namespace::state` (those of
//! the conformance model), with every change made durable at its commit point: a call
//! outside a transaction commits at once (as its own internal transaction), a transaction's
//! changes at `tx_commit`, an O_ATOMIC file's pending writes at `fsync`/`syncv` (as one).

use super::{Inner, RemapStore};
use crate::format::ops::Op;
use crate::format::{BLOCK, FILE_SIZE_MAX};
use crate::host_err;
use crate::namespace::inode::Naming;
use crate::namespace::state::{bind, check_name, name_str, Handle, State, Tx};
use crate::CheckpointMode;
use hostfs::HostFs;
use std::any::Any;
use store::{
    now_ns, DirEntry, Error, Fallocate, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags,
    RenameMode, Result, SetAttr, StatFs, Store, TxId, XattrSet, NAME_MAX,
};

impl<H: HostFs> RemapStore<H> {
    /// Run a namespace change. Inside transaction `tx` it joins it; outside any, it runs as
    /// an internal transaction committed (durably) before this returns.
    pub(super) fn ns<T>(
        &self,
        tx: Option<TxId>,
        f: impl FnOnce(&mut State, Option<TxId>) -> Result<T>,
    ) -> Result<T> {
        let mut g = self.live()?;
        if tx.is_some() {
            return f(&mut g.st, tx);
        }
        g.healthy()?;
        let id = g.st.next_tx;
        g.st.next_tx += 1;
        g.st.txs.insert(id, Tx::default());
        match f(&mut g.st, Some(TxId(id))) {
            Ok(v) => {
                // (The internal transaction binds no handle, and the operations that can
                // orphan an inode collect orphans themselves: no O(inodes) walk per call.)
                let t = g.st.txs.remove(&id).unwrap_or_default();
                g.commit(t.undo.keys().copied().collect(), t.log)?;
                Ok(v)
            }
            Err(e) => {
                g.st.rollback(id);
                Err(e)
            }
        }
    }

    /// After a data change of `ino` through `h`: commit it now unless it belongs to a
    /// transaction or to pending O_ATOMIC writes.
    pub(super) fn after_data_change(g: &mut Inner<H>, ino: Ino, h: &Handle) -> Result<()> {
        if g.st.data_tx(ino, h).is_some() || g.st.atomic_base.contains_key(&ino) {
            return Ok(());
        }
        g.commit(vec![ino], Vec::new())
    }
}

impl<H: HostFs> Store for RemapStore<H> {
    fn engine_name(&self) -> String {
        match self.inner.lock().mode {
            CheckpointMode::Remap => "remap".into(),
            CheckpointMode::Copy => "remap (copy-checkpoint)".into(),
        }
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let g = self.live()?;
        check_name(name)?;
        let ino = *g
            .st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        Ok(g.st.inode(ino)?.meta)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        Ok(self.live()?.st.inode(ino)?.meta)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.ns(tx, |st, tx| {
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
        })
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.ns(tx, |st, tx| {
            st.new_inode(parent, name, FileKind::File, perm, tx)
        })
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.ns(tx, |st, tx| {
            st.new_inode(parent, name, FileKind::Dir, perm, tx)
        })
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.do_symlink(parent, name, target, tx)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.do_readlink(ino)
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
        self.do_mknod(parent, name, kind, perm, rdev, tx)
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        self.do_tmpfile(parent, perm, flags, tx)
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
        self.do_rename_with((parent, name), (new_parent, new_name), mode, tx)
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        self.do_fallocate(fh, op, off, len)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.do_getxattr(ino, name)
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.do_setxattr(ino, name, value, how, tx)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.do_listxattr(ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.do_removexattr(ino, name, tx)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.ns(tx, |st, tx| {
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
        })
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.ns(tx, |st, tx| {
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
        })
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.ns(tx, |st, tx| {
            st.rename(parent, name, new_parent, new_name, tx)
        })
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.ns(tx, |st, tx| link(st, ino, new_parent, new_name, tx))
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let g = self.live()?;
        let dir = g.st.dir(ino)?;
        dir.entries
            .iter()
            .map(|(name, &child)| {
                Ok(DirEntry {
                    name: name.clone(),
                    ino: child,
                    kind: g.st.inode(child)?.meta.kind,
                })
            })
            .collect()
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut g = self.live()?;
        let max = g.config.open_files_max;
        let st = &mut g.st;
        match st.inode(ino)?.meta.kind {
            FileKind::Dir => return Err(Error::IsDir(format!("inode {ino}"))),
            // The store never follows a link: opening one is open(O_NOFOLLOW) on it.
            FileKind::Symlink => {
                return Err(Error::SymlinkLoop(format!(
                    "inode {ino} is a symbolic link"
                )))
            }
            kind if kind.is_special() => return Err(Error::special_open(ino, kind)),
            _ => {}
        }
        if st.handles.len() as u64 >= max {
            return Err(Error::TooMany {
                what: "open files",
                max,
            });
        }
        let fh = st.next_fh;
        st.next_fh += 1;
        st.handles.insert(
            fh,
            Handle {
                ino,
                flags,
                tx: None,
            },
        );
        Ok(Fh(fh))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut g = self.live()?;
        let st = &mut g.st;
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
        st.collect_orphan(h.ino);
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let mut g = self.live()?;
        let Inner { st, media, .. } = &mut *g;
        let h = st.handle(fh)?;
        if !h.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        st.inode(h.ino)?.read(media, off, buf)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut g = self.live()?;
        let (ino, h) = g.st.begin_data_change(fh)?;
        if !data.is_empty() {
            g.st.check_owner(&[ino], g.st.data_tx(ino, &h))?;
        }
        g.healthy()?;
        let off = if h.flags.append {
            g.st.inode(ino)?.meta.size
        } else {
            off
        };
        if off
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > FILE_SIZE_MAX)
        {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        if data.is_empty() {
            return Ok(0);
        }
        g.check_pending_room(ino, off, data.len() as u64)?;
        g.st.record_change(ino, &h);
        let Inner { st, media, .. } = &mut *g;
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.write(media, off, data)?;
        inode.touch_data();
        Self::after_data_change(&mut g, ino, &h)?;
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut g = self.live()?;
        let (ino, h) = g.st.begin_data_change(fh)?;
        g.st.check_owner(&[ino], g.st.data_tx(ino, &h))?;
        g.healthy()?;
        if len > FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        g.st.record_change(ino, &h);
        let Inner { st, media, .. } = &mut *g;
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.set_len(media, len)?;
        inode.touch_data();
        Self::after_data_change(&mut g, ino, &h)
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut g = self.live()?;
        let h = g.st.live_handle(fh)?;
        if g.st.atomic_base.remove(&h.ino).is_some() {
            g.commit(vec![h.ino], Vec::new())?;
        }
        Ok(())
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let g = self.live()?;
        let h = g.st.handle(fh)?;
        Ok(g.st.inode(h.ino)?.meta)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut g = self.live()?;
        let h = g.st.live_handle(fh)?;
        if !atomic && g.st.atomic_base.remove(&h.ino).is_some() {
            g.commit(vec![h.ino], Vec::new())?;
        }
        if let Some(h) = g.st.handles.get_mut(&fh.0) {
            h.flags.atomic = atomic;
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut g = self.live()?;
        let inos = fhs
            .iter()
            .map(|&fh| g.st.live_handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        let pending: Vec<Ino> = inos
            .into_iter()
            .filter(|ino| g.st.atomic_base.remove(ino).is_some())
            .collect();
        g.commit(pending, Vec::new())
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut g = self.live()?;
        let st = &mut g.st;
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
        let mut g = self.live()?;
        let max = g.config.open_transactions_max;
        let st = &mut g.st;
        if st.txs.len() as u64 >= max {
            return Err(Error::TooMany {
                what: "open transactions",
                max,
            });
        }
        for &fh in files {
            let h = st.handle(fh)?;
            st.inode(h.ino)?;
            if let Some(other) = h.tx {
                return Err(Error::FileInTransaction(other));
            }
            if let Some(other) = bound_elsewhere(st, h.ino, None) {
                return Err(Error::FileInTransaction(other));
            }
            st.check_owner(&[h.ino], None)?;
        }
        let id = st.next_tx;
        st.next_tx += 1;
        st.txs.insert(id, Tx::default());
        for &fh in files {
            bind(st, id, fh);
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut g = self.live()?;
        let st = &mut g.st;
        st.tx_check(Some(tx))?;
        let h = st.handle(fh)?;
        st.inode(h.ino)?;
        if let Some(other) = h.tx {
            return Err(Error::FileInTransaction(other));
        }
        if let Some(other) = bound_elsewhere(st, h.ino, Some(tx.0)) {
            return Err(Error::FileInTransaction(other));
        }
        st.check_owner(&[h.ino], Some(tx.0))?;
        bind(st, tx.0, fh);
        Ok(())
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut g = self.live()?;
        let t =
            g.st.txs
                .remove(&tx.0)
                .ok_or(Error::NoSuchTransaction(tx.0))?;
        for fh in &t.handles {
            if let Some(h) = g.st.handles.get_mut(fh) {
                h.tx = None;
            }
        }
        for ino in t.undo.keys() {
            g.st.collect_orphan(*ino);
        }
        g.commit(t.undo.keys().copied().collect(), t.log)
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut g = self.live()?;
        g.st.tx_check(Some(tx))?;
        g.st.rollback(tx.0);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let g = self.live()?;
        let host = g.media.fs.statfs().map_err(host_err)?;
        // What the store holds: its files' data and the journal.
        let files: u64 =
            g.st.inodes
                .values()
                .map(|i| i.meta.size.div_ceil(BLOCK) * BLOCK)
                .sum();
        let (total, free) = self.usage.free(&host, files + g.journal.len_bytes());
        Ok(StatFs {
            block_size: BLOCK,
            blocks_total: total / BLOCK,
            blocks_free: free / BLOCK,
            inodes_total: u64::MAX / 2,
            inodes_free: u64::MAX / 2 - g.st.inodes.len() as u64,
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let g = self.inner.lock();
        let c = g.counters;
        let caps = g.media.fs.capabilities();
        vec![
            ("inodes".into(), g.st.inodes.len() as u64),
            ("open_handles".into(), g.st.handles.len() as u64),
            ("open_transactions".into(), g.st.txs.len() as u64),
            ("journal_bytes".into(), g.journal.len_bytes()),
            ("journal_records".into(), g.journal.records()),
            ("commits".into(), c.commits),
            ("commit_blocks".into(), c.commit_blocks),
            ("checkpoints".into(), c.checkpoints),
            ("checkpoint_failures".into(), c.checkpoint_failures),
            ("remap_calls".into(), c.remap_calls),
            ("remapped_blocks".into(), c.remapped_blocks),
            ("copied_blocks".into(), c.copied_blocks),
            ("punched_blocks".into(), c.punched_blocks),
            ("recovered_records".into(), c.recovered_records),
            ("exchanges".into(), c.exchanges),
            ("exchanges_redone".into(), c.exchanges_redone),
            (
                "copy_checkpoint".into(),
                u64::from(g.mode == CheckpointMode::Copy),
            ),
            // What the home's file system offers (probed once at open): the kernel paths
            // this engine can take there.
            ("fs_reflink".into(), u64::from(caps.reflink)),
            ("fs_exchange_range".into(), u64::from(caps.exchange_range)),
            (
                "fs_atomic_write_max".into(),
                caps.atomic_write_unit.map_or(0, |(_, max)| u64::from(max)),
            ),
        ]
    }

    fn limits(&self) -> Result<Vec<store::Limit>> {
        let mut all = store::common_limits(&self.statfs()?);
        all.extend(self.live()?.limits());
        Ok(all)
    }

    fn fsck(&self) -> Result<FsckReport> {
        let g = self.inner.lock();
        let mut report = g.st.fsck();
        g.st.fsck_posix(&mut report, g.format);
        match crate::journal::scan(&g.media, g.journal.generation(), g.format) {
            Ok((records, _)) if records.len() as u64 == g.journal.records() => {}
            Ok((records, _)) => report.problem(
                format!(
                    "journal holds {} valid records of generation {}, {} were committed \
                     (truncated or edited behind the engine's back)",
                    records.len(),
                    g.journal.generation(),
                    g.journal.records()
                ),
                g.media.names.journal.display().to_string(),
            ),
            Err(e) => report.problem(
                format!("journal unreadable: {e}"),
                g.media.names.journal.display().to_string(),
            ),
        }
        report
            .checked
            .push(("journal records".into(), g.journal.records()));
        Ok(report)
    }

    fn unmount(&self) -> Result<()> {
        let mut g = self.live()?;
        let r = if g.failed.is_none() {
            g.checkpoint().map(|_| ())
        } else {
            Ok(())
        };
        g.closed = true;
        g.st.closed = true;
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The open transaction other than `except` the file `ino` is bound to, if any.
fn bound_elsewhere(st: &State, ino: Ino, except: Option<u64>) -> Option<u64> {
    st.txs
        .iter()
        .find(|(&id, t)| {
            Some(id) != except
                && (t.files.contains(&ino)
                    || t.handles
                        .iter()
                        .any(|f| st.handles.get(f).is_some_and(|o| o.ino == ino)))
        })
        .map(|(&id, _)| id)
}

fn link(
    st: &mut State,
    ino: Ino,
    new_parent: Ino,
    new_name: &[u8],
    tx: Option<TxId>,
) -> Result<Metadata> {
    check_name(new_name)?;
    st.tx_check(tx)?;
    let inode = st.inode(ino)?;
    if inode.meta.kind == FileKind::Dir {
        return Err(Error::NotPermitted("hard link to a directory".into()));
    }
    if inode.meta.nlink == 0 && inode.naming != Naming::Unnamed {
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
    st.set_entry(tx, new_parent, new_name, Some(ino));
    if let Some(p) = st.inodes.get_mut(&new_parent) {
        p.meta.mtime = now;
        p.meta.ctime = now;
    }
    st.log(
        tx,
        Op::AddEntry {
            dir: new_parent,
            ino,
            name: new_name.to_vec(),
        },
    );
    let inode = st
        .inodes
        .get_mut(&ino)
        .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
    inode.meta.nlink += 1;
    inode.meta.ctime = now;
    inode.naming = Naming::Ordinary;
    Ok(inode.meta)
}
