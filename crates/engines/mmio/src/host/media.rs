//! [`HostMedia`]: the engine's host files through the `hostfs` seam — a jailed real directory
//! ([`hostfs::RealHostFs`]) in a real store, any [`HostFs`] in tests.
//!
//! Every path, above all those read back from intent records during recovery, reaches the
//! host only through [`HostFs`], which validates it ([`hostfs::RelPath`]: relative, no `..`,
//! no NUL, bounded length) and resolves it beneath the store directory without following
//! symlinks. [`FileMedia`] promises that each namespace operation is durable when it returns;
//! this adapter keeps that promise with an explicit `sync_dir` (and `sync_all` of a created
//! file or a changed length) after each one.

use crate::host::{FileMedia, MediaStat, MARKER_NAME};
use hostfs::{HostFs, HostFsError, NodeKind, OpenOptions, RealHostFs, RenameHow, Stat, XattrHow};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::{FileKind, TimeNs};

/// The host files of a store: a [`HostFs`] store directory (the real one by default).
pub struct HostMedia<F: HostFs = RealHostFs> {
    fs: F,
}

impl HostMedia<RealHostFs> {
    /// The real directory `root`, jailed (see [`RealHostFs::open`]).
    pub fn new(root: &Path) -> io::Result<Self> {
        RealHostFs::open(root).map(Self::on).map_err(to_io)
    }
}

impl<F: HostFs> HostMedia<F> {
    /// Host files in `fs`.
    pub fn on(fs: F) -> Self {
        HostMedia { fs }
    }

    /// The host file system.
    pub fn fs(&self) -> &F {
        &self.fs
    }

    fn sync_parent(&self, rel: &Path) -> io::Result<()> {
        let parent = rel.parent().unwrap_or(Path::new(""));
        // persist: a directory entry is durable only once its directory is fsynced.
        self.fs.sync_dir(parent).map_err(to_io)
    }
}

/// A hostfs error as an `io::Error`, keeping the errno where there is one (the engine maps
/// errnos to Store errors) and the full message otherwise (a refused path says why).
pub(crate) fn to_io(e: HostFsError) -> io::Error {
    match e {
        HostFsError::Io { source, .. } => source,
        // A path past the host's PATH_MAX (a tree deeper than one path can name): the errno
        // itself, so the Store error is ENAMETOOLONG (the engine's io_err names the path).
        HostFsError::InvalidPath { .. } if e.errno() == libc::ENAMETOOLONG => {
            io::Error::from_raw_os_error(libc::ENAMETOOLONG)
        }
        HostFsError::InvalidPath { .. } => {
            io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
        }
        other => {
            let errno = other.errno();
            io::Error::new(
                io::Error::from_raw_os_error(errno).kind(),
                other.to_string(),
            )
        }
    }
}

fn kind_of(st: &Stat) -> FileKind {
    match (st.kind, NodeKind::from_mode_type(st.mode_type)) {
        (hostfs::FileKind::Dir, _) => FileKind::Dir,
        (hostfs::FileKind::Symlink, _) => FileKind::Symlink,
        (hostfs::FileKind::Other, Some(NodeKind::Fifo)) => FileKind::Fifo,
        (hostfs::FileKind::Other, Some(NodeKind::Socket)) => FileKind::Socket,
        (hostfs::FileKind::Other, Some(NodeKind::CharDevice)) => FileKind::CharDevice,
        (hostfs::FileKind::Other, Some(NodeKind::BlockDevice)) => FileKind::BlockDevice,
        // A kind the host does not tell apart is never opened as a file: it is described as
        // a FIFO, which every front end refuses to open through the store too.
        (hostfs::FileKind::Other, None) => FileKind::Fifo,
        (hostfs::FileKind::File, _) => FileKind::File,
    }
}

