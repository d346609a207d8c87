//! Repair, first pass: the inode table and the block trees, read without trusting them.
//!
//! Each in-use inode's tree is walked tolerantly (a bad pointer is counted and skipped, never
//! followed). An inode is damaged when its kind is unknown, its tree names a block out of
//! range, names more blocks than the pool has, shares a block with another tree (every
//! sharer is damaged: which one owns it cannot be told), or (a directory) its size does not
//! match its blocks. A damaged inode is quarantined: the readable bytes of a file are copied
//! to DRAM (repair.rs writes them to `/lost+found`), then the inode is zeroed (free), which
//! frees its blocks when the allocators are rebuilt. A damaged root directory is reset to
//! an empty directory instead. Smaller faults are fixed in place: a file's size that does not
//! cover its blocks, a block count that disagrees with the tree.

use crate::core::{capacity, Core};
use crate::media::layout::*;
use crate::recovery::repair::{Quarantined, RepairReport};
use pmem::Region;
use std::collections::BTreeMap;

/// The blocks of one tree, as far as they could be read.
#[derive(Default)]
pub(crate) struct Tree {
    pub(crate) index: Vec<u64>,
    /// lbn -> pbn of every data block whose pointer is in range.
    pub(crate) data: BTreeMap<u64, u64>,
    /// Why the tree cannot be trusted (empty: it can).
    pub(crate) faults: Vec<String>,
}

/// What the inode pass leaves for the later passes.
pub(crate) struct InodePass {
    /// Kind of every inode after quarantine (KIND_FREE for a quarantined one).
    pub(crate) kinds: Vec<u8>,
    /// The trees of the inodes still in use.
    pub(crate) trees: BTreeMap<u64, Tree>,
    /// How many trees name each block.
    pub(crate) refs: Vec<u8>,
    /// What could be read of each quarantined file.
    pub(crate) salvaged: Vec<Salvaged>,
}

/// Walk `ino`'s tree without trusting it.
pub(crate) fn tolerant_tree<R: Region>(c: &Core<R>, ino: u64) -> Tree {
    let off = c.geo.inode(ino);
    let height = c.read_u32(off + I_HEIGHT);
    let root = c.read_u64(off + I_ROOT);
    let mut tree = Tree::default();
    if height > TREE_HEIGHT_MAX || (height == 0) != (root == 0) {
        tree.faults
            .push(format!("tree height {height} root {root}"));
        return tree;
    }
    if height == 0 {
        return tree;
    }
    if !c.geo.valid_pbn(root) {
        tree.faults
            .push(format!("tree root block {root} out of range"));
        return tree;
    }
    let mut budget = c.geo.block_count;
    walk(c, root, height, 0, &mut budget, &mut tree);
    tree
}

fn walk<R: Region>(c: &Core<R>, node: u64, level: u32, first: u64, budget: &mut u64, t: &mut Tree) {
    if *budget == 0 {
        t.faults
            .push("tree names more blocks than the pool has".into());
        return;
    }
    *budget -= 1;
    t.index.push(node);
    let mut ptrs = vec![0u8; BLOCK_SIZE as usize];
    c.region.read(c.geo.block(node), &mut ptrs);
    for (i, chunk) in ptrs.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        if word == 0 {
            continue;
        }
        // A leaf pointer of a checksummed pool holds the block's crc in its high bits.
        let child = if level == 1 {
            c.geo.leaf_pbn(word, 0).unwrap_or(word)
        } else {
            word
        };
        if !c.geo.valid_pbn(child) {
            t.faults.push(format!(
                "pointer {i} of block {node} names block {child}, out of range"
            ));
            continue;
        }
        let lbn = first + i as u64 * capacity(level - 1);
        if level == 1 {
            if *budget == 0 {
                t.faults
                    .push("tree names more blocks than the pool has".into());
                return;
            }
            *budget -= 1;
            t.data.insert(lbn, child);
        } else {
            walk(c, child, level - 1, lbn, budget, t);
        }
    }
}

