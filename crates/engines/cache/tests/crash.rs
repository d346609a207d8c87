//! Crash images at every fence of a workload that reaches every write case, multi-chunk
//! writes over old data, growth, shrink and flushes: recovery gives each file its contents
//! before or after the operation that was running (never a mix), keeps every completed
//! operation, and is itself idempotent (a crash during recovery recovers again).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{Cache, CacheConfig, MemBacking};
use pmem::{CrashConfig, DramRegion, Region, SimRegion};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const C: u64 = 4096;
const POOL: u64 = 64 << 10;
/// The transaction workload: a stride of 4 and room for it, so that no transaction
/// collides with itself (that is refused with NoSpace, see tests/core.rs).
const TX_POOL: u64 = 128 << 10;

#[derive(Clone, Debug)]
enum Op {
    Write(usize, u64, u64, u8),
    SetLen(usize, u64),
    FlushAll,
    /// A transaction of writes and length changes; committed when true, else aborted.
    Tx(Vec<Op>, bool),
}

fn ops() -> Vec<Op> {
    use Op::*;
    vec![
        Write(0, 0, 2 * C, 1),
        Write(0, C + 7, 10, 2),
        Write(1, 100, 3 * C, 3),
        Write(0, C, 20, 4),
        Write(1, 0, 2 * C + 5, 5),
        FlushAll,
        Write(2, 50, 2 * C, 6),
        Write(0, 2 * C - 8, C + 16, 7),
        SetLen(1, 5000),
        Write(1, 6000, 300, 8),
        Write(2, 0, 4 * C, 9),
    ]
}

fn config_with(stride: u64) -> CacheConfig {
    CacheConfig {
        stride_fixed: Some(stride),
        ..CacheConfig::test_min()
    }
}

fn apply(model: &mut [Vec<u8>], op: &Op) {
    match *op {
        Op::Write(f, off, len, byte) => {
            let end = (off + len) as usize;
            if model[f].len() < end {
                model[f].resize(end, 0);
            }
            model[f][off as usize..end].fill(byte);
        }
        Op::SetLen(f, len) => model[f].resize(len as usize, 0),
        Op::FlushAll => {}
        Op::Tx(ref steps, commit) => {
            if commit {
                for s in steps {
                    apply(model, s);
                }
            }
        }
    }
}

fn run<R: Region>(c: &Cache<R, Arc<MemBacking>>, keys: &[u64], op: &Op) {
    match *op {
        Op::Write(f, off, len, byte) => c.write(keys[f], off, &vec![byte; len as usize]).unwrap(),
        Op::SetLen(f, len) => c.set_len(keys[f], len).unwrap(),
        Op::FlushAll => {
            c.flush_all().unwrap();
        }
        Op::Tx(ref steps, commit) => {
            let mut unit = c.begin().unwrap();
            for s in steps {
                match *s {
                    Op::Write(f, off, len, byte) => c
                        .write_in(&mut unit, keys[f], off, &vec![byte; len as usize])
                        .unwrap(),
                    Op::SetLen(f, len) => c.set_len_in(&mut unit, keys[f], len).unwrap(),
                    _ => unreachable!("only writes and lengths in a transaction"),
                }
            }
            if commit {
                c.commit(unit).unwrap();
            } else {
                c.abort(unit).unwrap();
            }
        }
    }
}

fn tx_ops() -> Vec<Op> {
    use Op::*;
    vec![
        Write(0, 0, 2 * C, 1),
        Write(1, 0, C + 10, 2),
        Tx(
            vec![
                Write(0, 10, 20, 3),
                Write(1, C, 2 * C, 4),
                Write(2, 0, 100, 5),
            ],
            true,
        ),
        FlushAll,
        Tx(
            vec![Write(0, 0, 3 * C, 6), SetLen(1, 10), Write(2, 50, 50, 7)],
            false,
        ),
        Tx(
            vec![SetLen(0, 100), SetLen(0, 2 * C + 1), Write(1, 5, 5, 8)],
            true,
        ),
        Tx(
            vec![Write(2, 0, C, 9), Write(2, 2, 3, 10), SetLen(1, 0)],
            true,
        ),
    ]
}

