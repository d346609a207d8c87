//! The cache engine (First Responder, seed chapter V), in one run against ext4 on the same
//! loop device kind (the ext4 RAM disk of the other suites: an image in /dev/shm on a loop
//! device; the cache's home directory on it, its pool in /dev/shm):
//! - `cache-rand4k-sync`: fio-like synchronous 4 KiB random writes — each write followed by
//!   fsync, one job — through the Rust Store API (flush period 10 ms) and through an
//!   `atomfs mount` of a cache store, against pwrite + fdatasync on a file of the same ext4;
//! - `cache-varmail`: a varmail-like fsync-heavy mix through the mount against the same mix
//!   on the ext4 directory (one iteration: delete a mail file, create it with 16 KiB and
//!   fsync, append 8 KiB to another and fsync, read a third whole);
//! - `cache-period`: the flush-period sensitivity through the API (0 = write-through, 1 ms,
//!   10 ms, 100 ms, 1 s).
//!
//! Ratios against ext4 are what count: ext4 on a loop device swings widely between runs.
//! Each cache write is durable in the PM pool when it returns; its background flusher (and
//! the FUSE server of the mount) run on the same cores during the measurement.
//! Not yet: postmark, fileserver, YCSB-A, 4 jobs and the ext4 image on the real disk.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

pub const SUITE: &str = "cache";

/// Flush periods of the sensitivity figure, in milliseconds.
const PERIODS_MS: [u64; 5] = [0, 1, 10, 100, 1000];

struct Sizes {
    file: u64,
    run: Duration,
    reps: usize,
    /// Mail files of the varmail-like mix.
    mails: u64,
}

fn sizes(mode: Mode) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            file: 1 << 20,
            run: Duration::from_millis(40),
            reps: 2,
            mails: 8,
        },
        Mode::Quick => Sizes {
            file: 64 << 20,
            run: Duration::from_millis(1000),
            reps: 3,
            mails: 100,
        },
        Mode::Full => Sizes {
            file: 256 << 20,
            run: Duration::from_secs(10),
            reps: 5,
            mails: 1000,
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

/// pwrite + fdatasync of random 4 KiB blocks of a prefilled file in `dir` (the ext4 disk,
/// or the mount): (writes, seconds).
fn run_files(dir: &Path, sz: &Sizes, seed: u64) -> Result<(u64, f64)> {
    let path = dir.join(format!("rand4k-{seed}.dat"));
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

const MAIL_LEN: usize = 16 << 10;
const APPEND_LEN: usize = 8 << 10;

fn mail_path(set: &Path, i: u64) -> PathBuf {
    set.join(format!("mail-{i}"))
}

/// Create mail `i` with `MAIL_LEN` bytes, fsync'ed.
fn write_mail(set: &Path, i: u64, data: &[u8]) -> Result<()> {
    let path = mail_path(set, i);
    let f = std::fs::File::create(&path).map_err(|e| io("create", &path, e))?;
    f.write_all_at(data, 0).map_err(|e| io("write", &path, e))?;
    f.sync_all().map_err(|e| io("fsync", &path, e))
}

/// One varmail-like iteration on mails `a`, `b`, `c`: delete and create `a` (16 KiB,
/// fsync), append 8 KiB to `b` (fsync), read `c` whole.
fn mail_round(set: &Path, (a, b, c): (u64, u64, u64), data: &[u8]) -> Result<()> {
    let path = mail_path(set, a);
    std::fs::remove_file(&path).map_err(|e| io("unlink", &path, e))?;
    write_mail(set, a, &data[..MAIL_LEN])?;
    let path = mail_path(set, b);
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| io("open", &path, e))?;
    std::io::Write::write_all(&mut &f, &data[..APPEND_LEN]).map_err(|e| io("append", &path, e))?;
    f.sync_data().map_err(|e| io("fdatasync", &path, e))?;
    let path = mail_path(set, c);
    let read = std::fs::read(&path).map_err(|e| io("read", &path, e))?;
    assert!(
        read.len() >= MAIL_LEN,
        "mail {c} shorter than it was written"
    );
    Ok(())
}

/// The varmail-like mix in `dir` (the ext4 disk, or the mount): (iterations, seconds).
fn run_varmail(dir: &Path, sz: &Sizes, seed: u64) -> Result<(u64, f64)> {
    let set = dir.join(format!("varmail-{seed}"));
    std::fs::create_dir_all(&set).map_err(|e| io("mkdir", &set, e))?;
    let data = vec![0x6du8; MAIL_LEN];
    for i in 0..sz.mails {
        write_mail(&set, i, &data)?;
    }
    let (mut rng, start, mut n) = (seed | 1, Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let mut pick = || next(&mut rng) % sz.mails;
        mail_round(&set, (pick(), pick(), pick()), &data)?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&set);
    Ok((n, secs))
}

/// A cache store — home directory on the ext4 disk, pool in /dev/shm — mounted with
/// `atomfs mount` (default options: flush period 10 ms). Unmounted (`atomfs umount`, else
/// `fusermount3 -u -z`) and removed on drop.
struct CacheMount {
    cli: PathBuf,
    pool: PathBuf,
    home: PathBuf,
    dir: PathBuf,
    mounted: bool,
}

fn command(cmd: &mut Command) -> std::result::Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd:?}: {} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

