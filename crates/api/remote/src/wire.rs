//! The byte encoding of the protocol's values: little-endian integers, length-prefixed byte
//! strings, and the Store API's types. Decoding never trusts a length: every read is checked
//! against what is left, so a malformed frame is an error, never a panic or an overread.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use store::{
    DirEntry, Error, Fallocate, FileKind, FsckProblem, FsckReport, Limit, Metadata, OpenFlags,
    RenameMode, Result, SetAttr, StatFs, XattrSet,
};

/// Longest byte string a frame may carry (a read or write inline, a directory listing).
pub(crate) const BYTES_MAX: usize = 64 << 20;

/// An encoder: appends values to a frame body.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        // A length above u32 cannot be framed: callers keep byte strings under BYTES_MAX.
        assert!(
            v.len() <= BYTES_MAX,
            "byte string of {} bytes in a frame",
            v.len()
        );
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    pub(crate) fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(x) => self.u8(1).u64(x),
            None => self.u8(0),
        }
    }
    pub(crate) fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        self.opt_u64(v.map(u64::from))
    }
    pub(crate) fn u64s(&mut self, v: &[u64]) -> &mut Self {
        self.u32(v.len() as u32);
        for x in v {
            self.u64(*x);
        }
        self
    }
    pub(crate) fn kind(&mut self, k: FileKind) -> &mut Self {
        self.u8(k.code())
    }
    pub(crate) fn flags(&mut self, f: OpenFlags) -> &mut Self {
        self.bool(f.read)
            .bool(f.write)
            .bool(f.append)
            .bool(f.atomic)
    }
    pub(crate) fn rename_mode(&mut self, m: RenameMode) -> &mut Self {
        self.u8(match m {
            RenameMode::Replace => 0,
            RenameMode::NoReplace => 1,
            RenameMode::Exchange => 2,
        })
    }
    pub(crate) fn xattr_set(&mut self, how: XattrSet) -> &mut Self {
        self.u8(match how {
            XattrSet::Either => 0,
            XattrSet::Create => 1,
            XattrSet::Replace => 2,
        })
    }
    /// A fallocate operation: a code (1 allocate, 2 punch hole, 3 zero range), then
    /// keep_size for the two that have it.
    pub(crate) fn fallocate(&mut self, op: Fallocate) -> &mut Self {
        match op {
            Fallocate::Allocate { keep_size } => self.u8(1).bool(keep_size),
            Fallocate::PunchHole => self.u8(2),
            Fallocate::ZeroRange { keep_size } => self.u8(3).bool(keep_size),
        }
    }
    /// A list of byte strings (attribute names).
    pub(crate) fn byte_list(&mut self, v: &[Vec<u8>]) -> &mut Self {
        self.u32(v.len() as u32);
        for b in v {
            self.bytes(b);
        }
        self
    }
    pub(crate) fn meta(&mut self, m: &Metadata) -> &mut Self {
        self.u64(m.ino)
            .kind(m.kind)
            .u64(m.size)
            .u32(m.perm)
            .u32(m.nlink);
        self.u32(m.uid).u32(m.gid).u64(m.allocated);
        self.u64(m.atime).u64(m.mtime).u64(m.ctime).u64(m.rdev)
    }
    pub(crate) fn setattr(&mut self, a: &SetAttr) -> &mut Self {
        self.opt_u32(a.perm).opt_u32(a.uid).opt_u32(a.gid);
        self.opt_u64(a.atime).opt_u64(a.mtime)
    }
    pub(crate) fn entries(&mut self, v: &[DirEntry]) -> &mut Self {
        self.u32(v.len() as u32);
        for e in v {
            self.bytes(&e.name).u64(e.ino).kind(e.kind);
        }
        self
    }
    pub(crate) fn statfs(&mut self, s: &StatFs) -> &mut Self {
        self.u64(s.block_size)
            .u64(s.blocks_total)
            .u64(s.blocks_free);
        self.u64(s.inodes_total).u64(s.inodes_free).u64(s.name_max)
    }
    pub(crate) fn counters(&mut self, v: &[(String, u64)]) -> &mut Self {
        self.u32(v.len() as u32);
        for (k, n) in v {
            self.str(k).u64(*n);
        }
        self
    }
    pub(crate) fn fsck(&mut self, r: &FsckReport) -> &mut Self {
        self.u32(r.problems.len() as u32);
        for p in &r.problems {
            self.str(&p.what).str(&p.location);
        }
        self.counters(&r.checked)
    }
    pub(crate) fn limits(&mut self, v: &[Limit]) -> &mut Self {
        self.u32(v.len() as u32);
        for l in v {
            self.str(&l.name).u64(l.max).opt_u64(l.used).str(l.error);
        }
        self
    }
    /// A lock request's answer: none, or the lock in the way.
    pub(crate) fn conflict(&mut self, c: Option<&crate::locks::Conflict>) -> &mut Self {
        match c {
            None => self.u8(0),
            Some(c) => self
                .u8(1)
                .u8(c.kind.code())
                .u64(c.range.start)
                .u64(c.range.len)
                .u32(c.pid),
        }
    }
    /// An error: its variant, its fields, its message (what the client shows).
    pub(crate) fn error(&mut self, e: &Error) -> &mut Self {
        use Error::*;
        match e {
            NotFound(s) => self.u8(1).str(s),
            Exists(s) => self.u8(2).str(s),
            NotDir(s) => self.u8(3).str(s),
            IsDir(s) => self.u8(4).str(s),
            NotEmpty(s) => self.u8(5).str(s),
            NameTooLong { len, max } => self.u8(6).u64(*len as u64).u64(*max as u64),
            InvalidArgument(s) => self.u8(7).str(s),
            BadHandle(h) => self.u8(8).u64(*h),
            BadMode(h, what) => self.u8(9).u64(*h).str(what),
            NoSpace(s) => self.u8(10).str(s),
            LogFull(s) => self.u8(11).str(s),
            FileInTransaction(t) => self.u8(12).u64(*t),
            NoSuchTransaction(t) => self.u8(13).u64(*t),
            TooMany { what, max } => self.u8(14).str(what).u64(*max),
            FileTooLarge(s) => self.u8(15).str(s),
            PermissionDenied(s) => self.u8(16).str(s),
            NotPermitted(s) => self.u8(17).str(s),
            Busy(s) => self.u8(18).str(s),
            CrossStore(s) => self.u8(19).str(s),
            Unsupported(s) => self.u8(20).str(s),
            Closed => self.u8(21),
            BadMagic(s) => self.u8(22).str(s),
            UnsupportedVersion {
                what,
                found,
                supported,
            } => self.u8(23).str(what).u32(*found).u32(*supported),
            Corrupt { what, offset } => self.u8(24).str(what).u64(*offset),
            NoAttribute(s) => self.u8(26).str(s),
            TooLarge(s) => self.u8(27).str(s),
            OutOfRange(s) => self.u8(28).str(s),
            SymlinkLoop(s) => self.u8(29).str(s),
            Io { path, op, source } => {
                let errno = source.raw_os_error().unwrap_or(libc::EIO);
                self.u8(25)
                    .str(path)
                    .str(op)
                    .u32(errno as u32)
                    .str(&source.to_string())
            }
        }
    }
}

