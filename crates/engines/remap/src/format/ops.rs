//! The metadata operations a commit record (and the checkpoint snapshot) carries.
//!
//! ```text
//! op      tag  body (little-endian)
//! Meta     1   ino u64, kind u8, perm u32, uid u32, gid u32, size u64,
//!              atime u64, mtime u64, ctime u64, parent u64
//! AddEntry 2   dir u64, ino u64, name_len u16, name
//! DelEntry 3   dir u64, name_len u16, name
//! Data     4   ino u64, cut u64 (u64::MAX: none), pairs u32,
//!              pairs x (file_block u64, data_index u32, crc32c u32)
//! NextIno  5   next u64
//! Exchange 6   ino u64, size u64, blocks u32, blocks x (file_block u64, crc32c u32)
//! --- format 2 ---
//! Node     7   ino u64, rdev u64, target_len u16, target   (symlinks and special files)
//! Xattrs   8   ino u64, count u32, count x (name_len u16, name, value_len u32, value)
//! Holes    9   ino u64, runs u32, runs x (first_block u64, blocks u64)   (snapshot only)
//! ```
//!
//! In format 2 a `Data` pair whose `data_index` is [`HOLE_INDEX`] (crc 0) is a punched
//! block: it reads as zeros and the checkpoint punches it out of the home file. `Node`
//! follows the `Meta` of a symlink (its target; `size` is the target's length) or a special
//! file (its device number). `Xattrs` is the inode's whole attribute set (an empty one
//! removes every attribute). `Holes` lists the blocks below the size that a checkpoint
//! punched out of the home file (for `allocated`).
//!
//! `Exchange` (exchange commit, store/exchange.rs): the file's new content is the staging
//! file `files/<ino>.stage`, swapped into the home file by XFS_IOC_EXCHANGE_RANGE after the
//! record is durable; `blocks` names the blocks the commit changed with the crc32c of each
//! new block (bytes past `size` zero), by which recovery tells whether the swap happened.

use super::codec::{Reader, Writer};
use store::xattr::{XATTR_NAME_MAX, XATTR_SIZE_MAX};
use store::{Error, FileKind, Ino, Result, NAME_MAX, SYMLINK_MAX};

/// One remap pair of a commit: home block `file_block` of the file now lives in the record's
/// data block `data_index` (whose crc32c is `crc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairRef {
    pub file_block: u64,
    pub data_index: u32,
    pub crc: u32,
}

/// `PairRef::data_index` of a punched block (format 2): no data block, zeros.
pub const HOLE_INDEX: u32 = u32::MAX;

/// The persistent attributes of an inode (nlink is derived at recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaOp {
    pub ino: Ino,
    pub kind: FileKind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    pub parent: Ino,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Meta(MetaOp),
    AddEntry {
        dir: Ino,
        ino: Ino,
        name: Vec<u8>,
    },
    DelEntry {
        dir: Ino,
        name: Vec<u8>,
    },
    /// The file's blocks at or past `cut` were dropped (truncate), then `pairs` were written.
    Data {
        ino: Ino,
        cut: Option<u64>,
        pairs: Vec<PairRef>,
    },
    NextIno(Ino),
    /// The file's new content (`size` bytes) is its staging file; `blocks`: (file block,
    /// crc32c of the new block) of every block the commit changed.
    Exchange {
        ino: Ino,
        size: u64,
        blocks: Vec<(u64, u32)>,
    },
    /// A symlink's target or a special file's device number (format 2).
    Node {
        ino: Ino,
        rdev: u64,
        target: Vec<u8>,
    },
    /// The inode's whole set of extended attributes (format 2).
    Xattrs {
        ino: Ino,
        attrs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Runs (first block, blocks) punched out of the home file (format 2, snapshot only).
    Holes {
        ino: Ino,
        runs: Vec<(u64, u64)>,
    },
}

const TAG_META: u8 = 1;
const TAG_ADD: u8 = 2;
const TAG_DEL: u8 = 3;
const TAG_DATA: u8 = 4;
const TAG_NEXT: u8 = 5;
const TAG_EXCHANGE: u8 = 6;
const TAG_NODE: u8 = 7;
const TAG_XATTRS: u8 = 8;
const TAG_HOLES: u8 = 9;

