//! `atomfs demo`: the seed's atomic two-file update on an engine (`--engine`, through the
//! registry), timed against the same workload without atomicity (the engine's no-consistency
//! mode, else plain files with fsync on the home file system), then crashed with SIGKILL in a
//! child process, recovered and verified.

mod choice;
mod plain;

use crate::size::human;
use crate::workload::{writer_at, Model, Workload};
use crate::{CmdResult, Failure};
use atomfs::Fs;
use choice::{Baseline, EngineChoice};
use indicatif::{ProgressBar, ProgressStyle};
use plain::PlainFiles;
use rand::Rng;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Engine and mode: pool (FCFS), pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync,
    /// mmio (hybrid), mmio-undo, mmio-redo.
    #[arg(long, default_value = "pool")]
    pub engine: String,
    /// Home directory of the files, for an engine that keeps them on a host file system
    /// (mmio): must not exist yet (the demo creates it, and removes it afterwards unless
    /// --keep). Default: a fresh directory beside the pool. The plain-files baseline runs
    /// beside it, on the same file system.
    #[arg(long)]
    pub home: Option<PathBuf>,
    /// Number of files.
    #[arg(long, default_value_t = 64)]
    pub files: u32,
    /// Size of each file (K, M, G suffixes).
    #[arg(long, default_value = "1M")]
    pub file_size: String,
    /// Seconds of each timed run (the engine, then the baseline); the crash run lasts about as
    /// long.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Directory for the pool files (default /dev/shm, else the temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the workload (random when not given).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep the pool files afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Number of SIGKILL + recovery + verification rounds (the crash run is split among them).
    #[arg(long, default_value_t = 1)]
    pub crashes: u32,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ChildArgs {
    #[arg(long)]
    engine: String,
    #[arg(long)]
    pool: PathBuf,
    #[arg(long)]
    files: u32,
    #[arg(long)]
    file_size: u64,
    #[arg(long)]
    seed: u64,
    /// First transaction number to run.
    #[arg(long)]
    start: u64,
}

/// What one timed run measured.
struct RunStats {
    txs: u64,
    elapsed: Duration,
    nvmm_bytes: Option<u64>,
    /// Bytes the transactions asked to write (both ranges of each).
    payload_bytes: u64,
}

impl RunStats {
    fn mean_latency(&self) -> Duration {
        self.elapsed / self.txs.max(1) as u32
    }
    fn bytes_per_tx(&self) -> Option<u64> {
        self.nvmm_bytes.map(|b| b / self.txs.max(1))
    }
}

fn bar(seconds: f64, prefix: &str) -> ProgressBar {
    let pb = ProgressBar::new((seconds * 1000.0) as u64);
    let style = ProgressStyle::with_template("{prefix:>22} [{bar:30.cyan/blue}] {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix(prefix.to_string());
    pb
}

/// A transaction runner: runs transaction `txn` (`buf` is scratch space).
type RunTx<'a> = dyn FnMut(u64, &mut Vec<u8>) -> Result<(), Failure> + 'a;

/// Run transactions 1.. through `tx` for `seconds`, with a progress bar; `nvmm` reads the
/// engine's counter of bytes written to NVMM, when it has one.
fn timed_run(
    work: &Workload,
    seconds: f64,
    label: &str,
    tx: &mut RunTx<'_>,
    nvmm: &dyn Fn() -> Option<u64>,
) -> Result<RunStats, Failure> {
    let pb = bar(seconds, label);
    let before = nvmm();
    let deadline = Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut buf = Vec::with_capacity(crate::workload::WRITE_MAX as usize);
    let mut txs = 0u64;
    let mut payload_bytes = 0u64;
    loop {
        tx(1 + txs, &mut buf)?;
        payload_bytes += work.writes(1 + txs).iter().map(|w| w.len).sum::<u64>();
        txs += 1;
        if txs.is_multiple_of(64) {
            let elapsed = started.elapsed();
            if elapsed >= deadline {
                break;
            }
            pb.set_position(elapsed.as_millis() as u64);
            pb.set_message(format!(
                "{txs} transactions, {:.1} µs each",
                elapsed.as_secs_f64() * 1e6 / txs as f64
            ));
        }
    }
    let elapsed = started.elapsed();
    let after = nvmm();
    pb.finish_with_message(format!(
        "{txs} transactions, {:.1} µs each",
        elapsed.as_secs_f64() * 1e6 / txs as f64
    ));
    Ok(RunStats {
        txs,
        elapsed,
        nvmm_bytes: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
        payload_bytes,
    })
}

/// [`timed_run`] on a file system: its files, its transactions, its NVMM counter.
fn timed_store(fs: &Fs, work: &Workload, seconds: f64, label: &str) -> Result<RunStats, Failure> {
    let files = work.open_files(fs)?;
    let mut tx = |txn: u64, buf: &mut Vec<u8>| -> Result<(), Failure> {
        Ok(work.run_tx(fs, &files, txn, buf)?)
    };
    let nvmm = || crate::poolview::nvmm_bytes(&**fs.store());
    timed_run(work, seconds, label, &mut tx, &nvmm)
}

fn demo_dir(arg: &Option<PathBuf>) -> PathBuf {
    match arg {
        Some(d) => d.clone(),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    }
}

/// Pool size for a workload: the files, room for pending versions, and slack.
fn pool_size(work: &Workload) -> u64 {
    (work.files as u64 * work.file_size * 2 + (64 << 20)).next_multiple_of(1 << 20)
}

/// Whether the transaction in flight at the kill turned out committed or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Absent,
    Present,
}

