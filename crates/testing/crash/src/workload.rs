//! Seeded workloads: units (each one atomic unit of durability: a transaction, one legacy
//! call, one O_ATOMIC commit) of operations over a few files and directories.
//!
//! A workload is a pure function of its [`WorkloadConfig`] (seed included): every unit is
//! generated up front, independently of how the others ran, so that dropping units (shrinking)
//! leaves the remaining ones unchanged.

use conformance::Rng;
use store::{Error, Fh, OpenOptions, Result, Store, TxId};

pub use crate::posix_ops::{PosixOp, PosixSteps};

/// Paths of the files a workload touches (relative to its thread's directory).
pub const FILES: [&str; 6] = ["f0", "f1", "f2", "d0/f3", "d0/f4", "d1/f5"];
/// Directories a workload creates and removes.
pub const DIRS: [&str; 3] = ["d0", "d1", "d2"];
/// Largest offset + length of a generated write (keeps stores small).
pub const FILE_SPAN_MAX: u64 = 24 << 10;

/// One operation. Paths are indexes into [`FILES`] / [`DIRS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Write `len` bytes of pattern `tag` at `off` (creating the file if missing, inside a
    /// transaction only).
    Write {
        file: usize,
        off: u64,
        len: usize,
        tag: u8,
    },
    /// Append `len` bytes of pattern `tag`.
    Append {
        file: usize,
        len: usize,
        tag: u8,
    },
    /// set_len (shrink or extend with a hole).
    Truncate {
        file: usize,
        len: u64,
    },
    /// Create an empty file (an error when it exists).
    Create {
        file: usize,
    },
    Unlink {
        file: usize,
    },
    /// Rename a file over another file path (replacing it if present).
    Rename {
        from: usize,
        to: usize,
    },
    Mkdir {
        dir: usize,
    },
    Rmdir {
        dir: usize,
    },
    /// A call of the rest of the POSIX file API (symbolic and hard links, attributes,
    /// FIFOs, rename modes, fallocate, extended attributes, unnamed files).
    Posix(PosixOp),
}

/// Share of the generated operations (percent) that are [`Op::Posix`] steps.
pub const POSIX_PERCENT: u64 = 15;

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxEnd {
    Commit,
    Abort,
}

/// How an O_ATOMIC unit ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicEnd {
    /// fsync each file: only one file in such a unit, so one commit.
    Fsync,
    /// syncv all the files together.
    Syncv,
    /// abortv all the files.
    Abortv,
}

/// One atomic unit of durability.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// `tx_begin`, the ops bound to the transaction, then commit or abort.
    Tx { ops: Vec<Op>, end: TxEnd },
    /// One call outside any transaction (auto-committed).
    Legacy(Op),
    /// Writes to O_ATOMIC handles of existing files, then fsync/syncv/abortv.
    Atomic {
        writes: Vec<(usize, u64, usize, u8)>,
        end: AtomicEnd,
    },
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadConfig {
    pub seed: u64,
    /// Units per thread.
    pub units: usize,
    /// Threads, each in its own directory `/tN` with its own files.
    pub threads: usize,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            seed: 1,
            units: 24,
            threads: 1,
        }
    }
}

impl Op {
    /// Whether a target running the POSIX steps `steps` runs this op.
    pub fn offered_by(&self, steps: PosixSteps) -> bool {
        match self {
            Op::Posix(op) => steps.allow(op),
            _ => true,
        }
    }
}

impl Unit {
    /// This unit for a target running the POSIX steps `steps` (see [`Workload::offered_by`]).
    pub fn offered_by(&self, steps: PosixSteps) -> Unit {
        match self {
            Unit::Tx { ops, end } => Unit::Tx {
                ops: ops
                    .iter()
                    .filter(|op| op.offered_by(steps))
                    .cloned()
                    .collect(),
                end: *end,
            },
            Unit::Legacy(op) if !op.offered_by(steps) => Unit::Tx {
                ops: Vec::new(),
                end: TxEnd::Commit,
            },
            other => other.clone(),
        }
    }
}

/// A generated workload: for each thread, its units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub config: WorkloadConfig,
    pub threads: Vec<Vec<Unit>>,
    /// Global unit numbers kept (all of them unless shrunk): thread `t`, unit `i` has number
    /// `t * config.units + i`.
    pub kept: Vec<usize>,
}

