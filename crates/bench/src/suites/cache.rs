//! The cache engine (First Responder, seed chapter V): fio-like synchronous 4 KiB random
//! writes — each write followed by fsync, one job — through the Rust Store API of the `cache`
//! engine (its home directory on the ext4 RAM disk, its pool in /dev/shm) against pwrite +
//! fdatasync on a file of the same ext4, in the same run; and the flush-period sensitivity
//! (0 = write-through, 1 ms, 10 ms, 100 ms, 1 s). Ratios against ext4 are what count: ext4 on
//! a loop device swings widely between runs. Each cache write is durable in the PM pool when
//! it returns; its background flusher runs on the same cores during the measurement.
//! Not yet: the mount-based workloads (fio through `atomfs mount`, postmark, varmail,
//! fileserver, YCSB-A) and the ext4 image on the real disk.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

pub const SUITE: &str = "cache";

/// Flush periods of the sensitivity figure, in milliseconds.
const PERIODS_MS: [u64; 5] = [0, 1, 10, 100, 1000];

struct Sizes {
    file: u64,
    run: Duration,
    reps: usize,
}

fn sizes(mode: Mode) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            file: 1 << 20,
            run: Duration::from_millis(40),
            reps: 2,
        },
        Mode::Quick => Sizes {
            file: 64 << 20,
            run: Duration::from_millis(1500),
            reps: 3,
        },
        Mode::Full => Sizes {
            file: 256 << 20,
            run: Duration::from_secs(10),
            reps: 5,
        },
    }
}

/// xorshift: the random block of each write.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn io(what: &'static str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::io(what, path, e)
}

/// pwrite + fdatasync of random 4 KiB blocks of a prefilled file: (writes, seconds).
fn run_ext4(dir: &Path, sz: &Sizes, seed: u64) -> Result<(u64, f64)> {
    let path = dir.join(format!("ext4-{seed}.dat"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| io("create", &path, e))?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..sz.file).step_by(block.len()) {
        let n = (sz.file - off).min(block.len() as u64) as usize;
        f.write_all_at(&block[..n], off)
            .map_err(|e| io("write", &path, e))?;
    }
    f.sync_all().map_err(|e| io("fsync", &path, e))?;
    let (blocks, data, mut rng) = (sz.file / 4096, vec![0xa5u8; 4096], seed | 1);
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let off = (next(&mut rng) % blocks) * 4096;
        f.write_all_at(&data, off)
            .map_err(|e| io("write", &path, e))?;
        f.sync_data().map_err(|e| io("fdatasync", &path, e))?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Ok((n, secs))
}

fn store_err(e: store::Error) -> BenchError {
    BenchError::Invalid(format!("cache: {e}"))
}

/// The same writes, each followed by fsync, through a cache store: (writes, seconds).
fn run_cache(dir: &Path, sz: &Sizes, period_ms: u64, seed: u64) -> Result<(u64, f64)> {
    let home = dir.join(format!("cache-home-{seed}-{period_ms}"));
    std::fs::create_dir_all(&home).map_err(|e| io("mkdir", &home, e))?;
    let pool = crate::scratch_path("cache.pool");
    let mut options = engines::Options::new();
    options.set("home", home.display().to_string());
    options.set("size", (2 * sz.file + (64 << 20)).to_string());
    options.set("flush_period", format!("{period_ms}ms"));
    let opened = engines::create(&pool, "cache", &options).map_err(store_err);
    let result = opened.and_then(|opened| {
        let measured = write_loop(opened.store.as_ref(), sz, seed);
        let unmounted = opened.unmount().map_err(store_err);
        let measured = measured?;
        unmounted.map(|()| measured)
    });
    let _ = std::fs::remove_file(&pool);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn write_loop(s: &dyn Store, sz: &Sizes, seed: u64) -> Result<(u64, f64)> {
    let m = s.create(ROOT_INO, b"f", 0o644, None).map_err(store_err)?;
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(m.ino, rw).map_err(store_err)?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..sz.file).step_by(block.len()) {
        let n = (sz.file - off).min(block.len() as u64) as usize;
        s.write(fh, off, &block[..n]).map_err(store_err)?;
    }
    let (blocks, data, mut rng) = (sz.file / 4096, vec![0xa5u8; 4096], seed | 1);
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let off = (next(&mut rng) % blocks) * 4096;
        s.write(fh, off, &data).map_err(store_err)?;
        s.fsync(fh, true).map_err(store_err)?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    s.release(fh).map_err(store_err)?;
    Ok((n, secs))
}

