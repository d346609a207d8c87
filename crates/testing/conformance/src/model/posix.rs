//! The model's special files, unnamed files, rename modes, fallocate and extended attributes.

use super::state::{bind, check_name, name_str, Handle, Inode, State, BLOCK, MODEL_BLOCK};
use super::MODEL_FILE_SIZE_MAX;
use store::{
    check_xattr_change, check_xattr_name, check_xattr_value, now_ns, Error, Fallocate, Fh,
    FileKind, Ino, Metadata, OpenFlags, RenameMode, Result, TxId, XattrSet,
};

impl State {
    pub(crate) fn new_handle(&mut self, ino: Ino, flags: OpenFlags) -> Fh {
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

    pub(crate) fn mknod(
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
        let mut meta = self.new_inode(parent, name, kind, perm, tx)?;
        if kind.is_device() {
            meta.rdev = rdev;
            if let Some(i) = self.inodes.get_mut(&meta.ino) {
                i.meta.rdev = rdev;
            }
        }
        Ok(meta)
    }

    pub(crate) fn tmpfile(
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
        inode.linkable = true;
        let meta = inode.meta;
        self.inodes.insert(ino, inode);
        let fh = self.new_handle(ino, flags);
        if let Some(id) = tx {
            bind(self, id, fh);
        }
        Ok((meta, fh))
    }

    pub(crate) fn rename_with(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        match mode {
            RenameMode::Replace => self.rename(parent, name, new_parent, new_name, tx),
            RenameMode::NoReplace => {
                check_name(name)?;
                check_name(new_name)?;
                self.tx_check(tx)?;
                self.dir(parent)?
                    .entries
                    .get(name)
                    .ok_or_else(|| Error::NotFound(name_str(name)))?;
                if self.dir(new_parent)?.entries.contains_key(new_name) {
                    return Err(Error::Exists(name_str(new_name)));
                }
                self.rename(parent, name, new_parent, new_name, tx)
            }
            RenameMode::Exchange => self.exchange(parent, name, new_parent, new_name, tx),
        }
    }

    fn exchange(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        check_name(name)?;
        check_name(new_name)?;
        self.tx_check(tx)?;
        let a = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        let b = *self
            .dir(new_parent)?
            .entries
            .get(new_name)
            .ok_or_else(|| Error::NotFound(name_str(new_name)))?;
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
        let now = now_ns();
        let links = |dir: bool| u32::from(dir);
        if let Some(p) = self.inodes.get_mut(&parent) {
            p.entries.insert(name.to_vec(), b);
            p.meta.nlink = p.meta.nlink - links(a_dir) + links(b_dir);
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        if let Some(p) = self.inodes.get_mut(&new_parent) {
            p.entries.insert(new_name.to_vec(), a);
            p.meta.nlink = p.meta.nlink - links(b_dir) + links(a_dir);
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        for (ino, dir, to) in [(a, a_dir, new_parent), (b, b_dir, parent)] {
            if let Some(i) = self.inodes.get_mut(&ino) {
                i.meta.ctime = now;
                if dir {
                    i.parent = to;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn fallocate(&mut self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        self.handle(fh)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        let (ino, h) = self.begin_data_change(fh)?;
        let end = off
            .checked_add(len)
            .filter(|&end| end <= MODEL_FILE_SIZE_MAX)
            .ok_or_else(|| Error::FileTooLarge(format!("inode {ino}")))?;
        self.check_owner(&[ino], self.data_tx(ino, &h))?;
        let size = self.inode(ino)?.meta.size;
        // Storage past the end of file is never kept (no engine keeps blocks there), so a
        // KEEP_SIZE range is cut at the size.
        let (keep, grows) = match op {
            Fallocate::Allocate { keep_size } | Fallocate::ZeroRange { keep_size } => {
                (keep_size, !keep_size && end > size)
            }
            Fallocate::PunchHole => (true, false),
        };
        let limit = if keep { end.min(size) } else { end };
        if !matches!(op, Fallocate::PunchHole) && limit > off {
            self.check_space(ino, off, limit - off)?;
        }
        self.record_change(ino, &h);
        let inode = self
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        if grows {
            inode.meta.size = end;
        }
        if limit > off {
            match op {
                Fallocate::Allocate { .. } => inode.allocate(off, limit),
                Fallocate::PunchHole => inode.zero(off, limit, false),
                Fallocate::ZeroRange { .. } => {
                    inode.allocate(off, limit);
                    inode.zero(off, limit, true);
                }
            }
        }
        inode.meta.allocated = inode.blocks.len() as u64 * MODEL_BLOCK;
        inode.touch_data();
        Ok(())
    }

    pub(crate) fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        self.inode(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoAttribute(name_str(name)))
    }

    pub(crate) fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        Ok(self.inode(ino)?.xattrs.keys().cloned().collect())
    }

    pub(crate) fn setxattr(
        &mut self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        check_xattr_name(name)?;
        check_xattr_value(value)?;
        self.tx_check(tx)?;
        check_xattr_change(name, self.inode(ino)?.meta.kind)?;
        let exists = self.inode(ino)?.xattrs.contains_key(name);
        match how {
            XattrSet::Create if exists => return Err(Error::Exists(name_str(name))),
            XattrSet::Replace if !exists => return Err(Error::NoAttribute(name_str(name))),
            _ => {}
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[ino], tx)?;
        self.save(tx, ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.xattrs.insert(name.to_vec(), value.to_vec());
            i.meta.ctime = now_ns();
        }
        Ok(())
    }

    pub(crate) fn removexattr(&mut self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        check_xattr_name(name)?;
        self.tx_check(tx)?;
        check_xattr_change(name, self.inode(ino)?.meta.kind)?;
        if !self.inode(ino)?.xattrs.contains_key(name) {
            return Err(Error::NoAttribute(name_str(name)));
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[ino], tx)?;
        self.save(tx, ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.xattrs.remove(name);
            i.meta.ctime = now_ns();
        }
        Ok(())
    }
}

impl Inode {
    /// Give every hole of `[off, end)` a block of zeros.
    fn allocate(&mut self, off: u64, end: u64) {
        for block in off / MODEL_BLOCK..end.div_ceil(MODEL_BLOCK) {
            self.blocks
                .entry(block)
                .or_insert_with(|| Box::new([0; BLOCK]));
        }
    }

    /// Zero `[off, end)`; blocks wholly inside are dropped unless `keep_blocks`.
    fn zero(&mut self, off: u64, end: u64, keep_blocks: bool) {
        for block in off / MODEL_BLOCK..end.div_ceil(MODEL_BLOCK) {
            let start = block * MODEL_BLOCK;
            let from = off.max(start) - start;
            let to = end.min(start + MODEL_BLOCK) - start;
            if from == 0 && to == MODEL_BLOCK && !keep_blocks {
                self.blocks.remove(&block);
            } else if let Some(data) = self.blocks.get_mut(&block) {
                data[from as usize..to as usize].fill(0);
            }
        }
    }
}
