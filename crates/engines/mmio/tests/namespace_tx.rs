//! Namespace operations inside transactions: applied at once on the host under a durable
//! intent, undone by tx_abort and by recovery of an uncommitted transaction, kept (and their
//! trash deleted) by a commit, over simulated media and a real directory.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{MmioConfig, MmioStore};
use std::collections::BTreeMap;
use store::{FileKind, OpenOptions, SetAttr, Store, ROOT_INO};

/// path -> Some(contents) for files, None for directories.
fn tree(s: &dyn Store) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(ROOT_INO, String::new())];
    while let Some((ino, prefix)) = stack.pop() {
        for e in s.read_dir(ino).unwrap() {
            let p = format!("{prefix}/{}", String::from_utf8_lossy(&e.name));
            if e.kind == FileKind::Dir {
                out.insert(p.clone(), None);
                stack.push((e.ino, p));
            } else {
                out.insert(p.clone(), Some(store::path::read_file(s, &p).unwrap()));
            }
        }
    }
    out
}

fn setup(s: &dyn Store) {
    store::path::mkdir_all(s, "/d/empty", 0o755).unwrap();
    store::path::write_file(s, "/a", b"aaaa", None).unwrap();
    store::path::write_file(s, "/d/c", b"ccc", None).unwrap();
    store::path::write_file(s, "/gone", b"to be unlinked", None).unwrap();
}

fn changes(s: &dyn Store, tx: store::TxId) -> store::Fh {
    let d = store::resolve(s, "/d").unwrap().ino;
    let fnew = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, "/d/new", Some(tx))
        .unwrap();
    s.write(fnew, 0, b"new data").unwrap();
    s.unlink(ROOT_INO, b"gone", Some(tx)).unwrap();
    s.rename(d, b"c", ROOT_INO, b"c-moved", Some(tx)).unwrap();
    s.rename(ROOT_INO, b"c-moved", ROOT_INO, b"a", Some(tx))
        .unwrap(); // replaces /a
    s.mkdir(d, b"newdir", 0o755, Some(tx)).unwrap();
    s.rmdir(d, b"empty", Some(tx)).unwrap();
    let a = store::resolve(s, "/a").unwrap();
    s.setattr(
        a.ino,
        &SetAttr {
            perm: Some(0o600),
            ..Default::default()
        },
        Some(tx),
    )
    .unwrap();
    fnew
}

#[test]
fn abort_restores_names() {
    let (_r, s) = sim_store(&MmioConfig::test_min());
    setup(&s);
    let before = tree(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let fnew = changes(&s, tx);
    assert_ne!(tree(&s), before);
    s.tx_abort(tx).unwrap();
    assert_eq!(tree(&s), before);
    let _ = s.release(fnew);
    assert!(s.fsck().unwrap().is_clean());
}

#[test]
fn crash_before_commit_restores_names() {
    let c = MmioConfig::test_min();
    let (region, s) = sim_store(&c);
    setup(&s);
    let before = tree(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let _fnew = changes(&s, tx);
    for image in [region.persistent_image(), region.cache_image()] {
        let (_r2, s2) = sim_reopen(image, &c).unwrap();
        assert!(
            s2.recovery_report().intents_undone >= 7,
            "{:?}",
            s2.recovery_report()
        );
        assert_eq!(tree(&s2), before);
    }
}

#[test]
fn commit_keeps_names_and_empties_the_trash() {
    let c = MmioConfig::test_min();
    let (region, s) = sim_store(&c);
    setup(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let fnew = changes(&s, tx);
    let during = tree(&s);
    s.tx_commit(tx).unwrap();
    s.release(fnew).unwrap();
    assert_eq!(tree(&s), during);
    assert_eq!(store::path::read_file(&s, "/a").unwrap(), b"ccc");
    assert_eq!(
        s.getattr(store::resolve(&s, "/a").unwrap().ino)
            .unwrap()
            .perm
            & 0o777,
        0o600
    );
    let (_r2, s2) = sim_reopen(region.persistent_image(), &c).unwrap();
    assert_eq!(tree(&s2), during);
    let (_r3, s3) = sim_reopen(region.persistent_image(), &c).unwrap();
    // The trash is hidden and empty after the commit.
    let names: Vec<_> = s3
        .read_dir(ROOT_INO)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(b".atomfs")),
        "{names:?}"
    );
}

#[test]
fn host_directory_abort_and_crash() {
    let dir = shm_dir("nstx");
    let c = MmioConfig::test_min();
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    setup(&s);
    let before = tree(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let fnew = changes(&s, tx);
    s.tx_abort(tx).unwrap();
    let _ = s.release(fnew);
    assert_eq!(tree(&s), before);
    let tx = s.tx_begin(&[]).unwrap();
    let _fnew = changes(&s, tx);
    drop(s); // crash with the transaction open
    let s = MmioStore::open(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    assert_eq!(tree(&s), before);
    let trash: Vec<_> = std::fs::read_dir(dir.join("files/.atomfs-mmio-trash"))
        .unwrap()
        .collect();
    assert!(trash.is_empty(), "trash emptied by recovery");
    s.unmount().unwrap();
    cleanup(&dir);
}
