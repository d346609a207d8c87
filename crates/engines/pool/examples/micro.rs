//! The seed's microbenchmark (FCFS §VI-C): atomically overwrite two files per transaction.
//! Each transaction picks two of `--files` existing files of `--file-mb` MB and writes a
//! random 1..=16 KB range in each (then again with 1..=4 KB), single thread. Every mode runs
//! on its own pool file in /dev/shm (tmpfs page cache = emulated NVMM); the bytes written to
//! NVMM are the region's own counters (`RegionStats::lines_flushed` x 64: every line written
//! back by a flush or a non-temporal store). `pmem::Accounted` would split them per area but
//! costs a few hundred ns per call, which would weigh on the modes making many small calls.
//! Every mode gets the same files, offsets and sizes (same seed). Besides the wall-clock mean
//! it prints the benchmark thread's CPU time per transaction (background checkpoint threads
//! excluded), which other processes on a shared machine do not inflate, and the CPU time of
//! all threads including the checkpoint after the run (FCFS's background work counted). The floor copies
//! with the data path's own policy (`Core::copy_durable`: non-temporal whole lines).
//!
//! Steady state: each timed run follows `--warmup` untimed transactions of its size (default
//! 3 × `--txs`). Without them a run of 20,000 transactions on 300 files never starts the
//! background checkpoint (no log or block runs low, no block collects 5 versions), so FCFS is
//! timed without the checkpoint thread beside it and with the heap still growing; `atomfs
//! bench`'s runs (a tenth of a run as warm-up, then 500,000 transactions or 10 s) are in the
//! steady state, with checkpointing running all the time. `--warmup 0` gives the old cold
//! runs.
//!
//! ```text
//! cargo run --release -p atomfs-pool --example micro -- [--files 1000] [--file-mb 4]
//!     [--txs 20000] [--warmup 3×txs] [--modes nc,fcfs,fg-wal,scsp,soc,sync] [--sizes 16,4]
//!     [--dir /dev/shm] [--seed 1]
//!     [--ckpt-threads 1] [--log-entries N (both logs; default from PoolConfig)]
//!     [--breakdown 1] [--perf-ctl FIFO] [--latency-ns N (emulated NVMM, 4 GB/s)]
//!     [--data-checksums 1 (pools formatted with per-block data checksums)]
//!
//! Profiling the timed loops only:
//!   mkfifo /tmp/ctl; perf record -g --control fifo:/tmp/ctl --delay=-1 -- \
//!     target/release/examples/micro --modes fcfs --perf-ctl /tmp/ctl
//! ```

const USAGE: &str = "usage: micro [--files 1000] [--file-mb 4] [--txs 20000] [--warmup 3*txs]
    [--modes nc,fcfs,fg-wal,scsp,soc,sync] [--sizes 16,4] [--dir /dev/shm] [--seed 1]
    [--ckpt-threads 1] [--log-entries N] [--breakdown 1] [--perf-ctl FIFO] [--latency-ns N]
    [--data-checksums 1]";

use pmem::emulate::{Emulated, EmulatorConfig};
use pmem::{MappedRegion, Region};

/// Pools run on a mapped file behind the NVMM emulator (off unless --latency-ns is given).
type Reg = Emulated<MappedRegion>;
use pool::{Mode, PoolConfig, PoolStore};
use std::sync::Arc;
use std::time::Instant;
use store::{Fh, OpenFlags, Store, ROOT_INO};

