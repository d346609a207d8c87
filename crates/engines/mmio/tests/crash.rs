//! Crash test over simulated media: a SimRegion log pool and a SimHostFs host directory on one
//! crash clock, so that every fence of the log pool and every sync of the host directory
//! (fsync of a file or directory, msync of a mapping) is a crash point, and each crash image
//! pairs a log pool image with a host image of the same moment (unsynced host data lost or
//! torn per sector or page, namespace operations not yet made durable by a directory sync
//! undone). A seeded workload of single writes, O_ATOMIC epochs, multi-file
//! transactions, truncations, fallocate (punch, zero range), exchanges and extended-attribute
//! changes in transactions, and aborts runs; at every fence, sampled crash images are
//! recovered and checked: every committed sync/transaction fully present, the in-flight one
//! either fully present or fully absent, nothing else. Some images are recovered with a crash
//! in the middle of recovery, and recovered again (recovery is idempotent).
//!
//! Reproduce a failure with the printed seed: `MMIO_CRASH_SEED=<seed> cargo test -p atomfs-mmio --test crash`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use hostfs::{HostCrashPoint, SimHostFs};
use mmio::{MmioConfig, PolicyMode};
use pmem::{CrashConfig, CrashPoint, SimRegion};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::{Fh, Store};

const NFILES: usize = 3;

/// The whole visible namespace: path -> file contents.
type Tree = BTreeMap<String, Vec<u8>>;

#[derive(Default)]
struct Oracle {
    committed: Tree,
    inflight: Option<Tree>,
    checked_images: u64,
    fences: u64,
    syncs: u64,
    nested: u64,
    failure: Option<String>,
}

/// The namespace as a tree: each file's contents, and each extended attribute under the key
/// `path NUL name`.
fn contents(s: &SimStore) -> store::Result<Tree> {
    let mut out = Tree::new();
    for e in s.read_dir(store::ROOT_INO)? {
        let p = format!("/{}", String::from_utf8_lossy(&e.name));
        out.insert(p.clone(), store::path::read_file(s, &p)?);
        for name in s.listxattr(e.ino)? {
            let value = s.getxattr(e.ino, &name)?;
            out.insert(xattr_key(&p, &name), value);
        }
    }
    Ok(out)
}

fn xattr_key(path: &str, name: &[u8]) -> String {
    format!("{path}\0{}", String::from_utf8_lossy(name))
}

fn tree_of(files: &[Vec<u8>], extra: &Tree) -> Tree {
    let mut t = extra.clone();
    for (i, f) in files.iter().enumerate() {
        t.insert(format!("/f{i}"), f.clone());
    }
    t
}

fn check_image(o: &mut Oracle, image: SimImage, cfg: &MmioConfig, nested: bool) {
    let got = if nested {
        // Crash in the middle of recovery, at its second fence, then recover again.
        let saved: Arc<Mutex<Option<SimImage>>> = Arc::default();
        let region = Arc::new(SimRegion::from_image(image.pool.clone()));
        let host = SimHostFs::from_image(&image.host, host_config());
        let sink = saved.clone();
        let recovering = host.clone();
        let mut k = 0;
        region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
            k += 1;
            if k == 2 {
                let hp = recovering.crash_point();
                *sink.lock().unwrap() = cp.images().last().map(|pool| SimImage {
                    pool,
                    host: hp.image(hp.image_count() - 1),
                });
            }
        }));
        let first = mmio::MmioStore::open_on(region.clone(), mmio::HostMedia::on(host), cfg);
        drop(first);
        region.take_fence_hook();
        let mid = saved.lock().unwrap().take();
        o.nested += mid.is_some() as u64;
        sim_reopen(mid.unwrap_or(image), cfg).and_then(|(_r, s)| contents(&s))
    } else {
        sim_reopen(image, cfg).and_then(|(_r, s)| {
            if std::env::var("MMIO_CRASH_TRACE").is_ok() {
                eprintln!("recovery: {:?}", s.recovery_report());
            }
            contents(&s)
        })
    };
    o.checked_images += 1;
    match got {
        Err(e) => o
            .failure
            .get_or_insert(format!("recovery failed (nested {nested}): {e}")),
        Ok(got) => {
            if got == o.committed || o.inflight.as_ref() == Some(&got) {
                return;
            }
            let lens: Vec<_> = got.iter().map(|(k, v)| (k.clone(), v.len())).collect();
            let want: Vec<_> = o
                .committed
                .iter()
                .map(|(k, v)| (k.clone(), v.len()))
                .collect();
            let diff = got.iter().find_map(|(k, v)| {
                let w = o.committed.get(k)?;
                let p = v.iter().zip(w).position(|(a, b)| a != b)?;
                Some((k.clone(), p))
            });
            o.failure.get_or_insert(format!(
                "recovered state (lens {lens:?}) is neither the committed one (lens {want:?}) nor the in-flight one (nested {nested}, first difference from committed {diff:?}, inflight {})",
                o.inflight.is_some()
            ))
        }
    };
}

