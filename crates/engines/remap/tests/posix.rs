//! The remap engine's own side of the POSIX calls: a store of the older on-media format
//! (made by an atomfs before symlinks, special files, attributes and holes) still opens,
//! works, stays in its format and refuses only what needs the newer records; a store of a
//! newer format than this build's is refused with a clear error; a punched hole frees
//! storage in the store's accounting and in the home file, across checkpoints and a reopen.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::posix_steps::put;
use hostfs::{HostFs, OpenOptions as HostOpen, SimHostFs};
use remap::format::{Format, BLOCK};
use remap::{RemapConfig, RemapStore};
use std::path::Path;
use store::{
    resolve, Error, Fallocate, FileKind, OpenFlags, OpenOptions, RenameMode, Store, XattrSet,
    ROOT_INO,
};

const ID: u64 = 0xf0f0;

fn config() -> RemapConfig {
    RemapConfig {
        checkpoint_journal_len: 1 << 30,
        ..RemapConfig::default()
    }
}

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

fn get(s: &dyn Store, path: &str) -> Vec<u8> {
    let fh = OpenOptions::new().read(true).open(s, path, None).unwrap();
    let mut buf = vec![0u8; s.fstat(fh).unwrap().size as usize];
    s.read(fh, 0, &mut buf).unwrap();
    s.release(fh).unwrap();
    buf
}

fn journal_format(fs: &SimHostFs) -> u32 {
    let f = fs
        .open(Path::new("remap.journal"), &HostOpen::read_only())
        .unwrap();
    let mut head = [0u8; 12];
    fs.read_full_at(&f, 0, &mut head).unwrap();
    u32::from_le_bytes([head[8], head[9], head[10], head[11]])
}

fn clean(s: &dyn Store) {
    let r = s.fsck().unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn a_format_1_store_opens_works_and_refuses_only_what_needs_format_2() {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on_format(sim.clone(), ID, &config(), Format::V1).unwrap();
    assert_eq!((s.format(), journal_format(&sim)), (Format::V1, 1));
    s.mkdir(ROOT_INO, b"d", 0o755, None).unwrap();
    put(&s, "/d/a", &[1; 3 * 4096]);
    put(&s, "/b", b"bee");
    let a = resolve(&s, "/d/a").unwrap().ino;
    // What needs a new record: refused, nothing changed.
    let refused = |r: Result<(), Error>, what: &str| match r {
        Err(Error::Unsupported(m)) => assert!(m.contains("format 1"), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    refused(s.symlink(ROOT_INO, b"l", b"b", None).map(drop), "symlink");
    refused(
        s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o644, 0, None)
            .map(drop),
        "mknod",
    );
    refused(
        s.setxattr(a, b"user.x", b"1", XattrSet::Either, None),
        "setxattr",
    );
    refused(s.removexattr(a, b"user.x", None), "removexattr");
    assert!(matches!(
        s.getxattr(a, b"user.x"),
        Err(Error::NoAttribute(_))
    ));
    assert!(s.listxattr(a).unwrap().is_empty());
    assert!(matches!(s.readlink(a), Err(Error::InvalidArgument(_))));
    // What the older records express: offered.
    let fh = s.open(a, rw()).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 4096, 4096).unwrap();
    s.fallocate(fh, Fallocate::ZeroRange { keep_size: false }, 3 * 4096, 100)
        .unwrap();
    s.release(fh).unwrap();
    let mut want = vec![1u8; 3 * 4096];
    want[4096..8192].fill(0);
    want.resize(3 * 4096 + 100, 0);
    let d = resolve(&s, "/d").unwrap().ino;
    s.rename_with(ROOT_INO, b"b", d, b"a", RenameMode::Exchange, None)
        .unwrap();
    let (m, tmp) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(tmp, 0, b"unnamed").unwrap();
    s.link(m.ino, ROOT_INO, b"named", None).unwrap();
    s.release(tmp).unwrap();
    clean(&s);
    // Durable, still format 1 after a crash and after a checkpoint.
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let r = RemapStore::open_on(crashed.clone(), Some(ID), &config()).unwrap();
    assert_eq!((r.format(), journal_format(&crashed)), (Format::V1, 1));
    assert_eq!(get(&r, "/b"), want);
    assert_eq!(get(&r, "/d/a"), b"bee");
    assert_eq!(get(&r, "/named"), b"unnamed");
    assert!(r.checkpoint().unwrap());
    r.unmount().unwrap();
    let again = RemapStore::open_on(crashed.clone(), Some(ID), &config()).unwrap();
    assert_eq!((again.format(), journal_format(&crashed)), (Format::V1, 1));
    assert_eq!(get(&again, "/b"), want);
    clean(&again);
}

#[test]
fn a_store_of_a_newer_format_is_refused_with_a_clear_error() {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), ID, &config()).unwrap();
    assert_eq!(
        (s.format(), journal_format(&sim)),
        (Format::NEWEST, remap::format::VERSION)
    );
    s.unmount().unwrap();
    drop(s);
    // The journal header as a later atomfs would write it (format 3, its checksum right).
    let f = sim
        .open(Path::new("remap.journal"), &HostOpen::read_write())
        .unwrap();
    let mut head = vec![0u8; 28];
    sim.read_full_at(&f, 0, &mut head).unwrap();
    head[8..12].copy_from_slice(&3u32.to_le_bytes());
    let crc = crc32c(&head[..24]);
    head[24..28].copy_from_slice(&crc.to_le_bytes());
    sim.write_all_at(&f, 0, &head).unwrap();
    sim.sync_data(&f).unwrap();
    match RemapStore::open_on(sim, Some(ID), &config()) {
        Err(Error::UnsupportedVersion { found, what, .. }) => {
            assert_eq!(found, 3);
            assert!(what.contains("newer atomfs"), "{what}");
        }
        Err(e) => panic!("{e:?}"),
        Ok(_) => panic!("a format 3 store opened"),
    }
}

