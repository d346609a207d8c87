//! The logical state of a store: every path with its kind and contents, and every extended
//! attribute (keyed `path NUL name`, right after its path in the tree's order), read through
//! the Store API only. Two stores hold the same data exactly when their trees are equal; the
//! conformance suite and the crash harness compare trees, never engine internals.

use std::collections::BTreeMap;
use store::{path::read_all, Error, FileKind, Ino, OpenFlags, Result, Store, XattrSet, ROOT_INO};

/// Create every entry of `tree` in `store` (directories before their contents; the tree's
/// order guarantees it), outside any transaction.
pub fn build_into(store: &dyn Store, tree: &Tree) -> Result<()> {
    for (path, node) in tree {
        let (parent, name) = store::resolve_parent(store, path)?;
        match node {
            Node::Dir => {
                store.mkdir(parent, &name, 0o755, None)?;
            }
            Node::File(data) => {
                let ino = store.create(parent, &name, 0o644, None)?.ino;
                let fh = store.open(
                    ino,
                    OpenFlags {
                        write: true,
                        ..Default::default()
                    },
                )?;
                let written = store.write(fh, 0, data);
                store.release(fh)?;
                written?;
            }
            Node::Symlink(target) => {
                store.symlink(parent, &name, target, None)?;
            }
            Node::Special { kind, rdev } => {
                store.mknod(parent, &name, *kind, 0o644, *rdev, None)?;
            }
            Node::Xattr(value) => {
                let (owner, attr) = split_xattr_key(path).ok_or_else(|| {
                    Error::InvalidArgument("attribute key without its path".into())
                })?;
                let ino = store::resolve(store, owner)?.ino;
                store.setxattr(ino, attr, value, XattrSet::Either, None)?;
            }
        }
    }
    Ok(())
}

/// The key of attribute `name` of `path` in a [`Tree`].
pub fn xattr_key(path: &[u8], name: &[u8]) -> Vec<u8> {
    [path, b"\0", name].concat()
}

/// The path and attribute name of an attribute key (`None` for a path key).
pub fn split_xattr_key(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = key.iter().position(|&b| b == 0)?;
    Some((&key[..at], &key[at + 1..]))
}

/// What one path holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
    Symlink(Vec<u8>),
    /// A FIFO, socket or device node, with its device number.
    Special {
        kind: FileKind,
        rdev: u64,
    },
    /// The value of an extended attribute (its key is [`xattr_key`]).
    Xattr(Vec<u8>),
}

/// Path (bytes, `/`-separated, no leading slash; the root is not listed) → node.
pub type Tree = BTreeMap<Vec<u8>, Node>;

/// Read the whole tree of `store` (hard-linked files appear under each name).
pub fn snapshot(store: &dyn Store) -> Result<Tree> {
    let mut tree = Tree::new();
    walk(store, ROOT_INO, Vec::new(), &mut tree, 0)?;
    Ok(tree)
}

fn walk(store: &dyn Store, dir: Ino, prefix: Vec<u8>, tree: &mut Tree, depth: usize) -> Result<()> {
    if depth > 4096 {
        return Err(Error::corrupt(
            "directory tree deeper than 4096 levels (a cycle?)",
            dir,
        ));
    }
    for entry in store.read_dir(dir)? {
        let mut path = prefix.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&entry.name);
        add_xattrs(store, entry.ino, &path, tree)?;
        match entry.kind {
            FileKind::Dir => {
                tree.insert(path.clone(), Node::Dir);
                walk(store, entry.ino, path, tree, depth + 1)?;
            }
            FileKind::File => {
                let fh = store.open(
                    entry.ino,
                    OpenFlags {
                        read: true,
                        ..Default::default()
                    },
                )?;
                let data = read_all(store, fh);
                store.release(fh)?;
                tree.insert(path, Node::File(data?));
            }
            FileKind::Symlink => {
                tree.insert(path, Node::Symlink(store.readlink(entry.ino)?));
            }
            kind => {
                let rdev = store.getattr(entry.ino)?.rdev;
                tree.insert(path, Node::Special { kind, rdev });
            }
        }
    }
    Ok(())
}

/// The attributes of `ino` into `tree` (none for an engine without attributes).
fn add_xattrs(store: &dyn Store, ino: Ino, path: &[u8], tree: &mut Tree) -> Result<()> {
    let names = match store.listxattr(ino) {
        Ok(names) => names,
        Err(Error::Unsupported(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        let value = store.getxattr(ino, &name)?;
        tree.insert(xattr_key(path, &name), Node::Xattr(value));
    }
    Ok(())
}

/// Human-readable differences between two trees (at most `limit` lines); empty when equal.
pub fn diff(expected: &Tree, actual: &Tree, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let show = |p: &[u8]| match split_xattr_key(p) {
        Some((path, name)) => format!(
            "{} [attribute {}]",
            String::from_utf8_lossy(path),
            String::from_utf8_lossy(name)
        ),
        None => String::from_utf8_lossy(p).into_owned(),
    };
    for (path, want) in expected {
        match actual.get(path) {
            None => out.push(format!("missing {}", show(path))),
            Some(got) if got != want => {
                out.push(format!("{}: {}", show(path), node_diff(want, got)))
            }
            _ => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        out.push(format!("unexpected {}", show(path)));
    }
    out.truncate(limit);
    out
}

fn node_diff(want: &Node, got: &Node) -> String {
    match (want, got) {
        (Node::File(a), Node::File(b)) => {
            let first = a.iter().zip(b.iter()).position(|(x, y)| x != y);
            match first {
                Some(at) => format!(
                    "contents differ first at byte {at} (len {} expected, {} found)",
                    a.len(),
                    b.len()
                ),
                None => format!("length {} expected, {} found", a.len(), b.len()),
            }
        }
        (Node::Xattr(a), Node::Xattr(b)) => format!(
            "value of {} bytes expected, {} bytes found ({})",
            a.len(),
            b.len(),
            if a.len() == b.len() {
                "contents differ"
            } else {
                "lengths differ"
            }
        ),
        _ => format!("{} expected, {} found", describe(want), describe(got)),
    }
}

fn describe(n: &Node) -> String {
    match n {
        Node::Dir => "directory".into(),
        Node::File(data) => format!("file of {} bytes", data.len()),
        Node::Symlink(target) => format!("symlink to {:?}", String::from_utf8_lossy(target)),
        Node::Special { kind, rdev } => format!("{kind:?} (rdev {rdev:#x})"),
        Node::Xattr(value) => format!("attribute of {} bytes", value.len()),
    }
}
