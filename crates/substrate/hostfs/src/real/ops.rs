//! [`HostFs`] for [`RealHostFs`]: each operation resolves its path through the jail, then
//! makes the one system call it stands for.

use super::{jail, probe, sys, RealFile, RealHostFs};
use crate::error::{invalid, io_err};
use crate::{
    Capabilities, Capability, DirEntry, FallocateHow, HostFs, HostFsResult, NodeKind, OpenOptions,
    RelPath, RenameHow, Stat, StatFs, XattrHow,
};
use pmem::MappedRegion;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::OnceLock;

fn cvt(rc: libc::c_int) -> std::io::Result<()> {
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn open_flags(options: &OpenOptions) -> i32 {
    let mut flags = match (options.read, options.write) {
        (_, true) if options.read => libc::O_RDWR,
        (_, true) => libc::O_WRONLY,
        _ => libc::O_RDONLY,
    };
    if options.create_new {
        flags |= libc::O_CREAT | libc::O_EXCL;
    } else if options.create {
        flags |= libc::O_CREAT;
    }
    if options.truncate {
        flags |= libc::O_TRUNC;
    }
    // A FIFO or device at the path must not block the open or become a controlling
    // terminal (the open then fails: only regular files are accepted).
    flags | libc::O_NONBLOCK | libc::O_NOCTTY
}

/// A timespec of utimensat: ns since the epoch, or UTIME_OMIT for `None`.
fn timespec(t: Option<u64>) -> libc::timespec {
    match t {
        Some(ns) => libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        },
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
    }
}

/// A borrowed descriptor of an std file, as `&OwnedFd`-taking helpers need it.
fn fd_of(file: &File) -> BorrowedFd<'_> {
    file.as_fd()
}

fn with_owned<T>(
    file: &File,
    f: impl FnOnce(&OwnedFd) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let owned = file.try_clone().map(OwnedFd::from)?;
    f(&owned)
}

impl HostFs for RealHostFs {
    type File = RealFile;
    type Map = MappedRegion;

    fn root(&self) -> &Path {
        &self.root
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<RealFile> {
        let rel = RelPath::new(path)?;
        let fd = jail::open(
            self.resolver,
            &self.root_fd,
            &rel,
            open_flags(options),
            options.perm & 0o7777,
        )
        .map_err(|e| io_err(self.abs(path), "open", e))?;
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| io_err(self.abs(path), "stat", e))?;
        if !meta.is_file() {
            return Err(io_err(
                self.abs(path),
                "open",
                std::io::Error::from_raw_os_error(libc::EISDIR),
            ));
        }
        Ok(RealFile {
            file,
            path: rel.to_path_buf(),
            direct: OnceLock::new(),
        })
    }

    fn read_at(&self, file: &RealFile, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        file.file
            .read_at(buf, off)
            .map_err(|e| io_err(self.file_path(file), "read", e))
    }

    fn write_at(&self, file: &RealFile, off: u64, data: &[u8]) -> HostFsResult<usize> {
        file.file
            .write_at(data, off)
            .map_err(|e| io_err(self.file_path(file), "write", e))
    }

    fn set_len(&self, file: &RealFile, len: u64) -> HostFsResult<()> {
        file.file
            .set_len(len)
            .map_err(|e| io_err(self.file_path(file), "ftruncate", e))
    }

    fn file_stat(&self, file: &RealFile) -> HostFsResult<Stat> {
        sys::stat_at(fd_of(&file.file), c"").map_err(|e| io_err(self.file_path(file), "fstat", e))
    }

    fn sync_data(&self, file: &RealFile) -> HostFsResult<()> {
        // persist: fdatasync makes the file's data and length durable.
        file.file
            .sync_data()
            .map_err(|e| io_err(self.file_path(file), "fdatasync", e))
    }

