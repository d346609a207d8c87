//! [`MmioStore`]: the Store API over host files, open-file handles, transactions,
//! O_ATOMIC, and the store's life cycle (format, open with recovery, unmount).

use crate::engine::{checkpoint_loop, Shared};
use crate::file::MmioFile;
use crate::host::{rel_path, FileMedia, MediaStat};
use crate::host_media::HostMedia;
use crate::intent::{self, Intent, IntentRecord, TRASH_NAME};
use crate::layout::{self, Superblock, TxFile};
pub use crate::recovery::RecoveryReport;
use crate::{io_err, MmioConfig, MmioError};
use parking_lot::Mutex;
use pmem::{MappedRegion, Region};
use std::any::Any;
use std::collections::HashMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use store::path::check_entry_name;
use store::{
    DirEntry, Error, Fh, FileKind, FsckReport, Ino, Metadata, OpenFlags, Result, SetAttr, StatFs,
    Store, TxId, ROOT_INO,
};

/// Name of the background checkpoint thread (profilers and the bench tell it apart by it).
pub const CHECKPOINT_THREAD_NAME: &str = "mmio-ckpt";

/// The engine over a real directory and a mapped log pool file.
pub type HostMmioStore = MmioStore<MappedRegion, HostMedia>;

/// A transaction's bound files and namespace intents.
type TxParts<R, M> = (Vec<Arc<MmioFile<R, M>>>, Vec<(u32, Intent)>);

struct Handle<R: Region, M: FileMedia> {
    file: Arc<MmioFile<R, M>>,
    flags: OpenFlags,
    /// The file's create was aborted while this handle was open: the file is gone, and every
    /// call through the handle but `release` is NotFound (`Tables::live`).
    gone: bool,
}

#[derive(Default)]
struct FileUse {
    handles: usize,
    atomic_handles: usize,
    tx: Option<u64>,
    /// Unlinked while open: its name now, in the trash (deleted at the last release).
    unlinked: Option<PathBuf>,
}

/// Hasher of the store's tables: their keys are handle, transaction and inode numbers the
/// store or the host hands out (no one picks them to flood a bucket), so one multiply is
/// enough; SipHash cost two lookups' worth on every read, write and fsync.
#[derive(Clone, Copy, Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

struct Tables<R: Region, M: FileMedia> {
    /// Known inodes: ino -> (parent, name).
    names: IdMap<Ino, (Ino, Vec<u8>)>,
    open: IdMap<Ino, (Arc<MmioFile<R, M>>, FileUse)>,
    handles: IdMap<u64, Handle<R, M>>,
    txs: IdMap<u64, TxState>,
    /// Files and directories created by open transactions: ino -> creating transaction.
    /// Such an inode is its creator's until that ends (`check_owner`).
    created: IdMap<Ino, u64>,
}

impl<R: Region, M: FileMedia> Tables<R, M> {
    /// The handle `fh`, if it names a file that still exists.
    fn live(&self, fh: Fh) -> Result<&Handle<R, M>> {
        match self.handles.get(&fh.0) {
            None => Err(Error::BadHandle(fh.0)),
            Some(h) if h.gone => Err(Error::NotFound(format!(
                "inode {} (its create was aborted)",
                h.file.ino
            ))),
            Some(h) => Ok(h),
        }
    }

    /// [`Tables::live`], mutable.
    fn live_mut(&mut self, fh: Fh) -> Result<&mut Handle<R, M>> {
        self.live(fh)?;
        self.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))
    }
}

#[derive(Default)]
struct TxState {
    inos: Vec<Ino>,
    /// Namespace intents of the transaction, oldest first: (record index, intent).
    intents: Vec<(u32, Intent)>,
    trash_seq: u64,
}

/// The mmio engine (see the crate documentation).
pub struct MmioStore<R: Region, M: FileMedia> {
    shared: Arc<Shared<R, M>>,
    tables: Mutex<Tables<R, M>>,
    next_fh: AtomicU64,
    next_tx: AtomicU64,
    closed: AtomicBool,
    root_id: u64,
    checkpointer: Mutex<Option<std::thread::JoinHandle<()>>>,
    recovery: RecoveryReport,
}

fn new_store_id() -> u64 {
    // Not store::now_ns(): that clock is coarse (a scheduler tick), and two stores created in
    // one tick must still get different ids. A precise clock plus a per-process counter.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id() as u64;
    let local = &t as *const u64 as u64;
    let mut x = t
        ^ (pid << 32)
        ^ local.rotate_left(17)
        ^ seq.wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ 0x9E37_79B9_7F4A_7C15;
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) | 1
}

impl HostMmioStore {
    /// Format a new store: `dir` (an existing directory) holds the files, `log_pool` (a new
    /// file, best on tmpfs/DAX) the logs.
    /// The log pool records `dir` (canonical) in its home record, so that
    /// [`open_recorded`](Self::open_recorded) needs only the log pool's path.
    pub fn create(dir: &Path, log_pool: &Path, config: &MmioConfig) -> Result<Self> {
        let dir = dir.canonicalize().map_err(|e| io_err(dir, "open", e))?;
        let media = HostMedia::new(&dir).map_err(|e| io_err(&dir, "open", e))?;
        let record = layout::encode_home(dir.as_os_str().as_bytes())?;
        let pool = MappedRegion::create(log_pool, config.log_pool_len).map_err(pm_err)?;
        pool.write(layout::HOME_RECORD_OFF, &record);
        // persist: the home record is durable before the superblock makes the pool valid, so
        // a valid pool always names its directory.
        pool.persist(layout::HOME_RECORD_OFF, record.len() as u64);
        Self::create_on(pool, media, config)
    }

    /// Open the store whose log pool is `log_pool`, in the home directory it records.
    pub fn open_recorded(log_pool: &Path, config: &MmioConfig) -> Result<Self> {
        let dir = recorded_home(log_pool)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the log pool records no home directory (open it with its directory)",
                log_pool.display()
            ))
        })?;
        check_recorded_home(log_pool, &dir)?;
        Self::open(&dir, log_pool, config).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::NotFound(format!(
                    "home directory {} of {} is missing (moved or deleted?)",
                    dir.display(),
                    log_pool.display()
                ))
            }
            Error::CrossStore(m) => Error::CrossStore(format!(
                "{} and its home directory {} do not belong together: {m}",
                log_pool.display(),
                dir.display()
            )),
            other => other,
        })
    }

    /// Open an existing store, running recovery.
    ///
    /// Nothing in `dir` is changed before its marker file (read without following a
    /// symlink) names the log pool's store: a pool of another store, or one crafted to name
    /// a directory that is no store's, is refused without touching it.
    pub fn open(dir: &Path, log_pool: &Path, config: &MmioConfig) -> Result<Self> {
        let pool = MappedRegion::open(log_pool).map_err(pm_err)?;
        check_marker_read_only(dir, &pool)?;
        let media = HostMedia::new(dir).map_err(|e| io_err(dir, "open", e))?;
        Self::open_on(pool, media, config)
    }
}

