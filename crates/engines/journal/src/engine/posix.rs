//! The rest of the POSIX namespace on the DRAM namespace: symbolic links and special files
//! (inodes whose whole state is their metadata record), unnamed files (O_TMPFILE), the rename
//! modes and extended attributes. Each is a change of inodes, entries or attributes inside a
//! transaction like any other namespace call, so it reaches the metadata log with that
//! transaction's commit, all or nothing, and is undone by its abort.

use super::namespace::{name_str, Body, Inner, Naming, Node};
use std::collections::HashMap;
use store::{
    check_symlink_target, check_xattr_name, now_ns, path::check_entry_name, Error, FileKind,
    FsckReport, Ino, Metadata, Result, TxId, XattrSet,
};

impl Inner {
    /// A symbolic link to `target` (checked by the caller).
    pub fn new_symlink(
        &mut self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<Metadata> {
        let meta = self.new_node(parent, name, FileKind::Symlink, 0o777, tx, user_tx)?;
        let n = self.node_mut(meta.ino)?;
        n.body = Body::Symlink {
            target: target.to_vec(),
        };
        n.meta.size = target.len() as u64;
        Ok(n.meta)
    }

    /// A FIFO, socket or device node (`rdev` kept for devices only).
    pub fn new_special(
        &mut self,
        parent: Ino,
        name: &[u8],
        (kind, perm, rdev): (FileKind, u32, u64),
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<Metadata> {
        check_entry_name(name)?;
        if !kind.is_special() {
            return Err(Error::InvalidArgument(format!(
                "mknod of a {kind:?} (FIFOs, sockets and device nodes only)"
            )));
        }
        let meta = self.new_node(parent, name, kind, perm, tx, user_tx)?;
        let n = self.node_mut(meta.ino)?;
        if kind.is_device() {
            n.meta.rdev = rdev;
        }
        Ok(n.meta)
    }

    /// A regular file with no name (nlink 0) in `tx`; it may get one by `link`.
    pub fn new_unnamed(
        &mut self,
        parent: Ino,
        perm: u32,
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.tx_check(user_tx)?;
        self.entries(parent)?;
        let ino = self.alloc_ino()?;
        self.save(tx, ino)?;
        self.tx_mut(tx)?.created.insert(ino);
        let mut node = Node::new(ino, FileKind::File, perm, parent);
        node.meta.nlink = 0;
        node.naming = Naming::Unnamed;
        let meta = node.meta;
        self.put(ino, Some(node));
        self.durable.insert(ino, 0);
        Ok(meta)
    }

    /// linkat(2) refuses a file whose last name is gone, unless it never had one (O_TMPFILE).
    pub fn check_linkable(&self, ino: Ino) -> Result<()> {
        let n = self.node(ino)?;
        if n.meta.nlink == 0 && n.naming == Naming::Named {
            return Err(Error::NotFound(format!("inode {ino} has no name")));
        }
        Ok(())
    }

    /// RENAME_NOREPLACE: the source must exist and the target must not.
    pub fn rename_noreplace(
        &mut self,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<()> {
        check_pair(from.1, to.1)?;
        self.tx_check(user_tx)?;
        self.child(from.0, from.1)?;
        if self.entries(to.0)?.contains_key(to.1) {
            return Err(Error::Exists(name_str(to.1)));
        }
        self.rename(from, to, tx, user_tx)
    }

    /// RENAME_EXCHANGE: the two names swap their inodes (a directory's parent and the link
    /// counts of the two parents following).
    pub fn exchange(
        &mut self,
        (parent, name): (Ino, &[u8]),
        (new_parent, new_name): (Ino, &[u8]),
        tx: TxId,
        user_tx: Option<TxId>,
    ) -> Result<()> {
        check_pair(name, new_name)?;
        self.tx_check(user_tx)?;
        let a = self.child(parent, name)?;
        let b = self.child(new_parent, new_name)?;
        if a == b {
            return Ok(());
        }
        let a_dir = self.node(a)?.meta.is_dir();
        let b_dir = self.node(b)?.meta.is_dir();
        if (a_dir && self.is_ancestor(a, new_parent)) || (b_dir && self.is_ancestor(b, parent)) {
            return Err(Error::InvalidArgument(format!(
                "cannot exchange {} with a directory inside it",
                name_str(name)
            )));
        }
        self.check_owner(&[parent, new_parent, a, b], Some(tx))?;
        for ino in [parent, new_parent, a, b] {
            self.save(tx, ino)?;
        }
        self.set_entry(tx, parent, name, Some(b))?;
        self.set_entry(tx, new_parent, new_name, Some(a))?;
        let links = |dir: bool| i64::from(dir);
        self.add_links(tx, parent, links(b_dir) - links(a_dir))?;
        self.add_links(tx, new_parent, links(a_dir) - links(b_dir))?;
        let now = now_ns();
        for (ino, to) in [(a, new_parent), (b, parent)] {
            let n = self.node_mut(ino)?;
            n.meta.ctime = now;
            if let Body::Dir { parent: p, .. } = &mut n.body {
                *p = to;
            }
        }
        for dir in [parent, new_parent] {
            let d = self.node_mut(dir)?;
            d.meta.mtime = now;
            d.meta.ctime = now;
        }
        Ok(())
    }

    /// Set (`Some`) or remove (`None`) attribute `name` of `ino` in `tx`, as `how` says;
    /// at most `bytes_max` bytes of names and values per inode (NoSpace past it).
    pub fn change_xattr(
        &mut self,
        (ino, name): (Ino, &[u8]),
        value: Option<&[u8]>,
        how: XattrSet,
        bytes_max: u64,
        (tx, user_tx): (TxId, Option<TxId>),
    ) -> Result<()> {
        self.tx_check(user_tx)?;
        let n = self.node(ino)?;
        let old = n.xattrs.get(name);
        match (value, how, old) {
            (Some(_), XattrSet::Create, Some(_)) => return Err(Error::Exists(name_str(name))),
            (Some(_), XattrSet::Replace, None) | (None, _, None) => {
                return Err(Error::NoAttribute(name_str(name)))
            }
            _ => {}
        }
        if let Some(v) = value {
            let held = xattr_bytes(n) - old.map_or(0, |o| (name.len() + o.len()) as u64);
            let after = held + (name.len() + v.len()) as u64;
            if after > bytes_max {
                return Err(Error::NoSpace(format!(
                    "extended attributes of inode {ino}: {after} bytes past the {bytes_max} \
                     an inode holds"
                )));
            }
        }
        self.check_owner(&[ino], Some(tx))?;
        self.save(tx, ino)?;
        self.set_xattr(tx, ino, name, value.map(<[u8]>::to_vec))?;
        self.node_mut(ino)?.meta.ctime = now_ns();
        Ok(())
    }

    /// Set or remove an attribute in `tx`, keeping its first value for an abort.
    fn set_xattr(&mut self, tx: TxId, ino: Ino, name: &[u8], to: Option<Vec<u8>>) -> Result<()> {
        let before = self.node(ino)?.xattrs.get(name).cloned();
        let t = self.tx_mut(tx)?;
        let key = (ino, name.to_vec());
        t.xattr_undo.entry(key.clone()).or_insert(before);
        t.dirty.xattrs.insert(key);
        let n = self.node_mut(ino)?;
        match to {
            Some(v) => n.xattrs.insert(name.to_vec(), v),
            None => n.xattrs.remove(name),
        };
        Ok(())
    }

    /// `ino` is about to be freed in `tx`: keep its attributes for an abort (undo images
    /// hold none).
    pub fn keep_xattrs(&mut self, tx: TxId, ino: Ino) -> Result<()> {
        let Some(n) = self.nodes.get(&ino) else {
            return Ok(());
        };
        let held: Vec<(Vec<u8>, Vec<u8>)> = n
            .xattrs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let t = self.tx_mut(tx)?;
        for (name, value) in held {
            t.xattr_undo.entry((ino, name)).or_insert(Some(value));
        }
        Ok(())
    }
}

/// Both names of a rename are entry names.
fn check_pair(name: &[u8], new_name: &[u8]) -> Result<()> {
    check_entry_name(name)?;
    check_entry_name(new_name)
}

/// Bytes of attribute names and values an inode holds.
pub fn xattr_bytes(n: &Node) -> u64 {
    n.xattrs
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum()
}

/// fsck of what the POSIX calls keep per inode: a body that matches the kind (a link's
/// target valid and as long as its size, no size nor punched blocks where there is no data,
/// rdev on devices only, punched blocks inside the file), attribute names valid, attribute
/// bytes within the store's maximum.
pub fn check_nodes(nodes: &HashMap<Ino, Node>, xattr_bytes_max: u64, report: &mut FsckReport) {
    let mut inos: Vec<&Ino> = nodes.keys().collect();
    inos.sort_unstable();
    for ino in inos {
        let Some(n) = nodes.get(ino) else { continue };
        let at = format!("inode {ino}");
        for p in node_problems(n) {
            report.problem(p, at.clone());
        }
        for name in n.xattrs.keys() {
            if let Err(e) = check_xattr_name(name) {
                report.problem(format!("attribute {}: {e}", name_str(name)), at.clone());
            }
        }
        let held = xattr_bytes(n);
        if held > xattr_bytes_max {
            report.problem(
                format!("{held} bytes of attributes, past the {xattr_bytes_max} an inode holds"),
                at.clone(),
            );
        }
    }
}

fn node_problems(n: &Node) -> Vec<String> {
    let m = &n.meta;
    let mut out = Vec::new();
    match (&n.body, m.kind) {
        (Body::File { punched }, FileKind::File) => {
            let blocks = m.size.div_ceil(4096);
            if punched
                .ranges()
                .last()
                .is_some_and(|&(_, end)| end > blocks)
            {
                out.push(format!("punched blocks past its {} bytes", m.size));
            }
        }
        (Body::Dir { .. }, FileKind::Dir) => {}
        (Body::Symlink { target }, FileKind::Symlink) => {
            if let Err(e) = check_symlink_target(target) {
                out.push(format!("link target: {e}"));
            }
            if m.size != target.len() as u64 {
                out.push(format!("link of {} bytes, size {}", target.len(), m.size));
            }
        }
        (Body::Special, kind) if kind.is_special() => {
            if m.size != 0 {
                out.push(format!("a {kind:?} of {} bytes", m.size));
            }
        }
        (_, kind) => out.push(format!("a {kind:?} whose body does not match its kind")),
    }
    if m.rdev != 0 && !m.kind.is_device() {
        out.push(format!("a {:?} with a device number", m.kind));
    }
    out
}
