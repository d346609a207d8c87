//! The conformance suite with checkpoints by FICLONERANGE on a real Btrfs image,
//! loop-mounted from /dev/shm (root; CI runs as root): tests/common/kernel_suite.rs.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::kernel_suite::{new_store, LoopHarness};
use common::Kind;
use remap::CheckpointMode;
use store::Store;

conformance::conformance_tests!(LoopHarness(Kind::Btrfs));

/// The checkpoints really remapped on Btrfs.
#[test]
fn checkpoints_on_btrfs_remap_instead_of_copying() {
    let s = new_store(Kind::Btrfs);
    if s.checkpoint_mode() == CheckpointMode::Copy {
        return; // skipped, with the reason printed
    }
    let f = store::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&s, "/big", None)
        .unwrap();
    s.write(f, 0, &vec![5u8; 3 << 20]).unwrap();
    assert!(s.checkpoint().unwrap());
    let c = s.counters();
    assert!(c.remap_calls > 0 && c.copied_blocks == 0, "{c:?}");
    s.release(f).unwrap();
}
