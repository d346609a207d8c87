//! A namespace intent record (PMAL's operation log, MeLo@V's intents): one namespace change
//! of an open transaction, written before the change is made on the home directory, so that
//! recovery undoes it when the transaction did not commit (and finishes it when it did).
//!
//! ```text
//! 0    u64 stamp of the transaction (0 = free; written last, cleared to free)
//! 8    u8  kind    9..12 zero    12 u32 crc32c of the record with bytes 0..8, 12..16 zero
//! 16   u16 length of path a      18 u16 length of path b      20 u32 perm
//! 24   u64 atime   32 u64 mtime  40 u64 seq (undo runs in reverse seq order)
//! 48   u64 id (Exchanged: the host inode at `a` before the exchange; else 0)
//! 56   u32 uid     60 u32 gid    (Owner: the owner before; else 0)
//! 64   path a (at most PATH_MAX bytes)
//! 536  path b (at most PATH_MAX bytes)
//! ```
//!
//! Kinds 1..=6 are those of the first pool version; 7..=9 (Exchanged, Xattr, Owner) need a
//! version-2 pool (format/superblock.rs), whose records of kinds 1..=6 are unchanged (bytes
//! 48..64 zero).

use pmem::crc::crc32c;

/// Bytes of one intent record.
pub const INTENT_LEN: u64 = 1024;
/// Longest home path an intent records.
pub const PATH_MAX: usize = 472;
const A_AT: usize = 64;
const B_AT: usize = 536;

/// What a transaction did to the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntentKind {
    /// Created the file `a`.
    Created = 1,
    /// Created the directory `a`.
    CreatedDir = 2,
    /// Moved the name `a` into the trash as `b`.
    Removed = 3,
    /// Renamed `a` to `b`.
    Moved = 4,
    /// Linked a new name `a`.
    Linked = 5,
    /// Changed the attributes of `a` (the old ones recorded).
    Attr = 6,
    /// Exchanged the names `a` and `b` (RENAME_EXCHANGE); `id` is the inode `a` named.
    Exchanged = 7,
    /// Changed an extended attribute of `a`; its old value is saved in the trash file `b`
    /// (format/saved_xattr.rs).
    Xattr = 8,
    /// Changed the owner of `a` (with its permissions and times: all recorded, as `Attr`).
    Owner = 9,
}

impl IntentKind {
    /// Whether the kind needs a version-2 pool.
    pub fn is_posix(self) -> bool {
        matches!(
            self,
            IntentKind::Exchanged | IntentKind::Xattr | IntentKind::Owner
        )
    }

    fn from_u8(b: u8) -> Option<Self> {
        use IntentKind::*;
        [
            Created, CreatedDir, Removed, Moved, Linked, Attr, Exchanged, Xattr, Owner,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }
}

/// A decoded intent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    pub kind: IntentKind,
    pub seq: u64,
    pub a: Vec<u8>,
    pub b: Vec<u8>,
    pub perm: u32,
    pub atime: u64,
    pub mtime: u64,
    pub id: u64,
    pub uid: u32,
    pub gid: u32,
}

fn checksum(b: &[u8]) -> u32 {
    let mut copy = b.to_vec();
    copy[..8].fill(0);
    copy[12..16].fill(0);
    crc32c(&copy)
}

impl Intent {
    /// An intent of `kind` on paths `a` and `b`, every other field zero.
    pub fn new(kind: IntentKind, a: Vec<u8>, b: Vec<u8>) -> Intent {
        Intent {
            kind,
            seq: 0,
            a,
            b,
            perm: 0,
            atime: 0,
            mtime: 0,
            id: 0,
            uid: 0,
            gid: 0,
        }
    }

    /// The record's bytes with a free stamp (the caller stores the stamp after them).
    pub fn encode(&self) -> Option<Vec<u8>> {
        if self.a.len() > PATH_MAX || self.b.len() > PATH_MAX {
            return None;
        }
        let mut b = vec![0u8; INTENT_LEN as usize];
        b[8] = self.kind as u8;
        b[16..18].copy_from_slice(&(self.a.len() as u16).to_le_bytes());
        b[18..20].copy_from_slice(&(self.b.len() as u16).to_le_bytes());
        b[20..24].copy_from_slice(&self.perm.to_le_bytes());
        b[24..32].copy_from_slice(&self.atime.to_le_bytes());
        b[32..40].copy_from_slice(&self.mtime.to_le_bytes());
        b[40..48].copy_from_slice(&self.seq.to_le_bytes());
        b[48..56].copy_from_slice(&self.id.to_le_bytes());
        b[56..60].copy_from_slice(&self.uid.to_le_bytes());
        b[60..64].copy_from_slice(&self.gid.to_le_bytes());
        b[A_AT..A_AT + self.a.len()].copy_from_slice(&self.a);
        b[B_AT..B_AT + self.b.len()].copy_from_slice(&self.b);
        let crc = checksum(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Self::decode(&b).as_ref(),
            Ok(self),
            "cache: intent does not decode back"
        );
        Some(b)
    }

    pub fn decode(b: &[u8]) -> Result<Intent, &'static str> {
        if b.len() < INTENT_LEN as usize {
            return Err("intent record truncated");
        }
        let u16_at = |at: usize| usize::from(u16::from_le_bytes([b[at], b[at + 1]]));
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let crc = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        if crc != checksum(&b[..INTENT_LEN as usize]) {
            return Err("intent checksum mismatch");
        }
        let kind = IntentKind::from_u8(b[8]).ok_or("intent kind unknown")?;
        let (la, lb) = (u16_at(16), u16_at(18));
        if la > PATH_MAX || lb > PATH_MAX {
            return Err("intent path too long");
        }
        Ok(Intent {
            kind,
            seq: u64_at(40),
            a: b[A_AT..A_AT + la].to_vec(),
            b: b[B_AT..B_AT + lb].to_vec(),
            perm: u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
            atime: u64_at(24),
            mtime: u64_at(32),
            id: u64_at(48),
            uid: u32::from_le_bytes([b[56], b[57], b[58], b[59]]),
            gid: u32::from_le_bytes([b[60], b[61], b[62], b[63]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_decodes_to_itself_and_a_flipped_byte_is_refused() {
        for (n, kind) in [
            IntentKind::Created,
            IntentKind::CreatedDir,
            IntentKind::Removed,
            IntentKind::Moved,
            IntentKind::Linked,
            IntentKind::Attr,
            IntentKind::Exchanged,
            IntentKind::Xattr,
            IntentKind::Owner,
        ]
        .into_iter()
        .enumerate()
        {
            let it = Intent {
                kind,
                seq: n as u64 + 1,
                a: b"dir/a".to_vec(),
                b: vec![b'b'; PATH_MAX],
                perm: 0o640,
                atime: 11,
                mtime: 12,
                id: 13,
                uid: 14,
                gid: 15,
            };
            let b = it.encode().unwrap_or_else(|| panic!("encode {kind:?}"));
            assert_eq!(Intent::decode(&b), Ok(it.clone()));
            assert_eq!(kind.is_posix(), kind as u8 >= 7);
            for at in [8, 17, 40, 50, 58, 62, 64, B_AT] {
                let mut bad = b.clone();
                bad[at] ^= 1;
                assert!(Intent::decode(&bad).is_err(), "{kind:?} byte {at}");
            }
        }
        let mut unknown = Intent::new(IntentKind::Created, vec![], vec![])
            .encode()
            .unwrap_or_else(|| panic!("encode"));
        unknown[8] = 10;
        let crc = checksum(&unknown);
        unknown[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Intent::decode(&unknown), Err("intent kind unknown"));
    }
}
