//! Crafted pool images (the fuzz target fuzz/fuzz_targets/cache_open.rs, a short seeded run
//! here): random bytes flipped in a valid pool, and random pools, open with a clear error or
//! recover cleanly — never a panic — and a recovered pool serves reads and writes.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{Cache, CacheConfig, MemBacking};
use pmem::{DramRegion, Region};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const POOL: u64 = 64 << 10;

fn valid_image() -> Vec<u8> {
    let home = Arc::new(MemBacking::new());
    let c = Cache::format(DramRegion::new(POOL), home, CacheConfig::test_min(), b"/h").unwrap();
    for id in 0..3 {
        let k = c.create_file(id, 0).unwrap();
        c.write(k, 100 * id, &vec![id as u8 + 1; 6000]).unwrap();
    }
    let mut image = vec![0u8; POOL as usize];
    c.region().read(0, &mut image);
    image
}

fn exercise(image: &[u8]) {
    let home = Arc::new(MemBacking::new());
    let Ok((c, _)) = Cache::open(DramRegion::from_bytes(image), home, CacheConfig::test_min())
    else {
        return;
    };
    for id in 0..3 {
        if let Some(k) = c.key_of(id) {
            let mut buf = vec![0u8; 9000];
            let _ = c.read(k, 0, &mut buf);
            let _ = c.write(k, 4000, &[7; 5000]);
            let _ = c.set_len(k, 10);
        }
    }
    let _ = c.flush_all();
}

#[test]
fn flipped_bytes_and_random_pools_never_panic() {
    let image = valid_image();
    let seed = 0x5eed_cafe;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for _ in 0..400 {
        let mut bad = image.clone();
        for _ in 0..rng.gen_range(1..8) {
            let at = rng.gen_range(0..bad.len());
            bad[at] = rng.gen();
        }
        exercise(&bad);
    }
    for _ in 0..50 {
        let len = rng.gen_range(0..POOL as usize);
        let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        exercise(&junk);
    }
    exercise(&image[..5000]);
}
