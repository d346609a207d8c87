//! Multi-file transactions, aborts, legacy auto-commit, O_ATOMIC, reopen after a clean
//! unmount and after an unclean stop, checkpointing, log-full rollback.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pool::PoolConfig;
use std::sync::Arc;
use store::{Error, OpenOptions, Store, ROOT_INO};

#[test]
fn multi_file_commit_and_abort_restore_every_byte_and_name() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    let (a0, b0) = (pattern(10, 9000), pattern(11, 5000));
    create_with(&s, "/a", &a0);
    create_with(&s, "/b", &b0);
    let (fa, fb) = (open_rw(&s, "/a"), open_rw(&s, "/b"));
    // Abort: writes, extension, truncate, create, rename, unlink all vanish.
    let tx = change_everything(&s, fa, fb);
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/a"), a0);
    assert_eq!(read_path(&s, "/b"), b0);
    assert!(s.lookup(ROOT_INO, b"new").is_err() && s.lookup(ROOT_INO, b"b2").is_err());
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    // Commit: the same set of changes all appear, and survive an unclean stop.
    let tx = s.tx_begin(&[fa]).unwrap();
    s.tx_add(tx, fb).unwrap();
    let pa = pattern(13, 5000);
    s.write(fa, 100, &pa).unwrap();
    s.set_len(fb, 10).unwrap();
    s.create(ROOT_INO, b"new", 0o644, Some(tx)).unwrap();
    s.rename(ROOT_INO, b"b", ROOT_INO, b"b2", Some(tx)).unwrap();
    s.tx_commit(tx).unwrap();
    let mut a1 = a0.clone();
    a1[100..5100].copy_from_slice(&pa);
    for store_ in [&s, &crash_copy(&s, &cfg)] {
        assert_eq!(read_path(store_, "/a"), a1);
        assert_eq!(read_path(store_, "/b2"), &b0[..10]);
        assert!(store_.lookup(ROOT_INO, b"new").is_ok() && store_.lookup(ROOT_INO, b"b").is_err());
        assert!(store_.fsck().unwrap().is_clean(), "{:?}", store_.fsck());
    }
}

#[test]
fn uncommitted_transaction_is_gone_after_an_unclean_stop() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    let a0 = pattern(20, 12_000);
    create_with(&s, "/a", &a0);
    let fa = open_rw(&s, "/a");
    let tx = s.tx_begin(&[fa]).unwrap();
    s.write(fa, 50, &pattern(21, 9000)).unwrap();
    s.write(fa, 30_000, b"past the end").unwrap();
    s.mkdir(ROOT_INO, b"d", 0o755, Some(tx)).unwrap();
    s.unlink(ROOT_INO, b"a", Some(tx)).unwrap();
    let after = crash_copy(&s, &cfg);
    let report = after.last_recovery();
    assert!(
        report.undone_txs >= 1 && report.undo_entries_applied > 0,
        "{report:?}"
    );
    assert_eq!(read_path(&after, "/a"), a0);
    assert!(after.lookup(ROOT_INO, b"d").is_err());
    assert!(after.fsck().unwrap().is_clean(), "{:?}", after.fsck());
    // Recovery is idempotent: recovering the recovered image again changes nothing.
    let twice = crash_copy(&after, &cfg);
    assert_eq!(read_path(&twice, "/a"), a0);
    assert_eq!(twice.last_recovery().undone_txs, 0);
    s.tx_commit(tx).unwrap();
    assert!(s.lookup(ROOT_INO, b"a").is_err());
}

