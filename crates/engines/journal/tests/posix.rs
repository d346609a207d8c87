//! The journal engine's own side of the POSIX file API (the shared behaviour is in
//! tests/conformance.rs): metadata log versions (a version 1 store opens and refuses only
//! what needs the version 2 records; a version past this build's is refused by name), the
//! per-inode attribute limit, punched-block accounting across a reopen and its range limit,
//! a compacted log keeping links, special files and attributes, and an aborted link of an
//! unnamed file.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::stores::{clean, limit, new_store_as as new_store, reopen_media, SimStore, RW};
use hostfs::SimHostFs;
use journal::{BlockKey, JournalConfig, MetaFormat, StoreConfig, Tx};
use pmem::SimRegion;
use store::path::{read_file, write_file};
use store::{Error, Fallocate, FileKind, RenameMode, Store, XattrSet, ROOT_INO};

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 256,
            checkpoint_period: None,
            ..JournalConfig::test_min()
        },
        ..StoreConfig::default()
    }
}

fn reopen(region: &SimRegion, host: &SimHostFs, cfg: &StoreConfig) -> store::Result<SimStore> {
    reopen_media(region, host, cfg).map(|(_, _, s)| s)
}

fn unsupported<T: std::fmt::Debug>(r: store::Result<T>, what: &str) {
    match r {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("version 1"), "{what}: {msg}"),
        other => panic!("{what} on a version 1 store: {other:?}"),
    }
}

/// What the previous build wrote (version 1 records only) opens, keeps working and stays
/// version 1: the calls that need Node or Xattr records answer Unsupported and change
/// nothing; rename modes and unnamed files need none and work.
#[test]
fn a_version_1_store_opens_and_refuses_only_the_new_records() {
    let cfg = config();
    let (region, host, s) = new_store(&cfg, MetaFormat::V1);
    write_file(&s, "/a", b"A", None).unwrap();
    write_file(&s, "/b", b"B", None).unwrap();
    drop(s);
    let (region, host, s) = reopen_media(&region, &host, &cfg).unwrap();
    unsupported(s.symlink(ROOT_INO, b"l", b"a", None), "symlink");
    unsupported(
        s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o600, 0, None),
        "mknod",
    );
    let a = s.lookup(ROOT_INO, b"a").unwrap().ino;
    unsupported(
        s.setxattr(a, b"user.x", b"1", XattrSet::Either, None),
        "setxattr",
    );
    unsupported(s.getxattr(a, b"user.x"), "getxattr");
    unsupported(s.listxattr(a), "listxattr");
    assert!(s.lookup(ROOT_INO, b"l").is_err() && s.lookup(ROOT_INO, b"p").is_err());
    s.rename_with(ROOT_INO, b"a", ROOT_INO, b"b", RenameMode::Exchange, None)
        .unwrap();
    assert_eq!(read_file(&s, "/a").unwrap(), b"B");
    let (m, fh) = s.tmpfile(ROOT_INO, 0o600, RW, None).unwrap();
    s.write(fh, 0, b"published").unwrap();
    s.link(m.ino, ROOT_INO, b"t", None).unwrap();
    // A punch zeroes the bytes; a version 1 log cannot record the freed blocks.
    s.write(fh, 0, &[7; 16384]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 0, 8192).unwrap();
    assert_eq!(s.fstat(fh).unwrap().allocated, 16384);
    s.release(fh).unwrap();
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg).unwrap();
    assert_eq!(read_file(&s, "/a").unwrap(), b"B");
    assert_eq!(read_file(&s, "/b").unwrap(), b"A");
    let t = read_file(&s, "/t").unwrap();
    assert_eq!((&t[..8192], &t[8192..]), (&[0; 8192][..], &[7; 8192][..]));
    unsupported(
        s.symlink(ROOT_INO, b"l", b"a", None),
        "symlink after a reopen",
    );
    clean(&s);
}

