//! Extended attributes of pool files: get, set, list and remove, by path (following a
//! symbolic link), by `l` path (not following) and by descriptor. On an engine that keeps no
//! attributes yet, a file has none: get is ENODATA, the list empty, set EOPNOTSUPP.

use std::ffi::{c_char, c_int, c_void};

use atomfs_posix as px;
use px::PResult;
use store::path::LastLink;

use crate::paths::{classify, outside, real_path};
use crate::real::call_real;
use crate::{bytes, ours, pool, ret, shim_file};

/// Where an attribute call acts: a pool path, or the file of a shim descriptor.
enum On<'a> {
    Path(&'a [u8], LastLink),
    File(&'a px::OpenFile),
}

impl On<'_> {
    /// The inode, through the pool.
    fn ino(&self, pool: &px::Pool) -> PResult<u64> {
        match self {
            On::Path(p, last) => store::path::resolve_with(&*pool.store, p, *last)
                .map(|m| m.ino)
                .map_err(|e| e.errno()),
            On::File(f) => Ok(crate::usable(f)?.ino),
        }
    }
}

/// What a store without attributes answers for a read of them.
fn none_kept<T>(r: PResult<T>, empty: impl FnOnce() -> T) -> PResult<T> {
    match r {
        Err(libc::EOPNOTSUPP) => Ok(empty()),
        other => other,
    }
}

/// # Safety
/// `name` is NULL or a C string; `value` NULL or valid for `size` bytes.
unsafe fn get(on: On<'_>, name: *const c_char, value: *mut c_void, size: usize) -> isize {
    // SAFETY: forwarded caller contract.
    let Some(name) = (unsafe { bytes(name) }) else {
        return ret::<isize>(Err(libc::EFAULT));
    };
    let r = ours(|| {
        let pool = pool()?;
        let ino = on.ino(&pool)?;
        let v = pool.store.getxattr(ino, name).map_err(|e| e.errno());
        match v {
            Err(libc::EOPNOTSUPP) => Err(libc::ENODATA),
            other => other,
        }
    });
    ret(r.and_then(|v| copy_out(&v, value.cast(), size)))
}

/// The size-probe protocol: size 0 returns the length; a smaller buffer is ERANGE.
fn copy_out(v: &[u8], out: *mut u8, size: usize) -> PResult<isize> {
    if size == 0 {
        return Ok(v.len() as isize);
    }
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: non-NULL, and the caller's buffer of `size` bytes.
    let buf = unsafe { std::slice::from_raw_parts_mut(out, size) };
    px::xattrs::sized(v, Some(buf)).map(|n| n as isize)
}

/// # Safety
/// `list` is NULL or valid for `size` bytes.
unsafe fn list(on: On<'_>, out: *mut c_char, size: usize) -> isize {
    let r = ours(|| {
        let pool = pool()?;
        let ino = on.ino(&pool)?;
        let names = none_kept(pool.store.listxattr(ino).map_err(|e| e.errno()), Vec::new)?;
        let mut flat = Vec::new();
        for n in names {
            flat.extend_from_slice(&n);
            flat.push(0);
        }
        Ok(flat)
    });
    ret(r.and_then(|v| copy_out(&v, out.cast(), size)))
}

/// # Safety
/// `name` is NULL or a C string; `value` NULL or valid for `size` bytes.
unsafe fn set(
    on: On<'_>,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let Some(name) = (unsafe { bytes(name) }) else {
        return ret::<c_int>(Err(libc::EFAULT));
    };
    if size > store::xattr::XATTR_SIZE_MAX {
        return ret::<c_int>(Err(libc::E2BIG));
    }
    let value: &[u8] = if size == 0 {
        &[]
    } else if value.is_null() {
        return ret::<c_int>(Err(libc::EFAULT));
    } else {
        // SAFETY: non-NULL and valid for `size` bytes by the caller's contract.
        unsafe { std::slice::from_raw_parts(value.cast(), size) }
    };
    let r = ours(|| {
        let how = px::xattrs::set_mode(flags)?;
        let pool = pool()?;
        let ino = on.ino(&pool)?;
        pool.store
            .setxattr(ino, name, value, how, None)
            .map_err(|e| e.errno())
    });
    ret(r.map(|_| 0))
}

