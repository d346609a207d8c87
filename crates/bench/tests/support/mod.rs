//! Shared by the tiny-run tests: run a suite at `--tiny` size and check the stable shape of
//! results.json that users script against (report.rs). Never asserts a timing.

#![allow(dead_code)] // each test file uses part of this

use atomfs_bench::suites::{run_suite, Mode, Options, Outcome};
use atomfs_bench::BenchError;
use serde_json::Value;
use std::path::PathBuf;

/// Run `suite` at tiny size into a fresh directory; the parsed results.json, the outcome
/// and the directory (for the caller to delete).
pub fn try_run_tiny(suite: &str) -> Result<(Value, Outcome, PathBuf), BenchError> {
    let out =
        std::env::temp_dir().join(format!("atomfs-bench-test-{}-{suite}", std::process::id()));
    let opts = Options {
        mode: Mode::Tiny,
        out: out.clone(),
        progress: false,
        seed: 5,
        systems: Vec::new(),
    };
    let outcome = run_suite(suite, &opts)?;
    let text = std::fs::read_to_string(&outcome.json_path).expect("read results.json");
    let doc: Value = serde_json::from_str(&text).expect("parse results.json");
    Ok((doc, outcome, out))
}

pub fn run_tiny(suite: &str) -> (Value, Outcome, PathBuf) {
    try_run_tiny(suite).unwrap_or_else(|e| panic!("tiny {suite}: {e}"))
}

/// Every row has the stable keys; min ≤ median ≤ max; rate and time medians are finite and
/// positive; returns the rows.
pub fn check_shape(doc: &Value, suite: &str) -> Vec<Value> {
    assert_eq!(doc["suite"], suite);
    for key in ["machine", "revision", "config", "rows"] {
        assert!(!doc[key].is_null(), "{suite}: missing {key}");
    }
    let rows = doc["rows"].as_array().expect("rows is a list").clone();
    assert!(!rows.is_empty(), "{suite}: no rows");
    for r in &rows {
        for key in [
            "figure", "system", "param", "metric", "median", "min", "max", "runs",
        ] {
            assert!(r.get(key).is_some(), "{suite}: row without {key}: {r}");
        }
        assert!(r["param"].is_null() || r["param"].is_f64() || r["param"].is_u64());
        let runs = r["runs"].as_array().expect("runs is a list");
        assert!(!runs.is_empty(), "{suite}: row without runs: {r}");
        let (min, med, max) = (
            r["min"].as_f64().expect("min is a number"),
            r["median"].as_f64().expect("median is a number"),
            r["max"].as_f64().expect("max is a number"),
        );
        assert!(
            min <= med && med <= max,
            "{suite}: min/median/max out of order: {r}"
        );
        let metric = r["metric"].as_str().expect("metric is a string");
        if matches!(
            metric,
            "tx_latency_us" | "tx_per_s" | "tx_per_s_norm" | "recovery_s" | "mb_per_s" | "iops"
        ) {
            assert!(
                med.is_finite() && med > 0.0,
                "{suite}: {metric} median not finite and positive: {r}"
            );
        }
    }
    rows
}

/// The systems with rows of `metric`, sorted.
pub fn systems_with(rows: &[Value], metric: &str) -> Vec<String> {
    let mut v: Vec<String> = rows
        .iter()
        .filter(|r| r["metric"] == metric)
        .map(|r| r["system"].as_str().unwrap_or("").to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// (system, why) of every figure's skipped systems in results.json.
pub fn skipped(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for fig in doc["config"]["figures"].as_array().into_iter().flatten() {
        for s in fig["skipped"].as_array().into_iter().flatten() {
            let pair = (
                s["system"].as_str().unwrap_or("").to_string(),
                s["why"].as_str().unwrap_or("").to_string(),
            );
            if !out.contains(&pair) {
                out.push(pair);
            }
        }
    }
    out
}
