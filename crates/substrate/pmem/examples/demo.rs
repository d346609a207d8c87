//! The interim demo of the persistent-memory substrate (`scripts/demo.sh`).
//!
//! 1. A mapped pool in /dev/shm (else the temporary directory): durability mode, flush
//!    instruction, a persisted write read back after reopening.
//! 2. The crash simulator: a small seeded commit-log workload; at every fence every crash
//!    image is checked (exhaustively or by seeded sample): each committed record is whole.
//! 3. The physical floor: durable write bandwidth at 4 KB and 2 MB.

use pmem::floor::{measure, CopyPath, FloorConfig};
use pmem::mapped::scratch_dir;
use pmem::{Accounted, CrashConfig, MappedRegion, PmResult, Region, SimRegion};
use std::sync::{Arc, Mutex};

fn main() {
    if let Err(error) = run() {
        eprintln!("demo: {error}");
        std::process::exit(1);
    }
}

fn run() -> PmResult<()> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(42u64);
    mapped_pool()?;
    crash_exploration(seed);
    floor()
}

fn mapped_pool() -> PmResult<()> {
    let path = scratch_dir().join(format!("atomfs-demo-{}.pool", std::process::id()));
    println!("== mapped pool {}", path.display());
    let greeting = b"atomfs: durable at the speed of the medium";
    {
        let region = MappedRegion::create(&path, 1 << 20)?;
        println!(
            "durability mode: {:?} (flush+fence is the persistence point: {}), flush instruction: {}",
            region.durability(),
            region.durability().flush_is_persistence_point(),
            region.flush_instruction().name()
        );
        region.write(4096, greeting);
        region.persist(4096, greeting.len() as u64); // persist: the greeting
        region.take_sync_error()?;
    }
    let region = MappedRegion::open(&path)?;
    let mut back = vec![0u8; greeting.len()];
    region.read(4096, &mut back);
    let _ = std::fs::remove_file(&path);
    println!(
        "reopened {} bytes, read back: {:?} ({})",
        region.len(),
        String::from_utf8_lossy(&back),
        if back == greeting { "ok" } else { "MISMATCH" }
    );
    Ok(())
}

/// Totals of the crash exploration, shared with the fence hook.
#[derive(Default)]
struct Explored {
    crash_points: u64,
    exhaustive_points: u64,
    images: u64,
    records_verified: u64,
    failures: Vec<String>,
}

/// What the workload has made durable so far: (offset, bytes) of every record written, and
/// the number of commits whose persistence point completed.
#[derive(Default)]
struct Written {
    records: Vec<(u64, Vec<u8>)>,
    committed: u64,
}

const HEADER: u64 = 0; // 8-byte commit count
const LOG_START: u64 = 64;

fn crash_exploration(seed: u64) {
    println!("== crash simulator (seed {seed})");
    let region = Accounted::new(SimRegion::new(8192));
    region.define_area("header", HEADER, 64);
    region.define_area("log", LOG_START, 8192 - LOG_START);
    region.inner().set_crash_config(CrashConfig {
        seed,
        ..CrashConfig::default()
    });
    let explored = Arc::new(Mutex::new(Explored::default()));
    let written = Arc::new(Mutex::new(Written::default()));
    let (sink, known) = (Arc::clone(&explored), Arc::clone(&written));
    region.inner().set_fence_hook(Box::new(move |point| {
        let known = known.lock().unwrap_or_else(|e| e.into_inner());
        let mut explored = sink.lock().unwrap_or_else(|e| e.into_inner());
        explored.crash_points += 1;
        explored.exhaustive_points += point.is_exhaustive() as u64;
        point.for_each_image(|index, image| {
            explored.images += 1;
            match check_image(image, &known) {
                Ok(records) => explored.records_verified += records,
                Err(why) => explored
                    .failures
                    .push(format!("{why}: {}", point.describe(index))),
            }
        });
    }));
    let mut rng = seed | 1;
    let mut tail = LOG_START;
    for transaction in 0..12 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Every fourth record is large: too many crash states to enumerate, so sampled.
        let len = if transaction % 4 == 3 {
            300 + rng % 300
        } else {
            1 + rng % 200
        };
        let record: Vec<u8> = (0..len).map(|i| (rng >> (i % 56)) as u8 | 1).collect();
        region.write(tail, &record);
        written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .records
            .push((tail, record));
        region.persist(tail, len); // persist: the record, before the commit that exposes it
        let count = written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .records
            .len() as u64;
        region.store_u64(HEADER, count);
        region.persist(HEADER, 8); // persist: the commit (an atomic 8-byte count)
        written.lock().unwrap_or_else(|e| e.into_inner()).committed = count;
        tail += len;
    }
    let explored = explored.lock().unwrap_or_else(|e| e.into_inner());
    println!(
        "{} crash points ({} enumerated exhaustively, {} sampled), {} crash images checked, \
         {} committed records verified whole",
        explored.crash_points,
        explored.exhaustive_points,
        explored.crash_points - explored.exhaustive_points,
        explored.images,
        explored.records_verified
    );
    if explored.failures.is_empty() {
        println!("every fenced write survived in every crash image");
    } else {
        println!(
            "{} FAILURES, first: {}",
            explored.failures.len(),
            explored.failures[0]
        );
    }
    println!("accounting of the run:\n{}", region.report());
}

/// Check one crash image: the commit count is at least the durable one, and every record it
/// covers is whole. Returns the number of records checked.
fn check_image(image: &[u8], known: &Written) -> Result<u64, String> {
    let count = u64::from_le_bytes(image[0..8].try_into().map_err(|_| "short image")?);
    if count < known.committed || count > known.records.len() as u64 {
        return Err(format!("commit count {count}, durable {}", known.committed));
    }
    for (number, (off, bytes)) in known.records.iter().take(count as usize).enumerate() {
        let off = *off as usize;
        if image.get(off..off + bytes.len()) != Some(&bytes[..]) {
            return Err(format!("committed record {number} torn"));
        }
    }
    Ok(count)
}

fn floor() -> PmResult<()> {
    let path = scratch_dir().join(format!("atomfs-demo-floor-{}.pool", std::process::id()));
    let span = 64 << 20;
    let region = MappedRegion::create(&path, span)?;
    let _ = std::fs::remove_file(&path);
    region.fill(0, span, 0);
    println!(
        "== physical floor ({:?}, {})",
        region.durability(),
        region.flush_instruction().name()
    );
    let config = FloorConfig {
        bytes_per_run: 32 << 20,
        runs: 5,
        span_off: 0,
        span_len: span,
    };
    for size in [4u64 << 10, 2 << 20] {
        let cached = measure(&region, size, CopyPath::CachedFlush, config);
        let nt = measure(&region, size, CopyPath::NonTemporal, config);
        println!(
            "{:>4} KB durable writes: copy+flush+fence {:>6.0} MB/s ({:.0} ns/op), \
             non-temporal+fence {:>6.0} MB/s ({:.0} ns/op)",
            size >> 10,
            cached.mb_per_s,
            cached.ns_per_op,
            nt.mb_per_s,
            nt.ns_per_op
        );
    }
    region.take_sync_error()
}
