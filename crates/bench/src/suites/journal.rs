//! The journal engine (NJS, seed §4, Fig. 10a and 11a): IOzone-like writes of 4 KiB, each
//! followed by fsync, on one large file — sequential write (appends), re-write (sequential
//! over-writes) and random write — through the journal engine's Store API (home directory on
//! an ext4 image on the real disk, PM journal in /dev/shm) against ext4 on an image on the
//! same disk: data=journal with its journal on an external /dev/shm loop device (the seed's
//! "JBD2 on NVM"), data=ordered, and no journal; all in the same run. Then the delta sweep:
//! random over-writes of a hot set of 64 blocks changing 10..100 % of a block's bytes, NJS vs
//! NJS-no-BJ (no delta), with the PM bytes stored per write (data and metadata blocks). Images are sparse files in a scratch directory under
//! the temp dir; without root (no loop mount) every system runs on plain directories there
//! and the notes say so. Not yet: postmark and varmail through `atomfs mount`, the NVM-size
//! sweep and the write-count plot.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::runner::{row, simple_bar, Figure, FigureResult, Metric};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

pub const SUITE: &str = "journal";

/// Percentages of a block's bytes changed by each write of the delta sweep.
const DELTA_PERCENTS: [u64; 5] = [10, 25, 50, 75, 100];
/// Blocks the delta sweep over-writes (a hot set: most writes find two versions journaled,
/// as in the seed's difference-proportion experiment).
const DELTA_HOT_BLOCKS: u64 = 64;

struct Sizes {
    file: u64,
    run: Duration,
}

fn sizes(mode: Mode) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            file: 1 << 20,
            run: Duration::from_millis(30),
        },
        Mode::Quick => Sizes {
            file: 16 << 20,
            run: Duration::from_millis(700),
        },
        Mode::Full => Sizes {
            file: 256 << 20,
            run: Duration::from_secs(10),
        },
    }
}

fn sh(cmd: &str, args: &[&str]) -> std::result::Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One ext4 file system on a sparse image file (on the disk of the temp dir), mounted by a
/// loop device; or, without root, a plain directory (`fallback`). Unmounted, detached and
/// removed on drop, by the devices and mount point it made itself.
struct Ext4Image {
    label: String,
    mount: PathBuf,
    images: Vec<PathBuf>,
    loops: Vec<String>,
    mounted: bool,
    fallback: Option<String>,
}

/// How an [`Ext4Image`] journals.
#[derive(Clone, Copy)]
enum Ext4Mode {
    Ordered,
    NoJournal,
    /// data=journal with the journal on a loop device backed by /dev/shm.
    DataJournalOnRam,
}

impl Ext4Image {
    fn new(scratch: &Path, name: &str, mode: Ext4Mode, size: u64) -> Ext4Image {
        let mut fs = Ext4Image {
            label: name.to_string(),
            mount: scratch.join(format!("{name}.mnt")),
            images: Vec::new(),
            loops: Vec::new(),
            mounted: false,
            fallback: None,
        };
        let _ = std::fs::create_dir_all(&fs.mount);
        if let Err(why) = fs.make(scratch, mode, size) {
            fs.fallback = Some(format!("FALLBACK plain directory ({why})"));
        }
        fs
    }

