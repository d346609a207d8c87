//! `atomfs`: create, check, inspect, mount and demonstrate atomfs pools.

mod bench;
mod crashtest;
mod demo;
mod engine;
mod files;
mod mount;
mod poolview;
mod render;
mod size;
mod workload;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A failure of a command: its message, and the exit code to leave with.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            code: 1,
        }
    }
}

impl From<store::Error> for Failure {
    fn from(e: store::Error) -> Self {
        Failure::new(e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::new(e.to_string())
    }
}

pub type CmdResult = Result<ExitCode, Failure>;

const EXAMPLES: &str = "\
Examples:
  atomfs demo                               # the two-file atomic update demo, with a crash
  atomfs mkfs /dev/shm/my.pool --size 512M  # create a pool
  atomfs mount /dev/shm/my.pool /mnt/atomfs # mount it (atomfs umount /mnt/atomfs to stop)
  atomfs put /dev/shm/my.pool notes.txt /notes.txt
  atomfs fsck /dev/shm/my.pool --json";

#[derive(Parser, Debug)]
#[command(
    name = "atomfs",
    version,
    about = "Failure-atomic, durable multi-file updates on persistent memory",
    long_about = "atomfs keeps files in a pool file (on /dev/shm its page cache plays persistent \
memory) and updates one file or many all-or-nothing, across crashes. This tool creates, \
checks, inspects and mounts pools, copies files in and out without mounting, and runs the demo.",
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a new, empty pool file.
    #[command(
        after_help = "Examples:\n  atomfs mkfs /dev/shm/a.pool --size 512M\n  atomfs mkfs big.pool --size 4G --inodes 100000"
    )]
    Mkfs {
        /// Path of the pool file to create (must not exist unless --force).
        pool: PathBuf,
        /// Pool size: bytes, or with a suffix K, M, G, T (powers of 1024), e.g. 512M, 4G.
        #[arg(long, short = 's')]
        size: String,
        /// Number of inodes (files and directories) the pool can hold.
        #[arg(long)]
        inodes: Option<u64>,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Show a pool's engine, geometry, usage and counters.
    #[command(
        after_help = "Examples:\n  atomfs info /dev/shm/a.pool\n  atomfs info /dev/shm/a.pool --json | jq .statfs"
    )]
    Info {
        pool: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check a pool's consistency. Exit status: 0 clean, 1 problems found (or unreadable pool).
    #[command(
        after_help = "Examples:\n  atomfs fsck /dev/shm/a.pool && echo clean\n  atomfs fsck /dev/shm/a.pool --json"
    )]
    Fsck {
        pool: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Dump the engine's internal state: the log, one file's block map, the pending blocks.
    #[command(
        after_help = "Examples:\n  atomfs inspect /dev/shm/a.pool\n  atomfs inspect /dev/shm/a.pool log --json\n  atomfs inspect /dev/shm/a.pool file /dir/name\n  atomfs inspect /dev/shm/a.pool pending"
    )]
    Inspect {
        pool: PathBuf,
        #[command(subcommand)]
        what: Option<InspectWhat>,
        #[arg(long, global = true)]
        json: bool,
    },
    /// Run crash recovery on a pool and report what was undone and redone.
    #[command(after_help = "Example:\n  atomfs recover /dev/shm/a.pool")]
    Recover {
        pool: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List a directory inside a pool.
    #[command(
        after_help = "Examples:\n  atomfs ls /dev/shm/a.pool\n  atomfs ls /dev/shm/a.pool /docs -l"
    )]
    Ls {
        pool: PathBuf,
        #[arg(default_value = "/")]
        path: String,
        /// Long format: kind, permissions, links, size, name.
        #[arg(short = 'l')]
        long: bool,
    },
    /// Print a file inside a pool to standard output.
    #[command(after_help = "Example:\n  atomfs cat /dev/shm/a.pool /notes.txt")]
    Cat { pool: PathBuf, path: String },
    /// Copy a file to another path inside the same pool (atomically).
    #[command(after_help = "Example:\n  atomfs cp /dev/shm/a.pool /notes.txt /backup/notes.txt")]
    Cp {
        pool: PathBuf,
        src: String,
        dst: String,
    },
    /// Copy a host file into a pool (atomically: all of it or nothing).
    #[command(after_help = "Example:\n  atomfs put /dev/shm/a.pool ./report.pdf /docs/report.pdf")]
    Put {
        pool: PathBuf,
        host_file: PathBuf,
        path: String,
    },
    /// Copy a file out of a pool to the host.
    #[command(after_help = "Example:\n  atomfs get /dev/shm/a.pool /docs/report.pdf ./report.pdf")]
    Get {
        pool: PathBuf,
        path: String,
        host_file: PathBuf,
    },
    /// Remove a file (or with -r a directory tree) inside a pool.
    #[command(
        after_help = "Examples:\n  atomfs rm /dev/shm/a.pool /notes.txt\n  atomfs rm /dev/shm/a.pool /docs -r"
    )]
    Rm {
        pool: PathBuf,
        path: String,
        #[arg(short = 'r')]
        recursive: bool,
    },
    /// Create a directory inside a pool.
    #[command(after_help = "Example:\n  atomfs mkdir /dev/shm/a.pool /docs/2026 -p")]
    Mkdir {
        pool: PathBuf,
        path: String,
        /// Create missing parents too; no error when it exists.
        #[arg(short = 'p')]
        parents: bool,
    },
    /// Mount a pool with FUSE so that any program can use it.
    #[command(
        after_help = "Options (-o, comma separated): ro, rw, allow_other, fsname=NAME, threads=N, \
anything else is passed to the kernel (e.g. noatime).\n\nExamples:\n  atomfs mount /dev/shm/a.pool /mnt/a         # in the background\n  atomfs mount /dev/shm/a.pool /mnt/a -f      # in the foreground, Ctrl-C unmounts\n  atomfs mount /dev/shm/a.pool /mnt/a -o ro,noatime"
    )]
    Mount {
        pool: PathBuf,
        dir: PathBuf,
        /// Stay in the foreground (Ctrl-C or SIGTERM unmounts cleanly).
        #[arg(short = 'f')]
        foreground: bool,
        /// Mount options.
        #[arg(short = 'o')]
        options: Vec<String>,
        /// (internal) Print "ready" on stdout once mounted, then detach from it.
        #[arg(long, hide = true)]
        ready_notify: bool,
    },
    /// Unmount a mounted pool (checkpointing it) and wait for its server to finish.
    #[command(after_help = "Example:\n  atomfs umount /mnt/a")]
    Umount { dir: PathBuf },
    /// The demo: atomic two-file updates, a SIGKILL mid-transaction, recovery, verification.
    #[command(after_help = "Example:\n  atomfs demo --seconds 3 --files 64")]
    Demo(demo::DemoArgs),
    /// (internal) The demo's crash victim.
    #[command(hide = true)]
    DemoChild(demo::ChildArgs),
    /// Crash-test an engine with the crash harness: crash images at every fence of the
    /// simulator, then SIGKILLed processes on real pool files. Exit 1 on any violation.
    #[command(
        after_help = "Engines: pool (= pool-fcfs), pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync, mmio (= mmio-hybrid), mmio-undo, mmio-redo (pool-nc has no consistency and must fail).\n\nExamples:\n  atomfs crashtest\n  atomfs crashtest --engine pool-scsp --workloads 100 --kills 200\n  atomfs crashtest --engine pool-nc --kills 0   # shows the violations of no-consistency mode\n  atomfs crashtest --long                       # 1,000,000 crash images + 10,000 kills, summary table\n  atomfs crashtest --long --images 50000 --kills 500 --jobs 2"
    )]
    Crashtest(crashtest::CrashtestArgs),
    /// Reproduce the seeds' evaluations (FCFS Figs. 7-11, Libnvmmio, SQLite, FUSE) and the
    /// external baselines on this machine: results.json, PNG plots and a ratio table (runs
    /// the atomfs-bench binary).
    #[command(after_help = bench::after_help())]
    Bench(bench::BenchArgs),
    /// (internal) The crash test's torture victim.
    #[command(hide = true)]
    CrashtestChild(crashtest::CrashtestChildArgs),
}

