//! The conformance suite with checkpoints by FICLONERANGE on a real XFS (reflink=1) image,
//! loop-mounted from /dev/shm (root; CI runs as root): tests/common/kernel_suite.rs.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::kernel_suite::{new_store, LoopHarness};
use common::Kind;
use remap::CheckpointMode;
use store::Store;

conformance::conformance_tests!(LoopHarness(Kind::Xfs));

/// The checkpoints of the suite above really remapped (on XFS): a store written past its
/// journal limit reports FICLONERANGE calls and no copied block.
#[test]
fn checkpoints_on_xfs_remap_instead_of_copying() {
    let s = new_store(Kind::Xfs);
    if s.checkpoint_mode() == CheckpointMode::Copy {
        return; // skipped above, with the reason
    }
    let f = store::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&s, "/big", None)
        .unwrap();
    let block = vec![7u8; 1 << 20];
    for i in 0..6u64 {
        s.write(f, i << 20, &block).unwrap();
    }
    assert!(s.checkpoint().unwrap());
    let c = s.counters();
    assert!(c.remap_calls > 0 && c.remapped_blocks >= 6 * 256, "{c:?}");
    assert_eq!(c.copied_blocks, 0);
    let mut back = vec![0u8; 1 << 20];
    assert_eq!(s.read(f, 5 << 20, &mut back).unwrap(), 1 << 20);
    assert_eq!(back, block);
    s.release(f).unwrap();
}