#[test]
fn reopen_after_clean_unmount_and_checkpointing() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    create_with(&s, "/f", &vec![7u8; 8192]);
    let f = open_rw(&s, "/f");
    let mut model = vec![7u8; 8192];
    // Many small overwrites of one block: the pending list is checkpointed whenever it
    // grows past pending_versions_max.
    for i in 0..40u64 {
        let off = (i * 97) % 8000;
        let data = pattern(100 + i, 64 + (i as usize * 13) % 150);
        s.write(f, off, &data).unwrap();
        model[off as usize..off as usize + data.len()].copy_from_slice(&data);
        assert_eq!(read_path(&s, "/f"), model, "after write {i}");
    }
    let stats: std::collections::HashMap<_, _> = s.stats().into_iter().collect();
    assert!(stats["checkpoints"] > 0, "{stats:?}");
    let lists = s.pending_lists(None).unwrap();
    assert!(
        lists
            .iter()
            .all(|l| l.versions.len() <= cfg.pending_versions_max + 1),
        "{lists:?}"
    );
    // An unclean stop with pending versions still outstanding keeps them.
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(read_path(&crashed, "/f"), model);
    s.release(f).unwrap();
    s.unmount().unwrap();
    assert!(matches!(s.getattr(ROOT_INO), Err(Error::Closed)));
    let reopened = pool::PoolStore::open(s.region().clone(), &cfg).unwrap();
    assert_eq!(reopened.last_recovery().redo_entries_kept, 0);
    assert_eq!(reopened.log_occupancy().data_entries_used, 0);
    assert_eq!(reopened.log_occupancy().metadata_entries_used, 0);
    assert_eq!(read_path(&reopened, "/f"), model);
    assert!(reopened.fsck().unwrap().is_clean());
}

#[test]
fn log_full_rolls_back_and_pool_stays_usable() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    let blocks = cfg.data_log_entries + 8;
    let a0 = pattern(30, (4096 * blocks) as usize);
    create_with(&s, "/a", &a0);
    let fa = open_rw(&s, "/a");
    let tx = s.tx_begin(&[fa]).unwrap();
    // Every block gets a pending version: more versions than the data log has entries.
    let mut result = Ok(0);
    for block in 0..blocks {
        result = s.write(fa, block * 4096 + 100, b"x");
        if result.is_err() {
            break;
        }
    }
    assert!(
        matches!(result, Err(Error::LogFull(_)) | Err(Error::NoSpace(_))),
        "{result:?}"
    );
    assert!(matches!(s.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
    assert_eq!(read_path(&s, "/a"), a0);
    // Usable again, and the log is empty again.
    s.write(fa, 0, b"after").unwrap();
    assert_eq!(&read_path(&s, "/a")[..5], b"after");
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
}

#[test]
fn pool_full_rolls_back() {
    let cfg = PoolConfig {
        metadata_log_entries: 2048,
        ..PoolConfig::test_min()
    };
    let s = fresh(&cfg);
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(&s, "/big", None)
        .unwrap();
    let total = s.statfs().unwrap().blocks_free;
    let _tx = s.tx_begin(&[fh]).unwrap();
    let chunk = vec![1u8; 64 * 1024];
    let mut err = None;
    for i in 0..(total / 16 + 4) {
        if let Err(e) = s.write(fh, i * chunk.len() as u64, &chunk) {
            err = Some(e);
            break;
        }
    }
    assert!(matches!(err, Some(Error::NoSpace(_))), "{err:?}");
    assert_eq!(s.fstat(fh).unwrap().size, 0);
    let bm = s.block_map(s.fstat(fh).unwrap().ino).unwrap();
    assert_eq!(
        s.statfs().unwrap().blocks_free,
        total,
        "{bm:?} {:?}",
        s.stats()
    );
    s.write(fh, 0, b"ok").unwrap();
}

#[test]
fn o_atomic_fsync_syncv_abortv() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    create_with(&s, "/x", b"xxxxxxxx");
    create_with(&s, "/y", b"yyyyyyyy");
    let ao = OpenOptions::new().read(true).write(true).atomic(true);
    let (fx, fy) = (
        ao.open(&s, "/x", None).unwrap(),
        ao.open(&s, "/y", None).unwrap(),
    );
    s.write(fx, 0, b"XX").unwrap();
    s.write(fy, 0, b"YY").unwrap();
    // Not durable before fsync: a crash drops both.
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(read_path(&crashed, "/x"), b"xxxxxxxx");
    s.fsync(fx, false).unwrap();
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(read_path(&crashed, "/x"), b"XXxxxxxx");
    assert_eq!(read_path(&crashed, "/y"), b"yyyyyyyy");
    s.abortv(&[fy]).unwrap();
    assert_eq!(read_path(&s, "/y"), b"yyyyyyyy");
    // syncv commits both files as one transaction.
    s.write(fx, 4, b"44").unwrap();
    s.write(fy, 4, b"55").unwrap();
    s.syncv(&[fx, fy]).unwrap();
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(read_path(&crashed, "/x"), b"XXxx44xx");
    assert_eq!(read_path(&crashed, "/y"), b"yyyy55yy");
    assert!(crashed.fsck().unwrap().is_clean(), "{:?}", crashed.fsck());
    // release drops what was not fsynced.
    s.write(fx, 0, b"ZZ").unwrap();
    s.release(fx).unwrap();
    assert_eq!(read_path(&s, "/x"), b"XXxx44xx");
    // A file in an O_ATOMIC transaction cannot join another one.
    s.write(fy, 0, b"Q").unwrap();
    let plain = open_rw(&s, "/y");
    assert!(matches!(
        s.tx_begin(&[plain]),
        Err(Error::FileInTransaction(_))
    ));
}

