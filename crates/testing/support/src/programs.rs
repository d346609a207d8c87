//! Real, unmodified programs on a mounted store (FUSE over any engine, `atomfs mount`): each
//! workload checks its own result and skips through [`have`] when its program is missing.

use crate::{have, run};
use std::ffi::OsStr;
use std::fs;
use std::path::Path;

/// A small source-like tree in `root`: 4 directories of 6 text files, an empty file, a 1 MiB
/// file of pseudo-random bytes and, when `symlink`, a symbolic link (not every engine has them).
pub fn make_tree(root: &Path, symlink: bool) {
    for d in 0..4 {
        let dir = root.join(format!("dir{d}/sub"));
        fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..6 {
            let body: String = (0..(d * 50 + f * 30))
                .map(|i| format!("line {i} of {d}/{f}\n"))
                .collect();
            fs::write(dir.join(format!("file{f}.txt")), body).expect("write");
        }
    }
    fs::write(root.join("empty"), b"").expect("write");
    let big: Vec<u8> = (0..1_048_576u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    fs::write(root.join("big.bin"), big).expect("write");
    if symlink {
        std::os::unix::fs::symlink("dir0/sub/file1.txt", root.join("link")).expect("symlink");
    }
}

/// `git ARGS` in `repo` with a fixed identity and default branch; its stdout.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let mut all = vec![
        "-c",
        "user.name=atomfs",
        "-c",
        "user.email=atomfs@example.invalid",
        "-c",
        "init.defaultBranch=main",
    ];
    all.extend_from_slice(args);
    run("git", &all, repo)
}

/// In the existing directory `repo` (with some files): git init, add, commit, a second commit,
/// then the log has both, `git fsck --full --strict` passes and the work tree is clean.
pub fn git_round_trip(repo: &Path) {
    if !have("git") {
        return;
    }
    git(repo, &["init", "-q"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "first commit on atomfs"]);
    fs::write(repo.join("NOTES"), b"a second commit\n").expect("write");
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "second commit"]);
    let log = git(repo, &["log", "--oneline"]);
    assert!(
        log.contains("first commit on atomfs") && log.contains("second commit"),
        "{log}"
    );
    git(repo, &["fsck", "--full", "--strict"]);
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
}

/// In `dir`: a sqlite3 database of `rows` rows with an index, a quarter deleted, passes
/// `PRAGMA integrity_check` with the count right; then again in WAL mode after an insert.
pub fn sqlite_round_trip(dir: &Path, rows: u32) {
    if !have("sqlite3") {
        return;
    }
    let sql = format!(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
        INSERT INTO t(v) SELECT printf('row %d %s', i, hex(randomblob(16))) FROM n;
        CREATE INDEX tv ON t(v); DELETE FROM t WHERE id % 4 = 0;
        PRAGMA integrity_check; SELECT count(*) FROM t;"
    );
    let out = run("sqlite3", &["test.db", &sql], dir);
    let left = (rows - rows / 4).to_string();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok", left.as_str()],
        "{out}"
    );
    let wal = "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES('x'); PRAGMA integrity_check;";
    let out = run("sqlite3", &["test.db", wal], dir);
    assert!(out.ends_with("ok\n"), "{out}");
}

/// `tar` the tree `src/tree` into an archive, extract it into `dst` (on the store) and
/// compare with `diff -r`.
pub fn tar_round_trip(src: &Path, dst: &Path) {
    if !have("tar") || !have("diff") {
        return;
    }
    run("tar", &["-cf", "tree.tar", "tree"], src);
    fs::create_dir_all(dst).expect("mkdir");
    let archive = src.join("tree.tar");
    run("tar", &[OsStr::new("-xf"), os(&archive)], dst);
    diff_r(&src.join("tree"), &dst.join("tree"));
}

/// `cp -a` the tree `src` to `dst` (on the store), compare with `diff -r`, and check that the
/// modification time was kept.
pub fn cp_round_trip(src: &Path, dst: &Path) {
    if !have("cp") || !have("diff") {
        return;
    }
    let cwd = dst.parent().unwrap_or(dst);
    run("cp", &[OsStr::new("-a"), os(src), os(dst)], cwd);
    diff_r(src, dst);
    let (a, b) = (
        fs::metadata(src.join("big.bin")).expect("stat"),
        fs::metadata(dst.join("big.bin")).expect("stat"),
    );
    assert_eq!(
        a.modified().ok(),
        b.modified().ok(),
        "cp -a keeps modification times"
    );
}

fn os(p: &Path) -> &OsStr {
    p.as_os_str()
}

fn diff_r(a: &Path, b: &Path) {
    let cwd = b.parent().unwrap_or(b);
    run(
        "diff",
        &[
            OsStr::new("-r"),
            OsStr::new("--no-dereference"),
            os(a),
            os(b),
        ],
        cwd,
    );
}

/// In `dir`: fio random 4 KiB writes with fsyncs, verified by crc32c; no error.
pub fn fio_verify(dir: &Path) {
    if !have("fio") {
        return;
    }
    let out = run(
        "fio",
        &[
            "--name=verify",
            "--filename=fio.dat",
            "--size=4M",
            "--bs=4k",
            "--rw=randwrite",
            "--ioengine=sync",
            "--fsync=8",
            "--verify=crc32c",
            "--do_verify=1",
            "--output-format=terse",
        ],
        dir,
    );
    // Terse format v3: field 5 is the error count.
    let errors = out.lines().last().and_then(|l| l.split(';').nth(4));
    assert_eq!(errors, Some("0"), "{out}");
}
