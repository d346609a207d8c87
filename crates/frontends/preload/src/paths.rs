//! Path calls: which paths are the shim's, and the intercepted open/stat/namespace calls.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

use atomfs_posix as px;
use px::PResult;

use crate::real::call_real;
use crate::route::Route;
use crate::{busy, bytes, config, fds, ours, pool, ret, shim_file};

/// Lexically normalise an absolute path: no empty or "." components, ".." applied.
pub(crate) fn normalize(path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = Vec::with_capacity(path.len() + 1);
    for part in parts {
        out.push(b'/');
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Longest path the kernel takes (PATH_MAX, its NUL included): a longer one is the kernel's
/// to refuse with ENAMETOOLONG, whatever it names.
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// The absolute path the kernel would walk for `path` relative to `dirfd`, and whether it
/// starts in a shim directory. None when it cannot be known (the shim then stays out).
fn full_path(dirfd: c_int, path: &[u8]) -> Option<(Vec<u8>, bool)> {
    if path.starts_with(b"/") {
        return Some((path.to_vec(), false));
    }
    let mut full = if dirfd == libc::AT_FDCWD {
        if let Some(cwd) = crate::cwd::virtual_cwd() {
            let mut full = cwd;
            full.push(b'/');
            full.extend_from_slice(path);
            return Some((full, true));
        }
        let mut cwd = vec![0u8; PATH_MAX];
        // The kernel's working directory (the virtual one was looked at above).
        let p = crate::cwd::real_getcwd(cwd.as_mut_ptr().cast(), cwd.len());
        if p.is_null() {
            return None;
        }
        let len = cwd.iter().position(|&b| b == 0).unwrap_or(cwd.len());
        cwd.truncate(len);
        cwd
    } else if let Some(dir) = shim_file(dirfd) {
        let mut full = config().prefixes[0].clone();
        full.push(b'/');
        full.extend_from_slice(&dir.path);
        full.push(b'/');
        full.extend_from_slice(path);
        return Some((full, true));
    } else {
        // A kernel directory: where it is now (its path may lead into the prefix).
        let link = format!("/proc/self/fd/{dirfd}");
        let target = ours(|| std::fs::read_link(link)).ok()?;
        std::os::unix::ffi::OsStringExt::into_vec(target.into_os_string())
    };
    full.push(b'/');
    full.extend_from_slice(path);
    Some((full, false))
}

/// The route of `path` relative to `dirfd` (see route.rs); the kernel's when the shim is
/// busy, the path is NULL or longer than the kernel takes.
fn route_of(dirfd: c_int, path: *const c_char) -> Route {
    if busy() {
        return Route::Kernel;
    }
    // SAFETY: `path` comes from the intercepted call's caller: NULL or a C string.
    let Some(path) = (unsafe { bytes(path) }) else {
        return Route::Kernel;
    };
    if path.len() >= PATH_MAX || path.is_empty() {
        return Route::Kernel;
    }
    match full_path(dirfd, path) {
        Some((full, _)) => crate::route::route(&full, &config().prefixes),
        None => Route::Kernel,
    }
}

/// The path inside the pool when `path` (relative to `dirfd`) is under the prefix.
pub(crate) fn classify(dirfd: c_int, path: *const c_char) -> Option<Vec<u8>> {
    match route_of(dirfd, path) {
        Route::Ours(inner) => Some(inner),
        Route::Kernel | Route::KernelAs(_) => None,
    }
}

/// For a path that went through the prefix and left it ("/atomfs/../etc"), or that starts
/// in a shim directory and leaves it (`openat(shim_dir, "../../x")`): the absolute path to
/// give the real libc instead (the kernel has no such directory to walk through).
pub(crate) fn outside(dirfd: c_int, path: *const c_char) -> Option<std::ffi::CString> {
    if busy() {
        return None;
    }
    // SAFETY: NULL or a C string from the intercepted call's caller.
    let raw = unsafe { bytes(path) }?;
    // Cheap first: only paths spelled under a prefix or relative to a shim directory.
    let spelled_under = raw.starts_with(b"/")
        && config()
            .prefixes
            .iter()
            .any(|p| raw.starts_with(p) && raw.get(p.len()).is_none_or(|&b| b == b'/'));
    let in_shim_dir = !raw.starts_with(b"/")
        && if dirfd == libc::AT_FDCWD {
            crate::cwd::virtual_cwd().is_some()
        } else {
            shim_file(dirfd).is_some()
        };
    if !spelled_under && !in_shim_dir {
        return None;
    }
    match route_of(dirfd, path) {
        Route::KernelAs(p) => std::ffi::CString::new(p).ok(),
        Route::Ours(_) | Route::Kernel => None,
    }
}

/// `path`, or its replacement from [`outside`].
pub(crate) fn real_path(path: *const c_char, fixed: &Option<std::ffi::CString>) -> *const c_char {
    fixed.as_ref().map_or(path, |c| c.as_ptr())
}

/// Reserve a kernel descriptor for a shim file: a memfd holding `file`'s ticket (for a
/// process that inherits it: inherit.rs), sealed against writes.
pub(crate) fn reserve_fd(cloexec: bool, file: &atomfs_posix::OpenFile) -> PResult<c_int> {
    reserve_named_fd(c"atomfs", cloexec, file)
}

/// [`reserve_fd`] with the memfd's name (`/proc/self/fd` shows `/memfd:NAME`).
pub(crate) fn reserve_named_fd(
    name: &std::ffi::CStr,
    cloexec: bool,
    file: &atomfs_posix::OpenFile,
) -> PResult<c_int> {
    let flags = libc::MFD_ALLOW_SEALING | if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: NUL-terminated name; memfd_create has no other preconditions.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE));
    }
    if let Err(e) = crate::inherit::write_ticket(fd, &crate::inherit::Ticket::of(file)) {
        // SAFETY: closing the descriptor just created.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK;
    // SAFETY: fcntl on the descriptor just created (the shim is busy: this goes to libc).
    unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) };
    Ok(fd)
}

