//! The FCFS seed's evaluation (§VI, Figs. 7–11) on the pool engine, and the `floor` suite.
//! Every figure measures all its systems interleaved in one run (see runner.rs); the
//! multi-threaded (Fig. 7c) and recovery (Fig. 11) figures have their own loops here, with
//! the same interleaving and repetition.

use super::{sizes, Mode, Options};
use crate::error::{BenchError, Result};
use crate::runner::{
    normalized_rows, row, run_figure, Figure, FigureResult, Metric, Point, RunConfig, SystemSpec,
};
use crate::system::TwoFileUpdate;
use crate::systems::floor::Floor;
use crate::systems::pool::{pool_tx, PoolSystem};
use crate::workload::{Generator, ValueSize, Workload};
use pmem::{EmulatorConfig, MappedRegion, Region};
use pool::{Mode as PoolMode, PoolConfig, PoolStore};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use store::Store;

/// The suites this module runs (described in `suites::SUITES`).
pub const SUITES: &[&str] = &[
    "fcfs-micro",
    "fcfs-threads",
    "fcfs-value-size",
    "fcfs-idle",
    "fcfs-latency",
    "recovery",
    "floor",
];

/// The seed's NVMM write bandwidth (Mnemosyne's 4 GB/s), used with the latency sweep.
const SEED_BANDWIDTH: u64 = 4_000_000_000;

/// Memory copies of the data one pool system keeps (pool file = 1.5 × data + logs).
pub const POOL_COPIES: f64 = 1.55;

fn boxed<T: TwoFileUpdate + 'static>(t: T) -> Result<Box<dyn TwoFileUpdate>> {
    Ok(Box::new(t))
}

/// A system spec for the pool engine in `mode`.
pub fn pool_spec(mode: PoolMode) -> SystemSpec {
    SystemSpec::new(mode.name(), move || boxed(PoolSystem::new(mode)))
}

fn emulated_spec(mode: PoolMode, latency_ns: u64) -> SystemSpec {
    let emu = EmulatorConfig {
        write_latency_ns: latency_ns,
        write_bandwidth_max: SEED_BANDWIDTH,
    };
    SystemSpec::new(mode.name(), move || {
        boxed(PoolSystem::with(mode, emu, None))
    })
}

fn random_points(files: u32, file_size: u64, seed: u64, maxes: &[u64]) -> Vec<Point> {
    maxes
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
        .collect()
}

const BYTE_METRICS: [Metric; 3] = [
    Metric::NvmmBytesPerTx,
    Metric::NvmmFgBytesPerTx,
    Metric::NvmmCkptBytesPerTx,
];

/// Run `suite` (one of [`SUITES`]).
pub fn run(
    suite: &str,
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    match suite {
        "fcfs-micro" => {
            let mut figures = single(micro(opts, notes), cfg)?;
            figures.extend(single(micro_emulated(opts, notes), cfg)?);
            Ok(figures)
        }
        "fcfs-value-size" => value_size(opts, cfg, notes),
        "fcfs-idle" => idle(opts, cfg, notes),
        "fcfs-latency" => latency(opts, cfg, notes),
        "fcfs-threads" => Ok(vec![threads(opts, cfg, notes)?]),
        "recovery" => Ok(vec![recovery(opts, cfg, notes)?]),
        "floor" => floor(opts, cfg, notes),
        s => Err(BenchError::Invalid(format!("not a pool suite: {s}"))),
    }
}

fn single(fig: Figure, cfg: &RunConfig) -> Result<Vec<(Figure, FigureResult)>> {
    let res = run_figure(&fig, cfg)?;
    Ok(vec![(fig, res)])
}

