//! The Libnvmmio seed's evaluation (§4.2, Figs. 6–9) on the mmio engine: FIO-like jobs on one
//! file in IO units, one thread, every system an adapter over [`FileIo`]
//! (`systems/file_io.rs`, `systems/mmio.rs`, `systems/pool_file.rs`).
//!
//! The systems are set up once (one file each) and every figure's points run on them,
//! interleaved round-robin (one warm-up, then `reps` runs of every system per point, run r
//! of every system with the same seed), as runner.rs does for the two-file figures, with the
//! order rotated every repetition. A run
//! stops after `ops_max` operations, or at `run_time_max` once `ops_min` have run; writes
//! still unsynced at its end are synced and the system's logs drained (checkpointed home)
//! inside the timed part, so that a run pays for all the work its writes caused.
//!
//! In this suite a row's "tx" is one IO operation: `tx_per_s` is operations (reads or
//! writes, a sync counted with the write it follows) per second, `tx_latency_us` the mean
//! wall time of one.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{normalized_rows, row, Figure, FigureResult, Metric, Point, RunConfig};
use crate::systems::file_io::{FileIo, PwriteFile, PwriteMedium};
use crate::systems::mmio::{MmioMedium, MmioSystem};
use crate::systems::pool_file::PoolFile;
use crate::workload::{Rng, ValueSize, Workload};
use mmio::PolicyMode;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The suite's name in `suites::SUITES`.
pub const SUITE: &str = "mmio";

/// The IO unit (the seed's FIO jobs use 4 KB).
const IO_UNIT: u64 = 4096;
/// The seed's file (FIO on a 4 GB file).
const SEED_FILE_LEN: u64 = 4 << 30;
/// Memory copies of the file the systems keep at once: pwrite-tmpfs 1, three mmio files on
/// tmpfs 3, two files on the ext4 RAM disk 2 × 2 (image and page cache), fcfs 1.55.
const FILE_COPIES: f64 = 9.6;
/// Log pools (3 × 256 MB mmio on tmpfs, 1 × 256 MB mmio-ext4) and slack.
const FIXED_BYTES: u64 = 1536 << 20;
/// Hybrid figure: a sync after this many writes, so every epoch has the job's read:write mix.
const HYBRID_SYNC_WRITES: u32 = 10;
/// Environment variable naming the figures to run (comma list of ids; default: all).
pub const FIGURES_ENV: &str = "ATOMFS_BENCH_MMIO_FIGURES";
/// Operations between two looks at the clock.
const CLOCK_EVERY: u64 = 16;

/// One FIO-like job on the suite's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FioJob {
    pub file_len: u64,
    pub io_size: u64,
    pub random: bool,
    /// Percentage of operations that are writes (0: read-only, 100: write-only), spread
    /// evenly over the run.
    pub write_percent: u64,
    /// A sync after every this many writes.
    pub sync_every: u32,
    pub seed: u64,
}

/// One operation of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read { off: u64 },
    Write { off: u64, salt: u64 },
}

/// The deterministic operation stream of a [`FioJob`].
pub struct OpStream {
    job: FioJob,
    rng: Rng,
    index: u64,
    units: u64,
}

impl OpStream {
    pub fn new(job: FioJob) -> Self {
        OpStream {
            job,
            rng: Rng::new(job.seed ^ 0xF10),
            index: 0,
            units: (job.file_len / job.io_size).max(1),
        }
    }

    pub fn next_op(&mut self) -> Op {
        let i = self.index;
        self.index += 1;
        let unit = if self.job.random {
            self.rng.upto(self.units - 1)
        } else {
            i % self.units
        };
        let off = unit * self.job.io_size;
        let p = self.job.write_percent.min(100);
        if (i + 1) * p / 100 > i * p / 100 {
            Op::Write { off, salt: i }
        } else {
            Op::Read { off }
        }
    }
}

/// Bytes the writes of a job take their data from (a window moves with every write).
fn pattern(job: &FioJob) -> Vec<u8> {
    let mut rng = Rng::new(job.seed ^ 0xDA7A);
    (0..2 * job.io_size + 4096)
        .map(|_| rng.next_u64() as u8)
        .collect()
}

