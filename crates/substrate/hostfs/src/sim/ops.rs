//! [`HostFs`] for [`SimHostFs`]: each operation changes the live state and records what a
//! crash may or may not keep of it (see the module documentation of [`super`]).

use super::map::SimMap;
use super::state::{Inode, Key, Piece, State, ROOT_INO};
use super::{new_inode, SimFile, SimHostFs};
use crate::error::{invalid, io_errno};
use crate::{
    Capabilities, Capability, DirEntry, FallocateHow, FileKind, HostFs, HostFsResult, NodeKind,
    OpenOptions, RelPath, RenameHow, Stat, StatFs, XattrHow,
};
use std::path::{Path, PathBuf};

pub(super) fn display(rel: &Path) -> PathBuf {
    SimHostFs::root_path().join(rel)
}

/// The inode at `rel` in the live namespace.
pub(super) fn resolve(
    state: &State,
    rel: &RelPath,
    path: &Path,
    op: &'static str,
) -> HostFsResult<u64> {
    let mut ino = ROOT_INO;
    for component in rel.components() {
        let node = state
            .inodes
            .get(&ino)
            .ok_or_else(|| io_errno(display(path), op, libc::ENOENT))?;
        if node.kind != FileKind::Dir {
            return Err(io_errno(display(path), op, libc::ENOTDIR));
        }
        ino = *node
            .live_entries
            .get(component)
            .ok_or_else(|| io_errno(display(path), op, libc::ENOENT))?;
    }
    Ok(ino)
}

/// The directory holding `path` and the entry's name.
pub(super) fn parent<'a>(
    state: &State,
    rel: &'a RelPath,
    path: &Path,
    op: &'static str,
) -> HostFsResult<(u64, &'a [u8])> {
    let (parent, name) = rel
        .split_last()
        .ok_or_else(|| io_errno(display(path), op, libc::EINVAL))?;
    let dir = resolve(state, &parent, path, op)?;
    if state.inodes.get(&dir).map(|n| n.kind) != Some(FileKind::Dir) {
        return Err(io_errno(display(path), op, libc::ENOTDIR));
    }
    Ok((dir, name))
}

pub(super) fn node<'a>(
    state: &'a State,
    ino: u64,
    path: &Path,
    op: &'static str,
) -> HostFsResult<&'a Inode> {
    state
        .inodes
        .get(&ino)
        .ok_or_else(|| io_errno(display(path), op, libc::ENOENT))
}

pub(super) fn node_mut<'a>(
    state: &'a mut State,
    ino: u64,
    path: &Path,
    op: &'static str,
) -> HostFsResult<&'a mut Inode> {
    state
        .inodes
        .get_mut(&ino)
        .ok_or_else(|| io_errno(display(path), op, libc::ENOENT))
}

impl SimHostFs {
    fn sector(&self) -> u64 {
        self.shared.config.sector_len
    }

    /// Record the content of every `unit`-sized unit overlapping `[start, end)` of `ino`.
    pub(crate) fn record_units(state: &mut State, ino: u64, start: u64, end: u64, unit: u64) {
        if end <= start {
            return;
        }
        let mut at = start / unit * unit;
        while at < end {
            let Some(node) = state.inodes.get(&ino) else {
                return;
            };
            let stop = (at + unit).min(node.live.len() as u64);
            if at < stop {
                let bytes = node.live[at as usize..stop as usize].to_vec();
                let key = Key::Unit {
                    ino,
                    start: at,
                    len: unit,
                };
                state.push(
                    Some(key),
                    vec![Piece::Data {
                        ino,
                        off: at,
                        bytes,
                    }],
                );
            }
            at += unit;
        }
    }

