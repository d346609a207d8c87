//! Namespace operations inside a transaction: create, mkdir, unlink, rmdir, rename, link,
//! setattr. The caller holds the namespace lock; each directory's DRAM cell is locked only
//! while its index is used.

use crate::core::{Core, Naming};
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::namespace::dir::{kind_of, Slot};
use pmem::Region;
use store::{path::check_name, Error, Metadata, Result, SetAttr};

impl<R: Region> Core<R> {
    /// Attributes of an in-use inode.
    pub(crate) fn metadata(&self, ino: u64) -> Result<Metadata> {
        let kind = self.inode_kind(ino)?;
        let off = self.geo.inode(ino);
        let mut nlink = self.read_u32(off + I_NLINK);
        if kind == KIND_DIR && nlink > 0 {
            let cell = self.cell(ino);
            let mut st = cell.lock();
            nlink = 2 + self.dir_index(&mut st)?.subdirs;
        }
        Ok(Metadata {
            ino,
            kind: kind_of(kind),
            size: self.inode_size(ino)?,
            perm: self.read_u32(off + I_PERM) & 0o7777,
            nlink,
            uid: self.read_u32(off + I_UID),
            gid: self.read_u32(off + I_GID),
            allocated: self.read_u64(off + I_BLOCKS).saturating_mul(BLOCK_SIZE),
            atime: self.read_u64(off + I_ATIME),
            mtime: self.read_u64(off + I_MTIME),
            ctime: self.read_u64(off + I_CTIME),
            rdev: if kind_of(kind).is_device() {
                self.read_u64(off + I_RDEV)
            } else {
                0
            },
        })
    }

    /// A live directory, or NotDir / NotFound.
    pub(crate) fn check_dir(&self, ino: u64) -> Result<()> {
        match self.inode_kind(ino)? {
            KIND_DIR if self.read_u32(self.geo.inode(ino) + I_NLINK) > 0 => Ok(()),
            KIND_DIR => Err(Error::NotFound(format!("directory {ino} was removed"))),
            _ => Err(Error::NotDir(format!("inode {ino}"))),
        }
    }

    /// The entry `name` of directory `parent`.
    pub(crate) fn lookup_slot(&self, parent: u64, name: &[u8]) -> Result<Slot> {
        self.check_dir(parent)?;
        check_name(name)?;
        if name == b"." || name == b".." {
            let ino = if name == b"." || parent == ROOT_INO {
                parent
            } else {
                self.read_u64(self.geo.inode(parent) + I_PARENT)
            };
            self.check_dir(ino).map_err(|_| {
                Error::corrupt("directory parent", self.geo.inode(parent) + I_PARENT)
            })?;
            return Ok(Slot {
                slot: u64::MAX,
                ino,
                kind: KIND_DIR,
            });
        }
        let cell = self.cell(parent);
        let mut st = cell.lock();
        self.dir_index(&mut st)?
            .names
            .get(name)
            .copied()
            .ok_or_else(|| Error::NotFound(String::from_utf8_lossy(name).into_owned()))
    }

    /// Create a file or directory `name` in `parent`.
    pub(crate) fn create_node(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        kind: u8,
        perm: u32,
    ) -> Result<u64> {
        self.create_node_with(tx, parent, name, kind, perm, &[])
    }

    /// Create an inode of any kind named `name` in `parent`; `fields` (offset in the inode,
    /// bytes) are written into the fresh inode with the rest, before its kind makes it live.
    pub(crate) fn create_node_with(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        kind: u8,
        perm: u32,
        fields: &[(u64, &[u8])],
    ) -> Result<u64> {
        self.check_dir(parent)?;
        check_name(name)?;
        if self.lookup_slot(parent, name).is_ok() {
            return Err(Error::Exists(String::from_utf8_lossy(name).into_owned()));
        }
        self.creates.check(parent, tx.id)?;
        let ino = self
            .inodes_free
            .alloc()
            .ok_or_else(|| Error::NoSpace("no free inode".into()))?;
        tx.allocated_inodes.push(ino);
        // Recorded before the inode has a kind or a name: nobody can change it meanwhile.
        self.creates.record(ino, tx.id);
        let off = self.geo.inode(ino);
        let now = self.now();
        let mut inode = [0u8; INODE_SIZE as usize];
        let put = |b: &mut [u8], at: u64, v: &[u8]| {
            b[at as usize..at as usize + v.len()].copy_from_slice(v)
        };
        put(&mut inode, I_PERM, &(perm & 0o7777).to_le_bytes());
        put(&mut inode, I_NLINK, &1u32.to_le_bytes());
        for f in [I_MTIME, I_CTIME, I_ATIME, I_BTIME] {
            put(&mut inode, f, &now.to_le_bytes());
        }
        if kind == KIND_DIR {
            put(&mut inode, I_PARENT, &parent.to_le_bytes());
        }
        for (at, bytes) in fields {
            assert!(*at > I_KIND && at + bytes.len() as u64 <= INODE_SIZE);
            put(&mut inode, *at, bytes);
        }
        // The slot is free (kind 0): its other bytes need no undo entry.
        self.region.write(off + 1, &inode[1..]);
        self.region.flush(off, INODE_SIZE);
        self.meta_update(tx, &[(off + I_KIND, &[kind])])?;
        self.touch(tx, ino);
        let cell = self.cell(parent);
        let mut st = cell.lock();
        self.dir_add(&mut st, tx, name, ino, kind)?;
        Ok(ino)
    }

