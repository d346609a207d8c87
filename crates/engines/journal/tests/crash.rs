//! Crash test of the journal core over simulated media: a SimRegion journal and a SimHostFs
//! home directory on one crash clock, so that every fence of the journal and every sync of
//! the home directory is a crash point, each crash image pairing a journal image with a home
//! image of the same moment. A seeded workload of transactions (over-writes, appends, several
//! files, a size block as metadata) on a journal small enough that wear swaps, delta swaps,
//! GC and checkpoints happen all the time; at every crash point, crash images are recovered
//! and checked: every committed transaction fully present, the in-flight one fully present or
//! fully absent, fsck clean. Some images are recovered with a crash in the middle of
//! recovery, then recovered again.
//!
//! Reproduce a failure with the printed seed: `JOURNAL_CRASH_SEED=<seed> cargo test -p
//! atomfs-journal --test crash`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use hostfs::{HostCrashPoint, HostImage, SimHostFs};
use journal::{Journal, JournalConfig, Variant};
use pmem::{CrashConfig, CrashPoint, SimRegion};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Model = Vec<Vec<u8>>;

/// A PM journal image and the home image of the same moment.
type CrashImage = (Vec<u8>, HostImage);

#[derive(Default)]
struct Oracle {
    committed: Model,
    inflight: Option<Model>,
    checked_images: u64,
    nested: u64,
    failure: Option<String>,
}

fn recover_contents(pool: Vec<u8>, host: &HostImage, cfg: &JournalConfig) -> Result<Model, String> {
    let j = sim_reopen(pool, host, cfg).map_err(|e| format!("recovery failed: {e}"))?;
    let f = j.fsck();
    if !f.problems.is_empty() {
        return Err(format!("fsck after recovery: {:?}", f.problems));
    }
    contents(&j).map_err(|e| format!("read after recovery: {e}"))
}

/// Recover with a crash at recovery's `k`-th fence, then recover that image.
fn nested_contents(
    pool: Vec<u8>,
    host: &HostImage,
    cfg: &JournalConfig,
    k: u64,
) -> (bool, Result<Model, String>) {
    let saved: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    let region = Arc::new(SimRegion::from_image(pool.clone()));
    let sink = saved.clone();
    let mut n = 0;
    region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
        n += 1;
        if n == k {
            *sink.lock().unwrap() = cp.images().last();
        }
    }));
    let home = SimHostFs::from_image(host, host_config());
    drop(Journal::open(
        region.clone(),
        home.clone(),
        namer(),
        cfg.clone(),
    ));
    region.take_fence_hook();
    let mid = saved.lock().unwrap().take();
    let hit = mid.is_some();
    // Recovery does not write home: the home image is the same.
    (hit, recover_contents(mid.unwrap_or(pool), host, cfg))
}

fn check(
    o: &mut Oracle,
    pool: Vec<u8>,
    host: &HostImage,
    cfg: &JournalConfig,
    nested: Option<u64>,
) {
    let got = match nested {
        Some(k) => {
            let (hit, got) = nested_contents(pool, host, cfg, k);
            o.nested += hit as u64;
            got
        }
        None => recover_contents(pool, host, cfg),
    };
    o.checked_images += 1;
    match got {
        Err(e) => {
            o.failure.get_or_insert(e);
        }
        Ok(got) if got == o.committed || o.inflight.as_ref() == Some(&got) => {}
        Ok(got) => {
            let lens: Vec<_> = got.iter().map(Vec::len).collect();
            let want: Vec<_> = o.committed.iter().map(Vec::len).collect();
            o.failure.get_or_insert(format!(
                "recovered state (lens {lens:?}) is neither the committed one (lens {want:?}) nor the in-flight one (inflight {})",
                o.inflight.is_some()
            ));
        }
    }
}

