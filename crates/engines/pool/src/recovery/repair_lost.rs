//! Repair, last step: `/lost+found`. The bytes salvaged from damaged files become new files
//! there, and each lost inode (in use, reached by no entry from the root) is linked there.
//!
//! Linking goes in two steps, because an entry for an existing inode cannot be made through
//! the store: an empty placeholder file `#INO` is created through the store (which finds a
//! slot, growing the directory if needed), then, with the pool closed, the placeholder's
//! entry is pointed at the lost inode and the placeholder inode is freed.

use crate::api::pool_store::PoolStore;
use crate::core::Core;
use crate::media::layout::*;
use crate::recovery::repair::RepairReport;
use crate::recovery::repair_inodes::Salvaged;
use pmem::Region;
use std::collections::HashMap;
use store::{Error, FileKind, OpenFlags, Result, Store, ROOT_INO};

/// Placeholders to point at lost inodes: placeholder ino -> (lost ino, kind, name).
pub(crate) struct Placed {
    pub(crate) dir: u64,
    pub(crate) placeholders: HashMap<u64, (u64, u8, String)>,
}

/// Write the salvaged files and make the placeholders (through the store).
pub(crate) fn place<R: Region>(
    s: &PoolStore<R>,
    salvaged: &[Salvaged],
    lost: &[(u64, u8)],
    report: &mut RepairReport,
) -> Option<Placed> {
    if salvaged.is_empty() && lost.is_empty() {
        return None;
    }
    let dir = match lost_found(s) {
        Ok(d) => d,
        Err(e) => {
            report.change(format!("could not make /lost+found: {e}"));
            return None;
        }
    };
    for salvaged in salvaged {
        let ino = &salvaged.ino;
        match write_salvaged(s, dir, salvaged) {
            Ok(name) => {
                let path = format!("/lost+found/{name}");
                report.change(format!("salvaged bytes of inode {ino} written to {path}"));
                if let Some(q) = report.quarantined.iter_mut().find(|q| q.ino == *ino) {
                    q.path = path;
                }
            }
            Err(e) => report.change(format!(
                "could not write the salvaged bytes of inode {ino}: {e}"
            )),
        }
    }
    let mut placed = Placed {
        dir,
        placeholders: HashMap::new(),
    };
    for &(ino, kind) in lost {
        let made = free_name(s, dir, ino).and_then(|name| {
            let meta = s.create(dir, name.as_bytes(), 0o600, None)?;
            Ok((meta.ino, name))
        });
        match made {
            Ok((holder, name)) => {
                placed.placeholders.insert(holder, (ino, kind, name));
            }
            Err(e) => report.change(format!("could not link lost inode {ino}: {e}")),
        }
    }
    Some(placed)
}

/// `/lost+found`, made if missing (`/lost+found.repair` where a file holds the name).
fn lost_found<R: Region>(s: &PoolStore<R>) -> Result<u64> {
    for name in [&b"lost+found"[..], b"lost+found.repair"] {
        match s.lookup(ROOT_INO, name) {
            Ok(m) if m.kind == FileKind::Dir => return Ok(m.ino),
            Ok(_) => continue,
            Err(Error::NotFound(_)) => return Ok(s.mkdir(ROOT_INO, name, 0o700, None)?.ino),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Exists("lost+found".into()))
}

/// `#INO`, or `#INO.N` where that is taken.
fn free_name<R: Region>(s: &PoolStore<R>, dir: u64, ino: u64) -> Result<String> {
    for n in 0..1000u32 {
        let name = if n == 0 {
            format!("#{ino}")
        } else {
            format!("#{ino}.{n}")
        };
        match s.lookup(dir, name.as_bytes()) {
            Err(Error::NotFound(_)) => return Ok(name),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Err(Error::Exists(format!("#{ino}")))
}

fn write_salvaged<R: Region>(s: &PoolStore<R>, dir: u64, salvaged: &Salvaged) -> Result<String> {
    let name = free_name(s, dir, salvaged.ino)?;
    let meta = s.create(dir, name.as_bytes(), 0o600, None)?;
    let flags = OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    };
    let fh = s.open(meta.ino, flags)?;
    let written = write_blocks(s, fh, salvaged);
    let released = s.release(fh);
    written.and(released)?;
    Ok(name)
}

fn write_blocks<R: Region>(s: &PoolStore<R>, fh: store::Fh, salvaged: &Salvaged) -> Result<()> {
    for (lbn, bytes) in &salvaged.blocks {
        let off = lbn.saturating_mul(BLOCK_SIZE);
        if s.write(fh, off, bytes)? != bytes.len() {
            return Err(Error::NoSpace("salvaged bytes".into()));
        }
    }
    s.set_len(fh, salvaged.len)
}

/// Point each placeholder's entry at its lost inode and free the placeholder (pool closed).
pub(crate) fn link<R: Region>(c: &Core<R>, placed: &Placed, report: &mut RepairReport) {
    let mut blocks = Vec::new();
    let walked = c.walk_tree(placed.dir, &mut |pbn, index, _| {
        if !index {
            blocks.push(pbn);
        }
        Ok(())
    });
    if let Err(e) = walked {
        report.change(format!("could not read /lost+found: {e}"));
        return;
    }
    for pbn in blocks {
        for i in 0..DIRENTS_PER_BLOCK {
            let addr = c.geo.block(pbn) + i * DIRENT_SIZE;
            let holder = c.read_u64(addr + D_INO);
            let Some((lost, kind, name)) = placed.placeholders.get(&holder) else {
                continue;
            };
            let holder_off = c.geo.inode(holder);
            if c.read_u64(holder_off + I_BLOCKS) != 0 {
                continue;
            }
            c.region.write(addr + D_INO, &lost.to_le_bytes());
            c.region.write(addr + D_KIND, &[*kind]);
            c.region.fill(holder_off, INODE_SIZE, 0);
            let off = c.geo.inode(*lost);
            c.region.write(off + I_NLINK, &1u32.to_le_bytes());
            if *kind == KIND_DIR {
                c.region.write(off + I_PARENT, &placed.dir.to_le_bytes());
            }
            let path = format!("/lost+found/{name}");
            report.change(format!("lost inode {lost} linked as {path}"));
            report.lost_found.push(path);
        }
    }
}
