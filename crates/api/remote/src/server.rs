//! The server: the store's owner process answers the Store calls of other processes.
//!
//! Each client is one connection with its own table of open handles and transactions: a
//! client can name only what it opened or began (anything else is `BadHandle` /
//! `NoSuchTransaction`), and when its connection ends — a goodbye, an exit, a SIGKILL — its
//! transactions are aborted and its handles released, exactly what a crash of that client
//! alone would leave (its O_ATOMIC writes not yet fsynced are dropped with the handle).
//! Only processes of the server's own user (or root) are served (SO_PEERCRED).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use store::{Error, Fh, Ino, Result, Store, TxId};

use crate::batch::{self, BatchedWrite};
use crate::channel::{Channel, Side, SPIN};
use crate::conn;
use crate::locks::{LockKind, LockOwner, LockRange, LockTable};
use crate::op::*;
use crate::shm::Shm;
use crate::wire::{malformed, Dec, Enc};

/// Largest shared memory a client may pass.
const SHM_MAX: usize = 64 << 20;

/// The transaction number given to the engine in place of one the client does not hold.
const NO_TX: u64 = u64::MAX;

/// A running server. [`Server::stop`] (or drop) stops accepting, ends every client's connection
/// (aborting its transactions) and removes the socket; the store itself stays open, to be
/// unmounted by its owner.
pub struct Server {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<Running>>>,
}

struct Running {
    stream: UnixStream,
    thread: JoinHandle<()>,
}

/// A change a client made, for a cache of the store kept elsewhere in the owner process to
/// forget (the kernel's cache of a FUSE mount of the same store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// The attributes or contents of an inode changed.
    Inode(Ino),
    /// A name in a directory appeared, disappeared or now names another inode.
    Entry { parent: Ino, name: &'a [u8] },
}

/// Called by the server after every change a client makes (from the client's connection
/// thread, after the store call returned).
pub type Observer = Arc<dyn Fn(Change<'_>) + Send + Sync>;

/// Serve `store` on a Unix socket at `socket` (mode 0600). A socket file left there by a
/// server that is gone is replaced; a live one, or anything that is not a socket, is
/// refused.
pub fn serve(store: Arc<dyn Store>, socket: &Path) -> Result<Server> {
    serve_observed(store, socket, None)
}

/// [`serve`], telling `observer` of every change the clients make.
pub fn serve_observed(
    store: Arc<dyn Store>,
    socket: &Path,
    observer: Option<Observer>,
) -> Result<Server> {
    serve_with(
        store,
        socket,
        ServeOptions {
            observer,
            ..ServeOptions::default()
        },
    )
}

/// How a server runs, beyond its store and socket.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// Told of every change the clients make.
    pub observer: Option<Observer>,
    /// Run first on every thread the server starts (the LD_PRELOAD shim marks them as its
    /// own, so the store's libc calls are not intercepted).
    pub on_thread: Option<fn()>,
    /// Keep the server's descriptors (listener, connections) at or above this number, out
    /// of the way of an application that shares the descriptor table (shells `dup2` onto
    /// low numbers).
    pub fd_floor: Option<i32>,
}

