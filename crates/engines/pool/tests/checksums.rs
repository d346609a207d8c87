//! Data checksums (docs/format.md, "Data checksums"): every mode keeps the crc32c in each
//! file block's pointer right through hole fills, overwrites, checkpoints, truncates and
//! aborts; a corrupted data block fails the read with EIO and is named by fsck; a
//! checkpoint or in-place write never turns a corrupted block into a checksummed one;
//! repair reports the block and leaves its bytes alone; the superblock says which format
//! a pool has.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pmem::Region;
use pool::{Mode, PoolConfig, PoolStore};
use store::{OpenOptions, Store};

const BLOCK: u64 = 4096;
const EIO: i32 = 5;

fn cfg(mode: Mode) -> PoolConfig {
    PoolConfig {
        metadata_log_entries: 1024,
        data_log_entries: 256,
        ..PoolConfig::test_min().with_mode(mode)
    }
    .with_data_checksums(true)
}

fn write_model(model: &mut Vec<u8>, off: usize, data: &[u8]) {
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

fn checked_blocks(s: &PoolStore<pmem::DramRegion>) -> u64 {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    report
        .checked
        .iter()
        .find(|(name, _)| name == "data checksums verified")
        .map(|(_, n)| *n)
        .unwrap()
}

/// Every write path of every mode, and a recovery, leave every crc right: the reads pass
/// their checks and fsck, which checks every permanent block, is clean.
#[test]
fn every_mode_keeps_every_block_checksum_right() {
    for mode in Mode::ALL {
        let cfg = cfg(mode);
        let s = fresh(&cfg);
        let mut model = pattern(1, 5 * BLOCK as usize + 100);
        create_with(&s, "/a", &model);
        let fh = open_rw(&s, "/a");
        for (i, (off, len)) in [
            (10, 50),
            (4000, 300),
            (8192, 4096),
            (100, 7000),
            (12_000, 3),
        ]
        .into_iter()
        .enumerate()
        {
            let data = pattern(10 + i as u64, len);
            s.write(fh, off as u64, &data).unwrap();
            write_model(&mut model, off, &data);
        }
        // An aborted transaction's in-place writes and hole fills are undone, crcs with them.
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 300, &pattern(30, 2000)).unwrap();
        s.write(fh, 40_000, &pattern(31, 500)).unwrap();
        s.tx_abort(tx).unwrap();
        // A committed one with several writes to one block.
        let tx = s.tx_begin(&[fh]).unwrap();
        for k in 0..4 {
            let data = pattern(40 + k, 200);
            s.write(fh, 4096 + 700 * k, &data).unwrap();
            write_model(&mut model, 4096 + 700 * k as usize, &data);
        }
        s.tx_commit(tx).unwrap();
        // Truncate into a block (its tail zeroed), then extend past a hole.
        s.set_len(fh, 3 * BLOCK + 10).unwrap();
        model.truncate(3 * BLOCK as usize + 10);
        s.write(fh, 7 * BLOCK + 5, b"tail").unwrap();
        write_model(&mut model, 7 * BLOCK as usize + 5, b"tail");
        let what = mode.name();
        assert_eq!(read_path(&s, "/a"), model, "{what}");
        assert!(checked_blocks(&s) >= 4, "{what}");
        s.checkpoint_all().unwrap();
        assert_eq!(read_path(&s, "/a"), model, "{what} after checkpoint");
        assert!(checked_blocks(&s) >= 4, "{what}");
        s.release(fh).unwrap();
        let again = crash_copy(&s, &cfg);
        assert_eq!(read_path(&again, "/a"), model, "{what} after recovery");
        assert!(checked_blocks(&again) >= 4, "{what}");
    }
}

/// Flip one byte of a permanent data block: the read of that block fails with EIO, the
/// other blocks still read, fsck names the inode, offset and block; later writes to the
/// block and a checkpoint keep it failing (the corruption is never checksummed over).
#[test]
fn a_flipped_byte_fails_the_read_with_eio_and_fsck_names_it() {
    for mode in Mode::ALL {
        let what = mode.name();
        let s = fresh(&cfg(mode));
        let data = pattern(2, 3 * BLOCK as usize);
        create_with(&s, "/f", &data);
        s.checkpoint_all().unwrap();
        let ino = store::resolve(&s, "/f").unwrap().ino;
        let map = s.block_map(ino).unwrap();
        let &(_, pbn) = map.blocks.iter().find(|(lbn, _)| *lbn == 1).unwrap();
        let at = s.superblock().geometry.block(pbn) + 100;
        let mut byte = [0u8; 1];
        s.region().read(at, &mut byte);
        s.region().write(at, &[byte[0] ^ 0x20]);

        let fh = open_rw(&s, "/f");
        let mut buf = vec![0u8; 64];
        let err = s.read(fh, BLOCK + 3000, &mut buf).unwrap_err();
        assert_eq!(err.errno(), EIO, "{what}: {err}");
        assert!(err.to_string().contains(&format!("inode {ino}")), "{err}");
        assert_eq!(
            s.read(fh, 10, &mut buf).unwrap(),
            64,
            "{what}: block 0 reads"
        );
        let report = s.fsck().unwrap();
        assert_eq!(report.problems.len(), 1, "{what}: {:?}", report.problems);
        let problem = &report.problems[0];
        assert!(
            problem
                .what
                .contains(&format!("inode {ino} at offset {BLOCK}")),
            "{what}: {}",
            problem.what
        );
        assert!(
            problem.location.contains(&format!("block {pbn}")),
            "{what}: {}",
            problem.location
        );

        s.write(fh, BLOCK + 2000, &[7u8; 10]).unwrap();
        s.checkpoint_all().unwrap();
        let err = s.read(fh, BLOCK, &mut buf).unwrap_err();
        assert_eq!(
            err.errno(),
            EIO,
            "{what}: still failing after a write: {err}"
        );
        assert!(!s.fsck().unwrap().is_clean(), "{what}");
        // A write of the whole block replaces every byte: the block is good again.
        let fresh_block = pattern(9, BLOCK as usize);
        s.write(fh, BLOCK, &fresh_block).unwrap();
        s.checkpoint_all().unwrap();
        let mut back = vec![0u8; BLOCK as usize];
        s.read(fh, BLOCK, &mut back).expect(what);
        assert_eq!(back, fresh_block, "{what}");
        assert!(s.fsck().unwrap().is_clean(), "{what}");
        s.release(fh).unwrap();
    }
}

