//! The mtime and ctime of a pure overwrite in a redo mode (FCFS, SOC, SYNC) are redone from
//! the log with its data (`Tx::redo_times`, docs/format.md "Times of overwrites"), not
//! undo-logged. These tests pin what that must keep: the times change with the commit and
//! only with it, an abort leaves them as they were, an explicit mtime set later in the same
//! transaction stands, and after a crash at any fence the times agree with the data: old
//! data with the old times, new data with the commit's times.

#![allow(clippy::unwrap_used)]

mod common;
use common::{pattern, rw};
use pmem::{CrashConfig, SimRegion};
use pool::{Mode, PoolConfig, PoolStore};
use std::sync::{Arc, Mutex};
use store::{Fh, Ino, SetAttr, Store, ROOT_INO};

const REDO_MODES: [Mode; 3] = [Mode::Fcfs, Mode::Soc, Mode::Sync];

fn cfg(mode: Mode) -> PoolConfig {
    PoolConfig {
        mode,
        inode_count: 16,
        metadata_log_entries: 64,
        data_log_entries: 32,
        ..PoolConfig::test_min()
    }
}

/// A pool with file "a" of 8 KB, checkpointed, and the file's handle and inode.
fn setup<R: pmem::Region>(s: &PoolStore<R>) -> (Fh, Ino) {
    let meta = s.create(ROOT_INO, b"a", 0o644, None).unwrap();
    let fh = s.open(meta.ino, rw()).unwrap();
    s.write(fh, 0, &pattern(1, 8192)).unwrap();
    s.checkpoint_all().unwrap();
    (fh, meta.ino)
}

fn times(s: &dyn Store, ino: Ino) -> (u64, u64) {
    let m = s.getattr(ino).unwrap();
    (m.mtime, m.ctime)
}

#[test]
fn commit_sets_the_times_and_abort_keeps_them() {
    for mode in REDO_MODES {
        let s = PoolStore::format(Arc::new(pmem::DramRegion::new(1 << 20)), &cfg(mode)).unwrap();
        let (fh, ino) = setup(&s);
        let old = times(&s, ino);
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 100, &pattern(2, 300)).unwrap();
        s.tx_abort(tx).unwrap();
        assert_eq!(
            times(&s, ino),
            old,
            "{mode:?}: an aborted overwrite left its times"
        );

        let before_commit = store::now_ns();
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 100, &pattern(3, 300)).unwrap();
        s.write(fh, 5000, &pattern(4, 10)).unwrap();
        s.tx_commit(tx).unwrap();
        let new = times(&s, ino);
        assert!(
            new.0 > old.0 && new.0 >= before_commit && new.0 == new.1,
            "{mode:?}: committed overwrite: times {new:?}, before {old:?}"
        );
        // A legacy overwrite (its own transaction) too, and the checkpoint keeps them.
        s.write(fh, 7000, &pattern(5, 64)).unwrap();
        let legacy = times(&s, ino);
        assert!(
            legacy.0 > new.0 && legacy.1 == legacy.0,
            "{mode:?}: legacy {legacy:?}"
        );
        s.checkpoint_all().unwrap();
        assert_eq!(
            times(&s, ino),
            legacy,
            "{mode:?}: the checkpoint changed the times"
        );
    }
}

