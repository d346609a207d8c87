//! Namespace intents: create (files, directories, symlinks, special files, links), unlink,
//! rmdir, rename, exchange, setattr, chown and extended-attribute changes inside a
//! transaction (the MeLo@V-style intent log of DESIGN.md, applied to the host directory).
//!
//! Each operation is done on the host at once, after a durable intent record saying how to
//! undo it; a removal moves the name into the hidden trash directory instead of deleting it.
//! Commit (the transaction record's commit word) makes them final: trash entries are deleted.
//! Abort, or recovery of an uncommitted transaction, undoes them in reverse order. Every undo
//! and every finalisation step checks the host state first, so replaying it is harmless.
//!
//! ```text
//! intent record (512 bytes)
//!  0 txid u64 (0 = free; written last)   8 kind u8  9 pad u8  10 len_a u16  12 len_b u16
//! 14 pad u16   16 seq u64   24 perm u32   28 pad u32   32 atime u64   40 mtime u64
//! 48 checksum u32 (crc32c of bytes 8..48, 52..512 and the txid)   52 path_a ++ path_b (≤ 460)
//! ```
//!
//! Kinds: 1 created (`a`), 2 removed (`a` moved to the trash as `b`), 3 renamed (`a` to `b`),
//! 4 attributes (`a`; perm, atime, mtime), 5 exchanged (`a` and `b`; the host id of the file
//! at `a` before, in the atime field), 6 owner (`a`; uid in the perm field, gid at 28),
//! 7 extended attribute (`a`; `b` the trash file holding the attribute's old value,
//! `saved_xattr.rs`, written and durable before the record), 8 linked (`a`, a new name of an
//! existing file).

use crate::host::{FileMedia, MediaStat};
use crate::{io_err, MmioError, MmioResult};
use pmem::Region;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::{Error, FileKind, Result, TimeNs};

pub const INTENT_LEN: u64 = 512;
const PATHS_AT: usize = 52;
pub const INTENT_PATHS_MAX: usize = INTENT_LEN as usize - PATHS_AT;
/// Hidden directory (in the store's root) holding names removed by open transactions.
pub const TRASH_NAME: &str = ".atomfs-mmio-trash";

