//! Every bounded resource of an mmio store, hit on purpose: the call past it gets a clear
//! error, nothing committed is lost (the live store and a crash image of it read the same,
//! fsck is clean), the store goes on once the resource is given back, and `limits()` — what
//! `atomfs info` shows — reports the maximum and the use.
//!
//! The one limit no test here reaches is "multi-file commits at once": a transaction record
//! is held only for the length of one commit, so only commits on `tx_records_max + 1`
//! threads at one instant can meet it (they get EMFILE and nothing of theirs is written).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::MmioConfig;
use store::{Error, Limit, OpenFlags, Store, ROOT_INO};

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

/// fsck clean, `committed` readable as it is in the live store and after a crash now.
fn nothing_lost(sim: &Sim, s: &SimStore, cfg: &MmioConfig, committed: &[(&str, &[u8])]) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
    for (path, data) in committed {
        assert_eq!(&read_path(s, path)[..], *data, "{path} in the live store");
    }
    let (_sim, again) = sim_reopen(sim.persistent_image(), cfg).expect("recover");
    for (path, data) in committed {
        assert_eq!(&read_path(&again, path)[..], *data, "{path} after a crash");
    }
    assert!(again.fsck().unwrap().is_clean());
}

/// A file `path` holding `data`, committed, its handle released.
fn committed_file(s: &SimStore, path: &str, data: &[u8]) {
    let fh = open_rw(s, path, false);
    s.write(fh, 0, data).unwrap();
    s.fsync(fh, false).unwrap();
    s.release(fh).unwrap();
}

fn errno_of(e: &Error) -> i32 {
    e.errno()
}

#[test]
fn a_file_name_past_255_bytes_is_enametoolong() {
    let cfg = MmioConfig::test_min();
    let (sim, s) = sim_store(&cfg);
    let long = vec![b'n'; 256];
    let err = s.create(ROOT_INO, &long, 0o644, None).unwrap_err();
    assert_eq!(errno_of(&err), libc::ENAMETOOLONG, "{err:?}");
    s.create(ROOT_INO, &long[..255], 0o644, None).unwrap();
    let l = limit(&s, "file name bytes");
    assert_eq!((l.max, l.used, l.error), (255, None, "ENAMETOOLONG"));
    nothing_lost(&sim, &s, &cfg, &[]);
}

#[test]
fn open_handles_stop_at_their_maximum() {
    let cfg = MmioConfig {
        open_handles_max: 4,
        ..MmioConfig::test_min()
    };
    let (sim, s) = sim_store(&cfg);
    committed_file(&s, "/a", b"kept");
    let a = s.lookup(ROOT_INO, b"a").unwrap().ino;
    let fhs: Vec<_> = (0..4).map(|_| s.open(a, RW).unwrap()).collect();
    let err = s.open(a, RW).unwrap_err();
    assert!(matches!(err, Error::TooMany { max: 4, .. }), "{err:?}");
    assert_eq!(errno_of(&err), libc::EMFILE);
    // An unnamed temporary file needs a handle too: refused before anything is made.
    let err = s.tmpfile(ROOT_INO, 0o600, RW, None).unwrap_err();
    assert!(matches!(err, Error::TooMany { max: 4, .. }), "{err:?}");
    let l = limit(&s, "open handles");
    assert_eq!((l.used, l.max, l.error), (Some(4), 4, "EMFILE"));
    s.release(fhs[3]).unwrap();
    let again = s.open(a, RW).unwrap();
    s.write(again, 0, b"KEPT").unwrap();
    s.fsync(again, false).unwrap();
    for fh in [fhs[0], fhs[1], fhs[2], again] {
        s.release(fh).unwrap();
    }
    assert_eq!(limit(&s, "open handles").used, Some(0));
    nothing_lost(&sim, &s, &cfg, &[("/a", b"KEPT")]);
}

