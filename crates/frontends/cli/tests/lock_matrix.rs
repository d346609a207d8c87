//! One owner per store, whichever front end each side uses.
//!
//! The story: the CLI and the FUSE server used to lock the pool file itself while the shim,
//! the C API and the SQLite VFS locked a separate `<pool>.lock`, so neither saw the other. One
//! `mkdir` through the shim on a mounted pool, then 20 writes on the mount, left a pool with a
//! block referenced twice that no longer mounted. Now every front end opens stores through the
//! engine registry, which locks the pool file itself; this test holds a store open through each
//! front end in turn and tries to open it through every other one (and the same one in another
//! process), both ways: each second opener must be refused with EBUSY naming the holder, and
//! open it once the holder is gone — except when the holder serves the store (the FUSE mount
//! and a program under the shim do, as `atomfs serve` does): then every other front end must
//! open it as a client.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use support::*;
use test_support::cc::{cc, have_cc};
use test_support::fuse::have_fuse;
use test_support::{have, unavailable};

fn lib_dir() -> PathBuf {
    PathBuf::from(ATOMFS).parent().unwrap().to_path_buf()
}

const PROBE_C: &str = r#"
#include <atomfs.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    atomfs_pool *p = atomfs_pool_open(argv[1]);
    if (!p) { fprintf(stderr, "open: %s (errno %d)\n", strerror(errno), errno); return 3; }
    if (!strcmp(argv[2], "hold")) {
        char c;
        printf("ready\n");
        fflush(stdout);
        if (read(0, &c, 1) < 0) return 4;
    }
    atomfs_pool_close(p);
    return 0;
}
"#;

struct Tools {
    probe: Option<PathBuf>,
    sqlite_ext: Option<PathBuf>,
    fuse: bool,
}

