//! Every bounded resource of a cache store, hit on purpose: the call past it gets a clear
//! error, nothing acknowledged is lost (fsck clean, data intact), and `limits()` — what
//! `atomfs info` shows — reports the maximum and the use.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, HostCacheStore};
use store::path::{read_file, OpenOptions};
use store::{Error, Limit, Store, TxId, ROOT_INO};
use test_support::Scratch;

const C: usize = 4096;

fn store(name: &str, pool_len: u64, config: CacheConfig) -> (HostCacheStore, Scratch) {
    let dir = test_support::scratch(&format!("cache-limits-{name}"));
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let s =
        HostCacheStore::create(&dir.join("home"), &dir.join("c.pool"), pool_len, &config).unwrap();
    (s, dir)
}

fn limit(s: &dyn Store, prefix: &str) -> Limit {
    s.limits()
        .unwrap()
        .into_iter()
        .find(|l| l.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no limit {prefix:?}"))
}

fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}

fn write(s: &dyn Store, path: &str, off: u64, data: &[u8], tx: Option<TxId>) -> store::Result<()> {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, tx)?;
    let written = s.write(fh, off, data).map(|_| ());
    s.release(fh)?;
    written
}

#[test]
fn cached_files_stop_at_files_max_and_leave_no_stray_home_file() {
    let config = CacheConfig {
        files_max: 4,
        ..CacheConfig::test_min()
    };
    let (s, dir) = store("files", 1 << 20, config);
    for i in 0..4 {
        write(&s, &format!("/f{i}"), 0, &[i as u8; 100], None).unwrap();
    }
    let past = s.create(ROOT_INO, b"f4", 0o644, None);
    assert!(
        matches!(past, Err(Error::TooMany { max: 4, .. })),
        "{past:?}"
    );
    assert!(!dir.join("home/f4").exists(), "the home file went again");
    let l = limit(&s, "cached files");
    assert_eq!((l.used, l.max, l.error), (Some(4), 4, "EMFILE"));
    for i in 0..4 {
        assert_eq!(read_file(&s, format!("/f{i}")).unwrap(), vec![i as u8; 100]);
    }
    clean(&s);
    s.unlink(ROOT_INO, b"f0", None).unwrap();
    write(&s, "/f4", 0, b"room again", None).unwrap();
    s.unmount().unwrap();
}

#[test]
fn open_transactions_stop_at_units_max() {
    let (s, _dir) = store("units", 1 << 20, CacheConfig::test_min());
    for i in 0..3 {
        write(&s, &format!("/f{i}"), 0, b"before", None).unwrap();
    }
    let txs: Vec<TxId> = (0..3).map(|_| s.tx_begin(&[]).unwrap()).collect();
    write(&s, "/f0", 0, b"tx0", Some(txs[0])).unwrap();
    write(&s, "/f1", 0, b"tx1", Some(txs[1])).unwrap();
    let past = write(&s, "/f2", 0, b"tx2", Some(txs[2]));
    assert!(
        matches!(past, Err(Error::TooMany { max: 2, .. })),
        "{past:?}"
    );
    let l = limit(&s, "open transactions");
    assert_eq!((l.used, l.max, l.error), (Some(2), 2, "EMFILE"));
    s.tx_abort(txs[2]).unwrap();
    s.tx_commit(txs[0]).unwrap();
    s.tx_abort(txs[1]).unwrap();
    assert_eq!(read_file(&s, "/f0").unwrap(), b"tx0ore");
    assert_eq!(read_file(&s, "/f1").unwrap(), b"before");
    assert_eq!(read_file(&s, "/f2").unwrap(), b"before");
    assert_eq!(limit(&s, "open transactions").used, Some(0));
    clean(&s);
    s.unmount().unwrap();
}

