//! What the pool adds to the shared POSIX cases (crates/testing/conformance `cases/posix.rs`):
//! older format versions, the attribute limit, space given back by punched holes, freed
//! attribute chains and unnamed files, and fsck and readers meeting damaged attribute
//! blocks and symlink targets.

#![allow(clippy::unwrap_used)]

mod common;
use common::{crash_copy, fresh, image, pattern, rw};
use pmem::{DramRegion, Region};
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Error, Fallocate, FileKind, RenameMode, Store, XattrSet, ROOT_INO};

fn cfg() -> PoolConfig {
    PoolConfig::test_min()
}

fn free_blocks(s: &dyn Store) -> u64 {
    s.statfs().unwrap().blocks_free
}

fn assert_clean(s: &dyn Store, what: &str) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

/// The bytes of `s` with its superblock rewritten as format version 1 (or 2 with data
/// checksums): a pool as the builds before the POSIX records wrote it.
fn as_old_format(s: &PoolStore<DramRegion>) -> Vec<u8> {
    let mut geo = s.superblock().geometry;
    geo.posix_objects = false;
    let mut img = image(s.region());
    let sb = geo.encode(0);
    img[..sb.len()].copy_from_slice(&sb);
    img
}

#[test]
fn an_older_pool_opens_and_refuses_only_the_new_records() {
    let s = fresh(&cfg());
    common::create_with(&s, "/old", b"written by an older build");
    let old =
        PoolStore::open(Arc::new(DramRegion::from_bytes(&as_old_format(&s))), &cfg()).unwrap();
    assert_eq!(old.superblock().format_version, 1);
    assert_eq!(
        common::read_path(&old, "/old"),
        b"written by an older build"
    );
    let refused = |r: store::Result<()>, what: &str| match r {
        Err(Error::Unsupported(m)) => assert!(m.contains("format version 1"), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    refused(old.symlink(ROOT_INO, b"l", b"t", None).map(drop), "symlink");
    refused(
        old.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o600, 0, None)
            .map(drop),
        "mknod",
    );
    let f = old.lookup(ROOT_INO, b"old").unwrap().ino;
    refused(
        old.setxattr(f, b"user.a", b"1", XattrSet::Either, None),
        "setxattr",
    );
    // What needs nothing new on media works on every version.
    let (m, fh) = old.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    old.write(fh, 0, b"tmp").unwrap();
    old.fallocate(fh, Fallocate::Allocate { keep_size: false }, 0, 9000)
        .unwrap();
    old.link(m.ino, ROOT_INO, b"new", None).unwrap();
    old.release(fh).unwrap();
    old.rename_with(
        ROOT_INO,
        b"old",
        ROOT_INO,
        b"new",
        RenameMode::Exchange,
        None,
    )
    .unwrap();
    assert_eq!(
        common::read_path(&old, "/new"),
        b"written by an older build"
    );
    assert_clean(&old, "an older pool after the calls it takes");
    // And it is still the format an older build reads.
    let again = crash_copy(&old, &cfg());
    assert_eq!(again.superblock().format_version, 1);
}

#[test]
fn an_unknown_newer_version_is_named() {
    let s = fresh(&cfg());
    let mut img = image(s.region());
    img[8..12].copy_from_slice(&5u32.to_le_bytes());
    let crc = crc32c::crc32c(&img[..96]);
    img[96..100].copy_from_slice(&crc.to_le_bytes());
    match PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg()) {
        Err(Error::UnsupportedVersion {
            found: 5,
            supported: 4,
            ..
        }) => {}
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn attributes_stop_at_sixty_four_kib_of_records_per_inode() {
    let s = fresh(&cfg());
    common::create_with(&s, "/f", b"x");
    let f = s.lookup(ROOT_INO, b"f").unwrap().ino;
    let max = store::xattr::XATTR_SIZE_MAX;
    assert!(matches!(
        s.setxattr(f, b"user.max", &vec![1; max], XattrSet::Either, None),
        Err(Error::NoSpace(_))
    ));
    // 65,536 bytes of records exactly: 5 + 6 ("user.a") + the value.
    let fits = vec![2u8; 65_536 - 11];
    s.setxattr(f, b"user.a", &fits, XattrSet::Either, None)
        .unwrap();
    assert!(matches!(
        s.setxattr(f, b"user.b", b"", XattrSet::Either, None),
        Err(Error::NoSpace(_))
    ));
    assert_eq!(s.getxattr(f, b"user.a").unwrap(), fits);
    // Another inode has its own room.
    common::create_with(&s, "/g", b"y");
    let g = s.lookup(ROOT_INO, b"g").unwrap().ino;
    s.setxattr(g, b"user.a", &fits, XattrSet::Either, None)
        .unwrap();
    assert_clean(&s, "two full attribute chains");
    let again = crash_copy(&s, &cfg());
    assert_eq!(again.getxattr(f, b"user.a").unwrap(), fits);
    assert_clean(&again, "after a crash");
}

#[test]
fn attribute_chains_and_symlink_blocks_go_back_to_the_free_list() {
    let s = fresh(&cfg());
    // The root grows by a block for its first entries: made before the count.
    common::create_with(&s, "/f", b"x");
    let f = s.lookup(ROOT_INO, b"f").unwrap().ino;
    let file_blocks = s.getattr(f).unwrap().allocated / 4096;
    let before = free_blocks(&s) + file_blocks;
    s.setxattr(f, b"user.a", &pattern(1, 20_000), XattrSet::Either, None)
        .unwrap();
    s.setxattr(f, b"user.a", &pattern(2, 10_000), XattrSet::Either, None)
        .unwrap();
    s.symlink(ROOT_INO, b"l", &[b'p'; 1000], None).unwrap();
    assert!(free_blocks(&s) < before - 4);
    s.unlink(ROOT_INO, b"f", None).unwrap();
    s.unlink(ROOT_INO, b"l", None).unwrap();
    assert_eq!(free_blocks(&s), before, "every block back");
    assert_clean(&s, "after the unlinks");
}

#[test]
fn a_punched_hole_gives_its_blocks_back_at_the_commit() {
    let s = fresh(&cfg());
    common::create_with(&s, "/f", &pattern(3, 64 * 1024));
    let fh = common::open_rw(&s, "/f");
    let before = free_blocks(&s);
    let tx = s.tx_begin(&[fh]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 4096, 8 * 4096)
        .unwrap();
    s.tx_commit(tx).unwrap();
    assert_eq!(free_blocks(&s), before + 8);
    let m = s.fstat(fh).unwrap();
    assert_eq!((m.size, m.allocated), (64 * 1024, 8 * 4096 + 4096));
    let mut want = pattern(3, 64 * 1024);
    want[4096..9 * 4096].fill(0);
    s.release(fh).unwrap();
    assert_eq!(common::read_path(&s, "/f"), want);
    assert_clean(&s, "after a punched hole");
}

#[test]
fn an_unnamed_file_open_at_a_crash_is_freed_by_recovery() {
    let s = fresh(&cfg());
    let before = free_blocks(&s);
    let (_, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(fh, 0, &pattern(4, 40_000)).unwrap();
    assert_clean(&s, "an unnamed file open");
    let again = crash_copy(&s, &cfg());
    assert_eq!(again.last_recovery().orphans_freed, 1);
    assert_eq!(free_blocks(&again), before);
    assert_clean(&again, "after recovery");
}

/// The attribute pointer of inode `ino` in the image.
fn xattr_head(s: &PoolStore<DramRegion>, ino: u64) -> u64 {
    let geo = s.superblock().geometry;
    s.region().load_u64(geo.inode(ino) + 88)
}

#[test]
fn a_damaged_attribute_block_is_reported_never_served() {
    let s = fresh(&cfg());
    common::create_with(&s, "/f", b"x");
    let f = s.lookup(ROOT_INO, b"f").unwrap().ino;
    s.setxattr(f, b"user.a", b"value", XattrSet::Either, None)
        .unwrap();
    let head = xattr_head(&s, f);
    assert_ne!(head, 0);
    let geo = s.superblock().geometry;
    for at in [0u64, 9, 33, 4095] {
        let mut img = image(s.region());
        img[(geo.block(head) + at) as usize] ^= 0x40;
        let damaged = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg()).unwrap();
        assert!(
            matches!(damaged.getxattr(f, b"user.a"), Err(Error::Corrupt { .. })),
            "byte {at}"
        );
        let report = damaged.fsck().unwrap();
        assert!(
            report.problems.iter().any(|p| p.what.contains("attribute")),
            "byte {at}: {:?}",
            report.problems
        );
    }
}

#[test]
fn fsck_checks_symlink_targets() {
    let s = fresh(&cfg());
    let l = s.symlink(ROOT_INO, b"l", b"short", None).unwrap().ino;
    assert_eq!(s.readlink(l).unwrap(), b"short");
    assert_clean(&s, "a symlink");
    let geo = s.superblock().geometry;
    // A NUL inside the target, then bytes past its end.
    for (at, byte) in [(96 + 2, 0u8), (96 + 20, b'z')] {
        let mut img = image(s.region());
        img[(geo.inode(l) + at) as usize] = byte;
        let damaged = PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg()).unwrap();
        let report = damaged.fsck().unwrap();
        assert!(
            report.problems.iter().any(|p| p.what.contains("symlink")),
            "{:?}",
            report.problems
        );
    }
}
