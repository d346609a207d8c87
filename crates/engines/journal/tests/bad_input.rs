//! Hostile PM images: wrong magic, a future version, a torn superblock, pointers out of
//! range, headers that break the block permutation, a free header inside the checkpoint
//! area, a region too short for its journal, an armed swap record naming slots out of
//! range. Each gives a clear error (never a panic); a torn swap record is ignored.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;
#[path = "common/hostile.rs"]
mod hostile;

use common::*;
use hostfs::SimHostFs;
use journal::layout::superblock::{P_CHECKPOINT_OFF, P_FIRST_OFF};
use journal::layout::{Geometry, HEADERS_OFF, RESERVED_OFF};
use journal::{Journal, JournalConfig, JournalError};
use pmem::SimRegion;
use std::sync::Arc;

fn cfg() -> JournalConfig {
    JournalConfig {
        journal_blocks: 16,
        ..JournalConfig::test_min()
    }
}

/// A journal with a few committed versions (checkpoint area non-empty), as an image.
fn image() -> Vec<u8> {
    let (region, _host, j) = sim_journal(&cfg());
    let mut m = vec![Vec::new(); FILES];
    for i in 0..4u8 {
        m = write_tx(&j, &m, &[(0, 0, vec![i; 5000])]);
    }
    drop(j);
    region.persistent_image()
}

fn open(image: Vec<u8>) -> Result<(), JournalError> {
    let region = Arc::new(SimRegion::from_image(image));
    Journal::open(region, SimHostFs::new(host_config()), namer(), cfg()).map(|_| ())
}

fn put_u64(image: &mut [u8], off: u64, v: u64) {
    image[off as usize..off as usize + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn the_image_itself_opens() {
    open(image()).unwrap();
}

#[test]
fn wrong_magic() {
    let mut im = image();
    im[0] ^= 0xff;
    assert!(matches!(open(im), Err(JournalError::BadMagic)));
    assert!(matches!(
        open(vec![0u8; 1 << 20]),
        Err(JournalError::BadMagic)
    ));
}

#[test]
fn torn_or_future_superblock() {
    let mut im = image();
    im[13] ^= 1; // block count, crc now wrong
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn region_shorter_than_its_journal() {
    let im = image();
    let short = im[..im.len() - 4096].to_vec();
    assert!(matches!(open(short), Err(JournalError::Corrupt { .. })));
    assert!(matches!(
        open(im[..100].to_vec()),
        Err(JournalError::Corrupt { .. })
    ));
}

#[test]
fn pointers_out_of_range() {
    let mut im = image();
    put_u64(&mut im, P_CHECKPOINT_OFF, 1_000);
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
    let mut im = image();
    put_u64(&mut im, P_FIRST_OFF, u64::MAX);
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn two_headers_on_one_block() {
    let mut im = image();
    // Header 1's j_blocknr := header 0's.
    let h0 = u64::from_le_bytes(
        im[HEADERS_OFF as usize + 8..HEADERS_OFF as usize + 16]
            .try_into()
            .unwrap(),
    );
    let at = HEADERS_OFF as usize + 16 + 8;
    let h1 = u64::from_le_bytes(im[at..at + 8].try_into().unwrap());
    put_u64(&mut im, at as u64, (h1 & !0xff_ffff) | (h0 & 0xff_ffff));
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn header_with_unknown_flags_or_wrong_number() {
    let mut im = image();
    im[HEADERS_OFF as usize] = 0x80;
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
    let mut im = image();
    im[HEADERS_OFF as usize + 16 + 1] ^= 0x10; // jh_number of header 1
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn free_header_inside_the_checkpoint_area() {
    let mut im = image();
    let g = Geometry::new(16).unwrap();
    let p_first = u64::from_le_bytes(im[64..72].try_into().unwrap());
    let slot = g.slot(p_first);
    im[g.header_off(slot) as usize] = 0; // flags: free
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn swap_record_torn_is_ignored_armed_out_of_range_is_an_error() {
    let mut im = image();
    // Bytes without a valid seal: not armed.
    im[RESERVED_OFF as usize..RESERVED_OFF as usize + 40].fill(0xAB);
    open(im).unwrap();
    // A correctly sealed record naming slot 999 of a 16-block journal.
    let mut im = image();
    let mut rec = [0u8; 48];
    rec[0..4].copy_from_slice(&999u32.to_le_bytes());
    let crc = pmem::crc::crc32c(&rec[0..40]) as u64;
    rec[40..48].copy_from_slice(&((crc << 32) | 0x5357_4150).to_le_bytes());
    im[RESERVED_OFF as usize..RESERVED_OFF as usize + 48].copy_from_slice(&rec);
    assert!(matches!(open(im), Err(JournalError::Corrupt { .. })));
}

#[test]
fn random_corruption_never_panics() {
    let base = image();
    let g = Geometry::new(16).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let (mut opened, mut refused) = (0, 0);
    for _ in 0..500 {
        let mut im = base.clone();
        for _ in 0..3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % g.blocks_off()) as usize;
            im[at] ^= (seed >> 56) as u8 | 1;
        }
        match hostile::exercise(&im, &cfg()) {
            Ok(()) => opened += 1,
            Err(_) => refused += 1,
        }
    }
    println!("{opened} corrupted images recovered, {refused} refused");
    assert!(opened > 0 && refused > 0);
}

#[test]
fn region_too_small_to_create() {
    let region = Arc::new(SimRegion::new(8192));
    let r = Journal::create(region, SimHostFs::new(host_config()), namer(), cfg());
    assert!(matches!(r, Err(JournalError::Config(_))));
    let region = Arc::new(SimRegion::new(1 << 20));
    let bad = JournalConfig {
        free_percent_min: 100,
        ..cfg()
    };
    let r = Journal::create(region, SimHostFs::new(host_config()), namer(), bad);
    assert!(matches!(r, Err(JournalError::Config(_))));
}