/// `fsck --repair` cannot know a corrupted block's bytes: it leaves them and the pointer
/// alone and reports the mismatch among the problems left.
#[test]
fn repair_reports_a_corrupted_block_and_leaves_it() {
    let cfg = cfg(Mode::Fcfs);
    let s = fresh(&cfg);
    create_with(&s, "/f", &pattern(3, 2 * BLOCK as usize));
    s.checkpoint_all().unwrap();
    let ino = store::resolve(&s, "/f").unwrap().ino;
    let pbn = s.block_map(ino).unwrap().blocks[0].1;
    let at = s.superblock().geometry.block(pbn);
    s.region().write(at, b"X");
    s.unmount().unwrap();
    let img = image(s.region());
    let region = std::sync::Arc::new(pmem::DramRegion::from_bytes(&img));
    let report = pool::repair(region.clone(), &cfg).unwrap();
    assert!(report.quarantined.is_empty(), "{report:?}");
    assert_eq!(report.remaining.len(), 1, "{report:?}");
    assert!(report.remaining[0].contains("data checksum mismatch"));
    let after = image(&region);
    assert_eq!(
        after[at as usize], b'X',
        "the block's bytes are left as they are"
    );
}

/// A pool without checksums is format version 3 (flag: the POSIX records); a checksummed
/// one is version 4 with the checksum flag too, so that a build knowing only versions 1
/// and 3 refuses it; a version-4 superblock without the checksum flag is refused.
#[test]
fn the_superblock_says_which_format_a_pool_has() {
    let word32 = |s: &PoolStore<pmem::DramRegion>, at: u64| {
        let mut b = [0u8; 4];
        s.region().read(at, &mut b);
        u32::from_le_bytes(b)
    };
    let plain = fresh(&PoolConfig::test_min());
    assert_eq!((word32(&plain, 8), word32(&plain, 92)), (3, 2));
    assert!(!plain.superblock().data_checksums);
    let summed = fresh(&cfg(Mode::Fcfs));
    assert_eq!((word32(&summed, 8), word32(&summed, 92)), (4, 3));
    assert!(summed.superblock().data_checksums);
    assert_eq!(summed.superblock().format_version, 4);
    // The flag cleared (and the superblock's crc made to match): refused, not read as a
    // pool whose pointers are plain block numbers.
    let mut img = image(summed.region());
    img[92..96].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32c::crc32c(&img[..96]);
    img[96..100].copy_from_slice(&crc.to_le_bytes());
    let region = std::sync::Arc::new(pmem::DramRegion::from_bytes(&img));
    assert!(PoolStore::open(region, &PoolConfig::test_min()).is_err());
    // The checksummed pool reopens as one whatever the caller's configuration says.
    let again = crash_copy(&summed, &PoolConfig::test_min());
    assert!(again.superblock().data_checksums);
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&again, "/x", None)
        .unwrap();
    again.write(fh, 0, b"hello").unwrap();
    again.release(fh).unwrap();
    assert_eq!(read_path(&again, "/x"), b"hello");
    assert!(again.fsck().unwrap().is_clean());
}

/// A redo write that covers every line of a block but starts and ends inside a line
/// completes its edge lines from the permanent block: when that block is corrupted (here
/// in the first line, outside the written bytes), the checkpoint must not checksum the
/// corrupt bytes into the new block.
#[test]
fn a_partial_edge_line_never_launders_a_corrupted_block() {
    for mode in [Mode::Fcfs, Mode::Soc, Mode::Sync] {
        let what = mode.name();
        let s = fresh(&cfg(mode));
        create_with(&s, "/f", &pattern(4, 2 * BLOCK as usize));
        s.checkpoint_all().unwrap();
        let ino = store::resolve(&s, "/f").unwrap().ino;
        let &(_, pbn) = s
            .block_map(ino)
            .unwrap()
            .blocks
            .iter()
            .find(|(lbn, _)| *lbn == 1)
            .unwrap();
        let at = s.superblock().geometry.block(pbn) + 5;
        s.region().write(at, b"!");
        let fh = open_rw(&s, "/f");
        s.write(fh, BLOCK + 10, &pattern(5, BLOCK as usize - 20))
            .unwrap();
        s.checkpoint_all().unwrap();
        let mut buf = vec![0u8; 16];
        let err = s.read(fh, BLOCK, &mut buf).unwrap_err();
        assert_eq!(err.errno(), EIO, "{what}: {err}");
        assert!(!s.fsck().unwrap().is_clean(), "{what}");
        s.release(fh).unwrap();
    }
}
