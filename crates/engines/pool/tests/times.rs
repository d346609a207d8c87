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

/// A change of the file's ctime alone (no mtime) after a committed overwrite, as a legacy call.
#[derive(Clone, Copy, Debug)]
enum CtimeChange {
    Rename,
    Link,
    Chmod,
}

impl CtimeChange {
    const ALL: [CtimeChange; 3] = [CtimeChange::Rename, CtimeChange::Link, CtimeChange::Chmod];

    fn apply(self, s: &dyn Store, ino: Ino) {
        match self {
            CtimeChange::Rename => s.rename(ROOT_INO, b"a", ROOT_INO, b"b", None).unwrap(),
            CtimeChange::Link => {
                s.link(ino, ROOT_INO, b"b", None).unwrap();
            }
            CtimeChange::Chmod => {
                let perm = SetAttr {
                    perm: Some(0o600),
                    ..Default::default()
                };
                s.setattr(ino, &perm, None).unwrap();
            }
        }
    }

    /// Whether the change is visible in a recovered store.
    fn visible(self, s: &dyn Store, ino: Ino) -> store::Result<bool> {
        match self {
            CtimeChange::Rename | CtimeChange::Link => Ok(s.lookup(ROOT_INO, b"b").is_ok()),
            CtimeChange::Chmod => Ok(s.getattr(ino)?.perm & 0o777 == 0o600),
        }
    }
}

/// Recover a crash image taken during `change`: whether the change is visible and the file's
/// times; an error when the overwrite's data (`data`) is lost or fsck finds the pool unclean.
fn recovered_change(
    image: Vec<u8>,
    mode: Mode,
    change: CtimeChange,
    ino: Ino,
    data: &[u8],
) -> Result<(bool, (u64, u64)), String> {
    let s = PoolStore::open(Arc::new(SimRegion::from_image(image)), &cfg(mode))
        .map_err(|e| format!("recovery: {e}"))?;
    let visible = change.visible(&s, ino).map_err(|e| e.to_string())?;
    let fh = s.open(ino, rw()).map_err(|e| e.to_string())?;
    if store::path::read_all(&s, fh).map_err(|e| e.to_string())? != data {
        return Err("the acknowledged overwrite is lost".into());
    }
    if !s.fsck().map(|r| r.is_clean()).unwrap_or(false) {
        return Err("fsck not clean".into());
    }
    Ok((visible, times(&s, ino)))
}

/// The times of a committed pure overwrite are written in place unflushed after its commit
/// point, the log keeping them. A later call that changes the ctime alone (rename, link,
/// chmod) undo-logs that ctime as it stands in the cache, the overwrite's time t, before the
/// line reaches the media. A crash before that call's commit: recovery's undo puts ctime t
/// back while the mtime on the media is still the old one, and the redo of t, which took
/// "ctime ≥ t" for "already done", left the file with the new ctime and an older mtime than
/// the acknowledged one (found by the crash harness's metadata oracle, seed 7 of
/// `pool_crash_ci` and `pool-soc` seed 203). Every crash image during the later call must
/// recover to the overwrite's times (call absent) or the call's (call present).
#[test]
fn a_later_ctime_change_keeps_the_overwrites_times_at_a_crash() {
    for mode in REDO_MODES {
        for change in CtimeChange::ALL {
            let region = Arc::new(SimRegion::new(512 << 10));
            let s = PoolStore::format(region.clone(), &cfg(mode)).unwrap();
            let (fh, ino) = setup(&s);
            s.write(fh, 100, &pattern(3, 300)).unwrap();
            let overwritten = times(&s, ino);
            let data = store::path::read_all(&s, fh).unwrap();
            let seen: Arc<Mutex<Vec<_>>> = Arc::default();
            region.set_crash_config(CrashConfig {
                exhaustive_limit: 256,
                sample_count: 64,
                seed: 5,
            });
            let hook_seen = seen.clone();
            let hook_data = data.clone();
            region.set_fence_hook(Box::new(move |point| {
                let mut out = hook_seen.lock().unwrap();
                for index in 0..point.image_count() {
                    let image = point.image(index);
                    out.push(recovered_change(image, mode, change, ino, &hook_data));
                }
            }));
            change.apply(&s, ino);
            region.take_fence_hook();
            let changed = times(&s, ino);
            assert!(
                changed.1 > overwritten.1 && changed.0 == overwritten.0,
                "{mode:?} {change:?}: {changed:?} after {overwritten:?}"
            );
            let seen = seen.lock().unwrap();
            let (mut absent, mut present) = (0, 0);
            for (i, r) in seen.iter().enumerate() {
                let (visible, t) = r
                    .clone()
                    .unwrap_or_else(|e| panic!("{mode:?} {change:?} image {i}: {e}"));
                let want = if visible { changed } else { overwritten };
                assert_eq!(
                    t, want,
                    "{mode:?} {change:?} image {i} (change visible: {visible}): times"
                );
                if visible {
                    present += 1;
                } else {
                    absent += 1;
                }
            }
            assert!(
                absent > 0 && present > 0,
                "{mode:?} {change:?}: images without the change {absent}, with it {present}"
            );
        }
    }
}
