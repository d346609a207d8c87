//! Transactions and O_ATOMIC.

use super::*;
use crate::assert_err;
use crate::tree::Node;
use crate::Tree;
use store::{resolve, OpenFlags, SetAttr, ROOT_INO};

/// Writes to several files in one transaction are all visible after commit and survive a
/// crash.
pub fn tx_multi_file_commit(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", &pattern(1, 10_000));
    write_path(s, "/b", &pattern(2, 300));
    let (fa, fb) = (open_rw(s, "/a"), open_rw(s, "/b"));
    let tx = ok(s.tx_begin(&[fa]), "tx_begin");
    ok(s.tx_add(tx, fb), "tx_add");
    put(s, fa, 4000, &pattern(3, 5000));
    put(s, fb, 300, &pattern(4, 8000));
    ok(s.set_len(fa, 9500), "set_len");
    let fc = open_in(s, "/c", tx);
    put(s, fc, 0, b"new file");
    assert_eq!(
        contents(s, fb)[300..],
        pattern(4, 8000)[..],
        "a transaction reads its own writes"
    );
    ok(s.tx_commit(tx), "tx_commit");
    put(s, fa, 0, b"after"); // files stay open and unbound: a legacy write
    for fh in [fa, fb, fc] {
        ok(s.release(fh), "release");
    }
    let mut a = pattern(1, 10_000);
    a[4000..9000].copy_from_slice(&pattern(3, 5000));
    a.truncate(9500);
    a[..5].copy_from_slice(b"after");
    let mut b = pattern(2, 300);
    b.extend(pattern(4, 8000));
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_eq!(file(s, "/a"), a);
    assert_eq!(file(s, "/b"), b);
    assert_eq!(file(s, "/c"), b"new file");
    finish(store);
}

/// tx_abort restores every byte and every name: writes, appends, truncates, extensions,
/// creates, unlinks, renames, mkdir, rmdir and attribute changes inside the transaction.
pub fn tx_abort_restores_everything(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    ok(store::path::mkdir_all(s, "/d/empty", 0o755), "mkdir");
    write_path(s, "/a", &pattern(1, 20_000));
    write_path(s, "/b", &pattern(2, 5000));
    write_path(s, "/d/c", b"ccc");
    write_path(s, "/gone", b"to be unlinked");
    let before = tree(s);
    let b_meta = ok(resolve(s, "/b"), "resolve");
    let (fa, fb) = (open_rw(s, "/a"), open_rw(s, "/b"));
    let tx = ok(s.tx_begin(&[fa, fb]), "tx_begin");
    put(s, fa, 100, &pattern(9, 9000));
    put(s, fa, 20_000, b"appended");
    ok(s.set_len(fb, 10), "truncate");
    ok(s.set_len(fb, 50_000), "extend");
    put(s, fb, 40_000, b"far");
    let fnew = open_in(s, "/d/new", tx);
    put(s, fnew, 0, &pattern(5, 7000));
    let d = ok(resolve(s, "/d"), "resolve").ino;
    ok(s.unlink(ROOT_INO, b"gone", Some(tx)), "unlink");
    ok(s.rename(d, b"c", ROOT_INO, b"c-moved", Some(tx)), "rename");
    ok(
        s.rename(ROOT_INO, b"c-moved", ROOT_INO, b"a-name", Some(tx)),
        "rename again",
    );
    ok(s.mkdir(d, b"newdir", 0o755, Some(tx)), "mkdir");
    ok(s.rmdir(d, b"empty", Some(tx)), "rmdir");
    ok(
        s.setattr(
            b_meta.ino,
            &SetAttr {
                perm: Some(0o600),
                ..Default::default()
            },
            Some(tx),
        ),
        "chmod",
    );
    assert!(tree(s) != before, "the transaction changed nothing visible");
    ok(s.tx_abort(tx), "tx_abort");
    assert_tree(&before, &tree(s), "after tx_abort");
    assert_eq!(
        ok(s.getattr(b_meta.ino), "getattr").perm & 0o777,
        b_meta.perm & 0o777,
        "perm not restored"
    );
    // the handles stay open and unbound; the released-after-abort new file is gone
    put(s, fa, 0, b"legacy");
    let _ = s.release(fnew);
    for fh in [fa, fb] {
        ok(s.release(fh), "release");
    }
    check_fsck(s, "abort");
    let store = crash_or_reopen(h, store);
    let mut want = before;
    if let Some(crate::Node::File(a)) = want.get_mut(b"a".as_slice()) {
        a[..6].copy_from_slice(b"legacy");
    }
    assert_tree(&want, &tree(store.as_ref()), "after abort and reopen");
    finish(store);
}

