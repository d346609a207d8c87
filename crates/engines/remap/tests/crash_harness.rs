//! The remap engine under the shared crash harness (crates/testing/crash): seeded workloads of
//! transactions (with namespace operations), legacy calls and O_ATOMIC units; a crash image
//! of the host model at every host sync (the journal's commit syncs, the checkpoint's home
//! syncs, the snapshot's sync and rename); recovery (also crashed and recovered again); the
//! ModelStore oracle; and SIGKILLed child processes on a real directory in /dev/shm.
//! The targets are `remap::crash_target`'s, by the names `atomfs crashtest --engine` takes.
//!
//! CI scale here; longer runs:
//! `ATOMFS_CRASH_WORKLOADS=500 cargo test -p atomfs-remap --release --test crash_harness -- --nocapture`.

use crash::suite::{Seeds, Sim, Torture};

/// `workloads` workloads from seed `first`, at least 300 crash images.
const fn ci(first: u64, workloads: u64, threads: usize) -> Sim {
    Sim {
        seeds: Seeds::Count { first, workloads },
        units: 16,
        threads,
        images_per_fence: 6,
        images_per_workload: 150,
        images_min: 300,
    }
}

crash::crash_tests! {
    targets: remap::crash_target::RemapTarget::by_name, repro "remap";
    sim remap_crash_ci("remap-reflink", ci(1, 12, 1));
    sim remap_copy_crash_ci("remap-copy", ci(101, 6, 1));
    sim remap_crash_two_threads("remap-reflink", ci(301, 4, 2));
    torture remap_torture("remap-reflink", Torture { seed: 5, rounds: 30, kill_after_ms_max: 60 });
}
