//! Found by the engine's crash test (`cargo test -p atomfs-pool --test crash`, seed 1 step 39,
//! fence 319, image 2), first as "inode 3 has block 2 past its size 7821" after a crash
//! during the abort of a transaction that extended a file and then truncated it.
//!
//! The transaction undo-logged the pointer of block 2 alone (8 bytes: old value 0) when the
//! extending write filled the hole, then the truncate logged the run of the pointers of
//! blocks 1 and 2 (16 bytes) — whose second half already held the transaction's own new
//! pointer. The engine deduplicated undo ranges by (address, length), so both entries were
//! kept, the later one holding an intermediate value. An abort applies the entries in
//! reverse order (right) and then frees them with one fence for all: a crash in between may
//! persist the free of the earlier entry but not of the later one, and recovery "restored"
//! block 2's pointer to the transaction's own block. Now every metadata byte is undo-logged
//! at most once per transaction (`logged.rs`), so every entry holds original bytes.

use pmem::{CrashConfig, SimRegion};
use pool::{PoolConfig, PoolStore};
use std::sync::{Arc, Mutex};
use store::{OpenFlags, Store, ROOT_INO};

fn cfg() -> PoolConfig {
    PoolConfig {
        inode_count: 16,
        metadata_log_entries: 64,
        data_log_entries: 16,
        ..PoolConfig::test_min()
    }
}

fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn abort_of_extend_then_truncate_survives_a_crash_at_every_fence() {
    let region = Arc::new(SimRegion::new(512 << 10));
    let s = PoolStore::format(region.clone(), &cfg()).unwrap();
    let original = content(7821);
    let meta = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(meta.ino, rw).unwrap();
    s.write(fh, 0, &original).unwrap();

    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let images = Arc::new(Mutex::new(0u64));
    region.set_crash_config(CrashConfig {
        exhaustive_limit: 4096,
        sample_count: 64,
        seed: 1,
    });
    let (seen, found) = (images.clone(), failures.clone());
    region.set_fence_hook(Box::new(move |point| {
        for index in 0..point.image_count() {
            *seen.lock().unwrap() += 1;
            let image = Arc::new(SimRegion::from_image(point.image(index)));
            let problem = match PoolStore::open(image, &cfg()) {
                Err(e) => Some(format!("recovery failed: {e}")),
                Ok(r) => match (store::path::read_file(&r, "/f"), r.fsck()) {
                    (Ok(data), Ok(report)) if data == content(7821) && report.is_clean() => None,
                    (data, report) => Some(format!(
                        "fence {} image {index}: file {:?} bytes, fsck {report:?}",
                        point.fence_index(),
                        data.map(|d| d.len())
                    )),
                },
            };
            found.lock().unwrap().extend(problem);
        }
    }));

    let tx = s.tx_begin(&[fh]).unwrap();
    s.write(fh, 9000, &content(300)).unwrap(); // fills block 2: its pointer is logged alone
    s.set_len(fh, 1651).unwrap(); // drops blocks 1 and 2: one run over both pointers
    s.tx_abort(tx).unwrap();
    drop(region.take_fence_hook());

    assert_eq!(store::path::read_file(&s, "/f").unwrap(), original);
    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        *images.lock().unwrap() > 10,
        "the crash images were explored"
    );
}
