//! Read-only consistency check of a pool's on-media structures and of the volatile state
//! derived from them. Never modifies anything; every problem is reported with a name and a
//! location (inode, directory slot, block, log slot and region offset where there is one).
//!
//! What is checked (docs/format.md describes each structure):
//! - superblock: decodes and validates as at open, and still describes the open geometry;
//! - inode table: kinds, tree heights and roots, sizes, block counts, blocks past the end;
//! - block pointers: in range, no block owned twice (within one tree or across inodes);
//! - directory tree: entry names, targets in range and of the kind the entry says, every
//!   in-use inode reachable from the root, no directory reached twice (cycles, second
//!   links), each directory's parent field naming the directory that holds it, nlink counts;
//! - log: torn entries, entries in the wrong area, undo addresses, data entries of
//!   uncommitted transactions, data entries naming a bad inode, pointer or pending block;
//!   FG-WAL line undo entries (modes/fg_wal.rs): blocks, checksum of the saved lines, none left on
//!   a quiet store;
//! - data checksums (a pool formatted with them): every permanent block of every file
//!   against the crc32c in its pointer; a mismatch names the inode, the offset and the
//!   block. Pending blocks are covered by the log, not checked here;
//! - allocators: no used block, inode or log slot on a free list; on a quiet store (no open
//!   transaction) every block, inode and log slot is either used or free (no leaks).
//!
//! Cost: one pass over the inode table, each tree, each directory block and each log slot,
//! and vectors indexed by block number (8 bytes per block: 2 MB for a 1 GB pool).

use crate::core::Core;
use crate::log::entry::Entry;
use crate::media::layout::*;
use crate::recovery::recover::read_geometry;
use pmem::Region;
use std::collections::HashSet;
use store::{FsckReport, Result};

/// What the inode pass found.
struct Inodes {
    /// pbn -> owning inode (0 = none).
    owner: Vec<u64>,
    /// In-use inodes and their kinds.
    live: Vec<(u64, u8)>,
}

/// Check everything; the caller holds the namespace lock. `open`: the transactions open
/// now. None open (`quiet`) enables the leak checks, which an open transaction's reserved
/// blocks and slots would otherwise trip; the data entries an open transaction's writes
/// stored (`Tx::early_entries`) are accepted.
pub(crate) fn fsck<R: Region>(c: &Core<R>, open: &[u64]) -> Result<FsckReport> {
    let quiet = open.is_empty();
    let mut report = FsckReport::default();
    check_superblock(c, &mut report);
    let inodes = check_inodes(c, &mut report);
    let verified = check_data_checksums(c, &inodes.live, &mut report);
    let links = check_tree(c, &inodes.live, &mut report);
    check_links(c, &inodes.live, &links, &mut report);
    let mut pending = pending_blocks(c, &inodes.owner, &mut report);
    let pending_count = pending.len() as u64;
    // FG-WAL undo blocks are in use like pending blocks while their entry is valid.
    let undo_blocks = crate::modes::fg_wal::fsck_lines(c, &inodes.owner, quiet, &mut report);
    pending.extend(undo_blocks);
    let (logs, valid_slots) = check_log(c, &inodes.owner, open, &mut report);
    check_block_allocator(c, &inodes.owner, &pending, quiet, &mut report);
    check_other_allocators(c, &inodes.live, &valid_slots, quiet, &mut report);
    let blocks = inodes.owner.iter().filter(|&&o| o != 0).count() as u64;
    report.checked = vec![
        ("inodes".into(), inodes.live.len() as u64),
        ("blocks".into(), blocks),
        ("pending blocks".into(), pending_count),
        ("log entries".into(), logs),
    ];
    if c.geo.data_checksums {
        report
            .checked
            .push(("data checksums verified".into(), verified));
    }
    Ok(report)
}

