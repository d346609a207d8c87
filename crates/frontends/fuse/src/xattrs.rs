//! Extended attributes through the mount: the store's own (`user.`, `trusted.`, `security.`,
//! `system.posix_acl_*`), with the size-probe protocol of getxattr(2)/listxattr(2), and
//! atomfs's `user.atomfs.atomic`, which switches the atomic mode of the descriptors opened
//! afterwards and is a stored attribute like any other (so it survives a remount). On a
//! store that keeps no extended attributes yet, the atomic attribute is kept in the mount's
//! memory (lost at unmount), the others answer EOPNOTSUPP, and the list is empty.

use crate::fs::AtomFuse;
use crate::ioctl::XATTR_ATOMIC;
use crate::txns::Touched;
use fuser::{Errno, ReplyXattr};
use store::{Error, Ino, TxId, XattrSet};

/// Reply with `value` under the size-probe protocol: size 0 asks for the length; a buffer
/// too small is ERANGE.
pub(crate) fn reply_sized(value: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        match u32::try_from(value.len()) {
            Ok(n) => reply.size(n),
            Err(_) => reply.error(Errno::from_i32(libc::E2BIG)),
        }
    } else if (size as usize) < value.len() {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(value);
    }
}

/// The setxattr(2) flags as the store's [`XattrSet`].
fn set_mode(flags: i32) -> Result<XattrSet, Error> {
    match flags {
        0 => Ok(XattrSet::Either),
        libc::XATTR_CREATE => Ok(XattrSet::Create),
        libc::XATTR_REPLACE => Ok(XattrSet::Replace),
        f => Err(Error::InvalidArgument(format!("setxattr flags {f:#x}"))),
    }
}

/// The value of the atomic attribute: on or off.
fn atomic_value(value: &[u8]) -> Result<bool, Error> {
    match value {
        b"1" | b"1\n" => Ok(true),
        b"0" | b"0\n" => Ok(false),
        _ => Err(Error::InvalidArgument(format!(
            "{XATTR_ATOMIC} takes \"1\" or \"0\""
        ))),
    }
}

impl AtomFuse {
    /// Whether new handles of `ino` open in atomic mode.
    pub(crate) fn atomic_mode(&self, ino: Ino) -> bool {
        match self.store.getxattr(ino, XATTR_ATOMIC.as_bytes()) {
            Ok(v) => v == b"1",
            Err(Error::Unsupported(_)) => self.state.lock().atomic_inodes.contains(&ino),
            Err(_) => false,
        }
    }

    /// setxattr, in the caller's transaction `tx` if it has one.
    pub(crate) fn xattr_set(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: i32,
        tx: Option<TxId>,
    ) -> Result<(), Error> {
        let how = set_mode(flags)?;
        if name == XATTR_ATOMIC.as_bytes() {
            return self.set_atomic_attr(ino, atomic_value(value)?, how, tx);
        }
        if name == crate::acl::ACCESS && self.acls_enforced() {
            self.set_access_acl(ino, value, how, tx)?;
            self.touched(tx, Touched::Inode(ino));
            return Ok(());
        }
        self.store.setxattr(ino, name, value, how, tx)?;
        self.touched(tx, Touched::Inode(ino));
        Ok(())
    }

    /// Atomic mode on (stored as "1") or off (the attribute removed).
    fn set_atomic_attr(
        &self,
        ino: Ino,
        on: bool,
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<(), Error> {
        let name = XATTR_ATOMIC.as_bytes();
        let stored = if on {
            self.store.setxattr(ino, name, b"1", how, tx)
        } else {
            match self.store.removexattr(ino, name, tx) {
                Err(Error::NoAttribute(_)) => Ok(()),
                other => other,
            }
        };
        match stored {
            Ok(()) => self.touched(tx, Touched::Inode(ino)),
            Err(Error::Unsupported(_)) => {
                // A store without extended attributes: the mode lives in the mount.
                self.store.getattr(ino)?;
                let mut st = self.state.lock();
                if on {
                    st.atomic_inodes.insert(ino);
                } else {
                    st.atomic_inodes.remove(&ino);
                }
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// getxattr. The atomic attribute reads "1" or "0" on every file.
    pub(crate) fn xattr_get(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, Error> {
        if name == XATTR_ATOMIC.as_bytes() {
            self.store.getattr(ino)?;
            return Ok(if self.atomic_mode(ino) { b"1" } else { b"0" }.to_vec());
        }
        match self.store.getxattr(ino, name) {
            // Nothing is stored on a store that keeps no attributes.
            Err(Error::Unsupported(_)) => Err(Error::NoAttribute(
                String::from_utf8_lossy(name).into_owned(),
            )),
            other => other,
        }
    }

    /// listxattr: the names, each followed by a NUL.
    pub(crate) fn xattr_list(&self, ino: Ino) -> Result<Vec<u8>, Error> {
        let names = match self.store.listxattr(ino) {
            Ok(names) => names,
            Err(Error::Unsupported(_)) => {
                self.store.getattr(ino)?;
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for n in names {
            out.extend_from_slice(&n);
            out.push(0);
        }
        Ok(out)
    }

    /// removexattr, in the caller's transaction `tx` if it has one.
    pub(crate) fn xattr_remove(
        &self,
        ino: Ino,
        name: &[u8],
        tx: Option<TxId>,
    ) -> Result<(), Error> {
        if name == XATTR_ATOMIC.as_bytes() {
            return self.set_atomic_attr(ino, false, XattrSet::Either, tx);
        }
        self.store.removexattr(ino, name, tx)?;
        self.touched(tx, Touched::Inode(ino));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_atomic_values_are_checked() {
        assert_eq!(set_mode(0).ok(), Some(XattrSet::Either));
        assert_eq!(set_mode(libc::XATTR_CREATE).ok(), Some(XattrSet::Create));
        assert_eq!(set_mode(libc::XATTR_REPLACE).ok(), Some(XattrSet::Replace));
        assert!(set_mode(libc::XATTR_CREATE | libc::XATTR_REPLACE).is_err());
        assert_eq!(atomic_value(b"1\n").ok(), Some(true));
        assert_eq!(atomic_value(b"0").ok(), Some(false));
        assert!(atomic_value(b"yes").is_err());
    }
}
