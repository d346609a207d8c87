//! Descriptor calls: I/O, seek, sync, close, dup, fcntl, fstat; and the transaction calls.

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use atomfs_posix as px;
use px::{OpenFile, PResult};

use crate::paths::fstat_ours;
use crate::real::call_real;
use crate::{fds, ours, ret, shim_file, usable, FORKED};

/// Run an operation on a shim file (in shim context, `EIO` in a forked child).
fn with<T>(file: &OpenFile, f: impl FnOnce(&OpenFile) -> PResult<T>) -> PResult<T> {
    ours(|| f(usable(file)?))
}

/// # Safety
/// `buf` is NULL or valid for `count` bytes of writing.
unsafe fn out_buf<'a>(buf: *mut c_void, count: usize) -> PResult<&'a mut [u8]> {
    if count == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer of `count` bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), count.min(px::IO_BYTES_MAX)) })
}

/// # Safety
/// `buf` is NULL or valid for `count` bytes of reading.
unsafe fn in_buf<'a>(buf: *const c_void, count: usize) -> PResult<&'a [u8]> {
    if count == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer of `count` bytes.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast(), count.min(px::IO_BYTES_MAX)) })
}

fn offset(off: i64) -> PResult<u64> {
    u64::try_from(off).map_err(|_| libc::EINVAL)
}

