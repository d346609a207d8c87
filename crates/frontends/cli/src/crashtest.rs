//! `atomfs crashtest`: the crash harness (crates/testing/crash, docs/crash-harness.md) on an
//! engine: crash images at every fence of the simulator, then SIGKILLed processes on real
//! pool files.

use crate::{CmdResult, Failure};
use crash::pool_target::PoolTarget;
use crash::torture::{run_child, torture, TortureConfig};
use crash::{run_seeds, CrashReport, CrashTarget, DriverConfig, WorkloadConfig};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;

/// Engines the command knows, as the harness names them.
pub const ENGINES: &str = "pool (= pool-fcfs), pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync";

#[derive(clap::Args, Debug, Clone)]
pub struct CrashtestArgs {
    /// Engine and mode: pool (FCFS), pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync.
    #[arg(long, default_value = "pool")]
    pub engine: String,
    /// Simulated workloads (each checked at every fence of its run).
    #[arg(long, default_value_t = 10)]
    pub workloads: u64,
    /// Units (transactions, legacy calls, O_ATOMIC commits) per workload and thread.
    #[arg(long, default_value_t = 24)]
    pub units: usize,
    /// Threads per simulated workload.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Child processes to SIGKILL on real pool files (0: none).
    #[arg(long, default_value_t = 20)]
    pub kills: u64,
    /// First seed (workload i uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory of the torture pools.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CrashtestChildArgs {
    #[arg(long)]
    engine: String,
    #[arg(long)]
    pool: PathBuf,
    #[arg(long)]
    seed: u64,
}

fn target(engine: &str) -> Result<PoolTarget, Failure> {
    PoolTarget::by_name(engine).ok_or_else(|| {
        Failure::new(format!(
            "unknown engine {engine:?}: known engines are {ENGINES}"
        ))
    })
}

fn bar(len: u64, prefix: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>18} [{bar:30.cyan/blue}] {pos}/{len} {msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(prefix.to_string());
    pb
}

pub fn run(args: CrashtestArgs) -> CmdResult {
    if args.units == 0 || args.threads == 0 || args.threads > 16 {
        return Err(Failure::new(
            "need --units ≥ 1 and --threads between 1 and 16",
        ));
    }
    let t = target(&args.engine)?;
    let name = CrashTarget::name(&t);
    let shared: Arc<dyn CrashTarget> = Arc::new(t.clone());
    let mut report = CrashReport {
        engine: name.clone(),
        ..Default::default()
    };
    let pb = bar(args.workloads, "crash images");
    let template = WorkloadConfig {
        seed: args.seed,
        units: args.units,
        threads: args.threads,
    };
    for i in 0..args.workloads {
        let seed = args.seed.wrapping_add(i);
        report.merge(run_seeds(
            shared.clone(),
            [seed],
            template,
            &DriverConfig::default(),
        ));
        pb.inc(1);
        pb.set_message(format!(
            "{} images, {} violations",
            report.images,
            report.violations.len()
        ));
    }
    pb.finish();
    if args.kills > 0 {
        let exe = std::env::current_exe()?;
        let engine = args.engine.clone();
        let child = move |pool: &Path, seed: u64| {
            let mut cmd = Command::new(&exe);
            cmd.arg("crashtest-child")
                .arg("--engine")
                .arg(&engine)
                .arg("--pool")
                .arg(pool);
            cmd.arg("--seed").arg(seed.to_string());
            cmd
        };
        let dir = args.dir.clone().unwrap_or_else(pmem::mapped::scratch_dir);
        let cfg = TortureConfig {
            seed: args.seed,
            rounds: args.kills,
            dir,
            ..Default::default()
        };
        let spinner = ProgressBar::new_spinner();
        spinner.set_message(format!(
            "process torture: {} SIGKILLs on real pool files",
            args.kills
        ));
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        report.merge(torture(&t, &child, &cfg));
        spinner.finish_and_clear();
    }
    println!("{}", report.summary());
    for v in &report.violations {
        println!(
            "  violation (seed {}): {} at {}\n    reproduce: {}",
            v.seed, v.what, v.at, v.repro
        );
    }
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The torture victim: see `crash::torture::run_child`.
pub fn child(args: CrashtestChildArgs) -> CmdResult {
    let t = target(&args.engine)?;
    run_child(&t, &args.pool, args.seed)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_round_trip() {
        for name in [
            "pool-fcfs",
            "pool-nc",
            "pool-fgwal",
            "pool-scsp",
            "pool-soc",
            "pool-sync",
        ] {
            let t = PoolTarget::by_name(name).expect("known engine");
            assert_eq!(CrashTarget::name(&t), name);
        }
        assert!(PoolTarget::by_name("pool").is_some_and(|t| CrashTarget::name(&t) == "pool-fcfs"));
        assert!(PoolTarget::by_name("pool-bogus").is_none());
    }
}
