//! fsck (read-only by default), --repair, salvage, info and inspect that never write, and
//! quiet exits when the reader of a command's output goes away (`| head`).

mod support;

use pmem::{DramRegion, Region};
use pool::{PoolConfig, PoolStore};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use store::{OpenFlags, Store, ROOT_INO};
use support::{atomfs, atomfs_ok, s, scratch, ATOMFS};

const POOL_BYTES: u64 = 16 << 20;

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    }
}

/// A pool file holding /a and /b, and a transaction that renamed /a and overwrote /b but
/// never committed (its undo and redo entries in the log), as a crash would leave it.
fn pool_with_open_transaction(path: &Path) {
    let cfg = PoolConfig::default();
    let s = PoolStore::format(Arc::new(DramRegion::new(POOL_BYTES)), &cfg).expect("format");
    store::path::write_file(&s, "/a", &[1u8; 9000], None).expect("a");
    store::path::write_file(&s, "/b", &[2u8; 9000], None).expect("b");
    s.checkpoint_all().expect("checkpoint");
    let b = s
        .open(store::resolve(&s, "/b").expect("b").ino, rw())
        .expect("open b");
    let tx = s.tx_begin(&[b]).expect("begin");
    s.write(b, 100, &[3u8; 5000]).expect("write");
    s.rename(ROOT_INO, b"a", ROOT_INO, b"a2", Some(tx))
        .expect("rename");
    fs::write(path, pool::region_bytes(&**s.region())).expect("write pool file");
}

fn json(args: &[&str]) -> serde_json::Value {
    let r = atomfs(args);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", r.stdout))
}

#[test]
fn fsck_info_and_inspect_never_write_the_pool() {
    let dir = scratch("readonly");
    let pool = dir.join("p.pool");
    let p = s(&pool);
    pool_with_open_transaction(&pool);
    let before = fs::read(&pool).expect("read");
    for args in [
        &["fsck", p][..],
        &["fsck", p, "--json"],
        &["info", p],
        &["info", p, "--json"],
        &["inspect", p],
        &["inspect", p, "log"],
        &["inspect", p, "pending", "--json"],
        &["inspect", p, "file", "/b"],
    ] {
        let r = atomfs(args);
        assert!(r.ok(), "{args:?}: {} {}", r.stdout, r.stderr);
        assert!(
            fs::read(&pool).expect("read") == before,
            "{args:?} wrote the pool"
        );
    }
    let v = json(&["fsck", p, "--json"]);
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(v["read_only"], true);
    let r = &v["recovery_simulated"];
    assert_eq!(r["undone_txs"], 1, "{v}");
    assert!(r["undo_entries_applied"].as_u64().unwrap_or(0) > 0, "{v}");
    assert!(r["data_entries_dropped"].as_u64().unwrap_or(0) > 0, "{v}");
    let text = atomfs_ok(&["fsck", p]);
    assert!(
        text.contains("recovery would") && text.contains("undo 1 uncommitted"),
        "{text}"
    );
    // What the simulation said is what recovery does (`ls` opens the pool for real).
    assert_eq!(atomfs_ok(&["ls", p]), "a\nb\n");
    assert_eq!(
        json(&["fsck", p, "--json"])["recovery_simulated"]["undone_txs"],
        0
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn torn_log_entries_are_counted() {
    let dir = scratch("torn");
    let pool = dir.join("p.pool");
    let p = s(&pool);
    pool_with_open_transaction(&pool);
    let v = json(&["info", p, "--json"]);
    let meta_log = v["pool_engine"]["superblock"]["geometry"]["meta_log_offset"]
        .as_u64()
        .expect("meta log offset");
    let mut image = fs::read(&pool).expect("read");
    // Garbage over three free slots near the end of the metadata log (seal non-zero).
    for slot in 20..23u64 {
        let at = (meta_log + slot * 64) as usize;
        image[at..at + 64].copy_from_slice(&[0x6Bu8; 64]);
    }
    fs::write(&pool, &image).expect("write");
    let v = json(&["fsck", p, "--json"]);
    assert_eq!(v["recovery_simulated"]["torn_entries"], 3, "{v}");
    assert_eq!(fs::read(&pool).expect("read"), image, "fsck wrote the pool");
    let _ = fs::remove_dir_all(dir);
}

/// A pool with files, then random bytes over /f1's inode (the pool no longer opens).
fn damaged_pool(dir: &Path) -> std::path::PathBuf {
    let pool = dir.join("d.pool");
    let p = s(&pool);
    atomfs_ok(&["mkfs", p, "--size", "16M", "--inodes", "200"]);
    let host = dir.join("host");
    for (name, len) in [("f0", 5000usize), ("f1", 20000), ("f2", 300)] {
        fs::write(&host, vec![name.as_bytes()[1]; len]).expect("host");
        atomfs_ok(&["put", p, s(&host), &format!("/{name}")]);
    }
    let ino = json(&["inspect", p, "file", "/f1", "--json"])["ino"]
        .as_u64()
        .expect("ino");
    let v = json(&["info", p, "--json"]);
    let table = v["pool_engine"]["superblock"]["geometry"]["inode_offset"]
        .as_u64()
        .expect("inode table");
    let mut image = fs::read(&pool).expect("read");
    let at = (table + ino * 128) as usize;
    for (i, b) in image[at..at + 128].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37).wrapping_add(0x99);
    }
    fs::write(&pool, &image).expect("write");
    pool
}

