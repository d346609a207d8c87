//! The C API of atomfs: the functions declared in `include/atomfs.h`, built as
//! `libatomfs.so` and `libatomfs.a`.
//!
//! Conventions (see docs/c-api.md): every call returns -1 (or NULL, or 0 for `tx_begin`) and
//! sets `errno` on failure; nothing panics or crashes on bad input (NULL pointers, unknown or
//! closed descriptors, pools and directory streams, unknown or finished transaction ids).
//! Descriptors are small positive ints in their own number space starting at
//! [`FD_BASE`], so they never collide with kernel descriptors; they are never reused.

#![cfg_attr(test, allow(clippy::unwrap_used))]
// `unsigned long` (c_ulong) is u64 here but u32 on 32-bit targets: the casts are for those.
#![allow(clippy::unnecessary_cast)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use atomfs_posix as px;
use px::{FdTable, OpenFile, PResult, Pool};

mod posix_api;

/// First descriptor number the C API hands out (above any kernel descriptor: Linux caps
/// descriptors at `nr_open`, 1048576 by default).
pub const FD_BASE: i32 = 1 << 24;

/// Open-flag bit selecting O_ATOMIC mode (`ATOMFS_O_ATOMIC` in C).
pub const O_ATOMIC: c_int = px::O_ATOMIC;

/// Opaque pool handle of C (`atomfs_pool *`): never dereferenced, its address is an id.
#[repr(C)]
pub struct atomfs_pool {
    _private: [u8; 0],
}

/// Opaque directory stream of C (`atomfs_dir *`): never dereferenced, its address is an id.
#[repr(C)]
pub struct atomfs_dir {
    _private: [u8; 0],
}

/// A directory entry as `atomfs_readdir` returns it.
#[repr(C)]
pub struct atomfs_dirent {
    pub d_ino: u64,
    pub d_type: u8,
    pub d_name: [c_char; 256],
}

/// The seed's (FCFS) transaction description: `num` descriptors at `fdSet`.
#[repr(C)]
#[allow(non_snake_case)]
pub struct TxInfo {
    pub num: c_int,
    pub fdSet: *mut c_int,
}

struct DirStream {
    entries: Vec<store::DirEntry>,
    next: usize,
    current: Box<atomfs_dirent>,
}

#[derive(Default)]
struct State {
    pools: Mutex<HashMap<usize, Arc<Pool>>>,
    dirs: Mutex<HashMap<usize, DirStream>>,
    fds: FdTable,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(State::default)
}

static NEXT_FD: AtomicI32 = AtomicI32::new(FD_BASE);
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// Turn a result into the C convention: the value, or `fail` with errno set.
fn ret<T>(r: PResult<T>, fail: T) -> T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        fail
    })
}

/// Borrow a C string; `EFAULT` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
unsafe fn c_str<'a>(p: *const c_char) -> PResult<&'a [u8]> {
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

fn pool_of(pool: *mut atomfs_pool) -> PResult<Arc<Pool>> {
    let pools = state().pools.lock().unwrap_or_else(|p| p.into_inner());
    pools
        .get(&(pool as usize))
        .cloned()
        .ok_or(if pool.is_null() {
            libc::EFAULT
        } else {
            libc::EBADF
        })
}

fn file(fd: c_int) -> PResult<Arc<OpenFile>> {
    state().fds.get(fd)
}

fn new_handle() -> usize {
    NEXT_HANDLE.fetch_add(1, Ordering::Relaxed) as usize
}

fn open_pool(path: *const c_char, create: Option<px::CreateSpec>) -> PResult<*mut atomfs_pool> {
    // SAFETY: the caller passes NULL or a C string (atomfs.h contract).
    let path = unsafe { c_str(path) }?;
    let path = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path));
    let exclusive = create.is_some();
    let pool = px::open_pool(path, create, exclusive).map_err(|e| e.errno())?;
    let handle = new_handle();
    state()
        .pools
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(handle, pool);
    Ok(handle as *mut atomfs_pool)
}

// ----- pools -----

