//! `mkstemp` family on templates under the prefix: glibc's own opens the file with internal
//! calls the shim cannot see. A template's `XXXXXX` (before `suffixlen` bytes of suffix) is
//! replaced by random letters and digits until an exclusive create succeeds, as glibc does.

use std::ffi::{c_char, c_int};

use crate::paths::{classify, open_ours};
use crate::real::call_real;
use crate::{ret, set_errno};

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const ATTEMPTS: u32 = 62 * 62 * 62;

fn random_u64() -> u64 {
    let mut v = [0u8; 8];
    // SAFETY: getrandom into an 8-byte buffer.
    let n = unsafe { libc::getrandom(v.as_mut_ptr().cast(), v.len(), 0) };
    if n != 8 {
        // No entropy source: time and pid still make collisions unlikely; retries cover them.
        let t = store::now_ns();
        return t ^ (u64::from(std::process::id()) << 32);
    }
    u64::from_ne_bytes(v)
}

/// # Safety
/// `template` is a writable C string.
unsafe fn mkstemp_ours(template: *mut c_char, suffixlen: c_int, flags: c_int) -> Option<c_int> {
    let inner = classify(libc::AT_FDCWD, template)?;
    // SAFETY: a C string by the caller's contract.
    let len = unsafe { libc::strlen(template) };
    let suffix = usize::try_from(suffixlen).unwrap_or(usize::MAX);
    let Some(start) = len.checked_sub(suffix).and_then(|end| end.checked_sub(6)) else {
        return Some(ret::<c_int>(Err(libc::EINVAL)));
    };
    // SAFETY: `template` holds `len` bytes.
    let name = unsafe { std::slice::from_raw_parts_mut(template.cast::<u8>(), len) };
    if &name[start..start + 6] != b"XXXXXX" {
        return Some(ret::<c_int>(Err(libc::EINVAL)));
    }
    let Some(at) = inner
        .len()
        .checked_sub(len - start)
        .filter(|&at| inner[at..at + 6] == *b"XXXXXX")
    else {
        return Some(ret::<c_int>(Err(libc::EINVAL)));
    };
    let mut inner = inner;
    let flags = (flags & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    for _ in 0..ATTEMPTS {
        let mut r = random_u64();
        for i in 0..6 {
            let c = LETTERS[(r % LETTERS.len() as u64) as usize];
            r /= LETTERS.len() as u64;
            name[start + i] = c;
            inner[at + i] = c;
        }
        match open_ours(&inner, flags, 0o600) {
            Err(libc::EEXIST) => continue,
            other => return Some(ret(other)),
        }
    }
    set_errno(libc::EEXIST);
    Some(-1)
}

type MkstempFn = unsafe extern "C" fn(*mut c_char) -> c_int;
type MkostempFn = unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
type MkstempsFn = unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
type MkostempsFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;

macro_rules! mkstemp_family {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(template: *mut c_char) -> c_int {
            // SAFETY: the caller's template.
            match unsafe { mkstemp_ours(template, 0, 0) } {
                Some(r) => r,
                None => call_real!($name: MkstempFn, template),
            }
        }
    )*};
}
mkstemp_family!(mkstemp, mkstemp64);

macro_rules! mkostemp_family {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(template: *mut c_char, flags: c_int) -> c_int {
            // SAFETY: the caller's template.
            match unsafe { mkstemp_ours(template, 0, flags) } {
                Some(r) => r,
                None => call_real!($name: MkostempFn, template, flags),
            }
        }
    )*};
}
mkostemp_family!(mkostemp, mkostemp64);

macro_rules! mkstemps_family {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(template: *mut c_char, suffixlen: c_int) -> c_int {
            // SAFETY: the caller's template.
            match unsafe { mkstemp_ours(template, suffixlen, 0) } {
                Some(r) => r,
                None => call_real!($name: MkstempsFn, template, suffixlen),
            }
        }
    )*};
}
mkstemps_family!(mkstemps, mkstemps64);

macro_rules! mkostemps_family {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(template: *mut c_char, suffixlen: c_int, flags: c_int) -> c_int {
            // SAFETY: the caller's template.
            match unsafe { mkstemp_ours(template, suffixlen, flags) } {
                Some(r) => r,
                None => call_real!($name: MkostempsFn, template, suffixlen, flags),
            }
        }
    )*};
}
mkostemps_family!(mkostemps, mkostemps64);
