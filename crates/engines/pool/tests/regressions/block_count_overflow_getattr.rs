//! Found by `cargo fuzz run pool_open` (first minute of the first run, 2026-11-22), input
//! `21 23 3f 23 23 23 6e 69 23 23 69 6e 01 ff`: the "files" image with the top byte of one
//! inode's block count (bytes 56..64 of the inode) xored with 0x6e.
//!
//! `getattr` (through `lookup`) computed `allocated = blocks * 4096` from the raw media
//! value and panicked on the overflow ("attempt to multiply with overflow", ns.rs
//! `metadata`). Fix: the multiplication saturates, and `metadata` validates the size
//! through `inode_size`; fsck compares the recorded block count with the tree.
//!
//! The raw input is not replayed byte for byte: which inode numbers the image's files get
//! depends on the allocating thread's free-list shard, so the same offset names another
//! inode on another test thread. The test makes the same change to a known file.

use super::images::{build_image, image_config, ImageKind, IMAGE_BYTES};
use pmem::DramRegion;
use pool::{Geometry, PoolStore};
use std::sync::Arc;
use store::{Store, ROOT_INO};

#[test]
fn getattr_of_a_corrupt_block_count_does_not_overflow() {
    let cfg = image_config();
    let geo = Geometry::plan(IMAGE_BYTES, &cfg).unwrap();
    let mut img = build_image(ImageKind::Files);
    let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg).unwrap();
    let ino = store::resolve(&s, "/f2").unwrap().ino;
    drop(s);
    img[(geo.inode(ino) + 63) as usize] ^= 0x6e;
    let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg).unwrap();
    let meta = s.lookup(ROOT_INO, b"f2").unwrap();
    assert_eq!(meta.allocated, u64::MAX, "saturated, not wrapped");
    let report = s.fsck().unwrap();
    assert!(
        report.problems.iter().any(|p| p.what.contains("records")),
        "fsck names the bad block count: {:?}",
        report.problems
    );
}