/// One measured system: its name and one run (seed → writes, seconds).
type System<'a> = (String, Box<dyn Fn(u64) -> Result<(u64, f64)> + 'a>);

fn figure(id: &str, title: &str) -> Figure {
    Figure {
        id: id.into(),
        title: title.into(),
        x_label: None,
        reference: "ext4".into(),
        metrics: vec![Metric::Iops],
        points: Vec::new(),
        systems: Vec::new(),
    }
}

/// `reps` runs of each system: IOPS rows (and the writes of each run).
fn measure(
    systems: &[System<'_>],
    reps: usize,
    seed: u64,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<(Vec<f64>, Vec<u64>)>> {
    let mut out: Vec<(Vec<f64>, Vec<u64>)> = systems.iter().map(|_| Default::default()).collect();
    for rep in 0..reps {
        // Alternate the systems in every round, so that drift of the machine hits both.
        for (i, (_, run)) in systems.iter().enumerate() {
            let (n, secs) = run(seed + rep as u64)?;
            out[i].0.push(n as f64 / secs.max(1e-9));
            out[i].1.push(n);
            bar.inc(1);
        }
    }
    Ok(out)
}

pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let sz = sizes(opts.mode);
    let disk = Ext4Disk::create(4 * sz.file + (256 << 20))?;
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let root = disk.root().to_path_buf();
    let mut systems: Vec<System<'_>> =
        vec![("ext4".into(), Box::new(|seed| run_ext4(&root, &sz, seed)))];
    for period in PERIODS_MS {
        let (root, sz) = (&root, &sz);
        systems.push((
            format!("cache-{period}ms"),
            Box::new(move |seed| run_cache(root, sz, period, seed)),
        ));
    }
    notes.push(format!(
        "cache: 4 KiB random writes + fsync each, 1 job, file {} MiB, {} ms per run, {} runs; \
         home and ext4 file on {}",
        sz.file >> 20,
        sz.run.as_millis(),
        sz.reps,
        disk.label()
    ));
    let bar = simple_bar("cache", (systems.len() * sz.reps) as u64, opts.progress);
    let runs = measure(&systems, sz.reps, opts.seed, &bar)?;
    bar.finish_and_clear();
    let medium = format!("{} (home directory; pool file in /dev/shm)", disk.label());
    let mut rand = FigureResult::default();
    let mut period = FigureResult::default();
    for ((name, _), (iops, writes)) in systems.iter().zip(runs) {
        let guarantee = if name == "ext4" {
            "each write durable at fdatasync"
        } else {
            "each write durable in PM when it returns"
        };
        let spec = (name.clone(), medium.clone(), guarantee.to_string());
        if name == "ext4" || name == "cache-10ms" {
            rand.rows.push(row(
                "cache-rand4k-sync",
                name,
                None,
                Metric::Iops,
                iops.clone(),
                writes.clone(),
            ));
            rand.systems.push(spec.clone());
        }
        period
            .rows
            .push(row("cache-period", name, None, Metric::Iops, iops, writes));
        period.systems.push(spec);
    }
    drop(systems);
    drop(disk);
    Ok(vec![
        (
            figure(
                "cache-rand4k-sync",
                "Synchronous 4 KiB random writes: cache (Store API) vs ext4 pwrite+fdatasync",
            ),
            rand,
        ),
        (
            figure(
                "cache-period",
                "Flush period sensitivity: cache at 0, 1, 10, 100, 1000 ms vs ext4",
            ),
            period,
        ),
    ])
}