/// A file bound to an open transaction cannot join another one.
pub fn tx_file_in_two_transactions(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let (f, g) = (open_rw(s, "/f"), open_rw(s, "/g"));
    let t1 = ok(s.tx_begin(&[f]), "tx_begin");
    assert_err!(s.tx_begin(&[f]), Error::FileInTransaction(_));
    assert_err!(s.tx_begin(&[g, f]), Error::FileInTransaction(_));
    let t2 = ok(s.tx_begin(&[g]), "tx_begin");
    assert_err!(s.tx_add(t2, f), Error::FileInTransaction(_));
    assert_eq!(Error::FileInTransaction(1).errno(), 16, "EBUSY");
    put(s, f, 0, b"one");
    put(s, g, 0, b"two");
    ok(s.tx_commit(t1), "commit t1");
    ok(s.tx_add(t2, f), "tx_add after t1 finished");
    put(s, f, 3, b"+two");
    ok(s.tx_abort(t2), "abort t2");
    assert_eq!(contents(s, f), b"one");
    assert_eq!(contents(s, g), b"");
    // Releasing the handle that bound a file does not take the file out of its transaction
    // (found by the pool_ops fuzz target: the model had let a second handle bind it).
    let f2 = open_rw(s, "/f");
    let t3 = ok(s.tx_begin(&[f]), "tx_begin");
    put(s, f, 0, b"ONE");
    ok(s.release(f), "release the bound handle");
    assert_err!(s.tx_begin(&[f2]), Error::FileInTransaction(_));
    let t4 = ok(s.tx_begin(&[g]), "tx_begin");
    assert_err!(s.tx_add(t4, f2), Error::FileInTransaction(_));
    ok(s.tx_commit(t3), "commit t3");
    ok(s.tx_add(t4, f2), "tx_add after t3 finished");
    ok(s.tx_commit(t4), "commit t4");
    assert_eq!(contents(s, f2), b"ONE");
    // A write through another handle of a bound file belongs to the file's transaction.
    let f3 = open_rw(s, "/f");
    let t5 = ok(s.tx_begin(&[f2]), "tx_begin");
    put(s, f3, 0, b"two");
    ok(s.tx_abort(t5), "abort t5");
    assert_eq!(
        contents(s, f3),
        b"ONE",
        "the other handle's write was aborted with t5"
    );
    ok(s.release(f3), "release");
    ok(s.release(f2), "release");
    ok(s.release(g), "release");
    finish(store);
}

/// `r` failed with FileInTransaction naming `tx`.
fn assert_busy<T: std::fmt::Debug>(r: store::Result<T>, tx: TxId, what: &str) {
    match r {
        Err(Error::FileInTransaction(id)) if id == tx.0 => {}
        other => panic!(
            "{what}: expected FileInTransaction({}), got {other:?}",
            tx.0
        ),
    }
}

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