#[test]
fn open_files_stop_at_the_metadata_slots() {
    let cfg = MmioConfig::test_min();
    let (sim, s) = sim_store(&cfg);
    committed_file(&s, "/kept", b"committed before");
    let mut fhs = Vec::new();
    let err = loop {
        let name = format!("f{}", fhs.len());
        let meta = s.create(ROOT_INO, name.as_bytes(), 0o644, None).unwrap();
        match s.open(meta.ino, RW) {
            Ok(fh) => fhs.push(fh),
            Err(e) => break e,
        }
        assert!(fhs.len() <= 64, "16 slots gave 64 open files");
    };
    assert!(matches!(err, Error::TooMany { max: 16, .. }), "{err:?}");
    assert_eq!(errno_of(&err), libc::EMFILE);
    assert_eq!(fhs.len(), cfg.files_max as usize);
    let l = limit(&s, "open files");
    assert_eq!((l.used, l.max, l.error), (Some(16), 16, "EMFILE"));
    // Past the limit, a committed file cannot be opened, but it is intact; a release
    // frees a slot.
    let kept = s.lookup(ROOT_INO, b"kept").unwrap().ino;
    assert!(s.open(kept, RW).is_err());
    s.release(fhs.pop().unwrap()).unwrap();
    let fh = s.open(kept, RW).unwrap();
    s.release(fh).unwrap();
    for fh in fhs {
        s.release(fh).unwrap();
    }
    assert_eq!(limit(&s, "open files").used, Some(0));
    nothing_lost(&sim, &s, &cfg, &[("/kept", b"committed before")]);
}

#[test]
fn open_transactions_stop_at_their_maximum() {
    let cfg = MmioConfig::test_min();
    let (sim, s) = sim_store(&cfg);
    let txs: Vec<_> = (0..cfg.transactions_max)
        .map(|_| s.tx_begin(&[]).unwrap())
        .collect();
    let err = s.tx_begin(&[]).unwrap_err();
    assert!(matches!(err, Error::TooMany { max: 8, .. }), "{err:?}");
    assert_eq!(errno_of(&err), libc::EMFILE);
    assert_eq!(limit(&s, "open transactions").used, Some(8));
    // The open ones still work: one creates a file and commits, the others abort.
    s.create(ROOT_INO, b"made", 0o644, Some(txs[0])).unwrap();
    s.tx_commit(txs[0]).unwrap();
    for &tx in &txs[1..] {
        s.tx_abort(tx).unwrap();
    }
    let tx = s.tx_begin(&[]).unwrap();
    s.tx_commit(tx).unwrap();
    assert_eq!(limit(&s, "open transactions").used, Some(0));
    nothing_lost(&sim, &s, &cfg, &[("/made", b"")]);
}

#[test]
fn files_per_transaction_stop_at_their_maximum() {
    let cfg = MmioConfig::test_min();
    let (sim, s) = sim_store(&cfg);
    let names = ["/a", "/b", "/c", "/d", "/e"];
    for p in names {
        committed_file(&s, p, b"old");
    }
    let fhs: Vec<_> = names.iter().map(|p| open_rw(&s, p, false)).collect();
    let tx = s.tx_begin(&fhs[..4]).unwrap();
    let err = s.tx_add(tx, fhs[4]).unwrap_err();
    assert!(matches!(err, Error::TooMany { max: 4, .. }), "{err:?}");
    assert_eq!(errno_of(&err), libc::EMFILE);
    let l = limit(&s, "files per transaction");
    assert_eq!((l.used, l.max, l.error), (Some(4), 4, "EMFILE"));
    // The refused file is not in the transaction: its write commits on its own.
    s.write(fhs[4], 0, b"own").unwrap();
    s.fsync(fhs[4], false).unwrap();
    for &fh in &fhs[..4] {
        s.write(fh, 0, b"new").unwrap();
    }
    s.tx_commit(tx).unwrap();
    // Past the limit at begin: nothing is left open.
    let err = s.tx_begin(&fhs).unwrap_err();
    assert!(matches!(err, Error::TooMany { .. }), "{err:?}");
    assert_eq!(limit(&s, "open transactions").used, Some(0));
    for fh in fhs {
        s.release(fh).unwrap();
    }
    let want: Vec<(&str, &[u8])> = vec![
        ("/a", b"new"),
        ("/b", b"new"),
        ("/c", b"new"),
        ("/d", b"new"),
        ("/e", b"own"),
    ];
    nothing_lost(&sim, &s, &cfg, &want);
}

#[test]
fn namespace_intents_stop_at_their_maximum_and_the_transaction_still_commits() {
    let cfg = MmioConfig::test_min();
    let (sim, s) = sim_store(&cfg);
    committed_file(&s, "/kept", b"before");
    let tx = s.tx_begin(&[]).unwrap();
    let mut made = 0;
    let err = loop {
        match s.create(ROOT_INO, format!("n{made}").as_bytes(), 0o644, Some(tx)) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        assert!(made <= 64, "16 intent records took 64 creates");
    };
    assert!(matches!(err, Error::TooMany { max: 16, .. }), "{err:?}");
    assert_eq!(errno_of(&err), libc::EMFILE);
    assert_eq!(made, cfg.intents_max as usize);
    assert!(
        s.lookup(ROOT_INO, format!("n{made}").as_bytes()).is_err(),
        "the refused create left a name"
    );
    let l = limit(&s, "namespace operations");
    assert_eq!((l.used, l.max), (Some(16), 16));
    s.tx_commit(tx).unwrap();
    assert_eq!(limit(&s, "namespace operations").used, Some(0));
    assert_eq!(s.read_dir(ROOT_INO).unwrap().len(), made + 1);
    let names: Vec<String> = (0..made).map(|i| format!("/n{i}")).collect();
    let mut want: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    want.push(("/kept", b"before"));
    nothing_lost(&sim, &s, &cfg, &want);
}

