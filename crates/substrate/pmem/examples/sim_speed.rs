//! Throughput of the crash simulator (how fast engines run on it in the crash suite).
//!
//! `cargo run --release -p atomfs-pmem --example sim_speed`

use pmem::{Region, SimRegion};
use std::time::Instant;

fn main() {
    let region = SimRegion::new(64 << 20);
    let data = vec![0x5Au8; 1 << 20];
    let start = Instant::now();
    for i in 0..64u64 {
        region.write(i << 20, &data);
        region.persist(i << 20, 1 << 20);
    }
    let elapsed = start.elapsed();
    println!(
        "64 MB in 1 MB writes + persist: {:.0} MB/s",
        64.0 / elapsed.as_secs_f64()
    );
    let start = Instant::now();
    let ops = 200_000u64;
    for i in 0..ops {
        let off = (i * 64) % (16 << 20);
        region.write(off, &data[..64]);
        region.persist(off, 64);
    }
    let elapsed = start.elapsed();
    println!(
        "64 B write + persist: {:.0} ns/op",
        elapsed.as_nanos() as f64 / ops as f64
    );
    let start = Instant::now();
    let point = region.crash_point();
    println!("crash_point on a 64 MB region: {:?}", start.elapsed());
    let _ = point.state_count();
}