fn check_superblock<R: Region>(c: &Core<R>, report: &mut FsckReport) {
    match read_geometry(&*c.region) {
        Ok(geo) if geo == c.geo => {}
        Ok(_) => report.problem(
            "superblock geometry differs from the one opened",
            "offset 0",
        ),
        Err(e) => report.problem(format!("superblock: {e}"), "offset 0"),
    }
    let mut rest = vec![0u8; (SB_SIZE as usize) - SB_CHECKED_LEN - 4];
    c.region.read(SB_CHECKED_LEN as u64 + 4, &mut rest);
    if let Some(at) = rest.iter().position(|&b| b != 0) {
        report.problem(
            "superblock reserved bytes are not zero",
            format!("offset {:#x}", SB_CHECKED_LEN + 4 + at),
        );
    }
}

/// Kinds, trees, sizes and block counts of every inode; block ownership.
fn check_inodes<R: Region>(c: &Core<R>, report: &mut FsckReport) -> Inodes {
    let geo = c.geo;
    let mut owner = vec![0u64; geo.block_count as usize];
    let mut live = Vec::new();
    for ino in 1..geo.inode_count {
        let off = geo.inode(ino);
        let kind = c.read_u8(off + I_KIND);
        let at = || format!("inode {ino} (offset {off:#x})");
        if ino == ROOT_INO && kind != KIND_DIR {
            report.problem(format!("root inode has kind {kind}"), at());
        }
        if kind == KIND_FREE {
            continue;
        }
        if !c.kind_known(kind) {
            report.problem(format!("inode {ino} has kind {kind}"), at());
            continue;
        }
        live.push((ino, kind));
        if c.geo.posix_objects {
            crate::recovery::fsck_posix::check_kind_fields(c, ino, kind, report);
            crate::recovery::fsck_posix::check_xattr_chain(c, ino, &mut owner, report);
        }
        let (mut held, mut last_data) = (0u64, None::<u64>);
        let walked = c.walk_tree(ino, &mut |pbn, index, lbn| {
            held += 1;
            if !index {
                last_data = last_data.max(Some(lbn));
            }
            match std::mem::replace(&mut owner[pbn as usize], ino) {
                0 => {}
                other => report.problem(
                    format!("block {pbn} referenced by inodes {other} and {ino}"),
                    format!("block {pbn} (offset {:#x})", geo.block(pbn)),
                ),
            }
            Ok(())
        });
        if let Err(e) = walked {
            report.problem(format!("inode {ino} block tree: {e}"), at());
            continue;
        }
        let size = match c.inode_size(ino) {
            Ok(size) => size,
            Err(e) => {
                report.problem(format!("{e}"), at());
                continue;
            }
        };
        if let Some(lbn) = last_data.filter(|&l| l >= size.div_ceil(BLOCK_SIZE)) {
            report.problem(
                format!("inode {ino} has block {lbn} past its size {size}"),
                at(),
            );
        }
        let recorded = c.read_u64(off + I_BLOCKS);
        if recorded != held {
            report.problem(
                format!("inode {ino} records {recorded} blocks but its tree holds {held}"),
                format!("inode {ino} (offset {:#x})", off + I_BLOCKS),
            );
        }
    }
    Inodes { owner, live }
}

/// In a checksummed pool, every permanent data block of every file against the crc32c its
/// pointer holds. Returns the blocks checked.
fn check_data_checksums<R: Region>(
    c: &Core<R>,
    live: &[(u64, u8)],
    report: &mut FsckReport,
) -> u64 {
    if !c.geo.data_checksums {
        return 0;
    }
    let mut checked = 0;
    let summed = |kind: u8| kind == KIND_FILE || kind == KIND_SYMLINK;
    for &(ino, _) in live.iter().filter(|&&(_, kind)| summed(kind)) {
        let mut data = Vec::new();
        // A tree that does not walk is reported by the inode pass.
        let _ = c.walk_tree(ino, &mut |pbn, index, lbn| {
            if !index {
                data.push((lbn, pbn));
            }
            Ok(())
        });
        for (lbn, pbn) in data {
            let Ok(Some(ptr)) = c.pointer_addr(ino, lbn) else {
                continue;
            };
            checked += 1;
            let stored = c.geo.leaf_crc(c.read_u64(ptr));
            let found = c.crc_of_block(pbn);
            if stored != found {
                report.problem(
                    format!(
                        "data checksum mismatch in inode {ino} at offset {} (logical block {lbn}): \
                         stored {stored:#010x}, found {found:#010x}",
                        lbn * BLOCK_SIZE
                    ),
                    format!("block {pbn} (offset {:#x})", c.geo.block(pbn)),
                );
            }
        }
    }
    checked
}

