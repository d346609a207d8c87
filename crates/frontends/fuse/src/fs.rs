//! The FUSE request handlers: each maps to one or a few Store calls.

use crate::ioctl::*;
use crate::nodes::Nodes;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, KernelConfig, Notifier, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Error, Fh, FileKind, Ino, Metadata, SetAttr, Store, TxId};

/// Largest write the kernel sends in one request (and so the unit of atomicity of a plain
/// `write(2)` larger than it: each piece is atomic on its own).
pub const MAX_WRITE: u32 = 1 << 20;

#[derive(Debug)]
struct OpenFile {
    ino: Ino,
    atomic: bool,
    tx: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<u64, OpenFile>,
    /// Open transactions: the handles bound to each.
    txs: HashMap<u64, Vec<u64>>,
    /// Inodes whose new handles open in atomic mode (the xattr; not persistent).
    atomic_inodes: HashSet<Ino>,
    /// Directory listings taken at opendir, by directory handle.
    dirs: HashMap<u64, Vec<(Vec<u8>, Ino, FileKind)>>,
    next_dir: u64,
}

/// A FUSE file system serving one [`Store`].
pub struct AtomFuse {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) ttl: Duration,
    notifier: Arc<OnceLock<Notifier>>,
    /// Lock order: `nodes` before `state`.
    pub(crate) nodes: Mutex<Nodes>,
    state: Mutex<State>,
}

