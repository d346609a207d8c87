//! `atomfs`: create, check, inspect, mount and demonstrate atomfs pools.

mod args;
mod bench;
mod cache_cmds;
mod check;
mod crashtest;
mod demo;
mod engine;
mod files;
mod mount;
mod poolview;
mod render;
mod serve;
mod size;
mod workload;

use args::parse_mode;
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
    /// Open a store whose pool file or home directory another user owns (refused otherwise,
    /// as ssh refuses another user's key file).
    #[arg(long, global = true)]
    allow_foreign_owner: bool,
    /// Follow a symbolic link at the pool path (not followed otherwise).
    #[arg(long, global = true)]
    follow_symlinks: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a new, empty store (its pool file, and for a host-file engine the link to its
    /// home directory).
    #[command(
        after_help = "Engines: pool (FCFS, files in the pool file; the default), mmio (Libnvmmio, files in --home DIR, logs in the pool file). Options (-o key=value,...): each engine's, listed by `atomfs engines`.\n\nExamples:\n  atomfs mkfs /dev/shm/a.pool --size 512M\n  atomfs mkfs big.pool --size 4G --inodes 100000\n  atomfs mkfs /dev/shm/m.pool --engine mmio --home /srv/data --size 1G\n  atomfs mkfs /dev/shm/nc.pool --size 64M -o mode=nc"
    )]
    Mkfs {
        /// Path of the pool file to create (must not exist unless --force).
        pool: PathBuf,
        /// Pool size: bytes, or with a suffix K, M, G, T (powers of 1024), e.g. 512M, 1.5G.
        #[arg(long, short = 's')]
        size: String,
        /// The engine (`atomfs engines` lists them).
        #[arg(long, default_value = "pool")]
        engine: String,
        /// Home directory of the files, for engines that keep them on a host file system.
        #[arg(long)]
        home: Option<PathBuf>,
        /// Number of inodes (files and directories) the pool can hold (pool engine).
        #[arg(long)]
        inodes: Option<u64>,
        /// Keep a crc32c of every file data block, checked on every read and by fsck (pool
        /// engine; the same as -o data_checksums=true).
        #[arg(long)]
        data_checksums: bool,
        /// Engine options, key=value (repeatable or comma separated).
        #[arg(short = 'o')]
        options: Vec<String>,
        /// Replace an existing store (refused while any process has it open).
        #[arg(long)]
        force: bool,
        /// Permission bits of the new pool file, in octal (default 0600, owner only; a new
        /// home directory gets the matching x bits: 0700).
        #[arg(long, value_parser = parse_mode)]
        mode: Option<u32>,
    },
    /// List the engines of this build and the options each takes.
    #[command(after_help = "Example:\n  atomfs engines\n  atomfs engines --json")]
    Engines {
        #[arg(long)]
        json: bool,
    },
    /// Show a pool's engine, geometry, usage and counters (never writes the pool).
    #[command(
        after_help = "Examples:\n  atomfs info /dev/shm/a.pool\n  atomfs info /dev/shm/a.pool --json | jq .statfs"
    )]
    Info {
        pool: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check a pool's consistency, read-only: recovery is simulated in memory and reported
    /// (what it would undo, keep and drop), nothing is written. With --repair: recover, then
    /// repair what can be repaired (damaged inodes quarantined into /lost+found), reporting
    /// every change. Exit status: 0 clean, 1 problems found or left (or unreadable pool).
    #[command(
        after_help = "Examples:\n  atomfs fsck /dev/shm/a.pool && echo clean\n  atomfs fsck /dev/shm/a.pool --json\n  atomfs fsck --repair /dev/shm/a.pool"
    )]
    Fsck {
        pool: PathBuf,
        #[arg(long)]
        json: bool,
        /// Recover and repair the pool (writes it; without this flag fsck never writes).
        #[arg(long)]
        repair: bool,
    },
    /// Dump the engine's internal state: the log, one file's block map, the pending blocks.
    /// Never writes the pool (recovery is simulated in memory).
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
    /// Copy every readable file of a (possibly damaged) pool into a host directory, never
    /// writing the pool; reports what could not be read (exit status 1 if anything).
    #[command(after_help = "Example:\n  atomfs salvage /dev/shm/a.pool ./rescued")]
    Salvage {
        pool: PathBuf,
        /// Directory to copy into (created; must be empty if it exists).
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Run crash recovery on a pool and report what was undone and redone.
    #[command(
        after_help = "Examples:\n  atomfs recover /dev/shm/a.pool\n  atomfs recover /dev/shm/c.pool --prefer home"
    )]
    Recover {
        pool: PathBuf,
        #[arg(long)]
        json: bool,
        /// Cache stores: a home file changed behind the cache while it held unwritten
        /// chunks of it — write the cache's copy home (pm) or keep the home file (home).
        #[arg(long, value_enum)]
        prefer: Option<cache_cmds::PreferArg>,
    },
    /// Write every unwritten chunk of a cache store home, the home files synced: other
    /// readers of the home directory then see the latest data.
    #[command(after_help = "Example:\n  atomfs flush /dev/shm/c.pool")]
    Flush {
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
    /// Serve a store to other processes: this process owns it, and every front end that
    /// opens it elsewhere (CLI, C API, shim, SQLite VFS, Python, Rust) becomes its client
    /// over a Unix socket beside the pool (`POOL.sock`). Ctrl-C or SIGTERM stops serving and
    /// closes the store. See docs/serve.md.
    #[command(
        after_help = "Example:\n  atomfs serve /dev/shm/app.pool &\n  atomfs put /dev/shm/app.pool notes.txt /notes.txt   # a client of the server"
    )]
    Serve {
        pool: PathBuf,
        /// Listen here instead of beside the pool (clients then connect only when told).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The demo: atomic two-file updates, a SIGKILL mid-transaction, recovery, verification.
    #[command(after_help = "Example:\n  atomfs demo --seconds 3 --files 64")]
    Demo(demo::DemoArgs),
    /// (internal) The demo's crash victim.
    #[command(hide = true)]
    DemoChild(demo::ChildArgs),
    /// Crash-test an engine with the crash harness: crash images at every fence of the
    /// simulator, then SIGKILLed processes on real pool files. Exit 1 on any violation (runs
    /// the atomfs-crashtest binary).
    #[command(
        after_help = crashtest::after_help()
    )]
    Crashtest(crashtest::CrashtestArgs),
    /// Reproduce the seeds' evaluations (FCFS Figs. 7-11, Libnvmmio, SQLite, FUSE) and the
    /// external baselines on this machine: results.json, PNG plots and a ratio table (runs
    /// the atomfs-bench binary).
    #[command(after_help = bench::after_help())]
    Bench(bench::BenchArgs),
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

