//! The suites `atomfs-bench SUITE` runs, their sizes per mode, and the driver that writes
//! results.json, the ratio table and the plots. The pool engine's suites (FCFS seed §VI)
//! live in `suites/pool.rs`.

pub mod cache;
pub mod distributed;
pub mod every_engine;
pub mod fuse;
pub mod journal;
pub mod mmio;
pub mod pool;
pub mod remap;
pub mod sqlite;

use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{run_figure, Figure, FigureResult, Metric, Point, RunConfig, SystemSpec};
use crate::system::TwoFileUpdate;
use crate::systems::{ext4, floor::Floor, pmdk::Pmdk, served, undo::UndoJournal};
use crate::workload::{ValueSize, Workload};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

/// How big and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Seconds: what `cargo test` runs (checks shapes, not speed).
    Tiny,
    /// Under 2 minutes on 2 cores.
    Quick,
    /// The seed's sizes (1,000 files × 4 MB, 500,000 tx per run) where memory allows.
    Full,
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Tiny => "tiny",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }
}

// `SUITES`: every suite name with its description, shared with the `atomfs` command.
include!("suite_list.rs");

/// Every suite name, with a one-line description.
pub fn suites() -> Vec<(&'static str, &'static str)> {
    SUITES.to_vec()
}

pub struct Options {
    pub mode: Mode,
    pub out: PathBuf,
    pub progress: bool,
    pub seed: u64,
    /// Only these systems of each figure (and its reference), in the suites of
    /// [`SYSTEMS_FILTERABLE`]; empty: all.
    pub systems: Vec<String>,
}

/// Suites whose figures all run through the common runner, so that `--systems` can pick
/// among their systems.
pub const SYSTEMS_FILTERABLE: &[&str] = &[
    "external",
    "fcfs-micro",
    "fcfs-value-size",
    "fcfs-idle",
    "fcfs-latency",
];

/// What a suite run produced.
pub struct Outcome {
    pub json: Value,
    pub json_path: PathBuf,
    pub table: String,
    pub plots: Vec<PathBuf>,
    /// Messages about sizes scaled down from the seed's and plots not drawn.
    pub notes: Vec<String>,
}

/// Files and sizes of the seed's microbenchmark for a mode, scaled to fit `budget` bytes
/// when each system keeps `copies` copies of the data (notes say what was scaled).
pub(crate) fn sizes(mode: Mode, copies: f64, notes: &mut Vec<String>) -> (u32, u64) {
    match mode {
        Mode::Tiny => (4, 64 << 10),
        Mode::Quick => (64, 1 << 20),
        Mode::Full => {
            let (files, file_size) = (1000u32, 4u64 << 20);
            let budget = crate::machine::memory_available().unwrap_or(8 << 30) as f64 * 0.6;
            let fit = (budget / (copies * file_size as f64)).floor() as u32;
            if fit < files {
                let scaled = fit.max(16);
                notes.push(format!(
                    "scaled down: {scaled} files × 4 MB instead of the seed's 1,000 (needs {:.1} GB \
                     for {copies} copies of the data, {:.1} GB budget = 60% of available memory)",
                    copies * files as f64 * file_size as f64 / 1e9,
                    budget / 1e9
                ));
                (scaled, file_size)
            } else {
                (files, file_size)
            }
        }
    }
}

pub fn run_config(mode: Mode, seed: u64, progress: bool) -> RunConfig {
    let (reps, txs_per_run, txs_min, run_time_max) = match mode {
        Mode::Tiny => (2, 30, 5, Duration::from_millis(40)),
        Mode::Quick => (5, 20_000, 20, Duration::from_millis(250)),
        Mode::Full => (5, 500_000, 100, Duration::from_secs(10)),
    };
    RunConfig {
        reps,
        txs_per_run,
        txs_min,
        run_time_max,
        seed,
        progress,
        systems: Vec::new(),
    }
}

fn boxed<T: TwoFileUpdate + 'static>(t: T) -> Result<Box<dyn TwoFileUpdate>> {
    Ok(Box::new(t))
}

/// The external suite: the ways a user would otherwise do the two-file atomic update.
fn external(
    mode: Mode,
    seed: u64,
    notes: &mut Vec<String>,
) -> Result<(Vec<Figure>, Vec<Rc<Ext4Disk>>)> {
    // floor + pmdk (~1.1) + three ext4 systems (image and page cache: 2 each) + temps,
    // + two pools.
    let (files, file_size) = sizes(mode, 8.5 + 2.0 * pool::POOL_COPIES, notes);
    let data = files as u64 * file_size;
    let disk = Rc::new(Ext4Disk::create(
        3 * data + data / 4 + 4 * file_size + (128 << 20),
    )?);
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let d = (disk.clone(), disk.clone(), disk.clone());
    let systems = vec![
        SystemSpec::new("floor", || boxed(Floor::new())),
        pool::pool_spec(::pool::Mode::Fcfs),
        pool::pool_spec(::pool::Mode::Nc),
        SystemSpec::new("pmdk", || boxed(Pmdk::new()?)),
        SystemSpec::new("ext4-fsync", move || {
            boxed(ext4::Ext4Fsync::new(d.0.clone()))
        }),
        SystemSpec::new("ext4-undo", move || boxed(UndoJournal::new(d.1.clone()))),
        SystemSpec::new("ext4-rename", move || {
            boxed(ext4::Ext4Rename::new(d.2.clone()))
        }),
        // The same pool engine reached from another process (docs/serve.md).
        SystemSpec::new("fcfs-served", || boxed(served::Served::new())),
        SystemSpec::new("fcfs-fuse-ioctl", || boxed(served::FuseIoctl::new())),
    ];
    let points = [4096u64, 16384]
        .iter()
        .map(|&max| Point {
            param: Some(max as f64),
            workload: Workload {
                files,
                file_size,
                value: ValueSize::Random { max },
                seed,
            },
            idle_fraction: 0.0,
        })
        .collect();
    let fig = Figure {
        id: "external".into(),
        title: "two-file atomic update: random 0–max B in each of two files".into(),
        x_label: Some("max value size (bytes)".into()),
        reference: "floor".into(),
        metrics: vec![Metric::TxLatencyUs, Metric::NvmmBytesPerTx],
        points,
        systems,
    };
    Ok((vec![fig], vec![disk]))
}

