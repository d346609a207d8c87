//! The Store trait over [`JournalStore`]: namespace calls run in their transaction (or an
//! internal one), data calls in `data`.

use super::namespace::{name_str, Body, Handle};
use super::JournalStore;
use hostfs::HostFs;
use pmem::Region;
use std::any::Any;
use std::collections::HashMap;
use store::{
    check_symlink_target, check_xattr_name, check_xattr_value, path::check_entry_name, DirEntry,
    Error, Fallocate, Fh, FileKind, FsckReport, Ino, Limit, Metadata, OpenFlags, RenameMode,
    Result, SetAttr, StatFs, Store, TxId, XattrSet, NAME_MAX, ROOT_INO,
};

impl<R: Region, H: HostFs> Store for JournalStore<R, H> {
    fn engine_name(&self) -> String {
        "journal".into()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let s = self.lock_open()?;
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong {
                len: name.len(),
                max: NAME_MAX,
            });
        }
        let ino = match name {
            b"." => parent,
            b".." => match &s.node(parent)?.body {
                Body::Dir { parent, .. } => *parent,
                _ => return Err(Error::NotDir(format!("inode {parent}"))),
            },
            _ => *s
                .entries(parent)?
                .get(name)
                .ok_or_else(|| Error::NotFound(name_str(name)))?,
        };
        Ok(s.node(ino)?.meta)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        Ok(self.lock_open()?.node(ino)?.meta)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.in_tx(tx, |s, t| {
            s.tx_check(tx)?;
            s.node(ino)?;
            s.check_owner(&[ino], Some(t))?;
            s.save(t, ino)?;
            let n = s.node_mut(ino)?;
            if let Some(perm) = attr.perm {
                n.meta.perm = perm & 0o7777;
            }
            if let Some(uid) = attr.uid {
                n.meta.uid = uid;
            }
            if let Some(gid) = attr.gid {
                n.meta.gid = gid;
            }
            if let Some(t) = attr.atime {
                n.meta.atime = t;
            }
            if let Some(t) = attr.mtime {
                n.meta.mtime = t;
            }
            n.meta.ctime = store::now_ns();
            Ok(n.meta)
        })
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.in_tx(tx, |s, t| {
            s.new_node(parent, name, FileKind::File, perm, t, tx)
        })
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.in_tx(tx, |s, t| {
            s.new_node(parent, name, FileKind::Dir, perm, t, tx)
        })
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_symlink_target(target)?;
        self.in_tx(tx, |s, t| {
            s.format.require_v2("symbolic links")?;
            s.new_symlink(parent, name, target, t, tx)
        })
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let s = self.lock_open()?;
        match &s.node(ino)?.body {
            Body::Symlink { target } => Ok(target.clone()),
            _ => Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symlink"
            ))),
        }
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
        self.in_tx(tx, |s, t| {
            s.format.require_v2("special files (mknod)")?;
            s.new_special(parent, name, (kind, perm, rdev), t, tx)
        })
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let max = self.config.open_files_max;
        let meta = self.in_tx(tx, |s, t| {
            handle_room(s.handles.len(), max)?;
            s.new_unnamed(parent, perm, t, tx)
        })?;
        let mut s = self.lock_open()?;
        // Gone already when its transaction was aborted meanwhile (by another thread).
        s.node(meta.ino)?;
        let fh = new_handle(&mut s, meta.ino, flags);
        if let Some(user) = tx {
            if let Err(e) = s.bind(user, fh) {
                s.handles.remove(&fh.0);
                return Err(e);
            }
        }
        Ok((meta, fh))
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
        let (from, to) = ((parent, name), (new_parent, new_name));
        match mode {
            RenameMode::Replace => self.rename(parent, name, new_parent, new_name, tx),
            RenameMode::NoReplace => self.in_tx(tx, |s, t| s.rename_noreplace(from, to, t, tx)),
            RenameMode::Exchange => self.in_tx(tx, |s, t| s.exchange(from, to, t, tx)),
        }
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        self.fallocate_data(fh, op, off, len)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        let s = self.lock_open()?;
        s.format.require_v2("extended attributes")?;
        s.node(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoAttribute(name_str(name)))
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        check_xattr_name(name)?;
        check_xattr_value(value)?;
        store::check_xattr_change(name, Store::getattr(self, ino)?.kind)?;
        let max = self.config.xattr_bytes_max;
        self.in_tx(tx, |s, t| {
            s.format.require_v2("extended attributes")?;
            s.change_xattr((ino, name), Some(value), how, max, (t, tx))
        })
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let s = self.lock_open()?;
        s.format.require_v2("extended attributes")?;
        Ok(s.node(ino)?.xattrs.keys().cloned().collect())
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_xattr_name(name)?;
        store::check_xattr_change(name, Store::getattr(self, ino)?.kind)?;
        let max = self.config.xattr_bytes_max;
        self.in_tx(tx, |s, t| {
            s.format.require_v2("extended attributes")?;
            s.change_xattr((ino, name), None, XattrSet::Either, max, (t, tx))
        })
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.in_tx(tx, |s, t| {
            check_entry_name(name)?;
            s.tx_check(tx)?;
            let ino = *s
                .entries(parent)?
                .get(name)
                .ok_or_else(|| Error::NotFound(name_str(name)))?;
            if s.node(ino)?.meta.is_dir() {
                return Err(Error::IsDir(name_str(name)));
            }
            s.check_owner(&[parent, ino], Some(t))?;
            s.remove_entry(parent, name, t)
        })
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.in_tx(tx, |s, t| {
            check_entry_name(name)?;
            s.tx_check(tx)?;
            let ino = *s
                .entries(parent)?
                .get(name)
                .ok_or_else(|| Error::NotFound(name_str(name)))?;
            if !s.node(ino)?.meta.is_dir() {
                return Err(Error::NotDir(name_str(name)));
            }
            if !s.entries(ino)?.is_empty() {
                return Err(Error::NotEmpty(name_str(name)));
            }
            s.check_owner(&[parent, ino], Some(t))?;
            s.remove_entry(parent, name, t)
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
        self.in_tx(tx, |s, t| {
            s.rename((parent, name), (new_parent, new_name), t, tx)
        })
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.in_tx(tx, |s, t| {
            check_entry_name(new_name)?;
            s.tx_check(tx)?;
            if s.node(ino)?.meta.is_dir() {
                return Err(Error::NotPermitted("hard link to a directory".into()));
            }
            s.check_linkable(ino)?;
            if s.entries(new_parent)?.contains_key(new_name) {
                return Err(Error::Exists(name_str(new_name)));
            }
            s.check_owner(&[ino, new_parent], Some(t))?;
            s.link(ino, new_parent, new_name, t)
        })
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let s = self.lock_open()?;
        let mut out = Vec::new();
        for (name, child) in s.entries(ino)? {
            out.push(DirEntry {
                name: name.clone(),
                ino: *child,
                kind: s.node(*child)?.meta.kind,
            });
        }
        Ok(out)
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut s = self.lock_open()?;
        s.file_node(ino)?;
        handle_room(s.handles.len(), self.config.open_files_max)?;
        Ok(new_handle(&mut s, ino, flags))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut s = self.lock_open()?;
        let h = s.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        // The file's pending O_ATOMIC writes go with its last O_ATOMIC handle.
        if h.atomic && !s.handles.values().any(|o| o.ino == h.ino && o.atomic) {
            s.shadows.remove(&h.ino);
        }
        let orphan = s.nodes.get(&h.ino).is_some_and(|n| n.meta.nlink == 0);
        if !orphan {
            return Ok(());
        }
        // The last name went in an open transaction: the inode goes with it (its commit
        // logs the free, its abort brings the inode back).
        if let Some(t) = s.tx_of_change(h.ino) {
            return s.reap(h.ino, t);
        }
        let t = s.begin();
        let r = s.reap(h.ino, t);
        self.finish_internal(&mut s, t, r)
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_data(fh, off, buf)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.write_data(fh, off, data)
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.set_len_data(fh, len)
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut s = self.lock_open()?;
        self.install_shadows(&mut s, &[fh])
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let s = self.lock_open()?;
        let h = s.handle(fh)?;
        let mut meta = s.node(h.ino)?.meta;
        if let Some(shadow) = s.shadows.get(&h.ino) {
            meta.size = shadow.size;
        }
        Ok(meta)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut s = self.lock_open()?;
        s.live_handle(fh)?;
        if !atomic {
            self.install_shadows(&mut s, &[fh])?;
        }
        s.handles
            .get_mut(&fh.0)
            .ok_or(Error::BadHandle(fh.0))?
            .atomic = atomic;
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut s = self.lock_open()?;
        self.install_shadows(&mut s, fhs)
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut s = self.lock_open()?;
        for fh in fhs {
            s.live_handle(*fh)?;
        }
        for fh in fhs {
            let ino = s.handle(*fh)?.ino;
            s.shadows.remove(&ino);
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut s = self.lock_open()?;
        for fh in files {
            s.check_bind(*fh, None)?;
        }
        if s.txs.len() >= self.config.open_transactions_max {
            return Err(Error::TooMany {
                what: "open transactions",
                max: self.config.open_transactions_max as u64,
            });
        }
        let tx = s.begin();
        for fh in files {
            s.bind(tx, *fh)?;
        }
        Ok(tx)
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut s = self.lock_open()?;
        s.tx_mut(tx)?;
        s.check_bind(fh, Some(tx))?;
        s.bind(tx, fh)
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut s = self.lock_open()?;
        self.commit(&mut s, tx)
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut s = self.lock_open()?;
        let t = s.txs.remove(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        s.roll_back(t);
        s.unbind(tx);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let s = self.lock_open()?;
        let capacity = self.config.capacity_bytes / 4096;
        let inodes_total = s.ino_max - 1;
        Ok(StatFs {
            block_size: 4096,
            blocks_total: capacity,
            blocks_free: capacity.saturating_sub(s.used_blocks),
            inodes_total,
            inodes_free: inodes_total.saturating_sub(s.nodes.len() as u64),
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let j = self.journal.stats();
        let s = self.inner.lock();
        vec![
            ("inodes".into(), s.nodes.len() as u64),
            ("used_blocks".into(), s.used_blocks),
            ("metadata_log_bytes".into(), s.log_len),
            (
                "journal_blocks".into(),
                self.journal.geometry().blocks() as u64,
            ),
            ("journal_free_blocks".into(), self.journal.free_blocks()),
            (
                "journaled_home_blocks".into(),
                self.journal.journaled_blocks() as u64,
            ),
            ("commits".into(), j.commits),
            ("full_blocks".into(), j.full_blocks),
            ("delta_blocks".into(), j.delta_blocks),
            ("delta_bytes".into(), j.delta_bytes),
            ("appended_bytes".into(), j.appended_bytes),
            ("wear_swaps".into(), j.wear_swaps),
            ("delta_swaps".into(), j.delta_swaps),
            ("gc_runs".into(), j.gc_runs),
            ("gc_swaps".into(), j.gc_swaps),
            ("checkpoints".into(), j.checkpoints),
            ("checkpointed_blocks".into(), j.checkpointed_blocks),
            ("checkpoint_errors".into(), j.checkpoint_errors),
        ]
    }

    fn limits(&self) -> Result<Vec<Limit>> {
        let mut all = store::common_limits(&self.statfs()?);
        let blocks = self.journal.geometry().blocks() as u64;
        let s = self.lock_open()?;
        let cfg = &self.config;
        all.push(Limit::new(
            "open files",
            cfg.open_files_max as u64,
            Some(s.handles.len() as u64),
            "EMFILE",
        ));
        all.push(Limit::new(
            "open transactions",
            cfg.open_transactions_max as u64,
            Some(s.txs.len() as u64),
            "EMFILE",
        ));
        all.push(Limit::new(
            "journal blocks (PM; a full journal checkpoints before the next commit)",
            blocks,
            Some(blocks - self.journal.free_blocks()),
            "none",
        ));
        all.push(Limit::new(
            "journal blocks per transaction (over-written blocks and metadata)",
            blocks,
            None,
            "ENOSPC",
        ));
        all.push(Limit::new(
            "metadata log bytes",
            cfg.metadata_log_bytes_max
                .min(super::METADATA_LOG_BYTES_LIMIT),
            Some(s.log_len),
            "ENOSPC",
        ));
        all.push(Limit::new(
            "extended attribute bytes per inode (names and values)",
            cfg.xattr_bytes_max,
            None,
            "ENOSPC",
        ));
        all.push(Limit::new(
            "punched block ranges per file (past it a punch zeroes but frees nothing)",
            super::meta_log::PUNCHED_RANGES_MAX as u64,
            None,
            "none",
        ));
        all.push(Limit::new(
            "file size bytes",
            super::data::FILE_SIZE_MAX,
            None,
            "EFBIG",
        ));
        all.push(Limit::new(
            "home files open at once (closed and reopened past it)",
            cfg.journal.open_files_max as u64,
            Some(self.journal.home().open_count() as u64),
            "none",
        ));
        Ok(all)
    }

    fn fsck(&self) -> Result<FsckReport> {
        let mut report = FsckReport::default();
        let j = self.journal.fsck();
        for p in &j.problems {
            report.problem(p.clone(), "PM journal");
        }
        let s = self.inner.lock();
        let extent = |f: u32| s.extents.get(&(f as Ino)).copied().unwrap_or(0);
        if let Err(e) = self.journal.verify_extents(&extent) {
            report.problem(e.to_string(), "PM journal");
        }
        match self.home_problems(&s, super::home_check::LastClose::Unclean) {
            Ok(problems) => {
                for p in problems {
                    report.problem(p, "home directory");
                }
            }
            Err(e) => report.problem(e.to_string(), "home directory"),
        }
        check_links(&s.nodes, &mut report);
        super::posix::check_nodes(&s.nodes, self.config.xattr_bytes_max, &mut report);
        report.checked.push(("inodes".into(), s.nodes.len() as u64));
        report
            .checked
            .push(("journal versions".into(), j.valid_versions));
        report
            .checked
            .push(("journal free blocks".into(), j.free_blocks));
        Ok(report)
    }

    fn unmount(&self) -> Result<()> {
        let mut s = self.lock_open()?;
        self.journal.checkpoint()?;
        self.record_clean_close(&mut s)?;
        s.closed = true;
        drop(s);
        self.checkpointer.lock().take();
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// EMFILE when `open` handles are already the most a store keeps.
fn handle_room(open: usize, max: usize) -> Result<()> {
    if open >= max {
        return Err(Error::TooMany {
            what: "open files",
            max: max as u64,
        });
    }
    Ok(())
}

/// A new handle on file `ino` (room checked by [`handle_room`]).
fn new_handle(s: &mut super::namespace::Inner, ino: Ino, flags: OpenFlags) -> Fh {
    let fh = s.next_fh;
    s.next_fh += 1;
    let handle = Handle {
        ino,
        flags,
        atomic: flags.atomic,
        tx: None,
    };
    s.handles.insert(fh, handle);
    Fh(fh)
}

/// Every entry names an inode, and every inode's link count matches its names.
fn check_links(nodes: &HashMap<Ino, super::namespace::Node>, report: &mut FsckReport) {
    let mut links: HashMap<Ino, u32> = HashMap::new();
    for (ino, node) in nodes {
        if let Body::Dir { entries, .. } = &node.body {
            for (name, child) in entries {
                *links.entry(*child).or_default() += 1;
                if !nodes.contains_key(child) {
                    report.problem(
                        format!("entry {} points to missing inode {child}", name_str(name)),
                        format!("inode {ino}"),
                    );
                }
            }
        }
    }
    for (ino, node) in nodes {
        let names = links.get(ino).copied().unwrap_or(0);
        let (expected, actual) = if node.meta.is_dir() {
            (names.min(1), node.meta.nlink.min(1))
        } else {
            (names, node.meta.nlink)
        };
        if *ino != ROOT_INO && expected != actual {
            report.problem(
                format!("nlink {} but {names} names", node.meta.nlink),
                format!("inode {ino}"),
            );
        }
    }
}