/// # Safety
/// `name` is NULL or a C string.
unsafe fn remove(on: On<'_>, name: *const c_char) -> c_int {
    // SAFETY: forwarded caller contract.
    let Some(name) = (unsafe { bytes(name) }) else {
        return ret::<c_int>(Err(libc::EFAULT));
    };
    let r = ours(|| {
        let pool = pool()?;
        let ino = on.ino(&pool)?;
        pool.store
            .removexattr(ino, name, None)
            .map_err(|e| e.errno())
    });
    ret(r.map(|_| 0))
}

type GetxattrFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, usize) -> isize;
type ListxattrFn = unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> isize;
type SetxattrFn =
    unsafe extern "C" fn(*const c_char, *const c_char, *const c_void, usize, c_int) -> c_int;
type RemovexattrFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type FgetxattrFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void, usize) -> isize;
type FlistxattrFn = unsafe extern "C" fn(c_int, *mut c_char, usize) -> isize;
type FsetxattrFn = unsafe extern "C" fn(c_int, *const c_char, *const c_void, usize, c_int) -> c_int;
type FremovexattrFn = unsafe extern "C" fn(c_int, *const c_char) -> c_int;

macro_rules! path_xattrs {
    ($get:ident, $list:ident, $set:ident, $remove:ident, $last:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(
            path: *const c_char,
            name: *const c_char,
            value: *mut c_void,
            size: usize,
        ) -> isize {
            match classify(libc::AT_FDCWD, path) {
                // SAFETY: forwarded caller contract.
                Some(p) => unsafe { get(On::Path(&p, $last), name, value, size) },
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($get: GetxattrFn, real_path(path, &fixed), name, value, size)
                }
            }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $list(path: *const c_char, out: *mut c_char, size: usize) -> isize {
            match classify(libc::AT_FDCWD, path) {
                // SAFETY: forwarded caller contract.
                Some(p) => unsafe { list(On::Path(&p, $last), out, size) },
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($list: ListxattrFn, real_path(path, &fixed), out, size)
                }
            }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $set(
            path: *const c_char,
            name: *const c_char,
            value: *const c_void,
            size: usize,
            flags: c_int,
        ) -> c_int {
            match classify(libc::AT_FDCWD, path) {
                // SAFETY: forwarded caller contract.
                Some(p) => unsafe { set(On::Path(&p, $last), name, value, size, flags) },
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($set: SetxattrFn, real_path(path, &fixed), name, value, size, flags)
                }
            }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $remove(path: *const c_char, name: *const c_char) -> c_int {
            match classify(libc::AT_FDCWD, path) {
                // SAFETY: forwarded caller contract.
                Some(p) => unsafe { remove(On::Path(&p, $last), name) },
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($remove: RemovexattrFn, real_path(path, &fixed), name)
                }
            }
        }
    };
}
path_xattrs!(getxattr, listxattr, setxattr, removexattr, LastLink::Follow);
path_xattrs!(
    lgetxattr,
    llistxattr,
    lsetxattr,
    lremovexattr,
    LastLink::NoFollow
);

#[no_mangle]
pub unsafe extern "C" fn fgetxattr(
    fd: c_int,
    name: *const c_char,
    value: *mut c_void,
    size: usize,
) -> isize {
    match shim_file(fd) {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { get(On::File(&f), name, value, size) },
        None => call_real!(fgetxattr: FgetxattrFn, fd, name, value, size),
    }
}

#[no_mangle]
pub unsafe extern "C" fn flistxattr(fd: c_int, out: *mut c_char, size: usize) -> isize {
    match shim_file(fd) {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { list(On::File(&f), out, size) },
        None => call_real!(flistxattr: FlistxattrFn, fd, out, size),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fsetxattr(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    match shim_file(fd) {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { set(On::File(&f), name, value, size, flags) },
        None => call_real!(fsetxattr: FsetxattrFn, fd, name, value, size, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fremovexattr(fd: c_int, name: *const c_char) -> c_int {
    match shim_file(fd) {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { remove(On::File(&f), name) },
        None => call_real!(fremovexattr: FremovexattrFn, fd, name),
    }
}
