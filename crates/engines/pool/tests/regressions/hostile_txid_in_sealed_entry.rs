//! Found by reading recovery for the corpus (tests/corrupt_corpus.rs
//! `log_entry_fields_resealed` covers the class).
//!
//! Recovery continues transaction ids and commit sequences from the largest found in the
//! log (`max + 1`). A commit entry with a valid seal but txid u64::MAX (rot the crc misses,
//! or a hostile image) overflowed that addition. `Entry::decode` now treats a txid above
//! 48 bits or a commit sequence at or above 2^62 as torn (format.md "Log entries"), so the
//! counters always have room.

use super::images::{build_image, image_config, ImageKind, IMAGE_BYTES};
use pmem::DramRegion;
use pool::{Geometry, PoolStore};
use std::sync::Arc;
use store::Store;

fn reseal(img: &mut [u8], e: usize) {
    img[e + 59] = 0xA5;
    let crc = crc32c::crc32c(&img[e..e + 60]);
    img[e + 60..e + 64].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn commit_entry_with_txid_u64_max_is_torn() {
    let cfg = image_config();
    let geo = Geometry::plan(IMAGE_BYTES, &cfg).unwrap();
    let clean = build_image(ImageKind::Committed);
    let commit = (0..geo.metadata_log_entries)
        .map(|s| geo.meta_entry(s) as usize)
        .find(|&e| clean[e] == 2 && clean[e + 59] == 0xA5)
        .expect("the image has a commit entry");
    for (field, value) in [(8, u64::MAX), (16, u64::MAX), (8, 1 << 48)] {
        let mut img = clean.clone();
        img[commit + field..commit + field + 8].copy_from_slice(&value.to_le_bytes());
        reseal(&mut img, commit);
        let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg).unwrap();
        assert!(s.last_recovery().torn_entries >= 1);
        // The next transaction gets an id and commits.
        store::path::write_file(&s, "/after", b"x", None).unwrap();
        assert_eq!(store::path::read_file(&s, "/after").unwrap(), b"x");
        // The transaction whose commit entry rotted is rolled back whole: still consistent.
        let report = s.fsck().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
    }
}
