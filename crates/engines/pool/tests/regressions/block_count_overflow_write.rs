//! Found by the corrupted-image corpus (tests/corrupt_corpus.rs `inode_fields`, case
//! "inode /f1: block count u64::MAX").
//!
//! A write to a file whose on-media block count is u64::MAX allocated a block and counted
//! it with `delta.blocks += 1`: "attempt to add with overflow" (data.rs `fill_hole`). Every
//! path that counts on from the media value (write, set_len, directory growth) now reads it
//! through `Core::inode_blocks`, which refuses a count above the pool's block count with
//! `Error::Corrupt` naming the inode and the field's offset.

use super::images::{build_image, image_config, ImageKind, IMAGE_BYTES};
use pmem::DramRegion;
use pool::{Geometry, PoolStore};
use std::sync::Arc;
use store::{Error, OpenFlags, Store};

#[test]
fn write_to_a_file_with_a_huge_block_count_is_a_typed_error() {
    let mut img = build_image(ImageKind::Files);
    let cfg = image_config();
    let geo = Geometry::plan(IMAGE_BYTES, &cfg).unwrap();
    let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg).unwrap();
    let ino = store::resolve(&s, "/f1").unwrap().ino;
    drop(s);
    let at = (geo.inode(ino) + 56) as usize;
    img[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg).unwrap();
    let rw = OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    };
    let fh = s.open(ino, rw).unwrap();
    match s.write(fh, 1 << 20, b"past the end: allocates a block") {
        Err(Error::Corrupt { what, offset }) => {
            assert!(what.contains("block count"), "{what}");
            assert_eq!(offset, at as u64);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let report = s.fsck().unwrap();
    assert!(
        report.problems.iter().any(|p| p.what.contains("records")),
        "{:?}",
        report.problems
    );
}