/// A transaction bigger than the log fails at the write that does not fit — not at commit —
/// and aborting it leaves the committed state.
#[test]
fn a_transaction_bigger_than_the_log_fails_at_its_write() {
    let cfg = MmioConfig {
        policy_mode: mmio::PolicyMode::Undo,
        ..MmioConfig::test_min()
    };
    let (sim, s) = sim_store(&cfg);
    let committed = vec![7u8; 2 << 20];
    committed_file(&s, "/big", &committed);
    let fh = open_rw(&s, "/big", false);
    let tx = s.tx_begin(&[fh]).unwrap();
    let block = [9u8; 4096];
    let mut written = 0u64;
    let err = loop {
        match s.write(fh, written * 8192, &block) {
            Ok(_) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 256, "a 1 MiB log took 256 separate blocks");
    };
    assert!(matches!(err, Error::LogFull(_)), "past the log: {err:?}");
    assert_eq!(errno_of(&err), libc::ENOSPC);
    assert!(written > 0, "not even one write fit");
    let entries = limit(&s, "log entries");
    let bytes = limit(&s, "log bytes");
    assert_eq!((entries.error, bytes.error), ("ENOSPC", "ENOSPC"));
    assert!(
        entries.used == Some(entries.max) || bytes.used.unwrap() + 4096 > bytes.max,
        "the log is not full: {entries:?} {bytes:?}"
    );
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/big"), committed);
    // The log is free again: a transaction of a few blocks commits.
    let tx = s.tx_begin(&[fh]).unwrap();
    s.write(fh, 0, &block).unwrap();
    s.tx_commit(tx).unwrap();
    s.release(fh).unwrap();
    let mut want = committed.clone();
    want[..4096].copy_from_slice(&block);
    nothing_lost(&sim, &s, &cfg, &[("/big", &want)]);
}

#[test]
fn bytes_per_uncommitted_epoch_stop_at_their_maximum() {
    let cfg = MmioConfig {
        epoch_bytes_max: 64 << 10,
        ..MmioConfig::test_min()
    };
    let (sim, s) = sim_store(&cfg);
    committed_file(&s, "/f", b"committed");
    let fh = open_rw(&s, "/f", false);
    let tx = s.tx_begin(&[fh]).unwrap();
    let chunk = vec![3u8; 16 << 10];
    let mut at = 9u64;
    let err = loop {
        match s.write(fh, at, &chunk) {
            Ok(_) => at += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(at < 1 << 20, "a 64 KiB epoch took 1 MiB");
    };
    assert!(matches!(err, Error::NoSpace(_)), "{err:?}");
    assert_eq!(errno_of(&err), libc::ENOSPC);
    let l = limit(&s, "bytes per file in one uncommitted epoch");
    assert_eq!((l.max, l.error), (64 << 10, "ENOSPC"));
    assert!(l.used.unwrap() <= l.max && l.used.unwrap() + chunk.len() as u64 > l.max);
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/f"), b"committed");
    // The budget is per epoch: after the abort the same write fits.
    s.write(fh, 9, &chunk).unwrap();
    s.fsync(fh, false).unwrap();
    s.release(fh).unwrap();
    let mut want = b"committed".to_vec();
    want.extend_from_slice(&chunk);
    nothing_lost(&sim, &s, &cfg, &[("/f", &want)]);
}

#[test]
fn limits_list_every_bounded_resource() {
    let cfg = MmioConfig::test_min();
    let (_sim, s) = sim_store(&cfg);
    let names: Vec<String> = s.limits().unwrap().into_iter().map(|l| l.name).collect();
    for prefix in [
        "file name bytes",
        "host blocks",
        "open handles",
        "open files",
        "open transactions",
        "files per transaction",
        "multi-file commits at once",
        "namespace operations",
        "log entries",
        "log bytes",
        "bytes per file in one uncommitted epoch",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "{prefix:?} missing from {names:?}"
        );
    }
    let l = limit(&s, "multi-file commits at once");
    assert_eq!((l.used, l.max), (Some(0), cfg.tx_records_max as u64));
}
