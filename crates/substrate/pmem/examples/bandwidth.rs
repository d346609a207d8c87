//! The physical floor: durable write bandwidth of a mapped region (in /dev/shm when available).
//!
//! `cargo run --release -p atomfs-pmem --example bandwidth [-- RUNS]`
//!
//! For each write size: cached copy + flush + fence, and non-temporal copy + fence; each run
//! writes 32 MB (at least one operation) into a 64 MB span; the median of RUNS runs (default 5)
//! is printed in MB/s (10^6 B/s) and ns per durable write.

use pmem::floor::{measure, CopyPath, FloorConfig};
use pmem::mapped::scratch_dir;
use pmem::{MappedRegion, Region};

const SPAN: u64 = 64 << 20;
const SIZES: [u64; 9] = [
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    2 << 20,
];

fn main() {
    let runs = match std::env::args().nth(1).map(|arg| arg.parse::<usize>()) {
        None => 5,
        Some(Ok(runs)) if runs > 0 => runs,
        Some(_) => {
            eprintln!("usage: bandwidth [RUNS > 0]");
            std::process::exit(2);
        }
    };
    let path = scratch_dir().join(format!("atomfs-bandwidth-{}.pool", std::process::id()));
    let region = match MappedRegion::create(&path, SPAN) {
        Ok(region) => region,
        Err(error) => {
            eprintln!("bandwidth: {error}");
            std::process::exit(1);
        }
    };
    // The mapping stays valid after the name is gone.
    let _ = std::fs::remove_file(&path);
    println!(
        "pool {} ({} MB), durability {:?}, flush instruction {}, median of {runs} runs",
        path.display(),
        SPAN >> 20,
        region.durability(),
        region.flush_instruction().name()
    );
    // Touch every page once so page faults are not measured.
    region.fill(0, SPAN, 0);
    println!(
        "{:>8} | {:>12} {:>12} | {:>12} {:>12}",
        "size", "flush MB/s", "flush ns/op", "nt MB/s", "nt ns/op"
    );
    let config = FloorConfig {
        bytes_per_run: 32 << 20,
        runs,
        span_off: 0,
        span_len: SPAN,
    };
    for size in SIZES {
        let cached = measure(&region, size, CopyPath::CachedFlush, config);
        let nt = measure(&region, size, CopyPath::NonTemporal, config);
        println!(
            "{:>8} | {:>12.0} {:>12.0} | {:>12.0} {:>12.0}",
            human(size),
            cached.mb_per_s,
            cached.ns_per_op,
            nt.mb_per_s,
            nt.ns_per_op
        );
    }
    if let Err(error) = region.take_sync_error() {
        eprintln!("bandwidth: {error}");
        std::process::exit(1);
    }
}

fn human(size: u64) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MB", s >> 20),
        s if s >= 1 << 10 => format!("{} KB", s >> 10),
        s => format!("{s} B"),
    }
}
