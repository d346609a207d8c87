// The options of `atomfs crashtest`, in a file of its own so that the `atomfs` command parses
// and forwards the same options (crates/frontends/cli/src/crashtest.rs includes this file)
// without linking the harness. A module of atomfs-crashtest (main.rs); needs only clap.

/// Engine names `--engine` takes (each engine's crash_target::NAMES; targets.rs checks it).
pub const ENGINE_NAMES: &str = "pool (every mode but NC), pool-fcfs, pool-nc, pool-fgwal, pool-scsp, pool-soc, pool-sync, mmio (every policy), mmio-hybrid, mmio-undo, mmio-redo, journal (every variant), journal-njs, journal-no-delta, journal-no-gc, journal-all-journal, journal-no-wear, cache (every mode), cache-lazy, cache-through, cache-collide, remap (every mode), remap-reflink, remap-copy";

#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct CrashtestArgs {
    /// An engine, run in every mode: pool (fcfs, fgwal, scsp, soc, sync), mmio (hybrid, undo,
    /// redo), journal (njs, no-delta, no-gc, all-journal, no-wear), remap (reflink, copy),
    /// cache (lazy, through, collide); or one mode: pool-fcfs, pool-nc, pool-fgwal, pool-scsp,
    /// pool-soc, pool-sync, mmio-hybrid, mmio-undo, mmio-redo, journal-njs, journal-no-delta,
    /// journal-no-gc, journal-all-journal, journal-no-wear, remap-reflink, remap-copy,
    /// cache-lazy, cache-through, cache-collide.
    /// Workloads and kills are per mode.
    #[arg(long, default_value = "pool")]
    pub engine: String,
    /// Simulated workloads (each checked at every fence of its run); default 10, or no limit
    /// with --images or --long.
    #[arg(long)]
    pub workloads: Option<u64>,
    /// Start no new workload once this many crash images are checked (default: no limit;
    /// 1,000,000 with --long).
    #[arg(long)]
    pub images: Option<u64>,
    /// Units (transactions, legacy calls, O_ATOMIC commits) per workload and thread (default
    /// 24; --long runs a mix of workload kinds unless --units or --threads is given).
    #[arg(long)]
    pub units: Option<usize>,
    /// Threads per simulated workload (default 1).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Child processes to SIGKILL on real pool files (0: none; default 20, 10,000 with --long).
    #[arg(long)]
    pub kills: Option<u64>,
    /// First seed (workload i of a kind uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads for workloads and torture streams (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// The long run: 1,000,000 crash images over a mix of workload kinds and 10,000 kills
    /// (--images, --workloads, --kills override), with a summary table.
    #[arg(long)]
    pub long: bool,
    /// Directory of the torture pools (default /dev/shm).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

impl CrashtestArgs {
    /// The command line that gives these options to atomfs-crashtest (what `atomfs
    /// crashtest` runs; atomfs-crashtest itself uses it in its tests only).
    #[allow(dead_code)]
    pub fn forwarded(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        let mut pair = |flag: &str, value: std::ffi::OsString| {
            v.push(flag.into());
            v.push(value);
        };
        pair("--engine", self.engine.clone().into());
        pair("--seed", self.seed.to_string().into());
        let numbers = [
            ("--workloads", self.workloads),
            ("--images", self.images),
            ("--units", self.units.map(|n| n as u64)),
            ("--threads", self.threads.map(|n| n as u64)),
            ("--kills", self.kills),
            ("--jobs", self.jobs.map(|n| n as u64)),
        ];
        for (flag, value) in numbers {
            if let Some(n) = value {
                pair(flag, n.to_string().into());
            }
        }
        if let Some(dir) = &self.dir {
            pair("--dir", dir.clone().into_os_string());
        }
        if self.long {
            v.push("--long".into());
        }
        v
    }
}
