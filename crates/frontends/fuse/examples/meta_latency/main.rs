//! Metadata latency per call — create (open O_CREAT|O_EXCL + close), link, rename, unlink,
//! mkdir, rmdir — on four targets:
//! - `atomfs-fuse`: a pool in /dev/shm mounted with `atomfs mount` (the `atomfs` command next
//!   to this example or `ATOMFS_BIN`; else the same server mounted in this process);
//! - `minimal-fuse`: a minimal in-memory file system on the same `fuser` crate, mounted with
//!   the same options and timeouts (the cost of FUSE itself);
//! - `tmpfs`: a directory in /dev/shm;
//! - `rust-api`: the same operations through the Rust API (`atomfs::Fs`) on a pool in /dev/shm.
//!
//! Each round runs every operation on `--files` fresh names in a fresh directory, the
//! targets taking turns in batches of 25 calls; the table shows the median round: the time
//! per call as the caller sees it and, for the two FUSE file systems, the CPU time their
//! server process spent per call (all its threads, from /proc/PID/task/*/schedstat). Then the FUSE requests per call of both FUSE file systems are
//! counted (fuser's request log, both mounted in this process).
//!
//! `cargo build --release -p atomfs-cli && cargo run --release -p atomfs-fuse --example
//! meta_latency -- --files 2000 --rounds 5` (`--in-process`: serve atomfs from the measuring
//! process instead of `atomfs mount`, as the minimal file system is served; `--mounted DIR`:
//! measure a server mounted at DIR by hand, under a profiler say).

mod count;
mod minimal;
mod targets;

use std::time::Instant;
use targets::{Op, Serve, Target, OPS};

struct Args {
    serve: Serve,
    files: usize,
    rounds: usize,
    count_files: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        serve: Serve::Cli,
        files: 2000,
        rounds: 5,
        count_files: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--in-process" {
            args.serve = Serve::InProcess;
            continue;
        }
        if flag == "--serve-minimal" {
            let dir = it.next().ok_or("--serve-minimal needs a directory")?;
            args.serve = Serve::Minimal(dir.into());
            continue;
        }
        if flag == "--mounted" {
            let dir = it.next().ok_or("--mounted needs a directory")?;
            args.serve = Serve::Mounted(dir.into());
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: usize = value
            .parse()
            .ok()
            .filter(|n| (1..=100_000).contains(n))
            .ok_or(format!("{flag} {value}: not a count in 1..100000"))?;
        match flag.as_str() {
            "--files" => args.files = n,
            "--rounds" => args.rounds = n,
            "--count-files" => args.count_files = n,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(args)
}

/// Calls of one target timed in a row before the next target's turn: the targets take
/// turns in batches this small, so that a noisy moment of a shared machine hits them all.
const BATCH: usize = 25;

/// Microseconds per call of one operation on one target: as the caller waits for it, and
/// as CPU time of the target's server process (NaN when it has none of its own).
#[derive(Clone, Copy)]
struct Sample {
    wall: f64,
    server_cpu: f64,
}

fn cpu_now(targets: &[Box<dyn Target>]) -> Vec<Option<u64>> {
    targets.iter().map(|t| t.server_cpu_ns()).collect()
}

/// One operation on every target, in turns of [`BATCH`] calls.
fn phase(targets: &[Box<dyn Target>], op: Op, files: usize) -> std::io::Result<Vec<Sample>> {
    let mut spent = vec![std::time::Duration::ZERO; targets.len()];
    let cpu_before = cpu_now(targets);
    for start in (0..files).step_by(BATCH) {
        for (t, target) in targets.iter().enumerate() {
            let started = Instant::now();
            for i in start..(start + BATCH).min(files) {
                target.op(op, i)?;
            }
            spent[t] += started.elapsed();
        }
    }
    let cpu_after = cpu_now(targets);
    let per_call = |ns: f64| ns / 1e3 / files as f64;
    Ok((0..targets.len())
        .map(|t| Sample {
            wall: per_call(spent[t].as_nanos() as f64),
            server_cpu: match (cpu_before[t], cpu_after[t]) {
                (Some(a), Some(b)) => per_call(b.saturating_sub(a) as f64),
                _ => f64::NAN,
            },
        })
        .collect())
}

/// One round: every target in a fresh directory; samples[target][op].
fn round(
    targets: &[Box<dyn Target>],
    round: usize,
    files: usize,
) -> std::io::Result<Vec<Vec<Sample>>> {
    for target in targets {
        target.begin_round(round)?;
    }
    let mut out = vec![Vec::new(); targets.len()];
    for op in OPS {
        for (t, sample) in phase(targets, op, files)?.into_iter().enumerate() {
            out[t].push(sample);
        }
    }
    for target in targets {
        for i in 0..files {
            target.op(Op::Cleanup, i)?;
        }
    }
    Ok(out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Per target and operation, the median round of each measure.
fn measure(
    targets: &[Box<dyn Target>],
    files: usize,
    rounds: usize,
) -> std::io::Result<Vec<Vec<Sample>>> {
    // samples[target][op] = one sample per round.
    let mut samples = vec![vec![Vec::new(); OPS.len()]; targets.len()];
    for r in 0..rounds {
        eprintln!("round {}/{rounds}", r + 1);
        for (t, per_op) in round(targets, r, files)?.into_iter().enumerate() {
            for (k, sample) in per_op.into_iter().enumerate() {
                samples[t][k].push(sample);
            }
        }
    }
    Ok(samples
        .into_iter()
        .map(|per_op| {
            per_op
                .into_iter()
                .map(|v: Vec<Sample>| Sample {
                    wall: median(v.iter().map(|s| s.wall).collect()),
                    server_cpu: median(v.iter().map(|s| s.server_cpu).collect()),
                })
                .collect()
        })
        .collect())
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The 1-minute load average: how much the machine was shared during the run.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn print_table(names: &[String], results: &[Vec<Sample>], counts: &[Vec<String>]) {
    print!("| operation |");
    for n in names {
        print!(" {n} µs |");
    }
    print!(" {} / {} |", names[0], names[1]);
    print!(" server CPU µs per call ({} / {}) |", names[0], names[1]);
    println!(" FUSE requests per call ({} / {}) |", names[0], names[1]);
    println!("|---{}|---|---|---|", "|---".repeat(names.len()));
    for (k, op) in OPS.iter().enumerate() {
        print!("| {} |", op.name());
        for r in results {
            print!(" {:.1} |", r[k].wall);
        }
        let ratio = results[0][k].wall / results[1][k].wall;
        let cpu = format!(
            "{:.1} / {:.1}",
            results[0][k].server_cpu, results[1][k].server_cpu
        );
        let requests = counts.get(k).map(|c| c.join(" / ")).unwrap_or_default();
        println!(" {ratio:.2} | {cpu} | {requests} |");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    if let Serve::Minimal(dir) = &args.serve {
        return Ok(targets::serve_minimal(dir)?);
    }
    count::install();
    println!(
        "date {} | {} | {} CPUs | load average {} | git {} | {} files per operation, median of {} rounds",
        command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        command_output("git", &["rev-parse", "--short", "HEAD"]),
        args.files,
        args.rounds
    );
    let targets = targets::all(args.serve)?;
    let results = measure(&targets, args.files, args.rounds)?;
    let names: Vec<String> = targets.iter().map(|t| t.name().to_string()).collect();
    for t in &targets {
        println!("- {}: {}", t.name(), t.describe());
    }
    drop(targets);
    let counts = count::requests_per_call(args.count_files)?;
    print_table(&names, &results, &counts);
    Ok(())
}
