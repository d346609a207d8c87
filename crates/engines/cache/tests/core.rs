//! The cache core against in-memory home files: reads after writes, lengths, every write
//! case of §5.2.2 reached (counters), flushes, home faults, bad pools.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{Cache, CacheConfig, MemBacking, WriteCase};
use pmem::DramRegion;
use std::sync::Arc;

const C: usize = 4096;

fn cache_with(pool_len: u64, config: CacheConfig) -> Cache<DramRegion, Arc<MemBacking>> {
    let home = Arc::new(MemBacking::new());
    Cache::format(DramRegion::new(pool_len), home, config, b"/home").unwrap()
}

fn read_all(c: &Cache<DramRegion, Arc<MemBacking>>, key: u64) -> Vec<u8> {
    let mut buf = vec![0u8; c.len(key).unwrap() as usize];
    assert_eq!(c.read(key, 0, &mut buf).unwrap(), buf.len());
    buf
}

#[test]
fn reads_see_every_acknowledged_write_and_holes_are_zero() {
    let c = cache_with(4 << 20, CacheConfig::test_min());
    let k = c.create_file(10, 0).unwrap();
    let mut model = vec![0u8; 3 * C + 100];
    c.write(k, 0, &[1; 100]).unwrap();
    model[..100].fill(1);
    c.write(k, 2 * C as u64 + 50, &vec![2; C + 50]).unwrap();
    model[2 * C + 50..3 * C + 100].fill(2);
    c.write(k, 30, &[3; 10]).unwrap();
    model[30..40].fill(3);
    assert_eq!(read_all(&c, k), model);
    c.set_len(k, 60).unwrap();
    c.set_len(k, 5000).unwrap();
    model.truncate(60);
    model.resize(5000, 0);
    assert_eq!(
        read_all(&c, k),
        model,
        "bytes past a shrink come back as zeros"
    );
}

#[test]
fn a_home_file_is_read_through_and_flushed_back() {
    let home = Arc::new(MemBacking::new());
    home.put(7, &vec![9u8; 2 * C]);
    let c = Cache::format(
        DramRegion::new(4 << 20),
        home.clone(),
        CacheConfig::test_min(),
        b"/h",
    )
    .unwrap();
    let k = c.create_file(7, 2 * C as u64).unwrap();
    c.write(k, 10, b"hello").unwrap();
    assert_eq!(home.contents(7).unwrap()[10], 9, "not home before a flush");
    let mut model = vec![9u8; 2 * C];
    model[10..15].copy_from_slice(b"hello");
    assert_eq!(read_all(&c, k), model);
    assert!(c.flush_file(k).unwrap() >= 1);
    assert_eq!(
        home.contents(7).unwrap(),
        model,
        "home holds the data after a flush"
    );
    assert_eq!(home.crash().contents(7).unwrap(), model, "and it is synced");
}

