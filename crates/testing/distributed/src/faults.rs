//! Faults of the GlusterFS servers under a running store, and what the store does about them.
//!
//! One scenario: a store (home on a volume, PM in /dev/shm, the engine's small crash-target
//! configuration so that its checkpoints or flushes run all the time) commits two-file
//! transactions from a worker thread; after a first batch the fault is injected (a brick
//! SIGKILLed, the client mount lost); commits go on for a while and each outcome is recorded
//! (acknowledged, the error, or no answer within [`OP_WAIT`]); the volume is brought back;
//! commits go on again; then the store is closed and opened again from its PM part and home
//! directory, and the oracle checks that every acknowledged transaction is there, whole in
//! both files, and fsck is clean.
//!
//! Each transaction `seq` writes one 4 KiB record — its sequence number repeated — at slot
//! `seq % SLOTS` of both files `/a` and `/b`. After recovery each slot of both files must hold
//! the same record, and that record is the last acknowledged one of the slot or one attempted
//! later (whose outcome was an error or no answer: it may or may not have committed).

use crate::{HostEngine, Layout, Profile};
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

/// Slots of each file.
pub const SLOTS: u64 = 64;
/// Bytes of one record.
pub const RECORD: usize = 4096;
/// How long one commit may take before it counts as hanging.
pub const OP_WAIT: Duration = Duration::from_secs(15);

/// What one commit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Acknowledged,
    Failed(String),
    /// No answer within [`OP_WAIT`].
    Hung,
}

/// The outcomes of one phase of the scenario.
#[derive(Clone, Debug, Default)]
pub struct Phase {
    pub acknowledged: u64,
    pub failed: u64,
    pub hung: bool,
    /// The first error, verbatim.
    pub first_error: Option<String>,
    /// The slowest commit of the phase.
    pub slowest: Duration,
}

impl Phase {
    fn record(&mut self, outcome: &Outcome, took: Duration) {
        self.slowest = self.slowest.max(took);
        match outcome {
            Outcome::Acknowledged => self.acknowledged += 1,
            Outcome::Failed(e) => {
                self.failed += 1;
                self.first_error.get_or_insert_with(|| e.clone());
            }
            Outcome::Hung => self.hung = true,
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} acknowledged, {} failed, slowest {:.1} ms{}",
            self.acknowledged,
            self.failed,
            self.slowest.as_secs_f64() * 1e3,
            if self.hung { ", HUNG" } else { "" }
        )?;
        if let Some(e) = &self.first_error {
            write!(f, ", first error: {e}")?;
        }
        Ok(())
    }
}

/// What the store did through the scenario.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    pub before: Phase,
    pub during: Phase,
    pub after: Phase,
    /// The store's `unmount` after the volume came back (`None`: it succeeded).
    pub unmount_error: Option<String>,
    /// Acknowledged transactions in all.
    pub acknowledged: u64,
}

impl std::fmt::Display for Observation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "  before the fault: {}", self.before)?;
        writeln!(f, "  volume away:      {}", self.during)?;
        writeln!(f, "  volume back:      {}", self.after)?;
        match &self.unmount_error {
            None => write!(f, "  unmount: ok"),
            Some(e) => write!(f, "  unmount: {e}"),
        }
    }
}

/// The worker that runs commits on the store, so that a commit that never returns does not
/// stop the test.
struct Worker {
    ask: Sender<u64>,
    answers: Receiver<(u64, Outcome)>,
}

fn record(seq: u64) -> Vec<u8> {
    seq.to_le_bytes().repeat(RECORD / 8)
}

fn open_file(s: &dyn Store, name: &[u8]) -> store::Result<store::Fh> {
    let m = match s.lookup(ROOT_INO, name) {
        Ok(m) => m,
        Err(_) => s.create(ROOT_INO, name, 0o644, None)?,
    };
    s.open(
        m.ino,
        OpenFlags {
            read: true,
            write: true,
            ..Default::default()
        },
    )
}

fn commit(s: &dyn Store, files: [store::Fh; 2], seq: u64) -> store::Result<()> {
    let tx = s.tx_begin(&files)?;
    let data = record(seq);
    for f in files {
        if let Err(e) = s.write(f, (seq % SLOTS) * RECORD as u64, &data) {
            let _ = s.tx_abort(tx);
            return Err(e);
        }
    }
    s.tx_commit(tx)
}

impl Worker {
    fn start(store: Arc<dyn Store>) -> store::Result<Worker> {
        let files = [
            open_file(store.as_ref(), b"a")?,
            open_file(store.as_ref(), b"b")?,
        ];
        let (ask, asked) = channel::<u64>();
        let (tell, answers) = channel();
        std::thread::spawn(move || {
            for seq in asked {
                let outcome = match commit(store.as_ref(), files, seq) {
                    Ok(()) => Outcome::Acknowledged,
                    Err(e) => Outcome::Failed(e.to_string()),
                };
                if tell.send((seq, outcome)).is_err() {
                    break;
                }
            }
            for f in files {
                let _ = store.release(f);
            }
        });
        Ok(Worker { ask, answers })
    }