const _: () = assert!(PATHS_AT + INTENT_PATHS_MAX == INTENT_LEN as usize);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Intent {
    /// `a` was created (file, directory, symlink or special file): undo removes it.
    Created { a: PathBuf },
    /// `a` was linked to an existing file: undo removes that name (the file lives on).
    Linked { a: PathBuf },
    /// `a` was moved to the trash as `b`: undo moves it back, commit deletes `b`.
    Removed { a: PathBuf, b: PathBuf },
    /// `a` was renamed to `b`: undo renames it back.
    Renamed { a: PathBuf, b: PathBuf },
    /// `a`'s attributes were changed: undo restores these.
    Attr {
        a: PathBuf,
        perm: u32,
        atime: TimeNs,
        mtime: TimeNs,
    },
    /// `a` and `b` were swapped; `id_a` is the host id of the file at `a` before. Undo swaps
    /// them back only if `a` no longer holds it: an exchange redone undoes itself.
    Exchanged { a: PathBuf, b: PathBuf, id_a: u64 },
    /// `a`'s owner was changed: undo restores these.
    Owner { a: PathBuf, uid: u32, gid: u32 },
    /// An extended attribute of `a` was changed; its old value is saved in the trash file
    /// `b`. Undo restores it from there; commit deletes `b`.
    Xattr { a: PathBuf, b: PathBuf },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentRecord {
    pub txid: u64,
    pub seq: u64,
    pub intent: Intent,
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

fn checksum(b: &[u8], txid: u64) -> u32 {
    let c = crc32c::crc32c(&b[8..48]);
    let c = crc32c::crc32c_append(c, &b[52..]);
    crc32c::crc32c_append(c, &txid.to_le_bytes())
}

impl IntentRecord {
    /// Encode; `None` when the paths do not fit the record.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let none = Path::new("");
        let mut gid = 0u32;
        let (kind, a, b, perm, atime, mtime): (u8, &Path, &Path, u32, u64, u64) = match &self.intent
        {
            Intent::Created { a } => (1, a, none, 0, 0, 0),
            Intent::Removed { a, b } => (2, a, b, 0, 0, 0),
            Intent::Renamed { a, b } => (3, a, b, 0, 0, 0),
            Intent::Attr {
                a,
                perm,
                atime,
                mtime,
            } => (4, a, none, *perm, *atime, *mtime),
            Intent::Exchanged { a, b, id_a } => (5, a, b, 0, *id_a, 0),
            Intent::Owner { a, uid, gid: g } => {
                gid = *g;
                (6, a, none, *uid, 0, 0)
            }
            Intent::Xattr { a, b } => (7, a, b, 0, 0, 0),
            Intent::Linked { a } => (8, a, none, 0, 0, 0),
        };
        let (a, b) = (bytes(a), bytes(b));
        if a.len() + b.len() > INTENT_PATHS_MAX {
            return None;
        }
        let mut r = vec![0u8; INTENT_LEN as usize];
        r[0..8].copy_from_slice(&self.txid.to_le_bytes());
        r[8] = kind;
        r[10..12].copy_from_slice(&(a.len() as u16).to_le_bytes());
        r[12..14].copy_from_slice(&(b.len() as u16).to_le_bytes());
        r[16..24].copy_from_slice(&self.seq.to_le_bytes());
        r[24..28].copy_from_slice(&perm.to_le_bytes());
        r[28..32].copy_from_slice(&gid.to_le_bytes());
        r[32..40].copy_from_slice(&atime.to_le_bytes());
        r[40..48].copy_from_slice(&mtime.to_le_bytes());
        r[PATHS_AT..PATHS_AT + a.len()].copy_from_slice(a);
        r[PATHS_AT + a.len()..PATHS_AT + a.len() + b.len()].copy_from_slice(b);
        let crc = checksum(&r, self.txid);
        r[48..52].copy_from_slice(&crc.to_le_bytes());
        Some(r)
    }

    /// Decode a record read at `at`; `None` when free.
    pub fn decode(r: &[u8], at: u64) -> MmioResult<Option<IntentRecord>> {
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&r[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let txid = u64_at(0);
        if txid == 0 {
            return Ok(None);
        }
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&r[48..52]);
        if u32::from_le_bytes(crc) != checksum(r, txid) {
            return Err(MmioError::corrupt("intent record checksum mismatch", at));
        }
        let la = u16::from_le_bytes([r[10], r[11]]) as usize;
        let lb = u16::from_le_bytes([r[12], r[13]]) as usize;
        if la + lb > INTENT_PATHS_MAX {
            return Err(MmioError::corrupt(
                "intent record path lengths out of range",
                at,
            ));
        }
        let path = |from: usize, len: usize| {
            PathBuf::from(OsStr::from_bytes(
                &r[PATHS_AT + from..PATHS_AT + from + len],
            ))
        };
        let (a, b) = (path(0, la), path(la, lb));
        let kind = r[8];
        // Paths read back from the pool are untrusted: each must be one hostfs accepts below
        // the store directory (relative, no `..`, no NUL, bounded), checked before recovery
        // acts on any of them.
        check_path(&a, at)?;
        if matches!(kind, 2 | 3 | 5 | 7) {
            check_path(&b, at)?;
        }
        let u32_at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
        let intent = match kind {
            1 => Intent::Created { a },
            2 => Intent::Removed { a, b },
            3 => Intent::Renamed { a, b },
            4 => Intent::Attr {
                a,
                perm: u32_at(24),
                atime: u64_at(32),
                mtime: u64_at(40),
            },
            5 => Intent::Exchanged {
                a,
                b,
                id_a: u64_at(32),
            },
            6 => Intent::Owner {
                a,
                uid: u32_at(24),
                gid: u32_at(28),
            },
            7 => Intent::Xattr { a, b },
            8 => Intent::Linked { a },
            _ => return Err(MmioError::corrupt("intent record of unknown kind", at)),
        };
        Ok(Some(IntentRecord {
            txid,
            seq: u64_at(16),
            intent,
        }))
    }
}

/// Refuse a path of an intent record that could name anything outside the store directory.
fn check_path(p: &Path, at: u64) -> MmioResult<()> {
    hostfs::RelPath::new(p).map(drop).map_err(|e| {
        MmioError::corrupt(
            format!("intent record names a path outside the store directory ({e})"),
            at,
        )
    })
}

/// The paths an intent acts on.
pub fn paths(intent: &Intent) -> Vec<&Path> {
    match intent {
        Intent::Created { a }
        | Intent::Linked { a }
        | Intent::Attr { a, .. }
        | Intent::Owner { a, .. } => vec![a],
        Intent::Removed { a, b }
        | Intent::Renamed { a, b }
        | Intent::Exchanged { a, b, .. }
        | Intent::Xattr { a, b } => vec![a, b],
    }
}

/// Refuse a path of the intent record at `at` with a symlink on the way: the engine's paths
/// only pass through directories, so such a record was crafted or the directory was changed
/// behind its back (the jail would not follow it anyway; this says so clearly, before
/// recovery acts on any record). The last component may be a symlink: the engine makes them,
/// and every intent acts on a symlink itself, never on its target.
pub fn check_no_symlink<M: FileMedia>(media: &M, p: &Path, at: u64) -> MmioResult<()> {
    let mut prefix = PathBuf::new();
    let components: Vec<_> = p.components().collect();
    let on_the_way = components.len().saturating_sub(1);
    for component in components.into_iter().take(on_the_way) {
        prefix.push(component);
        match media.stat(&prefix) {
            Ok(st) if st.kind == FileKind::Symlink => {
                return Err(MmioError::corrupt(
                    format!(
                        "intent record names {}, which passes through the symlink {} \
                         (symlinks in the store directory are never followed)",
                        p.display(),
                        prefix.display()
                    ),
                    at,
                ))
            }
            Ok(_) => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return Ok(())
            }
            Err(e) => return Err(io_err(&prefix, "stat", e).into()),
        }
    }
    Ok(())
}

