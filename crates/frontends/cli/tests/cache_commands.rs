//! `atomfs recover --prefer pm|home` and `atomfs flush` on cache stores: a home file changed
//! behind the cache while PM held dirty chunks of it makes open, recover and fsck refuse
//! with both choices named; `--prefer` resolves it; `atomfs flush` puts every acknowledged
//! write in the home files, locally and through a serving process.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod support;

use cache::{CacheConfig, HostCacheStore};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store::path::OpenOptions;
use support::{atomfs, atomfs_ok, s, scratch, ATOMFS};

const C: usize = 4096;

/// A cache store at `dir` whose file `a` is one chunk of 1s at home and 2s in PM only
/// (written after a flush, then a crash). Returns (pool, home).
fn crashed_with_dirty_chunk(dir: &Path) -> (PathBuf, PathBuf) {
    let (pool, home) = (dir.join("c.pool"), dir.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    let config = CacheConfig {
        flush_period: None,
        ..CacheConfig::default()
    };
    let st = HostCacheStore::create(&home, &pool, 16 << 20, &config).unwrap();
    for (byte, flush) in [(1u8, true), (2u8, false)] {
        let fh = OpenOptions::new()
            .write(true)
            .create(true)
            .open(&st, "/a", None)
            .unwrap();
        store::Store::write(&st, fh, 0, &[byte; C]).unwrap();
        store::Store::release(&st, fh).unwrap();
        if flush {
            st.cache().flush_all().unwrap();
        }
    }
    drop(st);
    assert_eq!(std::fs::read(home.join("a")).unwrap(), vec![1u8; C]);
    (pool, home)
}

#[test]
fn a_home_file_changed_behind_the_cache_is_refused_until_recover_prefers_one_copy() {
    for (prefer, want) in [("pm", vec![2u8; C]), ("home", b"theirs".to_vec())] {
        let dir = scratch(&format!("cache-prefer-{prefer}"));
        let (pool, home) = crashed_with_dirty_chunk(&dir);
        std::fs::write(home.join("a"), b"theirs").unwrap();
        for args in [
            vec!["recover", s(&pool)],
            vec!["fsck", s(&pool)],
            vec!["cat", s(&pool), "/a"],
        ] {
            let ran = atomfs(&args);
            assert!(!ran.ok(), "{args:?} succeeded");
            assert!(
                ran.stderr
                    .contains("home file a was changed behind the cache")
                    && ran
                        .stderr
                        .contains(&format!("atomfs recover {} --prefer pm", s(&pool)))
                    && ran.stderr.contains("--prefer home"),
                "{args:?}: {}",
                ran.stderr
            );
        }
        assert_eq!(std::fs::read(home.join("a")).unwrap(), b"theirs");
        let out = atomfs_ok(&["recover", s(&pool), "--prefer", prefer, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["home_conflicts_resolved"], 1, "{out}");
        assert_eq!(v["fsck_clean"], true, "{out}");
        assert_eq!(
            std::fs::read(home.join("a")).unwrap(),
            want,
            "--prefer {prefer}"
        );
        assert_eq!(atomfs_ok(&["cat", s(&pool), "/a"]).as_bytes(), &want[..]);
    }
}

#[test]
fn recover_prefer_is_refused_for_other_engines() {
    let dir = scratch("cache-prefer-pool");
    let pool = dir.join("p.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "16M"]);
    let ran = atomfs(&["recover", s(&pool), "--prefer", "pm"]);
    assert!(
        !ran.ok() && ran.stderr.contains("engine pool"),
        "{}",
        ran.stderr
    );
}

#[test]
fn flush_writes_every_dirty_chunk_home() {
    let dir = scratch("cache-flush-local");
    let (pool, home) = crashed_with_dirty_chunk(&dir);
    let out = atomfs_ok(&["flush", s(&pool), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["chunks_flushed"], 1, "{out}");
    assert_eq!(std::fs::read(home.join("a")).unwrap(), vec![2u8; C]);
}

/// `atomfs serve POOL` in the background, ready once its socket answers.
fn start_server(pool: &Path) -> Child {
    let child = Command::new(ATOMFS)
        .args(["serve", s(pool)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = PathBuf::from(format!("{}.sock", pool.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "atomfs serve did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[test]
fn flush_through_a_serving_process_puts_the_data_home() {
    let dir = scratch("cache-flush-served");
    let (pool, home) = (dir.join("c.pool"), dir.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    atomfs_ok(&[
        "mkfs",
        s(&pool),
        "--engine",
        "cache",
        "--home",
        s(&home),
        "--size",
        "16M",
    ]);
    let mut server = start_server(&pool);
    let data = "acknowledged before the flush\n".repeat(300);
    std::fs::write(dir.join("in.txt"), &data).unwrap();
    atomfs_ok(&["put", s(&pool), s(&dir.join("in.txt")), "/f"]);
    let out = atomfs_ok(&["flush", s(&pool), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["through"].as_str().is_some(), "{out}");
    assert_eq!(std::fs::read_to_string(home.join("f")).unwrap(), data);
    // SAFETY: kill(2) of the child we started and have not reaped; no memory involved.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    assert!(server.wait().unwrap().success());
}
