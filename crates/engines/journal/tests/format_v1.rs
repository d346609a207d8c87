//! Journals of format version 1 (16-bit home file ids) still open and work, keeping their
//! format and its 65,535-inode limit; version 2 journals hold file ids past 65,535.
//! The version 1 image is made from a version 2 one with file ids below 65,536 by writing
//! its headers back in the old layout (word 0: flags | jh_number << 8 | write_count << 32)
//! and the old version number, which is exactly what the previous build wrote.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use journal::layout::{Geometry, HEADERS_OFF};
use journal::{BlockKey, Journal, JournalConfig, JournalStore, StoreConfig, Tx};
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

/// Rewrite a version 2 image (file ids < 65,536) as version 1.
fn to_version_1(image: &mut [u8]) {
    let g = Geometry::new(config().journal.journal_blocks).unwrap();
    for slot in 0..g.blocks() as u64 {
        let off = (HEADERS_OFF + slot * 16) as usize;
        let w0 = u64::from_le_bytes(image[off..off + 8].try_into().unwrap());
        assert_eq!((w0 >> 16) & 0xffff, 0, "a wide file id");
        let w0 = (w0 & 0xff) | slot << 8 | (w0 >> 32) << 32;
        image[off..off + 8].copy_from_slice(&w0.to_le_bytes());
    }
    image[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = pmem::crc::crc32c(&image[0..16]);
    image[16..20].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn a_version_1_store_opens_and_keeps_working() {
    let g = Geometry::new(config().journal.journal_blocks).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on(region.clone(), host.clone(), &config()).unwrap();
    for i in 0..40u8 {
        write_file(
            &s,
            format!("/f{}", i % 7),
            &vec![i; 5000 + i as usize],
            None,
        )
        .unwrap();
    }
    drop(s);
    let mut image = region.persistent_image();
    to_version_1(&mut image);
    let region = Arc::new(SimRegion::from_image(image));
    let host = SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default());
    let s = JournalStore::open_on(region.clone(), host.clone(), &config()).unwrap();
    assert_eq!(read_file(&s, "/f5").unwrap(), vec![33u8; 5033]);
    assert_eq!(
        s.statfs().unwrap().inodes_total,
        65_534,
        "version 1 inode limit"
    );
    for i in 0..40u8 {
        write_file(&s, format!("/g{}", i % 5), &vec![i; 3000], None).unwrap();
    }
    assert!(s.fsck().unwrap().is_clean());
    drop(s);
    let image = region.persistent_image();
    assert_eq!(
        u32::from_le_bytes(image[8..12].try_into().unwrap()),
        1,
        "format kept"
    );
    let s = JournalStore::open_on(
        Arc::new(SimRegion::from_image(image)),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        &config(),
    )
    .unwrap();
    assert_eq!(read_file(&s, "/g4").unwrap(), vec![39u8; 3000]);
    assert_eq!(read_file(&s, "/f0").unwrap(), vec![35u8; 5035]);
    assert!(s.fsck().unwrap().is_clean());
}

#[test]
fn version_2_holds_file_ids_past_65535_and_version_1_refuses_them() {
    let cfg = config().journal;
    let g = Geometry::new(cfg.journal_blocks).unwrap();
    let namer: journal::home::HomeNamer = Arc::new(|id| std::path::PathBuf::from(format!("h{id}")));
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let j = Journal::create(region.clone(), host.clone(), namer.clone(), cfg.clone()).unwrap();
    let ids = [65_535u32, 65_536, 1 << 20, u32::MAX];
    for (i, &id) in ids.iter().enumerate() {
        let mut tx = Tx::new();
        tx.put_block(BlockKey { file: id, block: 1 }, &[i as u8 + 1; 4096]);
        j.commit(tx).unwrap();
    }
    drop(j);
    let j = Journal::open(
        Arc::new(SimRegion::from_image(region.persistent_image())),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        namer.clone(),
        cfg.clone(),
    )
    .unwrap();
    let mut buf = vec![0u8; 4096];
    for (i, &id) in ids.iter().enumerate() {
        j.read_block(BlockKey { file: id, block: 1 }, &mut buf)
            .unwrap();
        assert_eq!(buf, vec![i as u8 + 1; 4096], "file id {id}");
    }
    j.checkpoint().unwrap();
    assert!(j.fsck().problems.is_empty());

    // A version 1 journal takes file ids up to 65,535 only, with a clear error past it.
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on(region.clone(), host.clone(), &config()).unwrap();
    drop(s);
    let mut image = region.persistent_image();
    to_version_1(&mut image);
    let j = Journal::open(
        Arc::new(SimRegion::from_image(image)),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        namer,
        cfg,
    )
    .unwrap();
    let mut tx = Tx::new();
    tx.put_block(
        BlockKey {
            file: 65_536,
            block: 0,
        },
        &[1; 4096],
    );
    assert!(matches!(
        j.commit(tx).map_err(Error::from),
        Err(Error::InvalidArgument(m)) if m.contains("65536")
    ));
}