struct Args {
    files: u64,
    file_mb: u64,
    txs: u64,
    /// Untimed transactions before each timed run (None: 3 × txs).
    warmup: Option<u64>,
    modes: Vec<Mode>,
    dir: std::path::PathBuf,
    seed: u64,
    ckpt_threads: usize,
    log_entries: u64,
    breakdown: bool,
    /// `perf record --control fifo:PATH --delay=-1`: the timed loops enable and disable the
    /// profiler through this FIFO, so that setup does not drown the profile.
    perf_ctl: Option<std::path::PathBuf>,
    /// Emulated NVMM write latency per line (ns; 0 = DRAM speed), with the seed's 4 GB/s.
    latency_ns: u64,
    /// Maximum write sizes to run, in KB (16 and 4: the seed's two; a size left out
    /// prints NaN).
    sizes: Vec<u64>,
    /// Format the pools with per-block data checksums.
    data_checksums: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        files: 1000,
        file_mb: 4,
        txs: 20_000,
        warmup: None,
        modes: vec![
            Mode::Nc,
            Mode::Fcfs,
            Mode::FgWal,
            Mode::Scsp,
            Mode::Soc,
            Mode::Sync,
        ],
        dir: pmem::mapped::scratch_dir(),
        seed: 1,
        ckpt_threads: PoolConfig::default().checkpoint_threads,
        log_entries: 0,
        breakdown: false,
        perf_ctl: None,
        latency_ns: 0,
        sizes: vec![16, 4],
        data_checksums: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let num = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{}: not a number: {value}", pair[0]))
        };
        match pair[0].as_str() {
            "--files" => a.files = num(),
            "--file-mb" => a.file_mb = num(),
            "--txs" => a.txs = num(),
            "--warmup" => a.warmup = Some(num()),
            "--seed" => a.seed = num(),
            "--ckpt-threads" => a.ckpt_threads = num() as usize,
            "--log-entries" => a.log_entries = num(),
            "--breakdown" => a.breakdown = num() != 0,
            "--dir" => a.dir = value.clone().into(),
            "--perf-ctl" => a.perf_ctl = Some(value.clone().into()),
            "--latency-ns" => a.latency_ns = num(),
            "--data-checksums" => a.data_checksums = num() != 0,
            "--sizes" => {
                a.sizes = value
                    .split(',')
                    .map(|k| match k {
                        "16" => 16,
                        "4" => 4,
                        _ => panic!("--sizes takes 16, 4 or 16,4, not {k}"),
                    })
                    .collect()
            }
            "--modes" => {
                a.modes = value
                    .split(',')
                    .map(|m| Mode::parse(m).unwrap_or_else(|| panic!("unknown mode {m}")))
                    .collect()
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => panic!("unknown option {other} (--help lists them)"),
        }
    }
    a
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One timed run: mean latency (µs) and bytes flushed to NVMM per transaction (foreground,
/// and including the checkpoint that follows the run).
struct Run {
    mean_us: f64,
    /// CPU time of the benchmark thread per transaction (what the other processes on a
    /// shared machine do not inflate, unlike the wall-clock mean).
    cpu_us: f64,
    /// CPU time of every thread of the process per transaction, from the start of the run
    /// to the end of the checkpoint that follows it: the foreground plus all checkpointing.
    all_cpu_us: f64,
    flushed_per_tx: f64,
    flushed_with_ckpt_per_tx: f64,
}

impl Run {
    /// A size `--sizes` left out.
    fn skipped() -> Run {
        Run {
            mean_us: f64::NAN,
            cpu_us: f64::NAN,
            all_cpu_us: f64::NAN,
            flushed_per_tx: f64::NAN,
            flushed_with_ckpt_per_tx: f64::NAN,
        }
    }
}

fn run(s: &PoolStore<Reg>, fhs: &[Fh], a: &Args, max_write: u64, data: &[u8]) -> Run {
    let region = s.region();
    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // Untimed warm-up into the steady state (its own random stream: the timed transactions
    // are the same whatever the warm-up).
    let mut warm_rng = Rng(a.seed.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) | 1);
    for _ in 0..a.warmup.unwrap_or(3 * a.txs) {
        let mut parts = [std::time::Duration::ZERO; 3];
        one_tx(s, fhs, a, max_write, data, &mut warm_rng, false, &mut parts);
    }
    let counters_at_start = s.stats();
    let flushed_at_start = region.stats().lines_flushed;
    perf_control(a, "enable");
    let start = Instant::now();
    let cpu_start = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let all_cpu_start = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    let mut parts = [std::time::Duration::ZERO; 3];
    for _ in 0..a.txs {
        one_tx(
            s,
            fhs,
            a,
            max_write,
            data,
            &mut rng,
            a.breakdown,
            &mut parts,
        );
    }
    let elapsed = start.elapsed();
    let cpu = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    perf_control(a, "disable");
    if a.breakdown {
        // Counters of the timed run only.
        let stats = s.stats();
        let stat = |k: &str| {
            let at =
                |list: &[(String, u64)]| list.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
            at(&stats).saturating_sub(at(&counters_at_start))
        };
        eprintln!(
            "  {} versions, {} undo entries, {} block checkpoints ({} in the foreground), {} lines copied, {} pointer swings",
            stat("versions_created"),
            stat("undo_entries_written"),
            stat("checkpoints"),
            stat("foreground_checkpoints"),
            stat("checkpoint_lines_copied"),
            stat("checkpoint_pointer_swings")
        );
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6 / a.txs as f64;
        eprintln!(
            "  breakdown (us/tx): begin {:.2} writes {:.2} commit {:.2}",
            us(parts[0]),
            us(parts[1]),
            us(parts[2])
        );
    }
    let foreground = (region.stats().lines_flushed - flushed_at_start) * 64;
    s.checkpoint_all().expect("checkpoint");
    let all_cpu = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - all_cpu_start;
    let total = (region.stats().lines_flushed - flushed_at_start) * 64;
    Run {
        mean_us: elapsed.as_secs_f64() * 1e6 / a.txs as f64,
        cpu_us: cpu as f64 / 1e3 / a.txs as f64,
        all_cpu_us: all_cpu as f64 / 1e3 / a.txs as f64,
        flushed_per_tx: foreground as f64 / a.txs as f64,
        flushed_with_ckpt_per_tx: total as f64 / a.txs as f64,
    }
}