/// Walk the directory tree from the root: entry validity, reachability, single parents,
/// parent fields. Returns how many entries name each inode.
fn check_tree<R: Region>(c: &Core<R>, live: &[(u64, u8)], report: &mut FsckReport) -> Vec<u32> {
    let geo = c.geo;
    let mut links = vec![0u32; geo.inode_count as usize];
    let mut reached = vec![false; geo.inode_count as usize];
    let mut queue = vec![ROOT_INO];
    reached[ROOT_INO as usize] = true;
    while let Some(dir) = queue.pop() {
        if c.read_u8(geo.inode(dir) + I_KIND) != KIND_DIR {
            continue;
        }
        for (name, slot, ino, kind) in dir_entries(c, dir, report) {
            let at = || format!("directory {dir} slot {slot}");
            let shown = String::from_utf8_lossy(&name).into_owned();
            if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
                report.problem(format!("entry name {shown:?} is not allowed"), at());
            }
            let target = c.read_u8(geo.inode(ino) + I_KIND);
            if target != kind {
                report.problem(
                    format!(
                        "entry {shown:?} names inode {ino} of kind {target}, entry says {kind}"
                    ),
                    at(),
                );
            }
            links[ino as usize] += 1;
            if ino == ROOT_INO {
                report.problem(format!("entry {shown:?} names the root directory"), at());
                continue;
            }
            if target != KIND_DIR {
                reached[ino as usize] = true;
                continue;
            }
            if std::mem::replace(&mut reached[ino as usize], true) {
                report.problem(
                    format!("directory {ino} reached twice (a cycle or a second link)"),
                    at(),
                );
                continue;
            }
            let parent = c.read_u64(geo.inode(ino) + I_PARENT);
            if parent != dir {
                report.problem(
                    format!("directory {ino} records parent {parent} but is in directory {dir}"),
                    format!("inode {ino} (offset {:#x})", geo.inode(ino) + I_PARENT),
                );
            }
            queue.push(ino);
        }
    }
    for &(ino, _) in live {
        let nlink = c.read_u32(geo.inode(ino) + I_NLINK);
        if !reached[ino as usize] && nlink > 0 {
            report.problem(
                format!("inode {ino} (nlink {nlink}) is not reachable from the root"),
                format!("inode {ino} (offset {:#x})", geo.inode(ino)),
            );
        }
    }
    links
}

/// The entries of a directory read from media: (name, slot, ino, kind).
fn dir_entries<R: Region>(
    c: &Core<R>,
    dir: u64,
    report: &mut FsckReport,
) -> Vec<(Vec<u8>, u64, u64, u8)> {
    let cell = c.cell(dir);
    let st = cell.lock();
    match c.build_dir_index(&st) {
        Ok(index) => index
            .names
            .iter()
            .map(|(name, s)| (name.to_vec(), s.slot, s.ino, s.kind))
            .collect(),
        Err(e) => {
            report.problem(format!("directory {dir}: {e}"), format!("inode {dir}"));
            Vec::new()
        }
    }
}

/// Each inode's nlink against the entries naming it.
fn check_links<R: Region>(c: &Core<R>, live: &[(u64, u8)], links: &[u32], report: &mut FsckReport) {
    for &(ino, kind) in live {
        let nlink = c.read_u32(c.geo.inode(ino) + I_NLINK);
        let found = links[ino as usize];
        let expected = if kind == KIND_DIR {
            u32::from(found > 0 || ino == ROOT_INO)
        } else {
            found
        };
        let open_orphan = nlink == 0
            && c.cells
                .read()
                .get(&ino)
                .is_some_and(|cell| cell.lock().open_handles > 0);
        if nlink != expected && !open_orphan {
            report.problem(
                format!("inode {ino} has nlink {nlink} but {found} entries name it"),
                format!("inode {ino} (offset {:#x})", c.geo.inode(ino) + I_NLINK),
            );
        }
    }
}