/// Fig. 7a/b: latency and bytes written, 1 thread, random 0–16 KB (and 0–4 KB) values.
fn micro(opts: &Options, notes: &mut Vec<String>) -> Figure {
    let (files, file_size) = sizes(opts.mode, 4.0 * POOL_COPIES + 0.5, notes);
    let mut metrics = vec![Metric::TxLatencyUs];
    metrics.extend(BYTE_METRICS);
    Figure {
        id: "fcfs-micro".into(),
        title: "Fig. 7a/b: two-file atomic update, 1 thread, random 0–max B per file".into(),
        x_label: Some("max value size (bytes)".into()),
        reference: "nc".into(),
        metrics,
        points: random_points(files, file_size, opts.seed, &[4096, 16384]),
        systems: [
            PoolMode::Fcfs,
            PoolMode::Nc,
            PoolMode::FgWal,
            PoolMode::Scsp,
        ]
        .into_iter()
        .map(pool_spec)
        .collect(),
    }
}

/// The seed's NVMM write latency for all its figures but Fig. 10 (§VI-A: 150 ns, 4 GB/s,
/// Mnemosyne's configuration).
const SEED_LATENCY_NS: u64 = 150;

/// Fig. 7a/b as the seed measured it: the same workload on NVMM emulated at the seed's
/// 150 ns per written-back line and 4 GB/s (`pmem::Emulated`), where writing the data costs
/// what it costs on NVMM and a logging protocol's bookkeeping in DRAM weighs less.
fn micro_emulated(opts: &Options, notes: &mut Vec<String>) -> Figure {
    let mut fig = micro(opts, notes);
    fig.id = "fcfs-micro-nvmm".into();
    fig.title = format!(
        "Fig. 7a/b on emulated NVMM ({SEED_LATENCY_NS} ns per line, 4 GB/s, as in the seed)"
    );
    fig.systems = [
        PoolMode::Fcfs,
        PoolMode::Nc,
        PoolMode::FgWal,
        PoolMode::Scsp,
    ]
    .into_iter()
    .map(|m| emulated_spec(m, SEED_LATENCY_NS))
    .collect();
    fig
}

/// Fig. 8: fixed value sizes, throughput, normalized to NC run by run.
fn value_size(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let (files, file_size) = sizes(opts.mode, 4.0 * POOL_COPIES + 0.5, notes);
    let points = [64u64, 256, 1024, 4096, 16384]
        .iter()
        .filter(|&&v| v <= file_size)
        .map(|&v| Point {
            param: Some(v as f64),
            workload: Workload {
                files,
                file_size,
                value: ValueSize::Fixed(v),
                seed: opts.seed,
            },
            idle_fraction: 0.0,
        })
        .collect();
    let fig = Figure {
        id: "fcfs-value-size".into(),
        title: "Fig. 8: throughput vs transaction value size (both writes exactly this size)"
            .into(),
        x_label: Some("value size (bytes)".into()),
        reference: "nc".into(),
        metrics: vec![Metric::TxPerS, Metric::TxPerSNorm, Metric::NvmmBytesPerTx],
        points,
        systems: [
            PoolMode::Nc,
            PoolMode::Fcfs,
            PoolMode::FgWal,
            PoolMode::Scsp,
        ]
        .into_iter()
        .map(pool_spec)
        .collect(),
    };
    with_normalized(fig, cfg)
}

fn with_normalized(fig: Figure, cfg: &RunConfig) -> Result<Vec<(Figure, FigureResult)>> {
    let mut res = run_figure(&fig, cfg)?;
    let norm = normalized_rows(&res.rows, Metric::TxPerS, &fig.reference);
    res.rows.extend(norm);
    Ok(vec![(fig, res)])
}

