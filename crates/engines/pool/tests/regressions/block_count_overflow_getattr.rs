//! Found by `cargo fuzz run pool_open` (first minute of the first run, 2026-11-22).
//!
//! The input xors the top byte of inode 38's block count (bytes 56..64 of the inode) in the
//! "files" image. `getattr` (through `lookup`) computed `allocated = blocks * 4096` from the
//! raw media value and panicked on the overflow ("attempt to multiply with overflow",
//! ns.rs `metadata`). Fix: the multiplication saturates, and `metadata` validates the size
//! through `inode_size`; fsck now compares the recorded block count with the tree.

use super::{hostile::Outcome, replay_pool_open};

#[test]
fn getattr_of_a_corrupt_block_count_does_not_overflow() {
    let input = [
        0x21, 0x23, 0x3f, 0x23, 0x23, 0x23, 0x6e, 0x69, 0x23, 0x23, 0x69, 0x6e, 0x01, 0xff,
    ];
    match replay_pool_open(&input) {
        Outcome::Opened(report) => assert!(
            report.problems.iter().any(|p| p.what.contains("blocks")),
            "fsck names the bad block count: {:?}",
            report.problems
        ),
        Outcome::Refused(e) => panic!("the image opens (the block count is not read at open): {e}"),
    }
}
