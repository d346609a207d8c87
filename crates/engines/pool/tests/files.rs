//! Files, directories, holes, overwrites, limits and bad input on the pool engine.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pool::PoolConfig;
use store::{Error, OpenOptions, Store, ROOT_INO};

#[test]
fn write_read_overwrite_and_holes() {
    let s = fresh(&PoolConfig::test_min());
    let a = pattern(1, 10_000);
    create_with(&s, "/a", &a);
    assert_eq!(read_path(&s, "/a"), a);
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&s, "/a", None)
        .unwrap();
    // Unaligned overwrite across a block boundary, twice (second goes to a new version).
    let patch = pattern(2, 300);
    s.write(fh, 4000, &patch).unwrap();
    let patch2 = pattern(3, 70);
    s.write(fh, 4090, &patch2).unwrap();
    let mut want = a.clone();
    want[4000..4300].copy_from_slice(&patch);
    want[4090..4160].copy_from_slice(&patch2);
    assert_eq!(read_path(&s, "/a"), want);
    // A write far past the end leaves a hole that reads as zeros.
    s.write(fh, 100_000, b"tail").unwrap();
    let all = read_path(&s, "/a");
    assert_eq!(all.len(), 100_004);
    assert_eq!(&all[..want.len()], &want[..]);
    assert!(all[want.len()..100_000].iter().all(|&b| b == 0));
    assert_eq!(&all[100_000..], b"tail");
    // Holes take no block.
    let meta = s.fstat(fh).unwrap();
    assert!(meta.allocated < 10 * 4096, "allocated {}", meta.allocated);
    // Shrink then grow: the cut bytes come back as zeros.
    s.set_len(fh, 5000).unwrap();
    s.set_len(fh, 9000).unwrap();
    let all = read_path(&s, "/a");
    assert_eq!(&all[..5000], &want[..5000]);
    assert!(all[5000..].iter().all(|&b| b == 0));
    s.release(fh).unwrap();
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