    /// Change the live length of `ino`, recording the partial sector at the old or new end
    /// (zeroed past the end) and the length.
    fn change_len(&self, state: &mut State, ino: u64, len: u64) {
        let Some(node) = state.inodes.get_mut(&ino) else {
            return;
        };
        let old = node.live.len() as u64;
        if old == len {
            return;
        }
        node.live.resize(len as usize, 0);
        node.mtime_ns = super::state::now_ns();
        let edge = old.min(len);
        if !edge.is_multiple_of(self.sector()) {
            Self::record_units(state, ino, edge, edge + 1, self.sector());
        }
        state.push(Some(Key::Len { ino }), vec![Piece::Len { ino, len }]);
    }

    fn file_node(&self, state: &State, file: &SimFile, op: &'static str) -> HostFsResult<()> {
        node(state, file.ino, &file.path, op).map(|_| ())
    }

    fn writable(&self, file: &SimFile, op: &'static str) -> HostFsResult<()> {
        if !file.write {
            return Err(io_errno(display(&file.path), op, libc::EBADF));
        }
        Ok(())
    }

    fn create_file(&self, state: &mut State, dir: u64, name: &[u8], perm: u32) -> u64 {
        let mut inode = Inode::new(FileKind::File, perm);
        inode.nlink = 1;
        let ino = new_inode(state, inode);
        state.bind(dir, name, Some(ino));
        ino
    }

    /// Write `data` at `off` of `ino` and record it with units of `unit` bytes.
    fn store(&self, state: &mut State, ino: u64, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        let len = state.inodes.get(&ino).map_or(0, |n| n.live.len() as u64);
        if end > len {
            self.change_len_data_first(state, ino, end);
        }
        if let Some(node) = state.inodes.get_mut(&ino) {
            node.live[off as usize..end as usize].copy_from_slice(data);
            node.mtime_ns = super::state::now_ns();
        }
    }

    /// Grow the live content for a write past the end: the old end's partial sector is
    /// recorded now, the new length after the write's data (by the caller's `push_len`).
    fn change_len_data_first(&self, state: &mut State, ino: u64, len: u64) {
        let Some(node) = state.inodes.get_mut(&ino) else {
            return;
        };
        let old = node.live.len() as u64;
        node.live.resize(len as usize, 0);
        if !old.is_multiple_of(self.sector()) {
            Self::record_units(state, ino, old, old + 1, self.sector());
        }
    }

    fn push_len_if_changed(state: &mut State, ino: u64, old: u64) {
        let len = state.inodes.get(&ino).map_or(0, |n| n.live.len() as u64);
        if len != old {
            state.push(Some(Key::Len { ino }), vec![Piece::Len { ino, len }]);
        }
    }

    fn check_range(
        file: &SimFile,
        len_of: u64,
        off: u64,
        len: u64,
        op: &'static str,
    ) -> HostFsResult<()> {
        if off.checked_add(len).is_none_or(|end| end > len_of) {
            return Err(invalid(
                display(&file.path),
                op,
                format!("range {off}+{len} past the end ({len_of} bytes)"),
            ));
        }
        Ok(())
    }

    fn check_aligned(&self, file: &SimFile, values: &[u64], op: &'static str) -> HostFsResult<()> {
        let block = self.shared.config.block_len;
        if values.iter().any(|v| !v.is_multiple_of(block)) {
            return Err(invalid(
                display(&file.path),
                op,
                format!("offsets and length must be multiples of the {block}-byte block"),
            ));
        }
        Ok(())
    }
}

impl HostFs for SimHostFs {
    type File = SimFile;
    type Map = SimMap;

    fn root(&self) -> &Path {
        Self::root_path()
    }

