//! Optional per-block data checksums (docs/format.md, "Data checksums").
//!
//! In a pool formatted with `data_checksums`, the leaf block pointer of every file data
//! block holds the block's crc32c in its high 32 bits (`Geometry::leaf_word`). The checksum
//! therefore changes with the pointer in one 8-byte store and costs no extra cache line on
//! the read path: the read loads the pointer anyway.
//!
//! Who keeps it right:
//! - a block written whole into a hole (`hole_crc`): its crc goes into the pointer with
//!   the pointer itself, under the undo log;
//! - an in-place overwrite (NC, FG-WAL, SCSP's further writes into its shadow): the crc is
//!   updated from the old and new bytes of the range alone (`crc_after_write`), so that a
//!   corruption in the block stays detectable instead of being checksummed over (until a
//!   write replaces the whole block); the new pointer word goes through the same undo (or NC's DRAM undo) as every
//!   metadata change of the write;
//! - the checkpoint never copies into the permanent block of a checksummed pool: it merges
//!   into a pending version, computes that block's crc and swings pointer and crc in one
//!   atomic store (checkpoint/). If the old permanent block it took lines from fails its
//!   check, the mismatch is carried into the new crc (`Core::permanent_poison`).
//!
//! Directories' blocks carry no checksum (their pointers hold crc 0, never verified): they
//! change in place under the metadata undo log at every entry change.

use crate::core::Core;
use crate::media::layout::*;
use pmem::Region;
use store::{Error, Result};

/// Zeros to extend a crc over (the bytes after a range up to the end of a block).
static ZEROS: [u8; BLOCK_SIZE as usize] = [0; BLOCK_SIZE as usize];

/// crc32c of a whole block.
#[inline]
pub(crate) fn block_crc(block: &[u8]) -> u32 {
    crc32c::crc32c(block)
}

/// crc32c of a block that is zero except `chunk` at `boff` (a hole filled by a write).
pub(crate) fn hole_crc(boff: u64, chunk: &[u8]) -> u32 {
    let head = &ZEROS[..boff as usize];
    let tail = &ZEROS[..(BLOCK_SIZE - boff) as usize - chunk.len()];
    let crc = crc32c::crc32c(head);
    crc32c::crc32c_append(crc32c::crc32c_append(crc, chunk), tail)
}

/// The crc of a block after `new` replaced `old` (same length) at `boff`, from its crc
/// before. CRC is affine: for messages of one length, crc(a) ^ crc(b) is the register
/// difference of a ^ b, and the bytes after the range shift that difference as zeros do.
/// A block whose crc did not match before still does not match after (unless `new` is the
/// whole block: then its crc is simply that of `new`).
pub(crate) fn crc_after_write(crc: u32, boff: u64, old: &[u8], new: &[u8]) -> u32 {
    assert_eq!(old.len(), new.len());
    if boff == 0 && new.len() as u64 == BLOCK_SIZE {
        return block_crc(new);
    }
    let tail = (BLOCK_SIZE - boff) as usize - new.len();
    let diff = crc32c::crc32c(old) ^ crc32c::crc32c(new);
    crc ^ shift_by_zeros(diff, tail)
}

/// Operators of the shift over 2^k zero bytes, k = 0..=12, each as the images of the 32
/// unit vectors (`shift_by_zeros`).
type ShiftOps = [[u32; 32]; 13];

static SHIFT_OPS: std::sync::OnceLock<ShiftOps> = std::sync::OnceLock::new();

/// The register difference `diff` carried over `n` (< 8192) zero bytes: a linear map,
/// appending zeros to `diff` minus appending them to 0 (the affine part of
/// `crc32c_append`). Applied as the operators of the powers of two in `n` (a few hundred
/// bit operations), not by running the crc over up to 4 KB of zeros.
fn shift_by_zeros(diff: u32, n: usize) -> u32 {
    let ops = SHIFT_OPS.get_or_init(|| {
        let mut ops = [[0u32; 32]; 13];
        for (k, op) in ops.iter_mut().enumerate() {
            for (i, image) in op.iter_mut().enumerate() {
                *image = shift_slowly(1 << i, 1 << k);
            }
        }
        ops
    });
    assert!(n < 1 << ops.len());
    let mut v = diff;
    for (k, op) in ops.iter().enumerate() {
        if n & (1 << k) != 0 {
            let mut out = 0;
            let mut bits = v;
            while bits != 0 {
                out ^= op[bits.trailing_zeros() as usize];
                bits &= bits - 1;
            }
            v = out;
        }
    }
    v
}

/// `shift_by_zeros` by running the crc over the zeros (`n` <= 4096).
fn shift_slowly(diff: u32, n: usize) -> u32 {
    let zeros = &ZEROS[..n];
    crc32c::crc32c_append(diff, zeros) ^ crc32c::crc32c_append(0, zeros)
}

impl<R: Region> Core<R> {
    /// The crc32c of block `pbn` as it is now in the pool.
    pub(crate) fn crc_of_block(&self, pbn: u64) -> u32 {
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        self.region.read(self.geo.block(pbn), &mut block);
        block_crc(&block)
    }