    fn sync_all(&self, file: &RealFile) -> HostFsResult<()> {
        // persist: fsync makes the file's data and every attribute durable.
        file.file
            .sync_all()
            .map_err(|e| io_err(self.file_path(file), "fsync", e))
    }

    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        let fd = self.open_fd(
            dir,
            true,
            libc::O_RDONLY | libc::O_DIRECTORY,
            "open directory",
        )?;
        // persist: fsync of the directory makes its entries durable.
        File::from(fd)
            .sync_all()
            .map_err(|e| io_err(self.abs(dir), "fsync directory", e))
    }

    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        let (from_dir, from_name) = self.entry(from, "rename")?;
        let (to_dir, to_name) = self.entry(to, "rename")?;
        // SAFETY: both names are NUL-terminated; the descriptors are open directories.
        cvt(unsafe {
            libc::renameat(
                from_dir.as_raw_fd(),
                from_name.as_ptr(),
                to_dir.as_raw_fd(),
                to_name.as_ptr(),
            )
        })
        .map_err(|e| io_err(self.abs(from), "rename", e))
    }

    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        self.unlink_at(path, 0, "unlink")
    }

    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        let (old_dir, old_name) = self.entry(existing, "link")?;
        let (new_dir, new_name) = self.entry(new, "link")?;
        // SAFETY: both names are NUL-terminated; flags 0: a symlink is linked, not followed.
        cvt(unsafe {
            libc::linkat(
                old_dir.as_raw_fd(),
                old_name.as_ptr(),
                new_dir.as_raw_fd(),
                new_name.as_ptr(),
                0,
            )
        })
        .map_err(|e| io_err(self.abs(new), "link", e))
    }

    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        let (dir, name) = self.entry(path, "mkdir")?;
        // SAFETY: `name` is NUL-terminated; `dir` is an open directory.
        cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), perm & 0o7777) })
            .map_err(|e| io_err(self.abs(path), "mkdir", e))
    }

    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        self.unlink_at(path, libc::AT_REMOVEDIR, "rmdir")
    }

    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        let fd = self.open_fd(
            dir,
            true,
            libc::O_RDONLY | libc::O_DIRECTORY,
            "open directory",
        )?;
        let probe = fd
            .try_clone()
            .map_err(|e| io_err(self.abs(dir), "dup", e))?;
        let raw = sys::read_dir(fd).map_err(|e| io_err(self.abs(dir), "readdir", e))?;
        let mut out = Vec::with_capacity(raw.len());
        for (name, ino, d_type) in raw {
            let kind = match sys::kind_of_dtype(d_type) {
                Some(kind) => kind,
                None => {
                    let c = jail::cstr(&name).map_err(|e| io_err(self.abs(dir), "readdir", e))?;
                    sys::stat_at(probe.as_fd(), &c)
                        .map_err(|e| io_err(self.abs(dir), "fstatat", e))?
                        .kind
                }
            };
            out.push(DirEntry { name, ino, kind });
        }
        Ok(out)
    }

    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        let rel = RelPath::dir(path)?;
        if rel.is_root() {
            return sys::stat_at(self.root_fd(), c"")
                .map_err(|e| io_err(self.abs(path), "stat", e));
        }
        let (dir, name) = self.entry(path, "stat")?;
        sys::stat_at(dir.as_fd(), &name).map_err(|e| io_err(self.abs(path), "stat", e))
    }

    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        if let Some(done) = self.chmod_at(path, perm) {
            return done;
        }
        let fd = self.open_attr_fd(path, "chmod")?;
        // SAFETY: `fd` is an open descriptor of the target (never a symlink: O_NOFOLLOW).
        cvt(unsafe { libc::fchmod(fd.as_raw_fd(), perm & 0o7777) })
            .map_err(|e| io_err(self.abs(path), "chmod", e))
    }

    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        let times = [timespec(atime), timespec(mtime)];
        let fd = self.open_attr_fd(path, "utimens")?;
        // SAFETY: `times` is two valid timespecs; `fd` is an open descriptor.
        cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })
            .map_err(|e| io_err(self.abs(path), "utimens", e))
    }

    fn statfs(&self) -> HostFsResult<StatFs> {
        sys::statfs(self.root_fd()).map_err(|e| io_err(&self.root, "statfs", e))
    }

    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        self.symlink_at(target, path)
    }

    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        self.readlink_at(path)
    }

    fn mknod(&self, path: &Path, kind: NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        self.mknod_at(path, kind, perm, rdev)
    }

    fn rename_with(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        self.renameat2(from, to, how)
    }

    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        self.lchown_at(path, uid, gid)
    }

    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        self.utimens_at(path, &[timespec(atime), timespec(mtime)])
    }

    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        self.sync_entry(path)
    }

    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        self.get_xattr_at(path, name)
    }

    fn set_xattr(&self, path: &Path, name: &[u8], value: &[u8], how: XattrHow) -> HostFsResult<()> {
        self.set_xattr_at(path, name, value, how)
    }

    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        self.list_xattr_at(path)
    }

    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        self.remove_xattr_at(path, name)
    }

    fn fallocate(
        &self,
        file: &RealFile,
        how: FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fallocate_file(file, how, off, len)
    }

    fn map(&self, file: &RealFile, len: u64) -> HostFsResult<MappedRegion> {
        let page = pmem::mapped::page_size();
        let map_len = len.max(1).div_ceil(page) * page;
        let path = self.file_path(file);
        let dup = file.file.try_clone().map_err(|e| io_err(&path, "dup", e))?;
        MappedRegion::map_host_file(&path, dup, map_len)
            .map_err(|e| invalid(&path, "mmap", e.to_string()))
    }

    fn check_map(&self, map: &MappedRegion) -> HostFsResult<()> {
        map.take_sync_error()
            .map_err(|e| invalid(map.path(), "msync", e.to_string()))
    }

    fn clone_range(
        &self,
        src: &RealFile,
        src_off: u64,
        dst: &RealFile,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.require(Capability::Reflink)?;
        with_owned(&src.file, |s| {
            with_owned(&dst.file, |d| sys::clone_range(s, src_off, d, dst_off, len))
        })
        .map_err(|e| io_err(self.file_path(dst), "FICLONERANGE", e))
    }

    fn exchange_range(
        &self,
        a: &RealFile,
        a_off: u64,
        b: &RealFile,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.require(Capability::ExchangeRange)?;
        with_owned(&a.file, |fa| {
            with_owned(&b.file, |fb| {
                sys::exchange_range(fa, a_off, fb, b_off, len, 0)
            })
        })
        .map_err(|e| io_err(self.file_path(b), "XFS_IOC_EXCHANGE_RANGE", e))
    }

    fn atomic_write(&self, file: &RealFile, off: u64, data: &[u8]) -> HostFsResult<()> {
        let path = self.file_path(file);
        crate::caps::check_atomic(&self.caps, &path, off, data.len())?;
        self.require(Capability::AtomicWrite {
            len: data.len() as u32,
        })?;
        let direct = match file.direct.get() {
            Some(direct) => direct,
            None => {
                let fd = file
                    .file
                    .try_clone()
                    .map(OwnedFd::from)
                    .map_err(|e| io_err(&path, "dup", e))?;
                let direct =
                    probe::reopen_direct(&fd).map_err(|e| io_err(&path, "open O_DIRECT", e))?;
                file.direct.get_or_init(|| direct)
            }
        };
        let buffer = AlignedBuf::copy_of(data, self.caps.direct_io_align.map_or(4096, |a| a.1))
            .ok_or_else(|| {
                invalid(
                    &path,
                    "atomic write",
                    "no memory for the aligned buffer".into(),
                )
            })?;
        let fd = direct
            .try_clone()
            .map(OwnedFd::from)
            .map_err(|e| io_err(&path, "dup", e))?;
        let n = sys::pwritev2(&fd, off, buffer.as_slice(), libc::RWF_ATOMIC)
            .map_err(|e| io_err(&path, "pwritev2(RWF_ATOMIC)", e))?;
        if n != data.len() {
            return Err(invalid(
                &path,
                "pwritev2(RWF_ATOMIC)",
                format!("wrote {n} of {} bytes", data.len()),
            ));
        }
        Ok(())
    }
}

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn copy_of(data: &[u8], align: u32) -> Option<AlignedBuf> {
        let layout =
            std::alloc::Layout::from_size_align(data.len().max(1), (align as usize).max(512))
                .ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        // SAFETY: `ptr` holds at least `data.len()` bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), data.len()) };
        Some(AlignedBuf {
            ptr,
            len: data.len(),
            layout,
        })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` holds at least `len` bytes, all written by `copy_of`, and lives
        // as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `copy_of` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl RealHostFs {
    fn unlink_at(&self, path: &Path, flags: i32, op: &'static str) -> HostFsResult<()> {
        let (dir, name) = self.entry(path, op)?;
        // SAFETY: `name` is NUL-terminated; `dir` is an open directory.
        cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
            .map_err(|e| io_err(self.abs(path), op, e))
    }

    /// A descriptor of a file or directory to change its attributes (never a symlink).
    fn open_attr_fd(&self, path: &Path, op: &'static str) -> HostFsResult<OwnedFd> {
        self.open_fd(path, true, libc::O_RDONLY | libc::O_NONBLOCK, op)
    }
}
