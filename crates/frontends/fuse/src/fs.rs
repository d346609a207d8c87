//! The FUSE request handlers: each maps to one or a few Store calls.

use crate::ioctl::*;
use crate::nodes::Nodes;
use crate::txns::{thread_group, Binding, Touched, Txns};
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
use store::{Error, Fallocate, Fh, FileKind, Ino, Metadata, RenameMode, SetAttr, Store, TxId};

/// Largest write the kernel sends in one request (and so the unit of atomicity of a plain
/// `write(2)` larger than it: each piece is atomic on its own).
pub const MAX_WRITE: u32 = 1 << 20;

#[derive(Debug)]
pub(crate) struct OpenFile {
    ino: Ino,
    atomic: bool,
    tx: Option<(u64, Binding)>,
}

/// Directory handles are numbered from here, apart from the store's file handles, so that an
/// ioctl names one or the other unambiguously.
const DIR_HANDLE_FIRST: u64 = 1 << 62;

#[derive(Debug, Default)]
pub(crate) struct State {
    files: HashMap<u64, OpenFile>,
    /// Open transactions: their handles, and the process whose namespace calls join them.
    pub(crate) txns: Txns,
    /// Inodes whose new handles open in atomic mode, for a store that keeps no extended
    /// attributes (elsewhere `user.atomfs.atomic` is a stored attribute).
    pub(crate) atomic_inodes: HashSet<Ino>,
    /// Directory listings taken at opendir, by directory handle.
    dirs: HashMap<u64, Vec<(Vec<u8>, Ino, FileKind)>>,
    /// Transactions begun on a directory handle (namespace only): aborted when it closes.
    dir_txs: HashMap<u64, u64>,
    next_dir: u64,
}

/// Who checks POSIX ACLs ([`crate::acl`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AclMode {
    /// The ACL attributes are stored and served; permissions come from the mode bits (a
    /// store without extended attributes, or a kernel without FUSE_POSIX_ACL).
    Stored,
    /// The kernel enforces them (FUSE_POSIX_ACL), the server keeps mode and ACL in step.
    Enforced,
}

/// A FUSE file system serving one [`Store`].
pub struct AtomFuse {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) ttl: Duration,
    acl_mode: AclMode,
    notifier: Arc<OnceLock<Notifier>>,
    /// Lock order: `nodes` before `state`.
    pub(crate) nodes: Mutex<Nodes>,
    pub(crate) state: Mutex<State>,
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

