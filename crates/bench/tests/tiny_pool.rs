//! The pool engine's suites (FCFS seed §VI) at tiny size inside `cargo test`
//! (CONVENTIONS.md §15): the shape of results.json users script against, every system's
//! rows, plots written, bytes counted. Never asserts a timing.

mod support;

use atomfs_bench::system::TwoFileUpdate;
use atomfs_bench::systems::pool::PoolSystem;
use atomfs_bench::workload::Write;
use serde_json::Value;
use support::{check_shape, run_tiny, systems_with};

fn median(rows: &[Value], system: &str, metric: &str) -> f64 {
    rows.iter()
        .find(|r| r["system"] == system && r["metric"] == metric)
        .and_then(|r| r["median"].as_f64())
        .unwrap_or_else(|| panic!("no {metric} row for {system}"))
}

#[test]
fn fcfs_micro_tiny_results_have_the_stable_shape_and_plots() {
    let (doc, outcome, out) = run_tiny("fcfs-micro");
    let rows = check_shape(&doc, "fcfs-micro");
    let want = ["fcfs", "fg-wal", "nc", "scsp"];
    assert_eq!(systems_with(&rows, "tx_latency_us"), want);
    assert_eq!(systems_with(&rows, "nvmm_bytes_per_tx"), want);
    for s in want {
        let total = median(&rows, s, "nvmm_bytes_per_tx");
        let fg = median(&rows, s, "nvmm_fg_bytes_per_tx");
        let ckpt = median(&rows, s, "nvmm_ckpt_bytes_per_tx");
        assert!(total > 0.0, "{s}: counted no bytes");
        assert!(fg <= total && ckpt <= total, "{s}: parts exceed the total");
    }
    // FCFS redo-logs into pending blocks and checkpoints them; NC writes in place.
    assert!(median(&rows, "fcfs", "nvmm_ckpt_bytes_per_tx") > 0.0);
    assert_eq!(median(&rows, "nc", "nvmm_ckpt_bytes_per_tx"), 0.0);
    assert!(outcome.plots.iter().all(|p| p.is_file()));
    assert!(outcome
        .plots
        .iter()
        .any(|p| p.ends_with("fcfs-micro_tx_latency_us.png")));
    assert!(outcome.table.contains("fcfs") && outcome.table.contains("system / nc"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn throughput_suites_tiny_have_every_system_and_normalized_rows() {
    for (suite, systems) in [
        ("fcfs-value-size", &["fcfs", "fg-wal", "nc", "scsp"][..]),
        ("fcfs-idle", &["fcfs", "nc", "soc", "sync"][..]),
        ("fcfs-latency", &["fcfs", "fg-wal", "nc", "scsp"][..]),
        ("fcfs-threads", &["fcfs", "nc", "soc"][..]),
    ] {
        let (doc, _, out) = run_tiny(suite);
        let rows = check_shape(&doc, suite);
        assert_eq!(systems_with(&rows, "tx_per_s"), systems, "{suite}");
        assert_eq!(systems_with(&rows, "tx_per_s_norm"), systems, "{suite}");
        let params: Vec<f64> = rows.iter().filter_map(|r| r["param"].as_f64()).collect();
        assert!(params.len() >= 2, "{suite}: fewer than two x values");
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn recovery_and_floor_tiny() {
    let (doc, _, out) = run_tiny("recovery");
    let rows = check_shape(&doc, "recovery");
    assert_eq!(systems_with(&rows, "recovery_s"), ["fcfs", "fcfs-ir"]);
    // The x axis is the measured log size; more transactions leave more log.
    let mut sizes: Vec<f64> = rows.iter().filter_map(|r| r["param"].as_f64()).collect();
    sizes.dedup();
    assert!(
        sizes.len() == 2 && sizes[0] < sizes[1],
        "log sizes {sizes:?}"
    );
    let _ = std::fs::remove_dir_all(&out);

    let (doc, outcome, out) = run_tiny("floor");
    let rows = check_shape(&doc, "floor");
    assert_eq!(
        systems_with(&rows, "tx_latency_us"),
        ["fcfs", "fg-wal", "floor", "nc", "scsp", "soc", "sync"]
    );
    assert_eq!(systems_with(&rows, "mb_per_s"), ["copy+flush", "nt-copy"]);
    assert!(outcome.table.contains("system / floor"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_pool_mode_applies_both_writes_of_a_transaction() {
    use pool::Mode;
    for mode in Mode::ALL {
        let mut sys = PoolSystem::new(mode);
        sys.setup(3, 32 << 10).expect("setup");
        let a: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..70u32).map(|i| (i * 3) as u8).collect();
        let before = sys.bytes_written().expect("pool counts bytes");
        sys.tx(
            Write {
                file: 0,
                off: 4000,
                data: &a,
            },
            Write {
                file: 2,
                off: 31 << 10,
                data: &b,
            },
        )
        .expect("tx");
        sys.run_end(); // checkpoint what is pending
        assert!(
            sys.bytes_written().expect("bytes") - before >= (a.len() + b.len()) as u64,
            "{mode:?}: wrote fewer bytes than the payload"
        );
        let mut got = vec![0u8; a.len()];
        sys.read(0, 4000, &mut got).expect("read a");
        assert_eq!(got, a, "{mode:?}: file 0");
        let mut got = vec![0u8; b.len()];
        sys.read(2, 31 << 10, &mut got).expect("read b");
        assert_eq!(got, b, "{mode:?}: file 2");
        let mut untouched = vec![0u8; 16];
        sys.read(1, 0, &mut untouched).expect("read c");
        assert_eq!(untouched, [0x5A; 16], "{mode:?}: file 1 changed");
    }
}

#[test]
fn background_checkpoint_lines_are_attributed_to_the_checkpoint_threads() {
    // Two small files, many transactions: pending lists grow past the engine's limit (5), so
    // FCFS hands blocks to its background thread. The split must see that thread's lines
    // (it goes by the engine's thread name, `pool-ckpt-*`).
    let mut sys = PoolSystem::new(pool::Mode::Fcfs);
    sys.setup(2, 8 << 10).expect("setup");
    let data = vec![7u8; 3000];
    let (store, _) = sys.shared().expect("shared");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut i = 0u64;
    while store.region().background_lines() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no line was counted for the background checkpoint thread after {i} txs"
        );
        let off = (i * 977) % 5000;
        sys.tx(
            Write {
                file: 0,
                off,
                data: &data,
            },
            Write {
                file: 1,
                off: 5000 - off,
                data: &data,
            },
        )
        .expect("tx");
        i += 1;
        if i.is_multiple_of(64) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let total = sys.bytes_written().expect("total");
    let ckpt = sys.ckpt_bytes_written().expect("ckpt");
    assert!(ckpt > 0 && ckpt < total, "ckpt {ckpt} of total {total}");
}