/// Every change `t` (None: outside any transaction) may not make to the file `x` and the
/// directory `d` that transaction `owner` created and has not committed.
fn assert_refused(s: &dyn Store, owner: TxId, t: Option<TxId>, x: store::Ino, d: store::Ino) {
    let chmod = SetAttr {
        perm: Some(0o600),
        ..SetAttr::default()
    };
    assert_busy(s.unlink(ROOT_INO, b"x", t), owner, "unlink");
    assert_busy(s.rename(ROOT_INO, b"x", ROOT_INO, b"z", t), owner, "rename");
    assert_busy(s.setattr(x, &chmod, t), owner, "setattr");
    match s.link(x, ROOT_INO, b"z", t) {
        Err(Error::Unsupported(_)) => {}
        r => assert_busy(r, owner, "link"),
    }
    assert_busy(
        s.create(d, b"f", 0o644, t),
        owner,
        "create in the new directory",
    );
    assert_busy(
        s.mkdir(d, b"e", 0o755, t),
        owner,
        "mkdir in the new directory",
    );
    assert_busy(s.rmdir(ROOT_INO, b"d", t), owner, "rmdir");
}

/// A file or directory created by an open transaction belongs to it until it ends: from
/// outside it (a call outside any transaction, another transaction, an O_ATOMIC file's
/// implicit one) a write, set_len, binding the file, unlink, rename, link or setattr, and a
/// new entry in such a directory fail with FileInTransaction (EBUSY), so that its abort
/// cannot pull the inode from under a committed change. Reading is allowed; the creating
/// transaction changes it freely; after the abort the file is gone and fsck is clean.
pub fn tx_created_file_refuses_changes_from_outside(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let t = ok(s.tx_begin(&[]), "tx_begin");
    let x = ok(s.create(ROOT_INO, b"x", 0o644, Some(t)), "create in t").ino;
    let d = ok(s.mkdir(ROOT_INO, b"d", 0o755, Some(t)), "mkdir in t").ino;
    let fo = ok(s.open(x, RW), "open, not bound");
    assert_busy(s.write(fo, 0, b"outside"), t, "write");
    assert_busy(s.set_len(fo, 100), t, "set_len");
    let mut buf = [0u8; 4];
    assert_eq!(ok(s.read(fo, 0, &mut buf), "read"), 0, "reading is allowed");
    assert_busy(s.tx_begin(&[fo]), t, "tx_begin with the file");
    let other = ok(s.tx_begin(&[]), "tx_begin");
    assert_busy(s.tx_add(other, fo), t, "tx_add to another transaction");
    let fa = ok(s.open(x, OpenFlags { atomic: true, ..RW }), "open O_ATOMIC");
    assert_busy(s.write(fa, 0, b"implicit"), t, "O_ATOMIC write");
    ok(s.release(fa), "release");
    assert_refused(s, t, None, x, d);
    assert_refused(s, t, Some(other), x, d);
    ok(s.tx_commit(other), "commit the other transaction");
    // Inside the creating transaction everything works; the binding covers every handle.
    let fb = ok(s.open(x, RW), "open");
    ok(s.tx_add(t, fb), "tx_add to the creating transaction");
    put(s, fb, 0, &pattern(1, 5000));
    put(s, fo, 5000, b"bound");
    ok(s.set_len(fo, 5003), "set_len in t");
    assert_eq!(contents(s, fo), [&pattern(1, 5000)[..], b"bou"].concat());
    ok(
        s.create(d, b"f", 0o644, Some(t)),
        "create in the new directory, in t",
    );
    ok(s.tx_abort(t), "abort");
    assert_err!(s.lookup(ROOT_INO, b"x"), Error::NotFound(_));
    assert_err!(s.lookup(ROOT_INO, b"d"), Error::NotFound(_));
    // Handles on a file whose create was aborted may fail; releasing them must not.
    let _ = (s.release(fo), s.release(fb));
    check_fsck(s, "the aborted create");
    assert_eq!(tree(s), Tree::new(), "nothing left");
    finish(store);
}

