//! The model's state: inodes, handles, transactions, and the operations on them.

use std::collections::{BTreeMap, HashMap, HashSet};
use store::{
    now_ns, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, Result, TxId, NAME_MAX,
    ROOT_INO,
};

/// Block size of the model's sparse file data (and of `allocated`).
pub const MODEL_BLOCK: u64 = 4096;
pub(crate) const BLOCK: usize = MODEL_BLOCK as usize;
/// Largest file the model accepts (like an engine's limit; keeps `u64` arithmetic safe).
pub const MODEL_FILE_SIZE_MAX: u64 = 1 << 44;

#[derive(Clone, Debug)]
pub(crate) struct Inode {
    pub(crate) meta: Metadata,
    /// File data: block number → block; missing blocks are holes (zeros).
    pub(crate) blocks: BTreeMap<u64, Box<[u8; BLOCK]>>,
    /// Directory entries.
    pub(crate) entries: BTreeMap<Vec<u8>, Ino>,
    /// Parent directory (directories only).
    pub(crate) parent: Ino,
    /// Target of a symbolic link (symbolic links only).
    pub(crate) target: Vec<u8>,
    /// Extended attributes.
    pub(crate) xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// An unnamed file (O_TMPFILE) that `link` may still give a first name.
    pub(crate) linkable: bool,
}

impl Inode {
    pub(crate) fn new(ino: Ino, kind: FileKind, perm: u32, parent: Ino) -> Self {
        let now = now_ns();
        Inode {
            meta: Metadata {
                ino,
                kind,
                size: 0,
                perm: perm & 0o7777,
                nlink: if kind == FileKind::Dir { 2 } else { 1 },
                uid: 0,
                gid: 0,
                allocated: 0,
                atime: now,
                mtime: now,
                ctime: now,
                rdev: 0,
            },
            blocks: BTreeMap::new(),
            entries: BTreeMap::new(),
            parent,
            target: Vec::new(),
            xattrs: BTreeMap::new(),
            linkable: false,
        }
    }

    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        if off >= self.meta.size {
            return 0;
        }
        let n = (self.meta.size - off).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < n {
            let pos = off + done as u64;
            let (block, within) = (pos / MODEL_BLOCK, (pos % MODEL_BLOCK) as usize);
            let take = (BLOCK - within).min(n - done);
            match self.blocks.get(&block) {
                Some(data) => buf[done..done + take].copy_from_slice(&data[within..within + take]),
                None => buf[done..done + take].fill(0),
            }
            done += take;
        }
        n
    }

    pub(crate) fn write(&mut self, off: u64, data: &[u8]) {
        // A write of no bytes changes nothing, not even the size (pwrite(2) with count 0;
        // found by the pool_ops fuzz target: the model grew the file to `off`).
        if data.is_empty() {
            return;
        }
        let mut done = 0;
        while done < data.len() {
            let pos = off + done as u64;
            let (block, within) = (pos / MODEL_BLOCK, (pos % MODEL_BLOCK) as usize);
            let take = (BLOCK - within).min(data.len() - done);
            let dst = self
                .blocks
                .entry(block)
                .or_insert_with(|| Box::new([0; BLOCK]));
            dst[within..within + take].copy_from_slice(&data[done..done + take]);
            done += take;
        }
        self.meta.size = self.meta.size.max(off + data.len() as u64);
        self.meta.allocated = self.blocks.len() as u64 * MODEL_BLOCK;
    }

    pub(crate) fn set_len(&mut self, len: u64) {
        if len < self.meta.size {
            // Drop whole blocks past the end and zero the tail of the last one, so that a
            // later extension reads zeros.
            let keep = len.div_ceil(MODEL_BLOCK);
            self.blocks.retain(|&b, _| b < keep);
            let tail = (len % MODEL_BLOCK) as usize;
            if tail > 0 {
                if let Some(last) = self.blocks.get_mut(&(len / MODEL_BLOCK)) {
                    last[tail..].fill(0);
                }
            }
        }
        self.meta.size = len;
        self.meta.allocated = self.blocks.len() as u64 * MODEL_BLOCK;
    }

    pub(crate) fn touch_data(&mut self) {
        let now = now_ns();
        self.meta.mtime = now;
        self.meta.ctime = now;
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Handle {
    pub(crate) ino: Ino,
    pub(crate) flags: OpenFlags,
    pub(crate) tx: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Tx {
    /// Pre-images of every inode the transaction touched (`None`: created by it).
    pub(crate) undo: HashMap<Ino, Option<Inode>>,
    pub(crate) handles: HashSet<u64>,
    /// Files bound to the transaction. A file stays bound when the handle that bound it is
    /// released (the transaction still owns its changes), so no other open transaction can
    /// take it until this one ends (a file is bound to one open transaction at a time).
    pub(crate) files: HashSet<Ino>,
}

#[derive(Clone, Debug)]
pub(crate) struct State {
    pub(crate) inodes: HashMap<Ino, Inode>,
    pub(crate) next_ino: Ino,
    pub(crate) handles: HashMap<u64, Handle>,
    pub(crate) next_fh: u64,
    pub(crate) txs: HashMap<u64, Tx>,
    pub(crate) next_tx: u64,
    /// O_ATOMIC files with pending writes: inode → file as of its last fsync.
    pub(crate) atomic_base: HashMap<Ino, Inode>,
    /// Capacity in bytes of file data (whole blocks), or unlimited.
    pub(crate) capacity: Option<u64>,
    pub(crate) closed: bool,
}

pub(crate) fn name_str(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong {
            len: name.len(),
            max: NAME_MAX,
        });
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&0) || name.contains(&b'/')
    {
        return Err(Error::InvalidArgument(format!(
            "invalid file name {:?}",
            name_str(name)
        )));
    }
    Ok(())
}

