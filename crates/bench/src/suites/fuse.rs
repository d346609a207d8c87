//! Suite `fuse`: the same fio jobs on an atomfs pool mounted with FUSE (`atomfs mount`, pool
//! in /dev/shm), on ext4 on a /dev/shm-backed loop device, and on tmpfs (not durable: the
//! cost of the FUSE round trip shows against it). Jobs, each its own figure:
//! - `fuse-randwrite`: 4 KiB random writes, fsync after each (IOPS);
//! - `fuse-seqwrite`: 1 MiB sequential writes of a whole file, fsync at the end (MB/s);
//! - `fuse-seqread`: 1 MiB sequential reads of that file, page cache dropped first (MB/s).
//!
//! Every run of a job is interleaved across the targets (job 1 on every target, job 2 on
//! every target, ..., then the next repetition), after one unrecorded warm-up round that also
//! lays the files out.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use crate::systems::fio::{self, FioResult};
use crate::systems::fuse_mount::AtomfsMount;
use std::path::PathBuf;

/// How big and how long, per mode.
struct Sizes {
    /// Size of the random-write file and of the sequential file, bytes.
    rand_file: u64,
    seq_file: u64,
    /// Run time of each random-write run, milliseconds.
    rand_ms: u64,
    reps: u32,
}

/// Memory one byte of job data costs across the targets: the pool (~1.5 copies), the ext4
/// image and its page cache, the FUSE page cache, tmpfs.
const MEMORY_COPIES: f64 = 5.5;

fn sizes(mode: Mode, notes: &mut Vec<String>) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            rand_file: 8 << 20,
            seq_file: 16 << 20,
            rand_ms: 200,
            reps: 2,
        },
        Mode::Quick => Sizes {
            rand_file: 64 << 20,
            seq_file: 256 << 20,
            rand_ms: 2000,
            reps: 5,
        },
        Mode::Full => {
            let wanted = 1u64 << 30;
            let budget = crate::machine::memory_available().unwrap_or(8 << 30) as f64 * 0.6;
            let fit = (budget / MEMORY_COPIES) as u64;
            let each = if 2 * wanted <= fit {
                wanted
            } else {
                let each = ((fit / 2) & !((1 << 20) - 1)).max(64 << 20);
                notes.push(format!(
                    "fuse: scaled down: files of {} MiB instead of 1024 MiB ({MEMORY_COPIES} \
                     copies of both must fit in 60% of available memory)",
                    each >> 20
                ));
                each
            };
            Sizes {
                rand_file: each,
                seq_file: each,
                rand_ms: 10_000,
                reps: 5,
            }
        }
    }
}

/// A directory the jobs run in, and what keeps it alive.
struct Target {
    name: &'static str,
    dir: PathBuf,
    medium: String,
    guarantee: &'static str,
    mount: Option<AtomfsMount>,
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.mount.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One fio job: figure id, the job's arguments, the side it measures, the metric.
struct Job {
    figure: &'static str,
    title: &'static str,
    args: Vec<String>,
    side: &'static str,
    metric: Metric,
}

fn jobs(sz: &Sizes, seed: u64) -> Vec<Job> {
    let common = |name: &str, file: &str, size: u64| {
        vec![
            format!("--name={name}"),
            format!("--filename={file}"),
            format!("--size={size}"),
            "--ioengine=psync".to_string(),
        ]
    };
    let mut rand = common("randwrite", "randwrite.dat", sz.rand_file);
    rand.extend(
        [
            "--bs=4k",
            "--rw=randwrite",
            "--fsync=1",
            "--time_based",
            &format!("--runtime={}ms", sz.rand_ms),
            &format!("--randseed={seed}"),
        ]
        .map(String::from),
    );
    let mut seqw = common("seqwrite", "seq.dat", sz.seq_file);
    seqw.extend(["--bs=1M", "--rw=write", "--end_fsync=1"].map(String::from));
    let mut seqr = common("seqread", "seq.dat", sz.seq_file);
    seqr.extend(["--bs=1M", "--rw=read", "--invalidate=1"].map(String::from));
    vec![
        Job {
            figure: "fuse-randwrite",
            title: "fio: 4 KiB random writes, fsync after each",
            args: rand,
            side: "write",
            metric: Metric::Iops,
        },
        Job {
            figure: "fuse-seqwrite",
            title: "fio: 1 MiB sequential writes of a whole file, fsync at the end",
            args: seqw,
            side: "write",
            metric: Metric::MbPerS,
        },
        Job {
            figure: "fuse-seqread",
            title: "fio: 1 MiB sequential reads, page cache dropped first",
            args: seqr,
            side: "read",
            metric: Metric::MbPerS,
        },
    ]
}

/// The targets that can run here; the others go to `skipped` with the reason.
fn targets(
    sz: &Sizes,
    disk: &Ext4Disk,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let pool_size = (2 * (sz.rand_file + sz.seq_file) + (256 << 20)).next_multiple_of(1 << 20);
    match AtomfsMount::create(pool_size) {
        Ok(m) => out.push(Target {
            name: "atomfs-fuse",
            dir: m.dir().to_path_buf(),
            medium: m.label(),
            guarantee: "each write(2) atomic and durable when it returns; fsync cheap",
            mount: Some(m),
        }),
        Err(BenchError::Skipped(why)) => skipped.push(("atomfs-fuse".into(), why)),
        Err(e) => return Err(e),
    }
    let ext4_dir = disk.root().join("fio");
    let tmpfs_dir = crate::scratch_path("fio-tmpfs");
    for dir in [&ext4_dir, &tmpfs_dir] {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::io("mkdir", dir, e))?;
    }
    out.push(Target {
        name: "ext4",
        dir: ext4_dir,
        medium: format!(
            "{} (mounted with default options: data=ordered)",
            disk.label()
        ),
        guarantee: "durable at fsync; a write is not atomic",
        mount: None,
    });
    out.push(Target {
        name: "tmpfs",
        dir: tmpfs_dir.clone(),
        medium: format!("tmpfs {}", tmpfs_dir.display()),
        guarantee: "NOT durable (fsync does nothing): a reference",
        mount: None,
    });
    Ok(out)
}

