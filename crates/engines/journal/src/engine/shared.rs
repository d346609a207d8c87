//! Inodes changed by more than one open transaction (typically a directory in which two
//! transactions create or remove entries). The DRAM namespace is the live view, every open
//! transaction's changes included; a commit must log each inode as *that* transaction left
//! it on top of the committed state, and an abort must take back only its own changes:
//!
//! - links: each transaction counts the links it added or dropped per inode
//!   ([`Inner::add_links`]); a commit logs the committed count plus its own, an abort
//!   subtracts its own from the live count;
//! - attributes, times, size and a directory's parent, field by field: while a transaction
//!   is the last to change an inode, the fields that differ from when it became the last are
//!   its own ([`Own`]; [`Inner::note_change`] closes its span when another one takes over).
//!   A commit logs the committed fields with its own on top; an abort puts back the fields
//!   it set that nobody changed after it;
//! - entries are logged per name already; an abort puts back only the names it touched
//!   (their first values, kept per transaction: no image of a directory holds its entries,
//!   so no operation copies a large directory).
//!
//! The committed image of each such inode is kept in [`Shared`] from the first change by an
//! open transaction until no open transaction has changed it any more. Two open
//! transactions changing the *same name* (or the same attribute) are not isolated from each
//! other: the last change wins in the live view.

use super::namespace::{Body, Inner, Node, Tx};
use store::{Ino, Metadata, Result, TxId};

/// An inode's fields other than its link count: perm, uid, gid, atime, mtime, ctime, size,
/// parent (directories; 0 for files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs([u64; 8]);

impl Attrs {
    fn of(n: &Node) -> Attrs {
        let m = &n.meta;
        Attrs([
            m.perm as u64,
            m.uid as u64,
            m.gid as u64,
            m.atime,
            m.mtime,
            m.ctime,
            m.size,
            parent_of(n),
        ])
    }

    /// Set `n`'s fields to these (the link count stays).
    fn put(&self, n: &mut Node) {
        let [perm, uid, gid, atime, mtime, ctime, size, parent] = self.0;
        let m: &mut Metadata = &mut n.meta;
        (m.perm, m.uid, m.gid) = (perm as u32, uid as u32, gid as u32);
        (m.atime, m.mtime, m.ctime) = (atime, mtime, ctime);
        m.size = size;
        set_parent(n, parent);
        n.refresh_allocated();
    }

    /// Bit i set: field i differs.
    fn diff(&self, other: &Attrs) -> u8 {
        (0..8).fold(0, |m, i| m | u8::from(self.0[i] != other.0[i]) << i)
    }
}

/// What one transaction did to an inode's fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct Own {
    /// The fields when it last became the inode's last changer.
    start: Attrs,
    /// Fields it changed, their values, and their values before its first change.
    mask: u8,
    values: Attrs,
    before: Attrs,
}

impl Own {
    fn starting(at: Attrs) -> Own {
        Own {
            start: at,
            ..Own::default()
        }
    }

    /// Close the span that began at `start`: the fields now different are its changes.
    fn close(&mut self, now: &Attrs) {
        let changed = self.start.diff(now);
        for i in 0..8 {
            if changed & (1 << i) != 0 {
                if self.mask & (1 << i) == 0 {
                    self.before.0[i] = self.start.0[i];
                }
                self.values.0[i] = now.0[i];
            }
        }
        self.mask |= changed;
        self.start = *now;
    }
}

/// The committed image of an inode that open transactions changed (`None`: it did not
/// exist), and the transaction that changed it last.
#[derive(Debug)]
pub struct Shared {
    committed: Option<Node>,
    last: u64,
}

fn parent_of(n: &Node) -> Ino {
    match n.body {
        Body::Dir { parent, .. } => parent,
        _ => 0,
    }
}

fn set_parent(n: &mut Node, to: Ino) {
    if let Body::Dir { parent, .. } = &mut n.body {
        *parent = to;
    }
}

impl Inner {
    /// Transaction `tx` is about to change `ino`: keep the committed image (first change by
    /// an open transaction) and what the previous changer left.
    pub fn note_change(&mut self, tx: TxId, ino: Ino) {
        let live = self.nodes.get(&ino);
        let now = live.map(Attrs::of).unwrap_or_default();
        let previous = match self.shared.get_mut(&ino) {
            None => {
                self.shared.insert(
                    ino,
                    Shared {
                        committed: live.map(Node::without_entries),
                        last: tx.0,
                    },
                );
                None
            }
            Some(sh) if sh.last == tx.0 => return,
            Some(sh) => Some(std::mem::replace(&mut sh.last, tx.0)),
        };
        if let Some(prev) = previous.and_then(|p| self.txs.get_mut(&p)) {
            if let Some(own) = prev.own.get_mut(&ino) {
                own.close(&now);
            }
        }
        if let Some(t) = self.txs.get_mut(&tx.0) {
            t.own
                .entry(ino)
                .and_modify(|o| o.start = now)
                .or_insert_with(|| Own::starting(now));
        }
    }

    /// Close removed transaction `t`'s spans (at its commit or abort).
    pub fn close_spans(&self, t: &mut Tx) {
        for (ino, own) in t.own.iter_mut() {
            let last = self.shared.get(ino).map(|s| s.last);
            if let (Some(l), Some(n)) = (last, self.nodes.get(ino)) {
                if l == t.id {
                    own.close(&Attrs::of(n));
                }
            }
        }
    }