/// `dir`'s marker names the store of `pool` (read only; `CrossStore` otherwise).
fn check_marker_read_only(dir: &Path, pool: &MappedRegion) -> Result<()> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if pool.len() < 128 {
        return Err(MmioError::BadMagic.into());
    }
    let mut b = [0u8; 128];
    pool.read(0, &mut b);
    let sb = Superblock::decode(&b, pool.len())?;
    let path = dir.join(crate::host::MARKER_NAME);
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path);
    let mut id = [0u8; 9];
    let found = match opened {
        Ok(mut file) if file.metadata().is_ok_and(|m| m.is_file()) => {
            let n = file.read(&mut id).map_err(|e| io_err(&path, "read", e))?;
            (n == 8).then(|| {
                u64::from_le_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]])
            })
        }
        Ok(_) => None,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            if !dir.is_dir() {
                return Err(io_err(dir, "open", e));
            }
            None
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => None,
        Err(e) => return Err(io_err(&path, "open", e)),
    };
    if found != Some(sb.store_id) {
        return Err(Error::CrossStore(format!(
            "the log pool (store {:#x}) does not belong to {} (its marker names {})",
            sb.store_id,
            dir.display(),
            found
                .map(|m| format!("store {m:#x}"))
                .unwrap_or_else(|| "no store".into())
        )));
    }
    Ok(())
}

/// A recorded home directory is what `create` wrote: an absolute canonical path. Anything
/// else (a relative path, `.` or `..` components, a symlink on the way) is a crafted pool.
fn check_recorded_home(log_pool: &Path, dir: &Path) -> Result<()> {
    use std::path::Component;
    let plain = dir.is_absolute()
        && dir
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let canonical = dir.canonicalize().map(|c| c == dir).unwrap_or(true);
    if plain && canonical {
        return Ok(());
    }
    Err(Error::Corrupt {
        what: format!(
            "{}: the recorded home directory {:?} is not an absolute canonical path",
            log_pool.display(),
            dir.as_os_str()
        ),
        offset: layout::HOME_RECORD_OFF,
    })
}

/// The home directory recorded in the log pool file at `log_pool` (`None` when it records
/// none). Reads the file; never maps or changes it.
pub fn recorded_home(log_pool: &Path) -> Result<Option<PathBuf>> {
    use std::io::Read;
    let file = std::fs::File::open(log_pool).map_err(|e| io_err(log_pool, "open", e))?;
    let file_len = file
        .metadata()
        .map_err(|e| io_err(log_pool, "stat", e))?
        .len();
    let mut page = Vec::with_capacity(layout::SUPERBLOCK_LEN as usize);
    file.take(layout::SUPERBLOCK_LEN)
        .read_to_end(&mut page)
        .map_err(|e| io_err(log_pool, "read", e))?;
    let mut head = [0u8; 128];
    head.copy_from_slice(page.get(..128).ok_or(MmioError::BadMagic)?);
    Superblock::decode(&head, file_len)?;
    let record = page
        .get(layout::HOME_RECORD_OFF as usize..)
        .unwrap_or_default();
    Ok(layout::decode_home(record)?.map(|p| PathBuf::from(std::ffi::OsString::from_vec(p))))
}