#[test]
fn directories_and_names() {
    let s = fresh(&PoolConfig::test_min());
    store::path::mkdir_all(&s, "/d/e/f", 0o755).unwrap();
    create_with(&s, "/d/e/f/x", b"x");
    create_with(&s, "/d/y", b"y");
    let names: Vec<_> = s
        .read_dir(store::resolve(&s, "/d").unwrap().ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b"e".to_vec(), b"y".to_vec()]);
    let d = store::resolve(&s, "/d").unwrap();
    assert_eq!(d.nlink, 3);
    assert!(matches!(
        s.rmdir(d.ino, b"e", None),
        Err(Error::NotEmpty(_))
    ));
    assert!(matches!(
        store::resolve(&s, "/d/y/z"),
        Err(Error::NotDir(_))
    ));
    let long = vec![b'n'; 256];
    assert!(matches!(
        s.create(ROOT_INO, &long, 0o644, None),
        Err(Error::NameTooLong { .. })
    ));
    let max = vec![b'm'; 255];
    s.create(ROOT_INO, &max, 0o644, None).unwrap();
    assert_eq!(s.lookup(ROOT_INO, &max).unwrap().size, 0);
    assert!(matches!(
        s.create(ROOT_INO, &max, 0o644, None),
        Err(Error::Exists(_))
    ));
    // rename replaces a file, moves a directory, refuses to move into itself.
    s.rename(d.ino, b"y", ROOT_INO, b"y2", None).unwrap();
    assert_eq!(read_path(&s, "/y2"), b"y");
    create_with(&s, "/z", b"zz");
    s.rename(ROOT_INO, b"y2", ROOT_INO, b"z", None).unwrap();
    assert_eq!(read_path(&s, "/z"), b"y");
    let e = store::resolve(&s, "/d/e").unwrap();
    assert!(matches!(
        s.rename(d.ino, b"e", e.ino, b"e2", None),
        Err(Error::InvalidArgument(_))
    ));
    s.rename(d.ino, b"e", ROOT_INO, b"e", None).unwrap();
    assert_eq!(read_path(&s, "/e/f/x"), b"x");
    // link / unlink keep the data while a name is left.
    let z = store::resolve(&s, "/z").unwrap();
    s.link(z.ino, ROOT_INO, b"z-link", None).unwrap();
    s.unlink(ROOT_INO, b"z", None).unwrap();
    assert_eq!(read_path(&s, "/z-link"), b"y");
    assert_eq!(s.getattr(z.ino).unwrap().nlink, 1);
    s.unlink(ROOT_INO, b"z-link", None).unwrap();
    assert!(s.getattr(z.ino).is_err());
    // . and .. resolve, and cannot be created or removed (InvalidArgument, as in every
    // store: conformance case namespace_error_order).
    assert_eq!(s.lookup(e.ino, b"..").unwrap().ino, ROOT_INO);
    assert_eq!(s.lookup(e.ino, b".").unwrap().ino, e.ino);
    assert!(matches!(
        s.mkdir(ROOT_INO, b".", 0o755, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.rmdir(e.ino, b"..", None),
        Err(Error::InvalidArgument(_))
    ));
    // Renaming one link of a file onto another link of it does nothing.
    create_with(&s, "/p", b"p");
    let p = store::resolve(&s, "/p").unwrap();
    s.link(p.ino, ROOT_INO, b"p2", None).unwrap();
    s.rename(ROOT_INO, b"p", ROOT_INO, b"p2", None).unwrap();
    assert!(s.lookup(ROOT_INO, b"p").is_ok() && s.lookup(ROOT_INO, b"p2").is_ok());
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

#[test]
fn unlinked_open_file_lives_until_closed() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    create_with(&s, "/u", &pattern(5, 9000));
    let ino = store::resolve(&s, "/u").unwrap().ino;
    let fh = s.open(ino, rw()).unwrap();
    let free_before = s.statfs().unwrap().blocks_free;
    s.unlink(ROOT_INO, b"u", None).unwrap();
    let mut buf = vec![0u8; 9000];
    assert_eq!(s.read(fh, 0, &mut buf).unwrap(), 9000);
    assert_eq!(buf, pattern(5, 9000));
    s.write(fh, 0, b"still writable").unwrap();
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    // An unclean stop now: recovery frees the orphan.
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(crashed.last_recovery().orphans_freed, 1);
    assert!(crashed.getattr(ino).is_err());
    s.release(fh).unwrap();
    assert!(s.getattr(ino).is_err());
    assert!(s.statfs().unwrap().blocks_free > free_before);
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

#[test]
fn large_directory_lookups() {
    let cfg = PoolConfig {
        inode_count: 2048,
        metadata_log_entries: 1024,
        ..PoolConfig::test_min()
    };
    let s = fresh(&cfg);
    for i in 0..1500u32 {
        s.create(ROOT_INO, format!("file-{i}").as_bytes(), 0o644, None)
            .unwrap();
    }
    for i in (0..1500u32).step_by(7) {
        s.lookup(ROOT_INO, format!("file-{i}").as_bytes()).unwrap();
    }
    for i in (0..1500u32).step_by(2) {
        s.unlink(ROOT_INO, format!("file-{i}").as_bytes(), None)
            .unwrap();
    }
    assert_eq!(s.read_dir(ROOT_INO).unwrap().len(), 750);
    let again = crash_copy(&s, &cfg);
    assert_eq!(again.read_dir(ROOT_INO).unwrap().len(), 750);
    assert!(again.lookup(ROOT_INO, b"file-1").is_ok());
    assert!(again.lookup(ROOT_INO, b"file-2").is_err());
}

#[test]
fn limits_and_bad_handles() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    create_with(&s, "/f", b"f");
    let ino = store::resolve(&s, "/f").unwrap().ino;
    let mut fhs = Vec::new();
    for _ in 0..cfg.open_files_max {
        fhs.push(s.open(ino, rw()).unwrap());
    }
    assert!(matches!(s.open(ino, rw()), Err(Error::TooMany { .. })));
    for fh in fhs.drain(..) {
        s.release(fh).unwrap();
    }
    let fh = s.open(ino, rw()).unwrap();
    s.release(fh).unwrap();
    assert!(matches!(s.write(fh, 0, b"x"), Err(Error::BadHandle(_))));
    let mut txs = Vec::new();
    for _ in 0..cfg.open_transactions_max {
        txs.push(s.tx_begin(&[]).unwrap());
    }
    assert!(matches!(s.tx_begin(&[]), Err(Error::TooMany { .. })));
    for tx in txs {
        s.tx_commit(tx).unwrap();
        assert!(matches!(s.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
    }
    let ro = s
        .open(
            ino,
            store::OpenFlags {
                read: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(matches!(s.write(ro, 0, b"x"), Err(Error::BadMode(..))));
    let d = s.mkdir(ROOT_INO, b"dir", 0o755, None).unwrap();
    assert!(matches!(s.open(d.ino, rw()), Err(Error::IsDir(_))));
}

#[test]
fn bad_superblocks_give_typed_errors() {
    use pmem::{DramRegion, Region};
    use std::sync::Arc;
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    let img = image(s.region());
    let open = |bytes: &[u8]| pool::PoolStore::open(Arc::new(DramRegion::from_bytes(bytes)), &cfg);
    let mut bad = img.clone();
    bad[0] ^= 1;
    assert!(matches!(open(&bad), Err(Error::BadMagic(_))));
    let mut bad = img.clone();
    bad[8] = 9;
    assert!(matches!(open(&bad), Err(Error::UnsupportedVersion { .. })));
    let mut bad = img.clone();
    bad[30] ^= 1;
    assert!(matches!(open(&bad), Err(Error::Corrupt { .. })));
    assert!(open(&img[..img.len() / 2]).is_err());
    assert!(open(&img[..100]).is_err());
    let region = DramRegion::new(64 << 10);
    assert!(pool::PoolStore::format(Arc::new(region), &cfg).is_err());
    // A wild block pointer in an inode gives Corrupt, not a panic.
    let mut bad = img.clone();
    let g = s.superblock().geometry;
    let root = (g.inode_offset + 128) as usize;
    bad[root + 20..root + 24].copy_from_slice(&1u32.to_le_bytes());
    bad[root + 24..root + 32].copy_from_slice(&u64::MAX.to_le_bytes());
    let r = open(&bad);
    assert!(matches!(r, Err(Error::Corrupt { .. })), "{:?}", r.err());
    let _ = DramRegion::new(1).len();
}

/// Sparse writes that grow the block-pointer tree (to two, then three levels) and create
/// index blocks take exactly the blocks the write's plan counts (plan.rs: new roots, missing
/// index blocks each once, data blocks); debug builds also check that each write used all
/// it reserved. Every mode fills holes the same way.
#[test]
fn sparse_writes_take_the_index_and_data_blocks_their_plan_counts() {
    use pool::Mode;
    for mode in Mode::ALL {
        let s = fresh(&PoolConfig::test_min().with_mode(mode));
        create_with(&s, "/sparse", b"");
        let fh = open_rw(&s, "/sparse");
        let block = 4096u64;
        // (first byte, length, blocks taken); an index block holds 512 pointers. Block 0:
        // a root (one level). Block 600: a second level (a root, an index block). Blocks
        // 1023 and 1024: one new index block. Block 512 * 512: a third level (a root, two
        // index blocks). Blocks 2048 to 2560: two new index blocks under one parent.
        let writes = [
            (10, 1, 2),
            (600 * block, 1, 3),
            (1023 * block, 2 * block, 3),
            (512 * 512 * block + 5, 1, 4),
            (2048 * block + 100, 512 * block, 2 + 513),
        ];
        for (off, len, taken) in writes {
            let free = s.statfs().unwrap().blocks_free;
            s.write(fh, off, &vec![7u8; len as usize]).unwrap();
            let took = free - s.statfs().unwrap().blocks_free;
            assert_eq!(took, taken, "{mode:?}: write of {len} at {off}");
        }
        assert!(s.fsck().unwrap().is_clean(), "{mode:?}: {:?}", s.fsck());
    }
}