impl State {
    pub(crate) fn inode(&self, ino: Ino) -> Result<&Inode> {
        self.inodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    pub(crate) fn dir(&self, ino: Ino) -> Result<&Inode> {
        let inode = self.inode(ino)?;
        if inode.meta.kind != FileKind::Dir {
            return Err(Error::NotDir(format!("inode {ino}")));
        }
        Ok(inode)
    }

    pub(crate) fn tx_check(&self, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(TxId(id)) if !self.txs.contains_key(&id) => Err(Error::NoSuchTransaction(id)),
            _ => Ok(()),
        }
    }

    /// Record the pre-image of `ino` in `tx` before its first change there.
    pub(crate) fn save(&mut self, tx: Option<u64>, ino: Ino) {
        let Some(id) = tx else { return };
        let pre = self.inodes.get(&ino).cloned();
        if let Some(t) = self.txs.get_mut(&id) {
            t.undo.entry(ino).or_insert(pre);
        }
    }

    pub(crate) fn handle(&self, fh: Fh) -> Result<Handle> {
        self.handles
            .get(&fh.0)
            .cloned()
            .ok_or(Error::BadHandle(fh.0))
    }

    /// `handle`, for calls that need the file: a handle on a file whose create was aborted
    /// has none, and every call through it but `release` fails with NotFound (as in the
    /// pool; `fsync` on such a handle was Ok here: pool_ops fuzz finding, 24 Nov).
    pub(crate) fn live_handle(&self, fh: Fh) -> Result<Handle> {
        let h = self.handle(fh)?;
        self.inode(h.ino)?;
        Ok(h)
    }

    pub(crate) fn open_count(&self, ino: Ino) -> usize {
        self.handles.values().filter(|h| h.ino == ino).count()
    }

    /// Drop files with no names and no open handles (kept while a transaction may restore
    /// them: the pre-image lives in the transaction anyway).
    pub(crate) fn collect_orphans(&mut self) {
        let open: HashSet<Ino> = self.handles.values().map(|h| h.ino).collect();
        self.inodes
            .retain(|&ino, i| ino == ROOT_INO || i.meta.nlink > 0 || open.contains(&ino));
    }

    /// Bytes of file data held: live blocks, plus the blocks of every pre-image a transaction
    /// or an O_ATOMIC file keeps (an engine needs room for both versions too).
    pub(crate) fn used_bytes(&self) -> u64 {
        let live: u64 = self.inodes.values().map(|i| i.blocks.len() as u64).sum();
        let saved: u64 = self
            .txs
            .values()
            .flat_map(|t| t.undo.values().flatten())
            .map(|i| i.blocks.len() as u64)
            .sum();
        let atomic: u64 = self
            .atomic_base
            .values()
            .map(|i| i.blocks.len() as u64)
            .sum();
        (live + saved + atomic) * MODEL_BLOCK
    }

    pub(crate) fn check_space(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
        let Some(cap) = self.capacity else {
            return Ok(());
        };
        let Some(inode) = self.inodes.get(&ino) else {
            return Ok(());
        };
        if len == 0 {
            return Ok(());
        }
        let new_blocks = (off / MODEL_BLOCK..=(off + len - 1) / MODEL_BLOCK)
            .filter(|b| !inode.blocks.contains_key(b))
            .count() as u64;
        if self.used_bytes() + new_blocks * MODEL_BLOCK > cap {
            return Err(Error::NoSpace(format!("model capacity {cap} bytes")));
        }
        Ok(())
    }

