//! What the `HostFs` seam costs over direct system calls, on the same file, interleaved.
//!
//! `overhead [dir] [rounds]` (default: the system temporary directory, 20 rounds) times, in
//! alternating rounds of 200 operations each:
//! - 4 KiB `pwrite` + `fdatasync` through [`RealHostFs`] vs the same two calls through libc;
//! - a 4 KiB store + flush + fence through the region [`HostFs::map`] returns vs `memcpy` +
//!   `msync` on a raw `mmap` of the same file (the region msyncs at the fence on a host file
//!   system; on tmpfs and DAX it flushes cache lines instead, so run this on a disk file
//!   system to compare like with like).
//!
//! It prints the median time per operation of each and the ratio seam / direct.

use hostfs::{HostFs, OpenOptions, RealHostFs};
use pmem::Region;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const OPS: usize = 200;
const LEN: usize = 4096;
const FILE_LEN: u64 = 1 << 20;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// Offset of operation `i` (walks the file a page at a time).
fn at(i: usize) -> u64 {
    (i as u64 * LEN as u64) % FILE_LEN
}

fn report(what: &str, seam: Vec<Duration>, direct: Vec<Duration>) {
    let (s, d) = (median(seam), median(direct));
    let per = |t: Duration| t.as_nanos() as f64 / OPS as f64 / 1000.0;
    println!(
        "{what}: hostfs {:.2} us/op, direct {:.2} us/op, ratio {:.3}",
        per(s),
        per(d),
        s.as_secs_f64() / d.as_secs_f64()
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let rounds: usize = args.next().map_or(Ok(20), |r| r.parse())?;
    let store = dir.join(format!("hostfs-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&store)?;
    let fs = RealHostFs::open(&store)?;
    println!("{}: {}", store.display(), fs.capabilities().fs_type);
    let file = fs.open(std::path::Path::new("bench"), &OpenOptions::create())?;
    fs.set_len(&file, FILE_LEN)?;
    fs.sync_all(&file)?;
    let fd = file.as_file().as_raw_fd();
    let block = [0x5au8; LEN];

    let (mut seam, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        seam.push(time(|| {
            for i in 0..OPS {
                let _ = fs.write_all_at(&file, at(i), &block);
                let _ = fs.sync_data(&file);
            }
        }));
        direct.push(time(|| {
            for i in 0..OPS {
                // SAFETY: `block` is LEN readable bytes; `fd` is open for writing.
                unsafe {
                    libc::pwrite(fd, block.as_ptr().cast(), LEN, at(i) as libc::off_t);
                    libc::fdatasync(fd);
                }
            }
        }));
    }
    report("4 KiB pwrite + fdatasync", seam, direct);

    let map = fs.map(&file, FILE_LEN)?;
    // SAFETY: a fresh shared mapping of FILE_LEN bytes of a file that long, unmapped below.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            FILE_LEN as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().into());
    }
    let (mut seam, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        seam.push(time(|| {
            for i in 0..OPS {
                map.write(at(i), &block);
                map.persist(at(i), LEN as u64);
            }
        }));
        direct.push(time(|| {
            for i in 0..OPS {
                // SAFETY: `at(i) + LEN <= FILE_LEN`: inside the mapping; page-aligned msync.
                unsafe {
                    let dst = raw.cast::<u8>().add(at(i) as usize);
                    std::ptr::copy_nonoverlapping(block.as_ptr(), dst, LEN);
                    libc::msync(dst.cast(), LEN, libc::MS_SYNC);
                }
            }
        }));
    }
    report("4 KiB mapped store + flush", seam, direct);
    // SAFETY: the mapping made above, not used after.
    unsafe { libc::munmap(raw, FILE_LEN as usize) };
    drop(map);
    fs.unlink(std::path::Path::new("bench"))?;
    std::fs::remove_dir(&store)?;
    Ok(())
}