/// Write intent record `idx` (offset `at`): body, fence, then the txid that makes it valid.
pub fn publish<R: Region>(pool: &R, at: u64, rec: &IntentRecord) -> Result<()> {
    let too_long = Error::NameTooLong {
        len: INTENT_PATHS_MAX + 1,
        max: INTENT_PATHS_MAX,
    };
    let body = rec.encode().ok_or(too_long)?;
    assert_ne!(rec.txid, 0, "an intent record of no transaction");
    assert_eq!(pool.load_u64(at), 0, "intent record at {at:#x} is in use");
    // Check what recovery will read back before it is stored. A path recovery would refuse
    // (one hostfs does not accept below the store directory) fails the call here, before the
    // host operation, instead of leaving a record recovery cannot act on.
    match IntentRecord::decode(&body, at)? {
        Some(back) => assert_eq!(&back, rec, "intent record does not decode to itself"),
        None => unreachable!("an encoded intent record reads as free"),
    }
    pool.write(at + 8, &body[8..]);
    // persist: the intent's body is durable before its txid makes it valid ...
    pool.persist(at + 8, INTENT_LEN - 8);
    pool.store_u64(at, rec.txid);
    // persist: ... and the intent is durable before the host operation it covers.
    pool.persist(at, 8);
    Ok(())
}

/// Free an intent record (flushed, not fenced).
pub fn clear<R: Region>(pool: &R, at: u64) {
    pool.store_u64(at, 0);
    pool.flush(at, 8);
}