#[test]
fn an_explicit_mtime_after_an_overwrite_stands() {
    for mode in REDO_MODES {
        let s = PoolStore::format(Arc::new(pmem::DramRegion::new(1 << 20)), &cfg(mode)).unwrap();
        let (fh, ino) = setup(&s);
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 10, &pattern(6, 100)).unwrap();
        let past = SetAttr {
            mtime: Some(1_000_000_000),
            ..Default::default()
        };
        s.setattr(ino, &past, Some(tx)).unwrap();
        s.tx_commit(tx).unwrap();
        assert_eq!(times(&s, ino).0, 1_000_000_000, "{mode:?}");
        s.checkpoint_all().unwrap();
        assert_eq!(times(&s, ino).0, 1_000_000_000, "{mode:?} after checkpoint");

        // An overwrite committed (its entries, with its times, still in the log), then an
        // explicit mtime in a later transaction: recovery after a crash must not put the
        // overwrite's times back over it, however close the two came on the clock.
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 20, &pattern(7, 100)).unwrap();
        s.tx_commit(tx).unwrap();
        s.setattr(ino, &past, None).unwrap();
        let crashed = common::crash_copy(&s, &cfg(mode));
        // (SYNC checkpoints inside the commit: nothing stays in its log.)
        let kept = crashed.last_recovery().redo_entries_kept;
        assert_eq!(
            kept > 0,
            mode != Mode::Sync,
            "{mode:?}: {kept} entries kept"
        );
        let m = crashed.getattr(ino).unwrap();
        assert_eq!(
            m.mtime, 1_000_000_000,
            "{mode:?}: recovery redid older times"
        );
        assert!(m.ctime > times(&s, ino).0, "{mode:?}");
        // And the pool's clock goes on past every ctime it finds.
        let later = crashed.setattr(ino, &SetAttr::default(), None).unwrap();
        assert!(
            later.ctime > m.ctime,
            "{mode:?}: {} after {}",
            later.ctime,
            m.ctime
        );
    }
}

/// What a crash image recovered to: whether "a" holds the new bytes, its times, and whether
/// fsck found the pool clean.
type Recovered = Result<(bool, (u64, u64), bool), String>;

/// Recover a crash image.
fn recovered(image: Vec<u8>, mode: Mode) -> Recovered {
    let s = PoolStore::open(Arc::new(SimRegion::from_image(image)), &cfg(mode))
        .map_err(|e| format!("recovery: {e}"))?;
    let ino = s.lookup(ROOT_INO, b"a").map_err(|e| e.to_string())?.ino;
    let data = store::path::read_all(&s, s.open(ino, rw()).unwrap()).unwrap();
    let old = pattern(1, 8192);
    let mut new = old.clone();
    new[100..400].copy_from_slice(&pattern(3, 300));
    let is_new = data == new;
    if !is_new && data != old {
        return Err("the data is neither old nor new".into());
    }
    let clean = s.fsck().map(|r| r.is_clean()).unwrap_or(false);
    Ok((is_new, times(&s, ino), clean))
}

#[test]
fn crash_images_keep_times_with_their_data() {
    for mode in REDO_MODES {
        let region = Arc::new(SimRegion::new(512 << 10));
        let s = PoolStore::format(region.clone(), &cfg(mode)).unwrap();
        let (fh, ino) = setup(&s);
        let old = times(&s, ino);
        let seen: Arc<Mutex<Vec<Recovered>>> = Arc::default();
        region.set_crash_config(CrashConfig {
            exhaustive_limit: 256,
            sample_count: 64,
            seed: 3,
        });
        let hook_seen = seen.clone();
        region.set_fence_hook(Box::new(move |point| {
            let mut out = hook_seen.lock().unwrap();
            for index in 0..point.image_count() {
                out.push(recovered(point.image(index), mode));
            }
        }));
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 100, &pattern(3, 300)).unwrap();
        s.tx_commit(tx).unwrap();
        // The checkpoint frees the entries that carry the times: crashes during it too.
        s.checkpoint_all().unwrap();
        region.take_fence_hook();
        let committed = times(&s, ino);
        assert!(committed.0 > old.0, "{mode:?}: {committed:?} after {old:?}");
        let seen = seen.lock().unwrap();
        let (mut olds, mut news) = (0, 0);
        for (i, r) in seen.iter().enumerate() {
            let (is_new, t, clean) = r
                .clone()
                .unwrap_or_else(|e| panic!("{mode:?} image {i}: {e}"));
            assert!(clean, "{mode:?} image {i}: fsck not clean");
            if is_new {
                news += 1;
                assert_eq!(t, committed, "{mode:?} image {i}: new data, times {t:?}");
            } else {
                olds += 1;
                assert_eq!(t, old, "{mode:?} image {i}: old data, times {t:?}");
            }
        }
        assert!(
            olds > 0 && news > 0,
            "{mode:?}: crash images with old data {olds}, with new data {news}"
        );
    }
}
