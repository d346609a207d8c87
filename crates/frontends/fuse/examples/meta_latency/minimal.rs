//! A minimal in-memory FUSE file system on the same `fuser` crate, mounted with the same
//! options and timeouts as atomfs: what FUSE itself costs per metadata call. It keeps names
//! and attributes in one locked map and nothing else (no data, no durability). Inode numbers
//! are never reused, unless `MINIMAL_REUSE_INODES=1` asks it to reuse them as the atomfs
//! stores do (newest freed first, with a new generation each time).

use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyEmpty, ReplyEntry, ReplyOpen, Request, TimeOrNow,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

struct Node {
    attr: FileAttr,
    generation: u64,
    /// Names in a directory.
    entries: BTreeMap<Vec<u8>, u64>,
}

struct Inner {
    nodes: HashMap<u64, Node>,
    ino_next: u64,
    /// Freed numbers, reused newest first when `MINIMAL_REUSE_INODES=1` (as the atomfs
    /// stores reuse theirs), each time with a new generation.
    free: Vec<u64>,
    reuse: bool,
    generation: u64,
}

/// The file system; `ttl` as atomfs's.
pub struct MinimalFs {
    inner: Mutex<Inner>,
    ttl: Duration,
}

fn new_attr(ino: u64, kind: FileType, perm: u16, req: &Request) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: req.uid(),
        gid: req.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl MinimalFs {
    pub fn new(ttl: Duration) -> Self {
        let now = SystemTime::now();
        let root = FileAttr {
            ino: INodeNo(1),
            size: 0,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind: FileType::Directory,
            perm: 0o777,
            nlink: 2,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Node {
                attr: root,
                generation: 0,
                entries: BTreeMap::new(),
            },
        );
        MinimalFs {
            inner: Mutex::new(Inner {
                nodes,
                ino_next: 2,
                free: Vec::new(),
                reuse: std::env::var("MINIMAL_REUSE_INODES").is_ok_and(|v| v == "1"),
                generation: 0,
            }),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Add a new node named `name` in `parent`.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        kind: FileType,
        perm: u16,
    ) -> Result<(FileAttr, Generation), Errno> {
        let mut inner = self.lock();
        let dir = inner.nodes.get_mut(&parent.0).ok_or(Errno::ENOENT)?;
        if dir.entries.contains_key(name.as_bytes()) {
            return Err(Errno::EEXIST);
        }
        let ino = match inner.free.pop() {
            Some(ino) => ino,
            None => {
                inner.ino_next += 1;
                inner.ino_next - 1
            }
        };
        inner.generation += 1;
        if let Some(dir) = inner.nodes.get_mut(&parent.0) {
            dir.entries.insert(name.as_bytes().to_vec(), ino);
        }
        let attr = new_attr(ino, kind, perm, req);
        let generation = inner.generation;
        inner.nodes.insert(
            ino,
            Node {
                attr,
                generation,
                entries: BTreeMap::new(),
            },
        );
        Ok((attr, Generation(generation)))
    }

    /// Remove `name` from `parent`; returns the inode it named.
    fn remove(&self, parent: INodeNo, name: &OsStr) -> Result<u64, Errno> {
        let mut inner = self.lock();
        let dir = inner.nodes.get_mut(&parent.0).ok_or(Errno::ENOENT)?;
        let ino = dir.entries.remove(name.as_bytes()).ok_or(Errno::ENOENT)?;
        if let Some(node) = inner.nodes.get_mut(&ino) {
            node.attr.nlink = node.attr.nlink.saturating_sub(1);
            let gone = node.attr.nlink == 0 || node.attr.kind == FileType::Directory;
            if gone && inner.reuse {
                inner.nodes.remove(&ino);
                inner.free.push(ino);
            }
        }
        Ok(ino)
    }
}

impl fuser::Filesystem for MinimalFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let inner = self.lock();
        let found = inner
            .nodes
            .get(&parent.0)
            .and_then(|d| d.entries.get(name.as_bytes()))
            .and_then(|ino| inner.nodes.get(ino));
        match found {
            Some(n) => reply.entry(&self.ttl, &n.attr, Generation(n.generation)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().nodes.get(&ino.0) {
            Some(n) => reply.attr(&self.ttl, &n.attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.lock().nodes.get_mut(&ino.0) {
            Some(n) => {
                if let Some(size) = size {
                    n.attr.size = size;
                }
                reply.attr(&self.ttl, &n.attr)
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.make(req, parent, name, FileType::Directory, perm) {
            Ok((attr, generation)) => reply.entry(&self.ttl, &attr, generation),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let moved = self.remove(parent, name).and_then(|ino| {
            let mut inner = self.lock();
            if let Some(n) = inner.nodes.get_mut(&ino) {
                n.attr.nlink += 1;
            }
            let dir = inner.nodes.get_mut(&newparent.0).ok_or(Errno::ENOENT)?;
            dir.entries.insert(newname.as_bytes().to_vec(), ino);
            Ok(())
        });
        match moved {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut inner = self.lock();
        let Some(dir) = inner.nodes.get_mut(&newparent.0) else {
            return reply.error(Errno::ENOENT);
        };
        dir.entries.insert(newname.as_bytes().to_vec(), ino.0);
        match inner.nodes.get_mut(&ino.0) {
            Some(n) => {
                n.attr.nlink += 1;
                reply.entry(&self.ttl, &n.attr, Generation(n.generation));
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    /// Answered, as atomfs answers it (an ENOSYS would stop the kernel sending it at all).
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.make(req, parent, name, FileType::RegularFile, perm) {
            Ok((attr, generation)) => reply.created(
                &self.ttl,
                &attr,
                generation,
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}
