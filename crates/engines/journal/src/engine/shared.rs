//! Inodes changed by more than one open transaction (typically a directory in which two
//! transactions create or remove entries). The DRAM namespace is the live view, every open
//! transaction's changes included; a commit must log each inode as *that* transaction left
//! it on top of the committed state, and an abort must take back only its own changes:
//!
//! - links: each transaction counts the links it added or dropped per inode
//!   ([`Inner::add_links`]); a commit logs the committed count plus its own, an abort
//!   subtracts its own from the live count;
//! - attributes and times (and a directory's parent): the last transaction to change an
//!   inode owns the live values; when another one changes it after, the values the first
//!   left are kept in its `own` map ([`Inner::note_change`]); a commit logs its own values,
//!   an abort of the last changer puts the committed ones back;
//! - entries are logged per name already; an abort puts back only the names it touched
//!   (their first values, kept per transaction: no image of a directory holds its entries,
//!   so no operation copies a large directory).
//!
//! The committed image of each such inode is kept in [`Shared`] from the first change by an
//! open transaction until no open transaction has changed it any more. Two open
//! transactions changing the *same name* (or the same attribute) are not isolated from each
//! other: the last change wins in the live view.

use super::namespace::{Body, Inner, Node, Tx};
use store::{Ino, Result, TxId};

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
        Body::File => 0,
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
        let previous = match self.shared.get_mut(&ino) {
            None => {
                self.shared.insert(
                    ino,
                    Shared {
                        committed: live.map(Node::without_entries),
                        last: tx.0,
                    },
                );
                return;
            }
            Some(sh) if sh.last == tx.0 => return,
            Some(sh) => std::mem::replace(&mut sh.last, tx.0),
        };
        if let (Some(n), Some(prev)) = (live, self.txs.get_mut(&previous)) {
            prev.own.insert(ino, (n.meta, parent_of(n)));
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
        let (mut meta, parent) = match (sh.map(|s| s.last), t.own.get(&ino)) {
            (Some(last), _) if last == t.id => (live.meta, parent_of(live)),
            (_, Some(own)) => *own,
            _ => (base.meta, parent_of(base)),
        };
        let links = base.meta.nlink as i64 + t.nlink.get(&ino).copied().unwrap_or(0);
        meta.nlink = links.clamp(0, u32::MAX as i64) as u32;
        let mut node = base.without_entries();
        node.meta = meta;
        set_parent(&mut node, parent);
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
    pub fn roll_back(&mut self, t: Tx) {
        for (ino, image) in t.undo.iter().rev() {
            let live = self.nodes.get(ino).map(|n| (n.meta, parent_of(n)));
            match (image, live) {
                (Some(image), Some(live)) => self.take_back(&t, *ino, image, live),
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
    fn take_back(&mut self, t: &Tx, ino: Ino, image: &Node, live: (store::Metadata, Ino)) {
        let (mut meta, mut parent) = live;
        let links = meta.nlink as i64 - t.nlink.get(&ino).copied().unwrap_or(0);
        let sh = self.shared.get(&ino);
        if sh.map(|s| s.last) == Some(t.id) {
            let base = sh.and_then(|s| s.committed.as_ref()).unwrap_or(image);
            meta = base.meta;
            parent = parent_of(base);
        }
        meta.nlink = links.clamp(0, u32::MAX as i64) as u32;
        let blocks_before = self.nodes.get(&ino).map_or(0, Node::blocks);
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.meta = meta;
            set_parent(n, parent);
            let blocks_after = n.blocks();
            self.used_blocks = self.used_blocks - blocks_before + blocks_after;
        }
    }

    /// Drop the committed image of `ino` once no open transaction has changed it.
    fn forget_unshared(&mut self, ino: Ino) {
        if !self.changed_by_other(0, ino) {
            self.shared.remove(&ino);
        }
    }
}