/// Fig. 9: idle time between transactions, as a fraction of wall time.
fn idle(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let (files, file_size) = sizes(opts.mode, 4.0 * POOL_COPIES + 0.5, notes);
    let fractions: &[f64] = match opts.mode {
        Mode::Tiny => &[0.0, 0.5],
        _ => &[0.0, 0.1, 0.3, 0.5, 0.7, 0.9],
    };
    let points = fractions
        .iter()
        .map(|&f| Point {
            param: Some((f * 100.0).round()),
            workload: Workload {
                files,
                file_size,
                value: ValueSize::Random { max: 16384 },
                seed: opts.seed,
            },
            idle_fraction: f,
        })
        .collect();
    notes.push(
        "fcfs-idle: after each transaction the thread idles for busy × f / (1 − f) \
         (spinning below 2 ms, sleeping above), so f of the wall time is idle; tx_per_s \
         counts the idle time"
            .into(),
    );
    let fig = Figure {
        id: "fcfs-idle".into(),
        title: "Fig. 9: throughput vs transaction idle time (random 0–16 KB values)".into(),
        x_label: Some("idle time (% of wall time)".into()),
        reference: "sync".into(),
        metrics: vec![Metric::TxPerS, Metric::TxPerSNorm],
        points,
        systems: [PoolMode::Nc, PoolMode::Fcfs, PoolMode::Soc, PoolMode::Sync]
            .into_iter()
            .map(pool_spec)
            .collect(),
    };
    with_normalized(fig, cfg)
}

/// Fig. 10: emulated NVMM write latency per flushed line (pmem::Emulated, 4 GB/s cap).
/// The emulator is fixed when a pool is built, so each latency is its own sub-run of all
/// systems (still interleaved within it); rows are merged into one figure.
fn latency(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let (files, file_size) = match opts.mode {
        // Setup writes the files through the emulator; keep the quick run quick.
        Mode::Quick => (32, 1 << 20),
        m => sizes(m, 4.0 * POOL_COPIES + 0.5, notes),
    };
    let latencies: &[u64] = match opts.mode {
        Mode::Tiny => &[50, 400],
        _ => &[50, 100, 200, 400, 800, 1600],
    };
    let modes = [
        PoolMode::Nc,
        PoolMode::Fcfs,
        PoolMode::FgWal,
        PoolMode::Scsp,
    ];
    let mut all = FigureResult::default();
    let mut points = Vec::new();
    for &ns in latencies {
        let point = random_points(files, file_size, opts.seed, &[16384])
            .pop()
            .map(|mut p| {
                p.param = Some(ns as f64);
                p
            })
            .ok_or_else(|| BenchError::Invalid("no point".into()))?;
        points.push(point.clone());
        let sub = Figure {
            id: "fcfs-latency".into(),
            title: String::new(),
            x_label: None,
            reference: "nc".into(),
            metrics: vec![Metric::TxPerS, Metric::TxLatencyUs],
            points: vec![point],
            systems: modes.iter().map(|&m| emulated_spec(m, ns)).collect(),
        };
        let res = run_figure(&sub, cfg)?;
        all.rows.extend(res.rows);
        for s in res.systems {
            if !all.systems.iter().any(|x| x.0 == s.0) {
                all.systems.push(s);
            }
        }
        for s in res.skipped {
            if !all.skipped.iter().any(|x| x.0 == s.0) {
                all.skipped.push(s);
            }
        }
    }
    let norm = normalized_rows(&all.rows, Metric::TxPerS, "nc");
    all.rows.extend(norm);
    let fig = Figure {
        id: "fcfs-latency".into(),
        title: "Fig. 10: throughput vs emulated NVMM write latency (random 0–16 KB, 4 GB/s cap)"
            .into(),
        x_label: Some("NVMM write latency (ns per line)".into()),
        reference: "nc".into(),
        metrics: vec![Metric::TxPerS, Metric::TxPerSNorm, Metric::TxLatencyUs],
        points,
        systems: Vec::new(),
    };
    Ok(vec![(fig, all)])
}

