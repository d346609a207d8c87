//! `ModelStore`: the reference model of the Store API — **a test oracle, not an engine**.
//!
//! Everything lives in one `Mutex`-guarded in-memory state: a map of inodes (files hold a
//! sparse map of 4 KiB blocks, directories a sorted map of names), a map of open handles and a
//! map of open transactions. A transaction keeps, for every inode it touched, a snapshot of the
//! inode as it was before its first change (`None` when the transaction created it); abort puts
//! the snapshots back. O_ATOMIC files keep a snapshot of the file at their first pending write;
//! `fsync`/`syncv` drop it, `abortv`/`release`/a crash put it back.
//!
//! "Durable" in the model means: every transaction that returned from `tx_commit`, every
//! auto-committed call, every fsynced O_ATOMIC write. [`ModelStore::crash`] builds the store a
//! crash at this instant must recover to (open transactions rolled back, pending O_ATOMIC writes
//! dropped, handles closed); the crash harness uses it as its oracle and the conformance suite
//! runs against it, so the suite and the model check each other.
//!
//! Nothing here is fast or persistent; it is written to be obviously right.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use store::{
    now_ns, DirEntry, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, Result, SetAttr,
    StatFs, Store, TxId, NAME_MAX, ROOT_INO,
};

/// Block size of the model's sparse file data (and of `allocated`).
pub const MODEL_BLOCK: u64 = 4096;
const BLOCK: usize = MODEL_BLOCK as usize;
/// Largest file the model accepts (like an engine's limit; keeps `u64` arithmetic safe).
pub const MODEL_FILE_SIZE_MAX: u64 = 1 << 44;

#[derive(Clone, Debug)]
struct Inode {
    meta: Metadata,
    /// File data: block number → block; missing blocks are holes (zeros).
    blocks: BTreeMap<u64, Box<[u8; BLOCK]>>,
    /// Directory entries.
    entries: BTreeMap<Vec<u8>, Ino>,
    /// Parent directory (directories only).
    parent: Ino,
}

