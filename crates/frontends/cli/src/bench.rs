//! `atomfs bench SUITE [--quick|--full|--tiny] [--out DIR] [--systems A,B]`: runs the `atomfs-bench` binary
//! (crates/bench), which is built next to `atomfs`. It is spawned rather than linked so that
//! the `atomfs` tool does not carry the benchmark's competitor baselines (libpmemobj, the
//! ext4 RAM-disk protocols) and plotting libraries (CONVENTIONS.md §1).

use crate::{CmdResult, Failure};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Suite: one of those listed below, or all.
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

/// The suites of `atomfs-bench`: its own list (`SUITES`: name, description), compiled in
/// here too so that the help names every suite the binary has.
mod suite_list {
    include!("../../../bench/src/suite_list.rs");
}

const EXAMPLES: &str = "Examples:\n  atomfs bench fcfs-micro --quick\n  \
    atomfs bench external --full --out results/external\n  atomfs bench sqlite --tiny\n  \
    atomfs bench all --quick --out results";

/// The text after `atomfs bench --help`'s options: every suite with its description, then
/// examples.
pub fn after_help() -> String {
    let width = suite_list::SUITES
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("Suites:\n");
    for (name, description) in suite_list::SUITES {
        text.push_str(&format!("  {name:width$}  {description}\n"));
    }
    text.push_str(&format!(
        "  {:width$}  every suite above, one after the other\n\n",
        "all"
    ));
    text.push_str(EXAMPLES);
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_suite_of_the_bench_binary() {
        let help = after_help();
        assert!(suite_list::SUITES.len() >= 11, "{help}");
        for (name, description) in suite_list::SUITES {
            let line = help
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("{name} missing from:\n{help}"));
            assert!(line.ends_with(description), "{line}");
        }
        for name in ["sqlite", "fuse", "mmio", "all"] {
            assert!(
                help.lines()
                    .any(|l| l.split_whitespace().next() == Some(name)),
                "{name} missing from:\n{help}"
            );
        }
    }
}
