//! Small valid pool images in known states, shared by the corrupted-image corpus
//! (tests/corrupt_corpus.rs) and the fuzz targets (fuzz/fuzz_targets/pool_open.rs, which
//! includes this file by path). The contents are fixed, but not every byte: inodes hold
//! times, and which inode numbers and blocks the files get depends on the building thread's
//! free-list shard (alloc.rs), so tests find things by path, never by a fixed offset.
#![allow(dead_code, clippy::unwrap_used)]

use pmem::{DramRegion, Region, SimRegion};
use pool::{PoolConfig, PoolStore};
use std::sync::{Arc, Mutex};
use store::{OpenFlags, Store, ROOT_INO};

/// Bytes of every image: small so that fuzzing and the corpus stay fast.
pub const IMAGE_BYTES: u64 = 512 << 10;

/// The configuration every image is formatted and opened with.
pub fn image_config() -> PoolConfig {
    PoolConfig::test_min()
}

/// The states an image can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Freshly formatted: root directory only.
    Fresh,
    /// Files and directories, everything checkpointed.
    Files,
    /// Files plus committed transactions whose redo entries wait for a checkpoint.
    Committed,
    /// As Committed, plus an open (uncommitted) transaction with undo and pending data.
    Uncommitted,
    /// A crash in the middle of a checkpoint (durable image at one of its fences).
    MidCheckpoint,
    /// Files, then an open transaction of a pool running FG-WAL: line undo entries in the
    /// data log, their undo blocks, lines overwritten in place, metadata undo entries.
    /// Opened with `image_config()` (FCFS): recovery does not depend on the mode.
    FgWalUncommitted,
}

pub const IMAGE_KINDS: [ImageKind; 6] = [
    ImageKind::Fresh,
    ImageKind::Files,
    ImageKind::Committed,
    ImageKind::Uncommitted,
    ImageKind::MidCheckpoint,
    ImageKind::FgWalUncommitted,
];

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    }
}

/// Deterministic pseudo-random bytes.
pub fn bytes_of(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn populate(s: &dyn Store) {
    store::path::mkdir_all(s, "/d/e", 0o755).unwrap();
    for i in 0..4u64 {
        let data = bytes_of(i, 1000 + i as usize * 3000);
        store::path::write_file(s, format!("/f{i}"), &data, None).unwrap();
        store::path::write_file(s, format!("/d/g{i}"), &bytes_of(50 + i, 300), None).unwrap();
    }
    store::path::write_file(s, "/d/e/deep", b"deep file", None).unwrap();
    // The records of format versions 3 and 4: links (inline and in a block), special
    // files, attribute chains of one and of several blocks.
    s.symlink(ROOT_INO, b"link", b"f1", None).unwrap();
    s.symlink(ROOT_INO, b"long-link", &[b'p'; 200], None)
        .unwrap();
    s.mknod(ROOT_INO, b"fifo", store::FileKind::Fifo, 0o600, 0, None)
        .unwrap();
    s.mknod(
        ROOT_INO,
        b"tty",
        store::FileKind::CharDevice,
        0o620,
        0x401,
        None,
    )
    .unwrap();
    let f0 = store::resolve(s, "/f0").unwrap().ino;
    let how = store::XattrSet::Either;
    s.setxattr(f0, b"user.small", b"v", how, None).unwrap();
    let d = store::resolve(s, "/d").unwrap().ino;
    s.setxattr(d, b"trusted.big", &bytes_of(60, 6000), how, None)
        .unwrap();
}

/// Overwrite two files in one committed transaction (leaves redo entries, commit entry,
/// and pending blocks while no checkpoint runs).
fn commit_overwrites(s: &PoolStore<impl Region>) {
    let a = s.open(store::resolve(s, "/f1").unwrap().ino, rw()).unwrap();
    let b = s.open(store::resolve(s, "/f2").unwrap().ino, rw()).unwrap();
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 100, &bytes_of(7, 2000)).unwrap();
    s.write(b, 4000, &bytes_of(8, 600)).unwrap();
    s.create(ROOT_INO, b"in-tx", 0o644, Some(tx)).unwrap();
    s.tx_commit(tx).unwrap();
    s.release(a).unwrap();
    s.release(b).unwrap();
}

/// Start a transaction that is never committed: undo entries for a rename, an unlink and a
/// length change, pending data for an overwrite.
fn leave_open_tx(s: &PoolStore<impl Region>) {
    let f = s.open(store::resolve(s, "/f3").unwrap().ino, rw()).unwrap();
    let tx = s.tx_begin(&[f]).unwrap();
    s.write(f, 10, &bytes_of(9, 5000)).unwrap();
    s.set_len(f, 7000).unwrap();
    s.rename(ROOT_INO, b"f0", ROOT_INO, b"f0-renamed", Some(tx))
        .unwrap();
    let d = store::resolve(s, "/d").unwrap().ino;
    s.unlink(d, b"g1", Some(tx)).unwrap();
    let _still_open = tx;
}

/// Overwrites of two files (partial lines, across a block boundary, past the end) and a
/// length change in a transaction that is never committed (FG-WAL: line undo entries).
fn leave_open_overwrites(s: &PoolStore<impl Region>) {
    let a = s.open(store::resolve(s, "/f2").unwrap().ino, rw()).unwrap();
    let b = s.open(store::resolve(s, "/f3").unwrap().ino, rw()).unwrap();
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 70, &bytes_of(11, 900)).unwrap();
    s.write(b, 4000, &bytes_of(12, 3000)).unwrap();
    s.write(b, 9990, &bytes_of(13, 100)).unwrap();
    s.set_len(a, 6000).unwrap();
    let _still_open = tx;
}

/// The bytes of an image of `kind` (durable state: what a crash now would leave).
pub fn build_image(kind: ImageKind) -> Vec<u8> {
    let mut cfg = image_config();
    if kind == ImageKind::MidCheckpoint {
        return mid_checkpoint(&cfg);
    }
    if kind == ImageKind::FgWalUncommitted {
        cfg = cfg.with_mode(pool::Mode::FgWal);
    }
    let s = PoolStore::format(Arc::new(DramRegion::new(IMAGE_BYTES)), &cfg).unwrap();
    if kind != ImageKind::Fresh {
        populate(&s);
        s.checkpoint_all().unwrap();
    }
    if matches!(kind, ImageKind::Committed | ImageKind::Uncommitted) {
        commit_overwrites(&s);
    }
    if kind == ImageKind::Uncommitted {
        leave_open_tx(&s);
    }
    if kind == ImageKind::FgWalUncommitted {
        leave_open_overwrites(&s);
    }
    let mut bytes = vec![0u8; IMAGE_BYTES as usize];
    s.region().read(0, &mut bytes);
    bytes
}

/// The durable image at the second fence of a checkpoint of committed overwrites: some
/// blocks merged, entries still valid.
fn mid_checkpoint(cfg: &PoolConfig) -> Vec<u8> {
    let region = Arc::new(SimRegion::new(IMAGE_BYTES));
    let s = PoolStore::format(region.clone(), cfg).unwrap();
    populate(&s);
    s.checkpoint_all().unwrap();
    commit_overwrites(&s);
    let caught: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let sink = caught.clone();
    region.set_fence_hook(Box::new(move |point| {
        let mut images = sink.lock().unwrap();
        if images.len() < 3 {
            images.push(point.persistent_image().to_vec());
        }
    }));
    s.checkpoint_all().unwrap();
    drop(region.take_fence_hook());
    let mut images = caught.lock().unwrap();
    assert!(images.len() >= 2, "a checkpoint with work has fences");
    images.swap_remove(1)
}
