//! On-media formats of a remap store (docs/format.md, "remap"): the journal file's header
//! block, the commit records that follow it, and the checkpoint snapshot file.
//!
//! ```text
//! pool file:     0 magic "ATFSREMP" | 8 version u32 | 12 home_len u32 | 16 store_id u64
//!                | 24 home path (home_len bytes, absolute, canonical)
//!                | 24+home_len crc32c(0..24+home_len) u32
//! journal file:  | header block | record | record | ...          (every record block-aligned)
//! header block:  0 magic "ATFSRMJL" | 8 format u32 | 12 block_len u32 | 16 store_id u64
//!                | 24 crc32c(0..24) u32
//! record:        | header blocks (header + payload, zero-padded) | data blocks |
//! record header: 0 magic "ATFSRMRC" | 8 format u32 | 12 kind u32 | 16 generation u64
//!                | 24 seq u64 | 32 payload_len u32 | 36 data_blocks u32
//!                | 40 payload_crc u32 | 44 header_crc u32 (crc32c of bytes 0..44) | 48 payload
//! snapshot file: 0 magic "ATFSRMSN" | 8 format u32 | 12 flags u32 (bit 0: copy-checkpoint) | 16 generation u64
//!                | 24 next_ino u64 | 32 payload_len u64 | 40 payload_crc u32
//!                | 44 header_crc u32 (crc32c of bytes 0..44) | 48 payload (ops)
//! ```
//!
//! Format versions ([`Format`]): the journal header names the store's format; its records
//! and snapshot carry the same number. Format 1 stores (before symbolic links, special
//! files, extended attributes and punched holes) still open and are written in format 1:
//! the calls that need format 2's records answer Unsupported there. A store of a format
//! newer than [`VERSION`] is refused with UnsupportedVersion.

pub mod codec;
pub mod ops;

use codec::{le_u32, le_u64, Writer};
use store::{Error, Result};

/// Block size of the journal and of remapping (the file systems' block).
pub const BLOCK: u64 = 4096;
/// [`BLOCK`] as a `usize`.
pub const BLOCK_USIZE: usize = BLOCK as usize;
/// Format version of the pool file.
pub const POOL_VERSION: u32 = 1;
/// Newest format of the journal, its records and the snapshot (what new stores get).
pub const VERSION: u32 = 2;
/// Oldest format still opened.
pub const VERSION_MIN: u32 = 1;

/// The on-media format of a store's journal, records and snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// Files, directories, hard links, data: no symlink targets, device numbers,
    /// extended attributes or punched holes.
    V1,
    /// Adds the `Node`, `Xattrs` and `Holes` operations and hole pairs.
    V2,
}

impl Format {
    /// The newest format (new stores).
    pub const NEWEST: Format = Format::V2;

    pub fn number(self) -> u32 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
        }
    }

    /// The format named `n`, or UnsupportedVersion naming `what`.
    pub fn from_number(n: u32, what: &str) -> Result<Format> {
        match n {
            1 => Ok(Format::V1),
            2 => Ok(Format::V2),
            _ => Err(Error::UnsupportedVersion {
                what: if n > VERSION {
                    format!(
                        "{what}: format {n} was written by a newer atomfs (this build reads \
                         formats {VERSION_MIN} to {VERSION}); open it with that version"
                    )
                } else {
                    format!("{what}: format {n} (this build reads {VERSION_MIN} to {VERSION})")
                },
                found: n,
                supported: VERSION,
            }),
        }
    }

    /// Whether the format has the records of the POSIX calls beyond files and directories.
    pub fn has_posix_records(self) -> bool {
        self >= Format::V2
    }
}
/// Magic of the pool file (what the registry probes).
pub const POOL_MAGIC: &[u8; 8] = b"ATFSREMP";
/// Magic of the journal file's header block.
pub const JOURNAL_MAGIC: &[u8; 8] = b"ATFSRMJL";
/// Longest home directory path a pool file records.
pub const HOME_LEN_MAX: usize = 4096;
/// Magic of a commit record's header.
pub const RECORD_MAGIC: &[u8; 8] = b"ATFSRMRC";
/// Magic of the snapshot file.
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"ATFSRMSN";
/// Bytes of a record header (and of the snapshot header) before the payload.
pub const HEADER_LEN: usize = 48;
/// Record kind: a commit (metadata operations and the data blocks they remap).
pub const KIND_COMMIT: u32 = 1;
/// Largest file (keeps block arithmetic in u64 safe).
pub const FILE_SIZE_MAX: u64 = 1 << 44;

