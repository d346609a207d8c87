//! Resolving validated paths beneath the store directory.
//!
//! With openat2 (Linux 5.6+) the kernel does it: `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
//! RESOLVE_NO_SYMLINKS` refuses any resolution that would leave the directory or follow a
//! symlink. Without it, the walk opens one component at a time with `O_NOFOLLOW` (each
//! intermediate one `O_PATH | O_DIRECTORY`), relative to the previous directory's descriptor;
//! as the components were validated (no `..`, no `/`), neither way can leave the directory.
//! Operations on a directory entry (rename, unlink, link, mkdir, rmdir, stat) resolve the
//! parent directory this way and name the last component relative to its descriptor, so a
//! symlink as last component is acted on itself, never followed.

use crate::RelPath;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How paths are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolver {
    /// openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS.
    Openat2,
    /// One component at a time with O_NOFOLLOW.
    Walk,
}

impl Resolver {
    /// openat2 when the kernel has it (probed with a harmless open of the directory itself).
    pub fn detect(root: &OwnedFd) -> Resolver {
        match openat2(root, c".", libc::O_PATH | libc::O_DIRECTORY, 0) {
            Ok(_) => Resolver::Openat2,
            Err(_) => Resolver::Walk,
        }
    }
}

/// `c` as a C string (components were validated: no NUL byte).
pub fn cstr(c: &[u8]) -> io::Result<CString> {
    CString::new(c).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn openat2(dir: &OwnedFd, path: &std::ffi::CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let mut how: libc::open_how = open_how_zeroed();
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `path` is NUL-terminated, `how` is a valid open_how of the size passed; the
    // kernel only reads them. The returned descriptor is owned by the OwnedFd built below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    owned(fd as i32)
}

fn open_how_zeroed() -> libc::open_how {
    // SAFETY: open_how is a plain struct of integers, for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

fn openat(dir: &OwnedFd, name: &std::ffi::CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; the returned descriptor is owned below.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode,
        )
    };
    owned(fd)
}

/// An owned descriptor from a raw result (negative: the last OS error).
pub fn owned(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new descriptor for the same directory.
pub fn dup(fd: &OwnedFd) -> io::Result<OwnedFd> {
    fd.try_clone()
}

/// Open `rel` beneath `root` with `flags` (O_NOFOLLOW is always added: the last component
/// must not be a symlink either).
pub fn open(
    resolver: Resolver,
    root: &OwnedFd,
    rel: &RelPath,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_NOFOLLOW;
    if rel.is_root() {
        return openat(root, c".", flags, mode);
    }
    match resolver {
        Resolver::Openat2 => openat2(root, &cstr(&rel.to_bytes())?, flags, mode),
        Resolver::Walk => {
            let Some((parent, last)) = rel.split_last() else {
                return openat(root, c".", flags, mode);
            };
            let dir = open_dir_path(resolver, root, &parent)?;
            openat(&dir, &cstr(last)?, flags, mode)
        }
    }
}

/// An `O_PATH` descriptor of the directory `rel` (the store directory when empty).
pub fn open_dir_path(resolver: Resolver, root: &OwnedFd, rel: &RelPath) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    if rel.is_root() {
        return dup(root);
    }
    match resolver {
        Resolver::Openat2 => openat2(root, &cstr(&rel.to_bytes())?, flags, 0),
        Resolver::Walk => {
            let mut dir = dup(root)?;
            for component in rel.components() {
                dir = openat(&dir, &cstr(component)?, flags, 0)?;
            }
            Ok(dir)
        }
    }
}

/// The parent directory of `rel` (an `O_PATH` descriptor) and the last component.
pub fn parent(resolver: Resolver, root: &OwnedFd, rel: &RelPath) -> io::Result<(OwnedFd, CString)> {
    let (parent, last) = rel
        .split_last()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok((open_dir_path(resolver, root, &parent)?, cstr(last)?))
}
