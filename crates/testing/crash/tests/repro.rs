//! Reproduce one crash-test workload of a fixture from the settings a failure prints:
//!
//! ```text
//! ATOMFS_CRASH_ENGINE=fixture-lazy ATOMFS_CRASH_SEED=3 ATOMFS_CRASH_UNITS=16 \
//!   ATOMFS_CRASH_THREADS=1 [ATOMFS_CRASH_KEEP=2,5,9] [ATOMFS_CRASH_IMAGES=N] \
//!   [ATOMFS_CRASH_IMAGES_PER_FENCE=N] [ATOMFS_CRASH_RECOVERY_EVERY=N] [ATOMFS_CRASH_SAMPLE_SEED=N] \
//!   cargo test -p atomfs-crash --test repro -- --nocapture
//! ```
//!
//! Fixtures: fixture-shadow, fixture-inplace, fixture-nofence, fixture-lazy,
//! fixture-tornrecovery, fixture-driftingrecovery. An engine's workloads are reproduced by the
//! `repro` test of the engine's own `tests/crash_harness.rs` (the command a failure prints
//! names it; see `crash::suite`). Without ATOMFS_CRASH_SEED the test runs fixture-shadow with
//! seed 1 (so it is part of the normal suite and checks that a clean run reports nothing).

use crash::fixtures::{flaw_by_name, ShadowTarget};
use crash::CrashTarget;
use std::sync::Arc;

fn fixture(name: &str) -> Option<Arc<dyn CrashTarget>> {
    flaw_by_name(name).map(|flaw| Arc::new(ShadowTarget::new(flaw)) as Arc<dyn CrashTarget>)
}

#[test]
fn repro() {
    crash::suite::repro(&fixture, "fixture-shadow");
}
