//! The journal engine (NJS and its ablation variants) under the shared crash harness
//! (crates/testing/crash): seeded workloads of transactions (with namespace operations),
//! legacy calls and O_ATOMIC units; crash images at every fence of the PM journal, each
//! paired with a crash image of the home directory's model at the same moment; recovery
//! (also crashed and recovered again); the ModelStore oracle; and SIGKILLed child processes
//! on a real home directory and PM journal file in /dev/shm. The targets are
//! `journal::crash_target`'s, by the names `atomfs crashtest --engine` takes.
//!
//! CI scale here; longer runs:
//! `ATOMFS_CRASH_WORKLOADS=500 cargo test -p atomfs-journal --release --test crash_harness -- --nocapture`.

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
    targets: journal::crash_target::JournalTarget::by_name, repro "journal";
    sim journal_njs_crash_ci("journal-njs", ci(1, 12, 1));
    sim journal_no_delta_crash_ci("journal-no-delta", ci(101, 4, 1));
    sim journal_no_gc_crash_ci("journal-no-gc", ci(201, 4, 1));
    sim journal_all_journal_crash_ci("journal-all-journal", ci(301, 4, 1));
    sim journal_no_wear_crash_ci("journal-no-wear", ci(401, 4, 1));
    sim journal_crash_two_threads("journal-njs", ci(501, 4, 2));
    // 50 SIGKILLs on fresh stores (a home directory and a PM journal), then 50 on one store
    // kept across rounds.
    torture journal_torture("journal", Torture { seed: 5, rounds: 50, kill_after_ms_max: 60 });
}
