//! The process umask, applied as the kernel applies it to the mode of every file and
//! directory the C front ends create (`open` with `O_CREAT`, `mkdir`).
//!
//! umask(2) sets the mask and returns the old one; reading it by calling it twice would open
//! a window in which another thread of the program creates files under a wrong mask. So the
//! mask is read without changing it:
//! - from the `Umask:` line of `/proc/self/status` (Linux 4.7 and later), at every create
//!   ([`current`]) — what the C API does;
//! - or, in a front end that sees every `umask()` call of the program (the LD_PRELOAD shim
//!   interposes `umask`), from the value read once at start ([`track`]) and then kept up to
//!   date by [`set_known`] at each call — no file read per create.
//!
//! Without `/proc` the mask is taken to be [`UMASK_FALLBACK`].

use std::sync::atomic::{AtomicU32, Ordering};

/// The mask assumed when `/proc/self/status` cannot be read (the usual login default).
pub const UMASK_FALLBACK: u32 = 0o022;

/// Permission bits a umask can hold.
const UMASK_BITS: u32 = 0o777;

/// Marks [`KNOWN`] as not tracked (a real mask never has bits above 0o777).
const UNTRACKED: u32 = u32::MAX;

/// The mask as the shim tracks it, or [`UNTRACKED`].
static KNOWN: AtomicU32 = AtomicU32::new(UNTRACKED);

/// The process umask now.
pub fn current() -> u32 {
    match KNOWN.load(Ordering::Acquire) {
        UNTRACKED => from_proc().unwrap_or(UMASK_FALLBACK),
        mask => mask,
    }
}

/// `mode` (permission and set-id bits of a create call) with the process umask applied.
pub fn apply(mode: u32) -> u32 {
    mode & 0o7777 & !current()
}

/// Start tracking the mask: read it once now, unless [`set_known`] has set it already.
/// From then on only [`set_known`] changes it, so the caller must see every umask change
/// of the process (changes made by a raw `syscall(SYS_umask)` are missed).
pub fn track() {
    if let Some(mask) = from_proc() {
        // A set_known that ran before this knows a newer mask: keep it.
        let _ = KNOWN.compare_exchange(UNTRACKED, mask, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Record the mask the process has just set with umask(2).
pub fn set_known(mask: u32) {
    KNOWN.store(mask & UMASK_BITS, Ordering::Release);
}

/// The mask from `/proc/self/status`, if it can be read.
pub fn from_proc() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status(&status)
}

/// The `Umask:` line of a `/proc/PID/status` text (octal).
fn parse_status(status: &str) -> Option<u32> {
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8)
        .ok()
        .filter(|&mask| mask <= UMASK_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_status_line() {
        let status = "Name:\tcat\nUmask:\t0027\nState:\tR (running)\n";
        assert_eq!(parse_status(status), Some(0o027));
        assert_eq!(parse_status("Name:\tcat\n"), None);
        assert_eq!(parse_status("Umask:\t0999\n"), None);
        assert_eq!(parse_status("Umask:\t17777\n"), None);
    }

    #[test]
    fn reads_the_real_mask_without_changing_it() {
        // SAFETY: umask(2) cannot fail; this test binary creates no files meanwhile.
        let before = unsafe { libc::umask(0o027) };
        assert_eq!(from_proc(), Some(0o027));
        // SAFETY: as above; restores the mask.
        unsafe { libc::umask(before) };
        assert_eq!(from_proc(), Some(before));
    }
}