/// The pending blocks of the TLVI: in range, not owned by a file unless it is the very
/// block their pointer names (a crash after a checkpoint's pointer swing), not shared.
fn pending_blocks<R: Region>(c: &Core<R>, owner: &[u64], report: &mut FsckReport) -> HashSet<u64> {
    let mut pending = HashSet::new();
    let cells: Vec<_> = c.cells.read().values().cloned().collect();
    for cell in cells {
        let st = cell.lock();
        for (lbn, list) in st.pending.iter() {
            for v in list {
                let at = format!("inode {} block {lbn} (data slot {})", st.ino, v.slot);
                if !c.geo.valid_pbn(v.pbn) {
                    report.problem(format!("pending block {} out of range", v.pbn), at);
                    continue;
                }
                let permanent = c.pointed_pbn(v.ptr_addr);
                if owner[v.pbn as usize] != 0 && permanent != v.pbn {
                    report.problem(
                        format!("pending block {} is also a file block", v.pbn),
                        at.clone(),
                    );
                }
                if !pending.insert(v.pbn) {
                    report.problem(format!("pending block {} used by two versions", v.pbn), at);
                }
            }
        }
    }
    pending
}

/// Log entries: returns how many are valid and the (area, slot) of each valid one
/// (area 0 = metadata log, 1 = data log).
fn check_log<R: Region>(
    c: &Core<R>,
    owner: &[u64],
    open: &[u64],
    report: &mut FsckReport,
) -> (u64, HashSet<(u8, u64)>) {
    let geo = c.geo;
    let mut commits = HashSet::new();
    let mut valid = HashSet::new();
    let read = |addr: u64| {
        let mut line = [0u8; 64];
        c.region.read(addr, &mut line);
        Entry::decode(&line)
    };
    for slot in 0..geo.metadata_log_entries {
        let at = || {
            format!(
                "metadata log slot {slot} (offset {:#x})",
                geo.meta_entry(slot)
            )
        };
        match read(geo.meta_entry(slot)) {
            Entry::Free => continue,
            Entry::Commit(e) => {
                commits.insert(e.txid);
            }
            Entry::Member(_) => {}
            Entry::Undo(u) => {
                if !geo.is_metadata_range(u.addr, u64::from(u.size)) {
                    report.problem(
                        format!("undo entry for address {:#x} outside the metadata", u.addr),
                        at(),
                    );
                }
            }
            Entry::Torn => report.problem("torn entry in the metadata log", at()),
            Entry::Data(_) => report.problem("data entry in the metadata log", at()),
            Entry::Lines(_) => report.problem("line undo entry in the metadata log", at()),
        }
        valid.insert((0, slot));
    }
    for slot in 0..geo.data_log_entries {
        // Built only when a problem is found (formatting per slot dominated fsck's time).
        let at = || format!("data log slot {slot} (offset {:#x})", geo.data_entry(slot));
        match read(geo.data_entry(slot)) {
            Entry::Free => continue,
            Entry::Data(d) => {
                if !commits.contains(&d.txid) && !open.contains(&d.txid) {
                    report.problem(
                        format!("data entry of uncommitted transaction {}", d.txid),
                        at(),
                    );
                }
                let file =
                    c.check_ino(d.ino).is_ok() && c.read_u8(geo.inode(d.ino) + I_KIND) == KIND_FILE;
                if !file {
                    report.problem(
                        format!("data entry names inode {} which is not a file", d.ino),
                        at(),
                    );
                } else if c.pointer_addr(d.ino, d.lbn).ok().flatten() != Some(d.ptr_addr) {
                    report.problem(
                        format!("data entry pointer address {:#x} is not where inode {} block {} points from", d.ptr_addr, d.ino, d.lbn),
                        at(),
                    );
                } else if !geo.valid_pbn(d.pbn) {
                    report.problem(
                        format!("data entry pending block {} out of range", d.pbn),
                        at(),
                    );
                } else if owner[d.pbn as usize] != 0 && c.pointed_pbn(d.ptr_addr) != d.pbn {
                    report.problem(
                        format!("pending block {} is also a file block", d.pbn),
                        at(),
                    );
                }
            }
            // Checked by lines::fsck_lines.
            Entry::Lines(_) => {}
            _ => report.problem("bad entry in the data log", at()),
        }
        valid.insert((1, slot));
    }
    (valid.len() as u64, valid)
}

