#![allow(dead_code, clippy::unwrap_used)]
//! Helpers shared by the pool tests.

use pmem::{DramRegion, Region};
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Fh, OpenFlags, Store, TxId, ROOT_INO};

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

/// Open an existing file read-write by path; the whole contents of a file by path.
#[allow(unused_imports)] // each test file uses part of this
pub use test_support::{open_rw, read_path};

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

/// In one transaction on /a (9,000 bytes, open as `fa`) and /b (open as `fb`): an overwrite,
/// an extension, a truncate and a write of /b, a create, /b renamed to /b2, /a unlinked.
pub fn change_everything(s: &dyn Store, fa: Fh, fb: Fh) -> TxId {
    let tx = s.tx_begin(&[fa, fb]).unwrap();
    s.write(fa, 100, &pattern(12, 5000)).unwrap();
    s.write(fa, 20_000, b"grow").unwrap();
    s.set_len(fb, 10).unwrap();
    s.write(fb, 3, b"xyz").unwrap();
    s.create(ROOT_INO, b"new", 0o644, Some(tx)).unwrap();
    s.rename(ROOT_INO, b"b", ROOT_INO, b"b2", Some(tx)).unwrap();
    s.unlink(ROOT_INO, b"a", Some(tx)).unwrap();
    assert!(s.lookup(ROOT_INO, b"a").is_err());
    tx
}