/// The device number of a FUSE mknod request (the kernel's `new_encode_dev` layout).
fn dev_from_fuse(rdev: u32) -> u64 {
    let major = (rdev & 0xfff00) >> 8;
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xfff00);
    libc::makedev(major, minor)
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
            acl_mode: AclMode::Stored,
            notifier: Arc::new(OnceLock::new()),
            nodes: Mutex::new(Nodes::default()),
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the kernel enforces POSIX ACLs on this mount.
    pub(crate) fn acls_enforced(&self) -> bool {
        self.acl_mode == AclMode::Enforced
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

    /// Forget the kernel's cached entry `name` of `parent` (after an abort).
    fn invalidate_entry(&self, parent: Ino, name: &[u8]) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_entry(INodeNo(parent), OsStr::from_bytes(name));
            let _ = n.inval_inode(INodeNo(parent), 0, -1);
        }
    }

    /// The transaction the caller's namespace calls join: the one its process began on the
    /// mount, if any ([`crate::txns`]).
    pub(crate) fn joined(&self, req: &Request) -> Option<TxId> {
        self.state.lock().txns.of_thread(req.pid()).map(TxId)
    }

    /// A namespace call in `tx` changed `what`.
    pub(crate) fn touched(&self, tx: Option<TxId>, what: Touched) {
        if let Some(tx) = tx {
            self.state.lock().txns.touch(tx.0, what);
        }
    }

    /// `tx` created `ino`, named `name` in `parent`.
    pub(crate) fn tx_created(&self, tx: Option<TxId>, parent: Ino, name: &[u8], ino: Ino) {
        if let Some(tx) = tx {
            let mut st = self.state.lock();
            st.txns.created(tx.0, ino);
            st.txns.touch(tx.0, Touched::Entry(parent, name.to_vec()));
        }
    }

    /// Give a new inode to the caller's uid/gid, as a local file system does.
    pub(crate) fn own(
        &self,
        req: &Request,
        meta: Metadata,
        tx: Option<TxId>,
    ) -> Result<Metadata, Error> {
        if meta.uid == req.uid() && meta.gid == req.gid() {
            return Ok(meta);
        }
        let attr = SetAttr {
            uid: Some(req.uid()),
            gid: Some(req.gid()),
            ..SetAttr::default()
        };
        self.store.setattr(meta.ino, &attr, tx)
    }

    /// Open `ino` for the kernel. A file created by the transaction `joined` (the caller's)
    /// is bound to it, so that its writes join it too.
    pub(crate) fn open_handle(
        &self,
        ino: Ino,
        flags: i32,
        joined: Option<TxId>,
    ) -> Result<(u64, bool), Error> {
        let acc = flags & libc::O_ACCMODE;
        let atomic = self.atomic_mode(ino);
        let oflags = store::OpenFlags {
            read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            append: flags & libc::O_APPEND != 0,
            atomic,
        };
        let fh = self.store.open(ino, oflags)?;
        let created_by = joined.filter(|tx| self.state.lock().txns.is_created(tx.0, ino));
        if let Some(tx) = created_by {
            if let Err(e) = self.store.tx_add(tx, fh) {
                let _ = self.store.release(fh);
                return Err(e);
            }
        }
        let mut st = self.state.lock();
        if let Some(tx) = created_by {
            st.txns.bind(tx.0, fh.0);
        }
        st.files.insert(
            fh.0,
            OpenFile {
                ino,
                atomic,
                tx: created_by.map(|tx| (tx.0, Binding::Created)),
            },
        );
        Ok((fh.0, atomic))
    }

    /// A transaction ended: unbind its handles; returns the inodes of its files and what
    /// it touched.
    fn tx_ended(&self, tx: u64) -> (Vec<Ino>, crate::txns::OpenTx) {
        let mut st = self.state.lock();
        let ended = st.txns.end(tx);
        let mut inodes = Vec::new();
        for fh in &ended.handles {
            st.dir_txs.remove(fh);
            if let Some(f) = st.files.get_mut(fh) {
                f.tx = None;
                inodes.push(f.ino);
            }
        }
        (inodes, ended)
    }

    /// Abort a transaction and drop the kernel's view of its files and names.
    fn abort_tx(&self, tx: u64) -> Result<(), Error> {
        let result = self.store.tx_abort(TxId(tx));
        let (inodes, ended) = self.tx_ended(tx);
        {
            // The files it created are gone: their numbers may name other files next.
            let mut nodes = self.nodes.lock();
            for ino in &ended.created {
                if let Err(Error::NotFound(_)) = self.store.getattr(*ino) {
                    nodes.removed(*ino);
                }
            }
        }
        for ino in inodes {
            self.invalidate(ino);
        }
        for t in ended.touched {
            match t {
                Touched::Inode(ino) => self.invalidate(ino),
                Touched::Entry(parent, name) => self.invalidate_entry(parent, &name),
            }
        }
        result
    }

    fn commit_tx(&self, tx: u64) -> Result<(), Error> {
        self.store.tx_commit(TxId(tx))?;
        self.tx_ended(tx);
        Ok(())
    }

    /// What an ioctl's handle is: one of the store's file handles (of `ino`), or a
    /// directory handle.
    fn ioctl_target(&self, ino: Ino, fh: u64) -> Result<bool, Error> {
        let st = self.state.lock();
        if st.files.get(&fh).is_some_and(|f| f.ino == ino) {
            Ok(false)
        } else if st.dirs.contains_key(&fh) {
            Ok(true)
        } else {
            Err(Error::BadHandle(fh))
        }
    }

    fn ioctl_op(
        &self,
        req: &Request,
        ino: Ino,
        fh: u64,
        cmd: u32,
        data: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let bad = || Error::InvalidArgument(format!("ioctl {cmd:#x}: argument missing"));
        let on_dir = self.ioctl_target(ino, fh)?;
        let file_only =
            || Error::InvalidArgument(format!("ioctl {cmd:#x} needs a file's descriptor"));
        match cmd {
            IOC_TX_BEGIN => {
                // On a directory: a transaction of namespace calls only.
                let files: &[Fh] = if on_dir { &[] } else { &[Fh(fh)] };
                let tx = self.store.tx_begin(files)?;
                let process = thread_group(req.pid()).unwrap_or(req.pid());
                let mut st = self.state.lock();
                st.txns.begin(tx.0, fh, Some(process));
                if on_dir {
                    st.dir_txs.insert(fh, tx.0);
                } else if let Some(f) = st.files.get_mut(&fh) {
                    f.tx = Some((tx.0, Binding::Ioctl));
                }
                Ok(tx.0.to_ne_bytes().to_vec())
            }
            IOC_TX_ADD => {
                if on_dir {
                    return Err(file_only());
                }
                let tx = arg_u64(data).ok_or_else(bad)?;
                self.store.tx_add(TxId(tx), Fh(fh))?;
                let mut st = self.state.lock();
                st.txns.bind(tx, fh);
                if let Some(f) = st.files.get_mut(&fh) {
                    f.tx = Some((tx, Binding::Ioctl));
                }
                Ok(Vec::new())
            }
            IOC_TX_COMMIT => self
                .commit_tx(arg_u64(data).ok_or_else(bad)?)
                .map(|_| Vec::new()),
            IOC_TX_ABORT => self
                .abort_tx(arg_u64(data).ok_or_else(bad)?)
                .map(|_| Vec::new()),
            IOC_SET_ATOMIC | IOC_ATOMIC_ABORT if on_dir => Err(file_only()),
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

    /// Truncate or extend: through the caller's handle, or (by path) through a handle of
    /// its own, bound to the caller's transaction `tx` if it has one.
    fn set_size(
        &self,
        ino: Ino,
        fh: Option<FileHandle>,
        size: u64,
        tx: Option<TxId>,
    ) -> Result<(), Error> {
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
        let result = match tx {
            Some(tx) => self
                .store
                .tx_add(tx, tmp)
                .and_then(|()| self.store.set_len(tmp, size)),
            None => self.store.set_len(tmp, size),
        };
        self.store.release(tmp)?;
        result
    }

    /// rename(2) with RENAME_NOREPLACE / RENAME_EXCHANGE, by the store's rename modes; for
    /// a store that does not offer them yet, NOREPLACE is a lookup then a rename and
    /// EXCHANGE three renames in one transaction.
    #[allow(clippy::too_many_arguments)]
    fn rename_mode(
        &self,
        parent: Ino,
        from: &[u8],
        new_parent: Ino,
        to: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<(), Error> {
        match self
            .store
            .rename_with(parent, from, new_parent, to, mode, tx)
        {
            Err(Error::Unsupported(_)) if mode == RenameMode::Exchange => {
                self.exchange(parent, from, new_parent, to, tx)
            }
            Err(Error::Unsupported(_)) if mode == RenameMode::NoReplace => {
                if self.store.lookup(new_parent, to).is_ok() {
                    return Err(Error::Exists(String::from_utf8_lossy(to).into_owned()));
                }
                self.store.rename(parent, from, new_parent, to, tx)
            }
            other => other,
        }
    }

    fn exchange(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        joined: Option<TxId>,
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
        let tx = match joined {
            Some(tx) => tx,
            None => self.store.tx_begin(&[])?,
        };
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
        match (steps, joined) {
            (result, Some(_)) => result,
            (Ok(()), None) => self.store.tx_commit(tx),
            (Err(e), None) => {
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
        // POSIX ACLs enforced by the kernel where the store keeps the attributes they live
        // in; DONT_MASK: the umask comes with each create, applied here unless a default
        // ACL replaces it.
        if self.store.listxattr(store::ROOT_INO).is_ok() {
            let acl = fuser::InitFlags::FUSE_POSIX_ACL | fuser::InitFlags::FUSE_DONT_MASK;
            if config.add_capabilities(acl).is_ok() {
                self.acl_mode = AclMode::Enforced;
            }
        }
        Ok(())
    }

    fn destroy(&mut self) {
        let st = self.state.get_mut();
        let txs: Vec<u64> = st.txns.ids();
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
        req: &Request,
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
        let tx = self.joined(req);
        let result = (|| {
            if let Some(size) = size {
                self.set_size(ino.0, fh, size, tx)?;
                self.touched(tx, Touched::Inode(ino.0));
            }
            let attr = SetAttr {
                perm: mode.map(|m| m & 0o7777),
                uid,
                gid,
                atime: atime.map(time_or_now),
                mtime: mtime.map(time_or_now),
            };
            if attr != SetAttr::default() {
                self.store.setattr(ino.0, &attr, tx)?;
                self.touched(tx, Touched::Inode(ino.0));
            }
            if let (Some(perm), true) = (attr.perm, self.acls_enforced()) {
                self.chmod_acl(ino.0, perm, tx)?;
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
        let tx = self.joined(req);
        let make = || {
            let m = self.store.mkdir(parent.0, name.as_bytes(), perm, tx)?;
            self.inherit_acl(parent.0, m, mode & 0o7777, tx)
        };
        self.new_entry(req, (parent.0, name.as_bytes(), tx), &make, reply);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let perm = mode & !umask & 0o7777;
        let tx = self.joined(req);
        // mknod of a mode without a type makes a regular file, as mknod(2).
        let kind = match mode & libc::S_IFMT {
            0 => Some(FileKind::File),
            _ => FileKind::from_mode(mode),
        };
        let name_bytes = name.as_bytes();
        let make = || {
            let m = match kind {
                Some(FileKind::File) => self.store.create(parent.0, name_bytes, perm, tx)?,
                Some(k) if k.is_special() => {
                    let dev = if k.is_device() {
                        dev_from_fuse(rdev)
                    } else {
                        0
                    };
                    self.store.mknod(parent.0, name_bytes, k, perm, dev, tx)?
                }
                _ => return Err(Error::InvalidArgument(format!("mknod of mode {mode:#o}"))),
            };
            self.inherit_acl(parent.0, m, mode & 0o7777, tx)
        };
        self.new_entry(req, (parent.0, name_bytes, tx), &make, reply);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let tx = self.joined(req);
        self.remove_entry(parent.0, name, FileKind::File, tx, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let tx = self.joined(req);
        self.remove_entry(parent.0, name, FileKind::Dir, tx, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let tx = self.joined(req);
        let make = || {
            self.store.symlink(
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                tx,
            )
        };
        self.new_entry(req, (parent.0, link_name.as_bytes(), tx), &make, reply);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (from, to) = (name.as_bytes(), newname.as_bytes());
        let tx = self.joined(req);
        let mode = if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        } else if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            RenameMode::Exchange
        } else if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            RenameMode::NoReplace
        } else {
            RenameMode::Replace
        };
        let rename = || {
            self.rename_mode(parent.0, from, newparent.0, to, mode, tx)?;
            self.touched(tx, Touched::Entry(parent.0, from.to_vec()));
            self.touched(tx, Touched::Entry(newparent.0, to.to_vec()));
            Ok(())
        };
        self.rename_entry(newparent.0, newname, &rename, reply);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let tx = self.joined(req);
        self.link_entry(ino.0, newparent.0, newname, tx, reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if let Err(e) = self.check_node(ino.0) {
            return reply.error(e);
        }
        // A read-only descriptor has nothing for FLUSH to commit: its close() sends none.
        let open_flags = if flags.0 & libc::O_ACCMODE == libc::O_RDONLY {
            FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        };
        match self.open_handle(ino.0, flags.0, self.joined(req)) {
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
        match bound {
            // Closing a descriptor bound by ioctl to an open transaction aborts it, as the
            // death of the program would.
            Some((tx, Binding::Ioctl)) => {
                let _ = self.abort_tx(tx);
            }
            Some((tx, Binding::Created)) => self.state.lock().txns.unbind(tx, fh.0),
            None => {}
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
                let id = DIR_HANDLE_FIRST + st.next_dir;
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
        let tx = {
            let mut st = self.state.lock();
            st.dirs.remove(&fh.0);
            st.dir_txs.remove(&fh.0)
        };
        if let Some(tx) = tx {
            // A namespace transaction begun on this directory handle and not committed.
            let _ = self.abort_tx(tx);
        }
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
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            return reply.error(Errno::EINVAL);
        }
        let tx = self.joined(req);
        match self.xattr_set(ino.0, name.as_bytes(), value, flags, tx) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.xattr_get(ino.0, name.as_bytes()) {
            Ok(value) => crate::xattrs::reply_sized(&value, size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.xattr_list(ino.0) {
            Ok(list) => crate::xattrs::reply_sized(&list, size, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let tx = self.joined(req);
        match self.xattr_remove(ino.0, name.as_bytes(), tx) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let result = Fallocate::from_linux_mode(mode)
            .and_then(|op| self.store.fallocate(Fh(fh.0), op, offset, length));
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
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
        let tx = self.joined(req);
        let make = || {
            let m = self.store.create(parent.0, name.as_bytes(), perm, tx)?;
            self.inherit_acl(parent.0, m, mode & 0o7777, tx)
        };
        self.create_entry(req, (parent.0, name.as_bytes(), tx), &make, flags, reply);
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        match self.ioctl_op(req, ino.0, fh.0, cmd, in_data) {
            Ok(out) => reply.ioctl(0, &out),
            Err(e) => reply.error(errno(&e)),
        }
    }
}