/// No used block on the free list; on a quiet store, no block neither used nor free.
fn check_block_allocator<R: Region>(
    c: &Core<R>,
    owner: &[u64],
    pending: &HashSet<u64>,
    quiet: bool,
    report: &mut FsckReport,
) {
    let mut free = vec![false; c.geo.block_count as usize];
    for pbn in c.blocks.free_numbers() {
        let Some(seen) = free.get_mut(pbn as usize) else {
            report.problem(
                format!("free list holds block {pbn}, out of range"),
                "block allocator",
            );
            continue;
        };
        // Built only when a problem is found (formatting per free block dominated fsck).
        let at = || format!("block {pbn} (offset {:#x})", c.geo.block(pbn));
        if std::mem::replace(seen, true) {
            report.problem(format!("block {pbn} is on the free list twice"), at());
        }
        if pbn == 0 {
            report.problem("block 0 is on the free list", at());
        } else if owner[pbn as usize] != 0 {
            report.problem(
                format!(
                    "block {pbn} of inode {} is on the free list",
                    owner[pbn as usize]
                ),
                at(),
            );
        } else if pending.contains(&pbn) {
            report.problem(format!("pending block {pbn} is on the free list"), at());
        }
    }
    if !quiet {
        return;
    }
    for pbn in 1..c.geo.block_count {
        if !free[pbn as usize] && owner[pbn as usize] == 0 && !pending.contains(&pbn) {
            report.problem(
                format!("block {pbn} is neither used nor free (leaked)"),
                format!("block {pbn} (offset {:#x})", c.geo.block(pbn)),
            );
        }
    }
}

/// Inode and log-slot allocators against the inode table and the log.
fn check_other_allocators<R: Region>(
    c: &Core<R>,
    live: &[(u64, u8)],
    valid_slots: &HashSet<(u8, u64)>,
    quiet: bool,
    report: &mut FsckReport,
) {
    let in_use: HashSet<u64> = live.iter().map(|&(ino, _)| ino).collect();
    let free_inodes: HashSet<u64> = c.inodes_free.free_numbers().into_iter().collect();
    for &ino in &free_inodes {
        if in_use.contains(&ino) || ino <= ROOT_INO || ino >= c.geo.inode_count {
            report.problem(
                format!("inode {ino} is in use but on the free list"),
                "inode allocator",
            );
        }
    }
    if quiet {
        // Numbers held back for open handles on a file whose create was aborted.
        let held: HashSet<u64> = c
            .cells
            .read()
            .iter()
            .filter(|(_, cell)| cell.try_lock().is_none_or(|st| st.gone))
            .map(|(&ino, _)| ino)
            .collect();
        for ino in ROOT_INO + 1..c.geo.inode_count {
            if !in_use.contains(&ino) && !free_inodes.contains(&ino) && !held.contains(&ino) {
                report.problem(
                    format!("inode {ino} is neither used nor free (leaked)"),
                    "inode allocator",
                );
            }
        }
    }
    let lists = [
        (0u8, &c.meta_slots, "metadata log"),
        (1u8, &c.data_slots, "data log"),
    ];
    for (area, list, name) in lists {
        let free: HashSet<u64> = list.free_numbers().into_iter().collect();
        for &slot in &free {
            if valid_slots.contains(&(area, slot)) {
                report.problem(
                    format!("{name} slot {slot} holds an entry but is on the free list"),
                    format!("{name} allocator"),
                );
            }
        }
        let total = if area == 0 {
            c.geo.metadata_log_entries
        } else {
            c.geo.data_log_entries
        };
        if quiet && c.mode() != crate::config::Mode::Nc {
            for slot in 0..total {
                if !free.contains(&slot) && !valid_slots.contains(&(area, slot)) {
                    report.problem(
                        format!("{name} slot {slot} is neither used nor free (leaked)"),
                        format!("{name} allocator"),
                    );
                }
            }
        }
    }
}