#[test]
fn concurrent_transactions_on_different_files() {
    let cfg = PoolConfig {
        open_transactions_max: 16,
        checkpoint_threads: 2,
        inode_count: 128,
        data_log_entries: 256,
        ..PoolConfig::test_min()
    };
    let s = std::sync::Arc::new(fresh(&cfg));
    for t in 0..4 {
        create_with(&*s, &format!("/t{t}a"), &vec![0u8; 16384]);
        create_with(&*s, &format!("/t{t}b"), &vec![0u8; 16384]);
    }
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let fa = open_rw(&*s, &format!("/t{t}a"));
                let fb = open_rw(&*s, &format!("/t{t}b"));
                for i in 0..50u64 {
                    let tx = s.tx_begin(&[fa, fb]).unwrap();
                    let v = (i as u8).wrapping_add(t as u8);
                    s.write(fa, (i * 331) % 12000, &[v; 700]).unwrap();
                    s.write(fb, (i * 331) % 12000, &[v; 700]).unwrap();
                    if i % 5 == 4 {
                        s.tx_abort(tx).unwrap();
                    } else {
                        s.tx_commit(tx).unwrap();
                    }
                }
                (fa, fb)
            })
        })
        .collect();
    for t in threads {
        let (fa, fb) = t.join().unwrap();
        let (a, b) = (
            store::path::read_all(&*s, fa).unwrap(),
            store::path::read_all(&*s, fb).unwrap(),
        );
        assert_eq!(a, b);
    }
    s.checkpoint_all().unwrap();
    assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    let again = crash_copy(&s, &cfg);
    for t in 0..4 {
        assert_eq!(
            read_path(&again, &format!("/t{t}a")),
            read_path(&again, &format!("/t{t}b"))
        );
    }
}