/// The access rules reach the engine registry (and every program this one starts: the mount
/// server, the crash test's children) through the environment it reads.
fn set_access(cli: &Cli) {
    if cli.allow_foreign_owner {
        std::env::set_var("ATOMFS_ALLOW_FOREIGN_OWNER", "1");
    }
    if cli.follow_symlinks {
        std::env::set_var("ATOMFS_FOLLOW_SYMLINKS", "1");
    }
    if let Command::Mkfs {
        mode: Some(mode), ..
    } = &cli.command
    {
        std::env::set_var("ATOMFS_MODE", format!("{mode:o}"));
    }
}

fn run(cli: Cli) -> CmdResult {
    set_access(&cli);
    use Command::*;
    match cli.command {
        Mkfs {
            pool,
            size,
            engine,
            home,
            inodes,
            data_checksums,
            options,
            force,
            mode: _,
        } => engine::mkfs(engine::MkfsArgs {
            pool: &pool,
            engine: &engine,
            size: &size,
            inodes,
            data_checksums,
            home: home.as_deref(),
            options: &options,
            force,
        }),
        Engines { json } => engine::list_engines(json),
        Info { pool, json } => check::info(&pool, json),
        Fsck { pool, json, repair } => check::fsck(&pool, json, repair),
        Inspect { pool, what, json } => check::inspect(&pool, what, json),
        Salvage { pool, dir, json } => check::salvage(&pool, &dir, json),
        Recover {
            pool,
            json,
            prefer: None,
        } => engine::recover(&pool, json),
        Recover {
            pool,
            json,
            prefer: Some(prefer),
        } => cache_cmds::recover_prefer(&pool, json, prefer),
        Flush { pool, json } => cache_cmds::flush(&pool, json),
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
        Serve { pool, socket } => serve::run(&pool, socket.as_deref()),
        Demo(args) => demo::run(args),
        DemoChild(args) => demo::child(args),
        Crashtest(args) => crashtest::run(args),
        Bench(args) => bench::run(args),
    }
}

/// Printing commands die quietly of SIGPIPE when their reader goes away (`| head`), as
/// other Unix tools do, instead of failing a print with EPIPE. Not for the mount server and
/// the internal children, whose stdout may outlive its reader.
fn quiet_on_closed_pipe(command: &Command) {
    if matches!(command, Command::Mount { .. } | Command::DemoChild(_)) {
        return;
    }
    // SAFETY: restoring the default disposition of SIGPIPE at start, before any thread is
    // spawned; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    quiet_on_closed_pipe(&cli.command);
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