fn run(seed: u64, mode: PolicyMode, ops: usize) -> (u64, u64, u64) {
    let cfg = MmioConfig {
        policy_mode: mode,
        ..MmioConfig::test_min()
    };
    let (sim, s) = sim_store(&cfg);
    sim.region.set_crash_config(CrashConfig {
        exhaustive_limit: 4,
        sample_count: 3,
        seed,
    });
    // One time line for both media: every fence of the log pool and every sync of the host
    // directory is a crash point.
    let clock = Arc::new(AtomicU64::new(0));
    sim.host.set_clock(clock.clone());
    let fhs: Vec<Fh> = (0..NFILES)
        .map(|i| open_rw(&s, &format!("/f{i}"), false))
        .collect();
    let oracle = Arc::new(Mutex::new(Oracle {
        committed: tree_of(&vec![Vec::new(); NFILES], &Tree::new()),
        ..Default::default()
    }));
    {
        // A crash at a fence of the log pool: its images, each with a crash image of the
        // host directory at the same moment.
        let (oracle, cfg, host, clock) =
            (oracle.clone(), cfg.clone(), sim.host.clone(), clock.clone());
        sim.region
            .set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
                let tick = clock.fetch_add(1, Ordering::Relaxed);
                let mut o = oracle.lock().unwrap();
                o.fences += 1;
                if o.failure.is_some() {
                    return;
                }
                let hp = host.crash_point();
                for (i, pool) in cp.images().enumerate() {
                    let host = hp.image((tick + i as u64 * 7) % hp.image_count());
                    let image = SimImage { pool, host };
                    check_image(&mut o, image, &cfg, (tick + i as u64).is_multiple_of(7));
                }
            }));
    }
    {
        // A crash at a sync of the host directory (fsync, msync): its images, each with a
        // crash image of the log pool at the same moment.
        let (oracle, cfg, region) = (oracle.clone(), cfg.clone(), sim.region.clone());
        sim.host.set_sync_hook(Box::new(move |hp: &HostCrashPoint| {
            let mut o = oracle.lock().unwrap();
            o.syncs += 1;
            if o.failure.is_some() {
                return;
            }
            let cp = region.crash_point();
            let pools: Vec<Vec<u8>> = cp.images().collect();
            let count = hp.image_count().min(3);
            for k in 0..count {
                let index = (hp.clock() + k * 5) % hp.image_count();
                let pool = pools[(k as usize) % pools.len()].clone();
                let image = SimImage {
                    pool,
                    host: hp.image(index),
                };
                check_image(&mut o, image, &cfg, false);
            }
        }));
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); NFILES];
    let mut extra = Tree::new();
    let mut next_name = 0u32;
    let set_inflight =
        |m: &Vec<Vec<u8>>, x: &Tree| oracle.lock().unwrap().inflight = Some(tree_of(m, x));
    let commit_model = |m: &Vec<Vec<u8>>, x: &Tree| {
        let mut o = oracle.lock().unwrap();
        o.committed = tree_of(m, x);
        o.inflight = None;
    };
    let write_model = |m: &mut Vec<Vec<u8>>, f: usize, off: usize, data: &[u8]| {
        if m[f].len() < off + data.len() {
            m[f].resize(off + data.len(), 0);
        }
        m[f][off..off + data.len()].copy_from_slice(data);
    };
    for op in 0..ops {
        let kind = rng.gen_range(0..15);
        let f = rng.gen_range(0..NFILES);
        let off = rng.gen_range(0..24_000usize);
        let len = [1usize, 17, 100, 4096, 5000, 9000][rng.gen_range(0..6)];
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if std::env::var("MMIO_CRASH_TRACE").is_ok() {
            eprintln!(
                "op {op}: kind {kind} f {f} off {off} len {len} sizes {:?}",
                model.iter().map(Vec::len).collect::<Vec<_>>()
            );
        }
        match kind {
            0..=3 => {
                // A single write: its own transaction.
                let mut next = model.clone();
                write_model(&mut next, f, off, &data);
                set_inflight(&next, &extra);
                s.write(fhs[f], off as u64, &data).unwrap();
                model = next;
                commit_model(&model, &extra);
            }
            4..=6 => {
                // A multi-file transaction of a few writes (and maybe a truncation).
                let g = (f + 1) % NFILES;
                let tx = s.tx_begin(&[fhs[f], fhs[g]]).unwrap();
                let mut next = model.clone();
                for k in 0..rng.gen_range(1..4) {
                    let file = if k % 2 == 0 { f } else { g };
                    let o2 = rng.gen_range(0..20_000usize);
                    let d: Vec<u8> = (0..rng.gen_range(1..6000)).map(|_| rng.gen()).collect();
                    if std::env::var("MMIO_CRASH_TRACE").is_ok() {
                        eprintln!("   tx write file {file} at {o2} len {}", d.len());
                    }
                    s.write(fhs[file], o2 as u64, &d).unwrap();
                    write_model(&mut next, file, o2, &d);
                }
                if rng.gen_bool(0.2) {
                    let l = rng.gen_range(0..next[g].len() + 1);
                    if std::env::var("MMIO_CRASH_TRACE").is_ok() {
                        eprintln!("   tx set_len file {g} to {l}");
                    }
                    s.set_len(fhs[g], l as u64).unwrap();
                    next[g].truncate(l);
                }
                if rng.gen_bool(0.15) {
                    if std::env::var("MMIO_CRASH_TRACE").is_ok() {
                        eprintln!("   tx abort");
                    }
                    s.tx_abort(tx).unwrap();
                } else {
                    set_inflight(&next, &extra);
                    s.tx_commit(tx).unwrap();
                    model = next;
                    commit_model(&model, &extra);
                }
            }
            7 => {
                // Truncate (its own transaction).
                let l = rng.gen_range(0..model[f].len() + 1);
                let mut next = model.clone();
                next[f].truncate(l);
                set_inflight(&next, &extra);
                s.set_len(fhs[f], l as u64).unwrap();
                model = next;
                commit_model(&model, &extra);
            }
            8 => {
                // Background-style checkpoint of committed entries.
                s.checkpoint_all().unwrap();
            }
            12 => {
                // fallocate outside a transaction: punch a hole or zero a range (its own
                // transaction; the punch frees host storage after a locked checkpoint).
                let size = model[f].len();
                let (o2, l2) = (off.min(size), len as u64);
                let op = if rng.gen_bool(0.5) {
                    store::Fallocate::PunchHole
                } else {
                    store::Fallocate::ZeroRange { keep_size: false }
                };
                let mut next = model.clone();
                let end = o2 + len;
                let limit = match op {
                    store::Fallocate::PunchHole => end.min(size),
                    _ => end,
                };
                if next[f].len() < limit {
                    next[f].resize(limit, 0);
                }
                next[f][o2..limit.max(o2)].fill(0);
                set_inflight(&next, &extra);
                s.fallocate(fhs[f], op, o2 as u64, l2).unwrap();
                model = next;
                commit_model(&model, &extra);
            }
            13 | 14 if extra.len() >= 2 => {
                // In a transaction: exchange two extra files' names, or change an extended
                // attribute of one; commit or abort.
                let tx = s.tx_begin(&[]).unwrap();
                let mut next_extra = extra.clone();
                let names: Vec<String> = extra
                    .keys()
                    .filter(|k| !k.contains('\0'))
                    .cloned()
                    .collect();
                let a = names[rng.gen_range(0..names.len())].clone();
                let b = names[rng.gen_range(0..names.len())].clone();
                if kind == 13 && a != b {
                    s.rename_with(
                        store::ROOT_INO,
                        &a.as_bytes()[1..],
                        store::ROOT_INO,
                        &b.as_bytes()[1..],
                        store::RenameMode::Exchange,
                        Some(tx),
                    )
                    .unwrap();
                    let moved: Vec<(String, Vec<u8>)> = extra
                        .iter()
                        .filter(|(k, _)| {
                            k.starts_with(&format!("{a}\0"))
                                || k.starts_with(&format!("{b}\0"))
                                || **k == a
                                || **k == b
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    for (k, _) in &moved {
                        next_extra.remove(k);
                    }
                    for (k, v) in moved {
                        let swapped = if k == a || k.starts_with(&format!("{a}\0")) {
                            k.replacen(&a, &b, 1)
                        } else {
                            k.replacen(&b, &a, 1)
                        };
                        next_extra.insert(swapped, v);
                    }
                } else {
                    let ino = store::resolve(&s, &a).unwrap().ino;
                    let name = format!("user.k{}", rng.gen_range(0..3));
                    let key = xattr_key(&a, name.as_bytes());
                    if extra.contains_key(&key) && rng.gen_bool(0.4) {
                        s.removexattr(ino, name.as_bytes(), Some(tx)).unwrap();
                        next_extra.remove(&key);
                    } else {
                        let value: Vec<u8> =
                            (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect();
                        s.setxattr(
                            ino,
                            name.as_bytes(),
                            &value,
                            store::XattrSet::Either,
                            Some(tx),
                        )
                        .unwrap();
                        next_extra.insert(key, value);
                    }
                }
                if rng.gen_bool(0.2) {
                    s.tx_abort(tx).unwrap();
                } else {
                    set_inflight(&model, &next_extra);
                    s.tx_commit(tx).unwrap();
                    extra = next_extra;
                    commit_model(&model, &extra);
                }
            }
            _ => {
                // A namespace transaction: create and write a file, maybe unlink or rename
                // another extra file, maybe write f; commit or abort.
                let tx = s.tx_begin(&[fhs[f]]).unwrap();
                let mut next_extra = extra.clone();
                let mut next = model.clone();
                next_name += 1;
                let name = format!("/t{next_name}");
                let fh = store::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .open(&s, &name, Some(tx))
                    .unwrap();
                let d: Vec<u8> = (0..rng.gen_range(1..7000)).map(|_| rng.gen()).collect();
                s.write(fh, 0, &d).unwrap();
                next_extra.insert(name.clone(), d);
                let files: Vec<String> = extra
                    .keys()
                    .filter(|k| !k.contains('\0'))
                    .cloned()
                    .collect();
                if let Some(old) = files.get(rng.gen_range(0..files.len().max(1))).cloned() {
                    let attrs = format!("{old}\0");
                    if files.len() >= 6 || rng.gen_bool(0.5) {
                        s.unlink(store::ROOT_INO, &old.as_bytes()[1..], Some(tx))
                            .unwrap();
                        next_extra.remove(&old);
                        next_extra.retain(|k, _| !k.starts_with(&attrs));
                    } else {
                        let to = format!("/r{next_name}");
                        s.rename(
                            store::ROOT_INO,
                            &old.as_bytes()[1..],
                            store::ROOT_INO,
                            &to.as_bytes()[1..],
                            Some(tx),
                        )
                        .unwrap();
                        let v = next_extra.remove(&old).unwrap_or_default();
                        let carried: Vec<(String, Vec<u8>)> = next_extra
                            .iter()
                            .filter(|(k, _)| k.starts_with(&attrs))
                            .map(|(k, v)| (k.replacen(&old, &to, 1), v.clone()))
                            .collect();
                        next_extra.retain(|k, _| !k.starts_with(&attrs));
                        next_extra.extend(carried);
                        next_extra.insert(to, v);
                    }
                }
                if rng.gen_bool(0.5) {
                    s.write(fhs[f], off as u64, &data).unwrap();
                    write_model(&mut next, f, off, &data);
                }
                if rng.gen_bool(0.2) {
                    s.tx_abort(tx).unwrap();
                    s.release(fh).unwrap();
                } else {
                    set_inflight(&next, &next_extra);
                    s.tx_commit(tx).unwrap();
                    s.release(fh).unwrap();
                    model = next;
                    extra = next_extra;
                    commit_model(&model, &extra);
                }
            }
        }
        let o = oracle.lock().unwrap();
        if let Some(why) = &o.failure {
            panic!("seed {seed} mode {mode:?}: after op {op}: {why}");
        }
    }
    sim.region.take_fence_hook();
    sim.host.take_sync_hook();
    assert_eq!(
        contents(&s).unwrap(),
        tree_of(&model, &extra),
        "live contents differ from the model (seed {seed})"
    );
    let o = oracle.lock().unwrap();
    assert!(o.fences > 0 && o.syncs > 0, "crash points on both media");
    (o.fences + o.syncs, o.checked_images, o.nested)
}

fn seed() -> u64 {
    std::env::var("MMIO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED)
}

#[test]
fn crash_images_hybrid() {
    let (f, i, n) = run(seed(), PolicyMode::Hybrid, 60);
    println!("hybrid: {f} crash points (fences and host syncs), {i} crash images recovered and checked ({n} with a crash during recovery)");
    assert!(i > 100);
}

#[test]
fn crash_images_undo() {
    let (f, i, n) = run(seed() ^ 1, PolicyMode::Undo, 40);
    println!("undo: {f} crash points, {i} crash images checked ({n} nested)");
    assert!(i > 100);
}

#[test]
fn crash_images_redo() {
    let (f, i, n) = run(seed() ^ 2, PolicyMode::Redo, 40);
    println!("redo: {f} crash points, {i} crash images checked ({n} nested)");
    assert!(i > 100);
}
