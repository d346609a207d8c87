//! The remap engine (ACCFS seed, Figs. 6–8 and 11 at small scale): fio-like random 8 KiB
//! overwrites of one file, one job, with an fsync every 1, 2, 4 … 64 writes, on four file
//! systems each on its own loop device over a sparse image in /dev/shm:
//!
//! - `remap`: the engine's home on XFS (reflink=1); the file is opened O_ATOMIC, so each
//!   fsync commits the writes since the last one as one journal record (version
//!   consistency); checkpoints remap (FICLONERANGE). Each run ends with an unmount, i.e. a
//!   full checkpoint, inside the timed part;
//! - `ext4-ordered` (OJ) and `ext4-journal` (DJ): pwrite + fdatasync on ext4 data=ordered
//!   and data=journal;
//! - `xfs`: pwrite + fdatasync on XFS (no data journaling).
//!
//! Metrics per interval: writes per second (the reference is ext4-ordered), device bytes
//! per 8 KiB update from /sys/block/loopN/stat (every sector the file system sent to the
//! loop device during the run, after a syncfs; divide by 8192 for bytes per update byte),
//! and the process's CPU time per write (the loop device's kernel workers are not counted).
//! Then SQLite updates (mobibench-like: one row of 0–4 KiB per transaction): journal off
//! through the atomfs VFS on a remap store (home on the XFS image) against WAL and DELETE on
//! the ext4 data=ordered image. Systems alternate within every repetition; ext4 on a loop
//! device swings between runs, so the table prints each row's spread. Needs root (mount).

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use crate::systems::sqlite::Db;
use crate::workload::Rng;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenOptions, Store};

pub const SUITE: &str = "remap";

/// Bytes per write (the seed's fio job).
const IO: u64 = 8192;
/// Writes per fsync, the x axis of the throughput figure.
const INTERVALS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

struct Sizes {
    file: u64,
    image: u64,
    run: Duration,
    reps: usize,
    journal: u64,
    sqlite_rows: u64,
    sqlite_run: Duration,
}

fn sizes(mode: Mode) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            file: 2 << 20,
            image: 512 << 20,
            run: Duration::from_millis(30),
            reps: 1,
            journal: 4 << 20,
            sqlite_rows: 50,
            sqlite_run: Duration::from_millis(50),
        },
        Mode::Quick => Sizes {
            file: 16 << 20,
            image: 512 << 20,
            run: Duration::from_millis(250),
            reps: 2,
            journal: 128 << 20,
            sqlite_rows: 1000,
            sqlite_run: Duration::from_millis(700),
        },
        Mode::Full => Sizes {
            file: 256 << 20,
            image: 2 << 30,
            run: Duration::from_secs(3),
            reps: 3,
            journal: 128 << 20,
            sqlite_rows: 10_000,
            sqlite_run: Duration::from_secs(5),
        },
    }
}

fn io(what: &'static str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::io(what, path, e)
}

fn store_err(e: store::Error) -> BenchError {
    BenchError::System {
        system: "remap".into(),
        message: e.to_string(),
    }
}