fn build_tools(dir: &Path) -> Tools {
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../capi/include");
    let lib = lib_dir();
    let src = dir.join("probe.c");
    std::fs::write(&src, PROBE_C).unwrap();
    let probe = dir.join("probe");
    let (inc, libs, rpath) = (
        format!("-I{}", include.display()),
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
    );
    let probe = have_cc().then(|| {
        cc(&[&inc, s(&src), &libs, "-latomfs", &rpath, "-o", s(&probe)]);
        probe
    });
    let sqlite_ext = if !Path::new("/usr/include/sqlite3ext.h").exists() || !have("sqlite3") {
        unavailable(
            "SQLite VFS",
            "no sqlite3 shell or sqlite3ext.h (libsqlite3-dev)",
        );
        None
    } else {
        let ext = dir.join("libatomfs_sqlite.so");
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sqlite/atomfs_sqlite.c");
        cc(&[
            "-std=c99",
            "-fPIC",
            "-shared",
            &inc,
            s(&source),
            &libs,
            "-latomfs",
            &rpath,
            "-o",
            s(&ext),
        ]);
        Some(ext)
    };
    let fuse = have_fuse("FUSE");
    Tools {
        probe,
        sqlite_ext,
        fuse,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Front {
    Rust,
    Cli,
    Fuse,
    Capi,
    Shim,
    Sqlite,
}

const ALL: [Front; 6] = [
    Front::Rust,
    Front::Cli,
    Front::Fuse,
    Front::Capi,
    Front::Shim,
    Front::Sqlite,
];

fn shim_cmd(pool: &Path, program: &str) -> Command {
    let mut c = Command::new(program);
    c.env("LD_PRELOAD", lib_dir().join("libatomfs_preload.so"))
        .env("ATOMFS_POOL", pool)
        .env("ATOMFS_PREFIX", "/atomfs");
    c
}

fn sqlite_script(ext: &Path, pool: &Path) -> String {
    format!(
        ".bail on\n.load {}\n.open file:/lock.db?vfs=atomfs&pool={}\nselect count(*) from sqlite_master;\n",
        ext.with_extension("").display(),
        pool.display()
    )
}

/// A process (or, for the Rust API, this test) holding the store open.
enum Holder {
    Rust(atomfs::Fs),
    Process(Child, Option<ChildStdin>),
    Mount(PathBuf),
}

impl Holder {
    fn release(self) {
        match self {
            Holder::Rust(fs) => fs.unmount().unwrap(),
            Holder::Process(mut child, stdin) => {
                drop(stdin);
                let _ = child.wait();
            }
            Holder::Mount(dir) => {
                let r = atomfs(&["umount", dir.to_str().unwrap()]);
                assert!(r.ok(), "umount: {}", r.stderr);
            }
        }
    }
}

fn wait_ready(mut child: Child, stdin: Option<ChildStdin>, what: &str) -> Holder {
    let mut seen = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..5 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 || line.contains("ready") {
            seen.push_str(&line);
            break;
        }
        seen.push_str(&line);
    }
    assert!(
        seen.contains("ready"),
        "{what} holder did not start: {seen:?}"
    );
    Holder::Process(child, stdin)
}

fn hold(front: Front, pool: &Path, dir: &Path, tools: &Tools) -> Option<Holder> {
    match front {
        Front::Rust => Some(Holder::Rust(
            atomfs::Fs::open(pool, atomfs::Config::default()).unwrap(),
        )),
        // The CLI's long-lived holder is its FUSE server; its short commands are openers.
        Front::Cli => None,
        Front::Fuse => {
            if !tools.fuse {
                return None;
            }
            let mnt = dir.join("mnt");
            std::fs::create_dir_all(&mnt).unwrap();
            atomfs_ok(&["mount", pool.to_str().unwrap(), mnt.to_str().unwrap()]);
            Some(Holder::Mount(mnt))
        }
        Front::Capi => {
            let probe = tools.probe.as_ref()?;
            let mut child = Command::new(probe)
                .arg(pool)
                .arg("hold")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take();
            Some(wait_ready(child, stdin, "C API"))
        }
        Front::Shim => {
            let mut child = shim_cmd(pool, "sh")
                .args(["-c", "exec 3</atomfs/a; echo ready; read x; true"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take();
            Some(wait_ready(child, stdin, "shim"))
        }
        Front::Sqlite => {
            let ext = tools.sqlite_ext.as_ref()?;
            let mut child = Command::new("sqlite3")
                .arg("-batch")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let script = format!("{}.print ready\n", sqlite_script(ext, pool));
            stdin.write_all(script.as_bytes()).unwrap();
            stdin.flush().unwrap();
            Some(wait_ready(child, Some(stdin), "SQLite"))
        }
    }
}

/// Try to open the store through `front`: Ok, or the error text.
fn try_open(front: Front, pool: &Path, dir: &Path, tools: &Tools) -> Option<Result<(), String>> {
    let text = |o: std::process::Output| {
        if o.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&o.stderr).into_owned())
        }
    };
    match front {
        Front::Rust => Some(
            atomfs::Fs::open(pool, atomfs::Config::default())
                .map(|fs| fs.unmount().unwrap())
                .map_err(|e| format!("{e} (errno {})", e.errno())),
        ),
        Front::Cli => {
            let r = atomfs(&["ls", pool.to_str().unwrap()]);
            Some(if r.ok() { Ok(()) } else { Err(r.stderr) })
        }
        Front::Fuse => {
            if !tools.fuse {
                return None;
            }
            let mnt = dir.join("mnt2");
            std::fs::create_dir_all(&mnt).unwrap();
            let r = atomfs(&["mount", pool.to_str().unwrap(), mnt.to_str().unwrap()]);
            if r.ok() {
                atomfs_ok(&["umount", mnt.to_str().unwrap()]);
                Some(Ok(()))
            } else {
                Some(Err(r.stderr))
            }
        }
        Front::Capi => {
            let probe = tools.probe.as_ref()?;
            Some(text(
                Command::new(probe).arg(pool).arg("try").output().unwrap(),
            ))
        }
        Front::Shim => Some(text(
            shim_cmd(pool, "cat").arg("/atomfs/a").output().unwrap(),
        )),
        Front::Sqlite => {
            let ext = tools.sqlite_ext.as_ref()?;
            let mut child = Command::new("sqlite3")
                .arg("-batch")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(sqlite_script(ext, pool).as_bytes())
                .unwrap();
            // The shell goes on after a failed .open (on an in-memory database): its message
            // is the failure.
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            Some(
                if out.status.success() && !stderr.contains("unable to open") {
                    Ok(())
                } else {
                    Err(stderr)
                },
            )
        }
    }
}