impl Inode {
    fn new(ino: Ino, kind: FileKind, perm: u32, parent: Ino) -> Self {
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
            },
            blocks: BTreeMap::new(),
            entries: BTreeMap::new(),
            parent,
        }
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> usize {
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

    fn write(&mut self, off: u64, data: &[u8]) {
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

    fn set_len(&mut self, len: u64) {
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

    fn touch_data(&mut self) {
        let now = now_ns();
        self.meta.mtime = now;
        self.meta.ctime = now;
    }
}

#[derive(Clone, Debug)]
struct Handle {
    ino: Ino,
    flags: OpenFlags,
    tx: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct Tx {
    /// Pre-images of every inode the transaction touched (`None`: created by it).
    undo: HashMap<Ino, Option<Inode>>,
    handles: HashSet<u64>,
}

#[derive(Clone, Debug)]
struct State {
    inodes: HashMap<Ino, Inode>,
    next_ino: Ino,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
    txs: HashMap<u64, Tx>,
    next_tx: u64,
    /// O_ATOMIC files with pending writes: inode → file as of its last fsync.
    atomic_base: HashMap<Ino, Inode>,
    /// Capacity in bytes of file data (whole blocks), or unlimited.
    capacity: Option<u64>,
    closed: bool,
}

/// The reference model (see the module documentation). A test oracle, not an engine.
pub struct ModelStore {
    state: Mutex<State>,
}

impl Default for ModelStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelStore {
    /// An empty store (a root directory only) with unlimited capacity.
    pub fn new() -> Self {
        Self::with_capacity(None)
    }

    /// An empty store holding at most `capacity` bytes of file data (whole 4 KiB blocks,
    /// counting every version a transaction keeps); `None` for unlimited.
    pub fn with_capacity(capacity: Option<u64>) -> Self {
        let mut inodes = HashMap::new();
        inodes.insert(
            ROOT_INO,
            Inode::new(ROOT_INO, FileKind::Dir, 0o755, ROOT_INO),
        );
        ModelStore {
            state: Mutex::new(State {
                inodes,
                next_ino: ROOT_INO + 1,
                handles: HashMap::new(),
                next_fh: 1,
                txs: HashMap::new(),
                next_tx: 1,
                atomic_base: HashMap::new(),
                capacity,
                closed: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only mutated by complete steps; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        Ok(st)
    }

    /// The store a crash at this instant recovers to: open transactions rolled back, pending
    /// O_ATOMIC writes dropped, no open handles, no open transactions. Works on a closed
    /// store too (then it is the clean reopen).
    pub fn crash(&self) -> ModelStore {
        let mut st = self.lock().clone();
        let txs: Vec<u64> = st.txs.keys().copied().collect();
        for id in txs {
            st.rollback(id);
        }
        let bases: Vec<(Ino, Inode)> = st.atomic_base.drain().collect();
        for (ino, base) in bases {
            if st.inodes.contains_key(&ino) {
                st.inodes.insert(ino, base);
            }
        }
        st.handles.clear();
        st.closed = false;
        st.collect_orphans();
        ModelStore {
            state: Mutex::new(st),
        }
    }

    /// A deep copy of the store, handles and transactions included.
    pub fn fork(&self) -> ModelStore {
        ModelStore {
            state: Mutex::new(self.lock().clone()),
        }
    }

    /// Replace this store's whole state by `other`'s (undo to a [`fork`](Self::fork)).
    pub fn restore(&self, other: ModelStore) {
        let state = other.state.into_inner().unwrap_or_else(|p| p.into_inner());
        *self.lock() = state;
    }

    /// Number of open transactions.
    pub fn open_transactions(&self) -> usize {
        self.lock().txs.len()
    }
}

fn name_str(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

fn check_name(name: &[u8]) -> Result<()> {
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
    fn inode(&self, ino: Ino) -> Result<&Inode> {
        self.inodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    fn dir(&self, ino: Ino) -> Result<&Inode> {
        let inode = self.inode(ino)?;
        if inode.meta.kind != FileKind::Dir {
            return Err(Error::NotDir(format!("inode {ino}")));
        }
        Ok(inode)
    }

    fn tx_check(&self, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(TxId(id)) if !self.txs.contains_key(&id) => Err(Error::NoSuchTransaction(id)),
            _ => Ok(()),
        }
    }

    /// Record the pre-image of `ino` in `tx` before its first change there.
    fn save(&mut self, tx: Option<u64>, ino: Ino) {
        let Some(id) = tx else { return };
        let pre = self.inodes.get(&ino).cloned();
        if let Some(t) = self.txs.get_mut(&id) {
            t.undo.entry(ino).or_insert(pre);
        }
    }

    fn handle(&self, fh: Fh) -> Result<Handle> {
        self.handles
            .get(&fh.0)
            .cloned()
            .ok_or(Error::BadHandle(fh.0))
    }

    fn open_count(&self, ino: Ino) -> usize {
        self.handles.values().filter(|h| h.ino == ino).count()
    }

    /// Drop files with no names and no open handles (kept while a transaction may restore
    /// them: the pre-image lives in the transaction anyway).
    fn collect_orphans(&mut self) {
        let open: HashSet<Ino> = self.handles.values().map(|h| h.ino).collect();
        self.inodes
            .retain(|&ino, i| ino == ROOT_INO || i.meta.nlink > 0 || open.contains(&ino));
    }

    /// Bytes of file data held: live blocks, plus the blocks of every pre-image a transaction
    /// or an O_ATOMIC file keeps (an engine needs room for both versions too).
    fn used_bytes(&self) -> u64 {
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

    fn check_space(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
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

    fn rollback(&mut self, id: u64) {
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

    fn new_inode(
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
    fn drop_entry(&mut self, parent: Ino, name: &[u8], tx: Option<u64>) {
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

    fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
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

    fn rename(
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
    fn begin_data_change(&mut self, fh: Fh) -> Result<(Ino, Handle)> {
        let h = self.handle(fh)?;
        if !h.flags.write && !h.flags.append {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let inode = self.inode(h.ino)?;
        if inode.meta.kind != FileKind::File {
            return Err(Error::IsDir(format!("inode {}", h.ino)));
        }
        Ok((h.ino, h))
    }

    fn record_change(&mut self, ino: Ino, h: &Handle) {
        if h.tx.is_some() {
            self.save(h.tx, ino);
        } else if h.flags.atomic && !self.atomic_base.contains_key(&ino) {
            if let Some(i) = self.inodes.get(&ino) {
                let base = i.clone();
                self.atomic_base.insert(ino, base);
            }
        }
    }

    fn fsck(&self) -> FsckReport {
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

impl Store for ModelStore {
    fn engine_name(&self) -> String {
        "model".into()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let st = self.live()?;
        check_name(name)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        Ok(st.inode(ino)?.meta)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        Ok(self.live()?.inode(ino)?.meta)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut st = self.live()?;
        st.tx_check(tx)?;
        st.inode(ino)?;
        st.save(tx.map(|t| t.0), ino);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let m = &mut inode.meta;
        if let Some(perm) = attr.perm {
            m.perm = perm & 0o7777;
        }
        if let Some(uid) = attr.uid {
            m.uid = uid;
        }
        if let Some(gid) = attr.gid {
            m.gid = gid;
        }
        if let Some(t) = attr.atime {
            m.atime = t;
        }
        if let Some(t) = attr.mtime {
            m.mtime = t;
        }
        m.ctime = now_ns();
        Ok(*m)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.live()?
            .new_inode(parent, name, FileKind::File, perm, tx)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.live()?
            .new_inode(parent, name, FileKind::Dir, perm, tx)
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut st = self.live()?;
        check_name(name)?;
        st.tx_check(tx)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        if st.inode(ino)?.meta.kind == FileKind::Dir {
            return Err(Error::IsDir(name_str(name)));
        }
        st.drop_entry(parent, name, tx.map(|t| t.0));
        Ok(())
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut st = self.live()?;
        check_name(name)?;
        st.tx_check(tx)?;
        let ino = *st
            .dir(parent)?
            .entries
            .get(name)
            .ok_or_else(|| Error::NotFound(name_str(name)))?;
        let inode = st.inode(ino)?;
        if inode.meta.kind != FileKind::Dir {
            return Err(Error::NotDir(name_str(name)));
        }
        if !inode.entries.is_empty() {
            return Err(Error::NotEmpty(name_str(name)));
        }
        st.drop_entry(parent, name, tx.map(|t| t.0));
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
        self.live()?.rename(parent, name, new_parent, new_name, tx)
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut st = self.live()?;
        check_name(new_name)?;
        st.tx_check(tx)?;
        if st.inode(ino)?.meta.kind == FileKind::Dir {
            return Err(Error::PermissionDenied("hard link to a directory".into()));
        }
        if st.dir(new_parent)?.entries.contains_key(new_name) {
            return Err(Error::Exists(name_str(new_name)));
        }
        let tx = tx.map(|t| t.0);
        st.save(tx, new_parent);
        st.save(tx, ino);
        let now = now_ns();
        if let Some(p) = st.inodes.get_mut(&new_parent) {
            p.entries.insert(new_name.to_vec(), ino);
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.meta.nlink += 1;
        inode.meta.ctime = now;
        Ok(inode.meta)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let st = self.live()?;
        let dir = st.dir(ino)?;
        dir.entries
            .iter()
            .map(|(name, &child)| {
                Ok(DirEntry {
                    name: name.clone(),
                    ino: child,
                    kind: st.inode(child)?.meta.kind,
                })
            })
            .collect()
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut st = self.live()?;
        if st.inode(ino)?.meta.kind == FileKind::Dir {
            return Err(Error::IsDir(format!("inode {ino}")));
        }
        let fh = st.next_fh;
        st.next_fh += 1;
        st.handles.insert(
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
        let mut st = self.live()?;
        let h = st.handle(fh)?;
        if h.flags.atomic && st.open_count(h.ino) == 1 {
            // Pending O_ATOMIC writes not fsynced are dropped, as a crash would drop them.
            if let Some(base) = st.atomic_base.remove(&h.ino) {
                st.inodes.insert(h.ino, base);
            }
        }
        if let Some(tx) = h.tx.and_then(|id| st.txs.get_mut(&id)) {
            tx.handles.remove(&fh.0);
        }
        st.handles.remove(&fh.0);
        st.collect_orphans();
        Ok(())
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let st = self.live()?;
        let h = st.handle(fh)?;
        if !h.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        Ok(st.inode(h.ino)?.read(off, buf))
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut st = self.live()?;
        let (ino, h) = st.begin_data_change(fh)?;
        let off = if h.flags.append {
            st.inode(ino)?.meta.size
        } else {
            off
        };
        if off
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > MODEL_FILE_SIZE_MAX)
        {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        st.check_space(ino, off, data.len() as u64)?;
        st.record_change(ino, &h);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.write(off, data);
        inode.touch_data();
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut st = self.live()?;
        let (ino, h) = st.begin_data_change(fh)?;
        if len > MODEL_FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("inode {ino}")));
        }
        st.record_change(ino, &h);
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        inode.set_len(len);
        inode.touch_data();
        Ok(())
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        let mut st = self.live()?;
        let h = st.handle(fh)?;
        st.atomic_base.remove(&h.ino);
        Ok(())
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let st = self.live()?;
        let h = st.handle(fh)?;
        Ok(st.inode(h.ino)?.meta)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut st = self.live()?;
        let h = st.handle(fh)?;
        if !atomic {
            st.atomic_base.remove(&h.ino);
        }
        if let Some(h) = st.handles.get_mut(&fh.0) {
            h.flags.atomic = atomic;
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut st = self.live()?;
        let inos = fhs
            .iter()
            .map(|&fh| st.handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        for ino in inos {
            st.atomic_base.remove(&ino);
        }
        Ok(())
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut st = self.live()?;
        let inos = fhs
            .iter()
            .map(|&fh| st.handle(fh).map(|h| h.ino))
            .collect::<Result<Vec<_>>>()?;
        for ino in inos {
            if let Some(base) = st.atomic_base.remove(&ino) {
                st.inodes.insert(ino, base);
            }
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut st = self.live()?;
        for &fh in files {
            let h = st.handle(fh)?;
            if let Some(other) = h.tx {
                return Err(Error::FileInTransaction(other));
            }
            if let Some((&other, _)) = st.txs.iter().find(|(_, t)| {
                t.handles
                    .iter()
                    .any(|f| st.handles.get(f).is_some_and(|o| o.ino == h.ino))
            }) {
                return Err(Error::FileInTransaction(other));
            }
        }
        let id = st.next_tx;
        st.next_tx += 1;
        st.txs.insert(id, Tx::default());
        for &fh in files {
            bind(&mut st, id, fh);
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut st = self.live()?;
        st.tx_check(Some(tx))?;
        let h = st.handle(fh)?;
        if let Some(other) = h.tx {
            return Err(Error::FileInTransaction(other));
        }
        let bound_elsewhere = st
            .txs
            .iter()
            .find(|(&id, t)| {
                id != tx.0
                    && t.handles
                        .iter()
                        .any(|f| st.handles.get(f).is_some_and(|o| o.ino == h.ino))
            })
            .map(|(&id, _)| id);
        if let Some(other) = bound_elsewhere {
            return Err(Error::FileInTransaction(other));
        }
        bind(&mut st, tx.0, fh);
        Ok(())
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut st = self.live()?;
        let t = st.txs.remove(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        for fh in t.handles {
            if let Some(h) = st.handles.get_mut(&fh) {
                h.tx = None;
            }
        }
        st.collect_orphans();
        Ok(())
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut st = self.live()?;
        st.tx_check(Some(tx))?;
        st.rollback(tx.0);
        Ok(())
    }

    fn statfs(&self) -> Result<StatFs> {
        let st = self.live()?;
        let total = st.capacity.unwrap_or(u64::MAX / 2) / MODEL_BLOCK;
        let used = st.used_bytes() / MODEL_BLOCK;
        Ok(StatFs {
            block_size: MODEL_BLOCK,
            blocks_total: total,
            blocks_free: total.saturating_sub(used),
            inodes_total: u64::MAX / 2,
            inodes_free: u64::MAX / 2 - st.inodes.len() as u64,
            name_max: NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let st = self.lock();
        vec![
            ("inodes".into(), st.inodes.len() as u64),
            ("open_handles".into(), st.handles.len() as u64),
            ("open_transactions".into(), st.txs.len() as u64),
        ]
    }

    fn fsck(&self) -> Result<FsckReport> {
        Ok(self.lock().fsck())
    }

    fn unmount(&self) -> Result<()> {
        let mut st = self.live()?;
        st.closed = true;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn bind(st: &mut State, tx: u64, fh: Fh) {
    if let Some(h) = st.handles.get_mut(&fh.0) {
        h.tx = Some(tx);
    }
    if let Some(t) = st.txs.get_mut(&tx) {
        t.handles.insert(fh.0);
    }
}
