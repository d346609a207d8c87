//! The on-media format of a cache pool: one superblock, the unit log, the file records, the
//! tag array and the chunk array (docs/format.md, "cache").
//!
//! ```text
//! offset 0          4 KiB superblock (magic, version, geometry, crc; next-key word)
//! units_off         units_max × 8-byte unit words (open transactions)
//! intents_off       intents_max × 1 KiB namespace intent records
//! records_off       files_max × 64-byte file records
//! tags_off          2·slots × 32-byte tags (two per cache line)
//! chunks_off        2·slots × 4 KiB chunks; slot s = chunks 2s and 2s+1
//! ```
//! Every integer is little-endian and fixed-width.

pub mod geometry;
pub mod intent;
pub mod record;
pub mod saved_xattr;
pub mod superblock;
pub mod tag;

pub use geometry::Geometry;
pub use record::{FileRecord, RECORD_LEN};
pub use superblock::Superblock;
pub use tag::{Status, Tag, TAG_LEN};

/// Size of one chunk: the load/store unit to the home file system (§5.2.1).
pub const CHUNK_SIZE: u64 = 4096;
