//! `repair` and `salvage` on pools with one damaged structure: random bytes over one inode,
//! over one index block, over a directory block; an uncommitted transaction in the log.
//! Before the repair these pools refuse to open or fail fsck; after it they open, pass
//! fsck, every intact file reads back unchanged, and the damaged file's readable bytes are
//! in /lost+found. Salvage copies the intact files out of the unrepaired image.
#![allow(clippy::unwrap_used)]

#[path = "common/images.rs"]
mod images;

use images::{build_image, bytes_of, image_config, ImageKind, IMAGE_BYTES};
use pmem::{DramRegion, Region};
use pool::{Geometry, PoolStore, SalvageSink};
use std::collections::BTreeMap;
use std::sync::Arc;
use store::Store;

fn geometry() -> Geometry {
    Geometry::plan(IMAGE_BYTES, &image_config()).unwrap()
}

fn open(img: &[u8]) -> store::Result<PoolStore<DramRegion>> {
    PoolStore::open(Arc::new(DramRegion::from_bytes(img)), &image_config())
}

fn ino_of(img: &[u8], path: &str) -> u64 {
    store::resolve(&open(img).unwrap(), path).unwrap().ino
}

fn word(img: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(img[at as usize..at as usize + 8].try_into().unwrap())
}

/// The contents every file of the Files image has.
fn expected() -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for i in 0..4u64 {
        files.insert(format!("/f{i}"), bytes_of(i, 1000 + i as usize * 3000));
        files.insert(format!("/d/g{i}"), bytes_of(50 + i, 300));
    }
    files.insert("/d/e/deep".into(), b"deep file".to_vec());
    files
}

/// Repair a copy of `img`; the result must open, pass fsck and hold every file of
/// `expected()` but those in `damaged` unchanged. Returns the repaired store.
fn repair_and_check(img: &[u8], damaged: &[&str]) -> (PoolStore<DramRegion>, pool::RepairReport) {
    let region = Arc::new(DramRegion::from_bytes(img));
    let report = pool::repair(region.clone(), &image_config()).expect("repair");
    assert!(
        report.is_clean(),
        "left: {:?}\nchanges: {:?}",
        report.remaining,
        report.changes
    );
    assert!(!report.changes.is_empty(), "a damaged pool needs changes");
    let s = PoolStore::open(region, &image_config()).expect("repaired pool opens");
    assert!(s.fsck().unwrap().is_clean());
    for (path, data) in expected() {
        if !damaged.contains(&path.as_str()) {
            assert_eq!(
                store::path::read_file(&s, &path).expect(&path),
                data,
                "{path}"
            );
        }
    }
    (s, report)
}

#[test]
fn random_bytes_over_one_inode() {
    let clean = build_image(ImageKind::Files);
    let f1 = ino_of(&clean, "/f1");
    let mut img = clean.clone();
    let at = geometry().inode(f1) as usize;
    img[at..at + 128].copy_from_slice(&bytes_of(99, 128));
    assert!(open(&img).is_err(), "a garbage inode stops the open today");
    let (s, report) = repair_and_check(&img, &["/f1"]);
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(report.quarantined[0].ino, f1);
    assert!(store::resolve(&s, "/f1").is_err(), "its entry is gone");
}

#[test]
fn random_bytes_over_one_index_block() {
    let clean = build_image(ImageKind::Files);
    let geo = geometry();
    let f3 = ino_of(&clean, "/f3");
    let index = word(&clean, geo.inode(f3) + 24);
    let mut img = clean.clone();
    let at = geo.block(index) as usize;
    // Keep the first pointer (block 0 stays readable), garbage over the rest.
    img[at + 8..at + 4096].copy_from_slice(&bytes_of(77, 4088));
    let before = open(&img).map(|s| s.fsck().unwrap().is_clean());
    assert!(!matches!(before, Ok(true)), "the damage is seen");
    let (s, report) = repair_and_check(&img, &["/f3"]);
    let q = report
        .quarantined
        .iter()
        .find(|q| q.ino == f3)
        .expect("f3 quarantined");
    assert!(q.blocks_unreadable > 0);
    let salvaged = store::path::read_file(&s, &q.path).expect("salvaged file");
    assert_eq!(
        &salvaged[..4096],
        &bytes_of(3, 10_000)[..4096],
        "block 0 salvaged"
    );
}

