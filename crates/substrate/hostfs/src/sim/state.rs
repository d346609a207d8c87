//! The state of the crash model: inodes with a live and a durable image, directories with a
//! live and a durable set of entries, and the pending updates that may or may not have
//! reached the media.

use crate::{FileKind, NodeKind, Stat};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Inode number of the store directory.
pub const ROOT_INO: u64 = 1;

/// Which pending updates are alternatives of each other: of the updates sharing a key, a
/// crash keeps none or exactly one (the unit's content at some moment since its last sync).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// A sector (write), block (clone) or page (mapped store) of a file.
    Unit { ino: u64, start: u64, len: u64 },
    /// A file's length.
    Len { ino: u64 },
    /// An update that is all or nothing on its own (exchange-range, atomic write).
    Single { seq: u64 },
}

/// One part of a pending update.
#[derive(Clone, Debug)]
pub enum Piece {
    /// These bytes at `off` (the unit's whole content at the time of the update).
    Data { ino: u64, off: u64, bytes: Vec<u8> },
    /// The file's length becomes `len`.
    Len { ino: u64, len: u64 },
}

impl Piece {
    pub fn ino(&self) -> u64 {
        match self {
            Piece::Data { ino, .. } | Piece::Len { ino, .. } => *ino,
        }
    }
}

/// A file's content while updates are applied to it: data may be written past the length
/// (a write past the end records its data before its length), which only a length update
/// changes; [`finish`](Self::finish) cuts or pads the content to the length.
#[derive(Clone, Debug, Default)]
pub struct FileImage {
    content: Vec<u8>,
    len: usize,
}

impl FileImage {
    pub fn new(durable: &[u8]) -> FileImage {
        FileImage {
            content: durable.to_vec(),
            len: durable.len(),
        }
    }

    pub fn apply(&mut self, piece: &Piece) {
        match piece {
            Piece::Data { off, bytes, .. } => {
                let off = *off as usize;
                if self.content.len() < off + bytes.len() {
                    self.content.resize(off + bytes.len(), 0);
                }
                self.content[off..off + bytes.len()].copy_from_slice(bytes);
            }
            Piece::Len { len, .. } => {
                self.len = *len as usize;
                // Bytes past a cut are gone: a later growth reads zeros there.
                self.content.truncate(self.len);
            }
        }
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.content.resize(self.len, 0);
        self.content
    }
}

/// A pending update (not yet certainly durable).
#[derive(Clone, Debug)]
pub struct Op {
    pub seq: u64,
    pub key: Key,
    pub pieces: Vec<Piece>,
}

