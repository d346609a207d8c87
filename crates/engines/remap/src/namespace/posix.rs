//! The namespace side of the POSIX calls beyond files and directories — symbolic links,
//! special files, unnamed files, rename modes and extended attributes — with the semantics
//! of the conformance model (crates/testing/conformance/src/model/posix.rs).

use super::inode::{Inode, Naming, XattrsState};
use super::state::{bind, check_name, name_str, Handle, State};
use crate::format::ops::Op;
use crate::format::Format;
use store::{
    check_xattr_name, check_xattr_value, now_ns, Error, Fh, FileKind, FsckReport, Ino, Metadata,
    OpenFlags, Result, TxId, XattrSet,
};

impl State {
    pub fn new_handle(&mut self, ino: Ino, flags: OpenFlags) -> Fh {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(
            fh,
            Handle {
                ino,
                flags,
                tx: None,
            },
        );
        Fh(fh)
    }

    /// A symbolic link holding `target` (checked by the caller).
    pub fn symlink(
        &mut self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let meta = self.new_inode(parent, name, FileKind::Symlink, 0o777, tx)?;
        let link = self
            .inodes
            .get_mut(&meta.ino)
            .ok_or_else(|| Error::NotFound(format!("inode {}", meta.ino)))?;
        link.target = target.to_vec();
        link.meta.size = target.len() as u64;
        link.meta.allocated = 0;
        Ok(link.meta)
    }

    /// A FIFO, socket or device node.
    pub fn mknod(
        &mut self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_name(name)?;
        if !kind.is_special() {
            return Err(Error::InvalidArgument(format!(
                "mknod of a {kind:?} (FIFOs, sockets and device nodes only)"
            )));
        }
        let meta = self.new_inode(parent, name, kind, perm, tx)?;
        let node = self
            .inodes
            .get_mut(&meta.ino)
            .ok_or_else(|| Error::NotFound(format!("inode {}", meta.ino)))?;
        if kind.is_device() {
            node.meta.rdev = rdev;
        }
        Ok(node.meta)
    }

    /// An unnamed regular file, open; in `tx`, its handle is bound to it.
    pub fn tmpfile(
        &mut self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        self.tx_check(tx)?;
        self.dir(parent)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        let tx = tx.map(|t| t.0);
        self.save(tx, ino);
        let mut inode = Inode::new(ino, FileKind::File, perm, parent);
        inode.meta.nlink = 0;
        inode.naming = Naming::Unnamed;
        let meta = inode.meta;
        self.inodes.insert(ino, inode);
        let fh = self.new_handle(ino, flags);
        if let Some(id) = tx {
            bind(self, id, fh);
        }
        Ok((meta, fh))
    }

    /// The checks every rename mode starts with, in the model's order.
    fn check_two_names(&self, name: &[u8], new_name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_name(name)?;
        check_name(new_name)?;
        self.tx_check(tx)
    }

    /// The inode the entry `name` of directory `dir` names (NotFound when none).
    fn entry(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        self.dir(dir)?
            .entries
            .get(name)
            .copied()
            .ok_or_else(|| Error::NotFound(name_str(name)))
    }

    /// RENAME_NOREPLACE: as rename, but Exists when the target name exists.
    pub fn rename_noreplace(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check_two_names(name, new_name, tx)?;
        self.entry(parent, name)?;
        if self.dir(new_parent)?.entries.contains_key(new_name) {
            return Err(Error::Exists(name_str(new_name)));
        }
        self.rename(parent, name, new_parent, new_name, tx)
    }