/// A handle open on a file whose create was aborted names a file that no longer exists:
/// every call through it but `release` fails with NotFound (ENOENT), whether or not it was
/// bound to the transaction, and `release` succeeds. The inode number is not handed to a new
/// file while such a handle lives, so a later create cannot be reached through it.
fn not_found<T: std::fmt::Debug>(r: Result<T>, call: &str, which: &str) {
    match r {
        Err(Error::NotFound(_)) => {}
        other => panic!(
            "{call} through the {which} of an aborted create: expected NotFound, got {other:?}"
        ),
    }
}

pub fn tx_aborted_create_handles_not_found(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let t = ok(s.tx_begin(&[]), "tx_begin");
    let fb = open_in(s, "/gone", t);
    put(s, fb, 0, &pattern(5, 9000));
    let ino = ok(s.fstat(fb), "fstat in t").ino;
    let fo = ok(s.open(ino, RW), "open, not bound");
    ok(s.tx_abort(t), "abort");
    assert_err!(s.lookup(ROOT_INO, b"gone"), Error::NotFound(_));
    // A file created after the abort must not be reachable through the old handles.
    let fresh = open_rw(s, "/fresh");
    put(s, fresh, 0, b"fresh bytes");
    for (fh, which) in [(fb, "bound handle"), (fo, "unbound handle")] {
        let mut buf = [0u8; 16];
        not_found(s.read(fh, 0, &mut buf), "read", which);
        not_found(s.write(fh, 0, b"x"), "write", which);
        not_found(s.set_len(fh, 10), "set_len", which);
        not_found(s.fsync(fh, false), "fsync", which);
        not_found(s.fstat(fh), "fstat", which);
        not_found(s.tx_begin(&[fh]), "tx_begin", which);
        let t2 = ok(s.tx_begin(&[]), "tx_begin");
        not_found(s.tx_add(t2, fh), "tx_add", which);
        ok(s.tx_abort(t2), "abort t2");
        ok(s.release(fh), "release");
    }
    assert_eq!(contents(s, fresh), b"fresh bytes");
    ok(s.release(fresh), "release");
    check_fsck(s, "the aborted create");
    let want = Tree::from([(b"fresh".to_vec(), Node::File(b"fresh bytes".to_vec()))]);
    assert_tree(&want, &tree(s), "after the abort");
    finish(store);
}

/// Once the transaction that created a file commits, the file is everyone's: a handle that
/// was refused before writes, truncates and binds it to another transaction.
pub fn tx_created_file_free_after_commit(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let t = ok(s.tx_begin(&[]), "tx_begin");
    let y = ok(s.create(ROOT_INO, b"y", 0o644, Some(t)), "create in t").ino;
    let fo = ok(s.open(y, RW), "open, not bound");
    assert_busy(s.write(fo, 0, b"early"), t, "write before the commit");
    let fb = open_in(s, "/y", t);
    put(s, fb, 0, b"inside");
    ok(s.tx_commit(t), "commit");
    put(s, fo, 6, b"+after");
    ok(s.set_len(fo, 10), "set_len");
    let t2 = ok(s.tx_begin(&[fo]), "tx_begin with the file");
    put(s, fo, 10, b"+t2");
    ok(s.tx_commit(t2), "commit t2");
    ok(
        s.rename(ROOT_INO, b"y", ROOT_INO, b"y2", None),
        "rename after the commit",
    );
    assert_eq!(contents(s, fb), b"inside+aft+t2");
    ok(s.release(fo), "release");
    ok(s.release(fb), "release");
    let store = crash_or_reopen(h, store);
    assert_eq!(file(store.as_ref(), "/y2"), b"inside+aft+t2");
    finish(store);
}

