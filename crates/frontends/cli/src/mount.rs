//! `atomfs mount` and `atomfs umount`.
//!
//! In the background, `mount` re-executes itself in the foreground (`-f --ready-notify`) in a
//! new session and waits for its "ready" line, so that every error (corrupt pool, busy
//! mount point) still reaches the terminal and the exit status.

use crate::engine::{fsck_report, fsck_text, open, open_failure};
use crate::{CmdResult, Failure};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Where the server of a mount point records its pid, for `umount` to wait on it.
fn pid_file(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let key: String = absolute
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    base.join(format!("atomfs-mount{key}.pid"))
}

fn mount_options(pool: &Path, options: &[String]) -> Result<atomfs_fuse::MountOptions, Failure> {
    let canonical = std::fs::canonicalize(pool).unwrap_or_else(|_| pool.to_path_buf());
    let mut opts = atomfs_fuse::MountOptions {
        fsname: format!("atomfs:{}", canonical.display()),
        ..Default::default()
    };
    for list in options {
        opts.parse_into(list).map_err(Failure::new)?;
    }
    Ok(opts)
}

pub fn mount(
    pool: &Path,
    dir: &Path,
    foreground: bool,
    options: &[String],
    ready_notify: bool,
) -> CmdResult {
    let opts = mount_options(pool, options)?;
    atomfs_fuse::check_mountpoint(dir).map_err(|e| Failure::new(e.to_string()))?;
    check_pool_file(pool)?;
    if foreground {
        serve(pool, dir, &opts, ready_notify)
    } else {
        spawn_server(pool, dir, options)
    }
}

/// A missing pool gets the message (with the mkfs hint) of every other command; anything
/// else that is not a regular file is refused before a server starts.
fn check_pool_file(pool: &Path) -> Result<(), Failure> {
    match std::fs::metadata(pool) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(Failure::new(format!(
            "{}: not a pool file (a pool is a regular file made by atomfs mkfs)",
            pool.display()
        ))),
        Err(source) => Err(open_failure(
            pool,
            store::Error::Io {
                path: pool.display().to_string(),
                op: "stat",
                source,
            },
        )),
    }
}

