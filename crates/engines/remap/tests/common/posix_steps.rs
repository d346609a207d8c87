//! The steps of the POSIX crash tests (tests/posix_crash.rs on the host crash model,
//! tests/posix_kill.rs with SIGKILL on a real directory): each one atomic unit of the POSIX
//! calls beyond files and directories, over a small tree made by [`setup`].
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use remap::{HostRemapStore, RemapStore};
use store::{
    resolve, Fallocate, FileKind, Ino, OpenFlags, OpenOptions, RenameMode, Store, XattrSet,
    ROOT_INO,
};

/// A step: its name and what it does. A name containing "never committed" changes nothing
/// durable (its transaction stays open).
pub type Step = (&'static str, fn(&dyn Store));

pub fn ino(s: &dyn Store, path: &str) -> Ino {
    resolve(s, path).unwrap().ino
}

pub fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

pub fn put(s: &dyn Store, path: &str, data: &[u8]) {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, 0, data).unwrap();
    s.release(fh).unwrap();
}

pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

pub fn setup(s: &dyn Store) {
    s.mkdir(ROOT_INO, b"d", 0o755, None).unwrap();
    put(s, "/f", &pattern(1, 5 * 4096 + 300));
    put(s, "/g", &pattern(2, 9000));
}

pub fn fallocate(s: &dyn Store, path: &str, op: Fallocate, off: u64, len: u64) {
    let fh = s.open(ino(s, path), rw()).unwrap();
    s.fallocate(fh, op, off, len).unwrap();
    s.release(fh).unwrap();
}

pub const STEPS: &[Step] = &[
    ("symlink", |s| {
        s.symlink(ino(s, "/d"), b"l", b"../f", None).unwrap();
    }),
    ("mknod fifo", |s| {
        s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o640, 0, None)
            .unwrap();
    }),
    ("mknod block device", |s| {
        let dev = libc::makedev(7, 3);
        s.mknod(ROOT_INO, b"b", FileKind::BlockDevice, 0o600, dev, None)
            .unwrap();
    }),
    ("setxattr create", |s| {
        let v = pattern(3, 3000);
        s.setxattr(ino(s, "/f"), b"user.big", &v, XattrSet::Create, None)
            .unwrap();
    }),
    ("setxattr replace", |s| {
        s.setxattr(ino(s, "/f"), b"user.big", b"small", XattrSet::Replace, None)
            .unwrap();
    }),
    ("setxattr on a symlink", |s| {
        let l = ino(s, "/d/l");
        s.setxattr(l, b"trusted.t", b"on the link", XattrSet::Either, None)
            .unwrap();
    }),
    ("removexattr", |s| {
        s.removexattr(ino(s, "/f"), b"user.big", None).unwrap();
    }),
    ("punch", |s| {
        fallocate(s, "/f", Fallocate::PunchHole, 4096, 8192 + 100)
    }),
    ("zero range past the end", |s| {
        let op = Fallocate::ZeroRange { keep_size: false };
        fallocate(s, "/g", op, 5000, 10_000);
    }),
    ("allocate a punched range", |s| {
        let op = Fallocate::Allocate { keep_size: false };
        fallocate(s, "/f", op, 0, 8 * 4096);
    }),
    ("punch again", |s| {
        fallocate(s, "/f", Fallocate::PunchHole, 0, 3 * 4096)
    }),
    ("exchange a file and a symlink", |s| {
        let d = ino(s, "/d");
        s.rename_with(ROOT_INO, b"f", d, b"l", RenameMode::Exchange, None)
            .unwrap();
    }),
    ("exchange a directory and a file", |s| {
        s.rename_with(ROOT_INO, b"d", ROOT_INO, b"g", RenameMode::Exchange, None)
            .unwrap();
    }),
    ("rename noreplace", |s| {
        s.rename_with(ROOT_INO, b"p", ROOT_INO, b"p2", RenameMode::NoReplace, None)
            .unwrap();
    }),
    ("tmpfile, writes, link", |s| {
        let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
        s.write(fh, 0, &pattern(4, 10_000)).unwrap();
        s.write(fh, 20_000, b"tail").unwrap();
        s.link(m.ino, ROOT_INO, b"published", None).unwrap();
        s.release(fh).unwrap();
    }),
    ("one transaction of everything", |s| {
        let fh = s.open(ino(s, "/published"), rw()).unwrap();
        let tx = s.tx_begin(&[fh]).unwrap();
        s.fallocate(fh, Fallocate::PunchHole, 0, 4096).unwrap();
        s.write(fh, 5000, b"in the transaction").unwrap();
        let t = Some(tx);
        s.symlink(ROOT_INO, b"l2", b"published", t).unwrap();
        s.mknod(ROOT_INO, b"s", FileKind::Socket, 0o755, 0, t)
            .unwrap();
        let p = ino(s, "/published");
        s.setxattr(p, b"user.tx", b"1", XattrSet::Create, t)
            .unwrap();
        s.rename_with(ROOT_INO, b"p2", ROOT_INO, b"b", RenameMode::Exchange, t)
            .unwrap();
        let (m, tmp) = s.tmpfile(ROOT_INO, 0o644, rw(), t).unwrap();
        s.write(tmp, 0, b"unnamed until the commit").unwrap();
        s.link(m.ino, ROOT_INO, b"named-in-tx", t).unwrap();
        s.tx_commit(tx).unwrap();
        s.release(tmp).unwrap();
        s.release(fh).unwrap();
    }),
    ("checkpoint", |s| {
        let done = match s.as_any().downcast_ref::<RemapStore<SimHostFs>>() {
            Some(sim) => sim.checkpoint(),
            None => s
                .as_any()
                .downcast_ref::<HostRemapStore>()
                .unwrap()
                .checkpoint(),
        };
        assert!(done.unwrap());
    }),
    ("a transaction never committed", |s| {
        let fh = s.open(ino(s, "/published"), rw()).unwrap();
        let tx = s.tx_begin(&[fh]).unwrap();
        s.fallocate(fh, Fallocate::PunchHole, 0, 8192).unwrap();
        let t = Some(tx);
        s.setxattr(
            ino(s, "/published"),
            b"user.lost",
            b"x",
            XattrSet::Either,
            t,
        )
        .unwrap();
        s.symlink(ROOT_INO, b"lost", b"x", t).unwrap();
        // Left open: the crash takes it.
    }),
];
