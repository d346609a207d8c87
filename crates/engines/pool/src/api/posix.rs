//! The rest of the POSIX file API behind the Store trait: the argument checks every engine
//! shares (crates/api/store), the format check, and the namespace or data operation each
//! call runs (namespace/posix.rs, namespace/xattr.rs, data/fallocate.rs); O_TMPFILE's unnamed
//! file and the handle that keeps it alive.

use crate::api::pool_store::PoolStore;
use crate::core::Naming;
use pmem::Region;
use store::path::check_entry_name;
use store::{
    check_symlink_target, check_xattr_name, check_xattr_value, Error, Fh, FileKind, Metadata,
    OpenFlags, RenameMode, Result, Store, TxId, XattrSet,
};

impl<R: Region> PoolStore<R> {
    /// `Store::symlink`.
    pub(crate) fn make_symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        check_symlink_target(target)?;
        self.core.check_posix_format("symlink")?;
        let ino = self.ns_op(tx, |core, t| core.symlink_node(t, parent, name, target))?;
        self.core.metadata(ino)
    }

    /// `Store::mknod`.
    pub(crate) fn make_special(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        if !kind.is_special() {
            return Err(Error::InvalidArgument(format!(
                "mknod of a {kind:?} (FIFOs, sockets and device nodes only)"
            )));
        }
        self.core.check_posix_format("mknod")?;
        let ino = self.ns_op(tx, |core, t| {
            core.special_node(t, parent, name, kind, perm, rdev)
        })?;
        self.core.metadata(ino)
    }

    /// `Store::rename_with`.
    pub(crate) fn rename_in_mode(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        self.ns_op(tx, |core, t| match mode {
            RenameMode::Replace => core.rename_entry(t, parent, name, new_parent, new_name),
            RenameMode::NoReplace => {
                core.lookup_slot(parent, name)?;
                if core.lookup_slot(new_parent, new_name).is_ok() {
                    return Err(Error::Exists(
                        String::from_utf8_lossy(new_name).into_owned(),
                    ));
                }
                core.rename_entry(t, parent, name, new_parent, new_name)
            }
            RenameMode::Exchange => core.exchange_entries(t, parent, name, new_parent, new_name),
        })
    }

    /// `Store::getxattr` (under the namespace lock: a change frees the old chain only
    /// after its commit, and no change runs meanwhile).
    pub(crate) fn xattr_get(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        self.core.check_open()?;
        self.core.check_posix_format("extended attributes")?;
        let _ns = self.core.ns.lock();
        self.core.get_xattr(ino, name)
    }

    /// `Store::listxattr`.
    pub(crate) fn xattr_list(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        self.core.check_open()?;
        self.core.check_posix_format("extended attributes")?;
        let _ns = self.core.ns.lock();
        self.core.list_xattrs(ino)
    }

    /// `Store::setxattr` (`value` Some) and `Store::removexattr` (None).
    pub(crate) fn xattr_change(
        &self,
        ino: u64,
        name: &[u8],
        value: Option<&[u8]>,
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        check_xattr_name(name)?;
        if let Some(value) = value {
            check_xattr_value(value)?;
        }
        self.core.check_posix_format("extended attributes")?;
        store::check_xattr_change(name, store::Store::getattr(self, ino)?.kind)?;
        self.ns_op(tx, |core, t| core.change_xattr(t, ino, name, value, how))
    }

    /// A regular file with no name, made in directory `parent` (in `tx` when given, its
    /// handle then bound to `tx`), open with `flags`. It lives while a handle is open or
    /// until `link` names it; its last `release` frees it (`PoolStore::reap`), and so does
    /// recovery after a crash (nlink 0).
    pub(crate) fn unnamed_file(
        &self,
        parent: u64,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let ino = self.ns_op(tx, |core, t| core.unnamed_node(t, parent, perm))?;
        self.core.cell(ino).lock().naming = Naming::Unnamed;
        if let Some(id) = tx {
            // Its create is the transaction's until that ends: a release of its last handle
            // before then must not free it (an abort frees its number, a commit reaps it),
            // as for a file whose last link an open transaction took.
            let cell = self.tx_cell(id.0)?;
            let _ns = self.core.ns.lock();
            cell.lock().orphans.push(ino);
            *self.core.unlinking.lock().entry(ino).or_default() += 1;
        }
        let opened = self.open(ino, flags).and_then(|fh| {
            if let Some(id) = tx {
                if let Err(e) = self.tx_add(id, fh) {
                    let _ = self.release(fh);
                    return Err(e);
                }
            }
            Ok(fh)
        });
        match opened {
            Ok(fh) => Ok((self.core.metadata(ino)?, fh)),
            Err(e) => {
                // No handle keeps it: free it now (recovery would at the next mount).
                let _ns = self.core.ns.lock();
                let _ = self.reap(ino);
                Err(e)
            }
        }
    }
}
