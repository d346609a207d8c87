//! Process-kill torture with the fixture stores: the test binary re-runs itself as the child
//! (`ATOMFS_TORTURE_CHILD=1`), which runs a workload on a pool file in /dev/shm; the parent
//! kills it at random and checks the recovered pool. The correct fixture must pass; the
//! in-place fixture (which tears its only copy when killed mid-write) must be caught.

use crash::fixtures::{flaw_by_name, Flaw, ShadowTarget};
use crash::torture::{run_child, torture, TortureConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The child side: does nothing unless started by the parent below.
#[test]
fn torture_child_entry() {
    let (Ok(engine), Ok(pool), Ok(seed)) = (
        std::env::var("ATOMFS_TORTURE_ENGINE"),
        std::env::var("ATOMFS_TORTURE_POOL"),
        std::env::var("ATOMFS_TORTURE_SEED"),
    ) else {
        return;
    };
    let flaw = flaw_by_name(&engine).unwrap_or_else(|| panic!("unknown fixture {engine}"));
    let seed: u64 = seed.parse().unwrap_or_else(|_| panic!("bad seed {seed}"));
    if let Err(e) = run_child(&ShadowTarget::new(flaw), Path::new(&pool), seed) {
        panic!("child: {e}");
    }
}

fn child_command(engine: &'static str) -> impl Fn(&Path, u64) -> Command {
    move |pool: &Path, seed: u64| {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
        let mut cmd = Command::new(exe);
        cmd.args([
            "--exact",
            "torture_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ATOMFS_TORTURE_ENGINE", engine)
        .env("ATOMFS_TORTURE_POOL", pool)
        .env("ATOMFS_TORTURE_SEED", seed.to_string());
        cmd
    }
}

/// Where the torture puts its pool files: /dev/shm when it is a writable tmpfs (as the
/// engines' torture cases do).
fn pool_dir() -> PathBuf {
    pmem::mapped::scratch_dir()
}

#[test]
fn correct_fixture_survives_kills() {
    let cfg = TortureConfig {
        seed: 7,
        rounds: 12,
        dir: pool_dir(),
        kill_after_ms_max: 300,
        ..Default::default()
    };
    let report = torture(
        &ShadowTarget::new(Flaw::None),
        &child_command("fixture-shadow"),
        &cfg,
    );
    eprintln!("{}", report.summary());
    assert!(
        report.kills >= 6,
        "too few children were killed mid-run: {}",
        report.kills
    );
    assert!(
        report.images >= 6,
        "too few recovered pools checked: {}",
        report.images
    );
    assert!(
        report.violations.is_empty(),
        "first: {}",
        report.violations[0]
    );
}

#[test]
fn lazy_fixture_is_caught_by_kills() {
    // The lazy fixture writes one change in four: most of the time acknowledged units are
    // not durable, so a kill loses some.
    let cfg = TortureConfig {
        seed: 9,
        rounds: 30,
        dir: pool_dir(),
        kill_after_ms_max: 300,
        ..Default::default()
    };
    let report = torture(
        &ShadowTarget::new(Flaw::LazyCommit),
        &child_command("fixture-lazy"),
        &cfg,
    );
    eprintln!("{}", report.summary());
    assert!(report.images > 0, "no recovered pool was checked");
    assert!(
        !report.violations.is_empty(),
        "acknowledged-but-lost units went unnoticed"
    );
}

#[test]
fn correct_fixture_survives_kills_on_one_pool() {
    // One pool across rounds: every child first recovers what the previous one was killed
    // on (kills also land inside recovery), then continues.
    let cfg = TortureConfig {
        seed: 11,
        rounds: 12,
        dir: pool_dir(),
        kill_after_ms_max: 200,
        continue_pool: true,
        early_kill_percent: 30,
    };
    let report = torture(
        &ShadowTarget::new(Flaw::None),
        &child_command("fixture-shadow"),
        &cfg,
    );
    eprintln!("{}", report.summary());
    assert!(
        report.images >= 6,
        "too few pools checked: {}",
        report.images
    );
    assert!(
        report.violations.is_empty(),
        "first: {}",
        report.violations[0]
    );
}
