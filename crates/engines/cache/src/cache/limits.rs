//! The cache's own bounded resources, with their use (`Store::limits`, `atomfs info`).

use super::Cache;
use crate::backing::Backing;
use pmem::Region;
use store::{Limit, Result};

impl<R: Region, B: Backing> Cache<R, B> {
    /// Every limit of the pool: file records, chunks (a write spans at most one per slot),
    /// dirty chunks, unit records (open transactions), intent records and intent paths.
    pub fn limits(&self) -> Result<Vec<Limit>> {
        let g = self.geometry();
        let (mut valid, mut pinned) = (0, 0);
        for chunk in 0..g.chunks() {
            let t = self.tag(chunk)?;
            if t.valid() {
                valid += 1;
                pinned += u64::from(self.is_open(t.stamp));
            }
        }
        let dirty = self.dirty.lock().len() as u64;
        let units_used = g.units_max() - self.free_units.lock().len() as u64;
        let intents_used = g.intents_max() - self.free_intents.lock().len() as u64;
        Ok(vec![
            Limit::new(
                "cached files (file records)",
                g.files_max(),
                Some(self.files.lock().count()),
                "EMFILE",
            ),
            Limit::new(
                "cache chunks (two per slot; one write spans at most one per slot)",
                g.chunks(),
                Some(valid),
                "EFBIG",
            ),
            Limit::new(
                "cache chunks of open transactions (past two in a slot, or a slot's other chunk held)",
                g.chunks(),
                Some(pinned),
                "ENOSPC",
            ),
            Limit::new(
                "dirty cache chunks (not yet home; a write evicts by flushing)",
                g.chunks(),
                Some(dirty),
                "none",
            ),
            Limit::new(
                "open transactions (unit records)",
                g.units_max(),
                Some(units_used),
                "EMFILE",
            ),
            Limit::new(
                "namespace operations in open transactions (intent records)",
                g.intents_max(),
                Some(intents_used),
                "EMFILE",
            ),
            Limit::new(
                "path bytes of a namespace operation in a transaction",
                crate::format::intent::PATH_MAX as u64,
                None,
                "ENAMETOOLONG",
            ),
        ])
    }
}
