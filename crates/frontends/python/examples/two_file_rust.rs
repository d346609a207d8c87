//! The Rust side of `bench/two_file.py`: the same two-file transaction through the Rust API
//! (`atomfs` crate), timed the same way, so the Python binding's overhead can be read off.
//!
//!     cargo run --release -p atomfs-python --example two_file_rust -- POOL ROUNDS SEED
//!
//! Each transaction replaces the content of two files with 0–4 KB each (sizes drawn in
//! advance from SEED, as the Python side draws them): `set_len` + `write_at` of both inside
//! `fs.begin(&[a, b])` … `commit`. Prints one line: `rust_us_per_tx=<mean µs>`.

use atomfs::{Config, Fs};
use std::time::Instant;

/// The xorshift64* generator the Python side mirrors, so both run the same sizes.
fn sizes(seed: u64, rounds: usize) -> Vec<(usize, usize)> {
    let mut x = seed.max(1);
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % 4097
    };
    (0..rounds).map(|_| (next(), next())).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let pool = args.next().ok_or("usage: two_file_rust POOL ROUNDS SEED")?;
    let rounds: usize = args.next().ok_or("missing ROUNDS")?.parse()?;
    let seed: u64 = args.next().ok_or("missing SEED")?.parse()?;
    let fs = Fs::create(&pool, Config::pool(64 << 20))?;
    let a = fs
        .options()
        .read(true)
        .write(true)
        .create(true)
        .open("/a")?;
    let b = fs
        .options()
        .read(true)
        .write(true)
        .create(true)
        .open("/b")?;
    let data = vec![0x5au8; 4096];
    let plan = sizes(seed, rounds);
    let start = Instant::now();
    for &(na, nb) in &plan {
        let tx = fs.begin(&[&a, &b])?;
        a.set_len(na as u64)?;
        a.write_at(&data[..na], 0)?;
        b.set_len(nb as u64)?;
        b.write_at(&data[..nb], 0)?;
        tx.commit()?;
    }
    let elapsed = start.elapsed();
    println!(
        "rust_us_per_tx={:.3}",
        elapsed.as_secs_f64() * 1e6 / rounds.max(1) as f64
    );
    drop((a, b));
    fs.unmount()?;
    drop(fs);
    std::fs::remove_file(&pool)?;
    Ok(())
}