    fn capabilities(&self) -> Capabilities {
        self.shared.config.capabilities
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<SimFile> {
        let rel = RelPath::new(path)?;
        let mut state = self.lock();
        let (dir, name) = parent(&state, &rel, path, "open")?;
        let existing = node(&state, dir, path, "open")?
            .live_entries
            .get(name)
            .copied();
        let ino = match existing {
            Some(_) if options.create_new => {
                return Err(io_errno(display(path), "open", libc::EEXIST))
            }
            Some(ino) => ino,
            None if options.create || options.create_new => {
                self.create_file(&mut state, dir, name, options.perm)
            }
            None => return Err(io_errno(display(path), "open", libc::ENOENT)),
        };
        match node(&state, ino, path, "open")?.kind {
            FileKind::File => {}
            // O_NOFOLLOW: a symlink is refused, never followed.
            FileKind::Symlink => return Err(io_errno(display(path), "open", libc::ELOOP)),
            _ => return Err(io_errno(display(path), "open", libc::EISDIR)),
        }
        if options.truncate && options.write {
            self.change_len(&mut state, ino, 0);
        }
        Ok(SimFile {
            ino,
            path: rel.to_path_buf(),
            write: options.write,
        })
    }

    fn read_at(&self, file: &SimFile, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        let state = self.lock();
        let live = &node(&state, file.ino, &file.path, "read")?.live;
        let start = (off.min(live.len() as u64)) as usize;
        let n = buf.len().min(live.len() - start);
        buf[..n].copy_from_slice(&live[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<usize> {
        self.writable(file, "write")?;
        let end = off
            .checked_add(data.len() as u64)
            .ok_or_else(|| io_errno(display(&file.path), "write", libc::EFBIG))?;
        let mut state = self.lock();
        let old = node(&state, file.ino, &file.path, "write")?.live.len() as u64;
        self.store(&mut state, file.ino, off, data);
        Self::record_units(&mut state, file.ino, off, end, self.sector());
        Self::push_len_if_changed(&mut state, file.ino, old);
        Ok(data.len())
    }

    fn set_len(&self, file: &SimFile, len: u64) -> HostFsResult<()> {
        self.writable(file, "ftruncate")?;
        let mut state = self.lock();
        self.file_node(&state, file, "ftruncate")?;
        self.change_len(&mut state, file.ino, len);
        Ok(())
    }

    fn file_stat(&self, file: &SimFile) -> HostFsResult<Stat> {
        let state = self.lock();
        Ok(node(&state, file.ino, &file.path, "fstat")?.stat(file.ino))
    }

    fn sync_data(&self, file: &SimFile) -> HostFsResult<()> {
        self.file_node(&self.lock(), file, "fdatasync")?;
        // persist: the file's pending data and length become durable.
        self.sync_point(|state| state.sync_file(file.ino))
    }

    fn sync_all(&self, file: &SimFile) -> HostFsResult<()> {
        self.file_node(&self.lock(), file, "fsync")?;
        // persist: as sync_data (attributes are not part of the model's crash images).
        self.sync_point(|state| state.sync_file(file.ino))
    }

    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        let rel = RelPath::dir(dir)?;
        let ino = {
            let state = self.lock();
            let ino = resolve(&state, &rel, dir, "fsync directory")?;
            if node(&state, ino, dir, "fsync directory")?.kind != FileKind::Dir {
                return Err(io_errno(display(dir), "fsync directory", libc::ENOTDIR));
            }
            ino
        };
        // persist: the directory's entries become durable.
        self.sync_point(|state| state.sync_dir(ino))
    }

    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        let (from_rel, to_rel) = (RelPath::new(from)?, RelPath::new(to)?);
        let mut state = self.lock();
        let (from_dir, from_name) = parent(&state, &from_rel, from, "rename")?;
        let (to_dir, to_name) = parent(&state, &to_rel, to, "rename")?;
        let ino = resolve(&state, &from_rel, from, "rename")?;
        let kind = node(&state, ino, from, "rename")?.kind;
        if kind == FileKind::Dir && is_within(&state, to_dir, ino) {
            return Err(io_errno(display(to), "rename", libc::EINVAL));
        }
        let existing = node(&state, to_dir, to, "rename")?
            .live_entries
            .get(to_name)
            .copied();
        if let Some(old) = existing {
            if old == ino {
                return Ok(());
            }
            check_replace(&state, old, kind, to)?;
            if let Some(n) = state.inodes.get_mut(&old) {
                n.nlink = n.nlink.saturating_sub(1);
            }
        }
        state.bind(to_dir, to_name, Some(ino));
        state.bind(from_dir, from_name, None);
        Ok(())
    }

    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        let rel = RelPath::new(path)?;
        let mut state = self.lock();
        let (dir, name) = parent(&state, &rel, path, "unlink")?;
        let ino = resolve(&state, &rel, path, "unlink")?;
        let n = node_mut(&mut state, ino, path, "unlink")?;
        if n.kind == FileKind::Dir {
            return Err(io_errno(display(path), "unlink", libc::EISDIR));
        }
        n.nlink = n.nlink.saturating_sub(1);
        state.bind(dir, name, None);
        Ok(())
    }

    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        let (old_rel, new_rel) = (RelPath::new(existing)?, RelPath::new(new)?);
        let mut state = self.lock();
        let ino = resolve(&state, &old_rel, existing, "link")?;
        let (dir, name) = parent(&state, &new_rel, new, "link")?;
        if node(&state, dir, new, "link")?
            .live_entries
            .contains_key(name)
        {
            return Err(io_errno(display(new), "link", libc::EEXIST));
        }
        let n = node_mut(&mut state, ino, existing, "link")?;
        if n.kind == FileKind::Dir {
            return Err(io_errno(display(existing), "link", libc::EPERM));
        }
        n.nlink += 1;
        state.bind(dir, name, Some(ino));
        Ok(())
    }

    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        let rel = RelPath::new(path)?;
        let mut state = self.lock();
        let (dir, name) = parent(&state, &rel, path, "mkdir")?;
        if node(&state, dir, path, "mkdir")?
            .live_entries
            .contains_key(name)
        {
            return Err(io_errno(display(path), "mkdir", libc::EEXIST));
        }
        let mut inode = Inode::new(FileKind::Dir, perm);
        inode.nlink = 2;
        let ino = new_inode(&mut state, inode);
        state.bind(dir, name, Some(ino));
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        let rel = RelPath::new(path)?;
        let mut state = self.lock();
        let (dir, name) = parent(&state, &rel, path, "rmdir")?;
        let ino = resolve(&state, &rel, path, "rmdir")?;
        let n = node(&state, ino, path, "rmdir")?;
        if n.kind != FileKind::Dir {
            return Err(io_errno(display(path), "rmdir", libc::ENOTDIR));
        }
        if !n.live_entries.is_empty() {
            return Err(io_errno(display(path), "rmdir", libc::ENOTEMPTY));
        }
        state.bind(dir, name, None);
        Ok(())
    }

    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        let rel = RelPath::dir(dir)?;
        let state = self.lock();
        let ino = resolve(&state, &rel, dir, "readdir")?;
        let n = node(&state, ino, dir, "readdir")?;
        if n.kind != FileKind::Dir {
            return Err(io_errno(display(dir), "readdir", libc::ENOTDIR));
        }
        Ok(n.live_entries
            .iter()
            .map(|(name, &child)| DirEntry {
                name: name.clone(),
                ino: child,
                kind: state.inodes.get(&child).map_or(FileKind::Other, |c| c.kind),
            })
            .collect())
    }

    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        let rel = RelPath::dir(path)?;
        let state = self.lock();
        let ino = resolve(&state, &rel, path, "stat")?;
        Ok(node(&state, ino, path, "stat")?.stat(ino))
    }

    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        let rel = RelPath::dir(path)?;
        let mut state = self.lock();
        let ino = resolve(&state, &rel, path, "chmod")?;
        node_mut(&mut state, ino, path, "chmod")?.perm = perm & 0o7777;
        Ok(())
    }

    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        let rel = RelPath::dir(path)?;
        let mut state = self.lock();
        let ino = resolve(&state, &rel, path, "utimens")?;
        let n = node_mut(&mut state, ino, path, "utimens")?;
        n.atime_ns = atime.unwrap_or(n.atime_ns);
        n.mtime_ns = mtime.unwrap_or(n.mtime_ns);
        Ok(())
    }

    fn statfs(&self) -> HostFsResult<StatFs> {
        let state = self.lock();
        let block = self.shared.config.block_len;
        let used: u64 = state
            .inodes
            .values()
            .map(|n| (n.live.len() as u64).div_ceil(block))
            .sum();
        let blocks = 1 << 20;
        Ok(StatFs {
            block_size: block,
            blocks,
            blocks_free: blocks - used.min(blocks),
            blocks_available: blocks - used.min(blocks),
            fs_type: self.shared.config.capabilities.fs_type,
        })
    }

    fn map(&self, file: &SimFile, len: u64) -> HostFsResult<SimMap> {
        self.file_node(&self.lock(), file, "mmap")?;
        let page = self.shared.config.page_len;
        Ok(SimMap::new(
            self.clone(),
            file.ino,
            len.max(1).div_ceil(page) * page,
        ))
    }

    fn check_map(&self, _map: &SimMap) -> HostFsResult<()> {
        Ok(())
    }

    fn clone_range(
        &self,
        src: &SimFile,
        src_off: u64,
        dst: &SimFile,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.require(Capability::Reflink)?;
        self.writable(dst, "FICLONERANGE")?;
        let mut state = self.lock();
        let src_len = node(&state, src.ino, &src.path, "FICLONERANGE")?.live.len() as u64;
        let len = if len == 0 {
            src_len.saturating_sub(src_off)
        } else {
            len
        };
        Self::check_range(src, src_len, src_off, len, "FICLONERANGE")?;
        let to_eof = src_off + len == src_len;
        let aligned_len = if to_eof { 0 } else { len };
        self.check_aligned(dst, &[src_off, dst_off, aligned_len], "FICLONERANGE")?;
        if src.ino == dst.ino && src_off < dst_off + len && dst_off < src_off + len {
            return Err(invalid(
                display(&dst.path),
                "FICLONERANGE",
                "overlapping ranges in one file".into(),
            ));
        }
        let data = node(&state, src.ino, &src.path, "FICLONERANGE")?.live
            [src_off as usize..(src_off + len) as usize]
            .to_vec();
        let old = node(&state, dst.ino, &dst.path, "FICLONERANGE")?.live.len() as u64;
        self.store(&mut state, dst.ino, dst_off, &data);
        let block = self.shared.config.block_len;
        Self::record_units(&mut state, dst.ino, dst_off, dst_off + len, block);
        Self::push_len_if_changed(&mut state, dst.ino, old);
        Ok(())
    }

    fn exchange_range(
        &self,
        a: &SimFile,
        a_off: u64,
        b: &SimFile,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.require(Capability::ExchangeRange)?;
        self.writable(a, "XFS_IOC_EXCHANGE_RANGE")?;
        self.writable(b, "XFS_IOC_EXCHANGE_RANGE")?;
        let mut state = self.lock();
        let a_len = node(&state, a.ino, &a.path, "XFS_IOC_EXCHANGE_RANGE")?
            .live
            .len() as u64;
        let b_len = node(&state, b.ino, &b.path, "XFS_IOC_EXCHANGE_RANGE")?
            .live
            .len() as u64;
        Self::check_range(a, a_len, a_off, len, "XFS_IOC_EXCHANGE_RANGE")?;
        Self::check_range(b, b_len, b_off, len, "XFS_IOC_EXCHANGE_RANGE")?;
        self.check_aligned(b, &[a_off, b_off], "XFS_IOC_EXCHANGE_RANGE")?;
        if a.ino == b.ino && a_off < b_off + len && b_off < a_off + len {
            return Err(invalid(
                display(&b.path),
                "XFS_IOC_EXCHANGE_RANGE",
                "overlapping ranges in one file".into(),
            ));
        }
        let (ra, rb) = (
            (a_off as usize, (a_off + len) as usize),
            (b_off as usize, (b_off + len) as usize),
        );
        let da = node(&state, a.ino, &a.path, "XFS_IOC_EXCHANGE_RANGE")?.live[ra.0..ra.1].to_vec();
        let db = node(&state, b.ino, &b.path, "XFS_IOC_EXCHANGE_RANGE")?.live[rb.0..rb.1].to_vec();
        self.store(&mut state, a.ino, a_off, &db);
        self.store(&mut state, b.ino, b_off, &da);
        let pieces = vec![
            Piece::Data {
                ino: a.ino,
                off: a_off,
                bytes: db,
            },
            Piece::Data {
                ino: b.ino,
                off: b_off,
                bytes: da,
            },
        ];
        state.push(None, pieces);
        Ok(())
    }

    fn atomic_write(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<()> {
        self.writable(file, "pwritev2(RWF_ATOMIC)")?;
        crate::caps::check_atomic(
            &self.shared.config.capabilities,
            &display(&file.path),
            off,
            data.len(),
        )?;
        self.require(Capability::AtomicWrite {
            len: data.len() as u32,
        })?;
        let mut state = self.lock();
        let old = node(&state, file.ino, &file.path, "pwritev2(RWF_ATOMIC)")?
            .live
            .len() as u64;
        self.store(&mut state, file.ino, off, data);
        state.push(
            None,
            vec![Piece::Data {
                ino: file.ino,
                off,
                bytes: data.to_vec(),
            }],
        );
        Self::push_len_if_changed(&mut state, file.ino, old);
        Ok(())
    }

    fn drop_unsynced(&self, file: &SimFile) -> HostFsResult<()> {
        self.lock().drop_unsynced(file.ino);
        Ok(())
    }

    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        self.symlink_entry(target, path)
    }

    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        self.readlink_entry(path)
    }

    fn mknod(&self, path: &Path, kind: NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        self.mknod_entry(path, kind, perm, rdev)
    }

    fn rename_with(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        self.rename_how(from, to, how)
    }

    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        self.chown_entry(path, uid, gid)
    }

    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        self.set_times(path, atime, mtime)
    }

    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        self.sync_entry(path)
    }

    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        self.get_xattr_entry(path, name)
    }

    fn set_xattr(&self, path: &Path, name: &[u8], value: &[u8], how: XattrHow) -> HostFsResult<()> {
        self.set_xattr_entry(path, name, value, how)
    }

    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        self.list_xattr_entry(path)
    }

    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        self.remove_xattr_entry(path, name)
    }

    fn fallocate(&self, file: &SimFile, how: FallocateHow, off: u64, len: u64) -> HostFsResult<()> {
        self.fallocate_file(file, how, off, len)
    }
}