impl Workload {
    /// Generate the workload of `config`.
    pub fn generate(config: WorkloadConfig) -> Self {
        let threads = (0..config.threads)
            .map(|t| unit_stream(config.seed, t).take(config.units).collect())
            .collect();
        let kept = (0..config.threads * config.units).collect();
        Workload {
            config,
            threads,
            kept,
        }
    }

    /// The workload of `config` restricted to the units numbered in `kept`.
    pub fn with_kept(config: WorkloadConfig, kept: &[usize]) -> Self {
        let full = Self::generate(config);
        let threads = full
            .threads
            .into_iter()
            .enumerate()
            .map(|(t, units)| {
                units
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| kept.contains(&(t * config.units + i)))
                    .map(|(_, u)| u)
                    .collect()
            })
            .collect();
        Workload {
            config,
            threads,
            kept: kept.to_vec(),
        }
    }

    /// This workload with only the POSIX steps a target runs (`steps`): another step is
    /// dropped from its transaction, and a unit that was only such a call becomes an empty
    /// transaction (so that units keep their numbers).
    pub fn offered_by(&self, steps: PosixSteps) -> Workload {
        Workload {
            config: self.config,
            threads: self
                .threads
                .iter()
                .map(|units| units.iter().map(|u| u.offered_by(steps)).collect())
                .collect(),
            kept: self.kept.clone(),
        }
    }

    /// Number of units.
    pub fn len(&self) -> usize {
        self.threads.iter().map(Vec::len).sum()
    }

    /// True when there is no unit.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Environment settings reproducing this workload with [`crate::suite::repro`].
    pub fn repro_env(&self) -> String {
        let c = self.config;
        let mut s = format!(
            "ATOMFS_CRASH_SEED={} ATOMFS_CRASH_UNITS={} ATOMFS_CRASH_THREADS={}",
            c.seed, c.units, c.threads
        );
        if self.kept.len() != c.units * c.threads {
            let kept: Vec<String> = self.kept.iter().map(|k| k.to_string()).collect();
            s += &format!(" ATOMFS_CRASH_KEEP={}", kept.join(","));
        }
        s
    }
}

/// The units of thread `t` of every workload with `seed`, without end: a workload of `units`
/// units per thread runs the first `units` of each stream (so a longer workload extends a
/// shorter one with the same seed).
pub fn unit_stream(seed: u64, t: usize) -> impl Iterator<Item = Unit> {
    let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    std::iter::repeat_with(move || gen_unit(&mut rng))
}

fn gen_op(rng: &mut Rng, in_tx: bool) -> Op {
    if rng.chance(POSIX_PERCENT) {
        return Op::Posix(PosixOp::generate(rng, in_tx));
    }
    let file = rng.below(FILES.len() as u64) as usize;
    let tag = rng.next_u64() as u8;
    match rng.below(100) {
        0..=39 => {
            let off = rng.below(FILE_SPAN_MAX - 64);
            let len = 1 + rng.below((FILE_SPAN_MAX - off).min(6000)) as usize;
            Op::Write {
                file,
                off,
                len,
                tag,
            }
        }
        40..=49 => Op::Append {
            file,
            len: 1 + rng.below(2000) as usize,
            tag,
        },
        50..=59 => Op::Truncate {
            file,
            len: rng.below(FILE_SPAN_MAX),
        },
        60..=69 => Op::Create { file },
        70..=76 => Op::Unlink { file },
        77..=88 => Op::Rename {
            from: file,
            to: rng.below(FILES.len() as u64) as usize,
        },
        89..=94 => Op::Mkdir {
            dir: rng.below(DIRS.len() as u64) as usize,
        },
        _ => Op::Rmdir {
            dir: rng.below(DIRS.len() as u64) as usize,
        },
    }
}

