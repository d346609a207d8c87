//! Found while fixing `uncommitted_create_changed_from_outside` (24 Nov 2026): `tx_begin;
//! mkdir /d in tx; create /d/f in tx; tx_abort; fsck` reported the directory's block as
//! leaked. A directory grows in a small transaction of its own that commits at once
//! (docs/engines/pool.md "Decisions beyond the seed"), so the abort that freed the new
//! directory's inode left the block that growth gave it referenced by a free inode only —
//! lost to the allocator until the pool was reopened (recovery rebuilds the allocators from
//! the live inodes). The abort now frees the blocks of the directories its transaction
//! created (read before the undo frees their inodes).

use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{Store, ROOT_INO};

#[test]
fn aborting_a_mkdir_frees_the_blocks_the_new_directory_grew() {
    let s = PoolStore::format(Arc::new(DramRegion::new(4 << 20)), &PoolConfig::test_min()).unwrap();
    // The root's own first block (committed growth that stays) comes before the count.
    s.create(ROOT_INO, b"keep", 0o644, None).unwrap();
    let free_before = s.statfs().unwrap().blocks_free;
    let tx = s.tx_begin(&[]).unwrap();
    let d = s.mkdir(ROOT_INO, b"d", 0o755, Some(tx)).unwrap();
    let e = s.mkdir(d.ino, b"e", 0o755, Some(tx)).unwrap();
    for i in 0..40 {
        // Enough names for the inner directory to grow a second block.
        s.create(e.ino, format!("f{i}").as_bytes(), 0o644, Some(tx))
            .unwrap();
    }
    s.tx_abort(tx).unwrap();
    assert!(s.lookup(ROOT_INO, b"d").is_err());
    let report = s.fsck().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(s.statfs().unwrap().blocks_free, free_before, "blocks free");
}
