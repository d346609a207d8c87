//! A pool mounted with `atomfs mount`, used by real, unmodified programs: git, sqlite3, tar,
//! cp -a + diff -r, fio with verification; the mount server killed with SIGKILL and the pool
//! remounted (recovery, no corruption); a full pool (ENOSPC); refusals to mount.
//! Where FUSE cannot mount here the tests print why and skip; a missing program is skipped.

mod support;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{atomfs, atomfs_ok, have, run, s, scratch, Mounted};

fn make_tree(root: &Path) {
    for d in 0..3 {
        let dir = root.join(format!("dir{d}/sub"));
        fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..5 {
            let body: String = (0..(d * 40 + f * 25))
                .map(|i| format!("line {i} of {d}/{f}\n"))
                .collect();
            fs::write(dir.join(format!("file{f}.txt")), body).expect("write");
        }
    }
    let big: Vec<u8> = (0..700_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    fs::write(root.join("big.bin"), big).expect("write");
    // No symbolic link: the pool engine has none (symlink(2) fails with EOPNOTSUPP).
}

#[test]
fn real_programs_on_a_mounted_pool() {
    let dir = scratch("programs");
    let Some(mut m) = Mounted::new(&dir, Some("256M")) else {
        return;
    };
    let mnt = m.dir.clone();

    if have("git") {
        let repo = mnt.join("repo");
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
            run("git", &all, &repo)
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "first commit on a pool"]);
        let log = git(&["log", "--oneline"]);
        assert!(log.contains("first commit on a pool"), "{log}");
        git(&["fsck", "--full", "--strict"]);
    }
    if have("sqlite3") {
        let sql = "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO t(v) SELECT printf('row %d %s', i, hex(randomblob(16))) FROM n;
            CREATE INDEX tv ON t(v); DELETE FROM t WHERE id % 4 = 0;
            PRAGMA integrity_check; SELECT count(*) FROM t;";
        let out = run("sqlite3", &["db.sqlite", sql], &mnt);
        assert_eq!(out.lines().collect::<Vec<_>>(), ["ok", "2250"], "{out}");
    }
    if have("tar") && have("diff") {
        let src = dir.join("tar-src");
        make_tree(&src.join("tree"));
        run("tar", &["-cf", "tree.tar", "tree"], &src);
        fs::create_dir(mnt.join("untar")).expect("mkdir");
        run(
            "tar",
            &["-xf", s(&src.join("tree.tar"))],
            &mnt.join("untar"),
        );
        run(
            "diff",
            &[
                "-r",
                "--no-dereference",
                s(&src.join("tree")),
                s(&mnt.join("untar/tree")),
            ],
            &mnt,
        );
        run(
            "cp",
            &["-a", s(&src.join("tree")), s(&mnt.join("copy"))],
            &mnt,
        );
        run(
            "diff",
            &[
                "-r",
                "--no-dereference",
                s(&src.join("tree")),
                s(&mnt.join("copy")),
            ],
            &mnt,
        );
    }
    if have("fio") {
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
            &mnt,
        );
        assert_eq!(
            out.lines().last().and_then(|l| l.split(';').nth(4)),
            Some("0"),
            "{out}"
        );
    }
    m.umount();
    let fsck = atomfs(&["fsck", s(&m.pool)]);
    assert!(fsck.ok(), "fsck after the programs: {}", fsck.stdout);
    let _ = fs::remove_dir_all(dir);
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
    if support::fuse_unavailable().is_some() {
        println!("SKIP: FUSE unavailable");
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
    if !have("cc") {
        return;
    }
    let dir = scratch("ioctl");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuse");
    let prog = dir.join("two_files");
    run(
        "cc",
        &[
            "-Wall",
            "-Werror",
            "-I",
            s(&root.join("include")),
            "-o",
            s(&prog),
            s(&root.join("examples/two_files.c")),
        ],
        &dir,
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
    if support::fuse_unavailable().is_some() {
        println!("SKIP: FUSE unavailable");
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
