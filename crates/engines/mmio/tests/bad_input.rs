//! Hostile and mismatched media give clear typed errors, never a panic or silent corruption:
//! a log pool of another store, a foreign or corrupted superblock, a corrupted index entry, a
//! full log pool, a host file truncated behind atomfs's back, a directory already in use.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{MmioConfig, MmioStore};
use store::{Error, Store};

fn cfg() -> MmioConfig {
    MmioConfig::test_min()
}

#[test]
fn log_pool_of_another_store_is_rejected() {
    let dir = shm_dir("other");
    std::fs::create_dir_all(dir.join("files2")).unwrap();
    let a = MmioStore::create(&dir.join("files"), &dir.join("a.pool"), &cfg()).unwrap();
    a.unmount().unwrap();
    let b = MmioStore::create(&dir.join("files2"), &dir.join("b.pool"), &cfg()).unwrap();
    b.unmount().unwrap();
    let err = MmioStore::open(&dir.join("files"), &dir.join("b.pool"), &cfg())
        .err()
        .unwrap();
    assert!(matches!(err, Error::CrossStore(_)), "{err}");
    let err = MmioStore::create(&dir.join("files"), &dir.join("c.pool"), &cfg())
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::Exists(_)),
        "directory already belongs to a store: {err}"
    );
    cleanup(&dir);
}

#[test]
fn bad_magic_and_corrupt_superblock() {
    let (region, s) = sim_store(&cfg());
    drop(s);
    let mut image = region.persistent_image();
    image.pool[20] ^= 0xFF; // inside the checksummed part
    let err = sim_reopen(image.clone(), &cfg()).err().unwrap();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    image.pool[0] = b'X';
    let err = sim_reopen(image, &cfg()).err().unwrap();
    assert!(matches!(err, Error::BadMagic(_)), "{err}");
}

#[test]
fn corrupt_index_entry_is_reported() {
    let c = MmioConfig {
        policy_mode: mmio::PolicyMode::Redo,
        ..cfg()
    };
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/f", false);
    s.write(fh, 0, &[1u8; 100]).unwrap();
    s.write(fh, 0, &[2u8; 100]).unwrap(); // a committed redo entry remains
    assert!(s.live_entries(fh).unwrap() > 0);
    let mut image = region.persistent_image();
    // Find the live index entry (non-zero epoch word) and damage its file offset.
    let sb_index_off = u64::from_le_bytes(image.pool[72..80].try_into().unwrap()) as usize;
    let live = (0..c.index_entries_max as usize)
        .map(|i| sb_index_off + i * 64)
        .find(|&at| image.pool[at..at + 8] != [0; 8])
        .unwrap();
    image.pool[live + 16] ^= 0x40;
    let err = sim_reopen(image, &c).err().unwrap();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
}

#[test]
fn log_full_is_a_clear_error_and_nothing_is_lost() {
    let c = MmioConfig {
        index_entries_max: 8,
        policy_mode: mmio::PolicyMode::Undo,
        ..cfg()
    };
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/f", true);
    s.write(fh, 0, &vec![7u8; 60_000]).unwrap();
    s.fsync(fh, false).unwrap();
    // An epoch touching more blocks than there are index entries cannot be logged.
    let mut err = None;
    for b in 0..14u64 {
        if let Err(e) = s.write(fh, b * 4096 + 1, b"x") {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the log must fill");
    assert!(matches!(err, Error::LogFull(_)), "{err}");
    assert_eq!(err.errno(), libc::ENOSPC);
    s.abortv(&[fh]).unwrap();
    assert_eq!(read_path(&s, "/f"), vec![7u8; 60_000]);
    let (_r, s2) = sim_reopen(region.cache_image(), &c).unwrap();
    assert_eq!(read_path(&s2, "/f"), vec![7u8; 60_000]);
}

#[test]
fn a_call_that_fails_midway_leaves_nothing_for_the_next_commit() {
    // Regression (issue 8): a write outside a transaction that filled the log after logging
    // some of its pieces returned the error but left those pieces in the epoch, so the next
    // call's commit made part of the failed write durable.
    let c = MmioConfig {
        index_entries_max: 2,
        policy_mode: mmio::PolicyMode::Undo,
        ..cfg()
    };
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/f", false);
    s.write(fh, 0, &vec![7u8; 60_000]).unwrap(); // past the committed end: no log
    let err = s.write(fh, 0, &vec![9u8; 60_000]).unwrap_err(); // 4 entries of 16 KB needed
    assert!(matches!(err, Error::LogFull(_)), "{err}");
    assert_eq!(
        read_path(&s, "/f"),
        vec![7u8; 60_000],
        "failed call visible"
    );
    s.write(fh, 59_000, &[1u8; 10]).unwrap();
    let mut want = vec![7u8; 60_000];
    want[59_000..59_010].fill(1);
    assert_eq!(read_path(&s, "/f"), want);
    let (_r, s2) = sim_reopen(region.cache_image(), &c).unwrap();
    assert_eq!(
        read_path(&s2, "/f"),
        want,
        "failed call made durable by the next commit"
    );
}

#[test]
fn host_file_truncated_behind_our_back_is_reported() {
    let dir = shm_dir("trunc");
    let c = MmioConfig {
        policy_mode: mmio::PolicyMode::Redo,
        ..cfg()
    };
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    let fh = open_rw(&s, "/f", false);
    s.write(fh, 0, &[3u8; 20_000]).unwrap();
    s.write(fh, 0, &[4u8; 10]).unwrap(); // committed redo entry still in the log
    drop(s); // crash: the slot and its entry stay in the log pool
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("files/f"))
        .unwrap()
        .set_len(100)
        .unwrap();
    let err = MmioStore::open(&dir.join("files"), &dir.join("log.pool"), &c)
        .err()
        .unwrap();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("behind atomfs's back"), "{err}");
    cleanup(&dir);
}

#[test]
fn bad_configuration_is_rejected() {
    let (_region, _s) = sim_store(&cfg());
    let bad = MmioConfig {
        log_entry_max: 3000,
        ..cfg()
    };
    let pool = std::sync::Arc::new(pmem::SimRegion::new(1 << 20));
    let media = mmio::HostMedia::on(hostfs::SimHostFs::new(host_config()));
    let err = MmioStore::create_on(pool, media, &bad).err().unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}
