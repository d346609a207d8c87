//! On-media formats of the log pool (little-endian, fixed-width; see docs/format.md "mmio").
//!
//! ```text
//! log pool
//! +-----------------+------------------------+-------------------+---------------------+---------+
//! | superblock 4096 | file metadata          | transaction       | index entries       | log     |
//! |                 | files_max x 64         | records tx_max x  | index_entries_max   | area    |
//! |                 |                        | 256               | x 64                | (aligned|
//! |                 |                        |                   |                     | entries)|
//! +-----------------+------------------------+-------------------+---------------------+---------+
//! (intent records, intents_max x 512, sit between the index entries and the log area)
//!
//! superblock (first 128 bytes used)
//!  0 magic u64 "ATFSMMIO"      8 version u32        12 checksum u32 (crc32c of 16..128)
//! 16 store_id u64             24 pool_len u64      32 files_max u32   36 index_entries_max u32
//! 40 tx_records_max u32       44 block_size u32    48 log_entry_max u64
//! 56 file_meta_off u64        64 tx_off u64        72 index_off u64   80 log_off u64
//! 88 log_len u64             96 intent_off u64    104 intents_max u32   108..128 zero
//!
//! per-file metadata (64 bytes)
//!  0 epoch u64 (the commit word: one 8-byte store commits the file's epoch)
//!  8 header u64 (bits 0..32 FILE_MAGIC when in use, 0 when free; bits 32..40 policy)
//! 16 media_id u64   24 store_id u64   32 committed_size u64   40 pending_size u64
//! 48 pending_epoch u64 (NO_EPOCH when none)   56 checksum u32 (media_id, store_id, slot)  60 pad
//!
//! index entry (64 bytes)
//!  0 epoch u64 (0 = free; written last: the entry's valid flag)
//!  8 file_slot u32  12 policy u8  13 order u8  14 pad u16
//! 16 file_off u64 (dest: file offset of the block)   24 log_off u64 (pool offset of the data)
//! 32 delta u64 (low 32 bits: chunk offset in the block, high 32: chunk length; one atomic word)
//! 40 checksum u32 (crc32c of bytes 8..32 and the epoch)   44..64 zero
//!
//! home record (in the superblock's page, at HOME_RECORD_OFF = 1024; written and persisted
//! before the superblock when the store is created through its pool file path)
//!  0 magic u64 "ATFSHOME"   8 len u32 (bytes of the path)   12 checksum u32 (crc32c of the
//! path)   16 path (the home directory, canonical and absolute, len bytes, at most
//! HOME_PATH_MAX)
//!
//! transaction record (256 bytes)
//!  0 state u64 (0 free, TX_COMMITTED: the commit word)  8 count u32  12 checksum u32
//! 16 txid u64   24 files[14] { slot u32, pad u32, target_epoch u64 }   248..256 zero
//! ```

use crate::{MmioError, MmioResult};
use pmem::Region;

pub const SUPERBLOCK_LEN: u64 = 4096;
pub const MAGIC: u64 = u64::from_le_bytes(*b"ATFSMMIO");
pub const VERSION: u32 = 1;
pub const BLOCK_SIZE: u64 = 4096;
pub const FILE_META_LEN: u64 = 64;
pub const INDEX_ENTRY_LEN: u64 = 64;
pub const TX_RECORD_LEN: u64 = 256;
pub const TX_FILES_MAX: usize = 14;
pub const FILE_MAGIC: u64 = 0x4C49_464D; // "MFIL"
pub const NO_EPOCH: u64 = u64::MAX;
pub const TX_COMMITTED: u64 = u64::from_le_bytes(*b"COMMITTD");

/// Where the home record sits in the superblock's page.
pub const HOME_RECORD_OFF: u64 = 1024;
pub const HOME_MAGIC: u64 = u64::from_le_bytes(*b"ATFSHOME");
/// Longest home directory path a pool file records.
pub const HOME_PATH_MAX: usize = (SUPERBLOCK_LEN - HOME_RECORD_OFF) as usize - 16;

