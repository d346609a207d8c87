//! The `sqlite` and `fuse` suites at tiny size inside `cargo test` (CONVENTIONS.md §15): the
//! shape of results.json, every configuration's rows (or a stated reason it was skipped, only
//! where this machine lacks what it needs), plots written, and nothing left mounted or in
//! /dev/shm afterwards. Never asserts a timing. Skips with a message (visible with
//! `-- --nocapture`) when libsqlite3, fio, root or FUSE is missing — a failure under
//! `ATOMFS_REQUIRE_ALL=1`.

mod support;

use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;
use support::{check_shape, skipped, systems_with, try_run_tiny};
use test_support::unavailable;

/// The two tests check for leftovers of this process: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Mounts and /dev/shm files this process's bench runs left behind.
fn leftovers() -> Vec<String> {
    let tag = format!("atomfs-bench-{}-", std::process::id());
    let mut found: Vec<String> = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect();
    if let Ok(dir) = std::fs::read_dir("/dev/shm") {
        found.extend(
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&tag)),
        );
    }
    found
}

/// `system` has rows of every metric in `metrics`, or was skipped with a reason (then the
/// reason is printed and returned).
fn rows_or_reason(doc: &Value, rows: &[Value], system: &str, metrics: &[&str]) -> Option<String> {
    if let Some((_, why)) = skipped(doc).into_iter().find(|(s, _)| s == system) {
        assert!(!why.is_empty(), "{system} skipped without a reason");
        unavailable(system, &why);
        return Some(why);
    }
    for m in metrics {
        assert!(
            systems_with(rows, m).iter().any(|s| s == system),
            "{system}: no {m} rows and not skipped"
        );
    }
    None
}

fn vfs_buildable() -> bool {
    Path::new("/usr/include/sqlite3ext.h").exists()
        && std::process::Command::new("cc")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn sqlite_tiny_measures_every_configuration_at_both_value_sizes() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !atomfs_bench::systems::sqlite::available() {
        unavailable(
            "sqlite suite",
            "atomfs-bench was built without libsqlite3 (scripts/install-deps.sh)",
        );
        return;
    }
    let (doc, outcome, out) = try_run_tiny("sqlite").unwrap_or_else(|e| panic!("tiny sqlite: {e}"));
    let rows = check_shape(&doc, "sqlite");
    let metrics = ["tx_per_s", "tx_latency_us"];
    for system in [
        "sqlite-wal-ext4",
        "sqlite-rollback-ext4",
        "sqlite-wal-tmpfs",
        "sqlite-rollback-tmpfs",
        "sqlite-nc-tmpfs",
    ] {
        assert_eq!(rows_or_reason(&doc, &rows, system, &metrics), None);
    }
    let atomfs = rows_or_reason(&doc, &rows, "atomfs-sqlite", &metrics);
    assert!(
        atomfs.is_none() || !vfs_buildable(),
        "atomfs-sqlite skipped although cc and sqlite3ext.h are here: {atomfs:?}"
    );
    for r in rows.iter().filter(|r| r["system"] == "sqlite-wal-tmpfs") {
        let p = r["param"].as_f64().expect("param is the max value size");
        assert!(p == 4096.0 || p == 16384.0, "unexpected x value {p}");
    }
    if atomfs.is_none() {
        // Every system's throughput divided by atomfs-sqlite's, run by run.
        assert_eq!(
            systems_with(&rows, "tx_per_s_norm"),
            systems_with(&rows, "tx_per_s")
        );
    }
    assert_eq!(outcome.plots.len(), 3, "one plot per metric");
    assert!(outcome.plots.iter().all(|p| p.is_file()));
    assert!(outcome.table.contains("system / atomfs-sqlite"));
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn fuse_tiny_runs_every_job_on_every_target_and_unmounts() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !is_root() {
        unavailable("fuse suite", "needs root (ext4 loop mount, FUSE mount)");
        return;
    }
    if let Err(e) = atomfs_bench::systems::fio::version() {
        unavailable("fuse suite", &e.to_string());
        return;
    }
    let (doc, outcome, out) = try_run_tiny("fuse").unwrap_or_else(|e| panic!("tiny fuse: {e}"));
    let rows = check_shape(&doc, "fuse");
    for (figure, metric) in [
        ("fuse-randwrite", "iops"),
        ("fuse-seqwrite", "mb_per_s"),
        ("fuse-seqread", "mb_per_s"),
    ] {
        let mine: Vec<Value> = rows
            .iter()
            .filter(|r| r["figure"] == figure)
            .cloned()
            .collect();
        assert!(mine
            .iter()
            .all(|r| r["metric"] == metric && r["param"].is_null()));
        for system in ["ext4", "tmpfs"] {
            assert_eq!(rows_or_reason(&doc, &mine, system, &[metric]), None);
        }
        let atomfs = rows_or_reason(&doc, &mine, "atomfs-fuse", &[metric]);
        let cli = atomfs_bench::systems::fuse_mount::cli_binary();
        assert!(
            atomfs.is_none() || !Path::new("/dev/fuse").exists() || cli.is_err(),
            "atomfs-fuse skipped although /dev/fuse and the atomfs command are here: {atomfs:?}"
        );
    }
    assert_eq!(outcome.plots.len(), 3, "one plot per job");
    assert!(outcome.table.contains("system / ext4"));
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
    let _ = std::fs::remove_dir_all(&out);
}
