//! Found by the `pool_ops` fuzz target (27 Nov 2026): `tx_begin; tmpfile in tx; release its
//! handle; reopen` (the reopen aborts the open transaction). The release of the last handle
//! of the unnamed file freed its inode at once, though its create belonged to a transaction
//! still open; the abort then gave the same inode number back again: "free list: number 4
//! freed but not handed out (double free)", a release assertion. Now an unnamed file made
//! in a transaction waits for it, as a file whose last link an open transaction took: the
//! abort frees its number, a commit reaps it.

use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{OpenFlags, Store, ROOT_INO};

fn store() -> PoolStore<DramRegion> {
    PoolStore::format(Arc::new(DramRegion::new(4 << 20)), &PoolConfig::test_min()).unwrap()
}

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

fn inodes_free(s: &dyn Store) -> u64 {
    s.statfs().unwrap().inodes_free
}

fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}

#[test]
fn an_unnamed_file_released_inside_its_transaction_is_freed_once_by_the_abort() {
    let s = store();
    let free = inodes_free(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let (_, fh) = s.tmpfile(ROOT_INO, 0o600, RW, Some(tx)).unwrap();
    s.release(fh).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(inodes_free(&s), free);
    // The number is handed out once, not twice.
    let a = s.create(ROOT_INO, b"a", 0o644, None).unwrap();
    let b = s.create(ROOT_INO, b"b", 0o644, None).unwrap();
    assert_ne!(a.ino, b.ino);
    clean(&s);
}

#[test]
fn an_unnamed_file_released_inside_its_transaction_is_reaped_by_the_commit() {
    let s = store();
    let free = inodes_free(&s);
    let tx = s.tx_begin(&[]).unwrap();
    let (_, fh) = s.tmpfile(ROOT_INO, 0o600, RW, Some(tx)).unwrap();
    s.release(fh).unwrap();
    s.tx_commit(tx).unwrap();
    assert_eq!(inodes_free(&s), free, "the unnamed file leaked");
    clean(&s);
}

#[test]
fn an_unnamed_file_named_in_its_transaction_stays() {
    let s = store();
    let tx = s.tx_begin(&[]).unwrap();
    let (meta, fh) = s.tmpfile(ROOT_INO, 0o600, RW, Some(tx)).unwrap();
    s.link(meta.ino, ROOT_INO, b"named", Some(tx)).unwrap();
    s.release(fh).unwrap();
    s.tx_commit(tx).unwrap();
    assert_eq!(s.lookup(ROOT_INO, b"named").unwrap().ino, meta.ino);
    clean(&s);
}
