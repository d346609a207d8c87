//! The namespace tables of a store: each inode's (parent, name) — one name per inode, any
//! of a hard-linked file's — so that its home path can be built, and the root's host inode.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use store::{Error, Ino, Result, ROOT_INO};

/// Inode → (parent, name) of the home tree, with the host's inode numbers (the root's
/// host inode is shown as [`ROOT_INO`], and a host inode equal to `ROOT_INO` as the root's).
#[derive(Debug, Default)]
pub struct Names {
    root_host: u64,
    entries: HashMap<Ino, Vec<(Ino, Vec<u8>)>>,
}

impl Names {
    pub fn new(root_host: u64) -> Self {
        Names {
            root_host,
            entries: HashMap::new(),
        }
    }
    /// The store inode of host inode `host`.
    pub fn ino_of(&self, host: u64) -> Ino {
        if host == self.root_host {
            ROOT_INO
        } else if host == ROOT_INO {
            self.root_host
        } else {
            host
        }
    }
    /// The host inode of store inode `ino`.
    pub fn host_of(&self, ino: Ino) -> u64 {
        self.ino_of(ino)
    }
    /// Add a name of `ino`.
    pub fn add(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        let names = self.entries.entry(ino).or_default();
        if !names.iter().any(|(p, n)| *p == parent && n == name) {
            names.push((parent, name.to_vec()));
        }
    }
    /// Remove one name of `ino`; returns whether it has names left.
    pub fn remove(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> bool {
        let Some(names) = self.entries.get_mut(&ino) else {
            return false;
        };
        names.retain(|(p, n)| !(*p == parent && n == name));
        if names.is_empty() {
            self.entries.remove(&ino);
            return false;
        }
        true
    }
    /// The name `ino` is reached by (the first of a hard-linked file's).
    pub fn first(&self, ino: Ino) -> Option<(Ino, Vec<u8>)> {
        self.entries
            .get(&ino)
            .and_then(|names| names.first().cloned())
    }
    /// How many names `ino` has.
    pub fn count(&self, ino: Ino) -> usize {
        self.entries.get(&ino).map_or(0, Vec::len)
    }
    pub fn contains(&self, ino: Ino) -> bool {
        ino == ROOT_INO || self.entries.contains_key(&ino)
    }
    /// The home path of `ino` ("" for the root).
    pub fn path(&self, ino: Ino) -> Result<PathBuf> {
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != ROOT_INO {
            let (parent, name) = self
                .entries
                .get(&cur)
                .and_then(|names| names.first())
                .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
            parts.push(name.clone());
            cur = *parent;
            if parts.len() > 4096 {
                return Err(Error::corrupt("directory loop in the home tree", ino));
            }
        }
        let mut p = PathBuf::new();
        for part in parts.iter().rev() {
            p.push(OsStr::from_bytes(part));
        }
        Ok(p)
    }
    /// The home path of `name` in directory `parent`.
    pub fn child(&self, parent: Ino, name: &[u8]) -> Result<PathBuf> {
        Ok(self.path(parent)?.join(OsStr::from_bytes(name)))
    }
    /// Rename: the name (`parent`, `name`) of `ino` becomes (`to_parent`, `to_name`).
    pub fn rename(&mut self, ino: Ino, parent: Ino, name: &[u8], to_parent: Ino, to_name: &[u8]) {
        self.remove(ino, parent, name);
        self.add(ino, to_parent, to_name);
    }
}
