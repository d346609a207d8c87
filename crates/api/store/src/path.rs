//! Path-based helpers over the inode-based [`Store`] trait.
//!
//! Paths are byte strings separated by `/`. Absolute and relative paths are both resolved from
//! the root (a store has no working directory); `.` is skipped and `..` goes to the parent
//! (staying at the root).
//!
//! Symbolic links are followed as path resolution in the kernel follows them: a link met in
//! any component but the last is always followed; the last is followed by the calls that act
//! on what a path names ([`resolve_follow`], [`OpenOptions::open`]: stat, open) and not by
//! those that act on the name itself ([`resolve`], [`resolve_parent`]: lstat, unlink, rename,
//! readlink, and an open with [`LastLink::NoFollow`], O_NOFOLLOW, which answers
//! [`Error::SymlinkLoop`] on a link). A path ending in `/` follows its last link too. A
//! relative target resolves from the link's directory; an absolute one from the store's root:
//! the store is its own root, so no target ever leaves it (`/etc/passwd` in a link names
//! `etc/passwd` of the store). More than [`SYMLOOP_MAX`] links in one resolution is
//! [`Error::SymlinkLoop`] (ELOOP), as in Linux.

use std::collections::VecDeque;

use crate::{
    Error, Fh, FileKind, Ino, Metadata, OpenFlags, Result, Store, TxId, NAME_MAX, ROOT_INO,
};

/// Most symbolic links one path resolution follows (Linux's MAXSYMLINKS); past it, ELOOP.
pub const SYMLOOP_MAX: u32 = 40;

/// Longest path one call takes, its terminating NUL counted (Linux's PATH_MAX): a path of
/// `PATH_MAX` bytes or more is [`Error::NameTooLong`] (ENAMETOOLONG), as in the kernel,
/// whatever it names. It is the one bound on path depth: a path has at most `PATH_MAX / 2`
/// components. A tree may be deeper (each call of the Store API names one component, as a
/// FUSE mount does); its deep files are reached by walking, not by one long path — exactly
/// as on Linux. Link targets are at most [`SYMLINK_MAX`](crate::SYMLINK_MAX) bytes, so a
/// resolution queues at most `SYMLOOP_MAX + 1` paths' worth of components.
pub const PATH_MAX: usize = 4096;

/// Whether a path's last component is followed when it is a symbolic link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LastLink {
    /// Follow it (stat, open).
    #[default]
    Follow,
    /// Keep it (lstat, unlink, rename, readlink, O_NOFOLLOW).
    NoFollow,
}

/// Split a path into validated components. Empty components and `.` are dropped; `..` is
/// kept (resolved against the tree). Fails on paths of [`PATH_MAX`] bytes or more and on
/// names longer than [`NAME_MAX`] or containing NUL (ENAMETOOLONG, EINVAL).
pub fn split_path(path: &[u8]) -> Result<Vec<&[u8]>> {
    check_path_len(path)?;
    let mut parts = Vec::new();
    for part in path.split(|&b| b == b'/') {
        if part.is_empty() || part == b"." {
            continue;
        }
        check_name(part)?;
        parts.push(part);
    }
    Ok(parts)
}

/// ENAMETOOLONG for a path of [`PATH_MAX`] bytes or more.
pub fn check_path_len(path: &[u8]) -> Result<()> {
    if path.len() >= PATH_MAX {
        return Err(Error::NameTooLong {
            len: path.len(),
            max: PATH_MAX - 1,
        });
    }
    Ok(())
}