#[test]
fn background_thread_checkpoints_when_idle() {
    let cfg = PoolConfig {
        checkpoint_threads: 1,
        checkpoint_idle_ms: 20,
        ..PoolConfig::test_min()
    };
    let s = fresh(&cfg);
    create_with(&s, "/f", &vec![1u8; 12_000]);
    let f = open_rw(&s, "/f");
    s.write(f, 10, b"one").unwrap();
    s.write(f, 5000, b"two").unwrap();
    assert!(!s.pending_lists(None).unwrap().is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.pending_lists(None).unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "idle checkpoint never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut want = vec![1u8; 12_000];
    want[10..13].copy_from_slice(b"one");
    want[5000..5003].copy_from_slice(b"two");
    assert_eq!(read_path(&s, "/f"), want);
    assert_eq!(s.log_occupancy().data_entries_used, 0);
    assert!(s.fsck().unwrap().is_clean());
}

/// The writes of an explicit transaction store their data entries early (so that the commit
/// has one persistence point): while it is open they pass fsck, an unclean stop drops them,
/// an abort clears them, and a truncate inside the transaction clears those of the versions
/// it drops before their log slots are reused.
#[test]
fn early_data_entries_of_open_aborted_and_truncated_transactions() {
    let cfg = PoolConfig::test_min();
    let s = fresh(&cfg);
    let a0 = pattern(40, 16384);
    create_with(&s, "/a", &a0);
    s.checkpoint_all().unwrap();
    let fa = open_rw(&s, "/a");
    let tx = s.tx_begin(&[fa]).unwrap();
    s.write(fa, 100, &pattern(41, 9000)).unwrap();
    assert!(s.fsck().unwrap().is_clean(), "open: {:?}", s.fsck());
    // Unclean stop with the transaction open: its stored entries are dropped.
    let crashed = crash_copy(&s, &cfg);
    assert!(
        crashed.last_recovery().data_entries_dropped >= 3,
        "{:?}",
        crashed.last_recovery()
    );
    assert_eq!(read_path(&crashed, "/a"), a0);
    assert!(crashed.fsck().unwrap().is_clean(), "{:?}", crashed.fsck());
    s.tx_abort(tx).unwrap();
    assert!(s.fsck().unwrap().is_clean(), "after abort: {:?}", s.fsck());
    assert_eq!(read_path(&s, "/a"), a0);
    // Write blocks 0..3, truncate to one block inside the transaction, commit.
    let tx = s.tx_begin(&[fa]).unwrap();
    s.write(fa, 0, &pattern(42, 12000)).unwrap();
    s.set_len(fa, 4096).unwrap();
    s.write(fa, 10, &pattern(43, 10)).unwrap();
    s.tx_commit(tx).unwrap();
    let mut want = pattern(42, 4096);
    want[10..20].copy_from_slice(&pattern(43, 10));
    assert_eq!(read_path(&s, "/a"), want);
    assert!(
        s.fsck().unwrap().is_clean(),
        "after truncate: {:?}",
        s.fsck()
    );
    let crashed = crash_copy(&s, &cfg);
    assert_eq!(read_path(&crashed, "/a"), want);
    assert!(crashed.fsck().unwrap().is_clean(), "{:?}", crashed.fsck());
}

/// Threads overwriting their own files in a pool with little free space: the checkpoint
/// (background, or a writer's own when it finds too few free blocks) must make room every
/// time. A writer used to check for room, then lose it to the other writer before it
/// allocated, and fail a transaction with NoSpace although checkpointing would have freed
/// blocks (seen as "no free block for a pending version" in `atomfs bench fcfs-threads`).
#[test]
fn concurrent_overwriters_never_run_out_of_room_the_checkpoint_can_make() {
    for mode in [pool::Mode::Fcfs, pool::Mode::Soc] {
        let cfg = room_race_config(mode);
        let s = std::sync::Arc::new(fresh(&cfg));
        let file = 640 * 1024;
        for f in 0..4 {
            create_with(&*s, &format!("/f{f}"), &vec![7u8; file]);
        }
        s.checkpoint_all().unwrap();
        let free = s.statfs().unwrap();
        assert!(
            free.blocks_free * free.block_size < 2 * file as u64,
            "the pool must be nearly full for this test: {free:?}"
        );
        let threads: Vec<_> = (0..2u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let fa = open_rw(&*s, &format!("/f{}", 2 * t));
                    let fb = open_rw(&*s, &format!("/f{}", 2 * t + 1));
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                    for i in 0..3000u64 {
                        let mut next = || {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x
                        };
                        let (la, lb) = (1 + next() % 16384, 1 + next() % 16384);
                        let (oa, ob) = (next() % (file as u64 - la), next() % (file as u64 - lb));
                        let tx = s.tx_begin(&[fa, fb]).unwrap();
                        let v = [(i % 251) as u8; 16384];
                        let wrote = s
                            .write(fa, oa, &v[..la as usize])
                            .and_then(|_| s.write(fb, ob, &v[..lb as usize]))
                            .and_then(|_| s.tx_commit(tx));
                        if let Err(e) = wrote {
                            return Err(format!("{mode:?} thread {t} tx {i}: {e}"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        s.checkpoint_all().unwrap();
        assert!(s.fsck().unwrap().is_clean(), "{:?}", s.fsck());
    }
}

/// Two threads whose transactions extend files and fill holes in a pool with little free
/// space, the rest of it taken by pending versions the checkpoint can free (FCFS, SOC). Such
/// a write used to change the block-pointer tree (or allocate block by block) before it had
/// all its blocks, so when the other thread took the room `make_room` had made, it failed
/// its transaction with NoSpace: in FCFS or SOC in 10 runs of 10 on an otherwise idle
/// 2-core machine, in 3 of 10 while other programs kept both cores busy (the race needs the
/// two threads to run at the same time). It now reserves what it will allocate before it
/// changes anything and, short of room, makes room and retries as an overwrite does. Each
/// transaction overwrites part of a base file (up to 64 KiB: pending versions), appends to
/// a log file, writes past its end and writes into a sparse file; the log and sparse files
/// are truncated back now and then, so the pool is never truly full (in the modes that
/// leave nothing to checkpoint, SYNC, SCSP, FG-WAL and NC, more than 50 blocks were free
/// after every commit in the runs measured). (The files are truncated rather than deleted
/// and made again because, when this test was written, an unlinked file was not freed while
/// another thread held a transaction's lock; `PoolStore::reap` no longer looks at them.)
#[test]
fn concurrent_extenders_and_hole_fillers_never_run_out_of_room_the_checkpoint_can_make() {
    use pool::Mode;
    for mode in Mode::ALL {
        let cfg = room_race_config(mode);
        let s = Arc::new(fresh(&cfg));
        let base = 1408 * 1024;
        for t in 0..2 {
            create_with(&*s, &format!("/b{t}"), &vec![7u8; base]);
        }
        s.checkpoint_all().unwrap();
        let free = s.statfs().unwrap();
        assert!(
            free.blocks_free * free.block_size < base as u64,
            "the pool must be nearly full for this test: {free:?}"
        );
        let threads: Vec<_> = (0..2u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || extend_and_fill_holes(&*s, t, base as u64))
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap_or_else(|e| panic!("{mode:?} {e}"));
        }
        s.checkpoint_all().unwrap();
        assert!(s.fsck().unwrap().is_clean(), "{mode:?}: {:?}", s.fsck());
        let stats: std::collections::HashMap<_, _> = s.stats().into_iter().collect();
        assert_eq!(stats["aborts"], 0, "{mode:?}: {stats:?}");
        if matches!(mode, Mode::Fcfs | Mode::Soc) {
            // The writers did run short of room and made it themselves.
            assert!(stats["foreground_checkpoints"] > 0, "{mode:?}: {stats:?}");
        }
    }
}

/// One thread of `concurrent_extenders_and_hole_fillers_...`: 6,000 transactions on its
/// base file `/b{t}`, log file `/l{t}` and sparse file `/s{t}` (16 MiB long: a tree of two
/// levels, its index blocks made by the writes).
fn extend_and_fill_holes(s: &dyn Store, t: u64, base: u64) -> Result<(), String> {
    const SPARSE: u64 = 16 << 20;
    const LOG_MAX: u64 = 96 * 1024;
    let make = |path: &str, len: u64| {
        create_with(s, path, b"");
        let fh = open_rw(s, path);
        s.set_len(fh, len).unwrap();
        fh
    };
    let fb = open_rw(s, &format!("/b{t}"));
    let (fl, fs) = (make(&format!("/l{t}"), 0), make(&format!("/s{t}"), SPARSE));
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let v = vec![(t as u8) + 1; 65536];
    let mut rounds = 0;
    for i in 0..6000u64 {
        let fail = |what: &str, e: Error| format!("thread {t} tx {i} {what}: {e}");
        let tx = s.tx_begin(&[fb, fl, fs]).map_err(|e| fail("begin", e))?;
        let (lb, la, ls) = (1 + next() % 65536, 1 + next() % 16384, 1 + next() % 12288);
        let ob = next() % (base - lb);
        s.write(fb, ob, &v[..lb as usize])
            .map_err(|e| fail("overwrite", e))?;
        let size = s.fstat(fl).map_err(|e| fail("fstat", e))?.size;
        s.write(fl, size, &v[..la as usize])
            .map_err(|e| fail("append", e))?;
        // Past the end now and then (a hole between the old end and the write).
        let past = size + la + next() % 3 * 6000;
        s.write(fl, past, &v[..ls as usize / 4 + 1])
            .map_err(|e| fail("write past the end", e))?;
        let os = next() % (SPARSE - ls);
        s.write(fs, os, &v[..ls as usize])
            .map_err(|e| fail("fill a hole", e))?;
        s.tx_commit(tx).map_err(|e| fail("commit", e))?;
        rounds += 1;
        if s.fstat(fl).map_err(|e| fail("fstat", e))?.size < LOG_MAX && rounds < 12 {
            continue;
        }
        rounds = 0;
        // Truncated back in a transaction (the log to a partial block: its tail is zeroed).
        let tx = s.tx_begin(&[fl, fs]).map_err(|e| fail("begin", e))?;
        s.set_len(fl, next() % 6000)
            .map_err(|e| fail("truncate", e))?;
        s.set_len(fs, 0).map_err(|e| fail("truncate", e))?;
        s.set_len(fs, SPARSE).map_err(|e| fail("extend", e))?;
        s.tx_commit(tx).map_err(|e| fail("commit truncate", e))?;
    }
    Ok(())
}

/// On a pool with no room left, a write that grows the tree and fills holes still fails with
/// NoSpace, in an explicit transaction (after an overwrite) and in an automatic one: it
/// makes room and tries again (its shortage found before it changed anything), then its
/// transaction is rolled back whole: the file as it was, every block it reserved or took
/// free again, fsck clean, the pool usable.
#[test]
fn a_write_on_a_truly_full_pool_retries_then_rolls_back_and_leaks_no_block() {
    use pool::Mode;
    for mode in Mode::ALL {
        let (s, f0) = pool_with_f(mode, 2048, 50);
        let fill = OpenOptions::new()
            .write(true)
            .create(true)
            .open(&s, "/fill", None)
            .unwrap();
        let mut at = 0;
        while s.statfs().unwrap().blocks_free > 3 {
            s.write(fill, at, &[9u8; 4096]).unwrap();
            at += 4096;
        }
        s.checkpoint_all().unwrap();
        let free = s.statfs().unwrap().blocks_free;
        let fh = open_rw(&s, "/f");
        let foreground = |s: &pool::PoolStore<_>| stat(s, "foreground_checkpoints");
        // Block 600 of a one-level tree: a new root, an index block and 3 data blocks.
        let far = 600 * 4096;
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 10, b"overwritten").unwrap();
        let tries = foreground(&s);
        let err = s.write(fh, far, &[1u8; 3 * 4096]);
        assert!(matches!(err, Err(Error::NoSpace(_))), "{mode:?}: {err:?}");
        assert!(foreground(&s) >= tries + 2, "{mode:?}: made room again");
        assert!(matches!(s.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
        for automatic in [false, true] {
            if automatic {
                let tries = foreground(&s);
                let err = s.write(fh, far, &[1u8; 3 * 4096]);
                assert!(matches!(err, Err(Error::NoSpace(_))), "{mode:?}: {err:?}");
                assert!(foreground(&s) >= tries + 2, "{mode:?}: made room again");
            }
            assert_eq!(read_path(&s, "/f"), f0, "{mode:?}");
            assert_eq!(s.statfs().unwrap().blocks_free, free, "{mode:?}");
            assert!(s.fsck().unwrap().is_clean(), "{mode:?}: {:?}", s.fsck());
        }
        s.write(fh, 10, b"fits").unwrap();
        assert_eq!(&read_path(&s, "/f")[10..14], b"fits");
    }
}

/// A write whose undo entries the metadata log cannot hold, with nothing a checkpoint
/// could free (its own open transaction holds the log): it reserves its metadata-log slots
/// before it changes anything, so it is retried after making room, then fails with LogFull;
/// the transaction is rolled back and every log slot and block it took is free again.
#[test]
fn a_write_on_a_truly_full_metadata_log_retries_then_rolls_back_and_leaks_no_slot() {
    use pool::Mode;
    for mode in Mode::ALL.into_iter().filter(|&m| m != Mode::Nc) {
        let (s, f0) = pool_with_f(mode, 256, 51);
        s.checkpoint_all().unwrap();
        let (meta, free) = (
            stat(&s, "metadata_log_used"),
            s.statfs().unwrap().blocks_free,
        );
        let fh = open_rw(&s, "/f");
        let tx = s.tx_begin(&[fh]).unwrap();
        // Sparse writes, one index block apart: each logs its own block pointers.
        let mut lbn = 2 * 512;
        while stat(&s, "metadata_log_used") < 256 - 40 {
            s.write(fh, lbn * 4096, b"x").unwrap();
            lbn += 512;
        }
        // 300 blocks of holes: more pointer entries than the log has left.
        let tries = stat(&s, "foreground_checkpoints");
        let err = s.write(fh, lbn * 4096, &vec![2u8; 300 * 4096]);
        assert!(matches!(err, Err(Error::LogFull(_))), "{mode:?}: {err:?}");
        assert!(
            stat(&s, "foreground_checkpoints") >= tries + 2,
            "{mode:?}: made room and tried again"
        );
        assert!(matches!(s.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
        assert_eq!(read_path(&s, "/f"), f0, "{mode:?}");
        s.checkpoint_all().unwrap();
        assert_eq!(
            stat(&s, "metadata_log_used"),
            meta,
            "{mode:?}: no slot leaked"
        );
        assert_eq!(
            s.statfs().unwrap().blocks_free,
            free,
            "{mode:?}: no block leaked"
        );
        assert!(s.fsck().unwrap().is_clean(), "{mode:?}: {:?}", s.fsck());
        s.write(fh, 10, b"fits").unwrap();
        assert_eq!(&read_path(&s, "/f")[10..14], b"fits");
    }
}

/// A test_min pool in `mode` with `metadata_log_entries` and a 6000-byte file "/f" of
/// pattern `seed` (returned).
fn pool_with_f(
    mode: pool::Mode,
    metadata_log_entries: u64,
    seed: u64,
) -> (pool::PoolStore<pmem::DramRegion>, Vec<u8>) {
    let cfg = PoolConfig {
        mode,
        metadata_log_entries,
        ..PoolConfig::test_min()
    };
    let s = fresh(&cfg);
    let f0 = pattern(seed, 6000);
    create_with(&s, "/f", &f0);
    (s, f0)
}

/// One of the pool's named counters.
fn stat(s: &pool::PoolStore<pmem::DramRegion>, key: &str) -> u64 {
    let stats: std::collections::HashMap<_, _> = s.stats().into_iter().collect();
    stats[key]
}

/// The pool of the two room-race tests: small logs, one checkpoint thread, 16 open
/// transactions.
fn room_race_config(mode: pool::Mode) -> PoolConfig {
    PoolConfig {
        mode,
        open_transactions_max: 16,
        checkpoint_threads: 1,
        inode_count: 64,
        metadata_log_entries: 4096,
        data_log_entries: 4096,
        pending_versions_max: 5,
        ..PoolConfig::test_min()
    }
}