const _: () = assert!(HOME_RECORD_OFF >= 128 && HOME_PATH_MAX >= 2048);

/// The home record for `path`: [`HOME_RECORD_OFF`]'s bytes.
pub fn encode_home(path: &[u8]) -> MmioResult<Vec<u8>> {
    if path.is_empty() || path.len() > HOME_PATH_MAX || path.contains(&0) {
        return Err(MmioError::Config(format!(
            "home directory path of {} bytes: it must be 1..={HOME_PATH_MAX} bytes without NUL",
            path.len()
        )));
    }
    let mut b = Vec::with_capacity(16 + path.len());
    b.extend_from_slice(&HOME_MAGIC.to_le_bytes());
    b.extend_from_slice(&(path.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc32c::crc32c(path).to_le_bytes());
    b.extend_from_slice(path);
    let decoded = decode_home(&b)?;
    assert_eq!(
        decoded.as_deref(),
        Some(path),
        "home record does not decode"
    );
    Ok(b)
}

/// Decode a home record (`None`: no record, as in a store created over its media directly).
pub fn decode_home(b: &[u8]) -> MmioResult<Option<Vec<u8>>> {
    if b.len() < 16 || get_u64(b, 0) != HOME_MAGIC {
        return Ok(None);
    }
    let len = get_u32(b, 8) as usize;
    let path = b
        .get(16..16usize.saturating_add(len))
        .filter(|_| len > 0 && len <= HOME_PATH_MAX)
        .ok_or_else(|| MmioError::corrupt("home record length out of range", HOME_RECORD_OFF))?;
    if get_u32(b, 12) != crc32c::crc32c(path) || path.contains(&0) {
        return Err(MmioError::corrupt(
            "home record checksum mismatch",
            HOME_RECORD_OFF,
        ));
    }
    Ok(Some(path.to_vec()))
}

const _: () = assert!(24 + TX_FILES_MAX as u64 * 16 <= TX_RECORD_LEN);
const _: () = assert!(FILE_META_LEN == 64 && INDEX_ENTRY_LEN == 64);

/// Logging policy of an index entry (and of a file for its current epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The log entry holds the old bytes; the new bytes are written home in place.
    Undo = 1,
    /// The log entry holds the new bytes; home is updated at checkpoint.
    Redo = 2,
}

impl Policy {
    pub fn from_u8(v: u8) -> Option<Policy> {
        match v {
            1 => Some(Policy::Undo),
            2 => Some(Policy::Redo),
            _ => None,
        }
    }
}

/// The superblock's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub store_id: u64,
    pub pool_len: u64,
    pub files_max: u32,
    pub index_entries_max: u32,
    pub tx_records_max: u32,
    pub log_entry_max: u64,
    pub file_meta_off: u64,
    pub tx_off: u64,
    pub index_off: u64,
    pub log_off: u64,
    pub log_len: u64,
    pub intent_off: u64,
    pub intents_max: u32,
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}
fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

impl Superblock {
    /// Compute the layout of a pool of `pool_len` bytes.
    pub fn plan(
        store_id: u64,
        pool_len: u64,
        files_max: u32,
        index_entries_max: u32,
        tx_records_max: u32,
        log_entry_max: u64,
        intents_max: u32,
    ) -> MmioResult<Superblock> {
        let file_meta_off = SUPERBLOCK_LEN;
        let tx_off = file_meta_off + files_max as u64 * FILE_META_LEN;
        let index_off = tx_off + tx_records_max as u64 * TX_RECORD_LEN;
        let intent_off = index_off + index_entries_max as u64 * INDEX_ENTRY_LEN;
        let index_end = intent_off + intents_max as u64 * crate::log::intent::INTENT_LEN;
        let log_off = index_end.div_ceil(log_entry_max) * log_entry_max;
        let log_len = pool_len.saturating_sub(log_off) / log_entry_max * log_entry_max;
        if log_len == 0 {
            return Err(MmioError::Config(format!(
                "log pool of {pool_len} bytes leaves no room for one {log_entry_max}-byte log entry after {log_off} bytes of metadata"
            )));
        }
        Ok(Superblock {
            store_id,
            pool_len,
            files_max,
            index_entries_max,
            tx_records_max,
            log_entry_max,
            file_meta_off,
            tx_off,
            index_off,
            log_off,
            log_len,
            intent_off,
            intents_max,
        })
    }