fn kind_code(kind: FileKind) -> u8 {
    kind.code()
}

fn kind_of(code: u8, at: u64) -> Result<FileKind> {
    FileKind::from_code(code).ok_or_else(|| Error::Corrupt {
        what: format!("remap record: unknown inode kind {code}"),
        offset: at,
    })
}

fn put_name(w: &mut Writer, name: &[u8]) {
    assert!(
        name.len() <= NAME_MAX,
        "names are checked before they are logged"
    );
    w.u16(name.len() as u16);
    w.bytes(name);
}

fn get_name(r: &mut Reader<'_>) -> Result<Vec<u8>> {
    let at = r.offset();
    let len = r.u16()? as usize;
    if len == 0 || len > NAME_MAX {
        return Err(Error::Corrupt {
            what: format!("remap record: name length {len}"),
            offset: at,
        });
    }
    Ok(r.take(len)?.to_vec())
}

impl Op {
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Op::Meta(m) => {
                w.u8(TAG_META);
                w.u64(m.ino);
                w.u8(kind_code(m.kind));
                for v in [m.perm, m.uid, m.gid] {
                    w.u32(v);
                }
                for v in [m.size, m.atime, m.mtime, m.ctime, m.parent] {
                    w.u64(v);
                }
            }
            Op::AddEntry { dir, ino, name } => {
                w.u8(TAG_ADD);
                w.u64(*dir);
                w.u64(*ino);
                put_name(w, name);
            }
            Op::DelEntry { dir, name } => {
                w.u8(TAG_DEL);
                w.u64(*dir);
                put_name(w, name);
            }
            Op::Data { ino, cut, pairs } => {
                w.u8(TAG_DATA);
                w.u64(*ino);
                w.u64(cut.unwrap_or(u64::MAX));
                w.u32(pairs.len() as u32);
                for p in pairs {
                    w.u64(p.file_block);
                    w.u32(p.data_index);
                    w.u32(p.crc);
                }
            }
            Op::NextIno(n) => {
                w.u8(TAG_NEXT);
                w.u64(*n);
            }
            Op::Exchange { ino, size, blocks } => {
                w.u8(TAG_EXCHANGE);
                w.u64(*ino);
                w.u64(*size);
                w.u32(blocks.len() as u32);
                for &(b, crc) in blocks {
                    w.u64(b);
                    w.u32(crc);
                }
            }
            Op::Node { ino, rdev, target } => {
                assert!(target.len() <= SYMLINK_MAX, "targets are checked first");
                w.u8(TAG_NODE);
                w.u64(*ino);
                w.u64(*rdev);
                w.u16(target.len() as u16);
                w.bytes(target);
            }
            Op::Xattrs { ino, attrs } => {
                w.u8(TAG_XATTRS);
                w.u64(*ino);
                w.u32(attrs.len() as u32);
                for (name, value) in attrs {
                    assert!(
                        name.len() <= XATTR_NAME_MAX && value.len() <= XATTR_SIZE_MAX,
                        "attributes are checked first"
                    );
                    w.u16(name.len() as u16);
                    w.bytes(name);
                    w.u32(value.len() as u32);
                    w.bytes(value);
                }
            }
            Op::Holes { ino, runs } => {
                w.u8(TAG_HOLES);
                w.u64(*ino);
                w.u32(runs.len() as u32);
                for &(first, n) in runs {
                    w.u64(first);
                    w.u64(n);
                }
            }
        }
    }

    /// Whether the operation exists in `format` (format 1 stores never get the others).
    pub fn in_format(&self, format: super::Format) -> bool {
        match self {
            Op::Node { .. } | Op::Xattrs { .. } | Op::Holes { .. } => format.has_posix_records(),
            Op::Data { pairs, .. } => {
                format.has_posix_records() || pairs.iter().all(|p| p.data_index != HOLE_INDEX)
            }
            _ => true,
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Op> {
        let at = r.offset();
        match r.u8()? {
            TAG_META => {
                let ino = r.u64()?;
                let kind = kind_of(r.u8()?, at)?;
                let (perm, uid, gid) = (r.u32()?, r.u32()?, r.u32()?);
                let (size, atime, mtime, ctime, parent) =
                    (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
                Ok(Op::Meta(MetaOp {
                    ino,
                    kind,
                    perm,
                    uid,
                    gid,
                    size,
                    atime,
                    mtime,
                    ctime,
                    parent,
                }))
            }
            TAG_ADD => Ok(Op::AddEntry {
                dir: r.u64()?,
                ino: r.u64()?,
                name: get_name(r)?,
            }),
            TAG_DEL => Ok(Op::DelEntry {
                dir: r.u64()?,
                name: get_name(r)?,
            }),
            TAG_DATA => decode_data(r),
            TAG_NEXT => Ok(Op::NextIno(r.u64()?)),
            TAG_EXCHANGE => decode_exchange(r),
            TAG_NODE => decode_node(r),
            TAG_XATTRS => decode_xattrs(r),
            TAG_HOLES => decode_holes(r),
            tag => Err(Error::Corrupt {
                what: format!("remap record: unknown op tag {tag}"),
                offset: at,
            }),
        }
    }
}

fn decode_data(r: &mut Reader<'_>) -> Result<Op> {
    let ino = r.u64()?;
    let cut = r.u64()?;
    let n = r.u32()? as usize;
    let mut pairs = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        pairs.push(PairRef {
            file_block: r.u64()?,
            data_index: r.u32()?,
            crc: r.u32()?,
        });
    }
    Ok(Op::Data {
        ino,
        cut: (cut != u64::MAX).then_some(cut),
        pairs,
    })
}

fn decode_exchange(r: &mut Reader<'_>) -> Result<Op> {
    let (ino, size) = (r.u64()?, r.u64()?);
    let n = r.u32()? as usize;
    let mut blocks = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        blocks.push((r.u64()?, r.u32()?));
    }
    Ok(Op::Exchange { ino, size, blocks })
}