    /// Add `delta` links to `ino` in `tx` (after [`Inner::save`]).
    pub fn add_links(&mut self, tx: TxId, ino: Ino, delta: i64) -> Result<()> {
        let n = self.node_mut(ino)?;
        n.meta.nlink = (n.meta.nlink as i64 + delta).clamp(0, u32::MAX as i64) as u32;
        *self.tx_mut(tx)?.nlink.entry(ino).or_insert(0) += delta;
        Ok(())
    }

    /// Whether an open transaction other than `tx` changed `ino`.
    fn changed_by_other(&self, tx: u64, ino: Ino) -> bool {
        self.txs
            .values()
            .any(|u| u.id != tx && u.undo.iter().any(|(i, _)| *i == ino))
    }

    /// `ino` as removed transaction `t` leaves it on top of the committed state (`None`:
    /// freed), without a directory's entries (they are logged per name). Only other
    /// transactions' changes are left out.
    pub fn committed_by(&self, t: &Tx, ino: Ino) -> Option<Node> {
        let live = self.nodes.get(&ino)?;
        let sh = self.shared.get(&ino);
        let base = match sh.and_then(|s| s.committed.as_ref()) {
            Some(base) if self.changed_by_other(t.id, ino) => base,
            _ => return Some(live.without_entries()),
        };
        let mut attrs = Attrs::of(base);
        if let Some(own) = t.own.get(&ino) {
            for i in 0..8 {
                if own.mask & (1 << i) != 0 {
                    attrs.0[i] = own.values.0[i];
                }
            }
        }
        // Times never go back: a commit of another transaction in between keeps its times.
        for i in 3..6 {
            attrs.0[i] = attrs.0[i].max(Attrs::of(base).0[i]);
        }
        let mut node = base.without_entries();
        attrs.put(&mut node);
        let links = base.meta.nlink as i64 + t.nlink.get(&ino).copied().unwrap_or(0);
        node.meta.nlink = links.clamp(0, u32::MAX as i64) as u32;
        Some(node)
    }

    /// Removed transaction `t` committed: the committed images of what it changed follow.
    pub fn committed(&mut self, t: &Tx) {
        for &(ino, _) in &t.undo {
            let now = self.committed_by(t, ino);
            if let Some(sh) = self.shared.get_mut(&ino) {
                sh.committed = now;
                if sh.last == t.id {
                    sh.last = 0;
                }
            }
            self.forget_unshared(ino);
        }
    }

    /// Undo removed transaction `t`'s changes, keeping other transactions' changes.
    pub fn roll_back(&mut self, mut t: Tx) {
        self.close_spans(&mut t);
        for (ino, image) in t.undo.iter().rev() {
            match (image, self.nodes.contains_key(ino)) {
                (Some(_), true) => self.take_back(&t, *ino),
                _ => self.put(*ino, image.clone()),
            }
        }
        for ((dir, name), before) in &t.entry_undo {
            if let Some(Body::Dir { entries, .. }) = self.nodes.get_mut(dir).map(|n| &mut n.body) {
                match before {
                    Some(child) => entries.insert(name.clone(), *child),
                    None => entries.remove(name),
                };
            }
        }
        for ((ino, name), before) in &t.xattr_undo {
            if let Some(n) = self.nodes.get_mut(ino) {
                match before {
                    Some(value) => n.xattrs.insert(name.clone(), value.clone()),
                    None => n.xattrs.remove(name),
                };
            }
        }
        for (ino, _) in &t.undo {
            if let Some(sh) = self.shared.get_mut(ino) {
                if sh.last == t.id {
                    sh.last = 0;
                }
            }
            self.forget_unshared(*ino);
        }
    }

    /// Take `t`'s own changes out of a live inode (other transactions may have changed it
    /// too, and committed meanwhile). Entries are put back per name by the caller.
    fn take_back(&mut self, t: &Tx, ino: Ino) {
        let blocks_before = self.nodes.get(&ino).map_or(0, Node::blocks);
        let alone = !self.changed_by_other(t.id, ino);
        let image = t
            .undo
            .iter()
            .find(|(i, _)| *i == ino)
            .and_then(|(_, image)| image.clone());
        let Some(n) = self.nodes.get_mut(&ino) else {
            return;
        };
        if let Some(image) = image {
            // Not field by field: the punched blocks (accounting only) go back when no other
            // transaction changed the file; an unnamed file linked in `t` is unnamed again.
            if let (true, Body::File { punched }, Body::File { punched: old }) =
                (alone, &mut n.body, &image.body)
            {
                *punched = old.clone();
            }
            n.naming = image.naming;
        }
        let links = n.meta.nlink as i64 - t.nlink.get(&ino).copied().unwrap_or(0);
        if let Some(own) = t.own.get(&ino) {
            // Each field it set goes back, unless another transaction changed it after.
            let mut attrs = Attrs::of(n);
            for i in 0..8 {
                if own.mask & (1 << i) != 0 && attrs.0[i] == own.values.0[i] {
                    attrs.0[i] = own.before.0[i];
                }
            }
            attrs.put(n);
        }
        n.meta.nlink = links.clamp(0, u32::MAX as i64) as u32;
        n.refresh_allocated();
        let blocks_after = n.blocks();
        self.used_blocks = self.used_blocks - blocks_before + blocks_after;
    }

    /// Drop the committed image of `ino` once no open transaction has changed it.
    fn forget_unshared(&mut self, ino: Ino) {
        if !self.changed_by_other(0, ino) {
            self.shared.remove(&ino);
        }
    }
}
