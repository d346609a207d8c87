//! The namespace calls of the rest of the POSIX file API: symbolic links, special files,
//! rename modes and unnamed files (O_TMPFILE published by linkat).

use std::sync::atomic::{AtomicBool, AtomicI32};
use std::sync::{Arc, Mutex};

use store::path::resolve_follow;
use store::{FileKind, OpenFlags, RenameMode};

use crate::{OpenFile, PResult, Pool, Target, O_ATOMIC};

fn err(e: store::Error) -> i32 {
    e.errno()
}

/// The directory and name `path` creates (an existing name is the call's to refuse).
fn place(pool: &Pool, path: &[u8], root_errno: i32) -> PResult<(u64, Vec<u8>)> {
    store::resolve_parent(&*pool.store, path).map_err(|e| match e {
        store::Error::InvalidArgument(_) => root_errno,
        e => err(e),
    })
}

/// symlink(2): a link at `path` holding `target` (kept as written, never resolved here).
pub fn symlink(pool: &Pool, target: &[u8], path: &[u8]) -> PResult<()> {
    let (parent, name) = place(pool, path, libc::EEXIST)?;
    pool.store
        .symlink(parent, &name, target, None)
        .map(drop)
        .map_err(err)
}

/// readlink(2): the target of the link at `path` (EINVAL for anything else).
pub fn readlink(pool: &Pool, path: &[u8]) -> PResult<Vec<u8>> {
    let link = store::resolve(&*pool.store, path).map_err(err)?;
    pool.store.readlink(link.ino).map_err(err)
}

/// mknod(2): a FIFO, socket, device node, or (type 0 or S_IFREG) an empty regular file; the
/// permission bits less the process umask. A directory is EPERM, any other type EINVAL.
pub fn mknod(pool: &Pool, path: &[u8], mode: u32, dev: u64) -> PResult<()> {
    let kind = match mode & libc::S_IFMT {
        0 => FileKind::File,
        libc::S_IFDIR => return Err(libc::EPERM),
        bits => FileKind::from_mode(bits).ok_or(libc::EINVAL)?,
    };
    let (parent, name) = place(pool, path, libc::EEXIST)?;
    let perm = crate::umask::apply(mode & 0o7777);
    let made = match kind {
        FileKind::File => pool.store.create(parent, &name, perm, None),
        k if k.is_special() => {
            let rdev = if k.is_device() { dev } else { 0 };
            pool.store.mknod(parent, &name, k, perm, rdev, None)
        }
        _ => return Err(libc::EINVAL),
    };
    made.map(drop).map_err(err)
}

/// renameat2(2) flags as a rename mode: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (EINVAL for
/// both, RENAME_WHITEOUT or any other bit).
pub fn rename_mode(flags: u32) -> PResult<RenameMode> {
    match flags {
        0 => Ok(RenameMode::Replace),
        libc::RENAME_NOREPLACE => Ok(RenameMode::NoReplace),
        libc::RENAME_EXCHANGE => Ok(RenameMode::Exchange),
        _ => Err(libc::EINVAL),
    }
}

/// renameat2(2) inside the pool, atomically.
pub fn rename2(pool: &Pool, from: &[u8], to: &[u8], flags: u32) -> PResult<()> {
    let mode = rename_mode(flags)?;
    let (parent, name) = place(pool, from, libc::EBUSY)?;
    let (new_parent, new_name) = place(pool, to, libc::EBUSY)?;
    pool.store
        .rename_with(parent, &name, new_parent, &new_name, mode, None)
        .map_err(err)
}

/// open(2) with O_TMPFILE: a new unnamed regular file in the directory `dir`, open with
/// `flags` (O_WRONLY or O_RDWR: EINVAL otherwise; plus O_ATOMIC) and `mode` less the umask.
/// Nothing of it survives its last close or a crash unless [`linkat`] names it.
pub fn tmpfile(pool: &Arc<Pool>, dir: &[u8], flags: i32, mode: u32) -> PResult<Arc<OpenFile>> {
    let access = flags & libc::O_ACCMODE;
    if access != libc::O_WRONLY && access != libc::O_RDWR {
        return Err(libc::EINVAL);
    }
    let d = resolve_follow(&*pool.store, dir).map_err(err)?;
    if !d.is_dir() {
        return Err(libc::ENOTDIR);
    }
    let open = OpenFlags {
        read: access == libc::O_RDWR,
        write: true,
        append: flags & libc::O_APPEND != 0,
        atomic: flags & O_ATOMIC != 0,
    };
    let perm = crate::umask::apply(mode & 0o7777);
    let (meta, fh) = pool.store.tmpfile(d.ino, perm, open, None).map_err(err)?;
    let status = flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK);
    let mut shown = dir.to_vec();
    shown.extend_from_slice(b"/(unnamed)");
    Ok(Arc::new(OpenFile {
        pool: pool.clone(),
        ino: meta.ino,
        target: Target::File(fh),
        pos: Mutex::new(0),
        status: AtomicI32::new(status),
        atomic: AtomicBool::new(open.atomic),
        path: shown,
    }))
}

/// linkat(2) of an open file (`AT_EMPTY_PATH`): a new name `path` for it, in its own pool.
/// For an unnamed file this publishes it, with its contents, atomically.
pub fn linkat(file: &OpenFile, path: &[u8]) -> PResult<()> {
    let (parent, name) = place(&file.pool, path, libc::EEXIST)?;
    file.pool
        .store
        .link(file.ino, parent, &name, None)
        .map(drop)
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renameat2_flags() {
        assert_eq!(rename_mode(0), Ok(RenameMode::Replace));
        assert_eq!(
            rename_mode(libc::RENAME_NOREPLACE),
            Ok(RenameMode::NoReplace)
        );
        assert_eq!(rename_mode(libc::RENAME_EXCHANGE), Ok(RenameMode::Exchange));
        for bad in [
            libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE,
            libc::RENAME_WHITEOUT,
            8,
        ] {
            assert_eq!(rename_mode(bad), Err(libc::EINVAL));
        }
    }
}
