//! Crash-image test over `pmem::SimRegion`: a seeded workload of transactions (multi-file
//! writes, truncates, creates, renames, unlinks, aborts, legacy calls, checkpoints); at every
//! fence, crash images (exhaustive when few, else sampled) are recovered and checked:
//! the files are exactly the state before or after the step running (every committed
//! transaction fully present, every uncommitted one fully absent), fsck is clean, and a
//! second recovery of the recovered image finds nothing left to do (idempotent).
//!
//! Quick run: `cargo test -p atomfs-pool --test crash`. Longer:
//! `POOL_CRASH_STEPS=400 POOL_CRASH_SEED=7 POOL_CRASH_MODE=fcfs cargo test -p atomfs-pool --test crash -- --ignored` (with
//! `POOL_CRASH_CHECKSUMS=1` on a pool with data checksums).

#![allow(clippy::unwrap_used)]

mod common;
use common::pattern;
use pmem::{CrashConfig, SimRegion};
use pool::{Mode, PoolConfig, PoolStore};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use store::{Fh, OpenFlags, Store, ROOT_INO};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default)]
struct Oracle {
    before: Model,
    after: Model,
    step: String,
    crash_points: u64,
    images: u64,
    failures: Vec<String>,
    mode: Mode,
}

fn cfg(mode: Mode) -> PoolConfig {
    PoolConfig {
        mode,
        inode_count: 32,
        metadata_log_entries: 128,
        data_log_entries: 48,
        ..PoolConfig::test_min()
    }
}

fn read_model(s: &dyn Store) -> store::Result<Model> {
    let mut model = Model::new();
    for e in s.read_dir(ROOT_INO)? {
        let fh = s.open(
            e.ino,
            OpenFlags {
                read: true,
                ..Default::default()
            },
        )?;
        let data = store::path::read_all(s, fh)?;
        s.release(fh)?;
        model.insert(e.name, data);
    }
    Ok(model)
}

