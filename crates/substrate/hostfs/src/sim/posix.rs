//! The rest of the POSIX file API in the crash model: symlinks and special files (inodes
//! whose entries follow the directory rules), name exchanges (all or nothing until a sync of
//! either directory), owners, extended attributes (each attribute keeps its durable value or
//! any value since, until an fsync of its inode) and fallocate (a punched or zeroed range is
//! a write of zeros, torn per sector like any write).

use super::ops::{display, node, node_mut, parent, resolve};
use super::state::{Inode, State};
use super::{new_inode, SimFile, SimHostFs};
use crate::error::{invalid, io_errno};
use crate::{FallocateHow, FileKind, HostFsResult, NodeKind, RelPath, RenameHow, XattrHow};
use std::path::Path;

impl SimHostFs {
    fn new_entry(&self, path: &Path, inode: Inode, op: &'static str) -> HostFsResult<()> {
        let rel = RelPath::new(path)?;
        let mut state = self.lock();
        let (dir, name) = parent(&state, &rel, path, op)?;
        if node(&state, dir, path, op)?.live_entries.contains_key(name) {
            return Err(io_errno(display(path), op, libc::EEXIST));
        }
        let mut inode = inode;
        inode.nlink = 1;
        let ino = new_inode(&mut state, inode);
        state.bind(dir, name, Some(ino));
        Ok(())
    }

    pub(super) fn symlink_entry(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        if target.is_empty() || target.contains(&0) {
            return Err(io_errno(display(path), "symlink", libc::ENOENT));
        }
        let mut inode = Inode::new(FileKind::Symlink, 0o777);
        inode.target = target.to_vec();
        self.new_entry(path, inode, "symlink")
    }

    pub(super) fn readlink_entry(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        let rel = RelPath::new(path)?;
        let state = self.lock();
        let ino = resolve(&state, &rel, path, "readlink")?;
        let n = node(&state, ino, path, "readlink")?;
        if n.kind != FileKind::Symlink {
            return Err(io_errno(display(path), "readlink", libc::EINVAL));
        }
        Ok(n.target.clone())
    }

    pub(super) fn mknod_entry(
        &self,
        path: &Path,
        kind: NodeKind,
        perm: u32,
        rdev: u64,
    ) -> HostFsResult<()> {
        let mut inode = Inode::new(FileKind::Other, perm);
        inode.node = Some(kind);
        if matches!(kind, NodeKind::CharDevice | NodeKind::BlockDevice) {
            inode.rdev = rdev;
        }
        self.new_entry(path, inode, "mknod")
    }

    pub(super) fn rename_how(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        use crate::HostFs;
        let (from_rel, to_rel) = (RelPath::new(from)?, RelPath::new(to)?);
        {
            let state = self.lock();
            let (to_dir, to_name) = parent(&state, &to_rel, to, "renameat2")?;
            resolve(&state, &from_rel, from, "renameat2")?;
            let exists = node(&state, to_dir, to, "renameat2")?
                .live_entries
                .contains_key(to_name);
            match how {
                RenameHow::NoReplace if exists => {
                    return Err(io_errno(display(to), "renameat2", libc::EEXIST))
                }
                RenameHow::Exchange if !exists => {
                    return Err(io_errno(display(to), "renameat2", libc::ENOENT))
                }
                _ => {}
            }
        }
        match how {
            RenameHow::NoReplace => self.rename(from, to),
            RenameHow::Exchange => self.exchange_entries(&from_rel, &to_rel, from, to),
        }
    }

    fn exchange_entries(
        &self,
        a_rel: &RelPath,
        b_rel: &RelPath,
        a: &Path,
        b: &Path,
    ) -> HostFsResult<()> {
        let mut state = self.lock();
        let (a_dir, a_name) = parent(&state, a_rel, a, "renameat2")?;
        let (b_dir, b_name) = parent(&state, b_rel, b, "renameat2")?;
        let ino_a = resolve(&state, a_rel, a, "renameat2")?;
        let ino_b = resolve(&state, b_rel, b, "renameat2")?;
        if ino_a == ino_b {
            return Ok(());
        }
        let dir_into_itself = |state: &State, ino: u64, dir: u64| {
            node(state, ino, a, "renameat2").is_ok_and(|n| n.kind == FileKind::Dir)
                && super::ops::is_within(state, dir, ino)
        };
        if dir_into_itself(&state, ino_a, b_dir) || dir_into_itself(&state, ino_b, a_dir) {
            return Err(io_errno(display(b), "renameat2", libc::EINVAL));
        }
        state
            .exchange((a_dir, a_name), (b_dir, b_name))
            .ok_or_else(|| io_errno(display(a), "renameat2", libc::ENOENT))
    }

