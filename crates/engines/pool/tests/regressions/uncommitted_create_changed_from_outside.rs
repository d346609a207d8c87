//! Known limit found by reading the abort path (docs/engines/pool.md, 24 Nov 2026), reproduced
//! with the `pool_ops` operations `tx_begin; create /x in tx; open /x; write (or set_len)
//! through the handle; tx_abort; fsck`: the handle was not bound to the transaction, so the
//! write committed on its own (an automatic transaction); the abort then gave the inode back
//! to the allocator and nothing referenced the committed write's blocks any more — fsck
//! reported them as leaked until the pool was reopened. A second overwrite of the block left
//! a committed data entry naming a block pointer inside the freed inode (fsck: "data entry
//! names inode 2 which is not a file"), which a checkpoint or recovery could have swung after
//! the inode number was reused.
//!
//! The same class, found while fixing it: an auto-committed unlink, rename or link of such a
//! file, an attribute change, or a create inside a directory such a transaction made. After
//! the abort, a link or rename left an entry naming a free inode, an unlink let the abort's
//! undo of the directory slot wipe a committed file created later in that slot, and the file
//! created in the aborted directory was unreachable with its blocks leaked.
//!
//! Now a file or directory whose create has not committed belongs to the creating transaction:
//! every change to it from outside fails with `FileInTransaction(creator)` (EBUSY), reads are
//! allowed (src/creates.rs).

use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Error, OpenFlags, SetAttr, Store, TxId, ROOT_INO};

fn fresh() -> PoolStore<DramRegion> {
    PoolStore::format(Arc::new(DramRegion::new(4 << 20)), &PoolConfig::test_min()).unwrap()
}

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

fn assert_clean(s: &PoolStore<DramRegion>, when: &str) {
    let report = s.fsck().unwrap();
    assert!(report.problems.is_empty(), "{when}: {:?}", report.problems);
}

fn refused_by<T: std::fmt::Debug>(r: store::Result<T>, tx: TxId, what: &str) {
    assert!(
        matches!(r, Err(Error::FileInTransaction(id)) if id == tx.0),
        "{what}: expected FileInTransaction({}), got {r:?}",
        tx.0
    );
}

#[test]
fn a_write_from_outside_the_transaction_that_created_the_file_is_refused() {
    let s = fresh();
    let tx = s.tx_begin(&[]).unwrap();
    let x = s.create(ROOT_INO, b"x", 0o644, Some(tx)).unwrap();
    let fh = s.open(x.ino, RW).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(s.read(fh, 0, &mut buf).unwrap(), 0, "reading is allowed");
    let first = s.write(fh, 0, &[1u8; 6000]);
    let again = s.write(fh, 0, &[2u8; 100]); // a second version of block 0
    let set_len = s.set_len(fh, 9000);
    let atomic = s.open(x.ino, OpenFlags { atomic: true, ..RW }).unwrap();
    let atomic_write = s.write(atomic, 0, b"implicit transaction");
    let other_tx = s.tx_begin(&[fh]);
    s.tx_abort(tx).unwrap();
    assert!(s.lookup(ROOT_INO, b"x").is_err(), "the create was aborted");
    s.release(fh).unwrap();
    s.release(atomic).unwrap();
    assert_clean(&s, "after the abort");

    refused_by(first, tx, "write");
    refused_by(again, tx, "second write");
    refused_by(set_len, tx, "set_len");
    refused_by(atomic_write, tx, "O_ATOMIC write");
    refused_by(other_tx, tx, "tx_begin with the file");
    let open_txs = s
        .stats()
        .into_iter()
        .find(|(k, _)| k == "open_transactions");
    assert_eq!(
        open_txs.map(|(_, v)| v),
        Some(0),
        "no transaction is left open by the refusals"
    );
}

#[test]
fn the_creating_transaction_writes_and_after_its_commit_everyone_does() {
    let s = fresh();
    let tx = s.tx_begin(&[]).unwrap();
    let x = s.create(ROOT_INO, b"x", 0o644, Some(tx)).unwrap();
    let outside = s.open(x.ino, RW).unwrap();
    let inside = s.open(x.ino, RW).unwrap();
    refused_by(s.write(outside, 0, b"early"), tx, "write");
    s.tx_add(tx, inside).unwrap();
    s.write(inside, 0, b"inside").unwrap();
    // The file is bound now: every handle's write belongs to the transaction.
    s.write(outside, 6, b"+bound").unwrap();
    s.tx_commit(tx).unwrap();
    s.write(outside, 12, b"+after").unwrap();
    s.set_len(outside, 18).unwrap();
    let mut buf = [0u8; 18];
    assert_eq!(s.read(inside, 0, &mut buf).unwrap(), 18);
    assert_eq!(&buf, b"inside+bound+after");
    s.release(outside).unwrap();
    s.release(inside).unwrap();
    assert_clean(&s, "after the commit");
}

#[test]
fn namespace_changes_from_outside_the_creating_transaction_are_refused() {
    let s = fresh();
    let tx = s.tx_begin(&[]).unwrap();
    let x = s.create(ROOT_INO, b"x", 0o644, Some(tx)).unwrap();
    let d = s.mkdir(ROOT_INO, b"d", 0o755, Some(tx)).unwrap();
    let other = s.tx_begin(&[]).unwrap();
    for t in [None, Some(other)] {
        refused_by(s.unlink(ROOT_INO, b"x", t), tx, "unlink");
        refused_by(s.rename(ROOT_INO, b"x", ROOT_INO, b"z", t), tx, "rename");
        refused_by(s.link(x.ino, ROOT_INO, b"z", t), tx, "link");
        let chmod = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        refused_by(s.setattr(x.ino, &chmod, t), tx, "setattr");
        refused_by(
            s.create(d.ino, b"f", 0o644, t),
            tx,
            "create in the new directory",
        );
        refused_by(s.rmdir(ROOT_INO, b"d", t), tx, "rmdir");
    }
    s.tx_commit(other).unwrap();
    // The creating transaction itself may do all of it.
    s.create(d.ino, b"f", 0o644, Some(tx)).unwrap();
    s.link(x.ino, d.ino, b"x2", Some(tx)).unwrap();
    s.tx_abort(tx).unwrap();
    let y = s.create(ROOT_INO, b"y", 0o644, None).unwrap();
    assert_eq!(s.lookup(ROOT_INO, b"y").unwrap().ino, y.ino);
    assert!(s.lookup(ROOT_INO, b"x").is_err() && s.lookup(ROOT_INO, b"d").is_err());
    assert_clean(&s, "after the abort");
}
