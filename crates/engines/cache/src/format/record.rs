//! A file record: one per file the cache knows (64 bytes, one cache line).
//!
//! ```text
//! 0  u64 key          0 = free record; set last at create, cleared first at delete
//! 8  u64 id           the home file's identity (inode number on the home file system)
//! 16 u64 size         the file's length (the PM copy is authoritative)
//! 24 u64 prev_size    the length before the unit `size_stamp` changed it
//! 32 u64 size_stamp   the unit that last changed the length, 0 when settled
//! 40 u64 unit_min     the smallest length that unit set
//! 48 u64 home_len     the home file's length after the cache last wrote it
//! 56 u64 home_mtime   its modification time then (ns); 0 = unsettled: the cache is changing
//!                     the home file (or has not looked at it yet), no stamp to compare
//! ```
//! Each word is written by one 8-byte store. Recovery undoes the length change of an
//! incomplete multi-chunk write (size = prev_size; idempotent). `home_len` and `home_mtime`
//! let an open see a home file changed behind the cache: settled (home_mtime ≠ 0) and the
//! home file's length or modification time now different (or the inode gone). Pools of the
//! first layout hold zeros there: unsettled, so nothing is compared until the next flush.
//!
//! Invariants (kept by `Cache`, restored by recovery): the home file is never longer than
//! `size`; no valid chunk lies wholly at or past `size`.

use pmem::Region;

/// Bytes of one record.
pub const RECORD_LEN: u64 = 64;

pub const KEY: u64 = 0;
pub const ID: u64 = 8;
pub const SIZE: u64 = 16;
pub const PREV_SIZE: u64 = 24;
pub const SIZE_STAMP: u64 = 32;
pub const UNIT_MIN: u64 = 40;
pub const HOME_LEN: u64 = 48;
pub const HOME_MTIME: u64 = 56;

/// A record as read from the pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileRecord {
    pub key: u64,
    pub id: u64,
    pub size: u64,
    pub prev_size: u64,
    pub size_stamp: u64,
    pub unit_min: u64,
    pub home_len: u64,
    pub home_mtime: u64,
}

impl FileRecord {
    pub fn read<R: Region>(region: &R, at: u64) -> Self {
        FileRecord {
            key: region.load_u64(at + KEY),
            id: region.load_u64(at + ID),
            size: region.load_u64(at + SIZE),
            prev_size: region.load_u64(at + PREV_SIZE),
            size_stamp: region.load_u64(at + SIZE_STAMP),
            unit_min: region.load_u64(at + UNIT_MIN),
            home_len: region.load_u64(at + HOME_LEN),
            home_mtime: region.load_u64(at + HOME_MTIME),
        }
    }

    /// Write a new record for a file of length `size` (its home file holds those bytes):
    /// its body first, then the key that makes it live.
    pub fn create<R: Region>(region: &R, at: u64, key: u64, id: u64, size: u64) {
        assert!(key != 0, "cache: key 0 marks a free record");
        assert_eq!(region.load_u64(at + KEY), 0, "cache: record {at:#x} in use");
        for (field, value) in [
            (ID, id),
            (SIZE, size),
            (PREV_SIZE, size),
            (SIZE_STAMP, 0),
            (UNIT_MIN, size),
            (HOME_LEN, size),
            (HOME_MTIME, 0),
        ] {
            region.store_u64(at + field, value);
        }
        // persist: the body is durable before the key makes the record live.
        region.persist(at, RECORD_LEN);
        region.store_u64(at + KEY, key);
        // persist: the record is live.
        region.persist(at + KEY, 8);
    }
}