/// The other figures' suites at their default mix against the bare durable copy, and the
/// copy bandwidth of the region itself (`pmem::floor::measure`).
fn floor(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let modes = [
        PoolMode::Fcfs,
        PoolMode::Nc,
        PoolMode::FgWal,
        PoolMode::Scsp,
        PoolMode::Soc,
        PoolMode::Sync,
    ];
    let (files, file_size) = sizes(opts.mode, 6.0 * POOL_COPIES + 1.5, notes);
    let mut systems = vec![SystemSpec::new("floor", || boxed(Floor::new()))];
    systems.extend(modes.into_iter().map(pool_spec));
    let mut metrics = vec![Metric::TxLatencyUs];
    metrics.extend(BYTE_METRICS);
    let fig = Figure {
        id: "floor".into(),
        title: "distance from the floor: every pool mode vs a bare durable copy".into(),
        x_label: Some("max value size (bytes)".into()),
        reference: "floor".into(),
        metrics,
        points: random_points(files, file_size, opts.seed, &[4096, 16384]),
        systems,
    };
    let res = run_figure(&fig, cfg)?;
    let bw = floor_bandwidth(opts.mode, cfg)?;
    Ok(vec![(fig, res), bw])
}

/// Durable copy bandwidth of a /dev/shm mapping for 64 B … 16 KB writes, cached copy +
/// flush + fence and non-temporal copy + fence (the pmem micro-benchmark).
fn floor_bandwidth(mode: Mode, cfg: &RunConfig) -> Result<(Figure, FigureResult)> {
    use pmem::floor::{measure, CopyPath, FloorConfig};
    let span: u64 = match mode {
        Mode::Tiny => 1 << 20,
        Mode::Quick => 64 << 20,
        Mode::Full => 1 << 30,
    };
    let path = crate::scratch_path("floor-bw.map");
    let region = MappedRegion::create(&path, span)
        .map_err(|e| BenchError::Output(format!("floor bandwidth region: {e}")))?;
    region.fill(0, span, 0); // fault the pages in before timing
    let fc = FloorConfig {
        bytes_per_run: span / 2,
        runs: 1,
        span_off: 0,
        span_len: span,
    };
    let sizes = [64u64, 256, 1024, 4096, 16384];
    let paths = [
        ("copy+flush", CopyPath::CachedFlush),
        ("nt-copy", CopyPath::NonTemporal),
    ];
    let mut res = FigureResult::default();
    for &size in &sizes {
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        for _ in 0..cfg.reps {
            for (i, (_, p)) in paths.iter().enumerate() {
                if crate::interrupted() {
                    return Err(BenchError::Interrupted);
                }
                runs[i].push(measure(&region, size, *p, fc).mb_per_s);
            }
        }
        for ((name, _), r) in paths.iter().zip(runs) {
            let n = r.len();
            res.rows.push(row(
                "floor-bandwidth",
                name,
                Some(size as f64),
                Metric::MbPerS,
                r,
                vec![(fc.bytes_per_run / size).max(1); n],
            ));
        }
    }
    drop(region);
    let _ = std::fs::remove_file(&path);
    let flush = pmem::FlushInstruction::detect().name();
    for (name, _) in &paths {
        res.systems.push((
            name.to_string(),
            format!(
                "{} mapping of {} MB ({flush})",
                crate::scratch_base().display(),
                span >> 20
            ),
            "none (durable copy only)".into(),
        ));
    }
    let fig = Figure {
        id: "floor-bandwidth".into(),
        title: "durable copy bandwidth of the region (memcpy + flush + fence / nt copy + fence)"
            .into(),
        x_label: Some("write size (bytes)".into()),
        reference: "copy+flush".into(),
        metrics: vec![Metric::MbPerS],
        points: Vec::new(),
        systems: Vec::new(),
    };
    Ok((fig, res))
}

// ---------------------------------------------------------------------------------------
// Fig. 7c: threads