fn stat_of<M: FileMedia>(media: &M, p: &Path) -> io::Result<Option<MediaStat>> {
    match media.stat(p) {
        Ok(st) => Ok(Some(st)),
        Err(e)
            if e.raw_os_error() == Some(libc::ENOENT)
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn exists<M: FileMedia>(media: &M, p: &Path) -> io::Result<Option<FileKind>> {
    Ok(stat_of(media, p)?.map(|st| st.kind))
}

fn remove<M: FileMedia>(media: &M, p: &Path) -> io::Result<()> {
    match exists(media, p)? {
        Some(FileKind::Dir) => match media.rmdir(p) {
            // A directory that gained entries outside the transaction stays.
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(()),
            r => r,
        },
        Some(_) => media.unlink(p),
        None => Ok(()),
    }
}

/// Where a move from `a` to `b` stands on the host (a crash may cut it, or its undo,
/// between the link of the new name and the unlink of the old one: see `FileMedia::rename`).
enum MoveState {
    /// Only `a` exists (or neither): nothing was moved, or the move was undone.
    Before,
    /// Only `b` exists.
    After,
    /// Both name the same file: the move (or its undo) was cut between link and unlink.
    Both,
}

fn moved<M: FileMedia>(media: &M, a: &Path, b: &Path) -> Result<MoveState> {
    let sa = stat_of(media, a).map_err(|e| io_err(a, "stat", e))?;
    let sb = stat_of(media, b).map_err(|e| io_err(b, "stat", e))?;
    Ok(match (sa, sb) {
        (Some(x), Some(y)) if x.id == y.id && x.kind != FileKind::Dir => MoveState::Both,
        (None, Some(_)) => MoveState::After,
        _ => MoveState::Before,
    })
}

/// Undo one intent (idempotent: checks the host state first).
pub fn undo<M: FileMedia>(media: &M, intent: &Intent) -> Result<()> {
    let err = |p: &Path, op, e| io_err(p, op, e);
    match intent {
        Intent::Created { a } => remove(media, a).map_err(|e| err(a, "undo create", e)),
        Intent::Linked { a } => match exists(media, a).map_err(|e| err(a, "stat", e))? {
            Some(FileKind::Dir) | None => Ok(()),
            Some(_) => media.unlink(a).map_err(|e| err(a, "undo link", e)),
        },
        Intent::Removed { a, b } | Intent::Renamed { a, b } => match moved(media, a, b)? {
            MoveState::Before => Ok(()),
            MoveState::After => media.rename(b, a).map_err(|e| err(b, "undo rename", e)),
            // The old name is back (or never went): drop the new one.
            MoveState::Both => media.unlink(b).map_err(|e| err(b, "undo rename", e)),
        },
        Intent::Attr {
            a,
            perm,
            atime,
            mtime,
        } => {
            if exists(media, a).map_err(|e| err(a, "stat", e))?.is_some() {
                media
                    .set_perm(a, *perm)
                    .map_err(|e| err(a, "undo chmod", e))?;
                media
                    .set_times(a, Some(*atime), Some(*mtime))
                    .map_err(|e| err(a, "undo utimes", e))?;
            }
            Ok(())
        }
        Intent::Exchanged { a, b, id_a } => {
            let sa = stat_of(media, a).map_err(|e| err(a, "stat", e))?;
            let sb = stat_of(media, b).map_err(|e| err(b, "stat", e))?;
            match (sa, sb) {
                // The swap happened (and was not undone yet): swap back.
                (Some(x), Some(y)) if x.id != *id_a && y.id == *id_a => {
                    media.exchange(a, b).map_err(|e| err(a, "undo exchange", e))
                }
                _ => Ok(()),
            }
        }
        Intent::Owner { a, uid, gid } => {
            if exists(media, a).map_err(|e| err(a, "stat", e))?.is_some() {
                media
                    .set_owner(a, Some(*uid), Some(*gid))
                    .map_err(|e| err(a, "undo chown", e))?;
            }
            Ok(())
        }
        Intent::Xattr { a, b } => crate::log::saved_xattr::restore(media, a, b),
    }
}

/// Make one intent final after its transaction committed (idempotent).
///
/// A committed move is complete on the host: every host move is durable when it returns
/// (`FileMedia::rename`), and a transaction commits after its last one. Finding the old
/// name and the new one as one file therefore means a later operation linked the old name
/// again (a hard link back), never a move cut between its link and its unlink: both names
/// stay.
pub fn finish<M: FileMedia>(media: &M, intent: &Intent) -> Result<()> {
    match intent {
        Intent::Removed { b, .. } => {
            remove(media, b).map_err(|e| io_err(b, "delete from trash", e))
        }
        Intent::Renamed { .. } => Ok(()),
        Intent::Xattr { b, .. } => remove(media, b).map_err(|e| io_err(b, "delete from trash", e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_decodes_to_itself_and_a_flipped_byte_is_refused() {
        let p = |s: &str| PathBuf::from(s);
        let intents = [
            Intent::Created { a: p("d/a") },
            Intent::Removed {
                a: p("a"),
                b: p(".atomfs-mmio-trash/7-1"),
            },
            Intent::Renamed {
                a: p("a"),
                b: p("d/b"),
            },
            Intent::Attr {
                a: p("a"),
                perm: 0o640,
                atime: 5,
                mtime: 6,
            },
            Intent::Exchanged {
                a: p("a"),
                b: p("d/b"),
                id_a: u64::MAX - 3,
            },
            Intent::Owner {
                a: p("l"),
                uid: 1000,
                gid: u32::MAX - 1,
            },
            Intent::Xattr {
                a: p("a"),
                b: p(".atomfs-mmio-trash/xattr-7-2"),
            },
            Intent::Linked { a: p("d/l2") },
        ];
        for (seq, intent) in intents.into_iter().enumerate() {
            let rec = IntentRecord {
                txid: 7,
                seq: seq as u64,
                intent,
            };
            let b = rec.encode().expect("fits");
            let back = IntentRecord::decode(&b, 0)
                .expect("decodes")
                .expect("in use");
            assert_eq!(back, rec);
            for at in [8, 16, 24, 28, 32, 48, 52] {
                let mut bad = b.clone();
                bad[at] ^= 1;
                assert!(IntentRecord::decode(&bad, 0).is_err(), "{rec:?}: byte {at}");
            }
        }
    }
}