/// The inode pass (module comment).
pub(crate) fn inode_pass<R: Region>(c: &Core<R>, report: &mut RepairReport) -> InodePass {
    let geo = c.geo;
    let mut kinds: Vec<u8> = (0..geo.inode_count)
        .map(|i| c.read_u8(geo.inode(i) + I_KIND))
        .collect();
    let mut trees = BTreeMap::new();
    let mut refs = vec![0u8; geo.block_count as usize];
    for ino in 1..geo.inode_count {
        if kinds[ino as usize] != KIND_FREE && c.kind_known(kinds[ino as usize]) {
            let tree = tolerant_tree(c, ino);
            for &pbn in tree.index.iter().chain(tree.data.values()) {
                refs[pbn as usize] = refs[pbn as usize].saturating_add(1);
            }
            trees.insert(ino, tree);
        }
    }
    let mut pass = InodePass {
        kinds: Vec::new(),
        trees: BTreeMap::new(),
        refs,
        salvaged: Vec::new(),
    };
    for ino in 1..geo.inode_count {
        let kind = kinds[ino as usize];
        let tree = trees.remove(&ino);
        let faults = damage(c, ino, kind, tree.as_ref(), &pass.refs);
        match (faults.is_empty(), tree) {
            (true, Some(tree)) => {
                fix_in_place(c, ino, kind, &tree, report);
                pass.trees.insert(ino, tree);
            }
            (true, None) => {}
            (false, tree) => {
                let tree = tree.unwrap_or_default();
                quarantine(c, ino, kind, &tree, faults, &mut pass, report);
                kinds[ino as usize] = if ino == ROOT_INO { KIND_DIR } else { KIND_FREE };
                if ino == ROOT_INO {
                    pass.trees.insert(ino, Tree::default());
                }
            }
        }
    }
    pass.kinds = kinds;
    pass
}

/// Why `ino` cannot be kept as it is (empty: it can).
fn damage<R: Region>(
    c: &Core<R>,
    ino: u64,
    kind: u8,
    tree: Option<&Tree>,
    refs: &[u8],
) -> Vec<String> {
    if kind == KIND_FREE && ino != ROOT_INO {
        return vec![];
    }
    let Some(tree) = tree.filter(|_| c.kind_known(kind)) else {
        return vec![format!("kind {kind}")];
    };
    if ino == ROOT_INO && kind != KIND_DIR {
        return vec!["the root is not a directory".into()];
    }
    let mut faults = tree.faults.clone();
    let shared = tree
        .index
        .iter()
        .chain(tree.data.values())
        .filter(|&&pbn| refs[pbn as usize] > 1)
        .count();
    if shared > 0 {
        faults.push(format!("{shared} block(s) also named by another tree"));
    }
    if c.geo.posix_objects && kind != KIND_FILE && kind != KIND_DIR {
        // A symlink's target, a special file's empty body (what fsck checks).
        let mut found = store::FsckReport::default();
        crate::recovery::fsck_posix::check_kind_fields(c, ino, kind, &mut found);
        faults.extend(found.problems.into_iter().map(|p| p.what));
    }
    if kind == KIND_DIR {
        let size = c.read_u64(c.geo.inode(ino) + I_SIZE);
        let blocks = size / BLOCK_SIZE;
        let contiguous = tree.data.keys().copied().eq(0..tree.data.len() as u64);
        if !size.is_multiple_of(BLOCK_SIZE) || blocks != tree.data.len() as u64 || !contiguous {
            faults.push(format!(
                "directory size {size} does not match its {} block(s)",
                tree.data.len()
            ));
        }
    }
    faults
}

/// A file's size that does not cover its blocks, a block count the tree disagrees with.
fn fix_in_place<R: Region>(
    c: &Core<R>,
    ino: u64,
    kind: u8,
    tree: &Tree,
    report: &mut RepairReport,
) {
    let off = c.geo.inode(ino);
    if kind == KIND_FILE {
        let size = c.read_u64(off + I_SIZE);
        let end = tree
            .data
            .keys()
            .next_back()
            .map_or(0, |&l| (l + 1) * BLOCK_SIZE);
        let past = size > crate::data::write::FILE_SIZE_MAX
            || size.div_ceil(BLOCK_SIZE) * BLOCK_SIZE < end;
        if past {
            c.region.write(off + I_SIZE, &end.to_le_bytes());
            report.change(format!(
                "inode {ino}: size {size} does not cover its blocks, set to {end}"
            ));
        }
    }
    if c.geo.posix_objects && c.xattr_chain(ino).is_err() {
        c.region.write(off + I_XATTR, &0u64.to_le_bytes());
        report.change(format!(
            "inode {ino}: damaged extended attributes dropped (their blocks come back free)"
        ));
    }
    let held = (tree.index.len() + tree.data.len()) as u64;
    let recorded = c.read_u64(off + I_BLOCKS);
    if recorded != held {
        c.region.write(off + I_BLOCKS, &held.to_le_bytes());
        report.change(format!(
            "inode {ino}: block count {recorded} set to {held}, the blocks its tree holds"
        ));
    }
}

