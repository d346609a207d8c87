//! `mem`: a small reference [`Store`] kept in DRAM and written out whole to its pool file at
//! every durability point (temporary file, fsync, rename, fsync of the directory).
//!
//! It is not one of atomfs's engines: it exists so the C front ends (C API, LD_PRELOAD shim,
//! SQLite VFS) can be built and tested independently of any engine, and it is the reference
//! model their tests compare against. It is correct but slow (every durable call rewrites the
//! whole image) and meant for small stores: a few MB. Files whose first bytes are
//! [`MAGIC`] are opened with it; the real engines are chosen by their own magic.
//!
//! Semantics: the durable image is the live tree with the changes of every running
//! transaction and every O_ATOMIC file's pending writes rolled back. Each call outside a
//! transaction writes a new image before returning (durable and atomic); `tx_commit`,
//! `fsync` of an O_ATOMIC file and `syncv` write one image holding all their changes.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use store::{
    DirEntry, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, Result, SetAttr, StatFs,
    Store, TxId, NAME_MAX, ROOT_INO,
};

/// First bytes of a memstore pool file.
pub const MAGIC: &[u8; 16] = b"ATOMFS-MEMSTORE1";

/// Most bytes one memstore holds (file data); writes beyond fail with `NoSpace`.
pub const CAPACITY_BYTES_MAX: u64 = 1 << 30;

#[derive(Clone, Debug)]
struct Node {
    kind: FileKind,
    perm: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    atime: u64,
    mtime: u64,
    ctime: u64,
    data: Vec<u8>,
    entries: BTreeMap<Vec<u8>, Ino>,
}

impl Node {
    fn new(kind: FileKind, perm: u32) -> Node {
        let now = store::now_ns();
        // SAFETY: getuid/getgid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Node {
            kind,
            perm: perm & 0o7777,
            nlink: if kind == FileKind::Dir { 2 } else { 1 },
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
            data: Vec::new(),
            entries: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Tree {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
}

struct Handle {
    ino: Ino,
    flags: OpenFlags,
    tx: Option<u64>,
}

#[derive(Default)]
struct TxState {
    /// Inode contents before the transaction first touched them (`None`: did not exist).
    undo: HashMap<Ino, Option<Node>>,
}

#[derive(Default)]
struct Inner {
    tree: Tree,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    txs: HashMap<u64, TxState>,
    next_tx: u64,
    /// O_ATOMIC files with writes since their last fsync: their content at that fsync.
    atomic_undo: HashMap<Ino, Node>,
    closed: bool,
}

/// The reference store. See the module documentation.
pub struct MemStore {
    inner: Mutex<Inner>,
    path: Option<PathBuf>,
}

fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

impl MemStore {
    /// A store that lives only in this process.
    pub fn volatile() -> MemStore {
        let mut tree = Tree {
            nodes: HashMap::new(),
            next_ino: ROOT_INO + 1,
        };
        tree.nodes.insert(ROOT_INO, Node::new(FileKind::Dir, 0o755));
        MemStore {
            inner: Mutex::new(Inner {
                tree,
                next_fh: 1,
                next_tx: 1,
                ..Inner::default()
            }),
            path: None,
        }
    }

    /// Create a new pool file at `path` (fails if it exists).
    pub fn create(path: &Path) -> Result<MemStore> {
        if path.exists() {
            return Err(Error::Exists(path.display().to_string()));
        }
        let mut store = MemStore::volatile();
        store.path = Some(path.to_path_buf());
        {
            let inner = store.lock()?;
            store.persist(&inner)?;
        }
        Ok(store)
    }

    /// Open an existing pool file.
    pub fn open(path: &Path) -> Result<MemStore> {
        let bytes = std::fs::read(path).map_err(|e| io_error(path, "read", e))?;
        let tree = decode(&bytes)?;
        Ok(MemStore {
            inner: Mutex::new(Inner {
                tree,
                next_fh: 1,
                next_tx: 1,
                ..Inner::default()
            }),
            path: Some(path.to_path_buf()),
        })
    }

    /// The pool file, for a store that has one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        let guard = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.closed {
            return Err(Error::Closed);
        }
        Ok(guard)
    }