    /// Run commit `seq`; its outcome and how long it took.
    fn run(&self, seq: u64) -> (Outcome, Duration) {
        let start = Instant::now();
        if self.ask.send(seq).is_err() {
            return (Outcome::Failed("worker gone".into()), start.elapsed());
        }
        match self.answers.recv_timeout(OP_WAIT) {
            Ok((got, outcome)) => {
                assert_eq!(got, seq, "answers out of order");
                (outcome, start.elapsed())
            }
            Err(RecvTimeoutError::Timeout) => (Outcome::Hung, start.elapsed()),
            Err(RecvTimeoutError::Disconnected) => {
                (Outcome::Failed("worker panicked".into()), start.elapsed())
            }
        }
    }
}

/// The fault and its repair.
pub trait Fault {
    fn name(&self) -> String;
    /// Take the volume (or part of it) away.
    fn inject(&self);
    /// Bring it back.
    fn repair(&self);
}

/// Phase lengths.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Commits before the fault.
    pub before: u64,
    /// How long commits go on while the volume is away.
    pub during: Duration,
    /// Commits after the volume is back.
    pub after: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            before: 20,
            during: Duration::from_secs(1),
            after: 20,
        }
    }
}

/// Each slot's acknowledged and maybe-committed records.
#[derive(Default)]
struct Ledger {
    /// slot → the last acknowledged seq.
    acked: BTreeMap<u64, u64>,
    /// slot → seqs attempted after the last acknowledged one, whose outcome was unknown.
    maybe: BTreeMap<u64, Vec<u64>>,
}

impl Ledger {
    fn note(&mut self, seq: u64, outcome: &Outcome) {
        let slot = seq % SLOTS;
        match outcome {
            Outcome::Acknowledged => {
                self.acked.insert(slot, seq);
                self.maybe.remove(&slot);
            }
            Outcome::Failed(_) | Outcome::Hung => self.maybe.entry(slot).or_default().push(seq),
        }
    }

    /// Check the recovered store: every slot holds, in both files, its last acknowledged
    /// record or a later maybe-committed one (zeros only where nothing was acknowledged).
    fn check(&self, s: &dyn Store) -> Result<(), String> {
        let a = store::path::read_file(s, "/a").map_err(|e| format!("read /a: {e}"))?;
        let b = store::path::read_file(s, "/b").map_err(|e| format!("read /b: {e}"))?;
        for slot in 0..SLOTS {
            let at = (slot as usize) * RECORD;
            let get = |f: &[u8]| f.get(at..at + RECORD).map(<[u8]>::to_vec);
            let (ra, rb) = (get(&a), get(&b));
            if ra != rb {
                return Err(format!(
                    "slot {slot}: /a and /b differ (a torn transaction)"
                ));
            }
            let acked = self.acked.get(&slot).copied();
            let mut allowed: Vec<Option<u64>> = vec![acked];
            allowed.extend(
                self.maybe
                    .get(&slot)
                    .into_iter()
                    .flatten()
                    .map(|&s| Some(s)),
            );
            let found = match ra {
                None => None,
                Some(r) if r.iter().all(|&x| x == 0) && acked.is_none() => None,
                Some(r) => {
                    let seq = r
                        .get(..8)
                        .and_then(|h| h.try_into().ok())
                        .map(u64::from_le_bytes)
                        .ok_or_else(|| format!("slot {slot}: short record"))?;
                    if r != record(seq) {
                        return Err(format!("slot {slot}: a torn record"));
                    }
                    Some(seq)
                }
            };
            if !allowed.contains(&found) {
                return Err(format!(
                    "slot {slot}: holds {found:?}, acknowledged {acked:?}, maybe {:?}",
                    self.maybe.get(&slot)
                ));
            }
        }
        Ok(())
    }
}

