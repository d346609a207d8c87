//! Path length and depth, and entries per directory, on the mmio engine: the checks of
//! `common/dir_bounds.rs` over a simulated and a real store directory.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;
#[path = "common/dir_bounds.rs"]
mod dir_bounds;

use common::*;
use dir_bounds::*;
use mmio::{MmioConfig, MmioStore};
use store::path::resolve;
use store::Store;

fn cfg() -> MmioConfig {
    MmioConfig {
        checkpoint_period: None,
        ..MmioConfig::test_min()
    }
}

fn real_store(tag: &str) -> (std::path::PathBuf, mmio::HostMmioStore) {
    let dir = shm_dir(tag);
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &cfg()).unwrap();
    (dir, s)
}

fn real_reopen(dir: &std::path::Path, s: mmio::HostMmioStore) -> mmio::HostMmioStore {
    s.unmount().unwrap();
    drop(s);
    MmioStore::open(&dir.join("files"), &dir.join("log.pool"), &cfg()).unwrap()
}

#[test]
fn a_path_of_path_max_bytes_is_enametoolong_and_one_byte_less_resolves() {
    let (sim, s) = sim_store(&cfg());
    let fits = path_max_is_the_bound(&s);
    let (_sim, again) = sim_reopen(sim.persistent_image(), &cfg()).unwrap();
    assert_eq!(resolve(&again, &fits).unwrap().kind, store::FileKind::Dir);
}

#[test]
fn a_tree_deeper_than_a_host_path_stops_at_the_host_with_enametoolong() {
    let (dir, s) = real_store("deep");
    let depth = host_path_max_bounds_the_depth(&s);
    let s = real_reopen(&dir, s);
    walk_down(&s, depth);
    clean(&s);
    drop(s);
    cleanup(&dir);
}

#[test]
fn a_directory_holds_as_many_entries_as_the_host_allows() {
    let (dir, s) = real_store("many");
    let n = fill_directory(&s, 20_000);
    let s = real_reopen(&dir, s);
    directory_holds(&s, n);
    drop(s);
    cleanup(&dir);
}