/// One transaction: two distinct files, a random 1..=`max_write` byte range in each.
/// With `timed`, the time of begin, writes and commit is added to `parts`.
#[allow(clippy::too_many_arguments)]
fn one_tx(
    s: &PoolStore<Reg>,
    fhs: &[Fh],
    a: &Args,
    max_write: u64,
    data: &[u8],
    rng: &mut Rng,
    timed: bool,
    parts: &mut [std::time::Duration; 3],
) {
    let file_bytes = a.file_mb << 20;
    let f1 = (rng.next() % a.files) as usize;
    let f2 = ((f1 as u64 + 1 + rng.next() % (a.files - 1)) % a.files) as usize;
    let t0 = Instant::now();
    let tx = s.tx_begin(&[fhs[f1], fhs[f2]]).expect("tx_begin");
    let t1 = Instant::now();
    for f in [f1, f2] {
        let len = 1 + rng.next() % max_write;
        let off = rng.next() % (file_bytes - len + 1);
        s.write(fhs[f], off, &data[..len as usize]).expect("write");
    }
    let t2 = Instant::now();
    s.tx_commit(tx).expect("commit");
    if timed {
        parts[0] += t1 - t0;
        parts[1] += t2 - t1;
        parts[2] += t2.elapsed();
    }
}

/// The data path's durable copy (`Core::copy_durable`, PMDK's `pmem_memcpy_persist`
/// policy): whole lines of copies of at least 256 bytes non-temporally, partial lines
/// through the cache and flushed.
fn copy_durable(region: &Reg, addr: u64, data: &[u8]) {
    let end = addr + data.len() as u64;
    let lo = addr.next_multiple_of(64);
    let hi = end / 64 * 64;
    if data.len() < pool::NT_COPY_MIN || hi <= lo {
        region.write(addr, data);
        region.flush(addr, data.len() as u64);
        return;
    }
    let (head, rest) = data.split_at((lo - addr) as usize);
    let (middle, tail) = rest.split_at((hi - lo) as usize);
    if !head.is_empty() {
        region.write(addr, head);
        region.flush(addr, head.len() as u64);
    }
    region.write_nt(lo, middle);
    if !tail.is_empty() {
        region.write(hi, tail);
        region.flush(hi, tail.len() as u64);
    }
}

/// Tell `perf record --control fifo:PATH` to start or stop sampling (no-op without
/// `--perf-ctl`).
fn perf_control(a: &Args, command: &str) {
    if let Some(path) = &a.perf_ctl {
        use std::io::Write;
        let mut fifo = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open --perf-ctl fifo");
        fifo.write_all(format!("{command}\n").as_bytes())
            .expect("write --perf-ctl fifo");
    }
}

/// CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID`) or by the whole
/// process (`CLOCK_PROCESS_CPUTIME_ID`), in ns.
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both CPU-time clocks exist on Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The physical floor: the same random sizes copied durably (write + flush + one fence per
/// transaction) into the pool's block area (pages already touched) with no file system.
fn floor(region: &Reg, a: &Args, max_write: u64, data: &[u8], base: u64) -> (f64, f64) {
    let span = region.len() - base - (64 << 10);
    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let start = Instant::now();
    let cpu_start = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    for _ in 0..a.txs {
        rng.next();
        rng.next();
        for _ in 0..2 {
            let len = 1 + rng.next() % max_write;
            let off = base + (rng.next() % (span - len)) / 64 * 64;
            copy_durable(region, off, &data[..len as usize]);
        }
        region.fence();
    }
    (
        start.elapsed().as_secs_f64() * 1e6 / a.txs as f64,
        (cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - cpu_start) as f64 / 1e3 / a.txs as f64,
    )
}

fn setup(mode: Mode, a: &Args, path: &std::path::Path) -> (PoolStore<Reg>, Vec<Fh>) {
    let file_bytes = a.file_mb << 20;
    let pool_bytes = a.files * file_bytes * 5 / 4 + (512 << 20);
    let _ = std::fs::remove_file(path);
    let mapped = MappedRegion::create(path, pool_bytes).expect("create pool file");
    let region = Emulated::new(
        mapped,
        EmulatorConfig {
            write_latency_ns: a.latency_ns,
            write_bandwidth_max: if a.latency_ns > 0 { 4_000_000_000 } else { 0 },
        },
    );
    let mut cfg = PoolConfig {
        mode,
        inode_count: (a.files + 64).max(1024),
        checkpoint_threads: a.ckpt_threads,
        data_checksums: a.data_checksums,
        ..PoolConfig::default()
    };
    if a.log_entries > 0 {
        cfg.metadata_log_entries = a.log_entries;
        cfg.data_log_entries = a.log_entries;
    }
    let s = PoolStore::format(Arc::new(region), &cfg).expect("format");
    // No mode pays tmpfs page faults for the blocks and log slots it first uses in the
    // timed runs.
    pool::prefault(s.region().inner(), &s.superblock().geometry);
    let chunk = vec![0x5Au8; 1 << 20];
    let mut fhs = Vec::new();
    for i in 0..a.files {
        let meta = s
            .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)
            .expect("create");
        let fh = s
            .open(
                meta.ino,
                OpenFlags {
                    read: true,
                    write: true,
                    ..Default::default()
                },
            )
            .expect("open");
        let mut off = 0;
        while off < file_bytes {
            let n = chunk.len().min((file_bytes - off) as usize);
            s.write(fh, off, &chunk[..n]).expect("fill");
            off += n as u64;
        }
        fhs.push(fh);
    }
    (s, fhs)
}

