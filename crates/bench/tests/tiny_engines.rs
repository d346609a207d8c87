//! The `engines` suite at tiny size inside `cargo test` (CONVENTIONS.md §15): the stable
//! shape of results.json, every workload run on every engine of the registry and on ext4,
//! where each store lived, the "which engine for which workload" verdict derived from the
//! rows, plots written and nothing left in /dev/shm; and the adapters' writes land where a
//! read finds them. Never asserts a timing.
//!
//! The SQLite workload needs libsqlite3 (and, for the engines, the atomfs VFS): without them
//! its systems are skipped with a reason, which fails the test when `ATOMFS_REQUIRE_ALL=1`.

mod support;

use atomfs_bench::ramdisk::Ext4Disk;
use atomfs_bench::systems::engine_mix::EngineMix;
use atomfs_bench::systems::ext4_mix::Ext4Mix;
use atomfs_bench::systems::mix::{MixShape, MixSystem, NsOp};
use atomfs_bench::workload::Write;
use serde_json::Value;
use std::rc::Rc;
use support::{check_shape, run_tiny};
use test_support::require_all;

const WORKLOADS: [&str; 5] = [
    "two-file-tx",
    "overwrite-4k",
    "append",
    "sqlite-update",
    "namespace",
];

/// Every engine of the registry, and ext4, sorted.
fn expected_systems() -> Vec<String> {
    let mut v: Vec<String> = engines::ENGINES
        .iter()
        .map(|e| e.name().to_string())
        .chain(["ext4".to_string()])
        .collect();
    v.sort();
    v
}

fn systems_of(rows: &[Value], figure: &str, metric: &str) -> Vec<String> {
    let mut v: Vec<String> = rows
        .iter()
        .filter(|r| r["figure"] == figure && r["metric"] == metric)
        .map(|r| r["system"].as_str().unwrap_or("").to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

fn figure_config<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["config"]["figures"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == id))
        .unwrap_or_else(|| panic!("no config of figure {id}"))
}

/// Each engine's medium names its pool file in the scratch directory, and a home directory
/// on the ext4 disk when the engine takes one.
fn check_media(fig: &Value) {
    let shm = atomfs_bench::scratch_base().display().to_string();
    for s in fig["systems"].as_array().expect("systems") {
        let (name, medium) = (
            s["name"].as_str().unwrap_or(""),
            s["medium"].as_str().unwrap_or(""),
        );
        assert!(!medium.is_empty(), "{name}: no medium");
        if name == "ext4" {
            continue;
        }
        let engine = engines::by_name(name).expect("a registered engine");
        assert!(
            medium.contains(&format!("pool file {shm}/")),
            "{name}: {medium}"
        );
        let takes_home = engine.options().iter().any(|o| o.key == "home");
        assert_eq!(medium.contains("home directory "), takes_home, "{medium}");
    }
}

