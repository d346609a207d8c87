//! The client: the Store API over a connection to a server, so every front end that works
//! on an `Arc<dyn Store>` works unchanged on a store another process owns.
//!
//! One connection, one request in flight (calls from several threads take turns). A write's
//! bytes go through the shared buffer (a memfd both sides map), or for a write larger than
//! the buffer through a memory file passed with the request; reads likewise come back. If
//! the server goes away, every call fails with an I/O error (EIO) and nothing is retried:
//! what the server had acknowledged is durable, what it had not is the server's recovery's.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use store::{
    DirEntry, Error, Fallocate, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, RenameMode,
    Result, SetAttr, StatFs, Store, TxId, XattrSet,
};

use crate::batch::Batcher;
use crate::channel::{Channel, Side, SPIN};
use crate::conn;
use crate::locks::{Conflict, LockKind, LockRange};
use crate::op::*;
use crate::server::memfile;
use crate::shm::Shm;
use crate::wire::{malformed, Dec, Enc};

/// Size of the data area of the shared memory a client creates: writes and reads up to it
/// take no copy through the socket.
pub const SHM_LEN: usize = 4 << 20;

/// A store served by another process.
pub struct RemoteStore {
    conn: Mutex<Option<Conn>>,
    engine: String,
    socket: PathBuf,
}

struct Conn {
    channel: Channel,
    batcher: Batcher,
}

fn io(socket: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: socket.display().to_string(),
        op,
        source,
    }
}

/// The error of a call whose server went away (connection reset, closed, or out of step).
fn server_gone(socket: &Path, cause: &Error) -> Error {
    Error::Io {
        path: format!("{} (server gone: {cause})", socket.display()),
        op: "call",
        source: std::io::Error::from_raw_os_error(libc::EIO),
    }
}

impl RemoteStore {
    /// Connect to the server listening at `socket`.
    pub fn connect(socket: &Path) -> Result<RemoteStore> {
        let mut stream = UnixStream::connect(socket).map_err(|e| io(socket, "connect", e))?;
        let (shm, shm_fd) = Shm::create(SHM_LEN)?;
        let mut hello = Enc::default();
        hello.bytes(MAGIC).u32(VERSION);
        conn::send_with_fd(&mut stream, &hello.0, &shm_fd)?;
        // The server has its own descriptor now; the mapping stays without this one.
        drop(shm_fd);
        let reply = conn::recv(&mut stream)?
            .ok_or_else(|| malformed("the server closed the connection at the handshake"))?;
        let mut d = Dec::new(&reply);
        let engine = match d.u8()? {
            OK => d.string()?,
            ERR => return Err(d.error()?),
            _ => return Err(malformed("bad handshake reply")),
        };
        d.finish()?;
        Ok(RemoteStore {
            conn: Mutex::new(Some(Conn {
                channel: Channel::new(stream, shm, Side::Client),
                batcher: Batcher::default(),
            })),
            engine,
            socket: socket.to_path_buf(),
        })
    }

    /// The socket this client is connected to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The descriptor this client holds (its connection), if still connected: a front end
    /// that shares the descriptor table with an application (the LD_PRELOAD shim) keeps the
    /// application's `close`/`dup2` off it with [`RemoteStore::relocate_fd`].
    pub fn fd(&self) -> Option<i32> {
        self.conn
            .lock()
            .as_ref()
            .map(|c| c.channel.stream().as_raw_fd())
    }

