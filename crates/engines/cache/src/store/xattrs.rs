//! Extended attributes as the home entry's own extended attributes (user.*, trusted.* and
//! security.* under their names). The POSIX ACL names (`system.posix_acl_*`) are kept as
//! opaque bytes under `trusted.atomfs.system.posix_acl_*`: set as real ACLs they would change
//! the host's permission checks in the home directory, and the kernel rewrites what it is
//! given. The prefix `trusted.atomfs.` is the engine's: a store name under it is refused.
//!
//! Outside a transaction a change is one host call (atomic) made durable (`sync_node`)
//! before it returns. Inside one, the old value is saved in a trash file first
//! (format/saved_xattr.rs, synced) and an `Xattr` intent names it, so that an abort and
//! recovery put the old value back; the commit deletes the saved file.
//!
//! Each entry holds at most `CacheConfig::xattr_bytes_max` bytes of attributes (names with
//! their NUL, and values); past it a set answers NoSpace (ENOSPC), as ext4 does when its
//! attribute block is full.

use super::ops::intent;
use super::{CacheStore, Undo, TRASH_NAME};
use crate::format::intent::IntentKind;
use crate::format::saved_xattr::SavedXattr;
use crate::home::host_err;
use hostfs::{HostFs, OpenOptions, XattrHow};
use pmem::Region;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::{
    check_xattr_name, check_xattr_value, Error, Ino, Result, TxId, XattrNamespace, XattrSet,
};

/// Host names under which the engine keeps store attributes the host would interpret.
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

/// Bytes an attribute takes against `xattr_bytes_max`.
fn cost(name: &[u8], value: &[u8]) -> u64 {
    (name.len() + 1 + value.len()) as u64
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    fn old_value(&self, p: &Path, host: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.host.get_xattr(p, host) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.errno() == libc::ENODATA => Ok(None),
            Err(e) => Err(host_err(e)),
        }
    }

    pub(super) fn do_getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let host = host_name(name)?;
        let t = self.t.lock();
        let p = t.names.path(ino)?;
        self.old_value(&p, &host)?
            .ok_or_else(|| Error::NoAttribute(String::from_utf8_lossy(name).into_owned()))
    }

    pub(super) fn do_listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let t = self.t.lock();
        let p = t.names.path(ino)?;
        let names = self.host.list_xattr(&p).map_err(host_err)?;
        Ok(names.iter().map(|n| store_name(n)).collect())
    }

    /// Bytes of attributes the entry at `p` holds (names with their NUL, and values).
    pub(super) fn xattr_bytes(&self, p: &Path) -> Result<u64> {
        let mut total = 0;
        for n in self.host.list_xattr(p).map_err(host_err)? {
            let v = self.old_value(p, &n)?.unwrap_or_default();
            total += cost(&n, &v);
        }
        Ok(total)
    }

    /// Set (`Some`) or remove (`None`) the attribute `name` of `ino`.
    pub(super) fn change_xattr(
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
        let mut t = self.t.lock();
        Self::tx_open(&t, tx)?;
        let p = t.names.path(ino)?;
        let old = self.old_value(&p, &host)?;
        let shown = || String::from_utf8_lossy(name).into_owned();
        match (how, &old, value) {
            (XattrSet::Create, Some(_), _) => return Err(Error::Exists(shown())),
            (XattrSet::Replace, None, _) | (_, None, None) => {
                return Err(Error::NoAttribute(shown()))
            }
            _ => {}
        }
        Self::check_owner(&t, &[ino], tx)?;
        if let Some(value) = value {
            let max = self.cache.config().xattr_bytes_max;
            let freed = old.as_deref().map_or(0, |v| cost(&host, v));
            let total = self.xattr_bytes(&p)? - freed + cost(&host, value);
            if total > max {
                return Err(Error::NoSpace(format!(
                    "{}: {total} bytes of extended attributes, at most {max} an entry",
                    p.display()
                )));
            }
        }
        let slot = match tx {
            Some(tx) => {
                let (saved, slot) = self.save_old_value(&mut t, tx, &p, &host, old)?;
                Self::push_undo(&mut t, Some(tx), Undo::Xattr { ino, saved }, slot);
                slot
            }
            None => None,
        };
        let changed = match value {
            Some(v) => self.host.set_xattr(&p, &host, v, how_of(how)),
            None => self.host.remove_xattr(&p, &host),
        };
        changed.map_err(host_err)?;
        if slot.is_none() {
            // persist: the attribute change is durable.
            self.host.sync_node(&p).map_err(host_err)?;
        }
        Ok(())
    }

    /// Save the old value in a trash file, durably, then log the intent naming it.
    fn save_old_value(
        &self,
        t: &mut super::Tables,
        tx: TxId,
        p: &Path,
        host: &[u8],
        old: Option<Vec<u8>>,
    ) -> Result<(PathBuf, Option<u64>)> {
        let trash = self.ensure_trash()?;
        t.trash_seq += 1;
        let saved = trash.join(format!("xattr-{}-{}", crate::now_tag(), t.trash_seq));
        let record = SavedXattr {
            name: host.to_vec(),
            value: old,
        };
        let f = self
            .host
            .open(&saved, &OpenOptions::create_new())
            .map_err(host_err)?;
        let written = self
            .host
            .write_all_at(&f, 0, &record.encode())
            .and_then(|()| self.host.sync_all(&f))
            .and_then(|()| self.host.sync_dir(trash));
        // persist: the old value is durable before the intent that names it.
        if let Err(e) = written {
            let _ = self.host.unlink(&saved);
            return Err(host_err(e));
        }
        match self.intend(t, Some(tx), intent(IntentKind::Xattr, p, &saved)) {
            Ok(slot) => Ok((saved, slot)),
            Err(e) => {
                let _ = self.host.unlink(&saved);
                Err(e)
            }
        }
    }
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    /// The checks of the POSIX records: every saved old value an open transaction's intent
    /// names decodes; no cached file is anything but a regular file at home.
    pub(super) fn fsck_posix(&self, t: &super::Tables, report: &mut store::FsckReport) {
        let live = self.cache.live_intents().unwrap_or_default();
        let mut saved = 0;
        for (slot, _, it) in live
            .iter()
            .filter(|(_, _, it)| it.kind == IntentKind::Xattr)
        {
            saved += 1;
            let b = Path::new(std::ffi::OsStr::from_bytes(&it.b));
            if let Err(why) = read_saved(&*self.host, b) {
                report.problem(
                    format!("saved attribute value {}: {why}", b.display()),
                    format!("intent {slot}"),
                );
            }
        }
        for &ino in t.keys.keys() {
            let Ok(p) = t.names.path(ino) else { continue };
            if let Ok(st) = self.host.stat(&p) {
                if st.kind != hostfs::FileKind::File {
                    report.problem(
                        format!("cached inode {ino} is a {:?} at home", st.kind),
                        format!("inode {ino}"),
                    );
                }
            }
        }
        report
            .checked
            .push(("saved attribute values".into(), saved));
    }
}

