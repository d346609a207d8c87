//! A crash-test run: crash images at every fence of the simulator, on `--jobs` worker
//! threads, then SIGKILLed processes on real pool files; `--long` is the long run (1,000,000
//! images over a mix of workload kinds and 10,000 kills) with progress bars and a summary
//! table.

use crate::args::CrashtestArgs;
use crate::{table, targets};
use crash::parallel::{torture_streams, Progress};
use crash::torture::{run_child, KillTarget, TortureConfig};
use crash::{
    default_jobs, run_plan, CrashReport, CrashTarget, DriverConfig, Plan, PlanResult,
    WorkloadConfig,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

/// A run's outcome: its exit code, or why it could not run.
pub type CmdResult = Result<ExitCode, String>;

/// Crash images of a `--long` run unless `--images` says otherwise.
pub const LONG_IMAGES: u64 = 1_000_000;
/// Process kills of a `--long` run unless `--kills` says otherwise.
pub const LONG_KILLS: u64 = 10_000;
/// Workloads of a normal run unless `--workloads` or `--images` says otherwise.
pub const WORKLOADS_DEFAULT: u64 = 10;
/// Process kills of a normal run unless `--kills` says otherwise.
pub const KILLS_DEFAULT: u64 = 20;
/// Kill rounds per torture stream of `--long` (each stream alternates fresh and shared pools).
pub const ROUNDS_PER_STREAM: u64 = 250;
/// Threads per simulated workload at most.
pub const THREADS_MAX: usize = 16;

#[derive(clap::Args, Debug, Clone)]
pub struct ChildArgs {
    #[arg(long)]
    engine: String,
    #[arg(long)]
    pool: PathBuf,
    #[arg(long)]
    seed: u64,
}

/// A kind of workload of `--long`: label, units, threads, images per fence and per workload,
/// and its share of the run in percent.
struct Kind {
    label: &'static str,
    units: usize,
    threads: usize,
    images_per_fence: u64,
    images_per_workload: u64,
    share_percent: u64,
}

/// The mix of `--long`: deep single-thread workloads, many short ones, and concurrent ones.
const LONG_KINDS: [Kind; 4] = [
    Kind {
        label: "1 thread x 24 units, deep",
        units: 24,
        threads: 1,
        images_per_fence: 16,
        images_per_workload: 2000,
        share_percent: 55,
    },
    Kind {
        label: "1 thread x 12 units, short",
        units: 12,
        threads: 1,
        images_per_fence: 8,
        images_per_workload: 300,
        share_percent: 20,
    },
    Kind {
        label: "2 threads x 12 units",
        units: 12,
        threads: 2,
        images_per_fence: 8,
        images_per_workload: 1000,
        share_percent: 15,
    },
    Kind {
        label: "3 threads x 8 units",
        units: 8,
        threads: 3,
        images_per_fence: 8,
        images_per_workload: 1000,
        share_percent: 10,
    },
];

/// `part` percent of `total` (at least 1), or no limit.
fn share(total: Option<u64>, percent: u64) -> u64 {
    total.map_or(u64::MAX, |t| (t.saturating_mul(percent) / 100).max(1))
}

/// The plans a run executes, in order.
fn plans(args: &CrashtestArgs) -> Vec<Plan> {
    let images = args.images.or(args.long.then_some(LONG_IMAGES));
    let single = !args.long || args.units.is_some() || args.threads.is_some();
    if single {
        let (units, threads) = (args.units.unwrap_or(24), args.threads.unwrap_or(1));
        let workloads = match (args.workloads, images) {
            (Some(w), _) => w,
            (None, Some(_)) => u64::MAX,
            (None, None) => WORKLOADS_DEFAULT,
        };
        return vec![Plan {
            label: format!("{threads} thread(s) x {units} units"),
            workload: WorkloadConfig {
                seed: args.seed,
                units,
                threads,
            },
            driver: DriverConfig::default(),
            workloads,
            images: images.unwrap_or(u64::MAX),
        }];
    }
    LONG_KINDS
        .iter()
        .map(|k| Plan {
            label: k.label.to_string(),
            workload: WorkloadConfig {
                seed: args.seed,
                units: k.units,
                threads: k.threads,
            },
            driver: DriverConfig::default().with_images(k.images_per_fence, k.images_per_workload),
            workloads: share(args.workloads, k.share_percent),
            images: share(images, k.share_percent),
        })
        .collect()
}

fn bar(plan: &Plan) -> ProgressBar {
    let (len, unit) = if plan.images != u64::MAX {
        (plan.images, "images")
    } else {
        (plan.workloads, "workloads")
    };
    let pb = ProgressBar::new(len);
    let template = format!(
        "{{prefix:>28}} [{{bar:30.cyan/blue}}] {{human_pos}}/{{human_len}} {unit} {{msg}} ({{elapsed}}, eta {{eta}})"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(plan.label.clone());
    pb
}

/// The modes a run covers (every mode of an engine named alone), or why not.
fn modes(engine: &str) -> Result<Vec<String>, String> {
    targets::modes(engine).ok_or_else(|| unknown(engine))
}

/// Run the simulator plans of every mode, one progress bar each.
fn simulate(args: &CrashtestArgs, jobs: usize) -> Result<Vec<PlanResult>, String> {
    let modes = modes(&args.engine)?;
    let mut results = Vec::new();
    for mode in &modes {
        for mut plan in plans(args) {
            if modes.len() > 1 {
                plan.label = format!("{mode}: {}", plan.label);
            }
            results.push(simulate_plan(sim_target(mode)?, &plan, jobs));
        }
    }
    Ok(results)
}

fn simulate_plan(target: Arc<dyn CrashTarget>, plan: &Plan, jobs: usize) -> PlanResult {
    {
        let pb = bar(plan);
        let by_images = plan.images != u64::MAX;
        let started = Instant::now();
        let progress = |r: &CrashReport| {
            pb.set_position(if by_images { r.images } else { r.workloads });
            let rate = r.images as f64 / started.elapsed().as_secs_f64().max(1e-3);
            pb.set_message(format!(
                "| {} workloads, {} images, {} violations, {rate:.0} images/s",
                r.workloads,
                r.images,
                r.violations.len()
            ));
        };
        let result = run_plan(target, plan, jobs, &progress);
        pb.finish();
        result
    }
}

/// Run `kills` torture rounds of `engine` (one mode) in parallel streams, with a progress bar.
fn kill(args: &CrashtestArgs, engine: &str, kills: u64, jobs: usize) -> Result<PlanResult, String> {
    let target = kill_target(engine)?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let engine = engine.to_string();
    let label = format!("process kills, {engine}");
    let child = move |pool: &Path, seed: u64| {
        let mut cmd = Command::new(&exe);
        cmd.arg("child")
            .arg("--engine")
            .arg(&engine)
            .arg("--pool")
            .arg(pool)
            .arg("--seed")
            .arg(seed.to_string());
        cmd
    };
    let cfg = TortureConfig {
        seed: args.seed,
        rounds: kills,
        dir: args.dir.clone().unwrap_or_else(pmem::mapped::scratch_dir),
        ..Default::default()
    };
    // At least two streams (one on fresh pools, one on a shared pool), more for long runs.
    let streams = (kills / ROUNDS_PER_STREAM).max(2 * jobs as u64).max(2);
    let pb = ProgressBar::new(kills);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>28} [{bar:30.cyan/blue}] {human_pos}/{human_len} rounds {msg} ({elapsed}, eta {eta})",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(label.clone());
    let progress = |r: &CrashReport| {
        pb.set_position(r.workloads);
        pb.set_message(format!(
            "| {} kills, {} violations",
            r.kills,
            r.violations.len()
        ));
    };
    let progress: Progress<'_> = &progress;
    let mut result = torture_streams(target.as_ref(), &child, &cfg, streams, jobs, progress);
    pb.finish();
    result.label = label;
    Ok(result)
}

pub fn run(args: CrashtestArgs) -> CmdResult {
    let threads = args.threads.unwrap_or(1);
    if args.units == Some(0) || threads == 0 || threads > THREADS_MAX {
        return Err(format!(
            "need --units ≥ 1 and --threads between 1 and {THREADS_MAX}"
        ));
    }
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    if jobs == 0 {
        return Err("need --jobs ≥ 1".into());
    }
    let started = Instant::now();
    let mut results = simulate(&args, jobs)?;
    // Coverage of persistence ordering counts simulator images only, never kills.
    let mut simulated = CrashReport::default();
    for r in &results {
        simulated.merge(r.report.clone());
    }
    let kills = args
        .kills
        .unwrap_or(if args.long { LONG_KILLS } else { KILLS_DEFAULT });
    if kills > 0 {
        // Kills are reported apart, per mode: they cannot see missing fences or flushes.
        let modes = modes(&args.engine)?;
        let per_mode = kills.div_ceil(modes.len() as u64);
        for mode in &modes {
            results.push(kill(&args, mode, per_mode, jobs)?);
        }
    }
    let mut report = CrashReport::default();
    for r in &results {
        report.merge(r.report.clone());
    }
    report.engine = match modes(&args.engine)?.as_slice() {
        [one] => one.clone(),
        many => format!("{} ({})", args.engine, many.join(", ")),
    };
    println!(
        "{}",
        table::render(&report.engine, &results, started.elapsed(), jobs)
    );
    println!("{}", report.summary());
    println!("simulator: {}", simulated.coverage());
    for v in report.violations.iter().take(VIOLATIONS_SHOWN) {
        println!(
            "  violation (seed {}): {} at {}\n    reproduce: {}",
            v.seed, v.what, v.at, v.repro
        );
    }
    if report.violations.len() > VIOLATIONS_SHOWN {
        println!("  ... {} more", report.violations.len() - VIOLATIONS_SHOWN);
    }
    for repro in results.iter().filter_map(|r| r.repro.as_ref()) {
        println!("{repro}");
    }
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn sim_target(engine: &str) -> Result<Arc<dyn CrashTarget>, String> {
    let target = targets::by_name(engine).ok_or_else(|| unknown(engine))?;
    Ok(target)
}

fn kill_target(engine: &str) -> Result<Arc<dyn KillTarget>, String> {
    let target = targets::by_name(engine).ok_or_else(|| unknown(engine))?;
    Ok(target)
}

fn unknown(engine: &str) -> String {
    format!(
        "unknown engine {engine:?}: known engines are {}",
        targets::names()
    )
}

/// Violations printed one by one at most (the counts include all of them).
pub const VIOLATIONS_SHOWN: usize = 20;

/// The torture victim: see `crash::torture::run_child`.
pub fn child(args: ChildArgs) -> CmdResult {
    let t = kill_target(&args.engine)?;
    run_child(t.as_ref(), &args.pool, args.seed).map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> CrashtestArgs {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: CrashtestArgs,
        }
        use clap::Parser;
        let words = std::iter::once("crashtest").chain(line.split_whitespace());
        Wrap::try_parse_from(words)
            .map(|w| w.args)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn long_defaults_and_overrides() {
        let long = plans(&args("--long"));
        assert_eq!(long.len(), LONG_KINDS.len());
        let images: u64 = long.iter().map(|p| p.images).sum();
        assert_eq!(images, LONG_IMAGES, "the shares add up to the whole budget");
        assert!(long.iter().all(|p| p.workloads == u64::MAX));
        let small = plans(&args("--long --images 50000 --seed 7"));
        assert_eq!(small.iter().map(|p| p.images).sum::<u64>(), 50_000);
        assert!(small.iter().all(|p| p.workload.seed == 7));
        let one = plans(&args("--long --threads 2"));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].images, LONG_IMAGES);
        let normal = plans(&args(""));
        assert_eq!(normal.len(), 1);
        assert_eq!(
            (normal[0].workloads, normal[0].images),
            (WORKLOADS_DEFAULT, u64::MAX)
        );
        let by_images = plans(&args("--images 3000"));
        assert_eq!(
            (by_images[0].workloads, by_images[0].images),
            (u64::MAX, 3000)
        );
    }
}
