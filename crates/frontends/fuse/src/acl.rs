//! POSIX ACLs enforced by the kernel (FUSE_POSIX_ACL), on a store that keeps extended
//! attributes.
//!
//! The kernel checks permissions against the ACLs it reads from the attributes
//! `system.posix_acl_access` / `system.posix_acl_default` (and caches), and leaves to the file
//! system what ext4 does itself: the mode's group bits follow the ACL's mask when an access
//! ACL is set (an ACL equal to the mode is not stored: the mode says it all), a chmod changes
//! the ACL's owner, mask (or group) and other entries, and a new file or directory in a
//! directory with a default ACL inherits it (umask not applied; the create mode masks the
//! inherited entries, as `posix_acl_create` does) — a directory also as its own default.
//!
//! The attribute value is Linux's `posix_acl_xattr` layout, little-endian: a header
//! `u32 version (2)`, then entries `u16 tag, u16 perm, u32 id`.

use crate::fs::AtomFuse;
use store::{Error, Ino, Metadata, SetAttr, TxId, XattrSet};

/// The access ACL attribute.
pub(crate) const ACCESS: &[u8] = b"system.posix_acl_access";
/// The default ACL attribute (directories).
pub(crate) const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const HEADER_BYTES: usize = 4;
const ENTRY_BYTES: usize = 8;

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// One ACL, in the order of its attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Acl(Vec<Entry>);

fn bad(what: &str) -> Error {
    Error::InvalidArgument(format!("POSIX ACL attribute: {what}"))
}

impl Acl {
    /// Decode an attribute value; InvalidArgument for anything malformed.
    pub(crate) fn parse(v: &[u8]) -> Result<Acl, Error> {
        let body = v
            .get(HEADER_BYTES..)
            .filter(|b| b.len() % ENTRY_BYTES == 0)
            .ok_or_else(|| bad("length"))?;
        let version = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
        if version != VERSION {
            return Err(bad("version"));
        }
        let entries: Vec<Entry> = body
            .chunks_exact(ENTRY_BYTES)
            .map(|c| Entry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]) & 0o7,
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let has = |tag| entries.iter().filter(|e| e.tag == tag).count() == 1;
        if !(has(USER_OBJ) && has(GROUP_OBJ) && has(OTHER)) {
            return Err(bad("owner, group and other entries"));
        }
        if entries
            .iter()
            .any(|e| ![USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER].contains(&e.tag))
        {
            return Err(bad("unknown tag"));
        }
        Ok(Acl(entries))
    }

    /// The attribute value.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = VERSION.to_le_bytes().to_vec();
        for e in &self.0 {
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            out.extend_from_slice(&e.id.to_le_bytes());
        }
        out
    }

    /// Whether the mode says all of it (owner, group and other only).
    pub(crate) fn is_minimal(&self) -> bool {
        self.0
            .iter()
            .all(|e| matches!(e.tag, USER_OBJ | GROUP_OBJ | OTHER))
    }

    fn perm_of(&self, tag: u16) -> Option<u32> {
        self.0
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    }

    /// The rwx bits of the mode it gives: owner, mask (or group), other.
    pub(crate) fn mode(&self) -> u32 {
        let group = self.perm_of(MASK).or(self.perm_of(GROUP_OBJ)).unwrap_or(0);
        (self.perm_of(USER_OBJ).unwrap_or(0) << 6) | (group << 3) | self.perm_of(OTHER).unwrap_or(0)
    }

    /// A chmod: owner, mask (or group) and other entries take the mode's bits.
    pub(crate) fn chmod(&mut self, mode: u32) {
        let has_mask = self.perm_of(MASK).is_some();
        for e in &mut self.0 {
            let bits = match e.tag {
                USER_OBJ => (mode >> 6) & 7,
                MASK => (mode >> 3) & 7,
                GROUP_OBJ if !has_mask => (mode >> 3) & 7,
                OTHER => mode & 7,
                _ => continue,
            };
            e.perm = bits as u16;
        }
    }

    /// Inherit for a new inode created with `mode` (the kernel's `posix_acl_create_masq`):
    /// the entries masked by the mode; returns the new inode's rwx bits.
    pub(crate) fn create_masq(&mut self, mode: u32) -> u32 {
        let mut mode = mode & 0o777;
        let has_mask = self.perm_of(MASK).is_some();
        for e in &mut self.0 {
            match e.tag {
                USER_OBJ => {
                    e.perm &= ((mode >> 6) & 7) as u16;
                    mode &= (u32::from(e.perm) << 6) | !0o700;
                }
                OTHER => {
                    e.perm &= (mode & 7) as u16;
                    mode &= u32::from(e.perm) | !0o007;
                }
                _ => {}
            }
        }
        let group_tag = if has_mask { MASK } else { GROUP_OBJ };
        if let Some(e) = self.0.iter_mut().find(|e| e.tag == group_tag) {
            e.perm &= ((mode >> 3) & 7) as u16;
            mode &= (u32::from(e.perm) << 3) | !0o070;
        }
        mode & 0o777
    }
}

