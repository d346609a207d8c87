//! Path-based helpers over the inode-based [`Store`] trait.
//!
//! Paths are byte strings separated by `/`. Absolute and relative paths are both resolved from
//! the root (a store has no working directory); `.` is skipped and `..` goes to the parent
//! (staying at the root). Symbolic links are not followed.

use crate::{Error, Fh, Ino, Metadata, OpenFlags, Result, Store, TxId, NAME_MAX, ROOT_INO};

/// Split a path into validated components. Empty components and `.` are dropped; `..` is
/// kept (resolved against the tree). Fails on names longer than [`NAME_MAX`] or containing NUL.
pub fn split_path(path: &[u8]) -> Result<Vec<&[u8]>> {
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

fn walk(store: &dyn Store, parts: &[&[u8]], shown: &[u8]) -> Result<Metadata> {
    let mut stack: Vec<Metadata> = vec![store.getattr(ROOT_INO)?];
    for part in parts {
        let here = *stack.last().unwrap_or(&stack[0]);
        // As in the kernel, `..` too must follow a directory: "file/.." is ENOTDIR.
        if !here.is_dir() {
            return Err(Error::NotDir(String::from_utf8_lossy(shown).into_owned()));
        }
        if *part == b".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let next = store.lookup(here.ino, part).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(String::from_utf8_lossy(shown).into_owned()),
            other => other,
        })?;
        stack.push(next);
    }
    Ok(*stack.last().unwrap_or(&stack[0]))
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

/// The inode a path names.
pub fn resolve(store: &dyn Store, path: impl AsRef<[u8]>) -> Result<Metadata> {
    let path = path.as_ref();
    let meta = walk(store, &split_path(path)?, path)?;
    if names_dir(path) && !meta.is_dir() {
        return Err(Error::NotDir(String::from_utf8_lossy(path).into_owned()));
    }
    Ok(meta)
}

/// The directory holding the last component of `path`, and that component.
/// Fails for the root itself (it has no parent entry).
pub fn resolve_parent(store: &dyn Store, path: &[u8]) -> Result<(Ino, Vec<u8>)> {
    let parts = split_path(path)?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(Error::InvalidArgument(
            "the root has no parent entry".into(),
        ));
    };
    if *last == b".." {
        return Err(Error::InvalidArgument(format!(
            "path ends in ..: {}",
            String::from_utf8_lossy(path)
        )));
    }
    let dir = walk(store, dirs, path)?;
    if !dir.is_dir() {
        return Err(Error::NotDir(String::from_utf8_lossy(path).into_owned()));
    }
    Ok((dir.ino, last.to_vec()))
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

    /// Open (and create or truncate, as asked) the file at `path`. Creation and truncation
    /// belong to `tx` when one is given.
    pub fn open(&self, store: &dyn Store, path: impl AsRef<[u8]>, tx: Option<TxId>) -> Result<Fh> {
        let path = path.as_ref();
        let writable = self.write || self.append;
        if (self.truncate || self.create || self.create_new) && !writable {
            return Err(Error::InvalidArgument(
                "create/truncate need write or append access".into(),
            ));
        }
        let (parent, name) = resolve_parent(store, path)?;
        let meta = match store.lookup(parent, &name) {
            Ok(_) if self.create_new => {
                return Err(Error::Exists(String::from_utf8_lossy(path).into_owned()));
            }
            Ok(meta) => meta,
            Err(Error::NotFound(_)) if self.create || self.create_new => {
                store.create(parent, &name, self.perm.unwrap_or(0o644), tx)?
            }
            Err(Error::NotFound(_)) => {
                return Err(Error::NotFound(String::from_utf8_lossy(path).into_owned()));
            }
            Err(e) => return Err(e),
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
