//! fsck of what formats 3 and 4 add to an inode (docs/format.md "Inode"): a symlink's target, a
//! special file's empty body and device number, the kind-specific bytes of other kinds.

use crate::core::Core;
use crate::media::layout::*;
use crate::namespace::dir::kind_of;
use pmem::Region;
use store::FsckReport;

/// The attribute chain of live inode `ino`: every block decodes (magic, version, crc,
/// records) and is owned by nobody else (`owner`: pbn -> inode). Returns the blocks held.
pub(crate) fn check_xattr_chain<R: Region>(
    c: &Core<R>,
    ino: u64,
    owner: &mut [u64],
    report: &mut FsckReport,
) -> u64 {
    let at = format!("inode {ino} (offset {:#x})", c.geo.inode(ino) + I_XATTR);
    let (blocks, error) = match c.xattr_chain(ino) {
        Ok((blocks, _)) => (blocks, None),
        // The blocks the allocator rebuild counted as in use (not leaks).
        Err(e) => (c.xattr_blocks(ino).unwrap_or_default(), Some(e)),
    };
    if let Some(e) = error {
        report.problem(format!("inode {ino} attributes: {e}"), at);
    }
    for &pbn in &blocks {
        match std::mem::replace(&mut owner[pbn as usize], ino) {
            0 => {}
            other => report.problem(
                format!("attribute block {pbn} referenced by inodes {other} and {ino}"),
                format!("block {pbn} (offset {:#x})", c.geo.block(pbn)),
            ),
        }
    }
    blocks.len() as u64
}

/// Check the kind-specific fields of live inode `ino` of kind `kind`.
pub(crate) fn check_kind_fields<R: Region>(
    c: &Core<R>,
    ino: u64,
    kind: u8,
    report: &mut FsckReport,
) {
    let off = c.geo.inode(ino);
    let at = || format!("inode {ino} (offset {off:#x})");
    let mut tail = [0u8; INLINE_TARGET_MAX as usize];
    c.region.read(off + I_INLINE, &mut tail);
    let height = c.read_u32(off + I_HEIGHT);
    let size = c.read_u64(off + I_SIZE);
    match kind {
        KIND_SYMLINK => check_symlink(c, ino, height, size, &tail, report),
        KIND_FILE | KIND_DIR => {
            if tail.iter().any(|&b| b != 0) {
                report.problem(format!("inode {ino}: bytes 96..128 are not zero"), at());
            }
        }
        special => {
            if height != 0 || size != 0 {
                report.problem(
                    format!("special file {ino} has size {size} and tree height {height}"),
                    at(),
                );
            }
            let rdev_ok = kind_of(special).is_device() || tail[..8].iter().all(|&b| b == 0);
            if !rdev_ok || tail[8..].iter().any(|&b| b != 0) {
                report.problem(
                    format!("special file {ino}: device number or bytes 104..128 not as its kind allows"),
                    at(),
                );
            }
        }
    }
}

fn check_symlink<R: Region>(
    c: &Core<R>,
    ino: u64,
    height: u32,
    size: u64,
    tail: &[u8],
    report: &mut FsckReport,
) {
    let at = format!("inode {ino} (offset {:#x})", c.geo.inode(ino));
    let inline = height == 0;
    if inline
        && tail
            .get(size as usize..)
            .is_some_and(|t| t.iter().any(|&b| b != 0))
    {
        report.problem(
            format!("symlink {ino}: bytes past its inline target"),
            at.clone(),
        );
    }
    if !inline && tail.iter().any(|&b| b != 0) {
        report.problem(
            format!("symlink {ino}: inline bytes beside a block target"),
            at.clone(),
        );
    }
    let blocks = c.read_u64(c.geo.inode(ino) + I_BLOCKS);
    if !inline && (height != 1 || blocks != 2 || size <= INLINE_TARGET_MAX) {
        report.problem(
            format!("symlink {ino}: a target of {size} bytes in a tree of height {height} holding {blocks} blocks"),
            at.clone(),
        );
    }
    match c.read_target(ino) {
        Ok(target) if target.contains(&0) => {
            report.problem(format!("symlink {ino}: target contains NUL"), at)
        }
        Ok(_) => {}
        Err(e) => report.problem(format!("symlink {ino}: {e}"), at),
    }
}
