//! `--systems`: a figure runs only the named systems and its reference; an unknown name or
//! a suite with a fixed set of systems is a clear error before anything runs. Never asserts
//! a timing.

use atomfs_bench::suites::{run_suite, Mode, Options};
use atomfs_bench::BenchError;
use std::collections::BTreeSet;

fn opts(tag: &str, systems: &[&str]) -> Options {
    Options {
        mode: Mode::Tiny,
        out: std::env::temp_dir().join(format!(
            "atomfs-bench-test-{}-filter-{tag}",
            std::process::id()
        )),
        progress: false,
        seed: 5,
        systems: systems.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn only_the_named_systems_and_the_reference_run() {
    let o = opts("micro", &["fcfs"]);
    let outcome = run_suite("fcfs-micro", &o).expect("tiny fcfs-micro with --systems fcfs");
    let systems: BTreeSet<String> = outcome.json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["system"].as_str().expect("system").to_string())
        .collect();
    // nc is the figures' reference: kept so that ratios exist.
    assert_eq!(
        systems,
        BTreeSet::from(["fcfs".to_string(), "nc".to_string()])
    );
    assert_eq!(outcome.json["config"]["systems"][0], "fcfs");
    let _ = std::fs::remove_dir_all(&o.out);
}

#[test]
fn unknown_systems_and_fixed_suites_are_refused() {
    let o = opts("unknown", &["fcfs", "nope"]);
    match run_suite("fcfs-micro", &o) {
        Err(BenchError::Invalid(m)) => {
            assert!(m.contains("no system nope") && m.contains("fg-wal"), "{m}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("an unknown system ran"),
    }
    let o = opts("fixed", &["fcfs"]);
    match run_suite("recovery", &o) {
        Err(BenchError::Invalid(m)) => assert!(m.contains("--systems"), "{m}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a fixed suite took --systems"),
    }
    let _ = std::fs::remove_dir_all(&o.out);
}
