//! Symlinks, special files, hard links, unnamed files (O_TMPFILE) and rename modes on the host
//! directory. Each is one host call made durable before it returns, under an intent record
//! inside a transaction (`intents.rs`), like the other namespace calls.
//!
//! Unnamed files are made under a hidden staging name in the trash directory, not with the
//! host's O_TMPFILE: the engine names every host file by path (its mapping, the per-file
//! records found by a directory walk at recovery, the crash model that has no O_TMPFILE), and
//! a name in the trash is deleted at the last release or, after a crash, by the next open
//! (which empties the trash), so nothing of an unnamed file survives either.

use crate::host::{FileMedia, MediaStat};
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::log::intent::{Intent, TRASH_NAME};
use crate::namespace::tables::{FileUse, Tables, Trashed};
use pmem::Region;
use std::path::Path;
use std::sync::atomic::Ordering;
use store::path::check_entry_name;
use store::{
    check_symlink_target, Error, Fh, FileKind, Ino, Metadata, OpenFlags, RenameMode, Result, TxId,
    ROOT_INO,
};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    /// A new entry made by `op` (a symlink or special file), as `create_file` makes a file.
    fn new_entry(
        &self,
        parent: Ino,
        name: &[u8],
        tx: Option<TxId>,
        what: &'static str,
        op: impl FnOnce(&M, &Path) -> std::io::Result<MediaStat>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        self.check_new_entry(&t, parent, &path, tx)?;
        let st = self.created_in_tx(&mut t, tx, &path, |m| op(m, &path), what)?;
        let ino = self.ino_of(st.id);
        t.names.insert(ino, (parent, name.to_vec()));
        if let Some(tx) = tx {
            t.created.insert(ino, tx.0);
        }
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn make_symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_symlink_target(target)?;
        self.new_entry(parent, name, tx, "symlink", |m, path| {
            m.symlink(path, target)
        })
    }

    pub(crate) fn read_link(&self, ino: Ino) -> Result<Vec<u8>> {
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        if self.stat_path(&path)?.kind != FileKind::Symlink {
            return Err(Error::InvalidArgument(format!(
                "readlink of {}, not a symlink",
                path.display()
            )));
        }
        self.shared
            .media
            .readlink(&path)
            .map_err(|e| io_err(&path, "readlink", e))
    }

    pub(crate) fn make_node(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        if !kind.is_special() {
            return Err(Error::InvalidArgument(format!(
                "mknod of a {kind:?} (FIFOs, sockets and device nodes only)"
            )));
        }
        let rdev = if kind.is_device() { rdev } else { 0 };
        self.new_entry(parent, name, tx, "mknod", |m, path| {
            m.mknod(path, kind, perm, rdev)
        })
    }

    pub(crate) fn link_entry(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(new_name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let new_path = self.child_path(&mut t, new_parent, new_name)?;
        match t.open.get(&ino).and_then(|(_, u)| u.unlinked.clone()) {
            Some((trash, Trashed::Unnamed)) => {
                let to = (new_parent, new_name, new_path.as_path());
                return self.name_unnamed(&mut t, ino, &trash, to, tx);
            }
            Some((_, Trashed::Unlinked)) => {
                return Err(Error::NotFound(format!("inode {ino} has no name")))
            }
            None => {}
        }
        let path = self.path_for(&mut t, ino)?;
        if self.stat_path(&path)?.kind == FileKind::Dir {
            return Err(Error::NotPermitted("hard link to a directory".into()));
        }
        if self.shared.media.stat(&new_path).is_ok() {
            return Err(Error::Exists(new_path.display().to_string()));
        }
        Self::check_owner(&t, &[ino, new_parent], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            let it = Intent::Linked {
                a: new_path.clone(),
            };
            self.log_intent(&mut t, tx, it)?;
        }
        if let Err(e) = self.shared.media.link(&path, &new_path) {
            if let Some(tx) = tx {
                self.withdraw_intent(&mut t, tx);
            }
            return Err(io_err(&new_path, "link", e));
        }
        let st = self.stat_path(&new_path)?;
        Ok(self.meta_of(&t, &st))
    }

    /// The first name of an unnamed file: a move out of the trash, under a rename intent in a
    /// transaction (the file stays unnamed until the commit, so an abort or crash returns it
    /// to the trash); outside one the move alone (link, sync, unlink, sync) is enough, as a
    /// crash that keeps both names leaves the trash one to the next open.
    fn name_unnamed(
        &self,
        t: &mut Tables<R, M>,
        ino: Ino,
        trash: &Path,
        to: (Ino, &[u8], &Path),
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let (new_parent, new_name, new_path) = to;
        if self.shared.media.stat(new_path).is_ok() {
            return Err(Error::Exists(new_path.display().to_string()));
        }
        Self::check_owner(t, &[ino, new_parent], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            let it = Intent::Renamed {
                a: trash.to_path_buf(),
                b: new_path.to_path_buf(),
            };
            self.log_intent(t, tx, it)?;
        }
        if let Err(e) = self.shared.media.rename(trash, new_path) {
            if let Some(tx) = tx {
                self.withdraw_intent(t, tx);
            }
            return Err(io_err(new_path, "link", e));
        }
        if tx.is_none() {
            if let Some((_, u)) = t.open.get_mut(&ino) {
                u.unlinked = None;
            }
        }
        t.names.insert(ino, (new_parent, new_name.to_vec()));
        self.refresh_paths(t);
        let st = self.stat_path(new_path)?;
        Ok(self.meta_of(t, &st))
    }

    pub(crate) fn make_tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let (ino, mut meta) = {
            let mut t = self.tables.lock();
            Self::tx_open(&t, tx)?;
            self.check_handle_room(t.handles.len())?;
            let dir = self.path_for(&mut t, parent)?;
            if self.stat_path(&dir)?.kind != FileKind::Dir {
                return Err(Error::NotDir(dir.display().to_string()));
            }
            let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
            let name = format!("unnamed-{n}");
            let trash = Path::new(TRASH_NAME).join(&name);
            let st = self
                .shared
                .media
                .create(&trash, perm)
                .map_err(|e| io_err(&trash, "create", e))?;
            let ino = self.ino_of(st.id);
            let trash_ino = self.ino_of(self.stat_path(Path::new(TRASH_NAME))?.id);
            t.names
                .insert(trash_ino, (ROOT_INO, TRASH_NAME.as_bytes().to_vec()));
            t.names.insert(ino, (trash_ino, name.into_bytes()));
            let file = crate::file::MmioFile::open(&self.shared, ino, trash.clone(), st.id, 0)?;
            let uses = FileUse {
                unlinked: Some((trash, Trashed::Unnamed)),
                ..FileUse::default()
            };
            t.open.insert(ino, (file, uses));
            (ino, self.meta_of(&t, &st))
        };
        let fh = self.open_handle(ino, flags)?;
        if let Some(tx) = tx {
            if let Err(e) = self.add_to_tx(tx, fh) {
                let _ = self.release_handle(fh);
                return Err(e);
            }
        }
        meta.nlink = 0;
        Ok((meta, fh))
    }

    pub(crate) fn rename_mode(
        &self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        match mode {
            RenameMode::Replace => self.rename_entry(from.0, from.1, to.0, to.1, tx),
            RenameMode::NoReplace => {
                check_entry_name(from.1)?;
                check_entry_name(to.1)?;
                {
                    let mut t = self.tables.lock();
                    Self::tx_open(&t, tx)?;
                    let a = self.child_path(&mut t, from.0, from.1)?;
                    let b = self.child_path(&mut t, to.0, to.1)?;
                    self.stat_path(&a)?;
                    if self.shared.media.stat(&b).is_ok() {
                        return Err(Error::Exists(b.display().to_string()));
                    }
                }
                // A file moves by link + unlink, so a name made meanwhile fails the link
                // (EEXIST) instead of being replaced.
                self.rename_entry(from.0, from.1, to.0, to.1, tx)
            }
            RenameMode::Exchange => self.exchange_entries(from, to, tx),
        }
    }

    fn exchange_entries(
        &self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(from.1)?;
        check_entry_name(to.1)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let a = self.child_path(&mut t, from.0, from.1)?;
        let b = self.child_path(&mut t, to.0, to.1)?;
        let (sa, sb) = (self.stat_path(&a)?, self.stat_path(&b)?);
        if sa.id == sb.id {
            return Ok(());
        }
        if (sa.kind == FileKind::Dir && b.starts_with(&a))
            || (sb.kind == FileKind::Dir && a.starts_with(&b))
        {
            return Err(Error::InvalidArgument(format!(
                "cannot exchange {} with a directory inside it",
                a.display()
            )));
        }
        let (ino_a, ino_b) = (self.ino_of(sa.id), self.ino_of(sb.id));
        Self::check_owner(&t, &[from.0, to.0, ino_a, ino_b], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            let it = Intent::Exchanged {
                a: a.clone(),
                b: b.clone(),
                id_a: sa.id,
            };
            self.log_intent(&mut t, tx, it)?;
        }
        if let Err(e) = self.shared.media.exchange(&a, &b) {
            if let Some(tx) = tx {
                self.withdraw_intent(&mut t, tx);
            }
            // The engine refused a directory and its descendant above: EINVAL here is the home
            // file system refusing the flag itself (GlusterFS's FUSE client does).
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)
            ) {
                return Err(Error::Unsupported(format!(
                    "{}: the home file system refuses RENAME_EXCHANGE",
                    a.display()
                )));
            }
            return Err(io_err(&a, "exchange", e));
        }
        t.names.insert(ino_a, (to.0, to.1.to_vec()));
        t.names.insert(ino_b, (from.0, from.1.to_vec()));
        self.refresh_paths(&t);
        Ok(())
    }
}