fn corrupt(what: String, offset: u64) -> Error {
    Error::Corrupt {
        what: format!("remap record: {what}"),
        offset,
    }
}

fn decode_node(r: &mut Reader<'_>) -> Result<Op> {
    let (ino, rdev) = (r.u64()?, r.u64()?);
    let at = r.offset();
    let len = r.u16()? as usize;
    if len > SYMLINK_MAX {
        return Err(corrupt(format!("symlink target of {len} bytes"), at));
    }
    let target = r.take(len)?.to_vec();
    Ok(Op::Node { ino, rdev, target })
}

fn decode_xattrs(r: &mut Reader<'_>) -> Result<Op> {
    let ino = r.u64()?;
    let n = r.u32()? as usize;
    let mut attrs = Vec::with_capacity(n.min(1 << 10));
    for _ in 0..n {
        let at = r.offset();
        let len = r.u16()? as usize;
        let name = r.take(len)?.to_vec();
        if store::check_xattr_name(&name).is_err() {
            return Err(corrupt(format!("attribute name of {len} bytes"), at));
        }
        let at = r.offset();
        let len = r.u32()? as usize;
        if len > XATTR_SIZE_MAX {
            return Err(corrupt(format!("attribute value of {len} bytes"), at));
        }
        attrs.push((name, r.take(len)?.to_vec()));
    }
    Ok(Op::Xattrs { ino, attrs })
}

fn decode_holes(r: &mut Reader<'_>) -> Result<Op> {
    let ino = r.u64()?;
    let n = r.u32()? as usize;
    let mut runs = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let at = r.offset();
        let (first, blocks) = (r.u64()?, r.u64()?);
        if blocks == 0 || first.checked_add(blocks).is_none_or(|e| e > MAX_BLOCKS) {
            return Err(corrupt(format!("hole run {first}+{blocks}"), at));
        }
        runs.push((first, blocks));
    }
    Ok(Op::Holes { ino, runs })
}

/// Blocks of the largest file.
const MAX_BLOCKS: u64 = super::FILE_SIZE_MAX / super::BLOCK;

/// Encode a list of operations.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut w = Writer::new();
    for op in ops {
        op.encode(&mut w);
    }
    w.into_vec()
}

/// Decode a whole payload of operations (`base`: its offset in the file, for errors).
pub fn decode_ops(payload: &[u8], base: u64) -> Result<Vec<Op>> {
    let mut r = Reader::new(payload, base);
    let mut ops = Vec::new();
    while !r.at_end() {
        ops.push(Op::decode(&mut r)?);
    }
    Ok(ops)
}
