//! `atomfs-bench SUITE [--quick|--full] [--out DIR] [--seed N] [--systems A,B] [--no-progress]`
//! (also reached as `atomfs bench ...`). See docs/bench.md.

use atomfs_bench::suites::{self, Mode, Options};
use atomfs_bench::BenchError;
use std::path::PathBuf;
use std::process::ExitCode;

fn usage() -> String {
    let mut s = String::from(
        "usage: atomfs-bench SUITE [--quick|--full] [--out DIR] [--seed N] [--systems A,B] [--no-progress]\n\
         \n  --quick   small sizes, under 2 minutes on 2 cores (default)\
         \n  --full    the seed's sizes where memory allows (prints where it scaled down)\
         \n  --tiny    seconds; what the test suite runs\
         \n  --out DIR where results.json and the PNG plots go (default target/bench/SUITE)\
         \n  --systems A,B  only these systems of each figure, and its reference (external and\
         \n            the fcfs-micro, fcfs-value-size, fcfs-idle and fcfs-latency suites)\
         \n\nsuites:\n",
    );
    for (name, what) in suites::suites() {
        s.push_str(&format!("  {name:<16} {what}\n"));
    }
    s.push_str("  all              every suite above in turn (DIR/SUITE for each)\n");
    s
}

/// Parsed command line: the suite, its options, and whether --out was given.
fn parse(args: &[String]) -> Result<(String, Options, bool), String> {
    let mut suite = None;
    let mut mode = Mode::Quick;
    let mut out = None;
    let mut seed = 7u64;
    let mut progress = true;
    let mut systems = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => mode = Mode::Quick,
            "--full" => mode = Mode::Full,
            "--tiny" => mode = Mode::Tiny,
            "--no-progress" => progress = false,
            "--systems" => {
                let v = it
                    .next()
                    .ok_or("--systems needs a list, e.g. fcfs,nc,pmdk")?;
                systems = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                if systems.is_empty() {
                    return Err("--systems: empty list".into());
                }
            }
            "--out" => out = Some(PathBuf::from(it.next().ok_or("--out needs a directory")?)),
            "--seed" => {
                let v = it.next().ok_or("--seed needs a number")?;
                seed = v
                    .parse()
                    .map_err(|_| format!("--seed: not a number: {v}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if suite.is_none() => suite = Some(s.to_string()),
            s => return Err(format!("unexpected argument {s}")),
        }
    }
    let suite = suite.ok_or("no suite given")?;
    if suite == "all" && !systems.is_empty() {
        return Err("--systems picks systems of one suite, not of all".into());
    }
    let out_given = out.is_some();
    let out = out.unwrap_or_else(|| suites::default_out(&suite));
    Ok((
        suite,
        Options {
            mode,
            out,
            progress,
            seed,
            systems,
        },
        out_given,
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (suite, opts, out_given) = match parse(&args) {
        Ok(p) => p,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("atomfs-bench: {msg}");
            }
            eprint!("{}", usage());
            return ExitCode::from(if msg.is_empty() { 0 } else { 2 });
        }
    };
    // libpmem reads this when PMDK opens its first pool (see systems/pmdk.rs).
    std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
    atomfs_bench::install_interrupt_handler();
    if suite != "all" {
        return run_one(&suite, &opts);
    }
    let mut worst = ExitCode::SUCCESS;
    let mut failed = Vec::new();
    for (name, _) in suites::suites() {
        let out = if out_given {
            opts.out.join(name)
        } else {
            suites::default_out(name)
        };
        let one = Options {
            out,
            mode: opts.mode,
            progress: opts.progress,
            seed: opts.seed,
            systems: opts.systems.clone(),
        };
        let code = run_one(name, &one);
        if code != ExitCode::SUCCESS && code != ExitCode::from(3) {
            failed.push(name);
            worst = ExitCode::FAILURE;
        }
        if atomfs_bench::interrupted() {
            return ExitCode::FAILURE;
        }
    }
    if !failed.is_empty() {
        eprintln!("atomfs-bench: all: failed: {}", failed.join(", "));
    }
    worst
}

fn run_one(suite: &str, opts: &Options) -> ExitCode {
    eprintln!(
        "atomfs-bench: suite {suite}, {} mode, results in {}",
        opts.mode.as_str(),
        opts.out.display()
    );
    let started = std::time::Instant::now();
    match suites::run_suite(suite, opts) {
        Ok(outcome) => {
            for note in &outcome.notes {
                eprintln!("note: {note}");
            }
            print!("{}", outcome.table);
            println!("results: {}", outcome.json_path.display());
            for p in &outcome.plots {
                println!("plot: {}", p.display());
            }
            println!("{suite}: {:.1} s", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(BenchError::Skipped(why)) => {
            eprintln!("atomfs-bench: {suite}: skipped: {why}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("atomfs-bench: {suite}: {e}");
            ExitCode::FAILURE
        }
    }
}
