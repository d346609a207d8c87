//! Probing what the file system of the store directory offers, with unnamed temporary
//! files (O_TMPFILE) that leave nothing behind.

use super::{jail, sys};
use crate::{Capabilities, FsType};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

/// Block-sized payload of the probes.
const PROBE_LEN: u64 = 4096;

fn tmpfile(root: &OwnedFd) -> Option<File> {
    // SAFETY: "." is NUL-terminated; O_TMPFILE creates an unnamed file in the directory.
    let fd = unsafe {
        libc::openat(
            std::os::fd::AsRawFd::as_raw_fd(root),
            c".".as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    jail::owned(fd).ok().map(File::from)
}

fn filled(root: &OwnedFd) -> Option<File> {
    let file = tmpfile(root)?;
    file.write_all_at(&[0x5a; PROBE_LEN as usize], 0).ok()?;
    Some(file)
}

/// Probe the capabilities of the file system holding `root`.
pub fn probe(root: &OwnedFd) -> Capabilities {
    let fs_type = sys::statfs(root.as_fd()).map_or(FsType::Other(0), |s| s.fs_type);
    let mut caps = Capabilities::plain(fs_type);
    let (Some(a), Some(b)) = (filled(root), filled(root)) else {
        return caps;
    };
    let (a, b) = (OwnedFd::from(a), OwnedFd::from(b));
    caps.reflink = sys::clone_range(&a, 0, &b, 0, PROBE_LEN).is_ok();
    caps.exchange_range =
        sys::exchange_range(&a, 0, &b, 0, PROBE_LEN, sys::XFS_EXCHANGE_RANGE_DRY_RUN).is_ok();
    if let Ok(extras) = direct_extras(&a) {
        caps.atomic_write_unit = extras.atomic_unit;
        caps.direct_io_align = extras.dio_align;
        caps.dax = extras.dax;
    }
    caps
}

/// statx of an O_DIRECT reopening of `fd` (XFS reports atomic-write units for files that can
/// take direct I/O).
fn direct_extras(fd: &OwnedFd) -> std::io::Result<sys::StatxExtras> {
    let direct = reopen_direct(fd)?;
    sys::statx_extras(direct.as_fd())
}

/// `fd` opened again with O_DIRECT (through /proc/self/fd: our own descriptor, never a path
/// from the caller).
pub fn reopen_direct(fd: &OwnedFd) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(link)
}
