//! The Store API over [`MmioStore`]: a thin adapter that checks the store is open and hands
//! each call to the subsystem that serves it (`namespace/`, `file/handles.rs`,
//! `transaction/`, `lifecycle/`).

use crate::host::FileMedia;
use crate::lifecycle::MmioStore;
use pmem::Region;
use std::any::Any;
use store::{
    DirEntry, Fallocate, Fh, FileKind, FsckReport, Ino, Limit, Metadata, OpenFlags, RenameMode,
    Result, SetAttr, StatFs, Store, TxId, XattrSet,
};

impl<R: Region, M: FileMedia> Store for MmioStore<R, M> {
    fn engine_name(&self) -> String {
        format!("mmio ({:?})", self.shared.config.policy_mode).to_lowercase()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.check()?;
        self.lookup_child(parent, name)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.check()?;
        self.attr_of(ino)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        self.set_attr(ino, attr, tx)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        self.create_file(parent, name, perm, tx)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        self.make_dir(parent, name, perm, tx)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check()?;
        self.unlink_name(parent, name, tx)
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check()?;
        self.remove_dir(parent, name, tx)
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check()?;
        self.rename_entry(parent, name, new_parent, new_name, tx)
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.check()?;
        self.link_entry(ino, new_parent, new_name, tx)
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.check()?;
        self.make_symlink(parent, name, target, tx)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.check()?;
        self.read_link(ino)
    }

    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.check()?;
        self.make_node(parent, name, kind, perm, rdev, tx)
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        self.check()?;
        self.make_tmpfile(parent, perm, flags, tx)
    }

    fn rename_with(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check()?;
        self.rename_mode((parent, name), (new_parent, new_name), mode, tx)
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        self.check()?;
        self.fallocate_handle(fh, op, off, len)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.check()?;
        self.get_attr(ino, name)
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check()?;
        self.change_attr(ino, name, Some(value), how, tx)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.check()?;
        self.list_attrs(ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check()?;
        self.change_attr(ino, name, None, XattrSet::Either, tx)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        self.check()?;
        self.list_dir(ino)
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.check()?;
        self.open_handle(ino, flags)
    }

    fn release(&self, fh: Fh) -> Result<()> {
        self.check()?;
        self.release_handle(fh)
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        self.read_handle(fh, off, buf)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.check()?;
        self.write_handle(fh, off, data)
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.check()?;
        self.set_len_handle(fh, len)
    }

    fn fsync(&self, fh: Fh, datasync: bool) -> Result<()> {
        self.check()?;
        self.fsync_handle(fh, datasync)
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        self.check()?;
        self.stat_handle(fh)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        self.check()?;
        self.set_handle_atomic(fh, atomic)
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        self.check()?;
        self.sync_handles(fhs)
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        self.check()?;
        self.abort_handles(fhs)
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.check()?;
        self.begin_tx(files)
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        self.check()?;
        self.add_to_tx(tx, fh)
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.check()?;
        self.commit_tx(tx)
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        self.check()?;
        self.abort_tx(tx)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.check()?;
        self.space()
    }

    fn stats(&self) -> Vec<(String, u64)> {
        self.counter_list()
    }

    fn limits(&self) -> Result<Vec<Limit>> {
        self.check()?;
        self.limit_list()
    }

    fn fsck(&self) -> Result<FsckReport> {
        self.check()?;
        Ok(crate::file::nvmmap::fsck(&self.shared))
    }

    fn unmount(&self) -> Result<()> {
        self.unmount_store()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