/// A metadata log header of a version this build does not know is refused, naming it.
#[test]
fn a_newer_metadata_log_is_refused_by_name() {
    let cfg = config();
    let (region, host, s) = new_store(&cfg, MetaFormat::V2);
    write_file(&s, "/f", b"x", None).unwrap();
    let mut header = vec![0u8; 4096];
    header[0..8].copy_from_slice(b"ATFSJMET");
    header[8..12].copy_from_slice(&3u32.to_le_bytes());
    header[16..24].copy_from_slice(&8192u64.to_le_bytes());
    let crc = pmem::crc::crc32c(&header[0..24]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    let mut tx = Tx::new();
    tx.put_block(BlockKey { file: 0, block: 0 }, &header);
    s.journal().commit(tx).unwrap();
    drop(s);
    match reopen(&region, &host, &cfg) {
        Err(Error::Corrupt { what, .. }) => {
            assert!(what.contains("version 3 is newer"), "{what}")
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a version 3 metadata log opened"),
    }
}

/// The attribute bytes of one inode stop at `xattr_bytes_max` with ENOSPC; removing one
/// makes room; `limits()` names the maximum.
#[test]
fn xattr_bytes_per_inode_stop_at_their_maximum() {
    let cfg = StoreConfig {
        xattr_bytes_max: 100,
        ..config()
    };
    let (region, host, s) = new_store(&cfg, MetaFormat::V2);
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap().ino;
    s.setxattr(f, b"user.a", &[1; 60], XattrSet::Either, None)
        .unwrap();
    // 6 + 60 held; 6 + 40 more is past 100.
    assert!(matches!(
        s.setxattr(f, b"user.b", &[2; 40], XattrSet::Either, None),
        Err(Error::NoSpace(_))
    ));
    // Replacing counts the new value instead of the old one.
    s.setxattr(f, b"user.a", &[3; 94], XattrSet::Replace, None)
        .unwrap();
    assert!(s
        .setxattr(f, b"user.a", &[3; 95], XattrSet::Replace, None)
        .is_err());
    s.removexattr(f, b"user.a", None).unwrap();
    s.setxattr(f, b"user.b", &[2; 40], XattrSet::Either, None)
        .unwrap();
    let l = limit(&s, "extended attribute bytes per inode");
    assert_eq!((l.max, l.error), (100, "ENOSPC"));
    // Every inode has its own allowance.
    let g = s.create(ROOT_INO, b"g", 0o644, None).unwrap().ino;
    s.setxattr(g, b"user.a", &[1; 90], XattrSet::Either, None)
        .unwrap();
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg).unwrap();
    assert_eq!(s.listxattr(f).unwrap(), vec![b"user.b".to_vec()]);
    assert_eq!(s.getxattr(g, b"user.a").unwrap(), vec![1; 90]);
}

/// Punched blocks leave `allocated` (and come back with writes), are kept across a crash,
/// and stop at their range maximum: a punch past it still zeroes the bytes.
#[test]
fn punched_blocks_are_counted_kept_and_bounded() {
    let cfg = config();
    let (region, host, s) = new_store(&cfg, MetaFormat::V2);
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap().ino;
    let fh = s.open(f, RW).unwrap();
    let blocks = 64u64;
    s.write(fh, 0, &vec![9; (blocks * 4096) as usize]).unwrap();
    let full = s.fstat(fh).unwrap().allocated;
    assert_eq!(full, blocks * 4096);
    let ranges = limit(&s, "punched block ranges per file").max;
    // Every other block: one range each, up to the maximum.
    for i in 0..ranges {
        s.fallocate(fh, Fallocate::PunchHole, i * 2 * 4096, 4096)
            .unwrap();
    }
    let punched = s.fstat(fh).unwrap().allocated;
    assert_eq!(punched, full - ranges * 4096);
    s.fallocate(fh, Fallocate::PunchHole, 60 * 4096, 4096)
        .unwrap();
    assert_eq!(
        s.fstat(fh).unwrap().allocated,
        punched,
        "one range too many"
    );
    let mut buf = vec![1u8; 4096];
    s.read(fh, 60 * 4096, &mut buf).unwrap();
    assert_eq!(buf, vec![0; 4096], "the bytes are zeros all the same");
    // A write into a punched block gives it storage again.
    s.write(fh, 0, b"x").unwrap();
    assert_eq!(s.fstat(fh).unwrap().allocated, punched + 4096);
    // An aborted punch changes nothing.
    let tx = s.tx_begin(&[fh]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 0, 4096).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(s.fstat(fh).unwrap().allocated, punched + 4096);
    let statfs = s.statfs().unwrap();
    s.fsync(fh, false).unwrap();
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg).unwrap();
    let m = s.getattr(f).unwrap();
    assert_eq!((m.size, m.allocated), (blocks * 4096, punched + 4096));
    assert_eq!(s.statfs().unwrap().blocks_free, statfs.blocks_free);
    // Truncating drops the ranges past the end (blocks 2 and 4..64 were punched or cut).
    let fh = s.open(f, RW).unwrap();
    s.set_len(fh, 4 * 4096).unwrap();
    assert_eq!(s.fstat(fh).unwrap().allocated, 3 * 4096);
    clean(&s);
}

