//! A working directory under the prefix: `chdir("/atomfs/proj")`, `fchdir` to a shim
//! directory, `getcwd`, and relative paths resolved from there (`make -C /atomfs/proj`,
//! `cd /atomfs/d && prog > out`).
//!
//! The kernel has no such directory, so the shim keeps it: the path inside the pool (`VCWD`)
//! that relative paths given with `AT_FDCWD` start from (paths.rs `full_path`), and a marker
//! descriptor — a shim descriptor of the directory, memfd named `atomfs-cwd`, at a high
//! number and inherited across exec — so that programs run from there (a shell's children,
//! make's recipes) start there too (inherit.rs finds it at start-up). The kernel's own working
//! directory stays where it was; `chdir` to a real directory ends the virtual one.

use std::ffi::{c_char, c_int};
use std::sync::{Arc, RwLock};

use atomfs_posix::{self as px, OpenFile, PResult, Target};

use crate::paths::classify;
use crate::real::call_real;
use crate::{config, ours, pool, ret, set_errno, shim_file};

/// The working directory inside the pool, when it is under the prefix, and its marker.
struct Cwd {
    path: Vec<u8>,
    marker: c_int,
}

static CWD: RwLock<Option<Cwd>> = RwLock::new(None);

/// The absolute path (under the prefix) of the working directory, when it is one of the
/// pool's directories.
pub(crate) fn virtual_cwd() -> Option<Vec<u8>> {
    crate::inherit::adopt_cwd();
    let cwd = CWD.read().ok()?;
    let inner = &cwd.as_ref()?.path;
    let mut full = config().prefixes[0].clone();
    if !inner.starts_with(b"/") {
        full.push(b'/');
    }
    full.extend_from_slice(inner);
    Some(crate::paths::normalize(&full))
}

/// Make `dir` (a directory of the pool) the working directory.
fn enter(dir: &Arc<OpenFile>) -> PResult<()> {
    if !matches!(dir.target, Target::Dir) {
        return Err(libc::ENOTDIR);
    }
    let marker = marker_for(dir)?;
    let old = CWD.write().map_err(|_| libc::EIO)?.replace(Cwd {
        path: dir.path.clone(),
        marker,
    });
    if let Some(old) = old {
        drop_marker(old.marker);
    }
    Ok(())
}

/// Leave the virtual working directory (after a real chdir).
fn leave() {
    let old = CWD.write().ok().and_then(|mut c| c.take());
    if let Some(old) = old {
        drop_marker(old.marker);
    }
}

/// A descriptor of `dir` that survives exec, above the application's numbers.
fn marker_for(dir: &Arc<OpenFile>) -> PResult<c_int> {
    let fd = crate::paths::reserve_named_fd(c"atomfs-cwd", false, dir)?;
    let high = px::internal_fd_floor() - 1;
    // SAFETY: fcntl on the descriptor just made; F_DUPFD takes the lowest free number >= high.
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD, high) };
    // SAFETY: closing the descriptor just made (its duplicate, if any, lives on).
    unsafe { libc::close(fd) };
    if moved < 0 {
        return Err(libc::EMFILE);
    }
    crate::fds().insert(moved, dir.clone());
    Ok(moved)
}

fn drop_marker(fd: c_int) {
    crate::fds::forget(fd);
    // SAFETY: the marker is the shim's own descriptor (closed by the real close: busy).
    ours(|| unsafe { libc::close(fd) });
}

/// Whether `fd` is the working-directory marker: a program closing it (closing every
/// descriptor above 2 before exec, say) is told it did, and the marker stays.
pub(crate) fn is_marker(fd: c_int) -> bool {
    !crate::busy()
        && CWD
            .read()
            .is_ok_and(|c| c.as_ref().is_some_and(|c| c.marker == fd))
}

/// At start-up (inherit.rs): the working directory a parent left in marker `fd`.
pub(crate) fn inherit(fd: c_int, dir: Arc<OpenFile>) {
    if let Ok(mut cwd) = CWD.write() {
        crate::fds().insert(fd, dir.clone());
        *cwd = Some(Cwd {
            path: dir.path.clone(),
            marker: fd,
        });
    }
}

type ChdirFn = unsafe extern "C" fn(*const c_char) -> c_int;
type FchdirFn = unsafe extern "C" fn(c_int) -> c_int;
type GetcwdFn = unsafe extern "C" fn(*mut c_char, usize) -> *mut c_char;

fn chdir_ours(inner: &[u8]) -> PResult<c_int> {
    ours(|| {
        let pool = pool()?;
        let dir = px::open(&pool, inner, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        enter(&dir)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(inner) => ret(chdir_ours(&inner)),
        None => {
            let fixed = crate::paths::outside(libc::AT_FDCWD, path);
            let r: c_int = call_real!(chdir: ChdirFn, crate::paths::real_path(path, &fixed));
            if r == 0 {
                leave();
            }
            r
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    match shim_file(fd) {
        Some(dir) => ret(ours(|| enter(&dir)).map(|_| 0)),
        None => {
            let r: c_int = call_real!(fchdir: FchdirFn, fd);
            if r == 0 {
                leave();
            }
            r
        }
    }
}

/// The kernel's getcwd, whatever the virtual working directory is.
pub(crate) fn real_getcwd(buf: *mut c_char, size: usize) -> *mut c_char {
    match crate::real::real!(getcwd: GetcwdFn) {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(f) => unsafe { f(buf, size) },
        None => {
            set_errno(libc::ENOSYS);
            std::ptr::null_mut()
        }
    }
}

/// getcwd(3), with glibc's extension: a NULL buffer is allocated (of `size`, or as needed
/// when `size` is 0).
#[no_mangle]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: usize) -> *mut c_char {
    if crate::busy() {
        return real_getcwd(buf, size);
    }
    let Some(path) = ours(virtual_cwd) else {
        return real_getcwd(buf, size);
    };
    let need = path.len() + 1;
    if buf.is_null() {
        let len = if size == 0 { need } else { size };
        if len < need {
            set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        // SAFETY: malloc of `len` bytes; NULL is checked.
        let out = unsafe { libc::malloc(len) }.cast::<c_char>();
        if out.is_null() {
            set_errno(libc::ENOMEM);
            return out;
        }
        // SAFETY: `out` holds `len >= need` bytes.
        unsafe { write_c(out, &path) };
        return out;
    }
    if size < need {
        set_errno(if size == 0 {
            libc::EINVAL
        } else {
            libc::ERANGE
        });
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's buffer of `size >= need` bytes.
    unsafe { write_c(buf, &path) };
    buf
}

/// get_current_dir_name(3): glibc's reads $PWD or calls getcwd internally (unseen by the
/// shim), so it is answered here too.
#[no_mangle]
pub unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    // SAFETY: NULL buffer and size 0: getcwd allocates.
    unsafe { getcwd(std::ptr::null_mut(), 0) }
}

/// # Safety
/// `dst` holds at least `src.len() + 1` bytes.
unsafe fn write_c(dst: *mut c_char, src: &[u8]) {
    // SAFETY: by the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.cast::<u8>(), src.len());
        *dst.add(src.len()) = 0;
    }
}