    /// Write the durable image (live tree minus running transactions and pending O_ATOMIC
    /// writes) to the pool file.
    fn persist(&self, inner: &Inner) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut image = inner.tree.clone();
        for tx in inner.txs.values() {
            for (ino, old) in &tx.undo {
                match old {
                    Some(node) => image.nodes.insert(*ino, node.clone()),
                    None => image.nodes.remove(ino),
                };
            }
        }
        for (ino, node) in &inner.atomic_undo {
            image.nodes.insert(*ino, node.clone());
        }
        let bytes = encode(&image);
        let tmp = path.with_extension("memstore-tmp");
        let mut file = std::fs::File::create(&tmp).map_err(|e| io_error(&tmp, "create", e))?;
        file.write_all(&bytes)
            .map_err(|e| io_error(&tmp, "write", e))?;
        // persist: the new image is durable under its temporary name before it replaces the
        // old one, so the rename below swaps one complete image for another.
        file.sync_all().map_err(|e| io_error(&tmp, "fsync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_error(path, "rename", e))?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // persist: the rename itself is durable once the directory is synced.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(dir, "fsync dir", e))?;
        Ok(())
    }
}

fn io_error(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source,
    }
}

impl Inner {
    fn node(&self, ino: Ino) -> Result<&Node> {
        self.tree
            .nodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    fn handle(&self, fh: Fh) -> Result<&Handle> {
        self.handles.get(&fh.0).ok_or(Error::BadHandle(fh.0))
    }

    /// Remember the content of `ino` before transaction `tx` changes it.
    fn record(&mut self, tx: Option<u64>, ino: Ino) -> Result<()> {
        if let Some(id) = tx {
            let old = self.tree.nodes.get(&ino).cloned();
            let state = self.txs.get_mut(&id).ok_or(Error::NoSuchTransaction(id))?;
            state.undo.entry(ino).or_insert(old);
        }
        Ok(())
    }

    fn meta(&self, ino: Ino) -> Result<Metadata> {
        let node = self.node(ino)?;
        let size = match node.kind {
            FileKind::Dir => node.entries.len() as u64,
            _ => node.data.len() as u64,
        };
        Ok(Metadata {
            ino,
            kind: node.kind,
            size,
            perm: node.perm,
            nlink: node.nlink,
            uid: node.uid,
            gid: node.gid,
            allocated: node.data.len() as u64,
            atime: node.atime,
            mtime: node.mtime,
            ctime: node.ctime,
        })
    }

    fn dir(&self, ino: Ino) -> Result<&Node> {
        let node = self.node(ino)?;
        if node.kind != FileKind::Dir {
            return Err(Error::NotDir(format!("inode {ino}")));
        }
        Ok(node)
    }

    fn add_entry(
        &mut self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        tx: Option<u64>,
    ) -> Result<Ino> {
        store::path::check_name(name)?;
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(Error::Exists(lossy(name)));
        }
        let ino = self.tree.next_ino;
        self.tree.next_ino += 1;
        self.record(tx, parent)?;
        self.record(tx, ino)?;
        self.tree.nodes.insert(ino, Node::new(kind, perm));
        if let Some(dir) = self.tree.nodes.get_mut(&parent) {
            dir.entries.insert(name.to_vec(), ino);
            dir.mtime = store::now_ns();
        }
        Ok(ino)
    }

    /// Drop a name; the inode goes when it has no names and no open handles.
    fn drop_link(&mut self, ino: Ino) {
        let open = self.handles.values().any(|h| h.ino == ino);
        if let Some(node) = self.tree.nodes.get_mut(&ino) {
            node.nlink = node.nlink.saturating_sub(1);
            if node.nlink == 0 && !open || node.kind == FileKind::Dir {
                self.tree.nodes.remove(&ino);
            }
        }
    }