    fn make(
        &mut self,
        scratch: &Path,
        mode: Ext4Mode,
        size: u64,
    ) -> std::result::Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        #[allow(unsafe_code)]
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: no loop mount".into());
        }
        let image = scratch.join(format!("{}.img", self.label));
        let img = image.to_str().ok_or("image path")?.to_string();
        sh("truncate", &["-s", &size.to_string(), &img])?;
        self.images.push(image);
        let mut mkfs = vec![
            "-q",
            "-F",
            "-b",
            "4096",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
        ];
        let mut mount_opts = String::from("loop");
        let jdev;
        match mode {
            Ext4Mode::Ordered => mount_opts.push_str(",data=ordered"),
            Ext4Mode::NoJournal => mkfs.extend(["-O", "^has_journal"]),
            Ext4Mode::DataJournalOnRam => {
                let jimage = crate::scratch_path("ext4-journal-dev.img");
                let jimg = jimage.to_str().ok_or("journal image path")?.to_string();
                sh("truncate", &["-s", "128M", &jimg])?;
                self.images.push(jimage);
                sh(
                    "mkfs.ext4",
                    &["-q", "-F", "-b", "4096", "-O", "journal_dev", &jimg],
                )?;
                let dev = sh("losetup", &["-f", "--show", &jimg])?;
                self.loops.push(dev.clone());
                jdev = format!("device={dev}");
                mkfs.extend(["-J", &jdev]);
                mount_opts.push_str(&format!(",data=journal,journal_path={dev}"));
            }
        }
        mkfs.push(&img);
        sh("mkfs.ext4", &mkfs)?;
        let dir = self.mount.to_str().ok_or("mount path")?.to_string();
        sh("mount", &["-t", "ext4", "-o", &mount_opts, &img, &dir])?;
        self.mounted = true;
        Ok(())
    }

    fn dir(&self) -> &Path {
        &self.mount
    }

    fn describe(&self) -> String {
        match &self.fallback {
            Some(f) => format!("{}: {f}", self.label),
            None => format!("{}: ext4 image {}", self.label, self.mount.display()),
        }
    }
}