/// Commit, abort and tx_add of a finished transaction fail with NoSuchTransaction.
pub fn tx_finished_transaction(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let f = open_rw(s, "/f");
    let t = ok(s.tx_begin(&[f]), "tx_begin");
    put(s, f, 0, b"x");
    ok(s.tx_commit(t), "commit");
    assert_err!(s.tx_commit(t), Error::NoSuchTransaction(_));
    assert_err!(s.tx_abort(t), Error::NoSuchTransaction(_));
    assert_err!(s.tx_add(t, f), Error::NoSuchTransaction(_));
    assert_err!(
        s.create(ROOT_INO, b"g", 0o644, Some(t)),
        Error::NoSuchTransaction(_)
    );
    let t2 = ok(s.tx_begin(&[]), "tx_begin");
    ok(s.tx_abort(t2), "abort");
    assert_err!(s.tx_commit(t2), Error::NoSuchTransaction(_));
    assert_err!(s.tx_abort(t2), Error::NoSuchTransaction(_));
    assert_err!(
        s.tx_commit(store::TxId(0xdead_beef)),
        Error::NoSuchTransaction(_)
    );
    assert_err!(s.lookup(ROOT_INO, b"g"), Error::NotFound(_));
    assert_eq!(contents(s, f), b"x");
    ok(s.release(f), "release");
    finish(store);
}

/// Every call on a released (or never issued) handle fails with BadHandle.
pub fn released_handle(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let f = open_rw(s, "/f");
    put(s, f, 0, b"abc");
    ok(s.release(f), "release");
    let mut buf = [0u8; 3];
    assert_err!(s.read(f, 0, &mut buf), Error::BadHandle(_));
    assert_err!(s.write(f, 0, b"x"), Error::BadHandle(_));
    assert_err!(s.set_len(f, 0), Error::BadHandle(_));
    assert_err!(s.fstat(f), Error::BadHandle(_));
    assert_err!(s.fsync(f, false), Error::BadHandle(_));
    assert_err!(s.release(f), Error::BadHandle(_));
    assert_err!(s.tx_begin(&[f]), Error::BadHandle(_));
    let t = ok(s.tx_begin(&[]), "tx_begin");
    assert_err!(s.tx_add(t, f), Error::BadHandle(_));
    ok(s.tx_abort(t), "abort");
    assert_err!(
        s.read(store::Fh(u64::MAX), 0, &mut buf),
        Error::BadHandle(_)
    );
    assert_eq!(file(s, "/f"), b"abc");
    finish(store);
}

/// A transaction that has not committed is gone after a crash; committed ones stay.
pub fn tx_uncommitted_lost_on_crash(h: &dyn Harness) {
    if !h.supports_crash_guarantees() {
        return skip(
            "tx_uncommitted_lost_on_crash",
            "engine makes no crash guarantees",
        );
    }
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", &pattern(1, 9000));
    ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir");
    let before = tree(s);
    let fa = open_rw(s, "/a");
    let committed = ok(s.tx_begin(&[fa]), "tx_begin");
    put(s, fa, 0, b"committed");
    ok(s.tx_commit(committed), "commit");
    let mut want = before;
    if let Some(crate::Node::File(a)) = want.get_mut(b"a".as_slice()) {
        a[..9].copy_from_slice(b"committed");
    }
    let open = ok(s.tx_begin(&[fa]), "tx_begin");
    put(s, fa, 5000, &pattern(7, 9000));
    ok(s.set_len(fa, 3), "truncate");
    let fb = open_in(s, "/d/b", open);
    put(s, fb, 0, b"never committed");
    ok(
        s.rename(ROOT_INO, b"d", ROOT_INO, b"e", Some(open)),
        "rename",
    );
    let store = h.reopen_unclean(store);
    assert_tree(
        &want,
        &tree(store.as_ref()),
        "after a crash with a transaction open",
    );
    finish(store);
}

