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
//! Node      (9): the Inode fields | rdev u64 | punched_count u8
//!                | punched_count x (first_block u64 | end_block u64) | target_len u16 | target
//! Xattr    (10): ino u64 | name_len u8 | name | value_len u32 | value
//! NoXattr  (11): ino u64 | name_len u8 | name
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
//!
//! Versions. Version 1 logs hold types 1 to 8 only. Version 2 (every new store) adds Node
//! records, written instead of an Inode record for an inode that needs more than it holds (a
//! symbolic link's target, a device's rdev, a FIFO or socket kind, punched block ranges of a
//! file), and the extended attributes (Xattr: the attribute `name` of inode `ino` is `value`;
//! NoXattr: it has none; freeing the inode drops them all). A version 1 log opens and stays
//! version 1: the calls that need the new records answer Unsupported on it (see
//! [`MetaFormat`]). A header with a version past [`VERSION`] is refused with an error naming
//! both, before any record is read.

use store::{FileKind, Ino, Metadata};

pub const MAGIC: u64 = u64::from_le_bytes(*b"ATFSJMET");
/// The newest metadata log version this build reads and writes.
pub const VERSION: u32 = 2;
/// Most punched block ranges a Node record holds (and a file keeps).
pub const PUNCHED_RANGES_MAX: usize = 16;

/// What a metadata log may hold, by its header's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaFormat {
    /// Version 1: regular files and directories, no attributes.
    V1,
    /// Version 2: also Node, Xattr and NoXattr records.
    V2,
}

impl MetaFormat {
    pub fn version(self) -> u32 {
        match self {
            MetaFormat::V1 => 1,
            MetaFormat::V2 => 2,
        }
    }

    fn of(version: u32) -> Result<MetaFormat, String> {
        match version {
            1 => Ok(MetaFormat::V1),
            2 => Ok(MetaFormat::V2),
            v if v > VERSION => Err(format!(
                "metadata log format version {v} is newer than this build reads (at most \
                 {VERSION}): open the store with a newer atomfs"
            )),
            v => Err(format!("metadata format version {v}")),
        }
    }

    /// Refuse `what` (Unsupported) on a log that cannot record it.
    pub fn require_v2(self, what: &str) -> store::Result<()> {
        match self {
            MetaFormat::V2 => Ok(()),
            MetaFormat::V1 => Err(store::Error::Unsupported(format!(
                "{what}: this store's metadata log is format version 1, which cannot record \
                 it (stores created by this build are version {VERSION})"
            ))),
        }
    }
}
/// Offset of the first record.
pub const LOG_START: u64 = 4096;
/// Extents are recorded rounded up to this many bytes (fewer Extent records).
pub const EXTENT_GRAIN: u64 = 1 << 20;
/// Length of a framed Extent record.
pub const EXTENT_RECORD_LEN: u64 = 8 + 1 + 16;

/// Largest record payload (an Xattr record with the longest name and value is 65,805
/// bytes; a Node record with the longest target 4,412).
const RECORD_MAX: usize = 66 * 1024;

/// One metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An Inode record, or a Node record when `rdev`, `target` or `punched` is not empty or
    /// the kind is neither a regular file nor a directory.
    Inode {
        meta: Metadata,
        parent: Ino,
        /// A symbolic link's target (empty for every other kind).
        target: Vec<u8>,
        /// A regular file's punched (unallocated) ranges of 4 KiB blocks, `[first, end)`.
        punched: Vec<(u64, u64)>,
    },
    FreeInode {
        ino: Ino,
    },
    Entry {
        dir: Ino,
        name: Vec<u8>,
        ino: Ino,
    },
    NoEntry {
        dir: Ino,
        name: Vec<u8>,
    },
    Extent {
        ino: Ino,
        end: u64,
    },
    Home(HomeRecord),
    Clean,
    Opened,
    Xattr {
        ino: Ino,
        name: Vec<u8>,
        value: Vec<u8>,
    },
    NoXattr {
        ino: Ino,
        name: Vec<u8>,
    },
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
            Record::Inode {
                meta,
                parent,
                target,
                punched,
            } => encode_inode(&mut p, meta, *parent, target, punched),
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
            Record::Xattr { ino, name, value } => {
                p.push(10);
                p.extend_from_slice(&ino.to_le_bytes());
                p.push(name.len() as u8);
                p.extend_from_slice(name);
                p.extend_from_slice(&(value.len() as u32).to_le_bytes());
                p.extend_from_slice(value);
            }
            Record::NoXattr { ino, name } => {
                p.push(11);
                p.extend_from_slice(&ino.to_le_bytes());
                p.push(name.len() as u8);
                p.extend_from_slice(name);
            }
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
            1 => decode_inode(&mut q, false)?,
            9 => decode_inode(&mut q, true)?,
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
            10 => {
                let ino = q.u64()?;
                let n = q.u8()? as usize;
                let name = q.take(n)?.to_vec();
                let len = q.u32()? as usize;
                Record::Xattr {
                    ino,
                    name,
                    value: q.take(len)?.to_vec(),
                }
            }
            11 => {
                let ino = q.u64()?;
                let n = q.u8()? as usize;
                Record::NoXattr {
                    ino,
                    name: q.take(n)?.to_vec(),
                }
            }
            t => return Err(format!("record type {t}")),
        };
        if q.at != p.len() {
            return Err("record length does not match its type".into());
        }
        Ok((rec, 8 + len))
    }
}

