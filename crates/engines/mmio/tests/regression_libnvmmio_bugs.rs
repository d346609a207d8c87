//! Regression tests for the three defects of the public Libnvmmio code that atomfs's mmio
//! engine must not have (DESIGN.md §3 "mmio"):
//!
//! 1. **No crash recovery.** The public code truncates its logs at start and deletes them at
//!    exit, so committed-but-not-checkpointed redo data is lost and uncommitted undo-mode
//!    in-place writes stay in the file after a crash. Tests: `recovery_redoes_committed_redo_entries`,
//!    `recovery_undoes_uncommitted_undo_entries`.
//! 2. **Undo image overwritten by a second write in one epoch.** A second write to a block
//!    in the same epoch re-logged the block's *current* bytes (the first write's new data) as
//!    its undo image, so a crash rolled back only to the first write. Test:
//!    `undo_image_survives_second_write_in_epoch`.
//! 3. **Hybrid switch misfire.** The write ratio was computed with integer division
//!    (`write_cnt / (read_cnt + write_cnt) * 100`), which is 0 for any epoch with a read, so a
//!    file never switched to redo unless it was never read. Test:
//!    `hybrid_switches_to_redo_at_forty_percent_writes`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{MmioConfig, Policy, PolicyMode};
use store::Store;

fn cfg(mode: PolicyMode) -> MmioConfig {
    MmioConfig {
        policy_mode: mode,
        ..MmioConfig::test_min()
    }
}

#[test]
fn recovery_redoes_committed_redo_entries() {
    let c = cfg(PolicyMode::Redo);
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/r", false);
    s.write(fh, 0, &[1u8; 8192]).unwrap();
    s.checkpoint_all().unwrap();
    s.write(fh, 100, &[2u8; 3000]).unwrap(); // committed, still only in the log
    assert!(
        s.live_entries(fh).unwrap() > 0,
        "the test needs an un-checkpointed entry"
    );
    let mut want = vec![1u8; 8192];
    want[100..3100].fill(2);
    let (_r, s2) = sim_reopen(region.persistent_image(), &c).unwrap();
    assert!(
        s2.recovery_report().entries_redone >= 1,
        "{:?}",
        s2.recovery_report()
    );
    assert_eq!(read_path(&s2, "/r"), want);
}

#[test]
fn recovery_undoes_uncommitted_undo_entries() {
    let c = cfg(PolicyMode::Undo);
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/u", true);
    s.write(fh, 0, &[1u8; 8192]).unwrap();
    s.fsync(fh, false).unwrap();
    s.write(fh, 10, &[9u8; 5000]).unwrap(); // in place, not committed
                                            // The cache image holds the in-place write: recovery must roll it back.
    let (_r, s2) = sim_reopen(region.cache_image(), &c).unwrap();
    assert!(
        s2.recovery_report().entries_undone >= 1,
        "{:?}",
        s2.recovery_report()
    );
    assert_eq!(read_path(&s2, "/u"), vec![1u8; 8192]);
}

#[test]
fn undo_image_survives_second_write_in_epoch() {
    let c = cfg(PolicyMode::Undo);
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/b", true);
    s.write(fh, 0, &[b'A'; 4096]).unwrap();
    s.fsync(fh, false).unwrap();
    s.write(fh, 0, &[b'B'; 10]).unwrap(); // first write of the epoch to block 0
    s.write(fh, 0, &[b'C'; 20]).unwrap(); // second write, overlapping and wider
    s.write(fh, 2000, &[b'D'; 10]).unwrap(); // third, disjoint chunk of the same block
    let (_r, s2) = sim_reopen(region.cache_image(), &c).unwrap();
    assert_eq!(
        read_path(&s2, "/b"),
        vec![b'A'; 4096],
        "rolled back to the epoch's start"
    );
    s.abortv(&[fh]).unwrap();
    assert_eq!(
        read_path(&s, "/b"),
        vec![b'A'; 4096],
        "abort restores the first image too"
    );
}

#[test]
fn hybrid_switches_to_redo_at_forty_percent_writes() {
    let c = cfg(PolicyMode::Hybrid);
    let (_region, s) = sim_store(&c);
    let fh = open_rw(&s, "/h", true);
    assert_eq!(s.file_policy(fh).unwrap(), Policy::Undo, "undo by default");
    // 2 writes and 3 reads: exactly 40 % writes -> redo for the next epoch.
    let mut buf = [0u8; 8];
    s.write(fh, 0, b"12345678").unwrap();
    s.write(fh, 8, b"12345678").unwrap();
    for _ in 0..3 {
        s.read(fh, 0, &mut buf).unwrap();
    }
    s.fsync(fh, false).unwrap();
    assert_eq!(
        s.file_policy(fh).unwrap(),
        Policy::Redo,
        "40 % writes must switch to redo"
    );
    // 1 write and 2 reads (33 %): back to undo, with a synchronous checkpoint at the switch.
    s.write(fh, 0, b"abcdefgh").unwrap();
    s.read(fh, 0, &mut buf).unwrap();
    s.read(fh, 0, &mut buf).unwrap();
    s.fsync(fh, false).unwrap();
    assert_eq!(s.file_policy(fh).unwrap(), Policy::Undo);
    assert_eq!(
        s.live_entries(fh).unwrap(),
        0,
        "switch checkpoints synchronously"
    );
    s.read(fh, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"abcdefgh");
}