    /// RENAME_EXCHANGE: swap two existing names (a directory's parent follows it). Logged as
    /// two entry operations of one record: both or neither survive a crash.
    pub fn exchange(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check_two_names(name, new_name, tx)?;
        let a = self.entry(parent, name)?;
        let b = self.entry(new_parent, new_name)?;
        if a == b {
            return Ok(());
        }
        let a_dir = self.inode(a)?.meta.kind == FileKind::Dir;
        let b_dir = self.inode(b)?.meta.kind == FileKind::Dir;
        if (a_dir && self.is_ancestor(a, new_parent)) || (b_dir && self.is_ancestor(b, parent)) {
            return Err(Error::InvalidArgument(format!(
                "cannot exchange {} with a directory inside it",
                name_str(name)
            )));
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[parent, new_parent, a, b], tx)?;
        for ino in [parent, new_parent, a, b] {
            self.save(tx, ino);
        }
        self.set_entry(tx, parent, name, Some(b));
        self.set_entry(tx, new_parent, new_name, Some(a));
        let now = now_ns();
        let links = |dir: bool| u32::from(dir);
        for (dir, gone, came) in [(parent, a_dir, b_dir), (new_parent, b_dir, a_dir)] {
            if let Some(p) = self.inodes.get_mut(&dir) {
                p.meta.nlink = p.meta.nlink - links(gone) + links(came);
                p.meta.mtime = now;
                p.meta.ctime = now;
            }
        }
        for (ino, dir, to) in [(a, a_dir, new_parent), (b, b_dir, parent)] {
            if let Some(i) = self.inodes.get_mut(&ino) {
                i.meta.ctime = now;
                if dir {
                    i.parent = to;
                }
            }
        }
        for (dir, n, ino) in [(parent, name, b), (new_parent, new_name, a)] {
            let name = n.to_vec();
            self.log(tx, Op::AddEntry { dir, ino, name });
        }
        Ok(())
    }

    /// Set an attribute; `bytes_max`: the inode's attribute bytes (names and values) limit.
    pub fn setxattr(
        &mut self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        bytes_max: u64,
        tx: Option<TxId>,
    ) -> Result<()> {
        check_xattr_name(name)?;
        check_xattr_value(value)?;
        self.tx_check(tx)?;
        let inode = self.inode(ino)?;
        store::check_xattr_change(name, inode.meta.kind)?;
        let old = inode.xattrs.get(name);
        match how {
            XattrSet::Create if old.is_some() => return Err(Error::Exists(name_str(name))),
            XattrSet::Replace if old.is_none() => return Err(Error::NoAttribute(name_str(name))),
            _ => {}
        }
        let freed = old.map_or(0, |v| (name.len() + v.len()) as u64);
        let total = inode.xattr_bytes() - freed + (name.len() + value.len()) as u64;
        if total > bytes_max {
            return Err(Error::NoSpace(format!(
                "inode {ino}: {total} bytes of extended attributes, at most {bytes_max} per \
                 inode (xattr_bytes_max)"
            )));
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[ino], tx)?;
        self.save(tx, ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.xattrs.insert(name.to_vec(), value.to_vec());
            i.xattrs_changed = XattrsState::Changed;
            i.meta.ctime = now_ns();
        }
        Ok(())
    }

    pub fn removexattr(&mut self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_xattr_name(name)?;
        self.tx_check(tx)?;
        store::check_xattr_change(name, self.inode(ino)?.meta.kind)?;
        if !self.inode(ino)?.xattrs.contains_key(name) {
            return Err(Error::NoAttribute(name_str(name)));
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[ino], tx)?;
        self.save(tx, ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.xattrs.remove(name);
            i.xattrs_changed = XattrsState::Changed;
            i.meta.ctime = now_ns();
        }
        Ok(())
    }
}

impl State {
    /// What fsck checks of the records of format 2: symlink targets against their sizes,
    /// no data or node fields on kinds that have none, attribute names, holes within files.
    pub fn fsck_posix(&self, report: &mut FsckReport, format: Format) {
        for (&ino, i) in &self.inodes {
            let at = || format!("inode {ino}");
            let kind = i.meta.kind;
            if kind == FileKind::Symlink
                && (i.target.is_empty() || i.target.len() as u64 != i.meta.size)
            {
                report.problem(
                    format!(
                        "symlink of size {} has a target of {} bytes",
                        i.meta.size,
                        i.target.len()
                    ),
                    at(),
                );
            }
            if kind != FileKind::File && (!i.atree.is_empty() || !i.home_holes.is_empty()) {
                report.problem(format!("a {kind:?} with file data"), at());
            }
            if !kind.is_device() && i.meta.rdev != 0 {
                report.problem(
                    format!("a {kind:?} with device number {}", i.meta.rdev),
                    at(),
                );
            }
            if i.xattrs.keys().any(|n| check_xattr_name(n).is_err()) {
                report.problem("an extended attribute with an invalid name", at());
            }
            if i.home_holes.range(i.home_blocks..).next().is_some() {
                report.problem("a hole past the home file's blocks", at());
            }
            let posix = kind == FileKind::Symlink || kind.is_special() || !i.xattrs.is_empty();
            if posix && !format.has_posix_records() {
                report.problem("format 1 store holds a format 2 inode", at());
            }
        }
    }
}
