//! Namespace calls of the Store API (lookup, getattr, setattr, create, mkdir, unlink, rmdir,
//! rename, readdir) on the host directory; inside a transaction each change is logged as an
//! intent first (`intents.rs`).

use crate::host::{FileMedia, MediaStat};
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::log::intent::{Intent, TRASH_NAME};
use crate::namespace::tables::Tables;
use pmem::Region;
use std::path::Path;
use std::sync::atomic::Ordering;
use store::path::check_entry_name;
use store::{DirEntry, SetAttr};
use store::{Error, FileKind, Ino, Metadata, Result, TxId, ROOT_INO};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn lookup_child(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let mut t = self.tables.lock();
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        let ino = self.ino_of(st.id);
        t.names.insert(ino, (parent, name.to_vec()));
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn attr_of(&self, ino: Ino) -> Result<Metadata> {
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let st = self.stat_path(&path)?;
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn set_attr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.path_for(&mut t, ino)?;
        Self::check_owner(&t, &[ino], tx.map(|t| t.0))?;
        let owner = attr.uid.is_some() || attr.gid.is_some();
        if let Some(tx) = tx {
            let old = self.stat_path(&path)?;
            if owner {
                let it = Intent::Owner {
                    a: path.clone(),
                    uid: old.uid,
                    gid: old.gid,
                };
                self.log_intent(&mut t, tx, it)?;
            }
            let it = Intent::Attr {
                a: path.clone(),
                perm: old.perm,
                atime: old.atime,
                mtime: old.mtime,
            };
            self.log_intent(&mut t, tx, it)?;
        }
        if owner {
            self.shared
                .media
                .set_owner(&path, attr.uid, attr.gid)
                .map_err(|e| io_err(&path, "chown", e))?;
        }
        if let Some(perm) = attr.perm {
            self.shared
                .media
                .set_perm(&path, perm)
                .map_err(|e| io_err(&path, "chmod", e))?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            self.shared
                .media
                .set_times(&path, attr.atime, attr.mtime)
                .map_err(|e| io_err(&path, "utimes", e))?;
        }
        let st = self.stat_path(&path)?;
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn create_file(
        &self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        self.check_new_entry(&t, parent, &path, tx)?;
        let st = self.created_in_tx(&mut t, tx, &path, |m| m.create(&path, perm), "create")?;
        t.names.insert(self.ino_of(st.id), (parent, name.to_vec()));
        if let Some(tx) = tx {
            t.created.insert(self.ino_of(st.id), tx.0);
        }
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn make_dir(
        &self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        self.check_new_entry(&t, parent, &path, tx)?;
        let st = self.created_in_tx(&mut t, tx, &path, |m| m.mkdir(&path, perm), "mkdir")?;
        t.names.insert(self.ino_of(st.id), (parent, name.to_vec()));
        if let Some(tx) = tx {
            t.created.insert(self.ino_of(st.id), tx.0);
        }
        Ok(self.meta_of(&t, &st))
    }

    pub(crate) fn unlink_name(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        if st.kind == FileKind::Dir {
            return Err(Error::IsDir(path.display().to_string()));
        }
        Self::check_owner(&t, &[parent, self.ino_of(st.id)], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            // In a transaction the name moves to the trash (an open file keeps working).
            self.remove_in_tx(&mut t, tx, &path)?;
            return Ok(());
        }
        let ino = self.ino_of(st.id);
        if t.open.contains_key(&ino) && st.nlink > 1 {
            // One of several names: the file keeps the others (and its handles a path).
            self.shared
                .media
                .unlink(&path)
                .map_err(|e| io_err(&path, "unlink", e))?;
            self.forget_name(&mut t, ino, parent, name);
            return Ok(());
        }
        if t.open.contains_key(&ino) {
            // An open file lives on: its name moves to the trash (one durable rename) and the
            // host file is deleted at the last release (or by the next open after a crash).
            let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
            let trash = Path::new(TRASH_NAME).join(format!("unlinked-{ino}-{n}"));
            self.shared
                .media
                .rename(&path, &trash)
                .map_err(|e| io_err(&path, "unlink", e))?;
            let trash_ino = self.ino_of(self.stat_path(Path::new(TRASH_NAME))?.id);
            t.names
                .insert(trash_ino, (ROOT_INO, TRASH_NAME.as_bytes().to_vec()));
            t.names
                .insert(ino, (trash_ino, format!("unlinked-{ino}-{n}").into_bytes()));
            if let Some((_, u)) = t.open.get_mut(&ino) {
                u.unlinked = Some((trash, crate::namespace::tables::Trashed::Unlinked));
            }
            self.refresh_paths(&t);
            return Ok(());
        }
        // The file's slot is freed before the host name goes, so that a reused inode number
        // can never be mistaken for it at recovery (here: the file is not open, no slot).
        self.shared
            .media
            .unlink(&path)
            .map_err(|e| io_err(&path, "unlink", e))?;
        // Another name of it (a hard link) is found again by a walk when asked for.
        t.names.remove(&ino);
        Ok(())
    }

    /// The name `parent/name` of `ino` is gone: forget it, and give an open file another of
    /// its names (found by a walk) for its later host calls.
    pub(crate) fn forget_name(&self, t: &mut Tables<R, M>, ino: Ino, parent: Ino, name: &[u8]) {
        if t.names.get(&ino) == Some(&(parent, name.to_vec())) {
            t.names.remove(&ino);
        }
        let Some(f) = t.open.get(&ino).map(|(f, _)| f.clone()) else {
            return;
        };
        if let Ok(p) = self.path_for(t, ino) {
            let mut st = f.state.write();
            if st.path.is_some() {
                st.path = Some(p);
            }
        }
    }

    pub(crate) fn remove_dir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        if st.kind != FileKind::Dir {
            return Err(Error::NotDir(path.display().to_string()));
        }
        if !self
            .shared
            .media
            .read_dir(&path)
            .map_err(|e| io_err(&path, "readdir", e))?
            .is_empty()
        {
            return Err(Error::NotEmpty(path.display().to_string()));
        }
        Self::check_owner(&t, &[parent, self.ino_of(st.id)], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            self.remove_in_tx(&mut t, tx, &path)?;
            return Ok(());
        }
        self.shared
            .media
            .rmdir(&path)
            .map_err(|e| io_err(&path, "rmdir", e))?;
        t.names.remove(&self.ino_of(st.id));
        Ok(())
    }

    pub(crate) fn rename_entry(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        let Some(tx) = tx else {
            return self.rename_alone(parent, name, new_parent, new_name);
        };
        let mut t = self.tables.lock();
        Self::tx_open(&t, Some(tx))?;
        let from = self.child_path(&mut t, parent, name)?;
        let to = self.child_path(&mut t, new_parent, new_name)?;
        let moved = self.stat_path(&from)?;
        let mut changed = vec![parent, new_parent, self.ino_of(moved.id)];
        if let Ok(target) = self.stat_path(&to) {
            if target.id == moved.id {
                return Ok(()); // rename onto itself changes nothing
            }
            changed.push(self.ino_of(target.id));
        }
        Self::check_owner(&t, &changed, Some(tx.0))?;
        self.rename_in_tx(
            &mut t,
            tx,
            (parent, name, &from),
            (new_parent, new_name, &to),
            &moved,
        )
    }

    pub(crate) fn list_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let list = self
            .shared
            .media
            .read_dir(&path)
            .map_err(|e| io_err(&path, "readdir", e))?;
        Ok(list
            .into_iter()
            .filter(|(name, _)| ino != ROOT_INO || name != TRASH_NAME.as_bytes())
            .map(|(name, st)| {
                let child = self.ino_of(st.id);
                t.names.insert(child, (ino, name.clone()));
                DirEntry {
                    name,
                    ino: child,
                    kind: st.kind,
                }
            })
            .collect())
    }

    /// Create a file or directory, under a `Created` intent when in a transaction.
    pub(crate) fn created_in_tx(
        &self,
        t: &mut Tables<R, M>,
        tx: Option<TxId>,
        path: &Path,
        op: impl FnOnce(&M) -> std::io::Result<MediaStat>,
        what: &'static str,
    ) -> Result<MediaStat> {
        if let Some(tx) = tx {
            if self.shared.media.stat(path).is_ok() {
                return Err(Error::Exists(path.display().to_string()));
            }
            self.log_intent(
                t,
                tx,
                Intent::Created {
                    a: path.to_path_buf(),
                },
            )?;
        }
        match op(&self.shared.media) {
            Ok(st) => Ok(st),
            Err(e) => {
                if let Some(tx) = tx {
                    self.withdraw_intent(t, tx);
                }
                Err(io_err(path, what, e))
            }
        }
    }

    /// rename(2) inside a transaction: a replaced target goes to the trash first.
    pub(crate) fn rename_in_tx(
        &self,
        t: &mut Tables<R, M>,
        tx: TxId,
        from: (Ino, &[u8], &Path),
        to: (Ino, &[u8], &Path),
        moved: &MediaStat,
    ) -> Result<()> {
        let (from_path, to_path) = (from.2, to.2);
        if let Ok(target) = self.stat_path(to_path) {
            if target.id == moved.id {
                return Ok(());
            }
            let shown = to_path.display().to_string();
            match (moved.kind == FileKind::Dir, target.kind == FileKind::Dir) {
                (false, true) => return Err(Error::IsDir(shown)),
                (true, false) => return Err(Error::NotDir(shown)),
                (true, true) => {
                    if !self
                        .shared
                        .media
                        .read_dir(to_path)
                        .map_err(|e| io_err(to_path, "readdir", e))?
                        .is_empty()
                    {
                        return Err(Error::NotEmpty(shown));
                    }
                }
                (false, false) => {}
            }
            if to_path.starts_with(from_path) {
                return Err(Error::InvalidArgument(format!(
                    "rename of {} into itself",
                    from_path.display()
                )));
            }
            self.remove_in_tx(t, tx, to_path)?;
        }
        self.log_intent(
            t,
            tx,
            Intent::Renamed {
                a: from_path.to_path_buf(),
                b: to_path.to_path_buf(),
            },
        )?;
        if let Err(e) = self.shared.media.rename(from_path, to_path) {
            self.withdraw_intent(t, tx);
            return Err(io_err(from_path, "rename", e));
        }
        t.names.insert(self.ino_of(moved.id), (to.0, to.1.to_vec()));
        let _ = from;
        self.refresh_paths(t);
        Ok(())
    }

    /// A rename outside a transaction runs as a transaction of its own. On the host a
    /// rename is two directory entries that become durable independently: a crash before
    /// the directories are synced may keep both names, or (renaming over another file)
    /// the old target and the source. The transaction's intents (the replaced target to
    /// the trash, then the move) let recovery settle either way.
    pub(crate) fn rename_alone(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<()> {
        let tx = self.begin_tx(&[])?;
        match self.rename_entry(parent, name, new_parent, new_name, Some(tx)) {
            Ok(()) => self.commit_tx(tx),
            Err(e) => {
                let _ = self.abort_tx(tx);
                Err(e)
            }
        }
    }
}