    pub fn encode(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        put_u64(&mut b, 0, MAGIC);
        put_u32(&mut b, 8, VERSION);
        put_u64(&mut b, 16, self.store_id);
        put_u64(&mut b, 24, self.pool_len);
        put_u32(&mut b, 32, self.files_max);
        put_u32(&mut b, 36, self.index_entries_max);
        put_u32(&mut b, 40, self.tx_records_max);
        put_u32(&mut b, 44, BLOCK_SIZE as u32);
        put_u64(&mut b, 48, self.log_entry_max);
        put_u64(&mut b, 56, self.file_meta_off);
        put_u64(&mut b, 64, self.tx_off);
        put_u64(&mut b, 72, self.index_off);
        put_u64(&mut b, 80, self.log_off);
        put_u64(&mut b, 88, self.log_len);
        put_u64(&mut b, 96, self.intent_off);
        put_u32(&mut b, 104, self.intents_max);
        let crc = crc32c::crc32c(&b[16..128]);
        put_u32(&mut b, 12, crc);
        b
    }

    /// Decode and validate a superblock read from a pool of `region_len` bytes.
    pub fn decode(b: &[u8; 128], region_len: u64) -> MmioResult<Superblock> {
        if get_u64(b, 0) != MAGIC {
            return Err(MmioError::BadMagic);
        }
        let version = get_u32(b, 8);
        if version != VERSION {
            return Err(MmioError::Version(version));
        }
        if get_u32(b, 12) != crc32c::crc32c(&b[16..128]) {
            return Err(MmioError::corrupt("superblock checksum mismatch", 0));
        }
        let sb = Superblock {
            store_id: get_u64(b, 16),
            pool_len: get_u64(b, 24),
            files_max: get_u32(b, 32),
            index_entries_max: get_u32(b, 36),
            tx_records_max: get_u32(b, 40),
            log_entry_max: get_u64(b, 48),
            file_meta_off: get_u64(b, 56),
            tx_off: get_u64(b, 64),
            index_off: get_u64(b, 72),
            log_off: get_u64(b, 80),
            log_len: get_u64(b, 88),
            intent_off: get_u64(b, 96),
            intents_max: get_u32(b, 104),
        };
        let valid_entry_max = sb.log_entry_max >= BLOCK_SIZE
            && sb.log_entry_max.is_power_of_two()
            && sb.log_entry_max <= 1 << 30;
        let expect = if valid_entry_max {
            Superblock::plan(
                sb.store_id,
                sb.pool_len,
                sb.files_max,
                sb.index_entries_max,
                sb.tx_records_max,
                sb.log_entry_max,
                sb.intents_max,
            )
            .ok()
        } else {
            None
        };
        if get_u32(b, 44) as u64 != BLOCK_SIZE || expect != Some(sb) || sb.pool_len > region_len {
            return Err(MmioError::corrupt(
                "superblock geometry inconsistent with the pool",
                0,
            ));
        }
        Ok(sb)
    }