fn install_hooks(
    region: &Arc<SimRegion>,
    host: &SimHostFs,
    oracle: &Arc<Mutex<Oracle>>,
    cfg: &JournalConfig,
) {
    let clock = Arc::new(AtomicU64::new(0));
    host.set_clock(clock.clone());
    {
        let (oracle, cfg, host, clock) = (oracle.clone(), cfg.clone(), host.clone(), clock.clone());
        region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
            let tick = clock.fetch_add(1, Ordering::Relaxed);
            let mut o = oracle.lock().unwrap();
            if o.failure.is_some() {
                return;
            }
            let hp = host.crash_point();
            for (i, pool) in cp.images().enumerate() {
                let himage = hp.image((tick + i as u64 * 7) % hp.image_count());
                let nested = (tick + i as u64).is_multiple_of(5).then_some(1 + tick % 4);
                check(&mut o, pool, &himage, &cfg, nested);
            }
        }));
    }
    let (oracle, cfg, region) = (oracle.clone(), cfg.clone(), region.clone());
    host.set_sync_hook(Box::new(move |hp: &HostCrashPoint| {
        let mut o = oracle.lock().unwrap();
        if o.failure.is_some() {
            return;
        }
        let cp = region.crash_point();
        let pools: Vec<Vec<u8>> = cp.images().collect();
        for k in 0..hp.image_count().min(3) {
            let himage = hp.image((hp.clock() + k * 5) % hp.image_count());
            let pool = pools[(k as usize) % pools.len()].clone();
            check(&mut o, pool, &himage, &cfg, None);
        }
    }));
}

/// Run `ops` transactions; returns the crash images checked.
fn run(seed: u64, cfg: &JournalConfig, ops: usize) -> (u64, u64) {
    let (region, host, j) = sim_journal(cfg);
    region.set_crash_config(CrashConfig {
        exhaustive_limit: 4,
        sample_count: 3,
        seed,
    });
    let oracle = Arc::new(Mutex::new(Oracle {
        committed: vec![Vec::new(); FILES],
        ..Default::default()
    }));
    install_hooks(&region, &host, &oracle, cfg);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model: Model = vec![Vec::new(); FILES];
    for _ in 0..ops {
        let writes: Vec<(usize, u64, Vec<u8>)> = (0..rng.gen_range(1..4))
            .map(|_| {
                let f = rng.gen_range(0..FILES);
                let len = [1usize, 100, 700, 4096, 5000][rng.gen_range(0..5)];
                let off = rng.gen_range(0..(model[f].len() as u64 + 3000).min(20_000));
                let byte: u8 = rng.gen();
                let mut data = vec![byte; len];
                data[0] = rng.gen();
                (f, off, data)
            })
            .collect();
        let next = preview(&model, &writes);
        oracle.lock().unwrap().inflight = Some(next.clone());
        let done = write_tx(&j, &model, &writes);
        assert_eq!(done, next);
        model = next;
        let mut o = oracle.lock().unwrap();
        o.committed = model.clone();
        o.inflight = None;
        if let Some(f) = &o.failure {
            panic!("seed {seed}: {f}");
        }
    }
    region.take_fence_hook();
    let o = oracle.lock().unwrap();
    if let Some(f) = &o.failure {
        panic!("seed {seed}: {f}");
    }
    assert_eq!(contents(&j).unwrap(), model);
    let s = j.stats();
    println!("seed {seed}: {s:?}");
    assert!(
        s.checkpoints > 0,
        "the workload must reach checkpoints: {s:?}"
    );
    let v = cfg.variant;
    if v == Variant::NJS {
        let every = s.delta_blocks > 0 && s.wear_swaps > 0 && s.gc_swaps > 0;
        assert!(
            every,
            "the workload must reach delta updates, wear and GC swaps: {s:?}"
        );
    }
    assert!(
        v.delta || s.delta_blocks == 0,
        "delta updates in no-delta: {s:?}"
    );
    assert!(v.wear || s.wear_swaps == 0, "wear swaps in no-wear: {s:?}");
    assert!(v.gc || s.gc_runs == 0, "GC in no-gc: {s:?}");
    (o.checked_images, o.nested)
}

fn preview(model: &Model, writes: &[(usize, u64, Vec<u8>)]) -> Model {
    let mut next = model.clone();
    for (f, off, data) in writes {
        let end = *off as usize + data.len();
        if next[*f].len() < end {
            next[*f].resize(end, 0);
        }
        next[*f][*off as usize..end].copy_from_slice(data);
    }
    next
}

/// `JOURNAL_CRASH_SEED=<seed>`: that seed alone; `JOURNAL_CRASH_SEEDS=<n>`: seeds 1..=n.
fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("JOURNAL_CRASH_SEED") {
        return vec![s.parse().unwrap()];
    }
    let n = std::env::var("JOURNAL_CRASH_SEEDS").map_or(2, |s| s.parse().unwrap());
    (1..=n).collect()
}

