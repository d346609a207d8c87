//! Path length and depth, and entries per directory, on the cache engine: the checks of
//! `crates/engines/mmio/tests/common/dir_bounds.rs` over a real home directory, each
//! followed by a reopen.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../../mmio/tests/common/dir_bounds.rs"]
mod dir_bounds;

use cache::{CacheConfig, HostCacheStore};
use dir_bounds::*;
use store::path::resolve;
use store::Store;
use test_support::Scratch;

const POOL: u64 = 8 << 20;

fn new_store(name: &str) -> (HostCacheStore, Scratch) {
    let dir = test_support::scratch(&format!("cache-paths-{name}"));
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let s = HostCacheStore::create(
        &dir.join("home"),
        &dir.join("c.pool"),
        POOL,
        &CacheConfig::default(),
    )
    .unwrap();
    (s, dir)
}

fn reopen(s: HostCacheStore, dir: &Scratch) -> HostCacheStore {
    s.unmount().unwrap();
    drop(s);
    HostCacheStore::open(
        &dir.join("home"),
        &dir.join("c.pool"),
        &CacheConfig::default(),
    )
    .unwrap()
}

#[test]
fn a_path_of_path_max_bytes_is_enametoolong_and_one_byte_less_resolves() {
    let (s, dir) = new_store("len");
    let fits = path_max_is_the_bound(&s);
    let again = reopen(s, &dir);
    assert_eq!(resolve(&again, &fits).unwrap().kind, store::FileKind::Dir);
    clean(&again);
}

#[test]
fn a_tree_deeper_than_a_host_path_stops_at_the_host_with_enametoolong() {
    let (s, dir) = new_store("deep");
    let depth = host_path_max_bounds_the_depth(&s);
    let again = reopen(s, &dir);
    walk_down(&again, depth);
    clean(&again);
}

#[test]
fn a_directory_holds_as_many_entries_as_the_host_allows() {
    let (s, dir) = new_store("many");
    let n = fill_directory(&s, 5_000);
    directory_holds(&reopen(s, &dir), n);
}
