//! The POSIX calls beyond files and directories at every crash point of the host crash
//! model: symlink, mknod (FIFO, device), setxattr (create, replace), removexattr, fallocate
//! (punch, zero range, allocate), rename NOREPLACE and EXCHANGE, O_TMPFILE + link, all of
//! them together in one transaction, a checkpoint that writes their records into the
//! snapshot and punches holes home, and a transaction never committed.
//!
//! Each step is one atomic unit. A crash image taken at any host sync during the step (the
//! sync hook records the crash point as the sync begins: every unsynced write may be lost
//! or torn) must recover to the tree before the step or the tree after it, fsck clean; the
//! durable image once the step returned must recover to the tree after it; the first image
//! of every crash point is recovered a second time (recovery is idempotent). Both checkpoint
//! modes; a small journal so that checkpoints run inside the steps.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use conformance::tree::{diff, snapshot, Tree};
use hostfs::{HostCrashPoint, SimConfig, SimHostFs};
use remap::{RemapConfig, RemapStore};
use std::sync::{Arc, Mutex};
use store::{
    resolve, Fallocate, FileKind, Ino, OpenFlags, OpenOptions, RenameMode, Store, XattrSet,
    ROOT_INO,
};

type S = RemapStore<SimHostFs>;
type Step = (&'static str, fn(&S));

const ID: u64 = 0x5eed;

fn host() -> SimConfig {
    let mut c = remap::crash_target::host_config();
    c.crash.exhaustive_limit = 12;
    c.crash.sample_count = 12;
    c
}

fn config(copy_checkpoint: bool) -> RemapConfig {
    RemapConfig {
        copy_checkpoint,
        checkpoint_journal_len: 24 << 10,
        ..RemapConfig::test_min()
    }
}

fn ino(s: &S, path: &str) -> Ino {
    resolve(s, path).unwrap().ino
}

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

fn put(s: &S, path: &str, data: &[u8]) {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, 0, data).unwrap();
    s.release(fh).unwrap();
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

fn setup(s: &S) {
    s.mkdir(ROOT_INO, b"d", 0o755, None).unwrap();
    put(s, "/f", &pattern(1, 5 * 4096 + 300));
    put(s, "/g", &pattern(2, 9000));
}

fn fallocate(s: &S, path: &str, op: Fallocate, off: u64, len: u64) {
    let fh = s.open(ino(s, path), rw()).unwrap();
    s.fallocate(fh, op, off, len).unwrap();
    s.release(fh).unwrap();
}

const STEPS: &[Step] = &[
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
        assert!(s.checkpoint().unwrap());
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

fn tree(s: &dyn Store) -> Tree {
    snapshot(s).unwrap()
}

fn recover(image: &hostfs::HostImage, cfg: &RemapConfig) -> (SimHostFs, S) {
    let fs = SimHostFs::from_image(image, host());
    let s = RemapStore::open_on(fs.clone(), Some(ID), cfg).unwrap();
    (fs, s)
}

/// Recover every image of `point`; each must be `before` or `after`. Returns the count.
fn check_point(
    point: &HostCrashPoint,
    cfg: &RemapConfig,
    (before, after): (&Tree, &Tree),
    what: &str,
) -> u64 {
    let mut n = 0;
    for (index, image) in point.images().enumerate() {
        let (fs, s) = recover(&image, cfg);
        let got = tree(&s);
        assert!(
            got == *before || got == *after,
            "{what}, {}: neither before nor after:\n before: {:?}\n after: {:?}",
            point.describe(index as u64),
            diff(before, &got, 6),
            diff(after, &got, 6)
        );
        let report = s.fsck().unwrap();
        assert!(report.is_clean(), "{what}: {:?}", report.problems);
        if index == 0 {
            drop(s);
            let (_, again) = recover(&fs.durable_image(), cfg);
            assert_eq!(tree(&again), got, "{what}: a second recovery");
        }
        n += 1;
    }
    n
}

fn run(copy_checkpoint: bool) {
    let cfg = config(copy_checkpoint);
    let sim = SimHostFs::new(host());
    let s = RemapStore::create_on(sim.clone(), ID, &cfg).unwrap();
    setup(&s);
    let mut before = tree(&s);
    let points: Arc<Mutex<Vec<HostCrashPoint>>> = Arc::default();
    let mut images = 0;
    for &(name, step) in STEPS {
        let sink = points.clone();
        sim.set_sync_hook(Box::new(move |p: &HostCrashPoint| {
            sink.lock().unwrap().push(p.clone());
        }));
        step(&s);
        sim.take_sync_hook();
        let uncommitted = name.contains("never committed");
        let after = if uncommitted {
            before.clone()
        } else {
            tree(&s)
        };
        let what = format!("copy_checkpoint {copy_checkpoint}, step {name:?}");
        let taken: Vec<HostCrashPoint> = std::mem::take(&mut *points.lock().unwrap());
        for point in taken.iter().chain([&sim.crash_point()]) {
            images += check_point(point, &cfg, (&before, &after), &what);
        }
        let (_, durable) = recover(&sim.durable_image(), &cfg);
        assert_eq!(tree(&durable), after, "{what}: the durable image");
        before = after;
    }
    eprintln!(
        "posix_crash (copy_checkpoint {copy_checkpoint}): {} steps, {images} crash images \
         recovered",
        STEPS.len()
    );
}

#[test]
fn every_posix_call_is_atomic_at_every_crash_point_remapping() {
    run(false);
}

#[test]
fn every_posix_call_is_atomic_at_every_crash_point_copying() {
    run(true);
}
