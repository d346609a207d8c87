//! The namespace state: inodes, handles, transactions, O_ATOMIC bases, and the operations
//! on them (the semantics of the conformance model, which the engine follows exactly; the
//! engine adds persistence around them in `store`).

use super::inode::Inode;
use crate::format::ops::Op;
use std::collections::{HashMap, HashSet};
use store::{
    now_ns, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, Result, TxId, NAME_MAX,
    ROOT_INO,
};

#[derive(Clone, Debug)]
pub struct Handle {
    pub ino: Ino,
    pub flags: OpenFlags,
    pub tx: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct Tx {
    /// Pre-images of every inode the transaction touched (`None`: created by it). A
    /// directory's pre-image has no entries: its entry changes are undone by `entry_undo`
    /// (a create in a directory of 100,000 entries must not copy them).
    pub undo: HashMap<Ino, Option<Inode>>,
    /// Every directory-entry change of the transaction: (directory, name, the entry before).
    pub entry_undo: Vec<(Ino, Vec<u8>, Option<Ino>)>,
    pub handles: HashSet<u64>,
    /// Files bound to the transaction. A file stays bound when the handle that bound it is
    /// released (the transaction still owns its changes), so no other open transaction can
    /// take it until this one ends (a file is bound to one open transaction at a time).
    pub files: HashSet<Ino>,
    /// Directory-entry operations of the transaction, in order: its commit record carries
    /// exactly these (never another open transaction's entries).
    pub log: Vec<Op>,
}

#[derive(Clone, Debug)]
pub struct State {
    pub inodes: HashMap<Ino, Inode>,
    pub next_ino: Ino,
    pub handles: HashMap<u64, Handle>,
    pub next_fh: u64,
    pub txs: HashMap<u64, Tx>,
    pub next_tx: u64,
    /// O_ATOMIC files with pending writes: inode → file as of its last fsync.
    pub atomic_base: HashMap<Ino, Inode>,
    pub closed: bool,
}

pub fn name_str(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

pub fn check_name(name: &[u8]) -> Result<()> {
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
    pub fn inode(&self, ino: Ino) -> Result<&Inode> {
        self.inodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    pub fn dir(&self, ino: Ino) -> Result<&Inode> {
        let inode = self.inode(ino)?;
        if inode.meta.kind != FileKind::Dir {
            return Err(Error::NotDir(format!("inode {ino}")));
        }
        Ok(inode)
    }

    pub fn tx_check(&self, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(TxId(id)) if !self.txs.contains_key(&id) => Err(Error::NoSuchTransaction(id)),
            _ => Ok(()),
        }
    }

    /// Record the pre-image of `ino` in `tx` before its first change there.
    pub fn save(&mut self, tx: Option<u64>, ino: Ino) {
        let Some(id) = tx else { return };
        let Some(t) = self.txs.get_mut(&id) else {
            return;
        };
        if let std::collections::hash_map::Entry::Vacant(e) = t.undo.entry(ino) {
            e.insert(self.inodes.get(&ino).map(Inode::pre_image));
        }
    }

    /// Set (`Some`) or remove (`None`) the entry `name` of directory `dir`, recording the
    /// entry before in `tx`'s `entry_undo`.
    pub fn set_entry(&mut self, tx: Option<u64>, dir: Ino, name: &[u8], ino: Option<Ino>) {
        let Some(d) = self.inodes.get_mut(&dir) else {
            return;
        };
        let before = match ino {
            Some(i) => d.entries.insert(name.to_vec(), i),
            None => d.entries.remove(name),
        };
        if let Some(t) = tx.and_then(|id| self.txs.get_mut(&id)) {
            t.entry_undo.push((dir, name.to_vec(), before));
        }
    }

    /// Log a directory-entry operation of `tx`.
    pub fn log(&mut self, tx: Option<u64>, op: Op) {
        if let Some(t) = tx.and_then(|id| self.txs.get_mut(&id)) {
            t.log.push(op);
        }
    }

    pub fn handle(&self, fh: Fh) -> Result<Handle> {
        self.handles
            .get(&fh.0)
            .cloned()
            .ok_or(Error::BadHandle(fh.0))
    }

    /// `handle`, for calls that need the file: a handle on a file whose create was aborted
    /// has none, and every call through it but `release` fails with NotFound (as in the
    /// pool; `fsync` on such a handle was Ok here: pool_ops fuzz finding, 24 Nov).
    pub fn live_handle(&self, fh: Fh) -> Result<Handle> {
        let h = self.handle(fh)?;
        self.inode(h.ino)?;
        Ok(h)
    }

    pub fn open_count(&self, ino: Ino) -> usize {
        self.handles.values().filter(|h| h.ino == ino).count()
    }

    /// Drop files with no names and no open handles (kept while a transaction may restore
    /// them: the pre-image lives in the transaction anyway).
    /// Drop `ino` when it has no name left and no open handle (the one inode a call may
    /// have orphaned: O(handles), not O(inodes)).
    pub fn collect_orphan(&mut self, ino: Ino) {
        let orphan = ino != ROOT_INO
            && self.inodes.get(&ino).is_some_and(|i| i.meta.nlink == 0)
            && !self.handles.values().any(|h| h.ino == ino);
        if orphan {
            self.inodes.remove(&ino);
        }
    }

    pub fn collect_orphans(&mut self) {
        let open: HashSet<Ino> = self.handles.values().map(|h| h.ino).collect();
        self.inodes
            .retain(|&ino, i| ino == ROOT_INO || i.meta.nlink > 0 || open.contains(&ino));
    }

    pub fn rollback(&mut self, id: u64) {
        let Some(tx) = self.txs.remove(&id) else {
            return;
        };
        for (ino, pre) in tx.undo {
            match pre {
                Some(mut inode) => {
                    // A directory's pre-image has no entries: keep today's, undone below.
                    if let Some(now) = self.inodes.get_mut(&ino) {
                        inode.entries = std::mem::take(&mut now.entries);
                    }
                    self.inodes.insert(ino, inode);
                }
                None => {
                    self.inodes.remove(&ino);
                }
            }
        }
        for (dir, name, before) in tx.entry_undo.into_iter().rev() {
            if let Some(d) = self.inodes.get_mut(&dir) {
                match before {
                    Some(ino) => d.entries.insert(name, ino),
                    None => d.entries.remove(&name),
                };
            }
        }
        for fh in tx.handles {
            if let Some(h) = self.handles.get_mut(&fh) {
                h.tx = None;
            }
        }
        self.collect_orphans();
    }

    pub fn new_inode(
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
        self.set_entry(tx, parent, name, Some(ino));
        if let Some(p) = self.inodes.get_mut(&parent) {
            if kind == FileKind::Dir {
                p.meta.nlink += 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        self.log(
            tx,
            Op::AddEntry {
                dir: parent,
                ino,
                name: name.to_vec(),
            },
        );
        Ok(meta)
    }

    /// Remove the entry `name` of `parent` (already checked), dropping a link of its inode.
    pub fn drop_entry(&mut self, parent: Ino, name: &[u8], tx: Option<u64>) {
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
        self.set_entry(tx, parent, name, None);
        if let Some(p) = self.inodes.get_mut(&parent) {
            if is_dir {
                p.meta.nlink -= 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        self.log(
            tx,
            Op::DelEntry {
                dir: parent,
                name: name.to_vec(),
            },
        );
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.meta.nlink = if is_dir {
                0
            } else {
                i.meta.nlink.saturating_sub(1)
            };
            i.meta.ctime = now;
        }
        self.collect_orphan(ino);
    }

    pub fn is_ancestor(&self, ancestor: Ino, mut ino: Ino) -> bool {
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

    pub fn rename(
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
        self.set_entry(tx, parent, name, None);
        if let Some(p) = self.inodes.get_mut(&parent) {
            if src_is_dir {
                p.meta.nlink -= 1;
            }
            p.meta.mtime = now;
            p.meta.ctime = now;
        }
        self.set_entry(tx, new_parent, new_name, Some(src));
        if let Some(p) = self.inodes.get_mut(&new_parent) {
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
        self.log(
            tx,
            Op::DelEntry {
                dir: parent,
                name: name.to_vec(),
            },
        );
        self.log(
            tx,
            Op::AddEntry {
                dir: new_parent,
                ino: src,
                name: new_name.to_vec(),
            },
        );
        Ok(())
    }

    /// The file a handle writes to, with the transaction its changes belong to. Records the
    /// pre-image (transaction) or the O_ATOMIC base before the first change.
    pub fn begin_data_change(&mut self, fh: Fh) -> Result<(Ino, Handle)> {
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
    pub fn creator(&self, ino: Ino) -> Option<u64> {
        self.txs
            .iter()
            .find(|(_, t)| matches!(t.undo.get(&ino), Some(None)))
            .map(|(&id, _)| id)
    }

    /// A file or directory whose create has not committed belongs to the creating
    /// transaction: a change to it made in `tx` (None: outside any transaction, or in an
    /// O_ATOMIC file's implicit one) fails with FileInTransaction(creator) — its abort would
    /// take the inode away under the change. Checked after the operation's own errors.
    pub fn check_owner(&self, inos: &[Ino], tx: Option<u64>) -> Result<()> {
        for &ino in inos {
            match self.creator(ino) {
                Some(owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner)),
                _ => {}
            }
        }
        Ok(())
    }

    /// The transaction a data change through `h` belongs to: the one its file is bound to.
    pub fn data_tx(&self, ino: Ino, h: &Handle) -> Option<u64> {
        h.tx.or_else(|| self.tx_of_file(ino))
    }

    /// The open transaction a file is bound to, if any (bound through any handle).
    pub fn tx_of_file(&self, ino: Ino) -> Option<u64> {
        self.txs
            .iter()
            .find(|(_, t)| t.files.contains(&ino))
            .map(|(&id, _)| id)
    }

    /// A data change of `ino` through handle `h`: it belongs to the transaction the file is
    /// bound to, whichever of the file's handles bound it (a file, not a handle, joins a
    /// transaction); else an O_ATOMIC handle's change waits for its fsync.
    pub fn record_change(&mut self, ino: Ino, h: &Handle) {
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

    pub fn fsck(&self) -> FsckReport {
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

pub fn bind(st: &mut State, tx: u64, fh: Fh) {
    let ino = st.handles.get_mut(&fh.0).map(|h| {
        h.tx = Some(tx);
        h.ino
    });
    if let Some(t) = st.txs.get_mut(&tx) {
        t.handles.insert(fh.0);
        t.files.extend(ino);
    }
}

impl State {
    /// A namespace of only the root directory.
    pub fn empty() -> State {
        let mut inodes = HashMap::new();
        inodes.insert(
            ROOT_INO,
            Inode::new(ROOT_INO, FileKind::Dir, 0o755, ROOT_INO),
        );
        State {
            inodes,
            next_ino: ROOT_INO + 1,
            handles: HashMap::new(),
            next_fh: 1,
            txs: HashMap::new(),
            next_tx: 1,
            atomic_base: HashMap::new(),
            closed: false,
        }
    }

    /// After a commit of an O_ATOMIC file's attributes (not its pending writes): its base,
    /// which `abortv` or a release restores, takes the committed attributes.
    pub fn keep_attributes_in_base(&mut self, ino: Ino) {
        let Some(now) = self.inodes.get_mut(&ino) else {
            return;
        };
        now.xattrs_changed = super::inode::XattrsState::Logged;
        let now = now.clone();
        if let Some(base) = self.atomic_base.get_mut(&ino) {
            let size = base.meta.size;
            base.meta = Metadata {
                size,
                allocated: base.meta.allocated,
                ..now.meta
            };
            base.xattrs = now.xattrs;
            base.xattrs_changed = now.xattrs_changed;
            base.naming = now.naming;
        }
    }

    /// No open transaction and no pending O_ATOMIC write: every pair is committed.
    pub fn quiescent(&self) -> bool {
        self.txs.is_empty() && self.atomic_base.is_empty()
    }
}
