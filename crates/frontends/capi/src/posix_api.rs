//! The rest of the POSIX file API in C: symbolic links, special files, rename modes,
//! fallocate, extended attributes and unnamed files (declared in `include/atomfs.h`).
//! Same conventions as the rest of the C API: -1 (or NULL) with errno on failure.

use std::ffi::{c_char, c_int, c_uint, c_void};

use super::{atomfs_pool, px};
use super::{buf_mut, buf_ref, c_str, file, install_fd, pool_of, ret, with_path};
use store::path::LastLink;

/// symlink(2): a link `linkpath` in the pool holding `target` (kept as written; absolute
/// targets resolve from the pool's root).
///
/// # Safety
/// `target` and `linkpath` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn atomfs_symlink(
    pool: *mut atomfs_pool,
    target: *const c_char,
    linkpath: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_path(pool, linkpath, |pool, path| {
            let target = c_str(target)?;
            px::symlink(pool, target, path)
        })
    }
}

/// readlink(2): up to `size` bytes of the target of the link at `path` (no NUL added; a
/// longer target is cut, as readlink(2) cuts it). Returns the bytes placed.
///
/// # Safety
/// `path` is NULL or a C string; `buf` is NULL or valid for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_readlink(
    pool: *mut atomfs_pool,
    path: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> isize {
    let r = pool_of(pool).and_then(|pool| {
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(path) }?;
        if size == 0 {
            return Err(libc::EINVAL);
        }
        let target = px::readlink(&pool, path)?;
        // SAFETY: forwarded caller contract.
        let out = unsafe { buf_mut(buf.cast(), size) }?;
        let n = target.len().min(out.len());
        out[..n].copy_from_slice(&target[..n]);
        Ok(n as isize)
    });
    ret(r, -1)
}

/// lstat(2): like `atomfs_stat`, but a symbolic link in the last component is not followed.
///
/// # Safety
/// `path` is NULL or a C string; `st` is NULL or a writable `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn atomfs_lstat(
    pool: *mut atomfs_pool,
    path: *const c_char,
    st: *mut libc::stat,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_path(pool, path, |pool, path| {
            if st.is_null() {
                return Err(libc::EFAULT);
            }
            let meta = px::lstat(pool, path)?;
            // SAFETY: non-NULL and writable by the caller's contract.
            st.write(px::to_stat(&meta));
            Ok(())
        })
    }
}

/// mknod(2): a FIFO (`S_IFIFO`), socket (`S_IFSOCK`), device node (`S_IFCHR`, `S_IFBLK`,
/// with `dev`) or regular file (`S_IFREG` or no type); permission bits less the umask.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_mknod(
    pool: *mut atomfs_pool,
    path: *const c_char,
    mode: c_uint,
    dev: u64,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { with_path(pool, path, |pool, path| px::mknod(pool, path, mode, dev)) }
}

/// renameat2(2) in the pool: `flags` 0 (replace), `RENAME_NOREPLACE` (EEXIST when `to`
/// exists) or `RENAME_EXCHANGE` (swap two existing names), atomically.
///
/// # Safety
/// `from` and `to` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn atomfs_rename2(
    pool: *mut atomfs_pool,
    from: *const c_char,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_path(pool, from, |pool, from| {
            let to = c_str(to)?;
            px::rename2(pool, from, to, flags)
        })
    }
}

/// fallocate(2): `mode` 0, `FALLOC_FL_KEEP_SIZE`, `FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE`
/// or `FALLOC_FL_ZERO_RANGE` (with or without KEEP_SIZE); atomic and durable like a write,
/// in the descriptor's transaction if it is bound to one.
#[no_mangle]
pub extern "C" fn atomfs_fallocate(fd: c_int, mode: c_int, off: i64, len: i64) -> c_int {
    ret(
        file(fd)
            .and_then(|f| px::fallocate(&f, mode, off, len))
            .map(|_| 0),
        -1,
    )
}

/// Run an attribute call on the inode `path` names (links followed).
///
/// # Safety
/// `path` and `name` are NULL or NUL-terminated strings.
unsafe fn with_name<T>(
    pool: *mut atomfs_pool,
    path: *const c_char,
    name: *const c_char,
    f: impl FnOnce(&px::Pool, &[u8], &[u8]) -> px::PResult<T>,
) -> px::PResult<T> {
    let pool = pool_of(pool)?;
    // SAFETY: forwarded caller contract.
    let (path, name) = unsafe { (c_str(path)?, c_str(name)?) };
    f(&pool, path, name)
}