fn pm_err(e: pmem::PmError) -> Error {
    match e {
        pmem::PmError::Io { path, op, source } => Error::Io {
            path: path.display().to_string(),
            op,
            source,
        },
        pmem::PmError::Invalid { path, reason } => {
            Error::InvalidArgument(format!("{}: {reason}", path.display()))
        }
    }
}

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    /// Format a store over any log pool region and file media.
    pub fn create_on(pool: R, media: M, config: &MmioConfig) -> Result<Self> {
        check_config(config)?;
        if media
            .marker()
            .map_err(|e| io_err(media.describe().as_ref(), "read marker", e))?
            .is_some()
        {
            return Err(Error::Exists(format!(
                "{} already belongs to an mmio store",
                media.describe()
            )));
        }
        let store_id = new_store_id();
        let sb = Superblock::plan(
            store_id,
            pool.len(),
            config.files_max,
            config.index_entries_max,
            config.tx_records_max,
            config.log_entry_max,
            config.intents_max,
        )?;
        let meta_len = sb.metadata_end() - layout::SUPERBLOCK_LEN;
        pool.fill(layout::SUPERBLOCK_LEN, meta_len, 0);
        // persist: metadata, transaction records, index entries and intents are all free ...
        pool.persist(layout::SUPERBLOCK_LEN, meta_len);
        pool.write(0, &sb.encode());
        // persist: ... before the superblock makes the pool valid.
        pool.persist(0, 128);
        media
            .set_marker(store_id)
            .map_err(|e| io_err(media.describe().as_ref(), "write marker", e))?;
        Self::open_on(pool, media, config)
    }

    /// Open a store over any log pool region and file media, running recovery.
    pub fn open_on(pool: R, media: M, config: &MmioConfig) -> Result<Self> {
        check_config(config)?;
        if pool.len() < 128 {
            return Err(MmioError::BadMagic.into());
        }
        let mut b = [0u8; 128];
        pool.read(0, &mut b);
        let sb = Superblock::decode(&b, pool.len())?;
        let marker = media
            .marker()
            .map_err(|e| io_err(media.describe().as_ref(), "read marker", e))?;
        if marker != Some(sb.store_id) {
            return Err(Error::CrossStore(format!(
                "the log pool (store {:#x}) does not belong to {} (store {})",
                sb.store_id,
                media.describe(),
                marker
                    .map(|m| format!("{m:#x}"))
                    .unwrap_or_else(|| "none".into())
            )));
        }
        let recovery = crate::recovery::recover(&pool, &sb, &media)?;
        if config.prefault_log_pool {
            // After recovery every log entry is free: the bytes of the log area mean nothing
            // (no valid index entry points into it), so writing them changes no state.
            pool.fill(sb.log_off, sb.log_len, 0);
        }
        empty_trash(&media)?;
        let root_id = media
            .stat(Path::new(""))
            .map_err(|e| io_err(media.describe().as_ref(), "stat", e))?
            .id;
        let shared = Arc::new(Shared::new(pool, sb, media, config.clone()));
        let checkpointer = match config.checkpoint_period {
            Some(_) => {
                let weak = Arc::downgrade(&shared);
                let spawned = std::thread::Builder::new()
                    .name(CHECKPOINT_THREAD_NAME.into())
                    .spawn(move || checkpoint_loop(weak))
                    .map_err(|e| Error::Io {
                        path: "mmio checkpoint thread".into(),
                        op: "spawn",
                        source: e,
                    })?;
                Some(spawned)
            }
            None => None,
        };
        let mut names = IdMap::default();
        names.insert(ROOT_INO, (ROOT_INO, Vec::new()));
        Ok(MmioStore {
            shared,
            tables: Mutex::new(Tables {
                names,
                open: IdMap::default(),
                handles: IdMap::default(),
                txs: IdMap::default(),
                created: IdMap::default(),
            }),
            next_fh: AtomicU64::new(1),
            next_tx: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            root_id,
            checkpointer: Mutex::new(checkpointer),
            recovery,
        })
    }

    /// What recovery did when this store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The log pool region (for tools and tests).
    pub fn log_pool(&self) -> &R {
        &self.shared.pool
    }

    /// The host file media.
    pub fn media(&self) -> &M {
        &self.shared.media
    }

    /// Checkpoint every committed log entry of every open file now.
    pub fn checkpoint_all(&self) -> Result<usize> {
        let files: Vec<_> = self
            .tables
            .lock()
            .open
            .values()
            .map(|(f, _)| f.clone())
            .collect();
        let mut n = 0;
        for f in files {
            n += f.checkpoint_committed(&self.shared)?;
        }
        Ok(n)
    }

    /// The logging policy an open file uses in its current epoch.
    pub fn file_policy(&self, fh: Fh) -> Result<layout::Policy> {
        let f = self.handle_file(fh)?;
        Ok(if f.redo.load(Ordering::Acquire) {
            layout::Policy::Redo
        } else {
            layout::Policy::Undo
        })
    }

    /// Live log entries of an open file (committed or not).
    pub fn live_entries(&self, fh: Fh) -> Result<usize> {
        Ok(self.handle_file(fh)?.live_entries())
    }

    fn check(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn ino_of(&self, id: u64) -> Ino {
        if id == self.root_id {
            ROOT_INO
        } else if id == ROOT_INO {
            self.root_id
        } else {
            id
        }
    }

    fn path_of(t: &Tables<R, M>, ino: Ino) -> Result<PathBuf> {
        let mut parts = Vec::new();
        let mut cur = ino;
        let mut guard = 0;
        while cur != ROOT_INO {
            let (parent, name) = t
                .names
                .get(&cur)
                .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
            parts.push(name.clone());
            cur = *parent;
            guard += 1;
            if guard > 4096 {
                return Err(Error::corrupt("namespace loop", ino));
            }
        }
        parts.reverse();
        Ok(rel_path(&parts))
    }

    /// The path of `ino`; an inode not seen in this session (numbers are the host's and
    /// survive a reopen) is found by walking the directory tree, learning names on the way.
    fn path_for(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<PathBuf> {
        if let Ok(p) = Self::path_of(t, ino) {
            return Ok(p);
        }
        let mut stack = vec![ROOT_INO];
        while let Some(dir) = stack.pop() {
            let Ok(dir_path) = Self::path_of(t, dir) else {
                continue;
            };
            let Ok(list) = self.shared.media.read_dir(&dir_path) else {
                continue;
            };
            for (name, st) in list {
                if dir == ROOT_INO && name == TRASH_NAME.as_bytes() {
                    continue;
                }
                let child = self.ino_of(st.id);
                t.names.insert(child, (dir, name));
                if child == ino {
                    return Self::path_of(t, ino);
                }
                if st.kind == FileKind::Dir {
                    stack.push(child);
                }
            }
        }
        Err(Error::NotFound(format!("inode {ino}")))
    }

    fn child_path(&self, t: &mut Tables<R, M>, parent: Ino, name: &[u8]) -> Result<PathBuf> {
        store::path::check_name(name)?;
        if name == b"."
            || name == b".."
            || (parent == ROOT_INO
                && (name == crate::host::MARKER_NAME.as_bytes() || name == TRASH_NAME.as_bytes()))
        {
            return Err(Error::InvalidArgument(format!(
                "reserved name {:?}",
                String::from_utf8_lossy(name)
            )));
        }
        use std::os::unix::ffi::OsStrExt;
        Ok(self
            .path_for(t, parent)?
            .join(std::ffi::OsStr::from_bytes(name)))
    }

    fn meta_of(&self, t: &Tables<R, M>, st: &MediaStat) -> Metadata {
        let ino = self.ino_of(st.id);
        let size = t.open.get(&ino).map(|(f, _)| f.size()).unwrap_or(st.len);
        Metadata {
            ino,
            kind: st.kind,
            size,
            perm: st.perm,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            allocated: size.div_ceil(4096) * 4096,
            atime: st.atime,
            mtime: st.mtime,
            ctime: st.ctime,
        }
    }

    fn stat_path(&self, path: &Path) -> Result<MediaStat> {
        self.shared
            .media
            .stat(path)
            .map_err(|e| io_err(path, "stat", e))
    }

    fn handle_file(&self, fh: Fh) -> Result<Arc<MmioFile<R, M>>> {
        let t = self.tables.lock();
        t.live(fh).map(|h| h.file.clone())
    }

    /// A namespace call in `tx` needs it open: checked after the names and before the
    /// call's own errors (conformance case `namespace_error_order`).
    fn tx_open(t: &Tables<R, M>, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(tx) if !t.txs.contains_key(&tx.0) => Err(Error::NoSuchTransaction(tx.0)),
            _ => Ok(()),
        }
    }

    /// A file or directory created by an open transaction is that transaction's until it
    /// ends (its abort removes it): a change to it made in `tx` (None: outside any
    /// transaction, or O_ATOMIC) fails with FileInTransaction(creator) — the rule of the
    /// Store API (store/src/lib.rs "Transactions").
    fn check_owner(t: &Tables<R, M>, inos: &[Ino], tx: Option<u64>) -> Result<()> {
        for ino in inos {
            match t.created.get(ino) {
                Some(&owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner)),
                _ => {}
            }
        }
        Ok(())
    }

    /// `check_owner` of the directory a new entry `path` goes into, after the call's own
    /// error (the name exists).
    fn check_new_entry(
        &self,
        t: &Tables<R, M>,
        parent: Ino,
        path: &Path,
        tx: Option<TxId>,
    ) -> Result<()> {
        let busy = Self::check_owner(t, &[parent], tx.map(|t| t.0));
        if busy.is_err() && self.shared.media.stat(path).is_ok() {
            return Err(Error::Exists(path.display().to_string()));
        }
        busy
    }

    /// The transaction the writes of file `ino` belong to (the one it is bound to).
    fn bound_tx(t: &Tables<R, M>, ino: Ino) -> Option<u64> {
        t.open.get(&ino).and_then(|(_, u)| u.tx)
    }

    /// Writes of this file are deferred to a commit (transaction or O_ATOMIC).
    fn deferred(t: &Tables<R, M>, ino: Ino) -> bool {
        t.open
            .get(&ino)
            .is_some_and(|(_, u)| u.tx.is_some() || u.atomic_handles > 0)
    }

    /// Close (checkpoint, free the slot) a file that is being unlinked or replaced.
    fn detach_open(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<()> {
        if let Some((f, _)) = t.open.get(&ino) {
            f.close(&self.shared)?;
            let mut st = f.state.write();
            st.path = None;
        }
        Ok(())
    }

    /// Close the file of `ino` if nothing uses it any more.
    fn maybe_close(&self, t: &mut Tables<R, M>, ino: Ino) -> Result<()> {
        let idle = t
            .open
            .get(&ino)
            .is_some_and(|(_, u)| u.handles == 0 && u.tx.is_none());
        if idle {
            if let Some((f, u)) = t.open.remove(&ino) {
                f.close(&self.shared)?;
                if let Some(trash) = u.unlinked {
                    // The slot is free: now the host file may go (its inode number with it).
                    self.shared
                        .media
                        .unlink(&trash)
                        .map_err(|e| io_err(&trash, "unlink", e))?;
                    t.names.remove(&ino);
                }
            }
        }
        Ok(())
    }

    /// Commit several files (and a transaction's namespace intents) as one atomic unit: one
    /// transaction record, one 8-byte commit word. A single file without intents commits with
    /// its own epoch store.
    ///
    /// The outer error is a failure before the commit point (nothing committed); the inner one
    /// a failure after it (committed; recovery finishes what is left).
    fn commit_files(
        &self,
        files: &[Arc<MmioFile<R, M>>],
        tx: Option<(u64, &[(u32, Intent)])>,
    ) -> Result<Result<()>> {
        let mut files: Vec<_> = files.iter().filter(|f| f.needs_commit()).cloned().collect();
        files.sort_by_key(|f| f.slot);
        files.dedup_by_key(|f| f.slot);
        let intents = tx.map_or(&[][..], |(_, i)| i);
        if files.len() <= 1 && intents.is_empty() {
            return files
                .first()
                .map_or(Ok(Ok(())), |f| f.commit(&self.shared).map(Ok));
        }
        let s = &*self.shared;
        if files.len() > s.config.tx_files_max {
            return Err(Error::TooMany {
                what: "files in one transaction",
                max: s.config.tx_files_max as u64,
            });
        }
        let mut guards: Vec<_> = files.iter().map(|f| f.state.write()).collect();
        for (f, st) in files.iter().zip(&guards) {
            f.prepare_commit(s, st)?;
        }
        let record = s.free_tx_records.lock().pop().ok_or(Error::TooMany {
            what: "concurrent multi-file commits (tx_records_max)",
            max: s.sb.tx_records_max as u64,
        })?;
        let list: Vec<TxFile> = files
            .iter()
            .map(|f| TxFile {
                slot: f.slot,
                target_epoch: f.epoch.load(Ordering::Acquire) + 1,
            })
            .collect();
        let at = s.sb.tx_at(record);
        s.pool.write(
            at + 8,
            &layout::encode_tx_body(tx.map_or(0, |(id, _)| id), &list),
        );
        // persist: the record's file list is durable before its commit word.
        s.pool.persist(at + 8, layout::TX_RECORD_LEN - 8);
        s.pool.store_u64(at, layout::TX_COMMITTED);
        // persist: COMMIT POINT of the transaction: recovery bumps every listed epoch and
        // finishes the transaction's namespace intents.
        s.pool.persist(at, 8);
        for tf in &list {
            let e = s.sb.file_meta_at(tf.slot) + layout::fm::EPOCH;
            s.pool.store_u64(e, tf.target_epoch);
            s.pool.flush(e, 8);
        }
        // persist: every file's epoch is bumped.
        s.pool.fence();
        s.counters.tx_commits.fetch_add(1, Ordering::Relaxed);
        let mut first_err = None;
        for ((f, st), tf) in files.iter().zip(guards.iter_mut()).zip(&list) {
            if let Err(e) = f.finish_commit(s, st, tf.target_epoch) {
                first_err.get_or_insert(e);
            }
        }
        drop(guards);
        if !intents.is_empty() {
            if let Err(e) = self.finish_intents(intents) {
                first_err.get_or_insert(e);
            }
        }
        if first_err.is_none() {
            s.pool.store_u64(at, 0);
            // persist: the record is freed only once everything it commits is settled.
            s.pool.persist(at, 8);
            s.free_tx_records.lock().push(record);
        }
        Ok(first_err.map_or(Ok(()), Err))
    }

    /// After a commit: delete what the transaction removed (from the trash), free its intents.
    fn finish_intents(&self, intents: &[(u32, Intent)]) -> Result<()> {
        let s = &*self.shared;
        let mut t = self.tables.lock();
        for (_, it) in intents {
            if let Intent::Removed { b, .. } = it {
                if let Ok(st) = s.media.stat(b) {
                    self.detach_open(&mut t, self.ino_of(st.id))?;
                    t.names.remove(&self.ino_of(st.id));
                }
            }
            intent::finish(&s.media, it)?;
        }
        self.release_intents(intents);
        Ok(())
    }

    fn release_intents(&self, intents: &[(u32, Intent)]) {
        let s = &*self.shared;
        for (idx, _) in intents {
            intent::clear(&s.pool, s.sb.intent_at(*idx));
        }
        // persist: the intents are free.
        s.pool.fence();
        s.free_intents
            .lock()
            .extend(intents.iter().map(|(i, _)| *i));
    }

    /// Undo a transaction's namespace intents, newest first.
    fn undo_intents(&self, t: &mut Tables<R, M>, intents: &[(u32, Intent)]) -> Result<()> {
        let s = &*self.shared;
        let mut first_err = None;
        for (idx, it) in intents.iter().rev() {
            if let Intent::Created { a } = it {
                if let Ok(st) = s.media.stat(a) {
                    let ino = self.ino_of(st.id);
                    if let Err(e) = self.detach_open(t, ino) {
                        first_err.get_or_insert(e);
                    }
                    // The file is gone: its handles answer NotFound from now on, and its
                    // entry leaves the open table, so that a new file given the same host
                    // inode number later is never reached through them.
                    if let Some((f, _)) = t.open.remove(&ino) {
                        for h in t.handles.values_mut() {
                            if Arc::ptr_eq(&h.file, &f) {
                                h.gone = true;
                            }
                        }
                    }
                    t.names.remove(&ino);
                }
            }
            match intent::undo(&s.media, it) {
                Ok(()) => {
                    intent::clear(&s.pool, s.sb.intent_at(*idx));
                    // persist: this intent is undone and free (older ones stay valid).
                    s.pool.fence();
                    s.free_intents.lock().push(*idx);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            if let Intent::Removed { a, .. } | Intent::Renamed { a, .. } | Intent::Attr { a, .. } =
                it
            {
                self.relearn(t, a);
            }
        }
        self.refresh_paths(t);
        first_err.map_or(Ok(()), Err)
    }

    /// Learn the inode numbers along `path` (after an undo moved something back there).
    fn relearn(&self, t: &mut Tables<R, M>, path: &Path) {
        let mut cur = ROOT_INO;
        let mut prefix = PathBuf::new();
        for c in path.components() {
            prefix.push(c);
            let Ok(st) = self.shared.media.stat(&prefix) else {
                return;
            };
            let ino = self.ino_of(st.id);
            use std::os::unix::ffi::OsStrExt;
            t.names
                .insert(ino, (cur, c.as_os_str().as_bytes().to_vec()));
            cur = ino;
        }
    }

    /// Give every open file its current host path.
    fn refresh_paths(&self, t: &Tables<R, M>) {
        for (ino, (f, _)) in &t.open {
            if let Ok(p) = Self::path_of(t, *ino) {
                let mut st = f.state.write();
                if st.path.is_some() {
                    st.path = Some(p);
                }
            }
        }
    }

    /// Write a durable intent for transaction `tx` before its host operation.
    fn log_intent(&self, t: &mut Tables<R, M>, tx: TxId, it: Intent) -> Result<u32> {
        if !t.txs.contains_key(&tx.0) {
            return Err(Error::NoSuchTransaction(tx.0));
        }
        let s = &*self.shared;
        let idx = s.free_intents.lock().pop().ok_or(Error::TooMany {
            what: "namespace operations in open transactions (intents_max)",
            max: s.sb.intents_max as u64,
        })?;
        let rec = IntentRecord {
            txid: tx.0,
            seq: s.intent_seq.fetch_add(1, Ordering::Relaxed),
            intent: it.clone(),
        };
        if let Err(e) = intent::publish(&s.pool, s.sb.intent_at(idx), &rec) {
            s.free_intents.lock().push(idx);
            return Err(e);
        }
        if let Some(state) = t.txs.get_mut(&tx.0) {
            state.intents.push((idx, it));
        }
        Ok(idx)
    }

    /// The host operation of the newest intent failed: withdraw the intent.
    fn withdraw_intent(&self, t: &mut Tables<R, M>, tx: TxId) {
        let s = &*self.shared;
        if let Some((idx, _)) = t.txs.get_mut(&tx.0).and_then(|st| st.intents.pop()) {
            intent::clear(&s.pool, s.sb.intent_at(idx));
            s.pool.fence();
            s.free_intents.lock().push(idx);
        }
    }

    /// Move `path` to the trash under an intent of `tx`; returns the trash path.
    fn remove_in_tx(&self, t: &mut Tables<R, M>, tx: TxId, path: &Path) -> Result<PathBuf> {
        let n = t.txs.get_mut(&tx.0).map(|st| {
            st.trash_seq += 1;
            st.trash_seq
        });
        let n = n.ok_or(Error::NoSuchTransaction(tx.0))?;
        let trash = Path::new(TRASH_NAME).join(format!("{}-{n}", tx.0));
        self.log_intent(
            t,
            tx,
            Intent::Removed {
                a: path.to_path_buf(),
                b: trash.clone(),
            },
        )?;
        if let Err(e) = self.shared.media.rename(path, &trash) {
            self.withdraw_intent(t, tx);
            return Err(io_err(path, "rename to trash", e));
        }
        let trash_id = self.stat_path(Path::new(TRASH_NAME))?.id;
        let trash_ino = self.ino_of(trash_id);
        t.names
            .insert(trash_ino, (ROOT_INO, TRASH_NAME.as_bytes().to_vec()));
        if let Ok(st) = self.stat_path(&trash) {
            t.names.insert(
                self.ino_of(st.id),
                (trash_ino, format!("{}-{n}", tx.0).into_bytes()),
            );
        }
        self.refresh_paths(t);
        Ok(trash)
    }

    fn files_of_handles(&self, fhs: &[Fh]) -> Result<Vec<Arc<MmioFile<R, M>>>> {
        let t = self.tables.lock();
        fhs.iter()
            .map(|&fh| t.live(fh).map(|h| h.file.clone()))
            .collect()
    }

    /// Map a file for Libnvmmio-style access (see [`crate::NvMap`]).
    pub fn nvmmap(&self, path: &[u8]) -> Result<crate::NvMap<'_, R, M>> {
        let meta = store::resolve(self, path)?;
        let fh = self.open(
            meta.ino,
            OpenFlags {
                read: true,
                write: true,
                append: false,
                atomic: true,
            },
        )?;
        Ok(crate::NvMap::new(self, fh))
    }
}

/// Create the trash directory, or delete what it holds: after recovery every intent is
/// settled, so what is left are files unlinked while open before a crash.
fn empty_trash<M: FileMedia>(media: &M) -> Result<()> {
    let trash = Path::new(TRASH_NAME);
    match media.mkdir(trash, 0o700) {
        Ok(_) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(io_err(trash, "mkdir trash", e)),
    }
    let entries = media
        .read_dir(trash)
        .map_err(|e| io_err(trash, "readdir", e))?;
    for (name, st) in entries {
        use std::os::unix::ffi::OsStrExt;
        let p = trash.join(std::ffi::OsStr::from_bytes(&name));
        let r = if st.kind == FileKind::Dir {
            media.rmdir(&p)
        } else {
            media.unlink(&p)
        };
        r.map_err(|e| io_err(&p, "empty trash", e))?;
    }
    Ok(())
}

fn check_config(c: &MmioConfig) -> Result<()> {
    let ok = c.log_entry_max.is_power_of_two()
        && c.log_entry_max >= layout::BLOCK_SIZE
        && c.log_entry_max <= 1 << 30
        && c.files_max > 0
        && c.index_entries_max > 0
        && c.tx_records_max > 0
        && c.tx_files_max >= 1
        && c.tx_files_max <= layout::TX_FILES_MAX
        && c.redo_write_percent_min <= 100;
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "bad mmio configuration {c:?}"
        )))
    }
}