/// Run the scenario for `engine` with its home under `layout` (on the faulted volume).
/// Panics when an acknowledged transaction is missing or torn after recovery, or fsck finds a
/// problem; returns what the store did.
pub fn scenario(
    engine: HostEngine,
    layout: &Layout,
    fault: &dyn Fault,
    timing: Timing,
) -> Observation {
    let dirs = layout.fresh(engine, Profile::Torture);
    let store: Arc<dyn Store> = Arc::from(
        engine
            .create(&dirs.home, &dirs.pm, Profile::Torture)
            .unwrap_or_else(|e| panic!("create {}: {e}", engine.name())),
    );
    let worker = Worker::start(store.clone()).unwrap_or_else(|e| panic!("open files: {e}"));
    let mut ledger = Ledger::default();
    let mut obs = Observation::default();
    let mut seq = 0u64;
    let mut step = |phase: &mut Phase, ledger: &mut Ledger| {
        seq += 1;
        let (outcome, took) = worker.run(seq);
        ledger.note(seq, &outcome);
        phase.record(&outcome, took);
        outcome
    };
    for _ in 0..timing.before {
        step(&mut obs.before, &mut ledger);
    }
    fault.inject();
    let start = Instant::now();
    while start.elapsed() < timing.during {
        if step(&mut obs.during, &mut ledger) == Outcome::Hung {
            break;
        }
    }
    fault.repair();
    if !obs.during.hung {
        for _ in 0..timing.after {
            if step(&mut obs.after, &mut ledger) == Outcome::Hung {
                break;
            }
        }
    }
    obs.acknowledged = obs.before.acknowledged + obs.during.acknowledged + obs.after.acknowledged;
    let hung = obs.during.hung || obs.after.hung;
    drop(worker);
    if !hung {
        obs.unmount_error = store.unmount().err().map(|e| e.to_string());
    }
    // A hung worker thread still holds the store: recovery then opens it as after a crash of
    // this process (the lock is per process; the hung thread touches nothing once the volume
    // is back and its call returns).
    drop(store);
    let reopened = engine
        .open(&dirs.home, &dirs.pm, Profile::Torture)
        .unwrap_or_else(|e| {
            panic!(
                "{}: reopen after {}: {e}\n{obs}",
                engine.name(),
                fault.name()
            )
        });
    if let Err(e) = ledger.check(reopened.as_ref()) {
        panic!("{} after {}: {e}\n{obs}", engine.name(), fault.name());
    }
    let report = reopened
        .fsck()
        .unwrap_or_else(|e| panic!("fsck after {}: {e}", fault.name()));
    assert!(
        report.is_clean(),
        "{} after {}: fsck {:?}\n{obs}",
        engine.name(),
        fault.name(),
        report.problems
    );
    let _ = reopened.unmount();
    obs
}

/// Environment of a fault child ([`child_commits`]): the engine, its PM file and home.
pub const CHILD_FAULT_ENV: [&str; 3] = [
    "ATOMFS_GLUSTER_FAULT_ENGINE",
    "ATOMFS_GLUSTER_FAULT_PM",
    "ATOMFS_GLUSTER_FAULT_HOME",
];

/// Commits a fault child runs before it prints `fault-now`.
pub const CHILD_BEFORE: u64 = 20;

/// The child side of a fault that kills the process (mmio's SIGBUS): when this test binary
/// was started as one ([`CHILD_FAULT_ENV`]), create the store, run commits and print
/// `ack N` or `fail N` after each (flushed), `fault-now` after [`CHILD_BEFORE`], until the
/// parent's fault ends the process (at most 60 s). Returns at once otherwise.
pub fn child_commits() {
    let [Ok(engine), Ok(pm), Ok(home)] = CHILD_FAULT_ENV.map(std::env::var) else {
        return;
    };
    use std::io::Write;
    let engine = HostEngine::by_name(&engine).unwrap_or_else(|| panic!("engine {engine}"));
    let store = engine
        .create(home.as_ref(), pm.as_ref(), Profile::Torture)
        .unwrap_or_else(|e| panic!("create: {e}"));
    let s = store.as_ref();
    let files =
        [open_file(s, b"a"), open_file(s, b"b")].map(|f| f.unwrap_or_else(|e| panic!("{e}")));
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let mut seq = 0u64;
    while start.elapsed() < Duration::from_secs(60) {
        seq += 1;
        let line = match commit(s, files, seq) {
            Ok(()) => format!("ack {seq}"),
            Err(_) => format!("fail {seq}"),
        };
        // A leading newline: the test harness may have printed a partial line.
        let _ = writeln!(out, "\n{line}");
        if seq == CHILD_BEFORE {
            let _ = writeln!(out, "\nfault-now");
        }
        let _ = out.flush();
    }
}

/// The parent side: after the child ran (and died of the fault), its output `lines` and the
/// repaired volume, open the store from `dirs` and check every acknowledged transaction
/// (the commit after the last line may have been in flight); fsck clean. Returns the
/// acknowledged count.
pub fn check_child(dirs: &crate::StoreDirs, lines: &[String]) -> Result<u64, String> {
    let mut ledger = Ledger::default();
    let mut last = 0;
    let mut acked = 0;
    for line in lines {
        let (outcome, seq) = if let Some(n) = line.strip_prefix("ack ") {
            (Outcome::Acknowledged, n)
        } else if let Some(n) = line.strip_prefix("fail ") {
            (Outcome::Failed(String::new()), n)
        } else {
            continue;
        };
        let seq: u64 = seq
            .trim()
            .parse()
            .map_err(|_| format!("bad line {line:?}"))?;
        acked += u64::from(outcome == Outcome::Acknowledged);
        ledger.note(seq, &outcome);
        last = seq;
    }
    ledger.note(last + 1, &Outcome::Hung);
    let store = dirs
        .engine
        .open(&dirs.home, &dirs.pm, Profile::Torture)
        .map_err(|e| format!("reopen: {e}"))?;
    ledger.check(store.as_ref())?;
    let report = store.fsck().map_err(|e| format!("fsck: {e}"))?;
    if !report.is_clean() {
        return Err(format!("fsck: {:?}", report.problems));
    }
    let _ = store.unmount();
    Ok(acked)
}