/// Open a file of the pool and give it a kernel descriptor number.
pub(crate) fn open_ours(path: &[u8], flags: c_int, mode: c_uint) -> PResult<c_int> {
    ours(|| {
        let pool = pool()?;
        let flags_kept = flags & !(libc::O_CLOEXEC | libc::O_LARGEFILE | libc::O_NOCTTY);
        let file = if flags & libc::O_TMPFILE == libc::O_TMPFILE {
            // An unnamed file in the directory `path` (linkat publishes it).
            px::tmpfile(&pool, path, flags_kept & !libc::O_TMPFILE, mode)?
        } else {
            px::open(&pool, path, flags_kept, mode)?
        };
        let fd = reserve_fd(flags & libc::O_CLOEXEC != 0, &file)?;
        fds().insert(fd, file);
        Ok(fd)
    })
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => ret(open_ours(&p, flags, mode)),
        None => {
            let fixed = outside(libc::AT_FDCWD, path);
            call_real!(open: OpenFn, real_path(path, &fixed), flags, mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => ret(open_ours(&p, flags, mode)),
        None => {
            let fixed = outside(libc::AT_FDCWD, path);
            call_real!(open64: OpenFn, real_path(path, &fixed), flags, mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as open without O_CREAT.
    unsafe { open(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as open64 without O_CREAT.
    unsafe { open64(path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => ret(open_ours(&p, flags, mode)),
        None => {
            let fixed = outside(dirfd, path);
            call_real!(openat: OpenatFn, dirfd, real_path(path, &fixed), flags, mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => ret(open_ours(&p, flags, mode)),
        None => {
            let fixed = outside(dirfd, path);
            call_real!(openat64: OpenatFn, dirfd, real_path(path, &fixed), flags, mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as openat without O_CREAT.
    unsafe { openat(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract as openat64 without O_CREAT.
    unsafe { openat64(dirfd, path, flags, 0) }
}

#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: c_uint) -> c_int {
    // SAFETY: creat is open with these flags.
    unsafe { open(path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: c_uint) -> c_int {
    // SAFETY: creat64 is open64 with these flags.
    unsafe { open64(path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode) }
}

// ----- stat family -----

/// Whether a stat call follows a symbolic link in the last component (stat) or not (lstat).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Follow,
    Keep,
}

/// stat (or lstat) of a pool path into a `struct stat` (the same layout as `struct stat64`
/// on 64-bit).
fn stat_ours(path: &[u8], buf: *mut libc::stat, link: Link) -> PResult<c_int> {
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    let meta = ours(|| match link {
        Link::Follow => px::stat(&*pool()?, path),
        Link::Keep => px::lstat(&*pool()?, path),
    })?;
    // SAFETY: non-NULL; the caller passes a `struct stat` buffer.
    unsafe { buf.write(px::to_stat(&meta)) };
    Ok(0)
}

pub(crate) fn fstat_ours(file: &px::OpenFile, buf: *mut libc::stat) -> PResult<c_int> {
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    let meta = ours(|| px::fstat(crate::usable(file)?))?;
    // SAFETY: non-NULL; the caller passes a `struct stat` buffer.
    unsafe { buf.write(px::to_stat(&meta)) };
    Ok(0)
}

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type XstatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int;
type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int;
type FxstatatFn =
    unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat, c_int) -> c_int;

macro_rules! stat_fn {
    ($name:ident, $link:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, buf: *mut libc::stat) -> c_int {
            match classify(libc::AT_FDCWD, path) {
                Some(p) => ret(stat_ours(&p, buf, $link)),
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($name: StatFn, real_path(path, &fixed), buf)
                }
            }
        }
    };
}
stat_fn!(stat, Link::Follow);
stat_fn!(stat64, Link::Follow);
stat_fn!(lstat, Link::Keep);
stat_fn!(lstat64, Link::Keep);

macro_rules! xstat_fn {
    ($name:ident, $link:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
            match classify(libc::AT_FDCWD, path) {
                Some(p) => ret(stat_ours(&p, buf, $link)),
                None => {
                    let fixed = outside(libc::AT_FDCWD, path);
                    call_real!($name: XstatFn, ver, real_path(path, &fixed), buf)
                }
            }
        }
    };
}
xstat_fn!(__xstat, Link::Follow);
xstat_fn!(__xstat64, Link::Follow);
xstat_fn!(__lxstat, Link::Keep);
xstat_fn!(__lxstat64, Link::Keep);

/// fstatat: `AT_EMPTY_PATH` with "" means the descriptor itself.
fn fstatat_ours(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> Option<c_int> {
    // SAFETY: NULL or a C string from the caller.
    let empty = unsafe { bytes(path) }.is_some_and(|p| p.is_empty());
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        let file = shim_file(dirfd)?;
        return Some(ret(fstat_ours(&file, buf)));
    }
    let link = if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
        Link::Keep
    } else {
        Link::Follow
    };
    classify(dirfd, path).map(|p| ret(stat_ours(&p, buf, link)))
}

macro_rules! fstatat_fn {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
            match fstatat_ours(dirfd, path, buf, flags) {
                Some(r) => r,
                None => {
                    let fixed = outside(dirfd, path);
                    call_real!($name: FstatatFn, dirfd, real_path(path, &fixed), buf, flags)
                }
            }
        }
    };
}
fstatat_fn!(fstatat);
fstatat_fn!(fstatat64);

macro_rules! fxstatat_fn {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
            match fstatat_ours(dirfd, path, buf, flags) {
                Some(r) => r,
                None => call_real!($name: FxstatatFn, ver, dirfd, path, buf, flags),
            }
        }
    };
}
fxstatat_fn!(__fxstatat);
fxstatat_fn!(__fxstatat64);

fn fill_statx(meta: &store::Metadata, buf: *mut libc::statx) -> PResult<c_int> {
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    let st = px::to_stat(meta);
    // SAFETY: libc::statx is plain old data; all-zero bytes are a valid value.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    sx.stx_mask = libc::STATX_BASIC_STATS;
    sx.stx_blksize = 4096;
    sx.stx_nlink = meta.nlink;
    sx.stx_uid = meta.uid;
    sx.stx_gid = meta.gid;
    sx.stx_mode = st.st_mode as u16;
    sx.stx_ino = meta.ino;
    sx.stx_size = meta.size;
    sx.stx_blocks = st.st_blocks as u64;
    let ts = |s: i64, ns: i64| {
        // SAFETY: plain old data; all-zero bytes are a valid value.
        let mut t: libc::statx_timestamp = unsafe { std::mem::zeroed() };
        t.tv_sec = s;
        t.tv_nsec = ns as u32;
        t
    };
    sx.stx_atime = ts(st.st_atime, st.st_atime_nsec);
    sx.stx_mtime = ts(st.st_mtime, st.st_mtime_nsec);
    sx.stx_ctime = ts(st.st_ctime, st.st_ctime_nsec);
    sx.stx_dev_minor = 0xa70f;
    sx.stx_rdev_major = libc::major(meta.rdev);
    sx.stx_rdev_minor = libc::minor(meta.rdev);
    // SAFETY: non-NULL; the caller passes a `struct statx` buffer.
    unsafe { buf.write(sx) };
    Ok(0)
}

type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    // SAFETY: NULL or a C string from the caller.
    let empty = unsafe { bytes(path) }.is_some_and(|p| p.is_empty());
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        if let Some(file) = shim_file(dirfd) {
            return ret(ours(|| px::fstat(crate::usable(&file)?)).and_then(|m| fill_statx(&m, buf)));
        }
    } else if let Some(p) = classify(dirfd, path) {
        let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW != 0;
        let meta = ours(|| match nofollow {
            true => px::lstat(&*pool()?, &p),
            false => px::stat(&*pool()?, &p),
        });
        return ret(meta.and_then(|m| fill_statx(&m, buf)));
    }
    let fixed = outside(dirfd, path);
    call_real!(statx: StatxFn, dirfd, real_path(path, &fixed), flags, mask, buf)
}

// ----- access, namespace -----

type AccessFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type FaccessatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => ret(ours(|| px::access(&*pool()?, &p, mode)).map(|_| 0)),
        None => {
            let fixed = outside(libc::AT_FDCWD, path);
            call_real!(access: AccessFn, real_path(path, &fixed), mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => ret(ours(|| px::access(&*pool()?, &p, mode)).map(|_| 0)),
        None => call_real!(euidaccess: AccessFn, path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => ret(ours(|| px::access(&*pool()?, &p, mode)).map(|_| 0)),
        None => call_real!(faccessat: FaccessatFn, dirfd, path, mode, flags),
    }
}

type PathFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PathModeFn = unsafe extern "C" fn(*const c_char, c_uint) -> c_int;
type AtPathFn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type AtPathModeFn = unsafe extern "C" fn(c_int, *const c_char, c_uint) -> c_int;
type RenameFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type RenameatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
type Renameat2Fn =
    unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;

fn path_call(p: &[u8], f: impl FnOnce(&px::Pool, &[u8]) -> PResult<()>) -> c_int {
    ret(ours(|| f(&*pool()?, p)).map(|_| 0))
}

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => path_call(&p, px::unlink),
        None => call_real!(unlink: PathFn, path),
    }
}

#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => path_call(&p, px::rmdir),
        None => call_real!(rmdir: PathFn, path),
    }
}

