//! The step sequence of the POSIX crash and kill tests (tests/crash_posix.rs,
//! tests/kill_posix.rs): symlinks, special files, rename modes, extended attributes,
//! fallocate and O_TMPFILE, each step one call or one transaction, on any store.

#![allow(dead_code)]

use store::{resolve, Fallocate, FileKind, OpenFlags, RenameMode, Store, XattrSet, ROOT_INO};

pub fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

fn ino(s: &dyn Store, path: &str) -> u64 {
    resolve(s, path).unwrap().ino
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

/// Run `f` on a read-write handle of `path`.
fn with_file(s: &dyn Store, path: &str, f: impl FnOnce(store::Fh)) {
    let fh = s.open(ino(s, path), rw()).unwrap();
    f(fh);
    s.release(fh).unwrap();
}

/// Step `n` of the sequence; false past the last. Every step changes the tree with one
/// call or one transaction.
pub fn step(s: &dyn Store, n: usize) -> bool {
    let long = |c: u8| vec![c; 300];
    match n {
        0 => assert!(s.symlink(ROOT_INO, b"short", b"f", None).is_ok()),
        1 => assert!(s.symlink(ROOT_INO, b"long", &long(b'x'), None).is_ok()),
        2 => {
            let dev = FileKind::CharDevice;
            assert!(s.mknod(ROOT_INO, b"null", dev, 0o666, 0x103, None).is_ok())
        }
        3 => assert!(s.mkdir(ROOT_INO, b"d", 0o755, None).is_ok()),
        4 => {
            let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
            let fh = s.open(f.ino, rw()).unwrap();
            s.release(fh).unwrap();
        }
        5 => with_file(s, "f", |fh| {
            assert!(s.write(fh, 0, &bytes(1, 20_000)).is_ok())
        }),
        6 => {
            let f = ino(s, "f");
            s.setxattr(f, b"user.big", &bytes(2, 9000), XattrSet::Either, None)
                .unwrap()
        }
        7 => s
            .setxattr(ino(s, "f"), b"user.a", b"1", XattrSet::Create, None)
            .unwrap(),
        8 => s.removexattr(ino(s, "f"), b"user.big", None).unwrap(),
        9 => {
            // One transaction: a long link, a FIFO, an attribute, an exchange.
            let tx = s.tx_begin(&[]).unwrap();
            let d = ino(s, "d");
            s.symlink(d, b"in-tx", &long(b'y'), Some(tx)).unwrap();
            s.mknod(d, b"fifo", FileKind::Fifo, 0o600, 0, Some(tx))
                .unwrap();
            s.setxattr(d, b"trusted.t", &bytes(3, 100), XattrSet::Either, Some(tx))
                .unwrap();
            s.rename_with(
                ROOT_INO,
                b"short",
                ROOT_INO,
                b"long",
                RenameMode::Exchange,
                Some(tx),
            )
            .unwrap();
            s.tx_commit(tx).unwrap();
        }
        10 => s
            .rename_with(ROOT_INO, b"d", ROOT_INO, b"f", RenameMode::Exchange, None)
            .unwrap(),
        11 => s
            .rename_with(
                ROOT_INO,
                b"null",
                ROOT_INO,
                b"zero",
                RenameMode::NoReplace,
                None,
            )
            .unwrap(),
        12 => with_file(s, "d", |fh| {
            let op = Fallocate::Allocate { keep_size: false };
            s.fallocate(fh, op, 16_000, 20_000).unwrap()
        }),
        13 => with_file(s, "d", |fh| {
            s.fallocate(fh, Fallocate::PunchHole, 3000, 14_000).unwrap()
        }),
        14 => with_file(s, "d", |fh| {
            let op = Fallocate::ZeroRange { keep_size: true };
            s.fallocate(fh, op, 100, 9000).unwrap()
        }),
        15 => with_file(s, "d", |fh| {
            let tx = s.tx_begin(&[fh]).unwrap();
            s.write(fh, 30_000, &bytes(4, 5000)).unwrap();
            s.fallocate(fh, Fallocate::PunchHole, 0, 8192).unwrap();
            s.setxattr(ino(s, "d"), b"user.tx", b"v", XattrSet::Either, Some(tx))
                .unwrap();
            s.tx_commit(tx).unwrap();
        }),
        16 => {
            let tx = s.tx_begin(&[]).unwrap();
            let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), Some(tx)).unwrap();
            s.write(fh, 0, &bytes(5, 7000)).unwrap();
            s.link(m.ino, ROOT_INO, b"published", Some(tx)).unwrap();
            s.tx_commit(tx).unwrap();
            s.release(fh).unwrap();
        }
        17 => {
            let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
            s.write(fh, 0, &bytes(6, 5000)).unwrap();
            s.link(m.ino, ROOT_INO, b"second", None).unwrap();
            s.release(fh).unwrap();
        }
        18 => {
            // Left unnamed: released, gone.
            let (_, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
            s.write(fh, 0, &bytes(7, 9000)).unwrap();
            s.release(fh).unwrap();
        }
        19 => s.unlink(ROOT_INO, b"short", None).unwrap(),
        20 => s.unlink(ROOT_INO, b"published", None).unwrap(),
        21 => {
            let tx = s.tx_begin(&[]).unwrap();
            s.setxattr(
                ino(s, "second"),
                b"user.gone",
                b"g",
                XattrSet::Either,
                Some(tx),
            )
            .unwrap();
            s.symlink(ROOT_INO, b"aborted", &long(b'z'), Some(tx))
                .unwrap();
            s.tx_abort(tx).unwrap();
        }
        _ => return false,
    }
    true
}
