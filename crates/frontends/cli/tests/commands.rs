//! The `atomfs` commands that need no mount: mkfs, info, fsck, inspect, recover, the file
//! commands, bad input, a corrupted pool, and a short demo.

mod support;

use std::fs;
use support::{atomfs, atomfs_ok, s, scratch};

#[test]
fn mkfs_files_info_fsck_inspect_recover() {
    let dir = scratch("cmds");
    let pool = dir.join("a.pool");
    let p = s(&pool);
    let out = atomfs_ok(&["mkfs", p, "--size", "32M", "--inodes", "500"]);
    assert!(out.starts_with("created"), "{out}");
    let host = dir.join("in.txt");
    fs::write(&host, b"payload\n").expect("write host file");
    atomfs_ok(&["mkdir", p, "/docs/2026", "-p"]);
    atomfs_ok(&["put", p, s(&host), "/docs/2026/in.txt"]);
    atomfs_ok(&["cp", p, "/docs/2026/in.txt", "/copy.txt"]);
    assert_eq!(atomfs_ok(&["cat", p, "/copy.txt"]), "payload\n");
    let listing = atomfs_ok(&["ls", p, "-l"]);
    assert!(
        listing.contains("copy.txt") && listing.contains("docs"),
        "{listing}"
    );
    let back = dir.join("out.txt");
    atomfs_ok(&["get", p, "/docs/2026/in.txt", s(&back)]);
    assert_eq!(fs::read(&back).expect("read back"), b"payload\n");
    let rm = atomfs(&["rm", p, "/docs"]);
    assert!(
        !rm.ok() && rm.stderr.contains("is a directory"),
        "{}",
        rm.stderr
    );
    atomfs_ok(&["rm", p, "/docs", "-r"]);
    assert_eq!(atomfs_ok(&["ls", p]), "copy.txt\n");

    let info: serde_json::Value =
        serde_json::from_str(&atomfs_ok(&["info", p, "--json"])).expect("info json");
    assert_eq!(info["engine"], "pool");
    assert_eq!(
        info["pool_engine"]["superblock"]["geometry"]["inode_count"], 500,
        "{info}"
    );
    assert!(
        info["statfs"]["blocks_total"].as_u64().unwrap_or(0) > 1000,
        "{info}"
    );
    let fsck: serde_json::Value =
        serde_json::from_str(&atomfs_ok(&["fsck", p, "--json"])).expect("fsck json");
    assert_eq!(fsck["clean"], true, "{fsck}");
    for view in [
        &["inspect", p, "--json"][..],
        &["inspect", p, "log", "--json"],
        &["inspect", p, "pending", "--json"],
        &["inspect", p, "file", "/copy.txt", "--json"],
    ] {
        let v: serde_json::Value = serde_json::from_str(&atomfs_ok(view)).expect("inspect json");
        assert!(v.is_object(), "{view:?}: {v}");
    }
    let text = atomfs_ok(&["inspect", p, "file", "/copy.txt"]);
    assert!(text.contains("block_map"), "{text}");
    let rec: serde_json::Value =
        serde_json::from_str(&atomfs_ok(&["recover", p, "--json"])).expect("recover json");
    assert_eq!(rec["fsck_clean"], true);
    assert!(rec["recovery"].is_object(), "{rec}");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn mkfs_takes_a_size_with_a_fraction() {
    let dir = scratch("fraction");
    let pool = dir.join("f.pool");
    let p = s(&pool);
    atomfs_ok(&["mkfs", p, "--size", "24.5M"]);
    let info: serde_json::Value =
        serde_json::from_str(&atomfs_ok(&["info", p, "--json"])).expect("info json");
    assert_eq!(info["file_size"], 24 * 1024 * 1024 + 512 * 1024, "{info}");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn bench_help_lists_every_suite() {
    let help = atomfs_ok(&["bench", "--help"]);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Suites:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for suite in [
        "external",
        "fcfs-micro",
        "fcfs-threads",
        "fcfs-value-size",
        "fcfs-idle",
        "fcfs-latency",
        "recovery",
        "floor",
        "sqlite",
        "fuse",
        "mmio",
        "all",
    ] {
        assert!(
            listed.contains(&suite),
            "{suite} not in {listed:?}:\n{help}"
        );
    }
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = scratch("bad");
    let pool = dir.join("b.pool");
    let p = s(&pool);
    let mnt = dir.join("mnt");
    fs::create_dir(&mnt).expect("mkdir mnt");
    let hint = format!("{p}: no such pool file (create one with: atomfs mkfs {p} --size 512M)");
    for (args, needle) in [
        (vec!["mkfs", p, "--size", "lots"], "invalid size"),
        (vec!["mkfs", p, "--size", "1.5.5G"], "invalid size"),
        (vec!["mkfs", p, "--size", "1,5G"], "invalid size"),
        (vec!["mount", p, s(&mnt)], hint.as_str()),
        (vec!["mount", s(&mnt), s(&mnt)], "not a pool file"),
        (vec!["mkfs", p, "--size", "1M"], "too small"),
        (vec!["mkfs", p, "--size", "64T"], "exceeds"),
        (vec!["info", p], hint.as_str()),
        (
            vec!["mkfs", "/nonexistent-dir/x.pool", "--size", "16M"],
            "does not exist",
        ),
    ] {
        let r = atomfs(&args);
        assert_eq!(r.code, Some(1), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(needle),
            "{args:?}: expected {needle:?} in {:?}",
            r.stderr
        );
    }
    atomfs_ok(&["mkfs", p, "--size", "16M"]);
    let r = atomfs(&["mkfs", p, "--size", "16M"]);
    assert!(r.stderr.contains("exists"), "{}", r.stderr);
    let r = atomfs(&["cat", p, "/missing"]);
    assert!(
        r.code == Some(1) && r.stderr.contains("not found"),
        "{}",
        r.stderr
    );
    let notpool = dir.join("not.pool");
    fs::write(&notpool, vec![0x5Au8; 16 << 20]).expect("write junk");
    let r = atomfs(&["info", s(&notpool)]);
    assert_eq!(r.code, Some(1));
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let r = atomfs(&["fsck", s(&notpool)]);
    assert_eq!(
        r.code,
        Some(1),
        "fsck of junk must report problems: {} {}",
        r.stdout,
        r.stderr
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn corrupted_pool_fails_fsck_with_a_report() {
    let dir = scratch("corrupt");
    let pool = dir.join("c.pool");
    let p = s(&pool);
    atomfs_ok(&["mkfs", p, "--size", "16M"]);
    let mut image = fs::read(&pool).expect("read pool");
    for b in &mut image[8..64] {
        *b ^= 0xFF;
    }
    fs::write(&pool, &image).expect("write pool");
    let r = atomfs(&["fsck", p]);
    assert_eq!(r.code, Some(1), "{} {}", r.stdout, r.stderr);
    assert!(r.stdout.contains("problem"), "{}", r.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&atomfs(&["fsck", p, "--json"]).stdout).expect("json");
    assert_eq!(v["clean"], false);
    assert!(
        !v["problems"].as_array().map(Vec::is_empty).unwrap_or(true),
        "{v}"
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn short_demo_passes() {
    let dir = scratch("demo");
    let r = atomfs(&[
        "demo",
        "--seconds",
        "0.4",
        "--files",
        "8",
        "--file-size",
        "64K",
        "--dir",
        s(&dir),
    ]);
    assert!(r.ok(), "demo failed:\n{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("PASS"), "{}", r.stdout);
    assert!(r.stdout.contains("recovery time"), "{}", r.stdout);
    let leftovers: Vec<_> = fs::read_dir(&dir).expect("read dir").collect();
    assert!(leftovers.is_empty(), "the demo removes its pools");
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn a_put_that_does_not_fit_leaves_the_old_file_whole() {
    let dir = scratch("putfull");
    let pool = dir.join("p.pool");
    let p = s(&pool);
    atomfs_ok(&["mkfs", p, "--size", "16M"]);
    let small: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let big = vec![9u8; 40 << 20];
    let (small_path, big_path, back) = (dir.join("small"), dir.join("big"), dir.join("back"));
    fs::write(&small_path, &small).expect("write");
    fs::write(&big_path, &big).expect("write");
    atomfs_ok(&["put", p, s(&small_path), "/f"]);
    let r = atomfs(&["put", p, s(&big_path), "/f"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("no space"), "{}", r.stderr);
    atomfs_ok(&["get", p, "/f", s(&back)]);
    assert!(
        fs::read(&back).expect("read") == small,
        "the old file is intact"
    );
    atomfs_ok(&["fsck", p]);
    let _ = fs::remove_dir_all(dir);
}

/// N of a summary line `crashtest ...: workloads W, crash images N, kills K, violations V`
/// (0 when the line has none).
fn crash_images(line: &str) -> u64 {
    line.split("crash images ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn crashtest_passes_fcfs_and_catches_no_consistency_mode() {
    let dir = scratch("crashtest");
    let out = atomfs_ok(&[
        "crashtest",
        "--workloads",
        "1",
        "--units",
        "10",
        "--kills",
        "2",
        "--dir",
        s(&dir),
    ]);
    // The default run covers every crash-consistent mode of the pool engine, FCFS first.
    let line = out
        .lines()
        .find(|l| l.starts_with("crashtest pool (pool-fcfs"))
        .unwrap_or_default();
    assert!(line.ends_with("violations 0"), "{out}");
    // Five modes, one workload of 10 units each: about 1,300 images a mode on the simulator.
    let images = crash_images(line);
    assert!(images >= 1000, "too few crash images were checked: {line}");
    let r = atomfs(&[
        "crashtest",
        "--engine",
        "pool-nc",
        "--workloads",
        "2",
        "--units",
        "12",
        "--kills",
        "0",
    ]);
    assert_eq!(
        r.code,
        Some(1),
        "no-consistency mode must be caught:\n{}",
        r.stdout
    );
    assert!(r.stdout.contains("violation"), "{}", r.stdout);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("crashtest pool-nc: workloads"))
        .unwrap_or_default();
    assert!(
        crash_images(line) >= 100,
        "too few crash images were checked: {line}"
    );
    let r = atomfs(&["crashtest", "--engine", "bogus"]);
    assert!(
        r.code == Some(1) && r.stderr.contains("known engines"),
        "{}",
        r.stderr
    );
    let _ = fs::remove_dir_all(dir);
}
