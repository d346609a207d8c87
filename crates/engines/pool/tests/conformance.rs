//! The conformance suite against the `pool` engine in all six modes (FCFS, NC, FG-WAL, SCSP,
//! SOC, SYNC), on the crash-simulator region: a clean reopen unmounts and opens the region's
//! durable image; an unclean reopen opens the durable image of a store that was never
//! unmounted (a crash at a quiescent point: only what was flushed and fenced survives). NC
//! is exempt from the crash guarantees only (`supports_crash_guarantees`): its cases reopen
//! cleanly instead, and everything else, aborts included, holds. Every mode runs again on a
//! pool formatted with data checksums (`*_checksums`: every read of a permanent block is
//! checked against the crc32c in its pointer). Every engine's tests/conformance.rs implements
//! `conformance::Harness` and invokes `conformance::conformance_tests!` the same way.
//!
//! The ignored long cases (`large_file_1gib`, `many_files_100k`) need a region of more than
//! 1 GiB: set ATOMFS_POOL_CONFORMANCE_MB=1400 (and use --release) to run them:
//! `ATOMFS_POOL_CONFORMANCE_MB=1400 cargo test -p atomfs-pool --release --test conformance -- --ignored`.

use conformance::Harness;
use pmem::SimRegion;
use pool::{Mode, PoolConfig, PoolStore};
use std::sync::Arc;
use store::Store;

/// The mode, and whether the pool is formatted with data checksums.
struct PoolHarness(Mode, bool);

/// Region size: 160 MiB, or ATOMFS_POOL_CONFORMANCE_MB.
fn region_len() -> u64 {
    std::env::var("ATOMFS_POOL_CONFORMANCE_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(160)
        << 20
}
const SMALL_LEN: u64 = 2 << 20;

/// The durable image of a pool store's region, as a new region.
fn durable_copy(s: &dyn Store) -> Arc<SimRegion> {
    match s.as_any().downcast_ref::<PoolStore<SimRegion>>() {
        Some(p) => Arc::new(SimRegion::from_image(p.region().persistent_image())),
        None => panic!("not a pool store on a SimRegion"),
    }
}

/// One inode per 8 KiB of region (at least 8,192): a region sized for the long cases
/// (ATOMFS_POOL_CONFORMANCE_MB=1400) holds the 100,000 files of `many_files_100k`.
fn config(mode: Mode, checksums: bool) -> PoolConfig {
    PoolConfig {
        inode_count: (region_len() / 8192).max(8192),
        ..PoolConfig::default()
    }
    .with_mode(mode)
    .with_data_checksums(checksums)
}

impl Harness for PoolHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(
            PoolStore::format(
                Arc::new(SimRegion::new(region_len())),
                &config(self.0, self.1),
            )
            .expect("format"),
        )
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        Some(Box::new(
            PoolStore::format(
                Arc::new(SimRegion::new(SMALL_LEN)),
                &PoolConfig::test_min()
                    .with_mode(self.0)
                    .with_data_checksums(self.1),
            )
            .expect("format"),
        ))
    }
    fn reopen_clean(&self, s: Box<dyn Store>) -> Box<dyn Store> {
        s.unmount().expect("unmount");
        let region = durable_copy(s.as_ref());
        drop(s);
        Box::new(PoolStore::open(region, &config(self.0, self.1)).expect("open"))
    }
    fn reopen_unclean(&self, s: Box<dyn Store>) -> Box<dyn Store> {
        let region = durable_copy(s.as_ref());
        drop(s); // the old store's destructor cannot touch the copy
        Box::new(PoolStore::open(region, &config(self.0, self.1)).expect("recover"))
    }
    fn supports_crash_guarantees(&self) -> bool {
        self.0 != Mode::Nc
    }
}

mod fcfs {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Fcfs, false));
}
mod nc {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Nc, false));
}
mod fg_wal {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::FgWal, false));
}
mod scsp {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Scsp, false));
}
mod soc {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Soc, false));
}
mod sync {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Sync, false));
}
mod fcfs_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Fcfs, true));
}
mod nc_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Nc, true));
}
mod fg_wal_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::FgWal, true));
}
mod scsp_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Scsp, true));
}
mod soc_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Soc, true));
}
mod sync_checksums {
    use super::*;
    conformance::conformance_tests!(PoolHarness(Mode::Sync, true));
}
