//! `pool::create` / `pool::open` over a mapped pool file (in /dev/shm when available).
#![allow(clippy::unwrap_used)]

use pool::PoolConfig;
use store::OpenOptions;

#[test]
fn create_write_reopen_mapped_pool() {
    let path =
        pmem::mapped::scratch_dir().join(format!("atomfs-pool-test-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = PoolConfig::test_min();
    {
        let s = pool::create(&path, 8 << 20, &cfg).unwrap();
        store::path::write_file(&*s, "/hello", b"persistent hello", None).unwrap();
        let fh = OpenOptions::new()
            .write(true)
            .open(&*s, "/hello", None)
            .unwrap();
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 0, b"P").unwrap();
        s.tx_commit(tx).unwrap();
        // Dropped without unmount: an unclean stop.
    }
    let s = pool::open(&path, &cfg).unwrap();
    assert_eq!(
        store::path::read_file(&*s, "/hello").unwrap(),
        b"Persistent hello"
    );
    s.unmount().unwrap();
    drop(s);
    assert!(
        pool::create(&path, 8 << 20, &cfg).is_err(),
        "create must not overwrite"
    );
    std::fs::remove_file(&path).unwrap();
    assert!(pool::open(&path, &cfg).is_err());
}
