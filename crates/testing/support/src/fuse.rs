//! FUSE in tests: whether a mount can be made here, and a lazy unmount so that a failed test
//! leaves no mount behind (a stale one makes `rm -rf` of the checkout fail).

use std::path::Path;
use std::process::Command;

/// Why FUSE cannot mount on this machine, if it cannot.
pub fn fuse_unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    if Command::new("fusermount3")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("no fusermount3 (package fuse3)".into());
    }
    None
}

/// Whether FUSE can mount here; when it cannot, says why through
/// [`unavailable`](crate::unavailable) (a failure under `ATOMFS_REQUIRE_ALL=1`).
pub fn have_fuse(what: &str) -> bool {
    match fuse_unavailable() {
        None => true,
        Some(why) => {
            crate::unavailable(what, &format!("FUSE cannot mount here: {why}"));
            false
        }
    }
}

/// Detach the mount on `dir` lazily (`fusermount3 -u -z`), ignoring errors: the last resort
/// of a test whose unmount failed.
pub fn lazy_unmount(dir: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(dir)
        .status();
}

/// Whether `dir` is a mount point now (it appears in /proc/self/mountinfo).
pub fn is_mounted(dir: &Path) -> bool {
    let Some(dir) = dir.to_str() else {
        return false;
    };
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| m.lines().any(|l| l.split(' ').nth(4) == Some(dir)))
        .unwrap_or(false)
}
