//! Fault injection from hostfs: ENOSPC and EIO during a checkpoint's home writes and syncs
//! (the journal keeps every version and retries; a committed version is never dropped), and
//! EIO on the sync of an append (the transaction is not committed).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use hostfs::{Fault, FaultKind, FaultOp, FaultPlan, Faulty, SimHostFs};
use journal::{Journal, JournalConfig, Tx};
use pmem::SimRegion;
use std::sync::Arc;

type FaultyJournal = Journal<Arc<SimRegion>, Faulty<SimHostFs>>;

fn faulty_journal() -> (Arc<SimRegion>, SimHostFs, Arc<FaultPlan>, FaultyJournal) {
    let cfg = JournalConfig {
        journal_blocks: 64,
        ..JournalConfig::test_min()
    };
    let g = journal::layout::Geometry::new(64).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::new(host_config());
    let plan = FaultPlan::new();
    let j = Journal::create(
        region.clone(),
        Faulty::new(host.clone(), plan.clone()),
        namer(),
        cfg,
    )
    .unwrap();
    (region, host, plan, j)
}

/// Commit one transaction writing `data` at `off` of file 1 (size `len` before).
fn put(j: &FaultyJournal, off: u64, data: &[u8], len: u64) -> journal::JournalResult<()> {
    let mut tx = Tx::new();
    j.write(&mut tx, 1, off, data, Some(len))?;
    let mut sizes = vec![0u8; 4096];
    sizes[0..8].copy_from_slice(&len.max(off + data.len() as u64).to_le_bytes());
    tx.put_block(sizes_key(), &sizes);
    j.commit(tx)
}

fn file1(j: &FaultyJournal, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    j.read(None, 1, 0, &mut b).unwrap();
    b
}

fn reopened_file1(region: &SimRegion, host: &SimHostFs, len: usize) -> Vec<u8> {
    let cfg = JournalConfig {
        journal_blocks: 64,
        ..JournalConfig::test_min()
    };
    let j = sim_reopen(region.persistent_image(), &host.durable_image(), &cfg).unwrap();
    let mut b = vec![0u8; len];
    j.read(None, 1, 0, &mut b).unwrap();
    b
}

fn checkpoint_fault_keeps_versions(op: FaultOp, kind: FaultKind) {
    let (region, host, plan, j) = faulty_journal();
    put(&j, 0, &[1u8; 8192], 0).unwrap();
    put(&j, 100, &[2u8; 5000], 8192).unwrap();
    let mut want = vec![1u8; 8192];
    want[100..5100].fill(2);
    let journaled = j.journaled_blocks();
    assert!(journaled >= 2);
    plan.add(Fault::once(op, kind));
    assert!(
        j.checkpoint().is_err(),
        "the injected fault must fail the checkpoint"
    );
    assert_eq!(plan.injected().len(), 1);
    assert_eq!(
        j.journaled_blocks(),
        journaled,
        "a failed checkpoint drops no version"
    );
    assert_eq!(file1(&j, 8192), want);
    assert_eq!(reopened_file1(&region, &host, 8192), want, "after a crash");
    j.checkpoint().unwrap();
    assert_eq!(j.journaled_blocks(), 0);
    assert_eq!(file1(&j, 8192), want);
    assert_eq!(
        reopened_file1(&region, &host, 8192),
        want,
        "after a crash, checkpointed"
    );
}

#[test]
fn eio_on_sync_during_checkpoint() {
    checkpoint_fault_keeps_versions(FaultOp::SyncFile, FaultKind::Io);
}

#[test]
fn enospc_on_write_during_checkpoint() {
    checkpoint_fault_keeps_versions(FaultOp::Write, FaultKind::NoSpace);
}

#[test]
fn eio_on_append_sync_does_not_commit() {
    let (region, host, plan, j) = faulty_journal();
    put(&j, 0, &[1u8; 100], 0).unwrap();
    plan.add(Fault::once(FaultOp::SyncFile, FaultKind::Io));
    assert!(put(&j, 8192, &[3u8; 4096], 100).is_err());
    let mut sizes = [0u8; 8];
    j.read(None, 0, 0, &mut sizes).unwrap();
    assert_eq!(
        u64::from_le_bytes(sizes),
        100,
        "the failed transaction published no size"
    );
    assert_eq!(reopened_file1(&region, &host, 100), vec![1u8; 100]);
    put(&j, 100, &[4u8; 50], 100).unwrap();
    let mut want = vec![1u8; 100];
    want.extend_from_slice(&[4u8; 50]);
    assert_eq!(reopened_file1(&region, &host, 150), want);
}

/// A checkpoint that a commit starts (journal low) fails on EIO: the commit still succeeds
/// (it is durable before the checkpoint runs), and nothing is lost.
#[test]
fn a_failed_checkpoint_does_not_fail_the_commit_that_started_it() {
    let (region, host, plan, j) = faulty_journal();
    let len = 4096 * 64;
    put(&j, 0, &vec![1u8; len], 0).unwrap();
    plan.add(Fault::once(FaultOp::SyncFile, FaultKind::Io));
    let mut want = vec![1u8; len];
    for i in 0..64u64 {
        let off = i * 4096 + i;
        put(&j, off, &[i as u8 + 2; 10], len as u64).unwrap();
        want[off as usize..off as usize + 10].fill(i as u8 + 2);
    }
    assert!(j.stats().checkpoint_errors > 0, "{:?}", j.stats());
    assert_eq!(file1(&j, len), want);
    plan.clear();
    assert_eq!(reopened_file1(&region, &host, len), want);
}