#[test]
fn namespace_operations_in_transactions_stop_at_intents_max_and_path_max() {
    let (s, dir) = store("intents", 1 << 20, CacheConfig::test_min());
    let tx = s.tx_begin(&[]).unwrap();
    s.create(ROOT_INO, b"a", 0o644, Some(tx)).unwrap();
    s.create(ROOT_INO, b"b", 0o644, Some(tx)).unwrap();
    let past = s.create(ROOT_INO, b"c", 0o644, Some(tx));
    assert!(
        matches!(past, Err(Error::TooMany { max: 2, .. })),
        "{past:?}"
    );
    let l = limit(&s, "namespace operations");
    assert_eq!((l.used, l.max, l.error), (Some(2), 2, "EMFILE"));
    s.tx_abort(tx).unwrap();
    for name in ["a", "b", "c"] {
        assert!(
            !dir.join("home").join(name).exists(),
            "{name} left after abort"
        );
    }
    // A path longer than an intent holds: refused inside a transaction, fine outside.
    let d1 = "d".repeat(200);
    let d2 = "e".repeat(200);
    store::path::mkdir_all(&s, format!("/{d1}/{d2}"), 0o755).unwrap();
    let long = format!("/{d1}/{d2}/{}", "f".repeat(100));
    let tx = s.tx_begin(&[]).unwrap();
    let past = write(&s, &long, 0, b"x", Some(tx));
    assert!(
        matches!(past, Err(Error::NameTooLong { max: 472, .. })),
        "{past:?}"
    );
    s.tx_abort(tx).unwrap();
    write(&s, &long, 0, b"outside", None).unwrap();
    assert_eq!(read_file(&s, &long).unwrap(), b"outside");
    let l = limit(&s, "path bytes");
    assert_eq!((l.max, l.error), (472, "ENAMETOOLONG"));
    clean(&s);
    s.unmount().unwrap();
}

#[test]
fn chunks_bound_one_write_and_one_transaction_per_slot() {
    let config = CacheConfig {
        stride_fixed: Some(1),
        ..CacheConfig::test_min()
    };
    let (s, _dir) = store("chunks", 64 << 10, config);
    let slots = s.cache().geometry().slots();
    let l = limit(&s, "cache chunks (two");
    assert_eq!((l.max, l.error), (2 * slots, "EFBIG"));
    write(&s, "/big", 0, b"kept", None).unwrap();
    let past = write(&s, "/big", 0, &vec![7u8; (slots as usize + 1) * C], None);
    assert!(matches!(past, Err(Error::FileTooLarge(_))), "{past:?}");
    assert_eq!(
        read_file(&s, "/big").unwrap(),
        b"kept",
        "nothing of it written"
    );
    // Stride 1: (z, 2), (a, 1) and (b, 0) share a slot; one transaction holds two of them.
    for (name, len) in [("/z", 3 * C), ("/a", 2 * C), ("/b", C)] {
        write(&s, name, 0, &vec![1u8; len], None).unwrap();
    }
    let tx = s.tx_begin(&[]).unwrap();
    write(&s, "/z", 2 * C as u64, b"tx", Some(tx)).unwrap();
    write(&s, "/a", C as u64, b"tx", Some(tx)).unwrap();
    assert!(limit(&s, "cache chunks of open").used >= Some(2));
    let past = write(&s, "/b", 0, b"tx", Some(tx));
    assert!(matches!(past, Err(Error::NoSpace(_))), "{past:?}");
    s.tx_abort(tx).unwrap();
    assert_eq!(read_file(&s, "/z").unwrap(), vec![1u8; 3 * C]);
    assert_eq!(read_file(&s, "/a").unwrap(), vec![1u8; 2 * C]);
    assert_eq!(read_file(&s, "/b").unwrap(), vec![1u8; C]);
    assert_eq!(limit(&s, "cache chunks of open").used, Some(0));
    clean(&s);
    s.unmount().unwrap();
}

#[test]
fn home_descriptors_stay_bounded_and_files_are_reopened_by_path() {
    let (s, dir) = store("descriptors", 1 << 20, CacheConfig::test_min());
    // test_min: 8 file records, 4 home descriptors.
    for i in 0..8 {
        write(&s, &format!("/f{i}"), 0, &[i as u8; 10], None).unwrap();
    }
    s.cache().flush_all().unwrap();
    let l = limit(&s, "home files open");
    assert_eq!((l.max, l.error), (4, "none"));
    assert!(l.used <= Some(4), "{l:?}");
    for i in 0..8 {
        assert_eq!(read_file(&s, format!("/f{i}")).unwrap(), vec![i as u8; 10]);
        assert_eq!(
            std::fs::read(dir.join(format!("home/f{i}"))).unwrap(),
            vec![i as u8; 10]
        );
    }
    clean(&s);
    s.unmount().unwrap();
}