/// True when `dir` is `ancestor` or below it in the live namespace.
pub(super) fn is_within(state: &State, dir: u64, ancestor: u64) -> bool {
    if dir == ancestor {
        return true;
    }
    // Walk down from the ancestor: directories are few in a model.
    let mut stack = vec![ancestor];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        for &child in state
            .inodes
            .get(&d)
            .into_iter()
            .flat_map(|n| n.live_entries.values())
        {
            if child == dir {
                return true;
            }
            if state
                .inodes
                .get(&child)
                .is_some_and(|c| c.kind == FileKind::Dir)
            {
                stack.push(child);
            }
        }
    }
    false
}

/// rename(2)'s rules for replacing `old` by an entry of kind `kind`.
fn check_replace(state: &State, old: u64, kind: FileKind, to: &Path) -> HostFsResult<()> {
    let old_node = node(state, old, to, "rename")?;
    let errno = match (old_node.kind, kind) {
        (FileKind::Dir, FileKind::Dir) if !old_node.live_entries.is_empty() => libc::ENOTEMPTY,
        (FileKind::Dir, FileKind::Dir) => return Ok(()),
        (FileKind::Dir, _) => libc::EISDIR,
        (_, FileKind::Dir) => libc::ENOTDIR,
        _ => return Ok(()),
    };
    Err(io_errno(display(to), "rename", errno))
}