    pub fn file_meta_at(&self, slot: u32) -> u64 {
        self.file_meta_off + slot as u64 * FILE_META_LEN
    }
    pub fn index_at(&self, idx: u32) -> u64 {
        self.index_off + idx as u64 * INDEX_ENTRY_LEN
    }
    pub fn tx_at(&self, idx: u32) -> u64 {
        self.tx_off + idx as u64 * TX_RECORD_LEN
    }
    pub fn intent_at(&self, idx: u32) -> u64 {
        self.intent_off + idx as u64 * crate::log::intent::INTENT_LEN
    }
    /// End of the metadata areas (everything zeroed at format).
    pub fn metadata_end(&self) -> u64 {
        self.intent_off + self.intents_max as u64 * crate::log::intent::INTENT_LEN
    }
    /// Largest log entry order (entry size = BLOCK_SIZE << order).
    pub fn order_max(&self) -> u8 {
        (self.log_entry_max / BLOCK_SIZE).trailing_zeros() as u8
    }
}

/// Per-file metadata as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub epoch: u64,
    pub in_use: bool,
    pub policy: Option<Policy>,
    pub media_id: u64,
    pub store_id: u64,
    pub committed_size: u64,
    pub pending_size: u64,
    pub pending_epoch: u64,
    pub checksum_ok: bool,
}

pub mod fm {
    //! Byte offsets of the per-file metadata fields.
    pub const EPOCH: u64 = 0;
    pub const HEADER: u64 = 8;
    pub const MEDIA_ID: u64 = 16;
    pub const STORE_ID: u64 = 24;
    pub const COMMITTED_SIZE: u64 = 32;
    pub const PENDING_SIZE: u64 = 40;
    pub const PENDING_EPOCH: u64 = 48;
    pub const CHECKSUM: u64 = 56;
}

pub fn file_meta_checksum(media_id: u64, store_id: u64, slot: u32) -> u32 {
    let mut b = [0u8; 20];
    put_u64(&mut b, 0, media_id);
    put_u64(&mut b, 8, store_id);
    put_u32(&mut b, 16, slot);
    crc32c::crc32c(&b)
}

pub fn file_header(policy: Policy) -> u64 {
    FILE_MAGIC | ((policy as u64) << 32)
}

pub fn read_file_meta<R: Region + ?Sized>(r: &R, sb: &Superblock, slot: u32) -> FileMeta {
    let at = sb.file_meta_at(slot);
    let mut b = [0u8; 64];
    r.read(at, &mut b);
    let header = get_u64(&b, 8);
    let media_id = get_u64(&b, 16);
    let store_id = get_u64(&b, 24);
    FileMeta {
        epoch: get_u64(&b, 0),
        in_use: header & 0xFFFF_FFFF == FILE_MAGIC,
        policy: Policy::from_u8((header >> 32) as u8),
        media_id,
        store_id,
        committed_size: get_u64(&b, 32),
        pending_size: get_u64(&b, 40),
        pending_epoch: get_u64(&b, 48),
        checksum_ok: get_u32(&b, 56) == file_meta_checksum(media_id, store_id, slot),
    }
}

/// An index entry as stored (the persistent half of a log entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub epoch: u64,
    pub file_slot: u32,
    pub policy: Policy,
    pub order: u8,
    pub file_off: u64,
    pub log_off: u64,
    pub delta_off: u32,
    pub delta_len: u32,
}

pub mod ie {
    //! Byte offsets of the index entry fields.
    pub const EPOCH: u64 = 0;
    pub const DELTA: u64 = 32;
}

pub fn pack_delta(off: u32, len: u32) -> u64 {
    off as u64 | ((len as u64) << 32)
}

impl IndexEntry {
    /// Encode everything but the epoch word (bytes 8..64); the checksum covers the epoch.
    pub fn encode_body(&self) -> [u8; 56] {
        let b = self.encode_whole();
        let mut out = [0u8; 56];
        out.copy_from_slice(&b[8..64]);
        out
    }

    /// The whole 64-byte entry: the epoch word, then [`encode_body`](Self::encode_body).
    fn encode_whole(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        put_u64(&mut b, 0, self.epoch);
        put_u32(&mut b, 8, self.file_slot);
        b[12] = self.policy as u8;
        b[13] = self.order;
        put_u64(&mut b, 16, self.file_off);
        put_u64(&mut b, 24, self.log_off);
        put_u64(&mut b, 32, pack_delta(self.delta_off, self.delta_len));
        let crc = Self::checksum(&b, self.epoch);
        put_u32(&mut b, 40, crc);
        b
    }