    pub(crate) fn rollback(&mut self, id: u64) {
        let Some(tx) = self.txs.remove(&id) else {
            return;
        };
        for (ino, pre) in tx.undo {
            match pre {
                Some(inode) => {
                    self.inodes.insert(ino, inode);
                }
                None => {
                    self.inodes.remove(&ino);
                }
            }
        }
        for fh in tx.handles {
            if let Some(h) = self.handles.get_mut(&fh) {
                h.tx = None;
            }
        }
        self.collect_orphans();
    }

    pub(crate) fn new_inode(
        &mut self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_name(name)?;
        self.tx_check(tx)?;
        let dir = self.dir(parent)?;
        if dir.entries.contains_key(name) {
            return Err(Error::Exists(name_str(name)));
        }
        let tx = tx.map(|t| t.0);
        self.check_owner(&[parent], tx)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.save(tx, parent);
        self.save(tx, ino);
        let inode = Inode::new(ino, kind, perm, parent);
        let meta = inode.meta;
        self.inodes.insert(ino, inode);
        let now = now_ns();
        if let Some(p) = self.inodes.get_mut(&parent) {
            p.entries.insert(name.to_vec(), ino);
            if kind == FileKind::Dir {
                p.meta.nlink += 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        Ok(meta)
    }

    /// Remove the entry `name` of `parent` (already checked), dropping a link of its inode.
    pub(crate) fn drop_entry(&mut self, parent: Ino, name: &[u8], tx: Option<u64>) {
        let Some(ino) = self
            .inodes
            .get(&parent)
            .and_then(|p| p.entries.get(name).copied())
        else {
            return;
        };
        self.save(tx, parent);
        self.save(tx, ino);
        let now = now_ns();
        let is_dir = self
            .inodes
            .get(&ino)
            .is_some_and(|i| i.meta.kind == FileKind::Dir);
        if let Some(p) = self.inodes.get_mut(&parent) {
            p.entries.remove(name);
            if is_dir {
                p.meta.nlink -= 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.meta.nlink = if is_dir {
                0
            } else {
                i.meta.nlink.saturating_sub(1)
            };
            i.meta.ctime = now;
        }
        self.collect_orphans();
    }

    pub(crate) fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.inodes.get(&ino) {
                Some(i) if ino != ROOT_INO && i.meta.kind == FileKind::Dir => ino = i.parent,
                _ => return false,
            }
        }
    }

    pub(crate) fn rename(
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
        let src = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        let dst = self.dir(new_parent)?.entries.get(new_name).copied();
        let src_is_dir = self.inode(src)?.meta.kind == FileKind::Dir;
        if dst == Some(src) {
            return Ok(()); // rename over itself (or over another link of the same inode)
        }
        if src_is_dir && self.is_ancestor(src, new_parent) {
            return Err(Error::InvalidArgument(format!(
                "cannot move {} into itself",
                name_str(name)
            )));
        }
        if let Some(dst) = dst {
            let target = self.inode(dst)?;
            match (src_is_dir, target.meta.kind == FileKind::Dir) {
                (false, true) => return Err(Error::IsDir(name_str(new_name))),
                (true, false) => return Err(Error::NotDir(name_str(new_name))),
                (true, true) if !target.entries.is_empty() => {
                    return Err(Error::NotEmpty(name_str(new_name)))
                }
                _ => {}
            }
        }
        let tx = tx.map(|t| t.0);
        let mut changed = vec![parent, new_parent, src];
        changed.extend(dst);
        self.check_owner(&changed, tx)?;
        if dst.is_some() {
            self.drop_entry(new_parent, new_name, tx);
        }
        self.save(tx, parent);
        self.save(tx, new_parent);
        self.save(tx, src);
        let now = now_ns();
        if let Some(p) = self.inodes.get_mut(&parent) {
            p.entries.remove(name);
            if src_is_dir {
                p.meta.nlink -= 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        if let Some(p) = self.inodes.get_mut(&new_parent) {
            p.entries.insert(new_name.to_vec(), src);
            if src_is_dir {
                p.meta.nlink += 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        if let Some(i) = self.inodes.get_mut(&src) {
            i.meta.ctime = now;
            if src_is_dir {
                i.parent = new_parent;
            }
        }
        Ok(())
    }

    /// The file a handle writes to, with the transaction its changes belong to. Records the
    /// pre-image (transaction) or the O_ATOMIC base before the first change.
    pub(crate) fn begin_data_change(&mut self, fh: Fh) -> Result<(Ino, Handle)> {
        let h = self.handle(fh)?;
        // Append without write access (raw flags; `OpenOptions` grants write with append)
        // is not writable, as O_APPEND | O_RDONLY in write(2) and in every engine.
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let inode = self.inode(h.ino)?;
        if inode.meta.kind != FileKind::File {
            return Err(Error::IsDir(format!("inode {}", h.ino)));
        }
        Ok((h.ino, h))
    }

    /// The open transaction that created `ino`, while it has not ended.
    pub(crate) fn creator(&self, ino: Ino) -> Option<u64> {
        self.txs
            .iter()
            .find(|(_, t)| matches!(t.undo.get(&ino), Some(None)))
            .map(|(&id, _)| id)
    }

    /// A file or directory whose create has not committed belongs to the creating
    /// transaction: a change to it made in `tx` (None: outside any transaction, or in an
    /// O_ATOMIC file's implicit one) fails with FileInTransaction(creator) — its abort would
    /// take the inode away under the change. Checked after the operation's own errors.
    pub(crate) fn check_owner(&self, inos: &[Ino], tx: Option<u64>) -> Result<()> {
        for &ino in inos {
            match self.creator(ino) {
                Some(owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner)),
                _ => {}
            }
        }
        Ok(())
    }

    /// The transaction a data change through `h` belongs to: the one its file is bound to.
    pub(crate) fn data_tx(&self, ino: Ino, h: &Handle) -> Option<u64> {
        h.tx.or_else(|| self.tx_of_file(ino))
    }

    /// The open transaction a file is bound to, if any (bound through any handle).
    pub(crate) fn tx_of_file(&self, ino: Ino) -> Option<u64> {
        self.txs
            .iter()
            .find(|(_, t)| t.files.contains(&ino))
            .map(|(&id, _)| id)
    }

    /// A data change of `ino` through handle `h`: it belongs to the transaction the file is
    /// bound to, whichever of the file's handles bound it (a file, not a handle, joins a
    /// transaction); else an O_ATOMIC handle's change waits for its fsync.
    pub(crate) fn record_change(&mut self, ino: Ino, h: &Handle) {
        let tx = self.data_tx(ino, h);
        if tx.is_some() {
            self.save(tx, ino);
        } else if h.flags.atomic && !self.atomic_base.contains_key(&ino) {
            if let Some(i) = self.inodes.get(&ino) {
                let base = i.clone();
                self.atomic_base.insert(ino, base);
            }
        }
    }

    pub(crate) fn fsck(&self) -> FsckReport {
        let mut report = FsckReport::default();
        let mut links: HashMap<Ino, u32> = HashMap::new();
        let mut subdirs: HashMap<Ino, u32> = HashMap::new();
        for (&ino, inode) in &self.inodes {
            for (name, &child) in &inode.entries {
                match self.inodes.get(&child) {
                    None => report.problem(
                        format!("entry {:?} names missing inode {child}", name_str(name)),
                        format!("dir {ino}"),
                    ),
                    Some(c) => {
                        *links.entry(child).or_default() += 1;
                        if c.meta.kind == FileKind::Dir {
                            *subdirs.entry(ino).or_default() += 1;
                            if c.parent != ino {
                                report.problem(
                                    format!("parent is {} not {ino}", c.parent),
                                    format!("dir {child}"),
                                );
                            }
                        }
                    }
                }
            }
            if inode.meta.kind == FileKind::File {
                let past_end = inode.blocks.keys().any(|&b| {
                    b * MODEL_BLOCK >= inode.meta.size.max(1).div_ceil(MODEL_BLOCK) * MODEL_BLOCK
                });
                if past_end {
                    report.problem("block past end of file", format!("inode {ino}"));
                }
            }
        }
        let open: HashSet<Ino> = self.handles.values().map(|h| h.ino).collect();
        for (&ino, inode) in &self.inodes {
            let named = links.get(&ino).copied().unwrap_or(0);
            let expected = match inode.meta.kind {
                FileKind::Dir if ino == ROOT_INO || named > 0 => {
                    2 + subdirs.get(&ino).copied().unwrap_or(0)
                }
                FileKind::Dir => 0,
                _ => named,
            };
            if inode.meta.nlink != expected {
                report.problem(
                    format!("nlink {} but {expected} expected", inode.meta.nlink),
                    format!("inode {ino}"),
                );
            }
            if ino != ROOT_INO && named == 0 && !open.contains(&ino) {
                report.problem("unreachable inode", format!("inode {ino}"));
            }
        }
        report
            .checked
            .push(("inodes".into(), self.inodes.len() as u64));
        report
    }
}

pub(crate) fn bind(st: &mut State, tx: u64, fh: Fh) {
    let ino = st.handles.get_mut(&fh.0).map(|h| {
        h.tx = Some(tx);
        h.ino
    });
    if let Some(t) = st.txs.get_mut(&tx) {
        t.handles.insert(fh.0);
        t.files.extend(ino);
    }
}