fn unknown(suite: &str) -> BenchError {
    BenchError::Invalid(format!(
        "unknown suite {suite:?}; suites: {}, all",
        suites()
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Run the figures of `suite` (the RAM disk of `external` lives until they are done).
fn measure(
    suite: &str,
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    if pool::SUITES.contains(&suite) {
        return pool::run(suite, opts, cfg, notes);
    }
    if suite == mmio::SUITE {
        return mmio::run(opts, cfg, notes);
    }
    if suite == every_engine::SUITE {
        return every_engine::run(opts, cfg, notes);
    }
    if suite == cache::SUITE {
        return cache::run(opts, notes);
    }
    if suite == journal::SUITE {
        return journal::run(opts, notes);
    }
    if suite == distributed::SUITE {
        return distributed::run(opts, notes);
    }
    if suite == remap::SUITE {
        return remap::run(opts, notes);
    }
    let (figs, disks) = match suite {
        "sqlite" => return sqlite::run(opts, notes),
        "fuse" => return fuse::run(opts, notes),
        "external" => external(opts.mode, opts.seed, notes)?,
        s => return Err(unknown(s)),
    };
    let mut out = Vec::new();
    for fig in figs {
        let res = run_figure(&fig, cfg)?;
        out.push((fig, res));
    }
    drop(disks);
    Ok(out)
}

/// Run `suite`, write `out/results.json` and the plots, return the table.
pub fn run_suite(suite: &str, opts: &Options) -> Result<Outcome> {
    if !suites().iter().any(|(n, _)| *n == suite) {
        return Err(unknown(suite));
    }
    if !opts.systems.is_empty() && !SYSTEMS_FILTERABLE.contains(&suite) {
        return Err(BenchError::Invalid(format!(
            "--systems: suite {suite} runs a fixed set of systems; it works with {}",
            SYSTEMS_FILTERABLE.join(", ")
        )));
    }
    let mut notes = Vec::new();
    let mut cfg = run_config(opts.mode, opts.seed, opts.progress);
    cfg.systems = opts.systems.clone();
    std::fs::create_dir_all(&opts.out).map_err(|e| BenchError::io("mkdir", &opts.out, e))?;
    let started = std::time::Instant::now();
    let results = measure(suite, opts, &cfg, &mut notes)?;
    let mut rows = Vec::new();
    let mut fig_configs = Vec::new();
    let mut table = String::new();
    let mut plots = Vec::new();
    for (fig, res) in &results {
        rows.extend(res.rows.iter().map(crate::report::row_json));
        fig_configs.push(crate::report::figure_config(fig, res));
        table.push_str(&crate::report::ratio_table(fig, res));
        for &metric in &fig.metrics {
            match crate::plot::plot(fig, res, metric, &opts.out) {
                Ok(Some(p)) => plots.push(p),
                Ok(None) => {}
                Err(e) => notes.push(format!("no plot for {} {}: {e}", fig.id, metric.as_str())),
            }
        }
    }
    let mut verdict = Value::Null;
    if suite == every_engine::SUITE {
        let (text, value) = every_engine::verdict(&results);
        table.push_str(&text);
        verdict = value;
    }
    let mut json = json!({
        "suite": suite,
        "machine": crate::machine::describe(),
        "revision": crate::machine::revision(),
        "config": {
            "mode": opts.mode.as_str(),
            "seed": opts.seed,
            "reps": cfg.reps,
            "txs_per_run": cfg.txs_per_run,
            "txs_min": cfg.txs_min,
            "run_time_max_s": cfg.run_time_max.as_secs_f64(),
            "systems": cfg.systems,
            "duration_s": started.elapsed().as_secs_f64(),
            "figures": fig_configs,
            "notes": notes,
        },
        "rows": rows,
    });
    if !verdict.is_null() {
        json["config"]["verdict"] = verdict;
    }
    let json_path = crate::report::write_json(&opts.out, &json)?;
    Ok(Outcome {
        json,
        json_path,
        table,
        plots,
        notes,
    })
}

/// Default output directory for a suite.
pub fn default_out(suite: &str) -> PathBuf {
    Path::new("target").join("bench").join(suite)
}
