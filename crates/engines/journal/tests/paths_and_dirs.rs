//! Path length and depth, and entries per directory, on the journal engine: the checks of
//! `crates/engines/mmio/tests/common/dir_bounds.rs` over the host crash model, each
//! followed by a crash and recovery.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../../mmio/tests/common/dir_bounds.rs"]
mod dir_bounds;

use dir_bounds::*;
use hostfs::SimHostFs;
use journal::layout::Geometry;
use journal::{JournalConfig, JournalStore, StoreConfig};
use pmem::SimRegion;
use std::sync::Arc;
use store::path::resolve;
use store::Store;

type SimStore = JournalStore<Arc<SimRegion>, SimHostFs>;

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            checkpoint_period: None,
            ..JournalConfig::test_min()
        },
        ..StoreConfig::default()
    }
}

fn new_store() -> (Arc<SimRegion>, SimHostFs, SimStore) {
    let cfg = config();
    let g = Geometry::new(cfg.journal.journal_blocks).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on(region.clone(), host.clone(), &cfg).unwrap();
    (region, host, s)
}

/// Recover from what a crash now would leave.
fn crash(region: &SimRegion, host: &SimHostFs) -> SimStore {
    JournalStore::open_on(
        Arc::new(SimRegion::from_image(region.persistent_image())),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        &config(),
    )
    .unwrap()
}

#[test]
fn a_path_of_path_max_bytes_is_enametoolong_and_one_byte_less_resolves() {
    let (region, host, s) = new_store();
    let fits = path_max_is_the_bound(&s);
    let again = crash(&region, &host);
    assert_eq!(resolve(&again, &fits).unwrap().kind, store::FileKind::Dir);
    clean(&again);
}

/// Home files are named by inode, not by their path: no host bound on depth.
#[test]
fn a_tree_deeper_than_any_path_is_made_walked_and_recovered() {
    let (region, host, s) = new_store();
    let depth = 3_000;
    a_deeper_tree_than_a_path_is_made(&s, depth);
    let again = crash(&region, &host);
    walk_down(&again, depth);
    clean(&again);
}

#[test]
fn a_directory_holds_as_many_entries_as_the_host_allows() {
    let (region, host, s) = new_store();
    let n = fill_directory(&s, 20_000);
    s.unmount().unwrap();
    directory_holds(&crash(&region, &host), n);
}
