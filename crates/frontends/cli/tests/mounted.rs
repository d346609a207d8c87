//! A pool mounted with `atomfs mount`, used by real, unmodified programs: git, sqlite3, tar,
//! cp -a + diff -r, fio with verification; the mount server killed with SIGKILL and the pool
//! remounted (recovery, no corruption); a full pool (ENOSPC); refusals to mount.
//! Where FUSE cannot mount here, or a program is missing, the tests print why and skip — a
//! failure under `ATOMFS_REQUIRE_ALL=1`.

mod support;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{atomfs, atomfs_ok, s, scratch, Mounted};
use test_support::cc::{compile, have_cc};
use test_support::fuse::have_fuse;
use test_support::programs::{
    cp_round_trip, fio_verify, git_round_trip, make_tree, sqlite_round_trip, tar_round_trip,
};
use test_support::{have, run};

#[test]
fn real_programs_on_a_mounted_pool() {
    let dir = scratch("programs");
    let Some(mut m) = Mounted::new(&dir, Some("256M")) else {
        return;
    };
    let mnt = m.dir.clone();
    // No symbolic link in the trees: the pool engine has none (symlink(2) fails with EOPNOTSUPP).
    let repo = mnt.join("repo");
    make_tree(&repo, false);
    git_round_trip(&repo);
    sqlite_round_trip(&mnt, 3000);
    let src = dir.join("src");
    make_tree(&src.join("tree"), false);
    tar_round_trip(&src, &mnt.join("untar"));
    cp_round_trip(&src.join("tree"), &mnt.join("copy"));
    fio_verify(&mnt);
    m.umount();
    let fsck = atomfs(&["fsck", s(&m.pool)]);
    assert!(fsck.ok(), "fsck after the programs: {}", fsck.stdout);
}

fn kill9(pid: i32) {
    // SAFETY: sending a signal to a process id we own (the mount server we started).
    let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}");
}

