//! Where the exchange commit pays: one O_ATOMIC commit rewriting a share of a file's 4 KiB
//! blocks (random blocks, or one contiguous range), by journal + remap checkpoint against
//! staging + XFS_IOC_EXCHANGE_RANGE + checkpoint, on an XFS (reflink=1) image with the
//! `exchange` feature (set with xfs_db) on a loop device over /dev/shm. Both paths checkpoint
//! after every commit (the journal limit is one block), so each commit's cost is complete.
//! Prints milliseconds per commit (median of `REPS`), the process's CPU per commit and the
//! device bytes per changed byte. Needs root and Linux 6.10+.
//!
//! `cargo run -p atomfs-remap --release --example exchange [-- FILE_MIB]`

#![allow(clippy::unwrap_used)] // a measurement tool: a failure ends it with its message

use remap::{HostRemapStore, RemapConfig};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use store::{OpenOptions, Store};

const BLOCK: u64 = 4096;
const SHARES: [u64; 8] = [1, 5, 10, 25, 50, 75, 90, 100];
const REPS: usize = 5;

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An XFS image with reflink and the exchange feature, mounted; removed on drop.
struct Image {
    image: PathBuf,
    mount: PathBuf,
    device: String,
}

impl Image {
    fn new() -> Image {
        let id = std::process::id();
        let image = PathBuf::from(format!("/dev/shm/atomfs-remap-exchange-{id}.img"));
        let mount = PathBuf::from(format!("/dev/shm/atomfs-remap-exchange-{id}.mnt"));
        std::fs::create_dir_all(&mount).unwrap();
        let img = image.to_str().unwrap();
        run("truncate", &["-s", "2G", img]);
        run("mkfs.xfs", &["-q", "-f", "-m", "reflink=1", img]);
        let old = run("xfs_db", &["-c", "sb 0", "-c", "p features_incompat", img]);
        let old = u64::from_str_radix(old.rsplit("0x").next().unwrap().trim(), 16).unwrap();
        let set = format!("write -d features_incompat {:#x}", old | 0x40);
        run("xfs_db", &["-x", "-c", "sb 0", "-c", &set, img]);
        let device = run("losetup", &["-f", "--show", img]);
        run("mount", &[&device, mount.to_str().unwrap()]);
        Image {
            image,
            mount,
            device,
        }
    }
    fn written(&self) -> u64 {
        run("sync", &["-f", self.mount.to_str().unwrap()]);
        let dev = self.device.trim_start_matches("/dev/");
        let stat = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).unwrap();
        stat.split_whitespace()
            .nth(6)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 512
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).output();
        let _ = Command::new("losetup").args(["-d", &self.device]).output();
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

fn cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = text
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// (ms per commit, CPU ms per commit, device bytes per changed byte) of `REPS` commits.
fn measure(
    img: &Image,
    tag: &str,
    exchange: bool,
    blocks: u64,
    changed: &[u64],
) -> (f64, f64, f64) {
    let home = img.mount.join(tag);
    std::fs::create_dir_all(&home).unwrap();
    let config = RemapConfig {
        checkpoint_journal_len: BLOCK,
        exchange_blocks_min: if exchange { 1 } else { u64::MAX },
        exchange_share_percent: 0,
        ..RemapConfig::default()
    };
    let s = HostRemapStore::create(&img.mount.join(format!("{tag}.pool")), &home, &config).unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(true)
        .open(&s, "/f", None)
        .unwrap();
    let fill = vec![0x5au8; (blocks * BLOCK) as usize];
    s.write(f, 0, &fill).unwrap();
    s.fsync(f, true).unwrap();
    let data = vec![0xa5u8; BLOCK as usize];
    let (mut times, before, cpu0) = (Vec::new(), img.written(), cpu());
    for rep in 0..REPS {
        let start = Instant::now();
        for &b in changed {
            s.write(f, b * BLOCK, &data[..]).unwrap();
        }
        s.fsync(f, true).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e3);
        let _ = rep;
    }
    let cpu_ms = (cpu() - cpu0).as_secs_f64() * 1e3 / REPS as f64;
    let bytes =
        (img.written() - before) as f64 / (REPS as u64 * changed.len() as u64 * BLOCK) as f64;
    assert_eq!(s.counters().exchanges > 0, exchange, "{:?}", s.counters());
    s.release(f).unwrap();
    s.unmount().unwrap();
    drop(s);
    std::fs::remove_dir_all(&home).unwrap();
    times.sort_by(f64::total_cmp);
    (times[REPS / 2], cpu_ms, bytes)
}

fn main() {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let blocks = mib * 256;
    let cpu_model = run("sh", &["-c", "lscpu | grep 'Model name' | sed 's/.*: *//'"]);
    println!("{mib} MiB file ({blocks} blocks), one O_ATOMIC commit + checkpoint per row, median of {REPS}; CPU {cpu_model}");
    println!("XFS reflink=1 + exchange feature on a loop device over /dev/shm");
    let img = Image::new();
    println!(
        "{:>7} {:>10} | {:>26} | {:>26}",
        "share", "pattern", "journal+remap ms cpu B/B", "exchange ms cpu B/B"
    );
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for share in SHARES {
        let n = (blocks * share / 100).max(1);
        let mut random: Vec<u64> = (0..blocks).collect();
        for i in (1..random.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            random.swap(i, (x % (i as u64 + 1)) as usize);
        }
        random.truncate(n as usize);
        random.sort_unstable();
        let contiguous: Vec<u64> = (0..n).collect();
        for (pattern, changed) in [("random", &random), ("contiguous", &contiguous)] {
            let tag = format!("{share}-{pattern}");
            let j = measure(&img, &format!("j{tag}"), false, blocks, changed);
            let e = measure(&img, &format!("x{tag}"), true, blocks, changed);
            println!(
                "{share:>6}% {pattern:>10} | {:>9.2} {:>7.2} {:>7.2} | {:>9.2} {:>7.2} {:>7.2}",
                j.0, j.1, j.2, e.0, e.1, e.2
            );
        }
    }
}
