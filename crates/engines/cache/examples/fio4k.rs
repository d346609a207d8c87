//! A fio-like probe: 4 KiB random writes, each followed by fsync, on one file — through the
//! cache engine's Store API (home files in `--home`, the PM pool in `--pool`) and, in the
//! same run, plain pwrite + fdatasync on a file in the same home file system. Prints what
//! it measured and the ratio; never asserts a timing. Every cache write is durable in the PM
//! pool (flush + fence on /dev/shm, the emulated NVMM) when it returns; the background
//! flusher (every `--period-ms`, default 10) runs meanwhile on the same cores.
//!
//! `cargo run --release -p atomfs-cache --example fio4k -- --home DIR --pool /dev/shm/x.pool`
//! (the home must be an existing, empty scratch directory; the pool file must not exist).

use cache::{CacheConfig, HostCacheStore};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use store::{OpenFlags, Store, ROOT_INO};

struct Args {
    home: PathBuf,
    pool: PathBuf,
    file_len: u64,
    seconds: f64,
    period_ms: u64,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        home: PathBuf::new(),
        pool: PathBuf::new(),
        file_len: 64 << 20,
        seconds: 5.0,
        period_ms: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--home" => a.home = v.into(),
            "--pool" => a.pool = v.into(),
            "--file-mib" => a.file_len = v.parse::<u64>().map_err(|e| e.to_string())? << 20,
            "--seconds" => a.seconds = v.parse().map_err(|e| format!("{e}"))?,
            "--period-ms" => a.period_ms = v.parse().map_err(|e| format!("{e}"))?,
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if a.home.as_os_str().is_empty() || a.pool.as_os_str().is_empty() {
        return Err("--home DIR and --pool FILE are required".into());
    }
    Ok(a)
}

/// xorshift: the random 4 KiB block of each write.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn run_cache(a: &Args) -> Result<(u64, f64), String> {
    let home = a.home.join("cache-home");
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let config = CacheConfig {
        flush_period: Some(Duration::from_millis(a.period_ms)),
        ..CacheConfig::default()
    };
    let pool_len = a.file_len * 2 + (64 << 20);
    let s = HostCacheStore::create(&home, &a.pool, pool_len, &config).map_err(|e| e.to_string())?;
    let m = s
        .create(ROOT_INO, b"f", 0o644, None)
        .map_err(|e| e.to_string())?;
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(m.ino, rw).map_err(|e| e.to_string())?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..a.file_len).step_by(block.len()) {
        s.write(fh, off, &block).map_err(|e| e.to_string())?;
    }
    s.cache().flush_all().map_err(|e| e.to_string())?;
    let blocks = a.file_len / 4096;
    let data = vec![0xa5u8; 4096];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed().as_secs_f64() < a.seconds {
        let off = (next(&mut rng) % blocks) * 4096;
        s.write(fh, off, &data).map_err(|e| e.to_string())?;
        s.fsync(fh, true).map_err(|e| e.to_string())?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let stats = s.stats();
    s.release(fh).map_err(|e| e.to_string())?;
    let drain = Instant::now();
    s.unmount().map_err(|e| e.to_string())?;
    println!(
        "  unmount (writes the remaining dirty chunks home, not in the IOPS): {:.2} s",
        drain.elapsed().as_secs_f64()
    );
    let get = |k: &str| stats.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
    println!(
        "  cache counters: case_1 {} case_2_1 {} case_2_2 {} case_3_x {} forced_flushes {} chunks_flushed {}",
        get("case_1"),
        get("case_2_1"),
        get("case_2_2"),
        get("case_3_1") + get("case_3_2") + get("case_3_3"),
        get("forced_flushes"),
        get("chunks_flushed")
    );
    Ok((n, secs))
}

fn run_plain(a: &Args) -> Result<(u64, f64), String> {
    let path = a.home.join("plain.dat");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| e.to_string())?;
    let block = vec![0x5au8; 1 << 20];
    for off in (0..a.file_len).step_by(block.len()) {
        f.write_all_at(&block, off).map_err(|e| e.to_string())?;
    }
    f.sync_all().map_err(|e| e.to_string())?;
    let blocks = a.file_len / 4096;
    let data = vec![0xa5u8; 4096];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed().as_secs_f64() < a.seconds {
        let off = (next(&mut rng) % blocks) * 4096;
        f.write_all_at(&data, off).map_err(|e| e.to_string())?;
        f.sync_data().map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok((n, start.elapsed().as_secs_f64()))
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fio4k: {e}");
            std::process::exit(2);
        }
    };
    let result = run_plain(&a).and_then(|p| run_cache(&a).map(|c| (p, c)));
    match result {
        Ok(((pn, ps), (cn, cs))) => {
            let (piops, ciops) = (pn as f64 / ps, cn as f64 / cs);
            println!(
                "fio4k: 4 KiB random writes + fsync each, 1 job, file {} MiB, home {}",
                a.file_len >> 20,
                a.home.display()
            );
            println!("  plain pwrite+fdatasync: {pn} writes in {ps:.2} s = {piops:.0} IOPS");
            println!(
                "  cache (Store API, period {} ms): {cn} writes in {cs:.2} s = {ciops:.0} IOPS",
                a.period_ms
            );
            println!("  ratio cache / plain: {:.1}x", ciops / piops);
        }
        Err(e) => {
            eprintln!("fio4k: {e}");
            std::process::exit(1);
        }
    }
}