#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    match classify(dirfd, path) {
        Some(p) if flags & libc::AT_REMOVEDIR != 0 => path_call(&p, px::rmdir),
        Some(p) => path_call(&p, px::unlink),
        None => call_real!(unlinkat: AtPathFn, dirfd, path, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => path_call(&p, |pool, p| px::mkdir(pool, p, mode)),
        None => call_real!(mkdir: PathModeFn, path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: c_uint) -> c_int {
    match classify(dirfd, path) {
        Some(p) => path_call(&p, |pool, p| px::mkdir(pool, p, mode)),
        None => call_real!(mkdirat: AtPathModeFn, dirfd, path, mode),
    }
}

/// rename where at most one side is ours: across the boundary is EXDEV (as between mounts).
fn rename_mixed(from: Option<Vec<u8>>, to: Option<Vec<u8>>) -> Option<c_int> {
    match (from, to) {
        (None, None) => None,
        (Some(from), Some(to)) => Some(path_call(&from, |pool, from| px::rename(pool, from, &to))),
        _ => Some(ret::<c_int>(Err(libc::EXDEV))),
    }
}

#[no_mangle]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    match rename_mixed(classify(libc::AT_FDCWD, from), classify(libc::AT_FDCWD, to)) {
        Some(r) => r,
        None => call_real!(rename: RenameFn, from, to),
    }
}

