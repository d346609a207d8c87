//! Path length and depth, and entries per directory, on the pool engine.
//!
//! - A path of `store::path::PATH_MAX` (4096) bytes or more is ENAMETOOLONG; one byte less
//!   resolves, however many components it has (up to 2,047 here).
//! - The tree may be deeper than any one path (the Store API names one component per call,
//!   as FUSE does): 3,000 levels are made (`ATOMFS_TREE_DEPTH=100000` for the long run), read
//!   back by walking, checked by fsck and recovered; the deepest one's full path is
//!   ENAMETOOLONG.
//! - Entries per directory have no bound of their own: a directory is a file of 272-byte
//!   entries indexed in DRAM, bounded by the pool's inodes and blocks (ENOSPC). 20,000
//!   entries in one directory here (`ATOMFS_DIR_ENTRIES=1000000` for the long run); hard
//!   links, which take no inode, fill the blocks and end with ENOSPC, the store whole.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../../mmio/tests/common/dir_bounds.rs"]
mod dir_bounds;

use dir_bounds::*;
use std::sync::Arc;
use store::path::resolve;
use store::{Error, Store, ROOT_INO};

fn pool(name: &str, len: u64, cfg: &pool::PoolConfig) -> (Arc<dyn Store>, test_support::Scratch) {
    let dir = test_support::scratch(&format!("pool-paths-{name}"));
    let store = pool::create(dir.join("p.pool"), len, cfg).unwrap();
    (store, dir)
}

fn reopen(
    s: Arc<dyn Store>,
    dir: &test_support::Scratch,
    cfg: &pool::PoolConfig,
) -> Arc<dyn Store> {
    s.unmount().unwrap();
    drop(s);
    pool::open(dir.join("p.pool"), cfg).unwrap()
}

#[test]
fn a_path_of_path_max_bytes_is_enametoolong_and_one_byte_less_resolves() {
    let cfg = pool::PoolConfig::default();
    let (s, _dir) = pool("len", 32 << 20, &cfg);
    path_max_is_the_bound(&*s);
    // A very long one is refused alike, before anything is made.
    let err = store::path::write_file(&*s, "/a".repeat(40_000), b"x", None).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NameTooLong {
                len: 80_000,
                max: 4095
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.errno(), libc::ENAMETOOLONG);
    clean(&*s);
}

#[test]
fn a_tree_deeper_than_any_path_is_walked_checked_and_recovered() {
    let depth = count("ATOMFS_TREE_DEPTH", 3_000);
    let cfg = pool::PoolConfig {
        inode_count: (depth as u64 + 64).next_power_of_two(),
        ..pool::PoolConfig::default()
    };
    let len = ((depth as u64 * 8192) + (48 << 20)).next_power_of_two();
    let (s, dir) = pool("deep", len, &cfg);
    let mut at = ROOT_INO;
    for _ in 0..depth {
        at = s.mkdir(at, b"dd", 0o755, None).unwrap().ino;
    }
    s.create(at, b"leaf", 0o644, None).unwrap();
    let full = "/dd".repeat(depth) + "/leaf";
    let err = resolve(&*s, &full).unwrap_err();
    assert_eq!(err.errno(), libc::ENAMETOOLONG, "{err:?}");
    clean(&*s);
    let s = reopen(s, &dir, &cfg);
    clean(&*s);
    let mut at = ROOT_INO;
    for _ in 0..depth {
        at = s.lookup(at, b"dd").unwrap().ino;
    }
    s.lookup(at, b"leaf").unwrap();
}

#[test]
fn a_directory_holds_as_many_entries_as_inodes_allow() {
    let n = count("ATOMFS_DIR_ENTRIES", 20_000);
    let cfg = pool::PoolConfig {
        inode_count: (n as u64 + 64).next_power_of_two(),
        metadata_log_entries: 65_536,
        ..pool::PoolConfig::default()
    };
    let len = ((n as u64 * 600) + (64 << 20)).next_power_of_two();
    let (s, dir) = pool("many", len, &cfg);
    let d = s.mkdir(ROOT_INO, b"big", 0o755, None).unwrap().ino;
    for i in 0..n {
        s.create(d, format!("entry-{i}").as_bytes(), 0o644, None)
            .unwrap();
    }
    assert_eq!(s.read_dir(d).unwrap().len(), n);
    s.lookup(d, format!("entry-{}", n / 2).as_bytes()).unwrap();
    let s = reopen(s, &dir, &cfg);
    assert_eq!(s.read_dir(d).unwrap().len(), n);
    s.unlink(d, b"entry-0", None).unwrap();
    assert!(s.lookup(d, b"entry-0").is_err());
    clean(&*s);
}

#[test]
fn hard_links_fill_the_blocks_with_enospc_and_the_store_stays_whole() {
    let cfg = pool::PoolConfig::default();
    let (s, dir) = pool("links", 24 << 20, &cfg);
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    store::path::write_file(&*s, "/f", b"the file", None).unwrap();
    let d = s.mkdir(ROOT_INO, b"links", 0o755, None).unwrap().ino;
    let mut made = 0usize;
    let err = loop {
        // 255-byte names: the fewest links per block.
        let name = format!("{made:0>255}");
        match s.link(f.ino, d, name.as_bytes(), None) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        assert!(made < 1_000_000, "a 24 MiB pool took a million entries");
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err:?}");
    assert_eq!(s.read_dir(d).unwrap().len(), made);
    assert_eq!(s.getattr(f.ino).unwrap().nlink as usize, made + 1);
    clean(&*s);
    let s = reopen(s, &dir, &cfg);
    assert_eq!(s.read_dir(d).unwrap().len(), made);
    assert_eq!(store::path::read_file(&*s, "/f").unwrap(), b"the file");
    clean(&*s);
}
