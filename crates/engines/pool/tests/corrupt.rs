//! Hostile input: pool images with random bytes flipped in the log areas, the inode table
//! and the first blocks open with a typed error or open and serve reads and fsck — never a
//! panic or an out-of-range access; the same on a pool with data checksums, whose leaf
//! pointers carry a crc in their high bits (a flipped bit there or in a data block is an
//! error, never a panic). More cases: `POOL_CORRUPT_CASES=20000 cargo test -p
//! atomfs-pool --test corrupt`.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pmem::DramRegion;
use pool::{PoolConfig, PoolStore};
use std::sync::Arc;
use store::{OpenFlags, Store, ROOT_INO};

fn exercise(s: &PoolStore<DramRegion>) {
    let Ok(entries) = s.read_dir(ROOT_INO) else {
        return;
    };
    for e in entries {
        let _ = s.getattr(e.ino);
        if let Ok(fh) = s.open(
            e.ino,
            OpenFlags {
                read: true,
                write: true,
                ..Default::default()
            },
        ) {
            let mut buf = vec![0u8; 20_000];
            let _ = s.read(fh, 0, &mut buf);
            let _ = s.write(fh, 100, b"poke");
            let _ = s.set_len(fh, 50);
            let _ = s.release(fh);
        }
        let _ = s.read_dir(e.ino);
    }
    let _ = s.create(ROOT_INO, b"new-after-corruption", 0o644, None);
    let _ = s.fsck();
    let _ = s.checkpoint_all();
}

#[test]
fn corrupted_images_never_panic() {
    corrupted_images_of(&PoolConfig::test_min());
}

#[test]
fn corrupted_checksummed_images_never_panic() {
    corrupted_images_of(&PoolConfig::test_min().with_data_checksums(true));
}

fn corrupted_images_of(cfg: &PoolConfig) {
    let cfg = cfg.clone();
    let s = fresh(&cfg);
    store::path::mkdir_all(&s, "/d/e", 0o755).unwrap();
    for i in 0..6 {
        create_with(&s, &format!("/f{i}"), &pattern(i, 3000 + i as usize * 2500));
        create_with(&s, &format!("/d/g{i}"), &pattern(100 + i, 700));
    }
    // Leave committed redo entries and an uncommitted transaction in the log.
    let fh = s
        .open(store::resolve(&s, "/f1").unwrap().ino, rw())
        .unwrap();
    s.write(fh, 10, &pattern(9, 5000)).unwrap();
    let tx = s.tx_begin(&[fh]).unwrap();
    s.write(fh, 40, &pattern(10, 3000)).unwrap();
    let _ = tx;
    let clean = image(s.region());
    let geo = s.superblock().geometry;
    let hot_end = (geo.blocks_offset + 64 * 4096).min(clean.len() as u64);
    let mut rng = pattern(77, 8 * 4000);
    let (mut opened, mut refused) = (0, 0);
    let cases: usize = std::env::var("POOL_CORRUPT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    for case in 0..cases {
        let mut img = clean.clone();
        for flip in 0..1 + case % 4 {
            let r = u64::from_le_bytes(
                rng[(case * 8 + flip * 2) % (rng.len() - 8)..][..8]
                    .try_into()
                    .unwrap(),
            );
            let at = geo.meta_log_offset + r % (hot_end - geo.meta_log_offset);
            img[at as usize] ^= 1 << (r >> 60 & 7);
        }
        rng.rotate_left(3);
        let result = std::panic::catch_unwind(|| {
            match PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &cfg) {
                Ok(store) => {
                    exercise(&store);
                    true
                }
                Err(_) => false,
            }
        });
        match result {
            Ok(true) => opened += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("case {case}: a corrupted image made the engine panic"),
        }
    }
    eprintln!("corrupted images: {opened} opened and exercised, {refused} refused with an error");
    assert!(opened > 0 && refused > 0);
}
