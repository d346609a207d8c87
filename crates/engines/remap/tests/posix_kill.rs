//! SIGKILL torture of the POSIX calls on a real directory (/dev/shm, else /tmp; tmpfs has no
//! reflink, so the stores copy at checkpoints): a child process (this test binary, test
//! `victim`) formats a store, runs tests/common/posix_steps.rs's steps (symlink, mknod,
//! attributes, fallocate, rename modes, O_TMPFILE + link, one transaction of everything, a
//! checkpoint) and reports each acknowledged step through its stdout pipe. The parent
//! SIGKILLs it up to 300 µs after the report of a random step, opens the store (recovery) and checks that the tree is
//! the one after the acknowledged steps or after one more (the step in flight), fsck clean.
//! The expected trees come from the same steps run on the host crash model in this process.
//!
//! CI scale: `ROUNDS`. Longer: `ATOMFS_REMAP_POSIX_KILL_ROUNDS=2000 cargo test -p
//! atomfs-remap --release --test posix_kill -- --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::posix_steps::{setup, STEPS};
use conformance::tree::{diff, snapshot, Tree};
use conformance::Rng;
use hostfs::SimHostFs;
use remap::{HostRemapStore, RemapConfig, RemapStore};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use store::Store;

const ROUNDS: u64 = 100;

fn config() -> RemapConfig {
    RemapConfig {
        copy_checkpoint: true,
        checkpoint_journal_len: 24 << 10,
        ..RemapConfig::test_min()
    }
}

fn scratch() -> PathBuf {
    let root = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!(
        "{root}/atomfs-remap-posix-kill-{}",
        std::process::id()
    ))
}

/// The victim: runs only when the parent below started this binary for it.
#[test]
fn victim() {
    let Ok(dir) = std::env::var("ATOMFS_REMAP_POSIX_KILL_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let s = HostRemapStore::create(&dir.join("pool"), &dir.join("home"), &config()).unwrap();
    setup(&s);
    println!("ready");
    let start = Instant::now();
    for (k, (_, step)) in STEPS.iter().enumerate() {
        step(&s);
        println!("step {}", k + 1);
    }
    println!("done {}", start.elapsed().as_micros());
    std::thread::sleep(Duration::from_secs(60));
}

/// The tree after `k` steps, for every k (a step "never committed" leaves it as it was).
fn expected() -> Vec<Tree> {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim, 1, &config()).unwrap();
    setup(&s);
    let mut trees = vec![snapshot(&s).unwrap()];
    for (name, step) in STEPS {
        step(&s);
        let t = if name.contains("never committed") {
            trees.last().unwrap().clone()
        } else {
            snapshot(&s).unwrap()
        };
        trees.push(t);
    }
    trees
}

fn victim_process(dir: &Path) -> std::process::Child {
    std::fs::create_dir_all(dir.join("home")).unwrap();
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "victim", "--nocapture", "--test-threads=1"])
        .env("ATOMFS_REMAP_POSIX_KILL_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// One round: the victim killed `delay` after it reported step `after` (0: its store
/// ready); returns the steps it acknowledged.
fn round(dir: &Path, after: usize, delay: Duration, want: &[Tree]) -> usize {
    let mut child = victim_process(dir);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mark = match after {
        0 => "ready".to_string(),
        k => format!("step {k}"),
    };
    let mut line = String::new();
    while !line.trim_end().ends_with(&mark) {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the victim reports {mark}"
        );
    }
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL, to the child started above
    child.wait().unwrap();
    let lines: Vec<String> = out.lines().map_while(|l| l.ok()).collect();
    let acked = lines
        .iter()
        .filter_map(|l| l.strip_prefix("step ")?.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
        .max(after);
    let s = HostRemapStore::open(&dir.join("pool"), &config()).unwrap();
    let got = snapshot(&s).unwrap();
    let next = want.get(acked + 1).unwrap_or(&want[acked]);
    assert!(
        got == want[acked] || got == *next,
        "killed after {delay:?}, {acked} steps acknowledged: {:?} / {:?}",
        diff(&want[acked], &got, 6),
        diff(next, &got, 6)
    );
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    acked
}

#[test]
fn posix_calls_survive_sigkill_at_random_moments() {
    let rounds = std::env::var("ATOMFS_REMAP_POSIX_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS);
    let want = expected();
    let base = scratch();
    let mut rng = Rng::new(0x9051_c0de);
    let mut seen = vec![0u64; STEPS.len() + 1];
    for r in 0..rounds {
        // After a random step's report, within about a step's time (a step takes tens of
        // microseconds to a few milliseconds here).
        let after = rng.below(STEPS.len() as u64) as usize;
        let delay = Duration::from_micros(rng.below(300));
        let dir = base.join(r.to_string());
        seen[round(&dir, after, delay, &want)] += 1;
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::remove_dir_all(&base).unwrap();
    eprintln!("posix_kill: {rounds} rounds; kills by steps acknowledged: {seen:?}");
}
