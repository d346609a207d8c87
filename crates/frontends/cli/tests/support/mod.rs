//! Helpers of the CLI tests: run the built `atomfs`, scratch pools and mount points.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const ATOMFS: &str = env!("CARGO_BIN_EXE_atomfs");

/// Output of a command, with its text.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Run `atomfs ARGS`.
pub fn atomfs(args: &[&str]) -> Ran {
    let mut cmd = Command::new(ATOMFS);
    if args.first() == Some(&"crashtest") {
        cmd.env("ATOMFS_CRASHTEST", crashtest_binary());
    }
    cmd.args(args).output().expect("run atomfs").into()
}

/// The `atomfs-crashtest` binary that `atomfs crashtest` runs, next to `atomfs`. A test run of
/// the whole workspace has built it; `cargo test -p atomfs-cli` alone has not, so it is built
/// here (same profile) when missing.
pub fn crashtest_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = Path::new(ATOMFS).parent().expect("atomfs has a directory");
            let bin = dir.join("atomfs-crashtest");
            if bin.is_file() {
                return bin;
            }
            let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
            let profile = if profile == "debug" { "dev" } else { profile };
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "atomfs-crashtest", "--profile", profile])
                .status()
                .expect("run cargo build -p atomfs-crashtest");
            assert!(
                status.success() && bin.is_file(),
                "cannot build {}",
                bin.display()
            );
            bin
        })
        .clone()
}

/// Run `atomfs ARGS` and insist on success.
pub fn atomfs_ok(args: &[&str]) -> String {
    let r = atomfs(args);
    assert!(
        r.ok(),
        "atomfs {args:?} failed ({:?}):\n{}\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    r.stdout
}

use test_support::fuse::have_fuse;
use test_support::Scratch;

/// A fresh scratch directory (in /dev/shm when there is one: the pools' emulated NVMM),
/// removed when dropped unless the test failed.
pub fn scratch(name: &str) -> Scratch {
    test_support::scratch(&format!("cli-{name}"))
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A pool mounted by `atomfs mount` in the background; unmounted on drop.
pub struct Mounted {
    pub pool: PathBuf,
    pub dir: PathBuf,
    pub pid: Option<i32>,
}

impl Mounted {
    /// mkfs (when `size` is given) and mount; None with a message where FUSE is unavailable
    /// (a failure under `ATOMFS_REQUIRE_ALL=1`).
    pub fn new(scratch: &Path, size: Option<&str>) -> Option<Mounted> {
        if !have_fuse("atomfs mount") {
            return None;
        }
        let pool = scratch.join("test.pool");
        let dir = scratch.join("mnt");
        std::fs::create_dir_all(&dir).expect("mkdir mnt");
        if let Some(size) = size {
            atomfs_ok(&["mkfs", s(&pool), "--size", size]);
        }
        let mut m = Mounted {
            pool,
            dir,
            pid: None,
        };
        m.mount();
        Some(m)
    }

    /// Mount in the background; returns what `atomfs mount` printed.
    pub fn mount(&mut self) -> String {
        let out = atomfs_ok(&["mount", s(&self.pool), s(&self.dir)]);
        self.pid = out
            .split("server pid ")
            .nth(1)
            .and_then(|r| r.split(';').next())
            .and_then(|p| p.parse().ok());
        assert!(self.pid.is_some(), "no server pid in {out:?}");
        out
    }

    pub fn umount(&mut self) {
        atomfs_ok(&["umount", s(&self.dir)]);
        self.pid = None;
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.pid.is_some() {
            let _ = atomfs(&["umount", s(&self.dir)]);
        }
    }
}

/// `atomfs mkfs` an mmio store `m.pool` in `dir` whose files live in `dir/home`.
pub fn mkfs_mmio(dir: &Path) -> (PathBuf, PathBuf) {
    let pool = dir.join("m.pool");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home directory");
    atomfs_ok(&[
        "mkfs",
        s(&pool),
        "--engine",
        "mmio",
        "--home",
        s(&home),
        "--size",
        "64M",
    ]);
    (pool, home)
}
