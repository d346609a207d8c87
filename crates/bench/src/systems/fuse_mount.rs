//! An atomfs pool in /dev/shm mounted with the `atomfs` command (`atomfs mkfs`, `atomfs
//! mount`, docs/fuse.md), as a user mounts it. Unmounted (`atomfs umount`, which checkpoints
//! and waits for the server; `fusermount3 -u -z` if that fails) and deleted on drop, so also
//! on errors and after Ctrl-C (the server runs in its own session and does not see the
//! terminal's SIGINT).

use crate::error::{BenchError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct AtomfsMount {
    cli: PathBuf,
    pool: PathBuf,
    dir: PathBuf,
    mounted: bool,
}

/// The `atomfs` binary: `ATOMFS_BIN`, else next to this executable (test binaries live one
/// level down, in deps/), else on PATH.
pub fn cli_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ATOMFS_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(d) = &exe_dir {
        candidates.push(d.join("atomfs"));
        if let Some(p) = d.parent() {
            candidates.push(p.join("atomfs"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("atomfs")));
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        BenchError::Skipped(
            "the atomfs command was not found next to atomfs-bench nor on PATH (build it: \
             cargo build --release -p atomfs-cli; or set ATOMFS_BIN)"
                .into(),
        )
    })
}

/// Why FUSE cannot be used here, if it cannot.
fn fuse_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse (FUSE not available in this kernel or container)".into());
    }
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").is_file()));
    (!found).then(|| "fusermount3 missing (package fuse3: scripts/install-deps.sh)".into())
}

fn run(cmd: &mut Command) -> std::result::Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl AtomfsMount {
    /// `atomfs mkfs` a pool of `size` bytes in /dev/shm and `atomfs mount` it on a fresh
    /// directory. `Skipped` when FUSE or the atomfs command is missing or the mount fails.
    pub fn create(size: u64) -> Result<Self> {
        if let Some(why) = fuse_missing() {
            return Err(BenchError::Skipped(why));
        }
        let cli = cli_binary()?;
        let mut m = AtomfsMount {
            cli,
            pool: crate::scratch_path("fuse.pool"),
            dir: crate::scratch_dir_path("fuse-mnt"),
            mounted: false,
        };
        std::fs::create_dir_all(&m.dir).map_err(|e| BenchError::io("mkdir", &m.dir, e))?;
        let fail = |message: String| BenchError::System {
            system: "atomfs-fuse".into(),
            message,
        };
        run(Command::new(&m.cli)
            .arg("mkfs")
            .arg(&m.pool)
            .arg("--size")
            .arg(size.to_string()))
        .map_err(fail)?;
        // A mount the machine refuses (no permission for FUSE, no fuse module) skips this
        // system with the reason, as a missing /dev/fuse does; the other targets still run.
        run(Command::new(&m.cli).arg("mount").arg(&m.pool).arg(&m.dir))
            .map_err(|why| BenchError::Skipped(format!("atomfs mount failed: {why}")))?;
        m.mounted = true;
        Ok(m)
    }

    /// The mounted directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What this is, for the JSON.
    pub fn label(&self) -> String {
        format!(
            "atomfs pool {} mounted on {} with `{} mount` (FUSE, default options)",
            self.pool.display(),
            self.dir.display(),
            self.cli.display()
        )
    }
}

impl Drop for AtomfsMount {
    fn drop(&mut self) {
        if self.mounted {
            let clean = run(Command::new(&self.cli).arg("umount").arg(&self.dir));
            if clean.is_err() {
                let _ = run(Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&self.dir));
            }
            self.mounted = false;
        }
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::remove_file(&self.pool);
    }
}