/// getxattr(2): the value of attribute `name`; `size` 0 returns its length, a buffer too
/// small is ERANGE, a missing attribute ENODATA.
///
/// # Safety
/// `path` and `name` are NULL or C strings; `value` is NULL or valid for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_getxattr(
    pool: *mut atomfs_pool,
    path: *const c_char,
    name: *const c_char,
    value: *mut c_void,
    size: usize,
) -> isize {
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        with_name(pool, path, name, |pool, path, name| {
            let v = px::xattrs::getxattr(pool, path, name, LastLink::Follow)?;
            let out = if size == 0 {
                None
            } else {
                Some(buf_mut(value, size)?)
            };
            px::xattrs::sized(&v, out)
        })
    };
    ret(r.map(|n| n as isize), -1)
}

/// setxattr(2): `flags` 0, `XATTR_CREATE` (EEXIST when it exists) or `XATTR_REPLACE`
/// (ENODATA when it does not). Names `user.*`, `trusted.*`, `security.*`,
/// `system.posix_acl_{access,default}`; values up to 64 KiB (E2BIG past).
///
/// # Safety
/// `path` and `name` are NULL or C strings; `value` is NULL or valid for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_setxattr(
    pool: *mut atomfs_pool,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        with_name(pool, path, name, |pool, path, name| {
            if size > store::xattr::XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            let value = buf_ref(value, size)?;
            px::xattrs::setxattr(pool, path, name, value, flags, LastLink::Follow)
        })
    };
    ret(r.map(|_| 0), -1)
}

/// listxattr(2): the attribute names, each followed by a NUL; `size` 0 returns the length
/// needed, a buffer too small is ERANGE.
///
/// # Safety
/// `path` is NULL or a C string; `list` is NULL or valid for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_listxattr(
    pool: *mut atomfs_pool,
    path: *const c_char,
    list: *mut c_char,
    size: usize,
) -> isize {
    let r = pool_of(pool).and_then(|pool| {
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(path) }?;
        let names = px::xattrs::listxattr(&pool, path, LastLink::Follow)?;
        let out = if size == 0 {
            None
        } else {
            // SAFETY: forwarded caller contract.
            Some(unsafe { buf_mut(list.cast(), size) }?)
        };
        px::xattrs::sized(&names, out)
    });
    ret(r.map(|n| n as isize), -1)
}

/// removexattr(2) (ENODATA when absent).
///
/// # Safety
/// `path` and `name` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn atomfs_removexattr(
    pool: *mut atomfs_pool,
    path: *const c_char,
    name: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        with_name(pool, path, name, |pool, path, name| {
            px::xattrs::removexattr(pool, path, name, LastLink::Follow)
        })
    };
    ret(r.map(|_| 0), -1)
}

/// open(2) with O_TMPFILE: a new unnamed file in the directory `dir`, open with `flags`
/// (`O_WRONLY` or `O_RDWR`, plus `O_APPEND`, `ATOMFS_O_ATOMIC`) and `mode` less the umask.
/// Write it, then `atomfs_linkat` publishes it with its contents atomically; closed
/// unnamed, or after a crash, nothing of it remains. Returns a descriptor.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_tmpfile(
    pool: *mut atomfs_pool,
    dir: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let r = pool_of(pool).and_then(|pool| {
        // SAFETY: forwarded caller contract.
        let dir = unsafe { c_str(dir) }?;
        install_fd(px::tmpfile(&pool, dir, flags, mode)?)
    });
    ret(r, -1)
}

/// linkat(2) of an open descriptor (`AT_EMPTY_PATH`): the name `newpath` in the
/// descriptor's pool for its file. For an `atomfs_tmpfile` file it publishes it.
///
/// # Safety
/// `newpath` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_linkat(fd: c_int, newpath: *const c_char) -> c_int {
    let r = file(fd).and_then(|f| {
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(newpath) }?;
        px::linkat(&f, path)
    });
    ret(r.map(|_| 0), -1)
}
