//! Repair, second pass: directory entries, the tree they form, link counts, and the data
//! log entries that name what the first pass changed.
//!
//! An entry is removed (its ino cleared) when its name is not allowed or repeats in its
//! directory, its target is out of range, free (quarantined included), the root, or a
//! directory another entry names already; an entry whose kind disagrees with its live
//! target gets the target's kind. Then the tree is walked from the root: every in-use inode
//! not reached (its directory was damaged, or directories that only name each other) is
//! a lost root, linked into `/lost+found` later (repair_lost.rs). Link counts and the
//! parent fields of directories are set to what the entries say.

use crate::core::Core;
use crate::log::entry::Entry;
use crate::media::layout::*;
use crate::recovery::repair::RepairReport;
use crate::recovery::repair_inodes::InodePass;
use pmem::Region;
use std::collections::HashSet;

/// What the directory pass leaves for linking into `/lost+found`.
pub(crate) struct DirPass {
    /// In-use inodes no entry reaches from the root, with their kinds.
    pub(crate) lost: Vec<(u64, u8)>,
}

/// Entries naming each inode, and the directory naming each directory.
struct Links {
    count: Vec<u32>,
    parent: Vec<u64>,
    children: Vec<Vec<u64>>,
    /// (directory, entry address) of the entry naming each directory.
    naming: Vec<Option<u64>>,
}

/// The directory pass (module comment).
pub(crate) fn dir_pass<R: Region>(
    c: &Core<R>,
    pass: &InodePass,
    report: &mut RepairReport,
) -> DirPass {
    let n = c.geo.inode_count as usize;
    let mut links = Links {
        count: vec![0; n],
        parent: vec![0; n],
        children: vec![Vec::new(); n],
        naming: vec![None; n],
    };
    for (&dir, tree) in &pass.trees {
        if pass.kinds[dir as usize] != KIND_DIR {
            continue;
        }
        let mut names = HashSet::new();
        for &pbn in tree.data.values() {
            check_block(c, dir, pbn, pass, &mut names, &mut links, report);
        }
    }
    let lost = find_lost(c, pass, &mut links, report);
    fix_links(c, pass, &links, &lost, report);
    DirPass { lost }
}

/// Check the entries of one directory block.
fn check_block<R: Region>(
    c: &Core<R>,
    dir: u64,
    pbn: u64,
    pass: &InodePass,
    names: &mut HashSet<Vec<u8>>,
    links: &mut Links,
    report: &mut RepairReport,
) {
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    c.region.read(c.geo.block(pbn), &mut block);
    for i in 0..DIRENTS_PER_BLOCK {
        let at = (i * DIRENT_SIZE) as usize;
        let addr = c.geo.block(pbn) + at as u64;
        let Some(raw) = block.get(at..at + DIRENT_SIZE as usize) else {
            break;
        };
        let ino = u64::from_le_bytes(raw[..8].try_into().unwrap_or([0; 8]));
        if ino == 0 {
            continue;
        }
        let (kind, len) = (raw[D_KIND as usize], raw[D_NAME_LEN as usize] as usize);
        let name = raw[D_NAME as usize..D_NAME as usize + len].to_vec();
        let shown = String::from_utf8_lossy(&name).into_owned();
        let target = pass.kinds.get(ino as usize).copied().unwrap_or(KIND_FREE);
        let why = if len == 0
            || name.contains(&b'/')
            || name.contains(&0)
            || name == b"."
            || name == b".."
        {
            Some("its name is not allowed".to_string())
        } else if ino >= c.geo.inode_count {
            Some(format!("it names inode {ino}, out of range"))
        } else if ino == ROOT_INO {
            Some("it names the root directory".into())
        } else if target == KIND_FREE {
            Some(damaged_or_free(pass, ino))
        } else if names.contains(&name) {
            Some("its name repeats in the directory".into())
        } else if target == KIND_DIR && links.naming[ino as usize].is_some() {
            Some(format!("directory {ino} is named by another entry already"))
        } else {
            None
        };
        if let Some(why) = why {
            c.region.write(addr + D_INO, &0u64.to_le_bytes());
            report.change(format!("directory {dir}: removed entry {shown:?} ({why})"));
            continue;
        }
        if kind != target {
            c.region.write(addr + D_KIND, &[target]);
            report.change(format!(
                "directory {dir}: entry {shown:?} said kind {kind}, set to its inode's kind {target}"
            ));
        }
        names.insert(name);
        let slot = ino as usize;
        links.count[slot] += 1;
        links.children[dir as usize].push(ino);
        if target == KIND_DIR {
            links.naming[slot] = Some(addr);
            links.parent[slot] = dir;
        }
    }
}

fn damaged_or_free(pass: &InodePass, ino: u64) -> String {
    if pass.salvaged.iter().any(|v| v.ino == ino) {
        format!("inode {ino} was damaged and is quarantined")
    } else {
        format!("inode {ino} is free")
    }
}

