//! `atomfs bench SUITE [--quick|--full|--tiny] [--out DIR] [--systems A,B]`: runs the `atomfs-bench` binary
//! (crates/bench), which is built next to `atomfs`. It is spawned rather than linked so that
//! the `atomfs` tool does not carry the benchmark's competitor baselines (libpmemobj, the
//! ext4 RAM-disk protocols) and plotting libraries (CONVENTIONS.md §1).

use crate::{CmdResult, Failure};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Suite: fcfs-micro, fcfs-threads, fcfs-value-size, fcfs-idle, fcfs-latency, recovery,
    /// floor, external, or all.
    pub suite: String,
    /// Small sizes, under 2 minutes per suite on 2 cores (the default).
    #[arg(long, conflicts_with_all = ["full", "tiny"])]
    pub quick: bool,
    /// The seed's sizes where memory allows (says where it scaled down).
    #[arg(long, conflicts_with = "tiny")]
    pub full: bool,
    /// Seconds: a smoke run.
    #[arg(long)]
    pub tiny: bool,
    /// Where results.json and the PNG plots go (default target/bench/SUITE).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Workload seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Only these systems of each figure and its reference, comma-separated (external and
    /// fcfs-micro, fcfs-value-size, fcfs-idle, fcfs-latency), e.g. fcfs,nc,pmdk.
    #[arg(long)]
    pub systems: Option<String>,
}

/// The `atomfs-bench` binary: `ATOMFS_BENCH` if set, else next to this executable, else
/// from PATH.
fn bench_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("ATOMFS_BENCH") {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("atomfs-bench")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("atomfs-bench"))
}

/// The command line `atomfs-bench` gets for `args`.
pub fn forwarded(args: &BenchArgs) -> Vec<String> {
    let mut v = vec![args.suite.clone()];
    v.push(
        if args.full {
            "--full"
        } else if args.tiny {
            "--tiny"
        } else {
            "--quick"
        }
        .into(),
    );
    if let Some(out) = &args.out {
        v.push("--out".into());
        v.push(out.display().to_string());
    }
    if let Some(seed) = args.seed {
        v.push("--seed".into());
        v.push(seed.to_string());
    }
    if args.no_progress {
        v.push("--no-progress".into());
    }
    if let Some(systems) = &args.systems {
        v.push("--systems".into());
        v.push(systems.clone());
    }
    v
}

pub fn run(args: BenchArgs) -> CmdResult {
    let bin = bench_binary();
    let status = std::process::Command::new(&bin)
        .args(forwarded(&args))
        .status()
        .map_err(|e| {
            Failure::new(format!(
                "cannot run {}: {e} (build it with `cargo build --release -p atomfs-bench`, \
                 or set ATOMFS_BENCH)",
                bin.display()
            ))
        })?;
    match status.code() {
        Some(0) => Ok(ExitCode::SUCCESS),
        Some(code) => Err(Failure {
            message: format!("bench {} exited with status {code}", args.suite),
            code: u8::try_from(code).unwrap_or(1),
        }),
        None => Err(Failure::new(format!(
            "bench {} was killed by a signal",
            args.suite
        ))),
    }
}
