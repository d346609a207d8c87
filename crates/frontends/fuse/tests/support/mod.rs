//! Helpers of the FUSE tests: mount in a fresh directory, run programs, xattr and ioctl calls.
#![allow(dead_code)]

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use store::Store;

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

/// A scratch directory under the target's temporary directory, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let base = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("atomfs-fuse-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// A pool of `size` bytes in /dev/shm (the emulated NVMM; the target directory when there is
/// no /dev/shm), deleted when the returned guard drops.
pub fn shm_pool(name: &str, size: u64) -> (Arc<dyn Store>, PoolFile) {
    let base = Path::new("/dev/shm");
    let dir = if base.is_dir() {
        base.to_path_buf()
    } else {
        scratch("pool-dir")
    };
    let path = dir.join(format!("atomfs-fuse-{name}-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let store = pool::create(&path, size, &pool::PoolConfig::default()).expect("create pool");
    (store, PoolFile(path))
}

/// Deletes a pool file on drop.
pub struct PoolFile(PathBuf);

impl Drop for PoolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A mounted store; unmounted (and the store closed) by `finish` or on drop.
pub struct Mounted {
    dir: PathBuf,
    mount: Option<atomfs_fuse::Mount>,
}

impl Mounted {
    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// Unmount, checking that it went well, and remove the mount point. A failed unmount
    /// is detached lazily before the test fails, so that no mount is left behind in the
    /// target directory (a stale one makes `rm -rf` of the checkout fail).
    pub fn finish(mut self) {
        if let Some(m) = self.mount.take() {
            if let Err(e) = m.unmount() {
                let _ = Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&self.dir)
                    .status();
                panic!("unmount: {e}");
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            if m.unmount().is_err() {
                let _ = Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&self.dir)
                    .status();
            }
        }
    }
}

/// Report that a test cannot run here: print the reason and return, or fail when
/// `ATOMFS_REQUIRE_ALL=1` asks for every test to run.
pub fn skip(name: &str, why: &str) {
    if std::env::var("ATOMFS_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("{name} cannot run here ({why}) and ATOMFS_REQUIRE_ALL=1 is set");
    }
    println!("SKIP {name}: {why}");
}

/// Mount `store` on a fresh directory, or print why FUSE is unavailable and return None.
pub fn mounted(name: &str, store: Arc<dyn Store>) -> Option<Mounted> {
    if let Some(why) = fuse_unavailable() {
        skip(name, &format!("FUSE cannot mount here: {why}"));
        return None;
    }
    let dir = scratch(name);
    let opts = atomfs_fuse::MountOptions {
        fsname: format!("atomfs-test-{name}"),
        ..Default::default()
    };
    let mount = atomfs_fuse::spawn_mount(store, &dir, &opts).expect("mount");
    Some(Mounted {
        dir,
        mount: Some(mount),
    })
}

/// Compile `examples/NAME.c` with cc against include/; None (with a message) without cc.
pub fn build_c_example(name: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = scratch(&format!("cc-{name}")).join(name);
    let status = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(root.join("include"))
        .arg("-o")
        .arg(&out)
        .arg(root.join("examples").join(format!("{name}.c")))
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc failed on examples/{name}.c: {s}"),
        Err(e) => {
            println!("SKIP: no C compiler to build examples/{name}.c: {e}");
            None
        }
    }
}

/// Run a program, panicking with its output unless it succeeds; returns its stdout.
pub fn run(prog: impl AsRef<OsStr>, args: &[&OsStr], cwd: &Path) -> String {
    let out = Command::new(prog.as_ref())
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("spawn program");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?} {:?} failed ({}):\n{}\n{}",
        prog.as_ref(),
        args,
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

pub fn set_xattr(path: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let (p, n) = (cpath(path), CString::new(name).expect("name"));
    // SAFETY: both strings are NUL-terminated and live across the call; value is a valid
    // buffer of value.len() bytes.
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub fn get_xattr(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let (p, n) = (cpath(path), CString::new(name).expect("name"));
    let mut buf = [0u8; 64];
    // SAFETY: strings as above; buf is writable for buf.len() bytes.
    let rc = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(buf[..rc as usize].to_vec())
    }
}

/// An argument-less ioctl on an open file.
pub fn ioctl_none(f: &std::fs::File, cmd: u32) -> std::io::Result<()> {
    // SAFETY: the descriptor is open for the call; the command takes no argument.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), cmd as _) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