type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
type PreadFn = unsafe extern "C" fn(c_int, *mut c_void, usize, i64) -> isize;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize;
type ChkFn = unsafe extern "C" fn(c_int, *mut c_void, usize, usize) -> isize;
type PreadChkFn = unsafe extern "C" fn(c_int, *mut c_void, usize, i64, usize) -> isize;

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize {
    match shim_file(fd) {
        // SAFETY: the caller's buffer.
        Some(f) => ret(with(&f, |f| {
            px::read(f, unsafe { out_buf(buf, count) }?, Some(fd))
        })
        .map(|n| n as isize)),
        None => call_real!(read: ReadFn, fd, buf, count),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    buflen: usize,
) -> isize {
    match shim_file(fd) {
        // SAFETY: the caller's buffer (of buflen bytes; never more than that is written).
        Some(f) => ret(with(&f, |f| {
            px::read(f, unsafe { out_buf(buf, count.min(buflen)) }?, Some(fd))
        })
        .map(|n| n as isize)),
        None => call_real!(__read_chk: ChkFn, fd, buf, count, buflen),
    }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    match shim_file(fd) {
        // SAFETY: the caller's buffer.
        Some(f) => ret(with(&f, |f| {
            px::write(f, unsafe { in_buf(buf, count) }?, Some(fd))
        })
        .map(|n| n as isize)),
        None => call_real!(write: WriteFn, fd, buf, count),
    }
}

fn pread_ours(f: &OpenFile, buf: *mut c_void, count: usize, off: i64) -> isize {
    // SAFETY: the caller's buffer.
    ret(with(f, |f| {
        px::pread(f, unsafe { out_buf(buf, count) }?, offset(off)?)
    })
    .map(|n| n as isize))
}

fn pwrite_ours(f: &OpenFile, buf: *const c_void, count: usize, off: i64) -> isize {
    // SAFETY: the caller's buffer.
    ret(with(f, |f| {
        px::pwrite(f, unsafe { in_buf(buf, count) }?, offset(off)?)
    })
    .map(|n| n as isize))
}

#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: usize, off: i64) -> isize {
    match shim_file(fd) {
        Some(f) => pread_ours(&f, buf, count, off),
        None => call_real!(pread: PreadFn, fd, buf, count, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: usize, off: i64) -> isize {
    match shim_file(fd) {
        Some(f) => pread_ours(&f, buf, count, off),
        None => call_real!(pread64: PreadFn, fd, buf, count, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __pread_chk(
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    off: i64,
    buflen: usize,
) -> isize {
    match shim_file(fd) {
        Some(f) => pread_ours(&f, buf, count.min(buflen), off),
        None => call_real!(__pread_chk: PreadChkFn, fd, buf, count, off, buflen),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __pread64_chk(
    fd: c_int,
    buf: *mut c_void,
    count: usize,
    off: i64,
    buflen: usize,
) -> isize {
    match shim_file(fd) {
        Some(f) => pread_ours(&f, buf, count.min(buflen), off),
        None => call_real!(__pread64_chk: PreadChkFn, fd, buf, count, off, buflen),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: usize, off: i64) -> isize {
    match shim_file(fd) {
        Some(f) => pwrite_ours(&f, buf, count, off),
        None => call_real!(pwrite: PwriteFn, fd, buf, count, off),
    }
}

#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: usize, off: i64) -> isize {
    match shim_file(fd) {
        Some(f) => pwrite_ours(&f, buf, count, off),
        None => call_real!(pwrite64: PwriteFn, fd, buf, count, off),
    }
}

/// The iovecs as slices; `EINVAL` for a bad count, `EFAULT` for NULL.
///
/// # Safety
/// `iov` is NULL or valid for `n` iovecs, each valid for its length.
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> PResult<&'a [libc::iovec]> {
    if !(0..=1024).contains(&n) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's array of `n` iovecs.
    Ok(unsafe { std::slice::from_raw_parts(iov, n as usize) })
}

type VecFn = unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> isize;

/// readv: one read of the total length, scattered.
fn readv_ours(fd: c_int, f: &OpenFile, iov: *const libc::iovec, n: c_int) -> PResult<isize> {
    // SAFETY: the caller's iovecs.
    let iov = unsafe { iovecs(iov, n) }?;
    let total = iov
        .iter()
        .map(|v| v.iov_len)
        .sum::<usize>()
        .min(px::IO_BYTES_MAX);
    let mut tmp = vec![0u8; total];
    let got = with(f, |f| px::read(f, &mut tmp, Some(fd)))?;
    let mut done = 0;
    for v in iov {
        if done >= got {
            break;
        }
        let take = v.iov_len.min(got - done);
        // SAFETY: iov_base is valid for iov_len >= take bytes (caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(tmp.as_ptr().add(done), v.iov_base.cast::<u8>(), take)
        };
        done += take;
    }
    Ok(got as isize)
}

/// writev: gathered into one write, so it is one atomic update.
fn writev_ours(fd: c_int, f: &OpenFile, iov: *const libc::iovec, n: c_int) -> PResult<isize> {
    // SAFETY: the caller's iovecs.
    let iov = unsafe { iovecs(iov, n) }?;
    let mut data = Vec::with_capacity(iov.iter().map(|v| v.iov_len).sum());
    for v in iov {
        // SAFETY: iov_base is valid for iov_len bytes (caller's contract).
        data.extend_from_slice(unsafe { in_buf(v.iov_base, v.iov_len) }?);
    }
    with(f, |f| px::write(f, &data, Some(fd))).map(|n| n as isize)
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    match shim_file(fd) {
        Some(f) => ret(readv_ours(fd, &f, iov, n)),
        None => call_real!(readv: VecFn, fd, iov, n),
    }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    match shim_file(fd) {
        Some(f) => ret(writev_ours(fd, &f, iov, n)),
        None => call_real!(writev: VecFn, fd, iov, n),
    }
}

type LseekFn = unsafe extern "C" fn(c_int, i64, c_int) -> i64;

#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: i64, whence: c_int) -> i64 {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::lseek(f, off, whence, Some(fd))).map(|n| n as i64)),
        None => call_real!(lseek: LseekFn, fd, off, whence),
    }
}

#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: i64, whence: c_int) -> i64 {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::lseek(f, off, whence, Some(fd))).map(|n| n as i64)),
        None => call_real!(lseek64: LseekFn, fd, off, whence),
    }
}

type FdFn = unsafe extern "C" fn(c_int) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::fsync(f, false)).map(|_| 0)),
        None => call_real!(fsync: FdFn, fd),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::fsync(f, true)).map(|_| 0)),
        None => call_real!(fdatasync: FdFn, fd),
    }
}

