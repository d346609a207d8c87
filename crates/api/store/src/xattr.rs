//! Extended attributes: the rules every engine shares (names, namespaces, sizes), checked
//! before an engine looks at its own state, so every engine answers a bad call alike.
//!
//! Names are `namespace.rest`: `user.`, `trusted.` and `security.` with a non-empty rest, and
//! the two POSIX ACLs `system.posix_acl_access` / `system.posix_acl_default` (stored and served
//! as opaque values; the kernel interprets them under `default_permissions`). Any other name is
//! [`Error::Unsupported`] (EOPNOTSUPP, as Linux answers an unknown namespace). A name is at most
//! [`XATTR_NAME_MAX`] bytes ([`Error::OutOfRange`], ERANGE), a value at most
//! [`XATTR_SIZE_MAX`] ([`Error::TooLarge`], E2BIG). An engine may hold less per inode in all
//! and then answers [`Error::NoSpace`] (ENOSPC), as ext4 does.

use crate::{Error, Result};

/// Longest attribute name, in bytes (Linux XATTR_NAME_MAX).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest attribute value, in bytes (Linux XATTR_SIZE_MAX).
pub const XATTR_SIZE_MAX: usize = 65536;

/// The namespaces of attribute names the store keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrNamespace {
    User,
    Trusted,
    Security,
    /// `system.posix_acl_access` or `system.posix_acl_default`.
    PosixAcl,
}

const PREFIXES: [(&[u8], XattrNamespace); 3] = [
    (b"user.", XattrNamespace::User),
    (b"trusted.", XattrNamespace::Trusted),
    (b"security.", XattrNamespace::Security),
];
const ACLS: [&[u8]; 2] = [b"system.posix_acl_access", b"system.posix_acl_default"];

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Whether attribute `name` may be set or removed on an inode of `kind`: as Linux, `user.`
/// attributes only on regular files and directories (others: NotPermitted, EPERM; a read of
/// one finds none, ENODATA).
pub fn check_xattr_change(name: &[u8], kind: crate::FileKind) -> Result<()> {
    let user = check_xattr_name(name)? == XattrNamespace::User;
    if user && !matches!(kind, crate::FileKind::File | crate::FileKind::Dir) {
        return Err(Error::NotPermitted(format!(
            "attribute {:?} on a {kind:?}: user. attributes are kept on regular files and \
             directories only",
            shown(name)
        )));
    }
    Ok(())
}

/// Check an attribute name; returns its namespace.
pub fn check_xattr_name(name: &[u8]) -> Result<XattrNamespace> {
    if name.len() > XATTR_NAME_MAX {
        return Err(Error::OutOfRange(format!(
            "attribute name of {} bytes (limit {XATTR_NAME_MAX})",
            name.len()
        )));
    }
    if name.is_empty() || name.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "invalid attribute name {:?}",
            shown(name)
        )));
    }
    if ACLS.contains(&name) {
        return Ok(XattrNamespace::PosixAcl);
    }
    for (prefix, ns) in PREFIXES {
        if let Some(rest) = name.strip_prefix(prefix) {
            if rest.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "attribute name {:?} has nothing after its namespace",
                    shown(name)
                )));
            }
            return Ok(ns);
        }
    }
    Err(Error::Unsupported(format!(
        "attribute namespace of {:?} (kept: user., trusted., security., system.posix_acl_*)",
        shown(name)
    )))
}

/// Check an attribute value's size.
pub fn check_xattr_value(value: &[u8]) -> Result<()> {
    if value.len() > XATTR_SIZE_MAX {
        return Err(Error::TooLarge(format!(
            "attribute value of {} bytes (limit {XATTR_SIZE_MAX})",
            value.len()
        )));
    }
    Ok(())
}

/// Check a symbolic link target: not empty (ENOENT, as symlink(2)), no NUL, at most
/// [`SYMLINK_MAX`](crate::SYMLINK_MAX) bytes (ENAMETOOLONG).
pub fn check_symlink_target(target: &[u8]) -> Result<()> {
    if target.is_empty() {
        return Err(Error::NotFound("empty symbolic link target".into()));
    }
    if target.len() > crate::SYMLINK_MAX {
        return Err(Error::NameTooLong {
            len: target.len(),
            max: crate::SYMLINK_MAX,
        });
    }
    if target.contains(&0) {
        return Err(Error::InvalidArgument(
            "symbolic link target contains NUL".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_by_namespace_and_length() {
        assert_eq!(check_xattr_name(b"user.a").ok(), Some(XattrNamespace::User));
        assert_eq!(
            check_xattr_name(b"trusted.overlay.x").ok(),
            Some(XattrNamespace::Trusted)
        );
        assert_eq!(
            check_xattr_name(b"system.posix_acl_default").ok(),
            Some(XattrNamespace::PosixAcl)
        );
        assert!(matches!(
            check_xattr_name(b"system.other"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            check_xattr_name(b"os2.x"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            check_xattr_name(b"user."),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            check_xattr_name(b""),
            Err(Error::InvalidArgument(_))
        ));
        let long = [b"user.".as_slice(), &[b'a'; 251]].concat();
        assert!(check_xattr_name(&long[..255]).is_ok());
        assert!(matches!(check_xattr_name(&long), Err(Error::OutOfRange(_))));
    }

    #[test]
    fn values_and_targets_are_bounded() {
        assert!(check_xattr_value(&vec![0; XATTR_SIZE_MAX]).is_ok());
        assert!(matches!(
            check_xattr_value(&vec![0; XATTR_SIZE_MAX + 1]),
            Err(Error::TooLarge(_))
        ));
        assert!(matches!(check_symlink_target(b""), Err(Error::NotFound(_))));
        assert!(check_symlink_target(&[b'x'; crate::SYMLINK_MAX]).is_ok());
        assert!(matches!(
            check_symlink_target(&[b'x'; crate::SYMLINK_MAX + 1]),
            Err(Error::NameTooLong { .. })
        ));
        assert!(matches!(
            check_symlink_target(b"a\0b"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
