//! Hostile journals and snapshots through open (recovery), fsck, reads, a write, a commit and
//! a reopen: never a panic. Shared by tests/hostile.rs and the fuzz target `remap_open`.
//!
//! Input: byte 0 picks the file (bit 0: journal, else snapshot) and the base image (bit 1:
//! with an open-at-crash O_ATOMIC file and a checkpoint behind the records; both hold a
//! symlink, a FIFO, a device node, extended attributes and a punched hole, in records and,
//! for the second, in the snapshot too); the rest is a
//! list of 5-byte mutations: offset u32 (modulo the file's length + 8), then a byte that is
//! xored in — or, when the offset's top bit is set, the file is truncated there.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)] // a panic is the finding

use hostfs::{HostFs, HostImage, OpenOptions as HostOpen, SimHostFs};
use remap::{RemapConfig, RemapStore};
use std::path::Path;
use store::{OpenOptions, Store};

fn config() -> RemapConfig {
    RemapConfig {
        copy_checkpoint: false,
        checkpoint_journal_len: 1 << 30,
        ..RemapConfig::default()
    }
}

fn put(s: &dyn Store, path: &str, off: u64, data: &[u8]) {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, off, data).unwrap();
    s.release(fh).unwrap();
}

/// A store with committed, not checkpointed records (and, for `variant`, a checkpoint and
/// an uncommitted O_ATOMIC write behind them), as its durable image.
pub fn base_image(variant: bool) -> HostImage {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), 3, &config()).unwrap();
    s.mkdir(store::ROOT_INO, b"d", 0o755, None).unwrap();
    put(&s, "/d/a", 0, &[1; 9000]);
    put(&s, "/b", 4096, &[2; 4096]);
    posix_records(&s);
    if variant {
        assert!(s.checkpoint().unwrap());
        let fh = OpenOptions::new()
            .write(true)
            .atomic(true)
            .open(&s, "/b", None)
            .unwrap();
        s.write(fh, 0, &[9; 100]).unwrap();
        put(&s, "/d/a", 100, &[3; 5000]);
        s.rename(store::ROOT_INO, b"b", store::ROOT_INO, b"c", None)
            .unwrap();
        s.set_len(fh, 7000).unwrap();
        s.symlink(store::ROOT_INO, b"l2", b"/d/a", None).unwrap();
    }
    sim.durable_image()
}

/// Every format 2 record: a node (symlink target, device number), attributes, a hole pair.
fn posix_records(s: &dyn Store) {
    let d = store::resolve(s, "/d").unwrap().ino;
    s.symlink(d, b"l", b"a", None).unwrap();
    s.mknod(d, b"p", store::FileKind::Fifo, 0o644, 0, None)
        .unwrap();
    s.mknod(d, b"c", store::FileKind::CharDevice, 0o600, 0x0103, None)
        .unwrap();
    let a = store::resolve(s, "/d/a").unwrap().ino;
    s.setxattr(a, b"user.k", b"value", store::XattrSet::Either, None)
        .unwrap();
    s.setxattr(d, b"trusted.t", &[7; 300], store::XattrSet::Either, None)
        .unwrap();
    let fh = OpenOptions::new()
        .write(true)
        .open(s, "/d/a", None)
        .unwrap();
    s.fallocate(fh, store::Fallocate::PunchHole, 4096, 4096)
        .unwrap();
    s.release(fh).unwrap();
}

fn mutate(fs: &SimHostFs, path: &Path, muts: &[u8]) {
    let f = fs.open(path, &HostOpen::read_write()).unwrap();
    for m in muts.chunks_exact(5) {
        let len = fs.file_stat(&f).unwrap().len;
        let raw = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
        let off = u64::from(raw & 0x7fff_ffff) % (len + 8);
        if raw & 0x8000_0000 != 0 {
            fs.set_len(&f, off.min(len)).unwrap();
            continue;
        }
        let mut b = [0u8];
        fs.read_at(&f, off, &mut b).unwrap();
        fs.write_at(&f, off, &[b[0] ^ m[4]]).unwrap();
    }
    fs.sync_data(&f).unwrap();
}

fn read_all(s: &dyn Store, dir: store::Ino, depth: u32) {
    let Ok(entries) = s.read_dir(dir) else { return };
    for e in entries {
        if let Ok(names) = s.listxattr(e.ino) {
            for n in names {
                let _ = s.getxattr(e.ino, &n);
            }
        }
        match e.kind {
            store::FileKind::Symlink => {
                let _ = s.readlink(e.ino);
            }
            store::FileKind::Dir if depth < 8 => read_all(s, e.ino, depth + 1),
            store::FileKind::File => {
                if let Ok(fh) = s.open(
                    e.ino,
                    store::OpenFlags {
                        read: true,
                        write: true,
                        ..Default::default()
                    },
                ) {
                    let mut buf = vec![0u8; 64 << 10];
                    let _ = s.read(fh, 0, &mut buf);
                    let _ = s.write(fh, 10, b"after");
                    let _ = s.fallocate(fh, store::Fallocate::PunchHole, 0, 8192);
                    let _ = s.set_len(fh, 3);
                    let _ = s.release(fh);
                }
            }
            _ => {}
        }
    }
}

/// Run one input (see the module documentation).
pub fn run(base: &[HostImage; 2], input: &[u8]) {
    let Some((&mode, muts)) = input.split_first() else {
        return;
    };
    let fs = SimHostFs::from_image(&base[usize::from(mode & 2 != 0)], Default::default());
    let target = if mode & 1 != 0 {
        "remap.journal"
    } else {
        "remap.meta"
    };
    mutate(&fs, Path::new(target), muts);
    let Ok(s) = RemapStore::open_on(fs.clone(), Some(3), &config()) else {
        return;
    };
    let clean = s.fsck().map(|r| r.problems.is_empty()).unwrap_or(false);
    read_all(&s, store::ROOT_INO, 0);
    let _ = s.mkdir(store::ROOT_INO, b"new", 0o700, None);
    let _ = s.unmount();
    drop(s);
    let again = RemapStore::open_on(fs, Some(3), &config()).unwrap();
    if clean {
        assert!(
            again.fsck().unwrap().problems.is_empty(),
            "a clean store stays clean"
        );
    }
}