#[test]
fn repair_makes_a_pool_with_a_damaged_inode_open() {
    let dir = scratch("repair");
    let pool = damaged_pool(&dir);
    let p = s(&pool);
    assert!(!atomfs(&["ls", p]).ok(), "the damaged pool does not open");
    let r = atomfs(&["fsck", p]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(r.stdout.contains("--repair"), "{}", r.stdout);
    let r = atomfs(&["fsck", "--repair", p]);
    assert!(r.ok(), "{} {}", r.stdout, r.stderr);
    assert!(r.stdout.contains("quarantined"), "{}", r.stdout);
    assert!(atomfs_ok(&["fsck", p]).contains("clean"));
    let listing = atomfs_ok(&["ls", p]);
    assert!(
        listing.contains("f0") && listing.contains("f2") && !listing.contains("f1"),
        "{listing}"
    );
    assert_eq!(atomfs_ok(&["cat", p, "/f2"]).len(), 300);
    let again = json(&["fsck", "--repair", p, "--json"]);
    assert_eq!(again["clean"], true);
    assert_eq!(
        again["pool_written"], false,
        "a clean pool is not rewritten: {again}"
    );
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn salvage_copies_readable_files_and_never_writes_the_pool() {
    let dir = scratch("salvage");
    let pool = damaged_pool(&dir);
    let before = fs::read(&pool).expect("read");
    let out = dir.join("rescued");
    let r = atomfs(&["salvage", s(&pool), s(&out)]);
    assert!(
        r.code == Some(0) || r.code == Some(1),
        "{} {}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("salvaged"), "{}", r.stdout);
    assert_eq!(fs::read(out.join("f0")).expect("f0"), vec![b'0'; 5000]);
    assert_eq!(fs::read(out.join("f2")).expect("f2"), vec![b'2'; 300]);
    assert!(!out.join("f1").exists());
    assert!(
        fs::read(&pool).expect("read") == before,
        "salvage wrote the pool"
    );
    let r = atomfs(&["salvage", s(&pool), s(&out)]);
    assert!(
        r.code == Some(1) && r.stderr.contains("not empty"),
        "{}",
        r.stderr
    );
    let _ = fs::remove_dir_all(dir);
}

/// Run `atomfs ARGS` with its stdout a pipe nobody reads (the read end closed first).
fn run_into_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0i32; 2];
    // SAFETY: pipe fills the two descriptors on success.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors were just created and are owned here only.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let out = Command::new(ATOMFS)
        .args(args)
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("run atomfs");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn printing_into_a_closed_pipe_exits_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("epipe");
    let pool = dir.join("p.pool");
    let p = s(&pool);
    pool_with_open_transaction(&pool);
    for args in [
        &["inspect", p][..],
        &["inspect", p, "log", "--json"],
        &["info", p],
        &["fsck", p],
        &["ls", p],
        &["cat", p, "/b"],
        &["--help"],
    ] {
        let (status, stderr) = run_into_closed_pipe(args);
        assert!(
            status.code() == Some(0) || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?} {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn the_test_pool_really_holds_an_open_transaction() {
    let dir = scratch("opentx");
    let pool = dir.join("p.pool");
    pool_with_open_transaction(&pool);
    let region = pool::load_image(&pool).expect("load");
    assert_eq!(region.len(), POOL_BYTES);
    let s = PoolStore::open(Arc::new(region), &PoolConfig::default()).expect("open");
    assert_eq!(s.last_recovery().undone_txs, 1);
    let _ = fs::remove_dir_all(dir);
}
