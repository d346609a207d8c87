//! Crafted pool images (the fuzz target fuzz/fuzz_targets/cache_open.rs, a short seeded run
//! here): random bytes flipped in a valid pool, and random pools, open with a clear error or
//! recover cleanly — never a panic — and a recovered pool serves reads and writes, lists its
//! namespace intents (every kind, live in the valid image) and runs fsck; random bytes as a
//! saved attribute value or an intent record decode or are refused, never a panic.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::format::intent::{Intent, IntentKind, INTENT_LEN};
use cache::format::saved_xattr::SavedXattr;
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
    let mut unit = c.begin().unwrap();
    let k = c.key_of(0).unwrap();
    c.write_in(&mut unit, k, 0, &[9; 100]).unwrap();
    for (n, kind) in [IntentKind::Created, IntentKind::Xattr]
        .into_iter()
        .enumerate()
    {
        let it = Intent {
            seq: n as u64 + 1,
            id: 3,
            ..Intent::new(
                kind,
                b"dir/a".to_vec(),
                b".atomfs-cache-trash/xattr-1".to_vec(),
            )
        };
        c.log_intent(unit.stamp(), &it).unwrap();
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
    let _ = c.live_intents();
    let _ = c.fsck();
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
    for _ in 0..2000 {
        let len = rng.gen_range(0..200);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if len >= 4 && rng.gen_bool(0.5) {
            junk[..4].copy_from_slice(b"ACXS");
        }
        let _ = SavedXattr::decode(&junk);
        let mut record = vec![0u8; INTENT_LEN as usize];
        rng.fill(&mut record[..]);
        assert!(Intent::decode(&record).is_err() || record[8] <= 9);
    }
}
