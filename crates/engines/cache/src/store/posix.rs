//! Symlinks, special files, unnamed files (O_TMPFILE) and rename modes, on the home
//! directory like every namespace call: one host call made durable (`sync_dir`) before it
//! returns, under an intent record inside a transaction.
//!
//! - A symlink is a host symlink: its target is bytes the engine stores, never resolves.
//! - A special file (FIFO, socket, device node) is a host node with its type and rdev; the
//!   cache keeps no record of it and never opens it (`Error::special_open`).
//! - An unnamed file is a regular cached file under a staging name in the trash directory
//!   (the home files are reached by path, and the crash model has no O_TMPFILE). Its last
//!   release deletes it; after a crash the next open empties the trash, so nothing of it
//!   survives. `link` moves it out of the trash: its data and its name come together.
//! - RENAME_EXCHANGE is the host's renameat2 (atomic); its intent records the inode the
//!   first name held, so recovery exchanges back only if the exchange happened.

use super::ops::intent;
use super::{CacheStore, Tables, Undo, TRASH_NAME};
use crate::format::intent::IntentKind;
use crate::home::host_err;
use hostfs::{HostFs, HostFsResult, NodeKind, OpenOptions, RenameHow};
use pmem::Region;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::path::check_entry_name;
use store::{
    check_symlink_target, Error, Fh, FileKind, Ino, Metadata, OpenFlags, RenameMode, Result, TxId,
    ROOT_INO,
};

fn node_kind(kind: FileKind) -> Result<NodeKind> {
    match kind {
        FileKind::Fifo => Ok(NodeKind::Fifo),
        FileKind::Socket => Ok(NodeKind::Socket),
        FileKind::CharDevice => Ok(NodeKind::CharDevice),
        FileKind::BlockDevice => Ok(NodeKind::BlockDevice),
        other => Err(Error::InvalidArgument(format!(
            "mknod of a {other:?} (FIFOs, sockets and device nodes only)"
        ))),
    }
}

