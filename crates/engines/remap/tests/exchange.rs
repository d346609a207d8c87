//! Exchange commits (store/exchange.rs) on the host crash model, which offers
//! exchange-range: a commit rewriting most of a file stages it and swaps it in (no journaled
//! data block); below the thresholds, on a file with committed changes not yet checkpointed,
//! or without exchange-range, the commit journals as always; recovery completes a swap that
//! did not happen, never redoes one that did, and refuses when neither file holds the
//! committed content.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::{Fault, FaultKind, FaultOp, FaultPlan, Faulty, HostFs, SimConfig, SimHostFs};
use remap::{RemapConfig, RemapStore};
use std::sync::Arc;
use store::{Error, OpenOptions, Store, ROOT_INO};

const BLOCK: usize = 4096;

fn config() -> RemapConfig {
    RemapConfig {
        checkpoint_journal_len: 1 << 30,
        exchange_blocks_min: 4,
        exchange_share_percent: 50,
        ..RemapConfig::default()
    }
}

fn open(s: &dyn Store, path: &str, atomic: bool) -> store::Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
        .unwrap()
}

fn get(s: &dyn Store, path: &str) -> Vec<u8> {
    let fh = OpenOptions::new().read(true).open(s, path, None).unwrap();
    let len = s.fstat(fh).unwrap().size as usize;
    let mut buf = vec![0u8; len];
    assert_eq!(s.read(fh, 0, &mut buf).unwrap(), len);
    s.release(fh).unwrap();
    buf
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn recover(sim: &SimHostFs) -> RemapStore<SimHostFs> {
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    RemapStore::open_on(crashed, Some(9), &config()).unwrap()
}

#[test]
fn a_commit_rewriting_most_of_a_file_swaps_a_staged_copy_in() {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), 9, &config()).unwrap();
    // 16 blocks and a partial one, in one commit: an exchange, no journaled data.
    let mut want = pattern(1, 16 * BLOCK + 300);
    let f = open(&s, "/big", false);
    s.write(f, 0, &want).unwrap();
    let c = s.counters();
    assert_eq!((c.exchanges, c.commit_blocks), (1, 0), "{c:?}");
    assert_eq!(get(&s, "/big"), want);
    // One block: journaled (below exchange_blocks_min).
    s.write(f, 14 * BLOCK as u64, &[9u8; BLOCK]).unwrap();
    want[14 * BLOCK..15 * BLOCK].fill(9);
    let c = s.counters();
    assert_eq!((c.exchanges, c.commit_blocks), (1, 1), "{c:?}");
    // O_ATOMIC rewrite of 12 blocks while the file has a committed, not checkpointed block
    // that the rewrite leaves alone (its home file is not its content): journaled.
    let a = open(&s, "/big", true);
    let new = pattern(2, 12 * BLOCK);
    s.write(a, 0, &new).unwrap();
    s.fsync(a, true).unwrap();
    want[..12 * BLOCK].copy_from_slice(&new);
    assert_eq!(s.counters().exchanges, 1);
    assert_eq!(s.counters().commit_blocks, 13);
    // After a checkpoint the same rewrite swaps.
    assert!(s.checkpoint().unwrap());
    let new = pattern(3, 12 * BLOCK);
    s.write(a, 2 * BLOCK as u64, &new).unwrap();
    s.fsync(a, true).unwrap();
    want[2 * BLOCK..14 * BLOCK].copy_from_slice(&new);
    assert_eq!(s.counters().exchanges, 2);
    assert_eq!(s.counters().commit_blocks, 13);
    assert_eq!(get(&s, "/big"), want);
    // Three of 17 blocks: below the share, journaled.
    s.write(a, 0, &pattern(4, 3 * BLOCK)).unwrap();
    s.fsync(a, true).unwrap();
    want[..3 * BLOCK].copy_from_slice(&pattern(4, 3 * BLOCK));
    assert_eq!(s.counters().exchanges, 2);
    s.release(a).unwrap();
    s.release(f).unwrap();
    // Durable as acknowledged; no staging file left once checkpointed.
    let r = recover(&sim);
    assert_eq!(get(&r, "/big"), want);
    assert!(r.fsck().unwrap().is_clean());
    assert_eq!(r.counters().exchanges_redone, 0);
    s.unmount().unwrap();
    let files = sim.read_dir(std::path::Path::new("files")).unwrap();
    assert!(
        files.iter().all(|e| !e.name.ends_with(b".stage")),
        "{files:?}"
    );
}

