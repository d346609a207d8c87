//! File and namespace operations with POSIX argument and error conventions.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use store::{DirEntry, Error, FileKind, Metadata, OpenFlags, Store};

use crate::{OpenFile, PResult, Pool, Target, O_ATOMIC};

/// Largest byte count one read or write moves (as Linux: 0x7ffff000).
pub const IO_BYTES_MAX: usize = 0x7fff_f000;

pub(crate) fn err(e: Error) -> i32 {
    e.errno()
}

/// Open `path` (inside the pool) with open(2) `flags` (plus [`O_ATOMIC`]) and `mode`; a
/// file it creates gets `mode` less the process umask, as open(2) gives it.
pub fn open(pool: &Arc<Pool>, path: &[u8], flags: i32, mode: u32) -> PResult<Arc<OpenFile>> {
    let store = &*pool.store;
    let access = flags & libc::O_ACCMODE;
    if access == libc::O_ACCMODE {
        return Err(libc::EINVAL);
    }
    let writable = access != libc::O_RDONLY;
    let meta = if store::names_dir(path) {
        // "d/", "d/." or "d/..": an existing directory or nothing (open(2) cannot create
        // one: EISDIR with O_CREAT, as the kernel says).
        match store::path::resolve_follow(store, path) {
            Ok(meta) if flags & libc::O_CREAT != 0 && meta.is_dir() => return Err(libc::EISDIR),
            Ok(meta) => meta,
            Err(Error::NotFound(_)) if flags & libc::O_CREAT != 0 => return Err(libc::EISDIR),
            Err(e) => return Err(err(e)),
        }
    } else {
        open_entry(store, path, flags, mode)?
    };
    let status = flags
        & (libc::O_ACCMODE | libc::O_APPEND | libc::O_NONBLOCK | libc::O_SYNC | libc::O_DSYNC);
    let make = |target| {
        Arc::new(OpenFile {
            pool: pool.clone(),
            ino: meta.ino,
            target,
            pos: Mutex::new(0),
            status: AtomicI32::new(status),
            atomic: AtomicBool::new(flags & O_ATOMIC != 0),
            path: path.to_vec(),
        })
    };
    match meta.kind {
        FileKind::Dir if writable || flags & (libc::O_CREAT | libc::O_TRUNC) != 0 => {
            return Err(libc::EISDIR)
        }
        FileKind::Dir => return Ok(make(Target::Dir)),
        _ if flags & libc::O_DIRECTORY != 0 => return Err(libc::ENOTDIR),
        _ => {}
    }
    let open_flags = OpenFlags {
        read: access != libc::O_WRONLY,
        write: writable,
        append: flags & libc::O_APPEND != 0,
        atomic: flags & O_ATOMIC != 0,
    };
    let fh = store.open(meta.ino, open_flags).map_err(err)?;
    let file = make(Target::File(fh));
    if flags & libc::O_TRUNC != 0 && writable && meta.size != 0 {
        store.set_len(fh, 0).map_err(err)?;
    }
    Ok(file)
}

/// Open inode `ino` again with the status flags and O_ATOMIC mode of a description another
/// process opened (a descriptor inherited across fork or exec): its own store handle, the
/// same file. `path` is kept for messages and `fdopendir`.
pub fn open_inode(
    pool: &Arc<Pool>,
    ino: store::Ino,
    status: i32,
    atomic: bool,
    path: &[u8],
) -> PResult<Arc<OpenFile>> {
    let store = &*pool.store;
    let meta = store.getattr(ino).map_err(err)?;
    let access = status & libc::O_ACCMODE;
    let target = match meta.kind {
        FileKind::Dir => Target::Dir,
        FileKind::File => Target::File(
            store
                .open(
                    ino,
                    OpenFlags {
                        read: access != libc::O_WRONLY,
                        write: access != libc::O_RDONLY,
                        append: status & libc::O_APPEND != 0,
                        atomic,
                    },
                )
                .map_err(err)?,
        ),
        _ => return Err(libc::EBADF),
    };
    Ok(Arc::new(OpenFile {
        pool: pool.clone(),
        ino,
        target,
        pos: Mutex::new(0),
        status: AtomicI32::new(status),
        atomic: AtomicBool::new(atomic),
        path: path.to_vec(),
    }))
}