/// [`serve_observed`] with every option.
pub fn serve_with(store: Arc<dyn Store>, socket: &Path, options: ServeOptions) -> Result<Server> {
    let ServeOptions {
        observer,
        on_thread,
        fd_floor,
    } = options;
    let io = |op: &'static str, source: std::io::Error| Error::Io {
        path: socket.display().to_string(),
        op,
        source,
    };
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !meta.file_type().is_socket() {
            return Err(Error::Exists(format!(
                "{}: exists and is not a socket",
                socket.display()
            )));
        }
        if UnixStream::connect(socket).is_ok() {
            return Err(Error::Busy(format!(
                "{}: another server answers there",
                socket.display()
            )));
        }
        std::fs::remove_file(socket).map_err(|e| io("remove stale socket", e))?;
    }
    let listener = UnixListener::bind(socket).map_err(|e| io("bind", e))?;
    let listener = match fd_floor {
        Some(floor) => lifted(listener, floor).map_err(|e| io("dup", e))?,
        None => listener,
    };
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("chmod", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| io("listen", e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let connections: Arc<Mutex<Vec<Running>>> = Arc::default();
    let locks = crate::locks::table_for(socket);
    let accept = {
        let (stop, connections) = (stop.clone(), connections.clone());
        std::thread::Builder::new()
            .name("atomfs-serve".into())
            .spawn(move || {
                if let Some(f) = on_thread {
                    f();
                }
                let hooks = Hooks {
                    observer,
                    on_thread,
                    fd_floor,
                    locks,
                };
                accept_loop(&listener, &store, &hooks, &stop, &connections)
            })
            .map_err(|e| io("spawn", e))?
    };
    Ok(Server {
        socket: socket.to_path_buf(),
        stop,
        accept: Some(accept),
        connections,
    })
}

impl Server {
    /// The socket clients connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        let mut connections = self.connections.lock();
        connections.retain(|s| !s.thread.is_finished());
        connections.len()
    }

    /// Stop: no new clients, every connection ended (its transactions aborted, its handles
    /// released), the socket removed.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let connections = std::mem::take(&mut *self.connections.lock());
        for s in &connections {
            let _ = s.stream.shutdown(std::net::Shutdown::Both);
        }
        for s in connections {
            let _ = s.thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut();
    }
}

/// What every connection of a server shares.
struct Hooks {
    observer: Option<Observer>,
    on_thread: Option<fn()>,
    fd_floor: Option<i32>,
    /// The store's advisory locks, shared with the owner process's own callers.
    locks: Arc<LockTable>,
}

/// Connection numbers (lock owners); 0 is the owner process itself.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// The same socket at a descriptor number at or above `floor` (the old number closed).
fn lifted<T: std::os::fd::FromRawFd + AsRawFd>(sock: T, floor: i32) -> std::io::Result<T> {
    // SAFETY: duplicating a descriptor `sock` owns; F_DUPFD_CLOEXEC picks a free number at
    // or above its argument.
    let new = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(sock);
    // SAFETY: `new` is a fresh descriptor that nothing else owns.
    Ok(unsafe { T::from_raw_fd(new) })
}