/// One multi-threaded run: `threads` threads on disjoint file sets of one pool, each running
/// two-file transactions until `cfg.run_time_max` (or its share of `txs_max`). Returns the
/// total transactions and the wall time from the common start to the last thread's end.
fn run_threads(
    sys: &PoolSystem,
    threads: u32,
    w: Workload,
    txs_max: u64,
    cfg: &RunConfig,
) -> Result<(u64, Duration)> {
    let (store, fhs) = sys.shared()?;
    let per = w.files / threads;
    let stop = AtomicBool::new(false);
    let finished = AtomicU32::new(0);
    let start_line = Barrier::new(threads as usize + 1);
    let per_thread_max = (txs_max / threads as u64).max(1);
    std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (store, fhs) = (&store, &fhs);
                let (stop, finished, start_line) = (&stop, &finished, &start_line);
                sc.spawn(move || -> Result<u64> {
                    let base = (t * per) as usize;
                    let mut gen = Generator::new(Workload {
                        files: per,
                        seed: w.seed.wrapping_add(0x1000 * t as u64),
                        ..w
                    });
                    start_line.wait();
                    let mut n = 0;
                    let mut result = Ok(());
                    while n < per_thread_max && !stop.load(Ordering::Relaxed) {
                        let tx = gen.next_tx();
                        let (a, b) = gen.writes(&tx);
                        let (fa, fb) = (fhs[base + a.file as usize], fhs[base + b.file as usize]);
                        if let Err(e) = pool_tx(store, fa, fb, &a, &b) {
                            result = Err(BenchError::System {
                                system: sys.mode().name().into(),
                                message: format!("thread {t}: {e}"),
                            });
                            break;
                        }
                        n += 1;
                    }
                    finished.fetch_add(1, Ordering::Release);
                    result.map(|_| n)
                })
            })
            .collect();
        start_line.wait();
        let start = Instant::now();
        while finished.load(Ordering::Acquire) < threads
            && start.elapsed() < cfg.run_time_max
            && !crate::interrupted()
        {
            std::thread::sleep(Duration::from_micros(500));
        }
        stop.store(true, Ordering::Relaxed);
        let mut total = 0;
        let mut first_err = None;
        for h in workers {
            match h.join() {
                Ok(Ok(n)) => total += n,
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err = first_err.or(Some(BenchError::Invalid(
                        "a benchmark thread panicked".into(),
                    )))
                }
            }
        }
        let elapsed = start.elapsed();
        if crate::interrupted() {
            return Err(BenchError::Interrupted);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((total, elapsed)),
        }
    })
}

fn thread_counts(mode: Mode) -> Vec<u32> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    match mode {
        Mode::Tiny => vec![1, 2],
        _ => (1..=cores.max(2)).collect(),
    }
}