    /// [`encode_body`](Self::encode_body), checked before it is stored: the entry is one a
    /// writer may publish (a valid epoch, a slot, a log entry inside the log area and aligned
    /// to its size, a chunk inside the entry), and its bytes decode back to it.
    pub fn encode_checked(&self, sb: &Superblock) -> [u8; 56] {
        let size = BLOCK_SIZE << self.order;
        // Sizes are powers of two: alignment is a mask test (a division costs more than all
        // the other checks together).
        let misaligned = |x: u64| x & (size - 1) != 0;
        assert!(
            self.epoch != 0 && self.epoch != NO_EPOCH,
            "index entry epoch {}",
            self.epoch
        );
        assert!(self.file_slot < sb.files_max && self.order <= sb.order_max());
        assert!(
            self.log_off >= sb.log_off
                && self.log_off + size <= sb.log_off + sb.log_len
                && !misaligned(self.log_off - sb.log_off),
            "log entry at {:#x} of {size} bytes outside the log area or misaligned",
            self.log_off
        );
        assert!(!misaligned(self.file_off));
        assert!(self.delta_off as u64 + self.delta_len as u64 <= size);
        let whole = self.encode_whole();
        // The fields read back as recovery reads them (the checksum was computed over these
        // very bytes a moment ago: recomputing it would double the cost of this check).
        let back = IndexEntry::fields(&whole, self.epoch);
        assert!(
            back.as_ref() == Some(self),
            "index entry does not decode to itself: {self:?}"
        );
        let mut body = [0u8; 56];
        body.copy_from_slice(&whole[8..]);
        body
    }

    fn checksum(b: &[u8; 64], epoch: u64) -> u32 {
        let c = crc32c::crc32c(&b[8..32]);
        crc32c::crc32c_append(c, &epoch.to_le_bytes())
    }

    /// Decode a valid (epoch != 0) entry; `None` when free; an error when corrupt.
    pub fn decode(b: &[u8; 64], at: u64) -> MmioResult<Option<IndexEntry>> {
        let epoch = get_u64(b, 0);
        if epoch == 0 {
            return Ok(None);
        }
        if get_u32(b, 40) != Self::checksum(b, epoch) {
            return Err(MmioError::corrupt("index entry checksum mismatch", at));
        }
        Self::fields(b, epoch)
            .map(Some)
            .ok_or_else(|| MmioError::corrupt("index entry with unknown policy", at))
    }

    /// The fields of an entry whose checksum is known to match.
    #[inline]
    fn fields(b: &[u8; 64], epoch: u64) -> Option<IndexEntry> {
        let policy = Policy::from_u8(b[12])?;
        let delta = get_u64(b, 32);
        Some(IndexEntry {
            epoch,
            file_slot: get_u32(b, 8),
            policy,
            order: b[13],
            file_off: get_u64(b, 16),
            log_off: get_u64(b, 24),
            delta_off: delta as u32,
            delta_len: (delta >> 32) as u32,
        })
    }
}

/// A transaction record's file list entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFile {
    pub slot: u32,
    pub target_epoch: u64,
}

/// Bytes 8..256 of a transaction record listing `files` (at most [`TX_FILES_MAX`]), checked
/// before it is stored: the whole record, once committed, decodes back to `(txid, files)`.
pub fn encode_tx_body(txid: u64, files: &[TxFile]) -> Vec<u8> {
    assert!(
        files.len() <= TX_FILES_MAX,
        "{} files in one record",
        files.len()
    );
    let b = encode_tx_body_unchecked(txid, files);
    let mut whole = TX_COMMITTED.to_le_bytes().to_vec();
    whole.extend_from_slice(&b);
    let back = decode_tx(&whole, 0);
    assert!(
        matches!(back, Ok(Some((t, ref f))) if t == txid && f == files),
        "transaction record does not decode to itself"
    );
    b
}