fn main() {
    let a = parse_args();
    assert!(a.files >= 2, "--files must be at least 2");
    let data: Vec<u8> = (0..16384u32).map(|i| (i * 7 + 3) as u8).collect();
    println!(
        "FCFS microbenchmark: {} files x {} MB, {} transactions per size, 2 files per tx, pools in {}",
        a.files,
        a.file_mb,
        a.txs,
        a.dir.display()
    );
    let mut rows = Vec::new();
    let mut floors = ((0.0, 0.0), (0.0, 0.0));
    for &mode in &a.modes {
        let path = a.dir.join(format!(
            "atomfs-micro-{}-{}.pool",
            mode.name(),
            std::process::id()
        ));
        let (s, fhs) = setup(mode, &a, &path);
        let sized = |kb: u64, f: &dyn Fn(u64) -> Run| {
            if a.sizes.contains(&kb) {
                f(kb << 10)
            } else {
                Run::skipped()
            }
        };
        let big = sized(16, &|max| run(&s, &fhs, &a, max, &data));
        let small = sized(4, &|max| run(&s, &fhs, &a, max, &data));
        if floors.0 .0 == 0.0 {
            let base = s.superblock().geometry.blocks_offset;
            let nan = (f64::NAN, f64::NAN);
            let at = |kb: u64| {
                if a.sizes.contains(&kb) {
                    floor(s.region(), &a, kb << 10, &data, base)
                } else {
                    nan
                }
            };
            floors = (at(16), at(4));
        }
        drop(s);
        let _ = std::fs::remove_file(&path);
        eprintln!(
            "{}: 0-16KB {:.2} us/tx, 0-4KB {:.2} us/tx",
            mode.name(),
            big.mean_us,
            small.mean_us
        );
        rows.push((mode, big, small));
    }
    let nc = rows.iter().find(|r| r.0 == Mode::Nc).map(|r| {
        (
            r.1.mean_us,
            r.2.mean_us,
            r.1.flushed_with_ckpt_per_tx,
            r.2.flushed_with_ckpt_per_tx,
        )
    });
    println!(
        "floor (durable copy, no fs): 0-16KB {:.2} us/tx (cpu {:.2}), 0-4KB {:.2} us/tx (cpu {:.2})",
        floors.0 .0, floors.0 .1, floors.1 .0, floors.1 .1
    );
    println!(
        "{:<8} {:>11} {:>8} {:>13} {:>13} {:>11} {:>8} {:>13} {:>13}",
        "mode",
        "16K us/tx",
        "vs NC",
        "16K B/tx fg",
        "16K B/tx all",
        "4K us/tx",
        "vs NC",
        "4K B/tx fg",
        "4K B/tx all"
    );
    for (mode, big, small) in &rows {
        let (r16, r4) = nc.map_or((f64::NAN, f64::NAN), |n| {
            (big.mean_us / n.0, small.mean_us / n.1)
        });
        println!(
            "{:<8} {:>11.2} {:>8.3} {:>13.0} {:>13.0} {:>11.2} {:>8.3} {:>13.0} {:>13.0}",
            mode.name(),
            big.mean_us,
            r16,
            big.flushed_per_tx,
            big.flushed_with_ckpt_per_tx,
            small.mean_us,
            r4,
            small.flushed_per_tx,
            small.flushed_with_ckpt_per_tx
        );
    }
    // The same runs in CPU time of the benchmark thread (background checkpoint threads not
    // included): the figure to compare on a machine shared with other work.
    let nc_cpu = rows
        .iter()
        .find(|r| r.0 == Mode::Nc)
        .map(|r| (r.1.cpu_us, r.2.cpu_us));
    println!(
        "{:<8} {:>11} {:>8} {:>9} {:>11} {:>8} {:>9}",
        "mode", "16K cpu", "vs NC", "vs floor", "4K cpu", "vs NC", "vs floor"
    );
    for (mode, big, small) in &rows {
        let (r16, r4) = nc_cpu.map_or((f64::NAN, f64::NAN), |n| {
            (big.cpu_us / n.0, small.cpu_us / n.1)
        });
        println!(
            "{:<8} {:>11.2} {:>8.3} {:>9.3} {:>11.2} {:>8.3} {:>9.3}",
            mode.name(),
            big.cpu_us,
            r16,
            big.cpu_us / floors.0 .1,
            small.cpu_us,
            r4,
            small.cpu_us / floors.1 .1
        );
    }
    // CPU time of all threads (background checkpointing included) and of the checkpoint
    // after the run: the work each protocol does per transaction, wherever it runs.
    let nc_all = rows
        .iter()
        .find(|r| r.0 == Mode::Nc)
        .map(|r| (r.1.all_cpu_us, r.2.all_cpu_us));
    println!(
        "{:<8} {:>13} {:>8} {:>13} {:>8}",
        "mode", "16K all cpu", "vs NC", "4K all cpu", "vs NC"
    );
    for (mode, big, small) in &rows {
        let (r16, r4) = nc_all.map_or((f64::NAN, f64::NAN), |n| {
            (big.all_cpu_us / n.0, small.all_cpu_us / n.1)
        });
        println!(
            "{:<8} {:>13.2} {:>8.3} {:>13.2} {:>8.3}",
            mode.name(),
            big.all_cpu_us,
            r16,
            small.all_cpu_us,
            r4
        );
    }
}