fn run_cmd(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .map_err(|e| BenchError::Skipped(format!("{cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::Skipped(format!(
            "{cmd:?}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The file systems of the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FsKind {
    XfsReflink,
    Ext4Ordered,
    Ext4Journal,
    Xfs,
}

impl FsKind {
    fn label(self) -> &'static str {
        match self {
            FsKind::XfsReflink => "XFS reflink=1",
            FsKind::Ext4Ordered => "ext4 data=ordered",
            FsKind::Ext4Journal => "ext4 data=journal",
            FsKind::Xfs => "XFS",
        }
    }
}

/// A file system on a loop device over a sparse image in /dev/shm; unmounted, detached and
/// deleted on drop (by the mount point and device created here).
struct LoopFs {
    kind: FsKind,
    image: PathBuf,
    mount: PathBuf,
    device: Option<String>,
    mounted: bool,
}

impl LoopFs {
    fn new(kind: FsKind, size: u64) -> Result<LoopFs> {
        let tag = format!("{kind:?}").to_lowercase();
        let mut fs = LoopFs {
            kind,
            image: crate::scratch_path(&format!("remap-{tag}.img")),
            mount: crate::scratch_dir_path(&format!("remap-{tag}.mnt")),
            device: None,
            mounted: false,
        };
        std::fs::create_dir_all(&fs.mount).map_err(|e| io("mkdir", &fs.mount, e))?;
        let f = std::fs::File::create(&fs.image).map_err(|e| io("create", &fs.image, e))?;
        f.set_len(size).map_err(|e| io("size", &fs.image, e))?;
        drop(f);
        let mut mkfs = match kind {
            FsKind::XfsReflink => Command::new("mkfs.xfs"),
            FsKind::Xfs => Command::new("mkfs.xfs"),
            FsKind::Ext4Ordered | FsKind::Ext4Journal => Command::new("mkfs.ext4"),
        };
        match kind {
            FsKind::XfsReflink => mkfs.args(["-q", "-f", "-m", "reflink=1"]),
            FsKind::Xfs => mkfs.args(["-q", "-f", "-m", "reflink=0"]),
            // Inode tables and journal initialised now: no lazy-init writes during runs.
            FsKind::Ext4Ordered | FsKind::Ext4Journal => mkfs.args([
                "-q",
                "-F",
                "-b",
                "4096",
                "-J",
                "size=128",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
            ]),
        };
        run_cmd(mkfs.arg(&fs.image))?;
        let device = run_cmd(
            Command::new("losetup")
                .args(["-f", "--show"])
                .arg(&fs.image),
        )?;
        fs.device = Some(device.clone());
        let mut mount = Command::new("mount");
        match kind {
            FsKind::Ext4Ordered => mount.args(["-o", "data=ordered"]),
            FsKind::Ext4Journal => mount.args(["-o", "data=journal"]),
            FsKind::XfsReflink | FsKind::Xfs => &mut mount,
        };
        run_cmd(mount.arg(&device).arg(&fs.mount))?;
        fs.mounted = true;
        Ok(fs)
    }

    fn root(&self) -> &Path {
        &self.mount
    }

    fn label(&self) -> String {
        format!(
            "{} on {} over {}",
            self.kind.label(),
            self.device.as_deref().unwrap_or("?"),
            self.image.display()
        )
    }

    /// Bytes the file system has sent to the device since it was attached, after a syncfs
    /// (sectors written, field 7 of /sys/block/loopN/stat).
    fn device_bytes(&self) -> Result<u64> {
        let dir = std::fs::File::open(&self.mount).map_err(|e| io("open", &self.mount, e))?;
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: syncfs on a descriptor this function owns; no memory is passed.
            unsafe { libc::syncfs(dir.as_raw_fd()) };
        }
        let dev = self.device.as_deref().unwrap_or("");
        let name = dev.trim_start_matches("/dev/");
        let path = PathBuf::from(format!("/sys/block/{name}/stat"));
        let text = std::fs::read_to_string(&path).map_err(|e| io("read", &path, e))?;
        let sectors = text
            .split_whitespace()
            .nth(6)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| BenchError::Invalid(format!("{}: no sector count", path.display())))?;
        Ok(sectors * 512)
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let umount = Command::new("umount").arg(&self.mount).output();
            if !umount.is_ok_and(|o| o.status.success()) {
                let _ = Command::new("umount").arg("-l").arg(&self.mount).output();
            }
        }
        if let Some(dev) = self.device.take() {
            let _ = Command::new("losetup").args(["-d", &dev]).output();
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// One system of the fio figure: overwrite at `off`, make the writes since the last sync
/// durable, and finish everything the writes caused (checkpoint) at the end of a run.
trait Target {
    fn write(&mut self, off: u64, data: &[u8]) -> Result<()>;
    fn sync(&mut self) -> Result<()>;
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// pwrite + fdatasync on a host file.
struct Plain {
    file: std::fs::File,
    path: PathBuf,
}

impl Plain {
    fn new(dir: &Path) -> Result<Plain> {
        let path = dir.join("fio.dat");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("create", &path, e))?;
        Ok(Plain { file, path })
    }
}

impl Target for Plain {
    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, off)
            .map_err(|e| io("write", &self.path, e))
    }
    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| io("fdatasync", &self.path, e))
    }
}