fn accept_loop(
    listener: &UnixListener,
    store: &Arc<dyn Store>,
    hooks: &Hooks,
    stop: &Arc<AtomicBool>,
    connections: &Mutex<Vec<Running>>,
) {
    let (observer, on_thread) = (hooks.observer.as_ref(), hooks.on_thread);
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let stream = match hooks.fd_floor {
                    Some(floor) => match lifted(stream, floor) {
                        Ok(s) => s,
                        Err(_) => continue,
                    },
                    None => stream,
                };
                if stream.set_nonblocking(false).is_err() || !same_user(&stream) {
                    continue;
                }
                let Ok(handle) = stream.try_clone() else {
                    continue;
                };
                let (store, observer, stop) = (store.clone(), observer.cloned(), stop.clone());
                let locks = Locks {
                    table: hooks.locks.clone(),
                    conn: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
                };
                let spawned = std::thread::Builder::new()
                    .name("atomfs-client".into())
                    .spawn(move || {
                        if let Some(f) = on_thread {
                            f();
                        }
                        Connection::new(store, observer, locks).run(stream, &stop)
                    });
                if let Ok(thread) = spawned {
                    let mut s = connections.lock();
                    s.retain(|r| !r.thread.is_finished());
                    s.push(Running {
                        stream: handle,
                        thread,
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut pfd = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the listener, which outlives the call.
                unsafe { libc::poll(&mut pfd, 1, 100) };
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Whether the peer runs as this process's effective user (or as root).
fn same_user(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a valid ucred.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    rc == 0 && (cred.uid == me || cred.uid == 0)
}

/// What a transaction touched, to tell the observer again when it ends.
#[derive(Clone, Debug)]
enum Touched {
    Inode(Ino),
    Entry(Ino, Vec<u8>),
}

/// One client: its handles (and their inodes), its transactions (and what they touched),
/// its channel (after the handshake).
struct Connection {
    store: Arc<dyn Store>,
    observer: Option<Observer>,
    fhs: HashMap<u64, Ino>,
    txs: HashMap<u64, Vec<Touched>>,
    /// Transactions a batched write failed in, with its error (batch.rs).
    doomed: HashMap<u64, Error>,
    channel: Option<Channel>,
    locks: Locks,
}

/// A connection's view of the store's locks: the table, and its own number as lock owner.
struct Locks {
    table: Arc<LockTable>,
    conn: u64,
}

impl Connection {
    fn new(store: Arc<dyn Store>, observer: Option<Observer>, locks: Locks) -> Self {
        Connection {
            store,
            observer,
            fhs: HashMap::new(),
            txs: HashMap::new(),
            doomed: HashMap::new(),
            channel: None,
            locks,
        }
    }

    fn inode_changed(&self, ino: Ino) {
        if let Some(o) = &self.observer {
            o(Change::Inode(ino));
        }
    }

    fn entry_changed(&self, parent: Ino, name: &[u8]) {
        if let Some(o) = &self.observer {
            o(Change::Entry { parent, name });
            o(Change::Inode(parent));
        }
    }

    /// Remember what a transaction touched (told again when it commits or aborts).
    fn touch(&mut self, tx: Option<TxId>, what: Touched) {
        if let Some(list) = tx.and_then(|t| self.txs.get_mut(&t.0)) {
            list.push(what);
        }
    }

    /// A transaction ended: tell the observer of everything it touched.
    fn tx_ended(&mut self, tx: u64) {
        for t in self.txs.remove(&tx).unwrap_or_default() {
            match t {
                Touched::Inode(ino) => self.inode_changed(ino),
                Touched::Entry(parent, name) => self.entry_changed(parent, &name),
            }
        }
    }

    /// The inode `name` in `parent` names now, if any (what an unlink or rename changes).
    fn named(&self, parent: Ino, name: &[u8]) -> Option<Ino> {
        self.store.lookup(parent, name).ok().map(|m| m.ino)
    }

    /// Answer the client's requests until it says goodbye or goes away, or the server
    /// stops; then end what it left open.
    fn run(mut self, mut stream: UnixStream, stop: &AtomicBool) {
        if let Ok(shm) = self.handshake(&mut stream) {
            self.channel = Some(Channel::new(stream, shm, Side::Server));
            while let Some(Ok((body, fd))) = self.channel.as_mut().map(|c| c.recv(SPIN)) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let bye = body.first() == Some(&BYE);
                let (reply, out_fd) = self.answer(&body, fd);
                let sent = self
                    .channel
                    .as_mut()
                    .map(|c| c.send(&reply, out_fd.as_ref()));
                if bye || !matches!(sent, Some(Ok(()))) {
                    break;
                }
            }
        }
        self.end();
    }

    /// Check the client's protocol version and take its shared memory.
    fn handshake(&mut self, stream: &mut UnixStream) -> Result<Shm> {
        let (body, fd) = conn::recv_with_fd(stream)?;
        let mut d = Dec::new(&body);
        let magic = d.bytes()?;
        let version = d.u32()?;
        d.finish()?;
        let mut reply = Enc::default();
        if magic != MAGIC || version != VERSION {
            reply.u8(ERR).error(&Error::UnsupportedVersion {
                what: "atomfs server protocol".into(),
                found: version,
                supported: VERSION,
            });
            conn::send(stream, &reply.0)?;
            return Err(malformed("bad handshake"));
        }
        let shm = fd
            .ok_or_else(|| malformed("handshake without a shared buffer"))
            .and_then(|fd| Shm::open(fd, SHM_MAX));
        match shm {
            Ok(shm) => {
                reply.u8(OK).str(&self.store.engine_name());
                conn::send(stream, &reply.0)?;
                Ok(shm)
            }
            Err(e) => {
                reply.u8(ERR).error(&e);
                conn::send(stream, &reply.0)?;
                Err(e)
            }
        }
    }

    /// What a crash of this client leaves: its transactions aborted, its handles closed.
    fn end(&mut self) {
        self.doomed.clear();
        let txs: Vec<u64> = self.txs.keys().copied().collect();
        for tx in txs {
            let _ = self.store.tx_abort(TxId(tx));
            self.tx_ended(tx);
        }
        for (fh, _) in std::mem::take(&mut self.fhs) {
            let _ = self.store.release(Fh(fh));
        }
        self.locks.table.release_connection(self.locks.conn);
    }

    /// The reply to one request, and a descriptor to pass with it (a large read's data).
    fn answer(&mut self, body: &[u8], fd: Option<OwnedFd>) -> (Vec<u8>, Option<OwnedFd>) {
        let mut out_fd = None;
        let mut reply = Enc::default();
        reply.u8(OK);
        match self.dispatch(body, fd, &mut reply, &mut out_fd) {
            Ok(()) => (reply.0, out_fd),
            Err(Error::NoSuchTransaction(NO_TX)) => {
                let mut err = Enc::default();
                err.u8(ERR)
                    .error(&Error::NoSuchTransaction(foreign_tx(body).unwrap_or(NO_TX)));
                (err.0, None)
            }
            Err(e) => {
                let mut err = Enc::default();
                err.u8(ERR).error(&e);
                (err.0, None)
            }
        }
    }

    fn fh(&self, fh: u64) -> Result<Fh> {
        if self.fhs.contains_key(&fh) {
            Ok(Fh(fh))
        } else {
            Err(Error::BadHandle(fh))
        }
    }

    fn fhs(&self, list: Vec<u64>) -> Result<Vec<Fh>> {
        list.into_iter().map(|f| self.fh(f)).collect()
    }

    fn tx(&self, tx: u64) -> Result<TxId> {
        if self.txs.contains_key(&tx) {
            Ok(TxId(tx))
        } else {
            Err(Error::NoSuchTransaction(tx))
        }
    }

    /// The transaction argument of a namespace call. One this client does not hold is
    /// replaced by [`NO_TX`], which no engine issues: the engine then checks the call's
    /// other arguments first, in its own order, and refuses the transaction last (the
    /// error is given back with the client's number, see [`foreign_tx`]).
    fn opt_tx(&self, tx: Option<u64>) -> Result<Option<TxId>> {
        Ok(tx.map(|t| {
            if self.txs.contains_key(&t) {
                TxId(t)
            } else {
                TxId(NO_TX)
            }
        }))
    }

    fn dispatch(
        &mut self,
        body: &[u8],
        fd: Option<OwnedFd>,
        out: &mut Enc,
        out_fd: &mut Option<OwnedFd>,
    ) -> Result<()> {
        let mut d = Dec::new(body);
        let op = d.u8()?;
        let st = self.store.clone();
        match op {
            LOCK | LOCK_TEST => {
                let (ino, id, pid) = (d.u64()?, d.u64()?, d.u32()?);
                let kind = LockKind::from_code(d.u8()?).ok_or_else(|| malformed("lock kind"))?;
                let range = LockRange {
                    start: d.u64()?,
                    len: d.u64()?,
                };
                d.finish()?;
                let owner = LockOwner {
                    conn: self.locks.conn,
                    id,
                };
                let table = &self.locks.table;
                let answer = if op == LOCK {
                    table.set(ino, owner, pid, kind, range).err()
                } else {
                    table.test(ino, owner, kind, range)
                };
                out.conflict(answer.as_ref());
            }
            LOCK_RELEASE => {
                let (ino, id) = (d.u64()?, d.u64()?);
                d.finish()?;
                let owner = LockOwner {
                    conn: self.locks.conn,
                    id,
                };
                self.locks.table.release(ino, owner);
            }
            ENGINE_NAME => {
                d.finish()?;
                out.str(&st.engine_name());
            }
            LOOKUP => {
                let (parent, name) = (d.u64()?, d.bytes()?);
                d.finish()?;
                out.meta(&st.lookup(parent, name)?);
            }
            GETATTR => {
                let ino = d.u64()?;
                d.finish()?;
                out.meta(&st.getattr(ino)?);
            }
            SETATTR => {
                let (ino, attr, tx) = (d.u64()?, d.setattr()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                out.meta(&st.setattr(ino, &attr, tx)?);
                self.inode_changed(ino);
                self.touch(tx, Touched::Inode(ino));
            }
            CREATE | MKDIR => {
                let (parent, name, perm, tx) = (d.u64()?, d.bytes()?, d.u32()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                let meta = if op == CREATE {
                    st.create(parent, name, perm, tx)?
                } else {
                    st.mkdir(parent, name, perm, tx)?
                };
                out.meta(&meta);
                self.named_changed(tx, parent, name);
            }
            SYMLINK => {
                let (parent, name, target, tx) = (d.u64()?, d.bytes()?, d.bytes()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                out.meta(&st.symlink(parent, name, target, tx)?);
                self.named_changed(tx, parent, name);
            }
            READLINK => {
                let ino = d.u64()?;
                d.finish()?;
                out.bytes(&st.readlink(ino)?);
            }
            UNLINK | RMDIR => {
                let (parent, name, tx) = (d.u64()?, d.bytes()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                let victim = self.named(parent, name);
                if op == UNLINK {
                    st.unlink(parent, name, tx)?
                } else {
                    st.rmdir(parent, name, tx)?
                }
                self.named_changed(tx, parent, name);
                self.victim_changed(tx, victim);
            }
            RENAME => {
                let (parent, name) = (d.u64()?, d.bytes()?);
                let (new_parent, new_name, tx) = (d.u64()?, d.bytes()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                let (moved, replaced) =
                    (self.named(parent, name), self.named(new_parent, new_name));
                st.rename(parent, name, new_parent, new_name, tx)?;
                self.named_changed(tx, parent, name);
                self.named_changed(tx, new_parent, new_name);
                self.victim_changed(tx, moved);
                self.victim_changed(tx, replaced);
            }
            LINK => {
                let (ino, new_parent, new_name, tx) =
                    (d.u64()?, d.u64()?, d.bytes()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                out.meta(&st.link(ino, new_parent, new_name, tx)?);
                self.named_changed(tx, new_parent, new_name);
                self.victim_changed(tx, Some(ino));
            }
            READ_DIR => {
                let ino = d.u64()?;
                d.finish()?;
                out.entries(&st.read_dir(ino)?);
            }
            OPEN => {
                let (ino, flags) = (d.u64()?, d.flags()?);
                d.finish()?;
                let fh = st.open(ino, flags)?;
                self.opened(fh, ino);
                out.u64(fh.0);
            }
            RELEASE => {
                let fh = self.fh(d.u64()?)?;
                d.finish()?;
                self.fhs.remove(&fh.0);
                st.release(fh)?;
            }
            READ => {
                let (fh, off, len) = (self.fh(d.u64()?)?, d.u64()?, d.u64()?);
                d.finish()?;
                self.read(fh, off, len, out, out_fd)?;
            }
            WRITE => {
                let (fh, off, how, len) = (self.fh(d.u64()?)?, d.u64()?, d.u8()?, d.u64()?);
                d.finish()?;
                let data = self.incoming(how, len, fd)?;
                out.u64(st.write(fh, off, &data)? as u64);
                self.handle_changed(fh);
            }
            SET_LEN => {
                let (fh, len) = (self.fh(d.u64()?)?, d.u64()?);
                d.finish()?;
                st.set_len(fh, len)?;
                self.handle_changed(fh);
            }
            FSYNC => {
                let (fh, datasync) = (self.fh(d.u64()?)?, d.bool()?);
                d.finish()?;
                st.fsync(fh, datasync)?;
                // An O_ATOMIC file's writes become visible to others here.
                self.handle_changed(fh);
            }
            FSTAT => {
                let fh = self.fh(d.u64()?)?;
                d.finish()?;
                out.meta(&st.fstat(fh)?);
            }
            SET_ATOMIC => {
                let (fh, atomic) = (self.fh(d.u64()?)?, d.bool()?);
                d.finish()?;
                st.set_atomic(fh, atomic)?;
                self.handle_changed(fh);
            }
            SYNCV | ABORTV => {
                let fhs = self.fhs(d.u64s()?)?;
                d.finish()?;
                if op == SYNCV {
                    st.syncv(&fhs)?
                } else {
                    st.abortv(&fhs)?
                }
                for fh in fhs {
                    self.handle_changed(fh);
                }
            }
            TX_BEGIN => {
                let fhs = self.fhs(d.u64s()?)?;
                d.finish()?;
                let tx = st.tx_begin(&fhs)?;
                let files = fhs
                    .iter()
                    .filter_map(|f| self.fhs.get(&f.0))
                    .map(|&i| Touched::Inode(i));
                let fresh = self.txs.insert(tx.0, files.collect()).is_none();
                assert!(fresh, "engine issued transaction {} twice", tx.0);
                out.u64(tx.0);
            }
            TX_ADD => {
                let (tx, fh) = (self.tx(d.u64()?)?, self.fh(d.u64()?)?);
                d.finish()?;
                st.tx_add(tx, fh)?;
                if let Some(&ino) = self.fhs.get(&fh.0) {
                    self.touch(Some(tx), Touched::Inode(ino));
                }
            }
            BATCH => {
                let writes = batch::decode(&mut d)?;
                d.finish()?;
                let doomed = self.apply(&writes)?;
                out.u32(doomed.len() as u32);
                for tx in doomed {
                    if let Some(e) = self.doomed.get(&tx) {
                        out.u64(tx).error(e);
                    }
                }
            }
            TX_COMMIT => {
                let tx = d.u64()?;
                let writes = batch::decode(&mut d)?;
                d.finish()?;
                // The batch first: it may hold writes of other transactions too.
                self.apply(&writes)?;
                let tx = self.tx(tx)?;
                if let Some(e) = self.doomed.remove(&tx.0) {
                    // A batched write failed: the commit fails with nothing applied.
                    let _ = st.tx_abort(tx);
                    self.tx_ended(tx.0);
                    return Err(e);
                }
                let result = st.tx_commit(tx);
                // Finished (or unknown to the engine): no longer this client's.
                if result.is_ok() || matches!(result, Err(Error::NoSuchTransaction(_))) {
                    self.tx_ended(tx.0);
                }
                result?;
            }
            TX_ABORT => {
                let tx = self.tx(d.u64()?)?;
                d.finish()?;
                self.doomed.remove(&tx.0);
                let result = st.tx_abort(tx);
                // Finished (or unknown to the engine): no longer this client's.
                if result.is_ok() || matches!(result, Err(Error::NoSuchTransaction(_))) {
                    self.tx_ended(tx.0);
                }
                result?;
            }
            STATFS => {
                d.finish()?;
                out.statfs(&st.statfs()?);
            }
            STATS => {
                d.finish()?;
                out.counters(&st.stats());
            }
            FSCK => {
                d.finish()?;
                out.fsck(&st.fsck()?);
            }
            LIMITS => {
                d.finish()?;
                out.limits(&st.limits()?);
            }
            BYE => {
                d.finish()?;
                self.end();
            }
            _ => return self.dispatch_posix(op, &mut d, out),
        }
        Ok(())
    }

    /// Apply batched writes in order. A write that fails dooms its transaction: its later
    /// writes are skipped and its commit fails with that error. Returns the transactions
    /// doomed now.
    fn apply(&mut self, writes: &[BatchedWrite]) -> Result<Vec<u64>> {
        let mut doomed = Vec::new();
        for w in writes {
            // A batch names only this client's transactions (the client batches only in
            // those); anything else is a client out of step.
            self.tx(w.tx)?;
            if self.doomed.contains_key(&w.tx) {
                continue;
            }
            if let Err(e) = self.batched_write(w) {
                self.doomed.insert(w.tx, e);
                doomed.push(w.tx);
            }
        }
        Ok(doomed)
    }

    fn batched_write(&mut self, w: &BatchedWrite) -> Result<()> {
        let fh = self.fh(w.fh)?;
        let (at, len) = (
            usize::try_from(w.at).map_err(|_| malformed("batched write offset"))?,
            usize::try_from(w.len).map_err(|_| malformed("batched write length"))?,
        );
        let data_len = self.shm()?.data_len();
        if at.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(malformed("batched write beyond the shared data area"));
        }
        let mut data = vec![0u8; len];
        self.shm()?.get_at(at, &mut data)?;
        self.store.write(fh, w.off, &data)?;
        self.handle_changed(fh);
        Ok(())
    }

    /// A handle the engine issued to this client. A handle number is the engine's; two
    /// clients never share one.
    fn opened(&mut self, fh: Fh, ino: Ino) {
        let fresh = self.fhs.insert(fh.0, ino).is_none();
        assert!(fresh, "engine issued handle {} twice", fh.0);
    }

    /// The calls of the rest of the POSIX file API: special files, unnamed files, rename
    /// modes, fallocate and extended attributes.
    fn dispatch_posix(&mut self, op: u8, d: &mut Dec<'_>, out: &mut Enc) -> Result<()> {
        let st = self.store.clone();
        match op {
            MKNOD => {
                let (parent, name, kind) = (d.u64()?, d.bytes()?, d.kind()?);
                let (perm, rdev, tx) = (d.u32()?, d.u64()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                out.meta(&st.mknod(parent, name, kind, perm, rdev, tx)?);
                self.named_changed(tx, parent, name);
            }
            TMPFILE => {
                let (parent, perm, flags, tx) = (d.u64()?, d.u32()?, d.flags()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                let (meta, fh) = st.tmpfile(parent, perm, flags, tx)?;
                self.opened(fh, meta.ino);
                self.touch(tx, Touched::Inode(meta.ino));
                out.meta(&meta).u64(fh.0);
            }
            RENAME_WITH => {
                let (parent, name) = (d.u64()?, d.bytes()?);
                let (new_parent, new_name) = (d.u64()?, d.bytes()?);
                let (mode, tx) = (d.rename_mode()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                let (moved, replaced) =
                    (self.named(parent, name), self.named(new_parent, new_name));
                st.rename_with(parent, name, new_parent, new_name, mode, tx)?;
                self.named_changed(tx, parent, name);
                self.named_changed(tx, new_parent, new_name);
                self.victim_changed(tx, moved);
                self.victim_changed(tx, replaced);
            }
            FALLOCATE => {
                let (fh, op, off, len) = (self.fh(d.u64()?)?, d.fallocate()?, d.u64()?, d.u64()?);
                d.finish()?;
                st.fallocate(fh, op, off, len)?;
                self.handle_changed(fh);
            }
            GETXATTR => {
                let (ino, name) = (d.u64()?, d.bytes()?);
                d.finish()?;
                out.bytes(&st.getxattr(ino, name)?);
            }
            SETXATTR => {
                let (ino, name, value) = (d.u64()?, d.bytes()?, d.bytes()?);
                let (how, tx) = (d.xattr_set()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                st.setxattr(ino, name, value, how, tx)?;
                self.inode_changed(ino);
                self.touch(tx, Touched::Inode(ino));
            }
            LISTXATTR => {
                let ino = d.u64()?;
                d.finish()?;
                out.byte_list(&st.listxattr(ino)?);
            }
            REMOVEXATTR => {
                let (ino, name, tx) = (d.u64()?, d.bytes()?, d.opt_u64()?);
                d.finish()?;
                let tx = self.opt_tx(tx)?;
                st.removexattr(ino, name, tx)?;
                self.inode_changed(ino);
                self.touch(tx, Touched::Inode(ino));
            }
            _ => return Err(malformed("unknown operation")),
        }
        Ok(())
    }

    /// A name changed (in `tx`, if given).
    fn named_changed(&mut self, tx: Option<TxId>, parent: Ino, name: &[u8]) {
        self.entry_changed(parent, name);
        self.touch(tx, Touched::Entry(parent, name.to_vec()));
    }

    /// An inode a namespace call linked, unlinked or moved (its link count and ctime).
    fn victim_changed(&mut self, tx: Option<TxId>, ino: Option<Ino>) {
        if let Some(ino) = ino {
            self.inode_changed(ino);
            self.touch(tx, Touched::Inode(ino));
        }
    }

    /// The file of an open handle changed.
    fn handle_changed(&self, fh: Fh) {
        if let Some(&ino) = self.fhs.get(&fh.0) {
            self.inode_changed(ino);
        }
    }

    /// A read: its bytes into the shared buffer, or for a larger one into a memory file
    /// passed back with the reply.
    fn read(
        &mut self,
        fh: Fh,
        off: u64,
        len: u64,
        out: &mut Enc,
        out_fd: &mut Option<OwnedFd>,
    ) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| malformed("read length"))?;
        if len <= self.shm()?.data_len() {
            let mut buf = vec![0u8; len];
            let n = self.store.read(fh, off, &mut buf)?;
            self.shm()?.put(&buf[..n])?;
            out.u8(DATA_SHM).u64(n as u64);
            return Ok(());
        }
        let mut buf = vec![0u8; len];
        let n = self.store.read(fh, off, &mut buf)?;
        let mut file = memfile("atomfs-remote-read")?;
        file.write_all(&buf[..n])
            .map_err(|e| local_io("write", e))?;
        out.u8(crate::op::DATA_FD).u64(n as u64);
        *out_fd = Some(file.into());
        Ok(())
    }

    /// The shared memory (its data area carries reads' and writes' bytes).
    fn shm(&mut self) -> Result<&mut Shm> {
        self.channel
            .as_mut()
            .map(Channel::shm_mut)
            .ok_or_else(|| malformed("no shared memory"))
    }

    /// A write's bytes: from the shared buffer, or from the memory file passed with it.
    fn incoming(&mut self, how: u8, len: u64, fd: Option<OwnedFd>) -> Result<Vec<u8>> {
        let len = usize::try_from(len).map_err(|_| malformed("write length"))?;
        match how {
            DATA_SHM => {
                let shm = self.shm()?;
                let mut data = vec![0u8; len];
                shm.get(&mut data)?;
                Ok(data)
            }
            crate::op::DATA_FD => {
                let fd = fd.ok_or_else(|| malformed("write without its data file"))?;
                let mut file = std::fs::File::from(fd);
                let size = file.metadata().map_err(|e| local_io("fstat", e))?.len();
                if size != len as u64 {
                    return Err(malformed("write's data file has another length"));
                }
                let mut data = vec![0u8; len];
                file.seek(SeekFrom::Start(0))
                    .and_then(|_| file.read_exact(&mut data))
                    .map_err(|e| local_io("read", e))?;
                Ok(data)
            }
            _ => Err(malformed("unknown data transport")),
        }
    }
}

/// The transaction number a namespace request named (its last field), for the error that
/// refuses it.
fn foreign_tx(body: &[u8]) -> Option<u64> {
    let tail = body.len().checked_sub(8)?;
    (body.get(tail.checked_sub(1)?) == Some(&1)).then(|| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&body[tail..]);
        u64::from_le_bytes(a)
    })
}

fn local_io(op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: "memory file".into(),
        op,
        source,
    }
}

/// An anonymous memory file (memfd), for data too large for the shared buffer.
pub(crate) fn memfile(name: &str) -> Result<std::fs::File> {
    let name = std::ffi::CString::new(name).map_err(|_| malformed("memfd name"))?;
    // SAFETY: a NUL-terminated name; memfd_create has no other preconditions.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(local_io("memfd_create", std::io::Error::last_os_error()));
    }
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}