    /// In a checksummed pool: the leaf pointer word at `ptr` after `new` replaces `old` at
    /// `boff` of the block it names (nothing written).
    pub(crate) fn word_after_write(&self, ptr: u64, boff: u64, old: &[u8], new: &[u8]) -> u64 {
        let word = self.read_u64(ptr);
        let crc = crc_after_write(self.geo.leaf_crc(word), boff, old, new);
        self.geo.leaf_word(self.pointed_pbn(ptr), crc)
    }

    /// Check permanent block `pbn` of file `ino` (logical block `lbn`, pointer at `ptr`)
    /// against the crc its pointer holds. A mismatch is one line on stderr naming the file
    /// and offset, and EIO (`Error::Io`): the bytes cannot be trusted, the pool's
    /// structures are fine.
    pub(crate) fn verify_block(&self, ino: u64, lbn: u64, pbn: u64, ptr: u64) -> Result<()> {
        let stored = self.geo.leaf_crc(self.read_u64(ptr));
        let found = self.crc_of_block(pbn);
        if stored == found {
            return Ok(());
        }
        let offset = lbn * BLOCK_SIZE;
        eprintln!(
            "atomfs: pool: data checksum mismatch in inode {ino} at offset {offset} \
             (block {pbn}: stored {stored:#010x}, found {found:#010x})"
        );
        Err(Error::Io {
            path: format!("inode {ino} offset {offset}"),
            op: "read (data checksum mismatch)",
            source: std::io::Error::from_raw_os_error(libc_eio()),
        })
    }
}

/// EIO (5 on every platform atomfs builds for; the pool crate does not link libc).
const fn libc_eio() -> i32 {
    5
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PoolConfig;
    use proptest::prelude::*;

    fn geometry(checksums: bool) -> Geometry {
        let cfg = PoolConfig::test_min().with_data_checksums(checksums);
        Geometry::plan(8 << 20, &cfg).expect("geometry")
    }

    proptest! {
        /// A leaf pointer word gives back the block and crc it was made of; block 0 (a
        /// hole) is word 0; without checksums the word is the block number.
        #[test]
        fn pointer_and_crc_round_trip(pbn in 0u64..2000, crc in any::<u32>()) {
            let geo = geometry(true);
            let pbn = pbn % geo.block_count;
            let word = geo.leaf_word(pbn, crc);
            prop_assert_eq!(geo.leaf_pbn(word, 0).ok(), Some(pbn));
            if pbn == 0 {
                prop_assert_eq!(word, 0);
            } else {
                prop_assert_eq!(geo.leaf_crc(word), crc);
            }
            let plain = geometry(false);
            prop_assert_eq!(plain.leaf_word(pbn, crc), pbn);
            prop_assert_eq!(plain.leaf_crc(pbn), 0);
        }

        /// A word with a crc but no block, or a block out of range, is corruption.
        #[test]
        fn bad_pointer_words_are_refused(crc in 1u32.., high in 0u64..1000) {
            let geo = geometry(true);
            prop_assert!(geo.leaf_pbn(u64::from(crc) << PBN_BITS, 8).is_err());
            let out = geo.block_count + high;
            prop_assert!(geo.leaf_pbn(geo.leaf_word(out, crc), 8).is_err());
        }

        /// The crc updated from a write's old and new bytes is the crc of the new block.
        #[test]
        fn crc_after_write_is_the_crc_of_the_new_block(
            seed in any::<u64>(),
            boff in 0u64..BLOCK_SIZE,
            len in 1usize..600,
        ) {
            let len = len.min((BLOCK_SIZE - boff) as usize);
            let mut block: Vec<u8> = (0..BLOCK_SIZE)
                .map(|i| (seed.rotate_left((i % 64) as u32) ^ i) as u8)
                .collect();
            let before = block_crc(&block);
            let range = boff as usize..boff as usize + len;
            let old = block[range.clone()].to_vec();
            let new: Vec<u8> = old.iter().map(|b| b.wrapping_mul(3) ^ seed as u8).collect();
            block[range].copy_from_slice(&new);
            prop_assert_eq!(crc_after_write(before, boff, &old, &new), block_crc(&block));
        }

        /// The shift by operators is the shift by running the crc over the zeros.
        #[test]
        fn shift_by_operators_matches_the_crc_over_zeros(diff in any::<u32>(), n in 0usize..=4096) {
            prop_assert_eq!(shift_by_zeros(diff, n), shift_slowly(diff, n));
        }

        /// The crc of a filled hole is the crc of the block it makes.
        #[test]
        fn hole_crc_is_the_crc_of_the_block(boff in 0u64..BLOCK_SIZE, len in 1usize..4096) {
            let len = len.min((BLOCK_SIZE - boff) as usize);
            let chunk: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let mut block = vec![0u8; BLOCK_SIZE as usize];
            block[boff as usize..boff as usize + len].copy_from_slice(&chunk);
            prop_assert_eq!(hole_crc(boff, &chunk), block_crc(&block));
        }
    }
}
