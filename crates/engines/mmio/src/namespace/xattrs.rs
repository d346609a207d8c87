//! Extended attributes as the host's extended attributes of the entry (user.*, trusted.* and
//! security.* under their own names). The POSIX ACL names (`system.posix_acl_*`) are kept as
//! opaque bytes under `trusted.atomfs.system.posix_acl_*`: set as real ACLs they would change
//! the host's permission checks on the store directory, and the kernel rewrites what it is
//! given (an ACL of no entries is a removal), so the bytes would not read back as written.
//! The prefix `trusted.atomfs.` is the engine's: a store name under it is refused.
//!
//! Outside a transaction a change is one host call (atomic) made durable before it returns.
//! Inside one, the attribute's old value is saved in a trash file first (`saved_xattr.rs`)
//! and an `Xattr` intent names it, so abort and recovery put the old value back.

use crate::host::FileMedia;
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::log::intent::{Intent, TRASH_NAME};
use crate::log::saved_xattr::SavedXattr;
use crate::namespace::tables::Tables;
use hostfs::XattrHow;
use pmem::Region;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use store::{
    check_xattr_name, check_xattr_value, Error, Ino, Result, TxId, XattrNamespace, XattrSet,
};

/// Host names the engine keeps store attributes under that the host would interpret.
const ENGINE_PREFIX: &[u8] = b"trusted.atomfs.";

/// The host name of the store attribute `name` (checked).
fn host_name(name: &[u8]) -> Result<Vec<u8>> {
    let ns = check_xattr_name(name)?;
    if name.starts_with(ENGINE_PREFIX) {
        return Err(Error::InvalidArgument(format!(
            "attribute name {:?}: the prefix trusted.atomfs. is the store's own",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(match ns {
        XattrNamespace::PosixAcl => [ENGINE_PREFIX, name].concat(),
        _ => name.to_vec(),
    })
}

/// The store name of the host attribute `host`.
fn store_name(host: &[u8]) -> Vec<u8> {
    host.strip_prefix(ENGINE_PREFIX).unwrap_or(host).to_vec()
}

fn how_of(how: XattrSet) -> XattrHow {
    match how {
        XattrSet::Either => XattrHow::Either,
        XattrSet::Create => XattrHow::Create,
        XattrSet::Replace => XattrHow::Replace,
    }
}

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn get_attr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let host = host_name(name)?;
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        self.shared
            .media
            .get_xattr(&path, &host)
            .map_err(|e| io_err(&path, "getxattr", e))
    }

    pub(crate) fn list_attrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let names = self
            .shared
            .media
            .list_xattr(&path)
            .map_err(|e| io_err(&path, "listxattr", e))?;
        Ok(names.iter().map(|n| store_name(n)).collect())
    }

    /// Set (`Some`) or remove (`None`) the attribute `name` of `ino`.
    pub(crate) fn change_attr(
        &self,
        ino: Ino,
        name: &[u8],
        value: Option<&[u8]>,
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        let host = host_name(name)?;
        if let Some(value) = value {
            check_xattr_value(value)?;
        }
        store::check_xattr_change(name, store::Store::getattr(self, ino)?.kind)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.path_for(&mut t, ino)?;
        Self::check_owner(&t, &[ino], tx.map(|t| t.0))?;
        let media = &self.shared.media;
        let Some(tx) = tx else {
            return media
                .set_xattr(&path, &host, value, how_of(how))
                .map_err(|e| io_err(&path, "setxattr", e));
        };
        let old = match media.get_xattr(&path, &host) {
            Ok(v) => Some(v),
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => None,
            Err(e) => return Err(io_err(&path, "getxattr", e)),
        };
        let shown = || String::from_utf8_lossy(name).into_owned();
        match (how, &old, value) {
            (XattrSet::Create, Some(_), _) => return Err(Error::Exists(shown())),
            (XattrSet::Replace, None, _) | (_, None, None) => {
                return Err(Error::NoAttribute(shown()))
            }
            _ => {}
        }
        let saved = self.save_old_value(&mut t, tx, &path, &host, old)?;
        if let Err(e) = media.set_xattr(&path, &host, value, how_of(how)) {
            self.withdraw_intent(&mut t, tx);
            let _ = media.unlink(&saved);
            return Err(io_err(&path, "setxattr", e));
        }
        Ok(())
    }

    /// Save the old value in a trash file, durable, then log the intent naming it.
    fn save_old_value(
        &self,
        t: &mut Tables<R, M>,
        tx: TxId,
        path: &Path,
        host: &[u8],
        old: Option<Vec<u8>>,
    ) -> Result<PathBuf> {
        let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let saved = Path::new(TRASH_NAME).join(format!("xattr-{}-{n}", tx.0));
        let record = SavedXattr {
            name: host.to_vec(),
            value: old,
        };
        self.shared
            .media
            .write_new(&saved, &record.encode())
            .map_err(|e| io_err(&saved, "save attribute", e))?;
        let it = Intent::Xattr {
            a: path.to_path_buf(),
            b: saved.clone(),
        };
        if let Err(e) = self.log_intent(t, tx, it) {
            let _ = self.shared.media.unlink(&saved);
            return Err(e);
        }
        Ok(saved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_names_live_under_the_engine_prefix_and_it_is_reserved() {
        assert_eq!(host_name(b"user.a").expect("user"), b"user.a");
        let acl = host_name(b"system.posix_acl_default").expect("acl");
        assert_eq!(acl, b"trusted.atomfs.system.posix_acl_default");
        assert_eq!(store_name(&acl), b"system.posix_acl_default");
        assert_eq!(store_name(b"trusted.t"), b"trusted.t");
        assert!(matches!(
            host_name(b"trusted.atomfs.x"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(host_name(b"os2.x"), Err(Error::Unsupported(_))));
    }
}