#[test]
fn every_pair_of_front_ends_sees_one_owner_both_ways() {
    let dir = scratch("lock-matrix");
    let pool = dir.join("m.pool");
    atomfs_ok(&["mkfs", pool.to_str().unwrap(), "--size", "32M"]);
    let a = dir.join("a");
    std::fs::write(&a, b"x").unwrap();
    atomfs_ok(&["put", pool.to_str().unwrap(), a.to_str().unwrap(), "/a"]);
    let tools = build_tools(&dir);
    let (mut checked, mut served) = (0, 0);
    for holder_front in ALL {
        let Some(holder) = hold(holder_front, &pool, &dir, &tools) else {
            continue;
        };
        for opener in ALL {
            let Some(result) = try_open(opener, &pool, &dir, &tools) else {
                continue;
            };
            if matches!(holder_front, Front::Fuse | Front::Shim) {
                // The mount's process, and a program under the shim, serve the store: every
                // other front end is their client.
                result.unwrap_or_else(|e| {
                    panic!("{opener:?} could not open a store served through {holder_front:?}: {e}")
                });
                served += 1;
                continue;
            }
            let error = result.err().unwrap_or_else(|| {
                panic!("{opener:?} opened a store held through {holder_front:?}")
            });
            // The SQLite shell reports only "unable to open database"; the others say why.
            if opener != Front::Sqlite {
                assert!(
                    error.contains("in use by process") || error.contains("busy"),
                    "{opener:?} refused by {holder_front:?}'s holder, but not as busy: {error}"
                );
            }
            checked += 1;
        }
        holder.release();
        // Once the holder is gone, every front end opens the store again.
        for opener in ALL {
            if let Some(result) = try_open(opener, &pool, &dir, &tools) {
                result.unwrap_or_else(|e| {
                    panic!("{opener:?} after {holder_front:?} released the store: {e}")
                });
            }
        }
    }
    eprintln!("lock matrix: {checked} holder/opener pairs refused, {served} served as clients");
    assert!(checked >= 10, "only {checked} pairs could run");
    assert!(
        served >= 4,
        "only {served} front ends reached a mounted store as clients"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mkfs_force_refuses_a_mounted_store_and_loses_nothing() {
    if !have_fuse("FUSE") {
        return;
    }
    let dir = scratch("force-mounted");
    let pool = dir.join("p.pool");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    atomfs_ok(&["mkfs", pool.to_str().unwrap(), "--size", "32M"]);
    atomfs_ok(&["mount", pool.to_str().unwrap(), mnt.to_str().unwrap()]);
    std::fs::write(mnt.join("precious"), b"keep me").unwrap();
    let r = atomfs(&["mkfs", pool.to_str().unwrap(), "--size", "32M", "--force"]);
    let still = std::fs::read(mnt.join("precious"));
    atomfs_ok(&["umount", mnt.to_str().unwrap()]);
    assert!(!r.ok(), "mkfs --force replaced a mounted store");
    assert!(r.stderr.contains("in use by process"), "{}", r.stderr);
    assert_eq!(still.unwrap(), b"keep me");
    let out = atomfs_ok(&["cat", pool.to_str().unwrap(), "/precious"]);
    assert_eq!(out, "keep me", "the mount's writes were lost");
    // Not in use: --force replaces it.
    atomfs_ok(&["mkfs", pool.to_str().unwrap(), "--size", "32M", "--force"]);
    assert!(!atomfs(&["cat", pool.to_str().unwrap(), "/precious"]).ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_mmio_store_is_reached_by_its_pool_path_alone() {
    let dir = scratch("mmio-path");
    let (pool, home) = mkfs_mmio(&dir);
    let src = dir.join("src");
    std::fs::write(&src, b"through mmio").unwrap();
    atomfs_ok(&["put", pool.to_str().unwrap(), src.to_str().unwrap(), "/f"]);
    assert_eq!(
        atomfs_ok(&["cat", pool.to_str().unwrap(), "/f"]),
        "through mmio"
    );
    assert_eq!(std::fs::read(home.join("f")).unwrap(), b"through mmio");
    let info = atomfs_ok(&["info", pool.to_str().unwrap(), "--json"]);
    assert!(info.contains("\"engine\": \"mmio"), "{info}");
    // Bad input: one line, exit 1, nothing created.
    let other = dir.join("other.pool");
    for args in [
        vec!["--engine", "nosuch"],
        vec!["--home", home.to_str().unwrap()],
        vec!["--engine", "mmio"],
        vec!["-o", "colour=red"],
    ] {
        let mut all = vec!["mkfs", other.to_str().unwrap(), "--size", "32M"];
        all.extend(args.iter().copied());
        let r = atomfs(&all);
        assert_eq!(r.code, Some(1), "{all:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{all:?}: {}", r.stderr);
        assert!(!other.exists(), "{all:?} created a file");
    }
    std::fs::write(&other, vec![9u8; 8192]).unwrap();
    let r = atomfs(&["ls", other.to_str().unwrap()]);
    assert!(
        r.stderr.contains("no engine recognised") && r.stderr.contains("pool, mmio"),
        "{}",
        r.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
