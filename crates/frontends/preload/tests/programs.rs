//! Unmodified programs under the shim (LD_PRELOAD=libatomfs_preload.so, ATOMFS_PREFIX=/atomfs):
//! the `sqlite3` shell with its default rollback journal, `tar`, `cp`, `fio` (psync,
//! verify=crc32c), a C program using tx_* / O_ATOMIC on ordinary descriptors (killed before
//! its commit, then committed), the fork rule, and a pool that cannot be opened.
//! Each test skips with a message when its tool is missing (a failure under
//! `ATOMFS_REQUIRE_ALL=1`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use test_support::cc::{compile, have_cc, lib_dir};
use test_support::{checked as ok, have};

fn scratch(name: &str) -> test_support::Scratch {
    test_support::scratch(&format!("preload-{name}"))
}

fn shim() -> PathBuf {
    lib_dir().join("libatomfs_preload.so")
}

/// Run `program args` under the shim with the pool in `dir`.
fn under_shim(dir: &Path, program: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", shim())
        .env("ATOMFS_POOL", dir.join("pool"))
        .env("ATOMFS_PREFIX", "/atomfs")
        .env("ATOMFS_CREATE_SIZE", "0")
        .env("LD_LIBRARY_PATH", lib_dir());
    if let Some(input) = stdin {
        use std::io::Write;
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        return child.wait_with_output().expect("wait");
    }
    cmd.output().expect("run program")
}

#[test]
fn sqlite3_shell_with_rollback_journal() {
    if !have("sqlite3") {
        return;
    }
    let dir = scratch("sqlite");
    let script = "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);\n\
                  BEGIN; INSERT INTO t(v, pad) SELECT value, randomblob(40) FROM generate_series(1, 10000); COMMIT;\n\
                  UPDATE t SET v = v + 1 WHERE id % 2 = 0;\n\
                  BEGIN; DELETE FROM t; ROLLBACK;\n\
                  PRAGMA journal_mode;\nSELECT count(*), sum(v) FROM t;\nPRAGMA integrity_check;\n";
    let out = ok(
        &under_shim(&dir, "sqlite3", &["-batch", "/atomfs/app.db"], Some(script)),
        "sqlite3",
    );
    let sum: i64 = (1..=10000i64).sum::<i64>() + 5000;
    assert_eq!(out, format!("delete\n10000|{sum}\nok\n"));
    // A second process reads it back; the journal is gone.
    let out = ok(
        &under_shim(
            &dir,
            "sqlite3",
            &["/atomfs/app.db", "SELECT count(*) FROM t"],
            None,
        ),
        "sqlite3 reopen",
    );
    assert_eq!(out, "10000\n");
    let out = ok(&under_shim(&dir, "ls", &["/atomfs"], None), "ls");
    assert_eq!(out, "app.db\n");
}

#[test]
fn cp_and_tar_round_trip() {
    if !have("cp") || !have("tar") || !have("diff") {
        return;
    }
    let dir = scratch("cptar");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(src.join("big.bin"), &big).unwrap();
    std::fs::write(src.join("sub/small.txt"), b"small\n").unwrap();
    std::fs::write(src.join("empty"), b"").unwrap();
    let s = |p: &Path| p.to_str().expect("utf-8 path").to_string();

    ok(
        &under_shim(&dir, "cp", &["-r", &s(&src), "/atomfs/tree"], None),
        "cp -r in",
    );
    ok(
        &under_shim(
            &dir,
            "cp",
            &["-r", "/atomfs/tree", &s(&dir.join("back"))],
            None,
        ),
        "cp -r out",
    );
    ok(
        &Command::new("diff")
            .args(["-r", &s(&src), &s(&dir.join("back"))])
            .output()
            .unwrap(),
        "diff cp",
    );

    ok(
        &under_shim(
            &dir,
            "tar",
            &["cf", "/atomfs/a.tar", "-C", &s(&src), "."],
            None,
        ),
        "tar c",
    );
    let out = dir.join("untar");
    std::fs::create_dir_all(&out).unwrap();
    ok(
        &under_shim(&dir, "tar", &["xf", "/atomfs/a.tar", "-C", &s(&out)], None),
        "tar x",
    );
    ok(
        &Command::new("diff")
            .args(["-r", &s(&src), &s(&out)])
            .output()
            .unwrap(),
        "diff tar",
    );
    // The archive listing, read from the pool by a fresh process.
    let list = ok(
        &under_shim(&dir, "tar", &["tf", "/atomfs/a.tar"], None),
        "tar t",
    );
    assert!(list.contains("./sub/small.txt"), "{list}");
}