/// crc32c (Castagnoli), bitwise: the test does not depend on the engine's crate for it.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_punched_hole_frees_storage_across_checkpoints_and_a_reopen() {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), ID, &config()).unwrap();
    let data: Vec<u8> = (0..16 * BLOCK as usize).map(|i| (i % 251) as u8).collect();
    put(&s, "/f", &data);
    let f = resolve(&s, "/f").unwrap().ino;
    assert!(s.checkpoint().unwrap());
    let fh = s.open(f, rw()).unwrap();
    let allocated = |s: &dyn Store| s.getattr(f).unwrap().allocated;
    assert_eq!(allocated(&s), 16 * BLOCK);
    // Blocks 4..8 whole, and the ends of 3 and 8 zeroed in place.
    s.fallocate(fh, Fallocate::PunchHole, 4 * BLOCK - 10, 4 * BLOCK + 20)
        .unwrap();
    let mut want = data.clone();
    want[(4 * BLOCK - 10) as usize..(8 * BLOCK + 10) as usize].fill(0);
    assert_eq!(allocated(&s), 12 * BLOCK, "committed hole pairs");
    assert!(s.checkpoint().unwrap());
    assert_eq!(allocated(&s), 12 * BLOCK, "punched out of the home file");
    assert_eq!(s.counters().punched_blocks, 4);
    // A write into the hole allocates that block again; a second punch over the hole and
    // past it frees only what holds data.
    s.write(fh, 5 * BLOCK + 1, b"back").unwrap();
    want[(5 * BLOCK + 1) as usize..(5 * BLOCK + 5) as usize].copy_from_slice(b"back");
    assert_eq!(allocated(&s), 13 * BLOCK);
    s.fallocate(fh, Fallocate::PunchHole, 12 * BLOCK, 100 * BLOCK)
        .unwrap();
    want[12 * BLOCK as usize..].fill(0);
    assert_eq!(allocated(&s), 9 * BLOCK);
    // Allocate brings the holes back as zeros; the size stays with KEEP_SIZE.
    s.fallocate(fh, Fallocate::Allocate { keep_size: true }, 0, 14 * BLOCK)
        .unwrap();
    assert_eq!(allocated(&s), 14 * BLOCK);
    assert_eq!(s.getattr(f).unwrap().size, 16 * BLOCK);
    s.fallocate(fh, Fallocate::PunchHole, 6 * BLOCK, 2 * BLOCK)
        .unwrap();
    want[6 * BLOCK as usize..8 * BLOCK as usize].fill(0);
    s.release(fh).unwrap();
    assert_eq!(get(&s, "/f"), want);
    let before = allocated(&s);
    assert_eq!(before, 12 * BLOCK);
    assert!(s.checkpoint().unwrap());
    s.unmount().unwrap();
    drop(s);
    let r = RemapStore::open_on(sim.clone(), Some(ID), &config()).unwrap();
    assert_eq!(get(&r, "/f"), want);
    assert_eq!(allocated(&r), before, "the snapshot's holes");
    clean(&r);
    // A truncate forgets the holes past it.
    let fh = r.open(f, rw()).unwrap();
    r.set_len(fh, 7 * BLOCK).unwrap();
    assert_eq!(allocated(&r), 6 * BLOCK, "block 6 stays a hole");
    r.set_len(fh, 16 * BLOCK).unwrap();
    r.release(fh).unwrap();
    want.truncate(7 * BLOCK as usize);
    want.resize(16 * BLOCK as usize, 0);
    assert_eq!(get(&r, "/f"), want);
    clean(&r);
}

#[test]
fn a_namespace_call_on_an_o_atomic_file_commits_its_attributes_not_its_pending_writes() {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), ID, &config()).unwrap();
    put(&s, "/a", b"committed");
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .atomic(true)
        .open(&s, "/a", None)
        .unwrap();
    let a = s.fstat(fh).unwrap().ino;
    s.write(fh, 0, b"PENDING, never fsynced").unwrap();
    s.setxattr(a, b"user.k", b"v", XattrSet::Either, None)
        .unwrap();
    let perm = store::SetAttr {
        perm: Some(0o600),
        ..Default::default()
    };
    s.setattr(a, &perm, None).unwrap();
    s.rename(ROOT_INO, b"a", ROOT_INO, b"b", None).unwrap();
    // A crash: the attribute, the mode and the name are durable, the writes are not.
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let r = RemapStore::open_on(crashed, Some(ID), &config()).unwrap();
    assert_eq!(get(&r, "/b"), b"committed");
    let b = resolve(&r, "/b").unwrap();
    assert_eq!((b.perm, b.size), (0o600, 9));
    assert_eq!(r.getxattr(b.ino, b"user.k").unwrap(), b"v");
    clean(&r);
    // Without a crash: abortv drops the writes and keeps the committed attributes.
    s.abortv(&[fh]).unwrap();
    assert_eq!(get(&s, "/b"), b"committed");
    assert_eq!(s.getattr(a).unwrap().perm, 0o600);
    assert_eq!(s.getxattr(a, b"user.k").unwrap(), b"v");
    // And the fsync commits the writes.
    s.write(fh, 0, b"now fsynced").unwrap();
    s.removexattr(a, b"user.k", None).unwrap();
    s.fsync(fh, false).unwrap();
    s.release(fh).unwrap();
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let r = RemapStore::open_on(crashed, Some(ID), &config()).unwrap();
    assert_eq!(get(&r, "/b"), b"now fsynced");
    assert!(r.listxattr(a).unwrap().is_empty());
    clean(&r);
}