/// Whether an inode needs a Node record (an Inode record cannot hold it).
fn needs_node(meta: &Metadata, target: &[u8], punched: &[(u64, u64)]) -> bool {
    !matches!(meta.kind, FileKind::File | FileKind::Dir)
        || meta.rdev != 0
        || !target.is_empty()
        || !punched.is_empty()
}

fn encode_inode(
    p: &mut Vec<u8>,
    meta: &Metadata,
    parent: Ino,
    target: &[u8],
    punched: &[(u64, u64)],
) {
    let node = needs_node(meta, target, punched);
    p.push(if node { 9 } else { 1 });
    p.extend_from_slice(&meta.ino.to_le_bytes());
    p.push(kind_code(meta.kind));
    for v in [meta.perm, meta.nlink, meta.uid, meta.gid] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    for v in [meta.size, meta.atime, meta.mtime, meta.ctime, parent] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    if !node {
        return;
    }
    assert!(punched.len() <= PUNCHED_RANGES_MAX, "punched ranges");
    assert!(target.len() <= store::SYMLINK_MAX, "symlink target");
    p.extend_from_slice(&meta.rdev.to_le_bytes());
    p.push(punched.len() as u8);
    for &(first, end) in punched {
        p.extend_from_slice(&first.to_le_bytes());
        p.extend_from_slice(&end.to_le_bytes());
    }
    p.extend_from_slice(&(target.len() as u16).to_le_bytes());
    p.extend_from_slice(target);
}

/// An Inode (type 1) or Node (type 9, `node`) record's payload after its type byte.
fn decode_inode(q: &mut Reader<'_>, node: bool) -> Result<Record, String> {
    let ino = q.u64()?;
    let kind = kind_of(q.u8()?).ok_or("inode kind")?;
    let (perm, nlink, uid, gid) = (q.u32()?, q.u32()?, q.u32()?, q.u32()?);
    let (size, atime, mtime, ctime, parent) = (q.u64()?, q.u64()?, q.u64()?, q.u64()?, q.u64()?);
    let (mut rdev, mut punched, mut target) = (0, Vec::new(), Vec::new());
    if node {
        rdev = q.u64()?;
        let n = q.u8()? as usize;
        if n > PUNCHED_RANGES_MAX {
            return Err(format!("{n} punched ranges"));
        }
        for _ in 0..n {
            let (first, end) = (q.u64()?, q.u64()?);
            if first >= end {
                return Err(format!("punched range [{first}, {end})"));
            }
            punched.push((first, end));
        }
        let len = q.u16()? as usize;
        if len > store::SYMLINK_MAX {
            return Err(format!("symlink target of {len} bytes"));
        }
        target = q.take(len)?.to_vec();
    } else if !matches!(kind, FileKind::File | FileKind::Dir) {
        return Err(format!("{kind:?} in an Inode record"));
    }
    // As the namespace counts it: a regular file's blocks less its punched ones.
    let allocated = match kind {
        FileKind::File | FileKind::Dir => {
            let blocks = size.div_ceil(4096);
            let punched: u64 = punched
                .iter()
                .map(|&(a, b)| b.min(blocks).saturating_sub(a))
                .sum();
            (blocks - punched.min(blocks)) * 4096
        }
        _ => 0,
    };
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
        rdev,
    };
    Ok(Record::Inode {
        meta,
        parent,
        target,
        punched,
    })
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
    fn u16(&mut self) -> Result<u16, String> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
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

/// The header block of a `format` log of `log_len` bytes.
pub fn header_block(format: MetaFormat, log_len: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&format.version().to_le_bytes());
    b[16..24].copy_from_slice(&log_len.to_le_bytes());
    let crc = pmem::crc::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        parse_header(&b),
        Ok(Some((format, log_len))),
        "metadata header does not decode"
    );
    b
}