fn value(job: &Job, r: &FioResult) -> f64 {
    match job.metric {
        Metric::Iops => r.iops,
        _ => r.bw_bytes / 1e6,
    }
}

/// Warm-up round, then `reps` rounds of every job on every target; one figure per job.
fn measure(
    jobs: &[Job],
    targets: &[Target],
    reps: u32,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Vec<Vec<FioResult>>>> {
    // runs[job][target] = one result per repetition.
    let mut runs = vec![vec![Vec::new(); targets.len()]; jobs.len()];
    for rep in 0..=reps {
        for (j, job) in jobs.iter().enumerate() {
            for (t, target) in targets.iter().enumerate() {
                let what = if rep == 0 {
                    "warm-up".to_string()
                } else {
                    format!("run {rep}/{reps}")
                };
                bar.set_message(format!("{} on {} {what}", job.figure, target.name));
                let r = fio::run(&target.dir, &job.args, job.side).map_err(|e| match e {
                    BenchError::Interrupted => e,
                    e => BenchError::System {
                        system: target.name.into(),
                        message: e.to_string(),
                    },
                })?;
                if rep > 0 {
                    runs[j][t].push(r);
                }
                bar.inc(1);
            }
        }
    }
    Ok(runs)
}

/// Run the suite: three figures, x = none (one bar per target), reference ext4.
pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let fio_version = fio::version()?;
    let sz = sizes(opts.mode, notes);
    let disk = Ext4Disk::create(2 * (sz.rand_file + sz.seq_file) + (256 << 20))?;
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    let mut skipped = Vec::new();
    let targets = targets(&sz, &disk, &mut skipped)?;
    let jobs = jobs(&sz, opts.seed);
    notes.push(format!(
        "fuse: {fio_version}; random-write file {} MiB, {} ms per run; sequential file {} MiB; \
         {} runs per job and target after a warm-up round",
        sz.rand_file >> 20,
        sz.rand_ms,
        sz.seq_file >> 20,
        sz.reps
    ));
    let steps = (jobs.len() * targets.len()) as u64 * (sz.reps as u64 + 1);
    let bar = simple_bar("fuse", steps, opts.progress);
    let runs = measure(&jobs, &targets, sz.reps, &bar)?;
    bar.finish_and_clear();
    let mut out = Vec::new();
    for (job, per_target) in jobs.iter().zip(runs) {
        let mut res = FigureResult {
            skipped: skipped.clone(),
            ..Default::default()
        };
        for (target, rs) in targets.iter().zip(per_target) {
            let values = rs.iter().map(|r| value(job, r)).collect();
            let ios = rs.iter().map(|r| r.ios).collect();
            res.rows
                .push(row(job.figure, target.name, None, job.metric, values, ios));
            res.systems.push((
                target.name.into(),
                format!("{}; fio {}", target.medium, job.args.join(" ")),
                target.guarantee.into(),
            ));
        }
        out.push((
            Figure {
                id: job.figure.into(),
                title: job.title.into(),
                x_label: None,
                reference: "ext4".into(),
                metrics: vec![job.metric],
                points: Vec::new(),
                systems: Vec::new(),
            },
            res,
        ));
    }
    drop(targets); // unmount before the RAM disk goes
    drop(disk);
    Ok(out)
}
