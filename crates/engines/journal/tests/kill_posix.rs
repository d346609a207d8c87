//! SIGKILL torture of the POSIX calls on a real home directory and a mapped PM journal file
//! (both in /dev/shm, else /tmp): a child process (this test binary) opens the store and
//! runs the step sequence of tests/common/posix_steps.rs (symlinks, special files, rename
//! modes, attributes, fallocate, O_TMPFILE, in and out of transactions), acknowledging each
//! step on its stdout once the call returned; the parent kills it at a random moment of the
//! sequence, reopens the store (recovery) and checks that the tree is the one after the last
//! acknowledged step or after the step in flight, and that fsck is clean. The trees come from
//! a dry run of the sequence on the engine's crash target. Every round starts from a fresh
//! store made by the parent. CI scale: 40 rounds (a few seconds); more with
//! ATOMFS_JOURNAL_KILL_POSIX_ROUNDS=N; a failure prints its seed (ATOMFS_JOURNAL_KILL_SEED).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::posix_steps::step;
use conformance::tree::{diff, snapshot, Tree};
use crash::CrashTarget;
use journal::crash_target::JournalTarget;
use journal::{HostJournalStore, Variant};
use pmem::SimRegion;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Store;

const DIR_ENV: &str = "ATOMFS_JOURNAL_KILL_POSIX_DIR";

fn config() -> journal::StoreConfig {
    JournalTarget::new(Variant::NJS, "journal-njs").config
}

fn paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("home"), dir.join("journal.pm"))
}

/// The child: open the store, then run each step when the parent says so (a byte on stdin),
/// acknowledging it with the microseconds it took.
#[test]
fn kill_posix_child() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let (home, pm) = paths(Path::new(&dir));
    let s = HostJournalStore::open(&home, &pm, &config()).unwrap();
    let mut out = std::io::stdout().lock();
    let mut go = std::io::stdin().lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let mut n = 0;
    loop {
        let mut byte = [0u8];
        if go.read_exact(&mut byte).is_err() {
            return;
        }
        let t0 = Instant::now();
        if !step(&s, n) {
            break;
        }
        n += 1;
        writeln!(out, "STEP {n} {}", t0.elapsed().as_micros()).unwrap();
        out.flush().unwrap();
    }
    writeln!(out, "DONE").unwrap();
    out.flush().unwrap();
}

/// The tree after every step, from a run on the crash target.
fn dry_run() -> Vec<Tree> {
    let target = JournalTarget::new(Variant::NJS, "journal-njs");
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

/// When to kill the child: `delay` after it was told to run step `step` (0-based).
#[derive(Clone, Copy, Debug)]
struct Kill {
    step: usize,
    delay: Duration,
}

/// What a round saw: the steps acknowledged and each one's time in the child.
struct Seen {
    acked: usize,
    micros: Vec<u64>,
}

/// Run the child on the store in `dir` step by step, killed as `kill` says (never when
/// `None`).
fn round(dir: &Path, kill: Option<Kill>) -> Seen {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "kill_posix_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_ENV, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut go = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Seen {
        acked: 0,
        micros: Vec::new(),
    };
    for line in lines {
        let Ok(line) = line else { break };
        // libtest prints "test kill_posix_child ... " before the child's first line.
        if let Some(rest) = line.strip_prefix("STEP ") {
            let mut words = rest.split(' ');
            seen.acked = words.next().unwrap().parse().unwrap();
            seen.micros.push(words.next().unwrap().parse().unwrap());
        } else if !line.ends_with("READY") {
            if line == "DONE" {
                break;
            }
            continue;
        }
        let _ = go.write_all(b"g").and_then(|_| go.flush());
        if let Some(k) = kill.filter(|k| k.step == seen.acked) {
            std::thread::sleep(k.delay);
            // SIGKILL to our own child, by its pid.
            let _ = child.kill();
            break;
        }
    }
    drop(go);
    child.wait().unwrap();
    seen
}

fn scratch() -> PathBuf {
    let root = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-journal-kill-posix-{}",
        std::process::id()
    ))
}

/// A fresh store in `dir` (made and closed by the parent).
fn fresh(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let (home, pm) = paths(dir);
    std::fs::create_dir_all(&home).unwrap();
    let s = HostJournalStore::create(&home, &pm, &config()).unwrap();
    s.unmount().unwrap();
}

#[test]
fn killed_posix_calls_recover_to_an_acknowledged_state() {
    let trees = dry_run();
    let seed = std::env::var("ATOMFS_JOURNAL_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6b69_6c6c);
    let rounds: usize = std::env::var("ATOMFS_JOURNAL_KILL_POSIX_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let base = scratch();
    let dir = base.join("store");
    // A round without a kill: the sequence whole, and each step's time.
    fresh(&dir);
    let calibration = round(&dir, None);
    let steps = trees.len() - 1;
    assert_eq!(calibration.acked, steps, "the child ran every step");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut in_flight, mut before) = (0, 0);
    for r in 0..rounds {
        fresh(&dir);
        // Inside the step the child was just told to run, most of the time.
        let step = rng.gen_range(0..steps);
        let micros = calibration.micros[step] + 20;
        let kill = Kill {
            step,
            delay: Duration::from_micros(rng.gen_range(0..micros)),
        };
        let acked = round(&dir, Some(kill)).acked;
        let (home, pm) = paths(&dir);
        let s = HostJournalStore::open(&home, &pm, &config())
            .unwrap_or_else(|e| panic!("seed {seed} round {r}: recovery failed: {e}"));
        let tree = snapshot(&s).unwrap();
        let next = trees.get(acked + 1).unwrap_or(&trees[acked]);
        assert!(
            tree == trees[acked] || tree == *next,
            "seed {seed} round {r}: {acked} steps acknowledged; neither that state ({:?}) nor \
             the next ({:?})",
            diff(&trees[acked], &tree, 4),
            diff(next, &tree, 4)
        );
        let report = s.fsck().unwrap();
        assert!(
            report.is_clean(),
            "seed {seed} round {r}: fsck: {:?}",
            report.problems
        );
        if acked == step {
            in_flight += 1;
            if tree == trees[acked] {
                before += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    println!(
        "kill_posix: {rounds} rounds (seed {seed}) over {steps} steps; {in_flight} killed \
         before the step's acknowledgement, {before} of them recovered to the state before it"
    );
}