/// Foreground: open, check, serve until a signal or an unmount.
fn serve(
    pool: &Path,
    dir: &Path,
    opts: &atomfs_fuse::MountOptions,
    ready_notify: bool,
) -> CmdResult {
    // Before any thread starts (the engine's checkpoint threads), so that they inherit it.
    atomfs_fuse::block_termination_signals()?;
    let fs = match open(pool) {
        Ok(fs) => fs,
        Err(failure) => {
            // A damaged pool: show fsck's report instead of the bare error.
            return match fsck_report(pool) {
                Ok((report, false)) => Err(Failure::new(format!(
                    "refusing to mount {}: it is not consistent.\n{}",
                    pool.display(),
                    fsck_text(&report)
                ))),
                _ => Err(failure),
            };
        }
    };
    let report = fs.fsck()?;
    if !report.is_clean() {
        let lines: Vec<String> = report
            .problems
            .iter()
            .map(|p| format!("  - {} (at {})", p.what, p.location))
            .collect();
        return Err(Failure::new(format!(
            "refusing to mount {}: fsck found {} problem(s):\n{}",
            pool.display(),
            report.problems.len(),
            lines.join("\n")
        )));
    }
    if let Some(summary) = recovery_note(&**fs.store()) {
        // On stdout: the background parent relays every line before "ready".
        println!("{summary}");
    }
    let pid_path = pid_file(dir);
    let ready = || {
        let _ = std::fs::write(&pid_path, std::process::id().to_string());
        if ready_notify {
            println!("ready");
            let _ = std::io::stdout().flush();
            detach_output();
        } else {
            eprintln!(
                "atomfs: serving {} on {} (Ctrl-C to unmount)",
                pool.display(),
                dir.display()
            );
        }
    };
    // The mount's owner process serves other processes' front ends too (docs/serve.md);
    // what its clients change, the kernel is told to forget (its cache of this mount).
    let owner = !fs.store().as_any().is::<remote::RemoteStore>();
    let socket = remote::socket_for(pool);
    let served =
        atomfs_fuse::serve_until_signal_with(fs.store().clone(), dir, opts, ready, |mount| {
            if !owner {
                return Ok(None);
            }
            let kernel = mount.invalidator();
            let observer: remote::Observer = std::sync::Arc::new(move |change| match change {
                remote::Change::Inode(ino) => kernel.inode(ino),
                remote::Change::Entry { parent, name } => kernel.entry(parent, name),
            });
            remote::serve_observed(fs.store().clone(), &socket, Some(observer))
                .map(Some)
                .map_err(|e| std::io::Error::other(format!("serving {}: {e}", pool.display())))
        });
    let _ = std::fs::remove_file(&pid_path);
    drop(fs);
    served.map_err(|e| Failure::new(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// Point stdout and stderr at /dev/null: the parent that read them has gone.
fn detach_output() {
    use std::os::unix::io::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        for fd in [1, 2] {
            // SAFETY: dup2 between two descriptors this process owns; `null` stays open for
            // the call and the targets are the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// Background: run `atomfs mount -f --ready-notify` and wait for it to be ready.
fn spawn_server(pool: &Path, dir: &Path, options: &[String]) -> CmdResult {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(pool)
        .arg(dir)
        .arg("-f")
        .arg("--ready-notify");
    for o in options {
        cmd.arg("-o").arg(o);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and only calls setsid(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            // A new session without a controlling terminal: closing the terminal leaves the
            // server running.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let mut reader = BufReader::new(out);
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(n) if n > 0 && line.trim() != "ready" => print!("{line}"),
                _ => break,
            }
        }
    }
    if line.trim() == "ready" {
        println!(
            "mounted {} on {} (server pid {}; stop with: atomfs umount {})",
            pool.display(),
            dir.display(),
            child.id(),
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = child.wait()?;
    let err = err.trim().trim_start_matches("atomfs: ").to_string();
    Err(Failure::new(if err.is_empty() {
        format!("mount server exited ({status})")
    } else {
        err
    }))
}

pub fn umount(dir: &Path) -> CmdResult {
    match atomfs_fuse::is_mount_point(dir) {
        Ok(true) => {}
        Ok(false) => return Err(Failure::new(format!("{} is not mounted", dir.display()))),
        Err(e) => return Err(Failure::new(format!("{}: {e}", dir.display()))),
    }
    let pid: Option<i32> = std::fs::read_to_string(pid_file(dir))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    // A busy mount is often busy for a moment only (a process that forked while holding one
    // of its files keeps it until it execs): retry for two seconds before giving up.
    let started = Instant::now();
    let out = loop {
        let out = Command::new("fusermount3")
            .arg("-u")
            .arg(dir)
            .output()
            .map_err(|e| {
                Failure::new(format!(
                    "cannot run fusermount3 (install the fuse3 package): {e}"
                ))
            })?;
        let busy = String::from_utf8_lossy(&out.stderr).contains("busy");
        if out.status.success() || !busy || started.elapsed() > Duration::from_secs(2) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let hint = if msg.contains("busy") {
            " (a program still uses files or its working directory there)"
        } else {
            ""
        };
        return Err(Failure::new(format!(
            "cannot unmount {}: {msg}{hint}",
            dir.display()
        )));
    }
    if let Some(pid) = pid {
        // Wait for the server to checkpoint and exit, so that the pool can be reused at once.
        let started = Instant::now();
        // SAFETY: kill with signal 0 only checks that the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    println!("unmounted {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// A line about the recovery the open ran, when it found anything to do.
fn recovery_note(store: &dyn store::Store) -> Option<String> {
    let report = crate::poolview::pool_recovery(store)?;
    let get = |k: &str| {
        report
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    let work =
        get("committed_txs") + get("undone_txs") + get("torn_entries") + get("orphans_freed");
    (work > 0).then(|| {
        format!(
            "recovered the pool in {} µs {}",
            get("micros"),
            crate::poolview::recovery_summary(&report)
        )
    })
}