#[test]
fn sigkill_of_the_server_then_remount_recovers() {
    let dir = scratch("sigkill");
    let Some(mut m) = Mounted::new(&dir, Some("128M")) else {
        return;
    };
    let mnt = m.dir.clone();
    // Acknowledged before the crash: these must survive whole.
    for i in 0..20 {
        fs::write(
            mnt.join(format!("acked{i}")),
            vec![i as u8; 50_000 + i * 1000],
        )
        .expect("write");
    }
    let sqlite = have("sqlite3");
    let mut writer = None;
    if sqlite {
        run(
            "sqlite3",
            &[
                "db.sqlite",
                "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);",
            ],
            &mnt,
        );
        // Thousands of small transactions, still running when the server dies.
        let script: String = (0..20_000)
            .map(|i| {
                format!(
                    "INSERT INTO t(v) VALUES('value {i} {}');\n",
                    "x".repeat(i % 200)
                )
            })
            .collect();
        let path = dir.join("inserts.sql");
        fs::write(&path, script).expect("write script");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("sqlite3 db.sqlite < {}", s(&path)))
            .current_dir(&mnt)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sqlite3");
        writer = Some(child);
        std::thread::sleep(Duration::from_millis(700));
    }
    kill9(m.pid.take().expect("server pid"));
    if let Some(mut w) = writer {
        let _ = w.wait();
    }
    // The dead mount must be cleaned up, then the pool remounts with recovery.
    let r = atomfs(&["mount", s(&m.pool), s(&mnt)]);
    assert!(!r.ok(), "mounting over a dead mount must fail clearly");
    atomfs_ok(&["umount", s(&mnt)]);
    let out = m.mount();
    assert!(
        out.contains("recovered the pool"),
        "the remount reports its recovery: {out}"
    );
    for i in 0..20 {
        let data = fs::read(mnt.join(format!("acked{i}"))).expect("acked file survives");
        assert!(
            data.len() == 50_000 + i * 1000 && data.iter().all(|&b| b == i as u8),
            "acked{i} damaged"
        );
    }
    if sqlite {
        let out = run(
            "sqlite3",
            &[
                "db.sqlite",
                "PRAGMA integrity_check; SELECT count(*) FROM t;",
            ],
            &mnt,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"ok"), "{out}");
        println!(
            "rows committed before the kill: {}",
            lines.get(1).unwrap_or(&"?")
        );
    }
    m.umount();
    let fsck = atomfs(&["fsck", s(&m.pool)]);
    assert!(
        fsck.ok(),
        "fsck after SIGKILL, recovery and remount: {} {}",
        fsck.stdout,
        fsck.stderr
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn full_pool_gives_enospc_and_stays_consistent() {
    let dir = scratch("enospc");
    let Some(mut m) = Mounted::new(&dir, Some("16M")) else {
        return;
    };
    let mnt = m.dir.clone();
    fs::write(mnt.join("keep"), b"kept").expect("write");
    let chunk = vec![0xABu8; 1 << 20];
    let mut f = fs::File::create(mnt.join("fill")).expect("create");
    let err = (0..64)
        .find_map(|_| std::io::Write::write_all(&mut f, &chunk).err())
        .expect("a 16 MiB pool must fill up");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    drop(f);
    fs::remove_file(mnt.join("fill")).expect("unlink");
    fs::write(mnt.join("after"), vec![1u8; 1 << 20]).expect("space is back after unlink");
    m.umount();
    let fsck = atomfs(&["fsck", s(&m.pool)]);
    assert!(fsck.ok(), "{}", fsck.stdout);
    assert_eq!(atomfs_ok(&["cat", s(&m.pool), "/keep"]), "kept");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn mount_refuses_bad_pools_and_mount_points() {
    if !have_fuse("atomfs mount") {
        return;
    }
    let dir = scratch("refuse");
    let pool = dir.join("r.pool");
    let mnt = dir.join("mnt");
    fs::create_dir(&mnt).expect("mkdir");
    atomfs_ok(&["mkfs", s(&pool), "--size", "16M"]);

    let r = atomfs(&["mount", s(&pool), s(&dir.join("missing"))]);
    assert!(
        r.code == Some(1) && r.stderr.contains("No such file"),
        "{}",
        r.stderr
    );
    let file = dir.join("plain");
    fs::write(&file, b"x").expect("write");
    let r = atomfs(&["mount", s(&pool), s(&file)]);
    assert!(
        r.code == Some(1) && r.stderr.contains("not a directory"),
        "{}",
        r.stderr
    );
    let r = atomfs(&["mount", s(&dir.join("nope.pool")), s(&mnt)]);
    assert!(
        r.code == Some(1) && r.stderr.contains("no such pool"),
        "{}",
        r.stderr
    );

    let mut m = Mounted {
        pool: pool.clone(),
        dir: mnt.clone(),
        pid: None,
    };
    m.mount();
    let r = atomfs(&["mount", s(&pool), s(&mnt)]);
    assert!(
        r.code == Some(1) && r.stderr.contains("busy"),
        "{}",
        r.stderr
    );
    // A second mount of the same pool elsewhere is a client of the first one's server.
    let other = dir.join("mnt2");
    fs::create_dir(&other).expect("mkdir");
    let mut second = Mounted {
        pool: pool.clone(),
        dir: other.clone(),
        pid: None,
    };
    second.mount();
    fs::write(other.join("via-second"), "2").expect("write through the second mount");
    assert_eq!(
        fs::read_to_string(mnt.join("via-second")).expect("read"),
        "2"
    );
    second.umount();
    m.umount();
    let r = atomfs(&["umount", s(&mnt)]);
    assert!(
        r.code == Some(1) && r.stderr.contains("not mounted"),
        "{}",
        r.stderr
    );

    let mut image = fs::read(&pool).expect("read");
    for b in &mut image[8..64] {
        *b ^= 0xFF;
    }
    fs::write(&pool, &image).expect("write");
    let r = atomfs(&["mount", s(&pool), s(&mnt)]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("refusing to mount") && r.stderr.contains("problem"),
        "{}",
        r.stderr
    );
    let mounted_over = fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .contains(s(&mnt));
    assert!(!mounted_over, "a refused mount leaves nothing mounted");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn c_program_updates_two_files_atomically_through_the_ioctls() {
    if !have_cc() {
        return;
    }
    let dir = scratch("ioctl");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuse");
    let prog = dir.join("two_files");
    compile(
        &root.join("examples/two_files.c"),
        &prog,
        &root.join("include"),
        &[],
    );
    let Some(mut m) = Mounted::new(&dir, Some("32M")) else {
        return;
    };
    let (a, b) = (m.dir.join("a"), m.dir.join("b"));
    fs::write(&a, b"old a").expect("write");
    fs::write(&b, b"old b").expect("write");
    let out = run(s(&prog), &[s(&a), s(&b), "new text", "abort"], &dir);
    assert!(out.contains("aborted"), "{out}");
    assert_eq!(
        (fs::read(&a).expect("read"), fs::read(&b).expect("read")),
        (b"old a".to_vec(), b"old b".to_vec())
    );
    let out = run(s(&prog), &[s(&a), s(&b), "new text"], &dir);
    assert!(out.contains("committed"), "{out}");
    m.umount();
    // Durable: the pool itself holds the new contents after the unmount.
    assert_eq!(atomfs_ok(&["cat", s(&m.pool), "/a"]), "new text");
    assert_eq!(atomfs_ok(&["cat", s(&m.pool), "/b"]), "new text");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn foreground_server_unmounts_cleanly_on_sigterm() {
    if !have_fuse("atomfs mount") {
        return;
    }
    let dir = scratch("sigterm");
    let (pool, mnt) = (dir.join("f.pool"), dir.join("mnt"));
    fs::create_dir(&mnt).expect("mkdir");
    atomfs_ok(&["mkfs", s(&pool), "--size", "16M"]);
    let mut server = Command::new(support::ATOMFS)
        .args(["mount", s(&pool), s(&mnt), "-f"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mounted = || {
        fs::read_to_string("/proc/self/mountinfo")
            .map(|m| m.contains(s(&mnt)))
            .unwrap_or(false)
    };
    let start = std::time::Instant::now();
    while !mounted() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(mounted(), "the foreground server mounts");
    fs::write(mnt.join("note"), b"written before SIGTERM").expect("write");
    // SAFETY: signalling the child we spawned.
    assert_eq!(unsafe { libc::kill(server.id() as i32, libc::SIGTERM) }, 0);
    let status = server.wait().expect("wait");
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(!mounted(), "unmounted on SIGTERM");
    assert_eq!(
        atomfs_ok(&["cat", s(&pool), "/note"]),
        "written before SIGTERM"
    );
    let _ = fs::remove_dir_all(dir);
}

/// What clients of a mount's server change (other processes' front ends on the same pool),
/// the mount shows at once: the server tells the kernel to forget its cached attributes,
/// pages and names, although the mount caches them for 60 s.
#[test]
fn a_mount_sees_what_its_clients_change_at_once() {
    let dir = scratch("coherent");
    let Some(mut m) = Mounted::new(&dir, Some("32M")) else {
        return;
    };
    let mnt = m.dir.clone();
    fs::write(mnt.join("f"), "old contents").expect("write through the mount");
    // Cached by the kernel now: attributes, pages and the name.
    assert_eq!(
        fs::read_to_string(mnt.join("f")).expect("read"),
        "old contents"
    );
    assert!(!mnt.join("new").exists());
    let host = dir.join("host.txt");
    fs::write(&host, "new, longer contents").expect("host file");
    // A client (the CLI, another process) replaces the file and adds one.
    atomfs_ok(&["put", s(&m.pool), s(&host), "/f"]);
    atomfs_ok(&["put", s(&m.pool), s(&host), "/new"]);
    assert_eq!(
        fs::read_to_string(mnt.join("f")).expect("read after the client's put"),
        "new, longer contents"
    );
    assert!(
        mnt.join("new").exists(),
        "a name a client created is not seen"
    );
    atomfs_ok(&["rm", s(&m.pool), "/new"]);
    assert!(
        !mnt.join("new").exists(),
        "a name a client removed is still seen"
    );
    m.umount();
    let _ = fs::remove_dir_all(dir);
}