    fn add_nlink(&self, tx: &mut Tx, ino: u64, delta: i32) -> Result<u32> {
        let off = self.geo.inode(ino);
        let nlink = (i64::from(self.read_u32(off + I_NLINK)) + i64::from(delta)).max(0);
        let nlink = u32::try_from(nlink).map_err(|_| Error::TooMany {
            what: "links to one inode",
            max: u64::from(u32::MAX),
        })?;
        let now = self.now().to_le_bytes();
        self.meta_update(
            tx,
            &[(off + I_NLINK, &nlink.to_le_bytes()), (off + I_CTIME, &now)],
        )?;
        Ok(nlink)
    }

    /// Remove the entry `name` (a file unless `dir`), dropping a link of its inode.
    pub(crate) fn remove_entry(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        dir: bool,
    ) -> Result<()> {
        let found = self.lookup_slot(parent, name)?;
        if found.slot == u64::MAX {
            return Err(Error::InvalidArgument("cannot remove . or ..".into()));
        }
        match (dir, found.kind == KIND_DIR) {
            (false, true) => return Err(Error::IsDir(String::from_utf8_lossy(name).into_owned())),
            (true, false) => return Err(Error::NotDir(String::from_utf8_lossy(name).into_owned())),
            (true, true) => self.check_empty(found.ino)?,
            _ => {}
        }
        self.creates.check_all(&[parent, found.ino], tx.id)?;
        {
            let cell = self.cell(parent);
            let mut st = cell.lock();
            self.dir_remove(&mut st, tx, name)?;
        }
        let nlink = if dir {
            self.set_nlink_zero(tx, found.ino)?
        } else {
            self.add_nlink(tx, found.ino, -1)?
        };
        if nlink == 0 {
            tx.orphans.push(found.ino);
            *self.unlinking.lock().entry(found.ino).or_default() += 1;
        }
        Ok(())
    }

    fn set_nlink_zero(&self, tx: &mut Tx, ino: u64) -> Result<u32> {
        self.meta_update(tx, &[(self.geo.inode(ino) + I_NLINK, &0u32.to_le_bytes())])?;
        Ok(0)
    }

    pub(crate) fn check_empty(&self, dir: u64) -> Result<()> {
        let cell = self.cell(dir);
        let mut st = cell.lock();
        if self.dir_index(&mut st)?.names.is_empty() {
            Ok(())
        } else {
            Err(Error::NotEmpty(format!("directory {dir}")))
        }
    }

    /// Is `ancestor` on the path from `dir` up to the root?
    pub(crate) fn is_ancestor(&self, ancestor: u64, mut dir: u64) -> Result<bool> {
        for _ in 0..self.geo.inode_count {
            if dir == ancestor {
                return Ok(true);
            }
            if dir == ROOT_INO {
                return Ok(false);
            }
            let at = self.geo.inode(dir) + I_PARENT;
            dir = self.read_u64(at);
            self.check_ino(dir)
                .map_err(|_| Error::corrupt(format!("directory parent {dir}"), at))?;
        }
        Err(Error::corrupt(
            "directory parent chain has a cycle",
            self.geo.inode(dir),
        ))
    }

