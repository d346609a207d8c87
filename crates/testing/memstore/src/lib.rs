//! `MemStore`: a volatile, in-memory implementation of the [`Store`] trait.
//!
//! It is the reference model the front ends (Rust API, FUSE, CLI) are tested against when no
//! persistent engine is needed: plain maps behind one mutex, transactions by per-inode undo
//! copies, O_ATOMIC by a per-handle shadow copy of the file. It has a byte capacity so that
//! "no space" paths can be reached. Nothing survives the process: it is not an engine.
//!
//! A transaction binds files, not handles: once one handle binds a file, the data changes
//! through every handle of that file belong to the transaction, until it ends.

use parking_lot::Mutex;
use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use store::{
    now_ns, path::check_name, DirEntry, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags,
    Result, SetAttr, StatFs, Store, TxId, NAME_MAX, ROOT_INO,
};

/// Size of the accounting unit: file data occupies whole blocks of this size.
pub const BLOCK_SIZE: u64 = 4096;

#[derive(Clone, Debug)]
enum Body {
    File(Vec<u8>),
    Dir {
        entries: BTreeMap<Vec<u8>, Ino>,
        parent: Ino,
    },
    Link(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Node {
    meta: Metadata,
    body: Body,
}

impl Node {
    fn blocks(&self) -> u64 {
        match &self.body {
            Body::File(data) => (data.len() as u64).div_ceil(BLOCK_SIZE),
            _ => 0,
        }
    }
}

#[derive(Debug)]
struct Handle {
    ino: Ino,
    flags: OpenFlags,
    atomic: bool,
    /// O_ATOMIC: the file as this handle sees it, with the writes not yet fsynced.
    shadow: Option<Vec<u8>>,
    tx: Option<TxId>,
}

#[derive(Debug, Default)]
struct Tx {
    /// Saved images of every inode the transaction changed, first change first
    /// (`None`: the inode did not exist).
    undo: Vec<(Ino, Option<Node>)>,
    /// Files bound to the transaction, through any handle (released or not): every data
    /// change of such a file belongs to it.
    files: HashSet<Ino>,
}

#[derive(Debug)]
struct Inner {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    txs: HashMap<u64, Tx>,
    next_tx: u64,
    used_blocks: u64,
    closed: bool,
    /// `write` calls served, and the largest one (bytes).
    writes: u64,
    write_max: u64,
}

/// The in-memory store. See the crate documentation.
#[derive(Debug)]
pub struct MemStore {
    inner: Mutex<Inner>,
    capacity_blocks: u64,
    inodes_max: u64,
}

impl Default for MemStore {
    fn default() -> Self {
        Self::new()
    }
}

fn name_str(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

fn new_meta(ino: Ino, kind: FileKind, perm: u32) -> Metadata {
    let now = now_ns();
    let nlink = if kind == FileKind::Dir { 2 } else { 1 };
    Metadata {
        ino,
        kind,
        size: 0,
        perm: perm & 0o7777,
        nlink,
        uid: 0,
        gid: 0,
        allocated: 0,
        atime: now,
        mtime: now,
        ctime: now,
    }
}

impl MemStore {
    /// A store of 1 GiB and a million inodes.
    pub fn new() -> Self {
        Self::with_capacity(1 << 30, 1 << 20)
    }

    /// A store holding at most `capacity_bytes` of file data and `inodes_max` inodes.
    pub fn with_capacity(capacity_bytes: u64, inodes_max: u64) -> Self {
        let mut nodes = HashMap::new();
        let root = Node {
            meta: new_meta(ROOT_INO, FileKind::Dir, 0o755),
            body: Body::Dir {
                entries: BTreeMap::new(),
                parent: ROOT_INO,
            },
        };
        nodes.insert(ROOT_INO, root);
        MemStore {
            inner: Mutex::new(Inner {
                nodes,
                next_ino: ROOT_INO + 1,
                handles: HashMap::new(),
                next_fh: 1,
                txs: HashMap::new(),
                next_tx: 1,
                used_blocks: 0,
                closed: false,
                writes: 0,
                write_max: 0,
            }),
            capacity_blocks: capacity_bytes / BLOCK_SIZE,
            inodes_max,
        }
    }
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    fn node(&self, ino: Ino) -> Result<&Node> {
        self.nodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    fn node_mut(&mut self, ino: Ino) -> Result<&mut Node> {
        self.nodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    fn entries(&self, dir: Ino) -> Result<&BTreeMap<Vec<u8>, Ino>> {
        match &self.node(dir)?.body {
            Body::Dir { entries, .. } => Ok(entries),
            _ => Err(Error::NotDir(format!("inode {dir}"))),
        }
    }

    fn entries_mut(&mut self, dir: Ino) -> Result<&mut BTreeMap<Vec<u8>, Ino>> {
        match &mut self.node_mut(dir)?.body {
            Body::Dir { entries, .. } => Ok(entries),
            _ => Err(Error::NotDir(format!("inode {dir}"))),
        }
    }

    fn handle(&self, fh: Fh) -> Result<&Handle> {
        self.handles.get(&fh.0).ok_or(Error::BadHandle(fh.0))
    }

    /// The open transaction a file is bound to, if any (through any of its handles).
    fn tx_of_file(&self, ino: Ino) -> Option<TxId> {
        self.txs
            .iter()
            .find(|(_, t)| t.files.contains(&ino))
            .map(|(&id, _)| TxId(id))
    }

    /// The transaction a data change through `h` belongs to: the one its file is bound to.
    fn data_tx(&self, h: &Handle) -> Option<TxId> {
        h.tx.or_else(|| self.tx_of_file(h.ino))
    }

    /// Whether the file of `fh` may join transaction `tx` (None: one about to begin):
    /// neither the handle nor its file is bound to another open transaction.
    fn check_bind(&self, fh: Fh, tx: Option<TxId>) -> Result<()> {
        let h = self.handle(fh)?;
        if let Some(bound) = h.tx {
            return Err(Error::FileInTransaction(bound.0));
        }
        if let Some(other) = self.tx_of_file(h.ino).filter(|&t| Some(t) != tx) {
            return Err(Error::FileInTransaction(other.0));
        }
        Ok(())
    }

    fn bind(&mut self, tx: TxId, fh: Fh) -> Result<()> {
        let h = self.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        h.tx = Some(tx);
        let ino = h.ino;
        self.tx_mut(tx)?.files.insert(ino);
        Ok(())
    }

    /// A call made in `tx` needs it open: checked before the call's own errors, as in the
    /// model and the pool.
    fn tx_check(&self, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(tx) if !self.txs.contains_key(&tx.0) => Err(Error::NoSuchTransaction(tx.0)),
            _ => Ok(()),
        }
    }

    fn tx_mut(&mut self, tx: TxId) -> Result<&mut Tx> {
        self.txs
            .get_mut(&tx.0)
            .ok_or(Error::NoSuchTransaction(tx.0))
    }

    /// Save the image of `ino` in `tx` before its first change in that transaction.
    fn save(&mut self, tx: Option<TxId>, ino: Ino) -> Result<()> {
        let Some(tx) = tx else { return Ok(()) };
        let image = self.nodes.get(&ino).cloned();
        let t = self.tx_mut(tx)?;
        if !t.undo.iter().any(|(i, _)| *i == ino) {
            t.undo.push((ino, image));
        }
        Ok(())
    }

    /// Replace (or remove) an inode, keeping the block count right.
    fn put(&mut self, ino: Ino, node: Option<Node>) {
        if let Some(old) = self.nodes.remove(&ino) {
            self.used_blocks -= old.blocks();
        }
        if let Some(new) = node {
            self.used_blocks += new.blocks();
            self.nodes.insert(ino, new);
        }
    }

    fn open_count(&self, ino: Ino) -> usize {
        self.handles.values().filter(|h| h.ino == ino).count()
    }

    /// Drop an inode that has no names and no open handles.
    fn reap(&mut self, ino: Ino) {
        let orphan = self.nodes.get(&ino).is_some_and(|n| n.meta.nlink == 0);
        if orphan && self.open_count(ino) == 0 {
            self.put(ino, None);
        }
    }

    fn set_data(&mut self, ino: Ino, data: Vec<u8>, capacity: u64) -> Result<()> {
        let node = self.node(ino)?;
        let old_blocks = node.blocks();
        let new_blocks = (data.len() as u64).div_ceil(BLOCK_SIZE);
        if new_blocks > old_blocks && self.used_blocks - old_blocks + new_blocks > capacity {
            return Err(Error::NoSpace(format!("inode {ino}: {} bytes", data.len())));
        }
        let mut node = node.clone();
        let now = now_ns();
        node.meta.size = data.len() as u64;
        node.meta.allocated = new_blocks * BLOCK_SIZE;
        node.meta.mtime = now;
        node.meta.ctime = now;
        node.body = Body::File(data);
        self.put(ino, Some(node));
        Ok(())
    }

    fn file_data(&self, ino: Ino) -> Result<&Vec<u8>> {
        match &self.node(ino)?.body {
            Body::File(data) => Ok(data),
            Body::Dir { .. } => Err(Error::IsDir(format!("inode {ino}"))),
            Body::Link(_) => Err(Error::InvalidArgument(format!("inode {ino} is a symlink"))),
        }
    }

    fn new_node(
        &mut self,
        parent: Ino,
        name: &[u8],
        node_of: impl FnOnce(Ino) -> Node,
        tx: Option<TxId>,
        inodes_max: u64,
    ) -> Result<Metadata> {
        check_name(name)?;
        self.tx_check(tx)?;
        if self.entries(parent)?.contains_key(name) {
            return Err(Error::Exists(name_str(name)));
        }
        if self.nodes.len() as u64 >= inodes_max {
            return Err(Error::NoSpace("no free inode".into()));
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.save(tx, parent)?;
        self.save(tx, ino)?;
        let node = node_of(ino);
        let is_dir = node.meta.is_dir();
        let meta = node.meta;
        self.put(ino, Some(node));
        self.entries_mut(parent)?.insert(name.to_vec(), ino);
        let dir = self.node_mut(parent)?;
        if is_dir {
            dir.meta.nlink += 1;
        }
        dir.meta.mtime = now_ns();
        dir.meta.ctime = dir.meta.mtime;
        Ok(meta)
    }

    fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            match self.nodes.get(&ino).map(|n| &n.body) {
                Some(Body::Dir { parent, .. }) if *parent != ino => ino = *parent,
                _ => return false,
            }
        }
    }

    /// Remove the entry `name` of `parent` (already checked), dropping one link of its inode.
    fn remove_entry(&mut self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let ino = *self
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        self.save(tx, parent)?;
        self.save(tx, ino)?;
        self.entries_mut(parent)?.remove(name);
        let now = now_ns();
        let child = self.node_mut(ino)?;
        let was_dir = child.meta.is_dir();
        child.meta.nlink = if was_dir {
            0
        } else {
            child.meta.nlink.saturating_sub(1)
        };
        child.meta.ctime = now;
        let dir = self.node_mut(parent)?;
        if was_dir {
            dir.meta.nlink -= 1;
        }
        dir.meta.mtime = now;
        dir.meta.ctime = now;
        self.reap(ino);
        Ok(())
    }

    fn rename(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        check_name(new_name)?;
        self.tx_check(tx)?;
        let ino = *self
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        self.entries(new_parent)?;
        let moving_dir = self.node(ino)?.meta.is_dir();
        if moving_dir && self.is_ancestor(ino, new_parent) {
            return Err(Error::InvalidArgument(format!(
                "cannot move {} into itself",
                name_str(name)
            )));
        }
        if let Some(&target) = self.entries(new_parent)?.get(new_name) {
            if target == ino {
                return Ok(());
            }
            let target_node = self.node(target)?;
            match (moving_dir, target_node.meta.is_dir()) {
                (false, true) => return Err(Error::IsDir(name_str(new_name))),
                (true, false) => return Err(Error::NotDir(name_str(new_name))),
                (true, true) if !self.entries(target)?.is_empty() => {
                    return Err(Error::NotEmpty(name_str(new_name)))
                }
                _ => {}
            }
            self.remove_entry(new_parent, new_name, tx)?;
        }
        self.save(tx, parent)?;
        self.save(tx, new_parent)?;
        self.save(tx, ino)?;
        self.entries_mut(parent)?.remove(name);
        self.entries_mut(new_parent)?.insert(new_name.to_vec(), ino);
        let now = now_ns();
        if moving_dir {
            if let Body::Dir { parent: p, .. } = &mut self.node_mut(ino)?.body {
                *p = new_parent;
            }
            self.node_mut(parent)?.meta.nlink -= 1;
            self.node_mut(new_parent)?.meta.nlink += 1;
        }
        for dir in [parent, new_parent] {
            let d = self.node_mut(dir)?;
            d.meta.mtime = now;
            d.meta.ctime = now;
        }
        self.node_mut(ino)?.meta.ctime = now;
        Ok(())
    }

    /// The file as a handle sees it: its shadow when it has one, else the inode's data.
    fn view(&self, fh: Fh) -> Result<&Vec<u8>> {
        let h = self.handle(fh)?;
        match &h.shadow {
            Some(shadow) => Ok(shadow),
            None => self.file_data(h.ino),
        }
    }

    fn install_shadow(&mut self, fh: Fh, capacity: u64) -> Result<()> {
        let h = self.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        let (ino, shadow) = (h.ino, h.shadow.take());
        if let Some(data) = shadow {
            self.set_data(ino, data, capacity)?;
        }
        Ok(())
    }

    fn unbind(&mut self, tx: TxId) {
        for h in self.handles.values_mut() {
            if h.tx == Some(tx) {
                h.tx = None;
            }
        }
    }
}

impl MemStore {
    /// Change the data of the file of `fh` by `change` (given the file as the handle sees it
    /// and whether the handle appends). The change belongs to the transaction the file is
    /// bound to, else to the handle's O_ATOMIC shadow, else it is its own.
    fn modify_data(&self, fh: Fh, change: impl FnOnce(&mut Vec<u8>, bool)) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let h = s.handle(fh)?;
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let (ino, atomic, append) = (h.ino, h.atomic, h.flags.append);
        let tx = s.data_tx(h);
        if atomic && tx.is_none() {
            let mut data = s.view(fh)?.clone();
            change(&mut data, append);
            let new_blocks = (data.len() as u64).div_ceil(BLOCK_SIZE);
            let old_blocks = s.node(ino)?.blocks();
            if new_blocks > old_blocks
                && s.used_blocks - old_blocks + new_blocks > self.capacity_blocks
            {
                return Err(Error::NoSpace(format!("inode {ino}")));
            }
            if let Some(h) = s.handles.get_mut(&fh.0) {
                h.shadow = Some(data);
            }
            return Ok(());
        }
        let mut data = s.file_data(ino)?.clone();
        change(&mut data, append);
        s.save(tx, ino)?;
        s.set_data(ino, data, self.capacity_blocks)
    }
}

impl Store for MemStore {
    fn engine_name(&self) -> String {
        "mem".into()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let s = self.inner.lock();
        s.check_open()?;
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong {
                len: name.len(),
                max: NAME_MAX,
            });
        }
        let ino = match name {
            b"." => parent,
            b".." => match &s.node(parent)?.body {
                Body::Dir { parent, .. } => *parent,
                _ => return Err(Error::NotDir(format!("inode {parent}"))),
            },
            _ => *s
                .entries(parent)?
                .get(name)
                .ok_or_else(|| Error::NotFound(name_str(name)))?,
        };
        Ok(s.node(ino)?.meta)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        let s = self.inner.lock();
        s.check_open()?;
        Ok(s.node(ino)?.meta)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.tx_check(tx)?;
        s.node(ino)?;
        s.save(tx, ino)?;
        let n = s.node_mut(ino)?;
        if let Some(perm) = attr.perm {
            n.meta.perm = perm & 0o7777;
        }
        if let Some(uid) = attr.uid {
            n.meta.uid = uid;
        }
        if let Some(gid) = attr.gid {
            n.meta.gid = gid;
        }
        if let Some(t) = attr.atime {
            n.meta.atime = t;
        }
        if let Some(t) = attr.mtime {
            n.meta.mtime = t;
        }
        n.meta.ctime = now_ns();
        Ok(n.meta)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let node_of = |ino| Node {
            meta: new_meta(ino, FileKind::File, perm),
            body: Body::File(Vec::new()),
        };
        s.new_node(parent, name, node_of, tx, self.inodes_max)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let node_of = |ino| Node {
            meta: new_meta(ino, FileKind::Dir, perm),
            body: Body::Dir {
                entries: BTreeMap::new(),
                parent,
            },
        };
        s.new_node(parent, name, node_of, tx, self.inodes_max)
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let node_of = |ino| {
            let mut meta = new_meta(ino, FileKind::Symlink, 0o777);
            meta.size = target.len() as u64;
            Node {
                meta,
                body: Body::Link(target.to_vec()),
            }
        };
        s.new_node(parent, name, node_of, tx, self.inodes_max)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let s = self.inner.lock();
        s.check_open()?;
        match &s.node(ino)?.body {
            Body::Link(target) => Ok(target.clone()),
            _ => Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symlink"
            ))),
        }
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.tx_check(tx)?;
        let ino = *s
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        if s.node(ino)?.meta.is_dir() {
            return Err(Error::IsDir(name_str(name)));
        }
        s.remove_entry(parent, name, tx)
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.tx_check(tx)?;
        let ino = *s
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        if !s.node(ino)?.meta.is_dir() {
            return Err(Error::NotDir(name_str(name)));
        }
        if !s.entries(ino)?.is_empty() {
            return Err(Error::NotEmpty(name_str(name)));
        }
        s.remove_entry(parent, name, tx)
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.rename(parent, name, new_parent, new_name, tx)
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut s = self.inner.lock();
        s.check_open()?;
        check_name(new_name)?;
        s.tx_check(tx)?;
        if s.node(ino)?.meta.is_dir() {
            return Err(Error::NotPermitted("hard link to a directory".into()));
        }
        if s.entries(new_parent)?.contains_key(new_name) {
            return Err(Error::Exists(name_str(new_name)));
        }
        s.save(tx, new_parent)?;
        s.save(tx, ino)?;
        s.entries_mut(new_parent)?.insert(new_name.to_vec(), ino);
        let n = s.node_mut(ino)?;
        n.meta.nlink += 1;
        n.meta.ctime = now_ns();
        Ok(n.meta)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let s = self.inner.lock();
        s.check_open()?;
        let mut out = Vec::new();
        for (name, child) in s.entries(ino)? {
            out.push(DirEntry {
                name: name.clone(),
                ino: *child,
                kind: s.node(*child)?.meta.kind,
            });
        }
        Ok(out)
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.file_data(ino)?;
        let fh = s.next_fh;
        s.next_fh += 1;
        s.handles.insert(
            fh,
            Handle {
                ino,
                flags,
                atomic: flags.atomic,
                shadow: None,
                tx: None,
            },
        );
        Ok(Fh(fh))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut s = self.inner.lock();
        let h = s.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        s.reap(h.ino);
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let s = self.inner.lock();
        s.check_open()?;
        if !s.handle(fh)?.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        let data = s.view(fh)?;
        let start = (off.min(data.len() as u64)) as usize;
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let end = off
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::FileTooLarge(format!("offset {off}")))?;
        if end > (1 << 40) {
            return Err(Error::FileTooLarge(format!("write ending at {end}")));
        }
        self.modify_data(fh, |file, append| {
            let start = if append { file.len() } else { off as usize };
            if file.len() < start + data.len() {
                file.resize(start + data.len(), 0);
            }
            file[start..start + data.len()].copy_from_slice(data);
        })?;
        let mut s = self.inner.lock();
        s.writes += 1;
        s.write_max = s.write_max.max(data.len() as u64);
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        if len > (1 << 40) {
            return Err(Error::FileTooLarge(format!("length {len}")));
        }
        self.modify_data(fh, |file, _| file.resize(len as usize, 0))
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.install_shadow(fh, self.capacity_blocks)
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let s = self.inner.lock();
        s.check_open()?;
        let h = s.handle(fh)?;
        let mut meta = s.node(h.ino)?.meta;
        if let Some(shadow) = &h.shadow {
            meta.size = shadow.len() as u64;
        }
        Ok(meta)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        if !atomic {
            s.install_shadow(fh, self.capacity_blocks)?;
        }
        s.handles
            .get_mut(&fh.0)
            .ok_or(Error::BadHandle(fh.0))?
            .atomic = atomic;
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        for fh in fhs {
            s.handle(*fh)?;
        }
        for fh in fhs {
            s.install_shadow(*fh, self.capacity_blocks)?;
        }
        Ok(())
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        for fh in fhs {
            s.handles
                .get_mut(&fh.0)
                .ok_or(Error::BadHandle(fh.0))?
                .shadow = None;
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut s = self.inner.lock();
        s.check_open()?;
        for fh in files {
            s.check_bind(*fh, None)?;
        }
        let tx = TxId(s.next_tx);
        s.next_tx += 1;
        s.txs.insert(tx.0, Tx::default());
        for fh in files {
            s.bind(tx, *fh)?;
        }
        Ok(tx)
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.tx_mut(tx)?;
        s.check_bind(fh, Some(tx))?;
        s.bind(tx, fh)
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        s.txs.remove(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        s.unbind(tx);
        Ok(())
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let t = s.txs.remove(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        for (ino, image) in t.undo.into_iter().rev() {
            s.put(ino, image);
        }
        s.unbind(tx);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let s = self.inner.lock();
        s.check_open()?;
        Ok(StatFs {
            block_size: BLOCK_SIZE,
            blocks_total: self.capacity_blocks,
            blocks_free: self.capacity_blocks.saturating_sub(s.used_blocks),
            inodes_total: self.inodes_max,
            inodes_free: self.inodes_max.saturating_sub(s.nodes.len() as u64),
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let s = self.inner.lock();
        vec![
            ("inodes".into(), s.nodes.len() as u64),
            ("used_blocks".into(), s.used_blocks),
            ("open_handles".into(), s.handles.len() as u64),
            ("open_transactions".into(), s.txs.len() as u64),
            ("writes".into(), s.writes),
            ("write_max_bytes".into(), s.write_max),
        ]
    }

    fn fsck(&self) -> Result<FsckReport> {
        let s = self.inner.lock();
        let mut report = FsckReport::default();
        let mut links: HashMap<Ino, u32> = HashMap::new();
        let mut blocks = 0;
        for (ino, node) in &s.nodes {
            blocks += node.blocks();
            if let Body::Dir { entries, .. } = &node.body {
                for (name, child) in entries {
                    *links.entry(*child).or_default() += 1;
                    if !s.nodes.contains_key(child) {
                        report.problem(
                            format!("entry {} points to missing inode {child}", name_str(name)),
                            format!("inode {ino}"),
                        );
                    }
                }
            }
        }
        for (ino, node) in &s.nodes {
            let names = links.get(ino).copied().unwrap_or(0);
            let expected = if node.meta.is_dir() {
                names.min(1)
            } else {
                names
            };
            let actual = if node.meta.is_dir() {
                node.meta.nlink.min(1)
            } else {
                node.meta.nlink
            };
            if *ino != ROOT_INO && expected != actual {
                report.problem(
                    format!("nlink {} but {names} names", node.meta.nlink),
                    format!("inode {ino}"),
                );
            }
        }
        if blocks != s.used_blocks {
            report.problem(
                format!("used blocks {} but files hold {blocks}", s.used_blocks),
                "store",
            );
        }
        report.checked.push(("inodes".into(), s.nodes.len() as u64));
        report.checked.push(("blocks".into(), blocks));
        Ok(report)
    }

    fn unmount(&self) -> Result<()> {
        let mut s = self.inner.lock();
        s.closed = true;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::path::{read_file, write_file};
    use store::OpenOptions;

    #[test]
    fn abort_restores_data_and_namespace() -> Result<()> {
        let st = MemStore::new();
        write_file(&st, "/a", b"old", None)?;
        let fh = OpenOptions::new().write(true).open(&st, "/a", None)?;
        let tx = st.tx_begin(&[fh])?;
        st.write(fh, 0, b"NEW!")?;
        st.create(ROOT_INO, b"b", 0o644, Some(tx))?;
        assert_eq!(read_file(&st, "/a")?, b"NEW!");
        st.tx_abort(tx)?;
        assert_eq!(read_file(&st, "/a")?, b"old");
        assert!(matches!(st.lookup(ROOT_INO, b"b"), Err(Error::NotFound(_))));
        st.release(fh)?;
        assert!(st.fsck()?.is_clean());
        Ok(())
    }

    #[test]
    fn atomic_handle_shadows_until_fsync() -> Result<()> {
        let st = MemStore::new();
        write_file(&st, "/a", b"1111", None)?;
        let fh = OpenOptions::new()
            .read(true)
            .write(true)
            .atomic(true)
            .open(&st, "/a", None)?;
        st.write(fh, 0, b"22")?;
        assert_eq!(read_file(&st, "/a")?, b"1111");
        st.fsync(fh, false)?;
        assert_eq!(read_file(&st, "/a")?, b"2211");
        st.write(fh, 2, b"33")?;
        st.abortv(&[fh])?;
        st.release(fh)?;
        assert_eq!(read_file(&st, "/a")?, b"2211");
        Ok(())
    }

    #[test]
    fn no_space_is_reported_and_store_stays_clean() -> Result<()> {
        let st = MemStore::with_capacity(8 * BLOCK_SIZE, 100);
        let err = write_file(&st, "/big", &vec![1u8; 9 * BLOCK_SIZE as usize], None)
            .expect_err("must not fit");
        assert_eq!(err.errno(), libc_enospc());
        assert!(st.fsck()?.is_clean());
        Ok(())
    }

    fn libc_enospc() -> i32 {
        Error::NoSpace(String::new()).errno()
    }

    /// A namespace call in a transaction that is not open fails with NoSuchTransaction
    /// before its own errors (the model's and the pool's order); a rename over itself, which
    /// changes nothing, too.
    #[test]
    fn finished_transaction_is_refused_first() -> Result<()> {
        let st = MemStore::new();
        write_file(&st, "/a", b"a", None)?;
        let a = st.lookup(ROOT_INO, b"a")?.ino;
        let t = st.tx_begin(&[])?;
        st.tx_commit(t)?;
        let finished = |r: Result<()>, what: &str| {
            assert!(
                matches!(r, Err(Error::NoSuchTransaction(id)) if id == t.0),
                "{what}: expected NoSuchTransaction({}), got {r:?}",
                t.0
            );
        };
        finished(
            st.create(ROOT_INO, b"a", 0o644, Some(t)).map(drop),
            "create",
        );
        finished(st.mkdir(a, b"d", 0o755, Some(t)).map(drop), "mkdir");
        finished(st.unlink(ROOT_INO, b"missing", Some(t)), "unlink");
        finished(st.rmdir(ROOT_INO, b"a", Some(t)), "rmdir");
        finished(st.rename(ROOT_INO, b"a", ROOT_INO, b"a", Some(t)), "rename");
        finished(st.link(a, ROOT_INO, b"a", Some(t)).map(drop), "link");
        let attr = SetAttr::default();
        finished(st.setattr(999, &attr, Some(t)).map(drop), "setattr");
        assert!(st.fsck()?.is_clean());
        Ok(())
    }

    #[test]
    fn rename_replaces_and_unlinked_open_file_lives_on() -> Result<()> {
        let st = MemStore::new();
        write_file(&st, "/a", b"a", None)?;
        write_file(&st, "/b", b"b", None)?;
        let fh = OpenOptions::new().read(true).open(&st, "/b", None)?;
        st.rename(ROOT_INO, b"a", ROOT_INO, b"b", None)?;
        assert_eq!(read_file(&st, "/b")?, b"a");
        let mut buf = [0u8; 1];
        st.read(fh, 0, &mut buf)?;
        assert_eq!(&buf, b"b");
        st.release(fh)?;
        assert_eq!(st.read_dir(ROOT_INO)?.len(), 1);
        assert!(st.fsck()?.is_clean());
        Ok(())
    }
}

/// Conformance cases that never reopen their store, run against MemStore as they are.
#[cfg(test)]
mod conformance_cases {
    use super::MemStore;
    use conformance::{cases, Harness};
    use store::Store;

    /// A MemStore cannot be reopened (nothing survives it): only cases that do not reopen
    /// run here, and a reopen fails the test.
    struct MemHarness;

    impl Harness for MemHarness {
        fn fresh(&self) -> Box<dyn Store> {
            Box::new(MemStore::new())
        }
        fn reopen_clean(&self, _store: Box<dyn Store>) -> Box<dyn Store> {
            panic!("a MemStore cannot be reopened: this case does not belong here")
        }
        fn reopen_unclean(&self, _store: Box<dyn Store>) -> Box<dyn Store> {
            panic!("a MemStore cannot be reopened: this case does not belong here")
        }
    }

    #[test]
    fn tx_file_in_two_transactions() {
        cases::tx_file_in_two_transactions(&MemHarness);
    }
}