fn parent_of(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    /// A new entry that is not a cached file (a symlink or special file), made by `make`.
    fn new_entry(
        &self,
        parent: Ino,
        name: &[u8],
        tx: Option<TxId>,
        make: impl FnOnce(&H, &Path) -> HostFsResult<()>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let mut t = self.t.lock();
        let (dp, p) = self.free_name(&t, parent, name, tx)?;
        let slot = self.intend(&mut t, tx, intent(IntentKind::Created, &p, Path::new("")))?;
        let made = make(&self.host, &p)
            .map_err(host_err)
            .and_then(|()| self.sync_dir(&dp));
        if let Err(e) = made {
            self.unintend(slot);
            return Err(e);
        }
        let ino = t.names.ino_of(self.host.stat(&p).map_err(host_err)?.ino);
        t.names.add(ino, parent, name);
        if let Some(TxId(id)) = tx {
            t.created_by.insert(ino, id);
            let undo = Undo::Created {
                parent,
                name: name.to_vec(),
                ino,
                dir: false,
            };
            Self::push_undo(&mut t, tx, undo, slot);
        }
        self.meta(&t, ino)
    }

    pub(super) fn do_symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        check_symlink_target(target)?;
        self.new_entry(parent, name, tx, |host, p| host.symlink(target, p))
    }

    pub(super) fn do_readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let t = self.t.lock();
        let p = t.names.path(ino)?;
        if self.meta(&t, ino)?.kind != FileKind::Symlink {
            return Err(Error::InvalidArgument(format!(
                "readlink of inode {ino}, not a symlink"
            )));
        }
        self.host.readlink(&p).map_err(host_err)
    }

    pub(super) fn do_mknod(
        &self,
        parent: Ino,
        name: &[u8],
        (kind, perm, rdev): (FileKind, u32, u64),
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let node = node_kind(kind)?;
        let rdev = if kind.is_device() { rdev } else { 0 };
        self.new_entry(parent, name, tx, |host, p| {
            host.mknod(p, node, perm & 0o7777, rdev)?;
            // The permissions asked for, not those the process's umask left.
            host.set_perm(p, perm & 0o7777)
        })
    }

    pub(super) fn do_tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let (ino, mut meta) = {
            let mut t = self.t.lock();
            Self::tx_open(&t, tx)?;
            self.dir_path(&t, parent)?;
            let ino = self.make_unnamed(&mut t, perm)?;
            if let Some(TxId(id)) = tx {
                // The transaction's own: its abort deletes it (the staging name needs no
                // intent: the next open empties the trash).
                t.created_by.insert(ino, id);
                let (trash, name) = t.names.first(ino).ok_or(Error::BadHandle(ino))?;
                let undo = Undo::Created {
                    parent: trash,
                    name,
                    ino,
                    dir: false,
                };
                Self::push_undo(&mut t, tx, undo, None);
            }
            (ino, self.meta(&t, ino)?)
        };
        let fh = self.do_open(ino, flags)?;
        if let Some(TxId(id)) = tx {
            let mut t = self.t.lock();
            if let Err(e) = Self::bind(&mut t, id, Fh(fh.0)) {
                drop(t);
                let _ = self.do_release(fh);
                return Err(e);
            }
        }
        meta.nlink = 0;
        Ok((meta, fh))
    }

    /// A new cached file under a staging name in the trash, unnamed until `link`.
    fn make_unnamed(&self, t: &mut Tables, perm: u32) -> Result<Ino> {
        let trash = self.ensure_trash()?;
        t.trash_seq += 1;
        let name = format!("unnamed-{}-{}", crate::now_tag(), t.trash_seq).into_bytes();
        let p = trash.join(OsStr::from_bytes(&name));
        let opts = OpenOptions {
            perm: perm & 0o7777,
            ..OpenOptions::create_new()
        };
        let f = self.host.open(&p, &opts).map_err(host_err)?;
        let st = self.host.file_stat(&f).map_err(host_err)?;
        // persist: the staging name is durable before the cache records the file, so that
        // recovery finds it in the trash (and drops it) rather than a record of a file gone.
        self.sync_dir(trash)?;
        self.cache.backing().register(st.ino, &p, Some(f));
        let key = match self.cache.create_file(st.ino, 0) {
            Ok(key) => key,
            Err(e) => {
                self.cache.backing().forget(st.ino);
                self.host.unlink(&p).map_err(host_err)?;
                return Err(e);
            }
        };
        let trash_ino = t.names.ino_of(self.host.stat(trash).map_err(host_err)?.ino);
        t.names.add(trash_ino, ROOT_INO, TRASH_NAME.as_bytes());
        let ino = t.names.ino_of(st.ino);
        t.names.add(ino, trash_ino, &name);
        t.keys.insert(ino, key);
        t.unnamed.insert(ino);
        Ok(ino)
    }

    /// Whether `ino` is reached by a name in the trash (an unnamed file not yet linked).
    pub(super) fn in_trash(t: &Tables, ino: Ino) -> bool {
        t.names
            .path(ino)
            .is_ok_and(|p| p.starts_with(Path::new(TRASH_NAME)))
    }

    /// An unnamed file's last release: its staging name and its cache record go.
    pub(super) fn delete_unnamed(&self, t: &mut Tables, ino: Ino) -> Result<()> {
        if let Some((parent, name)) = t.names.first(ino) {
            let p = t.names.child(parent, &name)?;
            if p.starts_with(Path::new(TRASH_NAME)) {
                self.before_name_goes(t, ino)?;
                super::tx::remove_path(&*self.host, &p)?;
                t.names.remove(ino, parent, &name);
            }
        }
        t.orphans.remove(&ino);
        if t.names.count(ino) == 0 {
            self.drop_file(t, ino)?;
        }
        Ok(())
    }

    /// The first name of an unnamed file: its staging name moved out of the trash (under a
    /// `Moved` intent in a transaction, so an abort or a crash returns it to the trash).
    pub(super) fn name_unnamed(
        &self,
        t: &mut Tables,
        ino: Ino,
        (new_parent, new_name): (Ino, &[u8]),
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let dp = self.dir_path(t, new_parent)?;
        let to = dp.join(OsStr::from_bytes(new_name));
        if Self::hidden(new_parent, new_name) || self.stat_opt(&to)?.is_some() {
            return Err(Error::Exists(to.display().to_string()));
        }
        Self::check_owner(t, &[ino, new_parent], tx)?;
        let (trash_ino, name) = t.names.first(ino).ok_or(Error::BadHandle(ino))?;
        let from = t.names.child(trash_ino, &name)?;
        let slot = self.intend(t, tx, intent(IntentKind::Moved, &from, &to))?;
        let moved = self
            .host
            .rename(&from, &to)
            .map_err(host_err)
            .and_then(|()| self.sync_dir(&dp))
            .and_then(|()| self.sync_dir(parent_of(&from)));
        if let Err(e) = moved {
            self.unintend(slot);
            return Err(e);
        }
        self.cache.backing().moved(&from, &to);
        t.names.rename(ino, trash_ino, &name, new_parent, new_name);
        if tx.is_some() {
            let undo = Undo::Moved {
                from: (trash_ino, name),
                to: (new_parent, new_name.to_vec()),
                ino,
            };
            Self::push_undo(t, tx, undo, slot);
        } else {
            t.unnamed.remove(&ino);
        }
        self.meta(t, ino)
    }

    pub(super) fn do_rename_with(
        &self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        match mode {
            RenameMode::Replace => self.do_rename(from.0, from.1, to.0, to.1, tx),
            RenameMode::NoReplace => {
                check_entry_name(from.1)?;
                check_entry_name(to.1)?;
                {
                    let t = self.t.lock();
                    Self::tx_open(&t, tx)?;
                    let a = self.dir_path(&t, from.0)?.join(OsStr::from_bytes(from.1));
                    let b = self.dir_path(&t, to.0)?.join(OsStr::from_bytes(to.1));
                    self.host.stat(&a).map_err(host_err)?;
                    if Self::hidden(to.0, to.1) || self.stat_opt(&b)?.is_some() {
                        return Err(Error::Exists(b.display().to_string()));
                    }
                }
                self.do_rename(from.0, from.1, to.0, to.1, tx)
            }
            RenameMode::Exchange => self.do_exchange(from, to, tx),
        }
    }

    fn do_exchange(&self, from: (Ino, &[u8]), to: (Ino, &[u8]), tx: Option<TxId>) -> Result<()> {
        check_entry_name(from.1)?;
        check_entry_name(to.1)?;
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        let a = self.dir_path(&t, from.0)?.join(OsStr::from_bytes(from.1));
        let b = self.dir_path(&t, to.0)?.join(OsStr::from_bytes(to.1));
        if Self::hidden(from.0, from.1) || Self::hidden(to.0, to.1) {
            return Err(Error::InvalidArgument("reserved name".into()));
        }
        let sa = self.host.stat(&a).map_err(host_err)?;
        let sb = self.host.stat(&b).map_err(host_err)?;
        if sa.ino == sb.ino {
            return Ok(());
        }
        let dir = |st: &hostfs::Stat| st.kind == hostfs::FileKind::Dir;
        if (dir(&sa) && b.starts_with(&a)) || (dir(&sb) && a.starts_with(&b)) {
            return Err(Error::InvalidArgument(format!(
                "cannot exchange {} with a directory inside it",
                a.display()
            )));
        }
        let (ino_a, ino_b) = (t.names.ino_of(sa.ino), t.names.ino_of(sb.ino));
        Self::check_owner(&t, &[from.0, to.0, ino_a, ino_b], tx)?;
        let mut it = intent(IntentKind::Exchanged, &a, &b);
        it.id = sa.ino;
        let slot = self.intend(&mut t, tx, it)?;
        let (a, b) = ((from.0, from.1.to_vec()), (to.0, to.1.to_vec()));
        if let Err(e) = self.exchange_names(&mut t, &a, &b) {
            self.unintend(slot);
            return Err(e);
        }
        Self::push_undo(&mut t, tx, Undo::Exchanged { a, b }, slot);
        Ok(())
    }

    /// Exchange two names on the home directory, durably, and in the tables.
    pub(super) fn exchange_names(
        &self,
        t: &mut Tables,
        (pa, na): &super::Entry,
        (pb, nb): &super::Entry,
    ) -> Result<()> {
        let a: PathBuf = t.names.child(*pa, na)?;
        let b: PathBuf = t.names.child(*pb, nb)?;
        let ino_a = t.names.ino_of(self.host.stat(&a).map_err(host_err)?.ino);
        let ino_b = t.names.ino_of(self.host.stat(&b).map_err(host_err)?.ino);
        self.host
            .rename_with(&a, &b, RenameHow::Exchange)
            .map_err(|e| match e.errno() {
                libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS => Error::Unsupported(format!(
                    "{}: the home file system refuses RENAME_EXCHANGE",
                    a.display()
                )),
                _ => host_err(e),
            })?;
        self.sync_dir(parent_of(&a))?;
        if parent_of(&a) != parent_of(&b) {
            self.sync_dir(parent_of(&b))?;
        }
        t.names.rename(ino_a, *pa, na, *pb, nb);
        t.names.rename(ino_b, *pb, nb, *pa, na);
        self.cache.backing().exchanged(&a, &b);
        Ok(())
    }
}
