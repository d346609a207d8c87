//! Process-kill torture: a child process runs a workload on a real mapped pool file (in
//! /dev/shm by default) and acknowledges every unit that returned, one line `ack N` on its
//! stdout (a pipe: a line written before the kill is read by the parent after it). The parent
//! SIGKILLs the child at a random moment, opens the pool (recovery), and checks the oracle:
//! the state equals the model after the last acknowledged unit, or after the next one (the
//! unit in flight at the kill) — never anything else; fsck clean. Repeated N times.
//!
//! The child is any command (the test binary itself, or `atomfs crashtest --child`); it calls
//! [`run_child`].

use crate::workload::{self, Handles, Unit, Workload, WorkloadConfig};
use crate::CrashReport;
use crate::Violation;
use conformance::{snapshot, ModelStore, Rng, Tree};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use store::{Result, Store};

/// An engine on a real pool file.
pub trait KillTarget: Send + Sync {
    fn name(&self) -> String;
    /// Create and format a new pool file at `path`.
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>>;
    /// Open an existing pool file, running recovery.
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>>;
}

/// Units a child runs (it is normally killed long before the end).
pub const CHILD_UNITS: usize = 5000;

fn child_workload(seed: u64) -> Workload {
    Workload::generate(WorkloadConfig {
        seed,
        units: CHILD_UNITS,
        threads: 1,
    })
}

/// Run one unit on `s` (prefix `/t0`) or on a model (prefix ""). Returns the outcomes.
fn exec_unit(s: &dyn Store, prefix: &str, unit: &Unit) -> Vec<String> {
    let mut h = Handles::new();
    let mut out = Vec::new();
    match unit {
        Unit::Tx { ops, end } => match s.tx_begin(&[]) {
            Ok(tx) => {
                for op in ops {
                    out.push(workload::exec_op(s, prefix, op, Some(tx), &mut h));
                }
                out.push(workload::outcome(&match end {
                    workload::TxEnd::Commit => s.tx_commit(tx),
                    workload::TxEnd::Abort => s.tx_abort(tx),
                }));
            }
            Err(e) => out.push(workload::outcome::<()>(&Err(e))),
        },
        Unit::Legacy(op) => out.push(workload::exec_op(s, prefix, op, None, &mut h)),
        Unit::Atomic { writes, end } => {
            out.extend(workload::exec_atomic_writes(s, prefix, writes, &mut h));
            out.push(workload::exec_atomic_end(s, *end, &h));
        }
    }
    h.release_all(s);
    out
}

