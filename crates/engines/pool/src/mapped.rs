//! Helpers over a pool file mapped with `pmem::MappedRegion` (on /dev/shm the page cache is
//! the emulated NVMM; on DAX it is real persistent memory).

use crate::config::PoolConfig;
use crate::store_impl::PoolStore;
use pmem::{MappedRegion, PmError};
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
