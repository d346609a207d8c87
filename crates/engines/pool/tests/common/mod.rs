#![allow(dead_code, clippy::unwrap_used)]
//! Helpers shared by the pool tests.

use pmem::{DramRegion, Region};
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Fh, OpenFlags, OpenOptions, Store};

pub const POOL_BYTES: u64 = 4 << 20;

pub fn fresh(cfg: &PoolConfig) -> PoolStore<DramRegion> {
    PoolStore::format(Arc::new(DramRegion::new(POOL_BYTES)), cfg).expect("format")
}

/// The bytes of a region as they stand (an unclean stop keeps exactly these).
pub fn image(region: &DramRegion) -> Vec<u8> {
    let mut bytes = vec![0u8; region.len() as usize];
    region.read(0, &mut bytes);
    bytes
}

/// Reopen a copy of the store's current bytes, as after a power cut with everything
/// flushed (DramRegion has no cache), running recovery.
pub fn crash_copy(s: &PoolStore<DramRegion>, cfg: &PoolConfig) -> PoolStore<DramRegion> {
    let copy = DramRegion::from_bytes(&image(s.region()));
    PoolStore::open(Arc::new(copy), cfg).expect("reopen")
}

pub fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    }
}

/// Open an existing file read-write by path.
pub fn open_rw(s: &dyn Store, path: &str) -> Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(s, path, None)
        .expect(path)
}

pub fn read_path(s: &dyn Store, path: &str) -> Vec<u8> {
    store::path::read_file(s, path).expect(path)
}

pub fn create_with(s: &dyn Store, path: &str, data: &[u8]) {
    store::path::write_file(s, path, data, None).expect(path);
}

/// Deterministic pseudo-random bytes.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
