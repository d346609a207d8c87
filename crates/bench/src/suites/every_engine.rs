//! Suite `engines`: one workload mix on every engine of the registry (`engines::ENGINES`),
//! and on plain ext4 files with fsync as the reference — small two-file transactions, 4 KB
//! random overwrites with fsync, appends with fsync, a SQLite update loop through the VFS, a
//! create/rename/unlink mix — then a table "which engine for which workload" derived from
//! the numbers of the run (`verdict.rs`). An engine joins the suite when it joins the
//! registry.
//!
//! Every system is set up once (`systems/engine_mix.rs`, `systems/ext4_mix.rs`,
//! `systems/sqlite_loop.rs`); each workload then runs on all of them interleaved round-robin
//! (one warm-up, then `reps` runs of every system, run r of every system with the same
//! seed, the order rotated every repetition), as the `mmio` suite does. A run stops after
//! `txs_per_run` operations, or at `run_time_max / 3` once `txs_min` have run. One
//! operation ("tx" in the rows) is one durable step of the workload: a two-file transaction,
//! an overwrite and its fsync, an append and its fsync, one SQLite update, one namespace
//! call. See docs/bench.md.

mod ops;
mod verdict;

pub use verdict::verdict;

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{normalized_rows, row, Figure, FigureResult, Metric, Point, RunConfig};
use crate::suites::mmio::{process_cpu, RunLimits, Sample};
use crate::systems::engine_mix::EngineMix;
use crate::systems::ext4_mix::{Ext4Mix, EXT4};
use crate::systems::mix::{MixShape, MixSystem};
use crate::systems::sqlite_loop::{SqlTarget, SqliteLoop};
use crate::workload::{Generator, ValueSize, Workload};
use ops::{Appends, Namespace, Overwrites, SqlUpdates, APPEND_LEN_MAX, OVERWRITE_LEN};
use std::rc::Rc;
use std::time::Instant;

/// The suite's name in `suites::SUITES`.
pub const SUITE: &str = "engines";

/// Largest write of a two-file transaction (each of the two is 0..=this many bytes).
const TX_VALUE_MAX: u64 = 4096;
/// Largest value of a SQLite update.
const SQL_VALUE_MAX: u64 = 4096;
/// Runs last at most `run_time_max` divided by this (5 workloads × systems × reps).
const RUN_TIME_DIVISOR: u32 = 3;

/// The workloads, in the order they run and appear in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    TwoFileTx,
    Overwrite,
    Append,
    Sqlite,
    Namespace,
}

pub const JOBS: [Job; 5] = [
    Job::TwoFileTx,
    Job::Overwrite,
    Job::Append,
    Job::Sqlite,
    Job::Namespace,
];

impl Job {
    /// Figure id in results.json and file name of its plots.
    pub fn id(self) -> &'static str {
        match self {
            Job::TwoFileTx => "two-file-tx",
            Job::Overwrite => "overwrite-4k",
            Job::Append => "append",
            Job::Sqlite => "sqlite-update",
            Job::Namespace => "namespace",
        }
    }

    fn title(self) -> String {
        match self {
            Job::TwoFileTx => {
                format!("two-file transactions: random 0–{TX_VALUE_MAX} B in each of two files")
            }
            Job::Overwrite => "4 KB random overwrites of one file, fsync after each".into(),
            Job::Append => format!("appends of 1–{APPEND_LEN_MAX} B to one file, fsync after each"),
            Job::Sqlite => format!(
                "SQLite one-row updates of 0–{SQL_VALUE_MAX} B values, one transaction each"
            ),
            Job::Namespace => {
                "namespace mix: create (0–4 KB, fsync) 40 %, rename 30 %, unlink 30 %".into()
            }
        }
    }
}