#[no_mangle]
pub unsafe extern "C" fn renameat(
    fromfd: c_int,
    from: *const c_char,
    tofd: c_int,
    to: *const c_char,
) -> c_int {
    match rename_mixed(classify(fromfd, from), classify(tofd, to)) {
        Some(r) => r,
        None => call_real!(renameat: RenameatFn, fromfd, from, tofd, to),
    }
}

#[no_mangle]
pub unsafe extern "C" fn renameat2(
    fromfd: c_int,
    from: *const c_char,
    tofd: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    let (a, b) = (classify(fromfd, from), classify(tofd, to));
    if let (Some(from), Some(to)) = (&a, &b) {
        // RENAME_NOREPLACE / RENAME_EXCHANGE are the store's rename modes.
        return path_call(from, |pool, from| px::rename2(pool, from, to, flags));
    }
    match rename_mixed(a, b) {
        Some(r) => r,
        None => call_real!(renameat2: Renameat2Fn, fromfd, from, tofd, to, flags),
    }
}

type TruncateFn = unsafe extern "C" fn(*const c_char, i64) -> c_int;

fn truncate_ours(p: &[u8], len: i64) -> c_int {
    ret(ours(|| {
        let pool = pool()?;
        let file = px::open(&pool, p, libc::O_WRONLY, 0)?;
        px::ftruncate(&file, len)
    })
    .map(|_| 0))
}

