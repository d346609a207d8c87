//! Run a (possibly corrupted) pool image through everything a user could do to it: open
//! (recovery), fsck, read every file, write, commit, unlink, unmount, reopen. Shared by the
//! corrupted-image corpus (tests/corrupt_corpus.rs) and the `pool_open` fuzz target, which
//! includes this file by path.
//!
//! Bad input must give a clean error or a clean recovery: any panic (including an
//! out-of-range region access, which `DramRegion` turns into a panic) is a failure, and so
//! is an image that fsck found clean but that stops being clean (or stops opening) after
//! ordinary operations and a clean unmount.
#![allow(dead_code, clippy::unwrap_used)]

use pmem::{DramRegion, Region};
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Error, FileKind, FsckReport, Ino, OpenFlags, Store, ROOT_INO};

/// What happened to an image.
#[derive(Debug)]
pub enum Outcome {
    /// `open` refused it with this error.
    Refused(Error),
    /// It opened; fsck's report on the first open.
    Opened(FsckReport),
}

/// Directory entries visited at most (a corrupt tree can be large or cyclic).
const VISITS_MAX: usize = 400;
/// Directory depth followed at most.
const DEPTH_MAX: usize = 12;

/// Read every reachable file (bounded), returning how many files were read.
pub fn read_everything(s: &dyn Store) -> usize {
    let mut stack: Vec<(Ino, usize)> = vec![(ROOT_INO, 0)];
    let (mut visits, mut files) = (0, 0);
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = s.read_dir(dir) else {
            continue;
        };
        for e in entries {
            visits += 1;
            if visits > VISITS_MAX {
                return files;
            }
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let _ = s.lookup(dir, &e.name);
            let _ = s.getattr(e.ino);
            for name in s.listxattr(e.ino).unwrap_or_default() {
                let _ = s.getxattr(e.ino, &name);
            }
            match e.kind {
                FileKind::Symlink => {
                    let _ = s.readlink(e.ino);
                }
                FileKind::Dir if depth < DEPTH_MAX => stack.push((e.ino, depth + 1)),
                FileKind::File => {
                    if let Ok(fh) = s.open(
                        e.ino,
                        OpenFlags {
                            read: true,
                            ..OpenFlags::default()
                        },
                    ) {
                        let mut buf = vec![0u8; 40_000];
                        let _ = s.read(fh, 0, &mut buf);
                        let _ = s.read(fh, 1 << 30, &mut buf[..100]);
                        let _ = s.release(fh);
                        files += 1;
                    }
                }
                _ => {}
            }
        }
    }
    files
}

/// A few mutating operations: a transaction over two files (commit), a new file, an
/// overwrite, a truncate, an unlink, a mkdir, an aborted transaction.
pub fn mutate_some(s: &dyn Store) {
    let rw = OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    };
    let names: Vec<_> = s
        .read_dir(ROOT_INO)
        .map(|v| v.into_iter().filter(|e| e.kind == FileKind::File).collect())
        .unwrap_or_default();
    let mut fhs = Vec::new();
    for e in names.iter().take(2) {
        if let Ok(fh) = s.open(e.ino, rw) {
            fhs.push(fh);
        }
    }
    if let Ok(tx) = s.tx_begin(&fhs) {
        for (i, &fh) in fhs.iter().enumerate() {
            let _ = s.write(fh, 50 + i as u64 * 4000, &[0xAB; 5000]);
        }
        let _ = s.create(ROOT_INO, b"fuzz-new-in-tx", 0o644, Some(tx));
        let _ = s.tx_commit(tx);
    }
    for &fh in &fhs {
        let _ = s.set_len(fh, 3000);
        let _ = s.write(fh, 9000, b"tail");
        let _ = s.fsync(fh, false);
    }
    if let Ok(m) = s.create(ROOT_INO, b"fuzz-new", 0o644, None) {
        if let Ok(fh) = s.open(m.ino, rw) {
            let _ = s.write(fh, 0, &[7; 6000]);
            let _ = s.release(fh);
        }
    }
    let _ = s.mkdir(ROOT_INO, b"fuzz-dir", 0o755, None);
    mutate_posix(s, &fhs);
    if let Some(e) = names.get(2) {
        let _ = s.unlink(ROOT_INO, &e.name, None);
    }
    if let Some(&fh) = fhs.first() {
        if let Ok(tx) = s.tx_begin(&[fh]) {
            let _ = s.write(fh, 0, &[1; 100]);
            let _ = s.unlink(ROOT_INO, b"fuzz-new", Some(tx));
            let _ = s.tx_abort(tx);
        }
    }
    for fh in fhs {
        let _ = s.release(fh);
    }
}

