//! The path table: host paths of inodes (learned from lookups and directory walks), the
//! mapping between host inode numbers and the store's, and the stat of a path as Metadata.

use crate::host::rel_path;
use crate::host::{FileMedia, MediaStat};
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::log::intent::TRASH_NAME;
use crate::namespace::tables::Tables;
use pmem::Region;
use std::path::{Path, PathBuf};
use store::{Error, FileKind, Ino, Metadata, Result, ROOT_INO};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn ino_of(&self, id: u64) -> Ino {
        if id == self.root_id {
            ROOT_INO
        } else if id == ROOT_INO {
            self.root_id
        } else {
            id
        }
    }

    pub(crate) fn path_of(t: &Tables<R, M>, ino: Ino) -> Result<PathBuf> {
        let mut parts = Vec::new();
        let mut cur = ino;
        let mut guard = 0;
        while cur != ROOT_INO {
            let (parent, name) = t
                .names
                .get(&cur)
                .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
            parts.push(name.clone());
            cur = *parent;
            guard += 1;
            if guard > 4096 {
                return Err(Error::corrupt("namespace loop", ino));
            }
        }
        parts.reverse();
        Ok(rel_path(&parts))
    }

    /// The path of `ino`; an inode not seen since the store was opened (numbers are the host's and
    /// survive a reopen) is found by walking the directory tree, learning names on the way.
    pub(crate) fn path_for(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<PathBuf> {
        if let Ok(p) = Self::path_of(t, ino) {
            return Ok(p);
        }
        let mut stack = vec![ROOT_INO];
        while let Some(dir) = stack.pop() {
            let Ok(dir_path) = Self::path_of(t, dir) else {
                continue;
            };
            let Ok(list) = self.shared.media.read_dir(&dir_path) else {
                continue;
            };
            for (name, st) in list {
                if dir == ROOT_INO && name == TRASH_NAME.as_bytes() {
                    continue;
                }
                let child = self.ino_of(st.id);
                t.names.insert(child, (dir, name));
                if child == ino {
                    return Self::path_of(t, ino);
                }
                if st.kind == FileKind::Dir {
                    stack.push(child);
                }
            }
        }
        Err(Error::NotFound(format!("inode {ino}")))
    }

    pub(crate) fn child_path(
        &self,
        t: &mut Tables<R, M>,
        parent: Ino,
        name: &[u8],
    ) -> Result<PathBuf> {
        store::path::check_name(name)?;
        if name == b"."
            || name == b".."
            || (parent == ROOT_INO
                && (name == crate::host::MARKER_NAME.as_bytes() || name == TRASH_NAME.as_bytes()))
        {
            return Err(Error::InvalidArgument(format!(
                "reserved name {:?}",
                String::from_utf8_lossy(name)
            )));
        }
        use std::os::unix::ffi::OsStrExt;
        Ok(self
            .path_for(t, parent)?
            .join(std::ffi::OsStr::from_bytes(name)))
    }

    pub(crate) fn meta_of(&self, t: &Tables<R, M>, st: &MediaStat) -> Metadata {
        let ino = self.ino_of(st.id);
        let size = t.open.get(&ino).map(|(f, _)| f.size()).unwrap_or(st.len);
        Metadata {
            ino,
            kind: st.kind,
            size,
            perm: st.perm,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            allocated: st.allocated,
            atime: st.atime,
            mtime: st.mtime,
            ctime: st.ctime,
            rdev: st.rdev,
        }
    }

    pub(crate) fn stat_path(&self, path: &Path) -> Result<MediaStat> {
        self.shared
            .media
            .stat(path)
            .map_err(|e| io_err(path, "stat", e))
    }

    /// Learn the inode numbers along `path` (after an undo moved something back there).
    pub(crate) fn relearn(&self, t: &mut Tables<R, M>, path: &Path) {
        let mut cur = ROOT_INO;
        let mut prefix = PathBuf::new();
        for c in path.components() {
            prefix.push(c);
            let Ok(st) = self.shared.media.stat(&prefix) else {
                return;
            };
            let ino = self.ino_of(st.id);
            use std::os::unix::ffi::OsStrExt;
            t.names
                .insert(ino, (cur, c.as_os_str().as_bytes().to_vec()));
            cur = ino;
        }
    }

    /// Give every open file its current host path.
    pub(crate) fn refresh_paths(&self, t: &Tables<R, M>) {
        for (ino, (f, _)) in &t.open {
            if let Ok(p) = Self::path_of(t, *ino) {
                let mut st = f.state.write();
                if st.path.is_some() {
                    st.path = Some(p);
                }
            }
        }
    }
}
