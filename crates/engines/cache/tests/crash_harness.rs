//! The cache engine under the shared crash harness (crates/testing/crash): seeded workloads
//! of transactions (with namespace operations), legacy calls and O_ATOMIC units; crash
//! images at every fence of the PM pool, each paired with a crash image of the home files'
//! model (SimHostFs) taken at the same moment; recovery (also crashed and recovered again);
//! the ModelStore oracle; and SIGKILLed child processes on a real home directory and pool
//! file in /dev/shm. The targets are `cache::crash_target`'s, by the names
//! `atomfs crashtest --engine` takes: flush on demand, write-through, and stride 1 (files
//! collide: Case 3 forced flushes inside the crash workloads).
//!
//! CI scale here; longer runs:
//! `ATOMFS_CRASH_WORKLOADS=500 cargo test -p atomfs-cache --release --test crash_harness -- --nocapture`.

use crash::suite::{Seeds, Sim, Torture};

/// `workloads` single-thread workloads from seed `first`, at least 500 crash images.
const fn ci(first: u64, workloads: u64, threads: usize) -> Sim {
    Sim {
        seeds: Seeds::Count { first, workloads },
        units: 16,
        threads,
        images_per_fence: 6,
        images_per_workload: 150,
        images_min: 500,
    }
}

crash::crash_tests! {
    targets: cache::crash_target::CacheTarget::by_name, repro "cache";
    sim cache_lazy_crash_ci("cache-lazy", ci(1, 12, 1));
    sim cache_through_crash_ci("cache-through", ci(101, 6, 1));
    sim cache_collide_crash_ci("cache-collide", ci(201, 6, 1));
    sim cache_crash_two_threads("cache-lazy", ci(301, 4, 2));
    // 50 SIGKILLs on fresh stores (a home directory and a pool file), then 50 on one store
    // kept across rounds.
    torture cache_torture("cache", Torture { seed: 5, rounds: 50, kill_after_ms_max: 60 });
}