    /// Move the connection's descriptor from `fd` to a free number at or above `floor`
    /// (never `fd` itself). Returns whether `fd` was the connection's and was moved.
    pub fn relocate_fd(&self, fd: i32, floor: i32) -> bool {
        let mut guard = self.conn.lock();
        let Some(conn) = guard.as_mut() else {
            return false;
        };
        if conn.channel.stream().as_raw_fd() != fd {
            return false;
        }
        // SAFETY: duplicating the descriptor this client owns; F_DUPFD_CLOEXEC picks a free
        // number at or above its argument (at least fd + 1 when floor <= fd).
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor.max(fd + 1)) };
        if new < 0 {
            return false;
        }
        // SAFETY: `new` is a fresh descriptor nothing else owns; the old stream (and with it
        // the number `fd`) is closed when replaced.
        conn.channel
            .set_stream(unsafe { UnixStream::from_raw_fd(new) });
        true
    }

    /// Send a request and return the reply's result bytes (after the status), with the
    /// descriptor the server passed, if any. `prepare` may use the shared buffer first. The
    /// pending batch of writes goes first, as a request of its own.
    fn call_with(
        &self,
        req: &Enc,
        fd: Option<&OwnedFd>,
        prepare: impl FnOnce(&mut Shm) -> Result<()>,
        finish: impl FnOnce(&mut Dec<'_>, &Shm, Option<OwnedFd>) -> Result<()>,
    ) -> Result<()> {
        let mut guard = self.conn.lock();
        self.flush(&mut guard)?;
        self.exchange(&mut guard, req, fd, prepare, finish)
    }

    /// One request and its reply.
    fn exchange(
        &self,
        guard: &mut Option<Conn>,
        req: &Enc,
        fd: Option<&OwnedFd>,
        prepare: impl FnOnce(&mut Shm) -> Result<()>,
        finish: impl FnOnce(&mut Dec<'_>, &Shm, Option<OwnedFd>) -> Result<()>,
    ) -> Result<()> {
        let conn = guard.as_mut().ok_or(Error::Closed)?;
        prepare(conn.channel.shm_mut())?;
        let channel = &mut conn.channel;
        let reply = channel.send(&req.0, fd).and_then(|()| channel.recv(SPIN));
        let (body, fd) = match reply {
            Ok(r) => r,
            Err(e) => {
                // The server is gone or the stream is out of step: this client is done, and
                // every call says EIO (what it had not acknowledged is its recovery's).
                *guard = None;
                return Err(server_gone(&self.socket, &e));
            }
        };
        let mut d = Dec::new(&body);
        match d.u8()? {
            OK => {
                finish(&mut d, conn.channel.shm(), fd)?;
                d.finish()
            }
            ERR => Err(d.error()?),
            _ => Err(malformed("bad reply status")),
        }
    }

    /// Send the pending batch of writes, if any. Returns the transactions the server found
    /// doomed while applying it, each with the error of its failed write (see batch.rs).
    fn flush(&self, guard: &mut Option<Conn>) -> Result<Vec<(u64, Error)>> {
        let conn = guard.as_mut().ok_or(Error::Closed)?;
        if conn.batcher.is_empty() {
            return Ok(Vec::new());
        }
        let mut r = req(BATCH);
        conn.batcher.take_into(&mut r);
        let mut doomed = Vec::new();
        self.exchange(
            guard,
            &r,
            None,
            |_| Ok(()),
            |d, _, _| {
                for _ in 0..d.count(9)? {
                    doomed.push((d.u64()?, d.error()?));
                }
                Ok(())
            },
        )?;
        if let Some(conn) = guard.as_mut() {
            for (tx, _) in &doomed {
                conn.batcher.doom(*tx);
            }
        }
        Ok(doomed)
    }

    /// Batch a write through `fh` if it is bound to one of this client's transactions and
    /// fits the data area: Some(result) when batched (or refused: its transaction doomed by
    /// the batch it made room by sending), None when it must go as its own request.
    fn batch_write(&self, fh: Fh, off: u64, data: &[u8]) -> Option<Result<usize>> {
        let mut guard = self.conn.lock();
        let conn = guard.as_mut()?;
        let tx = conn.batcher.target(fh)?;
        let data_len = conn.channel.shm().data_len();
        if data.len() > data_len {
            return None;
        }
        if conn.batcher.room(data.len(), data_len).is_none() {
            match self.flush(&mut guard) {
                Err(e) => return Some(Err(e)),
                Ok(doomed) => {
                    if let Some((_, e)) = doomed.into_iter().find(|(t, _)| *t == tx) {
                        return Some(Err(e));
                    }
                }
            }
        }
        let conn = guard.as_mut()?;
        let at = conn.batcher.room(data.len(), data_len)?;
        if let Err(e) = conn.channel.shm_mut().put_at(at, data) {
            return Some(Err(e));
        }
        conn.batcher.push(tx, fh, off, at, data.len());
        Some(Ok(data.len()))
    }

    /// Update what the client knows to batch writes.
    fn batcher(&self, f: impl FnOnce(&mut Batcher)) {
        if let Some(conn) = self.conn.lock().as_mut() {
            f(&mut conn.batcher);
        }
    }

    fn call<T>(&self, req: &Enc, decode: impl FnOnce(&mut Dec<'_>) -> Result<T>) -> Result<T> {
        let mut out = None;
        self.call_with(
            req,
            None,
            |_| Ok(()),
            |d, _, _| {
                out = Some(decode(d)?);
                Ok(())
            },
        )?;
        out.ok_or_else(|| malformed("reply without a result"))
    }

    fn unit(&self, req: &Enc) -> Result<()> {
        self.call(req, |_| Ok(()))
    }

    fn meta(&self, req: &Enc) -> Result<Metadata> {
        self.call(req, |d| d.meta())
    }
}

impl RemoteStore {
    /// Set (or remove) lock `id`'s lock on `range` of `ino` in the server's table (see
    /// [`crate::locks`]); the lock in the way when another owner's conflicts.
    pub fn lock(
        &self,
        ino: Ino,
        id: u64,
        pid: u32,
        kind: LockKind,
        range: LockRange,
    ) -> Result<Option<Conflict>> {
        self.lock_call(LOCK, ino, id, pid, kind, range)
    }

    /// The lock that would stand in the way of `kind` on `range` (F_GETLK).
    pub fn lock_test(
        &self,
        ino: Ino,
        id: u64,
        kind: LockKind,
        range: LockRange,
    ) -> Result<Option<Conflict>> {
        self.lock_call(LOCK_TEST, ino, id, 0, kind, range)
    }

    /// Drop every lock `id` holds on `ino`.
    pub fn lock_release(&self, ino: Ino, id: u64) -> Result<()> {
        let mut r = req(LOCK_RELEASE);
        r.u64(ino).u64(id);
        self.unit(&r)
    }

    fn lock_call(
        &self,
        op: u8,
        ino: Ino,
        id: u64,
        pid: u32,
        kind: LockKind,
        range: LockRange,
    ) -> Result<Option<Conflict>> {
        let mut r = req(op);
        r.u64(ino).u64(id).u32(pid).u8(kind.code());
        r.u64(range.start).u64(range.len);
        self.call(&r, |d| d.conflict())
    }
}

fn req(op: u8) -> Enc {
    let mut e = Enc::default();
    e.u8(op);
    e
}

fn tx_arg(tx: Option<TxId>) -> Option<u64> {
    tx.map(|t| t.0)
}

fn fh_list(fhs: &[Fh]) -> Vec<u64> {
    fhs.iter().map(|f| f.0).collect()
}

impl Store for RemoteStore {
    fn engine_name(&self) -> String {
        self.engine.clone()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        let mut r = req(LOOKUP);
        r.u64(parent).bytes(name);
        self.meta(&r)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        let mut r = req(GETATTR);
        r.u64(ino);
        self.meta(&r)
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        let mut r = req(SETATTR);
        r.u64(ino).setattr(attr).opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut r = req(CREATE);
        r.u64(parent).bytes(name).u32(perm).opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        let mut r = req(MKDIR);
        r.u64(parent).bytes(name).u32(perm).opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut r = req(SYMLINK);
        r.u64(parent).bytes(name).bytes(target).opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let mut r = req(READLINK);
        r.u64(ino);
        self.call(&r, |d| Ok(d.bytes()?.to_vec()))
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut r = req(UNLINK);
        r.u64(parent).bytes(name).opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut r = req(RMDIR);
        r.u64(parent).bytes(name).opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        let mut r = req(RENAME);
        r.u64(parent).bytes(name).u64(new_parent).bytes(new_name);
        r.opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut r = req(LINK);
        r.u64(ino)
            .u64(new_parent)
            .bytes(new_name)
            .opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        let mut r = req(READ_DIR);
        r.u64(ino);
        self.call(&r, |d| d.entries())
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut r = req(OPEN);
        r.u64(ino).flags(flags);
        let fh = self.call(&r, |d| Ok(Fh(d.u64()?)))?;
        self.batcher(|b| b.opened(fh, flags));
        Ok(fh)
    }

    fn release(&self, fh: Fh) -> Result<()> {
        let mut r = req(RELEASE);
        r.u64(fh.0);
        self.batcher(|b| b.forget(fh));
        self.unit(&r)
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let mut r = req(READ);
        r.u64(fh.0).u64(off).u64(buf.len() as u64);
        let mut got = 0usize;
        self.call_with(
            &r,
            None,
            |_| Ok(()),
            |d, shm, fd| {
                let (how, n) = (d.u8()?, d.u64()?);
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= buf.len())
                    .ok_or_else(|| malformed("read reply longer than asked"))?;
                match (how, fd) {
                    (DATA_SHM, None) => shm.get(&mut buf[..n])?,
                    (DATA_FD, Some(fd)) => {
                        let mut file = std::fs::File::from(fd);
                        file.seek(SeekFrom::Start(0))
                            .and_then(|_| file.read_exact(&mut buf[..n]))
                            .map_err(|e| io(&self.socket, "read data file", e))?;
                    }
                    _ => return Err(malformed("read reply without its data")),
                }
                got = n;
                Ok(())
            },
        )?;
        Ok(got)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        if let Some(batched) = self.batch_write(fh, off, data) {
            return batched;
        }
        let mut r = req(WRITE);
        let mut written = 0usize;
        let decode = |d: &mut Dec<'_>, _: &Shm, _: Option<OwnedFd>| {
            written = d.u64()? as usize;
            Ok(())
        };
        if data.len() <= SHM_LEN {
            r.u64(fh.0).u64(off).u8(DATA_SHM).u64(data.len() as u64);
            self.call_with(&r, None, |shm| shm.put(data), decode)?;
        } else {
            let mut file = memfile("atomfs-remote-write")?;
            file.write_all(data)
                .map_err(|e| io(&self.socket, "write data file", e))?;
            let fd = OwnedFd::from(file);
            r.u64(fh.0).u64(off).u8(DATA_FD).u64(data.len() as u64);
            self.call_with(&r, Some(&fd), |_| Ok(()), decode)?;
        }
        Ok(written)
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut r = req(SET_LEN);
        r.u64(fh.0).u64(len);
        self.unit(&r)
    }

    fn fsync(&self, fh: Fh, datasync: bool) -> Result<()> {
        let mut r = req(FSYNC);
        r.u64(fh.0).bool(datasync);
        self.unit(&r)
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        let mut r = req(FSTAT);
        r.u64(fh.0);
        self.meta(&r)
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut r = req(SET_ATOMIC);
        r.u64(fh.0).bool(atomic);
        if atomic {
            // Its writes are O_ATOMIC's from now on: never batched again.
            self.batcher(|b| b.forget(fh));
        }
        self.unit(&r)
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        let mut r = req(SYNCV);
        r.u64s(&fh_list(fhs));
        self.unit(&r)
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        let mut r = req(ABORTV);
        r.u64s(&fh_list(fhs));
        self.unit(&r)
    }

    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        kind: FileKind,
        perm: u32,
        rdev: u64,
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        let mut r = req(MKNOD);
        r.u64(parent).bytes(name).kind(kind).u32(perm).u64(rdev);
        r.opt_u64(tx_arg(tx));
        self.meta(&r)
    }

    fn tmpfile(
        &self,
        parent: Ino,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let mut r = req(TMPFILE);
        r.u64(parent).u32(perm).flags(flags).opt_u64(tx_arg(tx));
        let (meta, fh) = self.call(&r, |d| Ok((d.meta()?, Fh(d.u64()?))))?;
        self.batcher(|b| b.opened(fh, flags));
        Ok((meta, fh))
    }

    fn rename_with(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
        tx: Option<TxId>,
    ) -> Result<()> {
        let mut r = req(RENAME_WITH);
        r.u64(parent).bytes(name).u64(new_parent).bytes(new_name);
        r.rename_mode(mode).opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let mut r = req(FALLOCATE);
        r.u64(fh.0).fallocate(op).u64(off).u64(len);
        self.unit(&r)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let mut r = req(GETXATTR);
        r.u64(ino).bytes(name);
        self.call(&r, |d| Ok(d.bytes()?.to_vec()))
    }

    fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        tx: Option<TxId>,
    ) -> Result<()> {
        // A value past the limit is refused here, as the engine would (name first, then
        // value, the engines' order): it could be larger than a frame may carry.
        if store::check_xattr_value(value).is_err() {
            store::check_xattr_name(name)?;
            store::check_xattr_value(value)?;
        }
        let mut r = req(SETXATTR);
        r.u64(ino).bytes(name).bytes(value).xattr_set(how);
        r.opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let mut r = req(LISTXATTR);
        r.u64(ino);
        self.call(&r, |d| d.byte_list())
    }

    fn removexattr(&self, ino: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        let mut r = req(REMOVEXATTR);
        r.u64(ino).bytes(name).opt_u64(tx_arg(tx));
        self.unit(&r)
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        let mut r = req(TX_BEGIN);
        r.u64s(&fh_list(files));
        let tx = self.call(&r, |d| Ok(TxId(d.u64()?)))?;
        self.batcher(|b| b.bind(tx, files));
        Ok(tx)
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut r = req(TX_ADD);
        r.u64(tx.0).u64(fh.0);
        self.unit(&r)?;
        self.batcher(|b| b.bind(tx, &[fh]));
        Ok(())
    }

    /// The commit carries the pending batch: one round trip for the writes and the commit.
    fn tx_commit(&self, tx: TxId) -> Result<()> {
        let mut guard = self.conn.lock();
        let conn = guard.as_mut().ok_or(Error::Closed)?;
        let mut r = req(TX_COMMIT);
        r.u64(tx.0);
        conn.batcher.take_into(&mut r);
        // Whatever the answer, the client batches nothing more in it: a transaction the
        // server still holds gets its writes one by one, as without batching.
        conn.batcher.ended(tx);
        self.exchange(&mut guard, &r, None, |_| Ok(()), |_, _, _| Ok(()))
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        let mut r = req(TX_ABORT);
        r.u64(tx.0);
        self.batcher(|b| b.ended(tx));
        self.unit(&r)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.call(&req(STATFS), |d| d.statfs())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        self.call(&req(STATS), |d| d.counters()).unwrap_or_default()
    }

    fn limits(&self) -> Result<Vec<store::Limit>> {
        self.call(&req(LIMITS), |d| d.limits())
    }

    fn fsck(&self) -> Result<FsckReport> {
        self.call(&req(FSCK), |d| d.fsck())
    }

    /// A client's unmount: its transactions aborted and its handles closed by the server,
    /// then the connection closed. The store stays open in the server.
    fn unmount(&self) -> Result<()> {
        let result = self.unit(&req(BYE));
        *self.conn.lock() = None;
        match result {
            Err(Error::Closed) => Err(Error::Closed),
            other => other,
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("engine", &self.engine)
            .field("socket", &self.socket)
            .finish()
    }
}
