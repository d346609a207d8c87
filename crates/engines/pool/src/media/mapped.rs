//! Helpers over a pool file mapped with `pmem::MappedRegion` (on /dev/shm the page cache is
//! the emulated NVMM; on DAX it is real persistent memory).

use crate::api::pool_store::PoolStore;
use crate::config::PoolConfig;
use crate::media::layout::{Geometry, BLOCK_SIZE};
use pmem::{MappedRegion, PmError, Region};
use std::path::Path;
use std::sync::Arc;
use store::{Error, Result, Store};

fn pm_error(e: PmError) -> Error {
    match e {
        PmError::Io { path, op, source } => Error::Io {
            path: path.display().to_string(),
            op,
            source,
        },
        PmError::Invalid { path, reason } => {
            Error::InvalidArgument(format!("{}: {reason}", path.display()))
        }
    }
}

/// Create a pool file of `size_bytes` at `path` (it must not exist) and format it.
pub fn create(path: impl AsRef<Path>, size_bytes: u64, cfg: &PoolConfig) -> Result<Arc<dyn Store>> {
    let region = MappedRegion::create(path, size_bytes).map_err(pm_error)?;
    Ok(Arc::new(PoolStore::format(Arc::new(region), cfg)?))
}

/// Open an existing pool file, running recovery.
pub fn open(path: impl AsRef<Path>, cfg: &PoolConfig) -> Result<Arc<dyn Store>> {
    let region = MappedRegion::open(path).map_err(pm_error)?;
    Ok(Arc::new(PoolStore::open(Arc::new(region), cfg)?))
}

/// Fault every page of a freshly formatted pool in before a benchmark times anything (logs,
/// inode table, blocks: `MappedRegion::populate`), so that no first use of a block or log
/// slot pays a tmpfs page fault and page zeroing (NVMM mapped with DAX has no such cost).
/// Where the kernel cannot populate, the block area is touched instead by writing zeros
/// over it, which only a pool without data may get.
pub fn prefault(mapped: &MappedRegion, geo: &Geometry) {
    if mapped.populate().is_err() {
        mapped.fill(geo.blocks_offset, geo.block_count * BLOCK_SIZE, 0);
    }
}