pub(crate) fn errno(e: &Error) -> Errno {
    Errno::from_i32(e.errno())
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn time_or_now(t: TimeOrNow) -> u64 {
    match t {
        TimeOrNow::SpecificTime(t) => ns(t),
        TimeOrNow::Now => store::now_ns(),
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

/// A device number as FUSE's attribute carries it (the kernel's `new_encode_dev` layout:
/// minor's low 8 bits, major's 12 bits, minor's high 12 bits); a device number that does not
/// fit is 0.
fn fuse_rdev(rdev: u64) -> u32 {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    if major > 0xfff || minor > 0xf_ffff {
        return 0;
    }
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

/// Decode a little-endian integer argument of an ioctl.
fn arg_u64(data: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(data.get(..8)?.try_into().ok()?))
}

fn arg_i32(data: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(data.get(..4)?.try_into().ok()?))
}

impl AtomFuse {
    /// A file system over `store`; the kernel may cache attributes and names for `ttl`.
    pub fn new(store: Arc<dyn Store>, ttl: Duration) -> Self {
        AtomFuse {
            store,
            ttl,
            notifier: Arc::new(OnceLock::new()),
            nodes: Mutex::new(Nodes::default()),
            state: Mutex::new(State::default()),
        }
    }

    /// Where the mount code leaves the kernel notifier (used to drop cached pages of files
    /// whose writes were undone).
    pub(crate) fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    pub(crate) fn attr(&self, m: &Metadata) -> FileAttr {
        FileAttr {
            ino: INodeNo(m.ino),
            size: m.size,
            blocks: m.allocated.div_ceil(512),
            atime: time(m.atime),
            mtime: time(m.mtime),
            ctime: time(m.ctime),
            crtime: time(m.ctime),
            kind: file_type(m.kind),
            perm: (m.perm & 0o7777) as u16,
            nlink: m.nlink,
            uid: m.uid,
            gid: m.gid,
            // FUSE carries the 32-bit old_encode_dev form of the device number.
            rdev: fuse_rdev(m.rdev),
            blksize: 4096,
            flags: 0,
        }
    }

    /// Forget the kernel's cached pages and attributes of `ino` (after an abort).
    fn invalidate(&self, ino: Ino) {
        if let Some(n) = self.notifier.get() {
            // ENOENT just means the kernel holds nothing for it.
            let _ = n.inval_inode(INodeNo(ino), 0, -1);
        }
    }

    /// Give a new inode to the caller's uid/gid, as a local file system does.
    pub(crate) fn own(&self, req: &Request, meta: Metadata) -> Result<Metadata, Error> {
        if meta.uid == req.uid() && meta.gid == req.gid() {
            return Ok(meta);
        }
        let attr = SetAttr {
            uid: Some(req.uid()),
            gid: Some(req.gid()),
            ..SetAttr::default()
        };
        self.store.setattr(meta.ino, &attr, None)
    }

    pub(crate) fn open_handle(&self, ino: Ino, flags: i32) -> Result<(u64, bool), Error> {
        let acc = flags & libc::O_ACCMODE;
        let atomic = self.state.lock().atomic_inodes.contains(&ino);
        let oflags = store::OpenFlags {
            read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            append: flags & libc::O_APPEND != 0,
            atomic,
        };
        let fh = self.store.open(ino, oflags)?;
        self.state.lock().files.insert(
            fh.0,
            OpenFile {
                ino,
                atomic,
                tx: None,
            },
        );
        Ok((fh.0, atomic))
    }

    /// Abort a transaction and drop the kernel's view of its files.
    fn abort_tx(&self, tx: u64) -> Result<(), Error> {
        let result = self.store.tx_abort(TxId(tx));
        let inodes: Vec<Ino> = {
            let mut st = self.state.lock();
            let fhs = st.txs.remove(&tx).unwrap_or_default();
            fhs.iter()
                .filter_map(|fh| {
                    let f = st.files.get_mut(fh)?;
                    f.tx = None;
                    Some(f.ino)
                })
                .collect()
        };
        for ino in inodes {
            self.invalidate(ino);
        }
        result
    }

    fn commit_tx(&self, tx: u64) -> Result<(), Error> {
        self.store.tx_commit(TxId(tx))?;
        let mut st = self.state.lock();
        for fh in st.txs.remove(&tx).unwrap_or_default() {
            if let Some(f) = st.files.get_mut(&fh) {
                f.tx = None;
            }
        }
        Ok(())
    }

    fn ioctl_op(&self, fh: u64, cmd: u32, data: &[u8]) -> Result<Vec<u8>, Error> {
        let bad = || Error::InvalidArgument(format!("ioctl {cmd:#x}: argument missing"));
        match cmd {
            IOC_TX_BEGIN => {
                let tx = self.store.tx_begin(&[Fh(fh)])?;
                let mut st = self.state.lock();
                st.txs.insert(tx.0, vec![fh]);
                if let Some(f) = st.files.get_mut(&fh) {
                    f.tx = Some(tx.0);
                }
                Ok(tx.0.to_ne_bytes().to_vec())
            }
            IOC_TX_ADD => {
                let tx = arg_u64(data).ok_or_else(bad)?;
                self.store.tx_add(TxId(tx), Fh(fh))?;
                let mut st = self.state.lock();
                st.txs.entry(tx).or_default().push(fh);
                if let Some(f) = st.files.get_mut(&fh) {
                    f.tx = Some(tx);
                }
                Ok(Vec::new())
            }
            IOC_TX_COMMIT => self
                .commit_tx(arg_u64(data).ok_or_else(bad)?)
                .map(|_| Vec::new()),
            IOC_TX_ABORT => self
                .abort_tx(arg_u64(data).ok_or_else(bad)?)
                .map(|_| Vec::new()),
            IOC_SET_ATOMIC => {
                let on = arg_i32(data).ok_or_else(bad)? != 0;
                self.store.set_atomic(Fh(fh), on)?;
                if let Some(f) = self.state.lock().files.get_mut(&fh) {
                    f.atomic = on;
                }
                Ok(Vec::new())
            }
            IOC_ATOMIC_ABORT => {
                self.store.abortv(&[Fh(fh)])?;
                let ino = self.state.lock().files.get(&fh).map(|f| f.ino);
                if let Some(ino) = ino {
                    self.invalidate(ino);
                }
                Ok(Vec::new())
            }
            _ => Err(Error::Unsupported(format!("ioctl {cmd:#x}"))),
        }
    }

    fn set_size(&self, ino: Ino, fh: Option<FileHandle>, size: u64) -> Result<(), Error> {
        if let Some(fh) = fh {
            if self.state.lock().files.contains_key(&fh.0) {
                return self.store.set_len(Fh(fh.0), size);
            }
        }
        let flags = store::OpenFlags {
            write: true,
            ..Default::default()
        };
        let tmp = self.store.open(ino, flags)?;
        let result = self.store.set_len(tmp, size);
        self.store.release(tmp)?;
        result
    }

    fn exchange(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<(), Error> {
        self.store.lookup(parent, name)?;
        self.store.lookup(new_parent, new_name)?;
        // A name no other exchange uses at the same time: the coarse file clock repeats
        // within a tick, so a process-wide counter makes it unique.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = format!(
            ".atomfs-exchange-{}-{}-{seq}",
            std::process::id(),
            store::now_ns()
        )
        .into_bytes();
        let tx = self.store.tx_begin(&[])?;
        let steps = self
            .store
            .rename(parent, name, parent, &tmp, Some(tx))
            .and_then(|_| {
                self.store
                    .rename(new_parent, new_name, parent, name, Some(tx))
            })
            .and_then(|_| {
                self.store
                    .rename(parent, &tmp, new_parent, new_name, Some(tx))
            });
        match steps {
            Ok(()) => self.store.tx_commit(tx),
            Err(e) => {
                let _ = self.store.tx_abort(tx);
                Err(e)
            }
        }
    }
}

impl fuser::Filesystem for AtomFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Both setters clamp to what the kernel and fuser allow; the nearest value is fine.
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(MAX_WRITE) {
            let _ = config.set_max_readahead(nearest);
        }
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DO_READDIRPLUS);
        Ok(())
    }

    fn destroy(&mut self) {
        let st = self.state.get_mut();
        let txs: Vec<u64> = st.txs.keys().copied().collect();
        let files: Vec<u64> = st.files.keys().copied().collect();
        for tx in txs {
            let _ = self.store.tx_abort(TxId(tx));
        }
        for fh in files {
            let _ = self.store.release(Fh(fh));
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.lookup_entry(parent.0, name, reply);
    }

    /// Also serves BATCH_FORGET: fuser's default `batch_forget` calls it for each node (fuser
    /// 0.18 does not export the `ForgetOne` type an override would name).
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.forget_lookups(std::iter::once((ino.0, nlookup)));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let by_handle = fh.filter(|fh| self.state.lock().files.contains_key(&fh.0));
        let result = match by_handle {
            Some(fh) => self.store.fstat(Fh(fh.0)),
            None => match self.check_node(ino.0) {
                Ok(()) => self.store.getattr(ino.0),
                Err(e) => return reply.error(e),
            },
        };
        match result {
            Ok(m) => reply.attr(&self.ttl, &self.attr(&m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if fh.is_none() {
            if let Err(e) = self.check_node(ino.0) {
                return reply.error(e);
            }
        }
        let result = (|| {
            if let Some(size) = size {
                self.set_size(ino.0, fh, size)?;
            }
            let attr = SetAttr {
                perm: mode.map(|m| m & 0o7777),
                uid,
                gid,
                atime: atime.map(time_or_now),
                mtime: mtime.map(time_or_now),
            };
            if attr != SetAttr::default() {
                self.store.setattr(ino.0, &attr, None)?;
            }
            match fh.filter(|fh| self.state.lock().files.contains_key(&fh.0)) {
                Some(fh) => self.store.fstat(Fh(fh.0)),
                None => self.store.getattr(ino.0),
            }
        })();
        match result {
            Ok(m) => reply.attr(&self.ttl, &self.attr(&m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.store.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = mode & !umask & 0o7777;
        let make = || self.store.mkdir(parent.0, name.as_bytes(), perm, None);
        self.new_entry(req, &make, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove_entry(parent.0, name, FileKind::File, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove_entry(parent.0, name, FileKind::Dir, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let make = || {
            self.store.symlink(
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                None,
            )
        };
        self.new_entry(req, &make, reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (from, to) = (name.as_bytes(), newname.as_bytes());
        let rename = || {
            if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                self.exchange(parent.0, from, newparent.0, to)
            } else if flags.contains(RenameFlags::RENAME_NOREPLACE)
                && self.store.lookup(newparent.0, to).is_ok()
            {
                Err(Error::Exists(String::from_utf8_lossy(to).into_owned()))
            } else if flags.contains(RenameFlags::RENAME_WHITEOUT) {
                Err(Error::InvalidArgument("RENAME_WHITEOUT".into()))
            } else {
                self.store.rename(parent.0, from, newparent.0, to, None)
            }
        };
        self.rename_entry(newparent.0, newname, &rename, reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.link_entry(ino.0, newparent.0, newname, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if let Err(e) = self.check_node(ino.0) {
            return reply.error(e);
        }
        // A read-only descriptor has nothing for FLUSH to commit: its close() sends none.
        let open_flags = if flags.0 & libc::O_ACCMODE == libc::O_RDONLY {
            FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        };
        match self.open_handle(ino.0, flags.0) {
            Ok((fh, _)) => reply.opened(FileHandle(fh), open_flags),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let mut buf = vec![0u8; size as usize];
        let mut done = 0;
        while done < buf.len() {
            match self
                .store
                .read(Fh(fh.0), offset + done as u64, &mut buf[done..])
            {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => return reply.error(errno(&e)),
            }
        }
        reply.data(&buf[..done]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: fuser::WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.store.write(Fh(fh.0), offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Called at every close(): an atomic-mode descriptor commits its pending writes here,
    /// so that close() reports a failed commit.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        let atomic = self
            .state
            .lock()
            .files
            .get(&fh.0)
            .is_some_and(|f| f.atomic && f.tx.is_none());
        if atomic {
            if let Err(e) = self.store.fsync(Fh(fh.0), false) {
                return reply.error(errno(&e));
            }
        }
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let bound = self.state.lock().files.get(&fh.0).and_then(|f| f.tx);
        if let Some(tx) = bound {
            // Closing a descriptor of an open transaction aborts it, as the death of the
            // program would.
            let _ = self.abort_tx(tx);
        }
        self.state.lock().files.remove(&fh.0);
        match self.store.release(Fh(fh.0)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.store.fsync(Fh(fh.0), datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if let Err(e) = self.check_node(ino.0) {
            return reply.error(e);
        }
        let listing = self.store.getattr(ino.0).and_then(|dir| {
            let parent = self
                .store
                .lookup(ino.0, b"..")
                .map(|m| m.ino)
                .unwrap_or(dir.ino);
            let mut out = vec![
                (b".".to_vec(), dir.ino, FileKind::Dir),
                (b"..".to_vec(), parent, FileKind::Dir),
            ];
            out.extend(
                self.store
                    .read_dir(ino.0)?
                    .into_iter()
                    .map(|e| (e.name, e.ino, e.kind)),
            );
            Ok(out)
        });
        match listing {
            Ok(list) => {
                let mut st = self.state.lock();
                st.next_dir += 1;
                let id = st.next_dir;
                st.dirs.insert(id, list);
                reply.opened(FileHandle(id), FopenFlags::empty());
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let st = self.state.lock();
        let Some(list) = st.dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (name, ino, kind)) in list.iter().enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo(*ino),
                i as u64 + 1,
                file_type(*kind),
                OsStr::from_bytes(name),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let list = match self.state.lock().dirs.get(&fh.0) {
            Some(list) => list
                .iter()
                .skip(offset as usize)
                .cloned()
                .collect::<Vec<_>>(),
            None => return reply.error(Errno::EBADF),
        };
        self.readdirplus_entries(ino.0, &list, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.state.lock().dirs.remove(&fh.0);
        reply.ok();
    }

    /// Namespace operations are durable when they return: nothing to do.
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.store.statfs() {
            Ok(s) => reply.statfs(
                s.blocks_total,
                s.blocks_free,
                s.blocks_free,
                s.inodes_total,
                s.inodes_free,
                s.block_size as u32,
                s.name_max as u32,
                s.block_size as u32,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if name.as_bytes() != XATTR_ATOMIC.as_bytes() {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let on = match value {
            b"1" | b"1\n" => true,
            b"0" | b"0\n" => false,
            _ => return reply.error(Errno::EINVAL),
        };
        let mut st = self.state.lock();
        if on {
            st.atomic_inodes.insert(ino.0);
        } else {
            st.atomic_inodes.remove(&ino.0);
        }
        reply.ok();
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if name.as_bytes() != XATTR_ATOMIC.as_bytes() {
            return reply.error(Errno::from_i32(libc::ENODATA));
        }
        let value: &[u8] = if self.state.lock().atomic_inodes.contains(&ino.0) {
            b"1"
        } else {
            b"0"
        };
        if size == 0 {
            reply.size(value.len() as u32);
        } else if (size as usize) < value.len() {
            reply.error(Errno::from_i32(libc::ERANGE));
        } else {
            reply.data(value);
        }
    }

    /// The atomic-mode attribute is virtual: not listed, so that copies do not carry it.
    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(0);
        } else {
            reply.data(&[]);
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if name.as_bytes() != XATTR_ATOMIC.as_bytes() {
            return reply.error(Errno::from_i32(libc::ENODATA));
        }
        self.state.lock().atomic_inodes.remove(&ino.0);
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = mode & !umask & 0o7777;
        let make = || self.store.create(parent.0, name.as_bytes(), perm, None);
        self.create_entry(req, &make, flags, reply);
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        match self.ioctl_op(fh.0, cmd, in_data) {
            Ok(out) => reply.ioctl(0, &out),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
