//! The `mmio` suite (Libnvmmio seed §4.2) at tiny size inside `cargo test` (CONVENTIONS.md
//! §15): the stable shape of results.json, every figure's systems, the derived best-of series
//! of the hybrid figure; and every adapter's writes land where a read finds them. Never
//! asserts a timing.

use atomfs_bench::suites::mmio::{FioJob, Op, OpStream, BEST_OF_UNDO_REDO};
use atomfs_bench::suites::{run_suite, Mode, Options};
use atomfs_bench::systems::file_io::{FileIo, PwriteFile, PwriteMedium, FILL_BYTE};
use atomfs_bench::systems::mmio::{MmioMedium, MmioSystem};
use atomfs_bench::systems::pool_file::PoolFile;
use serde_json::Value;

fn rows_of<'a>(rows: &'a [Value], figure: &str, metric: &str) -> Vec<&'a Value> {
    rows.iter()
        .filter(|r| r["figure"] == figure && r["metric"] == metric)
        .collect()
}

fn systems(rows: &[&Value]) -> Vec<String> {
    let mut v: Vec<String> = rows
        .iter()
        .map(|r| r["system"].as_str().unwrap_or("").to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn mmio_suite_tiny_results_have_the_stable_shape() {
    let out = std::env::temp_dir().join(format!("atomfs-bench-test-{}-mmio", std::process::id()));
    let opts = Options {
        mode: Mode::Tiny,
        out: out.clone(),
        progress: false,
        seed: 11,
        systems: Vec::new(),
    };
    let outcome = run_suite("mmio", &opts).expect("tiny mmio run");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(&outcome.json_path).expect("read results.json"),
    )
    .expect("parse results.json");
    assert_eq!(doc["suite"], "mmio");
    for key in ["machine", "revision", "config", "rows"] {
        assert!(!doc[key].is_null(), "missing {key}");
    }
    let rows = doc["rows"].as_array().expect("rows").clone();
    for r in &rows {
        for key in [
            "figure", "system", "param", "metric", "median", "min", "max", "runs", "txs",
        ] {
            assert!(r.get(key).is_some(), "row without {key}: {r}");
        }
        let (min, med, max) = (
            r["min"].as_f64().expect("min"),
            r["median"].as_f64().expect("median"),
            r["max"].as_f64().expect("max"),
        );
        assert!(min <= med && med <= max, "min/median/max out of order: {r}");
        assert!(med.is_finite() && med > 0.0, "median not positive: {r}");
    }
    let fio = [
        "fcfs",
        "mmio",
        "mmio-ext4",
        "mmio-redo",
        "mmio-undo",
        "pwrite-ext4",
        "pwrite-tmpfs",
    ];
    for fig in [
        "fio-seq-read",
        "fio-rand-read",
        "fio-seq-write",
        "fio-rand-write",
    ] {
        for metric in [
            "tx_per_s",
            "tx_per_s_norm",
            "tx_latency_us",
            "cpu_us_per_tx",
        ] {
            assert_eq!(systems(&rows_of(&rows, fig, metric)), fio, "{fig} {metric}");
        }
    }
    for fig in ["write-size", "fsync-interval"] {
        let r = rows_of(&rows, fig, "tx_per_s");
        assert_eq!(
            systems(&r),
            ["fcfs", "mmio", "pwrite-ext4", "pwrite-tmpfs"],
            "{fig}"
        );
        let mut params: Vec<f64> = r.iter().filter_map(|r| r["param"].as_f64()).collect();
        params.dedup();
        assert!(params.len() >= 2, "{fig}: fewer than two x values");
    }
    let hybrid = rows_of(&rows, "hybrid", "tx_per_s_norm");
    assert_eq!(
        systems(&hybrid),
        [BEST_OF_UNDO_REDO, "mmio", "mmio-redo", "mmio-undo"]
    );
    // The best-of series is the faster policy run by run: nobody beats it but the hybrid.
    for r in hybrid.iter().filter(|r| r["system"] != "mmio") {
        for v in r["runs"].as_array().expect("runs") {
            assert!(v.as_f64().unwrap_or(2.0) <= 1.0 + 1e-9, "above best: {r}");
        }
    }
    assert!(outcome.plots.iter().all(|p| p.is_file()));
    assert!(outcome.table.contains("system / pwrite-tmpfs"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn op_stream_spreads_writes_evenly_and_stays_inside_the_file() {
    for (random, io_size, percent) in [(true, 4096, 30), (false, 128, 100), (true, 65536, 0)] {
        let job = FioJob {
            file_len: 1 << 20,
            io_size,
            random,
            write_percent: percent,
            sync_every: 1,
            seed: 3,
        };
        let mut ops = OpStream::new(job);
        let mut writes = 0;
        for i in 0..1000u64 {
            let off = match ops.next_op() {
                Op::Write { off, .. } => {
                    writes += 1;
                    off
                }
                Op::Read { off } => off,
            };
            assert_eq!(off % io_size, 0);
            assert!(off + io_size <= job.file_len);
            if !random {
                assert_eq!(off, (i % (job.file_len / io_size)) * io_size);
            }
        }
        assert_eq!(writes, 10 * percent, "{percent}% of 1000 ops");
    }
}

/// Write, sync, read back: the bytes are there, the neighbours are the fill.
fn round_trip(sys: &mut dyn FileIo) {
    sys.setup(256 << 10).expect("setup");
    let a: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..100u32).map(|i| (i * 7) as u8).collect();
    sys.write(8192 - 17, &a).expect("write a");
    sys.write(200_000, &b).expect("write b");
    sys.sync().expect("sync");
    sys.drain().expect("drain");
    let mut got = vec![0u8; a.len()];
    sys.read(8192 - 17, &mut got).expect("read a");
    assert_eq!(got, a, "{}", sys.name());
    let mut got = vec![0u8; b.len()];
    sys.read(200_000, &mut got).expect("read b");
    assert_eq!(got, b, "{}", sys.name());
    let mut edge = [0u8; 16];
    sys.read(8192 - 33, &mut edge).expect("read edge");
    assert_eq!(edge, [FILL_BYTE; 16], "{}: neighbour changed", sys.name());
}

#[test]
fn every_fio_system_reads_back_what_it_wrote() {
    use mmio::PolicyMode;
    round_trip(&mut PwriteFile::new(PwriteMedium::Tmpfs));
    for mode in [PolicyMode::Hybrid, PolicyMode::Undo, PolicyMode::Redo] {
        round_trip(&mut MmioSystem::new(mode, MmioMedium::Tmpfs));
    }
    round_trip(&mut PoolFile::new());
}
