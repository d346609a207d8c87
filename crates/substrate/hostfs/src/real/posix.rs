//! The rest of the POSIX file API on a real store directory: symlinks, special files,
//! renameat2 modes, owners, attributes of any kind of entry, extended attributes and
//! fallocate. Every entry is named by its parent directory's descriptor (resolved through the
//! jail) and its last component, with the flag that keeps a symlink from being followed.

use super::{RealFile, RealHostFs};
use crate::error::io_err;
use crate::{FallocateHow, HostFsResult, NodeKind, RelPath, RenameHow, XattrHow};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

fn cvt(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// setxattrat(2) and friends (Linux 6.13): the same numbers on every architecture.
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_GETXATTRAT: libc::c_long = 464;
const SYS_LISTXATTRAT: libc::c_long = 465;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
/// fchmodat2(2) (Linux 6.6).
const SYS_FCHMODAT2: libc::c_long = 452;

/// struct xattr_args of linux/xattr.h.
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// Where an extended-attribute call names its entry: a directory and a name in it, never
/// following a symlink at the name. With the *xattrat calls the kernel takes them as they
/// are; on an older kernel the l*xattr calls take `/proc/self/fd/<dir>/<name>`, whose only
/// link followed is the magic link of the directory's own (jailed) descriptor.
struct XattrTarget {
    dir: OwnedFd,
    name: CString,
}

impl XattrTarget {
    fn proc_path(&self) -> io::Result<CString> {
        let mut p = format!("/proc/self/fd/{}/", self.dir.as_raw_fd()).into_bytes();
        p.extend_from_slice(self.name.as_bytes());
        CString::new(p).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn get(&self, name: &CString, buf: &mut [u8]) -> io::Result<usize> {
        let mut args = XattrArgs {
            value: buf.as_mut_ptr() as u64,
            size: buf.len() as u32,
            flags: 0,
        };
        // SAFETY: names NUL-terminated; `args` points at `buf`, writable for `size` bytes.
        let rc = unsafe {
            libc::syscall(
                SYS_GETXATTRAT,
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                name.as_ptr(),
                &mut args as *mut XattrArgs,
                std::mem::size_of::<XattrArgs>(),
            )
        };
        match cvt(rc) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                let p = self.proc_path()?;
                // SAFETY: NUL-terminated strings; `buf` writable for its length.
                let rc = unsafe {
                    libc::lgetxattr(
                        p.as_ptr(),
                        name.as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                cvt(rc as libc::c_long).map(|n| n as usize)
            }
            r => r.map(|n| n as usize),
        }
    }

    fn set(&self, name: &CString, value: &[u8], flags: i32) -> io::Result<()> {
        let args = XattrArgs {
            value: value.as_ptr() as u64,
            size: value.len() as u32,
            flags: flags as u32,
        };
        // SAFETY: names NUL-terminated; `args` points at `value`, read for `size` bytes.
        let rc = unsafe {
            libc::syscall(
                SYS_SETXATTRAT,
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                name.as_ptr(),
                &args as *const XattrArgs,
                std::mem::size_of::<XattrArgs>(),
            )
        };
        match cvt(rc) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                let p = self.proc_path()?;
                // SAFETY: NUL-terminated strings; `value` read for its length.
                let rc = unsafe {
                    libc::lsetxattr(
                        p.as_ptr(),
                        name.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                        flags,
                    )
                };
                cvt(rc as libc::c_long).map(drop)
            }
            r => r.map(drop),
        }
    }

    fn list(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the name is NUL-terminated; `buf` writable for its length.
        let rc = unsafe {
            libc::syscall(
                SYS_LISTXATTRAT,
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        match cvt(rc) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                let p = self.proc_path()?;
                // SAFETY: NUL-terminated path; `buf` writable for its length.
                let rc =
                    unsafe { libc::llistxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
                cvt(rc as libc::c_long).map(|n| n as usize)
            }
            r => r.map(|n| n as usize),
        }
    }

    fn remove(&self, name: &CString) -> io::Result<()> {
        // SAFETY: both names are NUL-terminated.
        let rc = unsafe {
            libc::syscall(
                SYS_REMOVEXATTRAT,
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                name.as_ptr(),
            )
        };
        match cvt(rc) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                let p = self.proc_path()?;
                // SAFETY: both strings are NUL-terminated.
                let rc = unsafe { libc::lremovexattr(p.as_ptr(), name.as_ptr()) };
                cvt(rc as libc::c_long).map(drop)
            }
            r => r.map(drop),
        }
    }
}

