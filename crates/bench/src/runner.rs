//! Runs a figure: every system of the figure on the same fixed-seed transactions, runs
//! interleaved round-robin (rep 1 of every system, then rep 2 of every system, ...) so that
//! machine drift hits all systems alike, repeated; each metric reported as median with min
//! and max over the repetitions.

use crate::error::{BenchError, Result};
use crate::system::TwoFileUpdate;
use crate::workload::{Generator, Workload};
use std::time::{Duration, Instant};

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Mean wall time of one transaction in a run, microseconds.
    TxLatencyUs,
    /// Transactions per second over a run (idle time included where the figure has some).
    TxPerS,
    /// Bytes the system wrote to its medium per transaction (data, logs, journals).
    NvmmBytesPerTx,
    /// Seconds to recover a store (recovery figure).
    RecoveryS,
    /// The part of `NvmmBytesPerTx` written by the transaction's own thread.
    NvmmFgBytesPerTx,
    /// The part of `NvmmBytesPerTx` written by checkpointing (background threads and the
    /// checkpoint at the end of each run).
    NvmmCkptBytesPerTx,
    /// Transactions per second divided by the figure reference's, run by run.
    TxPerSNorm,
    /// Bandwidth, 10^6 bytes per second (floor figure: durable copy; fuse: fio jobs).
    MbPerS,
    /// I/O operations per second (fuse: fio jobs).
    Iops,
    /// CPU time of the whole process (every thread, user and system) per transaction,
    /// microseconds: includes background threads, which wall time hides when a core is idle.
    CpuUsPerTx,
}

impl Metric {
    pub fn as_str(&self) -> &'static str {
        match self {
            Metric::TxLatencyUs => "tx_latency_us",
            Metric::TxPerS => "tx_per_s",
            Metric::NvmmBytesPerTx => "nvmm_bytes_per_tx",
            Metric::RecoveryS => "recovery_s",
            Metric::NvmmFgBytesPerTx => "nvmm_fg_bytes_per_tx",
            Metric::NvmmCkptBytesPerTx => "nvmm_ckpt_bytes_per_tx",
            Metric::TxPerSNorm => "tx_per_s_norm",
            Metric::MbPerS => "mb_per_s",
            Metric::Iops => "iops",
            Metric::CpuUsPerTx => "cpu_us_per_tx",
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Metric::TxLatencyUs => "transaction latency (µs)",
            Metric::TxPerS => "transactions per second",
            Metric::NvmmBytesPerTx => "bytes written per transaction",
            Metric::RecoveryS => "recovery time (s)",
            Metric::NvmmFgBytesPerTx => "bytes written per transaction, foreground",
            Metric::NvmmCkptBytesPerTx => "bytes written per transaction, checkpointing",
            Metric::TxPerSNorm => "throughput normalized to the reference",
            Metric::MbPerS => "bandwidth (MB/s)",
            Metric::Iops => "I/O operations per second",
            Metric::CpuUsPerTx => "CPU time per transaction, all threads (µs)",
        }
    }
}

/// How long and how often to measure.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Measured repetitions per system and point.
    pub reps: u32,
    /// Transactions per run (a run also stops at `run_time_max`, after `txs_min`).
    pub txs_per_run: u64,
    pub txs_min: u64,
    pub run_time_max: Duration,
    /// Base seed; repetition r uses `seed + r` for every system.
    pub seed: u64,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
    /// Only these systems of each figure, besides its reference (empty: all).
    pub systems: Vec<String>,
}

impl RunConfig {
    /// Whether `fig` runs `spec` under the `systems` filter.
    fn runs(&self, fig: &Figure, spec: &SystemSpec) -> bool {
        self.systems.is_empty() || spec.name == fig.reference || self.systems.contains(&spec.name)
    }