    /// rename(2), replacing a compatible target.
    pub(crate) fn rename_entry(
        &self,
        tx: &mut Tx,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
    ) -> Result<()> {
        self.check_dir(new_parent)?;
        check_name(new_name)?;
        let src = self.lookup_slot(parent, name)?;
        if src.slot == u64::MAX || new_name == b"." || new_name == b".." {
            return Err(Error::InvalidArgument("cannot rename . or ..".into()));
        }
        if parent == new_parent && name == new_name {
            return Ok(());
        }
        if src.kind == KIND_DIR && self.is_ancestor(src.ino, new_parent)? {
            return Err(Error::InvalidArgument(
                "cannot move a directory into itself".into(),
            ));
        }
        let replaced = match self.lookup_slot(new_parent, new_name) {
            // Two links to one file: rename(2) does nothing.
            Ok(dst) if dst.ino == src.ino => return Ok(()),
            Ok(dst) => match (src.kind == KIND_DIR, dst.kind == KIND_DIR) {
                (false, true) => {
                    return Err(Error::IsDir(String::from_utf8_lossy(new_name).into_owned()))
                }
                (true, false) => {
                    return Err(Error::NotDir(
                        String::from_utf8_lossy(new_name).into_owned(),
                    ))
                }
                (true, true) => {
                    self.check_empty(dst.ino)?;
                    Some(dst)
                }
                (false, false) => Some(dst),
            },
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        // Every refusal before the first change (an error inside a transaction keeps the
        // changes made so far).
        let replaced_ino = replaced.map_or(parent, |dst| dst.ino);
        self.creates
            .check_all(&[parent, new_parent, src.ino, replaced_ino], tx.id)?;
        if let Some(dst) = replaced {
            self.remove_entry(tx, new_parent, new_name, dst.kind == KIND_DIR)?;
        }
        {
            let cell = self.cell(parent);
            let mut st = cell.lock();
            self.dir_remove(&mut st, tx, name)?;
        }
        {
            let cell = self.cell(new_parent);
            let mut st = cell.lock();
            self.dir_add(&mut st, tx, new_name, src.ino, src.kind)?;
        }
        if src.kind == KIND_DIR && parent != new_parent {
            self.meta_u64(tx, self.geo.inode(src.ino) + I_PARENT, new_parent)?;
        }
        let now = self.now().to_le_bytes();
        self.meta_update(tx, &[(self.geo.inode(src.ino) + I_CTIME, &now)])
    }

    /// A new hard link to a file.
    pub(crate) fn link_entry(
        &self,
        tx: &mut Tx,
        ino: u64,
        new_parent: u64,
        new_name: &[u8],
    ) -> Result<()> {
        let kind = self.inode_kind(ino)?;
        if kind == KIND_DIR {
            return Err(Error::NotPermitted(format!(
                "hard link to directory inode {ino}"
            )));
        }
        let first_name = self.read_u32(self.geo.inode(ino) + I_NLINK) == 0;
        if first_name && self.cell(ino).lock().naming != Naming::Unnamed {
            return Err(Error::NotFound(format!("inode {ino} has no links")));
        }
        self.check_dir(new_parent)?;
        check_name(new_name)?;
        if self.lookup_slot(new_parent, new_name).is_ok() {
            return Err(Error::Exists(
                String::from_utf8_lossy(new_name).into_owned(),
            ));
        }
        self.creates.check_all(&[ino, new_parent], tx.id)?;
        {
            let cell = self.cell(new_parent);
            let mut st = cell.lock();
            self.dir_add(&mut st, tx, new_name, ino, kind)?;
        }
        self.add_nlink(tx, ino, 1)?;
        if first_name {
            // An abort gives the name back (`PoolStore::abort_cell`).
            self.cell(ino).lock().naming = Naming::Named;
            tx.first_names.push(ino);
        }
        Ok(())
    }

    /// Change permissions, owner or times.
    pub(crate) fn set_attr(&self, tx: &mut Tx, ino: u64, attr: &SetAttr) -> Result<()> {
        self.inode_kind(ino)?;
        self.creates.check(ino, tx.id)?;
        let off = self.geo.inode(ino);
        let now = self.now().to_le_bytes();
        let perm = attr.perm.map(|p| (p & 0o7777).to_le_bytes());
        let uid = attr.uid.map(u32::to_le_bytes);
        let gid = attr.gid.map(u32::to_le_bytes);
        let atime = attr.atime.map(u64::to_le_bytes);
        let mtime = attr.mtime.map(u64::to_le_bytes);
        if mtime.is_some() {
            // The explicit mtime stands: no redo of an earlier overwrite's times replaces it.
            self.times_set_in_place(tx, ino);
        }
        let mut writes: Vec<(u64, &[u8])> = vec![(off + I_CTIME, &now)];
        for (at, v) in [(I_PERM, &perm), (I_UID, &uid), (I_GID, &gid)] {
            if let Some(v) = v {
                writes.push((off + at, v));
            }
        }
        for (at, v) in [(I_ATIME, &atime), (I_MTIME, &mtime)] {
            if let Some(v) = v {
                writes.push((off + at, v));
            }
        }
        self.meta_update(tx, &writes)
    }

    /// Entries of a directory.
    pub(crate) fn list_dir(&self, ino: u64) -> Result<Vec<store::DirEntry>> {
        self.check_dir(ino)?;
        let cell = self.cell(ino);
        let mut st = cell.lock();
        let index = self.dir_index(&mut st)?;
        let mut entries: Vec<_> = index
            .names
            .iter()
            .map(|(name, s)| store::DirEntry {
                name: name.to_vec(),
                ino: s.ino,
                kind: kind_of(s.kind),
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }
}
