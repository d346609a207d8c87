//! The metadata log: the namespace and inode attributes as a log of state records in the
//! metadata home file (file id 0), published by its length in the file's header block.
//!
//! ```text
//! block 0 (header, journaled):  0 magic u64 "ATFSJMET" | 8 version u32 | 12 zero u32
//!                               | 16 log_len u64 | 24 crc32c(0..24) u32
//! bytes 4096..log_len:          records, each: len u32 | crc32c(type + payload) u32
//!                               | type u8 | payload (len - 1 bytes)
//! Inode     (1): ino u64 | kind u8 | perm u32 | nlink u32 | uid u32 | gid u32 | size u64
//!                | atime u64 | mtime u64 | ctime u64 | parent u64
//! FreeInode (2): ino u64
//! Entry     (3): dir u64 | ino u64 | name_len u8 | name
//! NoEntry   (4): dir u64 | name_len u8 | name
//! Extent    (5): ino u64 | end u64
//! Home      (6): ino u64 | host_ino u64 | len u64 | mtime_ns u64 | ctime_ns u64
//! Clean     (7): (no payload)
//! Opened    (8): (no payload)
//! ```
//! A Home record names the host file of inode `ino` (its host inode number) and a length it
//! has at least; `mtime_ns` and `ctime_ns` are its modification and change times when the
//! record was written by a clean close (0 otherwise). A log whose last record is Clean was closed cleanly: nothing wrote a home
//! file after those records. An open that finds Clean logs Opened before anything can
//! write a home file (an append goes home before its commit). Open refuses a home file missing, replaced, shorter than
//! recorded, or (after a clean close) changed (see `engine/home_check.rs`).
//! An Extent record bounds the home file of `ino` (file id `ino`; 0 is this log): no
//! journaled version of it lies at or past `end`. A commit that journals a block past the
//! recorded end logs a new one (rounded up to [`EXTENT_GRAIN`]); extents never shrink and
//! outlive their inode (a freed inode's versions may still be in the journal). Open checks
//! every journaled version against them before anything is written home. A log without any
//! Extent record was written before they existed: open records them once from the journal.
//! A commit appends the records of the inodes and entries it changed and journals the header
//! with the new length, in the same journal transaction as the data: the records are
//! visible exactly when the transaction is. Replay applies them in order (each is a state,
//! not an operation, so replay is idempotent). Compaction rewrites the log as one snapshot.

use store::{FileKind, Ino, Metadata};

pub const MAGIC: u64 = u64::from_le_bytes(*b"ATFSJMET");
pub const VERSION: u32 = 1;
/// Offset of the first record.
pub const LOG_START: u64 = 4096;
/// Extents are recorded rounded up to this many bytes (fewer Extent records).
pub const EXTENT_GRAIN: u64 = 1 << 20;
/// Length of a framed Extent record.
pub const EXTENT_RECORD_LEN: u64 = 8 + 1 + 16;

/// Largest record payload (an entry with a 255-byte name is 274 bytes).
const RECORD_MAX: usize = 512;

/// One metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Inode { meta: Metadata, parent: Ino },
    FreeInode { ino: Ino },
    Entry { dir: Ino, name: Vec<u8>, ino: Ino },
    NoEntry { dir: Ino, name: Vec<u8> },
    Extent { ino: Ino, end: u64 },
    Home(HomeRecord),
    Clean,
    Opened,
}

/// What the store knows of a home file (a [`Record::Home`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HomeRecord {
    pub ino: Ino,
    pub host_ino: u64,
    pub len: u64,
    /// Modification time at a clean close; 0: not recorded.
    pub mtime_ns: u64,
    /// Change time at a clean close; 0: not recorded.
    pub ctime_ns: u64,
}

fn kind_code(k: FileKind) -> u8 {
    k.code()
}

fn kind_of(code: u8) -> Option<FileKind> {
    FileKind::from_code(code)
}