#[test]
fn engines_suite_tiny_runs_every_workload_on_every_engine() {
    let (doc, outcome, out) = run_tiny("engines");
    let rows = check_shape(&doc, "engines");
    let all = expected_systems();
    for id in WORKLOADS {
        let fig = figure_config(&doc, id);
        let skipped: Vec<&Value> = fig["skipped"].as_array().expect("skipped").iter().collect();
        for s in &skipped {
            let why = s["why"].as_str().unwrap_or("");
            assert!(!why.starts_with("FAILED"), "{id}: a system failed: {s}");
            assert_eq!(id, "sqlite-update", "only SQLite may be missing here: {s}");
            assert!(
                !s["why"].as_str().unwrap_or("").is_empty(),
                "no reason: {s}"
            );
            eprintln!("SKIP {id} {}: {}", s["system"], s["why"]);
            assert!(!require_all(), "ATOMFS_REQUIRE_ALL=1 and {s} skipped");
        }
        let ran: Vec<String> = all
            .iter()
            .filter(|n| !skipped.iter().any(|s| s["system"] == n.as_str()))
            .cloned()
            .collect();
        for metric in ["tx_per_s", "tx_latency_us", "cpu_us_per_tx"] {
            assert_eq!(systems_of(&rows, id, metric), ran, "{id} {metric}");
        }
        if ran.iter().any(|n| n == "ext4") {
            assert_eq!(systems_of(&rows, id, "tx_per_s_norm"), ran, "{id}");
        }
        assert_eq!(fig["reference"], "ext4");
        check_media(fig);
    }
    // The verdict: one line per workload an engine ran, naming an engine, never ext4.
    let verdict = doc["config"]["verdict"].as_array().expect("verdict list");
    assert!(verdict.len() >= WORKLOADS.len() - 1, "{verdict:?}");
    for v in verdict {
        let fastest = v["fastest"].as_str().expect("fastest");
        assert!(engines::by_name(fastest).is_ok(), "{v}");
        let per_s = v["tx_per_s"].as_f64().expect("tx_per_s");
        let best = rows
            .iter()
            .filter(|r| r["figure"] == v["workload"] && r["metric"] == "tx_per_s")
            .filter(|r| r["system"] != "ext4")
            .filter_map(|r| r["median"].as_f64())
            .fold(f64::MIN, f64::max);
        assert_eq!(
            per_s, best,
            "the fastest engine has the highest median: {v}"
        );
    }
    assert!(outcome.table.contains("which engine for which workload"));
    assert!(outcome.table.contains("system / ext4"));
    assert!(outcome.plots.iter().all(|p| p.is_file()));
    assert!(outcome
        .plots
        .iter()
        .any(|p| p.to_string_lossy().contains("two-file-tx")));
    let tag = format!("atomfs-bench-{}-", std::process::id());
    let left: Vec<String> = std::fs::read_dir(atomfs_bench::scratch_base())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&tag) && n.contains("engines"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&out);
}

const SHAPE: MixShape = MixShape {
    tx_files: 3,
    tx_file_len: 64 << 10,
    overwrite_len: 256 << 10,
    append_len_max: 10_000,
};

/// Two-file updates read back; overwrites, appends (through a rotation) and the namespace
/// mix succeed where they must and fail where the name is wrong.
fn round_trip(sys: &mut dyn MixSystem) {
    sys.setup(SHAPE).expect("setup");
    let a: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
    let w = |file, off, data| Write { file, off, data };
    sys.two_file_tx(w(0, 4000, &a), w(2, 60_000, &b))
        .expect("two-file tx");
    let mut got = vec![0u8; a.len()];
    sys.read_tx_file(0, 4000, &mut got).expect("read a");
    assert_eq!(got, a, "{}", sys.name());
    let mut got = vec![0u8; b.len()];
    sys.read_tx_file(2, 60_000, &mut got).expect("read b");
    assert_eq!(got, b, "{}", sys.name());
    assert!(
        sys.two_file_tx(w(0, 0, &a), w(7, 0, &b)).is_err(),
        "no file 7"
    );
    sys.overwrite(8192, &a[..2048]).expect("overwrite");
    for _ in 0..10 {
        sys.append(&a).expect("append (rotating every 3 records)");
    }
    for op in [
        NsOp::Create { name: 1, len: 100 },
        NsOp::Create { name: 2, len: 0 },
        NsOp::Rename { from: 1, to: 3 },
        NsOp::Rename { from: 3, to: 2 },
    ] {
        sys.namespace(op).expect("namespace op");
    }
    let missing = sys.namespace(NsOp::Unlink { name: 1 });
    assert!(missing.is_err(), "{}: file 1 was renamed away", sys.name());
    sys.namespace(NsOp::Unlink { name: 2 }).expect("unlink");
    sys.namespace(NsOp::Create { name: 4, len: 4096 })
        .expect("create");
    sys.namespace_clear().expect("clear");
    sys.namespace(NsOp::Create { name: 4, len: 1 })
        .expect("the name is free again after clear");
}

#[test]
fn every_mix_system_reads_back_what_it_wrote() {
    let disk = Rc::new(Ext4Disk::create(64 << 20).expect("disk"));
    for &engine in engines::ENGINES {
        round_trip(&mut EngineMix::new(engine, disk.clone()));
    }
    round_trip(&mut Ext4Mix::new(disk.clone()));
}
