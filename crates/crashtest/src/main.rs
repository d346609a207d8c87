//! `atomfs-crashtest`: the crash harness (crates/testing/crash, docs/crash-harness.md) on an
//! engine's crash targets. `atomfs crashtest` runs it (it is built next to `atomfs`); it
//! starts itself again as the victim of process kills (`atomfs-crashtest child`).

mod args;
mod run;
mod table;
mod targets;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "atomfs-crashtest",
    version,
    about = "Crash-test an atomfs engine: crash images at every fence of the simulator, then SIGKILLed processes on real pool files. Exit 1 on any violation.",
    args_conflicts_with_subcommands = true,
    after_help = format!("Engines: {}.", args::ENGINE_NAMES)
)]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
    #[command(flatten)]
    args: args::CrashtestArgs,
}

#[derive(Subcommand, Debug)]
enum Child {
    /// (internal) The torture victim.
    #[command(hide = true)]
    Child(run::ChildArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.child {
        Some(Child::Child(args)) => run::child(args),
        None => run::run(cli.args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("atomfs crashtest: {message}");
            ExitCode::from(1)
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

    /// What `atomfs crashtest` forwards parses back to the same options.
    #[test]
    fn forwarded_options_parse_back() {
        for line in [
            "",
            "--engine mmio-undo --kills 0 --workloads 3",
            "--long --images 50000 --kills 500 --jobs 2 --seed 7 --dir /tmp/x",
            "--units 5 --threads 3",
        ] {
            let words = std::iter::once("atomfs-crashtest").chain(line.split_whitespace());
            let cli = Cli::try_parse_from(words).unwrap_or_else(|e| panic!("{line}: {e}"));
            let again = std::iter::once("atomfs-crashtest".into()).chain(cli.args.forwarded());
            let back = Cli::try_parse_from(again).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(back.args, cli.args, "{line}");
            assert!(back.child.is_none());
        }
    }
}