fn contents<R: Region>(c: &Cache<R, Arc<MemBacking>>, key: u64) -> Vec<u8> {
    let mut buf = vec![0u8; c.len(key).unwrap() as usize];
    c.read(key, 0, &mut buf).unwrap();
    buf
}

struct Image {
    pm: Vec<u8>,
    home: MemBacking,
    running: usize,
}

#[test]
fn every_crash_image_recovers_to_before_or_after_the_running_operation() {
    crash_every_fence(ops(), POOL, 1);
}

/// Transactions over three files (commit and abort, growth, shrink then growth in one
/// transaction): at every fence, each transaction is wholly there or wholly absent.
#[test]
fn every_crash_image_keeps_transactions_all_or_nothing() {
    crash_every_fence(tx_ops(), TX_POOL, 4);
}

fn crash_every_fence(ops: Vec<Op>, pool: u64, stride: u64) {
    let config = config_with(stride);
    let sim = Arc::new(SimRegion::new(pool));
    let home = Arc::new(MemBacking::new());
    for id in 0..3 {
        home.put(id, &vec![0xEE; 1500]);
    }
    let c = Cache::format(sim.clone(), home.clone(), config.clone(), b"/h").unwrap();
    let keys: Vec<u64> = (0..3).map(|id| c.create_file(id, 1500).unwrap()).collect();
    let running = Arc::new(AtomicUsize::new(0));
    let images = Arc::new(Mutex::new(Vec::new()));
    sim.set_crash_config(CrashConfig {
        exhaustive_limit: 64,
        sample_count: 16,
        seed: 7,
    });
    {
        let (images, running, home) = (images.clone(), running.clone(), home.clone());
        sim.set_fence_hook(Box::new(move |point| {
            let n = point.image_count();
            for i in 0..n {
                images.lock().unwrap().push(Image {
                    pm: point.image(i),
                    home: home.crash(),
                    running: running.load(Ordering::SeqCst),
                });
            }
        }));
    }
    let mut models = vec![vec![vec![0xEEu8; 1500]; 3]];
    for (i, op) in ops.iter().enumerate() {
        running.store(i, Ordering::SeqCst);
        run(&c, &keys, op);
        let mut next = models[i].clone();
        apply(&mut next, op);
        models.push(next);
    }
    sim.take_fence_hook();
    for f in 0..3 {
        assert_eq!(contents(&c, keys[f]), models[ops.len()][f], "file {f} live");
    }
    let images = std::mem::take(&mut *images.lock().unwrap());
    assert!(images.len() > 100, "only {} crash images", images.len());
    let mut checked = 0;
    for (n, img) in images.into_iter().enumerate() {
        check_image(n, img, &keys, &models, &config);
        checked += 1;
    }
    println!("cache crash images checked: {checked}");
}

fn check_image(n: usize, img: Image, keys: &[u64], models: &[Vec<Vec<u8>>], config: &CacheConfig) {
    let before = &models[img.running];
    let after = &models[img.running + 1];
    let home = Arc::new(img.home);
    let (c, report) = Cache::open(
        DramRegion::from_bytes(&img.pm),
        home.clone(),
        config.clone(),
    )
    .unwrap_or_else(|e| panic!("image {n} (op {}): open failed: {e}", img.running));
    let mut states = Vec::new();
    for (f, &key) in keys.iter().enumerate() {
        let got = contents(&c, key);
        let state = if got == before[f] {
            0
        } else if got == after[f] {
            1
        } else {
            panic!(
                "image {n} (op {}): file {f} torn: len {} (before {}, after {}); {report:?}",
                img.running,
                got.len(),
                before[f].len(),
                after[f].len()
            );
        };
        states.push(state);
    }
    // Recovery is idempotent: recovering the recovered pool again changes nothing.
    let mut again = vec![0u8; img.pm.len()];
    c.region().read(0, &mut again);
    let (c2, _) = Cache::open(DramRegion::from_bytes(&again), home, config.clone()).unwrap();
    for (f, &key) in keys.iter().enumerate() {
        assert_eq!(
            contents(&c2, key),
            contents(&c, key),
            "image {n}: second recovery, file {f}"
        );
    }
}