/// A decoder over one frame body.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// A malformed frame.
pub(crate) fn malformed(what: &str) -> Error {
    Error::Io {
        path: "atomfs server socket".into(),
        op: "decode",
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string()),
    }
}

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| malformed("frame shorter than its contents"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    /// Every byte was used: a frame with trailing bytes is malformed.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(malformed("trailing bytes in a frame"))
        }
    }
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed("boolean not 0 or 1")),
        }
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > BYTES_MAX {
            return Err(malformed("byte string too long"));
        }
        self.take(n)
    }
    pub(crate) fn string(&mut self) -> Result<String> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
    pub(crate) fn opt_u64(&mut self) -> Result<Option<u64>> {
        Ok(if self.bool()? {
            Some(self.u64()?)
        } else {
            None
        })
    }
    pub(crate) fn opt_u32(&mut self) -> Result<Option<u32>> {
        self.opt_u64()?
            .map(|v| u32::try_from(v).map_err(|_| malformed("32-bit field out of range")))
            .transpose()
    }
    /// A count of items that each take at least `min_size` bytes: bounded by what is left.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.buf.len() - self.pos {
            return Err(malformed("count larger than the frame"));
        }
        Ok(n)
    }
    pub(crate) fn u64s(&mut self) -> Result<Vec<u64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    pub(crate) fn conflict(&mut self) -> Result<Option<crate::locks::Conflict>> {
        use crate::locks::{Conflict, LockKind, LockRange};
        match self.u8()? {
            0 => Ok(None),
            1 => {
                let kind = LockKind::from_code(self.u8()?).ok_or_else(|| malformed("lock kind"))?;
                let range = LockRange {
                    start: self.u64()?,
                    len: self.u64()?,
                };
                Ok(Some(Conflict {
                    kind,
                    range,
                    pid: self.u32()?,
                }))
            }
            _ => Err(malformed("lock answer")),
        }
    }
    pub(crate) fn kind(&mut self) -> Result<FileKind> {
        FileKind::from_code(self.u8()?).ok_or_else(|| malformed("unknown file kind"))
    }
    pub(crate) fn flags(&mut self) -> Result<OpenFlags> {
        Ok(OpenFlags {
            read: self.bool()?,
            write: self.bool()?,
            append: self.bool()?,
            atomic: self.bool()?,
        })
    }
    pub(crate) fn rename_mode(&mut self) -> Result<RenameMode> {
        match self.u8()? {
            0 => Ok(RenameMode::Replace),
            1 => Ok(RenameMode::NoReplace),
            2 => Ok(RenameMode::Exchange),
            _ => Err(malformed("unknown rename mode")),
        }
    }
    pub(crate) fn xattr_set(&mut self) -> Result<XattrSet> {
        match self.u8()? {
            0 => Ok(XattrSet::Either),
            1 => Ok(XattrSet::Create),
            2 => Ok(XattrSet::Replace),
            _ => Err(malformed("unknown attribute set mode")),
        }
    }
    pub(crate) fn fallocate(&mut self) -> Result<Fallocate> {
        match self.u8()? {
            1 => Ok(Fallocate::Allocate {
                keep_size: self.bool()?,
            }),
            2 => Ok(Fallocate::PunchHole),
            3 => Ok(Fallocate::ZeroRange {
                keep_size: self.bool()?,
            }),
            _ => Err(malformed("unknown fallocate operation")),
        }
    }
    pub(crate) fn byte_list(&mut self) -> Result<Vec<Vec<u8>>> {
        let n = self.count(4)?;
        (0..n).map(|_| Ok(self.bytes()?.to_vec())).collect()
    }
    pub(crate) fn meta(&mut self) -> Result<Metadata> {
        Ok(Metadata {
            ino: self.u64()?,
            kind: self.kind()?,
            size: self.u64()?,
            perm: self.u32()?,
            nlink: self.u32()?,
            uid: self.u32()?,
            gid: self.u32()?,
            allocated: self.u64()?,
            atime: self.u64()?,
            mtime: self.u64()?,
            ctime: self.u64()?,
            rdev: self.u64()?,
        })
    }
    pub(crate) fn setattr(&mut self) -> Result<SetAttr> {
        Ok(SetAttr {
            perm: self.opt_u32()?,
            uid: self.opt_u32()?,
            gid: self.opt_u32()?,
            atime: self.opt_u64()?,
            mtime: self.opt_u64()?,
        })
    }
    pub(crate) fn entries(&mut self) -> Result<Vec<DirEntry>> {
        let n = self.count(13)?;
        (0..n)
            .map(|_| {
                Ok(DirEntry {
                    name: self.bytes()?.to_vec(),
                    ino: self.u64()?,
                    kind: self.kind()?,
                })
            })
            .collect()
    }
    pub(crate) fn statfs(&mut self) -> Result<StatFs> {
        Ok(StatFs {
            block_size: self.u64()?,
            blocks_total: self.u64()?,
            blocks_free: self.u64()?,
            inodes_total: self.u64()?,
            inodes_free: self.u64()?,
            name_max: self.u64()?,
        })
    }
    pub(crate) fn counters(&mut self) -> Result<Vec<(String, u64)>> {
        let n = self.count(12)?;
        (0..n).map(|_| Ok((self.string()?, self.u64()?))).collect()
    }
    pub(crate) fn fsck(&mut self) -> Result<FsckReport> {
        let n = self.count(8)?;
        let problems = (0..n)
            .map(|_| {
                Ok(FsckProblem {
                    what: self.string()?,
                    location: self.string()?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(FsckReport {
            problems,
            checked: self.counters()?,
        })
    }
    pub(crate) fn limits(&mut self) -> Result<Vec<Limit>> {
        let n = self.count(17)?;
        (0..n)
            .map(|_| {
                Ok(Limit {
                    name: self.string()?,
                    max: self.u64()?,
                    used: self.opt_u64()?,
                    error: intern(self.string()?),
                })
            })
            .collect()
    }
    pub(crate) fn error(&mut self) -> Result<Error> {
        use Error::*;
        Ok(match self.u8()? {
            1 => NotFound(self.string()?),
            2 => Exists(self.string()?),
            3 => NotDir(self.string()?),
            4 => IsDir(self.string()?),
            5 => NotEmpty(self.string()?),
            6 => NameTooLong {
                len: self.u64()? as usize,
                max: self.u64()? as usize,
            },
            7 => InvalidArgument(self.string()?),
            8 => BadHandle(self.u64()?),
            9 => BadMode(self.u64()?, intern(self.string()?)),
            10 => NoSpace(self.string()?),
            11 => LogFull(self.string()?),
            12 => FileInTransaction(self.u64()?),
            13 => NoSuchTransaction(self.u64()?),
            14 => TooMany {
                what: intern(self.string()?),
                max: self.u64()?,
            },
            15 => FileTooLarge(self.string()?),
            16 => PermissionDenied(self.string()?),
            17 => NotPermitted(self.string()?),
            18 => Busy(self.string()?),
            19 => CrossStore(self.string()?),
            20 => Unsupported(self.string()?),
            21 => Closed,
            22 => BadMagic(self.string()?),
            23 => UnsupportedVersion {
                what: self.string()?,
                found: self.u32()?,
                supported: self.u32()?,
            },
            24 => Corrupt {
                what: self.string()?,
                offset: self.u64()?,
            },
            26 => NoAttribute(self.string()?),
            27 => TooLarge(self.string()?),
            28 => OutOfRange(self.string()?),
            29 => SymlinkLoop(self.string()?),
            25 => {
                let path = self.string()?;
                let op = intern(self.string()?);
                let errno = self.u32()? as i32;
                let text = self.string()?;
                let source = std::io::Error::from_raw_os_error(errno);
                Io {
                    path: format!("{path} (on the server: {text})"),
                    op,
                    source,
                }
            }
            _ => return Err(malformed("unknown error code")),
        })
    }
}

/// The `&'static str` fields of [`Error`] (an operation or resource name) for a text read
/// from the wire. Each distinct text is kept once; texts come from the engines' fixed
/// names, so the table stays small (it is capped: past the cap, a generic name).
fn intern(text: String) -> &'static str {
    const CAP: usize = 256;
    static TABLE: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut table = TABLE.get_or_init(Default::default).lock();
    if let Some(s) = table.get(&text) {
        return s;
    }
    if table.len() >= CAP {
        return "resource (name not kept)";
    }
    let leaked: &'static str = Box::leak(text.clone().into_boxed_str());
    table.insert(text, leaked);
    leaked
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let meta = Metadata {
            ino: 7,
            kind: FileKind::Dir,
            size: 1 << 40,
            perm: 0o1755,
            nlink: 3,
            uid: 1000,
            gid: 100,
            allocated: 4096,
            atime: 1,
            mtime: 2,
            ctime: 3,
            rdev: 0x0107,
        };
        let attr = SetAttr {
            perm: Some(0o600),
            uid: None,
            gid: Some(5),
            atime: None,
            mtime: Some(9),
        };
        let entries = vec![DirEntry {
            name: b"a\xffb".to_vec(),
            ino: 9,
            kind: FileKind::File,
        }];
        let mut e = Enc::default();
        e.meta(&meta)
            .setattr(&attr)
            .entries(&entries)
            .u64s(&[1, 2, 3]);
        e.error(&Error::TooMany {
            what: "open files",
            max: 8,
        });
        let mut d = Dec::new(&e.0);
        assert_eq!(d.meta().unwrap(), meta);
        assert_eq!(d.setattr().unwrap(), attr);
        assert_eq!(d.entries().unwrap(), entries);
        assert_eq!(d.u64s().unwrap(), vec![1, 2, 3]);
        match d.error().unwrap() {
            Error::TooMany { what, max } => assert_eq!((what, max), ("open files", 8)),
            other => panic!("decoded {other:?}"),
        }
        d.finish().unwrap();
    }

    #[test]
    fn truncated_and_lying_frames_are_errors() {
        let mut e = Enc::default();
        e.meta(&Metadata {
            ino: 1,
            kind: FileKind::File,
            size: 0,
            perm: 0,
            nlink: 1,
            uid: 0,
            gid: 0,
            allocated: 0,
            atime: 0,
            mtime: 0,
            ctime: 0,
            rdev: 0,
        });
        for cut in 0..e.0.len() {
            assert!(Dec::new(&e.0[..cut]).meta().is_err(), "cut at {cut}");
        }
        // A count that promises more than the frame holds.
        let lie = [0xff, 0xff, 0xff, 0x7f];
        assert!(Dec::new(&lie).entries().is_err());
        assert!(Dec::new(&lie).u64s().is_err());
        assert!(Dec::new(&lie).bytes().is_err());
        assert!(Dec::new(&[0]).kind().is_err());
        assert!(Dec::new(&[8]).kind().is_err());
        assert!(Dec::new(&[99]).error().is_err());
        assert!(Dec::new(&[3]).rename_mode().is_err());
        assert!(Dec::new(&[3]).xattr_set().is_err());
        assert!(Dec::new(&[0]).fallocate().is_err());
        assert!(Dec::new(&[1, 2]).fallocate().is_err());
        assert!(Dec::new(&[1]).fallocate().is_err());
        assert!(Dec::new(&lie).byte_list().is_err());
    }

    #[test]
    fn posix_values_round_trip() {
        let ops = [
            Fallocate::Allocate { keep_size: false },
            Fallocate::Allocate { keep_size: true },
            Fallocate::PunchHole,
            Fallocate::ZeroRange { keep_size: false },
            Fallocate::ZeroRange { keep_size: true },
        ];
        let modes = [
            RenameMode::Replace,
            RenameMode::NoReplace,
            RenameMode::Exchange,
        ];
        let sets = [XattrSet::Either, XattrSet::Create, XattrSet::Replace];
        let names = vec![
            b"user.a".to_vec(),
            Vec::new(),
            b"system.posix_acl_access".to_vec(),
        ];
        let flags = OpenFlags {
            read: true,
            write: false,
            append: true,
            atomic: true,
        };
        let mut e = Enc::default();
        for op in ops {
            e.fallocate(op);
        }
        for m in modes {
            e.rename_mode(m);
        }
        for x in sets {
            e.xattr_set(x);
        }
        e.byte_list(&names).flags(flags);
        let mut d = Dec::new(&e.0);
        for op in ops {
            assert_eq!(d.fallocate().unwrap(), op);
        }
        for m in modes {
            assert_eq!(d.rename_mode().unwrap(), m);
        }
        for x in sets {
            assert_eq!(d.xattr_set().unwrap(), x);
        }
        assert_eq!(d.byte_list().unwrap(), names);
        assert_eq!(d.flags().unwrap(), flags);
        d.finish().unwrap();
    }
}