#[derive(Subcommand, Debug, Clone)]
pub enum InspectWhat {
    /// The metadata and data logs.
    Log,
    /// One file's inode and block map.
    File { path: String },
    /// Committed versions (pending blocks) waiting for checkpoint.
    Pending,
}

fn run(cli: Cli) -> CmdResult {
    use Command::*;
    match cli.command {
        Mkfs {
            pool,
            size,
            inodes,
            force,
        } => engine::mkfs(&pool, &size, inodes, force),
        Info { pool, json } => engine::info(&pool, json),
        Fsck { pool, json } => engine::fsck(&pool, json),
        Inspect { pool, what, json } => engine::inspect(&pool, what, json),
        Recover { pool, json } => engine::recover(&pool, json),
        Ls { pool, path, long } => files::ls(&pool, &path, long),
        Cat { pool, path } => files::cat(&pool, &path),
        Cp { pool, src, dst } => files::cp(&pool, &src, &dst),
        Put {
            pool,
            host_file,
            path,
        } => files::put(&pool, &host_file, &path),
        Get {
            pool,
            path,
            host_file,
        } => files::get(&pool, &path, &host_file),
        Rm {
            pool,
            path,
            recursive,
        } => files::rm(&pool, &path, recursive),
        Mkdir {
            pool,
            path,
            parents,
        } => files::mkdir(&pool, &path, parents),
        Mount {
            pool,
            dir,
            foreground,
            options,
            ready_notify,
        } => mount::mount(&pool, &dir, foreground, &options, ready_notify),
        Umount { dir } => mount::umount(&dir),
        Demo(args) => demo::run(args),
        DemoChild(args) => demo::child(args),
        Crashtest(args) => crashtest::run(args),
        Bench(args) => bench::run(args),
        CrashtestChild(args) => crashtest::child(args),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("atomfs: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_forwards_suite_mode_and_out() {
        let cli = Cli::try_parse_from(["atomfs", "bench", "fcfs-micro", "--full", "--out", "d"]);
        match cli.map(|c| c.command) {
            Ok(Command::Bench(args)) => assert_eq!(
                bench::forwarded(&args),
                ["fcfs-micro", "--full", "--out", "d"]
            ),
            other => panic!("unexpected parse: {other:?}"),
        }
        let cli = Cli::try_parse_from(["atomfs", "bench", "all"]);
        match cli.map(|c| c.command) {
            Ok(Command::Bench(args)) => assert_eq!(bench::forwarded(&args), ["all", "--quick"]),
            other => panic!("unexpected parse: {other:?}"),
        }
        let cli = Cli::try_parse_from(["atomfs", "bench", "external", "--systems", "fcfs,pmdk"]);
        match cli.map(|c| c.command) {
            Ok(Command::Bench(args)) => assert_eq!(
                bench::forwarded(&args),
                ["external", "--quick", "--systems", "fcfs,pmdk"]
            ),
            other => panic!("unexpected parse: {other:?}"),
        }
        assert!(Cli::try_parse_from(["atomfs", "bench", "x", "--quick", "--full"]).is_err());
    }

    #[test]
    fn inspect_accepts_json_after_the_subcommand() {
        let cli = Cli::try_parse_from(["atomfs", "inspect", "p.pool", "file", "/a", "--json"]);
        match cli.map(|c| c.command) {
            Ok(Command::Inspect {
                what: Some(InspectWhat::File { path }),
                json: true,
                ..
            }) => assert_eq!(path, "/a"),
            other => panic!("unexpected parse: {other:?}"),
        }
    }
}