impl AtomFuse {
    /// Setting an access ACL: the mode's rwx bits follow it; one the mode says all of is not
    /// stored (an older one is removed).
    pub(crate) fn set_access_acl(
        &self,
        ino: Ino,
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<(), Error> {
        let acl = Acl::parse(value)?;
        let meta = self.store.getattr(ino)?;
        if acl.is_minimal() {
            match self.store.removexattr(ino, ACCESS, tx) {
                Ok(()) | Err(Error::NoAttribute(_)) => {}
                Err(e) => return Err(e),
            }
        } else {
            self.store.setxattr(ino, ACCESS, value, how, tx)?;
        }
        let attr = SetAttr {
            perm: Some((meta.perm & !0o777) | acl.mode()),
            ..SetAttr::default()
        };
        self.store.setattr(ino, &attr, tx).map(drop)
    }

    /// After a chmod to `perm`: the access ACL, if any, takes the new bits.
    pub(crate) fn chmod_acl(&self, ino: Ino, perm: u32, tx: Option<TxId>) -> Result<(), Error> {
        let value = match self.store.getxattr(ino, ACCESS) {
            Ok(v) => v,
            Err(Error::NoAttribute(_)) | Err(Error::Unsupported(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut acl = Acl::parse(&value)?;
        acl.chmod(perm);
        self.store
            .setxattr(ino, ACCESS, &acl.encode(), XattrSet::Replace, tx)
    }

    /// A new inode `meta` in `parent`, created with the request's `mode` (before the umask):
    /// when the parent has a default ACL, the inode inherits it. Returns its attributes.
    pub(crate) fn inherit_acl(
        &self,
        parent: Ino,
        meta: Metadata,
        mode: u32,
        tx: Option<TxId>,
    ) -> Result<Metadata, Error> {
        if !self.acls_enforced() {
            return Ok(meta);
        }
        let default = match self.store.getxattr(parent, DEFAULT) {
            Ok(v) => v,
            Err(Error::NoAttribute(_)) | Err(Error::Unsupported(_)) => return Ok(meta),
            Err(e) => return Err(e),
        };
        let mut acl = Acl::parse(&default)?;
        if meta.is_dir() {
            self.store
                .setxattr(meta.ino, DEFAULT, &default, XattrSet::Either, tx)?;
        }
        let bits = acl.create_masq(mode);
        if !acl.is_minimal() {
            self.store
                .setxattr(meta.ino, ACCESS, &acl.encode(), XattrSet::Either, tx)?;
        }
        let attr = SetAttr {
            perm: Some((mode & 0o7000) | bits),
            ..SetAttr::default()
        };
        self.store.setattr(meta.ino, &attr, tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl(entries
            .iter()
            .map(|&(tag, perm, id)| Entry { tag, perm, id })
            .collect())
    }

    #[test]
    fn round_trip_and_refusals() {
        let a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 6, 1234),
            (GROUP_OBJ, 5, 0),
            (MASK, 6, 0),
            (OTHER, 4, 0),
        ]);
        assert_eq!(Acl::parse(&a.encode()).ok(), Some(a.clone()));
        assert!(!a.is_minimal());
        assert_eq!(a.mode(), 0o764, "the group bits are the mask's");
        let v = a.encode();
        assert!(Acl::parse(&v[..v.len() - 1]).is_err());
        assert!(Acl::parse(&v[..3]).is_err());
        let mut wrong = v.clone();
        wrong[0] = 3;
        assert!(Acl::parse(&wrong).is_err());
        assert!(Acl::parse(&acl(&[(USER_OBJ, 7, 0), (OTHER, 0, 0)]).encode()).is_err());
        assert!(Acl::parse(
            &acl(&[
                (USER_OBJ, 7, 0),
                (GROUP_OBJ, 0, 0),
                (OTHER, 0, 0),
                (0x40, 1, 0)
            ])
            .encode()
        )
        .is_err());
    }

    #[test]
    fn chmod_and_inheritance_follow_the_kernel() {
        let mut a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 1234),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        a.chmod(0o640);
        assert_eq!(a.mode(), 0o640);
        assert_eq!(a.perm_of(USER), Some(7), "named entries keep their bits");
        assert_eq!(
            a.perm_of(GROUP_OBJ),
            Some(5),
            "with a mask, the group entry stays"
        );
        let mut d = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 1234),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        assert_eq!(d.create_masq(0o666), 0o664);
        assert_eq!(d.perm_of(MASK), Some(6));
        assert_eq!(d.perm_of(USER_OBJ), Some(6));
        let mut minimal = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 0, 0), (OTHER, 0, 0)]);
        assert_eq!(minimal.create_masq(0o777), 0o700);
    }
}