/// The pool file: the store's identity and its home directory.
pub fn encode_pool(store_id: u64, home: &[u8]) -> Result<Vec<u8>> {
    if home.is_empty() || home.len() > HOME_LEN_MAX {
        return Err(Error::InvalidArgument(format!(
            "home directory path of {} bytes (1..={HOME_LEN_MAX})",
            home.len()
        )));
    }
    let mut w = Writer::new();
    w.bytes(POOL_MAGIC);
    w.u32(POOL_VERSION);
    w.u32(home.len() as u32);
    w.u64(store_id);
    w.bytes(home);
    let mut v = w.into_vec();
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_pool(&v).ok(), Some((store_id, home.to_vec())));
    Ok(v)
}

/// Check a pool file: its store id and home directory path.
pub fn decode_pool(file: &[u8]) -> Result<(u64, Vec<u8>)> {
    if file.get(..8) != Some(&POOL_MAGIC[..]) {
        return Err(Error::BadMagic("remap pool file".into()));
    }
    if file.len() < 28 {
        return Err(Error::Corrupt {
            what: format!("remap pool file: truncated ({} bytes)", file.len()),
            offset: 0,
        });
    }
    if le_u32(file, 8) != POOL_VERSION {
        return Err(Error::UnsupportedVersion {
            what: "remap pool file".into(),
            found: le_u32(file, 8),
            supported: POOL_VERSION,
        });
    }
    let len = le_u32(file, 12) as usize;
    let corrupt = |what: &str| Error::Corrupt {
        what: format!("remap pool file: {what}"),
        offset: 0,
    };
    if len == 0 || len > HOME_LEN_MAX {
        return Err(corrupt("home path length"));
    }
    let body = file.get(..24 + len).ok_or_else(|| corrupt("truncated"))?;
    if crc32c::crc32c(body) != le_u32(file, 24 + len) || file.len() < 28 + len {
        return Err(corrupt("checksum"));
    }
    Ok((
        le_u64(file, 16),
        body.get(24..).unwrap_or_default().to_vec(),
    ))
}

/// The journal file's header block of a store of format `format`.
pub fn encode_journal_header(store_id: u64, format: Format) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(JOURNAL_MAGIC);
    w.u32(format.number());
    w.u32(BLOCK as u32);
    w.u64(store_id);
    let mut v = w.into_vec();
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v.resize(BLOCK_USIZE, 0);
    v
}

/// Check a journal header block; returns the store id it names and the store's format.
pub fn check_journal_header(block: &[u8]) -> Result<(u64, Format)> {
    if block.get(..8) != Some(&JOURNAL_MAGIC[..]) {
        return Err(Error::BadMagic("remap journal".into()));
    }
    let format = Format::from_number(le_u32(block, 8), "remap journal")?;
    let crc = crc32c::crc32c(block.get(..24).unwrap_or_default());
    if le_u32(block, 24) != crc || le_u32(block, 12) != BLOCK as u32 {
        return Err(Error::Corrupt {
            what: "remap journal header (checksum or block size)".into(),
            offset: 0,
        });
    }
    Ok((le_u64(block, 16), format))
}

/// A decoded record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub format: Format,
    pub generation: u64,
    pub seq: u64,
    pub payload_len: u32,
    pub data_blocks: u32,
    pub payload_crc: u32,
}

