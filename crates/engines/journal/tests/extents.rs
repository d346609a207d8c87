//! Home-file extents. Bug story: the fuzz target `journal_open` found that a PM header
//! naming a home block about 4.4 M blocks past its file made the checkpoint write there (a
//! sparse write of 18 GB inside the home directory; in the in-memory host model an 18 GB
//! allocation and an out-of-memory abort). Now the Store records each home file's extent in
//! its metadata log and open refuses a journaled version past it with a Corrupt error
//! before anything is written home; the bare journal's `verify_extents` (used by the fuzz
//! target) and fsck do the same check.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::{HostFs, SimHostFs};
use journal::layout::{Geometry, HEADERS_OFF};
use journal::{JournalConfig, JournalStore, StoreConfig};
use pmem::SimRegion;
use std::sync::Arc;
use store::path::{read_file, write_file};
use store::{Error, Store};

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 64,
            checkpoint_period: None,
            ..JournalConfig::test_min()
        },
        ..StoreConfig::default()
    }
}

const RW: store::OpenFlags = store::OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

type SimStore = JournalStore<Arc<SimRegion>, SimHostFs>;

fn new_store() -> (Arc<SimRegion>, SimHostFs, SimStore) {
    let g = Geometry::new(config().journal.journal_blocks).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on(region.clone(), host.clone(), &config()).unwrap();
    (region, host, s)
}

/// A store whose file `/f` (two blocks) has a journaled over-write of its block 1; the PM
/// image and the host image after a clean stop, and the inode of `/f`.
fn store_with_version() -> (Vec<u8>, hostfs::HostImage, u64) {
    let (region, host, s) = new_store();
    write_file(&s, "/f", &[1u8; 8192], None).unwrap();
    let ino = s.lookup(store::ROOT_INO, b"f").unwrap().ino;
    let fh = s.open(ino, RW).unwrap();
    s.write(fh, 4096, &[2u8; 100]).unwrap();
    s.release(fh).unwrap();
    drop(s);
    (region.persistent_image(), host.durable_image(), ino)
}

/// Point every valid header of home file `ino` at home block `block`.
fn redirect(image: &mut [u8], ino: u64, block: u64) -> usize {
    let g = Geometry::new(config().journal.journal_blocks).unwrap();
    let mut n = 0;
    for slot in 0..g.blocks() as u64 {
        let off = (HEADERS_OFF + slot * 16) as usize;
        let w0 = u64::from_le_bytes(image[off..off + 8].try_into().unwrap());
        let w1 = u64::from_le_bytes(image[off + 8..off + 16].try_into().unwrap());
        if w0 & 2 != 0 && (w1 >> 24) & 0xffff == ino {
            let w1 = (w1 & ((1 << 40) - 1)) | block << 40;
            image[off + 8..off + 16].copy_from_slice(&w1.to_le_bytes());
            n += 1;
        }
    }
    n
}

fn reopen(pm: Vec<u8>, host: &hostfs::HostImage) -> (SimHostFs, store::Result<SimStore>) {
    let host = SimHostFs::from_image(host, hostfs::SimConfig::default());
    let r = JournalStore::open_on(Arc::new(SimRegion::from_image(pm)), host.clone(), &config());
    (host, r)
}

#[test]
fn the_unedited_store_opens_with_its_data() {
    let (pm, host, _) = store_with_version();
    let (_, r) = reopen(pm, &host);
    let s = r.unwrap();
    let mut want = vec![1u8; 8192];
    want[4096..4196].fill(2);
    assert_eq!(read_file(&s, "/f").unwrap(), want);
    assert!(s.fsck().unwrap().is_clean());
}

#[test]
fn a_version_far_past_its_home_file_is_refused_and_nothing_is_written() {
    let (mut pm, host, ino) = store_with_version();
    assert!(redirect(&mut pm, ino, 4_400_000) > 0, "no version of /f");
    let before = host.clone();
    let (h, r) = reopen(pm, &host);
    match r {
        Err(Error::Corrupt { what, .. }) => {
            assert!(what.contains("recorded end"), "{what}");
            assert!(what.contains("4400000"), "{what}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a version 18 GB past its file was accepted"),
    }
    assert!(
        h.live_image().same_tree(&before),
        "the home directory changed"
    );
    let name = format!("{ino}.data");
    let f = h
        .open(
            std::path::Path::new(&name),
            &hostfs::OpenOptions::read_only(),
        )
        .unwrap();
    assert_eq!(h.file_stat(&f).unwrap().len, 8192);
}

#[test]
fn a_version_just_past_the_recorded_extent_is_refused() {
    let (mut pm, host, ino) = store_with_version();
    // The extent is recorded in 1 MiB grains: block 256 starts exactly at the end.
    redirect(&mut pm, ino, 256);
    assert!(matches!(
        reopen(pm.clone(), &host).1,
        Err(Error::Corrupt { .. })
    ));
    redirect(&mut pm, ino, 255);
    assert!(reopen(pm, &host).1.is_ok(), "a version inside the extent");
}

#[test]
fn extents_survive_truncation_and_unlink() {
    // A file shrunk (or freed) keeps its versions in the journal until a checkpoint: they
    // stay inside the recorded extent, so the store reopens.
    let (region, host, s) = new_store();
    write_file(&s, "/big", &[5u8; 3 << 20], None).unwrap();
    write_file(&s, "/big", &[6u8; 3 << 20], None).unwrap();
    let ino = s.lookup(store::ROOT_INO, b"big").unwrap().ino;
    let fh = s.open(ino, RW).unwrap();
    s.set_len(fh, 10).unwrap();
    s.release(fh).unwrap();
    write_file(&s, "/gone", &[7u8; 5000], None).unwrap();
    write_file(&s, "/gone", &[8u8; 5000], None).unwrap();
    s.unlink(store::ROOT_INO, b"gone", None).unwrap();
    drop(s);
    let s = JournalStore::open_on(
        Arc::new(SimRegion::from_image(region.persistent_image())),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        &config(),
    )
    .unwrap();
    assert_eq!(read_file(&s, "/big").unwrap(), vec![6u8; 10]);
    assert!(s.fsck().unwrap().is_clean());
}
