//! Symbolic links, special files and hard links under the prefix: symlink, symlinkat,
//! mknod, mknodat (and glibc's `__xmknod`/`__xmknodat`), mkfifo, mkfifoat, link, linkat
//! (with `AT_EMPTY_PATH`, which publishes an O_TMPFILE file). A link or rename between the
//! pool and the real file system is EXDEV, as between two mounts.

use std::ffi::{c_char, c_int, c_uint};

use atomfs_posix as px;
use px::PResult;
use store::path::LastLink;

use crate::paths::classify;
use crate::real::call_real;
use crate::{bytes, ours, pool, ret, shim_file};

fn pool_call(f: impl FnOnce(&px::Pool) -> PResult<()>) -> c_int {
    ret(ours(|| f(&*pool()?)).map(|_| 0))
}

type SymlinkFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type SymlinkatFn = unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int;

/// symlink of `target` (kept as written: the pool resolves an absolute target from its own
/// root, so a link made to work under the shim uses a relative target) at the pool path `p`.
///
/// # Safety
/// `target` is NULL or a C string.
unsafe fn symlink_ours(target: *const c_char, p: &[u8]) -> c_int {
    // SAFETY: forwarded caller contract.
    match unsafe { bytes(target) } {
        Some(t) => pool_call(|pool| px::symlink(pool, t, p)),
        None => ret::<c_int>(Err(libc::EFAULT)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, linkpath: *const c_char) -> c_int {
    match classify(libc::AT_FDCWD, linkpath) {
        // SAFETY: forwarded caller contract.
        Some(p) => unsafe { symlink_ours(target, &p) },
        None => call_real!(symlink: SymlinkFn, target, linkpath),
    }
}

#[no_mangle]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    linkpath: *const c_char,
) -> c_int {
    match classify(dirfd, linkpath) {
        // SAFETY: forwarded caller contract.
        Some(p) => unsafe { symlink_ours(target, &p) },
        None => call_real!(symlinkat: SymlinkatFn, target, dirfd, linkpath),
    }
}

type MknodFn = unsafe extern "C" fn(*const c_char, c_uint, u64) -> c_int;
type MknodatFn = unsafe extern "C" fn(c_int, *const c_char, c_uint, u64) -> c_int;
type XmknodFn = unsafe extern "C" fn(c_int, *const c_char, c_uint, *mut u64) -> c_int;
type XmknodatFn = unsafe extern "C" fn(c_int, c_int, *const c_char, c_uint, *mut u64) -> c_int;
type MkfifoFn = unsafe extern "C" fn(*const c_char, c_uint) -> c_int;
type MkfifoatFn = unsafe extern "C" fn(c_int, *const c_char, c_uint) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: c_uint, dev: u64) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => pool_call(|pool| px::mknod(pool, &p, mode, dev)),
        None => call_real!(mknod: MknodFn, path, mode, dev),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mknodat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_uint,
    dev: u64,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => pool_call(|pool| px::mknod(pool, &p, mode, dev)),
        None => call_real!(mknodat: MknodatFn, dirfd, path, mode, dev),
    }
}

/// The device number behind glibc's old `__xmknod` argument.
///
/// # Safety
/// `dev` is NULL or points to a device number.
unsafe fn xdev(dev: *mut u64) -> u64 {
    // SAFETY: NULL checked; otherwise readable by the caller's contract.
    if dev.is_null() {
        0
    } else {
        unsafe { *dev }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __xmknod(
    ver: c_int,
    path: *const c_char,
    mode: c_uint,
    dev: *mut u64,
) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        // SAFETY: forwarded caller contract.
        Some(p) => pool_call(|pool| px::mknod(pool, &p, mode, unsafe { xdev(dev) })),
        None => call_real!(__xmknod: XmknodFn, ver, path, mode, dev),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __xmknodat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    mode: c_uint,
    dev: *mut u64,
) -> c_int {
    match classify(dirfd, path) {
        // SAFETY: forwarded caller contract.
        Some(p) => pool_call(|pool| px::mknod(pool, &p, mode, unsafe { xdev(dev) })),
        None => call_real!(__xmknodat: XmknodatFn, ver, dirfd, path, mode, dev),
    }
}

/// mkfifo: glibc makes it a call of its internal mknodat, which the shim does not see.
#[no_mangle]
pub unsafe extern "C" fn mkfifo(path: *const c_char, mode: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => pool_call(|pool| px::mknod(pool, &p, libc::S_IFIFO | (mode & 0o7777), 0)),
        None => call_real!(mkfifo: MkfifoFn, path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mkfifoat(dirfd: c_int, path: *const c_char, mode: c_uint) -> c_int {
    match classify(dirfd, path) {
        Some(p) => pool_call(|pool| px::mknod(pool, &p, libc::S_IFIFO | (mode & 0o7777), 0)),
        None => call_real!(mkfifoat: MkfifoatFn, dirfd, path, mode),
    }
}

type LinkFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type LinkatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int;

/// A hard link `to` of the pool file at `from` (its last link followed as `last` says).
fn link_ours(from: &[u8], to: &[u8], last: LastLink) -> c_int {
    pool_call(|pool| {
        let st = &*pool.store;
        let old = store::path::resolve_with(st, from, last).map_err(|e| e.errno())?;
        let (parent, name) = store::resolve_parent(st, to).map_err(|e| e.errno())?;
        st.link(old.ino, parent, &name, None)
            .map(drop)
            .map_err(|e| e.errno())
    })
}

#[no_mangle]
pub unsafe extern "C" fn link(from: *const c_char, to: *const c_char) -> c_int {
    match (classify(libc::AT_FDCWD, from), classify(libc::AT_FDCWD, to)) {
        (Some(a), Some(b)) => link_ours(&a, &b, LastLink::NoFollow),
        (None, None) => call_real!(link: LinkFn, from, to),
        _ => ret::<c_int>(Err(libc::EXDEV)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn linkat(
    fromfd: c_int,
    from: *const c_char,
    tofd: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: NULL or a C string from the caller.
    let empty = unsafe { bytes(from) }.is_some_and(|p| p.is_empty());
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        if let Some(file) = shim_file(fromfd) {
            // The descriptor's own file (an O_TMPFILE file: published by this name).
            return match classify(tofd, to) {
                Some(p) => pool_call(|_| px::linkat(crate::usable(&file)?, &p)),
                None => ret::<c_int>(Err(libc::EXDEV)),
            };
        }
    }
    let last = if flags & libc::AT_SYMLINK_FOLLOW != 0 {
        LastLink::Follow
    } else {
        LastLink::NoFollow
    };
    match (classify(fromfd, from), classify(tofd, to)) {
        (Some(a), Some(b)) => link_ours(&a, &b, last),
        (None, None) => call_real!(linkat: LinkatFn, fromfd, from, tofd, to, flags),
        _ => ret::<c_int>(Err(libc::EXDEV)),
    }
}