    pub(super) fn chown_entry(
        &self,
        path: &Path,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> HostFsResult<()> {
        let rel = RelPath::dir(path)?;
        let mut state = self.lock();
        let ino = resolve(&state, &rel, path, "lchown")?;
        let n = node_mut(&mut state, ino, path, "lchown")?;
        n.uid = uid.unwrap_or(n.uid);
        n.gid = gid.unwrap_or(n.gid);
        Ok(())
    }

    pub(super) fn sync_entry(&self, path: &Path) -> HostFsResult<()> {
        let rel = RelPath::dir(path)?;
        let ino = resolve(&self.lock(), &rel, path, "fsync")?;
        // persist: the inode's attributes (and a file's data) become durable.
        self.sync_point(|state| match state.inodes.get(&ino).map(|n| n.kind) {
            Some(FileKind::File) => state.sync_file(ino),
            _ => state.sync_xattrs(ino),
        })
    }

    fn xattr_inode(&self, state: &State, path: &Path, op: &'static str) -> HostFsResult<u64> {
        let rel = RelPath::dir(path)?;
        resolve(state, &rel, path, op)
    }

    pub(super) fn get_xattr_entry(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        let state = self.lock();
        let ino = self.xattr_inode(&state, path, "getxattr")?;
        node(&state, ino, path, "getxattr")?
            .live_xattrs
            .get(name)
            .cloned()
            .ok_or_else(|| io_errno(display(path), "getxattr", libc::ENODATA))
    }

    pub(super) fn set_xattr_entry(
        &self,
        path: &Path,
        name: &[u8],
        value: &[u8],
        how: XattrHow,
    ) -> HostFsResult<()> {
        let mut state = self.lock();
        let ino = self.xattr_inode(&state, path, "setxattr")?;
        let exists = node(&state, ino, path, "setxattr")?
            .live_xattrs
            .contains_key(name);
        match how {
            XattrHow::Create if exists => {
                return Err(io_errno(display(path), "setxattr", libc::EEXIST))
            }
            XattrHow::Replace if !exists => {
                return Err(io_errno(display(path), "setxattr", libc::ENODATA))
            }
            _ => {}
        }
        state.set_xattr(ino, name, Some(value.to_vec()));
        Ok(())
    }

    pub(super) fn list_xattr_entry(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        let state = self.lock();
        let ino = self.xattr_inode(&state, path, "listxattr")?;
        Ok(node(&state, ino, path, "listxattr")?
            .live_xattrs
            .keys()
            .cloned()
            .collect())
    }

    pub(super) fn remove_xattr_entry(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        let mut state = self.lock();
        let ino = self.xattr_inode(&state, path, "removexattr")?;
        if !node(&state, ino, path, "removexattr")?
            .live_xattrs
            .contains_key(name)
        {
            return Err(io_errno(display(path), "removexattr", libc::ENODATA));
        }
        state.set_xattr(ino, name, None);
        Ok(())
    }

    pub(super) fn fallocate_file(
        &self,
        file: &SimFile,
        how: FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        use crate::HostFs;
        if len == 0 {
            return Err(invalid(display(&file.path), "fallocate", "length 0".into()));
        }
        let size = self.file_stat(file)?.len;
        let end = off
            .checked_add(len)
            .ok_or_else(|| io_errno(display(&file.path), "fallocate", libc::EFBIG))?;
        let (keep_size, zero) = match how {
            FallocateHow::Allocate { keep_size } => (keep_size, false),
            FallocateHow::PunchHole => (true, true),
            FallocateHow::ZeroRange { keep_size } => (keep_size, true),
        };
        let zero_end = if keep_size { end.min(size) } else { end };
        if zero && zero_end > off {
            let zeros = vec![0u8; (zero_end - off) as usize];
            self.write_at(file, off, &zeros)?;
        } else if !keep_size && end > size {
            self.set_len(file, end)?;
        }
        Ok(())
    }
}
