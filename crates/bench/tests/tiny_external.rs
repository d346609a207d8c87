//! The external suite at tiny size inside `cargo test` (CONVENTIONS.md §15: benchmarks
//! cannot rot). Checks the shape of results.json, that every system produced rows and that
//! counted bytes are positive. Never asserts a timing.

use atomfs_bench::suites::{run_suite, Mode, Options};

#[test]
fn external_suite_tiny_run_writes_well_formed_results() {
    let out = std::env::temp_dir().join(format!("atomfs-bench-test-{}", std::process::id()));
    let opts = Options {
        mode: Mode::Tiny,
        out: out.clone(),
        progress: false,
        seed: 3,
        systems: Vec::new(),
    };
    let outcome = run_suite("external", &opts).expect("tiny external run");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&outcome.json_path).expect("read json"))
            .expect("parse json");
    assert_eq!(doc["suite"], "external");
    for key in ["machine", "revision", "config", "rows"] {
        assert!(!doc[key].is_null(), "missing {key}");
    }
    assert!(doc["machine"]["flush"].is_string() && doc["machine"]["cores"].is_u64());
    // Where the emulated NVMM lived and its page size (docs/bench.md).
    let nvmm = &doc["machine"]["nvmm"];
    assert!(
        nvmm["dir"].is_string() && nvmm["fs"].is_string(),
        "machine.nvmm: {nvmm}"
    );
    assert!(
        nvmm["pages"] == "4K" || nvmm["pages"] == "2M",
        "machine.nvmm.pages: {nvmm}"
    );
    let rows = doc["rows"].as_array().expect("rows");
    let mut expected = vec![
        "floor",
        "fcfs",
        "nc",
        "ext4-fsync",
        "ext4-undo",
        "ext4-rename",
    ];
    if atomfs_bench::systems::pmdk::available() {
        expected.push("pmdk");
    }
    for system in expected {
        let mine: Vec<_> = rows.iter().filter(|r| r["system"] == system).collect();
        assert!(
            mine.iter().any(|r| r["metric"] == "tx_latency_us"),
            "{system}: no latency row"
        );
        for r in &mine {
            for key in ["figure", "param", "median", "min", "max", "runs"] {
                assert!(r.get(key).is_some(), "{system}: row without {key}");
            }
            let (min, med, max) = (
                r["min"].as_f64().unwrap_or(-1.0),
                r["median"].as_f64().unwrap_or(-1.0),
                r["max"].as_f64().unwrap_or(-1.0),
            );
            assert!(
                min <= med && med <= max,
                "{system}: min/median/max out of order"
            );
            if r["metric"] == "nvmm_bytes_per_tx" {
                assert!(med > 0.0, "{system}: counted no bytes");
            }
        }
    }
    assert!(
        outcome.table.contains("floor"),
        "ratio table lacks the reference"
    );
    let _ = std::fs::remove_dir_all(&out);
}
