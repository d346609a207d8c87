//! The POSIX file calls on a real home directory and pool file, beyond the conformance
//! suite: a pool of the first format version opens and refuses only what needs the new
//! intent records; the bytes of extended attributes of one entry stop at
//! `xattr_bytes_max`; fallocate allocates and frees home storage (a transaction's punch
//! after its commit); an unnamed file leaves
//! nothing at home or in the cache (also one named by a transaction that aborts after its
//! release); fsck reads an open transaction's saved attribute value and reports it damaged;
//! a chown and a symlink's times changed in a transaction are undone by abort and recovery.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, HostCacheStore};
use store::path::{read_file, OpenOptions};
use store::{Error, Fallocate, OpenFlags, RenameMode, SetAttr, Store, XattrSet, ROOT_INO};
use test_support::Scratch;

const POOL: u64 = 4 << 20;

/// Room for a few files in a small pool.
fn base() -> CacheConfig {
    CacheConfig {
        files_max: 256,
        ..CacheConfig::default()
    }
}

fn store(name: &str, config: &CacheConfig) -> (HostCacheStore, Scratch) {
    let dir = test_support::scratch(&format!("cache-posix-{name}"));
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let s = HostCacheStore::create(&dir.join("home"), &dir.join("c.pool"), POOL, config).unwrap();
    (s, dir)
}

fn reopen(s: HostCacheStore, dir: &Scratch, config: &CacheConfig) -> HostCacheStore {
    s.unmount().unwrap();
    drop(s);
    HostCacheStore::open(&dir.join("home"), &dir.join("c.pool"), config).unwrap()
}

fn put(s: &dyn Store, path: &str, data: &[u8]) -> u64 {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, 0, data).unwrap();
    s.release(fh).unwrap();
    store::resolve(s, path).unwrap().ino
}

fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

/// Rewrite the pool's superblock as the first format version (the layout is the same).
fn make_version_1(pool: &std::path::Path) {
    let mut b = std::fs::read(pool).unwrap();
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    let sealed = 64 + cache::format::superblock::HOME_MAX;
    let crc = pmem::crc::crc32c(&b[16..sealed]);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(pool, b).unwrap();
}

#[test]
fn a_first_version_pool_opens_and_refuses_only_what_needs_the_new_records() {
    let config = base();
    let (s, dir) = store("version-1", &config);
    let f = put(&s, "/f", b"data");
    put(&s, "/g", b"gee");
    s.unmount().unwrap();
    drop(s);
    make_version_1(&dir.join("c.pool"));
    let s = HostCacheStore::open(&dir.join("home"), &dir.join("c.pool"), &config).unwrap();
    assert_eq!(s.cache().superblock().version(), 1);
    let tx = s.tx_begin(&[]).unwrap();
    let refused = [
        s.setxattr(f, b"user.a", b"1", XattrSet::Either, Some(tx)),
        s.rename_with(
            ROOT_INO,
            b"f",
            ROOT_INO,
            b"g",
            RenameMode::Exchange,
            Some(tx),
        ),
        s.setattr(
            f,
            &SetAttr {
                uid: Some(1),
                ..Default::default()
            },
            Some(tx),
        )
        .map(drop),
    ];
    for r in refused {
        assert!(matches!(r, Err(Error::Unsupported(_))), "{r:?}");
    }
    // What the first layout's records hold works in a transaction too.
    s.symlink(ROOT_INO, b"l", b"f", Some(tx)).unwrap();
    s.rename_with(
        ROOT_INO,
        b"g",
        ROOT_INO,
        b"h",
        RenameMode::NoReplace,
        Some(tx),
    )
    .unwrap();
    s.tx_commit(tx).unwrap();
    // And everything outside one.
    s.setxattr(f, b"user.a", b"1", XattrSet::Either, None)
        .unwrap();
    s.rename_with(ROOT_INO, b"f", ROOT_INO, b"h", RenameMode::Exchange, None)
        .unwrap();
    assert_eq!(read_file(&s, "/h").unwrap(), b"data");
    assert_eq!(
        s.readlink(store::resolve(&s, "/l").unwrap().ino).unwrap(),
        b"f"
    );
    clean(&s);
    let s = reopen(s, &dir, &config);
    assert_eq!(
        s.cache().superblock().version(),
        1,
        "an open never upgrades"
    );
    assert_eq!(s.getxattr(f, b"user.a").unwrap(), b"1");
}

