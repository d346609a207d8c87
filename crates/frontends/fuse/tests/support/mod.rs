//! Helpers of the FUSE tests: mount a store on a fresh directory, xattr and ioctl calls (the
//! rest comes from `test_support`).
#![allow(dead_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::Store;

use test_support::fuse::lazy_unmount;
use test_support::{scratch, Scratch};

/// A pool of `size` bytes in a fresh scratch directory (on /dev/shm, the emulated NVMM),
/// deleted with the returned directory.
pub fn shm_pool(name: &str, size: u64) -> (Arc<dyn Store>, Scratch) {
    let dir = scratch(&format!("fuse-{name}"));
    let path = dir.join("store.pool");
    let store = pool::create(&path, size, &pool::PoolConfig::default()).expect("create pool");
    (store, dir)
}

/// An mmio store (host files in a fresh scratch directory, its log pool beside them),
/// deleted with the returned directory.
pub fn mmio_store(name: &str) -> (Arc<dyn Store>, Scratch) {
    let dir = scratch(&format!("fuse-mmio-{name}"));
    let home = dir.join("home");
    std::fs::create_dir(&home).expect("home directory");
    let opts = engines::Options::new()
        .with("home", home.display().to_string())
        .with("size", (64u64 << 20).to_string());
    let opened = engines::create(&dir.join("log.pool"), "mmio", &opts).expect("create mmio");
    (opened.store, dir)
}

/// A mounted store; unmounted (and the store closed) by `finish` or on drop.
pub struct Mounted {
    dir: Scratch,
    mount: Option<atomfs_fuse::Mount>,
}

impl Mounted {
    pub fn dir(&self) -> PathBuf {
        self.dir.to_path_buf()
    }

    /// Unmount, checking that it went well. A failed unmount is detached lazily before the
    /// test fails, so that no mount is left behind in the scratch directory.
    pub fn finish(mut self) {
        if let Some(m) = self.mount.take() {
            if let Err(e) = m.unmount() {
                lazy_unmount(&self.dir);
                panic!("unmount: {e}");
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            if m.unmount().is_err() {
                lazy_unmount(&self.dir);
            }
        }
    }
}

/// Mount `store` on a fresh directory, or print why FUSE is unavailable and return None
/// (a failure under `ATOMFS_REQUIRE_ALL=1`).
pub fn mounted(name: &str, store: Arc<dyn Store>) -> Option<Mounted> {
    if !test_support::fuse::have_fuse(name) {
        return None;
    }
    let dir = scratch(&format!("fuse-{name}"));
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

/// Compile `examples/NAME.c` with cc against include/, into `dir`; None (with a message, a
/// failure under `ATOMFS_REQUIRE_ALL=1`) without cc.
pub fn build_c_example(name: &str, dir: &Path) -> Option<PathBuf> {
    if !test_support::cc::have_cc() {
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join(name);
    let src = root.join("examples").join(format!("{name}.c"));
    test_support::cc::compile(&src, &out, &root.join("include"), &[]);
    Some(out)
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