#[test]
fn fio_psync_verify_crc32c() {
    if !have("fio") {
        return;
    }
    let dir = scratch("fio");
    let args = [
        "--name=verify",
        "--filename=/atomfs/fio.dat",
        "--ioengine=psync",
        "--rw=randwrite",
        "--bs=4k",
        "--size=256k",
        "--verify=crc32c",
        "--do_verify=1",
        "--thread",
        "--minimal",
        // No verify state file left in the working directory (the crate's source folder).
        "--verify_state_save=0",
    ];
    let out = ok(&under_shim(&dir, "fio", &args, None), "fio");
    // terse format: field 6 is the KB read by the verify pass, field 47 the KB written.
    let fields: Vec<&str> = out.trim().split(';').collect();
    assert_eq!(fields.get(5), Some(&"256"), "verify read: {out}");
    assert!(!out.contains("verify failed"), "{out}");
}

fn build_c(dir: &Path) -> Option<PathBuf> {
    if !have_cc() {
        return None;
    }
    let exe = dir.join("shim_tx");
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let include = crate_dir.join("../capi/include");
    // No -latomfs: tx_* and syncv/abortv come from the preloaded shim at run time.
    let src = crate_dir.join("tests/c/shim_tx.c");
    compile(&src, &exe, &include, &["-std=c99", "-ldl", "-lpthread"]);
    Some(exe)
}

fn cat(dir: &Path, path: &str) -> String {
    ok(&under_shim(dir, "cat", &[path], None), "cat")
}

#[test]
fn transactions_and_o_atomic_on_ordinary_descriptors() {
    let dir = scratch("tx");
    let Some(exe) = build_c(&dir) else { return };
    let exe = exe.to_str().unwrap().to_string();
    ok(
        &under_shim(&dir, "cp", &["/dev/null", "/atomfs/a"], None),
        "create a",
    );
    ok(
        &under_shim(
            &dir,
            "sh",
            &["-c", "printf old-a > /atomfs/a; printf old-b > /atomfs/b"],
            None,
        ),
        "fill",
    );
    // `sh` itself redirects with its own open: under the shim too.
    assert_eq!(cat(&dir, "/atomfs/a"), "old-a");

    let crashed = under_shim(&dir, &exe, &["/atomfs", "crash-tx"], None);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&crashed.status),
        Some(libc::SIGKILL)
    );
    assert_eq!(
        (cat(&dir, "/atomfs/a"), cat(&dir, "/atomfs/b")),
        ("old-a".into(), "old-b".into())
    );
    assert_eq!(
        ok(
            &under_shim(&dir, &exe, &["/atomfs", "commit-tx"], None),
            "commit-tx"
        ),
        "committed\n"
    );
    assert_eq!(
        (cat(&dir, "/atomfs/a"), cat(&dir, "/atomfs/b")),
        ("new-a".into(), "new-b".into())
    );

    let crashed = under_shim(&dir, &exe, &["/atomfs", "crash-atomic"], None);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&crashed.status),
        Some(libc::SIGKILL)
    );
    assert_eq!(cat(&dir, "/atomfs/a"), "new-a");
    assert_eq!(
        ok(
            &under_shim(&dir, &exe, &["/atomfs", "atomic"], None),
            "atomic"
        ),
        "synced\n"
    );
    assert_eq!(cat(&dir, "/atomfs/a"), "ATOMIC");

    assert_eq!(
        ok(
            &under_shim(&dir, &exe, &["/atomfs", "errors"], None),
            "errors"
        ),
        "errors ok\n"
    );
    assert_eq!(
        ok(&under_shim(&dir, &exe, &["/atomfs", "fork"], None), "fork"),
        "fork ok\n"
    );
    let socket = dir.join("pool.sock");
    assert!(!socket.exists(), "the server's socket outlived its process");
    let noserve = Command::new(&exe)
        .args(["/atomfs", "fork-noserve"])
        .env("LD_PRELOAD", shim())
        .env("ATOMFS_POOL", dir.join("pool"))
        .env("ATOMFS_SERVE", "0")
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    assert_eq!(ok(&noserve, "fork-noserve"), "fork ok\n");
}