#[test]
fn extended_attributes_of_one_entry_stop_at_xattr_bytes_max() {
    let config = CacheConfig {
        xattr_bytes_max: 100,
        ..base()
    };
    let (s, _dir) = store("xattr-max", &config);
    let f = put(&s, "/f", b"x");
    let limit = s
        .limits()
        .unwrap()
        .into_iter()
        .find(|l| l.name.starts_with("bytes of extended attributes"))
        .unwrap();
    assert_eq!((limit.max, limit.error), (100, "ENOSPC"));
    // "user.a" + NUL + 60 = 67 bytes; a second such attribute passes 100.
    s.setxattr(f, b"user.a", &[1; 60], XattrSet::Create, None)
        .unwrap();
    let past = s.setxattr(f, b"user.b", &[2; 60], XattrSet::Create, None);
    assert!(matches!(past, Err(Error::NoSpace(_))), "{past:?}");
    let tx = s.tx_begin(&[]).unwrap();
    let past = s.setxattr(f, b"user.b", &[2; 60], XattrSet::Create, Some(tx));
    assert!(
        matches!(past, Err(Error::NoSpace(_))),
        "in a transaction: {past:?}"
    );
    s.tx_abort(tx).unwrap();
    // Replacing a value counts the old one out: "user.a" + NUL + 93 bytes is 100.
    s.setxattr(f, b"user.a", &[3; 93], XattrSet::Replace, None)
        .unwrap();
    let past = s.setxattr(f, b"user.a", &[4; 94], XattrSet::Replace, None);
    assert!(matches!(past, Err(Error::NoSpace(_))), "{past:?}");
    assert_eq!(s.getxattr(f, b"user.a").unwrap(), vec![3; 93]);
    assert_eq!(s.listxattr(f).unwrap(), vec![b"user.a".to_vec()]);
    clean(&s);
}

#[test]
fn fallocate_allocates_and_frees_home_storage_and_keeps_the_data() {
    let config = base();
    let (s, dir) = store("fallocate", &config);
    let f = put(&s, "/f", &[]);
    let fh = s.open(f, rw()).unwrap();
    let alloc = Fallocate::Allocate { keep_size: false };
    s.fallocate(fh, alloc, 0, 256 << 10).unwrap();
    let home = std::fs::metadata(dir.join("home/f")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert!(
        home.blocks() * 512 >= 256 << 10,
        "home storage {} after allocating 256 KiB",
        home.blocks() * 512
    );
    assert_eq!(s.fstat(fh).unwrap().size, 256 << 10);
    let data: Vec<u8> = (0..256u32 << 10).map(|i| (i % 251) as u8).collect();
    s.write(fh, 0, &data).unwrap();
    s.fsync(fh, false).unwrap();
    s.flush_home().unwrap();
    let before = std::fs::metadata(dir.join("home/f")).unwrap().blocks() * 512;
    s.fallocate(fh, Fallocate::PunchHole, 64 << 10, 128 << 10)
        .unwrap();
    let after = std::fs::metadata(dir.join("home/f")).unwrap().blocks() * 512;
    assert!(
        after + (128 << 10) <= before,
        "punching 128 KiB freed {} bytes at home",
        before.saturating_sub(after)
    );
    let mut want = data.clone();
    want[64 << 10..192 << 10].fill(0);
    // In a transaction: the home storage is freed after the commit.
    s.write(fh, 0, &data[..64 << 10]).unwrap();
    s.flush_home().unwrap();
    let blocks = || std::fs::metadata(dir.join("home/f")).unwrap().blocks() * 512;
    let before = blocks();
    let tx = s.tx_begin(&[fh]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 0, 64 << 10).unwrap();
    s.flush_home().unwrap();
    assert_eq!(blocks(), before, "nothing goes home before the commit");
    s.tx_commit(tx).unwrap();
    assert!(
        blocks() + (64 << 10) <= before,
        "the commit freed {} bytes at home",
        before.saturating_sub(blocks())
    );
    want[..64 << 10].fill(0);
    s.release(fh).unwrap();
    assert_eq!(read_file(&s, "/f").unwrap(), want);
    // The home file holds the same bytes once written home.
    s.flush_home().unwrap();
    assert_eq!(std::fs::read(dir.join("home/f")).unwrap(), want);
    clean(&s);
    let s = reopen(s, &dir, &config);
    assert_eq!(read_file(&s, "/f").unwrap(), want);
}

#[test]
fn an_unnamed_file_leaves_nothing_at_home_or_in_the_cache() {
    let config = base();
    let (s, dir) = store("unnamed", &config);
    let cached = |s: &HostCacheStore| s.cache().file_list().len();
    let files = cached(&s);
    let (_, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(fh, 0, &[9; 10_000]).unwrap();
    assert_eq!(cached(&s), files + 1);
    s.release(fh).unwrap();
    assert_eq!(cached(&s), files, "the record went at the last release");
    let trash = dir.join("home/.atomfs-cache-trash");
    let left = std::fs::read_dir(&trash).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "nothing left in the trash");
    // Open at an unclean stop: the next open drops it.
    let (_, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(fh, 0, &[8; 5000]).unwrap();
    drop(s);
    let s = HostCacheStore::open(&dir.join("home"), &dir.join("c.pool"), &config).unwrap();
    assert_eq!(cached(&s), files);
    let left = std::fs::read_dir(&trash).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0);
    assert!(s.read_dir(ROOT_INO).unwrap().is_empty());
    clean(&s);
}

#[test]
fn fsck_reads_an_open_transactions_saved_attribute_value() {
    let config = base();
    let (s, dir) = store("fsck-saved", &config);
    let f = put(&s, "/f", b"x");
    s.setxattr(f, b"user.k", b"old", XattrSet::Either, None)
        .unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.setxattr(f, b"user.k", b"new", XattrSet::Either, Some(tx))
        .unwrap();
    clean(&s);
    let trash = dir.join("home/.atomfs-cache-trash");
    let saved: Vec<_> = std::fs::read_dir(&trash)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("xattr-")
        })
        .collect();
    assert_eq!(saved.len(), 1, "one saved value");
    let mut bytes = std::fs::read(&saved[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&saved[0], &bytes).unwrap();
    let report = s.fsck().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("saved attribute value")),
        "{:?}",
        report.problems
    );
    bytes[last] ^= 1;
    std::fs::write(&saved[0], &bytes).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(s.getxattr(f, b"user.k").unwrap(), b"old");
    assert!(!saved[0].exists(), "the abort deletes the saved value");
    clean(&s);
}