/// An O_ATOMIC file of a remap store, opened through the engine registry; each run ends with
/// an unmount (a full checkpoint) and the store is opened again (recovery, untimed) for the
/// next run.
struct Remap {
    pool: PathBuf,
    opened: Option<(engines::OpenedStore, store::Fh)>,
    /// [`TOTALS`] summed over every opening of the store.
    totals: [u64; 4],
}

/// The engine's counters summed over the suite.
const TOTALS: [&str; 4] = [
    "checkpoints",
    "remap_calls",
    "remapped_blocks",
    "copied_blocks",
];

impl Remap {
    fn new(home: &Path, journal: u64) -> Result<Remap> {
        std::fs::create_dir_all(home).map_err(|e| io("mkdir", home, e))?;
        let pool = crate::scratch_path("remap.pool");
        let mut options = engines::Options::new();
        options.set("home", home.display().to_string());
        options.set("size", journal.to_string());
        let opened = engines::create(&pool, "remap", &options).map_err(store_err)?;
        let mut r = Remap {
            pool,
            opened: None,
            totals: [0; 4],
        };
        r.attach(opened)?;
        Ok(r)
    }

    fn attach(&mut self, opened: engines::OpenedStore) -> Result<()> {
        let fh = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .atomic(true)
            .open(opened.store.as_ref(), "/fio.dat", None)
            .map_err(store_err)?;
        self.opened = Some((opened, fh));
        Ok(())
    }

    fn store(&self) -> Result<(&dyn Store, store::Fh)> {
        let (o, fh) = self
            .opened
            .as_ref()
            .ok_or_else(|| BenchError::Invalid("remap: store closed".into()))?;
        Ok((o.store.as_ref(), *fh))
    }

    /// Open the store again after [`Target::finish`] (recovery; not timed).
    fn reopen(&mut self) -> Result<()> {
        if self.opened.is_none() {
            let opened = engines::open(&self.pool, &engines::Options::new()).map_err(store_err)?;
            self.attach(opened)?;
        }
        Ok(())
    }
}

impl Target for Remap {
    fn write(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let (s, fh) = self.store()?;
        s.write(fh, off, data).map(|_| ()).map_err(store_err)
    }
    fn sync(&mut self) -> Result<()> {
        let (s, fh) = self.store()?;
        s.fsync(fh, true).map_err(store_err)
    }
    fn finish(&mut self) -> Result<()> {
        if let Some((opened, fh)) = self.opened.take() {
            let stats = opened.store.stats();
            for (total, name) in self.totals.iter_mut().zip(TOTALS) {
                *total += stats.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
            }
            opened.store.release(fh).map_err(store_err)?;
            // persist: unmount checkpoints (remaps every committed pair home, syncs).
            opened.unmount().map_err(store_err)?;
        }
        Ok(())
    }
}

