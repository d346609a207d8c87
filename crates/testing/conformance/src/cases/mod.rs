//! The conformance cases. Each takes a [`Harness`], builds its own store, checks one area of
//! behaviour, and ends with [`finish`] (fsck clean, unmount). Panics name what went wrong.

mod files;
mod namespace;
mod posix;
mod stress;
mod tx;

pub use files::*;
pub use namespace::*;
pub use posix::*;
pub use stress::*;
pub use tx::*;

use crate::tree::{diff, snapshot, Tree};
use crate::Harness;
use store::path::read_all;
use store::{Error, Fh, OpenOptions, Result, Store, TxId};

/// Assert that `$e` fails with an error matching `$pat`.
#[macro_export]
macro_rules! assert_err {
    ($e:expr, $pat:pat) => {
        match $e {
            Err($pat) => {}
            Err(other) => panic!(
                "{}: expected {}, got error {other:?}",
                stringify!($e),
                stringify!($pat)
            ),
            Ok(v) => panic!(
                "{}: expected {}, got Ok({v:?})",
                stringify!($e),
                stringify!($pat)
            ),
        }
    };
}

/// Unwrap a Store result, naming the call on failure.
pub fn ok<T>(r: Result<T>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e} ({e:?})"),
    }
}

/// fsck must be clean.
pub fn check_fsck(store: &dyn Store, when: &str) {
    let report = ok(store.fsck(), "fsck");
    assert!(
        report.is_clean(),
        "fsck after {when}: {:?}",
        report.problems
    );
}

/// End of every case: fsck clean, then a clean unmount.
pub fn finish(store: Box<dyn Store>) {
    check_fsck(store.as_ref(), "the case");
    ok(store.unmount(), "unmount");
}

/// Open (read + write, create) a file by path, outside any transaction.
pub fn open_rw(store: &dyn Store, path: &str) -> Fh {
    test_support::create_rw(store, path, false)
}

/// Open (read + write, create) a file by path, bound to `tx`.
pub fn open_in(store: &dyn Store, path: &str, tx: TxId) -> Fh {
    ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(store, path, Some(tx)),
        path,
    )
}

/// Write all of `data` at `off`.
pub fn put(store: &dyn Store, fh: Fh, off: u64, data: &[u8]) {
    let n = ok(store.write(fh, off, data), "write");
    assert_eq!(n, data.len(), "short write");
}

/// Whole contents of an open file.
pub fn contents(store: &dyn Store, fh: Fh) -> Vec<u8> {
    ok(read_all(store, fh), "read_all")
}

/// Whole contents of a file by path.
pub fn file(store: &dyn Store, path: &str) -> Vec<u8> {
    ok(store::path::read_file(store, path), path)
}

/// Replace a file by path in one transaction (create/truncate + write).
pub fn write_path(store: &dyn Store, path: &str, data: &[u8]) {
    let tx = ok(store.tx_begin(&[]), "tx_begin");
    ok(store::path::write_file(store, path, data, Some(tx)), path);
    ok(store.tx_commit(tx), "tx_commit");
}

/// The tree of a store.
pub fn tree(store: &dyn Store) -> Tree {
    ok(snapshot(store), "snapshot")
}

/// Assert two trees are equal, listing the first differences.
pub fn assert_tree(expected: &Tree, actual: &Tree, when: &str) {
    let d = diff(expected, actual, 20);
    assert!(d.is_empty(), "tree differs {when}:\n  {}", d.join("\n  "));
}

/// A deterministic pattern: byte `i` of stream `tag`.
pub fn pattern(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(tag)
                .wrapping_add((i >> 8) as u8)
        })
        .collect()
}

/// Whether `e` is one of the errors a store reports when it runs out of room.
pub fn is_space_error(e: &Error) -> bool {
    matches!(
        e,
        Error::NoSpace(_) | Error::LogFull(_) | Error::TooMany { .. }
    )
}

/// Reopen uncleanly when the engine promises crash guarantees, else cleanly.
pub fn crash_or_reopen(h: &dyn Harness, store: Box<dyn Store>) -> Box<dyn Store> {
    if h.supports_crash_guarantees() {
        h.reopen_unclean(store)
    } else {
        h.reopen_clean(store)
    }
}

/// Print a skip note (visible with --nocapture) for a check the engine does not support.
pub fn skip(case: &str, why: &str) {
    eprintln!("conformance {case}: skipped part: {why}");
}