/// Create a new pool file of `size` bytes at `path` (`EEXIST` if it exists).
#[no_mangle]
pub extern "C" fn atomfs_pool_create(path: *const c_char, size: u64) -> *mut atomfs_pool {
    if size == 0 {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    let spec = px::CreateSpec {
        engine: "pool".into(),
        options: engines::Options::new().with("size", size.to_string()),
    };
    ret(open_pool(path, Some(spec)), std::ptr::null_mut())
}

/// Create a new store at `path` (`EEXIST` if it exists) with the registered engine `engine`
/// (NULL: `pool`) and its `key=value,...` options (NULL or "": the defaults), e.g.
/// `atomfs_create("/dev/shm/m.pool", "mmio", "home=/srv/data,size=64M")`. `EINVAL` for an
/// unknown engine or option (the message goes to standard error).
#[no_mangle]
pub extern "C" fn atomfs_create(
    path: *const c_char,
    engine: *const c_char,
    options: *const c_char,
) -> *mut atomfs_pool {
    ret(
        create_spec(engine, options).and_then(|spec| open_pool(path, Some(spec))),
        std::ptr::null_mut(),
    )
}

fn create_spec(engine: *const c_char, options: *const c_char) -> PResult<px::CreateSpec> {
    let text = |p: *const c_char| -> PResult<String> {
        if p.is_null() {
            return Ok(String::new());
        }
        // SAFETY: the caller passes NULL (handled above) or a C string (atomfs.h contract).
        let bytes = unsafe { c_str(p) }?;
        String::from_utf8(bytes.to_vec()).map_err(|_| libc::EINVAL)
    };
    let engine = Some(text(engine)?)
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "pool".into());
    let options = engines::Options::parse(&text(options)?).map_err(|e| {
        eprintln!("atomfs_create: {e}");
        libc::EINVAL
    })?;
    Ok(px::CreateSpec { engine, options })
}

/// Open an existing store (whichever engine made it).
#[no_mangle]
pub extern "C" fn atomfs_pool_open(path: *const c_char) -> *mut atomfs_pool {
    ret(open_pool(path, None), std::ptr::null_mut())
}

/// Close a pool handle. Descriptors still open on the pool stay usable; the pool is
/// unmounted when the last of them is closed.
#[no_mangle]
pub extern "C" fn atomfs_pool_close(pool: *mut atomfs_pool) -> c_int {
    let removed = state()
        .pools
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&(pool as usize));
    match removed {
        Some(_) => 0,
        None => ret(
            Err(if pool.is_null() {
                libc::EFAULT
            } else {
                libc::EBADF
            }),
            -1,
        ),
    }
}

// ----- files -----

/// Open (and create) a file of the pool; `flags` as open(2) plus `ATOMFS_O_ATOMIC`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_open(
    pool: *mut atomfs_pool,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let r = (|| {
        let pool = pool_of(pool)?;
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(path) }?;
        install_fd(px::open(&pool, path, flags, mode)?)
    })();
    ret(r, -1)
}

/// A new descriptor for `file`.
fn install_fd(file: Arc<OpenFile>) -> PResult<c_int> {
    let fd = NEXT_FD.fetch_add(1, Ordering::Relaxed);
    if fd < FD_BASE {
        NEXT_FD.store(i32::MAX, Ordering::Relaxed);
        return Err(libc::EMFILE);
    }
    state().fds.insert(fd, file);
    Ok(fd)
}

/// Close a descriptor. Pending O_ATOMIC writes not yet fsynced are dropped.
#[no_mangle]
pub extern "C" fn atomfs_close(fd: c_int) -> c_int {
    match state().fds.remove(fd) {
        Some(f) => {
            if Arc::strong_count(&f) == 1 {
                // The last descriptor of the open file: its locks go with it.
                px::lock_release(&f, lock_owner(&f));
            }
            0
        }
        None => ret(Err(libc::EBADF), -1),
    }
}

/// The lock owner of an open file (locks of the C API belong to the open file, as OFD
/// locks do): its address.
fn lock_owner(f: &Arc<OpenFile>) -> u64 {
    Arc::as_ptr(f) as u64
}