fn encode_tx_body_unchecked(txid: u64, files: &[TxFile]) -> Vec<u8> {
    let mut b = vec![0u8; (TX_RECORD_LEN - 8) as usize];
    put_u32(&mut b, 0, files.len() as u32);
    put_u64(&mut b, 8, txid);
    for (i, f) in files.iter().enumerate() {
        put_u32(&mut b, 16 + i * 16, f.slot);
        put_u64(&mut b, 16 + i * 16 + 8, f.target_epoch);
    }
    let crc = crc32c::crc32c(&b[8..16 + files.len() * 16]);
    put_u32(&mut b, 4, crc);
    b
}

/// Decode a committed transaction record: (txid, file list); `None` when not committed.
pub fn decode_tx(b: &[u8], at: u64) -> MmioResult<Option<(u64, Vec<TxFile>)>> {
    if get_u64(b, 0) != TX_COMMITTED {
        return Ok(None);
    }
    let count = get_u32(b, 8) as usize;
    if count > TX_FILES_MAX || get_u32(b, 12) != crc32c::crc32c(&b[16..24 + count * 16]) {
        return Err(MmioError::corrupt(
            "committed transaction record is corrupt",
            at,
        ));
    }
    let files = (0..count)
        .map(|i| TxFile {
            slot: get_u32(b, 24 + i * 16),
            target_epoch: get_u64(b, 24 + i * 16 + 8),
        })
        .collect();
    Ok(Some((get_u64(b, 16), files)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> Superblock {
        Superblock::plan(1, 1 << 20, 4, 16, 2, 16 << 10, 4).expect("plan")
    }

    fn entry(sb: &Superblock) -> IndexEntry {
        IndexEntry {
            epoch: 3,
            file_slot: 1,
            policy: Policy::Redo,
            order: 1,
            file_off: 8192,
            log_off: sb.log_off + 8192,
            delta_off: 100,
            delta_len: 200,
        }
    }

    #[test]
    fn a_valid_entry_encodes_and_decodes_to_itself() {
        let sb = sb();
        let e = entry(&sb);
        let mut whole = [0u8; 64];
        whole[..8].copy_from_slice(&e.epoch.to_le_bytes());
        whole[8..].copy_from_slice(&e.encode_checked(&sb));
        assert_eq!(IndexEntry::decode(&whole, 0).ok().flatten(), Some(e));
    }

    #[test]
    #[should_panic(expected = "outside the log area or misaligned")]
    fn an_entry_outside_the_log_area_is_never_encoded() {
        let sb = sb();
        let e = IndexEntry {
            log_off: sb.log_off + sb.log_len,
            ..entry(&sb)
        };
        e.encode_checked(&sb);
    }

    #[test]
    #[should_panic(expected = "index entry epoch")]
    fn an_entry_with_the_free_epoch_is_never_encoded() {
        let sb = sb();
        IndexEntry {
            epoch: 0,
            ..entry(&sb)
        }
        .encode_checked(&sb);
    }

    #[test]
    fn a_transaction_record_decodes_to_what_was_encoded() {
        let files = [TxFile {
            slot: 2,
            target_epoch: 9,
        }; TX_FILES_MAX];
        let mut whole = TX_COMMITTED.to_le_bytes().to_vec();
        whole.extend_from_slice(&encode_tx_body(5, &files));
        let (txid, back) = decode_tx(&whole, 0).ok().flatten().expect("committed");
        assert_eq!((txid, back.as_slice()), (5, &files[..]));
    }

    #[test]
    #[should_panic(expected = "files in one record")]
    fn a_transaction_record_never_lists_more_files_than_it_holds() {
        let files = [TxFile {
            slot: 0,
            target_epoch: 1,
        }; TX_FILES_MAX + 1];
        encode_tx_body(1, &files);
    }
}