type FtruncateFn = unsafe extern "C" fn(c_int, i64) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::ftruncate(f, len)).map(|_| 0)),
        None => call_real!(ftruncate: FtruncateFn, fd, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| px::ftruncate(f, len)).map(|_| 0)),
        None => call_real!(ftruncate64: FtruncateFn, fd, len),
    }
}

/// The lock owner of an open file description (OFD locks): its address, marked apart from
/// process ids.
fn ofd_owner(file: &Arc<OpenFile>) -> u64 {
    (Arc::as_ptr(file) as u64) | (1 << 63)
}

/// Forget a shim descriptor (in a forked child without releasing the parent's handle). As
/// close(2) does, the process's record locks on the file go with any of its descriptors.
pub(crate) fn forget(fd: c_int) {
    ours(|| {
        if let Some(file) = fds().get(fd).ok().filter(|f| crate::own_file(f)) {
            px::lock_release(&file, u64::from(std::process::id()));
            if Arc::strong_count(&file) <= 2 {
                // The last descriptor of the description: its OFD locks go too.
                px::lock_release(&file, ofd_owner(&file));
            }
        }
        if let Some(file) = fds().remove(fd) {
            // A descriptor inherited from the parent: its file is the parent's to close.
            if !crate::own_file(&file) {
                std::mem::forget(file);
            }
        }
    })
}

/// Move the shim's own descriptor numbered `fd` (a pool lock) out of the application's way;
/// whether there was one.
fn free_number(fd: c_int) -> bool {
    !crate::busy() && fd >= 0 && ours(|| px::relocate_internal_fd(fd))
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if crate::in_shared_child() {
        return call_real!(close: FdFn, fd);
    }
    if crate::cwd::is_marker(fd) {
        return 0;
    }
    crate::inherit::closed(fd);
    if crate::is_shim_fd(fd) {
        forget(fd);
    } else if free_number(fd) {
        // The number held the shim's pool lock (the application never opened it): moved
        // away, so the number is free now, as the application expects after close.
        return 0;
    }
    call_real!(close: FdFn, fd)
}

type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;

