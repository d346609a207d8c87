//! The mmio engine under the shared crash harness (crates/testing/crash): seeded workloads of
//! transactions (with namespace operations), legacy calls and O_ATOMIC units; crash images at
//! every fence; recovery (also crashed and recovered again); the ModelStore oracle. The
//! simulated media (namespace + file extents) and the log pool share one SimRegion, so the
//! harness's region images are whole-system crash images.
//!
//! CI scale here (about a minute in the dev profile); longer runs:
//! `ATOMFS_MMIO_CRASH_WORKLOADS=500 cargo test -p atomfs-mmio --release --test crash_harness -- --nocapture`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crash::{run_seeds, CrashTarget, DriverConfig, WorkloadConfig};
use mmio::{MmioConfig, MmioStore, PolicyMode, SimMedia, Window};
use pmem::SimRegion;
use std::sync::Arc;
use store::{Error, Result, Store};

const FILE_CAPACITY: u64 = 128 << 10;
const EXTENTS: u32 = 32;

struct MmioTarget {
    config: MmioConfig,
}

impl MmioTarget {
    fn new(mode: PolicyMode) -> Self {
        MmioTarget {
            config: MmioConfig {
                policy_mode: mode,
                files_max: 32,
                index_entries_max: 256,
                intents_max: 64,
                tx_files_max: mmio::layout::TX_FILES_MAX,
                ..MmioConfig::test_min()
            },
        }
    }
}

impl CrashTarget for MmioTarget {
    fn name(&self) -> String {
        format!("mmio-{:?}", self.config.policy_mode).to_lowercase()
    }
    fn region_len(&self) -> u64 {
        self.config.log_pool_len + SimMedia::area_len(FILE_CAPACITY, EXTENTS)
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let len = self.config.log_pool_len;
        let media = SimMedia::new(region.clone(), len, FILE_CAPACITY, EXTENTS);
        let pool = Window::new(region, 0, len);
        Ok(Box::new(MmioStore::create_on(pool, media, &self.config)?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        let len = self.config.log_pool_len;
        let media = SimMedia::open(region.clone(), len, FILE_CAPACITY, EXTENTS)
            .map_err(|e| Error::corrupt(format!("simulated namespace: {e}"), len))?;
        let pool = Window::new(region, 0, len);
        Ok(Box::new(MmioStore::open_on(pool, media, &self.config)?))
    }
}

fn run(mode: PolicyMode, seeds: std::ops::RangeInclusive<u64>, threads: usize) {
    let extra: u64 = std::env::var("ATOMFS_MMIO_CRASH_WORKLOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let seeds = *seeds.start()..=seeds.end() + extra;
    let cfg = DriverConfig {
        images_per_fence: 6,
        images_per_workload: 150,
        ..Default::default()
    };
    let report = run_seeds(
        Arc::new(MmioTarget::new(mode)),
        seeds,
        WorkloadConfig {
            seed: 0,
            units: 16,
            threads,
        },
        &cfg,
    );
    eprintln!(
        "{} (units rolled back for lack of space: {})",
        report.summary(),
        report.space_rollbacks
    );
    assert!(
        report.images >= 500,
        "too few crash images: {}",
        report.images
    );
    assert!(
        report.violations.is_empty(),
        "{} violations, first: {}",
        report.violations.len(),
        report.violations[0]
    );
}

#[test]
fn mmio_hybrid_crash_ci() {
    run(PolicyMode::Hybrid, 1..=12, 1);
}

#[test]
fn mmio_undo_crash_ci() {
    run(PolicyMode::Undo, 101..=106, 1);
}

#[test]
fn mmio_redo_crash_ci() {
    run(PolicyMode::Redo, 201..=206, 1);
}

#[test]
fn mmio_crash_two_threads() {
    run(PolicyMode::Hybrid, 301..=304, 2);
}