/// The calls of the rest of the POSIX file API: attributes set and removed, links, a
/// special file, an exchange, a punched hole, an unnamed file.
fn mutate_posix(s: &dyn Store, fhs: &[store::Fh]) {
    use store::{Fallocate, RenameMode, XattrSet};
    let _ = s.setxattr(ROOT_INO, b"user.fuzz", &[3; 5000], XattrSet::Either, None);
    let _ = s.removexattr(ROOT_INO, b"user.fuzz", None);
    let _ = s.symlink(ROOT_INO, b"fuzz-link", &[b'l'; 100], None);
    let _ = s.mknod(ROOT_INO, b"fuzz-fifo", FileKind::Fifo, 0o600, 0, None);
    let _ = s.rename_with(
        ROOT_INO,
        b"fuzz-link",
        ROOT_INO,
        b"fuzz-fifo",
        RenameMode::Exchange,
        None,
    );
    if let Some(&fh) = fhs.first() {
        let _ = s.fallocate(fh, Fallocate::PunchHole, 100, 9000);
        let _ = s.fallocate(fh, Fallocate::Allocate { keep_size: false }, 0, 12_000);
    }
    let rw = OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    };
    if let Ok((m, fh)) = s.tmpfile(ROOT_INO, 0o600, rw, None) {
        let _ = s.write(fh, 0, &[5; 3000]);
        let _ = s.link(m.ino, ROOT_INO, b"fuzz-tmp", None);
        let _ = s.release(fh);
    }
}

fn region_bytes(region: &DramRegion) -> Vec<u8> {
    let mut bytes = vec![0u8; region.len() as usize];
    region.read(0, &mut bytes);
    bytes
}

/// Open `image`, and if it opens, fsck it, read it, change it, unmount, reopen, fsck again.
/// Panics (with a message naming the step) when the engine breaks the rules above.
pub fn exercise(image: &[u8], cfg: &PoolConfig) -> Outcome {
    let s = match PoolStore::open(Arc::new(DramRegion::from_bytes(image)), cfg) {
        Ok(s) => s,
        Err(e) => return Outcome::Refused(e),
    };
    let before = region_bytes(s.region());
    let first = s.fsck().expect("fsck returns a report, not an error");
    assert!(
        region_bytes(s.region()) == before,
        "fsck modified the region"
    );
    read_everything(&s);
    mutate_some(&s);
    let _ = s.checkpoint_all();
    let after = s.fsck().expect("fsck returns a report");
    if first.is_clean() {
        assert!(
            after.is_clean(),
            "a clean image became unclean after ordinary operations: {:?}",
            after.problems
        );
    }
    let unmounted = s.unmount();
    let bytes = region_bytes(s.region());
    drop(s);
    match PoolStore::open(Arc::new(DramRegion::from_bytes(&bytes)), cfg) {
        Ok(again) => {
            read_everything(&again);
            let report = again.fsck().expect("fsck returns a report");
            if first.is_clean() && unmounted.is_ok() {
                assert!(
                    report.is_clean(),
                    "a clean image is unclean after unmount and reopen: {:?}",
                    report.problems
                );
            }
        }
        Err(e) => assert!(
            !first.is_clean(),
            "a clean image does not reopen after unmount: {e}"
        ),
    }
    Outcome::Opened(first)
}
