//! Namespace operations on the home directory, each durable (`sync_dir`) when it returns;
//! inside a transaction recorded for its abort.

use super::{CacheStore, Tables, Undo, MARKER_NAME, TRASH_NAME};
use crate::format::intent::{Intent, IntentKind};
use crate::home::host_err;
use hostfs::{HostFs, OpenOptions};
use pmem::Region;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use store::path::check_entry_name;
use store::{DirEntry, Error, FileKind, Ino, Metadata, Result, SetAttr, TxId, ROOT_INO};

/// The store kind of a home entry: special files told apart by their `S_IFMT` bits.
pub(super) fn kind_of(st: &hostfs::Stat) -> FileKind {
    match (st.kind, hostfs::NodeKind::from_mode_type(st.mode_type)) {
        (hostfs::FileKind::Dir, _) => FileKind::Dir,
        (hostfs::FileKind::Symlink, _) => FileKind::Symlink,
        (hostfs::FileKind::File, _) => FileKind::File,
        (hostfs::FileKind::Other, Some(hostfs::NodeKind::Socket)) => FileKind::Socket,
        (hostfs::FileKind::Other, Some(hostfs::NodeKind::CharDevice)) => FileKind::CharDevice,
        (hostfs::FileKind::Other, Some(hostfs::NodeKind::BlockDevice)) => FileKind::BlockDevice,
        // A FIFO, or a kind the host does not tell apart: never opened as a file.
        (hostfs::FileKind::Other, _) => FileKind::Fifo,
    }
}

