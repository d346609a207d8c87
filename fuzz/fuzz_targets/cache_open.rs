//! Fuzz target `cache_open`: hostile cache pool images through open (recovery), reads,
//! writes, a shrink and a flush. Never a panic, a hang or an out-of-range access.
//!
//! Input: byte 0 bit 7 set: the rest of the input *is* the image (tests the superblock
//! checks). Bit 6 set: the rest is decoded as a saved attribute value and as an intent
//! record. Otherwise the rest is a list of (offset u32, byte) mutations applied to a valid
//! pool with three cached files, dirty chunks, a collision and an open transaction's
//! namespace intents of the version-2 kinds (crates/engines/cache/tests/bad_input.rs runs a
//! short seeded version of this in `cargo test`). A recovered pool lists its intents and
//! runs fsck.
#![no_main]

use cache::format::intent::{Intent, IntentKind, INTENT_LEN};
use cache::format::saved_xattr::SavedXattr;
use cache::{Cache, CacheConfig, MemBacking};
use libfuzzer_sys::fuzz_target;
use pmem::{DramRegion, Region};
use std::sync::{Arc, OnceLock};

const POOL: u64 = 64 << 10;

fn base() -> &'static Vec<u8> {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        let home = Arc::new(MemBacking::new());
        let config = CacheConfig { stride_fixed: Some(1), ..CacheConfig::test_min() };
        let Ok(c) = Cache::format(DramRegion::new(POOL), home, config, b"/h") else {
            return vec![0; POOL as usize];
        };
        for id in 0..3u64 {
            if let Ok(k) = c.create_file(id, 0) {
                let _ = c.write(k, 100 * id, &vec![id as u8 + 1; 6000]);
            }
        }
        if let (Ok(mut unit), Some(k)) = (c.begin(), c.key_of(0)) {
            let _ = c.write_in(&mut unit, k, 0, &[9; 100]);
            for (n, kind) in [IntentKind::Exchanged, IntentKind::Xattr].into_iter().enumerate() {
                let it = Intent {
                    seq: n as u64 + 1,
                    id: 3,
                    ..Intent::new(kind, b"a".to_vec(), b".atomfs-cache-trash/xattr-1".to_vec())
                };
                let _ = c.log_intent(unit.stamp(), &it);
            }
        }
        let mut image = vec![0u8; POOL as usize];
        c.region().read(0, &mut image);
        image
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 0x40 != 0 {
        let _ = SavedXattr::decode(rest);
        let mut record = rest.to_vec();
        record.resize(INTENT_LEN as usize, 0);
        let _ = Intent::decode(&record);
        return;
    }
    let image = if mode & 0x80 != 0 {
        rest.to_vec()
    } else {
        let mut image = base().clone();
        for m in rest.chunks_exact(5) {
            let at = u32::from_le_bytes([m[0], m[1], m[2], m[3]]) as usize % image.len();
            image[at] = m[4];
        }
        image
    };
    let home = Arc::new(MemBacking::new());
    let Ok((c, _)) = Cache::open(DramRegion::from_bytes(&image), home, CacheConfig::test_min())
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
});