/// Check one file name: not empty, no `/` or NUL, at most [`NAME_MAX`] bytes.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong {
            len: name.len(),
            max: NAME_MAX,
        });
    }
    if name.is_empty() || name.contains(&0) || name.contains(&b'/') {
        return Err(Error::InvalidArgument(format!(
            "invalid file name {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// Check a name a namespace call creates, removes or renames: [`check_name`], and not `.` or
/// `..` (InvalidArgument). Every engine checks it before anything else of the call, the
/// transaction included (conformance case `namespace_error_order`).
pub fn check_entry_name(name: &[u8]) -> Result<()> {
    check_name(name)?;
    if name == b"." || name == b".." {
        return Err(Error::InvalidArgument(format!(
            "invalid file name {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// One path resolution: the directories from the root to where it is, and the links it
/// followed.
struct Walk<'a> {
    store: &'a dyn Store,
    /// Never empty: the root first.
    stack: Vec<Metadata>,
    hops: u32,
    /// The whole path, for messages.
    shown: &'a [u8],
}

fn shown(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl<'a> Walk<'a> {
    fn new(store: &'a dyn Store, shown: &'a [u8]) -> Result<Self> {
        Ok(Walk {
            store,
            stack: vec![store.getattr(ROOT_INO)?],
            hops: 0,
            shown,
        })
    }

    /// Where the walk is.
    fn here(&self) -> Metadata {
        assert!(!self.stack.is_empty(), "a walk always holds the root");
        self.stack[self.stack.len() - 1]
    }

    /// The target of the link `ino`, counting one more hop.
    fn follow(&mut self, ino: Ino) -> Result<Vec<u8>> {
        self.hops += 1;
        if self.hops > SYMLOOP_MAX {
            return Err(Error::SymlinkLoop(format!(
                "{} (more than {SYMLOOP_MAX} symbolic links)",
                shown(self.shown)
            )));
        }
        let target = self.store.readlink(ino)?;
        if target.starts_with(b"/") {
            // The store is its own root.
            self.stack.truncate(1);
        }
        Ok(target)
    }

    /// Walk `path` from here: every component a directory but the last, links followed as
    /// `last` says for the last component and always for the others.
    fn walk(&mut self, path: &[u8], last: LastLink) -> Result<()> {
        if path.starts_with(b"/") {
            self.stack.truncate(1);
        }
        let follow_last = last == LastLink::Follow || names_dir(path);
        let mut queue: VecDeque<Vec<u8>> =
            split_path(path)?.into_iter().map(<[u8]>::to_vec).collect();
        while let Some(part) = queue.pop_front() {
            let here = self.here();
            // As in the kernel, `..` too must follow a directory: "file/.." is ENOTDIR.
            if !here.is_dir() {
                return Err(Error::NotDir(shown(self.shown)));
            }
            if part == b".." {
                if self.stack.len() > 1 {
                    self.stack.pop();
                }
                continue;
            }
            let next = self.store.lookup(here.ino, &part).map_err(|e| match e {
                Error::NotFound(_) => Error::NotFound(shown(self.shown)),
                other => other,
            })?;
            if next.kind == FileKind::Symlink && (!queue.is_empty() || follow_last) {
                let target = self.follow(next.ino)?;
                for p in split_path(&target)?.into_iter().rev() {
                    queue.push_front(p.to_vec());
                }
                continue;
            }
            self.stack.push(next);
        }
        Ok(())
    }

    /// Walk to the directory of `path`'s last component (every link on the way followed);
    /// returns that component, or None when the path names a directory by itself (empty,
    /// `/`, ending in `..`).
    fn enter_parent(&mut self, path: &[u8]) -> Result<Option<Vec<u8>>> {
        if path.starts_with(b"/") {
            self.stack.truncate(1);
        }
        let parts = split_path(path)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(None);
        };
        if *last == b".." {
            self.walk(path, LastLink::Follow)?;
            return Ok(None);
        }
        let dirs = dirs.join(&b'/');
        self.walk(&dirs, LastLink::Follow)?;
        if !self.here().is_dir() {
            return Err(Error::NotDir(shown(self.shown)));
        }
        Ok(Some(last.to_vec()))
    }
}

/// What a path names for a call that may create it: the directory and name of its last
/// component (after following links, as asked), and the inode there if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub parent: Ino,
    pub name: Vec<u8>,
    /// The inode the name has; `None` when it has none (the call may create it). With
    /// [`LastLink::NoFollow`] it may be a symbolic link.
    pub meta: Option<Metadata>,
}

/// The entry `path` names, its last link followed as `last` says (a link to a missing name
/// gives that name, so that O_CREAT creates the link's target, as open(2) does). A path that
/// names a directory by itself (the root, one ending in `..`) is [`Error::IsDir`].
pub fn resolve_entry(store: &dyn Store, path: &[u8], last: LastLink) -> Result<Entry> {
    let mut w = Walk::new(store, path)?;
    let mut name = w
        .enter_parent(path)?
        .ok_or_else(|| Error::IsDir(shown(path)))?;
    loop {
        let parent = w.here().ino;
        match store.lookup(parent, &name) {
            Ok(meta) if meta.kind == FileKind::Symlink && last == LastLink::Follow => {
                let target = w.follow(meta.ino)?;
                name = w
                    .enter_parent(&target)?
                    .ok_or_else(|| Error::IsDir(shown(path)))?;
            }
            Ok(meta) => {
                return Ok(Entry {
                    parent,
                    name,
                    meta: Some(meta),
                })
            }
            Err(Error::NotFound(_)) => {
                return Ok(Entry {
                    parent,
                    name,
                    meta: None,
                })
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `path` can only name a directory, as the kernel reads it: it ends in `/`, `.`
/// or `..` ("f/" and "f/." of a regular file are ENOTDIR).
pub fn names_dir(path: &[u8]) -> bool {
    path.ends_with(b"/")
        || path == b"."
        || path == b".."
        || path.ends_with(b"/.")
        || path.ends_with(b"/..")
}

/// The inode a path names, its last component not followed when it is a symbolic link
/// (lstat); links in the other components are followed.
pub fn resolve(store: &dyn Store, path: impl AsRef<[u8]>) -> Result<Metadata> {
    resolve_with(store, path, LastLink::NoFollow)
}

/// The inode a path names, every symbolic link followed (stat).
pub fn resolve_follow(store: &dyn Store, path: impl AsRef<[u8]>) -> Result<Metadata> {
    resolve_with(store, path, LastLink::Follow)
}

/// The inode a path names, its last link followed as `last` says.
pub fn resolve_with(store: &dyn Store, path: impl AsRef<[u8]>, last: LastLink) -> Result<Metadata> {
    let path = path.as_ref();
    let mut w = Walk::new(store, path)?;
    w.walk(path, last)?;
    let meta = w.here();
    if names_dir(path) && !meta.is_dir() {
        return Err(Error::NotDir(shown(path)));
    }
    Ok(meta)
}

/// The directory holding the last component of `path`, and that component (not followed;
/// links in the other components are). Fails for the root itself (it has no parent entry)
/// and for a path ending in `..`.
pub fn resolve_parent(store: &dyn Store, path: &[u8]) -> Result<(Ino, Vec<u8>)> {
    let parts = split_path(path)?;
    match parts.last() {
        None => {
            return Err(Error::InvalidArgument(
                "the root has no parent entry".into(),
            ))
        }
        Some(last) if *last == b".." => {
            return Err(Error::InvalidArgument(format!(
                "path ends in ..: {}",
                shown(path)
            )))
        }
        Some(_) => {}
    }
    let mut w = Walk::new(store, path)?;
    let name = w
        .enter_parent(path)?
        .ok_or_else(|| Error::InvalidArgument(format!("no parent entry: {}", shown(path))))?;
    Ok((w.here().ino, name))
}

/// Options for opening a file by path, mirroring `std::fs::OpenOptions`, plus `atomic`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    pub read: bool,
    pub write: bool,
    pub append: bool,
    pub truncate: bool,
    pub create: bool,
    pub create_new: bool,
    pub atomic: bool,
    /// Permission bits for a created file (default 0o644).
    pub perm: Option<u32>,
}

impl OpenOptions {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn read(mut self, on: bool) -> Self {
        self.read = on;
        self
    }
    pub fn write(mut self, on: bool) -> Self {
        self.write = on;
        self
    }
    pub fn append(mut self, on: bool) -> Self {
        self.append = on;
        self
    }
    pub fn truncate(mut self, on: bool) -> Self {
        self.truncate = on;
        self
    }
    pub fn create(mut self, on: bool) -> Self {
        self.create = on;
        self
    }
    pub fn create_new(mut self, on: bool) -> Self {
        self.create_new = on;
        self
    }
    pub fn atomic(mut self, on: bool) -> Self {
        self.atomic = on;
        self
    }
    pub fn perm(mut self, perm: u32) -> Self {
        self.perm = Some(perm);
        self
    }

    /// Open (and create or truncate, as asked) the file at `path`, following a symbolic
    /// link in its last component (a link to a missing name creates that name). Creation
    /// and truncation belong to `tx` when one is given.
    pub fn open(&self, store: &dyn Store, path: impl AsRef<[u8]>, tx: Option<TxId>) -> Result<Fh> {
        self.open_with(store, path, tx, LastLink::Follow)
    }

    /// [`OpenOptions::open`], the last link followed as `last` says: with
    /// [`LastLink::NoFollow`] (O_NOFOLLOW) a symbolic link is [`Error::SymlinkLoop`]
    /// (ELOOP), and `create_new` on one is [`Error::Exists`], as open(2) answers.
    pub fn open_with(
        &self,
        store: &dyn Store,
        path: impl AsRef<[u8]>,
        tx: Option<TxId>,
        last: LastLink,
    ) -> Result<Fh> {
        let path = path.as_ref();
        let writable = self.write || self.append;
        if (self.truncate || self.create || self.create_new) && !writable {
            return Err(Error::InvalidArgument(
                "create/truncate need write or append access".into(),
            ));
        }
        // O_CREAT|O_EXCL never follows the last link (open(2)): an existing link is EEXIST.
        let last = if self.create_new {
            LastLink::NoFollow
        } else {
            last
        };
        let entry = resolve_entry(store, path, last)?;
        let meta = match entry.meta {
            Some(_) if self.create_new => return Err(Error::Exists(shown(path))),
            Some(meta) if meta.kind == FileKind::Symlink => {
                return Err(Error::SymlinkLoop(format!(
                    "{} is a symbolic link (not followed)",
                    shown(path)
                )));
            }
            Some(meta) => meta,
            None if self.create || self.create_new => {
                store.create(entry.parent, &entry.name, self.perm.unwrap_or(0o644), tx)?
            }
            None => return Err(Error::NotFound(shown(path))),
        };
        if meta.is_dir() {
            return Err(Error::IsDir(String::from_utf8_lossy(path).into_owned()));
        }
        let flags = OpenFlags {
            read: self.read || !writable,
            write: writable,
            append: self.append,
            atomic: self.atomic,
        };
        let fh = store.open(meta.ino, flags)?;
        if let Some(tx) = tx {
            if let Err(e) = store.tx_add(tx, fh).or_else(|e| match e {
                // Already bound to this very transaction (e.g. opened twice): fine.
                Error::FileInTransaction(id) if id == tx.0 => Ok(()),
                e => Err(e),
            }) {
                let _ = store.release(fh);
                return Err(e);
            }
        }
        if self.truncate && meta.size != 0 {
            if let Err(e) = store.set_len(fh, 0) {
                let _ = store.release(fh);
                return Err(e);
            }
        }
        Ok(fh)
    }
}

/// Create a directory and its missing parents.
pub fn mkdir_all(store: &dyn Store, path: impl AsRef<[u8]>, perm: u32) -> Result<Metadata> {
    let mut dir = store.getattr(ROOT_INO)?;
    for part in split_path(path.as_ref())? {
        if part == b".." {
            return Err(Error::InvalidArgument("mkdir_all: .. in path".into()));
        }
        dir = match store.lookup(dir.ino, part) {
            Ok(meta) if meta.is_dir() => meta,
            Ok(_) => return Err(Error::NotDir(String::from_utf8_lossy(part).into_owned())),
            Err(Error::NotFound(_)) => store.mkdir(dir.ino, part, perm, None)?,
            Err(e) => return Err(e),
        };
    }
    Ok(dir)
}

/// Read a whole file by path.
pub fn read_file(store: &dyn Store, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
    let fh = OpenOptions::new().read(true).open(store, path, None)?;
    let result = read_all(store, fh);
    store.release(fh)?;
    result
}

/// Read an open file from offset 0 to its end.
pub fn read_all(store: &dyn Store, fh: Fh) -> Result<Vec<u8>> {
    let size = store.fstat(fh)?.size;
    let mut out = vec![0u8; size as usize];
    let mut done = 0usize;
    while done < out.len() {
        let n = store.read(fh, done as u64, &mut out[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    out.truncate(done);
    Ok(out)
}

/// Replace a whole file by path (create or truncate, write, close): one atomic transaction
/// when `tx` is `None` only if the engine makes each call atomic; use a transaction to make
/// the truncate and the write one unit.
pub fn write_file(
    store: &dyn Store,
    path: impl AsRef<[u8]>,
    data: &[u8],
    tx: Option<TxId>,
) -> Result<()> {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(store, path, tx)?;
    let result = store.write(fh, 0, data).map(|_| ());
    let closed = store.release(fh);
    result.and(closed)
}