fn check_interrupt() -> Result<()> {
    if crate::interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Operations, and the wall time and process CPU time they took (syncs and the final drain
/// included).
pub struct Sample {
    pub ops: u64,
    pub elapsed: Duration,
    pub cpu: Duration,
}

/// CPU time of the whole process so far (every thread, user and system).
pub fn process_cpu() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct on success; it is read only then.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return Duration::ZERO;
    }
    // SAFETY: initialised by the successful call.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunLimits {
    pub ops_max: u64,
    pub ops_min: u64,
    pub run_time_max: Duration,
}

/// One measured run of `job` on `sys`.
pub fn run_job(sys: &mut dyn FileIo, job: FioJob, limits: RunLimits) -> Result<Sample> {
    let data = pattern(&job);
    let window = data.len() as u64 - job.io_size;
    let mut buf = vec![0u8; job.io_size as usize];
    let mut ops = OpStream::new(job);
    let (mut done, mut unsynced) = (0u64, 0u32);
    let cpu = process_cpu();
    let start = Instant::now();
    while done < limits.ops_max {
        match ops.next_op() {
            Op::Write { off, salt } => {
                let at = ((salt * 193) % (window + 1)) as usize;
                sys.write(off, &data[at..at + job.io_size as usize])?;
                unsynced += 1;
                if unsynced >= job.sync_every {
                    sys.sync()?;
                    unsynced = 0;
                }
            }
            Op::Read { off } => sys.read(off, &mut buf)?,
        }
        done += 1;
        if done % CLOCK_EVERY == 0 {
            check_interrupt()?;
            if done >= limits.ops_min && start.elapsed() >= limits.run_time_max {
                break;
            }
        }
    }
    if unsynced > 0 {
        sys.sync()?;
    }
    sys.drain()?;
    Ok(Sample {
        ops: done,
        elapsed: start.elapsed(),
        cpu: process_cpu().saturating_sub(cpu),
    })
}

// ---------------------------------------------------------------------------------------
// The systems and the interleaved runner

/// Every system of the suite, set up once on one file each.
struct Live {
    systems: Vec<Box<dyn FileIo>>,
    /// (name, medium, guarantee) for the JSON.
    described: Vec<(String, String, String)>,
    /// Kept until the systems on it are gone (field order: dropped after `systems`).
    _disk: Rc<Ext4Disk>,
}

impl Live {
    fn get(&mut self, name: &str) -> Result<&mut Box<dyn FileIo>> {
        self.systems
            .iter_mut()
            .find(|s| s.name() == name)
            .ok_or_else(|| BenchError::Invalid(format!("mmio suite: no system {name}")))
    }
}