/// Namespace changes of a committed transaction survive a crash together.
pub fn tx_namespace_commit_survives_crash(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/old", b"old");
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let d = ok(s.mkdir(ROOT_INO, b"dir", 0o755, Some(tx)), "mkdir").ino;
    let f = open_in(s, "/dir/file", tx);
    put(s, f, 0, b"inside");
    ok(s.rename(ROOT_INO, b"old", d, b"moved", Some(tx)), "rename");
    ok(s.tx_commit(tx), "commit");
    ok(s.release(f), "release");
    let want = tree(s);
    let store = crash_or_reopen(h, store);
    assert_tree(&want, &tree(store.as_ref()), "after commit and crash");
    assert_eq!(file(store.as_ref(), "/dir/moved"), b"old");
    finish(store);
}

/// O_ATOMIC writes are visible to their reader at once, but durable only at fsync.
pub fn atomic_invisible_until_fsync(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/f", &pattern(1, 10_000));
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .atomic(true)
            .open(s, "/f", None),
        "open atomic",
    );
    put(s, fh, 100, b"first");
    assert_eq!(&contents(s, fh)[100..105], b"first", "read-your-writes");
    ok(s.fsync(fh, false), "fsync");
    put(s, fh, 200, b"second");
    ok(s.set_len(fh, 5000), "set_len");
    let mut want = pattern(1, 10_000);
    want[100..105].copy_from_slice(b"first");
    if !h.supports_crash_guarantees() {
        ok(s.abortv(&[fh]), "abortv");
        ok(s.release(fh), "release");
        return finish(store);
    }
    let store = h.reopen_unclean(store);
    assert_eq!(
        file(store.as_ref(), "/f"),
        want,
        "only fsynced O_ATOMIC writes survive a crash"
    );
    // set_atomic switches a handle in; switching out commits
    let s = store.as_ref();
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(s, "/f", None),
        "open",
    );
    ok(s.set_atomic(fh, true), "set_atomic on");
    put(s, fh, 0, b"ZZ");
    ok(s.set_atomic(fh, false), "set_atomic off");
    ok(s.release(fh), "release");
    want[..2].copy_from_slice(b"ZZ");
    let store = h.reopen_unclean(store);
    assert_eq!(
        file(store.as_ref(), "/f"),
        want,
        "set_atomic(false) commits pending writes"
    );
    finish(store);
}

/// syncv commits the pending writes of several O_ATOMIC files together.
pub fn atomic_syncv(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", b"aaaa");
    write_path(s, "/b", b"bbbb");
    let open = |p| {
        ok(
            OpenOptions::new()
                .read(true)
                .write(true)
                .atomic(true)
                .open(s, p, None),
            p,
        )
    };
    let (fa, fb) = (open("/a"), open("/b"));
    put(s, fa, 0, b"AA");
    put(s, fb, 2, b"BBBB");
    ok(s.syncv(&[fa, fb]), "syncv");
    put(s, fa, 0, b"lost");
    let store = crash_or_reopen(h, store);
    // unsynced O_ATOMIC writes are dropped by a crash and by an unmount alike
    assert_eq!(file(store.as_ref(), "/a"), b"AAaa");
    assert_eq!(file(store.as_ref(), "/b"), b"bbBBBB");
    finish(store);
}

/// Two O_ATOMIC handles of one file (through two of its names) share its pending writes:
/// each reads the other's, and one syncv of both commits all of them.
pub fn atomic_two_handles_one_file(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let mut want = pattern(3, 8000);
    write_path(s, "/a", &want);
    let a = ok(resolve(s, "/a"), "resolve /a").ino;
    ok(s.link(a, ROOT_INO, b"b", None), "link");
    let open = |p| {
        ok(
            OpenOptions::new()
                .read(true)
                .write(true)
                .atomic(true)
                .open(s, p, None),
            p,
        )
    };
    let (fa, fb) = (open("/a"), open("/b"));
    put(s, fa, 7900, &[7; 300]);
    put(s, fb, 100, b"BB");
    want.resize(8200, 0);
    want[7900..8200].fill(7);
    want[100..102].copy_from_slice(b"BB");
    assert_eq!(
        contents(s, fa),
        want,
        "one handle reads the other's pending writes"
    );
    assert_eq!(
        contents(s, fb),
        want,
        "one handle reads the other's pending writes"
    );
    ok(s.syncv(&[fa, fb]), "syncv");
    let store = crash_or_reopen(h, store);
    assert_eq!(
        file(store.as_ref(), "/a"),
        want,
        "both handles' writes committed"
    );
    assert_eq!(
        file(store.as_ref(), "/b"),
        want,
        "both handles' writes committed"
    );
    finish(store);
}

