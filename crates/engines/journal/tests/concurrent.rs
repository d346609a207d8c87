//! Two open transactions changing one directory. Each commit must log the directory as that
//! transaction left it: its own links and times on top of the committed state, never the
//! other's pending changes; an abort takes back only its own changes. Bug story: the
//! metadata record of a directory carried its live DRAM state, so a commit leaked an
//! uncommitted mkdir of another transaction into the log (nlink one too high after a
//! crash), and an abort restored the directory's image from before its first change,
//! taking away entries and links that another transaction had committed meanwhile.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use journal::layout::Geometry;
use journal::{JournalConfig, JournalStore, StoreConfig};
use pmem::SimRegion;
use std::sync::Arc;
use store::{Error, Store, ROOT_INO};

type SimStore = JournalStore<Arc<SimRegion>, SimHostFs>;

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

fn new_store() -> (Arc<SimRegion>, SimHostFs, SimStore) {
    let g = Geometry::new(config().journal.journal_blocks).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on(region.clone(), host.clone(), &config()).unwrap();
    (region, host, s)
}

/// Reopen from the durable images (a crash: open transactions are lost).
fn crash(region: &SimRegion, host: &SimHostFs) -> SimStore {
    JournalStore::open_on(
        Arc::new(SimRegion::from_image(region.persistent_image())),
        SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default()),
        &config(),
    )
    .unwrap()
}

fn nlink(s: &SimStore, ino: u64) -> u32 {
    s.getattr(ino).unwrap().nlink
}

fn exists(s: &SimStore, name: &[u8]) -> bool {
    match s.lookup(ROOT_INO, name) {
        Ok(_) => true,
        Err(Error::NotFound(_)) => false,
        Err(e) => panic!("lookup: {e}"),
    }
}

#[test]
fn a_commit_does_not_carry_another_transactions_mkdir() {
    let (region, host, s) = new_store();
    let a = s.tx_begin(&[]).unwrap();
    s.mkdir(ROOT_INO, b"pending", 0o755, Some(a)).unwrap();
    let b = s.tx_begin(&[]).unwrap();
    s.create(ROOT_INO, b"file", 0o644, Some(b)).unwrap();
    s.tx_commit(b).unwrap();
    assert_eq!(nlink(&s, ROOT_INO), 3, "live: the pending mkdir counts");
    drop(s);
    let s = crash(&region, &host);
    assert!(exists(&s, b"file") && !exists(&s, b"pending"));
    assert_eq!(
        nlink(&s, ROOT_INO),
        2,
        "the uncommitted mkdir leaked into the log"
    );
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck().unwrap());
}

#[test]
fn an_abort_keeps_what_another_transaction_committed() {
    let (region, host, s) = new_store();
    let a = s.tx_begin(&[]).unwrap();
    s.mkdir(ROOT_INO, b"a", 0o755, Some(a)).unwrap();
    s.create(ROOT_INO, b"x", 0o644, Some(a)).unwrap();
    let b = s.tx_begin(&[]).unwrap();
    s.mkdir(ROOT_INO, b"b", 0o755, Some(b)).unwrap();
    s.create(ROOT_INO, b"y", 0o644, Some(b)).unwrap();
    s.tx_commit(b).unwrap();
    s.tx_abort(a).unwrap();
    for s in [&s, &crash(&region, &host)] {
        assert!(
            exists(s, b"b") && exists(s, b"y"),
            "the committed entries went"
        );
        assert!(
            !exists(s, b"a") && !exists(s, b"x"),
            "the aborted entries stayed"
        );
        assert_eq!(nlink(s, ROOT_INO), 3);
        assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck().unwrap());
    }
}

#[test]
fn both_commit_in_either_order() {
    for first_a in [true, false] {
        let (region, host, s) = new_store();
        let a = s.tx_begin(&[]).unwrap();
        s.mkdir(ROOT_INO, b"a", 0o755, Some(a)).unwrap();
        let b = s.tx_begin(&[]).unwrap();
        s.mkdir(ROOT_INO, b"b", 0o755, Some(b)).unwrap();
        s.rmdir(ROOT_INO, b"b", Some(b)).unwrap();
        s.mkdir(ROOT_INO, b"c", 0o755, Some(b)).unwrap();
        let (one, two) = if first_a { (a, b) } else { (b, a) };
        s.tx_commit(one).unwrap();
        {
            let mid = crash(&region, &host);
            // Either first commit adds one subdirectory (a; or c, b created and removed).
            assert_eq!(nlink(&mid, ROOT_INO), 3, "after the first commit");
            assert!(mid.fsck().unwrap().is_clean(), "{:?}", mid.fsck().unwrap());
        }
        s.tx_commit(two).unwrap();
        for s in [&s, &crash(&region, &host)] {
            assert_eq!(nlink(s, ROOT_INO), 4);
            assert!(exists(s, b"a") && exists(s, b"c") && !exists(s, b"b"));
            assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck().unwrap());
        }
    }
}

#[test]
fn a_commit_does_not_carry_another_transactions_pending_attributes() {
    let (region, host, s) = new_store();
    let d = s.mkdir(ROOT_INO, b"d", 0o755, None).unwrap().ino;
    let a = s.tx_begin(&[]).unwrap();
    let attr = store::SetAttr {
        perm: Some(0o700),
        ..Default::default()
    };
    s.setattr(d, &attr, Some(a)).unwrap();
    let b = s.tx_begin(&[]).unwrap();
    s.create(d, b"x", 0o644, Some(b)).unwrap();
    s.tx_commit(b).unwrap();
    assert_eq!(
        s.getattr(d).unwrap().perm,
        0o700,
        "live: the pending chmod shows"
    );
    drop(s);
    let s = crash(&region, &host);
    assert_eq!(
        s.getattr(d).unwrap().perm,
        0o755,
        "the uncommitted chmod leaked"
    );
    assert!(s.lookup(d, b"x").is_ok());
    assert!(s.fsck().unwrap().is_clean());
}