/// A long-running store compacts its metadata log into one snapshot: links, special files,
/// attributes and punched blocks come through it and through a reopen.
#[test]
fn a_compacted_log_keeps_links_nodes_and_attributes() {
    let cfg = StoreConfig {
        log_compact_min: 8 << 10,
        ..config()
    };
    let (region, host, s) = new_store(&cfg, MetaFormat::V2);
    s.symlink(ROOT_INO, b"l", b"target/of/the/link", None)
        .unwrap();
    let dev = s
        .mknod(ROOT_INO, b"sda", FileKind::BlockDevice, 0o660, 0x800, None)
        .unwrap();
    s.setxattr(dev.ino, b"trusted.t", b"on a node", XattrSet::Create, None)
        .unwrap();
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap().ino;
    let fh = s.open(f, RW).unwrap();
    s.write(fh, 0, &[5; 5 * 4096]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 4096, 8192).unwrap();
    let log = |s: &SimStore| {
        s.stats()
            .into_iter()
            .find(|(k, _)| k == "metadata_log_bytes")
            .unwrap()
            .1
    };
    let start = log(&s);
    for i in 0..300u32 {
        let v = format!("value {i}");
        s.setxattr(f, b"user.counter", v.as_bytes(), XattrSet::Either, None)
            .unwrap();
    }
    // 300 commits of an Inode and an Xattr record each are well over 30 KiB of log.
    let now = log(&s);
    assert!(
        now < 16 << 10,
        "the log was not compacted: {start} -> {now} bytes"
    );
    s.release(fh).unwrap();
    clean(&s);
    drop(s);
    let s = reopen(&region, &host, &cfg).unwrap();
    let l = s.lookup(ROOT_INO, b"l").unwrap();
    assert_eq!(s.readlink(l.ino).unwrap(), b"target/of/the/link");
    let dev = s.lookup(ROOT_INO, b"sda").unwrap();
    assert_eq!((dev.kind, dev.rdev), (FileKind::BlockDevice, 0x800));
    assert_eq!(s.getxattr(dev.ino, b"trusted.t").unwrap(), b"on a node");
    assert_eq!(s.getxattr(f, b"user.counter").unwrap(), b"value 299");
    assert_eq!(s.getattr(f).unwrap().allocated, 3 * 4096);
    clean(&s);
}