fn attr_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Call `f` with a buffer of growing size until the value fits (ERANGE: it grew meanwhile).
fn sized(mut f: impl FnMut(&mut [u8]) -> io::Result<usize>) -> io::Result<Vec<u8>> {
    let mut len = 256;
    loop {
        let mut buf = vec![0u8; len];
        match f(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(e) if e.raw_os_error() == Some(libc::ERANGE) && len < (1 << 21) => len *= 4,
            Err(e) => return Err(e),
        }
    }
}

impl RealHostFs {
    /// The entry at `path`, relative to its directory (the store directory itself as `.`).
    fn xattr_target(&self, path: &Path, op: &'static str) -> HostFsResult<XattrTarget> {
        let rel = RelPath::dir(path)?;
        if rel.is_root() {
            let dir = self
                .root_fd
                .try_clone()
                .map_err(|e| io_err(self.abs(path), op, e))?;
            return Ok(XattrTarget {
                dir,
                name: c".".to_owned(),
            });
        }
        let (dir, name) = self.entry(path, op)?;
        Ok(XattrTarget { dir, name })
    }

    pub(super) fn symlink_at(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        let (dir, name) = self.entry(path, "symlink")?;
        let target = CString::new(target).map_err(|_| {
            io_err(
                self.abs(path),
                "symlink",
                io::Error::from_raw_os_error(libc::EINVAL),
            )
        })?;
        // SAFETY: both strings are NUL-terminated; `dir` is an open directory. The target is
        // stored, never resolved.
        let rc = unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.abs(path), "symlink", e))
    }

    pub(super) fn readlink_at(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        let (dir, name) = self.entry(path, "readlink")?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: `name` is NUL-terminated; `buf` is writable for its length.
        let rc = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = cvt(rc as libc::c_long).map_err(|e| io_err(self.abs(path), "readlink", e))?;
        buf.truncate(n as usize);
        Ok(buf)
    }

    pub(super) fn mknod_at(
        &self,
        path: &Path,
        kind: NodeKind,
        perm: u32,
        rdev: u64,
    ) -> HostFsResult<()> {
        let (dir, name) = self.entry(path, "mknod")?;
        let dev = match kind {
            NodeKind::CharDevice | NodeKind::BlockDevice => rdev,
            NodeKind::Fifo | NodeKind::Socket => 0,
        };
        let mode = kind.mode_type() | (perm & 0o7777);
        // SAFETY: `name` is NUL-terminated; `dir` is an open directory.
        let rc = unsafe {
            libc::mknodat(
                dir.as_raw_fd(),
                name.as_ptr(),
                mode as libc::mode_t,
                dev as libc::dev_t,
            )
        };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.abs(path), "mknod", e))
    }

    pub(super) fn renameat2(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        let (from_dir, from_name) = self.entry(from, "renameat2")?;
        let (to_dir, to_name) = self.entry(to, "renameat2")?;
        let flags = match how {
            RenameHow::NoReplace => libc::RENAME_NOREPLACE,
            RenameHow::Exchange => libc::RENAME_EXCHANGE,
        };
        // SAFETY: both names are NUL-terminated; the descriptors are open directories.
        let rc = unsafe {
            libc::renameat2(
                from_dir.as_raw_fd(),
                from_name.as_ptr(),
                to_dir.as_raw_fd(),
                to_name.as_ptr(),
                flags,
            )
        };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.abs(from), "renameat2", e))
    }

    pub(super) fn lchown_at(
        &self,
        path: &Path,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> HostFsResult<()> {
        let t = self.xattr_target(path, "lchown")?;
        // SAFETY: `name` is NUL-terminated; -1 leaves an id unchanged; the link itself is
        // changed, never followed.
        let rc = unsafe {
            libc::fchownat(
                t.dir.as_raw_fd(),
                t.name.as_ptr(),
                uid.unwrap_or(u32::MAX),
                gid.unwrap_or(u32::MAX),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.abs(path), "lchown", e))
    }

    /// utimensat with AT_SYMLINK_NOFOLLOW (a symlink's own times).
    pub(super) fn utimens_at(&self, path: &Path, times: &[libc::timespec; 2]) -> HostFsResult<()> {
        let t = self.xattr_target(path, "utimens")?;
        // SAFETY: `name` is NUL-terminated; `times` is two valid timespecs.
        let rc = unsafe {
            libc::utimensat(
                t.dir.as_raw_fd(),
                t.name.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.abs(path), "utimens", e))
    }

    /// fchmodat2 with AT_SYMLINK_NOFOLLOW; `None` when the kernel lacks it (before 6.6).
    pub(super) fn chmod_at(&self, path: &Path, perm: u32) -> Option<HostFsResult<()>> {
        let t = match self.xattr_target(path, "chmod") {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: `name` is NUL-terminated; a symlink is refused (EOPNOTSUPP), not followed.
        let rc = unsafe {
            libc::syscall(
                SYS_FCHMODAT2,
                t.dir.as_raw_fd(),
                t.name.as_ptr(),
                perm & 0o7777,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        match cvt(rc) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
            r => Some(r.map(drop).map_err(|e| io_err(self.abs(path), "chmod", e))),
        }
    }

    pub(super) fn sync_entry(&self, path: &Path) -> HostFsResult<()> {
        use crate::{FileKind, HostFs};
        let st = self.stat(path)?;
        match st.kind {
            FileKind::Dir => self.sync_dir(path),
            FileKind::File => {
                let fd = self.open_fd(path, false, libc::O_RDONLY, "open")?;
                // persist: fsync makes the file's attributes durable.
                std::fs::File::from(fd)
                    .sync_all()
                    .map_err(|e| io_err(self.abs(path), "fsync", e))
            }
            FileKind::Symlink | FileKind::Other => {
                let parent = path.parent().unwrap_or(Path::new(""));
                // persist: a symlink or special file cannot be opened to fsync it: the fsync
                // of its directory commits the journal transaction holding its change.
                self.sync_dir(parent)
            }
        }
    }

    pub(super) fn get_xattr_at(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        let t = self.xattr_target(path, "getxattr")?;
        let err = |e| io_err(self.abs(path), "getxattr", e);
        let name = attr_name(name).map_err(err)?;
        sized(|buf| t.get(&name, buf)).map_err(err)
    }

    pub(super) fn set_xattr_at(
        &self,
        path: &Path,
        name: &[u8],
        value: &[u8],
        how: XattrHow,
    ) -> HostFsResult<()> {
        let t = self.xattr_target(path, "setxattr")?;
        let err = |e| io_err(self.abs(path), "setxattr", e);
        let name = attr_name(name).map_err(err)?;
        let flags = match how {
            XattrHow::Either => 0,
            XattrHow::Create => libc::XATTR_CREATE,
            XattrHow::Replace => libc::XATTR_REPLACE,
        };
        t.set(&name, value, flags).map_err(err)
    }

    pub(super) fn list_xattr_at(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        let t = self.xattr_target(path, "listxattr")?;
        let list = sized(|buf| t.list(buf)).map_err(|e| io_err(self.abs(path), "listxattr", e))?;
        Ok(list
            .split(|&b| b == 0)
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect())
    }

    pub(super) fn remove_xattr_at(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        let t = self.xattr_target(path, "removexattr")?;
        let err = |e| io_err(self.abs(path), "removexattr", e);
        let name = attr_name(name).map_err(err)?;
        t.remove(&name).map_err(err)
    }

    pub(super) fn fallocate_file(
        &self,
        file: &RealFile,
        how: FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        // SAFETY: a valid open descriptor; fallocate has no memory arguments.
        let rc = unsafe {
            libc::fallocate(
                file.file.as_fd().as_raw_fd(),
                how.mode(),
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        cvt(rc as libc::c_long)
            .map(drop)
            .map_err(|e| io_err(self.file_path(file), "fallocate", e))
    }
}
