//! Helpers of the journal's Store tests: a store over a SimRegion and a SimHostFs, reopened
//! from their durable images as after a crash, its limits and fsck.

#![allow(dead_code)]

use hostfs::SimHostFs;
use journal::layout::Geometry;
use journal::{JournalStore, MetaFormat, StoreConfig};
use pmem::SimRegion;
use std::sync::Arc;
use store::{Limit, OpenFlags, Store};

pub type SimStore = JournalStore<Arc<SimRegion>, SimHostFs>;

pub const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

/// A new store whose metadata log is `format`, and its media.
pub fn new_store_as(
    cfg: &StoreConfig,
    format: MetaFormat,
) -> (Arc<SimRegion>, SimHostFs, SimStore) {
    let g = Geometry::new(cfg.journal.journal_blocks).unwrap();
    let region = Arc::new(SimRegion::new(g.region_len()));
    let host = SimHostFs::default();
    let s = JournalStore::create_on_format(region.clone(), host.clone(), cfg, format).unwrap();
    (region, host, s)
}

/// Reopen from the durable images (as after a crash): the new media and the store.
pub fn reopen_media(
    region: &SimRegion,
    host: &SimHostFs,
    cfg: &StoreConfig,
) -> store::Result<(Arc<SimRegion>, SimHostFs, SimStore)> {
    let region = Arc::new(SimRegion::from_image(region.persistent_image()));
    let host = SimHostFs::from_image(&host.durable_image(), hostfs::SimConfig::default());
    let s = JournalStore::open_on(region.clone(), host.clone(), cfg)?;
    Ok((region, host, s))
}

/// The limit of `s` whose name starts with `prefix`.
pub fn limit(s: &dyn Store, prefix: &str) -> Limit {
    s.limits()
        .unwrap()
        .into_iter()
        .find(|l| l.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no limit {prefix:?}"))
}

/// fsck finds nothing.
pub fn clean(s: &dyn Store) {
    let report = s.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.problems);
}