/// The child side: create the pool at `path`, set up, then run the workload of `seed`,
/// printing `ready` after setup and `ack N` after unit N returned (each line flushed before
/// the next unit starts). Exits the loop with `done` at the end, or `diverge ...` when the
/// store and the model disagree.
pub fn run_child(target: &dyn KillTarget, path: &Path, seed: u64) -> Result<()> {
    let s = target.create_pool(path)?;
    workload::setup(s.as_ref(), "/t0")?;
    let model = ModelStore::new();
    workload::setup(&model, "")?;
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, line: String| {
        // The parent reads the pipe after the kill: a line written here is acknowledged.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    // A leading newline: a test harness may have printed a partial line ("test x ... ").
    say(&mut out, "\nready".into());
    for (i, unit) in child_workload(seed).threads[0].iter().enumerate() {
        let got = exec_unit(s.as_ref(), "/t0", unit);
        let want = exec_unit(&model, "", unit);
        if got != want {
            say(
                &mut out,
                format!("diverge unit {i}: model {want:?}, store {got:?}"),
            );
            return Ok(());
        }
        say(&mut out, format!("ack {i}"));
    }
    say(&mut out, "done".into());
    Ok(())
}

/// Torture settings.
#[derive(Clone, Debug)]
pub struct TortureConfig {
    pub seed: u64,
    pub rounds: u64,
    /// Directory of the pool files (default /dev/shm).
    pub dir: PathBuf,
    /// Longest time a child runs before the kill, in milliseconds.
    pub kill_after_ms_max: u64,
}

impl Default for TortureConfig {
    fn default() -> Self {
        TortureConfig {
            seed: 1,
            rounds: 20,
            dir: PathBuf::from("/dev/shm"),
            kill_after_ms_max: 150,
        }
    }
}

/// Model trees after setup and after each of the first `n` units.
fn model_states(seed: u64, n: usize) -> Result<Vec<Tree>> {
    let model = ModelStore::new();
    workload::setup(&model, "")?;
    let mut states = vec![snapshot(&model.crash())?];
    for unit in child_workload(seed).threads[0].iter().take(n) {
        exec_unit(&model, "", unit);
        states.push(snapshot(&model.crash())?);
    }
    Ok(states)
}

/// The parent side: `rounds` times, start `child(pool_path, seed)`, kill it at a random
/// moment, recover the pool with `target` and check it. Pool files are removed afterwards.
pub fn torture(
    target: &dyn KillTarget,
    child: &dyn Fn(&Path, u64) -> Command,
    cfg: &TortureConfig,
) -> CrashReport {
    let mut report = CrashReport {
        engine: target.name(),
        ..Default::default()
    };
    let mut rng = Rng::new(cfg.seed);
    for round in 0..cfg.rounds {
        let seed = cfg.seed.wrapping_mul(1000).wrapping_add(round);
        let pool = cfg
            .dir
            .join(format!("atomfs-torture-{}-{seed}.pool", std::process::id()));
        let _ = std::fs::remove_file(&pool);
        let violation = |what: String| Violation {
            engine: target.name(),
            seed,
            unit: None,
            at: format!("torture round {round}"),
            what,
            repro: format!("torture seed {seed}"),
        };
        let (lines, killed) = match run_and_kill(
            child(&pool, seed),
            Duration::from_millis(1 + rng.below(cfg.kill_after_ms_max)),
        ) {
            Ok((lines, killed)) => {
                report.kills += killed as u64;
                (lines, killed)
            }
            Err(e) => {
                report
                    .violations
                    .push(violation(format!("starting the child failed: {e}")));
                break;
            }
        };
        report.workloads += 1;
        let finished = lines
            .iter()
            .any(|l| l == "done" || l.starts_with("diverge"));
        if !killed && !finished {
            report.violations.push(violation(format!(
                "the child exited on its own without finishing: {lines:?}"
            )));
        } else if let Some(d) = lines.iter().find(|l| l.starts_with("diverge")) {
            report.violations.push(violation(d.clone()));
        } else if lines.iter().any(|l| l == "ready") {
            let acked = lines
                .iter()
                .filter_map(|l| l.strip_prefix("ack ")?.parse::<usize>().ok())
                .max();
            let done = acked.map_or(0, |a| a + 1);
            if let Err(what) = check_pool(target, &pool, seed, done) {
                report.violations.push(violation(what));
            }
            report.images += 1;
        }
        let _ = std::fs::remove_file(&pool);
    }
    report
}

/// Spawn, wait `delay`, SIGKILL; return the lines the child wrote and whether it was killed.
fn run_and_kill(mut cmd: Command, delay: Duration) -> std::io::Result<(Vec<String>, bool)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no child stdout"))?;
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
            .collect::<Vec<_>>()
    });
    std::thread::sleep(delay);
    let killed = child.try_wait()?.is_none();
    if killed {
        child.kill()?; // SIGKILL on Unix
    }
    child.wait()?;
    let lines = reader
        .join()
        .map_err(|_| std::io::Error::other("reader thread panicked"))?;
    Ok((lines, killed))
}

/// Recover the pool and compare with the model after `done` or `done + 1` units.
fn check_pool(
    target: &dyn KillTarget,
    pool: &Path,
    seed: u64,
    done: usize,
) -> std::result::Result<(), String> {
    let states = model_states(seed, done + 1).map_err(|e| format!("model: {e}"))?;
    let store = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.open_pool(pool)))
        .map_err(|_| "panic in recovery".to_string())?
        .map_err(|e| format!("recovery failed: {e}"))?;
    let tree = snapshot(store.as_ref()).map_err(|e| format!("reading the recovered pool: {e}"))?;
    let fsck = store.fsck().map_err(|e| format!("fsck: {e}"))?;
    if !fsck.is_clean() {
        return Err(format!("fsck: {:?}", fsck.problems));
    }
    if let Some((p, _)) = tree
        .iter()
        .find(|(p, _)| p.as_slice() != b"t0" && !p.starts_with(b"t0/"))
    {
        return Err(format!(
            "unexpected entry {} in the root",
            String::from_utf8_lossy(p)
        ));
    }
    let mine: Tree = tree
        .iter()
        .filter_map(|(p, n)| Some((p.strip_prefix(b"t0/".as_slice())?.to_vec(), n.clone())))
        .collect();
    let candidates = &states[done.min(states.len() - 1)..];
    if candidates.contains(&mine) {
        return Ok(());
    }
    let d = conformance::diff(&candidates[0], &mine, 4).join(", ");
    Err(format!(
        "{done} units acknowledged; the pool matches neither that state nor the next: {d}"
    ))
}
