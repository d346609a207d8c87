//! Every bounded resource of a pool, hit on purpose: the call past it gets a clear error, the
//! store stays consistent (fsck clean, committed data intact), and `limits()` — what
//! `atomfs info` shows — reports the maximum and the use.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::sync::Arc;
use store::{Error, Limit, OpenFlags, Store, ROOT_INO};

fn pool(name: &str, cfg: pool::PoolConfig) -> (Arc<dyn Store>, test_support::Scratch) {
    let dir = test_support::scratch(&format!("pool-limits-{name}"));
    let store = pool::create(dir.join("p.pool"), 16 << 20, &cfg).unwrap();
    (store, dir)
}

fn limit(s: &dyn Store, prefix: &str) -> Limit {
    s.limits()
        .unwrap()
        .into_iter()
        .find(|l| l.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no limit {prefix:?}"))
}

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}

#[test]
fn a_file_name_past_255_bytes_is_enametoolong() {
    let (s, _dir) = pool("name", pool::PoolConfig::default());
    let long = vec![b'n'; 256];
    assert!(matches!(
        s.create(ROOT_INO, &long, 0o644, None),
        Err(Error::NameTooLong { len: 256, max: 255 })
    ));
    assert!(s.create(ROOT_INO, &long[..255], 0o644, None).is_ok());
    let l = limit(&*s, "file name bytes");
    assert_eq!((l.max, l.error), (255, "ENAMETOOLONG"));
    clean(&*s);
}

#[test]
fn open_files_and_transactions_stop_at_their_maximum() {
    let cfg = pool::PoolConfig {
        open_files_max: 4,
        open_transactions_max: 2,
        ..pool::PoolConfig::default()
    };
    let (s, _dir) = pool("handles", cfg);
    let files: Vec<_> = (0..4)
        .map(|i| {
            s.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)
                .unwrap()
        })
        .collect();
    let fhs: Vec<_> = files.iter().map(|f| s.open(f.ino, RW).unwrap()).collect();
    let f = files[3];
    assert!(matches!(
        s.open(f.ino, RW),
        Err(Error::TooMany { max: 4, .. })
    ));
    let l = limit(&*s, "open files");
    assert_eq!((l.used, l.max, l.error), (Some(4), 4, "EMFILE"));
    s.release(fhs[3]).unwrap();
    let again = s.open(f.ino, RW).unwrap();
    let t1 = s.tx_begin(&[fhs[0]]).unwrap();
    let t2 = s.tx_begin(&[fhs[1]]).unwrap();
    assert!(matches!(
        s.tx_begin(&[fhs[2]]),
        Err(Error::TooMany { max: 2, .. })
    ));
    assert_eq!(limit(&*s, "open transactions").used, Some(2));
    s.tx_commit(t1).unwrap();
    s.tx_abort(t2).unwrap();
    let t3 = s.tx_begin(&[fhs[2]]).unwrap();
    s.tx_commit(t3).unwrap();
    assert_eq!(limit(&*s, "open transactions").used, Some(0));
    for fh in [fhs[0], fhs[1], fhs[2], again] {
        s.release(fh).unwrap();
    }
    clean(&*s);
}

#[test]
fn inodes_run_out_with_enospc_and_the_store_stays_whole() {
    let cfg = pool::PoolConfig {
        inode_count: 64,
        ..pool::PoolConfig::default()
    };
    let (s, _dir) = pool("inodes", cfg);
    let mut made = 0;
    let err = loop {
        match s.create(ROOT_INO, format!("f{made}").as_bytes(), 0o644, None) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        assert!(made < 1000, "64 inodes gave more than 1000 files");
    };
    assert!(matches!(err, Error::NoSpace(_)), "{err:?}");
    let l = limit(&*s, "inodes");
    assert_eq!(l.used, Some(l.max), "{l:?}");
    assert_eq!(s.read_dir(ROOT_INO).unwrap().len(), made);
    s.unlink(ROOT_INO, b"f0", None).unwrap();
    s.create(ROOT_INO, b"again", 0o644, None).unwrap();
    clean(&*s);
}

/// A transaction bigger than the log fails at the write that does not fit — not at commit —
/// and aborting it leaves the committed state.
#[test]
fn a_transaction_bigger_than_the_log_fails_at_its_write() {
    let cfg = pool::PoolConfig {
        data_log_entries: 1024,
        checkpoint_threads: 0,
        ..pool::PoolConfig::default()
    };
    let (s, _dir) = pool("tx-bytes", cfg);
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let fh = s.open(f.ino, RW).unwrap();
    let committed = vec![7u8; 8 << 20];
    s.write(fh, 0, &committed).unwrap();
    s.fsync(fh, false).unwrap();
    let tx = s.tx_begin(&[fh]).unwrap();
    let block = vec![9u8; 4096];
    let mut written = 0u64;
    let err = loop {
        match s.write(fh, written * 4096, &block) {
            Ok(_) => written += 1,
            Err(e) => break e,
        }
        assert!(
            written < 2048,
            "a 1,024-entry log took 2,048 block versions"
        );
    };
    assert!(
        matches!(err, Error::LogFull(_) | Error::NoSpace(_)),
        "past the log: {err:?}"
    );
    assert_eq!(err.errno(), libc::ENOSPC);
    assert!(written > 0, "not even one write fit");
    let l = limit(&*s, "data log entries");
    assert_eq!(l.max, 1024);
    // The write that did not fit rolled its transaction back (or left it to abort).
    match s.tx_abort(tx) {
        Ok(()) | Err(Error::NoSuchTransaction(_)) => {}
        Err(e) => panic!("abort after the log filled: {e:?}"),
    }
    let mut back = vec![0u8; committed.len()];
    assert_eq!(s.read(fh, 0, &mut back).unwrap(), committed.len());
    assert!(back == committed, "the aborted transaction left changes");
    s.release(fh).unwrap();
    clean(&*s);
}

#[test]
fn every_limit_has_a_maximum_and_the_counted_ones_their_use() {
    let (s, _dir) = pool("all", pool::PoolConfig::default());
    let all = s.limits().unwrap();
    for name in [
        "file name bytes",
        "inodes",
        "data blocks",
        "open files",
        "open transactions",
        "metadata log entries",
        "data log entries",
        "pending versions",
    ] {
        let l = all
            .iter()
            .find(|l| l.name.starts_with(name))
            .unwrap_or_else(|| panic!("no limit {name:?} in {all:?}"));
        assert!(l.max > 0, "{l:?}");
        assert!(l.used.is_none_or(|u| u <= l.max), "{l:?}");
    }
}