/// Fig. 7c: throughput vs threads, FCFS vs SOC vs NC.
fn threads(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<(Figure, FigureResult)> {
    let (files, file_size) = sizes(opts.mode, 3.0 * POOL_COPIES + 0.5, notes);
    // Every thread needs two files of its own.
    let counts: Vec<u32> = thread_counts(opts.mode)
        .into_iter()
        .filter(|&t| files / t >= 2)
        .collect();
    notes.push(format!(
        "fcfs-threads: 1..{} threads on this machine ({} cores); the seed used 1..12 threads \
         on a 12-core Xeon. Each thread works on its own {} of the {files} files.",
        counts.last().copied().unwrap_or(1),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        files / counts.last().copied().unwrap_or(1)
    ));
    let modes = [PoolMode::Nc, PoolMode::Fcfs, PoolMode::Soc];
    let workload = Workload {
        files,
        file_size,
        value: ValueSize::Random { max: 16384 },
        seed: opts.seed,
    };
    let bar = crate::runner::simple_bar(
        "fcfs-threads",
        (counts.len() * modes.len()) as u64 * (cfg.reps as u64 + 1),
        cfg.progress,
    );
    let mut res = FigureResult::default();
    for &t in &counts {
        let mut live = Vec::new();
        for m in modes {
            let mut s = PoolSystem::new(m);
            s.setup(files, file_size)?;
            if !res.systems.iter().any(|x| x.0 == m.name()) {
                res.systems
                    .push((m.name().into(), s.medium(), s.guarantee().into()));
            }
            live.push(s);
        }
        for s in live.iter_mut() {
            bar.set_message(format!("{} x={t} warm-up", s.mode().name()));
            let w = Workload {
                seed: workload.seed ^ 0x5741_524D,
                ..workload
            };
            run_threads(s, t, w, (cfg.txs_per_run / 10).max(cfg.txs_min), cfg)?;
            s.drain()?;
            bar.inc(1);
        }
        let mut runs: Vec<(Vec<f64>, Vec<u64>)> = vec![(Vec::new(), Vec::new()); live.len()];
        for rep in 0..cfg.reps {
            for (i, s) in live.iter_mut().enumerate() {
                bar.set_message(format!(
                    "{} x={t} run {}/{}",
                    s.mode().name(),
                    rep + 1,
                    cfg.reps
                ));
                let w = Workload {
                    seed: cfg.seed.wrapping_add(rep as u64),
                    ..workload
                };
                let (txs, elapsed) = run_threads(s, t, w, cfg.txs_per_run, cfg)?;
                s.drain()?;
                runs[i].0.push(txs as f64 / elapsed.as_secs_f64().max(1e-9));
                runs[i].1.push(txs);
                bar.inc(1);
            }
        }
        for (s, (r, txs)) in live.iter().zip(runs) {
            res.rows.push(row(
                "fcfs-threads",
                s.mode().name(),
                Some(t as f64),
                Metric::TxPerS,
                r,
                txs,
            ));
        }
    }
    bar.finish_and_clear();
    let norm = normalized_rows(&res.rows, Metric::TxPerS, "nc");
    res.rows.extend(norm);
    let fig = Figure {
        id: "fcfs-threads".into(),
        title: "Fig. 7c: throughput vs threads (disjoint file sets, random 0–16 KB)".into(),
        x_label: Some("threads".into()),
        reference: "nc".into(),
        metrics: vec![Metric::TxPerS, Metric::TxPerSNorm],
        points: vec![Point {
            param: None,
            workload,
            idle_fraction: 0.0,
        }],
        systems: Vec::new(),
    };
    Ok((fig, res))
}

// ---------------------------------------------------------------------------------------
// Fig. 11: recovery

/// A crashed pool image holding `txs` committed, not yet checkpointed transactions.
struct CrashedImage {
    path: std::path::PathBuf,
    /// FCFS-Log (both logs) plus pending blocks, bytes.
    log_bytes: u64,
    committed: u64,
}

impl Drop for CrashedImage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn recovery_config(txs: u64) -> PoolConfig {
    PoolConfig {
        // Nothing is checkpointed before the crash: no threads, no length or idle trigger,
        // logs and blocks big enough that no low-water mark is reached.
        checkpoint_threads: 0,
        checkpoint_idle_ms: 0,
        pending_versions_max: usize::MAX,
        metadata_log_entries: 4 * txs + 8192,
        data_log_entries: 16 * txs + 8192,
        ..PoolConfig::default()
    }
}

fn stat(stats: &[(String, u64)], key: &str) -> u64 {
    stats
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .unwrap_or(0)
}

fn io_err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::System {
        system: "fcfs".into(),
        message: format!("{what}: {e}"),
    }
}

