//! `atomfs crashtest`: runs the `atomfs-crashtest` binary (crates/crashtest), which is built
//! next to `atomfs`. It is spawned rather than linked, as `atomfs bench` spawns atomfs-bench,
//! so that the `atomfs` tool carries neither the crash harness (a testing crate) nor the
//! engines' crash targets; the options are parsed here too (the same file) so that
//! `atomfs crashtest --help` lists them and a typo fails before anything runs.

use crate::{CmdResult, Failure};
use std::path::PathBuf;
use std::process::ExitCode;

/// The options of `atomfs crashtest`: atomfs-crashtest's own list, compiled in here too.
mod options {
    include!("../../../crashtest/src/args.rs");
}

pub use options::CrashtestArgs;

/// The text after `atomfs crashtest --help`'s options: the engines, then examples.
pub fn after_help() -> String {
    format!(
        "Engines: {} (pool-nc has no consistency and must fail).\n\nExamples:\n  \
         atomfs crashtest\n  \
         atomfs crashtest --engine pool-scsp --workloads 100 --kills 200\n  \
         atomfs crashtest --engine mmio-undo --workloads 20\n  \
         atomfs crashtest --engine pool-nc --kills 0   # shows the violations of no-consistency mode\n  \
         atomfs crashtest --long                       # 1,000,000 crash images + 10,000 kills, summary table\n  \
         atomfs crashtest --long --images 50000 --kills 500 --jobs 2",
        options::ENGINE_NAMES
    )
}

/// The `atomfs-crashtest` binary: `ATOMFS_CRASHTEST` if set, else next to this executable,
/// else from PATH.
fn crashtest_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("ATOMFS_CRASHTEST") {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("atomfs-crashtest")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("atomfs-crashtest"))
}

/// Run atomfs-crashtest with `args`; its exit status is ours (it prints its own report and
/// errors: 1 for violations or a bad option).
pub fn run(args: CrashtestArgs) -> CmdResult {
    let bin = crashtest_binary();
    let status = std::process::Command::new(&bin)
        .args(args.forwarded())
        .status()
        .map_err(|e| {
            Failure::new(format!(
                "cannot run {}: {e} (build it with `cargo build --release -p atomfs-crashtest`, \
                 or set ATOMFS_CRASHTEST)",
                bin.display()
            ))
        })?;
    match status.code() {
        Some(code) => Ok(ExitCode::from(u8::try_from(code).unwrap_or(1))),
        None => Err(Failure::new("crashtest was killed by a signal")),
    }
}