/// Recover one crash image and check it against the oracle. Returns a failure description.
fn check_image(image: Vec<u8>, oracle: &Oracle) -> Option<String> {
    let region = Arc::new(SimRegion::from_image(image));
    let store = match PoolStore::open(region.clone(), &cfg(oracle.mode)) {
        Ok(s) => s,
        Err(e) => return Some(format!("recovery failed: {e}")),
    };
    let state = match read_model(&store) {
        Ok(m) => m,
        Err(e) => return Some(format!("reading after recovery failed: {e}")),
    };
    if state != oracle.before && state != oracle.after {
        let names = |m: &Model| {
            m.iter()
                .map(|(k, v)| format!("{}:{}", String::from_utf8_lossy(k), v.len()))
                .collect::<Vec<_>>()
        };
        return Some(format!(
            "state {:?} is neither before {:?} nor after {:?}",
            names(&state),
            names(&oracle.before),
            names(&oracle.after)
        ));
    }
    match store.fsck() {
        Ok(r) if r.is_clean() => {}
        other => return Some(format!("fsck after recovery: {other:?}")),
    }
    drop(store);
    let again = match PoolStore::open(
        Arc::new(SimRegion::from_image(region.persistent_image())),
        &cfg(oracle.mode),
    ) {
        Ok(s) => s,
        Err(e) => return Some(format!("second recovery failed: {e}")),
    };
    let report = again.last_recovery();
    if report.undone_txs != 0 || report.torn_entries != 0 || report.data_entries_dropped != 0 {
        return Some(format!("second recovery had work left: {report:?}"));
    }
    match read_model(&again) {
        Ok(m) if m == state => None,
        other => Some(format!(
            "second recovery changed the state: {:?}",
            other.map(|m| m.len())
        )),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

fn apply_write(model: &mut Model, name: &[u8], off: u64, data: &[u8]) {
    let file = model.entry(name.to_vec()).or_default();
    let end = off as usize + data.len();
    if file.len() < end {
        file.resize(end, 0);
    }
    file[off as usize..end].copy_from_slice(data);
}

fn apply_len(model: &mut Model, name: &[u8], len: u64) {
    model
        .entry(name.to_vec())
        .or_default()
        .resize(len as usize, 0);
}

/// One workload step: runs it on the store and returns the model after it.
fn step(
    s: &PoolStore<SimRegion>,
    rng: &mut Rng,
    fhs: &[Fh],
    names: &[Vec<u8>],
    model: &Model,
    n: u64,
) -> (Model, String) {
    let mut after = model.clone();
    let kind = rng.below(20);
    if kind < 11 {
        let count = 1 + rng.below(2) as usize;
        let first = rng.below(3) as usize;
        let files: Vec<usize> = (0..count).map(|i| (first + i) % 3).collect();
        let tx = s
            .tx_begin(&files.iter().map(|&i| fhs[i]).collect::<Vec<_>>())
            .unwrap();
        for &i in &files {
            for _ in 0..1 + rng.below(3) {
                let off = rng.below(10_000);
                let data = pattern(rng.next(), 1 + rng.below(3000) as usize);
                s.write(fhs[i], off, &data).unwrap();
                apply_write(&mut after, &names[i], off, &data);
            }
            if rng.below(6) == 0 {
                let len = rng.below(12_000);
                s.set_len(fhs[i], len).unwrap();
                apply_len(&mut after, &names[i], len);
            }
        }
        if rng.below(8) == 0 {
            s.tx_abort(tx).unwrap();
            return (model.clone(), format!("aborted tx on {files:?}"));
        }
        s.tx_commit(tx).unwrap();
        (after, format!("tx on {files:?}"))
    } else if kind < 14 {
        let i = rng.below(3) as usize;
        let off = rng.below(10_000);
        let data = pattern(rng.next(), 1 + rng.below(2000) as usize);
        s.write(fhs[i], off, &data).unwrap();
        apply_write(&mut after, &names[i], off, &data);
        (after, format!("legacy write {i}"))
    } else if kind < 17 {
        // Namespace transaction: create a file with content, maybe replace or drop another.
        let name = format!("n{}", n % 4).into_bytes();
        let tx = s.tx_begin(&[]).unwrap();
        if after.contains_key(&name) {
            s.unlink(ROOT_INO, &name, Some(tx)).unwrap();
            after.remove(&name);
        } else {
            let meta = s.create(ROOT_INO, &name, 0o644, Some(tx)).unwrap();
            let fh = s.open(meta.ino, rw()).unwrap();
            s.tx_add(tx, fh).unwrap();
            let data = pattern(rng.next(), rng.below(6000) as usize);
            s.write(fh, 0, &data).unwrap();
            after.insert(name.clone(), data);
            let target = format!("n{}", (n + 1) % 4).into_bytes();
            if rng.below(2) == 0 {
                s.rename(ROOT_INO, &name, ROOT_INO, &target, Some(tx))
                    .unwrap();
                let v = after.remove(&name).unwrap_or_default();
                after.insert(target, v);
            }
            s.tx_commit(tx).unwrap();
            s.release(fh).unwrap();
            return (after, "create tx".into());
        }
        s.tx_commit(tx).unwrap();
        (after, "unlink tx".into())
    } else if kind < 19 {
        s.checkpoint_all().unwrap();
        (after, "checkpoint".into())
    } else {
        let i = rng.below(3) as usize;
        let len = rng.below(12_000);
        s.set_len(fhs[i], len).unwrap();
        apply_len(&mut after, &names[i], len);
        (after, format!("legacy set_len {i}"))
    }
}

/// How a run's pool is set up besides its mode.
#[derive(Clone, Copy, Default)]
struct Setup {
    /// A checkpoint thread runs beside the workload.
    background: bool,
    /// The pool is formatted with data checksums: every read after recovery and fsck check
    /// every permanent block against the crc in its pointer.
    checksums: bool,
}

fn run(mode: Mode, seed: u64, steps: u64, crash: CrashConfig, setup: Setup) -> (u64, u64) {
    let region = Arc::new(SimRegion::new(640 << 10));
    let mut main_cfg = cfg(mode).with_data_checksums(setup.checksums);
    let background = setup.background;
    if background {
        // A checkpoint thread woken every millisecond runs beside the workload.
        main_cfg.checkpoint_threads = 1;
        main_cfg.checkpoint_idle_ms = 1;
    }
    let s = PoolStore::format(region.clone(), &main_cfg).unwrap();
    assert_eq!(s.superblock().data_checksums, setup.checksums);
    let names: Vec<Vec<u8>> = (0..3).map(|i| format!("f{i}").into_bytes()).collect();
    let mut model = Model::new();
    let mut fhs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let meta = s.create(ROOT_INO, name, 0o644, None).unwrap();
        let fh = s.open(meta.ino, rw()).unwrap();
        let data = pattern(seed + i as u64, 8000);
        s.write(fh, 0, &data).unwrap();
        model.insert(name.clone(), data);
        fhs.push(fh);
    }
    let oracle = Arc::new(Mutex::new(Oracle {
        before: model.clone(),
        after: model.clone(),
        ..Default::default()
    }));
    region.set_crash_config(crash);
    let hook_oracle = oracle.clone();
    region.set_fence_hook(Box::new(move |point| {
        let mut o = hook_oracle.lock().unwrap();
        o.crash_points += 1;
        let count = point.image_count();
        for index in 0..count {
            o.images += 1;
            if let Some(failure) = check_image(point.image(index), &o) {
                let msg = format!(
                    "fence {} image {index} ({}) during step {}: {failure}",
                    point.fence_index(),
                    point.describe(index),
                    o.step
                );
                o.failures.push(msg);
            }
        }
    }));
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for n in 0..steps {
        {
            let mut o = oracle.lock().unwrap();
            o.before = model.clone();
            o.after = model.clone();
            o.step = format!("{n}");
        }
        // The after-state is only known once the step ran; crash images during the step are
        // checked against before/after of the step, so run the step on a dry model first.
        let (after, what) = step_with_oracle(&s, &mut rng, &fhs, &names, &model, n, &oracle);
        model = after;
        let o = oracle.lock().unwrap();
        assert!(
            o.failures.is_empty(),
            "seed {seed} step {n} ({what}): {}",
            o.failures[0]
        );
    }
    drop(region.take_fence_hook());
    assert_eq!(read_model(&s).unwrap(), model);
    let o = oracle.lock().unwrap();
    (o.crash_points, o.images)
}

/// Run a step with the oracle's after-state set before the step runs: the step is first
/// planned on a clone of the random generator (same decisions), then executed.
fn step_with_oracle(
    s: &PoolStore<SimRegion>,
    rng: &mut Rng,
    fhs: &[Fh],
    names: &[Vec<u8>],
    model: &Model,
    n: u64,
    oracle: &Arc<Mutex<Oracle>>,
) -> (Model, String) {
    let planned = plan(rng.0, model, n, names);
    oracle.lock().unwrap().after = planned;
    step(s, rng, fhs, names, model, n)
}

/// Replay the step's random decisions on the model alone (no store) to learn its after-state.
fn plan(state: u64, model: &Model, n: u64, names: &[Vec<u8>]) -> Model {
    let mut rng = Rng(state);
    let mut after = model.clone();
    let kind = rng.below(20);
    if kind < 11 {
        let count = 1 + rng.below(2) as usize;
        let first = rng.below(3) as usize;
        let files: Vec<usize> = (0..count).map(|i| (first + i) % 3).collect();
        for &i in &files {
            for _ in 0..1 + rng.below(3) {
                let off = rng.below(10_000);
                let data = pattern(rng.next(), 1 + rng.below(3000) as usize);
                apply_write(&mut after, &names[i], off, &data);
            }
            if rng.below(6) == 0 {
                let len = rng.below(12_000);
                apply_len(&mut after, &names[i], len);
            }
        }
        if rng.below(8) == 0 {
            return model.clone();
        }
        after
    } else if kind < 14 {
        let i = rng.below(3) as usize;
        let off = rng.below(10_000);
        let data = pattern(rng.next(), 1 + rng.below(2000) as usize);
        apply_write(&mut after, &names[i], off, &data);
        after
    } else if kind < 17 {
        let name = format!("n{}", n % 4).into_bytes();
        if after.contains_key(&name) {
            after.remove(&name);
        } else {
            let data = pattern(rng.next(), rng.below(6000) as usize);
            after.insert(name.clone(), data);
            let target = format!("n{}", (n + 1) % 4).into_bytes();
            if rng.below(2) == 0 {
                let v = after.remove(&name).unwrap_or_default();
                after.insert(target, v);
            }
        }
        after
    } else if kind < 19 {
        after
    } else {
        let i = rng.below(3) as usize;
        let len = rng.below(12_000);
        apply_len(&mut after, &names[i], len);
        after
    }
}

#[test]
fn crash_images_at_every_fence_recover_to_before_or_after() {
    let crash = CrashConfig {
        exhaustive_limit: 8,
        sample_count: 3,
        seed: 1,
    };
    let (points, images) = run(Mode::Fcfs, 1, 40, crash, Setup::default());
    eprintln!("crash test: {points} crash points, {images} crash images recovered and checked");
    assert!(points > 100 && images > points);
}

#[test]
fn crash_images_with_a_background_checkpoint_thread() {
    let crash = CrashConfig {
        exhaustive_limit: 4,
        sample_count: 2,
        seed: 9,
    };
    let (points, images) = run(
        Mode::Fcfs,
        9,
        40,
        crash,
        Setup {
            background: true,
            ..Setup::default()
        },
    );
    eprintln!("crash test with background checkpointing: {points} crash points, {images} images");
    assert!(
        points > 100 && images >= points,
        "{points} points, {images} images"
    );
}

#[test]
fn comparison_modes_are_crash_consistent_too() {
    let crash = CrashConfig {
        exhaustive_limit: 4,
        sample_count: 2,
        seed: 3,
    };
    for mode in [Mode::FgWal, Mode::Scsp, Mode::Soc, Mode::Sync] {
        let (points, images) = run(mode, 2, 25, crash, Setup::default());
        eprintln!(
            "crash test {}: {points} crash points, {images} images",
            mode.name()
        );
        assert!(points > 50 && images >= points, "{}", mode.name());
    }
}

/// The same oracle on checksummed pools, in every mode that keeps its promise across a
/// crash (NC promises nothing): the checkpoint's merge and swing, hole fills, FG-WAL's and
/// SCSP's in-place writes, truncates and aborts keep every crc right at every fence, so
/// every read after recovery passes its check and fsck (which checks every permanent
/// block) is clean.
#[test]
fn checksummed_pools_are_crash_consistent() {
    let crash = CrashConfig {
        exhaustive_limit: 4,
        sample_count: 2,
        seed: 5,
    };
    let checksums = Setup {
        checksums: true,
        ..Setup::default()
    };
    let (points, images) = run(Mode::Fcfs, 1, 40, crash, checksums);
    assert!(points > 100 && images >= points, "fcfs");
    let background = Setup {
        background: true,
        ..checksums
    };
    let (points, images) = run(Mode::Fcfs, 9, 30, crash, background);
    assert!(
        points > 50 && images >= points,
        "fcfs with a checkpoint thread"
    );
    for mode in [Mode::FgWal, Mode::Scsp, Mode::Soc, Mode::Sync] {
        let (points, images) = run(mode, 2, 25, crash, checksums);
        eprintln!(
            "crash test {} with data checksums: {points} crash points, {images} images",
            mode.name()
        );
        assert!(points > 50 && images >= points, "{}", mode.name());
    }
}

#[test]
#[ignore = "long: a few hundred transactions; POOL_CRASH_STEPS / POOL_CRASH_SEED to tune"]
fn crash_images_long_run() {
    let steps = std::env::var("POOL_CRASH_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let seed = std::env::var("POOL_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let crash = CrashConfig {
        exhaustive_limit: 32,
        sample_count: 8,
        seed,
    };
    let mode = std::env::var("POOL_CRASH_MODE")
        .ok()
        .and_then(|m| Mode::parse(&m))
        .unwrap_or(Mode::Fcfs);
    let setup = Setup {
        checksums: std::env::var("POOL_CRASH_CHECKSUMS").is_ok_and(|v| v == "1"),
        ..Setup::default()
    };
    let (points, images) = run(mode, seed, steps, crash, setup);
    eprintln!("crash test (seed {seed}, {steps} steps): {points} crash points, {images} crash images recovered and checked");
    assert!(
        points > 0 && images >= points,
        "{points} points, {images} images"
    );
}