impl RecordHeader {
    /// Blocks of header and payload.
    pub fn header_blocks(&self) -> u64 {
        (HEADER_LEN as u64 + u64::from(self.payload_len)).div_ceil(BLOCK)
    }
    /// Blocks of the whole record.
    pub fn total_blocks(&self) -> u64 {
        self.header_blocks() + u64::from(self.data_blocks)
    }
}

/// The header blocks of a record: header, payload, zero padding to a block.
pub fn encode_record_head(h: &RecordHeader, payload: &[u8]) -> Vec<u8> {
    assert_eq!(h.payload_len as usize, payload.len());
    assert_eq!(h.payload_crc, crc32c::crc32c(payload));
    let mut w = Writer::new();
    w.bytes(RECORD_MAGIC);
    w.u32(h.format.number());
    w.u32(KIND_COMMIT);
    w.u64(h.generation);
    w.u64(h.seq);
    w.u32(h.payload_len);
    w.u32(h.data_blocks);
    w.u32(h.payload_crc);
    let mut v = w.into_vec();
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v.extend_from_slice(payload);
    v.resize((h.header_blocks() * BLOCK) as usize, 0);
    // Pair assertion: what is about to be persisted decodes to what was meant.
    assert_eq!(decode_record_header(&v), Some(*h));
    v
}

/// The record header at the start of `block`, or `None` when the bytes are not a valid
/// header (wrong magic, unknown format, kind or checksum: the end of the journal).
pub fn decode_record_header(block: &[u8]) -> Option<RecordHeader> {
    if block.get(..8)? != &RECORD_MAGIC[..] {
        return None;
    }
    let format = Format::from_number(le_u32(block, 8), "record").ok()?;
    if le_u32(block, 12) != KIND_COMMIT || crc32c::crc32c(block.get(..44)?) != le_u32(block, 44) {
        return None;
    }
    Some(RecordHeader {
        format,
        generation: le_u64(block, 16),
        seq: le_u64(block, 24),
        payload_len: le_u32(block, 32),
        data_blocks: le_u32(block, 36),
        payload_crc: le_u32(block, 40),
    })
}

/// A decoded snapshot header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub format: Format,
    pub generation: u64,
    pub next_ino: u64,
    pub payload_len: u64,
    pub payload_crc: u32,
}

/// The whole snapshot file.
pub fn encode_snapshot(
    format: Format,
    generation: u64,
    next_ino: u64,
    flags: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(SNAPSHOT_MAGIC);
    w.u32(format.number());
    w.u32(flags);
    w.u64(generation);
    w.u64(next_ino);
    w.u64(payload.len() as u64);
    w.u32(crc32c::crc32c(payload));
    let mut v = w.into_vec();
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// Check a snapshot file and return its header, flags and payload.
pub fn decode_snapshot(file: &[u8]) -> Result<(SnapshotHeader, u32, &[u8])> {
    let corrupt = |what: &str| Error::Corrupt {
        what: format!("remap snapshot: {what}"),
        offset: 0,
    };
    if file.get(..8) != Some(&SNAPSHOT_MAGIC[..]) {
        return Err(Error::BadMagic("remap snapshot".into()));
    }
    let format = Format::from_number(le_u32(file, 8), "remap snapshot")?;
    let head = file.get(..44).ok_or_else(|| corrupt("truncated header"))?;
    if crc32c::crc32c(head) != le_u32(file, 44) {
        return Err(corrupt("header checksum"));
    }
    let h = SnapshotHeader {
        format,
        generation: le_u64(file, 16),
        next_ino: le_u64(file, 24),
        payload_len: le_u64(file, 32),
        payload_crc: le_u32(file, 40),
    };
    let end = (HEADER_LEN as u64)
        .checked_add(h.payload_len)
        .ok_or_else(|| corrupt("payload length"))?;
    let payload = usize::try_from(end)
        .ok()
        .and_then(|end| file.get(HEADER_LEN..end))
        .ok_or_else(|| corrupt("truncated payload"))?;
    if crc32c::crc32c(payload) != h.payload_crc {
        return Err(corrupt("payload checksum"));
    }
    Ok((h, le_u32(file, 12), payload))
}
