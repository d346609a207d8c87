//! Path length and depth, and entries per directory, on the remap engine: the checks of
//! `crates/engines/mmio/tests/common/dir_bounds.rs` over the host crash model, each
//! followed by a crash and recovery.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../../mmio/tests/common/dir_bounds.rs"]
mod dir_bounds;

use dir_bounds::*;
use hostfs::SimHostFs;
use remap::{RemapConfig, RemapStore};
use store::path::resolve;
use store::Store;

/// Entries in one directory in the short run: every namespace operation of this engine
/// costs time growing with the namespace's size (2,000 creates take seconds, 20,000 many
/// minutes in a debug build), so the short run stays small.
const ENTRIES: usize = 2_000;

fn new_store() -> (SimHostFs, RemapStore<SimHostFs>) {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), 9, &RemapConfig::default()).unwrap();
    (sim, s)
}

/// Recover from what a crash now would leave.
fn crash(sim: &SimHostFs) -> RemapStore<SimHostFs> {
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    RemapStore::open_on(crashed, Some(9), &RemapConfig::default()).unwrap()
}

#[test]
fn a_path_of_path_max_bytes_is_enametoolong_and_one_byte_less_resolves() {
    let (sim, s) = new_store();
    let fits = path_max_is_the_bound(&s);
    let again = crash(&sim);
    assert_eq!(resolve(&again, &fits).unwrap().kind, store::FileKind::Dir);
    clean(&again);
}

/// Home files are named by inode, not by their path: no host bound on depth. 1,400 levels
/// of `/dd` are 4,200 bytes, more than one path can name.
#[test]
fn a_tree_deeper_than_any_path_is_made_walked_and_recovered() {
    let (sim, s) = new_store();
    let depth = 1_400;
    a_deeper_tree_than_a_path_is_made(&s, depth);
    let again = crash(&sim);
    walk_down(&again, depth);
    clean(&again);
}

#[test]
fn a_directory_holds_as_many_entries_as_the_host_allows() {
    let (sim, s) = new_store();
    let n = fill_directory(&s, ENTRIES);
    s.unmount().unwrap();
    directory_holds(&crash(&sim), n);
}
