//! The comparison modes' own undo: FG-WAL's cache-line undo log (line undo entries and undo
//! blocks: written before the in-place writes, freed after the commit point, applied by
//! abort and recovery, torn entries told apart by their crc) and NC's DRAM-only undo for
//! aborts (nothing written to the log areas).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pmem::{DramRegion, Region};
use pool::{LogEntryInfo, Mode, PoolConfig, PoolStore};
use store::{Error, Fh, OpenOptions, Store, ROOT_INO};

/// A fresh pool with files /a and /b holding `a` and `b`, both open read-write.
fn two_files(cfg: &PoolConfig, a: &[u8], b: &[u8]) -> (PoolStore<DramRegion>, Fh, Fh) {
    let s = fresh(cfg);
    create_with(&s, "/a", a);
    create_with(&s, "/b", b);
    let (fa, fb) = (open_rw(&s, "/a"), open_rw(&s, "/b"));
    (s, fa, fb)
}

fn fg_wal() -> PoolConfig {
    PoolConfig::test_min().with_mode(Mode::FgWal)
}

fn lines_entries(s: &PoolStore<DramRegion>) -> Vec<LogEntryInfo> {
    s.log_entries()
        .into_iter()
        .filter(|e| e.kind == "lines")
        .collect()
}

fn field(e: &LogEntryInfo, name: &str) -> u64 {
    e.fields.iter().find(|(k, _)| k == name).unwrap().1
}

/// Overwrites inside a transaction: partial edge lines, two writes over the same lines, a
/// write across a block boundary, and a write past the end (fresh block, nothing saved).
fn overwrite_in_tx(s: &PoolStore<DramRegion>, fa: Fh, fb: Fh) -> store::TxId {
    let tx = s.tx_begin(&[fa, fb]).unwrap();
    s.write(fa, 100, &pattern(3, 300)).unwrap();
    s.write(fa, 200, &pattern(4, 5000)).unwrap();
    s.write(fb, 4090, &pattern(5, 20)).unwrap();
    s.write(fb, 12_288, b"past the end").unwrap();
    tx
}