    fn remove_entry(
        &mut self,
        parent: Ino,
        name: &[u8],
        want_dir: bool,
        tx: Option<u64>,
    ) -> Result<()> {
        let ino = *self
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(lossy(name)))?;
        let node = self.node(ino)?;
        match (want_dir, node.kind == FileKind::Dir) {
            (true, false) => return Err(Error::NotDir(lossy(name))),
            (false, true) => return Err(Error::IsDir(lossy(name))),
            (true, true) if !node.entries.is_empty() => return Err(Error::NotEmpty(lossy(name))),
            _ => {}
        }
        self.record(tx, parent)?;
        self.record(tx, ino)?;
        if let Some(dir) = self.tree.nodes.get_mut(&parent) {
            dir.entries.remove(name);
            dir.mtime = store::now_ns();
        }
        self.drop_link(ino);
        Ok(())
    }

    fn writable(&self, fh: Fh) -> Result<(Ino, Option<u64>, bool, bool)> {
        let handle = self.handle(fh)?;
        if !handle.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        Ok((
            handle.ino,
            handle.tx,
            handle.flags.atomic,
            handle.flags.append,
        ))
    }

    /// Before a data change through a handle: undo for its transaction or its O_ATOMIC file.
    fn before_data_change(&mut self, ino: Ino, tx: Option<u64>, atomic: bool) -> Result<()> {
        if tx.is_some() {
            return self.record(tx, ino);
        }
        if atomic && !self.atomic_undo.contains_key(&ino) {
            let node = self.node(ino)?.clone();
            self.atomic_undo.insert(ino, node);
        }
        Ok(())
    }

    fn data_bytes(&self) -> u64 {
        self.tree.nodes.values().map(|n| n.data.len() as u64).sum()
    }
}

/// Whether a call changed only state that becomes durable later (transaction, O_ATOMIC).
fn deferred(tx: Option<u64>, atomic: bool) -> bool {
    tx.is_some() || atomic
}