impl Drop for Remap {
    fn drop(&mut self) {
        let _ = self.finish();
        let _ = std::fs::remove_file(&self.pool);
        let mut lock = self.pool.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}

/// Write the whole file (1 MiB writes, each synced) so that every run overwrites.
fn fill(t: &mut dyn Target, len: u64) -> Result<()> {
    let block = vec![0x5au8; 1 << 20];
    for off in (0..len).step_by(block.len()) {
        let n = (len - off).min(block.len() as u64) as usize;
        t.write(off, &block[..n])?;
        t.sync()?;
    }
    t.finish()
}

/// One run's measurements.
struct Sample {
    writes: u64,
    secs: f64,
    device_bytes: u64,
    cpu: Duration,
}

/// Random 8 KiB overwrites with a sync every `every` writes for `sz.run` (whole intervals),
/// then [`Target::finish`] and a syncfs, all timed.
fn run_fio(t: &mut dyn Target, fs: &LoopFs, sz: &Sizes, every: u32, seed: u64) -> Result<Sample> {
    let mut rng = Rng::new(seed);
    let data: Vec<u8> = (0..IO).map(|_| rng.next_u64() as u8).collect();
    let blocks = sz.file / IO;
    let before = fs.device_bytes()?;
    let cpu0 = super::mmio::process_cpu();
    let start = Instant::now();
    let mut writes = 0u64;
    while start.elapsed() < sz.run || !writes.is_multiple_of(u64::from(every)) {
        if crate::interrupted() {
            return Err(BenchError::Interrupted);
        }
        t.write(rng.upto(blocks - 1) * IO, &data)?;
        writes += 1;
        if writes.is_multiple_of(u64::from(every)) {
            t.sync()?;
        }
    }
    t.finish()?;
    let device_bytes = fs.device_bytes()? - before;
    Ok(Sample {
        writes,
        secs: start.elapsed().as_secs_f64(),
        device_bytes,
        cpu: super::mmio::process_cpu().saturating_sub(cpu0),
    })
}

/// The systems of the fio figure, their file systems, and what each guarantees.
struct Bed {
    disks: Vec<LoopFs>,
    remap: Remap,
    plain: Vec<Plain>,
}

const FIO_SYSTEMS: [(&str, FsKind, &str); 4] = [
    (
        "remap",
        FsKind::XfsReflink,
        "version consistency: the writes between two fsyncs durable all or nothing (O_ATOMIC)",
    ),
    (
        "ext4-ordered",
        FsKind::Ext4Ordered,
        "each write durable at fdatasync; a crash between fsyncs can tear them (OJ)",
    ),
    (
        "ext4-journal",
        FsKind::Ext4Journal,
        "each write durable at fdatasync; data journaled (DJ)",
    ),
    (
        "xfs",
        FsKind::Xfs,
        "each write durable at fdatasync; no data journaling",
    ),
];

impl Bed {
    fn new(sz: &Sizes) -> Result<Bed> {
        let mut disks = Vec::new();
        for (_, kind, _) in FIO_SYSTEMS {
            disks.push(LoopFs::new(kind, sz.image)?);
        }
        let mut remap = Remap::new(&disks[0].root().join("home"), sz.journal)?;
        fill(&mut remap, sz.file)?;
        let mut plain = Vec::new();
        for d in &disks[1..] {
            let mut p = Plain::new(d.root())?;
            fill(&mut p, sz.file)?;
            plain.push(p);
        }
        Ok(Bed {
            disks,
            remap,
            plain,
        })
    }