/// The outcome of the crash rounds.
struct CrashOutcome {
    rounds: u32,
    acked: u64,
    in_flight_present: u32,
    killed_after: Duration,
    recovery_total: Duration,
    recovery_max: Duration,
    recovery_report: Option<serde_json::Value>,
    verdict: Result<String, String>,
    fsck_clean: bool,
}

pub fn run(args: DemoArgs) -> CmdResult {
    let file_size = crate::size::parse_size(&args.file_size).map_err(Failure::new)?;
    if args.files < 2
        || file_size < 4096
        || !(0.1..=600.0).contains(&args.seconds)
        || args.crashes == 0
        || args.crashes > 10_000
    {
        return Err(Failure::new(
            "need --files ≥ 2, --file-size ≥ 4K, --seconds between 0.1 and 600 and --crashes between 1 and 10000",
        ));
    }
    let engine = EngineChoice::parse(&args.engine)?;
    let seed = args.seed.unwrap_or_else(|| rand::thread_rng().gen());
    let work = Workload {
        files: args.files,
        file_size,
        seed,
    };
    let places = Places::new(&args, &engine);
    println!(
        "atomfs demo on {}: {} files of {}; each transaction writes a random 0–16 KiB range in two of them (seed {seed})",
        engine.label(),
        work.files,
        human(file_size)
    );
    println!(
        "pools in {} ({}){}\n",
        places.pool.parent().unwrap_or(Path::new(".")).display(),
        human(pool_size(&work)),
        places
            .home
            .as_ref()
            .map(|h| format!(", files in {}", h.display()))
            .unwrap_or_default()
    );
    let result = places
        .make_home()
        .and_then(|()| demo_phases(&args, &work, &engine, &places));
    if args.keep {
        println!("kept: {}", places.describe());
    } else {
        places.remove();
    }
    let (atomic, baseline, crash) = result?;
    let labels = Labels::new(&engine);
    print_table(&work, &labels, &atomic, &baseline, &crash);
    Ok(if crash.verdict.is_ok() && crash.fsck_clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Where the demo's stores live. The demo removes only what it created itself (recorded in
/// `made`): never a file or directory that was there before.
struct Places {
    /// The engine's pool file.
    pool: PathBuf,
    /// The no-consistency baseline's pool file.
    nc_pool: PathBuf,
    /// The engine's home directory, for an engine that keeps its files on a host file system.
    home: Option<PathBuf>,
    /// The plain-files baseline's directory (beside the home directory).
    plain: PathBuf,
    /// What the demo created, in order.
    made: std::cell::RefCell<Vec<PathBuf>>,
}

impl Places {
    fn new(args: &DemoArgs, engine: &EngineChoice) -> Self {
        let dir = demo_dir(&args.dir);
        let name = format!("atomfs-demo-{}", std::process::id());
        let home = engine.needs_home().then(|| {
            args.home
                .clone()
                .unwrap_or_else(|| dir.join(format!("{name}-home")))
        });
        let plain = match home.as_ref().and_then(|h| h.parent()) {
            Some(parent) if !parent.as_os_str().is_empty() => parent.join(format!("{name}-plain")),
            _ => dir.join(format!("{name}-plain")),
        };
        Places {
            pool: dir.join(format!("{name}.pool")),
            nc_pool: dir.join(format!("{name}-nc.pool")),
            home,
            plain,
            made: Default::default(),
        }
    }

    /// Record that the demo created `path` (so that [`Places::remove`] may remove it).
    fn made(&self, path: &Path) {
        self.made.borrow_mut().push(path.to_path_buf());
    }

    /// Create the home directory, which must not exist.
    fn make_home(&self) -> Result<(), Failure> {
        let Some(home) = &self.home else {
            return Ok(());
        };
        match std::fs::create_dir(home) {
            Ok(()) => {
                self.made(home);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Failure::new(format!(
                "--home {} exists: name a directory that does not exist yet (the demo creates it, and removes it afterwards unless --keep)",
                home.display()
            ))),
            Err(e) => Err(Failure::new(format!("--home {}: {e}", home.display()))),
        }
    }

    fn describe(&self) -> String {
        match &self.home {
            Some(home) => format!("{} (files in {})", self.pool.display(), home.display()),
            None => self.pool.display().to_string(),
        }
    }

    /// Remove what the demo created and has not removed yet, newest first.
    fn remove(&self) {
        for path in self.made.borrow_mut().drain(..).rev() {
            remove_made(&path);
        }
    }

    /// Remove `path`, which the demo created, now (and forget it).
    fn remove_now(&self, path: &Path) {
        self.made.borrow_mut().retain(|p| p != path);
        remove_made(path);
    }
}

/// Remove a file or directory tree the demo created (never following a symlink).
fn remove_made(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// 1. The engine, timed; 2. the baseline, timed; 3. the crash rounds on the engine's store.
fn demo_phases(
    args: &DemoArgs,
    work: &Workload,
    engine: &EngineChoice,
    places: &Places,
) -> Result<(RunStats, RunStats, CrashOutcome), Failure> {
    let size = pool_size(work);
    let config = engine.create_config(size, places.home.as_deref());
    let fs = Fs::create(&places.pool, config)?;
    places.made(&places.pool);
    work.create_files(&fs)?;
    let label = format!("{} (atomic)", engine.label());
    let atomic = timed_store(&fs, work, args.seconds, &label)?;
    fs.unmount()?;
    drop(fs);
    let baseline = match engine.baseline() {
        Baseline::NoConsistency(key) => {
            let nc_fs = Fs::create(&places.nc_pool, engine.no_consistency_config(key, size))?;
            places.made(&places.nc_pool);
            work.create_files(&nc_fs)?;
            let nc = timed_store(&nc_fs, work, args.seconds, NC_LABEL)?;
            nc_fs.unmount()?;
            drop(nc_fs);
            places.remove_now(&places.nc_pool);
            nc
        }
        Baseline::PlainFiles => {
            let plain = PlainFiles::create(&places.plain, work, &|dir| places.made(dir))?;
            let mut tx = |txn: u64, buf: &mut Vec<u8>| -> Result<(), Failure> {
                Ok(plain.run_tx(work, txn, buf)?)
            };
            let stats = timed_run(work, args.seconds, PLAIN_LABEL, &mut tx, &|| None)?;
            drop(plain);
            places.remove_now(&places.plain);
            stats
        }
    };
    let crash = crash_rounds(args, work, engine, &places.pool, atomic.txs)?;
    Ok((atomic, baseline, crash))
}

const NC_LABEL: &str = "NC (no consistency)";
const PLAIN_LABEL: &str = "plain files + fsync";

/// The column headers of the table and the names in its ratio line.
struct Labels {
    atomic: String,
    baseline: &'static str,
    ratio: String,
}

impl Labels {
    fn new(engine: &EngineChoice) -> Self {
        let (baseline, short) = match engine.baseline() {
            Baseline::NoConsistency(_) => (NC_LABEL, "NC"),
            Baseline::PlainFiles => (PLAIN_LABEL, "plain+fsync"),
        };
        Labels {
            atomic: format!("{} (atomic)", engine.label()),
            baseline,
            ratio: format!("cost of atomicity (vs {short})"),
        }
    }
}

/// Run the crash rounds: each continues the workload in a child, kills it, recovers the pool
/// and verifies it against the model, which advances with the run.
fn crash_rounds(
    args: &DemoArgs,
    work: &Workload,
    engine: &EngineChoice,
    pool: &Path,
    done: u64,
) -> Result<CrashOutcome, Failure> {
    let mut model = Model::new(*work);
    let mut next_txn = done + 1;
    let mut out = CrashOutcome {
        rounds: 0,
        acked: 0,
        in_flight_present: 0,
        killed_after: Duration::ZERO,
        recovery_total: Duration::ZERO,
        recovery_max: Duration::ZERO,
        recovery_report: None,
        verdict: Ok(String::new()),
        fsck_clean: true,
    };
    let round_seconds = args.seconds / args.crashes as f64;
    let label = if args.crashes == 1 {
        "crash run (child)".to_string()
    } else {
        format!("{} crash rounds", args.crashes)
    };
    let pb = bar(args.seconds, &label);
    for round in 0..args.crashes {
        let (last_ack, killed_after) = kill_round(work, engine, pool, next_txn, round_seconds)?;
        out.rounds += 1;
        out.acked += last_ack + 1 - next_txn;
        out.killed_after += killed_after;
        let started = Instant::now();
        let fs = Fs::open(pool, engine.open_config())
            .map_err(|e| crate::engine::open_failure(pool, e))?;
        let recovery = started.elapsed();
        out.recovery_total += recovery;
        out.recovery_max = out.recovery_max.max(recovery);
        out.recovery_report = crate::poolview::pool_recovery(&**fs.store());
        let verdict = verify(&fs, &mut model, last_ack);
        out.fsck_clean &= fs.fsck()?.is_clean();
        fs.unmount()?;
        drop(fs);
        match verdict {
            Ok((InFlight::Present, what)) => {
                out.in_flight_present += 1;
                model.step();
                next_txn = last_ack + 2;
                out.verdict = Ok(what);
            }
            Ok((InFlight::Absent, what)) => {
                next_txn = last_ack + 1;
                out.verdict = Ok(what);
            }
            Err(why) => {
                out.verdict = Err(format!("round {}: {why}", round + 1));
                break;
            }
        }
        if !out.fsck_clean {
            break;
        }
        pb.set_position((out.killed_after.as_secs_f64() * 1000.0) as u64);
        pb.set_message(format!(
            "{} rounds, {} transactions acknowledged",
            out.rounds, out.acked
        ));
    }
    pb.finish_with_message(format!(
        "{} × SIGKILL, {} transactions acknowledged",
        out.rounds, out.acked
    ));
    Ok(out)
}

/// One round: a child runs transactions from `start` on, acknowledging each on a pipe, and is
/// SIGKILLed after a random part of `seconds`. Returns the last acknowledged transaction
/// (`start - 1` when none) and when the kill came.
fn kill_round(
    work: &Workload,
    engine: &EngineChoice,
    pool: &Path,
    start: u64,
    seconds: f64,
) -> Result<(u64, Duration), Failure> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("demo-child")
        .args(["--engine", &engine.label()])
        .arg("--pool")
        .arg(pool)
        .args([
            "--files",
            &work.files.to_string(),
            "--file-size",
            &work.file_size.to_string(),
        ])
        .args([
            "--seed",
            &work.seed.to_string(),
            "--start",
            &start.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| Failure::new("no pipe from the child"))?;
    let reader = std::thread::spawn(move || {
        // Acknowledgements: the child writes each committed transaction number, 8 bytes LE.
        let mut last = None;
        let mut word = [0u8; 8];
        while out.read_exact(&mut word).is_ok() {
            last = Some(u64::from_le_bytes(word));
        }
        last
    });
    let kill_at = Duration::from_secs_f64(seconds * rand::thread_rng().gen_range(0.5..1.0));
    let started = Instant::now();
    while started.elapsed() < kill_at {
        std::thread::sleep(Duration::from_millis(5).min(kill_at.saturating_sub(started.elapsed())));
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(Failure::new(format!(
                "the demo child exited early ({status}): {}",
                err.trim()
            )));
        }
    }
    child.kill()?; // SIGKILL
    let killed_after = started.elapsed();
    let _ = child.wait()?;
    let last = reader
        .join()
        .map_err(|_| Failure::new("ack reader panicked"))?;
    Ok((last.unwrap_or(start - 1), killed_after))
}

/// Check that the files hold exactly the effects of transactions 1..=acked, or of
/// 1..=acked+1 (the transaction in flight may have committed before its acknowledgement was
/// sent), and never part of one.
fn verify(fs: &Fs, model: &mut Model, acked: u64) -> Result<(InFlight, String), String> {
    let work = model.work;
    model.advance_to(acked);
    let mut next = model.clone();
    next.step();
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for i in 0..work.files {
        let data = fs
            .read(Workload::path(i))
            .map_err(|e| format!("reading {}: {e}", Workload::path(i)))?;
        let (old, new) = (&model.files[i as usize], &next.files[i as usize]);
        if &data == old {
            if old != new {
                absent.push(i);
            }
            continue;
        }
        if &data == new {
            present.push(i);
            continue;
        }
        let at = data
            .iter()
            .zip(old)
            .position(|(a, b)| a != b)
            .unwrap_or(data.len().min(old.len()));
        let writer = writer_at(&data, at)
            .map(|t| format!("transaction {t}"))
            .unwrap_or_else(|| "no transaction".into());
        return Err(format!(
            "{}: byte {at} differs from the expected state (it holds the stamp of {writer}; {} bytes, expected {})",
            Workload::path(i),
            data.len(),
            old.len()
        ));
    }
    match (present.is_empty(), absent.is_empty()) {
        (true, _) => Ok((InFlight::Absent, format!("transaction {} (in flight) is fully absent", acked + 1))),
        (false, true) => Ok((
            InFlight::Present,
            format!("transaction {} (in flight) is fully present: it committed just before the kill", acked + 1),
        )),
        (false, false) => Err(format!(
            "transaction {} is torn: its writes are present in files {present:?} but absent from {absent:?}",
            acked + 1
        )),
    }
}

fn micros(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

fn print_table(
    work: &Workload,
    labels: &Labels,
    fcfs: &RunStats,
    nc: &RunStats,
    crash: &CrashOutcome,
) {
    let per_tx = |r: &RunStats| r.bytes_per_tx().map(human).unwrap_or_else(|| "n/a".into());
    println!();
    println!();
    println!("{:<34} {:>22} {:>22}", "", labels.atomic, labels.baseline);
    println!("{:<34} {:>22} {:>22}", "transactions", fcfs.txs, nc.txs);
    println!(
        "{:<34} {:>22} {:>22}",
        "mean latency per transaction",
        micros(fcfs.mean_latency()),
        micros(nc.mean_latency())
    );
    println!(
        "{:<34} {:>22} {:>22}",
        "payload bytes per transaction",
        human(fcfs.payload_bytes / fcfs.txs.max(1)),
        human(nc.payload_bytes / nc.txs.max(1))
    );
    println!(
        "{:<34} {:>22} {:>22}",
        "NVMM bytes written per transaction",
        per_tx(fcfs),
        per_tx(nc)
    );
    let overhead = fcfs.mean_latency().as_secs_f64() / nc.mean_latency().as_secs_f64().max(1e-12);
    println!("{:<34} {:>22}", labels.ratio, format!("{overhead:.2}x"));
    println!();
    let rounds = crash.rounds.max(1);
    let kills = if rounds == 1 {
        format!("SIGKILL after {:.2} s", crash.killed_after.as_secs_f64())
    } else {
        format!("{rounds} × SIGKILL")
    };
    println!("{:<34} {:>16}", "crash", kills);
    println!("{:<34} {:>16}", "transactions acknowledged", crash.acked);
    let recovery = if rounds == 1 {
        micros(crash.recovery_total)
    } else {
        format!(
            "{} mean, {} max",
            micros(crash.recovery_total / rounds),
            micros(crash.recovery_max)
        )
    };
    println!("{:<34} {:>16}", "recovery time (open + recover)", recovery);
    let detail = crash
        .recovery_report
        .as_ref()
        .map(crate::poolview::recovery_summary)
        .unwrap_or_default();
    if !detail.is_empty() {
        println!("  {}{detail}", if rounds > 1 { "last round: " } else { "" });
    }
    println!(
        "{:<34} {:>16}",
        "fsck after recovery",
        if crash.fsck_clean {
            "clean"
        } else {
            "PROBLEMS"
        }
    );
    println!();
    let files = work.files;
    match (&crash.verdict, crash.fsck_clean) {
        (Ok(what), true) if rounds == 1 => println!(
            "PASS: all {} acknowledged transactions survived the crash intact in all {files} files, and {what} — no update was torn.",
            crash.acked
        ),
        (Ok(_), true) => println!(
            "PASS: {rounds} crashes, and after each recovery all acknowledged transactions ({} in total) were intact in all {files} files and the one in flight was wholly there ({} times) or wholly gone ({} times) — no update was torn.",
            crash.acked,
            crash.in_flight_present,
            rounds - crash.in_flight_present
        ),
        (Ok(_), false) => println!("FAIL: the data is right but fsck found problems in the recovered pool."),
        (Err(why), _) => println!("FAIL: {why}"),
    }
}

/// The crash victim: run transactions from `start` on, acknowledging each on stdout, until
/// killed.
pub fn child(args: ChildArgs) -> CmdResult {
    let work = Workload {
        files: args.files,
        file_size: args.file_size,
        seed: args.seed,
    };
    let config = EngineChoice::parse(&args.engine)?.open_config();
    let fs =
        Fs::open(&args.pool, config).map_err(|e| crate::engine::open_failure(&args.pool, e))?;
    let files = work.open_files(&fs)?;
    let mut buf = Vec::new();
    let mut out = std::io::stdout().lock();
    for txn in args.start.. {
        work.run_tx(&fs, &files, txn, &mut buf)?;
        // The commit returned: the transaction is durable. Acknowledge it.
        out.write_all(&txn.to_le_bytes())?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fill_stamp;

    fn setup(txs: u64) -> (Fs, Workload) {
        let fs = Fs::owning(crate::workload::dram_pool(16 << 20));
        let work = Workload {
            files: 4,
            file_size: 32 << 10,
            seed: 99,
        };
        work.create_files(&fs).expect("create");
        let files = work.open_files(&fs).expect("open");
        let mut buf = Vec::new();
        for txn in 1..=txs {
            work.run_tx(&fs, &files, txn, &mut buf).expect("tx");
        }
        (fs, work)
    }

    /// Apply only the first write of `txn`, outside any transaction: a torn update.
    fn tear(fs: &Fs, work: &Workload, txn: u64) {
        let w = work.writes(txn)[0];
        let mut buf = vec![0u8; w.len as usize];
        fill_stamp(&mut buf, w.offset, txn, w.file);
        let f = fs
            .options()
            .write(true)
            .open(Workload::path(w.file))
            .expect("open");
        f.write_at(&buf, w.offset).expect("write");
    }

    /// The demo removes only what it created: an existing --home (with someone's files in
    /// it) is refused and left exactly as it was.
    #[test]
    fn an_existing_home_is_refused_and_never_removed() {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: DemoArgs,
        }
        use clap::Parser;
        let base = std::env::temp_dir().join(format!("atomfs-demo-home-{}", std::process::id()));
        let home = base.join("home");
        std::fs::create_dir_all(&home).expect("scratch");
        std::fs::write(home.join("precious"), b"keep").expect("write");
        let words = ["demo", "--engine", "mmio", "--home"];
        let line = words
            .iter()
            .map(|w| w.to_string())
            .chain([home.display().to_string()]);
        let args = Wrap::try_parse_from(line).map(|w| w.args).expect("parse");
        let engine = EngineChoice::parse(&args.engine).expect("engine");
        let places = Places::new(&args, &engine);
        assert!(
            places.make_home().is_err(),
            "an existing home must be refused"
        );
        places.remove();
        assert_eq!(
            std::fs::read(home.join("precious")).ok().as_deref(),
            Some(&b"keep"[..])
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn verify_accepts_absent_and_present_in_flight_transactions() {
        let (fs, work) = setup(20);
        let absent = verify(&fs, &mut Model::new(work), 20).expect("20 acked, 21 absent");
        assert_eq!(absent.0, InFlight::Absent, "{}", absent.1);
        let present = verify(&fs, &mut Model::new(work), 19).expect("19 acked, 20 present");
        assert_eq!(present.0, InFlight::Present, "{}", present.1);
    }

    #[test]
    fn verify_catches_torn_and_lost_transactions() {
        // Find a transaction whose two writes both change something, then tear it.
        let (fs, work) = setup(20);
        let txn = (21..200)
            .find(|t| work.writes(*t).iter().all(|w| w.len >= 8))
            .expect("a transaction with two writes");
        let (fs, work) = if txn == 21 {
            (fs, work)
        } else {
            (setup(txn - 1).0, work)
        };
        tear(&fs, &work, txn);
        let err = verify(&fs, &mut Model::new(work), txn - 1)
            .expect_err("a torn transaction must be caught");
        assert!(err.contains("torn"), "{err}");
        // A lost acknowledged transaction: `n` acknowledged, but only n-1 ran.
        let n = (10..200)
            .find(|t| work.writes(*t).iter().all(|w| w.len >= 8))
            .expect("a transaction with two writes");
        let (fs, work) = setup(n - 1);
        let err = verify(&fs, &mut Model::new(work), n).expect_err("acknowledged but absent");
        assert!(err.contains("differs"), "{err}");
    }
}