/// The format and log length of a header block; `None` for an all-zero block (no metadata
/// yet).
pub fn parse_header(b: &[u8]) -> Result<Option<(MetaFormat, u64)>, String> {
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
    let format = MetaFormat::of(version)?;
    if log_len < LOG_START {
        return Err(format!("metadata log length {log_len}"));
    }
    Ok(Some((format, log_len)))
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

/// Parse and replay a log's records (the bytes after the header) as open does: the number of
/// inodes they leave, or why open would refuse them. Never panics (the fuzz target
/// `journal_meta_log` holds it to that).
pub fn replay_log(b: &[u8], ino_max: Ino) -> Result<usize, String> {
    let records = parse_log(b)?;
    let (nodes, _) = super::namespace::replay(records, ino_max)?;
    Ok(nodes.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
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
            Record::Inode {
                meta,
                parent: 1,
                target: vec![],
                punched: vec![],
            },
            Record::Inode {
                meta: Metadata {
                    kind: FileKind::Symlink,
                    size: 4095,
                    ..meta
                },
                parent: 0,
                target: vec![b't'; 4095],
                punched: vec![],
            },
            Record::Inode {
                meta: Metadata {
                    kind: FileKind::File,
                    size: 1 << 20,
                    allocated: (256 - 2 * PUNCHED_RANGES_MAX as u64) * 4096,
                    ..meta
                },
                parent: 0,
                target: vec![],
                punched: (0..PUNCHED_RANGES_MAX as u64)
                    .map(|i| (i * 4, i * 4 + 2))
                    .collect(),
            },
            Record::Inode {
                meta: Metadata {
                    kind: FileKind::BlockDevice,
                    rdev: 0x0700,
                    ..meta
                },
                parent: 0,
                target: vec![],
                punched: vec![],
            },
            Record::Xattr {
                ino: 7,
                name: vec![b'n'; 255],
                value: vec![9; store::xattr::XATTR_SIZE_MAX],
            },
            Record::NoXattr {
                ino: 7,
                name: b"user.x".to_vec(),
            },
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
        assert_eq!(
            parse_header(&header_block(MetaFormat::V2, 5000)),
            Ok(Some((MetaFormat::V2, 5000)))
        );
        assert_eq!(
            parse_header(&header_block(MetaFormat::V1, 5000)),
            Ok(Some((MetaFormat::V1, 5000)))
        );
    }

    /// A version past this build's is refused by name; an Inode record never holds the
    /// new kinds (an older build would misread them).
    #[test]
    fn newer_versions_and_old_records_refused() {
        let mut b = header_block(MetaFormat::V2, 5000);
        b[8..12].copy_from_slice(&3u32.to_le_bytes());
        let crc = pmem::crc::crc32c(&b[0..24]);
        b[24..28].copy_from_slice(&crc.to_le_bytes());
        let e = parse_header(&b).unwrap_err();
        assert!(e.contains("version 3 is newer"), "{e}");
        let meta = Metadata {
            ino: 3,
            kind: FileKind::Fifo,
            size: 0,
            perm: 0o600,
            nlink: 1,
            uid: 0,
            gid: 0,
            allocated: 0,
            atime: 0,
            mtime: 0,
            ctime: 0,
            rdev: 0,
        };
        let mut one = Vec::new();
        Record::Inode {
            meta,
            parent: 0,
            target: vec![],
            punched: vec![],
        }
        .encode(&mut one);
        assert_eq!(one[8], 9, "a FIFO needs a Node record");
        one[8] = 1;
        let crc = pmem::crc::crc32c(&one[8..]);
        one[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(Record::decode(&one).is_err());
    }

    /// Arbitrary bytes never panic the parser.
    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut good = Vec::new();
        Record::Xattr {
            ino: 1,
            name: b"user.a".to_vec(),
            value: b"v".to_vec(),
        }
        .encode(&mut good);
        for round in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = good.clone();
            let at = (seed as usize) % b.len();
            b[at] ^= (seed >> 32) as u8 | 1;
            if round % 2 == 0 {
                // Re-seal the checksum so that the payload parser sees the damage.
                let crc = pmem::crc::crc32c(&b[8..]);
                b[4..8].copy_from_slice(&crc.to_le_bytes());
            }
            let _ = parse_log(&b);
            let _ = parse_log(&b[..at]);
        }
    }

    /// Damaged logs of every record type replay to an error or a tree, never a panic.
    #[test]
    fn damaged_logs_replay_without_panics() {
        let root = super::super::namespace::root_node();
        let mut log = Vec::new();
        super::super::namespace::inode_record(&root).encode(&mut log);
        let mut link = super::super::namespace::Node::new(2, FileKind::Symlink, 0o777, 1);
        link.meta.size = 3;
        link.body = super::super::namespace::Body::Symlink {
            target: b"abc".to_vec(),
        };
        super::super::namespace::inode_record(&link).encode(&mut log);
        for r in [
            Record::Entry {
                dir: 1,
                name: b"l".to_vec(),
                ino: 2,
            },
            Record::Xattr {
                ino: 2,
                name: b"user.a".to_vec(),
                value: b"v".to_vec(),
            },
            Record::NoXattr {
                ino: 2,
                name: b"user.b".to_vec(),
            },
        ] {
            r.encode(&mut log);
        }
        assert_eq!(replay_log(&log, 100), Ok(2));
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = log.clone();
            let at = (seed as usize) % b.len();
            b[at] ^= (seed >> 32) as u8 | 1;
            // Re-seal every record's checksum so that the payload parser and replay see it.
            let mut off = 0;
            while off + 8 <= b.len() {
                let len = u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) as usize;
                if len == 0 || off + 8 + len > b.len() {
                    break;
                }
                let crc = pmem::crc::crc32c(&b[off + 8..off + 8 + len]);
                b[off + 4..off + 8].copy_from_slice(&crc.to_le_bytes());
                off += 8 + len;
            }
            let _ = replay_log(&b, 100);
        }
    }
}