#[test]
fn unusable_pool_fails_only_under_the_prefix_with_one_message() {
    let dir = scratch("nopool");
    let src = dir.join("file");
    std::fs::write(&src, b"outside\n").unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cat {0}; cat /atomfs/a /atomfs/b; cp {0} {0}.copy && cat {0}.copy",
            src.display()
        ))
        .env("LD_PRELOAD", shim())
        .env("ATOMFS_POOL", dir.join("missing/pool"))
        .env_remove("ATOMFS_CREATE_SIZE")
        .output()
        .expect("run sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "outside\noutside\n", "stderr: {stderr}");
    // One message per process that touched the prefix (here: the one `cat`), and the
    // calls failed with an errno cat reports.
    assert_eq!(
        stderr.matches("atomfs-preload: cannot open pool").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("cat: /atomfs/a: No such file or directory"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cat: /atomfs/b: No such file or directory"),
        "{stderr}"
    );
}

#[test]
fn paths_leaving_the_prefix_go_to_the_real_file_system() {
    if !have("ls") {
        return;
    }
    let dir = scratch("dotdot");
    let real = dir.join("real.txt");
    std::fs::write(&real, b"real file\n").unwrap();
    // "/atomfs/../<dir>/real.txt" is the real file: the shim hands libc the normalised path.
    let through = format!("/atomfs/..{}", real.display());
    assert_eq!(cat(&dir, &through), "real file\n");
    // `ls -la /atomfs` stats "/atomfs/.." (the real /) without an error.
    let out = under_shim(&dir, "ls", &["-la", "/atomfs"], None);
    ok(&out, "ls -la");
    assert!(
        String::from_utf8_lossy(&out.stderr).is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_pool_open_in_another_process_is_shared_through_its_server_or_busy() {
    if !have("sleep") {
        return;
    }
    let dir = scratch("busy");
    ok(
        &under_shim(&dir, "sh", &["-c", "printf x > /atomfs/a"], None),
        "create",
    );
    for serve in [true, false] {
        // The holder: a shell that opened the pool (its redirect) and stays alive a while
        // (the trailing `true` keeps the shell from exec-ing `sleep`, which would close it).
        let mut holder = Command::new("sh")
            .args(["-c", "exec 3</atomfs/a; echo held; sleep 2; true"])
            .env("LD_PRELOAD", shim())
            .env("ATOMFS_POOL", dir.join("pool"))
            .env("ATOMFS_SERVE", if serve { "1" } else { "0" })
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "held\n");
        let out = under_shim(&dir, "cat", &["/atomfs/a"], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if serve {
            // The holder serves its pool: the second program is its client.
            assert!(
                out.status.success(),
                "a client of the holder failed: {stderr}"
            );
            assert_eq!(String::from_utf8_lossy(&out.stdout), "x");
        } else {
            assert!(
                !out.status.success(),
                "a second process opened a pool in use"
            );
            assert!(stderr.contains("in use by process"), "{stderr}");
            assert!(stderr.contains("Device or resource busy"), "{stderr}");
        }
        holder.wait().unwrap();
    }
    // Once the holder is gone the pool opens again.
    assert_eq!(cat(&dir, "/atomfs/a"), "x");
}

/// `program args` under the shim with the umask `initial` set before exec (so the shim
/// reads it from /proc/self/status).
fn under_shim_with_umask(
    dir: &Path,
    initial: libc::mode_t,
    program: &str,
    args: &[&str],
) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", shim())
        .env("ATOMFS_POOL", dir.join("pool"))
        .env("ATOMFS_PREFIX", "/atomfs")
        .env("ATOMFS_CREATE_SIZE", "0");
    // SAFETY: umask(2) is async-signal-safe and cannot fail; it changes only the child.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(initial);
            Ok(())
        });
    }
    cmd.output().expect("run program")
}

#[test]
fn created_files_and_directories_get_the_umask_the_program_starts_with() {
    if !have("mkdir") || !have("touch") || !have("stat") {
        return;
    }
    let dir = scratch("umask");
    for (mask, name, expected) in [(0o022, "a", "644\n755\n"), (0o077, "b", "600\n700\n")] {
        // Only the programs sh runs touch the pool (one process holds it at a time).
        let script = format!(
            "mkdir /atomfs/{name}.d && touch /atomfs/{name}.f && stat -c %a /atomfs/{name}.f /atomfs/{name}.d"
        );
        let out = under_shim_with_umask(&dir, mask, "sh", &["-c", &script]);
        assert_eq!(ok(&out, "create"), expected, "umask {mask:o}");
    }
}

