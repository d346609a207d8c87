//! The namespace in DRAM: inodes, directories, open handles and transactions, with the Store
//! API's rules (ownership of files created by open transactions, error order, links). Every
//! change is made inside a transaction (a call outside any transaction gets an internal
//! one): the transaction keeps the undo images of what it changed and the set of inodes and
//! entries to write to the metadata log when it commits.

use super::meta_log::{HomeRecord, MetaFormat, Record};
use super::punched::Punched;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use store::{
    now_ns, path::check_entry_name, Error, Fh, FileKind, Ino, Metadata, OpenFlags, Result, TxId,
    ROOT_INO,
};

#[derive(Clone, Debug)]
pub enum Body {
    /// A regular file (its data in its home file and the journal).
    File { punched: Punched },
    Dir {
        entries: BTreeMap<Vec<u8>, Ino>,
        parent: Ino,
    },
    /// A symbolic link (never followed by the store).
    Symlink { target: Vec<u8> },
    /// A FIFO, a socket or a device node: an inode only (the kernel opens them).
    Special,
}

/// Whether a file with no name may get one ([`Store::link`](store::Store::link)): only an
/// unnamed (O_TMPFILE) file that never had one, as linkat(2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    Named,
    Unnamed,
}

/// Extended attributes of an inode, by name.
pub type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
pub struct Node {
    pub meta: Metadata,
    pub body: Body,
    /// Kept per name (like a directory's entries): undo images hold none.
    pub xattrs: Xattrs,
    pub naming: Naming,
}

impl Node {
    /// Blocks of storage the node holds (a file's, punched blocks left out).
    pub fn blocks(&self) -> u64 {
        match &self.body {
            Body::File { punched } => {
                let blocks = self.meta.size.div_ceil(4096);
                blocks - punched.blocks_below(blocks).min(blocks)
            }
            _ => 0,
        }
    }

    /// `meta.allocated` after a change of the size or the punched ranges.
    pub fn refresh_allocated(&mut self) {
        self.meta.allocated = self.blocks() * 4096;
    }

    /// A copy of the node without a directory's entries nor attributes (an undo or committed
    /// image: those are kept per name, so an operation never copies a large directory).
    pub fn without_entries(&self) -> Node {
        Node {
            meta: self.meta,
            body: match &self.body {
                Body::Dir { parent, .. } => Body::Dir {
                    entries: BTreeMap::new(),
                    parent: *parent,
                },
                other => other.clone(),
            },
            xattrs: Xattrs::new(),
            naming: self.naming,
        }
    }

    pub fn new(ino: Ino, kind: FileKind, perm: u32, parent: Ino) -> Node {
        let now = now_ns();
        let dir = kind == FileKind::Dir;
        Node {
            meta: Metadata {
                ino,
                kind,
                size: 0,
                perm: perm & 0o7777,
                nlink: if dir { 2 } else { 1 },
                uid: 0,
                gid: 0,
                allocated: 0,
                atime: now,
                mtime: now,
                ctime: now,
                rdev: 0,
            },
            body: match kind {
                FileKind::Dir => Body::Dir {
                    entries: BTreeMap::new(),
                    parent,
                },
                FileKind::File => Body::File {
                    punched: Punched::default(),
                },
                FileKind::Symlink => Body::Symlink { target: Vec::new() },
                _ => Body::Special,
            },
            xattrs: Xattrs::new(),
            naming: Naming::Named,
        }
    }
}

/// An O_ATOMIC handle's writes since its last fsync.
#[derive(Debug)]
pub struct Shadow {
    pub core: crate::Tx,
    pub size: u64,
}

#[derive(Debug)]
pub struct Handle {
    pub ino: Ino,
    pub flags: OpenFlags,
    pub atomic: bool,
    pub tx: Option<TxId>,
}

