//! FIO-like micro-benchmark (Libnvmmio §4): random and sequential 4 KB writes with a sync
//! after each, and 4 KB reads, on a 256 MB file: mmio (undo, redo, hybrid) vs
//! pwrite + fdatasync, all on tmpfs (/dev/shm).
//!
//! Run: `cargo run --release -p atomfs-mmio --example fio -- [ops] [file_mb] [dir] [filter] [pool_dir]`
//! (defaults: 20000 ops, 256 MB, /dev/shm; `filter` e.g. "rand-write" runs only those
//! cases; `pool_dir`: where the log pool lives, default `dir` — e.g. files on ext4 and the log
//! pool on /dev/shm, Libnvmmio's NVM-log setup). Numbers are per-machine; compare ratios.

use mmio::{MmioConfig, MmioStore, PolicyMode};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use store::{OpenOptions, Store};

const IO: usize = 4096;

fn offsets(ops: usize, file_len: u64, random: bool, seed: u64) -> Vec<u64> {
    let blocks = file_len / IO as u64;
    let mut x = seed | 1;
    (0..ops as u64)
        .map(|i| {
            if random {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % blocks) * IO as u64
            } else {
                (i % blocks) * IO as u64
            }
        })
        .collect()
}

fn report(name: &str, ops: usize, t: std::time::Duration) -> f64 {
    let kiops = ops as f64 / t.as_secs_f64() / 1000.0;
    println!("{name:<34} {kiops:>9.1} kIOPS  {:>8.1} MB/s", kiops * 4.096);
    kiops
}

fn baseline(dir: &Path, file_len: u64, ops: usize, random: bool, write: bool) -> f64 {
    let path = dir.join("baseline.dat");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("open");
    // Layout phase (as FIO's): the file holds data before the run.
    let chunk = vec![0x11u8; 1 << 20];
    for o in (0..file_len).step_by(chunk.len()) {
        f.write_all_at(&chunk, o).expect("prefill");
    }
    f.sync_all().expect("fsync");
    let buf = vec![0x5Au8; IO];
    let mut rbuf = vec![0u8; IO];
    let offs = offsets(ops, file_len, random, 42);
    for &o in offsets(ops / 4, file_len, random, 7).iter() {
        // Warm-up (FIO ramp time).
        f.write_all_at(&buf, o).expect("pwrite");
        f.sync_data().expect("fdatasync");
    }
    let t = Instant::now();
    for &o in &offs {
        if write {
            f.write_all_at(&buf, o).expect("pwrite");
            f.sync_data().expect("fdatasync");
        } else {
            f.read_exact_at(&mut rbuf, o).expect("pread");
        }
    }
    let el = t.elapsed();
    let _ = std::fs::remove_file(&path);
    let kind = if write { "write+fdatasync" } else { "pread" };
    report(
        &format!(
            "pwrite baseline {} {kind}",
            if random { "rand" } else { "seq" }
        ),
        ops,
        el,
    )
}

fn mmio_run(
    dir: &Path,
    pool_dir: &Path,
    file_len: u64,
    ops: usize,
    random: bool,
    write: bool,
    mode: PolicyMode,
) -> f64 {
    let files = dir.join(format!("mmio-files-{mode:?}"));
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir_all(&files).expect("mkdir");
    let pool = pool_dir.join(format!("mmio-{mode:?}-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&pool);
    let cfg = MmioConfig {
        policy_mode: mode,
        log_pool_len: 64 << 20,
        ..MmioConfig::default()
    };
    let s = MmioStore::create(&files, &pool, &cfg).expect("create store");
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&s, "/data", None)
        .expect("open");
    // Layout phase (as FIO's): the file holds data before the run; one pass of reads maps
    // it in (Libnvmmio's steady state: the file is mapped, page faults are behind).
    let chunk = vec![0x11u8; 1 << 20];
    for o in (0..file_len).step_by(chunk.len()) {
        s.write(fh, o, &chunk).expect("prefill");
    }
    let buf = vec![0x5Au8; IO];
    let mut rbuf = vec![0u8; IO];
    for o in (0..file_len).step_by(IO) {
        s.read(fh, o, &mut rbuf).expect("map in");
    }
    let offs = offsets(ops, file_len, random, 42);
    for &o in offsets(ops / 4, file_len, random, 7).iter() {
        // Warm-up (FIO ramp time): also faults in the log pool's working set.
        s.write(fh, o, &buf).expect("write");
    }
    let t = Instant::now();
    for &o in &offs {
        if write {
            // A write outside a transaction is atomic and durable when it returns (its own
            // sync): the equivalent of write + fsync.
            s.write(fh, o, &buf).expect("write");
        } else {
            s.read(fh, o, &mut rbuf).expect("read");
        }
    }
    let el = t.elapsed();
    let stats = s.stats();
    s.release(fh).expect("release");
    s.unmount().expect("unmount");
    let _ = std::fs::remove_dir_all(&files);
    let _ = std::fs::remove_file(&pool);
    let kind = if write { "write+sync" } else { "read" };
    let k = report(
        &format!(
            "mmio {mode:?} {} {kind}",
            if random { "rand" } else { "seq" }
        ),
        ops,
        el,
    );
    if std::env::var("FIO_STATS").is_ok() {
        println!("    {stats:?}");
    }
    k
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ops: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20000);
    let file_mb: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(256);
    let dir = PathBuf::from(args.get(3).cloned().unwrap_or_else(|| "/dev/shm".into()))
        .join(format!("atomfs-fio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir bench dir");
    let file_len = file_mb << 20;
    println!(
        "fio: {ops} ops of 4 KB on a {file_mb} MB file in {}",
        dir.display()
    );
    let filter = args.get(4).cloned().unwrap_or_default();
    let pool_dir = args
        .get(5)
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.clone());
    for random in [true, false] {
        for write in [true, false] {
            let case = format!(
                "{}-{}",
                if random { "rand" } else { "seq" },
                if write { "write" } else { "read" }
            );
            if !case.contains(&filter) {
                continue;
            }
            let base = baseline(&dir, file_len, ops, random, write);
            for mode in [PolicyMode::Undo, PolicyMode::Redo, PolicyMode::Hybrid] {
                let k = mmio_run(&dir, &pool_dir, file_len, ops, random, write, mode);
                println!("    ratio vs baseline: {:.2}x", k / base);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
