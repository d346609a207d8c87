//! Crash images of the rest of the POSIX file API (symlinks, special files, rename modes,
//! extended attributes, fallocate, O_TMPFILE) on the journal engine's crash target: the PM
//! journal is a `pmem::SimRegion` paired with the host model of the home directory
//! (`journal::crash_target`). A fixed sequence of steps, each one call or one transaction;
//! at every fence of each step, crash images are recovered (each PM image with the host
//! image of the same moment) and checked: the tree (`conformance::tree::snapshot`: data,
//! link targets, special files and attributes) is exactly the one before or after the step,
//! fsck is clean, and a second recovery of the recovered image finds the same tree; after the
//! step returns, a crash recovers exactly the after-state. The after-state of each step comes
//! from a dry run of the same sequence without crash points.
//!
//! `cargo test -p atomfs-journal --test crash_posix` (NJS and the variant without deltas).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::posix_steps::step;
use conformance::tree::{diff, snapshot, Tree};
use crash::CrashTarget;
use journal::crash_target::JournalTarget;
use journal::Variant;
use pmem::{CrashConfig, SimRegion};
use std::sync::{Arc, Mutex};

/// The tree after every step, from a run without crash points.
fn dry_run(target: &JournalTarget) -> Vec<Tree> {
    let s = target
        .format(Arc::new(SimRegion::new(target.region_len())))
        .unwrap();
    let mut trees = vec![snapshot(s.as_ref()).unwrap()];
    let mut n = 0;
    while step(s.as_ref(), n) {
        trees.push(snapshot(s.as_ref()).unwrap());
        n += 1;
    }
    trees
}

#[derive(Default)]
struct Oracle {
    before: Tree,
    after: Tree,
    step: usize,
    points: u64,
    images: u64,
    failures: Vec<String>,
}

fn check_image(image: Vec<u8>, o: &Oracle, target: &JournalTarget) -> Option<String> {
    let region = Arc::new(SimRegion::from_image(image));
    let s = match target.recover(region.clone()) {
        Ok(s) => s,
        Err(e) => return Some(format!("recovery failed: {e}")),
    };
    let tree = match snapshot(s.as_ref()) {
        Ok(t) => t,
        Err(e) => return Some(format!("reading after recovery: {e}")),
    };
    if tree != o.before && tree != o.after {
        return Some(format!(
            "neither before ({:?}) nor after ({:?})",
            diff(&o.before, &tree, 4),
            diff(&o.after, &tree, 4)
        ));
    }
    match s.fsck() {
        Ok(r) if r.is_clean() => {}
        other => return Some(format!("fsck after recovery: {other:?}")),
    }
    drop(s);
    let again = target.recover(Arc::new(SimRegion::from_image(region.persistent_image())));
    match again.map(|a| snapshot(a.as_ref())) {
        Ok(Ok(t)) if t == tree => None,
        Ok(Ok(t)) => Some(format!("second recovery: {:?}", diff(&tree, &t, 4))),
        Ok(Err(e)) => Some(format!("reading after a second recovery: {e}")),
        Err(e) => Some(format!("second recovery failed: {e}")),
    }
}

/// Run the sequence with crash images at every fence; returns (crash points, images).
fn run(target: &JournalTarget) -> (u64, u64) {
    let trees = dry_run(target);
    let region = Arc::new(SimRegion::new(target.region_len()));
    let s = target.format(region.clone()).unwrap();
    let oracle = Arc::new(Mutex::new(Oracle::default()));
    region.set_crash_config(CrashConfig {
        exhaustive_limit: 2,
        sample_count: 2,
        seed: 11,
    });
    let (hook_oracle, hook_target) = (oracle.clone(), target.clone());
    let name = target.name();
    region.set_fence_hook(Box::new(move |point| {
        let mut o = hook_oracle.lock().unwrap();
        o.points += 1;
        for index in 0..point.image_count() {
            o.images += 1;
            if let Some(failure) = check_image(point.image(index), &o, &hook_target) {
                let msg = format!(
                    "{name}: step {} fence {} image {index} ({}): {failure}",
                    o.step,
                    point.fence_index(),
                    point.describe(index)
                );
                o.failures.push(msg);
            }
        }
    }));
    for n in 0..trees.len() - 1 {
        {
            let mut o = oracle.lock().unwrap();
            (o.before, o.after, o.step) = (trees[n].clone(), trees[n + 1].clone(), n);
        }
        assert!(step(s.as_ref(), n));
        let o = oracle.lock().unwrap();
        assert!(o.failures.is_empty(), "{}", o.failures[0]);
        drop(o);
        // Durable once the call returned: a crash now recovers the after-state.
        let now = target
            .recover(Arc::new(SimRegion::from_image(region.persistent_image())))
            .unwrap();
        let tree = snapshot(now.as_ref()).unwrap();
        assert!(
            tree == trees[n + 1],
            "step {n} is not durable: {:?}",
            diff(&trees[n + 1], &tree, 4)
        );
    }
    drop(region.take_fence_hook());
    assert_eq!(&snapshot(s.as_ref()).unwrap(), trees.last().unwrap());
    let o = oracle.lock().unwrap();
    (o.points, o.images)
}

#[test]
fn the_new_calls_recover_to_before_or_after_at_every_fence() {
    let v = Variant::NJS;
    for target in [
        JournalTarget::new(v, "journal-njs"),
        JournalTarget::new(Variant { delta: false, ..v }, "journal-no-delta"),
    ] {
        let (points, images) = run(&target);
        eprintln!(
            "crash_posix {}: {points} crash points, {images} images",
            target.name()
        );
        assert!(points > 60 && images >= points, "{points} points");
    }
}

/// The sequence itself ends where it should (a check of the dry run, so that the crash
/// test compares against the right trees).
#[test]
fn the_sequence_builds_the_expected_tree() {
    let trees = dry_run(&JournalTarget::new(Variant::NJS, "journal-njs"));
    let last = trees.last().unwrap();
    let names: Vec<String> = last
        .keys()
        .map(|k| String::from_utf8_lossy(k).replace('\0', "#"))
        .collect();
    assert_eq!(
        names,
        [
            "d",
            "d#user.a",
            "d#user.tx",
            "f",
            "f#trusted.t",
            "f/fifo",
            "f/in-tx",
            "long",
            "second",
            "zero"
        ]
    );
}