/// Record locks on a pool file, shared with every process using the store (through its
/// server): `cmd` is F_SETLK, F_SETLKW or F_GETLK, `fl` as fcntl(2) takes it. Locks belong
/// to the open file (as OFD locks): two opens of one file in one process exclude each other,
/// and the locks go when the last descriptor of the open file closes.
///
/// # Safety
/// `fl` is NULL or points to a readable and writable `struct flock`.
#[no_mangle]
pub unsafe extern "C" fn atomfs_lock(fd: c_int, cmd: c_int, fl: *mut libc::flock) -> c_int {
    let r = file(fd).and_then(|f| {
        if fl.is_null() {
            return Err(libc::EFAULT);
        }
        let cmd = match cmd {
            libc::F_SETLK => libc::F_OFD_SETLK,
            libc::F_SETLKW => libc::F_OFD_SETLKW,
            libc::F_GETLK => libc::F_OFD_GETLK,
            _ => return Err(libc::EINVAL),
        };
        // SAFETY: non-NULL, readable and writable by the caller's contract.
        let fl = unsafe { &mut *fl };
        px::lock(&f, lock_owner(&f), cmd, fl, None).map(|()| 0)
    });
    ret(r, -1)
}

/// Build a mutable byte slice from C arguments; `EFAULT` for NULL with a non-zero count.
///
/// # Safety
/// `buf` is NULL or valid for `count` bytes of writing.
unsafe fn buf_mut<'a>(buf: *mut c_void, count: usize) -> PResult<&'a mut [u8]> {
    if count == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: non-NULL and valid for `count` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count.min(px::IO_BYTES_MAX)) })
}

/// # Safety
/// `buf` is NULL or valid for `count` bytes of reading.
unsafe fn buf_ref<'a>(buf: *const c_void, count: usize) -> PResult<&'a [u8]> {
    if count == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: non-NULL and valid for `count` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count.min(px::IO_BYTES_MAX)) })
}

fn offset(off: i64) -> PResult<u64> {
    u64::try_from(off).map_err(|_| libc::EINVAL)
}

/// read(2).
///
/// # Safety
/// `buf` is NULL or valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: forwarded caller contract.
    ret(
        file(fd)
            .and_then(|f| px::read(&f, unsafe { buf_mut(buf, count) }?, None))
            .map(|n| n as isize),
        -1,
    )
}

/// pread(2).
///
/// # Safety
/// `buf` is NULL or valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_pread(
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    off: i64,
) -> isize {
    let r = file(fd).and_then(|f| {
        let off = offset(off)?;
        // SAFETY: forwarded caller contract.
        px::pread(&f, unsafe { buf_mut(buf, count) }?, off)
    });
    ret(r.map(|n| n as isize), -1)
}

/// write(2).
///
/// # Safety
/// `buf` is NULL or valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: forwarded caller contract.
    ret(
        file(fd)
            .and_then(|f| px::write(&f, unsafe { buf_ref(buf, count) }?, None))
            .map(|n| n as isize),
        -1,
    )
}

/// pwrite(2).
///
/// # Safety
/// `buf` is NULL or valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn atomfs_pwrite(
    fd: c_int,
    buf: *const c_void,
    count: usize,
    off: i64,
) -> isize {
    let r = file(fd).and_then(|f| {
        let off = offset(off)?;
        // SAFETY: forwarded caller contract.
        px::pwrite(&f, unsafe { buf_ref(buf, count) }?, off)
    });
    ret(r.map(|n| n as isize), -1)
}

/// lseek(2).
#[no_mangle]
pub extern "C" fn atomfs_lseek(fd: c_int, off: i64, whence: c_int) -> i64 {
    ret(
        file(fd)
            .and_then(|f| px::lseek(&f, off, whence, None))
            .map(|n| n as i64),
        -1,
    )
}

/// ftruncate(2).
#[no_mangle]
pub extern "C" fn atomfs_ftruncate(fd: c_int, len: i64) -> c_int {
    ret(file(fd).and_then(|f| px::ftruncate(&f, len)).map(|_| 0), -1)
}

