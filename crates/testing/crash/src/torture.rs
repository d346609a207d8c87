//! Process-kill torture: a child process runs a workload on a real mapped pool file (in
//! /dev/shm by default) and acknowledges every unit that returned, one line `ack N` on its
//! stdout (a pipe: a line written before the kill is read by the parent after it). The parent
//! SIGKILLs the child at a random moment, opens the pool (recovery), and checks the oracle:
//! the state equals the model after the last acknowledged unit, or after the next one (the
//! unit in flight at the kill) — never anything else; fsck clean. Repeated N times.
//!
//! The child is any command (the test binary itself, or `atomfs crashtest --child`); it calls
//! [`run_child`].

use crate::workload::{self, Handles, PosixSteps, Unit};
use crate::CrashReport;
use crate::Violation;
use conformance::{snapshot, ModelStore, Rng, Tree};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use store::{Error, FileKind, Ino, OpenFlags, Result, SetAttr, Store, XattrSet, ROOT_INO};

/// An engine on a real pool file.
pub trait KillTarget: Send + Sync {
    fn name(&self) -> String;
    /// Create and format a new pool file at `path`.
    fn create_pool(&self, path: &Path) -> Result<Box<dyn Store>>;
    /// Open an existing pool file, running recovery.
    fn open_pool(&self, path: &Path) -> Result<Box<dyn Store>>;
    /// The steps beyond files and directories the child runs (as
    /// [`CrashTarget::posix_steps`](crate::CrashTarget::posix_steps)).
    fn posix_steps(&self) -> PosixSteps {
        PosixSteps::of_engine(&self.name())
    }
    /// Remove what [`KillTarget::create_pool`] created at `path` (errors ignored).
    fn remove_pool(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

/// Units a child runs at most: far more than it can run before the kill (a release build
/// runs about 45,000 units a second on a small pool), so that every round ends in a SIGKILL.
pub const CHILD_UNITS: usize = 10_000_000;

/// The first `n` units of the child workload of `seed` with the POSIX steps `steps`
/// (generated lazily: the parent needs only the acknowledged prefix).
fn child_units(steps: PosixSteps, seed: u64, n: usize) -> impl Iterator<Item = Unit> {
    workload::unit_stream(seed, 0)
        .take(n)
        .map(move |u| u.offered_by(steps))
}

/// Whether an outcome says the store ran out of room (a legitimate outcome the model, which
/// has no limits, does not share; the unit must then have had no effect).
fn out_of_space(outcome: &str) -> bool {
    outcome == "err:NoSpace" || outcome == "err:LogFull"
}

/// Run one unit on `s` (prefix `/t0`) or on a model (prefix ""). Returns the outcomes. A
/// unit that ran out of room is rolled back (its transaction aborted, its O_ATOMIC writes
/// dropped), as the crash driver does.
fn exec_unit(s: &dyn Store, prefix: &str, unit: &Unit) -> Vec<String> {
    let mut h = Handles::new();
    let mut out = Vec::new();
    match unit {
        Unit::Tx { ops, end } => match s.tx_begin(&[]) {
            Ok(tx) => {
                for op in ops {
                    out.push(workload::exec_op(s, prefix, op, Some(tx), &mut h));
                }
                let end = match out.iter().any(|o| out_of_space(o)) {
                    true => workload::TxEnd::Abort,
                    false => *end,
                };
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
            let end = match out.iter().any(|o| out_of_space(o)) {
                true => workload::AtomicEnd::Abortv,
                false => *end,
            };
            out.push(workload::exec_atomic_end(s, end, &h));
        }
    }
    h.release_all(s);
    out
}

/// Whether the store's outcomes `got` differ from the model's `want` only where the store ran
/// out of room (and the unit was rolled back).
fn rolled_back_for_space(got: &[String], want: &[String]) -> bool {
    got.len() == want.len()
        && got.iter().any(|g| out_of_space(g))
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g == w || (w == "ok" && out_of_space(g)))
}

/// The directory `/t0` of a store, as a tree relative to it; `Err` names an entry outside it.
fn thread_tree(store: &dyn Store) -> std::result::Result<Tree, String> {
    let tree = snapshot(store).map_err(|e| format!("reading the pool: {e}"))?;
    if let Some((p, _)) = tree
        .iter()
        .find(|(p, _)| p.as_slice() != b"t0" && !p.starts_with(b"t0/"))
    {
        return Err(format!(
            "unexpected entry {} in the root",
            String::from_utf8_lossy(p)
        ));
    }
    Ok(tree
        .iter()
        .filter_map(|(p, n)| Some((p.strip_prefix(b"t0/".as_slice())?.to_vec(), n.clone())))
        .collect())
}

/// A copy of `start`, or a freshly set-up model.
fn model_from(start: Option<&ModelStore>) -> Result<ModelStore> {
    match start {
        Some(model) => Ok(model.fork()),
        None => {
            let model = ModelStore::new();
            workload::setup(&model, "")?;
            Ok(model)
        }
    }
}

/// A model holding what `/t0` of `s` holds: names, bytes, hard links (one inode under each
/// name), symbolic links, special files, permissions, modification times and extended
/// attributes, so that the units run next do on the model what they do on `s`.
fn model_copy(s: &dyn Store) -> Result<ModelStore> {
    let model = ModelStore::new();
    let top = store::path::resolve(s, "/t0")?.ino;
    copy_dir(s, top, &model, ROOT_INO, &mut HashMap::new(), 0)?;
    Ok(model)
}

fn copy_dir(
    s: &dyn Store,
    dir: Ino,
    model: &ModelStore,
    into: Ino,
    linked: &mut HashMap<Ino, Ino>,
    depth: usize,
) -> Result<()> {
    if depth > 64 {
        return Err(Error::corrupt("directory tree deeper than 64 levels", dir));
    }
    for entry in s.read_dir(dir)? {
        let meta = s.getattr(entry.ino)?;
        if let Some(&copy) = linked.get(&entry.ino) {
            model.link(copy, into, &entry.name, None)?;
            continue;
        }
        let made = match meta.kind {
            FileKind::Dir => model.mkdir(into, &entry.name, meta.perm, None)?,
            FileKind::File => {
                let made = model.create(into, &entry.name, meta.perm, None)?;
                let bytes = read_all(s, entry.ino, meta.size)?;
                let fh = model.open(
                    made.ino,
                    OpenFlags {
                        write: true,
                        ..OpenFlags::default()
                    },
                )?;
                let written = model.write(fh, 0, &bytes);
                model.release(fh)?;
                written?;
                made
            }
            FileKind::Symlink => model.symlink(into, &entry.name, &s.readlink(entry.ino)?, None)?,
            kind => model.mknod(into, &entry.name, kind, meta.perm, meta.rdev, None)?,
        };
        let names = match s.listxattr(entry.ino) {
            Err(Error::Unsupported(_)) => Vec::new(),
            other => other?,
        };
        for name in names {
            let value = s.getxattr(entry.ino, &name)?;
            model.setxattr(made.ino, &name, &value, XattrSet::Either, None)?;
        }
        if meta.kind != FileKind::Symlink {
            let attr = SetAttr {
                perm: Some(meta.perm),
                mtime: (meta.kind == FileKind::File).then_some(meta.mtime),
                ..SetAttr::default()
            };
            model.setattr(made.ino, &attr, None)?;
        }
        if meta.nlink > 1 && meta.kind != FileKind::Dir {
            linked.insert(entry.ino, made.ino);
        }
        if meta.kind == FileKind::Dir {
            copy_dir(s, entry.ino, model, made.ino, linked, depth + 1)?;
        }
    }
    Ok(())
}

/// The `size` bytes of file `ino` of `s`.
fn read_all(s: &dyn Store, ino: Ino, size: u64) -> Result<Vec<u8>> {
    let len = usize::try_from(size).map_err(|_| Error::corrupt("file larger than memory", ino))?;
    let fh = s.open(
        ino,
        OpenFlags {
            read: true,
            ..OpenFlags::default()
        },
    )?;
    let mut out = vec![0u8; len];
    let mut done = 0;
    let r = loop {
        if done == len {
            break Ok(());
        }
        match s.read(fh, done as u64, &mut out[done..]) {
            Ok(0) => break Err(Error::corrupt("file shorter than its size", ino)),
            Ok(n) => done += n,
            Err(e) => break Err(e),
        }
    };
    s.release(fh)?;
    r.map(|()| out)
}

/// The child side. When `path` exists, open it (recovery) and continue from its contents;
/// otherwise create the pool and set it up. Then print `ready`, run the workload of `seed` and
/// print `ack N` after unit N returned (each line flushed before the next unit starts; `ack N
/// rolled-back` when the store ran out of room and the unit had no effect). Ends with `done`,
/// or `diverge ...` when the store and the model disagree.
pub fn run_child(target: &dyn KillTarget, path: &Path, seed: u64) -> Result<()> {
    let (s, model) = if path.exists() {
        let s = target.open_pool(path)?;
        thread_tree(s.as_ref()).map_err(store::Error::InvalidArgument)?;
        let model = model_copy(s.as_ref())?;
        (s, model)
    } else {
        let s = target.create_pool(path)?;
        workload::setup(s.as_ref(), "/t0")?;
        (s, model_from(None)?)
    };
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, line: String| {
        // The parent reads the pipe after the kill: a line written here is acknowledged.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    // A leading newline: a test harness may have printed a partial line ("test x ... ").
    say(&mut out, "\nready".into());
    for (i, unit) in child_units(target.posix_steps(), seed, CHILD_UNITS).enumerate() {
        let got = exec_unit(s.as_ref(), "/t0", &unit);
        let saved = model.fork();
        let want = exec_unit(&model, "", &unit);
        if got != want && rolled_back_for_space(&got, &want) {
            model.restore(saved);
            say(&mut out, format!("ack {i} rolled-back"));
            continue;
        }
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
    /// Keep one pool across rounds: each child recovers the pool the previous one was killed
    /// on (so kills also land inside recovery) and continues from its contents.
    pub continue_pool: bool,
    /// Share of rounds whose kill delay counts from the spawn (so the kill may land in pool
    /// creation or recovery); the others count it from the child's `ready`.
    pub early_kill_percent: u64,
}

impl Default for TortureConfig {
    fn default() -> Self {
        TortureConfig {
            seed: 1,
            rounds: 20,
            dir: PathBuf::from("/dev/shm"),
            kill_after_ms_max: 150,
            continue_pool: false,
            early_kill_percent: 20,
        }
    }
}

/// The states a pool may hold after `done` acknowledged units of `seed`: the model after
/// them and, when the child was `ready` (a unit may have been in flight), after one more.
/// Only these two are read back from the model (a child acknowledges thousands of units).
fn model_candidates(
    steps: PosixSteps,
    start: Option<&ModelStore>,
    seed: u64,
    (done, rolled_back): (usize, &[usize]),
    ready: bool,
) -> Result<Vec<Tree>> {
    let model = model_from(start)?;
    let mut units = child_units(steps, seed, done + usize::from(ready));
    for (i, unit) in units.by_ref().take(done).enumerate() {
        if !rolled_back.contains(&i) {
            exec_unit(&model, "", &unit);
        }
    }
    let mut states = vec![snapshot(&model.crash())?];
    for unit in units {
        exec_unit(&model, "", &unit);
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
    torture_observed(target, child, cfg, &mut |_| {})
}

/// [`torture`], calling `on_round` with the counts so far after every round.
pub fn torture_observed(
    target: &dyn KillTarget,
    child: &dyn Fn(&Path, u64) -> Command,
    cfg: &TortureConfig,
    on_round: &mut dyn FnMut(&CrashReport),
) -> CrashReport {
    let mut report = CrashReport {
        engine: target.name(),
        ..Default::default()
    };
    let mut rng = Rng::new(cfg.seed);
    let shared_pool = cfg.dir.join(format!(
        "atomfs-torture-{}-shared-{}.pool",
        std::process::id(),
        cfg.seed
    ));
    // The pool's `/t0` contents at the start of the round (None: no pool yet).
    let mut start: Option<ModelStore> = None;
    for round in 0..cfg.rounds {
        let seed = cfg.seed.wrapping_mul(1000).wrapping_add(round);
        let pool = if cfg.continue_pool {
            shared_pool.clone()
        } else {
            cfg.dir
                .join(format!("atomfs-torture-{}-{seed}.pool", std::process::id()))
        };
        if start.is_none() {
            target.remove_pool(&pool);
        }
        let violation = |what: String| Violation {
            engine: target.name(),
            seed,
            unit: None,
            at: format!("torture round {round}"),
            what,
            repro: format!(
                "torture seed {} round {round} (continue_pool {})",
                cfg.seed, cfg.continue_pool
            ),
        };
        let delay = Duration::from_millis(1 + rng.below(cfg.kill_after_ms_max));
        let early = rng.chance(cfg.early_kill_percent);
        let (lines, killed) = match run_and_kill(child(&pool, seed), delay, early) {
            Ok(r) => r,
            Err(e) => {
                report
                    .violations
                    .push(violation(format!("starting the child failed: {e}")));
                break;
            }
        };
        report.kills += killed as u64;
        report.workloads += 1;
        let ready = lines.iter().any(|l| l == "ready");
        let finished = lines
            .iter()
            .any(|l| l == "done" || l.starts_with("diverge"));
        let outcome = if !killed && !finished {
            Err(format!(
                "the child exited on its own without finishing: {lines:?}"
            ))
        } else if let Some(d) = lines.iter().find(|l| l.starts_with("diverge")) {
            Err(d.clone())
        } else if !ready && start.is_none() {
            Ok(None) // killed while creating the pool: nothing to check, start again
        } else {
            // Killed before `ready` on an existing pool: inside recovery; no unit ran.
            let ack = |l: &String| -> Option<(usize, bool)> {
                let mut words = l.strip_prefix("ack ")?.split(' ');
                let n = words.next()?.parse::<usize>().ok()?;
                Some((n, words.next() == Some("rolled-back")))
            };
            let acked = lines.iter().filter_map(ack).map(|(n, _)| n).max();
            let rolled_back: Vec<usize> = lines
                .iter()
                .filter_map(ack)
                .filter_map(|(n, rolled)| rolled.then_some(n))
                .collect();
            let done = if ready { acked.map_or(0, |a| a + 1) } else { 0 };
            report.images += 1;
            check_pool(
                target,
                &pool,
                start.as_ref(),
                seed,
                (done, &rolled_back),
                ready,
            )
            .map(Some)
        };
        match outcome {
            Ok(recovered) if cfg.continue_pool => start = recovered,
            Ok(_) => {
                target.remove_pool(&pool);
            }
            Err(what) => {
                report.violations.push(violation(what));
                target.remove_pool(&pool);
                start = None;
            }
        }
        on_round(&report);
    }
    target.remove_pool(&shared_pool);
    report
}

/// Spawn; wait `delay` counted from the spawn (`early`) or from the child's `ready` line
/// (at most [`READY_WAIT_MAX`]); SIGKILL. Returns the lines the child wrote and whether it
/// was killed (false when it had already exited).
fn run_and_kill(
    mut cmd: Command,
    delay: Duration,
    early: bool,
) -> std::io::Result<(Vec<String>, bool)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no child stdout"))?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if line == "ready" {
                let _ = ready_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    if !early {
        // Kill relative to the end of setup/recovery, so that a slow start (a loaded machine)
        // does not turn every round into a kill before the workload.
        let _ = ready_rx.recv_timeout(READY_WAIT_MAX);
    }
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

/// Longest wait for a child's `ready` line before the kill delay starts anyway.
pub const READY_WAIT_MAX: Duration = Duration::from_secs(30);

/// Recover the pool and compare with the model after `done` or `done + 1` units (only
/// `done` = 0 when the child never got `ready`). Returns a model copy of the recovered `/t0`.
fn check_pool(
    target: &dyn KillTarget,
    pool: &Path,
    start: Option<&ModelStore>,
    seed: u64,
    (done, rolled_back): (usize, &[usize]),
    ready: bool,
) -> std::result::Result<ModelStore, String> {
    let candidates = model_candidates(
        target.posix_steps(),
        start,
        seed,
        (done, rolled_back),
        ready,
    )
    .map_err(|e| format!("model: {e}"))?;
    let store = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.open_pool(pool)))
        .map_err(|_| "panic in recovery".to_string())?
        .map_err(|e| format!("recovery failed: {e}"))?;
    let mine = thread_tree(store.as_ref())?;
    let copy = model_copy(store.as_ref()).map_err(|e| format!("reading the pool: {e}"))?;
    let fsck = store.fsck().map_err(|e| format!("fsck: {e}"))?;
    if !fsck.is_clean() {
        return Err(format!("fsck: {:?}", fsck.problems));
    }
    store
        .unmount()
        .map_err(|e| format!("unmount after the check: {e}"))?;
    if candidates.contains(&mine) {
        return Ok(copy);
    }
    let d = conformance::diff(&candidates[0], &mine, 4).join(", ");
    Err(format!(
        "{done} units acknowledged; the pool matches neither that state nor the next: {d}"
    ))
}

#[cfg(test)]
mod tests {
    use super::rolled_back_for_space;

    fn outcomes(v: &[&str]) -> Vec<String> {
        v.iter().map(|o| o.to_string()).collect()
    }

    #[test]
    fn running_out_of_room_where_the_model_did_not_is_a_rollback_and_nothing_else_is() {
        let model = outcomes(&["ok", "ok", "ok"]);
        assert!(rolled_back_for_space(
            &outcomes(&["ok", "err:NoSpace", "ok"]),
            &model
        ));
        assert!(rolled_back_for_space(
            &outcomes(&["err:LogFull", "ok", "ok"]),
            &model
        ));
        assert!(!rolled_back_for_space(
            &outcomes(&["ok", "err:NotFound", "ok"]),
            &model
        ));
        assert!(!rolled_back_for_space(&model, &model));
        assert!(!rolled_back_for_space(
            &outcomes(&["err:NoSpace", "err:Exists", "ok"]),
            &model
        ));
        assert!(!rolled_back_for_space(
            &outcomes(&["err:NoSpace", "ok"]),
            &outcomes(&["err:NotFound", "ok"])
        ));
    }
}
