//! `umask()`: the shim sees every umask change of the program, so it keeps the mask it
//! applies to the files and directories it creates without reading it back (umask(2) is
//! set-and-get: reading it by calling it twice would briefly change it for other threads).
//! The mask the program started with is read from `/proc/self/status` when the pool opens
//! (`atomfs_posix::umask::track`). A mask changed by a raw `syscall(SYS_umask, ...)` is
//! not seen.

use std::sync::atomic::{AtomicBool, Ordering};

use atomfs_posix as px;

/// Held while one thread sets the mask, so that the order in which the kernel saw two
/// concurrent calls is the order in which the shim records them. A plain flag rather than a
/// mutex: the child of a fork resets it ([`after_fork_child`]) without taking a lock.
static SETTING: AtomicBool = AtomicBool::new(false);

/// umask(2): set the process mask, record it for the shim's creates, return the old one.
#[no_mangle]
pub extern "C" fn umask(mask: libc::mode_t) -> libc::mode_t {
    crate::register_atfork();
    while SETTING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    // SAFETY: the umask system call takes a mode and cannot fail; calling the kernel rather
    // than libc's `umask` keeps this definition from calling itself.
    let old = unsafe { libc::syscall(libc::SYS_umask, mask & 0o777) };
    px::umask::set_known(mask);
    SETTING.store(false, Ordering::Release);
    // The kernel returns the previous mask, at most 0o777.
    (old & 0o777) as libc::mode_t
}

/// In the child after fork: a thread of the parent that was inside [`umask`] does not exist
/// here, so its flag must not stay set. Only an atomic store: a fork handler takes no lock.
pub(crate) fn after_fork_child() {
    SETTING.store(false, Ordering::Release);
}
