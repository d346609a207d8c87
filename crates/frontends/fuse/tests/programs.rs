//! Real, unmodified programs on a mounted store: git, sqlite3, tar, cp -a with diff -r, fio
//! with verification. A program that is not installed is skipped with a message (the packages
//! are in scripts/install-deps.sh); a mount that cannot be made here skips the test.
//!
//! These run over the in-memory reference store; crates/frontends/cli/tests runs the same
//! programs on a real pool file through `atomfs mount`.

mod support;

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use support::{mounted, run, scratch};

fn have(program: &str) -> bool {
    let found = Command::new(program).arg("--version").output().is_ok();
    if !found {
        println!("SKIP: {program} is not installed");
    }
    found
}

fn store() -> Arc<memstore::MemStore> {
    Arc::new(memstore::MemStore::new())
}

/// A small source-like tree with nested directories, a symlink, an empty file and a 1 MB file.
fn make_tree(root: &Path) {
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
    std::os::unix::fs::symlink("dir0/sub/file1.txt", root.join("link")).expect("symlink");
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn git_init_add_commit_log() {
    if !have("git") {
        return;
    }
    let Some(m) = mounted("git", store()) else {
        return;
    };
    let repo = m.dir().join("repo");
    fs::create_dir(&repo).expect("mkdir");
    make_tree(&repo);
    let git = |args: &[&str]| {
        let mut all = vec![
            "-c",
            "user.name=atomfs",
            "-c",
            "user.email=atomfs@example.invalid",
            "-c",
            "init.defaultBranch=main",
        ];
        all.extend_from_slice(args);
        run("git", &all.iter().map(|a| os(a)).collect::<Vec<_>>(), &repo)
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first commit on atomfs"]);
    fs::write(repo.join("empty"), b"now with text\n").expect("write");
    git(&["commit", "-q", "-a", "-m", "second commit"]);
    let log = git(&["log", "--oneline"]);
    assert!(
        log.contains("first commit on atomfs") && log.contains("second commit"),
        "{log}"
    );
    git(&["fsck", "--full", "--strict"]);
    assert_eq!(git(&["status", "--porcelain"]), "");
    m.finish();
}

#[test]
fn sqlite3_database_passes_integrity_check() {
    if !have("sqlite3") {
        return;
    }
    let Some(m) = mounted("sqlite", store()) else {
        return;
    };
    let sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO t(v) SELECT printf('row %d %s', i, hex(randomblob(20))) FROM n;
        CREATE INDEX tv ON t(v);
        DELETE FROM t WHERE id % 3 = 0;
        PRAGMA integrity_check;
        SELECT count(*) FROM t;";
    let out = run("sqlite3", &[os("test.db"), os(sql)], &m.dir());
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok", "3334"], "{out}");
    let out = run(
        "sqlite3",
        &[
            os("test.db"),
            os("PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES('x'); PRAGMA integrity_check;"),
        ],
        &m.dir(),
    );
    assert!(out.ends_with("ok\n"), "{out}");
    m.finish();
}

#[test]
fn tar_extract_and_compare() {
    if !have("tar") || !have("diff") {
        return;
    }
    let src = scratch("tar-src");
    make_tree(&src.join("tree"));
    run("tar", &[os("-cf"), os("tree.tar"), os("tree")], &src);
    let Some(m) = mounted("tar", store()) else {
        return;
    };
    run(
        "tar",
        &[os("-xf"), src.join("tree.tar").as_os_str()],
        &m.dir(),
    );
    run(
        "diff",
        &[
            os("-r"),
            src.join("tree").as_os_str(),
            m.dir().join("tree").as_os_str(),
        ],
        &m.dir(),
    );
    m.finish();
    let _ = fs::remove_dir_all(src);
}

#[test]
fn cp_a_then_diff_r() {
    if !have("cp") || !have("diff") {
        return;
    }
    let src = scratch("cp-src");
    make_tree(&src);
    let Some(m) = mounted("cp", store()) else {
        return;
    };
    let dst = m.dir().join("copy");
    run(
        "cp",
        &[os("-a"), src.as_os_str(), dst.as_os_str()],
        &m.dir(),
    );
    run(
        "diff",
        &[
            os("-r"),
            os("--no-dereference"),
            src.as_os_str(),
            dst.as_os_str(),
        ],
        &m.dir(),
    );
    let (a, b) = (
        fs::metadata(src.join("big.bin")).expect("stat"),
        fs::metadata(dst.join("big.bin")).expect("stat"),
    );
    assert_eq!(
        a.modified().ok(),
        b.modified().ok(),
        "cp -a keeps modification times"
    );
    m.finish();
    let _ = fs::remove_dir_all(src);
}

#[test]
fn fio_random_writes_verify() {
    if !have("fio") {
        return;
    }
    let Some(m) = mounted("fio", store()) else {
        return;
    };
    let out = run(
        "fio",
        &[
            os("--name=verify"),
            os("--filename=fio.dat"),
            os("--size=4M"),
            os("--bs=4k"),
            os("--rw=randwrite"),
            os("--ioengine=sync"),
            os("--fsync=8"),
            os("--verify=crc32c"),
            os("--do_verify=1"),
            os("--output-format=terse"),
        ],
        &m.dir(),
    );
    // Terse format v3: field 5 is the error count.
    let err_field = out.lines().last().and_then(|l| l.split(';').nth(4));
    assert_eq!(err_field, Some("0"), "{out}");
    m.finish();
}
