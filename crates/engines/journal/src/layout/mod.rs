//! The PM layout of an NJS journal (seed §3.2), little-endian throughout.
//!
//! ```text
//! offset 0              4096                 8192                  8192 + H         end
//! | superblock (4 KiB) | reserved headers   | journal headers      | journal blocks   |
//! |                    | (256 x 16 B: swap  | N x 16 B, padded to  | N x 4 KiB        |
//! |                    |  record)           | 4 KiB  (H bytes)     |                  |
//! ```
//!
//! Areas are ranges of header *positions* (u64, growing forever; header slot = position mod
//! N): checkpoint area [p_first, p_checkpoint), commit area [p_checkpoint, p_commit), free
//! area [p_commit, p_first + N). p_first_free equals p_commit (the seed's "block just after
//! p_commit").

pub mod header;
pub mod superblock;
pub mod swap_record;

pub use header::{Flags, Header};
pub use superblock::Superblock;
pub use swap_record::SwapRecord;

/// Size of a journal block and of a home block.
pub const BLOCK_LEN: u64 = 4096;
/// Format version this build writes (it reads [`VERSION_NARROW`] too).
pub const VERSION: u32 = 2;
/// The first format version: 16-bit home file ids (at most 65,535 inodes).
pub const VERSION_NARROW: u32 = 1;
/// Offset of the reserved header block (the swap record).
pub const RESERVED_OFF: u64 = 4096;
/// Offset of the first journal header.
pub const HEADERS_OFF: u64 = 8192;
/// Size of one journal header.
pub const HEADER_LEN: u64 = 16;
/// Largest journal (j_blocknr and jh_number are 24-bit fields).
pub const JOURNAL_BLOCKS_MAX: u32 = (1 << 24) - 1;
/// Smallest journal that can hold a transaction and still garbage-collect.
pub const JOURNAL_BLOCKS_MIN: u32 = 4;
/// Largest home file id (32 bits in format version 2).
pub const FILE_ID_MAX: u32 = u32::MAX;

/// How a header holds its home file id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderFormat {
    /// Format version 1: 16-bit file ids, 24-bit jh_number.
    Narrow,
    /// Format version 2: 32-bit file ids, jh_number kept mod 256.
    Wide,
}

impl HeaderFormat {
    pub fn version(self) -> u32 {
        match self {
            HeaderFormat::Narrow => VERSION_NARROW,
            HeaderFormat::Wide => VERSION,
        }
    }

    pub fn of_version(version: u32) -> Option<HeaderFormat> {
        match version {
            VERSION_NARROW => Some(HeaderFormat::Narrow),
            VERSION => Some(HeaderFormat::Wide),
            _ => None,
        }
    }

    /// Largest home file id a header of this format holds.
    pub fn file_id_max(self) -> u32 {
        match self {
            HeaderFormat::Narrow => u16::MAX as u32,
            HeaderFormat::Wide => FILE_ID_MAX,
        }
    }
}
/// Largest home block number (24-bit field: home files up to 64 GiB).
pub const HOME_BLOCK_MAX: u64 = (1 << 24) - 1;

/// A home block: a file id and a block number within the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockKey {
    pub file: u32,
    pub block: u32,
}

impl BlockKey {
    /// The key, or `None` when the block number does not fit the header's 24-bit field.
    pub fn new(file: u32, block: u64) -> Option<BlockKey> {
        (block <= HOME_BLOCK_MAX).then_some(BlockKey {
            file,
            block: block as u32,
        })
    }
}

/// Where everything is, for a journal of `blocks` journal blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    blocks: u32,
    format: HeaderFormat,
}

impl Geometry {
    /// The geometry of a journal with `blocks` journal blocks, when that is a valid count.
    pub fn new(blocks: u32) -> Option<Geometry> {
        (JOURNAL_BLOCKS_MIN..=JOURNAL_BLOCKS_MAX)
            .contains(&blocks)
            .then_some(Geometry {
                blocks,
                format: HeaderFormat::Wide,
            })
    }

    /// As [`Geometry::new`], with headers of `format`.
    pub fn with_format(blocks: u32, format: HeaderFormat) -> Option<Geometry> {
        Geometry::new(blocks).map(|g| Geometry { format, ..g })
    }

    /// How the headers hold their home file ids.
    pub fn format(&self) -> HeaderFormat {
        self.format
    }

    /// The largest journal that fits in a region of `region_len` bytes.
    pub fn fitting(region_len: u64) -> Option<Geometry> {
        let avail = region_len.checked_sub(HEADERS_OFF)?;
        // Each block costs 4 KiB plus 16 bytes of header (headers padded to a block).
        let mut n = (avail / (BLOCK_LEN + HEADER_LEN)).min(JOURNAL_BLOCKS_MAX as u64) as u32;
        while n >= JOURNAL_BLOCKS_MIN {
            let g = Geometry {
                blocks: n,
                format: HeaderFormat::Wide,
            };
            if g.region_len() <= region_len {
                return Some(g);
            }
            n -= 1;
        }
        None
    }

    /// Number of journal blocks (N).
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Bytes of the header array, padded to a whole block.
    fn headers_len(&self) -> u64 {
        (self.blocks as u64 * HEADER_LEN).div_ceil(BLOCK_LEN) * BLOCK_LEN
    }

    /// Offset of journal block 0.
    pub fn blocks_off(&self) -> u64 {
        HEADERS_OFF + self.headers_len()
    }

    /// Bytes the journal needs.
    pub fn region_len(&self) -> u64 {
        self.blocks_off() + self.blocks as u64 * BLOCK_LEN
    }

    /// Header slot of a position.
    pub fn slot(&self, pos: u64) -> u32 {
        (pos % self.blocks as u64) as u32
    }

    /// Offset of the header in `slot`.
    pub fn header_off(&self, slot: u32) -> u64 {
        assert!(slot < self.blocks, "header slot {slot} out of range");
        HEADERS_OFF + slot as u64 * HEADER_LEN
    }

    /// Offset of journal block `j_blocknr`.
    pub fn block_off(&self, j_blocknr: u32) -> u64 {
        assert!(
            j_blocknr < self.blocks,
            "journal block {j_blocknr} out of range"
        );
        self.blocks_off() + j_blocknr as u64 * BLOCK_LEN
    }
}