impl Record {
    /// Append the framed record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut p = Vec::with_capacity(96);
        match self {
            Record::Inode { meta, parent } => {
                p.push(1);
                p.extend_from_slice(&meta.ino.to_le_bytes());
                p.push(kind_code(meta.kind));
                for v in [meta.perm, meta.nlink, meta.uid, meta.gid] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
                for v in [meta.size, meta.atime, meta.mtime, meta.ctime, *parent] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
            }
            Record::FreeInode { ino } => {
                p.push(2);
                p.extend_from_slice(&ino.to_le_bytes());
            }
            Record::Entry { dir, name, ino } => {
                p.push(3);
                p.extend_from_slice(&dir.to_le_bytes());
                p.extend_from_slice(&ino.to_le_bytes());
                p.push(name.len() as u8);
                p.extend_from_slice(name);
            }
            Record::NoEntry { dir, name } => {
                p.push(4);
                p.extend_from_slice(&dir.to_le_bytes());
                p.push(name.len() as u8);
                p.extend_from_slice(name);
            }
            Record::Extent { ino, end } => {
                p.push(5);
                p.extend_from_slice(&ino.to_le_bytes());
                p.extend_from_slice(&end.to_le_bytes());
            }
            Record::Home(h) => {
                p.push(6);
                for v in [h.ino, h.host_ino, h.len, h.mtime_ns, h.ctime_ns] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
            }
            Record::Clean => p.push(7),
            Record::Opened => p.push(8),
        }
        assert!(
            p.len() <= RECORD_MAX,
            "metadata record of {} bytes",
            p.len()
        );
        let start = out.len();
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&pmem::crc::crc32c(&p).to_le_bytes());
        out.extend_from_slice(&p);
        let back = Record::decode(&out[start..]);
        assert!(
            matches!(back, Ok((ref r, _)) if r == self),
            "metadata record does not decode"
        );
    }

    /// Decode one framed record at the start of `b`: the record and its framed length.
    pub fn decode(b: &[u8]) -> Result<(Record, usize), String> {
        let mut r = Reader { b, at: 0 };
        let len = r.u32()? as usize;
        let crc = r.u32()?;
        if len == 0 || len > RECORD_MAX {
            return Err(format!("record length {len}"));
        }
        let p = r.take(len)?;
        if pmem::crc::crc32c(p) != crc {
            return Err("record checksum".into());
        }
        let mut q = Reader { b: p, at: 1 };
        let rec = match p[0] {
            1 => {
                let ino = q.u64()?;
                let kind = kind_of(q.u8()?).ok_or("inode kind")?;
                let (perm, nlink, uid, gid) = (q.u32()?, q.u32()?, q.u32()?, q.u32()?);
                let (size, atime, mtime, ctime, parent) =
                    (q.u64()?, q.u64()?, q.u64()?, q.u64()?, q.u64()?);
                let allocated = size.div_ceil(4096) * 4096;
                let meta = Metadata {
                    ino,
                    kind,
                    size,
                    perm,
                    nlink,
                    uid,
                    gid,
                    allocated,
                    atime,
                    mtime,
                    ctime,
                    rdev: 0,
                };
                Record::Inode { meta, parent }
            }
            2 => Record::FreeInode { ino: q.u64()? },
            3 => {
                let (dir, ino) = (q.u64()?, q.u64()?);
                let n = q.u8()? as usize;
                Record::Entry {
                    dir,
                    ino,
                    name: q.take(n)?.to_vec(),
                }
            }
            4 => {
                let dir = q.u64()?;
                let n = q.u8()? as usize;
                Record::NoEntry {
                    dir,
                    name: q.take(n)?.to_vec(),
                }
            }
            5 => Record::Extent {
                ino: q.u64()?,
                end: q.u64()?,
            },
            6 => Record::Home(HomeRecord {
                ino: q.u64()?,
                host_ino: q.u64()?,
                len: q.u64()?,
                mtime_ns: q.u64()?,
                ctime_ns: q.u64()?,
            }),
            7 => Record::Clean,
            8 => Record::Opened,
            t => return Err(format!("record type {t}")),
        };
        if q.at != p.len() {
            return Err("record length does not match its type".into());
        }
        Ok((rec, 8 + len))
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("record truncated")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(s);
        Ok(u64::from_le_bytes(w))
    }
}

/// The header block with `log_len`.
pub fn header_block(log_len: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&log_len.to_le_bytes());
    let crc = pmem::crc::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        parse_header(&b),
        Ok(Some(log_len)),
        "metadata header does not decode"
    );
    b
}

/// The log length of a header block; `None` for an all-zero block (no metadata yet).
pub fn parse_header(b: &[u8]) -> Result<Option<u64>, String> {
    if b.len() < 28 {
        return Err("metadata header truncated".into());
    }
    if b[0..28].iter().all(|&x| x == 0) {
        return Ok(None);
    }
    let mut r = Reader { b, at: 0 };
    if r.u64()? != MAGIC {
        return Err("metadata header magic".into());
    }
    let version = r.u32()?;
    let _ = r.u32()?;
    let log_len = r.u64()?;
    if r.u32()? != pmem::crc::crc32c(&b[0..24]) {
        return Err("metadata header checksum".into());
    }
    if version != VERSION {
        return Err(format!("metadata format version {version}"));
    }
    if log_len < LOG_START {
        return Err(format!("metadata log length {log_len}"));
    }
    Ok(Some(log_len))
}

/// Every record of a log.
pub fn parse_log(mut b: &[u8]) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (rec, n) = Record::decode(b)?;
        out.push(rec);
        b = &b[n..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let meta = Metadata {
            ino: 7,
            kind: FileKind::Dir,
            size: 0,
            perm: 0o755,
            nlink: 2,
            uid: 1,
            gid: 2,
            allocated: 0,
            atime: 3,
            mtime: 4,
            ctime: 5,
            rdev: 0,
        };
        let recs = vec![
            Record::Inode { meta, parent: 1 },
            Record::Entry {
                dir: 1,
                name: vec![b'x'; 255],
                ino: 7,
            },
            Record::NoEntry {
                dir: 1,
                name: b"y".to_vec(),
            },
            Record::FreeInode { ino: 9 },
            Record::Extent {
                ino: 9,
                end: EXTENT_GRAIN,
            },
            Record::Home(HomeRecord {
                ino: 9,
                host_ino: 12345,
                len: 8192,
                mtime_ns: 76,
                ctime_ns: 77,
            }),
            Record::Clean,
            Record::Opened,
        ];
        let mut b = Vec::new();
        for r in &recs {
            r.encode(&mut b);
        }
        assert_eq!(parse_log(&b), Ok(recs));
        let mut one = Vec::new();
        Record::Extent { ino: 0, end: 1 }.encode(&mut one);
        assert_eq!(one.len() as u64, EXTENT_RECORD_LEN);
        let mut bad = b.clone();
        bad[10] ^= 1;
        assert!(parse_log(&bad).is_err());
        assert!(parse_log(&b[..b.len() - 1]).is_err());
        assert_eq!(parse_header(&header_block(5000)), Ok(Some(5000)));
    }
}