fn node_kind(kind: FileKind) -> io::Result<NodeKind> {
    match kind {
        FileKind::Fifo => Ok(NodeKind::Fifo),
        FileKind::Socket => Ok(NodeKind::Socket),
        FileKind::CharDevice => Ok(NodeKind::CharDevice),
        FileKind::BlockDevice => Ok(NodeKind::BlockDevice),
        _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

fn media_stat(st: &Stat) -> MediaStat {
    MediaStat {
        id: st.ino,
        kind: kind_of(st),
        len: st.len,
        perm: st.perm,
        nlink: st.nlink.min(u32::MAX as u64) as u32,
        uid: st.uid,
        gid: st.gid,
        atime: st.atime_ns,
        mtime: st.mtime_ns,
        ctime: st.ctime_ns,
        rdev: st.rdev,
        allocated: st.allocated,
    }
}

impl<F: HostFs> FileMedia for HostMedia<F> {
    type Map = F::Map;

    fn describe(&self) -> String {
        self.fs.root().display().to_string()
    }

    fn stat(&self, rel: &Path) -> io::Result<MediaStat> {
        self.fs.stat(rel).map(|st| media_stat(&st)).map_err(to_io)
    }

    fn create(&self, rel: &Path, perm: u32) -> io::Result<MediaStat> {
        let options = OpenOptions {
            perm: perm & 0o7777,
            ..OpenOptions::create_new()
        };
        let file = self.fs.open(rel, &options).map_err(to_io)?;
        self.fs.set_perm(rel, perm & 0o7777).map_err(to_io)?;
        // persist: the new (empty) file and its attributes ...
        self.fs.sync_all(&file).map_err(to_io)?;
        // ... and its directory entry are durable when create returns.
        self.sync_parent(rel)?;
        self.fs
            .file_stat(&file)
            .map(|st| media_stat(&st))
            .map_err(to_io)
    }

    fn mkdir(&self, rel: &Path, perm: u32) -> io::Result<MediaStat> {
        self.fs.mkdir(rel, perm & 0o7777).map_err(to_io)?;
        self.fs.set_perm(rel, perm & 0o7777).map_err(to_io)?;
        // persist: the new directory itself, then its entry in the parent.
        self.fs.sync_dir(rel).map_err(to_io)?;
        self.sync_parent(rel)?;
        self.stat(rel)
    }

    fn unlink(&self, rel: &Path) -> io::Result<()> {
        if self.stat(rel)?.kind == FileKind::Dir {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        self.fs.unlink(rel).map_err(to_io)?;
        self.sync_parent(rel)
    }

    fn rmdir(&self, rel: &Path) -> io::Result<()> {
        self.fs.rmdir(rel).map_err(to_io)?;
        self.sync_parent(rel)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let moved = self.stat(from)?;
        let target = match self.stat(to) {
            Ok(st) => Some(st),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e),
        };
        if moved.kind != FileKind::Dir && target.is_none() {
            return self.move_file(from, to);
        }
        self.fs.rename(from, to).map_err(to_io)?;
        // persist: the new name first, then the removal of the old name. Until both
        // directories are synced a crash may keep either name, both or (for a directory)
        // neither: the engine moves files into free names with `move_file` instead.
        self.sync_parent(to)?;
        if from.parent() != to.parent() {
            self.sync_parent(from)?;
        }
        Ok(())
    }

    fn read_dir(&self, rel: &Path) -> io::Result<Vec<(Vec<u8>, MediaStat)>> {
        let mut out = Vec::new();
        for entry in self.fs.read_dir(rel).map_err(to_io)? {
            if rel.as_os_str().is_empty() && entry.name == MARKER_NAME.as_bytes() {
                continue;
            }
            let st = self.stat(&rel.join(OsStr::from_bytes(&entry.name)))?;
            out.push((entry.name, st));
        }
        Ok(out)
    }

    fn set_len(&self, rel: &Path, len: u64) -> io::Result<()> {
        let file = self
            .fs
            .open(rel, &OpenOptions::read_write())
            .map_err(to_io)?;
        self.fs.set_len(&file, len).map_err(to_io)?;
        // persist: the new length (and zeroed growth) is durable before it is relied on.
        self.fs.sync_all(&file).map_err(to_io)
    }

    fn set_perm(&self, rel: &Path, perm: u32) -> io::Result<()> {
        if self.stat(rel)?.kind == FileKind::Symlink {
            return Ok(()); // a symlink's permissions are always 0o777 on Linux
        }
        self.fs.set_perm(rel, perm & 0o7777).map_err(to_io)?;
        self.sync_attrs(rel)
    }

    fn set_times(
        &self,
        rel: &Path,
        atime: Option<TimeNs>,
        mtime: Option<TimeNs>,
    ) -> io::Result<()> {
        // The entry's own times, a symlink's included (never its target's).
        self.fs.set_link_times(rel, atime, mtime).map_err(to_io)?;
        self.sync_attrs(rel)
    }

    fn map(&self, rel: &Path, len_min: u64) -> io::Result<F::Map> {
        // Growth headroom: a power of two, so that a growing file rarely needs a remap.
        let page = pmem::mapped::page_size();
        let map_len = len_min.max(page).next_power_of_two().div_ceil(page) * page;
        let file = self
            .fs
            .open(rel, &OpenOptions::read_write())
            .map_err(to_io)?;
        self.fs.map(&file, map_len).map_err(to_io)
    }

    fn check_map(&self, map: &F::Map) -> io::Result<()> {
        self.fs.check_map(map).map_err(to_io)
    }

    fn walk(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let mut out = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(dir) = stack.pop() {
            for (name, st) in self.read_dir(&dir)? {
                let p = dir.join(OsStr::from_bytes(&name));
                match st.kind {
                    FileKind::Dir => stack.push(p),
                    FileKind::File => out.push((st.id, p)),
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    fn space(&self) -> io::Result<hostfs::StatFs> {
        self.fs.statfs().map_err(to_io)
    }

    fn symlink(&self, rel: &Path, target: &[u8]) -> io::Result<MediaStat> {
        self.fs.symlink(target, rel).map_err(to_io)?;
        // persist: the link (target and entry, one journal transaction) is durable.
        self.sync_parent(rel)?;
        self.stat(rel)
    }

    fn readlink(&self, rel: &Path) -> io::Result<Vec<u8>> {
        self.fs.readlink(rel).map_err(to_io)
    }

    fn mknod(&self, rel: &Path, kind: FileKind, perm: u32, rdev: u64) -> io::Result<MediaStat> {
        self.fs
            .mknod(rel, node_kind(kind)?, perm & 0o7777, rdev)
            .map_err(to_io)?;
        // The umask applied by mknod is undone, as for a created file.
        self.fs.set_perm(rel, perm & 0o7777).map_err(to_io)?;
        // persist: the node's attributes, then its entry.
        self.fs.sync_node(rel).map_err(to_io)?;
        self.sync_parent(rel)?;
        self.stat(rel)
    }

    fn link(&self, existing: &Path, new: &Path) -> io::Result<()> {
        self.fs.link(existing, new).map_err(to_io)?;
        // persist: the new name is durable when link returns.
        self.sync_parent(new)
    }

    fn exchange(&self, a: &Path, b: &Path) -> io::Result<()> {
        self.fs
            .rename_with(a, b, RenameHow::Exchange)
            .map_err(to_io)?;
        // persist: the sync of either directory commits the swap (one journal transaction);
        // both are synced so that each directory's own later state is durable too.
        self.sync_parent(b)?;
        if a.parent() != b.parent() {
            self.sync_parent(a)?;
        }
        Ok(())
    }

    fn set_owner(&self, rel: &Path, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        self.fs.set_owner(rel, uid, gid).map_err(to_io)?;
        self.sync_attrs(rel)
    }

    fn get_xattr(&self, rel: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
        self.fs.get_xattr(rel, name).map_err(to_io)
    }

    fn set_xattr(
        &self,
        rel: &Path,
        name: &[u8],
        value: Option<&[u8]>,
        how: XattrHow,
    ) -> io::Result<()> {
        match value {
            Some(v) => self.fs.set_xattr(rel, name, v, how),
            None => self.fs.remove_xattr(rel, name),
        }
        .map_err(to_io)?;
        self.sync_attrs(rel)
    }

    fn list_xattr(&self, rel: &Path) -> io::Result<Vec<Vec<u8>>> {
        self.fs.list_xattr(rel).map_err(to_io)
    }

    fn fallocate(
        &self,
        rel: &Path,
        how: hostfs::FallocateHow,
        off: u64,
        len: u64,
    ) -> io::Result<()> {
        let file = self
            .fs
            .open(rel, &OpenOptions::read_write())
            .map_err(to_io)?;
        self.fs.fallocate(&file, how, off, len).map_err(to_io)?;
        // persist: the allocation change is durable (content was already what it reads now).
        self.fs.sync_data(&file).map_err(to_io)
    }

    fn write_new(&self, rel: &Path, data: &[u8]) -> io::Result<()> {
        let file = self
            .fs
            .open(rel, &OpenOptions::create_new())
            .map_err(to_io)?;
        self.fs.write_all_at(&file, 0, data).map_err(to_io)?;
        // persist: the content, then the entry, before anything relies on the file.
        self.fs.sync_data(&file).map_err(to_io)?;
        self.sync_parent(rel)
    }

    fn read_all(&self, rel: &Path) -> io::Result<Vec<u8>> {
        let file = self
            .fs
            .open(rel, &OpenOptions::read_only())
            .map_err(to_io)?;
        let len = self.fs.file_stat(&file).map_err(to_io)?.len;
        let mut data = vec![0u8; len.min(1 << 20) as usize];
        let n = self.fs.read_full_at(&file, 0, &mut data).map_err(to_io)?;
        data.truncate(n);
        Ok(data)
    }

    fn marker(&self) -> io::Result<Option<u64>> {
        let file = match self
            .fs
            .open(Path::new(MARKER_NAME), &OpenOptions::read_only())
        {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(to_io(e)),
        };
        let mut b = [0u8; 9];
        let n = self.fs.read_full_at(&file, 0, &mut b).map_err(to_io)?;
        if n != 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "marker file is not 8 bytes",
            ));
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[..8]);
        Ok(Some(u64::from_le_bytes(id)))
    }

    fn set_marker(&self, store_id: u64) -> io::Result<()> {
        let path = Path::new(MARKER_NAME);
        let options = OpenOptions {
            truncate: true,
            ..OpenOptions::create()
        };
        let file = self.fs.open(path, &options).map_err(to_io)?;
        self.fs
            .write_all_at(&file, 0, &store_id.to_le_bytes())
            .map_err(to_io)?;
        // persist: the marker's content, then its name, before the store is used.
        self.fs.sync_data(&file).map_err(to_io)?;
        self.sync_parent(path)
    }
}

impl<F: HostFs> HostMedia<F> {
    /// Move a file to a free name: link, sync, unlink, sync. A crash leaves the old name, both
    /// names of the one file, or the new name — never neither (rename(2) promises that only
    /// once both directories are synced). Recovery settles "both" from the intent record
    /// that every such move is logged under.
    fn move_file(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.fs.link(from, to).map_err(to_io)?;
        // persist: the new name is durable before the old one goes.
        self.sync_parent(to)?;
        self.fs.unlink(from).map_err(to_io)?;
        // persist: the move is complete when it returns.
        self.sync_parent(from)
    }

    /// Make a changed attribute durable (fsync of the file or directory).
    fn sync_attrs(&self, rel: &Path) -> io::Result<()> {
        // persist: the attribute change is durable when the call returns (fsync of the file
        // or directory; of a symlink's or special file's directory, see HostFs::sync_node).
        self.fs.sync_node(rel).map_err(to_io)
    }
}