/// A file or directory.
#[derive(Clone, Debug)]
pub struct Inode {
    pub kind: FileKind,
    /// Permission bits as stat sees them.
    pub perm: u32,
    /// Permission bits that survive a crash for certain (a chmod is durable once its inode
    /// is synced).
    pub durable_perm: u32,
    /// Content as reads see it (files).
    pub live: Vec<u8>,
    /// Content that survives a crash for certain (files), before pending updates.
    pub durable: Arc<Vec<u8>>,
    /// Entries as lookups see them (directories).
    pub live_entries: BTreeMap<Vec<u8>, u64>,
    /// Entries that survive a crash for certain (directories).
    pub durable_entries: BTreeMap<Vec<u8>, u64>,
    pub nlink: u64,
    pub atime_ns: u64,
    pub mtime_ns: u64,
    pub ctime_ns: u64,
    pub uid: u32,
    pub gid: u32,
    /// The kind of a special file ([`FileKind::Other`]).
    pub node: Option<NodeKind>,
    /// Device number of a device node.
    pub rdev: u64,
    /// A symlink's target: set when it is made, never changed (durable with its entry).
    pub target: Vec<u8>,
    /// Extended attributes as reads see them.
    pub live_xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Extended attributes that survive a crash for certain.
    pub durable_xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Inode {
    pub fn new(kind: FileKind, perm: u32) -> Inode {
        let now = now_ns();
        Inode {
            kind,
            perm: perm & 0o7777,
            durable_perm: perm & 0o7777,
            live: Vec::new(),
            durable: Arc::new(Vec::new()),
            live_entries: BTreeMap::new(),
            durable_entries: BTreeMap::new(),
            nlink: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            uid: 0,
            gid: 0,
            node: None,
            rdev: 0,
            target: Vec::new(),
            live_xattrs: BTreeMap::new(),
            durable_xattrs: BTreeMap::new(),
        }
    }

    /// The `S_IFMT` bits of this inode.
    pub fn mode_type(&self) -> u32 {
        match (self.kind, self.node) {
            (FileKind::File, _) => libc::S_IFREG,
            (FileKind::Dir, _) => libc::S_IFDIR,
            (FileKind::Symlink, _) => libc::S_IFLNK,
            (FileKind::Other, Some(node)) => node.mode_type(),
            (FileKind::Other, None) => 0,
        }
    }

    pub fn stat(&self, ino: u64) -> Stat {
        Stat {
            ino,
            kind: self.kind,
            len: match self.kind {
                FileKind::Symlink => self.target.len() as u64,
                _ => self.live.len() as u64,
            },
            perm: self.perm,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            atime_ns: self.atime_ns,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            mode_type: self.mode_type(),
            rdev: self.rdev,
            allocated: (self.live.len() as u64).div_ceil(4096) * 4096,
        }
    }
}

/// Nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The whole model state.
#[derive(Clone, Debug)]
pub struct State {
    pub inodes: BTreeMap<u64, Inode>,
    pub next_ino: u64,
    /// Pending updates in the order they were made.
    pub ops: Vec<Op>,
    pub next_seq: u64,
    /// Directory entries changed since their directory's last sync, with every binding the
    /// entry had since (`None`: no entry), oldest first.
    pub entry_history: BTreeMap<(u64, Vec<u8>), Vec<Option<u64>>>,
    /// Extended attributes changed since their inode's last sync, with every value each
    /// had since (`None`: absent), oldest first.
    pub xattr_history: BTreeMap<(u64, Vec<u8>), XattrHistory>,
    /// Name exchanges (renameat2 RENAME_EXCHANGE) not yet durable: all or nothing each.
    pub exchanges: Vec<Exchange>,
    /// Syncs completed.
    pub syncs: u64,
}

/// Every value an attribute had since its inode's last sync (`None`: absent), oldest first.
pub type XattrHistory = Vec<Option<Vec<u8>>>;

/// A pending name exchange: each of the two entries takes its new binding, both or neither.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub entries: [(u64, Vec<u8>, u64); 2],
}

impl State {
    /// An empty store directory, durable.
    pub fn new() -> State {
        let mut inodes = BTreeMap::new();
        let mut root = Inode::new(FileKind::Dir, 0o755);
        root.nlink = 1;
        inodes.insert(ROOT_INO, root);
        State {
            inodes,
            next_ino: ROOT_INO + 1,
            ops: Vec::new(),
            next_seq: 1,
            entry_history: BTreeMap::new(),
            xattr_history: BTreeMap::new(),
            exchanges: Vec::new(),
            syncs: 0,
        }
    }

    /// Record a pending update.
    pub fn push(&mut self, key: Option<Key>, pieces: Vec<Piece>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = key.unwrap_or(Key::Single { seq });
        self.ops.push(Op { seq, key, pieces });
    }

    /// Bind `name` in directory `dir` to `target` (live), remembering the change.
    pub fn bind(&mut self, dir: u64, name: &[u8], target: Option<u64>) {
        let Some(node) = self.inodes.get_mut(&dir) else {
            return;
        };
        match target {
            Some(ino) => node.live_entries.insert(name.to_vec(), ino),
            None => node.live_entries.remove(name),
        };
        let history = self.entry_history.entry((dir, name.to_vec())).or_default();
        if history.last() != Some(&target) {
            history.push(target);
        }
    }

    /// Make every pending update of `ino` durable (and, for updates that also touch other
    /// files, those files' earlier updates too: one journal commit covers them all).
    pub fn sync_file(&mut self, ino: u64) {
        self.sync_xattrs(ino);
        let mut cutoff: BTreeMap<u64, u64> = BTreeMap::new();
        cutoff.insert(ino, u64::MAX);
        for op in &self.ops {
            if op.pieces.iter().any(|p| p.ino() == ino) {
                for piece in &op.pieces {
                    let entry = cutoff.entry(piece.ino()).or_insert(0);
                    *entry = (*entry).max(op.seq);
                }
            }
        }
        self.sync_where(|op| {
            op.pieces
                .iter()
                .any(|p| cutoff.get(&p.ino()).is_some_and(|&c| op.seq <= c))
        });
    }

    /// Make durable the pending updates of `ino` whose data lies in `[start, end)` and its
    /// length (msync of those pages).
    pub fn sync_range(&mut self, ino: u64, start: u64, end: u64) {
        self.sync_where(|op| {
            op.pieces.iter().all(|p| p.ino() == ino)
                && op.pieces.iter().all(|p| match p {
                    Piece::Data { off, bytes, .. } => {
                        *off >= start && *off + bytes.len() as u64 <= end
                    }
                    Piece::Len { .. } => true,
                })
        });
    }