/// What a transaction changed, to be logged at commit.
#[derive(Debug, Default)]
pub struct Dirty {
    pub inodes: BTreeSet<Ino>,
    pub entries: BTreeSet<(Ino, Vec<u8>)>,
    /// Extended attributes, by inode and name.
    pub xattrs: BTreeSet<(Ino, Vec<u8>)>,
}

#[derive(Debug, Default)]
pub struct Tx {
    pub id: u64,
    /// Images of every inode changed, first change first (`None`: it did not exist);
    /// a directory's image has no entries (`entry_undo` keeps those the transaction changed).
    pub undo: Vec<(Ino, Option<Node>)>,
    pub files: HashSet<Ino>,
    pub created: HashSet<Ino>,
    pub dirty: Dirty,
    /// The transaction's journaled blocks and appends.
    pub core: crate::Tx,
    /// The first value of every entry the transaction changed (`None`: no entry).
    pub entry_undo: HashMap<(Ino, Vec<u8>), Option<Ino>>,
    /// The first value of every extended attribute the transaction changed (`None`: none).
    pub xattr_undo: HashMap<(Ino, Vec<u8>), Option<Vec<u8>>>,
    /// Links this transaction added (negative: dropped), per inode.
    pub nlink: HashMap<Ino, i64>,
    /// What this transaction did to each inode's fields (see [`super::shared`]).
    pub own: HashMap<Ino, super::shared::Own>,
}