fn parent_of(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

pub(super) fn bytes_of(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

/// An intent of kind `kind` on paths `a` and `b`.
pub(super) fn intent(kind: IntentKind, a: &Path, b: &Path) -> Intent {
    Intent::new(kind, bytes_of(a), bytes_of(b))
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    pub(super) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(super) fn sync_dir(&self, dir: &Path) -> Result<()> {
        // persist: the directory's entries (creates, links, unlinks, renames) are durable.
        self.host.sync_dir(dir).map_err(host_err)
    }

    /// Attributes of `ino`; a file's length is the cache's (the PM copy is authoritative).
    pub(super) fn meta(&self, t: &Tables, ino: Ino) -> Result<Metadata> {
        if t.gone.contains(&ino) {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        let st = match t.keys.get(&ino) {
            Some(_) => self.cache.backing().stat(t.names.host_of(ino)),
            None => self.host.stat(&t.names.path(ino)?).map_err(host_err),
        }?;
        let kind = kind_of(&st);
        let mut m = Metadata {
            ino,
            kind,
            size: st.len,
            perm: st.perm & 0o7777,
            nlink: st.nlink.min(u64::from(u32::MAX)) as u32,
            uid: st.uid,
            gid: st.gid,
            allocated: st.allocated,
            atime: st.atime_ns,
            mtime: st.mtime_ns,
            ctime: st.ctime_ns,
            rdev: if kind.is_device() { st.rdev } else { 0 },
        };
        if let Some(&key) = t.keys.get(&ino) {
            m.kind = FileKind::File;
            m.size = self.cache.len(key)?;
            // The home file's storage (its chunks are written there by the stat rule
            // before getattr/fstat), never past the length.
            m.allocated = st.allocated.min(m.size.div_ceil(4096) * 4096);
            if t.orphans.contains(&ino) || t.unnamed.contains(&ino) {
                m.nlink = 0;
            }
        }
        Ok(m)
    }

    /// Inside a transaction: persist the intent of a namespace change before it is made
    /// (the transaction's unit begins here if it has not yet). Returns the record.
    pub(super) fn intend(
        &self,
        t: &mut Tables,
        tx: Option<TxId>,
        mut it: Intent,
    ) -> Result<Option<u64>> {
        let Some(TxId(id)) = tx else { return Ok(None) };
        let state = t.txs.get_mut(&id).ok_or(Error::NoSuchTransaction(id))?;
        if state.unit.is_none() {
            state.unit = Some(self.cache.begin()?);
        }
        let stamp = state.unit.as_ref().map_or(0, |u| u.stamp());
        t.intent_seq += 1;
        it.seq = t.intent_seq;
        Ok(Some(self.cache.log_intent(stamp, &it)?))
    }

    /// A change whose intent was logged failed: the intent goes.
    pub(super) fn unintend(&self, slot: Option<u64>) {
        if let Some(slot) = slot {
            self.cache.free_intent(slot);
        }
    }

    pub(super) fn push_undo(t: &mut Tables, tx: Option<TxId>, undo: Undo, slot: Option<u64>) {
        if let Some(TxId(id)) = tx {
            if let Some(state) = t.txs.get_mut(&id) {
                state.undo.push((undo, slot));
            }
        }
    }

    pub(super) fn tx_open(t: &Tables, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(TxId(id)) if !t.txs.contains_key(&id) => Err(Error::NoSuchTransaction(id)),
            _ => Ok(()),
        }
    }

    /// A change to `inos` from `tx`: refused while another open transaction created one.
    pub(super) fn check_owner(t: &Tables, inos: &[Ino], tx: Option<TxId>) -> Result<()> {
        for ino in inos {
            if let Some(&creator) = t.created_by.get(ino) {
                if Some(TxId(creator)) != tx {
                    return Err(Error::FileInTransaction(creator));
                }
            }
        }
        Ok(())
    }

    pub(super) fn dir_path(&self, t: &Tables, ino: Ino) -> Result<PathBuf> {
        let p = t.names.path(ino)?;
        let st = self.host.stat(&p).map_err(host_err)?;
        if st.kind != hostfs::FileKind::Dir {
            return Err(Error::NotDir(format!("inode {ino}")));
        }
        Ok(p)
    }

    pub(super) fn stat_opt(&self, p: &Path) -> Result<Option<hostfs::Stat>> {
        match self.host.stat(p) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(host_err(e)),
        }
    }

    pub(super) fn hidden(parent: Ino, name: &[u8]) -> bool {
        parent == ROOT_INO && (name == TRASH_NAME.as_bytes() || name == MARKER_NAME.as_bytes())
    }

    pub(super) fn do_lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        store::path::check_name(name)?;
        let mut t = self.t.lock();
        let p = self.dir_path(&t, parent)?.join(OsStr::from_bytes(name));
        if Self::hidden(parent, name) {
            return Err(Error::NotFound(p.display().to_string()));
        }
        let st = self.host.stat(&p).map_err(host_err)?;
        let ino = t.names.ino_of(st.ino);
        t.names.add(ino, parent, name);
        self.meta(&t, ino)
    }

    /// The checks of a call making the new entry `name` in `parent`, in the order of the
    /// Store API (transaction, directory, name free, owner): its directory's path and its own.
    pub(super) fn free_name(
        &self,
        t: &Tables,
        parent: Ino,
        name: &[u8],
        tx: Option<TxId>,
    ) -> Result<(PathBuf, PathBuf)> {
        Self::tx_open(t, tx)?;
        let dp = self.dir_path(t, parent)?;
        let p = dp.join(OsStr::from_bytes(name));
        if Self::hidden(parent, name) || self.stat_opt(&p)?.is_some() {
            return Err(Error::Exists(p.display().to_string()));
        }
        Self::check_owner(t, &[parent], tx)?;
        Ok((dp, p))
    }

    pub(super) fn do_create(
        &self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        tx: Option<TxId>,
        dir: bool,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let mut t = self.t.lock();
        let (dp, p) = self.free_name(&t, parent, name, tx)?;
        let kind = if dir {
            IntentKind::CreatedDir
        } else {
            IntentKind::Created
        };
        let slot = self.intend(&mut t, tx, intent(kind, &p, Path::new("")))?;
        let ino = match self.make_node(&mut t, &dp, &p, perm, dir) {
            Ok(ino) => ino,
            Err(e) => {
                self.unintend(slot);
                return Err(e);
            }
        };
        t.names.add(ino, parent, name);
        if let Some(TxId(id)) = tx {
            t.created_by.insert(ino, id);
            let undo = Undo::Created {
                parent,
                name: name.to_vec(),
                ino,
                dir,
            };
            Self::push_undo(&mut t, tx, undo, slot);
        }
        self.meta(&t, ino)
    }

    /// Create the file or directory `p` in `dp`, durable; a file is cached from now on.
    fn make_node(&self, t: &mut Tables, dp: &Path, p: &Path, perm: u32, dir: bool) -> Result<Ino> {
        if dir {
            self.host.mkdir(p, perm & 0o7777).map_err(host_err)?;
            let st = self.host.stat(p).map_err(host_err)?;
            self.sync_dir(dp)?;
            return Ok(t.names.ino_of(st.ino));
        }
        let opts = OpenOptions {
            perm: perm & 0o7777,
            ..OpenOptions::create_new()
        };
        let f = self.host.open(p, &opts).map_err(host_err)?;
        let st = self.host.file_stat(&f).map_err(host_err)?;
        self.sync_dir(dp)?;
        self.cache.backing().register(st.ino, p, Some(f));
        let key = match self.cache.create_file(st.ino, 0) {
            Ok(key) => key,
            Err(e) => {
                // No record for it (files_max, keys): the home file goes again.
                self.cache.backing().forget(st.ino);
                self.host.unlink(p).map_err(host_err)?;
                self.sync_dir(dp)?;
                return Err(e);
            }
        };
        let ino = t.names.ino_of(st.ino);
        t.keys.insert(ino, key);
        Ok(ino)
    }

    /// Before a cached file's name goes (unlink, replaced by a rename): when it is the last
    /// one, keep a descriptor of the home file (the cache may still write it back).
    pub(super) fn before_name_goes(&self, t: &Tables, ino: Ino) -> Result<()> {
        if let Some(&key) = t.keys.get(&ino).filter(|_| t.names.count(ino) <= 1) {
            // A crash after the removal must not read as a change behind the cache.
            self.cache.unsettle_for_removal(key)?;
            self.cache
                .backing()
                .renamed_or_unlinked(t.names.host_of(ino), None)?;
        }
        Ok(())
    }

    /// After a cached file lost a name: the cache reaches it by one it still has.
    pub(super) fn after_name_gone(&self, t: &Tables, ino: Ino) -> Result<()> {
        if t.keys.contains_key(&ino) && t.names.count(ino) > 0 {
            let p = t.names.path(ino)?;
            self.cache
                .backing()
                .renamed_or_unlinked(t.names.host_of(ino), Some(&p))?;
        }
        Ok(())
    }

    /// A file lost its last name: delete it now, or at its last release.
    pub(super) fn drop_file(&self, t: &mut Tables, ino: Ino) -> Result<()> {
        if t.open_count.get(&ino).copied().unwrap_or(0) > 0 {
            t.orphans.insert(ino);
            return Ok(());
        }
        if let Some(key) = t.keys.remove(&ino) {
            self.cache.delete_file(key)?;
            self.cache.backing().forget(t.names.host_of(ino));
        }
        Ok(())
    }

    /// The trash directory, made (durably) when it is missing.
    pub(super) fn ensure_trash(&self) -> Result<&'static Path> {
        let trash = Path::new(TRASH_NAME);
        if self.stat_opt(trash)?.is_none() {
            self.host.mkdir(trash, 0o700).map_err(host_err)?;
            self.sync_dir(Path::new(""))?;
        }
        Ok(trash)
    }

    /// Move a name into the trash (a transaction's removal, undone by its abort).
    fn to_trash(
        &self,
        t: &mut Tables,
        tx: Option<TxId>,
        p: &Path,
    ) -> Result<(Vec<u8>, Option<u64>)> {
        let trash = self.ensure_trash()?;
        t.trash_seq += 1;
        let name = format!("{}-{}", crate::now_tag(), t.trash_seq).into_bytes();
        let to = trash.join(OsStr::from_bytes(&name));
        let slot = self.intend(t, tx, intent(IntentKind::Removed, p, &to))?;
        let moved = self.host.rename(p, &to).map_err(host_err).and_then(|()| {
            self.sync_dir(parent_of(p))?;
            self.sync_dir(trash)
        });
        if let Err(e) = moved {
            self.unintend(slot);
            return Err(e);
        }
        self.cache.backing().moved(p, &to);
        Ok((name, slot))
    }

    pub(super) fn do_remove(
        &self,
        parent: Ino,
        name: &[u8],
        tx: Option<TxId>,
        dir: bool,
    ) -> Result<()> {
        check_entry_name(name)?;
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        let dp = self.dir_path(&t, parent)?;
        let p = dp.join(OsStr::from_bytes(name));
        if Self::hidden(parent, name) {
            return Err(Error::NotFound(p.display().to_string()));
        }
        let st = self.host.stat(&p).map_err(host_err)?;
        let ino = t.names.ino_of(st.ino);
        match (dir, st.kind == hostfs::FileKind::Dir) {
            (false, true) => return Err(Error::IsDir(p.display().to_string())),
            (true, false) => return Err(Error::NotDir(p.display().to_string())),
            (true, true) if !self.host.read_dir(&p).map_err(host_err)?.is_empty() => {
                return Err(Error::NotEmpty(p.display().to_string()))
            }
            _ => {}
        }
        Self::check_owner(&t, &[ino, parent], tx)?;
        if tx.is_some() {
            let (trash, slot) = self.to_trash(&mut t, tx, &p)?;
            t.names.remove(ino, parent, name);
            let undo = Undo::Removed {
                parent,
                name: name.to_vec(),
                ino,
                trash,
            };
            Self::push_undo(&mut t, tx, undo, slot);
            return Ok(());
        }
        if dir {
            self.host.rmdir(&p).map_err(host_err)?;
        } else {
            self.before_name_goes(&t, ino)?;
            self.host.unlink(&p).map_err(host_err)?;
        }
        self.sync_dir(&dp)?;
        if !t.names.remove(ino, parent, name) && !dir {
            self.drop_file(&mut t, ino)?;
        }
        self.after_name_gone(&t, ino)?;
        Ok(())
    }

    /// Inside a transaction: move the name (`parent`, `name`) of `ino` at `p` into the trash,
    /// undone by the transaction's abort.
    fn trash_in_tx(
        &self,
        t: &mut Tables,
        tx: Option<TxId>,
        ino: Ino,
        (parent, name): (Ino, &[u8]),
        p: &Path,
    ) -> Result<()> {
        let (trash, slot) = self.to_trash(t, tx, p)?;
        t.names.remove(ino, parent, name);
        let undo = Undo::Removed {
            parent,
            name: name.to_vec(),
            ino,
            trash,
        };
        Self::push_undo(t, tx, undo, slot);
        Ok(())
    }

    /// The source and the replaced target of a rename, checked as rename(2) does; `None`
    /// when both names are one file (nothing to do).
    fn rename_targets(
        &self,
        from: &Path,
        to: &Path,
    ) -> Result<Option<(hostfs::Stat, Option<hostfs::Stat>)>> {
        let src = self.host.stat(from).map_err(host_err)?;
        let dst = self.stat_opt(to)?;
        let src_dir = src.kind == hostfs::FileKind::Dir;
        if let Some(d) = &dst {
            if d.ino == src.ino {
                return Ok(None);
            }
            let dst_dir = d.kind == hostfs::FileKind::Dir;
            if src_dir && !dst_dir {
                return Err(Error::NotDir(to.display().to_string()));
            }
            if !src_dir && dst_dir {
                return Err(Error::IsDir(to.display().to_string()));
            }
            if dst_dir && !self.host.read_dir(to).map_err(host_err)?.is_empty() {
                return Err(Error::NotEmpty(to.display().to_string()));
            }
        }
        if src_dir && to.starts_with(from) {
            return Err(Error::InvalidArgument(
                "a directory moved into itself".into(),
            ));
        }
        Ok(Some((src, dst)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn do_rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        let from_dir = self.dir_path(&t, parent)?;
        let to_dir = self.dir_path(&t, new_parent)?;
        let from = from_dir.join(OsStr::from_bytes(name));
        let to = to_dir.join(OsStr::from_bytes(new_name));
        if Self::hidden(parent, name) || Self::hidden(new_parent, new_name) {
            return Err(Error::InvalidArgument("reserved name".into()));
        }
        let Some((src, dst)) = self.rename_targets(&from, &to)? else {
            return Ok(());
        };
        let ino = t.names.ino_of(src.ino);
        let src_dir = src.kind == hostfs::FileKind::Dir;
        let dst_ino = dst.map(|d| t.names.ino_of(d.ino));
        let mut inos = vec![ino, parent, new_parent];
        inos.extend(dst_ino);
        Self::check_owner(&t, &inos, tx)?;
        if let (Some(_), Some(d)) = (tx, dst_ino) {
            self.trash_in_tx(&mut t, tx, d, (new_parent, new_name), &to)?;
        }
        if let (None, Some(d)) = (tx, dst_ino) {
            self.before_name_goes(&t, d)?;
        }
        let slot = self.intend(&mut t, tx, intent(IntentKind::Moved, &from, &to))?;
        let moved = self
            .host
            .rename(&from, &to)
            .map_err(host_err)
            .and_then(|()| {
                self.sync_dir(&from_dir)?;
                if to_dir != from_dir {
                    self.sync_dir(&to_dir)?;
                }
                Ok(())
            });
        if let Err(e) = moved {
            self.unintend(slot);
            return Err(e);
        }
        t.names.rename(ino, parent, name, new_parent, new_name);
        self.cache.backing().moved(&from, &to);
        if tx.is_some() {
            let undo = Undo::Moved {
                from: (parent, name.to_vec()),
                to: (new_parent, new_name.to_vec()),
                ino,
            };
            Self::push_undo(&mut t, tx, undo, slot);
        } else if let Some(d) = dst_ino {
            if !t.names.remove(d, new_parent, new_name) && !src_dir {
                self.drop_file(&mut t, d)?;
            }
            self.after_name_gone(&t, d)?;
        }
        Ok(())
    }

    pub(super) fn do_link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(new_name)?;
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        if t.unnamed.contains(&ino) && Self::in_trash(&t, ino) {
            return self.name_unnamed(&mut t, ino, (new_parent, new_name), tx);
        }
        let src = t.names.path(ino)?;
        let dp = self.dir_path(&t, new_parent)?;
        let to = dp.join(OsStr::from_bytes(new_name));
        if self.host.stat(&src).map_err(host_err)?.kind == hostfs::FileKind::Dir {
            return Err(Error::NotPermitted("hard link to a directory".into()));
        }
        if Self::hidden(new_parent, new_name) || self.stat_opt(&to)?.is_some() {
            return Err(Error::Exists(to.display().to_string()));
        }
        Self::check_owner(&t, &[ino, new_parent], tx)?;
        let slot = self.intend(&mut t, tx, intent(IntentKind::Linked, &to, Path::new("")))?;
        let linked = self
            .host
            .link(&src, &to)
            .map_err(host_err)
            .and_then(|()| self.sync_dir(&dp));
        if let Err(e) = linked {
            self.unintend(slot);
            return Err(e);
        }
        t.names.add(ino, new_parent, new_name);
        let undo = Undo::Linked {
            parent: new_parent,
            name: new_name.to_vec(),
            ino,
        };
        Self::push_undo(&mut t, tx, undo, slot);
        self.meta(&t, ino)
    }

    pub(super) fn do_setattr(
        &self,
        ino: Ino,
        attr: &SetAttr,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        let p = t.names.path(ino)?;
        let before = self.meta(&t, ino)?;
        Self::check_owner(&t, &[ino], tx)?;
        let (perm, atime, mtime) = (before.perm, before.atime, before.mtime);
        let chown = attr.uid.is_some() || attr.gid.is_some();
        let kind = if chown {
            IntentKind::Owner
        } else {
            IntentKind::Attr
        };
        let mut it = intent(kind, &p, Path::new(""));
        (it.perm, it.atime, it.mtime) = (perm, atime, mtime);
        (it.uid, it.gid) = (before.uid, before.gid);
        let slot = self.intend(&mut t, tx, it)?;
        let owner = chown.then_some((before.uid, before.gid));
        let undo = Undo::Attr {
            ino,
            perm,
            atime,
            mtime,
            owner,
        };
        Self::push_undo(&mut t, tx, undo, slot);
        if chown {
            self.host
                .set_owner(&p, attr.uid, attr.gid)
                .map_err(host_err)?;
        }
        // A symlink's permissions are always 0o777 (Linux has no lchmod).
        if let Some(perm) = attr.perm.filter(|_| before.kind != FileKind::Symlink) {
            self.host.set_perm(&p, perm & 0o7777).map_err(host_err)?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            self.set_times_cached(&t, ino, &p, attr.atime, attr.mtime)?;
        }
        if tx.is_none() {
            // persist: the new attributes (owner, permissions, times) are durable when the
            // call returns; in a transaction the entry is synced before its commit point.
            self.host.sync_node(&p).map_err(host_err)?;
        }
        self.meta(&t, ino)
    }

    /// Change a home file's times; a cached file's home stamp is unsettled meanwhile and
    /// settled after (the new mtime is the cache's own change).
    pub(super) fn set_times_cached(
        &self,
        t: &Tables,
        ino: Ino,
        p: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> Result<()> {
        let key = t.keys.get(&ino).copied();
        if let Some(key) = key {
            self.cache.unsettle_key(key)?;
        }
        // The entry itself, a symlink included (never its target).
        self.host
            .set_link_times(p, atime, mtime)
            .map_err(host_err)?;
        if let Some(key) = key {
            self.cache.settle_key(key)?;
        }
        Ok(())
    }

    pub(super) fn do_read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let mut t = self.t.lock();
        let p = self.dir_path(&t, ino)?;
        let mut out = Vec::new();
        for e in self.host.read_dir(&p).map_err(host_err)? {
            if Self::hidden(ino, &e.name) {
                continue;
            }
            let child = t.names.ino_of(e.ino);
            t.names.add(child, ino, &e.name);
            let kind = match e.kind {
                hostfs::FileKind::Dir => FileKind::Dir,
                hostfs::FileKind::Symlink => FileKind::Symlink,
                hostfs::FileKind::File => FileKind::File,
                hostfs::FileKind::Other => {
                    let st = self.host.stat(&p.join(OsStr::from_bytes(&e.name)));
                    kind_of(&st.map_err(host_err)?)
                }
            };
            out.push(DirEntry {
                name: e.name,
                ino: child,
                kind,
            });
        }
        Ok(out)
    }
}