#[test]
fn an_uncommitted_chown_and_symlink_times_are_undone_by_abort_and_by_recovery() {
    let config = base();
    let (s, dir) = store("chown", &config);
    let f = put(&s, "/f", b"x");
    let l = s.symlink(ROOT_INO, b"l", b"f", None).unwrap().ino;
    let before = (s.getattr(f).unwrap(), s.getattr(l).unwrap());
    let change = SetAttr {
        uid: Some(4321),
        gid: Some(8765),
        mtime: Some(1_000_000_000),
        ..Default::default()
    };
    let owner = |s: &HostCacheStore, ino| {
        let m = s.getattr(ino).unwrap();
        (m.uid, m.gid, m.mtime)
    };
    let was = |m: &store::Metadata| (m.uid, m.gid, m.mtime);
    // Aborted.
    let tx = s.tx_begin(&[]).unwrap();
    s.setattr(f, &change, Some(tx)).unwrap();
    s.setattr(l, &change, Some(tx)).unwrap();
    assert_eq!(owner(&s, f), (4321, 8765, 1_000_000_000));
    assert_eq!(owner(&s, l), (4321, 8765, 1_000_000_000));
    s.tx_abort(tx).unwrap();
    // (A file's mtime is its home file's, which a flush of its data changes.)
    assert_eq!(owner(&s, f).0, before.0.uid);
    assert_eq!(owner(&s, f).1, before.0.gid);
    assert_eq!(owner(&s, l), was(&before.1));
    // Never committed: a crash (the store dropped), then recovery.
    let tx = s.tx_begin(&[]).unwrap();
    s.setattr(f, &change, Some(tx)).unwrap();
    s.setattr(l, &change, Some(tx)).unwrap();
    drop(s);
    let s = HostCacheStore::open(&dir.join("home"), &dir.join("c.pool"), &config).unwrap();
    assert_eq!(owner(&s, f).0, before.0.uid);
    assert_eq!(owner(&s, f).1, before.0.gid);
    assert_eq!(owner(&s, l), was(&before.1));
    // Committed: kept.
    let tx = s.tx_begin(&[]).unwrap();
    s.setattr(l, &change, Some(tx)).unwrap();
    s.tx_commit(tx).unwrap();
    let s = reopen(s, &dir, &config);
    assert_eq!(owner(&s, l), (4321, 8765, 1_000_000_000));
    clean(&s);
}

#[test]
fn an_unnamed_file_named_by_a_transaction_and_released_before_its_abort_goes() {
    let config = base();
    let (s, dir) = store("unnamed-abort", &config);
    let files = s.cache().file_list().len();
    let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(fh, 0, &[5; 3000]).unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.link(m.ino, ROOT_INO, b"named", Some(tx)).unwrap();
    s.release(fh).unwrap();
    assert_eq!(read_file(&s, "/named").unwrap(), vec![5; 3000]);
    s.tx_abort(tx).unwrap();
    assert!(s.lookup(ROOT_INO, b"named").is_err());
    assert_eq!(s.cache().file_list().len(), files, "its record went");
    let trash = dir.join("home/.atomfs-cache-trash");
    let left = std::fs::read_dir(&trash).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "nothing left in the trash");
    // The same, committed: the file keeps its name and data.
    let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
    s.write(fh, 0, &[6; 3000]).unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.link(m.ino, ROOT_INO, b"kept", Some(tx)).unwrap();
    s.release(fh).unwrap();
    s.tx_commit(tx).unwrap();
    let s = reopen(s, &dir, &config);
    assert_eq!(read_file(&s, "/kept").unwrap(), vec![6; 3000]);
    clean(&s);
}