    /// Every system the filter names must be one of the figure's.
    fn check_filter(&self, fig: &Figure) -> Result<()> {
        match self
            .systems
            .iter()
            .find(|n| !fig.systems.iter().any(|s| &s.name == *n))
        {
            None => Ok(()),
            Some(n) => Err(BenchError::Invalid(format!(
                "--systems: figure {} has no system {n} (it has {})",
                fig.id,
                fig.systems
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// Makes a fresh, not yet set up, system (called once per point).
pub type Factory = Box<dyn Fn() -> Result<Box<dyn TwoFileUpdate>>>;

pub struct SystemSpec {
    pub name: String,
    pub make: Factory,
}

impl SystemSpec {
    pub fn new(name: &str, make: impl Fn() -> Result<Box<dyn TwoFileUpdate>> + 'static) -> Self {
        SystemSpec {
            name: name.to_string(),
            make: Box::new(make),
        }
    }
}

/// One x value of a figure.
#[derive(Clone, Debug)]
pub struct Point {
    pub param: Option<f64>,
    pub workload: Workload,
    /// Fraction of wall time spent idle between transactions (Fig. 9), 0 for none.
    pub idle_fraction: f64,
}

pub struct Figure {
    pub id: String,
    pub title: String,
    /// Label of the x axis when points have a param.
    pub x_label: Option<String>,
    /// The system ratios are taken against.
    pub reference: String,
    /// Metrics reported as rows (and plotted), first one is the table's.
    pub metrics: Vec<Metric>,
    pub points: Vec<Point>,
    pub systems: Vec<SystemSpec>,
}

/// One result row (the stable JSON shape, see report.rs).
#[derive(Clone, Debug)]
pub struct Row {
    pub figure: String,
    pub system: String,
    pub param: Option<f64>,
    pub metric: Metric,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: Vec<f64>,
    /// Transactions in each run.
    pub txs: Vec<u64>,
}

/// Everything a figure produced.
#[derive(Default)]
pub struct FigureResult {
    pub rows: Vec<Row>,
    /// (system, why) for systems that could not run here.
    pub skipped: Vec<(String, String)>,
    /// (system, medium, guarantee).
    pub systems: Vec<(String, String, String)>,
}

struct Sample {
    elapsed: Duration,
    txs: u64,
    bytes: Option<u64>,
    ckpt_bytes: Option<u64>,
}

fn check_interrupt() -> Result<()> {
    if crate::interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// One measured run of `sys` on the transactions of `workload` (seeded).
fn run_once(
    sys: &mut dyn TwoFileUpdate,
    workload: Workload,
    idle_fraction: f64,
    txs_max: u64,
    cfg: &RunConfig,
) -> Result<Sample> {
    let mut gen = Generator::new(workload);
    sys.run_start();
    let bytes_before = sys.bytes_written();
    let ckpt_before = sys.ckpt_bytes_written();
    let start = Instant::now();
    let mut txs = 0;
    while txs < txs_max {
        check_interrupt()?;
        let tx = gen.next_tx();
        let (a, b) = gen.writes(&tx);
        let tx_start = Instant::now();
        sys.tx(a, b)?;
        txs += 1;
        if idle_fraction > 0.0 {
            let busy = tx_start.elapsed().as_secs_f64();
            sys.idle(Duration::from_secs_f64(
                busy * idle_fraction / (1.0 - idle_fraction),
            ));
        }
        if txs >= cfg.txs_min && start.elapsed() >= cfg.run_time_max {
            break;
        }
    }
    let elapsed = start.elapsed();
    sys.run_end();
    let bytes = match (bytes_before, sys.bytes_written()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    let ckpt_bytes = match (ckpt_before, sys.ckpt_bytes_written()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    Ok(Sample {
        elapsed,
        txs,
        bytes,
        ckpt_bytes,
    })
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A row from the per-run values of one series (median, min and max computed here).
pub fn row(
    figure: &str,
    system: &str,
    param: Option<f64>,
    metric: Metric,
    runs: Vec<f64>,
    txs: Vec<u64>,
) -> Row {
    let min = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Row {
        figure: figure.to_string(),
        system: system.to_string(),
        param,
        metric,
        median: median(&runs),
        min,
        max,
        runs,
        txs,
    }
}

/// Instantiate and set up every system for `point`; skipped ones are recorded.
fn setup_systems(
    fig: &Figure,
    point: &Point,
    cfg: &RunConfig,
    out: &mut FigureResult,
) -> Result<Vec<(String, Box<dyn TwoFileUpdate>)>> {
    let mut live = Vec::new();
    for spec in fig.systems.iter().filter(|s| cfg.runs(fig, s)) {
        check_interrupt()?;
        let made = (spec.make)().and_then(|mut s| {
            s.setup(point.workload.files, point.workload.file_size)?;
            Ok(s)
        });
        match made {
            Ok(s) => {
                if !out.systems.iter().any(|(n, _, _)| n == &spec.name) {
                    out.systems
                        .push((spec.name.clone(), s.medium(), s.guarantee().to_string()));
                }
                live.push((spec.name.clone(), s));
            }
            Err(BenchError::Skipped(why)) => {
                if !out.skipped.iter().any(|(n, _)| n == &spec.name) {
                    out.skipped.push((spec.name.clone(), why));
                }
            }
            Err(e) => {
                return Err(BenchError::System {
                    system: spec.name.clone(),
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(live)
}

fn progress_bar(fig: &Figure, cfg: &RunConfig) -> indicatif::ProgressBar {
    let systems = fig.systems.iter().filter(|s| cfg.runs(fig, s)).count();
    let total = (fig.points.len() * systems) as u64 * (cfg.reps as u64 + 1);
    simple_bar(&fig.id, total, cfg.progress)
}

/// A progress bar of `total` steps named `prefix` (hidden when `show` is false).
pub fn simple_bar(prefix: &str, total: u64, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix:>14} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(prefix.to_string());
    bar
}

/// Run every point of `fig`.
pub fn run_figure(fig: &Figure, cfg: &RunConfig) -> Result<FigureResult> {
    cfg.check_filter(fig)?;
    let mut out = FigureResult::default();
    let bar = progress_bar(fig, cfg);
    let running = fig.systems.iter().filter(|s| cfg.runs(fig, s)).count();
    for point in &fig.points {
        let mut live = setup_systems(fig, point, cfg, &mut out)?;
        let param = point.param.map(|p| format!(" x={p}")).unwrap_or_default();
        // Warm-up run (caches, page faults, allocator), not recorded.
        for (name, sys) in live.iter_mut() {
            bar.set_message(format!("{name}{param} warm-up"));
            let mut w = point.workload;
            w.seed ^= 0x5741_524D;
            run_once(
                sys.as_mut(),
                w,
                point.idle_fraction,
                (cfg.txs_per_run / 10).max(cfg.txs_min),
                cfg,
            )?;
            bar.inc(1);
        }
        let mut samples: Vec<Vec<Sample>> = live.iter().map(|_| Vec::new()).collect();
        for rep in 0..cfg.reps {
            for (i, (name, sys)) in live.iter_mut().enumerate() {
                bar.set_message(format!("{name}{param} run {}/{}", rep + 1, cfg.reps));
                let mut w = point.workload;
                w.seed = cfg.seed.wrapping_add(rep as u64);
                samples[i].push(run_once(
                    sys.as_mut(),
                    w,
                    point.idle_fraction,
                    cfg.txs_per_run,
                    cfg,
                )?);
                bar.inc(1);
            }
        }
        for ((name, _), runs) in live.iter().zip(samples) {
            push_rows(fig, name, point.param, &runs, &mut out);
        }
        bar.inc(((running - live.len()) as u64) * (cfg.reps as u64 + 1));
        drop(live); // free this point's pools and files before the next point
    }
    bar.finish_and_clear();
    Ok(out)
}

fn push_rows(
    fig: &Figure,
    name: &str,
    param: Option<f64>,
    runs: &[Sample],
    out: &mut FigureResult,
) {
    let txs: Vec<u64> = runs.iter().map(|s| s.txs).collect();
    for &metric in &fig.metrics {
        let values: Option<Vec<f64>> = runs
            .iter()
            .map(|s| {
                let n = s.txs.max(1) as f64;
                match metric {
                    Metric::TxLatencyUs => Some(s.elapsed.as_secs_f64() * 1e6 / n),
                    Metric::TxPerS => Some(n / s.elapsed.as_secs_f64().max(1e-12)),
                    Metric::NvmmBytesPerTx => s.bytes.map(|b| b as f64 / n),
                    Metric::NvmmCkptBytesPerTx => s.ckpt_bytes.map(|b| b as f64 / n),
                    Metric::NvmmFgBytesPerTx => match (s.bytes, s.ckpt_bytes) {
                        (Some(b), Some(c)) => Some(b.saturating_sub(c) as f64 / n),
                        _ => None,
                    },
                    Metric::RecoveryS
                    | Metric::TxPerSNorm
                    | Metric::MbPerS
                    | Metric::Iops
                    | Metric::CpuUsPerTx => None,
                }
            })
            .collect();
        if let Some(values) = values {
            out.rows
                .push(row(&fig.id, name, param, metric, values, txs.clone()));
        }
    }
}

/// Rows of an already measured series (used by figures measured outside `run_figure`, e.g.
/// recovery time).
pub fn rows_from_runs(
    figure: &str,
    system: &str,
    param: Option<f64>,
    metric: Metric,
    runs: Vec<f64>,
) -> Row {
    let n = runs.len();
    row(figure, system, param, metric, runs, vec![1; n])
}

/// Rows of `metric` normalized to the `reference` system, run by run (rep r of a system
/// divided by rep r of the reference: interleaved runs share the machine's drift), as
/// `Metric::TxPerSNorm` rows. Points without a reference row get none.
pub fn normalized_rows(rows: &[Row], metric: Metric, reference: &str) -> Vec<Row> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        let Some(base) = rows
            .iter()
            .find(|b| b.metric == metric && b.param == r.param && b.system == reference)
        else {
            continue;
        };
        let runs: Vec<f64> = r
            .runs
            .iter()
            .zip(&base.runs)
            .map(|(v, b)| if *b > 0.0 { v / b } else { f64::NAN })
            .collect();
        out.push(row(
            &r.figure,
            &r.system,
            r.param,
            Metric::TxPerSNorm,
            runs,
            r.txs.clone(),
        ));
    }
    out
}