/// fsync(2); for an O_ATOMIC file, commits its writes since the last fsync atomically.
#[no_mangle]
pub extern "C" fn atomfs_fsync(fd: c_int) -> c_int {
    ret(file(fd).and_then(|f| px::fsync(&f, false)).map(|_| 0), -1)
}

/// fstat(2).
///
/// # Safety
/// `st` is NULL or points to a writable `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn atomfs_fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    let r = file(fd).and_then(|f| px::fstat(&f)).and_then(|meta| {
        if st.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { st.write(px::to_stat(&meta)) };
        Ok(0)
    });
    ret(r, -1)
}

/// Switch a file in (`on` != 0) or out of O_ATOMIC mode; switching out commits.
#[no_mangle]
pub extern "C" fn atomfs_set_atomic(fd: c_int, on: c_int) -> c_int {
    ret(
        file(fd)
            .and_then(|f| px::set_atomic(&f, on != 0))
            .map(|_| 0),
        -1,
    )
}

// ----- namespace -----

/// Run a path call on a pool.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
unsafe fn with_path(
    pool: *mut atomfs_pool,
    path: *const c_char,
    f: impl FnOnce(&Pool, &[u8]) -> PResult<()>,
) -> c_int {
    let r = pool_of(pool).and_then(|pool| {
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(path) }?;
        f(&pool, path)
    });
    ret(r.map(|_| 0), -1)
}

/// stat(2) of a path in the pool.
///
/// # Safety
/// `path` is NULL or a C string; `st` is NULL or a writable `struct stat`.
#[no_mangle]
pub unsafe extern "C" fn atomfs_stat(
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
            let meta = px::stat(pool, path)?;
            // SAFETY: non-NULL and writable by the caller's contract.
            st.write(px::to_stat(&meta));
            Ok(())
        })
    }
}

/// mkdir(2).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_mkdir(
    pool: *mut atomfs_pool,
    path: *const c_char,
    mode: c_uint,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { with_path(pool, path, |pool, path| px::mkdir(pool, path, mode)) }
}

/// rmdir(2).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_rmdir(pool: *mut atomfs_pool, path: *const c_char) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { with_path(pool, path, px::rmdir) }
}

/// unlink(2).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_unlink(pool: *mut atomfs_pool, path: *const c_char) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { with_path(pool, path, px::unlink) }
}

/// rename(2): atomic, replaces the target.
///
/// # Safety
/// `from` and `to` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn atomfs_rename(
    pool: *mut atomfs_pool,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_path(pool, from, |pool, from| {
            let to = c_str(to)?;
            px::rename(pool, from, to)
        })
    }
}

/// Open a directory stream.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atomfs_opendir(
    pool: *mut atomfs_pool,
    path: *const c_char,
) -> *mut atomfs_dir {
    let r = pool_of(pool).and_then(|pool| {
        // SAFETY: forwarded caller contract.
        let path = unsafe { c_str(path) }?;
        let entries = px::list_dir(&pool, path)?;
        let current = Box::new(atomfs_dirent {
            d_ino: 0,
            d_type: 0,
            d_name: [0; 256],
        });
        let handle = new_handle();
        let stream = DirStream {
            entries,
            next: 0,
            current,
        };
        state()
            .dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, stream);
        Ok(handle as *mut atomfs_dir)
    });
    ret(r, std::ptr::null_mut())
}

/// The next entry of a directory stream, or NULL at the end (errno unchanged) or on error
/// (errno set). The entry stays valid until the next call on the same stream.
#[no_mangle]
pub extern "C" fn atomfs_readdir(dir: *mut atomfs_dir) -> *mut atomfs_dirent {
    let mut dirs = state().dirs.lock().unwrap_or_else(|p| p.into_inner());
    let Some(stream) = dirs.get_mut(&(dir as usize)) else {
        set_errno(if dir.is_null() {
            libc::EFAULT
        } else {
            libc::EBADF
        });
        return std::ptr::null_mut();
    };
    let Some(entry) = stream.entries.get(stream.next) else {
        return std::ptr::null_mut();
    };
    stream.next += 1;
    let current = &mut *stream.current;
    current.d_ino = entry.ino;
    current.d_type = px::d_type(entry.kind);
    current.d_name = [0; 256];
    for (slot, &b) in current.d_name.iter_mut().zip(entry.name.iter().take(255)) {
        *slot = b as c_char;
    }
    current as *mut atomfs_dirent
}