/// Sizes per mode: the files of the mix and the SQLite table's rows.
fn shape(mode: Mode) -> (MixShape, u64) {
    let (tx_files, tx_file_len, overwrite_len, append_len_max, rows) = match mode {
        Mode::Tiny => (4, 64 << 10, 1 << 20, 256 << 10, 40),
        Mode::Quick => (32, 1 << 20, 64 << 20, 16 << 20, 1_000),
        Mode::Full => (128, 1 << 20, 256 << 20, 64 << 20, 10_000),
    };
    let shape = MixShape {
        tx_files,
        tx_file_len,
        overwrite_len,
        append_len_max,
    };
    (shape, rows)
}

fn limits(cfg: &RunConfig) -> RunLimits {
    RunLimits {
        ops_max: cfg.txs_per_run,
        ops_min: cfg.txs_min,
        run_time_max: cfg.run_time_max / RUN_TIME_DIVISOR,
    }
}

fn check_interrupt() -> Result<()> {
    if crate::interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Run `step` again and again within `lim`; the operations, wall and CPU time.
fn timed(lim: RunLimits, mut step: impl FnMut() -> Result<()>) -> Result<Sample> {
    let cpu = process_cpu();
    let start = Instant::now();
    let mut ops = 0;
    while ops < lim.ops_max {
        step()?;
        ops += 1;
        check_interrupt()?;
        if ops >= lim.ops_min && start.elapsed() >= lim.run_time_max {
            break;
        }
    }
    Ok(Sample {
        ops,
        elapsed: start.elapsed(),
        cpu: process_cpu().saturating_sub(cpu),
    })
}

/// One run of a file workload on `sys`.
fn run_mix(
    sys: &mut dyn MixSystem,
    job: Job,
    shape: MixShape,
    seed: u64,
    lim: RunLimits,
) -> Result<Sample> {
    match job {
        Job::TwoFileTx => {
            let mut gen = Generator::new(Workload {
                files: shape.tx_files,
                file_size: shape.tx_file_len,
                value: ValueSize::Random { max: TX_VALUE_MAX },
                seed,
            });
            timed(lim, || {
                let tx = gen.next_tx();
                let (a, b) = gen.writes(&tx);
                sys.two_file_tx(a, b)
            })
        }
        Job::Overwrite => {
            let mut s = Overwrites::new(seed, shape.overwrite_len);
            timed(lim, || {
                let (off, data) = s.next_write();
                sys.overwrite(off, data)
            })
        }
        Job::Append => {
            let mut s = Appends::new(seed);
            timed(lim, || sys.append(s.next_record()))
        }
        Job::Namespace => {
            let mut s = Namespace::new(seed);
            let sample = timed(lim, || sys.namespace(s.next_op()))?;
            sys.namespace_clear()?;
            Ok(sample)
        }
        Job::Sqlite => Err(BenchError::Invalid("sqlite is not a file workload".into())),
    }
}

/// One run of the SQLite loop; the last update is read back (untimed).
fn run_sql(sys: &mut SqliteLoop, rows: u64, seed: u64, lim: RunLimits) -> Result<Sample> {
    let mut s = SqlUpdates::new(seed, rows, SQL_VALUE_MAX);
    let mut last = (0, 0);
    let sample = timed(lim, || {
        let (id, value) = s.next_update();
        last = (id, value.len() as u64);
        sys.update(id, value)
    })?;
    if sample.ops > 0 && sys.value_length(last.0) != Some(last.1) {
        return Err(BenchError::Invalid(format!(
            "row {} does not hold the {} bytes just written",
            last.0, last.1
        )));
    }
    Ok(sample)
}

/// The measured runs of one system on one workload.
#[derive(Clone, Default)]
struct Runs {
    per_s: Vec<f64>,
    cpu_us: Vec<f64>,
    ops: Vec<u64>,
}

/// Prefix of the reason recorded (with the skipped systems of a figure) for a system that
/// failed during a workload.
pub const FAILED: &str = "FAILED";

/// Warm-up, then `reps` rounds over every system (order rotated each round), calling
/// `run(system index, seed, limits)`. A system whose run fails is recorded in `failures`
/// (name, reason) and runs no more in this workload; its runs are `None`.
fn interleave(
    job: Job,
    names: &[String],
    cfg: &RunConfig,
    bar: &indicatif::ProgressBar,
    failures: &mut Vec<(String, String)>,
    mut run: impl FnMut(usize, u64, RunLimits) -> Result<Sample>,
) -> Result<Vec<Option<Runs>>> {
    let lim = limits(cfg);
    let mut runs: Vec<Option<Runs>> = names.iter().map(|_| Some(Runs::default())).collect();
    let n = names.len();
    for rep in 0..=cfg.reps {
        for i in (0..n).map(|k| (k + rep as usize) % n) {
            bar.inc(1);
            if runs[i].is_none() {
                continue;
            }
            bar.set_message(format!("{} {} run {rep}/{}", job.id(), names[i], cfg.reps));
            let (seed, lim) = if rep == 0 {
                let warm = RunLimits {
                    ops_max: (lim.ops_max / 10).max(lim.ops_min),
                    ..lim
                };
                (cfg.seed ^ 0x5741_524D, warm)
            } else {
                (cfg.seed.wrapping_add(rep as u64 - 1), lim)
            };
            let s = match run(i, seed, lim) {
                Ok(s) => s,
                Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
                Err(e) => {
                    failures.push((names[i].clone(), format!("{FAILED} in run {rep}: {e}")));
                    runs[i] = None;
                    continue;
                }
            };
            if let (true, Some(r)) = (rep > 0, runs[i].as_mut()) {
                r.per_s
                    .push(s.ops as f64 / s.elapsed.as_secs_f64().max(1e-12));
                r.cpu_us
                    .push(s.cpu.as_secs_f64() * 1e6 / s.ops.max(1) as f64);
                r.ops.push(s.ops);
            }
        }
    }
    Ok(runs)
}

/// The rows of one workload: ops per second, mean latency, CPU time per op, and ops per
/// second normalized to ext4 run by run.
fn result_of(job: Job, names: &[String], runs: Vec<Option<Runs>>, res: &mut FigureResult) {
    for (name, r) in names.iter().zip(runs) {
        let Some(r) = r else { continue };
        let latency: Vec<f64> = r.per_s.iter().map(|v| 1e6 / v.max(1e-12)).collect();
        let id = job.id();
        res.rows
            .push(row(id, name, None, Metric::TxPerS, r.per_s, r.ops.clone()));
        res.rows.push(row(
            id,
            name,
            None,
            Metric::TxLatencyUs,
            latency,
            r.ops.clone(),
        ));
        res.rows
            .push(row(id, name, None, Metric::CpuUsPerTx, r.cpu_us, r.ops));
    }
    let norm = normalized_rows(&res.rows, Metric::TxPerS, EXT4);
    res.rows.extend(norm);
}

fn figure_of(job: Job, shape: MixShape, rows: u64, seed: u64) -> Figure {
    let (files, file_size, value) = match job {
        Job::TwoFileTx => (
            shape.tx_files,
            shape.tx_file_len,
            ValueSize::Random { max: TX_VALUE_MAX },
        ),
        Job::Overwrite => (1, shape.overwrite_len, ValueSize::Fixed(OVERWRITE_LEN)),
        Job::Append => (
            1,
            shape.append_len_max,
            ValueSize::Random {
                max: APPEND_LEN_MAX,
            },
        ),
        Job::Sqlite => (1, rows, ValueSize::Random { max: SQL_VALUE_MAX }),
        Job::Namespace => (
            ops::NS_LIVE_MAX as u32,
            4096,
            ValueSize::Random { max: 4096 },
        ),
    };
    Figure {
        id: job.id().into(),
        title: job.title(),
        x_label: None,
        reference: EXT4.into(),
        metrics: vec![
            Metric::TxPerS,
            Metric::TxPerSNorm,
            Metric::TxLatencyUs,
            Metric::CpuUsPerTx,
        ],
        points: vec![Point {
            param: None,
            workload: Workload {
                files,
                file_size,
                value,
                seed,
            },
            idle_fraction: 0.0,
        }],
        systems: Vec::new(),
    }
}

/// Set up `systems`; the ones that cannot run here are left out and recorded in `skipped`.
fn set_up<S>(
    systems: Vec<S>,
    name: impl Fn(&S) -> String,
    mut setup: impl FnMut(&mut S) -> Result<()>,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<S>> {
    let mut live = Vec::new();
    for mut s in systems {
        check_interrupt()?;
        match setup(&mut s) {
            Ok(()) => live.push(s),
            Err(BenchError::Skipped(why)) => skipped.push((name(&s), why)),
            Err(e) => {
                return Err(BenchError::System {
                    system: name(&s),
                    message: format!("setup: {e}"),
                })
            }
        }
    }
    Ok(live)
}

/// Every engine of the registry and the ext4 reference, set up on `shape`.
fn mix_systems(
    disk: &Rc<Ext4Disk>,
    shape: MixShape,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<Box<dyn MixSystem>>> {
    let mut all: Vec<Box<dyn MixSystem>> = ::engines::ENGINES
        .iter()
        .map(|&e| Box::new(EngineMix::new(e, disk.clone())) as Box<dyn MixSystem>)
        .collect();
    all.push(Box::new(Ext4Mix::new(disk.clone())));
    set_up(all, |s| s.name(), |s| s.setup(shape), skipped)
}

/// Every engine through the SQLite VFS and SQLite on ext4, each table filled.
fn sql_systems(
    disk: &Rc<Ext4Disk>,
    rows: u64,
    seed: u64,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<SqliteLoop>> {
    let mut all: Vec<SqliteLoop> = ::engines::ENGINES
        .iter()
        .map(|&e| SqliteLoop::new(SqlTarget::Engine(e), disk.clone()))
        .collect();
    all.push(SqliteLoop::new(SqlTarget::Ext4, disk.clone()));
    let setup = |s: &mut SqliteLoop| {
        let mut fill = SqlUpdates::new(seed ^ 0xF111, rows, SQL_VALUE_MAX);
        s.setup(rows, SQL_VALUE_MAX, &mut || fill.value().to_vec())
    };
    set_up(all, |s| s.name(), setup, skipped)
}

/// The ext4 RAM disk: the reference's files, every home directory, the SQLite databases.
fn disk_bytes(shape: MixShape, rows: u64) -> u64 {
    let homes = ::engines::ENGINES.len() as u64 + 1;
    let sql = 4 * rows * SQL_VALUE_MAX;
    homes * (shape.data_bytes() + sql) + (256 << 20)
}

/// Run the suite: set every system up, run every workload on them.
pub fn run(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let (shape, rows) = shape(opts.mode);
    let disk = Rc::new(Ext4Disk::create(disk_bytes(shape, rows))?);
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let lim = limits(cfg);
    notes.push(format!(
        "engines: {} (every engine of the registry) and the reference ext4; two-file set {} × \
         {} KB, overwrite file {} MB, append file rotated at {} MB, SQLite table of {rows} \
         rows; a run is at most {} operations, or {:.3} s once {} have run; one op (\"tx\") = \
         one durable step of the workload; cpu_us_per_tx = CPU time of the whole process \
         (background threads included, kernel threads such as jbd2 and the loop device not) \
         per op",
        ::engines::names(),
        shape.tx_files,
        shape.tx_file_len >> 10,
        shape.overwrite_len >> 20,
        shape.append_len_max >> 20,
        lim.ops_max,
        lim.run_time_max.as_secs_f64(),
        lim.ops_min
    ));
    let mut mix_skipped = Vec::new();
    let mut mix = mix_systems(&disk, shape, &mut mix_skipped)?;
    let mut sql_skipped = Vec::new();
    let mut sql = sql_systems(&disk, rows, opts.seed, &mut sql_skipped)?;
    let steps = (JOBS.len() - 1) * mix.len() + sql.len();
    let bar = crate::runner::simple_bar(SUITE, steps as u64 * (cfg.reps as u64 + 1), opts.progress);
    let mut out = Vec::new();
    for job in JOBS {
        let mut res = FigureResult::default();
        let mut failures = Vec::new();
        if job == Job::Sqlite {
            let names: Vec<String> = sql.iter().map(SqliteLoop::name).collect();
            let mut runs = interleave(job, &names, cfg, &bar, &mut failures, |i, seed, lim| {
                run_sql(&mut sql[i], rows, seed, lim)
            })?;
            for (s, r) in sql.iter_mut().zip(runs.iter_mut()) {
                if let (Some(_), Err(e)) = (&r, s.check()) {
                    failures.push((s.name(), format!("{FAILED} after the runs: {e}")));
                    *r = None;
                }
            }
            result_of(job, &names, runs, &mut res);
            res.systems = sql
                .iter()
                .map(|s| (s.name(), s.medium(), s.guarantee().to_string()))
                .collect();
            res.skipped = sql_skipped.clone();
        } else {
            let names: Vec<String> = mix.iter().map(|s| s.name()).collect();
            let runs = interleave(job, &names, cfg, &bar, &mut failures, |i, seed, lim| {
                run_mix(mix[i].as_mut(), job, shape, seed, lim)
            })?;
            result_of(job, &names, runs, &mut res);
            res.systems = mix
                .iter()
                .map(|s| (s.name(), s.medium(), s.guarantee().to_string()))
                .collect();
            res.skipped = mix_skipped.clone();
        }
        for (name, why) in &failures {
            notes.push(format!("engines: {name} {}: {why}", job.id()));
        }
        res.skipped.extend(failures);
        out.push((figure_of(job, shape, rows, opts.seed), res));
    }
    bar.finish_and_clear();
    drop(mix);
    drop(sql);
    drop(disk);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample() -> Sample {
        Sample {
            ops: 10,
            elapsed: Duration::from_millis(1),
            cpu: Duration::from_micros(500),
        }
    }

    #[test]
    fn a_failing_system_is_left_out_and_the_others_keep_running() {
        let cfg = crate::suites::run_config(Mode::Tiny, 1, false);
        let names = ["a".to_string(), "b".to_string()];
        let bar = indicatif::ProgressBar::hidden();
        let mut failures = Vec::new();
        let mut calls = [0u32; 2];
        let runs = interleave(Job::Append, &names, &cfg, &bar, &mut failures, |i, _, _| {
            calls[i] += 1;
            if i == 1 && calls[i] == 2 {
                return Err(BenchError::Invalid("torn".into()));
            }
            Ok(sample())
        })
        .expect("a failure is recorded, not returned");
        assert_eq!(calls, [cfg.reps + 1, 2], "b runs no more after failing");
        let a = runs[0].as_ref().expect("a ran");
        assert_eq!(
            a.per_s.len(),
            cfg.reps as usize,
            "the warm-up is not recorded"
        );
        assert!(runs[1].is_none());
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].0, "b");
        assert!(failures[0].1.starts_with(FAILED), "{:?}", failures[0]);
        assert!(failures[0].1.contains("torn"));
    }

    #[test]
    fn an_interruption_ends_the_workload() {
        let cfg = crate::suites::run_config(Mode::Tiny, 1, false);
        let names = ["a".to_string()];
        let bar = indicatif::ProgressBar::hidden();
        let mut failures = Vec::new();
        let r = interleave(Job::Append, &names, &cfg, &bar, &mut failures, |_, _, _| {
            Err(BenchError::Interrupted)
        });
        assert!(matches!(r, Err(BenchError::Interrupted)));
        assert!(failures.is_empty());
    }
}