/// Copy out what can be read of a damaged inode, then free it (the root: make it empty).
fn quarantine<R: Region>(
    c: &Core<R>,
    ino: u64,
    kind: u8,
    tree: &Tree,
    faults: Vec<String>,
    pass: &mut InodePass,
    report: &mut RepairReport,
) {
    let off = c.geo.inode(ino);
    let mut entry = Quarantined {
        ino,
        reason: faults.join("; "),
        ..Quarantined::default()
    };
    if kind == KIND_FILE {
        let salvaged = salvage_blocks(c, ino, tree, &mut entry);
        pass.salvaged.push(salvaged);
    }
    if ino == ROOT_INO {
        let mut fresh = [0u8; INODE_SIZE as usize];
        let mut old = [0u8; INODE_SIZE as usize];
        c.region.read(off, &mut old);
        fresh[I_KIND as usize] = KIND_DIR;
        fresh[I_PERM as usize..I_PERM as usize + 4].copy_from_slice(&0o755u32.to_le_bytes());
        fresh[I_NLINK as usize..I_NLINK as usize + 4].copy_from_slice(&1u32.to_le_bytes());
        for field in [I_MTIME, I_CTIME, I_ATIME, I_BTIME] {
            let f = field as usize;
            fresh[f..f + 8].copy_from_slice(&old[f..f + 8]);
        }
        c.region.write(off, &fresh);
        report.change(format!(
            "root directory damaged ({}): reset to an empty directory, its entries go to /lost+found",
            entry.reason
        ));
    } else {
        c.region.fill(off, INODE_SIZE, 0);
        report.change(format!(
            "inode {ino} damaged ({}): quarantined, {} byte(s) salvaged",
            entry.reason, entry.bytes_salvaged
        ));
    }
    report.quarantined.push(entry);
}

/// The readable blocks of a damaged file: every block whose pointer is in range (a shared
/// block too: each sharer gets a copy), and its length: its size when plausible, cut to
/// its last block. Holes and unreadable blocks read as zeros; memory is the blocks read.
fn salvage_blocks<R: Region>(
    c: &Core<R>,
    ino: u64,
    tree: &Tree,
    entry: &mut Quarantined,
) -> Salvaged {
    let size = c.read_u64(c.geo.inode(ino) + I_SIZE);
    let end = tree
        .data
        .keys()
        .next_back()
        .map_or(0, |&l| (l + 1).saturating_mul(BLOCK_SIZE));
    let len = if size <= crate::data::write::FILE_SIZE_MAX {
        size.min(end)
    } else {
        end
    };
    let mut blocks = Vec::new();
    for (&lbn, &pbn) in &tree.data {
        let start = lbn.saturating_mul(BLOCK_SIZE);
        if start >= len {
            break;
        }
        let mut block = vec![0u8; (len - start).min(BLOCK_SIZE) as usize];
        c.region.read(c.geo.block(pbn), &mut block);
        entry.bytes_salvaged += block.len() as u64;
        blocks.push((lbn, block));
    }
    entry.blocks_unreadable = tree.faults.len() as u64;
    Salvaged { ino, len, blocks }
}

/// What could be read of a damaged file.
pub(crate) struct Salvaged {
    pub(crate) ino: u64,
    pub(crate) len: u64,
    /// (lbn, bytes) of each readable block.
    pub(crate) blocks: Vec<(u64, Vec<u8>)>,
}

/// A root whose kind byte is not a directory stops recovery before it starts: make it one
/// (the inode pass then judges its tree like any other).
pub(crate) fn reset_root_kind<R: Region>(c: &Core<R>, report: &mut RepairReport) {
    let at = c.geo.inode(ROOT_INO) + I_KIND;
    let kind = c.read_u8(at);
    if kind != KIND_DIR {
        c.region.write(at, &[KIND_DIR]);
        c.region.persist(at, 1);
        report.change(format!("root inode had kind {kind}: set to directory"));
    }
}