impl CacheMount {
    fn create(root: &Path, pool_len: u64) -> Result<Self> {
        if !Path::new("/dev/fuse").exists() {
            return Err(BenchError::Skipped("no /dev/fuse".into()));
        }
        let cli = crate::systems::fuse_mount::cli_binary()?;
        let mut m = CacheMount {
            cli,
            pool: crate::scratch_path("cache-mount.pool"),
            home: root.join("cache-mount-home"),
            dir: crate::scratch_dir_path("cache-mnt"),
            mounted: false,
        };
        for d in [&m.home, &m.dir] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io("mkdir", d, e))?;
        }
        let fail = |message: String| BenchError::System {
            system: "cache-mount".into(),
            message,
        };
        command(
            Command::new(&m.cli)
                .arg("mkfs")
                .arg(&m.pool)
                .args(["--engine", "cache", "--home"])
                .arg(&m.home)
                .arg("--size")
                .arg(pool_len.to_string()),
        )
        .map_err(fail)?;
        command(Command::new(&m.cli).arg("mount").arg(&m.pool).arg(&m.dir))
            .map_err(|why| BenchError::Skipped(format!("atomfs mount failed: {why}")))?;
        m.mounted = true;
        Ok(m)
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CacheMount {
    fn drop(&mut self) {
        if self.mounted {
            let clean = command(Command::new(&self.cli).arg("umount").arg(&self.dir));
            if clean.is_err() {
                let _ = command(
                    Command::new("fusermount3")
                        .args(["-u", "-z"])
                        .arg(&self.dir),
                );
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::remove_file(&self.pool);
        let _ = std::fs::remove_dir_all(&self.home);
    }
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

/// The rows of one system in the figures it belongs to.
fn add_rows(
    figures: &mut [(&str, &mut FigureResult, &[&str])],
    name: &str,
    (iops, writes): (Vec<f64>, Vec<u64>),
    medium: &str,
) {
    let guarantee = if name.starts_with("ext4") {
        "each write durable at fsync/fdatasync"
    } else {
        "each write durable in PM when it returns"
    };
    for (id, result, members) in figures.iter_mut() {
        if members.contains(&name) {
            let shown = name.trim_end_matches("-varmail");
            result.rows.push(row(
                id,
                shown,
                None,
                Metric::Iops,
                iops.clone(),
                writes.clone(),
            ));
            result
                .systems
                .push((shown.into(), medium.into(), guarantee.into()));
        }
    }
}

pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let sz = sizes(opts.mode);
    let disk = Ext4Disk::create(6 * sz.file + (256 << 20))?;
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let root = disk.root().to_path_buf();
    let pool_len = 2 * sz.file + (64 << 20);
    let mount = match CacheMount::create(&root, pool_len) {
        Ok(m) => Some(m),
        Err(BenchError::Skipped(why)) => {
            notes.push(format!("cache: the mount workloads skipped: {why}"));
            None
        }
        Err(e) => return Err(e),
    };
    let (r, sz_ref) = (&root, &sz);
    let mut systems: Vec<System<'_>> = vec![(
        "ext4".into(),
        Box::new(move |seed| run_files(r, sz_ref, seed)),
    )];
    for period in PERIODS_MS {
        systems.push((
            format!("cache-{period}ms"),
            Box::new(move |seed| run_cache(r, sz_ref, period, seed)),
        ));
    }
    let mut mixes: Vec<System<'_>> = vec![(
        "ext4-varmail".into(),
        Box::new(move |seed| run_varmail(r, sz_ref, seed)),
    )];
    if let Some(m) = &mount {
        let dir = m.dir();
        systems.push((
            "cache-mount".into(),
            Box::new(move |seed| run_files(dir, sz_ref, seed)),
        ));
        mixes.push((
            "cache-mount-varmail".into(),
            Box::new(move |seed| run_varmail(dir, sz_ref, seed)),
        ));
    }
    notes.push(format!(
        "cache: 4 KiB random writes + fsync each, 1 job, file {} MiB; varmail-like mix over {} \
         mails of 16 KiB; {} ms per run, {} runs, systems alternating; home directories and \
         ext4 files on {}; the mount: `atomfs mount` (FUSE) of a cache store, default options",
        sz.file >> 20,
        sz.mails,
        sz.run.as_millis(),
        sz.reps,
        disk.label()
    ));
    let total = ((systems.len() + mixes.len()) * sz.reps) as u64;
    let bar = simple_bar("cache", total, opts.progress);
    let runs = measure(&systems, sz.reps, opts.seed, &bar)?;
    let mix_runs = measure(&mixes, sz.reps, opts.seed, &bar)?;
    bar.finish_and_clear();
    let medium = format!("{} (home directory; pool file in /dev/shm)", disk.label());
    let (mut rand, mut varmail, mut period) = Default::default();
    let period_members: Vec<String> = std::iter::once("ext4".to_string())
        .chain(PERIODS_MS.iter().map(|p| format!("cache-{p}ms")))
        .collect();
    let period_members: Vec<&str> = period_members.iter().map(String::as_str).collect();
    let mut figures = [
        (
            "cache-rand4k-sync",
            &mut rand,
            &["ext4", "cache-10ms", "cache-mount"][..],
        ),
        (
            "cache-varmail",
            &mut varmail,
            &["ext4-varmail", "cache-mount-varmail"][..],
        ),
        ("cache-period", &mut period, &period_members[..]),
    ];
    let all = systems.iter().zip(runs).chain(mixes.iter().zip(mix_runs));
    for ((name, _), result) in all {
        add_rows(&mut figures, name, result, &medium);
    }
    if mount.is_none() {
        varmail
            .skipped
            .push(("cache-mount".into(), "atomfs mount unavailable here".into()));
    }
    drop(systems);
    drop(mixes);
    drop(mount);
    drop(disk);
    Ok(vec![
        (
            figure(
                "cache-rand4k-sync",
                "Synchronous 4 KiB random writes: cache through the Store API (10 ms) and through atomfs mount vs ext4 pwrite+fdatasync",
            ),
            rand,
        ),
        (
            figure(
                "cache-varmail",
                "Varmail-like fsync-heavy mix (iterations/s: delete+create 16 KiB+fsync, append 8 KiB+fsync, read): cache through atomfs mount vs ext4",
            ),
            varmail,
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
