//! Private images: a pool file read into DRAM (`pmem::DramRegion`), so that recovery, fsck,
//! the inspection views, repair and salvage can run over it without writing the file. A
//! private image costs the pool's size in memory.

use crate::api::pool_store::PoolStore;
use crate::config::PoolConfig;
use pmem::{DramRegion, Region};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use store::{Error, Result};

/// Bytes read from the file at a time.
const CHUNK_BYTES: usize = 1 << 20;

fn io_error(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

/// The bytes of the pool file at `path`, in DRAM. The file is opened read-only.
pub fn load_image(path: &Path) -> Result<DramRegion> {
    let mut file = std::fs::File::open(path).map_err(|e| io_error(path, "open", e))?;
    let len = file
        .metadata()
        .map_err(|e| io_error(path, "stat", e))?
        .len();
    let region = DramRegion::new(len);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut off = 0u64;
    while off < len {
        let n = file.read(&mut buf).map_err(|e| io_error(path, "read", e))?;
        if n == 0 {
            break;
        }
        let n = n.min((len - off) as usize);
        region.write(off, &buf[..n]);
        off += n as u64;
    }
    Ok(region)
}

/// Open a private image of the pool at `path`: recovery runs in DRAM (its report is
/// `last_recovery`), nothing is written to the file.
pub fn open_private(path: &Path, cfg: &PoolConfig) -> Result<PoolStore<DramRegion>> {
    let region = load_image(path)?;
    PoolStore::open(Arc::new(region), cfg)
}

/// The bytes of a region (to write a repaired private image back).
pub fn region_bytes<R: Region>(region: &R) -> Vec<u8> {
    let mut bytes = vec![0u8; region.len() as usize];
    region.read(0, &mut bytes);
    bytes
}
