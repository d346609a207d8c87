//! The seed's Fig. 6 workload at small scale: random 8 KiB overwrites of one 64 MiB file with
//! an fsync every 1, 2, 4 … 64 writes, one thread, on four file systems each on its own loop
//! device over /dev/shm: `remap` (an O_ATOMIC file on XFS reflink=1: each fsync commits the
//! writes since the last one as one journal record, checkpoints remap), ext4 data=ordered
//! (OJ), ext4 data=journal (DJ), and XFS with no data journaling (pwrite + fdatasync). Prints
//! writes per second, the ratio to OJ, and device bytes written (/sys/block/loopN/stat,
//! checkpoint and writeback included) per byte of update. Needs root.
//!
//! `cargo run -p atomfs-remap --release --example remap_fio [-- SECONDS_PER_POINT]`

#![allow(clippy::unwrap_used)] // a measurement tool: a failure ends it with its message

use remap::{HostRemapStore, RemapConfig};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenOptions, Store};

const FILE_LEN: u64 = 64 << 20;
const IO: usize = 8192;
const INTERVALS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Loop {
    image: PathBuf,
    mount: PathBuf,
    device: String,
}

impl Loop {
    fn new(tag: &str, mkfs: &[&str], opts: &str) -> Loop {
        let image = PathBuf::from(format!("/dev/shm/atomfs-remap-fio-{tag}.img"));
        let mount = PathBuf::from(format!("/dev/shm/atomfs-remap-fio-{tag}.mnt"));
        std::fs::create_dir_all(&mount).unwrap();
        let img = image.to_str().unwrap();
        run("truncate", &["-s", "512M", img]);
        let mut args = mkfs[1..].to_vec();
        args.push(img);
        run(mkfs[0], &args);
        let device = run("losetup", &["-f", "--show", img]);
        let mut margs = vec![device.as_str(), mount.to_str().unwrap()];
        if !opts.is_empty() {
            margs.splice(0..0, ["-o", opts]);
        }
        run("mount", &margs);
        Loop {
            image,
            mount,
            device,
        }
    }
    /// Bytes written to the device so far (sectors written, field 7 of the stat file).
    fn written(&self) -> u64 {
        let dev = self.device.trim_start_matches("/dev/");
        let stat = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
        let sectors: u64 = stat.split_whitespace().nth(6).unwrap().parse().unwrap();
        sectors * 512
    }
    fn syncfs(&self) {
        run("sync", &["-f", self.mount.to_str().unwrap()]);
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).output();
        let _ = Command::new("losetup").args(["-d", &self.device]).output();
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// One system under test: overwrite at `off`, or make the writes since the last sync durable.
trait Target {
    fn write(&mut self, off: u64, data: &[u8]);
    fn sync(&mut self);
    /// Everything the writes caused (checkpoints) done.
    fn drain(&mut self) {}
}

struct Plain(std::fs::File);

impl Target for Plain {
    fn write(&mut self, off: u64, data: &[u8]) {
        self.0.write_all_at(data, off).unwrap();
    }
    fn sync(&mut self) {
        self.0.sync_data().unwrap();
    }
}

struct Remap {
    store: HostRemapStore,
    fh: store::Fh,
}

impl Target for Remap {
    fn write(&mut self, off: u64, data: &[u8]) {
        self.store.write(self.fh, off, data).unwrap();
    }
    fn sync(&mut self) {
        self.store.fsync(self.fh, true).unwrap();
    }
    fn drain(&mut self) {
        self.store.checkpoint().unwrap();
    }
}

fn fill(t: &mut dyn Target) {
    let block = vec![0x5au8; 1 << 20];
    for i in 0..FILE_LEN >> 20 {
        t.write(i << 20, &block);
        t.sync();
    }
    t.drain();
}

/// Writes per second and device bytes per update byte of one point.
fn measure(t: &mut dyn Target, disk: &Loop, every: u32, secs: f64, seed: u64) -> (f64, f64) {
    let mut x = seed | 1;
    let data = vec![0xa5u8; IO];
    disk.syncfs();
    let before = disk.written();
    let start = Instant::now();
    let mut writes = 0u64;
    while start.elapsed() < Duration::from_secs_f64(secs)
        || !writes.is_multiple_of(u64::from(every))
    {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (FILE_LEN / IO as u64)) * IO as u64;
        t.write(off, &data);
        writes += 1;
        if writes.is_multiple_of(u64::from(every)) {
            t.sync();
        }
    }
    t.drain();
    disk.syncfs();
    let elapsed = start.elapsed().as_secs_f64();
    let bytes = disk.written() - before;
    (
        writes as f64 / elapsed,
        bytes as f64 / (writes * IO as u64) as f64,
    )
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.5);
    let cpu = run("sh", &["-c", "lscpu | grep 'Model name' | sed 's/.*: *//'"]);
    println!(
        "random {IO}-byte overwrites of a {} MiB file, 1 thread, {secs} s per point; CPU {cpu}",
        FILE_LEN >> 20
    );
    println!("every file system on its own 512 MiB loop device over /dev/shm");
    let xfs_remap = Loop::new("remap", &["mkfs.xfs", "-q", "-f", "-m", "reflink=1"], "");
    let ext4_oj = Loop::new("oj", &["mkfs.ext4", "-q", "-F"], "data=ordered");
    let ext4_dj = Loop::new(
        "dj",
        &["mkfs.ext4", "-q", "-F", "-J", "size=128"],
        "data=journal",
    );
    let xfs = Loop::new("xfs", &["mkfs.xfs", "-q", "-f"], "");
    let home = xfs_remap.mount.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = RemapConfig {
        copy_checkpoint: false,
        checkpoint_journal_len: 128 << 20,
        ..RemapConfig::default()
    };
    let store = HostRemapStore::create(&xfs_remap.mount.join("r.pool"), &home, &config).unwrap();
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(true)
        .open(&store, "/f", None)
        .unwrap();
    let mut remap = Remap { store, fh };
    let open = |d: &Loop| {
        Plain(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(d.mount.join("f"))
                .unwrap(),
        )
    };
    let (mut oj, mut dj, mut plain) = (open(&ext4_oj), open(&ext4_dj), open(&xfs));
    let mut systems: Vec<(&str, &mut dyn Target, &Loop)> = vec![
        ("remap", &mut remap, &xfs_remap),
        ("ext4-OJ", &mut oj, &ext4_oj),
        ("ext4-DJ", &mut dj, &ext4_dj),
        ("xfs", &mut plain, &xfs),
    ];
    for (_, t, _) in systems.iter_mut() {
        fill(*t);
    }
    println!(
        "{:>6} | {:>22} | {:>22} | {:>22} | {:>22}",
        "fsync",
        "remap w/s (xOJ) dev/B",
        "ext4-OJ w/s dev/B",
        "ext4-DJ w/s (xOJ) dev/B",
        "xfs w/s (xOJ) dev/B"
    );
    for (i, &every) in INTERVALS.iter().enumerate() {
        let mut cells = Vec::new();
        for (_, t, disk) in systems.iter_mut() {
            cells.push(measure(*t, disk, every, secs, 0x1234 + i as u64));
        }
        let oj = cells[1].0;
        let cell = |(w, b): (f64, f64)| format!("{w:>8.0} ({:>4.2}) {b:>5.2}", w / oj);
        println!(
            "{every:>6} | {} | {} | {} | {}",
            cell(cells[0]),
            cell(cells[1]),
            cell(cells[2]),
            cell(cells[3])
        );
    }
    let _ = Path::new("");
    drop(systems);
    remap.store.unmount().unwrap();
}
