//! FIO-like probe of one case (for profiling; the measured comparison with its baselines is the
//! `mmio` suite of `atomfs bench`, docs/bench.md): 4 KB (or `io`) writes with an fsync after
//! every `sync` writes, or reads, on a prefilled file, through the Store API with an O_ATOMIC
//! handle (what `nvmmap` and the C shim use), against pwrite + fdatasync in the same directory.
//!
//! Run: `cargo run --release -p atomfs-mmio --example fio -- [ops] [file_mb] [dir] [case] [policies] [sync] [io]`
//! (defaults: 200000 ops, 256 MB, /dev/shm, rand-write, undo,redo,hybrid, 1, 4096; case is
//! rand-write, seq-write, rand-read or seq-read; policies a comma list, or "none" for the
//! baseline only). `perf record -g` on it shows where a write's time goes; with
//! `FIO_NO_CHECKPOINT_THREAD=1` the engine runs without its background checkpoint thread, and
//! `FIO_STATS=1` prints the engine's counters, `FIO_NO_BASELINE=1` skips the baseline.

use mmio::{MmioConfig, MmioStore, PolicyMode};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use store::{OpenFlags, Store, ROOT_INO};

struct Case {
    ops: usize,
    file_len: u64,
    random: bool,
    write: bool,
    sync_every: usize,
    io: usize,
}

fn offsets(c: &Case, seed: u64) -> Vec<u64> {
    let units = c.file_len / c.io as u64;
    let mut x = seed | 1;
    (0..c.ops as u64)
        .map(|i| {
            if c.random {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % units) * c.io as u64
            } else {
                (i % units) * c.io as u64
            }
        })
        .collect()
}

fn report(name: &str, c: &Case, (t, cpu): (std::time::Duration, f64)) -> f64 {
    let kiops = c.ops as f64 / t.as_secs_f64() / 1000.0;
    println!(
        "{name:<24} {kiops:>9.1} kIOPS  {:>7.3} µs/op  ({:.3} µs/op CPU of this thread)",
        1000.0 / kiops,
        cpu * 1e6 / c.ops as f64
    );
    kiops
}

/// CPU time of the calling thread, seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Run the case with `op(offset, write?)`, then `sync()` where due; warm-up first.
fn drive(
    c: &Case,
    mut op: impl FnMut(u64, bool),
    mut sync: impl FnMut(),
) -> (std::time::Duration, f64) {
    for (i, &o) in offsets(c, 7).iter().take(c.ops / 4).enumerate() {
        op(o, c.write);
        if c.write && (i + 1) % c.sync_every == 0 {
            sync();
        }
    }
    let offs = offsets(c, 42);
    let cpu = thread_cpu();
    let t = Instant::now();
    for (i, &o) in offs.iter().enumerate() {
        op(o, c.write);
        if c.write && (i + 1) % c.sync_every == 0 {
            sync();
        }
    }
    (t.elapsed(), thread_cpu() - cpu)
}

fn baseline(dir: &Path, c: &Case) -> f64 {
    let path = dir.join("baseline.dat");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("open");
    let chunk = vec![0x11u8; 1 << 20];
    for o in (0..c.file_len).step_by(chunk.len()) {
        f.write_all_at(&chunk, o).expect("prefill");
    }
    f.sync_all().expect("fsync");
    let buf = vec![0x5Au8; c.io];
    let mut rbuf = vec![0u8; c.io];
    let el = drive(
        c,
        |o, w| {
            if w {
                f.write_all_at(&buf, o).expect("pwrite");
            } else {
                f.read_exact_at(&mut rbuf, o).expect("pread");
            }
        },
        || f.sync_data().expect("fdatasync"),
    );
    let _ = std::fs::remove_file(&path);
    report("pwrite+fdatasync", c, el)
}

fn mmio_run(dir: &Path, c: &Case, mode: PolicyMode) -> f64 {
    let files = dir.join(format!("mmio-files-{mode:?}"));
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir_all(&files).expect("mkdir");
    let pool = dir.join(format!("mmio-{mode:?}.pool"));
    let _ = std::fs::remove_file(&pool);
    let mut cfg = MmioConfig {
        policy_mode: mode,
        prefault_log_pool: true,
        ..MmioConfig::default()
    };
    if std::env::var("FIO_NO_CHECKPOINT_THREAD").is_ok() {
        cfg.checkpoint_period = None; // foreground only: checkpoints when the log is full
    }
    let s = MmioStore::create(&files, &pool, &cfg).expect("create store");
    let meta = s.create(ROOT_INO, b"data", 0o644, None).expect("create");
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fill = s.open(meta.ino, rw).expect("open");
    let chunk = vec![0x11u8; 1 << 20];
    for o in (0..c.file_len).step_by(chunk.len()) {
        s.write(fill, o, &chunk).expect("prefill");
    }
    s.release(fill).expect("release");
    let fh = s
        .open(meta.ino, OpenFlags { atomic: true, ..rw })
        .expect("open atomic");
    let buf = vec![0x5Au8; c.io];
    let mut rbuf = vec![0u8; c.io];
    let mut whole = vec![0u8; 1 << 20];
    for o in (0..c.file_len).step_by(whole.len()) {
        s.read(fh, o, &mut whole).expect("map in"); // page-table entries of the mapping
    }
    let el = drive(
        c,
        |o, w| {
            if w {
                s.write(fh, o, &buf).expect("write");
            } else {
                s.read(fh, o, &mut rbuf).expect("read");
            }
        },
        || s.fsync(fh, true).expect("fsync"),
    );
    let k = report(&format!("mmio {mode:?}"), c, el);
    if std::env::var("FIO_STATS").is_ok() {
        println!("    {:?}", s.stats());
    }
    s.release(fh).expect("release");
    s.unmount().expect("unmount");
    let _ = std::fs::remove_dir_all(&files);
    let _ = std::fs::remove_file(&pool);
    k
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let case = arg(4, "rand-write");
    let c = Case {
        ops: arg(1, "200000").parse().expect("ops"),
        file_len: arg(2, "256").parse::<u64>().expect("file_mb") << 20,
        random: case.starts_with("rand"),
        write: case.ends_with("write"),
        sync_every: arg(6, "1").parse::<usize>().expect("sync").max(1),
        io: arg(7, "4096").parse().expect("io"),
    };
    let dir = PathBuf::from(arg(3, "/dev/shm")).join(format!("atomfs-fio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir bench dir");
    println!(
        "fio {case}: {} ops of {} B on a {} MB file in {}, sync every {}",
        c.ops,
        c.io,
        c.file_len >> 20,
        dir.display(),
        c.sync_every
    );
    let base = if std::env::var("FIO_NO_BASELINE").is_ok() {
        f64::NAN
    } else {
        baseline(&dir, &c)
    };
    for p in arg(5, "undo,redo,hybrid").split(',') {
        let mode = match p {
            "undo" => PolicyMode::Undo,
            "redo" => PolicyMode::Redo,
            "hybrid" => PolicyMode::Hybrid,
            _ => continue,
        };
        let k = mmio_run(&dir, &c, mode);
        println!("    ratio vs baseline: {:.2}x", k / base);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