#[no_mangle]
pub unsafe extern "C" fn truncate(path: *const c_char, len: i64) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => truncate_ours(&p, len),
        None => call_real!(truncate: TruncateFn, path, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: i64) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => truncate_ours(&p, len),
        None => call_real!(truncate64: TruncateFn, path, len),
    }
}

// ----- attributes the store keeps as-is: accepted when the file exists -----

type ChmodFn = unsafe extern "C" fn(*const c_char, c_uint) -> c_int;
type FchmodatFn = unsafe extern "C" fn(c_int, *const c_char, c_uint, c_int) -> c_int;
type ChownFn = unsafe extern "C" fn(*const c_char, c_uint, c_uint) -> c_int;
type FchownatFn = unsafe extern "C" fn(c_int, *const c_char, c_uint, c_uint, c_int) -> c_int;
type UtimensatFn =
    unsafe extern "C" fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int;
type UtimeFn = unsafe extern "C" fn(*const c_char, *const c_void) -> c_int;
type ReadlinkFn = unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> isize;
type ReadlinkatFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_char, usize) -> isize;

/// chmod: sets the permission bits in the store.
fn chmod_ours(p: &[u8], mode: c_uint) -> c_int {
    ret(ours(|| {
        let pool = pool()?;
        let meta = px::stat(&pool, p)?;
        let attr = store::SetAttr {
            perm: Some(mode & 0o7777),
            ..Default::default()
        };
        pool.store
            .setattr(meta.ino, &attr, None)
            .map(|_| 0)
            .map_err(|e| e.errno())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => chmod_ours(&p, mode),
        None => call_real!(chmod: ChmodFn, path, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_uint,
    flags: c_int,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => chmod_ours(&p, mode),
        None => call_real!(fchmodat: FchmodatFn, dirfd, path, mode, flags),
    }
}

/// An owner argument of chown(2): -1 leaves it.
pub(crate) fn id_arg(id: c_uint) -> Option<u32> {
    (id != u32::MAX).then_some(id)
}

/// chown of a pool path (a symbolic link followed when `follow`).
fn chown_ours(p: &[u8], uid: c_uint, gid: c_uint, follow: bool) -> c_int {
    ret(ours(|| {
        let pool = pool()?;
        let meta = match follow {
            true => px::stat(&pool, p)?,
            false => px::lstat(&pool, p)?,
        };
        px::chown(&pool, &meta, id_arg(uid), id_arg(gid)).map(|()| 0)
    }))
}

/// One timespec of utimensat(2): UTIME_NOW, UTIME_OMIT or a time (EINVAL out of range; the
/// store keeps times from the epoch on).
pub(crate) fn time_arg(t: &libc::timespec) -> PResult<px::TimeArg> {
    match t.tv_nsec {
        libc::UTIME_NOW => Ok(px::TimeArg::Now),
        libc::UTIME_OMIT => Ok(px::TimeArg::Omit),
        ns if (0..1_000_000_000).contains(&ns) && t.tv_sec >= 0 => Ok(px::TimeArg::At(
            (t.tv_sec as u64)
                .checked_mul(1_000_000_000)
                .and_then(|s| s.checked_add(ns as u64))
                .ok_or(libc::EINVAL)?,
        )),
        _ => Err(libc::EINVAL),
    }
}

/// The two time arguments of a `times` array (NULL: both now).
///
/// # Safety
/// `times` is NULL or valid for two `timespec`s.
pub(crate) unsafe fn time_args(times: *const libc::timespec) -> PResult<[px::TimeArg; 2]> {
    if times.is_null() {
        return Ok([px::TimeArg::Now; 2]);
    }
    // SAFETY: the caller passes NULL (handled above) or an array of two timespecs.
    let (a, m) = unsafe { (&*times, &*times.add(1)) };
    Ok([time_arg(a)?, time_arg(m)?])
}

/// utimensat of a pool path (a symbolic link followed when `follow`).
fn utimens_ours(p: &[u8], times: PResult<[px::TimeArg; 2]>, follow: bool) -> c_int {
    ret(ours(|| {
        let [atime, mtime] = times?;
        let pool = pool()?;
        let meta = match follow {
            true => px::stat(&pool, p)?,
            false => px::lstat(&pool, p)?,
        };
        px::utimens(&pool, &meta, atime, mtime).map(|()| 0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn chown(path: *const c_char, uid: c_uint, gid: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => chown_ours(&p, uid, gid, true),
        None => call_real!(chown: ChownFn, path, uid, gid),
    }
}

#[no_mangle]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: c_uint, gid: c_uint) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => chown_ours(&p, uid, gid, false),
        None => call_real!(lchown: ChownFn, path, uid, gid),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: c_uint,
    gid: c_uint,
    flags: c_int,
) -> c_int {
    match classify(dirfd, path) {
        Some(p) => chown_ours(&p, uid, gid, flags & libc::AT_SYMLINK_NOFOLLOW == 0),
        None => call_real!(fchownat: FchownatFn, dirfd, path, uid, gid, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    match classify(dirfd, path) {
        // SAFETY: `times` is the caller's NULL or array of two timespecs.
        Some(p) => utimens_ours(
            &p,
            unsafe { time_args(times) },
            flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        ),
        None => call_real!(utimensat: UtimensatFn, dirfd, path, times, flags),
    }
}

#[no_mangle]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const c_void) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => {
            let times = if times.is_null() {
                Ok([px::TimeArg::Now; 2])
            } else {
                // SAFETY: a non-NULL `times` of utime(2) points to a `struct utimbuf`.
                let t = unsafe { &*(times as *const libc::utimbuf) };
                let at = |sec: libc::time_t| {
                    time_arg(&libc::timespec {
                        tv_sec: sec,
                        tv_nsec: 0,
                    })
                };
                at(t.actime).and_then(|a| Ok([a, at(t.modtime)?]))
            };
            utimens_ours(&p, times, true)
        }
        None => call_real!(utime: UtimeFn, path, times),
    }
}

#[no_mangle]
pub unsafe extern "C" fn utimes(path: *const c_char, times: *const c_void) -> c_int {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => {
            let times = if times.is_null() {
                Ok([px::TimeArg::Now; 2])
            } else {
                // SAFETY: a non-NULL `times` of utimes(2) points to two `struct timeval`s.
                let tv = unsafe { std::slice::from_raw_parts(times as *const libc::timeval, 2) };
                let at = |t: &libc::timeval| {
                    if !(0..1_000_000).contains(&t.tv_usec) {
                        return Err(libc::EINVAL);
                    }
                    time_arg(&libc::timespec {
                        tv_sec: t.tv_sec,
                        tv_nsec: t.tv_usec * 1000,
                    })
                };
                at(&tv[0]).and_then(|a| Ok([a, at(&tv[1])?]))
            };
            utimens_ours(&p, times, true)
        }
        None => call_real!(utimes: UtimeFn, path, times),
    }
}

/// readlink of a pool path: at most `size` bytes of the target, no NUL added.
fn readlink_ours(p: &[u8], buf: *mut c_char, size: usize) -> isize {
    let target = ours(|| px::readlink(&*pool()?, p));
    ret(target.and_then(|t| {
        if buf.is_null() {
            return Err(libc::EFAULT);
        }
        if size == 0 {
            return Err(libc::EINVAL);
        }
        let n = t.len().min(size);
        // SAFETY: `buf` is non-NULL and the caller's buffer of `size` bytes; n <= size.
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), buf.cast::<u8>(), n) };
        Ok(n as isize)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: usize) -> isize {
    match classify(libc::AT_FDCWD, path) {
        Some(p) => readlink_ours(&p, buf, size),
        None => call_real!(readlink: ReadlinkFn, path, buf, size),
    }
}

#[no_mangle]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> isize {
    match classify(dirfd, path) {
        Some(p) => readlink_ours(&p, buf, size),
        None => call_real!(readlinkat: ReadlinkatFn, dirfd, path, buf, size),
    }
}

/// Silence the unused-type lint for c_ulong on targets where it is not needed.
#[allow(dead_code)]
type Unused = c_ulong;

// ----- extended attributes: crate::xattrs -----

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(b"/atomfs//a/./b/../c/"), b"/atomfs/a/c");
        assert_eq!(normalize(b"/atomfs/../etc"), b"/etc");
        assert_eq!(normalize(b"/../.."), b"/");
    }
}