/// Build a pool, run `txs` two-file transactions with checkpointing off, and stop it
/// uncleanly (dropping a `PoolStore` without unmount writes nothing more): the file left in
/// /dev/shm is the durable image of a crash.
fn crashed_image(files: u32, file_size: u64, txs: u64, seed: u64) -> Result<CrashedImage> {
    let cfg = recovery_config(txs);
    // Data, ~6 pending blocks per tx (two random 0–16 KB writes), logs, slack.
    let size = (files as u64 * file_size + txs * 40_960 + (20 * txs + 16_384) * 64 + (96 << 20))
        .next_multiple_of(1 << 20);
    let path = crate::scratch_path("recovery.pool");
    let region = MappedRegion::create(&path, size).map_err(|e| io_err("create pool", e))?;
    let s = PoolStore::format(Arc::new(region), &cfg).map_err(|e| io_err("format", e))?;
    let mut image = CrashedImage {
        path,
        log_bytes: 0,
        committed: 0,
    };
    let rw = store::OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fill = vec![0x5Au8; file_size as usize];
    let mut fhs = Vec::new();
    for i in 0..files {
        let meta = s
            .create(store::ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)
            .map_err(|e| io_err("create", e))?;
        let fh = s.open(meta.ino, rw).map_err(|e| io_err("open", e))?;
        s.write(fh, 0, &fill).map_err(|e| io_err("fill", e))?;
        fhs.push(fh);
    }
    s.checkpoint_all().map_err(|e| io_err("checkpoint", e))?;
    let before = s.stats();
    let mut gen = Generator::new(Workload {
        files,
        file_size,
        value: ValueSize::Random { max: 16384 },
        seed,
    });
    for _ in 0..txs {
        let tx = gen.next_tx();
        let (a, b) = gen.writes(&tx);
        let (fa, fb) = (fhs[a.file as usize], fhs[b.file as usize]);
        // Same calls as every other system: tx_begin, write, write, tx_commit.
        let t = s.tx_begin(&[fa, fb]).map_err(|e| io_err("tx_begin", e))?;
        s.write(fa, a.off, a.data).map_err(|e| io_err("write", e))?;
        s.write(fb, b.off, b.data).map_err(|e| io_err("write", e))?;
        s.tx_commit(t).map_err(|e| io_err("commit", e))?;
    }
    let after = s.stats();
    if stat(&after, "checkpoints") != stat(&before, "checkpoints") {
        return Err(io_err(
            "recovery image",
            "the pool checkpointed while the log was being filled (limits too small)",
        ));
    }
    let log_bytes = (stat(&after, "metadata_log_used") + stat(&after, "data_log_used")) * 64
        + stat(&after, "pending_versions") * pool::BLOCK_SIZE;
    drop(s); // the crash: no unmount, no checkpoint
    image.log_bytes = log_bytes;
    image.committed = txs;
    Ok(image)
}

/// Copy the image to a fresh file and time its recovery: `open` (FCFS: committed
/// transactions stay in the log, checkpointed lazily later), or `open` + checkpoint of
/// everything (FCFS-IR, the seed's instant-recovery variant).
fn time_recovery(image: &CrashedImage, instant: bool) -> Result<(f64, u64)> {
    let work = crate::scratch_path("recovery-work.pool");
    std::fs::copy(&image.path, &work).map_err(|e| BenchError::io("copy", &work, e))?;
    let result = (|| {
        let cfg = PoolConfig {
            checkpoint_threads: 0,
            ..recovery_config(image.committed)
        };
        let start = Instant::now();
        let region = MappedRegion::open(&work).map_err(|e| io_err("open pool", e))?;
        let s = PoolStore::open(Arc::new(region), &cfg).map_err(|e| io_err("recover", e))?;
        if instant {
            s.checkpoint_all().map_err(|e| io_err("checkpoint", e))?;
        }
        let secs = start.elapsed().as_secs_f64();
        let kept = s.last_recovery().redo_entries_kept;
        drop(s);
        Ok((secs, kept))
    })();
    let _ = std::fs::remove_file(&work);
    result
}

