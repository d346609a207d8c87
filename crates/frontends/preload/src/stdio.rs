//! `fopen` family on shim paths: a stdio stream (fopencookie) whose reads, writes, seeks and
//! close go through the shim descriptor. (glibc's own fopen opens with internal calls the
//! shim cannot see, so it is intercepted here.)

use std::ffi::{c_char, c_int, c_void};

use crate::paths::{classify, open_ours};
use crate::real::real;
use crate::{bytes, set_errno, shim_file};

#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut libc::FILE;
}

unsafe extern "C" fn cookie_read(cookie: *mut c_void, buf: *mut c_char, n: usize) -> isize {
    // SAFETY: the cookie is the descriptor number; buf is stdio's buffer of n bytes.
    unsafe { crate::fds::read(cookie as usize as c_int, buf.cast(), n) }
}

unsafe extern "C" fn cookie_write(cookie: *mut c_void, buf: *const c_char, n: usize) -> isize {
    // SAFETY: as cookie_read.
    unsafe { crate::fds::write(cookie as usize as c_int, buf.cast(), n) }
}

unsafe extern "C" fn cookie_seek(cookie: *mut c_void, pos: *mut i64, whence: c_int) -> c_int {
    // SAFETY: stdio passes a valid position pointer.
    let r = unsafe { crate::fds::lseek(cookie as usize as c_int, *pos, whence) };
    if r < 0 {
        return -1;
    }
    // SAFETY: as above.
    unsafe { *pos = r };
    0
}

unsafe extern "C" fn cookie_close(cookie: *mut c_void) -> c_int {
    // SAFETY: the stream owns its descriptor.
    unsafe { crate::fds::close(cookie as usize as c_int) }
}

/// open(2) flags of an fopen mode string ("r", "w+", "ab", "re", "wx" ...).
fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let mut flags = match mode.first()? {
        b'r' => libc::O_RDONLY,
        b'w' => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        b'a' => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    for &c in &mode[1..] {
        match c {
            b'+' => flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR,
            b'x' => flags |= libc::O_EXCL,
            b'e' => flags |= libc::O_CLOEXEC,
            _ => {}
        }
    }
    Some(flags)
}

fn stream_over(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    let io = CookieIo {
        read: Some(cookie_read),
        write: Some(cookie_write),
        seek: Some(cookie_seek),
        close: Some(cookie_close),
    };
    // SAFETY: fopencookie with a valid mode string and callbacks that stay valid forever.
    let stream = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    if !stream.is_null() {
        set_fileno(stream, fd);
    }
    stream
}

/// Offset of `_fileno` in glibc's `struct _IO_FILE` on 64-bit Linux (an int after the flags
/// word, eleven buffer pointers, the markers and the chain pointer).
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const FILENO_OFFSET: usize = 112;

/// Make `fileno(stream)` answer the shim descriptor behind a cookie stream (glibc gives
/// cookie streams -2), so that programs that `fstat(fileno(fp))` a stream (sort, ...) reach
/// the shim. Checked through `fileno` afterwards; put back when glibc reads it elsewhere.
fn set_fileno(stream: *mut libc::FILE, fd: c_int) {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    {
        // SAFETY: `stream` is a live FILE from fopencookie; glibc's FILE is larger than
        // FILENO_OFFSET + 4 bytes and holds an aligned int there (glibc's public
        // struct_FILE.h layout). The value is checked through fileno() below.
        let slot = unsafe { stream.cast::<u8>().add(FILENO_OFFSET).cast::<c_int>() };
        // SAFETY: as above.
        let old = unsafe { slot.read() };
        // SAFETY: as above.
        unsafe { slot.write(fd) };
        // SAFETY: a live stream.
        if unsafe { libc::fileno(stream) } != fd {
            // SAFETY: as above: put back what glibc had.
            unsafe { slot.write(old) };
        }
    }
}

extern "C" {
    static mut stdin: *mut libc::FILE;
    static mut stdout: *mut libc::FILE;
    static mut stderr: *mut libc::FILE;
}

/// At start-up, when standard descriptor `fd` (0, 1 or 2) is a shim descriptor another
/// process opened (`prog > /atomfs/out`): make the program's `stdin`/`stdout`/`stderr` a
/// stream over the shim descriptor, since glibc's own streams write with internal calls the
/// shim cannot see. stderr stays unbuffered. Before `main`, so no stream holds data yet.
pub(crate) fn replace_std_stream(fd: c_int) {
    let mode: &std::ffi::CStr = if fd == 0 { c"r" } else { c"w" };
    let stream = stream_over(fd, mode.as_ptr());
    if stream.is_null() {
        return;
    }
    // SAFETY: the program has not started (an .init_array constructor): no other thread
    // uses the std streams; the globals are glibc's `FILE *` variables, written as a whole.
    unsafe {
        match fd {
            0 => stdin = stream,
            1 => stdout = stream,
            _ => {
                libc::setvbuf(stream, std::ptr::null_mut(), libc::_IONBF, 0);
                stderr = stream;
            }
        }
    }
}

fn fopen_ours(path: &[u8], mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: NULL or the caller's mode string.
    let Some(flags) = unsafe { bytes(mode) }.and_then(mode_flags) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    match open_ours(path, flags, 0o666) {
        Ok(fd) => {
            let f = stream_over(fd, mode);
            if f.is_null() {
                // SAFETY: closing the descriptor just opened.
                unsafe { crate::fds::close(fd) };
            }
            f
        }
        Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
    }
}

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;
type FdopenFn = unsafe extern "C" fn(c_int, *const c_char) -> *mut libc::FILE;

#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if let Some(p) = classify(libc::AT_FDCWD, path) {
        return fopen_ours(&p, mode);
    }
    match real!(fopen: FopenFn) {
        // SAFETY: forwarding to the real fopen.
        Some(f) => unsafe { f(path, mode) },
        None => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    if let Some(p) = classify(libc::AT_FDCWD, path) {
        return fopen_ours(&p, mode);
    }
    match real!(fopen64: FopenFn) {
        // SAFETY: forwarding to the real fopen64.
        Some(f) => unsafe { f(path, mode) },
        None => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    if shim_file(fd).is_some() {
        return stream_over(fd, mode);
    }
    match real!(fdopen: FdopenFn) {
        // SAFETY: forwarding to the real fdopen.
        Some(f) => unsafe { f(fd, mode) },
        None => std::ptr::null_mut(),
    }
}
