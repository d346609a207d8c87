//! Found by `cargo fuzz run pool_ops` (run 4, after ~7 minutes), minimised to
//! `create /n0; open /n0; write 0 bytes at 10496; crash`: the model said the file was
//! 10496 bytes long, the pool 0. A write of no bytes changes nothing (pwrite(2) with count
//! 0): the bug was in the model (`conformance::ModelStore` grew the file), fixed there; the
//! pool's behaviour is pinned here.

use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{OpenFlags, Store, ROOT_INO};

#[test]
fn a_write_of_no_bytes_does_not_grow_the_file() {
    let s = PoolStore::format(Arc::new(DramRegion::new(2 << 20)), &PoolConfig::test_min()).unwrap();
    let ino = s.create(ROOT_INO, b"n0", 0o644, None).unwrap().ino;
    let rw = OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    };
    let fh = s.open(ino, rw).unwrap();
    assert_eq!(s.write(fh, 10_496, &[]).unwrap(), 0);
    assert_eq!(s.getattr(ino).unwrap().size, 0);
}