/// Transactions per workload (`JOURNAL_CRASH_OPS`, default 60).
fn ops() -> usize {
    std::env::var("JOURNAL_CRASH_OPS").map_or(60, |s| s.parse().unwrap())
}

#[test]
fn crash_images_recover_to_a_committed_state() {
    let cfg = JournalConfig {
        journal_blocks: 16,
        ..JournalConfig::test_min()
    };
    let mut total = 0;
    for seed in seeds() {
        let (images, nested) = run(seed, &cfg, ops());
        println!(
            "seed {seed}: {images} crash images checked, {nested} with a crash inside recovery"
        );
        total += images;
    }
    assert!(total >= 1000, "too few crash images: {total}");
}

#[test]
fn crash_images_recover_in_every_variant() {
    let variants = [
        Variant {
            delta: false,
            ..Variant::NJS
        },
        Variant {
            gc: false,
            ..Variant::NJS
        },
        Variant {
            all_journal: true,
            ..Variant::NJS
        },
        Variant {
            wear: false,
            ..Variant::NJS
        },
    ];
    for (i, variant) in variants.into_iter().enumerate() {
        let cfg = JournalConfig {
            journal_blocks: 16,
            variant,
            ..JournalConfig::test_min()
        };
        let (images, _) = run(100 + i as u64, &cfg, 30);
        println!("variant {variant:?}: {images} crash images checked");
    }
}

/// Crash at a random fence (a random image of it, with the home image of that moment),
/// recover, check, and go on working on the recovered journal: many generations of
/// recovered state (as the SIGKILL torture does on one pool).
#[test]
fn work_goes_on_after_each_recovery() {
    let cfg = JournalConfig {
        journal_blocks: 16,
        ..JournalConfig::test_min()
    };
    let generations = std::env::var("JOURNAL_CRASH_GENERATIONS").map_or(30, |s| s.parse().unwrap());
    let mut rng = SmallRng::seed_from_u64(99);
    let (region, host, j) = sim_journal(&cfg);
    let (mut region, mut host, mut j) = (region, host, j);
    let mut model: Model = vec![Vec::new(); FILES];
    for generation in 0..generations {
        let crash_at = rng.gen_range(1..200u64);
        let saved: Arc<Mutex<Option<CrashImage>>> = Arc::default();
        {
            let (saved, h) = (saved.clone(), host.clone());
            let mut n = 0u64;
            let pick: u64 = rng.gen();
            region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
                n += 1;
                if n == crash_at {
                    let images: Vec<Vec<u8>> = cp.images().collect();
                    let hp = h.crash_point();
                    let pool = images[(pick as usize) % images.len()].clone();
                    let himage = hp.image(pick % hp.image_count());
                    *saved.lock().unwrap() = Some((pool, himage));
                }
            }));
        }
        let mut inflight = None;
        for _ in 0..40 {
            if saved.lock().unwrap().is_some() {
                break;
            }
            let writes: Vec<(usize, u64, Vec<u8>)> = (0..rng.gen_range(1..4))
                .map(|_| {
                    let f = rng.gen_range(0..FILES);
                    let len = [1usize, 100, 700, 4096, 5000][rng.gen_range(0..5)];
                    let off = rng.gen_range(0..(model[f].len() as u64 + 3000).min(20_000));
                    (f, off, vec![rng.gen(); len])
                })
                .collect();
            let next = preview(&model, &writes);
            inflight = Some(next.clone());
            write_tx(&j, &model, &writes);
            if saved.lock().unwrap().is_none() {
                model = next;
                inflight = None;
            }
        }
        region.take_fence_hook();
        let (pool, himage) = saved
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| (region.persistent_image(), host.durable_image()));
        drop(j);
        region = Arc::new(SimRegion::from_image(pool));
        host = SimHostFs::from_image(&himage, host_config());
        j = Journal::open(region.clone(), host.clone(), namer(), cfg.clone()).unwrap();
        let f = j.fsck();
        assert!(f.problems.is_empty(), "generation {generation}: {f:?}");
        let got = contents(&j).unwrap();
        if got != model {
            assert_eq!(
                Some(&got),
                inflight.as_ref(),
                "generation {generation}: neither state"
            );
            model = got;
        }
    }
}
