//! Read-only consistency check of a pool's on-media structures (and of the volatile state
//! derived from them).

use crate::core::Core;
use crate::entry::Entry;
use crate::layout::*;
use pmem::Region;
use std::collections::{HashMap, HashSet};
use store::{FsckReport, Result};

/// Check everything; the caller holds the namespace lock.
pub fn fsck<R: Region>(c: &Core<R>) -> Result<FsckReport> {
    let mut report = FsckReport::default();
    let geo = c.geo;
    let mut owner: HashMap<u64, u64> = HashMap::new();
    let mut links: HashMap<u64, u32> = HashMap::new();
    let mut live = Vec::new();
    for ino in 1..geo.inode_count {
        let off = geo.inode(ino);
        let kind = c.read_u8(off + I_KIND);
        if kind == KIND_FREE {
            continue;
        }
        if kind != KIND_FILE && kind != KIND_DIR {
            report.problem(
                format!("inode {ino} has kind {kind}"),
                format!("offset {off:#x}"),
            );
            continue;
        }
        live.push((ino, kind));
        let walked = c.walk_tree(ino, &mut |pbn, _, _| {
            if let Some(other) = owner.insert(pbn, ino) {
                report.problem(
                    format!("block {pbn} referenced by inodes {other} and {ino}"),
                    format!("inode {ino}"),
                );
            }
            Ok(())
        });
        if let Err(e) = walked {
            report.problem(format!("inode {ino}: {e}"), format!("offset {off:#x}"));
        }
    }
    for &(ino, kind) in &live {
        if kind != KIND_DIR || c.read_u32(geo.inode(ino) + I_NLINK) == 0 {
            continue;
        }
        let cell = c.cell(ino);
        let st = cell.lock();
        match c.build_dir_index(&st) {
            Ok(index) => {
                for (name, slot) in &index.names {
                    let target = c.read_u8(geo.inode(slot.ino) + I_KIND);
                    if target != slot.kind {
                        report.problem(
                            format!(
                                "entry {:?} names inode {} of kind {target}",
                                String::from_utf8_lossy(name),
                                slot.ino
                            ),
                            format!("directory {ino}"),
                        );
                    }
                    *links.entry(slot.ino).or_default() += 1;
                }
            }
            Err(e) => report.problem(format!("directory {ino}: {e}"), format!("inode {ino}")),
        }
    }
    for &(ino, kind) in &live {
        let nlink = c.read_u32(geo.inode(ino) + I_NLINK);
        let found = links.get(&ino).copied().unwrap_or(0);
        let expected = if kind == KIND_DIR {
            u32::from(found > 0 || ino == ROOT_INO)
        } else {
            found
        };
        if nlink != expected && !(nlink == 0 && c.cell(ino).lock().open_handles > 0) {
            report.problem(
                format!("inode {ino} has nlink {nlink} but {found} entries name it"),
                format!("inode {ino}"),
            );
        }
    }
    let logs = check_log(c, &owner, &mut report);
    report.checked = vec![
        ("inodes".into(), live.len() as u64),
        ("blocks".into(), owner.len() as u64),
        ("log entries".into(), logs),
    ];
    Ok(report)
}

/// Every valid data entry must belong to a committed transaction and name a pending block
/// no file owns (or, after a crash mid-checkpoint, the very block its pointer names).
fn check_log<R: Region>(c: &Core<R>, owner: &HashMap<u64, u64>, report: &mut FsckReport) -> u64 {
    let geo = c.geo;
    let mut commits = HashSet::new();
    let mut members = HashSet::new();
    let mut count = 0;
    let read = |addr: u64| {
        let mut line = [0u8; 64];
        c.region.read(addr, &mut line);
        Entry::decode(&line)
    };
    for slot in 0..geo.metadata_log_entries {
        match read(geo.meta_entry(slot)) {
            Entry::Commit(e) => {
                commits.insert(e.txid);
                count += 1;
            }
            Entry::Member(m) => {
                members.insert((m.group, m.member));
                count += 1;
            }
            Entry::Torn => report.problem("torn entry in the metadata log", format!("slot {slot}")),
            Entry::Data(_) => {
                report.problem("data entry in the metadata log", format!("slot {slot}"))
            }
            Entry::Undo(_) => count += 1,
            Entry::Free => {}
        }
    }
    for slot in 0..geo.data_log_entries {
        match read(geo.data_entry(slot)) {
            Entry::Data(d) => {
                count += 1;
                if !commits.contains(&d.txid) {
                    report.problem(
                        format!("data entry of uncommitted transaction {}", d.txid),
                        format!("data slot {slot}"),
                    );
                }
                let permanent = if geo.is_metadata_range(d.ptr_addr, 8) && d.ptr_addr % 8 == 0 {
                    c.read_u64(d.ptr_addr)
                } else {
                    0
                };
                if owner.contains_key(&d.pbn) && permanent != d.pbn {
                    report.problem(
                        format!("pending block {} is also a file block", d.pbn),
                        format!("data slot {slot}"),
                    );
                }
            }
            Entry::Free => {}
            _ => report.problem("bad entry in the data log", format!("data slot {slot}")),
        }
    }
    count
}
