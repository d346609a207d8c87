//! The host-file engines on a distributed file system (docs/distributed.md): synchronous 4 KiB
//! random writes — each write followed by fsync, one job — directly on a GlusterFS mount
//! (pwrite + fdatasync) against the same writes through each host-file engine's Store API with
//! its home directory on that mount and its PM part in /dev/shm, in one run. Ratios against
//! the plain mount are what count. The engines' background checkpoints and flushes run on the
//! same cores during the measurement; the GlusterFS brick, glusterd and the FUSE client run on
//! this machine too (loopback), so every write to the mount crosses FUSE and a local TCP
//! connection twice.
//!
//! The mount: `ATOMFS_GLUSTER_MOUNT` when set (an existing GlusterFS mount), else the
//! single-brick volume of `scripts/gluster.sh up`, brought up for the run and down after it
//! (unless it was already up).

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

pub const SUITE: &str = "distributed";

/// A measured engine: its label, its registry name, and the options that differ from its
/// defaults.
type EngineSpec = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The engines measured.
const ENGINES: &[EngineSpec] = &[
    ("mmio", "mmio", &[]),
    ("mmio-redo", "mmio", &[("policy", "redo")]),
    ("journal", "journal", &[]),
    ("cache", "cache", &[("flush_period", "10ms")]),
    ("remap-copy", "remap", &[("checkpoint", "copy")]),
];

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
            reps: 1,
        },
        Mode::Quick => Sizes {
            file: 16 << 20,
            run: Duration::from_millis(1500),
            reps: 2,
        },
        Mode::Full => Sizes {
            file: 128 << 20,
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

/// The GlusterFS mount of the run; brings the script's cluster down when dropped if it
/// brought it up.
struct Mount {
    path: PathBuf,
    script: Option<PathBuf>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gluster.sh")
}

fn gluster(script: &Path, arg: &str) -> Result<(bool, String)> {
    let out = Command::new("bash")
        .arg(script)
        .arg(arg)
        .output()
        .map_err(|e| io("run", script, e))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() && arg != "status" {
        return Err(BenchError::Invalid(format!(
            "{} {arg}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok((out.status.success(), text))
}

impl Mount {
    fn get() -> Result<Mount> {
        if let Some(path) = std::env::var_os("ATOMFS_GLUSTER_MOUNT") {
            return Ok(Mount {
                path: PathBuf::from(path),
                script: None,
            });
        }
        let script = script();
        let (up, mut status) = gluster(&script, "status")?;
        let mut ours = None;
        if !up {
            status = gluster(&script, "up")?.1;
            ours = Some(script);
        }
        let path = status
            .lines()
            .find_map(|l| l.strip_prefix("single_mount="))
            .map(PathBuf::from)
            .ok_or_else(|| BenchError::Invalid("gluster.sh status names no mount".into()))?;
        Ok(Mount { path, script: ours })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(script) = &self.script {
            if let Err(e) = gluster(script, "down") {
                eprintln!("{e}");
            }
        }
    }
}

/// A directory of this run on the mount, removed when dropped.
struct RunDir(PathBuf);

impl RunDir {
    fn new(mount: &Path) -> Result<RunDir> {
        let dir = mount.join(format!("atomfs-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| io("mkdir", &dir, e))?;
        Ok(RunDir(dir))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// pwrite + fdatasync of random 4 KiB blocks of a prefilled file on the mount.
fn run_plain(dir: &Path, sz: &Sizes, seed: u64) -> Result<(u64, f64)> {
    let path = dir.join(format!("plain-{seed}.dat"));
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

fn store_err(engine: &str, e: store::Error) -> BenchError {
    BenchError::Invalid(format!("{engine}: {e}"))
}

/// The same writes, each followed by fsync, through a store of `engine` (home on the mount).
fn run_engine(
    dir: &Path,
    sz: &Sizes,
    (label, engine, extra): EngineSpec,
    seed: u64,
) -> Result<(u64, f64)> {
    let home = dir.join(format!("{label}-home-{seed}"));
    std::fs::create_dir_all(&home).map_err(|e| io("mkdir", &home, e))?;
    let pool = crate::scratch_path(&format!("{label}.pool"));
    let mut options = engines::Options::new();
    options.set("home", home.display().to_string());
    if engine != "remap" {
        options.set("size", (2 * sz.file + (64 << 20)).to_string());
    }
    for (k, v) in extra {
        options.set(k, v.to_string());
    }
    let opened = engines::create(&pool, engine, &options).map_err(|e| store_err(label, e));
    let result = opened.and_then(|opened| {
        let measured = write_loop(opened.store.as_ref(), sz, seed).map_err(|e| store_err(label, e));
        let unmounted = opened.unmount().map_err(|e| store_err(label, e));
        let measured = measured?;
        unmounted.map(|()| measured)
    });
    let _ = std::fs::remove_file(&pool);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn write_loop(s: &dyn Store, sz: &Sizes, seed: u64) -> store::Result<(u64, f64)> {
    let m = s.create(ROOT_INO, b"f", 0o644, None)?;
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(m.ino, rw)?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..sz.file).step_by(block.len()) {
        let n = (sz.file - off).min(block.len() as u64) as usize;
        s.write(fh, off, &block[..n])?;
    }
    s.fsync(fh, false)?;
    let (blocks, data, mut rng) = (sz.file / 4096, vec![0xa5u8; 4096], seed | 1);
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let off = (next(&mut rng) % blocks) * 4096;
        s.write(fh, off, &data)?;
        s.fsync(fh, true)?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    s.release(fh)?;
    Ok((n, secs))
}

/// One measured system: its name and one run (seed → writes, seconds).
type System<'a> = (String, Box<dyn Fn(u64) -> Result<(u64, f64)> + 'a>);

pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let sz = sizes(opts.mode);
    let mount = Mount::get()?;
    let dir = RunDir::new(&mount.path)?;
    let root = dir.0.clone();
    let mut systems: Vec<System<'_>> = vec![(
        "glusterfs".into(),
        Box::new(|seed| run_plain(&root, &sz, seed)),
    )];
    for &engine in ENGINES {
        let (root, sz) = (&root, &sz);
        systems.push((
            engine.0.to_string(),
            Box::new(move |seed| run_engine(root, sz, engine, seed)),
        ));
    }
    notes.push(format!(
        "distributed: 4 KiB random writes + fsync each, 1 job, file {} MiB, {} ms per run, {} \
         runs; files and home directories on the GlusterFS mount {} (FUSE client, brick and \
         glusterd on this machine over loopback), PM parts in /dev/shm",
        sz.file >> 20,
        sz.run.as_millis(),
        sz.reps,
        mount.path.display()
    ));
    let bar = simple_bar(SUITE, (systems.len() * sz.reps) as u64, opts.progress);
    let mut result = FigureResult::default();
    let mut runs: Vec<(Vec<f64>, Vec<u64>)> = systems.iter().map(|_| Default::default()).collect();
    for rep in 0..sz.reps {
        // Every system in every round, so that drift of the machine hits all of them.
        for (i, (_, run)) in systems.iter().enumerate() {
            let (n, secs) = run(opts.seed + rep as u64)?;
            runs[i].0.push(n as f64 / secs.max(1e-9));
            runs[i].1.push(n);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let medium = format!(
        "GlusterFS mount {} (PM part in /dev/shm)",
        mount.path.display()
    );
    for ((name, _), (iops, writes)) in systems.iter().zip(runs) {
        let guarantee = if name == "glusterfs" {
            "each write durable on the brick at fdatasync"
        } else {
            "each write durable (PM or home) when fsync returns"
        };
        result.rows.push(row(
            "distributed-rand4k-sync",
            name,
            None,
            Metric::Iops,
            iops,
            writes,
        ));
        result
            .systems
            .push((name.clone(), medium.clone(), guarantee.to_string()));
    }
    drop(systems);
    drop(dir);
    drop(mount);
    let figure = Figure {
        id: "distributed-rand4k-sync".into(),
        title: "Synchronous 4 KiB random writes on GlusterFS: each host-file engine (home on \
                the mount, PM in /dev/shm) vs pwrite+fdatasync on the mount"
            .into(),
        x_label: None,
        reference: "glusterfs".into(),
        metrics: vec![Metric::Iops],
        points: Vec::new(),
        systems: Vec::new(),
    };
    Ok(vec![(figure, result)])
}
