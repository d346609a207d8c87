//! File handles: open and release (the open-file table's use counts, closing a file nobody
//! uses), and the data calls of the Store API through a handle (read, write, set_len, fsync,
//! fstat, O_ATOMIC).

use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::namespace::tables::{FileUse, Handle, Tables};
use pmem::Region;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::OpenFlags;
use store::{Error, Fh, FileKind, Ino, Metadata, Result};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn handle_file(&self, fh: Fh) -> Result<Arc<MmioFile<R, M>>> {
        let t = self.tables.lock();
        t.live(fh).map(|h| h.file.clone())
    }

    pub(crate) fn files_of_handles(&self, fhs: &[Fh]) -> Result<Vec<Arc<MmioFile<R, M>>>> {
        let t = self.tables.lock();
        fhs.iter()
            .map(|&fh| t.live(fh).map(|h| h.file.clone()))
            .collect()
    }

    /// Close (checkpoint, free the slot) a file that is being unlinked or replaced.
    pub(crate) fn detach_open(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<()> {
        if let Some((f, _)) = t.open.get(&ino) {
            f.close(&self.shared)?;
            let mut st = f.state.write();
            st.path = None;
        }
        Ok(())
    }

    /// Close the file of `ino` if nothing uses it any more.
    pub(crate) fn maybe_close(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<()> {
        let idle = t
            .open
            .get(&ino)
            .is_some_and(|(_, u)| u.handles == 0 && u.tx.is_none());
        if idle {
            if let Some((f, u)) = t.open.remove(&ino) {
                f.close(&self.shared)?;
                if let Some((trash, _)) = u.unlinked {
                    // The slot is free: now the host file may go (its inode number with it).
                    self.shared
                        .media
                        .unlink(&trash)
                        .map_err(|e| io_err(&trash, "unlink", e))?;
                    t.names.remove(&ino);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn open_handle(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut t = self.tables.lock();
        self.check_handle_room(t.handles.len())?;
        let path = self.path_for(&mut t, ino)?;
        let file = match t.open.get(&ino) {
            Some((f, _)) => f.clone(),
            None => {
                let st = self.stat_path(&path)?;
                match st.kind {
                    FileKind::Dir => return Err(Error::IsDir(path.display().to_string())),
                    FileKind::File => {}
                    FileKind::Symlink => {
                        return Err(Error::SymlinkLoop(path.display().to_string()))
                    }
                    kind => return Err(Error::special_open(ino, kind)),
                }
                let f = MmioFile::open(&self.shared, ino, path, st.id, st.len)?;
                t.open.insert(ino, (f.clone(), FileUse::default()));
                f
            }
        };
        if let Some((_, u)) = t.open.get_mut(&ino) {
            u.handles += 1;
            if flags.atomic {
                u.atomic_handles += 1;
            }
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        t.handles.insert(
            fh,
            Handle {
                file,
                flags,
                gone: false,
            },
        );
        Ok(Fh(fh))
    }

    pub(crate) fn release_handle(&self, fh: Fh) -> Result<()> {
        let mut t = self.tables.lock();
        let h = t.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        if h.gone {
            // Its file was closed and forgotten when the create was undone.
            return Ok(());
        }
        let ino = h.file.ino;
        let mut drop_pending = false;
        if let Some((_, u)) = t.open.get_mut(&ino) {
            u.handles -= 1;
            if h.flags.atomic {
                u.atomic_handles -= 1;
                drop_pending = u.atomic_handles == 0 && u.tx.is_none();
            }
        }
        if drop_pending {
            // Pending O_ATOMIC writes not yet fsynced are dropped, as a crash would.
            h.file.abort(&self.shared)?;
        }
        self.maybe_close(&mut t, ino)
    }

    pub(crate) fn read_handle(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let (file, flags) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            (h.file.clone(), h.flags)
        };
        if !flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        file.read(&self.shared, off, buf)
    }

    pub(crate) fn write_handle(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let (file, flags, deferred) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            if h.flags.write && !data.is_empty() {
                let ino = h.file.ino;
                Self::check_owner(&t, &[ino], Self::bound_tx(&t, ino))?;
            }
            (h.file.clone(), h.flags, Self::deferred(&t, h.file.ino))
        };
        if !flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let off = if flags.append { file.size() } else { off };
        if let Err(e) = file.write(&self.shared, off, data, !deferred) {
            if !deferred {
                // The call is its own transaction: the pieces it logged before failing (a full
                // log, say) must not ride along with the next call's commit.
                let _ = file.abort(&self.shared);
            }
            return Err(e);
        }
        if !deferred {
            // A call outside a transaction is its own transaction: durable when it returns.
            if let Err(e) = file.commit(&self.shared) {
                let _ = file.abort(&self.shared);
                return Err(e);
            }
        }
        Ok(data.len())
    }

    pub(crate) fn set_len_handle(&self, fh: Fh, len: u64) -> Result<()> {
        let (file, flags, deferred) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            if h.flags.write {
                let ino = h.file.ino;
                Self::check_owner(&t, &[ino], Self::bound_tx(&t, ino))?;
            }
            (h.file.clone(), h.flags, Self::deferred(&t, h.file.ino))
        };
        if !flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let done = file.set_len(&self.shared, len).and_then(|_| {
            if deferred {
                Ok(())
            } else {
                file.commit(&self.shared)
            }
        });
        if done.is_err() && !deferred {
            // As in `write`: a failed call outside a transaction leaves nothing behind.
            let _ = file.abort(&self.shared);
        }
        done
    }

    pub(crate) fn fsync_handle(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let (file, in_tx) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            let in_tx = t.open.get(&h.file.ino).is_some_and(|(_, u)| u.tx.is_some());
            (h.file.clone(), in_tx)
        };
        if in_tx {
            return Ok(()); // the transaction's commit makes it durable
        }
        file.commit(&self.shared)
    }

    pub(crate) fn stat_handle(&self, fh: Fh) -> Result<Metadata> {
        let t = self.tables.lock();
        let file = t.live(fh)?.file.clone();
        let unlinked = t
            .open
            .get(&file.ino)
            .is_some_and(|(_, u)| u.unlinked.is_some());
        let path = file.state.read().path.clone();
        match path.map(|p| self.stat_path(&p)) {
            Some(Ok(st)) => {
                let mut meta = self.meta_of(&t, &st);
                meta.ino = file.ino;
                if unlinked {
                    // Its name in the trash is not one (other hard links are).
                    meta.nlink = meta.nlink.saturating_sub(1);
                }
                Ok(meta)
            }
            _ => Ok(Metadata {
                ino: file.ino,
                kind: FileKind::File,
                size: file.size(),
                perm: 0,
                nlink: 0,
                uid: 0,
                gid: 0,
                allocated: 0,
                atime: 0,
                mtime: 0,
                ctime: 0,
                rdev: 0,
            }),
        }
    }

    pub(crate) fn set_handle_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let file = {
            let mut t = self.tables.lock();
            let h = t.live_mut(fh)?;
            if h.flags.atomic == atomic {
                return Ok(());
            }
            h.flags.atomic = atomic;
            let file = h.file.clone();
            if let Some((_, u)) = t.open.get_mut(&file.ino) {
                if atomic {
                    u.atomic_handles += 1;
                } else {
                    u.atomic_handles -= 1;
                }
            }
            file
        };
        if !atomic {
            file.commit(&self.shared)?;
        }
        Ok(())
    }
}