impl<R: Region, M: FileMedia> Drop for MmioStore<R, M> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.work_cv.notify_all();
        if let Some(t) = self.checkpointer.lock().take() {
            let _ = t.join();
        }
    }
}

impl<R: Region, M: FileMedia> Store for MmioStore<R, M> {
    fn engine_name(&self) -> String {
        format!("mmio ({:?})", self.shared.config.policy_mode).to_lowercase()
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.check()?;
        let mut t = self.tables.lock();
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        let ino = self.ino_of(st.id);
        t.names.insert(ino, (parent, name.to_vec()));
        Ok(self.meta_of(&t, &st))
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.check()?;
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let st = self.stat_path(&path)?;
        Ok(self.meta_of(&t, &st))
    }

    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.path_for(&mut t, ino)?;
        if attr.uid.is_some() || attr.gid.is_some() {
            return Err(Error::Unsupported("chown on the mmio engine".into()));
        }
        Self::check_owner(&t, &[ino], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            let old = self.stat_path(&path)?;
            let it = Intent::Attr {
                a: path.clone(),
                perm: old.perm,
                atime: old.atime,
                mtime: old.mtime,
            };
            self.log_intent(&mut t, tx, it)?;
        }
        if let Some(perm) = attr.perm {
            self.shared
                .media
                .set_perm(&path, perm)
                .map_err(|e| io_err(&path, "chmod", e))?;
        }
        if attr.atime.is_some() || attr.mtime.is_some() {
            self.shared
                .media
                .set_times(&path, attr.atime, attr.mtime)
                .map_err(|e| io_err(&path, "utimes", e))?;
        }
        let st = self.stat_path(&path)?;
        Ok(self.meta_of(&t, &st))
    }

    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        self.check_new_entry(&t, parent, &path, tx)?;
        let st = self.created_in_tx(&mut t, tx, &path, |m| m.create(&path, perm), "create")?;
        t.names.insert(self.ino_of(st.id), (parent, name.to_vec()));
        if let Some(tx) = tx {
            t.created.insert(self.ino_of(st.id), tx.0);
        }
        Ok(self.meta_of(&t, &st))
    }

    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.check()?;
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        self.check_new_entry(&t, parent, &path, tx)?;
        let st = self.created_in_tx(&mut t, tx, &path, |m| m.mkdir(&path, perm), "mkdir")?;
        t.names.insert(self.ino_of(st.id), (parent, name.to_vec()));
        if let Some(tx) = tx {
            t.created.insert(self.ino_of(st.id), tx.0);
        }
        Ok(self.meta_of(&t, &st))
    }

    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check()?;
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        if st.kind == FileKind::Dir {
            return Err(Error::IsDir(path.display().to_string()));
        }
        Self::check_owner(&t, &[parent, self.ino_of(st.id)], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            // In a transaction the name moves to the trash (an open file keeps working).
            self.remove_in_tx(&mut t, tx, &path)?;
            return Ok(());
        }
        let ino = self.ino_of(st.id);
        if t.open.contains_key(&ino) {
            // An open file lives on: its name moves to the trash (one durable rename) and the
            // host file is deleted at the last release (or by the next open after a crash).
            let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
            let trash = Path::new(TRASH_NAME).join(format!("unlinked-{ino}-{n}"));
            self.shared
                .media
                .rename(&path, &trash)
                .map_err(|e| io_err(&path, "unlink", e))?;
            let trash_ino = self.ino_of(self.stat_path(Path::new(TRASH_NAME))?.id);
            t.names
                .insert(trash_ino, (ROOT_INO, TRASH_NAME.as_bytes().to_vec()));
            t.names
                .insert(ino, (trash_ino, format!("unlinked-{ino}-{n}").into_bytes()));
            if let Some((_, u)) = t.open.get_mut(&ino) {
                u.unlinked = Some(trash);
            }
            self.refresh_paths(&t);
            return Ok(());
        }
        // The file's slot is freed before the host name goes, so that a reused inode number
        // can never be mistaken for it at recovery (here: the file is not open, no slot).
        self.shared
            .media
            .unlink(&path)
            .map_err(|e| io_err(&path, "unlink", e))?;
        t.names.remove(&ino);
        Ok(())
    }

    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.check()?;
        check_entry_name(name)?;
        let mut t = self.tables.lock();
        Self::tx_open(&t, tx)?;
        let path = self.child_path(&mut t, parent, name)?;
        let st = self.stat_path(&path)?;
        if st.kind != FileKind::Dir {
            return Err(Error::NotDir(path.display().to_string()));
        }
        if !self
            .shared
            .media
            .read_dir(&path)
            .map_err(|e| io_err(&path, "readdir", e))?
            .is_empty()
        {
            return Err(Error::NotEmpty(path.display().to_string()));
        }
        Self::check_owner(&t, &[parent, self.ino_of(st.id)], tx.map(|t| t.0))?;
        if let Some(tx) = tx {
            self.remove_in_tx(&mut t, tx, &path)?;
            return Ok(());
        }
        self.shared
            .media
            .rmdir(&path)
            .map_err(|e| io_err(&path, "rmdir", e))?;
        t.names.remove(&self.ino_of(st.id));
        Ok(())
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.check()?;
        check_entry_name(name)?;
        check_entry_name(new_name)?;
        let Some(tx) = tx else {
            return self.rename_alone(parent, name, new_parent, new_name);
        };
        let mut t = self.tables.lock();
        Self::tx_open(&t, Some(tx))?;
        let from = self.child_path(&mut t, parent, name)?;
        let to = self.child_path(&mut t, new_parent, new_name)?;
        let moved = self.stat_path(&from)?;
        let mut changed = vec![parent, new_parent, self.ino_of(moved.id)];
        if let Ok(target) = self.stat_path(&to) {
            if target.id == moved.id {
                return Ok(()); // rename onto itself changes nothing
            }
            changed.push(self.ino_of(target.id));
        }
        Self::check_owner(&t, &changed, Some(tx.0))?;
        self.rename_in_tx(
            &mut t,
            tx,
            (parent, name, &from),
            (new_parent, new_name, &to),
            &moved,
        )
    }

    fn link(
        &self,
        _ino: Ino,
        _new_parent: Ino,
        _new_name: &[u8],
        _tx: Option<TxId>,
    ) -> Result<Metadata> {
        Err(Error::Unsupported("hard links on the mmio engine".into()))
    }

    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        self.check()?;
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let list = self
            .shared
            .media
            .read_dir(&path)
            .map_err(|e| io_err(&path, "readdir", e))?;
        Ok(list
            .into_iter()
            .filter(|(name, _)| ino != ROOT_INO || name != TRASH_NAME.as_bytes())
            .map(|(name, st)| {
                let child = self.ino_of(st.id);
                t.names.insert(child, (ino, name.clone()));
                DirEntry {
                    name,
                    ino: child,
                    kind: st.kind,
                }
            })
            .collect())
    }

    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.check()?;
        let mut t = self.tables.lock();
        let path = self.path_for(&mut t, ino)?;
        let file = match t.open.get(&ino) {
            Some((f, _)) => f.clone(),
            None => {
                let st = self.stat_path(&path)?;
                match st.kind {
                    FileKind::Dir => return Err(Error::IsDir(path.display().to_string())),
                    FileKind::Symlink => return Err(Error::Unsupported("symlinks".into())),
                    FileKind::File => {}
                }
                let f = MmioFile::open(&self.shared, ino, path, st.id, st.len)?;
                t.open.insert(ino, (f.clone(), FileUse::default()));
                f
            }
        };
        if let Some((_, u)) = t.open.get_mut(&ino) {
            u.handles += 1;
            if flags.atomic {
                u.atomic_handles += 1;
            }
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        t.handles.insert(
            fh,
            Handle {
                file,
                flags,
                gone: false,
            },
        );
        Ok(Fh(fh))
    }

    fn release(&self, fh: Fh) -> Result<()> {
        self.check()?;
        let mut t = self.tables.lock();
        let h = t.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        if h.gone {
            // Its file was closed and forgotten when the create was undone.
            return Ok(());
        }
        let ino = h.file.ino;
        let mut drop_pending = false;
        if let Some((_, u)) = t.open.get_mut(&ino) {
            u.handles -= 1;
            if h.flags.atomic {
                u.atomic_handles -= 1;
                drop_pending = u.atomic_handles == 0 && u.tx.is_none();
            }
        }
        if drop_pending {
            // Pending O_ATOMIC writes not yet fsynced are dropped, as a crash would.
            h.file.abort(&self.shared)?;
        }
        self.maybe_close(&mut t, ino)
    }

    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        let (file, flags) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            (h.file.clone(), h.flags)
        };
        if !flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        file.read(&self.shared, off, buf)
    }

    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.check()?;
        let (file, flags, deferred) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            if h.flags.write && !data.is_empty() {
                let ino = h.file.ino;
                Self::check_owner(&t, &[ino], Self::bound_tx(&t, ino))?;
            }
            (h.file.clone(), h.flags, Self::deferred(&t, h.file.ino))
        };
        if !flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let off = if flags.append { file.size() } else { off };
        if let Err(e) = file.write(&self.shared, off, data, !deferred) {
            if !deferred {
                // The call is its own transaction: the pieces it logged before failing (a full
                // log, say) must not ride along with the next call's commit.
                let _ = file.abort(&self.shared);
            }
            return Err(e);
        }
        if !deferred {
            // A call outside a transaction is its own transaction: durable when it returns.
            if let Err(e) = file.commit(&self.shared) {
                let _ = file.abort(&self.shared);
                return Err(e);
            }
        }
        Ok(data.len())
    }

    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.check()?;
        let (file, flags, deferred) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            if h.flags.write {
                let ino = h.file.ino;
                Self::check_owner(&t, &[ino], Self::bound_tx(&t, ino))?;
            }
            (h.file.clone(), h.flags, Self::deferred(&t, h.file.ino))
        };
        if !flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let done = file.set_len(&self.shared, len).and_then(|_| {
            if deferred {
                Ok(())
            } else {
                file.commit(&self.shared)
            }
        });
        if done.is_err() && !deferred {
            // As in `write`: a failed call outside a transaction leaves nothing behind.
            let _ = file.abort(&self.shared);
        }
        done
    }

    fn fsync(&self, fh: Fh, _datasync: bool) -> Result<()> {
        self.check()?;
        let (file, in_tx) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            let in_tx = t.open.get(&h.file.ino).is_some_and(|(_, u)| u.tx.is_some());
            (h.file.clone(), in_tx)
        };
        if in_tx {
            return Ok(()); // the transaction's commit makes it durable
        }
        file.commit(&self.shared)
    }

    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        self.check()?;
        let t = self.tables.lock();
        let file = t.live(fh)?.file.clone();
        let unlinked = t
            .open
            .get(&file.ino)
            .is_some_and(|(_, u)| u.unlinked.is_some());
        let path = file.state.read().path.clone();
        match path.map(|p| self.stat_path(&p)) {
            Some(Ok(st)) => {
                let mut meta = self.meta_of(&t, &st);
                meta.ino = file.ino;
                if unlinked {
                    meta.nlink = 0;
                }
                Ok(meta)
            }
            _ => Ok(Metadata {
                ino: file.ino,
                kind: FileKind::File,
                size: file.size(),
                perm: 0,
                nlink: 0,
                uid: 0,
                gid: 0,
                allocated: 0,
                atime: 0,
                mtime: 0,
                ctime: 0,
            }),
        }
    }

    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        self.check()?;
        let file = {
            let mut t = self.tables.lock();
            let h = t.live_mut(fh)?;
            if h.flags.atomic == atomic {
                return Ok(());
            }
            h.flags.atomic = atomic;
            let file = h.file.clone();
            if let Some((_, u)) = t.open.get_mut(&file.ino) {
                if atomic {
                    u.atomic_handles += 1;
                } else {
                    u.atomic_handles -= 1;
                }
            }
            file
        };
        if !atomic {
            file.commit(&self.shared)?;
        }
        Ok(())
    }

    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        self.check()?;
        let files = self.files_of_handles(fhs)?;
        self.commit_files(&files, None)?
    }

    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        self.check()?;
        for f in self.files_of_handles(fhs)? {
            f.abort(&self.shared)?;
        }
        Ok(())
    }

    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.check()?;
        let id = {
            let t = self.tables.lock();
            if t.txs.len() >= self.shared.config.transactions_max {
                return Err(Error::TooMany {
                    what: "open transactions",
                    max: self.shared.config.transactions_max as u64,
                });
            }
            self.next_tx.fetch_add(1, Ordering::Relaxed)
        };
        self.tables.lock().txs.insert(id, TxState::default());
        for &fh in files {
            if let Err(e) = self.tx_add(TxId(id), fh) {
                let _ = self.tx_abort(TxId(id));
                return Err(e);
            }
        }
        Ok(TxId(id))
    }

    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        self.check()?;
        let mut t = self.tables.lock();
        if !t.txs.contains_key(&tx.0) {
            return Err(Error::NoSuchTransaction(tx.0));
        }
        let file = t.live(fh)?.file.clone();
        let len = t.txs.get(&tx.0).map_or(0, |st| st.inos.len());
        let bound = t.open.get(&file.ino).ok_or(Error::BadHandle(fh.0))?.1.tx;
        match bound {
            Some(other) if other == tx.0 => return Ok(()),
            Some(other) => return Err(Error::FileInTransaction(other)),
            None => {}
        }
        Self::check_owner(&t, &[file.ino], Some(tx.0))?;
        if len >= self.shared.config.tx_files_max {
            return Err(Error::TooMany {
                what: "files in one transaction",
                max: self.shared.config.tx_files_max as u64,
            });
        }
        if let Some((_, u)) = t.open.get_mut(&file.ino) {
            u.tx = Some(tx.0);
        }
        // Writes made before the binding are not part of the transaction.
        if file.needs_commit()
            && t.open
                .get(&file.ino)
                .is_some_and(|(_, u)| u.atomic_handles == 0)
        {
            file.commit(&self.shared)?;
        }
        if let Some(state) = t.txs.get_mut(&tx.0) {
            state.inos.push(file.ino);
        }
        Ok(())
    }

    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.check()?;
        let (files, intents) = self.tx_parts(tx)?;
        let result = match self.commit_files(&files, Some((tx.0, &intents))) {
            Ok(after) => after,
            Err(before) => {
                // Nothing was committed: roll the whole transaction back.
                for f in &files {
                    let _ = f.abort(&self.shared);
                }
                let mut t = self.tables.lock();
                let _ = self.undo_intents(&mut t, &intents);
                Err(before)
            }
        };
        self.end_tx(tx)?;
        result
    }

    fn tx_abort(&self, tx: TxId) -> Result<()> {
        self.check()?;
        let (files, intents) = self.tx_parts(tx)?;
        let mut first_err = None;
        for f in &files {
            if let Err(e) = f.abort(&self.shared) {
                first_err.get_or_insert(e);
            }
        }
        {
            let mut t = self.tables.lock();
            if let Err(e) = self.undo_intents(&mut t, &intents) {
                first_err.get_or_insert(e);
            }
        }
        self.end_tx(tx)?;
        first_err.map_or(Ok(()), Err)
    }

    fn statfs(&self) -> Result<StatFs> {
        self.check()?;
        let s = &self.shared;
        // Files live on the host file system: its space is the store's. (The log pool's own
        // occupancy is in `stats`: log_free_bytes.)
        let (block_size, blocks_total, blocks_free) = s
            .media
            .space()
            .map_err(|e| io_err(s.media.describe().as_ref(), "statvfs", e))?;
        let free_slots = s.free_file_slots.lock().len() as u64;
        Ok(StatFs {
            block_size,
            blocks_total,
            blocks_free,
            inodes_total: s.sb.files_max as u64,
            inodes_free: free_slots,
            name_max: store::NAME_MAX as u64,
        })
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.shared.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ps = self.shared.pool.stats();
        vec![
            ("writes".into(), g(&c.writes)),
            ("reads".into(), g(&c.reads)),
            ("bytes_logged".into(), g(&c.bytes_logged)),
            ("bytes_direct".into(), g(&c.bytes_direct)),
            ("commits".into(), g(&c.commits)),
            ("tx_commits".into(), g(&c.tx_commits)),
            ("aborts".into(), g(&c.aborts)),
            ("entries_created".into(), g(&c.entries_created)),
            (
                "entries_checkpointed".into(),
                g(&c.background.entries_checkpointed),
            ),
            ("sync_checkpoints".into(), g(&c.sync_checkpoints)),
            (
                "background_checkpoints".into(),
                g(&c.background.background_checkpoints),
            ),
            ("policy_switches".into(), g(&c.policy_switches)),
            (
                "log_free_bytes".into(),
                self.shared.log_space.lock().free_bytes(),
            ),
            ("pool_fences".into(), ps.fences),
            ("pool_lines_flushed".into(), ps.lines_flushed),
            ("pool_bytes_stored".into(), ps.bytes_stored),
        ]
    }

    fn fsck(&self) -> Result<FsckReport> {
        self.check()?;
        Ok(crate::nvmmap::fsck(&self.shared))
    }

    fn unmount(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::Closed);
        }
        let files: Vec<_> = {
            let mut t = self.tables.lock();
            t.handles.clear();
            t.txs.clear();
            t.open
                .drain()
                .map(|(_, (f, u))| (f, u.unlinked))
                .collect::<Vec<_>>()
        };
        let mut first_err = None;
        for (f, unlinked) in files {
            if let Err(e) = f.close(&self.shared) {
                first_err.get_or_insert(e);
            }
            if let Some(trash) = unlinked {
                if let Err(e) = self.shared.media.unlink(&trash) {
                    first_err.get_or_insert(io_err(&trash, "unlink", e));
                }
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.work_cv.notify_all();
        if let Some(t) = self.checkpointer.lock().take() {
            let _ = t.join();
        }
        first_err.map_or(Ok(()), Err)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    fn end_tx(&self, tx: TxId) -> Result<()> {
        let mut t = self.tables.lock();
        let state = t.txs.remove(&tx.0).unwrap_or_default();
        t.created.retain(|_, owner| *owner != tx.0);
        for ino in state.inos {
            if let Some((_, u)) = t.open.get_mut(&ino) {
                u.tx = None;
            }
            self.maybe_close(&mut t, ino)?;
        }
        Ok(())
    }

    fn tx_parts(&self, tx: TxId) -> Result<TxParts<R, M>> {
        let t = self.tables.lock();
        let state = t.txs.get(&tx.0).ok_or(Error::NoSuchTransaction(tx.0))?;
        let files = state
            .inos
            .iter()
            .filter_map(|i| t.open.get(i).map(|(f, _)| f.clone()))
            .collect();
        Ok((files, state.intents.clone()))
    }

    /// Create a file or directory, under a `Created` intent when in a transaction.
    fn created_in_tx(
        &self,
        t: &mut Tables<R, M>,
        tx: Option<TxId>,
        path: &Path,
        op: impl FnOnce(&M) -> std::io::Result<MediaStat>,
        what: &'static str,
    ) -> Result<MediaStat> {
        if let Some(tx) = tx {
            if self.shared.media.stat(path).is_ok() {
                return Err(Error::Exists(path.display().to_string()));
            }
            self.log_intent(
                t,
                tx,
                Intent::Created {
                    a: path.to_path_buf(),
                },
            )?;
        }
        match op(&self.shared.media) {
            Ok(st) => Ok(st),
            Err(e) => {
                if let Some(tx) = tx {
                    self.withdraw_intent(t, tx);
                }
                Err(io_err(path, what, e))
            }
        }
    }

    /// rename(2) inside a transaction: a replaced target goes to the trash first.
    fn rename_in_tx(
        &self,
        t: &mut Tables<R, M>,
        tx: TxId,
        from: (Ino, &[u8], &Path),
        to: (Ino, &[u8], &Path),
        moved: &MediaStat,
    ) -> Result<()> {
        let (from_path, to_path) = (from.2, to.2);
        if let Ok(target) = self.stat_path(to_path) {
            if target.id == moved.id {
                return Ok(());
            }
            let shown = to_path.display().to_string();
            match (moved.kind == FileKind::Dir, target.kind == FileKind::Dir) {
                (false, true) => return Err(Error::IsDir(shown)),
                (true, false) => return Err(Error::NotDir(shown)),
                (true, true) => {
                    if !self
                        .shared
                        .media
                        .read_dir(to_path)
                        .map_err(|e| io_err(to_path, "readdir", e))?
                        .is_empty()
                    {
                        return Err(Error::NotEmpty(shown));
                    }
                }
                (false, false) => {}
            }
            if to_path.starts_with(from_path) {
                return Err(Error::InvalidArgument(format!(
                    "rename of {} into itself",
                    from_path.display()
                )));
            }
            self.remove_in_tx(t, tx, to_path)?;
        }
        self.log_intent(
            t,
            tx,
            Intent::Renamed {
                a: from_path.to_path_buf(),
                b: to_path.to_path_buf(),
            },
        )?;
        if let Err(e) = self.shared.media.rename(from_path, to_path) {
            self.withdraw_intent(t, tx);
            return Err(io_err(from_path, "rename", e));
        }
        t.names.insert(self.ino_of(moved.id), (to.0, to.1.to_vec()));
        let _ = from;
        self.refresh_paths(t);
        Ok(())
    }

    /// A rename outside a transaction runs as a transaction of its own. On the host a
    /// rename is two directory entries that become durable independently: a crash before
    /// the directories are synced may keep both names, or (renaming over another file)
    /// the old target and the source. The transaction's intents (the replaced target to
    /// the trash, then the move) let recovery settle either way.
    fn rename_alone(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<()> {
        let tx = self.tx_begin(&[])?;
        match self.rename(parent, name, new_parent, new_name, Some(tx)) {
            Ok(()) => self.tx_commit(tx),
            Err(e) => {
                let _ = self.tx_abort(tx);
                Err(e)
            }
        }
    }

    /// Drop the store without unmounting (as a crash at a quiescent point, for tests):
    /// nothing is checkpointed or closed; the log pool keeps whatever it holds.
    pub fn crash(self) {
        self.closed.store(true, Ordering::Release);
        drop(self);
    }
}
