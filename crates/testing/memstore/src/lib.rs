//! `MemStore`: a volatile, in-memory implementation of the [`Store`] trait.
//!
//! It is the reference model the front ends (Rust API, FUSE, CLI) are tested against when no
//! persistent engine is needed: plain maps behind one mutex, transactions by per-inode undo
//! copies, O_ATOMIC by a per-handle shadow copy of the file. It has a byte capacity so that
//! "no space" paths can be reached. Nothing survives the process: it is not an engine.
//!
//! A transaction binds files, not handles: once one handle binds a file, the data changes
//! through every handle of that file belong to the transaction, until it ends. A file or
//! directory a transaction created belongs to it until it ends (the Store API's
//! "Transactions"; `State::check_owner` in the conformance model): a change to it from
//! outside fails with FileInTransaction(creator); after an abort, a handle on it fails with
//! NotFound for every call but `release`.

use parking_lot::Mutex;
use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use store::{
    now_ns, path::check_entry_name, DirEntry, Error, Fh, FileKind, FsckReport, Ino, Metadata,
    OpenFlags, Result, SetAttr, StatFs, Store, TxId, NAME_MAX, ROOT_INO,
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
    /// Files and directories the transaction created: they are its own until it ends.
    created: HashSet<Ino>,
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

    /// `handle`, for calls that need the file: a handle on a file whose create was aborted
    /// has none, and every call through it but `release` fails with NotFound.
    fn live_handle(&self, fh: Fh) -> Result<&Handle> {
        let h = self.handle(fh)?;
        self.node(h.ino)?;
        Ok(h)
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

    /// The open transaction that created `ino`, while it has not ended.
    fn creator(&self, ino: Ino) -> Option<TxId> {
        self.txs
            .iter()
            .find(|(_, t)| t.created.contains(&ino))
            .map(|(&id, _)| TxId(id))
    }

    /// A file or directory whose create has not committed belongs to the creating
    /// transaction: a change to one of `inos` made in `tx` (None: outside any transaction,
    /// or in an O_ATOMIC file's implicit one) fails with FileInTransaction(creator), after
    /// NoSuchTransaction for a `tx` that is not open. Called after the operation's own
    /// errors, as the model's `State::check_owner`.
    fn check_owner(&self, inos: &[Ino], tx: Option<TxId>) -> Result<()> {
        self.tx_check(tx)?;
        for &ino in inos {
            match self.creator(ino) {
                Some(owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner.0)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the file of `fh` may join transaction `tx` (None: one about to begin): the
    /// handle and its file exist, neither is bound to another open transaction, and no
    /// other transaction created the file. Returns the file.
    fn check_bind(&self, fh: Fh, tx: Option<TxId>) -> Result<Ino> {
        let h = self.live_handle(fh)?;
        if let Some(bound) = h.tx {
            return Err(Error::FileInTransaction(bound.0));
        }
        if let Some(other) = self.tx_of_file(h.ino).filter(|&t| Some(t) != tx) {
            return Err(Error::FileInTransaction(other.0));
        }
        self.check_owner(&[h.ino], tx)?;
        Ok(h.ino)
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
        check_entry_name(name)?;
        self.tx_check(tx)?;
        if self.entries(parent)?.contains_key(name) {
            return Err(Error::Exists(name_str(name)));
        }
        self.check_owner(&[parent], tx)?;
        if self.nodes.len() as u64 >= inodes_max {
            return Err(Error::NoSpace("no free inode".into()));
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.save(tx, parent)?;
        self.save(tx, ino)?;
        if let Some(tx) = tx {
            self.tx_mut(tx)?.created.insert(ino);
        }
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
        check_entry_name(name)?;
        check_entry_name(new_name)?;
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
        let target = self.entries(new_parent)?.get(new_name).copied();
        if let Some(target) = target {
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
        }
        let mut changed = vec![parent, new_parent, ino];
        changed.extend(target);
        self.check_owner(&changed, tx)?;
        if target.is_some() {
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
        let h = self.live_handle(fh)?;
        match &h.shadow {
            Some(shadow) => Ok(shadow),
            None => self.file_data(h.ino),
        }
    }

    fn install_shadow(&mut self, fh: Fh, capacity: u64) -> Result<()> {
        self.live_handle(fh)?;
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

/// Largest file MemStore holds.
const FILE_SIZE_MAX: u64 = 1 << 40;

impl MemStore {
    /// Change the data of the file of `fh` by `change` (given the file as the handle sees it
    /// and whether the handle appends). The change belongs to the transaction the file is
    /// bound to, else to the handle's O_ATOMIC shadow, else it is its own. `bytes`: whether
    /// it may change bytes, so that a file another transaction created refuses it (a write
    /// of no bytes changes nothing).
    fn modify_data(
        &self,
        fh: Fh,
        bytes: bool,
        change: impl FnOnce(&mut Vec<u8>, bool) -> Result<()>,
    ) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        let h = s.handle(fh)?;
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let (ino, atomic, append) = (h.ino, h.atomic, h.flags.append);
        s.file_data(ino)?;
        let tx = s.data_tx(h);
        if bytes {
            s.check_owner(&[ino], tx)?;
        }
        if atomic && tx.is_none() {
            let mut data = s.view(fh)?.clone();
            change(&mut data, append)?;
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
        change(&mut data, append)?;
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
        s.check_owner(&[ino], tx)?;
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
        check_entry_name(name)?;
        s.tx_check(tx)?;
        let ino = *s
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        if s.node(ino)?.meta.is_dir() {
            return Err(Error::IsDir(name_str(name)));
        }
        s.check_owner(&[parent, ino], tx)?;
        s.remove_entry(parent, name, tx)
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut s = self.inner.lock();
        s.check_open()?;
        check_entry_name(name)?;
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
        s.check_owner(&[parent, ino], tx)?;
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
        check_entry_name(new_name)?;
        s.tx_check(tx)?;
        if s.node(ino)?.meta.is_dir() {
            return Err(Error::NotPermitted("hard link to a directory".into()));
        }
        if s.entries(new_parent)?.contains_key(new_name) {
            return Err(Error::Exists(name_str(new_name)));
        }
        s.check_owner(&[ino, new_parent], tx)?;
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
        s.check_open()?;
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
        self.modify_data(fh, !data.is_empty(), |file, append| {
            let off = if append { file.len() as u64 } else { off };
            let end = off
                .checked_add(data.len() as u64)
                .ok_or_else(|| Error::FileTooLarge(format!("offset {off}")))?;
            if end > FILE_SIZE_MAX {
                return Err(Error::FileTooLarge(format!("write ending at {end}")));
            }
            if data.is_empty() {
                return Ok(()); // pwrite(2) of no bytes: not even the size changes
            }
            let (start, end) = (off as usize, end as usize);
            if file.len() < end {
                file.resize(end, 0);
            }
            file[start..end].copy_from_slice(data);
            Ok(())
        })?;
        let mut s = self.inner.lock();
        s.writes += 1;
        s.write_max = s.write_max.max(data.len() as u64);
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.modify_data(fh, true, |file, _| {
            if len > FILE_SIZE_MAX {
                return Err(Error::FileTooLarge(format!("length {len}")));
            }
            file.resize(len as usize, 0);
            Ok(())
        })
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
        s.live_handle(fh)?;
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
            s.live_handle(*fh)?;
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
            s.live_handle(*fh)?;
        }
        for fh in fhs {
            if let Some(h) = s.handles.get_mut(&fh.0) {
                h.shadow = None;
            }
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
    use store::path::{read_all, read_file, write_file};
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

    const RW: OpenFlags = OpenFlags {
        read: true,
        write: true,
        append: false,
        atomic: false,
    };

    /// `r` failed with FileInTransaction naming `owner`.
    fn busy<T: std::fmt::Debug>(r: Result<T>, owner: TxId, what: &str) {
        match r {
            Err(Error::FileInTransaction(id)) if id == owner.0 => {}
            other => panic!(
                "{what}: expected FileInTransaction({}), got {other:?}",
                owner.0
            ),
        }
    }

    /// The conformance case `tx_created_file_free_after_commit`, which ends by reopening its
    /// store (a MemStore cannot be): once the creating transaction commits, a handle that was
    /// refused writes, truncates and binds the file to another transaction.
    #[test]
    fn tx_created_file_free_after_commit() -> Result<()> {
        let st = MemStore::new();
        let t = st.tx_begin(&[])?;
        let y = st.create(ROOT_INO, b"y", 0o644, Some(t))?.ino;
        let fo = st.open(y, RW)?;
        busy(st.write(fo, 0, b"early"), t, "write before the commit");
        let fb = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(&st, "/y", Some(t))?;
        st.write(fb, 0, b"inside")?;
        st.tx_commit(t)?;
        st.write(fo, 6, b"+after")?;
        st.set_len(fo, 10)?;
        let t2 = st.tx_begin(&[fo])?;
        st.write(fo, 10, b"+t2")?;
        st.tx_commit(t2)?;
        st.rename(ROOT_INO, b"y", ROOT_INO, b"y2", None)?;
        let chmod = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        st.setattr(y, &chmod, None)?;
        assert_eq!(read_all(&st, fb)?, b"inside+aft+t2");
        st.release(fo)?;
        st.release(fb)?;
        assert_eq!(read_file(&st, "/y2")?, b"inside+aft+t2");
        assert!(st.fsck()?.is_clean());
        Ok(())
    }

    /// `r` failed with NotFound.
    fn gone<T: std::fmt::Debug>(r: Result<T>, what: &str) {
        assert!(
            matches!(r, Err(Error::NotFound(_))),
            "{what}: expected NotFound, got {r:?}"
        );
    }

    /// An unmounted store refuses every call, `release` included (Closed), as the engines.
    #[test]
    fn release_after_unmount_is_closed() -> Result<()> {
        let st = MemStore::new();
        let f = st.create(ROOT_INO, b"f", 0o644, None)?.ino;
        let fh = st.open(f, RW)?;
        st.unmount()?;
        assert!(matches!(st.release(fh), Err(Error::Closed)));
        Ok(())
    }

    /// After the abort of a create, every call through a handle on the file fails with
    /// NotFound (bound to the transaction, not bound, O_ATOMIC alike), but `release`.
    #[test]
    fn handles_on_an_aborted_create_find_nothing_but_release() -> Result<()> {
        let st = MemStore::new();
        let t = st.tx_begin(&[])?;
        let x = st.create(ROOT_INO, b"x", 0o644, Some(t))?.ino;
        let fb = st.open(x, RW)?;
        st.tx_add(t, fb)?;
        st.write(fb, 0, b"in t")?;
        let fo = st.open(x, RW)?;
        let fa = st.open(x, OpenFlags { atomic: true, ..RW })?;
        st.write(fa, 4, b"+atomic")?; // the file is bound to t: the write is t's
        st.tx_abort(t)?;
        let other = st.tx_begin(&[])?;
        for fh in [fb, fo, fa] {
            let mut buf = [0u8; 4];
            gone(st.read(fh, 0, &mut buf), "read");
            gone(st.write(fh, 0, b"x"), "write");
            gone(st.write(fh, 0, b""), "write of no bytes");
            gone(st.set_len(fh, 0), "set_len");
            gone(st.fsync(fh, false), "fsync");
            gone(st.fstat(fh), "fstat");
            gone(st.set_atomic(fh, true), "set_atomic on");
            gone(st.set_atomic(fh, false), "set_atomic off");
            gone(st.syncv(&[fh]), "syncv");
            gone(st.abortv(&[fh]), "abortv");
            gone(st.tx_begin(&[fh]), "tx_begin");
            gone(st.tx_add(other, fh), "tx_add");
            st.release(fh)?;
            assert!(matches!(st.fstat(fh), Err(Error::BadHandle(_))));
        }
        st.tx_commit(other)?;
        gone(st.getattr(x), "getattr");
        assert!(st.read_dir(ROOT_INO)?.is_empty());
        assert!(st.fsck()?.is_clean());
        Ok(())
    }

    /// Symlinks (which the model does not have) follow the rule as files do.
    #[test]
    fn tx_created_symlink_and_directory_refuse_changes_from_outside() -> Result<()> {
        let st = MemStore::new();
        let t = st.tx_begin(&[])?;
        let d = st.mkdir(ROOT_INO, b"d", 0o755, Some(t))?.ino;
        busy(
            st.symlink(d, b"l", b"/x", None),
            t,
            "symlink in the new dir",
        );
        let l = st.symlink(ROOT_INO, b"l", b"/x", Some(t))?.ino;
        busy(
            st.unlink(ROOT_INO, b"l", None),
            t,
            "unlink of the new symlink",
        );
        busy(
            st.rename(ROOT_INO, b"l", ROOT_INO, b"m", None),
            t,
            "rename of the new symlink",
        );
        assert_eq!(st.readlink(l)?, b"/x", "reading is allowed");
        st.symlink(d, b"l", b"/x", Some(t))?;
        st.tx_commit(t)?;
        st.symlink(d, b"l2", b"/y", None)?;
        st.unlink(ROOT_INO, b"l", None)?;
        assert_eq!(st.read_dir(d)?.len(), 2);
        assert!(st.fsck()?.is_clean());
        Ok(())
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
    use conformance::{cases, Harness, ModelStore};
    use store::path::write_file;
    use store::{Error, Fh, Ino, OpenFlags, Result, SetAttr, Store, TxId, ROOT_INO};

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
    fn tx_created_file_refuses_changes_from_outside() {
        cases::tx_created_file_refuses_changes_from_outside(&MemHarness);
    }

    #[test]
    fn tx_file_in_two_transactions() {
        cases::tx_file_in_two_transactions(&MemHarness);
    }

    #[test]
    fn namespace_error_order() {
        cases::namespace_error_order(&MemHarness);
    }

    #[test]
    fn tx_aborted_create_handles_not_found() {
        cases::tx_aborted_create_handles_not_found(&MemHarness);
    }

    fn must<T>(r: Result<T>, what: &str) -> T {
        match r {
            Ok(v) => v,
            Err(e) => panic!("{what}: {e}"),
        }
    }

    /// What a call returned, for comparing two stores: `ok`, or the error's kind (with the
    /// transaction or handle it names).
    fn outcome<T>(r: Result<T>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e @ (Error::FileInTransaction(_) | Error::NoSuchTransaction(_))) => {
                format!("{e:?}")
            }
            Err(e @ Error::BadHandle(_)) => format!("{e:?}"),
            Err(e) => format!("{e:?}")
                .split(['(', ' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned(),
        }
    }

    /// Changes from outside (no transaction, another one, a transaction that is not open,
    /// O_ATOMIC) to a file and directories an open transaction created, with the errors that
    /// come before the refusal; then the same file bound by its creator; then handles on it
    /// after the abort. Returns every call's outcome and the final tree.
    fn created_by_open_tx(s: &dyn Store) -> (Vec<String>, conformance::Tree) {
        let mut out = Vec::new();
        let mut note = |what: &str, r: String| out.push(format!("{what}: {r}"));
        let chmod = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        let ro = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        let rw = OpenFlags { write: true, ..ro };
        let setup = || -> Result<_> {
            write_file(s, "/a", b"committed", None)?;
            let e = s.mkdir(ROOT_INO, b"e", 0o755, None)?.ino;
            s.create(e, b"c", 0o644, None)?;
            let t = s.tx_begin(&[])?;
            let x = s.create(ROOT_INO, b"x", 0o644, Some(t))?.ino;
            let d = s.mkdir(ROOT_INO, b"d", 0o755, Some(t))?.ino;
            s.create(d, b"inner", 0o644, Some(t))?;
            s.mkdir(ROOT_INO, b"d2", 0o755, Some(t))?;
            Ok((t, x, d, s.lookup(ROOT_INO, b"a")?.ino))
        };
        let (t, x, d, a) = must(setup(), "setup");
        let u = must(s.tx_begin(&[]), "tx_begin");
        for tx in [None, Some(u), Some(TxId(99))] {
            let n = |what: &str| format!("{what} in {tx:?}");
            note(
                &n("create existing"),
                outcome(s.create(d, b"inner", 0o644, tx)),
            );
            note(&n("create in d"), outcome(s.create(d, b"new", 0o644, tx)));
            note(&n("create in x"), outcome(s.create(x, b"new", 0o644, tx)));
            note(&n("mkdir in d"), outcome(s.mkdir(d, b"new", 0o755, tx)));
            note(&n("unlink missing"), outcome(s.unlink(d, b"missing", tx)));
            note(&n("unlink in d"), outcome(s.unlink(d, b"inner", tx)));
            note(&n("unlink x"), outcome(s.unlink(ROOT_INO, b"x", tx)));
            note(&n("unlink d"), outcome(s.unlink(ROOT_INO, b"d", tx)));
            note(&n("rmdir full d"), outcome(s.rmdir(ROOT_INO, b"d", tx)));
            note(&n("rmdir x"), outcome(s.rmdir(ROOT_INO, b"x", tx)));
            note(&n("rmdir d2"), outcome(s.rmdir(ROOT_INO, b"d2", tx)));
            let mv = |from: Ino, name: &[u8], to: Ino, new: &[u8]| {
                outcome(s.rename(from, name, to, new, tx))
            };
            note(&n("rename x"), mv(ROOT_INO, b"x", ROOT_INO, b"y"));
            note(&n("rename over x"), mv(ROOT_INO, b"a", ROOT_INO, b"x"));
            note(&n("rename into d"), mv(ROOT_INO, b"a", d, b"a"));
            note(&n("rename out of d"), mv(d, b"inner", ROOT_INO, b"i"));
            note(&n("rename within d"), mv(d, b"inner", d, b"i"));
            note(&n("rename x onto x"), mv(ROOT_INO, b"x", ROOT_INO, b"x"));
            note(&n("rename file onto d"), mv(ROOT_INO, b"a", ROOT_INO, b"d"));
            note(
                &n("rename dir onto full d"),
                mv(ROOT_INO, b"e", ROOT_INO, b"d"),
            );
            note(
                &n("rename dir onto d2"),
                mv(ROOT_INO, b"e", ROOT_INO, b"d2"),
            );
            note(
                &n("rename missing"),
                mv(ROOT_INO, b"missing", ROOT_INO, b"x"),
            );
            note(&n("link x"), outcome(s.link(x, ROOT_INO, b"x2", tx)));
            note(&n("link into d"), outcome(s.link(a, d, b"a2", tx)));
            note(&n("link onto x"), outcome(s.link(a, ROOT_INO, b"x", tx)));
            note(&n("link d"), outcome(s.link(d, ROOT_INO, b"d3", tx)));
            note(&n("setattr x"), outcome(s.setattr(x, &chmod, tx)));
            note(&n("setattr d"), outcome(s.setattr(d, &chmod, tx)));
            note(&n("setattr missing"), outcome(s.setattr(999, &chmod, tx)));
        }
        // Reading is allowed.
        note("lookup x", outcome(s.lookup(ROOT_INO, b"x")));
        note("getattr d", outcome(s.getattr(d)));
        note("read_dir d", outcome(s.read_dir(d)));
        // (A failed open is noted, and the calls through it fail with BadHandle.)
        let mut open = |what: &str, flags: OpenFlags| match s.open(x, flags) {
            Ok(fh) => {
                note(what, "ok".into());
                fh
            }
            Err(e) => {
                note(what, outcome::<()>(Err(e)));
                Fh(u64::MAX)
            }
        };
        let fo = open("open", rw);
        let fr = open("open read-only", ro);
        let fa = open("open O_ATOMIC", OpenFlags { atomic: true, ..rw });
        let fb = open("open another", rw);
        let mut buf = [0u8; 8];
        note("read", outcome(s.read(fo, 0, &mut buf)));
        note("fstat", outcome(s.fstat(fo)));
        note("write", outcome(s.write(fo, 0, b"z")));
        note("write of no bytes", outcome(s.write(fo, 5, b"")));
        note("size", format!("{:?}", s.fstat(fo).map(|m| m.size).ok()));
        note("write far", outcome(s.write(fo, 1 << 50, b"z")));
        note("set_len", outcome(s.set_len(fo, 0)));
        note("set_len far", outcome(s.set_len(fo, 1 << 50)));
        note("write read-only", outcome(s.write(fr, 0, b"z")));
        note("O_ATOMIC write", outcome(s.write(fa, 0, b"z")));
        note("O_ATOMIC set_len", outcome(s.set_len(fa, 3)));
        note("fsync", outcome(s.fsync(fa, false)));
        note("tx_begin", outcome(s.tx_begin(&[fo])));
        note("tx_add other", outcome(s.tx_add(u, fo)));
        note("tx_add none", outcome(s.tx_add(TxId(99), fo)));
        // The creator binds the file: every handle's writes are its own.
        note("tx_add creator", outcome(s.tx_add(t, fb)));
        note("tx_add other, bound", outcome(s.tx_add(u, fo)));
        note("tx_add creator again", outcome(s.tx_add(t, fo)));
        note("write, bound", outcome(s.write(fb, 0, b"in t")));
        note("write other handle", outcome(s.write(fo, 4, b"+fo")));
        note("O_ATOMIC write, bound", outcome(s.write(fa, 7, b"+fa")));
        note("set_len other handle", outcome(s.set_len(fo, 9)));
        note("contents", format!("{:?}", store::path::read_all(s, fr)));
        note(
            "create in d in t",
            outcome(s.create(d, b"f", 0o644, Some(t))),
        );
        note(
            "rename a into d in t",
            outcome(s.rename(ROOT_INO, b"a", d, b"a", Some(t))),
        );
        note("commit the other", outcome(s.tx_commit(u)));
        note("abort", outcome(s.tx_abort(t)));
        // The create was aborted: its handles find nothing, but release.
        let other = must(s.tx_begin(&[]), "tx_begin");
        for fh in [fo, fr, fa, fb] {
            let n = |what: &str| format!("{what} through {fh:?} after abort");
            note(&n("read"), outcome(s.read(fh, 0, &mut buf)));
            note(&n("write"), outcome(s.write(fh, 0, b"z")));
            note(&n("write of no bytes"), outcome(s.write(fh, 0, b"")));
            note(&n("set_len"), outcome(s.set_len(fh, 0)));
            note(&n("fsync"), outcome(s.fsync(fh, true)));
            note(&n("fstat"), outcome(s.fstat(fh)));
            note(&n("set_atomic"), outcome(s.set_atomic(fh, false)));
            note(&n("syncv"), outcome(s.syncv(&[fh])));
            note(&n("abortv"), outcome(s.abortv(&[fh])));
            note(&n("tx_begin"), outcome(s.tx_begin(&[fh])));
            note(&n("tx_add"), outcome(s.tx_add(other, fh)));
            note(&n("release"), outcome(s.release(fh)));
        }
        note("commit", outcome(s.tx_commit(other)));
        note("lookup x after abort", outcome(s.lookup(ROOT_INO, b"x")));
        note("lookup d after abort", outcome(s.lookup(ROOT_INO, b"d")));
        note(
            "fsck",
            format!(
                "{:?}",
                s.fsck().map(|r| r.problems).map_err(|e| e.to_string())
            ),
        );
        (out, must(conformance::snapshot(s), "snapshot"))
    }

    /// MemStore answers every change to what an open transaction created, and every call
    /// through a handle on an aborted create, as the conformance model does: same results,
    /// same errors, the same error first where a call has several.
    #[test]
    fn created_by_open_tx_as_the_model() {
        let (mem, mem_tree) = created_by_open_tx(&MemStore::new());
        let (model, model_tree) = created_by_open_tx(&ModelStore::new());
        assert_eq!(mem.len(), model.len());
        let differ: Vec<String> = mem
            .iter()
            .zip(&model)
            .filter(|(m, want)| m != want)
            .map(|(m, want)| format!("MemStore {m:?}, model {want:?}"))
            .collect();
        assert!(
            differ.is_empty(),
            "MemStore differs from the model:\n{}",
            differ.join("\n")
        );
        assert_eq!(mem_tree, model_tree, "trees differ");
        let refused = mem
            .iter()
            .filter(|o| o.contains("FileInTransaction(1)"))
            .count();
        assert!(refused >= 35, "only {refused} refusals: {mem:#?}");
    }
}