/// Stride 1 and a pool of a few slots: files collide, every case of §5.2.2 is reached.
#[test]
fn every_write_case_is_reached_with_a_stride_of_one_and_a_tiny_pool() {
    let config = CacheConfig {
        stride_fixed: Some(1),
        ..CacheConfig::test_min()
    };
    let c = cache_with(64 << 10, config);
    let slots = c.geometry().slots();
    assert!(slots >= 2, "{slots}");
    let a = c.create_file(1, 0).unwrap();
    // b's chunk 0 shares a's slot: key b = a + 1 → slot of (b, 0) = slot of (a, 1)... use
    // a's chunk 1 and b's chunk 0 to collide.
    let b = c.create_file(2, 0).unwrap();
    let d = c.create_file(3, 0).unwrap();
    c.write(a, 0, &vec![1; 2 * C]).unwrap(); // case 1 ×2 (a0, a1)
    c.write(a, C as u64, &[2; 8]).unwrap(); // a1 again: case 2-1
    c.write(b, 0, &[3; 8]).unwrap(); // b0 lands beside a1: case 2-2
    c.write(a, C as u64, &[4; 8]).unwrap(); // a1 (older? newer?) with b0 valid: case 3-x
    c.write(b, 0, &[5; 8]).unwrap(); // b0 with a1 valid: case 3-x
    c.write(b, 0, &[6; 8]).unwrap();
    c.write(d, 0, &[7; 8]).unwrap(); // d0 shares slot with a2? force 3-3 below
                                     // A third file into a full slot: Case 3-3.
    let slot_b1 = c.len(b).unwrap(); // b is one chunk long
    assert!(slot_b1 > 0);
    c.write(b, C as u64, &[8; 8]).unwrap(); // b1 = slot of d0 (key b + 1 = key d)
    c.write(a, 2 * C as u64, &[9; 8]).unwrap(); // a2 = slot of d0 too: 3-3
    for case in WriteCase::ALL {
        if case == WriteCase::InPlace {
            continue;
        }
        assert!(
            c.counters().case_count(case) > 0,
            "{case:?} never reached: {:?}",
            c.stats()
        );
    }
    let mut model_a = vec![1u8; 2 * C + 8];
    model_a[C..C + 8].fill(4);
    model_a[2 * C..].fill(9);
    assert_eq!(read_all(&c, a), model_a);
    let mut model_b = vec![6u8; C + 8];
    model_b[8..C].fill(0);
    model_b[C..].fill(8);
    assert_eq!(read_all(&c, b), model_b);
    assert!(
        c.counters()
            .forced_flushes
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
}

#[test]
fn a_failing_home_keeps_chunks_dirty_and_reports_the_error() {
    let home = Arc::new(MemBacking::new());
    let c = Cache::format(
        DramRegion::new(1 << 20),
        home.clone(),
        CacheConfig::test_min(),
        b"/h",
    )
    .unwrap();
    let k = c.create_file(4, 0).unwrap();
    c.write(k, 0, &[5; 100]).unwrap();
    home.set_fail_writes(true);
    assert!(c.flush_all().is_err());
    assert!(
        c.flush_error().is_some(),
        "the error is kept for stats and fsync"
    );
    assert_eq!(read_all(&c, k), vec![5; 100], "nothing lost");
    home.set_fail_writes(false);
    assert_eq!(
        c.flush_all().unwrap(),
        1,
        "the chunk stayed dirty and is flushed now"
    );
    assert!(c.flush_error().is_none());
    assert_eq!(home.contents(4).unwrap(), vec![5; 100]);
}

#[test]
fn a_pool_too_small_for_one_slot_is_refused_at_format() {
    let home = Arc::new(MemBacking::new());
    let r = Cache::format(DramRegion::new(8192), home, CacheConfig::test_min(), b"/h");
    assert!(matches!(r, Err(store::Error::InvalidArgument(_))));
}

#[test]
fn damaged_pools_give_clear_errors() {
    let c = cache_with(1 << 20, CacheConfig::test_min());
    let k = c.create_file(1, 0).unwrap();
    c.write(k, 0, &[1; 10]).unwrap();
    let mut image = vec![0u8; 1 << 20];
    pmem::Region::read(c.region(), 0, &mut image);
    let open = |img: &[u8]| {
        Cache::open(
            DramRegion::from_bytes(img),
            Arc::new(MemBacking::new()),
            CacheConfig::test_min(),
        )
        .map(|_| ())
    };
    assert!(open(&image).is_ok());
    let mut bad = image.clone();
    bad[0] ^= 1;
    assert!(matches!(open(&bad), Err(store::Error::BadMagic(_))));
    let mut bad = image.clone();
    bad[20] ^= 1;
    assert!(matches!(open(&bad), Err(store::Error::Corrupt { .. })));
    let tags = c.geometry().tags_off() as usize;
    let mut bad = image.clone();
    for t in 0..c.geometry().chunks() as usize {
        bad[tags + t * 32 + 9] ^= 0x55; // index byte of every tag
    }
    assert!(matches!(open(&bad), Err(store::Error::Corrupt { .. })));
    assert!(open(&image[..4096]).is_err(), "truncated pool");
}

#[test]
fn the_periodic_flusher_cleans_dirty_chunks_in_the_background() {
    let home = Arc::new(MemBacking::new());
    let c = Arc::new(
        Cache::format(
            DramRegion::new(1 << 20),
            home.clone(),
            CacheConfig::test_min(),
            b"/h",
        )
        .unwrap(),
    );
    let k = c.create_file(3, 0).unwrap();
    let flusher = cache::Flusher::start(&c, std::time::Duration::from_millis(1)).unwrap();
    c.write(k, 0, &[6; 5000]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while home.crash().contents(3) != Some(vec![6; 5000]) {
        assert!(std::time::Instant::now() < deadline, "{:?}", c.stats());
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(flusher);
    assert!(
        c.counters()
            .chunks_flushed
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    );
}

#[test]
fn a_zero_period_writes_through_before_the_write_returns() {
    let home = Arc::new(MemBacking::new());
    let config = CacheConfig {
        flush_period: Some(std::time::Duration::ZERO),
        ..CacheConfig::test_min()
    };
    let c = Cache::format(DramRegion::new(1 << 20), home.clone(), config, b"/h").unwrap();
    let k = c.create_file(3, 0).unwrap();
    c.write(k, 0, &[4; 100]).unwrap();
    assert_eq!(home.crash().contents(3), Some(vec![4; 100]));
}

#[test]
fn a_transaction_commits_across_files_and_an_abort_leaves_nothing() {
    let c = cache_with(1 << 20, CacheConfig::test_min());
    let a = c.create_file(1, 0).unwrap();
    let b = c.create_file(2, 0).unwrap();
    c.write(a, 0, &[1; 5000]).unwrap();
    let mut t = c.begin().unwrap();
    c.write_in(&mut t, a, 100, &[2; 10]).unwrap();
    c.write_in(&mut t, b, 0, &[3; 7000]).unwrap();
    c.set_len_in(&mut t, a, 50).unwrap();
    c.set_len_in(&mut t, a, 6000).unwrap();
    let mut inside = vec![1u8; 50];
    inside.resize(6000, 0);
    assert_eq!(
        read_all(&c, a),
        inside,
        "shrink then grow inside a transaction reads zeros"
    );
    c.abort(t).unwrap();
    assert_eq!(read_all(&c, a), vec![1; 5000]);
    assert_eq!(c.len(b).unwrap(), 0);
    let mut t = c.begin().unwrap();
    c.write_in(&mut t, a, 100, &[2; 10]).unwrap();
    c.write_in(&mut t, b, 0, &[3; 7000]).unwrap();
    c.commit(t).unwrap();
    let mut model = vec![1u8; 5000];
    model[100..110].fill(2);
    assert_eq!(read_all(&c, a), model);
    assert_eq!(read_all(&c, b), vec![3; 7000]);
}

#[test]
fn an_open_transaction_pins_its_slots() {
    let config = CacheConfig {
        stride_fixed: Some(1),
        ..CacheConfig::test_min()
    };
    let c = cache_with(64 << 10, config);
    let a = c.create_file(1, 0).unwrap();
    let b = c.create_file(2, 0).unwrap();
    let mut t = c.begin().unwrap();
    c.write_in(&mut t, a, C as u64, &[1; 10]).unwrap(); // a1 = slot of b0
    c.write(b, 0, &[2; 10]).unwrap(); // the free chunk of the slot: allowed
    assert!(
        matches!(c.write(b, 0, &[3; 10]), Err(store::Error::NoSpace(_))),
        "Case 3 would evict the transaction's chunk"
    );
    assert_eq!(
        c.flush_all().unwrap(),
        1,
        "the open transaction's chunk is not flushed"
    );
    c.commit(t).unwrap();
    c.write(b, 0, &[3; 10]).unwrap();
}
