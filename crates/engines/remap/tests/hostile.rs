//! A short, seeded run of the `remap_open` fuzz target's driver (tests/common/hostile.rs):
//! journals and snapshots with flipped bytes and truncations must open with a clear error or
//! recover, never panic. Long runs: `cargo fuzz run remap_open` (docs/fuzzing.md).

mod common;

use common::hostile;

#[test]
fn hostile_journals_and_snapshots_never_panic() {
    let base = [hostile::base_image(false), hostile::base_image(true)];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..400 {
        let n = 1 + (next() % 6) as usize;
        let mut input = vec![(next() % 4) as u8];
        for _ in 0..n {
            let off = if next() % 8 == 0 {
                0x8000_0000 | (next() as u32 % 20000)
            } else {
                next() as u32 % 20000
            };
            input.extend_from_slice(&off.to_le_bytes());
            input.push((next() % 255 + 1) as u8);
        }
        hostile::run(&base, &input);
    }
}