impl Drop for Ext4Image {
    fn drop(&mut self) {
        if self.mounted {
            let dir = self.mount.to_string_lossy().into_owned();
            for _ in 0..50 {
                if sh("umount", &[&dir]).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for dev in &self.loops {
            let _ = sh("losetup", &["-d", dev]);
        }
        for image in &self.images {
            let _ = std::fs::remove_file(image);
        }
        let _ = std::fs::remove_dir_all(&self.mount);
    }
}

/// The three write patterns of Fig. 10a.
#[derive(Clone, Copy)]
enum Pattern {
    Sequential,
    Rewrite,
    Random,
}

impl Pattern {
    fn id(self) -> &'static str {
        match self {
            Pattern::Sequential => "journal-seq-write",
            Pattern::Rewrite => "journal-rewrite",
            Pattern::Random => "journal-rand-write",
        }
    }
}

/// Where a write of the run goes: (offset, bytes changed in the block).
fn next_offset(p: Pattern, i: u64, blocks: u64, rng: &mut u64) -> u64 {
    match p {
        Pattern::Sequential => (blocks + i) * 4096,
        Pattern::Rewrite => (i % blocks) * 4096,
        Pattern::Random => {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            (*rng % blocks) * 4096
        }
    }
}

fn io(what: &'static str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::io(what, path, e)
}

fn store_err(e: store::Error) -> BenchError {
    BenchError::Invalid(format!("journal: {e}"))
}

/// pwrite + fdatasync on a prefilled file of an ext4 image: (writes, seconds).
fn run_ext4(dir: &Path, sz: &Sizes, p: Pattern, seed: u64) -> Result<(u64, f64)> {
    let path = dir.join(format!("f-{seed}.dat"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| io("create", &path, e))?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..sz.file).step_by(block.len()) {
        f.write_all_at(&block, off)
            .map_err(|e| io("write", &path, e))?;
    }
    f.sync_all().map_err(|e| io("fsync", &path, e))?;
    let (blocks, data, mut rng) = (sz.file / 4096, vec![0xa5u8; 4096], seed | 1);
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let off = next_offset(p, n, blocks, &mut rng);
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

/// What one journal-store run measured.
struct StoreRun {
    writes: u64,
    secs: f64,
    /// Bytes the journal stored to PM per write (whole blocks and deltas).
    pm_bytes_per_write: f64,
}

/// The same writes through a journal store whose home directory is in `dir`; each write
/// changes `percent` % of its block (a contiguous run) when `pattern` over-writes.
fn run_journal(
    dir: &Path,
    sz: &Sizes,
    p: Pattern,
    variant: &str,
    (percent, hot_blocks): (u64, Option<u64>),
    seed: u64,
) -> Result<StoreRun> {
    let home = dir.join(format!("journal-home-{seed}-{variant}-{percent}"));
    std::fs::create_dir_all(&home).map_err(|e| io("mkdir", &home, e))?;
    let pm = crate::scratch_path("journal.pm");
    let mut options = engines::Options::new();
    options.set("home", home.display().to_string());
    options.set("size", (64u64 << 20).to_string());
    options.set("variant", variant.to_string());
    let opened = engines::create(&pm, "journal", &options).map_err(store_err);
    let result = opened.and_then(|opened| {
        let measured = store_loop(opened.store.as_ref(), sz, p, (percent, hot_blocks), seed);
        let unmounted = opened.unmount().map_err(store_err);
        let measured = measured?;
        unmounted.map(|()| measured)
    });
    let _ = std::fs::remove_file(&pm);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn stat(s: &dyn Store, name: &str) -> u64 {
    s.stats()
        .into_iter()
        .find_map(|(k, v)| (k == name).then_some(v))
        .unwrap_or(0)
}

fn store_loop(
    s: &dyn Store,
    sz: &Sizes,
    p: Pattern,
    (percent, hot_blocks): (u64, Option<u64>),
    seed: u64,
) -> Result<StoreRun> {
    let m = s.create(ROOT_INO, b"f", 0o644, None).map_err(store_err)?;
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(m.ino, rw).map_err(store_err)?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..sz.file).step_by(block.len()) {
        s.write(fh, off, &block).map_err(store_err)?;
    }
    let pm_bytes = |s: &dyn Store| stat(s, "full_blocks") * 4096 + stat(s, "delta_bytes");
    let before = pm_bytes(s);
    let blocks = hot_blocks.unwrap_or(sz.file / 4096).min(sz.file / 4096);
    let mut rng = seed | 1;
    let changed = (4096 * percent / 100).max(1) as usize;
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < sz.run {
        let off = next_offset(p, n, blocks, &mut rng);
        // A fresh byte value per write, so that every changed byte differs from before.
        let data = vec![(n % 251) as u8 + 1; changed];
        s.write(fh, off, &data).map_err(store_err)?;
        s.fsync(fh, true).map_err(store_err)?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let stored = pm_bytes(s) - before;
    s.release(fh).map_err(store_err)?;
    Ok(StoreRun {
        writes: n,
        secs,
        pm_bytes_per_write: stored as f64 / n.max(1) as f64,
    })
}

fn figure(id: &str, title: &str, reference: &str, metrics: Vec<Metric>) -> Figure {
    Figure {
        id: id.into(),
        title: title.into(),
        x_label: None,
        reference: reference.into(),
        metrics,
        points: Vec::new(),
        systems: Vec::new(),
    }
}

/// Fig. 10a: the three patterns on every system.
fn fig_10a(
    opts: &Options,
    sz: &Sizes,
    disks: &[Ext4Image],
    home: &Ext4Image,
    notes: &mut Vec<String>,
) -> Result<Vec<(Figure, FigureResult)>> {
    let patterns = [Pattern::Sequential, Pattern::Rewrite, Pattern::Random];
    let bar = simple_bar(
        "journal",
        (patterns.len() * (disks.len() + 1)) as u64,
        opts.progress,
    );
    let mut out = Vec::new();
    for p in patterns {
        let mut res = FigureResult::default();
        let j = run_journal(home.dir(), sz, p, "njs", (100, None), opts.seed)?;
        bar.inc(1);
        let iops = j.writes as f64 / j.secs.max(1e-9);
        res.rows.push(row(
            p.id(),
            "journal",
            None,
            Metric::Iops,
            vec![iops],
            vec![j.writes],
        ));
        res.systems.push((
            "journal".into(),
            format!("{} (home), PM journal in /dev/shm", home.describe()),
            "each write durable in the PM journal when fsync returns".into(),
        ));
        for disk in disks {
            let (n, secs) = run_ext4(disk.dir(), sz, p, opts.seed)?;
            bar.inc(1);
            let iops = n as f64 / secs.max(1e-9);
            res.rows.push(row(
                p.id(),
                &disk.label,
                None,
                Metric::Iops,
                vec![iops],
                vec![n],
            ));
            res.systems.push((
                disk.label.clone(),
                disk.describe(),
                "each write durable at fdatasync".into(),
            ));
        }
        let title = format!(
            "{}: 4 KiB writes + fsync on one file, journal vs ext4",
            p.id()
        );
        out.push((
            figure(p.id(), &title, "ext4-dj-ram", vec![Metric::Iops]),
            res,
        ));
    }
    bar.finish_and_clear();
    notes.push(format!(
        "journal: 4 KiB writes + fsync each, 1 job, file {} MiB, {} ms per system and pattern, \
         one run (ratios from one run)",
        sz.file >> 20,
        sz.run.as_millis()
    ));
    Ok(out)
}

/// Fig. 11a: random over-writes changing `percent` of a block, NJS vs no-delta.
fn fig_11a(opts: &Options, sz: &Sizes, home: &Ext4Image) -> Result<(Figure, FigureResult)> {
    let mut res = FigureResult::default();
    let bar = simple_bar(
        "journal-delta",
        2 * DELTA_PERCENTS.len() as u64,
        opts.progress,
    );
    for (system, variant) in [("journal", "njs"), ("journal-no-delta", "no-delta")] {
        for percent in DELTA_PERCENTS {
            let hot = (percent, Some(DELTA_HOT_BLOCKS));
            let r = run_journal(home.dir(), sz, Pattern::Random, variant, hot, opts.seed)?;
            bar.inc(1);
            let x = Some(percent as f64);
            let iops = r.writes as f64 / r.secs.max(1e-9);
            let id = "journal-delta";
            res.rows
                .push(row(id, system, x, Metric::Iops, vec![iops], vec![r.writes]));
            res.rows.push(row(
                id,
                system,
                x,
                Metric::NvmmBytesPerTx,
                vec![r.pm_bytes_per_write],
                vec![r.writes],
            ));
        }
        res.systems.push((
            system.into(),
            format!("{} (home), PM journal in /dev/shm", home.describe()),
            "each write durable in the PM journal when fsync returns".into(),
        ));
    }
    bar.finish_and_clear();
    let mut fig = figure(
        "journal-delta",
        "Delta updates: random over-writes of 64 hot blocks changing 10..100 % of the block, NJS vs no delta",
        "journal-no-delta",
        vec![Metric::Iops, Metric::NvmmBytesPerTx],
    );
    fig.x_label = Some("bytes of the block changed by each write (%)".into());

    Ok((fig, res))
}

pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    let sz = sizes(opts.mode);
    let scratch = crate::scratch_dir_path("journal");
    std::fs::create_dir_all(&scratch).map_err(|e| io("mkdir", &scratch, e))?;
    let size = 4 * sz.file + (512 << 20);
    let result = (|| {
        let home = Ext4Image::new(&scratch, "ext4-home", Ext4Mode::Ordered, size);
        let disks = vec![
            Ext4Image::new(&scratch, "ext4-dj-ram", Ext4Mode::DataJournalOnRam, size),
            Ext4Image::new(&scratch, "ext4-ordered", Ext4Mode::Ordered, size),
            Ext4Image::new(&scratch, "ext4-nojournal", Ext4Mode::NoJournal, size),
        ];
        for d in disks.iter().chain([&home]) {
            notes.push(d.describe());
        }
        let mut out = fig_10a(opts, &sz, &disks, &home, notes)?;
        out.push(fig_11a(opts, &sz, &home)?);
        Ok(out)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}