/// Walk from the root; every in-use inode not reached is lost. Directories reached only
/// through each other (a cycle) lose their naming entry, the smallest number first.
fn find_lost<R: Region>(
    c: &Core<R>,
    pass: &InodePass,
    links: &mut Links,
    report: &mut RepairReport,
) -> Vec<(u64, u8)> {
    let n = pass.kinds.len();
    let mut reached = vec![false; n];
    let mut lost = Vec::new();
    reach(ROOT_INO, links, &pass.kinds, &mut reached);
    loop {
        let unreached =
            |i: usize| i > ROOT_INO as usize && !reached[i] && c.kind_known(pass.kinds[i]);
        let orphan = |i: usize| {
            pass.kinds[i] != KIND_DIR
                && links.count[i] == 0
                && c.read_u32(c.geo.inode(i as u64) + I_NLINK) == 0
        };
        let top = (0..n).find(|&i| unreached(i) && !orphan(i) && links.count[i] == 0);
        let next = top.or_else(|| (0..n).find(|&i| unreached(i) && pass.kinds[i] == KIND_DIR));
        let Some(ino) = next else { break };
        if let Some(addr) = links.naming[ino].take() {
            c.region.write(addr + D_INO, &0u64.to_le_bytes());
            links.count[ino] = 0;
            report.change(format!(
                "directory {ino} was reachable only through a cycle: its entry removed"
            ));
        }
        lost.push((ino as u64, pass.kinds[ino]));
        reach(ino as u64, links, &pass.kinds, &mut reached);
    }
    lost
}

fn reach(from: u64, links: &Links, kinds: &[u8], reached: &mut [bool]) {
    let mut queue = vec![from];
    reached[from as usize] = true;
    while let Some(dir) = queue.pop() {
        for &child in &links.children[dir as usize] {
            if !std::mem::replace(&mut reached[child as usize], true)
                && kinds[child as usize] == KIND_DIR
            {
                queue.push(child);
            }
        }
    }
}

/// nlink and the parent field as the entries say (a lost root: as `/lost+found` will).
fn fix_links<R: Region>(
    c: &Core<R>,
    pass: &InodePass,
    links: &Links,
    lost: &[(u64, u8)],
    report: &mut RepairReport,
) {
    let lost: HashSet<u64> = lost.iter().map(|&(i, _)| i).collect();
    for ino in ROOT_INO..c.geo.inode_count {
        let kind = pass.kinds[ino as usize];
        let off = c.geo.inode(ino);
        let nlink = c.read_u32(off + I_NLINK);
        let want = match kind {
            KIND_FREE => continue,
            KIND_DIR => 1,
            k if !c.kind_known(k) => continue,
            _ if lost.contains(&ino) => 1,
            _ => links.count[ino as usize],
        };
        if nlink != want {
            c.region.write(off + I_NLINK, &want.to_le_bytes());
            report.change(format!("inode {ino}: nlink {nlink} set to {want}"));
        }
        let parent = links.parent[ino as usize];
        if kind == KIND_DIR && ino != ROOT_INO && !lost.contains(&ino) {
            let recorded = c.read_u64(off + I_PARENT);
            if recorded != parent {
                c.region.write(off + I_PARENT, &parent.to_le_bytes());
                report.change(format!(
                    "directory {ino}: parent {recorded} set to {parent}, the directory naming it"
                ));
            }
        }
    }
}

/// Clear data log entries that name a free inode, a pointer that is not where the entry
/// says, a block out of range or one a file holds (recovery would refuse them).
pub(crate) fn data_log_pass<R: Region>(c: &Core<R>, pass: &InodePass, report: &mut RepairReport) {
    let mut pending = HashSet::new();
    for slot in 0..c.geo.data_log_entries {
        let addr = c.geo.data_entry(slot);
        let mut line = [0u8; 64];
        c.region.read(addr, &mut line);
        let Entry::Data(d) = Entry::decode(&line) else {
            continue;
        };
        let live = pass.kinds.get(d.ino as usize) == Some(&KIND_FILE) && d.ino != 0;
        let bad = if !live {
            Some(format!("inode {} is not a file", d.ino))
        } else if c.pointer_addr(d.ino, d.lbn).ok().flatten() != Some(d.ptr_addr) {
            Some(format!(
                "pointer address {:#x} is not inode {}'s block {}",
                d.ptr_addr, d.ino, d.lbn
            ))
        } else if !c.geo.valid_pbn(d.pbn) {
            Some(format!("pending block {} out of range", d.pbn))
        } else if pass.refs[d.pbn as usize] != 0 && c.pointed_pbn(d.ptr_addr) != d.pbn {
            Some(format!("pending block {} belongs to a file", d.pbn))
        } else if !pending.insert(d.pbn) {
            Some(format!("pending block {} named twice", d.pbn))
        } else {
            None
        };
        if let Some(why) = bad {
            c.clear_entry(addr);
            report.change(format!("data log slot {slot}: redo entry dropped ({why})"));
        }
    }
    // persist: the dropped entries are gone before the pool is opened again.
    c.region.fence();
}
