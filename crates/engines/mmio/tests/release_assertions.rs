//! The engine's release assertions trip when the log pool's words are not what the engine
//! last wrote: each test changes one word of a live store's log pool behind its back (as a
//! foreign writer or a bug would) and checks that the next operation relying on it stops
//! with the assertion's message instead of building on the wrong state.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::log::layout::{fm, Superblock};
use mmio::MmioConfig;
use pmem::Region;
use store::Store;

fn cfg() -> MmioConfig {
    MmioConfig::test_min()
}

fn superblock(sim: &Sim) -> Superblock {
    let mut b = [0u8; 128];
    sim.region.read(0, &mut b);
    Superblock::decode(&b, sim.region.len()).unwrap()
}

#[test]
fn commits_run_while_the_words_are_the_engines() {
    let (_sim, s) = sim_store(&cfg());
    let a = open_rw(&s, "/a", false);
    let b = open_rw(&s, "/b", false);
    s.write(a, 0, b"one").unwrap();
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 0, b"two").unwrap();
    s.write(b, 0, b"two").unwrap();
    s.set_len(b, 1).unwrap();
    s.tx_commit(tx).unwrap();
    assert_eq!(read_path(&s, "/b"), b"t");
    let tx = s.tx_begin(&[a]).unwrap();
    s.set_len(a, 0).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/a"), b"two");
}

#[test]
#[should_panic(expected = "epoch word")]
fn a_commit_checks_the_epoch_word_it_bumps() {
    let (sim, s) = sim_store(&cfg());
    let fh = open_rw(&s, "/f", false);
    s.write(fh, 0, b"first").unwrap();
    // The first file opened takes slot 0; its epoch word moves behind the engine's back.
    let at = superblock(&sim).file_meta_at(0) + fm::EPOCH;
    sim.region.store_u64(at, sim.region.load_u64(at) + 5);
    s.write(fh, 0, b"second").unwrap();
}

#[test]
#[should_panic(expected = "epoch word")]
fn a_multi_file_commit_checks_every_epoch_word() {
    let (sim, s) = sim_store(&cfg());
    let a = open_rw(&s, "/a", false);
    let b = open_rw(&s, "/b", false);
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 0, b"a").unwrap();
    s.write(b, 0, b"b").unwrap();
    let at = superblock(&sim).file_meta_at(1) + fm::EPOCH;
    sim.region.store_u64(at, 0);
    let _ = s.tx_commit(tx);
}

#[test]
#[should_panic(expected = "transaction record 0 is in use")]
fn a_transaction_record_is_free_before_it_is_written() {
    let (sim, s) = sim_store(&cfg());
    let a = open_rw(&s, "/a", false);
    let b = open_rw(&s, "/b", false);
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 0, b"a").unwrap();
    s.write(b, 0, b"b").unwrap();
    sim.region.store_u64(superblock(&sim).tx_at(0), 1);
    let _ = s.tx_commit(tx);
}

#[test]
#[should_panic(expected = "is in use")]
fn an_intent_record_is_free_before_it_is_written() {
    let (sim, s) = sim_store(&cfg());
    let tx = s.tx_begin(&[]).unwrap();
    sim.region.store_u64(superblock(&sim).intent_at(0), 1);
    let _ = s.mkdir(store::ROOT_INO, b"d", 0o755, Some(tx));
}

#[test]
#[should_panic(expected = "PENDING_SIZE word")]
fn a_commit_checks_the_pending_size_it_folds() {
    let (sim, s) = sim_store(&cfg());
    let fh = open_rw(&s, "/f", false);
    s.write(fh, 0, b"0123456789").unwrap();
    let tx = s.tx_begin(&[fh]).unwrap();
    s.set_len(fh, 4).unwrap();
    let at = superblock(&sim).file_meta_at(0) + fm::PENDING_SIZE;
    sim.region.store_u64(at, 3);
    let _ = s.tx_commit(tx);
}