fn set_up(file_len: u64, notes: &mut Vec<String>, progress: bool) -> Result<Live> {
    let disk = Rc::new(Ext4Disk::create(2 * file_len + file_len / 4 + (256 << 20))?);
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let mut systems: Vec<Box<dyn FileIo>> = vec![
        Box::new(PwriteFile::new(PwriteMedium::Tmpfs)),
        Box::new(PwriteFile::new(PwriteMedium::Ext4(disk.clone()))),
        Box::new(MmioSystem::new(PolicyMode::Hybrid, MmioMedium::Tmpfs)),
        Box::new(MmioSystem::new(PolicyMode::Undo, MmioMedium::Tmpfs)),
        Box::new(MmioSystem::new(PolicyMode::Redo, MmioMedium::Tmpfs)),
        Box::new(MmioSystem::new(
            PolicyMode::Hybrid,
            MmioMedium::Ext4(disk.clone()),
        )),
        Box::new(PoolFile::new()),
    ];
    let bar = crate::runner::simple_bar("mmio setup", systems.len() as u64, progress);
    let mut described = Vec::new();
    for s in systems.iter_mut() {
        check_interrupt()?;
        bar.set_message(s.name());
        s.setup(file_len).map_err(|e| BenchError::System {
            system: s.name(),
            message: format!("setup: {e}"),
        })?;
        described.push((s.name(), s.medium(), s.guarantee().to_string()));
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(Live {
        systems,
        described,
        _disk: disk,
    })
}

/// One figure of the suite: its systems and points (x value, job).
struct FigSpec {
    id: &'static str,
    title: String,
    x_label: Option<&'static str>,
    reference: &'static str,
    systems: Vec<&'static str>,
    points: Vec<(Option<f64>, FioJob)>,
    /// Derive a `best` series from these two systems (run by run) and make it the reference.
    best_of: Option<(&'static str, &'static str)>,
}

/// Name of the derived series of the hybrid figure.
pub const BEST_OF_UNDO_REDO: &str = "best(undo,redo)";

/// IO operations per "transaction" of the run configuration: one op is much less work than
/// the two-file update the other suites count.
const OPS_PER_TX: u64 = 2;
/// Runs last at most `run_time_max` divided by this: the suite has ~70 (quick) to ~100 (full)
/// points × systems, and must stay under 2 minutes in `--quick`.
const RUN_TIME_DIVISOR: u32 = 2;

fn limits(cfg: &RunConfig) -> RunLimits {
    RunLimits {
        ops_max: cfg.txs_per_run * OPS_PER_TX,
        ops_min: cfg.txs_min * OPS_PER_TX,
        run_time_max: cfg.run_time_max / RUN_TIME_DIVISOR,
    }
}

/// Run every point of `spec` on the live systems, interleaved.
fn run_spec(spec: &FigSpec, live: &mut Live, cfg: &RunConfig) -> Result<(Figure, FigureResult)> {
    let lim = limits(cfg);
    let steps = (spec.points.len() * spec.systems.len()) as u64 * (cfg.reps as u64 + 1);
    let bar = crate::runner::simple_bar(spec.id, steps, cfg.progress);
    let mut res = FigureResult::default();
    for &(param, job) in &spec.points {
        let mut runs: Vec<Runs> = (0..spec.systems.len()).map(|_| Runs::default()).collect();
        for rep in 0..=cfg.reps {
            // Rotate the order every repetition, so that no system always runs right after
            // the same other one (caches, the previous system's last page frees).
            let n = spec.systems.len();
            for i in (0..n).map(|k| (k + rep as usize) % n) {
                let name = &spec.systems[i];
                bar.set_message(format!("{name} run {rep}/{}", cfg.reps));
                let sys = live.get(name)?;
                let (job, lim) = if rep == 0 {
                    // Warm-up (page faults of logs, caches), not recorded.
                    let w = FioJob {
                        seed: job.seed ^ 0x5741_524D,
                        ..job
                    };
                    let l = RunLimits {
                        ops_max: (lim.ops_max / 10).max(lim.ops_min),
                        ..lim
                    };
                    (w, l)
                } else {
                    let seed = job.seed.wrapping_add(rep as u64 - 1);
                    (FioJob { seed, ..job }, lim)
                };
                let s = run_job(sys.as_mut(), job, lim).map_err(|e| BenchError::System {
                    system: name.to_string(),
                    message: format!("{}: {e}", spec.id),
                })?;
                if rep > 0 {
                    runs[i]
                        .per_s
                        .push(s.ops as f64 / s.elapsed.as_secs_f64().max(1e-12));
                    runs[i]
                        .cpu_us
                        .push(s.cpu.as_secs_f64() * 1e6 / s.ops.max(1) as f64);
                    runs[i].ops.push(s.ops);
                }
                bar.inc(1);
            }
        }
        push_rows(spec, param, runs, &mut res);
    }
    bar.finish_and_clear();
    let norm = normalized_rows(&res.rows, Metric::TxPerS, spec.reference);
    res.rows.extend(norm);
    res.systems = live
        .described
        .iter()
        .filter(|(n, _, _)| spec.systems.contains(&n.as_str()))
        .cloned()
        .collect();
    if spec.best_of.is_some() {
        res.systems.push((
            BEST_OF_UNDO_REDO.into(),
            "derived: run by run, the faster of mmio-undo and mmio-redo".into(),
            "-".into(),
        ));
    }
    Ok((figure_of(spec), res))
}

/// The measured runs of one system at one point.
#[derive(Clone, Default)]
struct Runs {
    per_s: Vec<f64>,
    cpu_us: Vec<f64>,
    ops: Vec<u64>,
}

/// Run by run, the faster of two systems' runs (the hybrid figure's reference).
fn best_of(a: &Runs, b: &Runs) -> Runs {
    let pick: Vec<bool> = a.per_s.iter().zip(&b.per_s).map(|(x, y)| x >= y).collect();
    let choose = |i: usize, p: bool| if p { (a, i) } else { (b, i) };
    let mut out = Runs::default();
    for (i, &p) in pick.iter().enumerate() {
        let (r, i) = choose(i, p);
        out.per_s.push(r.per_s[i]);
        out.cpu_us.push(r.cpu_us[i]);
        out.ops.push(r.ops[i]);
    }
    out
}

/// Rows of one point: ops per second, mean latency and CPU time per op of every system (and
/// the derived best-of series, when the figure has one).
fn push_rows(spec: &FigSpec, param: Option<f64>, runs: Vec<Runs>, res: &mut FigureResult) {
    let mut series: Vec<(String, Runs)> = spec
        .systems
        .iter()
        .map(|n| n.to_string())
        .zip(runs)
        .collect();
    if let Some((a, b)) = spec.best_of {
        let find = |n: &str| series.iter().find(|s| s.0 == n).map(|s| s.1.clone());
        if let (Some(ra), Some(rb)) = (find(a), find(b)) {
            series.push((BEST_OF_UNDO_REDO.into(), best_of(&ra, &rb)));
        }
    }
    for (name, r) in series {
        let latency: Vec<f64> = r.per_s.iter().map(|v| 1e6 / v.max(1e-12)).collect();
        let id = spec.id;
        res.rows.push(row(
            id,
            &name,
            param,
            Metric::TxPerS,
            r.per_s,
            r.ops.clone(),
        ));
        res.rows.push(row(
            id,
            &name,
            param,
            Metric::TxLatencyUs,
            latency,
            r.ops.clone(),
        ));
        res.rows
            .push(row(id, &name, param, Metric::CpuUsPerTx, r.cpu_us, r.ops));
    }
}

/// The runner's [`Figure`] of a spec (for the JSON config, the table and the plots).
fn figure_of(spec: &FigSpec) -> Figure {
    Figure {
        id: spec.id.into(),
        title: spec.title.clone(),
        x_label: spec.x_label.map(str::to_string),
        reference: spec.reference.into(),
        metrics: vec![
            Metric::TxPerS,
            Metric::TxPerSNorm,
            Metric::TxLatencyUs,
            Metric::CpuUsPerTx,
        ],
        points: spec
            .points
            .iter()
            .map(|&(param, job)| Point {
                param,
                workload: Workload {
                    files: 1,
                    file_size: job.file_len,
                    value: ValueSize::Fixed(job.io_size),
                    seed: job.seed,
                },
                idle_fraction: 0.0,
            })
            .collect(),
        systems: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------
// The figures

/// The file length of a mode: the seed's 4 GB in `--full` where memory allows.
fn file_len(mode: Mode, notes: &mut Vec<String>) -> u64 {
    match mode {
        Mode::Tiny => 1 << 20,
        Mode::Quick => 256 << 20,
        Mode::Full => {
            let avail = crate::machine::memory_available().unwrap_or(8 << 30) as f64;
            let budget = (avail * 0.6 - FIXED_BYTES as f64).max(0.0);
            let fit = ((budget / FILE_COPIES) as u64 / (256 << 20) * (256 << 20)).max(256 << 20);
            if fit < SEED_FILE_LEN {
                notes.push(format!(
                    "mmio: scaled down to a {} MB file instead of the seed's 4 GB (the \
                     suite's systems keep {FILE_COPIES} copies of the file at once; budget \
                     60% of available memory = {:.1} GB)",
                    fit >> 20,
                    avail * 0.6 / 1e9
                ));
                fit
            } else {
                SEED_FILE_LEN
            }
        }
    }
}

/// The figures' x values per mode: write sizes, fsync intervals, write percentages.
fn sweeps(mode: Mode) -> (Vec<u64>, Vec<u32>, Vec<u64>) {
    match mode {
        Mode::Tiny => (vec![128, 4096], vec![1, 10], vec![20, 80]),
        Mode::Quick => (
            vec![128, 4096, 65536],
            vec![1, 10, 100],
            vec![10, 30, 50, 70, 90],
        ),
        Mode::Full => (
            vec![128, 256, 1024, 4096, 16384, 65536],
            vec![1, 2, 5, 10, 20, 50, 100],
            vec![10, 20, 30, 40, 50, 60, 70, 80, 90],
        ),
    }
}

const KERNEL_AND_ENGINES: [&str; 4] = ["pwrite-tmpfs", "pwrite-ext4", "mmio", "fcfs"];

fn specs(mode: Mode, file_len: u64, seed: u64) -> Vec<FigSpec> {
    let job = FioJob {
        file_len,
        io_size: IO_UNIT,
        random: false,
        write_percent: 0,
        sync_every: 1,
        seed,
    };
    let mut out = Vec::new();
    for (id, random, write_percent, what) in [
        ("fio-seq-read", false, 0, "sequential read"),
        ("fio-rand-read", true, 0, "random read"),
        (
            "fio-seq-write",
            false,
            100,
            "sequential write, fsync after each",
        ),
        (
            "fio-rand-write",
            true,
            100,
            "random write, fsync after each",
        ),
    ] {
        out.push(FigSpec {
            id,
            title: format!("Fig. 7: FIO {what}, 4 KB units, 1 thread"),
            x_label: None,
            reference: "pwrite-tmpfs",
            systems: vec![
                "pwrite-tmpfs",
                "pwrite-ext4",
                "mmio",
                "mmio-undo",
                "mmio-redo",
                "mmio-ext4",
                "fcfs",
            ],
            points: vec![(
                None,
                FioJob {
                    random,
                    write_percent,
                    ..job
                },
            )],
            best_of: None,
        });
    }
    let (sizes, intervals, mixes) = sweeps(mode);
    let sizes = sizes.into_iter().filter(|&n| n <= file_len);
    out.push(FigSpec {
        id: "write-size",
        title: "Fig. 8: FIO sequential write, fsync after each, by write size".into(),
        x_label: Some("write size (bytes)"),
        reference: "pwrite-tmpfs",
        systems: KERNEL_AND_ENGINES.to_vec(),
        points: sizes
            .map(|n| {
                let w = FioJob {
                    io_size: n,
                    write_percent: 100,
                    ..job
                };
                (Some(n as f64), w)
            })
            .collect(),
        best_of: None,
    });
    out.push(FigSpec {
        id: "fsync-interval",
        title: "Fig. 9: FIO sequential 4 KB write, fsync after every n writes".into(),
        x_label: Some("fsync interval (writes)"),
        reference: "pwrite-tmpfs",
        systems: KERNEL_AND_ENGINES.to_vec(),
        points: intervals
            .into_iter()
            .map(|n| {
                let w = FioJob {
                    write_percent: 100,
                    sync_every: n,
                    ..job
                };
                (Some(n as f64), w)
            })
            .collect(),
        best_of: None,
    });
    out.push(FigSpec {
        id: "hybrid",
        title: format!(
            "Fig. 6: logging policies by read:write mix, random 4 KB, fsync after every \
             {HYBRID_SYNC_WRITES} writes"
        ),
        x_label: Some("writes (% of operations)"),
        reference: BEST_OF_UNDO_REDO,
        systems: vec!["mmio-undo", "mmio-redo", "mmio"],
        points: mixes
            .into_iter()
            .map(|p| {
                let w = FioJob {
                    random: true,
                    write_percent: p,
                    sync_every: HYBRID_SYNC_WRITES,
                    ..job
                };
                (Some(p as f64), w)
            })
            .collect(),
        best_of: Some(("mmio-undo", "mmio-redo")),
    });
    out
}

/// Run the suite: set the systems up, run every figure on them.
pub fn run(
    opts: &Options,
    cfg: &RunConfig,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let len = file_len(opts.mode, notes);
    let lim = limits(cfg);
    notes.push(format!(
        "mmio: one {} MB file per system; a run is at most {} IO operations ({OPS_PER_TX} × \
         txs_per_run), or {:.3} s (run_time_max_s / {RUN_TIME_DIVISOR}) once {} have run; one \
         op (\"tx\") = one read or one \
         write (with its fsync); syncing what is left and checkpointing the logs home are part \
         of every run; cpu_us_per_tx = CPU time of the whole process (background threads \
         included, the kernel's own threads such as jbd2 and the loop device not) per op",
        len >> 20,
        lim.ops_max,
        lim.run_time_max.as_secs_f64(),
        lim.ops_min
    ));
    let only = std::env::var(FIGURES_ENV).ok();
    let chosen: Vec<FigSpec> = specs(opts.mode, len, opts.seed)
        .into_iter()
        .filter(|f| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|x| x == f.id))
        })
        .collect();
    if let Some(o) = &only {
        if chosen.is_empty() {
            return Err(BenchError::Invalid(format!(
                "{FIGURES_ENV}={o}: no such figure"
            )));
        }
        notes.push(format!("mmio: only the figures {o} ({FIGURES_ENV})"));
    }
    let mut live = set_up(len, notes, opts.progress)?;
    let mut out = Vec::new();
    for spec in chosen {
        out.push(run_spec(&spec, &mut live, cfg)?);
    }
    Ok(out)
}