fn recovery_sizes(mode: Mode, notes: &mut Vec<String>) -> (u32, u64, Vec<u64>) {
    match mode {
        Mode::Tiny => (4, 64 << 10, vec![20, 80]),
        Mode::Quick => (64, 1 << 20, vec![1_000, 4_000, 16_000]),
        Mode::Full => {
            // The seed: 1–5 GB of log. Each tx leaves ~25 KB; the image, its working copy
            // and the pool's own file must fit in 60 % of available memory.
            let budget = crate::machine::memory_available().unwrap_or(8 << 30) as f64 * 0.6;
            let per_tx = 25_000.0 * 2.2;
            let fit = ((budget - 3.0 * (256u64 << 22) as f64) / per_tx).max(10_000.0) as u64;
            let wanted = [40_000u64, 80_000, 120_000, 160_000, 200_000];
            let txs: Vec<u64> = wanted.iter().copied().filter(|&t| t <= fit).collect();
            if txs.len() < wanted.len() {
                notes.push(format!(
                    "recovery: scaled down to at most {} transactions (~{:.1} GB of log) to fit \
                     in memory; the seed went to 5 GB",
                    txs.last().copied().unwrap_or(fit),
                    txs.last().copied().unwrap_or(fit) as f64 * 25_000.0 / 1e9
                ));
            }
            let txs = if txs.is_empty() { vec![fit] } else { txs };
            (256, 4 << 20, txs)
        }
    }
}

/// Fig. 11: recovery time vs log size, FCFS vs FCFS-IR, on crash images.
fn recovery(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<(Figure, FigureResult)> {
    let (files, file_size, tx_counts) = recovery_sizes(opts.mode, notes);
    let systems = [("fcfs", false), ("fcfs-ir", true)];
    let bar = crate::runner::simple_bar(
        "recovery",
        (tx_counts.len() * systems.len()) as u64 * (cfg.reps as u64 + 1),
        cfg.progress,
    );
    let mut res = FigureResult::default();
    for &txs in &tx_counts {
        bar.set_message(format!("building a crash image with {txs} committed txs"));
        let image = crashed_image(files, file_size, txs, opts.seed)?;
        let log_mb = (image.log_bytes as f64 / 1e6 * 10.0).round() / 10.0;
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
        let mut kept = 0;
        for rep in 0..=cfg.reps {
            for (i, &(name, instant)) in systems.iter().enumerate() {
                if crate::interrupted() {
                    return Err(BenchError::Interrupted);
                }
                bar.set_message(format!("{name} log {log_mb} MB run {rep}/{}", cfg.reps));
                let (secs, k) = time_recovery(&image, instant)?;
                kept = k;
                if rep > 0 {
                    runs[i].push(secs); // rep 0 is the warm-up
                }
                bar.inc(1);
            }
        }
        if kept == 0 {
            return Err(io_err(
                "recovery",
                "recovery found no committed data entries in the crash image",
            ));
        }
        notes.push(format!(
            "recovery: {txs} committed transactions left {log_mb} MB of log and pending blocks; \
             recovery kept {kept} redo entries"
        ));
        for (&(name, _), r) in systems.iter().zip(runs) {
            let n = r.len();
            res.rows.push(row(
                "recovery",
                name,
                Some(log_mb),
                Metric::RecoveryS,
                r,
                vec![txs; n],
            ));
        }
    }
    bar.finish_and_clear();
    res.systems.push((
        "fcfs".into(),
        format!(
            "crash image in {}: open = scan the log, rebuild the TLVI, allocators",
            crate::scratch_base().display()
        ),
        "atomic".into(),
    ));
    res.systems.push((
        "fcfs-ir".into(),
        "the same, then checkpoint every committed version before returning (seed's FCFS-IR)"
            .into(),
        "atomic".into(),
    ));
    let fig = Figure {
        id: "recovery".into(),
        title: "Fig. 11: recovery time vs log size (FCFS-Log + pending blocks)".into(),
        x_label: Some("log size (MB)".into()),
        reference: "fcfs".into(),
        metrics: vec![Metric::RecoveryS],
        points: Vec::new(),
        systems: Vec::new(),
    };
    Ok((fig, res))
}