    fn run(&mut self, system: usize, sz: &Sizes, every: u32, seed: u64) -> Result<Sample> {
        let disk = &self.disks[system];
        if system == 0 {
            self.remap.reopen()?;
            return run_fio(&mut self.remap, disk, sz, every, seed);
        }
        run_fio(&mut self.plain[system - 1], disk, sz, every, seed)
    }
}

fn figure(id: &str, title: &str, x_label: Option<&str>, reference: &str, m: Metric) -> Figure {
    Figure {
        id: id.into(),
        title: title.into(),
        x_label: x_label.map(str::to_string),
        reference: reference.into(),
        metrics: vec![m],
        points: Vec::new(),
        systems: Vec::new(),
    }
}

/// Per system and interval: the samples of every repetition.
type Samples = Vec<Vec<Vec<Sample>>>;

fn measure_fio(bed: &mut Bed, sz: &Sizes, seed: u64, progress: bool) -> Result<Samples> {
    let bar = simple_bar(
        "remap fio",
        (FIO_SYSTEMS.len() * INTERVALS.len() * sz.reps) as u64,
        progress,
    );
    let mut out: Samples = FIO_SYSTEMS
        .iter()
        .map(|_| INTERVALS.iter().map(|_| Vec::new()).collect())
        .collect();
    for (p, &every) in INTERVALS.iter().enumerate() {
        for rep in 0..sz.reps {
            // Alternate the systems within each repetition, so drift hits them all.
            for (s, cell) in out.iter_mut().enumerate() {
                let run_seed = seed ^ ((p * 64 + rep) as u64).wrapping_mul(0x9E37_79B9);
                cell[p].push(bed.run(s, sz, every, run_seed)?);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(out)
}

fn fio_results(bed: &Bed, samples: &Samples) -> [FigureResult; 3] {
    let mut res: [FigureResult; 3] = Default::default();
    for (s, (name, _, guarantee)) in FIO_SYSTEMS.iter().enumerate() {
        let medium = bed.disks[s].label();
        for r in res.iter_mut() {
            r.systems
                .push((name.to_string(), medium.clone(), guarantee.to_string()));
        }
        for (p, &every) in INTERVALS.iter().enumerate() {
            let runs = &samples[s][p];
            let writes: Vec<u64> = runs.iter().map(|x| x.writes).collect();
            let per = |f: &dyn Fn(&Sample) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
            let x = Some(f64::from(every));
            let iops = per(&|x| x.writes as f64 / x.secs.max(1e-9));
            let bytes = per(&|x| x.device_bytes as f64 / x.writes.max(1) as f64);
            let cpu = per(&|x| x.cpu.as_secs_f64() * 1e6 / x.writes.max(1) as f64);
            let rows = [
                ("remap-fio", Metric::Iops, iops),
                ("remap-device-bytes", Metric::NvmmBytesPerTx, bytes),
                ("remap-cpu", Metric::CpuUsPerTx, cpu),
            ];
            for (r, (fig, metric, values)) in res.iter_mut().zip(rows) {
                r.rows
                    .push(row(fig, name, x, metric, values, writes.clone()));
            }
        }
    }
    res
}

/// Bytes per update byte, per system and interval (medians), for the notes.
fn bytes_note(res: &FigureResult) -> String {
    let mut s = String::from(
        "remap: device bytes per update byte (median; /sys/block/loopN/stat over the run, \
         checkpoint and writeback included):",
    );
    for (name, _, _) in FIO_SYSTEMS {
        let cells: Vec<String> = INTERVALS
            .iter()
            .filter_map(|&every| {
                res.rows
                    .iter()
                    .find(|r| r.system == name && r.param == Some(f64::from(every)))
                    .map(|r| format!("{every}:{:.2}", r.median / IO as f64))
            })
            .collect();
        s.push_str(&format!(" {name} [{}];", cells.join(" ")));
    }
    s
}

pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let sz = sizes(opts.mode);
    let mut bed = match Bed::new(&sz) {
        Ok(b) => b,
        Err(BenchError::Skipped(why)) => {
            notes.push(format!(
                "remap: skipped: loop-mounted XFS and ext4 images are needed (root, mkfs.xfs, \
                 mkfs.ext4, losetup): {why}"
            ));
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    notes.push(format!(
        "remap: random {IO}-byte overwrites of a {} MiB file, 1 job, {} ms per run (whole fsync \
         intervals; remap's run ends with its checkpoint, every run with a syncfs), {} runs; \
         remap journal limit {} MiB; each file system on its own {} MiB loop image in /dev/shm",
        sz.file >> 20,
        sz.run.as_millis(),
        sz.reps,
        sz.journal >> 20,
        sz.image >> 20
    ));
    let samples = measure_fio(&mut bed, &sz, opts.seed, opts.progress)?;
    let [iops, bytes, cpu] = fio_results(&bed, &samples);
    notes.push(bytes_note(&bytes));
    let [ckpts, calls, remapped, copied] = bed.remap.totals;
    notes.push(format!(
        "remap: {ckpts} checkpoints, {calls} FICLONERANGE calls, {remapped} blocks remapped, \
         {copied} copied (fill and every run)"
    ));
    let mut out = vec![
        (
            figure(
                "remap-fio",
                "Random 8 KiB writes, fsync every N writes: remap (O_ATOMIC) vs ext4 OJ/DJ and XFS",
                Some("writes per fsync"),
                "ext4-ordered",
                Metric::Iops,
            ),
            iops,
        ),
        (
            figure(
                "remap-device-bytes",
                "Device bytes written per 8 KiB update (÷ 8192 = per update byte)",
                Some("writes per fsync"),
                "ext4-ordered",
                Metric::NvmmBytesPerTx,
            ),
            bytes,
        ),
        (
            figure(
                "remap-cpu",
                "Process CPU time per 8 KiB write (loop-device kernel workers not counted)",
                Some("writes per fsync"),
                "ext4-ordered",
                Metric::CpuUsPerTx,
            ),
            cpu,
        ),
    ];
    let home = bed.disks[0].root().join("sqlite-home");
    let ext4 = bed.disks[1].root().to_path_buf();
    match sqlite_figure(&sz, &home, &ext4, opts, notes) {
        Ok(fig) => out.push(fig),
        Err(BenchError::Skipped(why)) | Err(BenchError::System { message: why, .. }) => {
            notes.push(format!("remap: SQLite figure skipped: {why}"))
        }
        Err(e) => return Err(e),
    }
    drop(bed);
    Ok(out)
}

/// One SQLite configuration of the SQLite figure.
struct SqlConfig {
    name: &'static str,
    journal: &'static str,
    on_remap: bool,
}

const SQL_CONFIGS: [SqlConfig; 3] = [
    SqlConfig {
        name: "remap-sqlite-off",
        journal: "off",
        on_remap: true,
    },
    SqlConfig {
        name: "sqlite-wal-ext4",
        journal: "wal",
        on_remap: false,
    },
    SqlConfig {
        name: "sqlite-delete-ext4",
        journal: "delete",
        on_remap: false,
    },
];

/// An open, filled database of one configuration.
struct SqlDb {
    db: Option<Db>,
    cleanup: Vec<PathBuf>,
}

impl Drop for SqlDb {
    fn drop(&mut self) {
        self.db = None;
        for p in &self.cleanup {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
    }
}

fn open_sql(c: &SqlConfig, home: &Path, ext4: &Path, rows: u64, rng: &mut Rng) -> Result<SqlDb> {
    let mut sdb = SqlDb {
        db: None,
        cleanup: Vec::new(),
    };
    let (name, uri) = if c.on_remap {
        crate::systems::sqlite_vfs::ensure_loaded()?;
        std::fs::create_dir_all(home).map_err(|e| io("mkdir", home, e))?;
        let pool = crate::scratch_path("remap-sqlite.pool");
        let mut lock = pool.clone().into_os_string();
        lock.push(".lock");
        sdb.cleanup
            .extend([pool.clone(), PathBuf::from(lock), home.into()]);
        let v = super::sqlite::uri_value;
        let options = v(&format!("home={}", home.display()));
        let uri = format!(
            "file:/bench.db?vfs=atomfs&pool={}&engine=remap&options={options}",
            v(&pool.display().to_string())
        );
        (uri, true)
    } else {
        let dir = ext4.join(c.name);
        std::fs::create_dir_all(&dir).map_err(|e| io("mkdir", &dir, e))?;
        sdb.cleanup.push(dir.clone());
        (dir.join("bench.db").display().to_string(), false)
    };
    let mut db = Db::open(&name, uri)?;
    for q in [
        "PRAGMA page_size=4096".to_string(),
        format!("PRAGMA journal_mode={}", c.journal),
        "PRAGMA synchronous=FULL".into(),
    ] {
        db.query(&q)?;
    }
    let mode = db.query("PRAGMA journal_mode")?;
    if !mode.eq_ignore_ascii_case(c.journal) {
        return Err(BenchError::System {
            system: c.name.into(),
            message: format!("journal_mode reads back as {mode:?}"),
        });
    }
    db.query("CREATE TABLE kv(id INTEGER PRIMARY KEY, v BLOB)")?;
    db.prepare()?;
    db.query("BEGIN")?;
    for id in 0..rows {
        db.put(true, id as i64, &value(rng))?;
    }
    db.query("COMMIT")?;
    sdb.db = Some(db);
    Ok(sdb)
}

/// A value of 0–4 KiB.
fn value(rng: &mut Rng) -> Vec<u8> {
    let len = rng.upto(4096) as usize;
    (0..len)
        .map(|i| (i as u8) ^ (rng.next_u64() as u8))
        .collect()
}

/// Updates (each its own transaction) for `run`: updates per second.
fn sql_run(sdb: &mut SqlDb, rows: u64, run: Duration, rng: &mut Rng) -> Result<(f64, u64)> {
    let db = sdb
        .db
        .as_mut()
        .ok_or_else(|| BenchError::Invalid("sqlite: closed".into()))?;
    let start = Instant::now();
    let mut n = 0u64;
    let mut last = (0i64, 0u64);
    while start.elapsed() < run || n < 10 {
        let id = rng.upto(rows - 1) as i64;
        let v = value(rng);
        last = (id, v.len() as u64);
        db.put(false, id, &v)?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    if db.value_length(last.0) != Some(last.1) {
        return Err(BenchError::Invalid(format!(
            "sqlite: row {} does not hold the {} bytes just written",
            last.0, last.1
        )));
    }
    Ok((n as f64 / secs, n))
}

fn sqlite_figure(
    sz: &Sizes,
    home: &Path,
    ext4: &Path,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<(Figure, FigureResult)> {
    let mut rng = Rng::new(opts.seed ^ 0x5EED_5017);
    let mut dbs = Vec::new();
    for c in &SQL_CONFIGS {
        dbs.push(open_sql(
            c,
            &home.join(c.name),
            ext4,
            sz.sqlite_rows,
            &mut rng,
        )?);
    }
    let bar = simple_bar("remap sqlite", (dbs.len() * sz.reps) as u64, opts.progress);
    let mut runs: Vec<(Vec<f64>, Vec<u64>)> = dbs.iter().map(|_| Default::default()).collect();
    for _ in 0..sz.reps {
        for (db, out) in dbs.iter_mut().zip(runs.iter_mut()) {
            let (ups, n) = sql_run(db, sz.sqlite_rows, sz.sqlite_run, &mut rng)?;
            out.0.push(ups);
            out.1.push(n);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    for db in dbs.iter_mut() {
        let ok = db.db.as_mut().map(|d| d.query("PRAGMA integrity_check"));
        if !matches!(ok, Some(Ok(ref s)) if s == "ok") {
            return Err(BenchError::Invalid(format!(
                "sqlite: integrity_check: {ok:?}"
            )));
        }
    }
    drop(dbs);
    notes.push(format!(
        "remap: SQLite {} rows, updates of one row with a 0–4 KiB value, each its own \
         transaction, synchronous=FULL, {} ms per run, {} runs; remap's home on the XFS \
         reflink image, ext4 data=ordered image for WAL and DELETE",
        sz.sqlite_rows,
        sz.sqlite_run.as_millis(),
        sz.reps
    ));
    let mut res = FigureResult::default();
    for (c, (ups, n)) in SQL_CONFIGS.iter().zip(runs) {
        res.rows
            .push(row("remap-sqlite", c.name, None, Metric::TxPerS, ups, n));
        let medium = if c.on_remap {
            "atomfs VFS, engine remap, home on XFS reflink=1 (loop over /dev/shm)"
        } else {
            "ext4 data=ordered (loop over /dev/shm)"
        };
        res.systems.push((
            c.name.into(),
            format!("{medium}; PRAGMA journal_mode={}", c.journal),
            "atomic and durable at commit".into(),
        ));
    }
    Ok((
        figure(
            "remap-sqlite",
            "SQLite row updates: journal off on remap vs WAL and DELETE on ext4 ordered",
            None,
            "sqlite-wal-ext4",
            Metric::TxPerS,
        ),
        res,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    /// The tiny run: every system at every interval, the byte counts and the SQLite figure
    /// (shapes, not speed); skipped with the reason where loop mounts are impossible.
    #[test]
    fn tiny_run_measures_every_system_at_every_interval() {
        let opts = Options {
            mode: Mode::Tiny,
            out: crate::scratch_path("remap-tiny-out"),
            progress: false,
            seed: 7,
            systems: Vec::new(),
        };
        let mut notes = Vec::new();
        let figures = run(&opts, &mut notes).unwrap();
        if figures.is_empty() {
            test_support::unavailable("remap bench suite", &notes.join("; "));
            return;
        }
        let ids: Vec<&str> = figures.iter().map(|(f, _)| f.id.as_str()).collect();
        assert_eq!(&ids[..3], ["remap-fio", "remap-device-bytes", "remap-cpu"]);
        for (fig, res) in &figures[..3] {
            assert_eq!(
                res.rows.len(),
                FIO_SYSTEMS.len() * INTERVALS.len(),
                "{}",
                fig.id
            );
            assert!(res.rows.iter().all(|r| r.median > 0.0), "{}", fig.id);
        }
        // Every update reached the device at least once (8 KiB each, minus what a later
        // write of the same block in the same interval absorbed: not below half here).
        let bytes = &figures[1].1;
        assert!(bytes.rows.iter().all(|r| r.median > IO as f64 / 2.0));
        // data=journal writes the data twice.
        let dj = bytes
            .rows
            .iter()
            .find(|r| r.system == "ext4-journal")
            .unwrap();
        assert!(dj.median > 1.5 * IO as f64, "{}", dj.median);
        if let Some((_, sql)) = figures.get(3) {
            assert_eq!(sql.rows.len(), SQL_CONFIGS.len());
        } else {
            assert!(notes.iter().any(|n| n.contains("SQLite figure skipped")));
        }
    }
}