/// The inode of `path` for open(2), created when it is missing and `flags` say O_CREAT. A
/// symbolic link in the last component is followed (a link to a missing name with O_CREAT
/// creates that name), except with O_NOFOLLOW (ELOOP) or O_CREAT|O_EXCL (EEXIST).
fn open_entry(store: &dyn store::Store, path: &[u8], flags: i32, mode: u32) -> PResult<Metadata> {
    use store::path::LastLink;
    if store::split_path(path).is_ok_and(|p| p.is_empty()) {
        return store.getattr(store::ROOT_INO).map_err(err);
    }
    let exclusive = flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0;
    let last = if exclusive || flags & libc::O_NOFOLLOW != 0 {
        LastLink::NoFollow
    } else {
        LastLink::Follow
    };
    let entry = store::path::resolve_entry(store, path, last).map_err(err)?;
    match entry.meta {
        Some(_) if exclusive => Err(libc::EEXIST),
        Some(meta) if meta.kind == FileKind::Symlink => Err(libc::ELOOP),
        Some(meta) => Ok(meta),
        None if flags & libc::O_CREAT != 0 => store
            .create(entry.parent, &entry.name, crate::umask::apply(mode), None)
            .map_err(err),
        None => Err(libc::ENOENT),
    }
}

/// Where a description's offset lives besides [`OpenFile::pos`]: `Some(fd)` when it is
/// mirrored in the kernel description of descriptor `fd` (the shim's descriptors: a kernel
/// description is shared with forked children and survives exec, so every process using it
/// sees one offset, as POSIX wants). Read before and written back after each call, under the
/// position lock.
pub type Mirror = Option<i32>;

fn load_pos(pos: &mut u64, mirror: Mirror) {
    if let Some(fd) = mirror {
        // SAFETY: lseek on a descriptor number; no memory is touched. A failure leaves the
        // offset kept in the file.
        let at = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
        if at >= 0 {
            *pos = at as u64;
        }
    }
}

fn store_pos(pos: u64, mirror: Mirror) {
    if let (Some(fd), Ok(at)) = (mirror, i64::try_from(pos)) {
        // SAFETY: as in `load_pos`.
        unsafe { libc::lseek(fd, at, libc::SEEK_SET) };
    }
}

/// read(2) at the file offset.
pub fn read(file: &OpenFile, buf: &mut [u8], mirror: Mirror) -> PResult<usize> {
    let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
    load_pos(&mut pos, mirror);
    let n = pread(file, buf, *pos)?;
    *pos += n as u64;
    store_pos(*pos, mirror);
    Ok(n)
}