#[test]
fn created_files_and_directories_get_the_umask_the_program_sets() {
    if !have("python3") {
        return;
    }
    let dir = scratch("umask-set");
    // os.umask calls umask(); each mask applies to the creates after it, in the same process.
    let script = r#"
import os
def create(name, mask):
    old = os.umask(mask)
    os.mkdir("/atomfs/" + name + ".d")
    with open("/atomfs/" + name + ".f", "w"):
        pass
    st = [os.stat("/atomfs/" + name + s).st_mode & 0o7777 for s in (".f", ".d")]
    print("%o %o %o" % (old, st[0], st[1]))
create("a", 0o077)
create("b", 0o022)
create("c", 0o027)
os.mkdir("/atomfs/d.d", 0o750)
print("%o" % (os.stat("/atomfs/d.d").st_mode & 0o7777))
"#;
    let out = under_shim_with_umask(&dir, 0o002, "python3", &["-c", script]);
    assert_eq!(
        ok(&out, "python3"),
        "2 600 700\n77 644 755\n22 640 750\n750\n"
    );
}

/// Descriptors a shell opens under the prefix survive exec (and fork): the programs it runs
/// write and read them through the shell's store server, with one offset for all of them;
/// `exec` without a fork (the owner replaced by the program) works too.
#[test]
fn shell_redirections_reach_the_programs_they_run() {
    let dir = scratch("exec");
    for tool in ["sh", "sort", "seq", "tee"] {
        if !have(tool) {
            return test_support::unavailable("shell redirections", &format!("{tool} missing"));
        }
    }
    let script = "\
        /usr/bin/printf '%s\\n' one two > /atomfs/out; \
        { /usr/bin/printf a; /usr/bin/printf b; echo c; /usr/bin/printf d; } > /atomfs/seq; \
        seq 3 | sort -r > /atomfs/sorted; \
        echo x >> /atomfs/log; /bin/echo y >> /atomfs/log; sort -r < /atomfs/log > /atomfs/copy; \
        ( /usr/bin/printf sub; echo shell ) > /atomfs/subshell; \
        echo teed | tee /atomfs/tee-arg > /atomfs/tee-out";
    ok(&under_shim(&dir, "sh", &["-c", script], None), "script");
    let expect = [
        ("/atomfs/out", "one\ntwo\n"),
        ("/atomfs/seq", "abc\nd"),
        ("/atomfs/sorted", "3\n2\n1\n"),
        ("/atomfs/log", "x\ny\n"),
        ("/atomfs/copy", "y\nx\n"),
        ("/atomfs/subshell", "subshell\n"),
        ("/atomfs/tee-arg", "teed\n"),
        ("/atomfs/tee-out", "teed\n"),
    ];
    for (path, want) in expect {
        assert_eq!(cat(&dir, path), want, "{path}");
    }
    // The shell execs its last command in place: the program is then the pool's only user.
    ok(
        &under_shim(
            &dir,
            "sh",
            &["-c", "exec /usr/bin/printf solo > /atomfs/solo"],
            None,
        ),
        "exec in place",
    );
    assert_eq!(cat(&dir, "/atomfs/solo"), "solo");
}

#[test]
fn chown_and_utimes_are_stored_in_the_pool() {
    if !have("sh") || !have("touch") || !have("stat") || !have("chown") || !have("chmod") {
        return;
    }
    let dir = scratch("owner-times");
    // touch -d sets explicit times (utimensat); each command is its own process, so what the
    // last one prints was read back from the pool.
    let script = "touch /atomfs/f && touch -m -d @981173106 /atomfs/f \
                  && touch -a -d @1000000000 /atomfs/f && ln -s f /atomfs/l \
                  && touch -h -m -d @1234567890 /atomfs/l && stat -c '%Y %X' /atomfs/f";
    let out = under_shim(&dir, "sh", &["-c", script], None);
    assert_eq!(ok(&out, "utimes"), "981173106 1000000000\n");
    let out = under_shim(&dir, "stat", &["-c", "%Y", "/atomfs/l"], None);
    assert_eq!(ok(&out, "a symlink's own mtime"), "1234567890\n");
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // Root gives the file away; the change clears set-user-ID and (group-executable)
        // set-group-ID, as Linux does.
        let script = "chmod 6755 /atomfs/f && chown 1234:5678 /atomfs/f \
                      && stat -c '%u %g %a' /atomfs/f";
        let out = under_shim(&dir, "sh", &["-c", script], None);
        assert_eq!(ok(&out, "chown"), "1234 5678 755\n");
    } else {
        let out = under_shim(&dir, "chown", &["0", "/atomfs/f"], None);
        assert!(!out.status.success(), "a file given away without privilege");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