#[test]
fn fg_wal_saves_each_line_once_and_abort_restores_it() {
    let (a0, b0) = (pattern(1, 9000), pattern(2, 8192));
    let (s, fa, fb) = two_files(&fg_wal(), &a0, &b0);
    let free_before = s.statfs().unwrap().blocks_free;
    let tx = overwrite_in_tx(&s, fa, fb);
    let entries = lines_entries(&s);
    // /a: block 0 lines 1..=6 (first write), then lines 3..=63 of block 0 less the four
    // already saved, and lines 0..=17 of block 1 (second write); /b: the last line of
    // block 0 and the first of block 1. Nothing for the block past the end.
    let saved: Vec<u64> = entries.iter().map(|e| field(e, "bitmap")).collect();
    assert_eq!(entries.len(), 5, "{entries:?}");
    assert_eq!(
        saved.iter().map(|b| b.count_ones()).sum::<u32>(),
        6 + 57 + 18 + 1 + 1
    );
    for pair in entries.windows(2) {
        let same_target = field(&pair[0], "target_pbn") == field(&pair[1], "target_pbn");
        assert!(!same_target || field(&pair[0], "bitmap") & field(&pair[1], "bitmap") == 0);
    }
    // Undo blocks (one per target block) and the block past the end are allocated.
    assert_eq!(s.statfs().unwrap().blocks_free, free_before - 4 - 1);
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/a"), a0);
    assert_eq!(read_path(&s, "/b"), b0);
    assert!(lines_entries(&s).is_empty());
    assert_eq!(s.statfs().unwrap().blocks_free, free_before);
    assert_eq!(s.log_occupancy().data_entries_used, 0);
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

#[test]
fn fg_wal_commit_frees_its_entries_and_undo_blocks() {
    let cfg = fg_wal();
    let (s, fa, fb) = two_files(&cfg, &pattern(1, 9000), &pattern(2, 8192));
    let free_before = s.statfs().unwrap().blocks_free;
    let tx = overwrite_in_tx(&s, fa, fb);
    s.tx_commit(tx).unwrap();
    let mut a1 = pattern(1, 9000);
    a1[100..400].copy_from_slice(&pattern(3, 300));
    a1[200..5200].copy_from_slice(&pattern(4, 5000));
    assert_eq!(read_path(&s, "/a"), a1);
    assert!(lines_entries(&s).is_empty(), "{:?}", s.log_entries());
    assert!(s.log_entries().is_empty(), "{:?}", s.log_entries());
    // Only the block past the end of /b stays allocated.
    assert_eq!(s.statfs().unwrap().blocks_free, free_before - 1);
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    let after = crash_copy(&s, &cfg);
    assert_eq!(read_path(&after, "/a"), a1);
    assert_eq!(after.last_recovery().line_records_applied, 0);
}

#[test]
fn fg_wal_recovery_rolls_back_an_open_transaction_once() {
    let cfg = fg_wal();
    let (a0, b0) = (pattern(1, 9000), pattern(2, 8192));
    let (s, fa, fb) = two_files(&cfg, &a0, &b0);
    let _open = overwrite_in_tx(&s, fa, fb);
    // Before recovery, fsck of the open store knows the entries and their undo blocks.
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    // Recovered in FG-WAL mode and, from the same image, in FCFS mode: recovery does not
    // depend on the mode the pool is opened in.
    for mode in [Mode::FgWal, Mode::Fcfs] {
        let after = crash_copy(&s, &cfg.clone().with_mode(mode));
        let report = after.last_recovery();
        assert_eq!(report.line_records_applied, 5, "{report:?}");
        assert!(
            report.undone_txs >= 1 && report.torn_entries == 0,
            "{report:?}"
        );
        assert_eq!(read_path(&after, "/a"), a0);
        assert_eq!(read_path(&after, "/b"), b0);
        assert!(after.log_entries().is_empty());
        assert!(after.fsck().unwrap().is_clean(), "{:?}", after.fsck());
        let twice = crash_copy(&after, &cfg);
        assert_eq!(twice.last_recovery().line_records_applied, 0);
        assert_eq!(read_path(&twice, "/a"), a0);
    }
}

/// A line undo entry whose saved lines no longer match its crc is a torn entry (its lines
/// never all reached the media): recovery frees it without copying anything back, and an
/// fsck of the image before recovery names it.
#[test]
fn fg_wal_entry_with_bad_saved_lines_is_torn() {
    let cfg = fg_wal();
    let s = fresh(&cfg);
    let a0 = pattern(1, 4096);
    create_with(&s, "/a", &a0);
    let fa = open_rw(&s, "/a");
    let _open = s.tx_begin(&[fa]).unwrap();
    s.write(fa, 0, &[9u8; 128]).unwrap();
    let entries = lines_entries(&s);
    assert_eq!(entries.len(), 1);
    let undo = field(&entries[0], "undo_pbn");
    let geo = s.superblock().geometry;
    let mut img = image(s.region());
    img[(geo.block(undo) + 70) as usize] ^= 1;
    let region = std::sync::Arc::new(DramRegion::from_bytes(&img));
    let after = PoolStore::open(region, &cfg).unwrap();
    let report = after.last_recovery();
    assert_eq!((report.line_records_applied, report.torn_entries), (0, 1));
    // What was written in place stays (the entry cannot say what was there before).
    assert_eq!(&read_path(&after, "/a")[..128], &[9u8; 128]);
    assert!(after.fsck().unwrap().is_clean(), "{:?}", after.fsck());
    // fsck of the store before recovery sees the checksum failure.
    s.region().write(
        geo.block(undo) + 70,
        &[img[(geo.block(undo) + 70) as usize]],
    );
    let problems = s.fsck().unwrap().problems;
    assert!(
        problems.iter().any(|p| p.what.contains("checksum")),
        "{problems:?}"
    );
}

#[test]
fn fg_wal_log_full_inside_a_transaction_rolls_back_and_the_pool_stays_usable() {
    let cfg = PoolConfig {
        data_log_entries: 3,
        ..fg_wal()
    };
    let s = fresh(&cfg);
    let a0 = pattern(1, 6 * 4096);
    create_with(&s, "/a", &a0);
    let free_before = s.statfs().unwrap().blocks_free;
    let fa = open_rw(&s, "/a");
    let tx = s.tx_begin(&[fa]).unwrap();
    // Two target blocks: two of the three entries.
    s.write(fa, 10, &pattern(2, 8000)).unwrap();
    let err = s.write(fa, 4 * 4096, &pattern(3, 8192)).unwrap_err();
    assert!(matches!(err, Error::LogFull(_)), "{err:?}");
    assert_eq!(err.errno(), 28);
    assert!(matches!(s.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
    assert_eq!(read_path(&s, "/a"), a0);
    assert_eq!(s.statfs().unwrap().blocks_free, free_before);
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    s.write(fa, 0, b"usable").unwrap();
    assert_eq!(&read_path(&s, "/a")[..6], b"usable");
}

#[test]
fn nc_abort_restores_every_byte_and_name_without_a_log() {
    let (a0, b0) = (pattern(10, 9000), pattern(11, 5000));
    let (s, fa, fb) = two_files(&PoolConfig::test_min().with_mode(Mode::Nc), &a0, &b0);
    let tx = change_everything(&s, fa, fb);
    // NC writes in place and logs nothing.
    assert!(s.log_entries().is_empty(), "{:?}", s.log_entries());
    assert_eq!(
        read_path(&s, "/b2"),
        [&b0[..3], b"xyz", &b0[6..10]].concat()
    );
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/a"), a0);
    assert_eq!(read_path(&s, "/b"), b0);
    assert!(s.lookup(ROOT_INO, b"new").is_err() && s.lookup(ROOT_INO, b"b2").is_err());
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

/// syncv in NC merges O_ATOMIC transactions; the slots reserved for member entries (which
/// NC never writes) go back, and an abortv restores the bytes.
#[test]
fn nc_atomic_files_syncv_and_abortv() {
    let cfg = PoolConfig::test_min().with_mode(Mode::Nc);
    let s = fresh(&cfg);
    create_with(&s, "/a", &pattern(1, 5000));
    create_with(&s, "/b", &pattern(2, 5000));
    let atomic = |path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .atomic(true)
            .open(&s, path, None)
            .unwrap()
    };
    let (fa, fb) = (atomic("/a"), atomic("/b"));
    for round in 0..(cfg.metadata_log_entries + 4) {
        s.write(fa, 0, &round.to_le_bytes()).unwrap();
        s.write(fb, 8, &round.to_le_bytes()).unwrap();
        s.syncv(&[fa, fb]).unwrap();
    }
    assert_eq!(s.log_occupancy().metadata_entries_used, 0);
    let (a1, b1) = (read_path(&s, "/a"), read_path(&s, "/b"));
    s.write(fa, 0, &pattern(3, 4000)).unwrap();
    s.set_len(fb, 3).unwrap();
    s.abortv(&[fa, fb]).unwrap();
    assert_eq!(read_path(&s, "/a"), a1);
    assert_eq!(read_path(&s, "/b"), b1);
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

/// A pool left with committed versions by FCFS (no checkpoint ran) and opened in a mode that
/// writes under the block pointer: the versions are applied at open, so the mode's writes
/// are not hidden behind them.
#[test]
fn in_place_modes_apply_versions_an_fcfs_run_left() {
    let fcfs = PoolConfig::test_min();
    let (s, fa, _) = two_files(&fcfs, &pattern(1, 8192), &pattern(2, 100));
    s.write(fa, 64, &[7u8; 256]).unwrap();
    assert!(!s.pending_lists(None).unwrap().is_empty());
    for mode in [Mode::Nc, Mode::FgWal, Mode::Scsp] {
        let other = crash_copy(&s, &fcfs.clone().with_mode(mode));
        assert!(other.pending_lists(None).unwrap().is_empty(), "{mode:?}");
        let f = open_rw(&other, "/a");
        other.write(f, 0, &[9u8; 1024]).unwrap();
        let mut want = pattern(1, 8192);
        want[..1024].fill(9);
        assert_eq!(read_path(&other, "/a"), want, "{mode:?}");
        assert!(other.fsck().unwrap().is_clean(), "{:?}", other.fsck());
    }
}