/// Read and decode the saved value file `b` (`None`: there is none).
fn read_saved<H: HostFs>(host: &H, b: &Path) -> Result<Option<SavedXattr>> {
    let f = match host.open(b, &OpenOptions::read_only()) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(host_err(e)),
    };
    let len = host.file_stat(&f).map_err(host_err)?.len;
    // A saved value holds a name and a value of at most XATTR_SIZE_MAX bytes.
    let max = 64 + store::xattr::XATTR_NAME_MAX + store::xattr::XATTR_SIZE_MAX;
    if len > max as u64 {
        return Err(Error::corrupt(format!("{}: {len} bytes", b.display()), 0));
    }
    let mut bytes = vec![0u8; len as usize];
    let n = host.read_full_at(&f, 0, &mut bytes).map_err(host_err)?;
    bytes.truncate(n);
    SavedXattr::decode(&bytes)
        .map(Some)
        .map_err(|why| Error::corrupt(format!("{}: {why}", b.display()), 0))
}

/// Undo an attribute change: put the saved value back on `a` (if `a` is still there), then
/// delete the saved file `b`. Idempotent: a missing `b` means it was done already.
pub(super) fn restore_xattr<H: HostFs>(host: &H, a: &Path, b: &Path) -> Result<()> {
    let Some(saved) = read_saved(host, b)? else {
        return Ok(());
    };
    if host.stat(a).is_ok() {
        let done = match saved.value.as_deref() {
            Some(v) => host.set_xattr(a, &saved.name, v, XattrHow::Either),
            None => match host.remove_xattr(a, &saved.name) {
                Err(e) if e.errno() == libc::ENODATA => Ok(()),
                other => other,
            },
        };
        done.map_err(host_err)?;
        // persist: the old value is back before its saved copy goes.
        host.sync_node(a).map_err(host_err)?;
    }
    host.unlink(b).map_err(host_err)?;
    host.sync_dir(b.parent().unwrap_or(Path::new(TRASH_NAME)))
        .map_err(host_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_names_live_under_the_engine_prefix_and_it_is_reserved() {
        assert_eq!(host_name(b"user.a").ok(), Some(b"user.a".to_vec()));
        let acl = host_name(b"system.posix_acl_default").unwrap_or_default();
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