impl Store for MemStore {
    fn engine_name(&self) -> String {
        "mem".into()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let inner = self.lock()?;
        let ino = *inner
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(lossy(name)))?;
        inner.meta(ino)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.lock()?.meta(ino)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut inner = self.lock()?;
        inner.node(ino)?;
        inner.record(tx.map(|t| t.0), ino)?;
        if let Some(node) = inner.tree.nodes.get_mut(&ino) {
            if let Some(perm) = attr.perm {
                node.perm = perm & 0o7777;
            }
            node.uid = attr.uid.unwrap_or(node.uid);
            node.gid = attr.gid.unwrap_or(node.gid);
            node.atime = attr.atime.unwrap_or(node.atime);
            node.mtime = attr.mtime.unwrap_or(node.mtime);
            node.ctime = store::now_ns();
        }
        if tx.is_none() {
            self.persist(&inner)?;
        }
        inner.meta(ino)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut inner = self.lock()?;
        let ino = inner.add_entry(parent, name, FileKind::File, perm, tx.map(|t| t.0))?;
        if tx.is_none() {
            self.persist(&inner)?;
        }
        inner.meta(ino)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut inner = self.lock()?;
        let ino = inner.add_entry(parent, name, FileKind::Dir, perm, tx.map(|t| t.0))?;
        if tx.is_none() {
            self.persist(&inner)?;
        }
        inner.meta(ino)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut inner = self.lock()?;
        inner.remove_entry(parent, name, false, tx.map(|t| t.0))?;
        if tx.is_none() {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut inner = self.lock()?;
        inner.remove_entry(parent, name, true, tx.map(|t| t.0))?;
        if tx.is_none() {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        let mut inner = self.lock()?;
        let txid = tx.map(|t| t.0);
        store::path::check_name(new_name)?;
        let ino = *inner
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(lossy(name)))?;
        let is_dir = inner.node(ino)?.kind == FileKind::Dir;
        if is_dir && (ino == new_parent || is_ancestor(&inner, ino, new_parent)) {
            return Err(Error::InvalidArgument(
                "rename of a directory into itself".into(),
            ));
        }
        if let Some(&old) = inner.dir(new_parent)?.entries.get(new_name) {
            if old == ino {
                return Ok(());
            }
            let target_dir = inner.node(old)?.kind == FileKind::Dir;
            match (is_dir, target_dir) {
                (false, true) => return Err(Error::IsDir(lossy(new_name))),
                (true, false) => return Err(Error::NotDir(lossy(new_name))),
                _ => {}
            }
            inner.remove_entry(new_parent, new_name, target_dir, txid)?;
        }
        inner.record(txid, parent)?;
        inner.record(txid, new_parent)?;
        if let Some(dir) = inner.tree.nodes.get_mut(&parent) {
            dir.entries.remove(name);
        }
        if let Some(dir) = inner.tree.nodes.get_mut(&new_parent) {
            dir.entries.insert(new_name.to_vec(), ino);
        }
        if tx.is_none() {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut inner = self.lock()?;
        let txid = tx.map(|t| t.0);
        store::path::check_name(new_name)?;
        if inner.node(ino)?.kind == FileKind::Dir {
            return Err(Error::IsDir(format!("inode {ino}")));
        }
        if inner.dir(new_parent)?.entries.contains_key(new_name) {
            return Err(Error::Exists(lossy(new_name)));
        }
        inner.record(txid, ino)?;
        inner.record(txid, new_parent)?;
        if let Some(node) = inner.tree.nodes.get_mut(&ino) {
            node.nlink += 1;
        }
        if let Some(dir) = inner.tree.nodes.get_mut(&new_parent) {
            dir.entries.insert(new_name.to_vec(), ino);
        }
        if tx.is_none() {
            self.persist(&inner)?;
        }
        inner.meta(ino)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let inner = self.lock()?;
        let dir = inner.dir(ino)?;
        Ok(dir
            .entries
            .iter()
            .map(|(name, &child)| DirEntry {
                name: name.clone(),
                ino: child,
                kind: inner
                    .tree
                    .nodes
                    .get(&child)
                    .map(|n| n.kind)
                    .unwrap_or(FileKind::File),
            })
            .collect())
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut inner = self.lock()?;
        match inner.node(ino)?.kind {
            FileKind::File => {}
            FileKind::Dir => return Err(Error::IsDir(format!("inode {ino}"))),
            FileKind::Symlink => return Err(Error::InvalidArgument("open of a symlink".into())),
        }
        let fh = inner.next_fh;
        inner.next_fh += 1;
        inner.handles.insert(
            fh,
            Handle {
                ino,
                flags,
                tx: None,
            },
        );
        Ok(Fh(fh))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut inner = self.lock()?;
        let handle = inner.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        let still_open = inner.handles.values().any(|h| h.ino == handle.ino);
        if handle.flags.atomic
            && !inner
                .handles
                .values()
                .any(|h| h.ino == handle.ino && h.flags.atomic)
        {
            // Pending O_ATOMIC writes not fsynced are dropped, as a crash would drop them.
            if let Some(node) = inner.atomic_undo.remove(&handle.ino) {
                inner.tree.nodes.insert(handle.ino, node);
            }
        }
        if !still_open
            && inner
                .tree
                .nodes
                .get(&handle.ino)
                .is_some_and(|n| n.nlink == 0)
        {
            inner.tree.nodes.remove(&handle.ino);
        }
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let inner = self.lock()?;
        let handle = inner.handle(fh)?;
        if !handle.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        let data = &inner.node(handle.ino)?.data;
        let start = usize::try_from(off).unwrap_or(usize::MAX).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut inner = self.lock()?;
        let (ino, tx, atomic, append) = inner.writable(fh)?;
        let size = inner.node(ino)?.data.len() as u64;
        let off = if append { size } else { off };
        let end = off
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::FileTooLarge("offset overflow".into()))?;
        if inner.data_bytes() + end.saturating_sub(size) > CAPACITY_BYTES_MAX {
            return Err(Error::NoSpace(format!(
                "memstore holds at most {CAPACITY_BYTES_MAX} bytes"
            )));
        }
        inner.before_data_change(ino, tx, atomic)?;
        if let Some(node) = inner.tree.nodes.get_mut(&ino) {
            let (off, end) = (off as usize, end as usize);
            if node.data.len() < end {
                node.data.resize(end, 0);
            }
            node.data[off..end].copy_from_slice(data);
            node.mtime = store::now_ns();
        }
        if !deferred(tx, atomic) {
            self.persist(&inner)?;
        }
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut inner = self.lock()?;
        let (ino, tx, atomic, _) = inner.writable(fh)?;
        let size = inner.node(ino)?.data.len() as u64;
        if inner.data_bytes() + len.saturating_sub(size) > CAPACITY_BYTES_MAX {
            return Err(Error::NoSpace(format!(
                "memstore holds at most {CAPACITY_BYTES_MAX} bytes"
            )));
        }
        inner.before_data_change(ino, tx, atomic)?;
        if let Some(node) = inner.tree.nodes.get_mut(&ino) {
            node.data.resize(len as usize, 0);
            node.mtime = store::now_ns();
        }
        if !deferred(tx, atomic) {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut inner = self.lock()?;
        let ino = inner.handle(fh)?.ino;
        if inner.atomic_undo.remove(&ino).is_some() {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let inner = self.lock()?;
        let ino = inner.handle(fh)?.ino;
        inner.meta(ino)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut inner = self.lock()?;
        let ino = inner.handle(fh)?.ino;
        if !atomic && inner.atomic_undo.remove(&ino).is_some() {
            self.persist(&inner)?;
        }
        if let Some(handle) = inner.handles.get_mut(&fh.0) {
            handle.flags.atomic = atomic;
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut inner = self.lock()?;
        let inos = fhs
            .iter()
            .map(|&fh| inner.handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        let mut changed = false;
        for ino in inos {
            changed |= inner.atomic_undo.remove(&ino).is_some();
        }
        if changed {
            self.persist(&inner)?;
        }
        Ok(())
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut inner = self.lock()?;
        let inos = fhs
            .iter()
            .map(|&fh| inner.handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        for ino in inos {
            if let Some(node) = inner.atomic_undo.remove(&ino) {
                inner.tree.nodes.insert(ino, node);
            }
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut inner = self.lock()?;
        let mut seen = Vec::new();
        for fh in files {
            if let Some(tx) = inner.handle(*fh)?.tx {
                return Err(Error::FileInTransaction(tx));
            }
            if seen.contains(fh) {
                return Err(Error::InvalidArgument(format!(
                    "file handle {} given twice",
                    fh.0
                )));
            }
            seen.push(*fh);
        }
        let id = inner.next_tx;
        inner.next_tx += 1;
        inner.txs.insert(id, TxState::default());
        for fh in files {
            if let Some(handle) = inner.handles.get_mut(&fh.0) {
                handle.tx = Some(id);
            }
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut inner = self.lock()?;
        if !inner.txs.contains_key(&tx.0) {
            return Err(Error::NoSuchTransaction(tx.0));
        }
        let handle = inner.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        match handle.tx {
            Some(other) => Err(Error::FileInTransaction(other)),
            None => {
                handle.tx = Some(tx.0);
                Ok(())
            }
        }
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut inner = self.lock()?;
        inner
            .txs
            .remove(&tx.0)
            .ok_or(Error::NoSuchTransaction(tx.0))?;
        unbind(&mut inner, tx.0);
        self.persist(&inner)
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut inner = self.lock()?;
        let state = inner
            .txs
            .remove(&tx.0)
            .ok_or(Error::NoSuchTransaction(tx.0))?;
        for (ino, old) in state.undo {
            match old {
                Some(node) => inner.tree.nodes.insert(ino, node),
                None => inner.tree.nodes.remove(&ino),
            };
        }
        unbind(&mut inner, tx.0);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let inner = self.lock()?;
        let used = inner.data_bytes().div_ceil(4096);
        Ok(StatFs {
            block_size: 4096,
            blocks_total: CAPACITY_BYTES_MAX / 4096,
            blocks_free: (CAPACITY_BYTES_MAX / 4096).saturating_sub(used),
            inodes_total: 1 << 20,
            inodes_free: (1u64 << 20).saturating_sub(inner.tree.nodes.len() as u64),
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        match self.lock() {
            Ok(inner) => vec![
                ("inodes".into(), inner.tree.nodes.len() as u64),
                ("data bytes".into(), inner.data_bytes()),
            ],
            Err(_) => Vec::new(),
        }
    }

    fn fsck(&self) -> Result<FsckReport> {
        let inner = self.lock()?;
        let mut report = FsckReport::default();
        for (ino, node) in &inner.tree.nodes {
            for (name, child) in &node.entries {
                if !inner.tree.nodes.contains_key(child) {
                    report.problem(
                        format!("entry {} names missing inode {child}", lossy(name)),
                        format!("inode {ino}"),
                    );
                }
            }
        }
        report
            .checked
            .push(("inodes".into(), inner.tree.nodes.len() as u64));
        Ok(report)
    }

    fn unmount(&self) -> Result<()> {
        let mut inner = self.lock()?;
        inner.closed = true;
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn unbind(inner: &mut Inner, tx: u64) {
    for handle in inner.handles.values_mut() {
        if handle.tx == Some(tx) {
            handle.tx = None;
        }
    }
}

fn is_ancestor(inner: &Inner, dir: Ino, mut ino: Ino) -> bool {
    // Walk up by searching parents (small trees only: this is the reference store).
    for _ in 0..4096 {
        if ino == ROOT_INO {
            return false;
        }
        let parent = inner
            .tree
            .nodes
            .iter()
            .find(|(_, n)| n.entries.values().any(|&c| c == ino))
            .map(|(&p, _)| p);
        match parent {
            Some(p) if p == dir => return true,
            Some(p) => ino = p,
            None => return false,
        }
    }
    false
}

// ----- image format -----
//
// MAGIC (16) | next_ino u64 | node count u64 | nodes... | checksum u64 (FNV-1a of all before)
// node: ino u64 | kind u8 (0 file, 1 dir) | perm u32 | nlink u32 | uid u32 | gid u32 |
//       atime u64 | mtime u64 | ctime u64 | data len u64 | data | entry count u64 |
//       entries: name len u16 | name | ino u64            (all little-endian)

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn encode(tree: &Tree) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&tree.next_ino.to_le_bytes());
    out.extend_from_slice(&(tree.nodes.len() as u64).to_le_bytes());
    for (ino, node) in &tree.nodes {
        out.extend_from_slice(&ino.to_le_bytes());
        out.push(u8::from(node.kind == FileKind::Dir));
        for v in [node.perm, node.nlink, node.uid, node.gid] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [node.atime, node.mtime, node.ctime, node.data.len() as u64] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&node.data);
        out.extend_from_slice(&(node.entries.len() as u64).to_le_bytes());
        for (name, child) in &node.entries {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&child.to_le_bytes());
        }
    }
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| Error::corrupt("memstore image truncated", self.at as u64))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
    fn u16(&mut self) -> Result<u16> {
        let mut b = [0u8; 2];
        b.copy_from_slice(self.take(2)?);
        Ok(u16::from_le_bytes(b))
    }
    fn len(&mut self) -> Result<usize> {
        let at = self.at as u64;
        let n = self.u64()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or_else(|| Error::corrupt("memstore length out of range", at))
    }
}

fn decode(bytes: &[u8]) -> Result<Tree> {
    if bytes.len() < MAGIC.len() + 24 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(Error::BadMagic("not a memstore image".into()));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let mut sum_bytes = [0u8; 8];
    sum_bytes.copy_from_slice(sum);
    if fnv1a(body) != u64::from_le_bytes(sum_bytes) {
        return Err(Error::corrupt(
            "memstore checksum mismatch",
            body.len() as u64,
        ));
    }
    let mut r = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let mut tree = Tree {
        nodes: HashMap::new(),
        next_ino: r.u64()?,
    };
    let count = r.len()?;
    for _ in 0..count {
        let ino = r.u64()?;
        let kind = match r.take(1)?[0] {
            0 => FileKind::File,
            1 => FileKind::Dir,
            _ => return Err(Error::corrupt("memstore node kind", r.at as u64)),
        };
        let (perm, nlink, uid, gid) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let (atime, mtime, ctime) = (r.u64()?, r.u64()?, r.u64()?);
        let n = r.len()?;
        let data = r.take(n)?.to_vec();
        let mut entries = BTreeMap::new();
        for _ in 0..r.len()? {
            let n = r.u16()? as usize;
            let name = r.take(n)?.to_vec();
            entries.insert(name, r.u64()?);
        }
        tree.nodes.insert(
            ino,
            Node {
                kind,
                perm,
                nlink,
                uid,
                gid,
                atime,
                mtime,
                ctime,
                data,
                entries,
            },
        );
    }
    if !tree
        .nodes
        .get(&ROOT_INO)
        .is_some_and(|n| n.kind == FileKind::Dir)
    {
        return Err(Error::corrupt("memstore image has no root directory", 0));
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_round_trip_and_corruption_is_an_error() {
        let dir = std::env::temp_dir().join(format!("atomfs-memstore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pool");
        let s = MemStore::create(&path).unwrap();
        let f = s.create(ROOT_INO, b"a", 0o644, None).unwrap();
        let fh = s
            .open(
                f.ino,
                OpenFlags {
                    read: true,
                    write: true,
                    ..Default::default()
                },
            )
            .unwrap();
        s.write(fh, 0, b"hello").unwrap();
        let tx = s.tx_begin(&[fh]).unwrap();
        s.write(fh, 0, b"HELLO").unwrap();
        // Not committed: a reopen sees the old bytes.
        let again = MemStore::open(&path).unwrap();
        assert_eq!(store::path::read_file(&again, "a").unwrap(), b"hello");
        s.tx_commit(tx).unwrap();
        let again = MemStore::open(&path).unwrap();
        assert_eq!(store::path::read_file(&again, "a").unwrap(), b"HELLO");
        let mut bytes = std::fs::read(&path).unwrap();
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err());
        }
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        assert!(decode(&bytes).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
