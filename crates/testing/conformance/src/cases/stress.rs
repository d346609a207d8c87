//! Concurrency and reopening.

use super::*;
use crate::Rng;
use store::ROOT_INO;

/// Several threads, each running many transactions (some aborted) over its own two files;
/// afterwards every file holds exactly what its thread committed, also after a reopen.
pub fn concurrent_transactions(h: &dyn Harness) {
    const THREADS: usize = 4;
    const TXS: usize = 60;
    let store = h.fresh();
    let s = store.as_ref();
    let wants: Vec<[Vec<u8>; 2]> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || {
                    let mut rng = Rng::new(0xC0FFEE + t as u64);
                    let paths = [format!("/t{t}-a"), format!("/t{t}-b")];
                    let fhs = [open_rw(s, &paths[0]), open_rw(s, &paths[1])];
                    let mut want = [Vec::new(), Vec::new()];
                    for i in 0..TXS {
                        let tx = ok(s.tx_begin(&fhs), "tx_begin");
                        let mut next = want.clone();
                        for (f, fh) in fhs.iter().enumerate() {
                            let off = rng.below(20_000) as usize;
                            let len = 1 + rng.below(3000) as usize;
                            let data = rng.bytes(len);
                            put(s, *fh, off as u64, &data);
                            if next[f].len() < off + data.len() {
                                next[f].resize(off + data.len(), 0);
                            }
                            next[f][off..off + data.len()].copy_from_slice(&data);
                        }
                        if i % 5 == 4 {
                            ok(s.tx_abort(tx), "tx_abort");
                        } else {
                            ok(s.tx_commit(tx), "tx_commit");
                            want = next;
                        }
                        for (f, fh) in fhs.iter().enumerate() {
                            assert_eq!(
                                contents(s, *fh),
                                want[f],
                                "thread {t} file {f} after tx {i}"
                            );
                        }
                    }
                    for fh in fhs {
                        ok(s.release(fh), "release");
                    }
                    want
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    check_fsck(s, "concurrent transactions");
    let store = crash_or_reopen(h, store);
    for (t, want) in wants.iter().enumerate() {
        assert_eq!(
            file(store.as_ref(), &format!("/t{t}-a")),
            want[0],
            "thread {t} file a"
        );
        assert_eq!(
            file(store.as_ref(), &format!("/t{t}-b")),
            want[1],
            "thread {t} file b"
        );
    }
    finish(store);
}

fn build_mixed(s: &dyn Store) {
    ok(store::path::mkdir_all(s, "/x/y/z", 0o755), "mkdir_all");
    write_path(s, "/x/one", &pattern(1, 100));
    write_path(s, "/x/y/two", &pattern(2, 70_000));
    write_path(s, "/x/y/z/three", b"");
    let fh = open_rw(s, "/holes");
    put(s, fh, 300_000, b"end");
    ok(s.release(fh), "release");
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let fh = open_in(s, "/x/tx", tx);
    put(s, fh, 0, &pattern(3, 9000));
    ok(
        s.rename(ROOT_INO, b"holes", ROOT_INO, b"holes2", Some(tx)),
        "rename",
    );
    ok(s.tx_commit(tx), "commit");
    ok(s.release(fh), "release");
}

/// Everything committed survives a clean unmount, then a crash, then both again.
pub fn reopen_preserves_committed(h: &dyn Harness) {
    let store = h.fresh();
    build_mixed(store.as_ref());
    let want = tree(store.as_ref());
    let store = h.reopen_clean(store);
    assert_tree(&want, &tree(store.as_ref()), "after a clean reopen");
    let store = crash_or_reopen(h, store);
    assert_tree(&want, &tree(store.as_ref()), "after an unclean reopen");
    write_path(store.as_ref(), "/x/one", b"changed");
    let store = crash_or_reopen(h, store);
    let store = h.reopen_clean(store);
    let t = tree(store.as_ref());
    assert_eq!(
        t.get(b"x/one".as_slice()),
        Some(&crate::Node::File(b"changed".to_vec()))
    );
    assert_eq!(t.len(), want.len());
    finish(store);
}

/// Calls outside a transaction are each durable when they return (no fsync needed).
pub fn legacy_calls_durable(h: &dyn Harness) {
    if !h.supports_crash_guarantees() {
        return skip("legacy_calls_durable", "engine makes no crash guarantees");
    }
    let store = h.fresh();
    let s = store.as_ref();
    let d = ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir").ino;
    let f = ok(s.create(d, b"f", 0o644, None), "create");
    let fh = ok(
        s.open(
            f.ino,
            store::OpenFlags {
                read: true,
                write: true,
                ..Default::default()
            },
        ),
        "open",
    );
    put(s, fh, 0, &pattern(4, 12_345));
    put(s, fh, 5, b"over");
    ok(s.set_len(fh, 10_000), "set_len");
    ok(s.create(ROOT_INO, b"gone", 0o644, None), "create");
    ok(s.unlink(ROOT_INO, b"gone", None), "unlink");
    ok(s.rename(d, b"f", ROOT_INO, b"f", None), "rename");
    let want = tree(s);
    let store = h.reopen_unclean(store);
    assert_tree(
        &want,
        &tree(store.as_ref()),
        "after a crash following legacy calls",
    );
    finish(store);
}

/// statfs is sane and counts written data; fsync of a plain file succeeds and changes nothing.
pub fn statfs_and_fsync(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let before = ok(s.statfs(), "statfs");
    assert_eq!(before.name_max, store::NAME_MAX as u64);
    assert!(
        before.block_size > 0 && before.blocks_free <= before.blocks_total,
        "{before:?}"
    );
    let fh = open_rw(s, "/f");
    put(s, fh, 0, &pattern(1, 1 << 20));
    ok(s.fsync(fh, false), "fsync");
    ok(s.fsync(fh, true), "fdatasync");
    assert_eq!(contents(s, fh), pattern(1, 1 << 20));
    ok(s.release(fh), "release");
    let after = ok(s.statfs(), "statfs");
    assert!(
        after.blocks_free < before.blocks_free,
        "writing 1 MiB did not lower blocks_free ({} → {})",
        before.blocks_free,
        after.blocks_free
    );
    finish(store);
}

/// After unmount every call fails with Closed; the data is all there on the next open.
pub fn unmount_closes(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/f", b"kept");
    let fh = open_rw(s, "/f");
    check_fsck(s, "before unmount");
    ok(s.unmount(), "unmount");
    crate::assert_err!(s.getattr(ROOT_INO), store::Error::Closed);
    crate::assert_err!(s.lookup(ROOT_INO, b"f"), store::Error::Closed);
    crate::assert_err!(
        s.write(fh, 0, b"x"),
        store::Error::Closed | store::Error::BadHandle(_)
    );
    crate::assert_err!(s.tx_begin(&[]), store::Error::Closed);
    crate::assert_err!(
        s.release(fh),
        store::Error::Closed | store::Error::BadHandle(_)
    );
    let store = h.reopen_unclean(store);
    assert_eq!(file(store.as_ref(), "/f"), b"kept");
    finish(store);
}