/// Close a directory stream.
#[no_mangle]
pub extern "C" fn atomfs_closedir(dir: *mut atomfs_dir) -> c_int {
    let removed = state()
        .dirs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&(dir as usize));
    match removed {
        Some(_) => 0,
        None => ret(
            Err(if dir.is_null() {
                libc::EFAULT
            } else {
                libc::EBADF
            }),
            -1,
        ),
    }
}

// ----- O_ATOMIC groups (ACCFS) -----

/// The open files of `n` descriptors at `fds`.
///
/// # Safety
/// `fds` is NULL or valid for `n` ints.
unsafe fn files_of(fds: *const c_int, n: c_int) -> PResult<Vec<Arc<OpenFile>>> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n > px::TX_FILES_MAX {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    if fds.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: non-NULL and valid for `n` ints by the caller's contract.
    let fds = unsafe { std::slice::from_raw_parts(fds, n) };
    fds.iter().map(|&fd| file(fd)).collect()
}

/// Commit the pending O_ATOMIC writes of `n` files (one pool) as one atomic unit.
///
/// # Safety
/// `fds` is NULL or valid for `n` ints.
#[no_mangle]
pub unsafe extern "C" fn syncv(fds: *const c_int, n: c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    ret(
        unsafe { files_of(fds, n) }
            .and_then(|files| px::syncv(&files))
            .map(|_| 0),
        -1,
    )
}

/// Drop the pending O_ATOMIC writes of `n` files (one pool).
///
/// # Safety
/// `fds` is NULL or valid for `n` ints.
#[no_mangle]
pub unsafe extern "C" fn abortv(fds: *const c_int, n: c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    ret(
        unsafe { files_of(fds, n) }
            .and_then(|files| px::abortv(&files))
            .map(|_| 0),
        -1,
    )
}

// ----- transactions (FCFS) -----

/// Begin a transaction over `info->num` descriptors at `info->fdSet` (possibly none: then
/// the first `tx_add` chooses the pool). Returns the id, or 0 with errno set.
///
/// # Safety
/// `info` is NULL or points to a `struct TxInfo` whose `fdSet` is NULL or valid for `num` ints.
#[no_mangle]
pub unsafe extern "C" fn tx_begin(info: *mut TxInfo) -> c_ulong {
    if info.is_null() {
        set_errno(libc::EFAULT);
        return 0;
    }
    // SAFETY: non-NULL and readable by the caller's contract.
    let (num, fds) = unsafe { ((*info).num, (*info).fdSet) };
    // SAFETY: forwarded caller contract.
    let r = unsafe { files_of(fds, num) }.and_then(|files| px::tx_begin(&files));
    ret(r.map(|id| id as c_ulong), 0)
}

/// Bind one more descriptor to a running transaction.
#[no_mangle]
pub extern "C" fn tx_add(txid: c_ulong, fd: c_int) -> c_int {
    ret(
        file(fd)
            .and_then(|f| px::tx_add(txid as u64, &f))
            .map(|_| 0),
        -1,
    )
}

/// Commit a transaction: all its writes are durable, atomically, when this returns 0.
#[no_mangle]
pub extern "C" fn tx_commit(txid: c_ulong) -> c_int {
    ret(px::tx_commit(txid as u64).map(|_| 0), -1)
}

/// Abort a transaction: none of its writes remain.
#[no_mangle]
pub extern "C" fn tx_abort(txid: c_ulong) -> c_int {
    ret(px::tx_abort(txid as u64).map(|_| 0), -1)
}