pub fn name_str(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The DRAM state of a store.
#[derive(Debug)]
pub struct Inner {
    pub nodes: HashMap<Ino, Node>,
    pub next_ino: Ino,
    pub handles: HashMap<u64, Handle>,
    /// Pending O_ATOMIC writes by file: one shadow per file, shared by its handles (as a page
    /// cache is): the writes through any O_ATOMIC handle of the file are read through all
    /// of them, and an fsync, `syncv` or `abortv` of any one commits or drops them together.
    pub shadows: HashMap<Ino, Shadow>,
    pub next_fh: u64,
    pub txs: HashMap<u64, Tx>,
    pub next_tx: u64,
    pub used_blocks: u64,
    pub closed: bool,
    /// Published length of the metadata log.
    pub log_len: u64,
    /// Committed size of each file (appends past it go home directly).
    pub durable: HashMap<Ino, u64>,
    /// Per file: no byte at or past this offset can hold stale data (home file or journal).
    pub high_water: HashMap<Ino, u64>,
    /// Per home file: the recorded end past which the journal holds no version.
    pub extents: HashMap<Ino, u64>,
    /// Inodes changed by open transactions: the committed image, and who changed it last.
    pub shared: HashMap<Ino, super::shared::Shared>,
    /// Largest inode number: the largest home file id of the journal's header format.
    pub ino_max: Ino,
    /// What the store recorded of each home file (live inodes).
    pub homes: HashMap<Ino, super::meta_log::HomeRecord>,
    /// What the metadata log can record (its header's version).
    pub format: MetaFormat,
    /// The metadata log is not compacted again before it is this long.
    pub compact_after: u64,
}

impl Inner {
    pub fn new(
        nodes: HashMap<Ino, Node>,
        extents: HashMap<Ino, u64>,
        log_len: u64,
        ino_max: Ino,
        format: MetaFormat,
    ) -> Inner {
        let next_ino = nodes.keys().max().copied().unwrap_or(ROOT_INO) + 1;
        let used_blocks = nodes.values().map(Node::blocks).sum();
        let durable = nodes.iter().map(|(i, n)| (*i, n.meta.size)).collect();
        Inner {
            nodes,
            next_ino,
            handles: HashMap::new(),
            shadows: HashMap::new(),
            next_fh: 1,
            txs: HashMap::new(),
            next_tx: 1,
            used_blocks,
            closed: false,
            log_len,
            durable,
            high_water: HashMap::new(),
            extents,
            shared: HashMap::new(),
            ino_max,
            homes: HashMap::new(),
            format,
            compact_after: 0,
        }
    }

    pub fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    pub fn node(&self, ino: Ino) -> Result<&Node> {
        self.nodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    pub fn node_mut(&mut self, ino: Ino) -> Result<&mut Node> {
        self.nodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    pub fn entries(&self, dir: Ino) -> Result<&BTreeMap<Vec<u8>, Ino>> {
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

    /// The inode of entry `name` of `dir` (NotFound without one).
    pub fn child(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        self.entries(dir)?
            .get(name)
            .copied()
            .ok_or_else(|| Error::NotFound(name_str(name)))
    }

    pub fn handle(&self, fh: Fh) -> Result<&Handle> {
        self.handles.get(&fh.0).ok_or(Error::BadHandle(fh.0))
    }

    /// A handle whose file still exists (a handle on an aborted create answers NotFound).
    pub fn live_handle(&self, fh: Fh) -> Result<&Handle> {
        let h = self.handle(fh)?;
        self.node(h.ino)?;
        Ok(h)
    }

    pub fn tx_of_file(&self, ino: Ino) -> Option<TxId> {
        self.txs
            .iter()
            .find(|(_, t)| t.files.contains(&ino))
            .map(|(&id, _)| TxId(id))
    }

    pub fn data_tx(&self, h: &Handle) -> Option<TxId> {
        h.tx.or_else(|| self.tx_of_file(h.ino))
    }

    fn creator(&self, ino: Ino) -> Option<TxId> {
        self.txs
            .iter()
            .find(|(_, t)| t.created.contains(&ino))
            .map(|(&id, _)| TxId(id))
    }

    /// A change to `inos` made in `tx` (an internal transaction stands for "outside any")
    /// fails with FileInTransaction(creator) when another open transaction created one.
    pub fn check_owner(&self, inos: &[Ino], tx: Option<TxId>) -> Result<()> {
        self.tx_check(tx)?;
        for &ino in inos {
            match self.creator(ino) {
                Some(owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner.0)),
                _ => {}
            }
        }
        Ok(())
    }

    pub fn check_bind(&self, fh: Fh, tx: Option<TxId>) -> Result<Ino> {
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

    pub fn bind(&mut self, tx: TxId, fh: Fh) -> Result<()> {
        let h = self.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        h.tx = Some(tx);
        let ino = h.ino;
        self.tx_mut(tx)?.files.insert(ino);
        Ok(())
    }

    pub fn tx_check(&self, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(tx) if !self.txs.contains_key(&tx.0) => Err(Error::NoSuchTransaction(tx.0)),
            _ => Ok(()),
        }
    }

    pub fn tx_mut(&mut self, tx: TxId) -> Result<&mut Tx> {
        self.txs
            .get_mut(&tx.0)
            .ok_or(Error::NoSuchTransaction(tx.0))
    }

    /// Save the image of `ino` in `tx` before its first change there, and mark it dirty.
    pub fn save(&mut self, tx: TxId, ino: Ino) -> Result<()> {
        self.tx_check(Some(tx))?;
        self.note_change(tx, ino);
        let image = self.nodes.get(&ino).map(Node::without_entries);
        let t = self.tx_mut(tx)?;
        if !t.undo.iter().any(|(i, _)| *i == ino) {
            t.undo.push((ino, image));
        }
        t.dirty.inodes.insert(ino);
        Ok(())
    }

    /// Set (or remove) the entry `name` of `dir` in `tx`, keeping its first value in the
    /// transaction for an abort.
    pub fn set_entry(&mut self, tx: TxId, dir: Ino, name: &[u8], to: Option<Ino>) -> Result<()> {
        let before = self.entries(dir)?.get(name).copied();
        let t = self.tx_mut(tx)?;
        let key = (dir, name.to_vec());
        t.entry_undo.entry(key.clone()).or_insert(before);
        t.dirty.entries.insert(key);
        let entries = self.entries_mut(dir)?;
        match to {
            Some(ino) => entries.insert(name.to_vec(), ino),
            None => entries.remove(name),
        };
        Ok(())
    }

    /// Replace (or remove) an inode, keeping the block count right.
    pub fn put(&mut self, ino: Ino, node: Option<Node>) {
        if let Some(old) = self.nodes.remove(&ino) {
            self.used_blocks -= old.blocks();
        }
        if let Some(new) = node {
            self.used_blocks += new.blocks();
            self.nodes.insert(ino, new);
        }
    }

    /// The open transaction that changed `ino`, if any.
    pub fn tx_of_change(&self, ino: Ino) -> Option<TxId> {
        self.txs
            .iter()
            .find(|(_, t)| t.undo.iter().any(|(i, _)| *i == ino))
            .map(|(&id, _)| TxId(id))
    }

    fn open_count(&self, ino: Ino) -> usize {
        self.handles.values().filter(|h| h.ino == ino).count()
    }

    /// Drop an inode that has no names and no open handles (in `tx`).
    pub fn reap(&mut self, ino: Ino, tx: TxId) -> Result<()> {
        let orphan = self.nodes.get(&ino).is_some_and(|n| n.meta.nlink == 0);
        if orphan && self.open_count(ino) == 0 {
            self.save(tx, ino)?;
            self.keep_xattrs(tx, ino)?;
            self.put(ino, None);
        }
        Ok(())
    }

    /// A regular file; what open(2) answers for any other kind.
    pub fn file_node(&self, ino: Ino) -> Result<&Node> {
        let n = self.node(ino)?;
        match n.body {
            Body::File { .. } => Ok(n),
            Body::Dir { .. } => Err(Error::IsDir(format!("inode {ino}"))),
            // The store never follows a link: opening one is open(O_NOFOLLOW) on it.
            Body::Symlink { .. } => Err(Error::SymlinkLoop(format!(
                "inode {ino} is a symbolic link"
            ))),
            Body::Special => Err(Error::special_open(ino, n.meta.kind)),
        }
    }

    /// A free inode number: the next never used one, else one whose removal is committed.
    pub fn alloc_ino(&mut self) -> Result<Ino> {
        if self.next_ino <= self.ino_max {
            self.next_ino += 1;
            return Ok(self.next_ino - 1);
        }
        let pending: HashSet<Ino> = self
            .txs
            .values()
            .flat_map(|t| t.undo.iter().map(|(i, _)| *i))
            .collect();
        (ROOT_INO + 1..=self.ino_max)
            .find(|i| !self.nodes.contains_key(i) && !pending.contains(i))
            .ok_or_else(|| Error::NoSpace("no free inode".into()))
    }

    pub fn new_node(
        &mut self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        self.tx_check(user_tx)?;
        if self.entries(parent)?.contains_key(name) {
            return Err(Error::Exists(name_str(name)));
        }
        self.check_owner(&[parent], Some(tx))?;
        let ino = self.alloc_ino()?;
        self.save(tx, parent)?;
        self.save(tx, ino)?;
        self.tx_mut(tx)?.created.insert(ino);
        let node = Node::new(ino, kind, perm, parent);
        let meta = node.meta;
        self.put(ino, Some(node));
        self.set_entry(tx, parent, name, Some(ino))?;
        self.durable.insert(ino, 0);
        if kind == FileKind::Dir {
            self.add_links(tx, parent, 1)?;
        }
        let dir = self.node_mut(parent)?;
        dir.meta.mtime = now_ns();
        dir.meta.ctime = dir.meta.mtime;
        Ok(meta)
    }

    pub fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
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

    /// Remove the entry `name` of `parent` (already checked), dropping one link.
    pub fn remove_entry(&mut self, parent: Ino, name: &[u8], tx: TxId) -> Result<()> {
        let ino = *self
            .entries(parent)?
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        self.save(tx, parent)?;
        self.save(tx, ino)?;
        self.set_entry(tx, parent, name, None)?;
        let now = now_ns();
        let child = self.node_mut(ino)?;
        let was_dir = child.meta.is_dir();
        let dropped = if was_dir {
            child.meta.nlink
        } else {
            child.meta.nlink.min(1)
        };
        child.meta.ctime = now;
        self.add_links(tx, ino, -(dropped as i64))?;
        if was_dir {
            self.add_links(tx, parent, -1)?;
        }
        let dir = self.node_mut(parent)?;
        dir.meta.mtime = now;
        dir.meta.ctime = now;
        self.reap(ino, tx)
    }

    /// Refusals of a rename, in the API's order; `Ok(None)`: renaming onto itself.
    fn rename_check(
        &self,
        (parent, name): (Ino, &[u8]),
        (new_parent, new_name): (Ino, &[u8]),
        tx: TxId,
    ) -> Result<Option<(Ino, Option<Ino>)>> {
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
                return Ok(None);
            }
            match (moving_dir, self.node(target)?.meta.is_dir()) {
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
        self.check_owner(&changed, Some(tx))?;
        Ok(Some((ino, target)))
    }

    pub fn rename(
        &mut self,
        (parent, name): (Ino, &[u8]),
        (new_parent, new_name): (Ino, &[u8]),
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<()> {
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        self.tx_check(user_tx)?;
        let Some((ino, target)) = self.rename_check((parent, name), (new_parent, new_name), tx)?
        else {
            return Ok(());
        };
        if target.is_some() {
            self.remove_entry(new_parent, new_name, tx)?;
        }
        self.save(tx, parent)?;
        self.save(tx, new_parent)?;
        self.save(tx, ino)?;
        self.set_entry(tx, parent, name, None)?;
        self.set_entry(tx, new_parent, new_name, Some(ino))?;
        let now = now_ns();
        if self.node(ino)?.meta.is_dir() {
            if let Body::Dir { parent: p, .. } = &mut self.node_mut(ino)?.body {
                *p = new_parent;
            }
            self.add_links(tx, parent, -1)?;
            self.add_links(tx, new_parent, 1)?;
        }
        for dir in [parent, new_parent] {
            let d = self.node_mut(dir)?;
            d.meta.mtime = now;
            d.meta.ctime = now;
        }
        self.node_mut(ino)?.meta.ctime = now;
        Ok(())
    }

    pub fn link(
        &mut self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: TxId,
    ) -> Result<Metadata> {
        self.save(tx, new_parent)?;
        self.save(tx, ino)?;
        self.set_entry(tx, new_parent, new_name, Some(ino))?;
        self.add_links(tx, ino, 1)?;
        let now = now_ns();
        let n = self.node_mut(ino)?;
        n.meta.ctime = now;
        n.naming = Naming::Named;
        let meta = n.meta;
        let dir = self.node_mut(new_parent)?;
        dir.meta.mtime = now;
        dir.meta.ctime = now;
        Ok(meta)
    }

    pub fn unbind(&mut self, tx: TxId) {
        for h in self.handles.values_mut() {
            if h.tx == Some(tx) {
                h.tx = None;
            }
        }
    }

    /// Open a transaction (user or internal).
    pub fn begin(&mut self) -> TxId {
        let tx = TxId(self.next_tx);
        self.next_tx += 1;
        self.txs.insert(
            tx.0,
            Tx {
                id: tx.0,
                ..Tx::default()
            },
        );
        tx
    }

    /// The metadata records of what removed transaction `t` changed: its inodes as it
    /// left them (see [`super::shared`]), its entries as they are now.
    pub fn records(&self, t: &Tx) -> Vec<Record> {
        let dirty = &t.dirty;
        let mut live = Vec::new();
        let mut freed = Vec::new();
        for &ino in &dirty.inodes {
            match self.committed_by(t, ino) {
                Some(n) => live.push(inode_record(&n)),
                None => freed.push(Record::FreeInode { ino }),
            }
        }
        for (dir, name) in &dirty.entries {
            let ino = self.entries(*dir).ok().and_then(|e| e.get(name)).copied();
            live.push(match ino {
                Some(ino) => Record::Entry {
                    dir: *dir,
                    name: name.clone(),
                    ino,
                },
                None => Record::NoEntry {
                    dir: *dir,
                    name: name.clone(),
                },
            });
        }
        for (ino, name) in &dirty.xattrs {
            let Some(node) = self.nodes.get(ino) else {
                continue; // freed: its FreeInode drops every attribute
            };
            live.push(match node.xattrs.get(name) {
                Some(value) => Record::Xattr {
                    ino: *ino,
                    name: name.clone(),
                    value: value.clone(),
                },
                None => Record::NoXattr {
                    ino: *ino,
                    name: name.clone(),
                },
            });
        }
        live.extend(freed);
        live
    }

    /// Every inode and entry, for a compacted log.
    pub fn snapshot(&self) -> Vec<Record> {
        let mut inos: Vec<&Ino> = self.nodes.keys().collect();
        inos.sort_unstable();
        let mut out: Vec<Record> = inos
            .iter()
            .filter_map(|i| self.nodes.get(i))
            .map(inode_record)
            .collect();
        let mut homes: Vec<_> = self.homes.values().copied().collect();
        homes.sort_unstable_by_key(|h| h.ino);
        out.extend(homes.into_iter().map(|h| {
            Record::Home(HomeRecord {
                mtime_ns: 0,
                ctime_ns: 0,
                ..h
            })
        }));
        let mut extents: Vec<_> = self.extents.iter().collect();
        extents.sort_unstable();
        out.extend(
            extents
                .into_iter()
                .map(|(&ino, &end)| Record::Extent { ino, end }),
        );
        for &ino in &inos {
            let Some(node) = self.nodes.get(ino) else {
                continue;
            };
            out.extend(node.xattrs.iter().map(|(name, value)| Record::Xattr {
                ino: *ino,
                name: name.clone(),
                value: value.clone(),
            }));
        }
        for ino in inos {
            if let Ok(entries) = self.entries(*ino) {
                for (name, child) in entries {
                    out.push(Record::Entry {
                        dir: *ino,
                        name: name.clone(),
                        ino: *child,
                    });
                }
            }
        }
        out
    }
}

pub fn inode_record(n: &Node) -> Record {
    let (parent, target, punched) = match &n.body {
        Body::Dir { parent, .. } => (*parent, Vec::new(), Vec::new()),
        Body::File { punched } => (0, Vec::new(), punched.ranges().to_vec()),
        Body::Symlink { target } => (0, target.clone(), Vec::new()),
        Body::Special => (0, Vec::new(), Vec::new()),
    };
    Record::Inode {
        meta: n.meta,
        parent,
        target,
        punched,
    }
}

/// The recorded extents of the home files, or none at all in a log written before them.
#[derive(Debug)]
pub enum Extents {
    Recorded(HashMap<Ino, u64>),
    Unrecorded,
}

/// Rebuild the nodes and the extents from a metadata log.
pub fn replay(
    records: Vec<Record>,
    ino_max: Ino,
) -> std::result::Result<(HashMap<Ino, Node>, Extents), String> {
    let mut nodes: HashMap<Ino, Node> = HashMap::new();
    let mut extents: Option<HashMap<Ino, u64>> = None;
    for rec in records {
        match rec {
            Record::Home(_) | Record::Clean | Record::Opened => {}
            Record::Extent { ino, end } => {
                if ino > ino_max {
                    return Err(format!("extent of inode {ino}"));
                }
                let e = extents
                    .get_or_insert_with(HashMap::new)
                    .entry(ino)
                    .or_insert(0);
                *e = (*e).max(end);
            }
            Record::Inode {
                meta,
                parent,
                target,
                punched,
            } => {
                if meta.ino == 0 || meta.ino > ino_max {
                    return Err(format!("inode number {}", meta.ino));
                }
                let old = nodes.remove(&meta.ino);
                let xattrs = old.as_ref().map(|n| n.xattrs.clone()).unwrap_or_default();
                let body = replayed_body(meta, parent, target, punched, old.map(|n| n.body))?;
                let mut node = Node {
                    meta,
                    body,
                    xattrs,
                    naming: Naming::Named,
                };
                node.refresh_allocated();
                nodes.insert(meta.ino, node);
            }
            Record::Xattr { ino, name, value } => match nodes.get_mut(&ino) {
                Some(n) => {
                    n.xattrs.insert(name, value);
                }
                None => return Err(format!("attribute of missing inode {ino}")),
            },
            Record::NoXattr { ino, name } => {
                if let Some(n) = nodes.get_mut(&ino) {
                    n.xattrs.remove(&name);
                }
            }
            Record::FreeInode { ino } => {
                nodes.remove(&ino);
            }
            Record::Entry { dir, name, ino } => match nodes.get_mut(&dir).map(|n| &mut n.body) {
                Some(Body::Dir { entries, .. }) => {
                    entries.insert(name, ino);
                }
                _ => return Err(format!("entry in missing directory {dir}")),
            },
            Record::NoEntry { dir, name } => {
                if let Some(Body::Dir { entries, .. }) = nodes.get_mut(&dir).map(|n| &mut n.body) {
                    entries.remove(&name);
                }
            }
        }
    }
    check_tree(&nodes)?;
    Ok((
        nodes,
        extents.map_or(Extents::Unrecorded, Extents::Recorded),
    ))
}

/// The body of a replayed Inode record (`old`: the inode's body before it, whose entries a
/// directory keeps).
fn replayed_body(
    meta: Metadata,
    parent: Ino,
    target: Vec<u8>,
    punched: Vec<(u64, u64)>,
    old: Option<Body>,
) -> std::result::Result<Body, String> {
    let ino = meta.ino;
    if meta.kind != FileKind::Symlink && !target.is_empty() {
        return Err(format!("inode {ino}: a {:?} with a link target", meta.kind));
    }
    if meta.kind != FileKind::File && !punched.is_empty() {
        return Err(format!(
            "inode {ino}: a {:?} with punched blocks",
            meta.kind
        ));
    }
    Ok(match (meta.kind, old) {
        (FileKind::Dir, Some(Body::Dir { entries, .. })) => Body::Dir { entries, parent },
        (FileKind::Dir, _) => Body::Dir {
            entries: BTreeMap::new(),
            parent,
        },
        (FileKind::File, _) => Body::File {
            punched: Punched::from_ranges(punched)
                .ok_or_else(|| format!("inode {ino}: punched ranges out of order"))?,
        },
        (FileKind::Symlink, _) => {
            store::check_symlink_target(&target)
                .map_err(|e| format!("inode {ino}: link target: {e}"))?;
            if meta.size != target.len() as u64 {
                return Err(format!("inode {ino}: link size {} ", meta.size));
            }
            Body::Symlink { target }
        }
        (_, _) => Body::Special,
    })
}

fn check_tree(nodes: &HashMap<Ino, Node>) -> std::result::Result<(), String> {
    match nodes.get(&ROOT_INO) {
        Some(n) if n.meta.is_dir() => {}
        _ => return Err("no root directory".into()),
    }
    for (ino, n) in nodes {
        if let Body::Dir { entries, .. } = &n.body {
            for (name, child) in entries {
                if !nodes.contains_key(child) {
                    return Err(format!(
                        "entry {} of {ino} names missing inode {child}",
                        name_str(name)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The root directory of a new store.
pub fn root_node() -> Node {
    Node::new(ROOT_INO, FileKind::Dir, 0o755, ROOT_INO)
}