/// abortv drops the pending writes of O_ATOMIC files at once; release drops them too.
pub fn atomic_abortv(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", &pattern(1, 6000));
    write_path(s, "/b", b"bbbb");
    let open = |p| {
        ok(
            OpenOptions::new()
                .read(true)
                .write(true)
                .atomic(true)
                .open(s, p, None),
            p,
        )
    };
    let (fa, fb) = (open("/a"), open("/b"));
    put(s, fa, 4090, b"dropped across a block edge");
    ok(s.set_len(fb, 1), "set_len");
    ok(s.abortv(&[fa, fb]), "abortv");
    assert_eq!(contents(s, fa), pattern(1, 6000));
    assert_eq!(contents(s, fb), b"bbbb");
    put(s, fb, 0, b"gone at release");
    ok(s.release(fb), "release");
    assert_eq!(
        file(s, "/b"),
        b"bbbb",
        "release drops pending O_ATOMIC writes"
    );
    ok(s.release(fa), "release");
    let store = crash_or_reopen(h, store);
    assert_eq!(file(store.as_ref(), "/a"), pattern(1, 6000));
    assert_eq!(file(store.as_ref(), "/b"), b"bbbb");
    finish(store);
}

/// A transaction that runs out of pool or log space fails with NoSpace/LogFull; after the
/// abort the store holds exactly what it held before, and keeps working.
pub fn no_space_in_transaction_rolls_back(h: &dyn Harness) {
    let Some(store) = h.fresh_small() else {
        return skip(
            "no_space_in_transaction_rolls_back",
            "harness has no small store",
        );
    };
    let s = store.as_ref();
    write_path(s, "/keep", &pattern(1, 20_000));
    let before = tree(s);
    let fk = open_rw(s, "/keep");
    let tx = ok(s.tx_begin(&[fk]), "tx_begin");
    let ff = open_in(s, "/filler", tx);
    put(s, fk, 0, &pattern(2, 20_000));
    let chunk = pattern(3, 64 << 10);
    let mut written: u64 = 0;
    let err = loop {
        match s.write(ff, written, &chunk) {
            Ok(_) => written += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(
            written < 4 << 30,
            "wrote 4 GiB into a small store without running out of space"
        );
    };
    assert!(
        is_space_error(&err),
        "running out of space gave {err:?}, not NoSpace/LogFull"
    );
    assert_eq!(err.errno(), 28, "ENOSPC");
    match s.tx_abort(tx) {
        Ok(()) | Err(Error::NoSuchTransaction(_)) => {}
        Err(e) => panic!("tx_abort after NoSpace: {e:?}"),
    }
    let _ = s.release(ff);
    assert_tree(
        &before,
        &tree(s),
        "after a transaction that ran out of space",
    );
    check_fsck(s, "the failed transaction");
    // still usable: a legacy write and a transaction
    put(s, fk, 0, b"usable");
    write_path(s, "/after", b"after");
    ok(s.release(fk), "release");
    let store = crash_or_reopen(h, store);
    assert_eq!(&file(store.as_ref(), "/keep")[..6], b"usable");
    assert_eq!(file(store.as_ref(), "/after"), b"after");
    assert_err!(resolve(store.as_ref(), "/filler"), Error::NotFound(_));
    finish(store);
}
