//! Every bounded resource of the journal engine, hit on purpose: the call past it gets a
//! clear error, the store stays consistent (fsck clean, committed data intact, also after a
//! reopen), and `limits()` — what `atomfs info` shows — reports the maximum and the use.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::stores::{clean, limit, new_store_as, reopen_media, SimStore, RW};
use hostfs::SimHostFs;
use journal::{JournalConfig, MetaFormat, StoreConfig};
use pmem::SimRegion;
use std::sync::Arc;
use store::path::{read_file, write_file};
use store::{Error, Store, ROOT_INO};

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

fn new_store(cfg: &StoreConfig) -> (Arc<SimRegion>, SimHostFs, SimStore) {
    new_store_as(cfg, MetaFormat::V2)
}

/// Reopen from the durable images (as after a crash).
fn reopen(region: &SimRegion, host: &SimHostFs, cfg: &StoreConfig) -> SimStore {
    reopen_media(region, host, cfg).unwrap().2
}

#[test]
fn open_files_and_transactions_stop_at_their_maximum() {
    let cfg = StoreConfig {
        open_files_max: 4,
        open_transactions_max: 2,
        ..config()
    };
    let (_r, _h, s) = new_store(&cfg);
    let files: Vec<_> = (0..4)
        .map(|i| {
            s.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)
                .unwrap()
        })
        .collect();
    let fhs: Vec<_> = files.iter().map(|f| s.open(f.ino, RW).unwrap()).collect();
    assert!(matches!(
        s.open(files[0].ino, RW),
        Err(Error::TooMany { max: 4, .. })
    ));
    let l = limit(&s, "open files");
    assert_eq!((l.used, l.max, l.error), (Some(4), 4, "EMFILE"));
    s.release(fhs[3]).unwrap();
    let again = s.open(files[3].ino, RW).unwrap();
    let t1 = s.tx_begin(&[fhs[0]]).unwrap();
    let t2 = s.tx_begin(&[fhs[1]]).unwrap();
    assert!(matches!(
        s.tx_begin(&[fhs[2]]),
        Err(Error::TooMany { max: 2, .. })
    ));
    let l = limit(&s, "open transactions");
    assert_eq!((l.used, l.max, l.error), (Some(2), 2, "EMFILE"));
    s.write(fhs[0], 0, b"one").unwrap();
    s.tx_commit(t1).unwrap();
    let t3 = s.tx_begin(&[fhs[2]]).unwrap();
    s.tx_abort(t2).unwrap();
    s.tx_abort(t3).unwrap();
    s.release(again).unwrap();
    assert_eq!(read_file(&s, "/f0").unwrap(), b"one");
    clean(&s);
}

#[test]
fn a_transaction_larger_than_the_journal_is_nospace_and_changes_nothing() {
    let cfg = config();
    let (region, host, s) = new_store(&cfg);
    write_file(&s, "/big", &[1u8; 128 * 4096], None).unwrap();
    let ino = s.lookup(ROOT_INO, b"big").unwrap().ino;
    let fh = s.open(ino, RW).unwrap();
    let t = s.tx_begin(&[fh]).unwrap();
    s.write(fh, 0, &[2u8; 128 * 4096]).unwrap();
    match s.tx_commit(t) {
        Err(Error::NoSpace(m)) => assert!(m.contains("journal"), "{m}"),
        other => panic!("a 128-block transaction in a 64-block journal: {other:?}"),
    }
    s.release(fh).unwrap();
    assert_eq!(read_file(&s, "/big").unwrap(), vec![1u8; 128 * 4096]);
    let l = limit(&s, "journal blocks per transaction");
    assert_eq!((l.max, l.error), (64, "ENOSPC"));
    let l = limit(&s, "journal blocks (PM");
    assert_eq!(l.max, 64);
    assert!(l.used.unwrap() <= 64);
    // A transaction that fits still commits.
    write_file(&s, "/big", &[3u8; 8 * 4096], None).unwrap();
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg);
    assert_eq!(read_file(&s, "/big").unwrap(), vec![3u8; 8 * 4096]);
    clean(&s);
}

#[test]
fn a_full_metadata_log_is_nospace_and_keeps_every_committed_file() {
    let cfg = StoreConfig {
        metadata_log_bytes_max: 64 << 10,
        ..config()
    };
    let (region, host, s) = new_store(&cfg);
    let mut made = 0;
    let err = loop {
        match write_file(
            &s,
            format!("/f{made}"),
            format!("file {made}").as_bytes(),
            None,
        ) {
            Ok(()) => made += 1,
            Err(e) => break e,
        }
        assert!(made < 10_000, "the metadata log never filled");
    };
    assert!(
        matches!(err, Error::NoSpace(ref m) if m.contains("metadata log")),
        "{err}"
    );
    let l = limit(&s, "metadata log bytes");
    assert_eq!((l.max, l.error), (64 << 10, "ENOSPC"));
    assert!(l.used.unwrap() <= 64 << 10);
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg);
    for i in 0..made {
        assert_eq!(
            read_file(&s, format!("/f{i}")).unwrap(),
            format!("file {i}").as_bytes()
        );
    }
    assert!(
        read_file(&s, format!("/f{made}")).is_err_or_empty(),
        "the file whose commit failed"
    );
    clean(&s);
}

trait ErrOrEmpty {
    fn is_err_or_empty(&self) -> bool;
}

impl ErrOrEmpty for store::Result<Vec<u8>> {
    /// The create may have committed alone (write_file creates, then writes): then empty.
    fn is_err_or_empty(&self) -> bool {
        match self {
            Err(_) => true,
            Ok(v) => v.is_empty(),
        }
    }
}

#[test]
fn a_write_past_64_gib_is_efbig() {
    let (_r, _h, s) = new_store(&config());
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let fh = s.open(f.ino, RW).unwrap();
    let max = limit(&s, "file size bytes");
    assert_eq!((max.max, max.error), (64 << 30, "EFBIG"));
    assert!(matches!(
        s.write(fh, max.max - 1, b"ab"),
        Err(Error::FileTooLarge(_))
    ));
    assert!(matches!(
        s.set_len(fh, max.max + 1),
        Err(Error::FileTooLarge(_))
    ));
    s.release(fh).unwrap();
    assert_eq!(s.getattr(f.ino).unwrap().size, 0);
    clean(&s);
}
