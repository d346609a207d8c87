//! The inodes the kernel holds: lookup counts and generation numbers.
//!
//! Node ids are the store's inode numbers, so that `st_ino` is the number the store, fsck and
//! the Rust API show. A store reuses an inode number as soon as the inode is freed, while the
//! kernel may still hold the old inode (an open file, a cached dentry, an inode not yet
//! forgotten). FUSE tells the two apart by the pair (node id, generation), which must never
//! name two different files while the file system is mounted. So each file the kernel is given
//! under a number it does not hold yet, and each newly created file, gets a fresh generation
//! from one counter: the kernel's `fuse_iget` then sees that its old inode of that number is
//! stale and replaces it, instead of giving the new file the old inode and its dentries.
//!
//! Every reply that gives the kernel an entry (lookup, create, mkdir, symlink, link, each
//! readdirplus entry but `.` and `..`) adds one lookup; `forget` takes them away; a number
//! whose count reaches zero leaves the table. A number whose file the store no longer has
//! (after an unlink, rmdir or rename over it) is marked removed: requests by that node id get
//! ESTALE, and a later lookup that finds the number again gets a fresh generation.
//!
//! The handlers that give entries or remove names hold the table's lock across their store
//! call ([`crate::names`]), so the table and the store change in the same order.

use std::collections::HashMap;
use store::{Ino, ROOT_INO};

/// The generation of the root, which the kernel holds from the mount on and never forgets.
pub const ROOT_GENERATION: u64 = 0;

/// What the table knows of the file behind an inode number the kernel holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    /// The store has the file (named, or unlinked and still open).
    Present,
    /// The store freed it: the number may name another file next.
    Removed,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    generation: u64,
    lookups: u64,
    life: Life,
}

/// Lookup counts and generations of the inodes the kernel holds.
#[derive(Debug)]
pub struct Nodes {
    nodes: HashMap<Ino, Node>,
    /// The last generation handed out; generations are never reused.
    generation_last: u64,
}

impl Default for Nodes {
    fn default() -> Self {
        Nodes {
            nodes: HashMap::new(),
            generation_last: ROOT_GENERATION,
        }
    }
}

impl Nodes {
    /// The kernel is given one more lookup of the existing file numbered `ino` (lookup,
    /// link, readdirplus); returns the generation to give with it.
    pub fn looked_up(&mut self, ino: Ino) -> u64 {
        self.add_lookup(ino, false)
    }

    /// The kernel is given the file just created with number `ino`: a new file, so a new
    /// generation whatever the kernel may still hold under that number.
    pub fn created(&mut self, ino: Ino) -> u64 {
        self.add_lookup(ino, true)
    }

    fn add_lookup(&mut self, ino: Ino, new_file: bool) -> u64 {
        if ino == ROOT_INO {
            return ROOT_GENERATION;
        }
        let fresh = self.generation_last + 1;
        let node = self.nodes.entry(ino).or_insert(Node {
            generation: fresh,
            lookups: 0,
            life: Life::Present,
        });
        if new_file || node.life == Life::Removed {
            // The lookups of the old file stay counted: their forget still comes, with the
            // same node id.
            node.generation = fresh;
            node.life = Life::Present;
        }
        node.lookups += 1;
        let generation = node.generation;
        if generation == fresh {
            self.generation_last = fresh;
        }
        assert!(generation > ROOT_GENERATION && generation <= self.generation_last);
        generation
    }

    /// The kernel dropped `count` lookups of `ino`.
    pub fn forget(&mut self, ino: Ino, count: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups == 0 {
            self.nodes.remove(&ino);
        }
    }

    /// The store freed the file numbered `ino`. Nothing to record for a number the kernel
    /// does not hold.
    pub fn removed(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.life = Life::Removed;
        }
    }

    /// True when the kernel holds `ino` and the store freed its file.
    pub fn is_removed(&self, ino: Ino) -> bool {
        self.nodes
            .get(&ino)
            .is_some_and(|n| n.life == Life::Removed)
    }

    /// True when the kernel holds a lookup of `ino` (the root not counted).
    pub fn is_held(&self, ino: Ino) -> bool {
        self.nodes.contains_key(&ino)
    }

    /// Lookups the kernel holds on `ino` (0 when none).
    #[cfg(test)]
    pub fn lookups(&self, ino: Ino) -> u64 {
        self.nodes.get(&ino).map_or(0, |n| n.lookups)
    }

    /// Inode numbers the kernel holds (the root not counted).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the kernel holds no inode but the root.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_of_one_file_share_a_generation_until_forgotten() {
        let mut t = Nodes::default();
        let g = t.looked_up(7);
        assert_eq!(t.looked_up(7), g);
        assert_eq!(t.lookups(7), 2);
        t.forget(7, 1);
        assert_eq!(t.lookups(7), 1);
        t.forget(7, 1);
        assert!(t.is_empty());
        assert_ne!(
            t.looked_up(7),
            g,
            "a forgotten number starts a new generation"
        );
    }

    #[test]
    fn a_created_file_gets_a_new_generation_even_while_the_old_one_is_held() {
        let mut t = Nodes::default();
        let old = t.looked_up(9);
        let new = t.created(9);
        assert_ne!(old, new);
        assert_eq!(
            t.lookups(9),
            2,
            "the old inode's lookup is still to be forgotten"
        );
        assert_eq!(t.looked_up(9), new);
        t.forget(9, 3);
        assert!(!t.is_held(9));
    }

    #[test]
    fn a_removed_number_found_again_is_a_new_file() {
        let mut t = Nodes::default();
        let old = t.looked_up(3);
        t.removed(3);
        assert!(t.is_removed(3));
        let new = t.looked_up(3);
        assert_ne!(old, new);
        assert!(!t.is_removed(3));
        t.removed(44);
        assert!(
            !t.is_held(44),
            "numbers the kernel does not hold are not recorded"
        );
    }

    #[test]
    fn generations_never_repeat_and_the_root_is_fixed() {
        let mut t = Nodes::default();
        let mut seen = std::collections::HashSet::new();
        for round in 0..50u64 {
            let ino = 2 + round % 3;
            let g = if round % 2 == 0 {
                t.created(ino)
            } else {
                t.removed(ino);
                t.looked_up(ino)
            };
            assert!(seen.insert(g), "generation {g} reused");
        }
        assert_eq!(t.looked_up(ROOT_INO), ROOT_GENERATION);
        t.forget(ROOT_INO, 1);
        assert_eq!(t.len(), 3);
        t.forget(12345, 1);
    }
}
