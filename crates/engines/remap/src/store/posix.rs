//! The [`Store`] calls beyond files and directories (symbolic links, special files,
//! unnamed files, rename modes, fallocate, extended attributes), called from `ops`. Each
//! namespace change runs through `ns` like any other (its own commit outside a
//! transaction); fallocate is a data change of its file like a write. A store of format 1
//! refuses the calls that need format 2's records (docs/format.md, "remap").

use super::{Inner, RemapStore};
use crate::format::FILE_SIZE_MAX;
use crate::namespace::sparse::SparseOp;
use crate::namespace::state::name_str;
use hostfs::HostFs;
use store::{
    check_symlink_target, Error, Fallocate, Fh, FileKind, Ino, Metadata, OpenFlags, RenameMode,
    Result, TxId, XattrSet,
};

impl<H: HostFs> Inner<H> {
    /// Unsupported when the store's format has no records for `what`.
    pub(crate) fn needs_posix_records(&self, what: &str) -> Result<()> {
        if self.format.has_posix_records() {
            return Ok(());
        }
        Err(Error::Unsupported(format!(
            "{what}: this store has on-media format {} (made by an older atomfs), which has no \
             records for it; copy its files into a new store to use it",
            self.format.number()
        )))
    }
}

impl<H: HostFs> RemapStore<H> {
    fn require_format(&self, what: &str) -> Result<()> {
        self.live()?.needs_posix_records(what)
    }

    pub(super) fn do_symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_symlink_target(target)?;
        self.require_format("symbolic links")?;
        self.ns(tx, |st, tx| st.symlink(parent, name, target, tx))
    }

    pub(super) fn do_readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let g = self.live()?;
        let inode = g.st.inode(ino)?;
        if inode.meta.kind != FileKind::Symlink {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symlink"
            )));
        }
        Ok(inode.target.clone())
    }

    pub(super) fn do_mknod(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.require_format("special files")?;
        self.ns(tx, |st, tx| st.mknod(parent, name, kind, perm, rdev, tx))
    }

    /// An unnamed file: nothing is durable until `link` names it (so outside a transaction
    /// there is nothing to commit).
    pub(super) fn do_tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let mut g = self.live()?;
        let max = g.config.open_files_max;
        if g.st.handles.len() as u64 >= max {
            return Err(Error::TooMany {
                what: "open files",
                max,
            });
        }
        g.st.tmpfile(parent, perm, flags, tx)
    }

    pub(super) fn do_rename_with(
        &self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        let ((parent, name), (new_parent, new_name)) = (from, to);
        self.ns(tx, |st, tx| match mode {
            RenameMode::Replace => st.rename(parent, name, new_parent, new_name, tx),
            RenameMode::NoReplace => st.rename_noreplace(parent, name, new_parent, new_name, tx),
            RenameMode::Exchange => st.exchange(parent, name, new_parent, new_name, tx),
        })
    }

    pub(super) fn do_fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let mut g = self.live()?;
        g.st.handle(fh)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        let (ino, h) = g.st.begin_data_change(fh)?;
        let end = off
            .checked_add(len)
            .filter(|&end| end <= FILE_SIZE_MAX)
            .ok_or_else(|| Error::FileTooLarge(format!("inode {ino}")))?;
        g.st.check_owner(&[ino], g.st.data_tx(ino, &h))?;
        g.healthy()?;
        let size = g.st.inode(ino)?.meta.size;
        // Storage past the end of file is never kept: a KEEP_SIZE range is cut at the size.
        let (keep, sparse) = match op {
            Fallocate::Allocate { keep_size } => (keep_size, SparseOp::Allocate),
            Fallocate::ZeroRange { keep_size } => (keep_size, SparseOp::Zero),
            Fallocate::PunchHole => (
                true,
                SparseOp::Punch {
                    holes: g.format.has_posix_records(),
                },
            ),
        };
        let grows = !keep && end > size;
        let limit = if keep { end.min(size) } else { end };
        let inode = g.st.inode(ino)?;
        // A plan longer than the room plus the blocks already pending cannot fit: it is cut
        // there (memory bounded) and refused below.
        let max = g.config.pending_blocks_max + inode.atree.pending_count();
        let plan = inode.plan(sparse, off, limit, max);
        g.check_pending_adds(ino, inode.pending_adds(&plan))?;
        g.st.record_change(ino, &h);
        let Inner { st, media, .. } = &mut *g;
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        if grows {
            inode.set_len(media, end)?;
        }
        inode.apply_plan(media, &plan)?;
        inode.touch_data();
        Self::after_data_change(&mut g, ino, &h)
    }

    pub(super) fn do_getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        store::check_xattr_name(name)?;
        let g = self.live()?;
        g.st.inode(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoAttribute(name_str(name)))
    }

    pub(super) fn do_listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Ok(self.live()?.st.inode(ino)?.xattrs.keys().cloned().collect())
    }

    pub(super) fn do_setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        store::check_xattr_name(name)?;
        store::check_xattr_value(value)?;
        self.require_format("extended attributes")?;
        let max = self.live()?.config.xattr_bytes_max;
        self.ns(tx, |st, tx| st.setxattr(ino, name, value, how, max, tx))
    }

    pub(super) fn do_removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        store::check_xattr_name(name)?;
        self.require_format("extended attributes")?;
        self.ns(tx, |st, tx| st.removexattr(ino, name, tx))
    }
}
