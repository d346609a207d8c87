//! Read misses load the home block into a clean chunk by the placement cases (§5.2.2), so
//! the next read of the block is served from PM; a cached clean chunk is evicted without a
//! home write and loaded again at its next miss; a read never forces a flush home.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{Cache, CacheConfig, MemBacking};
use pmem::DramRegion;
use std::sync::Arc;

const C: usize = 4096;

type TestCache = Cache<DramRegion, Arc<MemBacking>>;

fn counter(c: &TestCache, name: &str) -> u64 {
    c.stats()
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn read(c: &TestCache, key: u64, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    assert_eq!(c.read(key, off, &mut buf).unwrap(), len);
    buf
}

/// Chunk `i` of a home file: byte `base + i` everywhere.
fn home_file(base: u8, chunks: usize) -> Vec<u8> {
    (0..chunks).flat_map(|i| vec![base + i as u8; C]).collect()
}

#[test]
fn the_second_read_of_a_block_is_served_from_pm() {
    let home = Arc::new(MemBacking::new());
    home.put(7, &home_file(10, 3));
    let c = Cache::format(
        DramRegion::new(1 << 20),
        home.clone(),
        CacheConfig::test_min(),
        b"/h",
    )
    .unwrap();
    let k = c.create_file(7, 3 * C as u64).unwrap();
    assert_eq!(read(&c, k, C as u64 + 5, 100), vec![11u8; 100]);
    assert_eq!(
        (counter(&c, "read_misses"), counter(&c, "read_fills")),
        (1, 1)
    );
    // Whatever the home file says now, the block comes from PM (the chunk is clean: this
    // change behind the cache's back is what a PM hit shows).
    home.put(7, &home_file(50, 3));
    assert_eq!(read(&c, k, C as u64, C), vec![11u8; C], "served from PM");
    assert_eq!(counter(&c, "read_hits"), 1);
    assert_eq!(counter(&c, "read_misses"), 1);
    assert_eq!(read(&c, k, 0, 10), vec![50u8; 10], "another block: a miss");
    assert_eq!(counter(&c, "read_misses"), 2);
    assert_eq!(
        counter(&c, "chunks_flushed"),
        0,
        "a clean chunk is never written home"
    );
    assert!(c.fsck().unwrap().is_clean());
}

#[test]
fn a_cached_clean_chunk_is_evicted_without_a_home_write_and_reloaded() {
    let config = CacheConfig {
        stride_fixed: Some(1),
        ..CacheConfig::test_min()
    };
    let home = Arc::new(MemBacking::new());
    let c = Cache::format(DramRegion::new(64 << 10), home.clone(), config, b"/h").unwrap();
    assert!(c.geometry().slots() >= 4);
    // Keys z, a = z + 1, b = z + 2: chunks (z, 2), (a, 1) and (b, 0) share one slot.
    home.put(1, &home_file(10, 3));
    home.put(2, &home_file(20, 2));
    home.put(3, &home_file(30, 1));
    let z = c.create_file(1, 3 * C as u64).unwrap();
    let a = c.create_file(2, 2 * C as u64).unwrap();
    let b = c.create_file(3, C as u64).unwrap();
    assert_eq!((a, b), (z + 1, z + 2));
    assert_eq!(read(&c, a, C as u64, C), vec![21u8; C]); // a1 loaded: Case 1
    assert_eq!(counter(&c, "read_fills"), 1);
    c.write(b, 0, &[3; 8]).unwrap(); // b0 beside it: Case 2-2
    c.write(z, 2 * C as u64, &[4; 8]).unwrap(); // z2: Case 3-3 frees a1 (clean, older)
    assert_eq!(
        counter(&c, "forced_flushes"),
        0,
        "a clean victim needs no home write"
    );
    // a1 again: both chunks dirty, so the miss is served from home and not cached.
    assert_eq!(read(&c, a, C as u64, C), vec![21u8; C]);
    assert_eq!(
        (
            counter(&c, "read_misses"),
            counter(&c, "read_fills_skipped")
        ),
        (2, 1)
    );
    assert_eq!(
        counter(&c, "forced_flushes"),
        0,
        "a read never forces a flush"
    );
    c.flush_all().unwrap();
    // Now both are clean: the miss frees the older (b0) and loads a1 (Case 3-3).
    assert_eq!(read(&c, a, C as u64, C), vec![21u8; C]);
    assert_eq!(
        (
            counter(&c, "read_fills"),
            counter(&c, "read_fill_evictions")
        ),
        (2, 1)
    );
    assert_eq!(read(&c, a, C as u64, 8), vec![21u8; 8]);
    assert_eq!(counter(&c, "read_hits"), 1, "the reloaded chunk hits");
    // Every file still reads right, its evicted chunks from home.
    let mut want_b = vec![3u8; 8];
    want_b.extend_from_slice(&[30u8; C - 8]);
    assert_eq!(read(&c, b, 0, C), want_b);
    let mut want_z = home_file(10, 3);
    want_z[2 * C..2 * C + 8].fill(4);
    assert_eq!(read(&c, z, 0, 3 * C), want_z);
    assert!(c.fsck().unwrap().is_clean());
}
