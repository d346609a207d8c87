//! Directory streams of shim directories: `opendir`, `fdopendir`, `readdir(64)`,
//! `rewinddir`, `dirfd`, `closedir`. A shim `DIR *` is a pointer the real libc never sees;
//! the shim keeps the set of them and passes every other `DIR *` through.

use std::collections::HashSet;
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, OnceLock};

use atomfs_posix as px;
use px::PResult;

use crate::paths::{classify, open_ours};
use crate::real::real;
use crate::{busy, fds, ours, pool, set_errno, shim_file};

struct ShimDir {
    /// Kernel descriptor reserved for the directory (what `dirfd` returns).
    fd: c_int,
    entries: Vec<(Vec<u8>, u64, u8)>,
    next: usize,
    /// The entry handed out last; `struct dirent` and `struct dirent64` share this layout
    /// on 64-bit Linux.
    current: Box<libc::dirent64>,
}

fn streams() -> &'static Mutex<HashSet<usize>> {
    static STREAMS: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    STREAMS.get_or_init(|| Mutex::new(HashSet::new()))
}

fn is_ours(dir: *mut libc::DIR) -> bool {
    !dir.is_null()
        && !busy()
        && streams()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(dir as usize))
}

/// A stream over the directory open as shim descriptor `fd`.
fn stream_for(fd: c_int) -> PResult<*mut libc::DIR> {
    ours(|| {
        let file = fds().get(fd)?;
        if !matches!(file.target, px::Target::Dir) {
            return Err(libc::ENOTDIR);
        }
        let meta = px::fstat(&file)?;
        let mut entries = vec![
            (b".".to_vec(), meta.ino, libc::DT_DIR),
            (b"..".to_vec(), meta.ino, libc::DT_DIR),
        ];
        for e in file.pool.store.read_dir(meta.ino).map_err(|e| e.errno())? {
            entries.push((e.name, e.ino, px::d_type(e.kind)));
        }
        // SAFETY: dirent64 is plain old data; all-zero bytes are a valid value.
        let current = Box::new(unsafe { std::mem::zeroed::<libc::dirent64>() });
        let ptr = Box::into_raw(Box::new(ShimDir {
            fd,
            entries,
            next: 0,
            current,
        })) as usize;
        streams()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr);
        Ok(ptr as *mut libc::DIR)
    })
}

type OpendirFn = unsafe extern "C" fn(*const c_char) -> *mut libc::DIR;
type FdopendirFn = unsafe extern "C" fn(c_int) -> *mut libc::DIR;
type DirFn = unsafe extern "C" fn(*mut libc::DIR) -> c_int;
type ReaddirFn = unsafe extern "C" fn(*mut libc::DIR) -> *mut libc::dirent64;
type RewindFn = unsafe extern "C" fn(*mut libc::DIR);

fn null_with(e: c_int) -> *mut libc::DIR {
    set_errno(e);
    std::ptr::null_mut()
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    if let Some(p) = classify(libc::AT_FDCWD, path) {
        let r =
            open_ours(&p, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0).and_then(|fd| {
                stream_for(fd).inspect_err(|_| {
                    // SAFETY: closing the descriptor just opened.
                    unsafe { crate::fds::close(fd) };
                })
            });
        return r.unwrap_or_else(null_with);
    }
    match real!(opendir: OpendirFn) {
        // SAFETY: forwarding to the real opendir.
        Some(f) => unsafe { f(path) },
        None => null_with(libc::ENOSYS),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    if shim_file(fd).is_some() {
        return stream_for(fd).unwrap_or_else(null_with);
    }
    match real!(fdopendir: FdopendirFn) {
        // SAFETY: forwarding to the real fdopendir.
        Some(f) => unsafe { f(fd) },
        None => null_with(libc::ENOSYS),
    }
}

fn next_entry(dir: *mut libc::DIR) -> *mut libc::dirent64 {
    // SAFETY: `dir` is in the stream set, so it is a live Box<ShimDir> of ours; a stream is
    // used by one thread at a time (as POSIX requires of readdir callers).
    let stream = unsafe { &mut *(dir as *mut ShimDir) };
    let Some((name, ino, kind)) = stream.entries.get(stream.next) else {
        return std::ptr::null_mut();
    };
    stream.next += 1;
    let ent = &mut *stream.current;
    ent.d_ino = *ino;
    ent.d_off = stream.next as i64;
    ent.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
    ent.d_type = *kind;
    ent.d_name = [0; 256];
    for (slot, &b) in ent.d_name.iter_mut().zip(name.iter().take(255)) {
        *slot = b as c_char;
    }
    ent
}

#[no_mangle]
pub unsafe extern "C" fn readdir(dir: *mut libc::DIR) -> *mut libc::dirent64 {
    if is_ours(dir) {
        return next_entry(dir);
    }
    match real!(readdir: ReaddirFn) {
        // SAFETY: forwarding to the real readdir.
        Some(f) => unsafe { f(dir) },
        None => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn readdir64(dir: *mut libc::DIR) -> *mut libc::dirent64 {
    if is_ours(dir) {
        return next_entry(dir);
    }
    match real!(readdir64: ReaddirFn) {
        // SAFETY: forwarding to the real readdir64.
        Some(f) => unsafe { f(dir) },
        None => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn rewinddir(dir: *mut libc::DIR) {
    if is_ours(dir) {
        // SAFETY: a live stream of ours (see next_entry).
        unsafe { (*(dir as *mut ShimDir)).next = 0 };
        return;
    }
    if let Some(f) = real!(rewinddir: RewindFn) {
        // SAFETY: forwarding to the real rewinddir.
        unsafe { f(dir) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn dirfd(dir: *mut libc::DIR) -> c_int {
    if is_ours(dir) {
        // SAFETY: a live stream of ours.
        return unsafe { (*(dir as *mut ShimDir)).fd };
    }
    crate::real::call_real!(dirfd: DirFn, dir)
}

#[no_mangle]
pub unsafe extern "C" fn closedir(dir: *mut libc::DIR) -> c_int {
    if is_ours(dir) {
        streams()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(dir as usize));
        // SAFETY: created by Box::into_raw in stream_for and removed from the set above, so
        // this is the only release.
        let stream = unsafe { Box::from_raw(dir as *mut ShimDir) };
        // SAFETY: the stream's own descriptor.
        return unsafe { crate::fds::close(stream.fd) };
    }
    crate::real::call_real!(closedir: DirFn, dir)
}

/// Keep `pool` referenced for the directory module's users.
#[allow(dead_code)]
fn _pool() -> PResult<std::sync::Arc<px::Pool>> {
    pool()
}