#[test]
fn without_exchange_range_a_rewrite_is_journaled() {
    let mut cfg = SimConfig::default();
    cfg.capabilities.exchange_range = false;
    let sim = SimHostFs::new(cfg);
    let s = RemapStore::create_on(sim, 9, &config()).unwrap();
    let f = open(&s, "/big", false);
    s.write(f, 0, &pattern(1, 16 * BLOCK)).unwrap();
    let c = s.counters();
    assert_eq!((c.exchanges, c.commit_blocks), (0, 16), "{c:?}");
    assert_eq!(
        s.stats().iter().find(|(n, _)| n == "exchanges").unwrap().1,
        0
    );
}

/// A store on `sim` that fails as `plan` says.
fn faulty(sim: &SimHostFs, plan: &Arc<FaultPlan>) -> RemapStore<Faulty<SimHostFs>> {
    RemapStore::create_on(Faulty::new(sim.clone(), plan.clone()), 9, &config()).unwrap()
}

fn home_of(s: &dyn Store, name: &[u8]) -> String {
    format!("files/{}", s.lookup(ROOT_INO, name).unwrap().ino)
}

#[test]
fn recovery_completes_a_committed_swap_that_did_not_happen() {
    let (sim, plan) = (SimHostFs::default(), FaultPlan::new());
    let s = faulty(&sim, &plan);
    let f = open(&s, "/big", false);
    let old = pattern(1, 16 * BLOCK);
    s.write(f, 0, &old).unwrap();
    plan.add(Fault::once(FaultOp::Write, FaultKind::Io).on(home_of(&s, b"big")));
    let new = pattern(2, 16 * BLOCK);
    // The record is durable; the swap fails: not acknowledged, the store refuses changes.
    assert!(s.write(f, 0, &new).is_err());
    assert!(s.write(f, 0, b"x").is_err());
    let r = recover(&sim);
    assert_eq!(r.counters().exchanges_redone, 1);
    assert_eq!(get(&r, "/big"), new);
    assert!(r.fsck().unwrap().is_clean());
    // Recovering the recovered store again changes nothing (the swap is not redone).
    r.unmount().unwrap();
}

#[test]
fn recovery_never_redoes_a_swap_that_happened() {
    let (sim, plan) = (SimHostFs::default(), FaultPlan::new());
    let s = faulty(&sim, &plan);
    let f = open(&s, "/big", false);
    s.write(f, 0, &pattern(1, 16 * BLOCK)).unwrap();
    // The swap is done and synced; the checkpoint after it fails (its snapshot cannot be
    // created): the exchange record stays the journal's last.
    plan.add(Fault::once(FaultOp::Create, FaultKind::NoSpace).on("remap.meta.tmp"));
    let new = pattern(2, 16 * BLOCK);
    assert!(s.write(f, 0, &new).is_err());
    let r = recover(&sim);
    assert_eq!(r.counters().exchanges_redone, 0);
    assert_eq!(get(&r, "/big"), new);
    assert!(r.fsck().unwrap().is_clean());
}

#[test]
fn a_committed_swap_whose_staging_file_is_gone_is_refused() {
    let (sim, plan) = (SimHostFs::default(), FaultPlan::new());
    let s = faulty(&sim, &plan);
    let f = open(&s, "/big", false);
    s.write(f, 0, &pattern(1, 16 * BLOCK)).unwrap();
    let home = home_of(&s, b"big");
    plan.add(Fault::once(FaultOp::Write, FaultKind::Io).on(home.clone()));
    assert!(s.write(f, 0, &pattern(2, 16 * BLOCK)).is_err());
    let fs = Faulty::new(sim.clone(), FaultPlan::new());
    fs.delete_behind(std::path::Path::new(&format!("{home}.stage")))
        .unwrap();
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    match RemapStore::open_on(crashed, Some(9), &config()) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("staging file"), "{what}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a store whose committed exchange cannot be completed"),
    }
}
