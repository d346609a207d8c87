//! Fuzz target `pool_open`: hostile pool images through open (recovery), fsck, reads,
//! writes, a commit, an unlink, unmount and reopen (tests/common/hostile.rs). Never a
//! panic, a hang or an out-of-range access.
//!
//! Input: byte 0 chooses the mode. With bit 7 set the rest of the input *is* the image
//! (raw mode: mostly tests the superblock checks). Otherwise bits 0..2 pick one of the
//! valid images of tests/common/images.rs (fresh, files with symlinks, special files and
//! attribute chains, committed-not-checkpointed, uncommitted transaction, mid-checkpoint,
//! open FG-WAL transaction), the rest is a list of 13-byte structure-aware mutations
//! (tests/common/mutate.rs), and bit 6 re-seals the superblock checksum after them so that
//! superblock field changes get past the crc.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "../../crates/engines/pool/tests/common/hostile.rs"]
mod hostile;
#[path = "../../crates/engines/pool/tests/common/images.rs"]
mod images;
#[path = "../../crates/engines/pool/tests/common/mutate.rs"]
mod mutate;

fn bases() -> &'static Vec<Vec<u8>> {
    static BASES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    BASES.get_or_init(|| {
        images::IMAGE_KINDS
            .iter()
            .map(|&k| images::build_image(k))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let cfg = images::image_config();
    let image = if mode & 0x80 != 0 {
        rest.to_vec()
    } else {
        let bases = bases();
        let mut image = bases[(mode & 7) as usize % bases.len()].clone();
        let geo = pool::Geometry::plan(images::IMAGE_BYTES, &cfg).expect("plan");
        mutate::apply(&mut image, &geo, rest);
        if mode & 0x40 != 0 {
            mutate::fix_superblock_crc(&mut image);
        }
        image
    };
    let _ = hostile::exercise(&image, &cfg);
});