fn gen_unit(rng: &mut Rng) -> Unit {
    match rng.below(100) {
        0..=54 => {
            let ops = (0..1 + rng.below(5)).map(|_| gen_op(rng, true)).collect();
            let end = if rng.chance(20) {
                TxEnd::Abort
            } else {
                TxEnd::Commit
            };
            Unit::Tx { ops, end }
        }
        55..=84 => Unit::Legacy(gen_op(rng, false)),
        _ => {
            let end = match rng.below(3) {
                0 => AtomicEnd::Fsync,
                1 => AtomicEnd::Syncv,
                _ => AtomicEnd::Abortv,
            };
            let files = if end == AtomicEnd::Fsync {
                1
            } else {
                1 + rng.below(3)
            };
            let first = rng.below(FILES.len() as u64) as usize;
            let writes = (0..files)
                .flat_map(|k| {
                    let file = (first + k as usize * 2) % FILES.len();
                    (0..1 + rng.below(2))
                        .map(|_| {
                            let off = rng.below(FILE_SPAN_MAX - 64);
                            let len = 1 + rng.below((FILE_SPAN_MAX - off).min(4000)) as usize;
                            (file, off, len, rng.next_u64() as u8)
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            Unit::Atomic { writes, end }
        }
    }
}

/// Bytes of pattern `tag` (also a function of the length, so that two writes differ).
pub fn data(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            tag.wrapping_add((i as u8).wrapping_mul(7))
                .wrapping_add((i >> 9) as u8)
                | 1
        })
        .collect()
}

/// Short outcome of a call, compared between the model and the target.
pub fn outcome<T>(r: &Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => {
            let dbg = format!("{e:?}");
            let kind = dbg.split(['(', ' ', '{']).next().unwrap_or("error");
            format!("err:{kind}")
        }
    }
}

/// Open handles of one unit, by path, released at the end of the unit.
pub struct Handles {
    open: Vec<(String, Fh)>,
    stale: Vec<Fh>,
}

impl Handles {
    pub fn new() -> Self {
        Handles {
            open: Vec::new(),
            stale: Vec::new(),
        }
    }

    pub(crate) fn get(
        &mut self,
        s: &dyn Store,
        path: &str,
        tx: Option<TxId>,
        create: bool,
        atomic: bool,
    ) -> Result<Fh> {
        if let Some((_, fh)) = self.open.iter().find(|(p, _)| p == path) {
            return Ok(*fh);
        }
        let fh = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .atomic(atomic)
            .open(s, path, tx)?;
        self.open.push((path.to_string(), fh));
        Ok(fh)
    }

    /// The handle open on `path`, if any.
    pub fn find(&self, path: &str) -> Option<Fh> {
        self.open.iter().find(|(p, _)| p == path).map(|(_, fh)| *fh)
    }

    /// Release the handle open on `path`, if any (an error is ignored, as in
    /// [`release_all`](Self::release_all)).
    pub fn release_path(&mut self, s: &dyn Store, path: &str) {
        if let Some(i) = self.open.iter().position(|(p, _)| p == path) {
            let (_, fh) = self.open.remove(i);
            let _ = s.release(fh);
        }
    }

    /// Keep `fh` (open on no path, e.g. an unnamed file) until the end of the unit.
    pub(crate) fn keep(&mut self, fh: Fh) {
        self.stale.push(fh);
    }

    /// Forget the path of a handle (after an unlink or rename) but keep it open until the end.
    pub(crate) fn forget(&mut self, path: &str) {
        if let Some(i) = self.open.iter().position(|(p, _)| p == path) {
            let (_, fh) = self.open.remove(i);
            self.stale.push(fh);
        }
    }

    /// Every handle, open ones first.
    pub fn all(&self) -> Vec<Fh> {
        self.open
            .iter()
            .map(|(_, fh)| *fh)
            .chain(self.stale.iter().copied())
            .collect()
    }

    /// Release everything (errors ignored: a handle may name a file an abort removed).
    pub fn release_all(&mut self, s: &dyn Store) {
        for fh in self.all() {
            let _ = s.release(fh);
        }
        self.open.clear();
        self.stale.clear();
    }
}

impl Default for Handles {
    fn default() -> Self {
        Self::new()
    }
}

/// The file a legacy data call (write, append, truncate) uses, if `op` is one.
pub fn data_file(op: &Op) -> Option<usize> {
    match *op {
        Op::Write { file, .. } | Op::Append { file, .. } | Op::Truncate { file, .. } => Some(file),
        _ => None,
    }
}

/// The path of file `rel` under directory `prefix`.
pub fn path(prefix: &str, rel: &str) -> String {
    format!("{prefix}/{rel}")
}

/// Run one op on `s` under directory `prefix` ("" for the root). Returns the outcome.
pub fn exec_op(
    s: &dyn Store,
    prefix: &str,
    op: &Op,
    tx: Option<TxId>,
    handles: &mut Handles,
) -> String {
    let file = |i: usize| path(prefix, FILES[i]);
    let r: Result<()> = (|| match *op {
        Op::Write {
            file: f,
            off,
            len,
            tag,
        } => {
            // Outside a transaction, creating and writing would be two durable calls (two
            // units): a legacy Write only writes existing files.
            let fh = handles.get(s, &file(f), tx, tx.is_some(), false)?;
            s.write(fh, off, &data(tag, len)).map(|_| ())
        }
        Op::Append { file: f, len, tag } => {
            let fh = handles.get(s, &file(f), tx, false, false)?;
            let end = s.fstat(fh)?.size;
            s.write(fh, end, &data(tag, len)).map(|_| ())
        }
        Op::Truncate { file: f, len } => {
            let fh = handles.get(s, &file(f), tx, false, false)?;
            s.set_len(fh, len)
        }
        Op::Create { file: f } => {
            let (parent, name) = store::resolve_parent(s, file(f).as_bytes())?;
            s.create(parent, &name, 0o644, tx).map(|_| ())
        }
        Op::Unlink { file: f } => {
            let (parent, name) = store::resolve_parent(s, file(f).as_bytes())?;
            s.unlink(parent, &name, tx)?;
            handles.forget(&file(f));
            Ok(())
        }
        Op::Rename { from, to } => {
            let (p1, n1) = store::resolve_parent(s, file(from).as_bytes())?;
            let (p2, n2) = store::resolve_parent(s, file(to).as_bytes())?;
            s.rename(p1, &n1, p2, &n2, tx)?;
            if from != to {
                handles.forget(&file(from));
                handles.forget(&file(to));
            }
            Ok(())
        }
        Op::Mkdir { dir } => {
            let (parent, name) = store::resolve_parent(s, path(prefix, DIRS[dir]).as_bytes())?;
            s.mkdir(parent, &name, 0o755, tx).map(|_| ())
        }
        Op::Rmdir { dir } => {
            let (parent, name) = store::resolve_parent(s, path(prefix, DIRS[dir]).as_bytes())?;
            s.rmdir(parent, &name, tx)
        }
        Op::Posix(ref op) => op.exec(s, prefix, tx, handles),
    })();
    outcome(&r)
}

/// Open O_ATOMIC handles and write, for an atomic unit. Returns the outcomes.
pub fn exec_atomic_writes(
    s: &dyn Store,
    prefix: &str,
    writes: &[(usize, u64, usize, u8)],
    handles: &mut Handles,
) -> Vec<String> {
    writes
        .iter()
        .map(|&(f, off, len, tag)| {
            let r = handles
                .get(s, &path(prefix, FILES[f]), None, false, true)
                .and_then(|fh| s.write(fh, off, &data(tag, len)));
            outcome(&r)
        })
        .collect()
}

/// The commit (or abort) call of an atomic unit.
pub fn exec_atomic_end(s: &dyn Store, end: AtomicEnd, handles: &Handles) -> String {
    let fhs = handles.all();
    let r = match end {
        AtomicEnd::Fsync => fhs.iter().try_for_each(|&fh| s.fsync(fh, false)),
        AtomicEnd::Syncv if fhs.is_empty() => Ok(()),
        AtomicEnd::Syncv => s.syncv(&fhs),
        AtomicEnd::Abortv if fhs.is_empty() => Ok(()),
        AtomicEnd::Abortv => s.abortv(&fhs),
    };
    outcome(&r)
}

/// Set up a thread's directory: `prefix` itself, `d0`, `d1` and a first file.
pub fn setup(s: &dyn Store, prefix: &str) -> Result<()> {
    if !prefix.is_empty() {
        store::path::mkdir_all(s, prefix, 0o755)?;
    }
    for d in ["d0", "d1"] {
        store::path::mkdir_all(s, path(prefix, d), 0o755)?;
    }
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path(prefix, FILES[0]), None)?;
    let r = s.write(fh, 0, &data(0x55, 5000));
    s.release(fh)?;
    r.map(|_| ())
}

/// Whether `e` means the store ran out of room (a legitimate outcome the model may not share).
pub fn is_space(e: &Error) -> bool {
    matches!(e, Error::NoSpace(_) | Error::LogFull(_))
}