/// A link of an unnamed file in a transaction that aborts leaves it unnamed and linkable;
/// a file whose last name went is not.
#[test]
fn an_aborted_link_leaves_the_unnamed_file_linkable() {
    let cfg = config();
    let (_region, _host, s) = new_store(&cfg, MetaFormat::V2);
    let (m, fh) = s.tmpfile(ROOT_INO, 0o600, RW, None).unwrap();
    s.write(fh, 0, b"staged").unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.link(m.ino, ROOT_INO, b"first", Some(tx)).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(s.getattr(m.ino).unwrap().nlink, 0);
    s.link(m.ino, ROOT_INO, b"second", None).unwrap();
    s.unlink(ROOT_INO, b"second", None).unwrap();
    assert!(matches!(
        s.link(m.ino, ROOT_INO, b"third", None),
        Err(Error::NotFound(_))
    ));
    s.release(fh).unwrap();
    assert!(s.getattr(m.ino).is_err(), "released with no name: freed");
    clean(&s);
}

/// Append raw `records` to the metadata log of `s` (as a corrupt or hostile log would hold
/// them), in one journal commit with the header's new length.
fn append_records(s: &SimStore, records: &[journal::meta_log::Record]) {
    use journal::meta_log::{header_block, parse_header};
    let j = s.journal();
    let mut header = vec![0u8; 4096];
    j.read(None, 0, 0, &mut header).unwrap();
    let (format, len) = parse_header(&header).unwrap().unwrap();
    let mut bytes = Vec::new();
    for r in records {
        r.encode(&mut bytes);
    }
    let mut tx = Tx::new();
    j.write(&mut tx, 0, len, &bytes, Some(len)).unwrap();
    tx.put_block(
        BlockKey { file: 0, block: 0 },
        &header_block(format, len + bytes.len() as u64),
    );
    j.commit(tx).unwrap();
}

/// A log holding what the calls never write: fsck names it, or open refuses it as corrupt
/// (never a panic).
#[test]
fn hostile_records_are_found_by_fsck_or_refused_at_open() {
    use journal::meta_log::Record;
    let cfg = config();
    let (region, host, s) = new_store(&cfg, MetaFormat::V2);
    let f = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    s.setxattr(f.ino, b"user.a", &[1; 90], XattrSet::Either, None)
        .unwrap();
    let fifo = s
        .mknod(ROOT_INO, b"p", FileKind::Fifo, 0o600, 0, None)
        .unwrap();
    append_records(
        &s,
        &[
            Record::Xattr {
                ino: f.ino,
                name: b"os2.bad".to_vec(),
                value: b"x".to_vec(),
            },
            Record::Inode {
                meta: store::Metadata { rdev: 9, ..fifo },
                parent: 0,
                target: vec![],
                punched: vec![],
            },
        ],
    );
    drop(s);
    // A smaller attribute allowance than the store was written with is reported too.
    let small = StoreConfig {
        xattr_bytes_max: 50,
        ..cfg.clone()
    };
    let (region, host, s) = reopen_media(&region, &host, &small).unwrap();
    let report = s.fsck().unwrap();
    let problems = format!("{:?}", report.problems);
    for want in ["os2.bad", "device number", "past the 50"] {
        assert!(problems.contains(want), "{want} not in {problems}");
    }
    // An attribute of an inode that does not exist, a link whose size is not its target's.
    for bad in [
        Record::Xattr {
            ino: 999,
            name: b"user.x".to_vec(),
            value: vec![],
        },
        Record::Inode {
            meta: store::Metadata {
                kind: FileKind::Symlink,
                size: 3,
                ..fifo
            },
            parent: 0,
            target: b"four".to_vec(),
            punched: vec![],
        },
    ] {
        let (r, h, s) = reopen_media(&region, &host, &cfg).unwrap();
        append_records(&s, std::slice::from_ref(&bad));
        drop(s);
        match reopen(&r, &h, &cfg) {
            Err(Error::Corrupt { what, .. }) => assert!(what.contains("metadata log"), "{what}"),
            Err(e) => panic!("{bad:?}: another error: {e}"),
            Ok(_) => panic!("{bad:?}: opened"),
        }
    }
}
