//! Structure-aware mutations of a valid pool image: each mutation targets one known area
//! (superblock, metadata log, data log, inode table, blocks) so that a fuzzer spends its
//! time past the checksums. Shared by tests/corrupt_corpus.rs and the `pool_open` fuzz
//! target (included by path).
#![allow(dead_code)]

use pool::Geometry;

/// Bytes of one encoded mutation: op u8, offset u32, value u64.
pub const MUTATION_BYTES: usize = 13;

/// The areas a mutation can aim at.
pub fn area(geo: &Geometry, image_len: u64, which: u8) -> (u64, u64) {
    match which % 6 {
        0 => (0, 100),
        1 => (geo.meta_log_offset, geo.metadata_log_entries * 64),
        2 => (geo.data_log_offset, geo.data_log_entries * 64),
        3 => (geo.inode_offset, geo.inode_count * 128),
        4 => (
            geo.blocks_offset,
            image_len.saturating_sub(geo.blocks_offset),
        ),
        _ => (0, image_len),
    }
}

/// Re-seal the superblock checksum (bytes 96..100 = crc32c of 0..96) after editing it.
pub fn fix_superblock_crc(image: &mut [u8]) {
    if image.len() >= 100 {
        let crc = crc32c::crc32c(&image[..96]);
        image[96..100].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Apply the mutations encoded in `ops` (13 bytes each) to `image`:
/// op bits 0..2 area (see [`area`]; 6 and 7 truncate the image to `offset` bytes),
/// bits 3..4 what to do (0 xor the byte with the value's low byte, 1 set the byte,
/// 2 store the value as an aligned u32, 3 as an aligned u64).
pub fn apply(image: &mut Vec<u8>, geo: &Geometry, ops: &[u8]) {
    for op in ops.chunks_exact(MUTATION_BYTES) {
        if image.is_empty() {
            return;
        }
        let offset = u64::from(u32::from_le_bytes([op[1], op[2], op[3], op[4]]));
        let mut value = [0u8; 8];
        value.copy_from_slice(&op[5..13]);
        let which = op[0] & 7;
        if which >= 6 {
            let keep = (offset as usize) % (image.len() + 1);
            image.truncate(keep);
            continue;
        }
        let (start, len) = area(geo, image.len() as u64, which);
        if len == 0 {
            continue;
        }
        let at = (start + offset % len) as usize;
        let last = image.len() - 1;
        match (op[0] >> 3) & 3 {
            0 => image[at.min(last)] ^= value[0],
            1 => image[at.min(last)] = value[0],
            2 => {
                let at = at & !3;
                if at + 4 <= image.len() {
                    image[at..at + 4].copy_from_slice(&value[..4]);
                }
            }
            _ => {
                let at = at & !7;
                if at + 8 <= image.len() {
                    image[at..at + 8].copy_from_slice(&value);
                }
            }
        }
    }
}