/// After a successful kernel dup of `old` onto `new`: `new` refers to what `old` does.
fn after_dup(old: Option<Arc<OpenFile>>, new: c_int) {
    ours(|| match old {
        Some(file) => {
            fds().insert(new, file);
        }
        None => {
            fds().remove(new);
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if crate::in_shared_child() {
        return call_real!(dup: FdFn, fd);
    }
    let file = shim_file(fd);
    let new: c_int = call_real!(dup: FdFn, fd);
    if new >= 0 && file.is_some() {
        after_dup(file, new);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if crate::in_shared_child() {
        return call_real!(dup2: Dup2Fn, old, new);
    }
    let (file, target) = (shim_file(old), shim_file(new));
    if old != new {
        free_number(new);
    }
    let r: c_int = call_real!(dup2: Dup2Fn, old, new);
    if r >= 0 && old != new && (file.is_some() || target.is_some()) {
        after_dup(file, new);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if crate::in_shared_child() {
        return call_real!(dup3: Dup3Fn, old, new, flags);
    }
    let (file, target) = (shim_file(old), shim_file(new));
    if old != new {
        free_number(new);
    }
    let r: c_int = call_real!(dup3: Dup3Fn, old, new, flags);
    if r >= 0 && (file.is_some() || target.is_some()) {
        after_dup(file, new);
    }
    r
}

type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;

/// fcntl on a shim descriptor: status flags are the shim's; descriptor flags and dups are
/// the kernel's; record and OFD locks are the store's, shared with every process using it
/// through its server (`px::lock`).
fn fcntl_ours(fd: c_int, file: Arc<OpenFile>, cmd: c_int, arg: c_ulong) -> Option<c_int> {
    match cmd {
        libc::F_GETFL => Some(file.status.load(Ordering::Relaxed) | libc::O_LARGEFILE),
        libc::F_SETFL => {
            let keep = file.status.load(Ordering::Relaxed) & !(libc::O_APPEND | libc::O_NONBLOCK);
            file.status.store(
                keep | (arg as c_int & (libc::O_APPEND | libc::O_NONBLOCK)),
                Ordering::Relaxed,
            );
            Some(0)
        }
        libc::F_SETLK
        | libc::F_SETLKW
        | libc::F_OFD_SETLK
        | libc::F_OFD_SETLKW
        | libc::F_GETLK
        | libc::F_OFD_GETLK => {
            let lock = arg as *mut libc::flock;
            if lock.is_null() {
                return Some(ret::<c_int>(Err(libc::EFAULT)));
            }
            let ofd = matches!(
                cmd,
                libc::F_OFD_SETLK | libc::F_OFD_SETLKW | libc::F_OFD_GETLK
            );
            let owner = if ofd {
                ofd_owner(&file)
            } else {
                u64::from(std::process::id())
            };
            // SAFETY: the caller passes a `struct flock` for the lock commands.
            let fl = unsafe { &mut *lock };
            Some(ret(with(&file, |f| {
                px::lock(f, owner, cmd, fl, Some(fd)).map(|()| 0)
            })))
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let new: c_int = call_real!(fcntl: FcntlFn, fd, cmd, arg);
            if new >= 0 {
                after_dup(Some(file), new);
            }
            Some(new)
        }
        _ => None,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if crate::in_shared_child() {
        return call_real!(fcntl: FcntlFn, fd, cmd, arg);
    }
    if let Some(r) = shim_file(fd).and_then(|f| fcntl_ours(fd, f, cmd, arg)) {
        return r;
    }
    call_real!(fcntl: FcntlFn, fd, cmd, arg)
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if crate::in_shared_child() {
        return call_real!(fcntl64: FcntlFn, fd, cmd, arg);
    }
    if let Some(r) = shim_file(fd).and_then(|f| fcntl_ours(fd, f, cmd, arg)) {
        return r;
    }
    call_real!(fcntl64: FcntlFn, fd, cmd, arg)
}

type IoctlFn = unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if shim_file(fd).is_some() {
        return ret::<c_int>(Err(libc::ENOTTY));
    }
    call_real!(ioctl: IoctlFn, fd, request, arg)
}

type FstatFn = unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int;
type FxstatFn = unsafe extern "C" fn(c_int, c_int, *mut libc::stat) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(fstat_ours(&f, buf)),
        None => call_real!(fstat: FstatFn, fd, buf),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, buf: *mut libc::stat) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(fstat_ours(&f, buf)),
        None => call_real!(fstat64: FstatFn, fd, buf),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(fstat_ours(&f, buf)),
        None => call_real!(__fxstat: FxstatFn, ver, fd, buf),
    }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat64(ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(fstat_ours(&f, buf)),
        None => call_real!(__fxstat64: FxstatFn, ver, fd, buf),
    }
}

// ----- space and hints -----

/// Make the file at least `off + len` bytes long (posix_fallocate semantics).
fn extend(f: &OpenFile, off: i64, len: i64) -> PResult<()> {
    let end = off
        .checked_add(len)
        .filter(|_| off >= 0 && len > 0)
        .ok_or(libc::EINVAL)?;
    with(f, |f| {
        if px::fstat(f)?.size < end as u64 {
            px::ftruncate(f, end)?;
        }
        Ok(())
    })
}

type FallocateFn = unsafe extern "C" fn(c_int, c_int, i64, i64) -> c_int;
type PosixFallocateFn = unsafe extern "C" fn(c_int, i64, i64) -> c_int;
type FadviseFn = unsafe extern "C" fn(c_int, i64, i64, c_int) -> c_int;

/// fallocate through the store; on an engine that does not offer it yet, mode 0 extends
/// the file (a hole: it reads as zeros) and KEEP_SIZE does nothing, as before.
fn fallocate_ours(f: &OpenFile, mode: c_int, off: i64, len: i64) -> c_int {
    match with(f, |f| px::fallocate(f, mode, off, len)) {
        Err(libc::EOPNOTSUPP) => match mode {
            0 => ret(extend(f, off, len).map(|_| 0)),
            libc::FALLOC_FL_KEEP_SIZE => 0,
            _ => ret::<c_int>(Err(libc::EOPNOTSUPP)),
        },
        r => ret(r.map(|_| 0)),
    }
}

/// posix_fallocate: fallocate mode 0, or extending the file where the engine lacks it;
/// returns the error number (not -1 and errno).
fn posix_fallocate_ours(f: &OpenFile, off: i64, len: i64) -> c_int {
    match with(f, |f| px::fallocate(f, 0, off, len)) {
        Ok(()) => 0,
        Err(libc::EOPNOTSUPP) => extend(f, off, len).err().unwrap_or(0),
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: i64, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => fallocate_ours(&f, mode, off, len),
        None => call_real!(fallocate: FallocateFn, fd, mode, off, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: i64, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => fallocate_ours(&f, mode, off, len),
        None => call_real!(fallocate64: FallocateFn, fd, mode, off, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: i64, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => posix_fallocate_ours(&f, off, len),
        None => call_real!(posix_fallocate: PosixFallocateFn, fd, off, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: i64, len: i64) -> c_int {
    match shim_file(fd) {
        Some(f) => posix_fallocate_ours(&f, off, len),
        None => call_real!(posix_fallocate64: PosixFallocateFn, fd, off, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: i64, len: i64, advice: c_int) -> c_int {
    match shim_file(fd) {
        Some(_) => 0,
        None => call_real!(posix_fadvise: FadviseFn, fd, off, len, advice),
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, off: i64, len: i64, advice: c_int) -> c_int {
    match shim_file(fd) {
        Some(_) => 0,
        None => call_real!(posix_fadvise64: FadviseFn, fd, off, len, advice),
    }
}

// ----- kernel shortcuts that would bypass the shim: refused, callers fall back -----

type CopyRangeFn = unsafe extern "C" fn(c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> isize;
type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut i64, usize) -> isize;
type SpliceFn = unsafe extern "C" fn(c_int, *mut i64, c_int, *mut i64, usize, c_uint) -> isize;
type MmapFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void;

#[no_mangle]
pub unsafe extern "C" fn copy_file_range(
    a: c_int,
    ao: *mut i64,
    b: c_int,
    bo: *mut i64,
    n: usize,
    fl: c_uint,
) -> isize {
    if shim_file(a).is_some() || shim_file(b).is_some() {
        return ret::<isize>(Err(libc::EXDEV));
    }
    call_real!(copy_file_range: CopyRangeFn, a, ao, b, bo, n, fl)
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut i64, n: usize) -> isize {
    if shim_file(out).is_some() || shim_file(inp).is_some() {
        return ret::<isize>(Err(libc::EINVAL));
    }
    call_real!(sendfile: SendfileFn, out, inp, off, n)
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut i64, n: usize) -> isize {
    if shim_file(out).is_some() || shim_file(inp).is_some() {
        return ret::<isize>(Err(libc::EINVAL));
    }
    call_real!(sendfile64: SendfileFn, out, inp, off, n)
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    a: c_int,
    ao: *mut i64,
    b: c_int,
    bo: *mut i64,
    n: usize,
    fl: c_uint,
) -> isize {
    if shim_file(a).is_some() || shim_file(b).is_some() {
        return ret::<isize>(Err(libc::EINVAL));
    }
    call_real!(splice: SpliceFn, a, ao, b, bo, n, fl)
}

fn mmap_refused() -> *mut c_void {
    crate::set_errno(libc::ENODEV);
    libc::MAP_FAILED
}

/// mmap of a shim file: a private copy (the kernel has no pages of the pool's file to share).
/// MAP_PRIVATE mappings behave as the kernel's do, except that pages past the end of file
/// read as zeros instead of SIGBUS; a read-only MAP_SHARED mapping is the same copy (a
/// snapshot: later writes to the file do not show in it); a writable MAP_SHARED mapping is
/// refused (ENODEV): its stores would never reach the pool.
fn mmap_copy(
    file: &OpenFile,
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    off: i64,
    real: MmapFn,
) -> *mut c_void {
    let shared = flags & (libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE) != 0;
    if shared && prot & libc::PROT_WRITE != 0 {
        return mmap_refused();
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as i64;
    if len == 0 || off < 0 || off % page != 0 {
        crate::set_errno(libc::EINVAL);
        return libc::MAP_FAILED;
    }
    let anon = (flags & !(libc::MAP_SHARED | libc::MAP_SHARED_VALIDATE))
        | libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS;
    // SAFETY: an anonymous mapping at the caller's hint (or MAP_FIXED address, as asked).
    let p = unsafe { real(addr, len, libc::PROT_READ | libc::PROT_WRITE, anon, -1, 0) };
    if p == libc::MAP_FAILED {
        return p;
    }
    // SAFETY: `p` is a fresh writable mapping of `len` bytes.
    let dst = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
    let filled = ours(|| px::pread(file, dst, off as u64));
    // SAFETY: `p`/`len` is the mapping made above.
    let protected = unsafe { libc::mprotect(p, len, prot) } == 0;
    match filled {
        Ok(_) if protected => p,
        other => {
            // SAFETY: unmapping the mapping made above.
            unsafe { libc::munmap(p, len) };
            crate::set_errno(other.err().unwrap_or(libc::EACCES));
            libc::MAP_FAILED
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    if flags & libc::MAP_ANONYMOUS == 0 {
        if let Some(file) = shim_file(fd) {
            return match crate::real::real!(mmap: MmapFn) {
                Some(real) => mmap_copy(&file, addr, len, prot, flags, off, real),
                None => mmap_refused(),
            };
        }
    }
    match crate::real::real!(mmap: MmapFn) {
        // SAFETY: forwarding the caller's arguments to the real mmap.
        Some(f) => unsafe { f(addr, len, prot, flags, fd, off) },
        None => mmap_refused(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    if flags & libc::MAP_ANONYMOUS == 0 {
        if let Some(file) = shim_file(fd) {
            return match crate::real::real!(mmap64: MmapFn) {
                Some(real) => mmap_copy(&file, addr, len, prot, flags, off, real),
                None => mmap_refused(),
            };
        }
    }
    match crate::real::real!(mmap64: MmapFn) {
        // SAFETY: forwarding the caller's arguments to the real mmap64.
        Some(f) => unsafe { f(addr, len, prot, flags, fd, off) },
        None => mmap_refused(),
    }
}

// ----- attributes on descriptors -----

type FchmodFn = unsafe extern "C" fn(c_int, c_uint) -> c_int;
type FchownFn = unsafe extern "C" fn(c_int, c_uint, c_uint) -> c_int;
type FutimensFn = unsafe extern "C" fn(c_int, *const libc::timespec) -> c_int;

#[no_mangle]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: c_uint) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| {
            let attr = store::SetAttr {
                perm: Some(mode & 0o7777),
                ..Default::default()
            };
            f.pool
                .store
                .setattr(f.ino, &attr, None)
                .map(|_| 0)
                .map_err(|e| e.errno())
        })),
        None => call_real!(fchmod: FchmodFn, fd, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fchown(fd: c_int, uid: c_uint, gid: c_uint) -> c_int {
    match shim_file(fd) {
        Some(f) => ret(with(&f, |f| {
            let meta = f.pool.store.getattr(f.ino).map_err(|e| e.errno())?;
            px::chown(
                &f.pool,
                &meta,
                crate::paths::id_arg(uid),
                crate::paths::id_arg(gid),
            )
            .map(|()| 0)
        })),
        None => call_real!(fchown: FchownFn, fd, uid, gid),
    }
}

#[no_mangle]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    match shim_file(fd) {
        Some(f) => {
            // SAFETY: `times` is the caller's NULL or array of two timespecs.
            let times = unsafe { crate::paths::time_args(times) };
            ret(with(&f, |f| {
                let [atime, mtime] = times?;
                let meta = f.pool.store.getattr(f.ino).map_err(|e| e.errno())?;
                px::utimens(&f.pool, &meta, atime, mtime).map(|()| 0)
            }))
        }
        None => call_real!(futimens: FutimensFn, fd, times),
    }
}

// ----- transactions and O_ATOMIC groups on shim descriptors -----

/// The FCFS transaction description (same layout as `struct TxInfo` of atomfs.h).
#[repr(C)]
#[allow(non_snake_case)]
pub struct TxInfo {
    pub num: c_int,
    pub fdSet: *mut c_int,
}

/// # Safety
/// `fds_ptr` is NULL or valid for `n` ints.
unsafe fn files_of(fds_ptr: *const c_int, n: c_int) -> PResult<Vec<Arc<OpenFile>>> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n > px::TX_FILES_MAX {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    if fds_ptr.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's array of `n` ints.
    let list = unsafe { std::slice::from_raw_parts(fds_ptr, n) };
    ours(|| {
        list.iter()
            .map(|&fd| {
                let file = fds().get(fd)?;
                usable(&file)?;
                Ok(file)
            })
            .collect()
    })
}

/// The transaction calls in a forked child: its own pool must be open (they act on its own
/// descriptors; the parent's running transactions are not the child's).
fn not_forked() -> PResult<()> {
    if FORKED.load(Ordering::Relaxed) {
        crate::pool()?;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn tx_begin(info: *mut TxInfo) -> c_ulong {
    if info.is_null() {
        crate::set_errno(libc::EFAULT);
        return 0;
    }
    // SAFETY: non-NULL `struct TxInfo` from the caller.
    let (num, set) = unsafe { ((*info).num, (*info).fdSet) };
    // SAFETY: the caller's descriptor array.
    let r = not_forked()
        .and_then(|_| unsafe { files_of(set, num) })
        .and_then(|files| ours(|| px::tx_begin(&files)));
    r.map(|id| id as c_ulong).unwrap_or_else(|e| {
        crate::set_errno(e);
        0
    })
}

#[no_mangle]
pub extern "C" fn tx_add(txid: c_ulong, fd: c_int) -> c_int {
    let r = not_forked()
        .and_then(|_| ours(|| fds().get(fd)))
        .and_then(|f| usable(&f).map(|_| f.clone()))
        .and_then(|f| ours(|| px::tx_add(txid as u64, &f)));
    ret(r.map(|_| 0))
}

#[no_mangle]
pub extern "C" fn tx_commit(txid: c_ulong) -> c_int {
    ret(not_forked()
        .and_then(|_| ours(|| px::tx_commit(txid as u64)))
        .map(|_| 0))
}

#[no_mangle]
pub extern "C" fn tx_abort(txid: c_ulong) -> c_int {
    ret(not_forked()
        .and_then(|_| ours(|| px::tx_abort(txid as u64)))
        .map(|_| 0))
}

#[no_mangle]
pub unsafe extern "C" fn syncv(fds_ptr: *const c_int, n: c_int) -> c_int {
    // SAFETY: the caller's descriptor array.
    let r = not_forked()
        .and_then(|_| unsafe { files_of(fds_ptr, n) })
        .and_then(|files| ours(|| px::syncv(&files)));
    ret(r.map(|_| 0))
}

#[no_mangle]
pub unsafe extern "C" fn abortv(fds_ptr: *const c_int, n: c_int) -> c_int {
    // SAFETY: the caller's descriptor array.
    let r = not_forked()
        .and_then(|_| unsafe { files_of(fds_ptr, n) })
        .and_then(|files| ours(|| px::abortv(&files)));
    ret(r.map(|_| 0))
}

/// `atomfs_set_atomic` under the shim: switch a shim descriptor in or out of O_ATOMIC mode.
#[no_mangle]
pub extern "C" fn atomfs_set_atomic(fd: c_int, on: c_int) -> c_int {
    let r = not_forked()
        .and_then(|_| ours(|| fds().get(fd)))
        .and_then(|f| usable(&f).map(|_| f.clone()))
        .and_then(|f| ours(|| px::set_atomic(&f, on != 0)));
    ret(r.map(|_| 0))
}