#[test]
fn garbage_over_a_directory_block_links_its_files_into_lost_found() {
    let clean = build_image(ImageKind::Files);
    let geo = geometry();
    let d = ino_of(&clean, "/d");
    let e = ino_of(&clean, "/d/e");
    let tree_root = word(&clean, geo.inode(d) + 24);
    let block = word(&clean, geo.block(tree_root));
    let mut img = clean.clone();
    let at = geo.block(block) as usize;
    img[at..at + 4096].copy_from_slice(&bytes_of(5, 4096));
    let damaged = ["/d/g0", "/d/g1", "/d/g2", "/d/g3", "/d/e/deep"];
    let (s, report) = repair_and_check(&img, &damaged);
    assert!(
        report.lost_found.contains(&format!("/lost+found/#{e}")),
        "{:?}",
        report.lost_found
    );
    let deep = store::path::read_file(&s, format!("/lost+found/#{e}/deep")).unwrap();
    assert_eq!(deep, b"deep file");
}

#[test]
fn uncommitted_transaction_is_undone_and_reported() {
    let img = build_image(ImageKind::Uncommitted);
    let region = Arc::new(DramRegion::from_bytes(&img));
    let report = pool::repair(region.clone(), &image_config()).unwrap();
    assert!(report.is_clean(), "{:?}", report.remaining);
    assert!(report.recovery.undone_txs >= 1);
    assert!(report.recovery.undo_entries_applied > 0);
    let s = PoolStore::open(region, &image_config()).unwrap();
    assert!(store::resolve(&s, "/f0").is_ok(), "the rename was undone");
}

#[test]
fn a_clean_pool_needs_no_change() {
    let img = build_image(ImageKind::Files);
    let region = Arc::new(DramRegion::from_bytes(&img));
    let report = pool::repair(region.clone(), &image_config()).unwrap();
    assert!(report.is_clean() && report.changes.is_empty(), "{report:?}");
    assert!(report.quarantined.is_empty() && report.lost_found.is_empty());
}

#[test]
fn bad_superblock_is_refused_with_a_clear_error() {
    let mut img = build_image(ImageKind::Files);
    img[0] ^= 0xff;
    let region = Arc::new(DramRegion::from_bytes(&img));
    match pool::repair(region, &image_config()) {
        Err(store::Error::BadMagic(what)) => assert!(!what.is_empty()),
        other => panic!("expected BadMagic, got {other:?}"),
    }
}

/// Files collected in memory.
#[derive(Default)]
pub struct MapSink(pub BTreeMap<String, Vec<u8>>);

impl SalvageSink for MapSink {
    fn dir(&mut self, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn file(&mut self, path: &str, _: u64, data: &mut dyn std::io::Read) -> std::io::Result<u64> {
        let mut bytes = Vec::new();
        data.read_to_end(&mut bytes)?;
        self.0.insert(format!("/{path}"), bytes.clone());
        Ok(bytes.len() as u64)
    }
}

#[test]
fn salvage_copies_the_intact_files_and_never_writes_the_image() {
    let clean = build_image(ImageKind::Files);
    let f1 = ino_of(&clean, "/f1");
    let mut img = clean.clone();
    let at = geometry().inode(f1) as usize;
    img[at..at + 128].copy_from_slice(&bytes_of(99, 128));
    let original = DramRegion::from_bytes(&img);
    let private = Arc::new(DramRegion::from_bytes(&img));
    let mut sink = MapSink::default();
    let report = pool::salvage(private, &image_config(), &mut sink).unwrap();
    for (path, data) in expected() {
        if path != "/f1" {
            assert_eq!(sink.0.get(&path), Some(&data), "{path}");
        }
    }
    assert!(!sink.0.contains_key("/f1"));
    assert_eq!(report.files, sink.0.len() as u64);
    assert_eq!(
        pool::region_bytes(&original),
        img,
        "the source image is untouched"
    );
    let _ = original.len();
}