/// pread(2).
pub fn pread(file: &OpenFile, buf: &mut [u8], off: u64) -> PResult<usize> {
    file.check_readable()?;
    let fh = file.fh()?;
    let len = buf.len().min(IO_BYTES_MAX);
    let mut done = 0;
    while done < len {
        let n = file
            .pool
            .store
            .read(fh, off + done as u64, &mut buf[done..len])
            .map_err(err)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// write(2) at the file offset (at the end for O_APPEND).
pub fn write(file: &OpenFile, data: &[u8], mirror: Mirror) -> PResult<usize> {
    let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
    load_pos(&mut pos, mirror);
    let append = file.status.load(Ordering::Relaxed) & libc::O_APPEND != 0;
    let n = pwrite(file, data, *pos)?;
    *pos = if append {
        file.pool.store.fstat(file.fh()?).map_err(err)?.size
    } else {
        *pos + n as u64
    };
    store_pos(*pos, mirror);
    Ok(n)
}

/// pwrite(2). (Linux writes O_APPEND files at the end even through pwrite; so does this.)
pub fn pwrite(file: &OpenFile, data: &[u8], off: u64) -> PResult<usize> {
    file.check_writable()?;
    let fh = file.fh()?;
    if off
        .checked_add(data.len() as u64)
        .is_none_or(|end| end > i64::MAX as u64)
    {
        return Err(libc::EFBIG);
    }
    let data = &data[..data.len().min(IO_BYTES_MAX)];
    if data.is_empty() {
        return Ok(0);
    }
    file.pool.store.write(fh, off, data).map_err(err)
}

/// lseek(2): SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE.
pub fn lseek(file: &OpenFile, off: i64, whence: i32, mirror: Mirror) -> PResult<u64> {
    let mut pos = file.pos.lock().unwrap_or_else(|p| p.into_inner());
    load_pos(&mut pos, mirror);
    let size = || -> PResult<i64> {
        match file.target {
            Target::File(fh) => Ok(file.pool.store.fstat(fh).map_err(err)?.size as i64),
            Target::Dir => Ok(0),
        }
    };
    let new = match whence {
        libc::SEEK_SET => Some(off),
        libc::SEEK_CUR => (*pos as i64).checked_add(off),
        libc::SEEK_END => size()?.checked_add(off),
        libc::SEEK_DATA => match size()? {
            s if off < 0 || off >= s => return Err(libc::ENXIO),
            _ => Some(off),
        },
        libc::SEEK_HOLE => match size()? {
            s if off < 0 || off >= s => return Err(libc::ENXIO),
            s => Some(s),
        },
        _ => return Err(libc::EINVAL),
    };
    match new {
        Some(n) if n >= 0 => {
            *pos = n as u64;
            store_pos(*pos, mirror);
            Ok(n as u64)
        }
        Some(_) => Err(libc::EINVAL),
        None => Err(libc::EOVERFLOW),
    }
}

/// ftruncate(2).
pub fn ftruncate(file: &OpenFile, len: i64) -> PResult<()> {
    if len < 0 {
        return Err(libc::EINVAL);
    }
    file.check_writable().map_err(|_| libc::EINVAL)?;
    file.pool.store.set_len(file.fh()?, len as u64).map_err(err)
}

/// fsync(2): for an O_ATOMIC file, commits its writes since the last fsync atomically.
/// A directory is always durable already (namespace calls are durable when they return).
pub fn fsync(file: &OpenFile, datasync: bool) -> PResult<()> {
    match file.target {
        Target::File(fh) => file.pool.store.fsync(fh, datasync).map_err(err),
        Target::Dir => Ok(()),
    }
}

/// Attributes of an open file.
pub fn fstat(file: &OpenFile) -> PResult<Metadata> {
    match file.target {
        Target::File(fh) => file.pool.store.fstat(fh).map_err(err),
        Target::Dir => file.pool.store.getattr(file.ino).map_err(err),
    }
}

/// fallocate(2) with Linux `mode` bits: allocate, punch or zero a range, atomically.
pub fn fallocate(file: &OpenFile, mode: i32, off: i64, len: i64) -> PResult<()> {
    if off < 0 || len <= 0 {
        return Err(libc::EINVAL);
    }
    let fh = match file.target {
        Target::File(fh) => fh,
        Target::Dir => return Err(libc::EISDIR),
    };
    file.check_writable()?;
    let op = store::Fallocate::from_linux_mode(mode).map_err(err)?;
    file.pool
        .store
        .fallocate(fh, op, off as u64, len as u64)
        .map_err(err)
}

/// Switch O_ATOMIC mode (switching off commits pending writes).
pub fn set_atomic(file: &OpenFile, on: bool) -> PResult<()> {
    file.pool.store.set_atomic(file.fh()?, on).map_err(err)?;
    file.atomic.store(on, Ordering::Relaxed);
    Ok(())
}

/// The store handles of `files`, all of one pool (`EXDEV` otherwise, `EISDIR` for a
/// directory, `EINVAL` for none).
pub fn same_pool_handles(files: &[Arc<OpenFile>]) -> PResult<(Arc<Pool>, Vec<store::Fh>)> {
    let first = files.first().ok_or(libc::EINVAL)?;
    let mut fhs = Vec::with_capacity(files.len());
    for file in files {
        if file.pool.id != first.pool.id {
            return Err(libc::EXDEV);
        }
        fhs.push(file.fh()?);
    }
    Ok((first.pool.clone(), fhs))
}

/// syncv (ACCFS): commit the pending O_ATOMIC writes of several files as one unit.
pub fn syncv(files: &[Arc<OpenFile>]) -> PResult<()> {
    if files.is_empty() {
        return Ok(());
    }
    let (pool, fhs) = same_pool_handles(files)?;
    pool.store.syncv(&fhs).map_err(err)
}

/// abortv (ACCFS): drop the pending O_ATOMIC writes of several files.
pub fn abortv(files: &[Arc<OpenFile>]) -> PResult<()> {
    if files.is_empty() {
        return Ok(());
    }
    let (pool, fhs) = same_pool_handles(files)?;
    pool.store.abortv(&fhs).map_err(err)
}

/// stat(2) of a path inside the pool (symbolic links followed).
pub fn stat(pool: &Pool, path: &[u8]) -> PResult<Metadata> {
    store::path::resolve_follow(&*pool.store, path).map_err(err)
}

/// lstat(2): a symbolic link in the last component is not followed.
pub fn lstat(pool: &Pool, path: &[u8]) -> PResult<Metadata> {
    store::resolve(&*pool.store, path).map_err(err)
}

/// mkdir(2): the directory gets `mode` (permission and sticky bits) less the process umask.
pub fn mkdir(pool: &Pool, path: &[u8], mode: u32) -> PResult<()> {
    let (parent, name) = store::resolve_parent(&*pool.store, path).map_err(|e| match e {
        Error::InvalidArgument(_) => libc::EEXIST,
        e => err(e),
    })?;
    pool.store
        .mkdir(parent, &name, crate::umask::apply(mode & 0o1777), None)
        .map(|_| ())
        .map_err(err)
}

/// rmdir(2).
pub fn rmdir(pool: &Pool, path: &[u8]) -> PResult<()> {
    let (parent, name) = store::resolve_parent(&*pool.store, path).map_err(|e| match e {
        Error::InvalidArgument(_) => libc::EBUSY,
        e => err(e),
    })?;
    pool.store.rmdir(parent, &name, None).map_err(err)
}

/// unlink(2).
pub fn unlink(pool: &Pool, path: &[u8]) -> PResult<()> {
    let (parent, name) = store::resolve_parent(&*pool.store, path).map_err(|e| match e {
        Error::InvalidArgument(_) => libc::EISDIR,
        e => err(e),
    })?;
    pool.store.unlink(parent, &name, None).map_err(err)
}

/// rename(2), atomic, replacing the target.
pub fn rename(pool: &Pool, from: &[u8], to: &[u8]) -> PResult<()> {
    let busy = |e: Error| match e {
        Error::InvalidArgument(_) => libc::EBUSY,
        e => err(e),
    };
    let (parent, name) = store::resolve_parent(&*pool.store, from).map_err(busy)?;
    let (new_parent, new_name) = store::resolve_parent(&*pool.store, to).map_err(busy)?;
    pool.store
        .rename(parent, &name, new_parent, &new_name, None)
        .map_err(err)
}

/// access(2): existence, and the permission bits of the owner (the store has one user).
pub fn access(pool: &Pool, path: &[u8], mode: i32) -> PResult<()> {
    let meta = stat(pool, path)?;
    let need = ((mode & (libc::R_OK | libc::W_OK | libc::X_OK)) as u32) << 6;
    if need & !meta.perm & 0o700 != 0 {
        return Err(libc::EACCES);
    }
    Ok(())
}

/// The entries of a directory ("." and ".." excluded).
pub fn list_dir(pool: &Pool, path: &[u8]) -> PResult<Vec<DirEntry>> {
    let meta = stat(pool, path)?;
    if !meta.is_dir() {
        return Err(libc::ENOTDIR);
    }
    pool.store.read_dir(meta.ino).map_err(err)
}

/// `struct stat` of a store inode.
pub fn to_stat(meta: &Metadata) -> libc::stat {
    // SAFETY: libc::stat is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_dev = 0xa70f;
    st.st_ino = meta.ino;
    st.st_mode = meta.perm | meta.kind.mode_bits();
    st.st_rdev = meta.rdev;
    st.st_nlink = meta.nlink as _;
    st.st_uid = meta.uid;
    st.st_gid = meta.gid;
    st.st_size = meta.size as i64;
    st.st_blksize = 4096;
    st.st_blocks = meta.allocated.div_ceil(512) as i64;
    let split = |ns: u64| ((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as i64);
    (st.st_atime, st.st_atime_nsec) = split(meta.atime);
    (st.st_mtime, st.st_mtime_nsec) = split(meta.mtime);
    (st.st_ctime, st.st_ctime_nsec) = split(meta.ctime);
    st
}

/// The `d_type` of an entry kind.
pub fn d_type(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => libc::DT_REG,
        FileKind::Dir => libc::DT_DIR,
        FileKind::Symlink => libc::DT_LNK,
        FileKind::Fifo => libc::DT_FIFO,
        FileKind::Socket => libc::DT_SOCK,
        FileKind::CharDevice => libc::DT_CHR,
        FileKind::BlockDevice => libc::DT_BLK,
    }
}

/// Keep the `Store` trait in scope for method calls on `dyn Store`.
#[allow(dead_code)]
fn _uses(_: &dyn Store) {}

/// fcntl record locks on a pool file (F_SETLK, F_SETLKW, F_GETLK and their OFD forms), kept
/// by the store's server for every process using the store (remote::locks). `owner` is the
/// lock owner: the process id for POSIX locks, the description for OFD locks. `fl` is read
/// (and, for `F_GETLK`, written) as fcntl(2) does.
pub fn lock(
    file: &OpenFile,
    owner: u64,
    cmd: i32,
    fl: &mut libc::flock,
    mirror: Mirror,
) -> PResult<()> {
    use remote::locks::LockKind;
    let kind = match i32::from(fl.l_type) {
        libc::F_RDLCK => LockKind::Read,
        libc::F_WRLCK => LockKind::Write,
        libc::F_UNLCK => LockKind::Unlock,
        _ => return Err(libc::EINVAL),
    };
    let range = lock_range(file, fl, mirror)?;
    let store = &*file.pool.store;
    let socket = remote::socket_for(&file.pool.path);
    match cmd {
        libc::F_GETLK | libc::F_OFD_GETLK => {
            if kind == LockKind::Unlock {
                return Err(libc::EINVAL);
            }
            let found = remote::file_lock_test(store, &socket, file.ino, owner, kind, range)
                .map_err(err)?;
            match found {
                None => fl.l_type = libc::F_UNLCK as i16,
                Some(c) => {
                    fl.l_type = match c.kind {
                        LockKind::Write => libc::F_WRLCK,
                        _ => libc::F_RDLCK,
                    } as i16;
                    fl.l_whence = libc::SEEK_SET as i16;
                    fl.l_start = i64::try_from(c.range.start).unwrap_or(i64::MAX);
                    fl.l_len = i64::try_from(c.range.len).unwrap_or(0);
                    fl.l_pid = if cmd == libc::F_OFD_GETLK {
                        -1
                    } else {
                        c.pid as i32
                    };
                }
            }
            Ok(())
        }
        _ => {
            LOCKS_TAKEN.store(true, Ordering::Relaxed);
            match kind {
                LockKind::Read => file.check_readable()?,
                LockKind::Write => file.check_writable()?,
                LockKind::Unlock => {}
            }
            let wait = matches!(cmd, libc::F_SETLKW | libc::F_OFD_SETLKW);
            let mut pause = std::time::Duration::from_micros(500);
            loop {
                let conflict =
                    remote::file_lock(store, &socket, file.ino, owner, kind, range).map_err(err)?;
                match conflict {
                    None => return Ok(()),
                    Some(_) if !wait => return Err(libc::EAGAIN),
                    Some(_) => {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(std::time::Duration::from_millis(20));
                    }
                }
            }
        }
    }
}

/// Whether this process ever set a lock (else closing a descriptor has none to drop, and
/// costs no call to the server).
static LOCKS_TAKEN: AtomicBool = AtomicBool::new(false);

/// Drop every lock `owner` holds on `file`'s inode (a POSIX lock owner closed a descriptor).
pub fn lock_release(file: &OpenFile, owner: u64) {
    if !LOCKS_TAKEN.load(Ordering::Relaxed) {
        return;
    }
    let socket = remote::socket_for(&file.pool.path);
    // A server that is gone took its table with it; nothing is left to release.
    let _ = remote::file_lock_release(&*file.pool.store, &socket, file.ino, owner);
}

/// The absolute byte range of `fl` (l_whence, l_start, l_len as fcntl(2) reads them).
fn lock_range(
    file: &OpenFile,
    fl: &libc::flock,
    mirror: Mirror,
) -> PResult<remote::locks::LockRange> {
    let base: i64 = match i32::from(fl.l_whence) {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => {
            let mut pos = *file.pos.lock().unwrap_or_else(|p| p.into_inner());
            load_pos(&mut pos, mirror);
            i64::try_from(pos).map_err(|_| libc::EOVERFLOW)?
        }
        libc::SEEK_END => match file.target {
            Target::File(fh) => i64::try_from(file.pool.store.fstat(fh).map_err(err)?.size)
                .map_err(|_| libc::EOVERFLOW)?,
            Target::Dir => 0,
        },
        _ => return Err(libc::EINVAL),
    };
    let start = base.checked_add(fl.l_start).ok_or(libc::EOVERFLOW)?;
    let (start, len) = if fl.l_len < 0 {
        (
            start.checked_add(fl.l_len).ok_or(libc::EINVAL)?,
            fl.l_len.unsigned_abs(),
        )
    } else {
        (start, fl.l_len as u64)
    };
    if start < 0 {
        return Err(libc::EINVAL);
    }
    Ok(remote::locks::LockRange {
        start: start as u64,
        len,
    })
}
