//! Regressions found by fuzzing and by the corrupted-image corpus: each file holds one
//! minimised input and, in its header, the story of the bug. Run with the normal suite
//! (`cargo test -p atomfs-pool --test regressions`). How to add one: docs/fuzzing.md.
#![allow(clippy::unwrap_used)]

#[path = "../common/hostile.rs"]
mod hostile;
#[path = "../common/images.rs"]
mod images;
#[path = "../common/mutate.rs"]
mod mutate;

mod aborted_create_with_open_handle;
mod aborted_mkdir_with_entries;
mod auto_commit_beside_open_tx;
mod block_count_overflow_getattr;
mod block_count_overflow_write;
mod hostile_txid_in_sealed_entry;
mod overlapping_undo_ranges;
mod tmpfile_released_before_its_transaction_ends;
mod uncommitted_create_changed_from_outside;
mod zero_length_write;

/// Replay a `pool_open` fuzz input (same decoding as fuzz/fuzz_targets/pool_open.rs).
/// Structure-aware inputs name offsets, and inode numbers depend on the thread that built
/// the image (images.rs): a replay may hit another inode than in the fuzzer, so a kept
/// regression re-states its change by path where that matters.
pub fn replay_pool_open(data: &[u8]) -> hostile::Outcome {
    let (&mode, rest) = data.split_first().unwrap();
    let cfg = images::image_config();
    let image = if mode & 0x80 != 0 {
        rest.to_vec()
    } else {
        let kind = images::IMAGE_KINDS[(mode & 7) as usize % images::IMAGE_KINDS.len()];
        let mut image = images::build_image(kind);
        let geo = pool::Geometry::plan(images::IMAGE_BYTES, &cfg).unwrap();
        mutate::apply(&mut image, &geo, rest);
        if mode & 0x40 != 0 {
            mutate::fix_superblock_crc(&mut image);
        }
        image
    };
    hostile::exercise(&image, &cfg)
}