    fn sync_where(&mut self, mut chosen: impl FnMut(&Op) -> bool) {
        let ops = std::mem::take(&mut self.ops);
        let mut kept = Vec::with_capacity(ops.len());
        let mut contents: BTreeMap<u64, FileImage> = BTreeMap::new();
        for op in ops {
            if !chosen(&op) {
                kept.push(op);
                continue;
            }
            for piece in &op.pieces {
                let ino = piece.ino();
                let content = contents.entry(ino).or_insert_with(|| {
                    self.inodes
                        .get(&ino)
                        .map_or_else(FileImage::default, |n| FileImage::new(&n.durable))
                });
                content.apply(piece);
            }
        }
        for (ino, content) in contents {
            if let Some(node) = self.inodes.get_mut(&ino) {
                node.durable = Arc::new(content.finish());
            }
        }
        self.ops = kept;
    }

    /// Make the entries of directory `dir` durable.
    pub fn sync_dir(&mut self, dir: u64) {
        // An exchange is one journal transaction: the sync of either directory commits it.
        let (done, pending): (Vec<Exchange>, Vec<Exchange>) = std::mem::take(&mut self.exchanges)
            .into_iter()
            .partition(|x| x.entries.iter().any(|(d, _, _)| *d == dir));
        self.exchanges = pending;
        for x in done {
            for (d, name, ino) in x.entries {
                if let Some(node) = self.inodes.get_mut(&d) {
                    node.durable_entries.insert(name, ino);
                }
            }
        }
        if let Some(node) = self.inodes.get_mut(&dir) {
            node.durable_entries = node.live_entries.clone();
        }
        self.entry_history.retain(|(d, _), _| *d != dir);
        self.sync_xattrs(dir);
    }

    /// Make the extended attributes and permissions of `ino` durable (fsync of the inode).
    pub fn sync_xattrs(&mut self, ino: u64) {
        if let Some(node) = self.inodes.get_mut(&ino) {
            node.durable_xattrs = node.live_xattrs.clone();
            node.durable_perm = node.perm;
        }
        self.xattr_history.retain(|(i, _), _| *i != ino);
    }

    /// Set (`Some`) or remove (`None`) an extended attribute (live), remembering the change.
    pub fn set_xattr(&mut self, ino: u64, name: &[u8], value: Option<Vec<u8>>) {
        let Some(node) = self.inodes.get_mut(&ino) else {
            return;
        };
        match &value {
            Some(v) => node.live_xattrs.insert(name.to_vec(), v.clone()),
            None => node.live_xattrs.remove(name),
        };
        let history = self.xattr_history.entry((ino, name.to_vec())).or_default();
        if history.last() != Some(&value) {
            history.push(value);
        }
    }

    /// Swap the live bindings of two entries as one pending all-or-nothing update. Their
    /// earlier changes are made durable first (a journal commits in order: the exchange's
    /// transaction cannot reach the media before them), so that the exchange alone is open.
    pub fn exchange(&mut self, a: (u64, &[u8]), b: (u64, &[u8])) -> Option<()> {
        let ino_a = *self.inodes.get(&a.0)?.live_entries.get(a.1)?;
        let ino_b = *self.inodes.get(&b.0)?.live_entries.get(b.1)?;
        for (dir, name, ino) in [(a.0, a.1, ino_a), (b.0, b.1, ino_b)] {
            if let Some(node) = self.inodes.get_mut(&dir) {
                node.durable_entries.insert(name.to_vec(), ino);
            }
            self.entry_history.remove(&(dir, name.to_vec()));
        }
        for (dir, name, ino) in [(a.0, a.1, ino_b), (b.0, b.1, ino_a)] {
            if let Some(node) = self.inodes.get_mut(&dir) {
                node.live_entries.insert(name.to_vec(), ino);
            }
        }
        self.exchanges.push(Exchange {
            entries: [(a.0, a.1.to_vec(), ino_b), (b.0, b.1.to_vec(), ino_a)],
        });
        Some(())
    }

    /// What a failed fsync does: the file's pending data can no longer reach the media (its
    /// pending length may: the inode stays dirty).
    pub fn drop_unsynced(&mut self, ino: u64) {
        for op in &mut self.ops {
            op.pieces
                .retain(|p| !matches!(p, Piece::Data { ino: i, .. } if *i == ino));
        }
        self.ops.retain(|op| !op.pieces.is_empty());
    }
}
