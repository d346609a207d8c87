//! [`RemapStore`]: the engine's state behind one lock, its life cycle (format, open with
//! recovery, unmount) and the [`store::Store`] implementation (`ops`).

mod checkpoint;
mod commit;
mod exchange;
mod limits;
mod ops;
mod posix;
mod recovery;

use crate::format::Format;
use crate::journal::media::{Media, Names};
use crate::journal::Journal;
use crate::namespace::state::State;
use crate::{host_err, CheckpointMode, RemapConfig};
use hostfs::{Capability, HostFs, OpenOptions, RealHostFs};
use parking_lot::{Mutex, MutexGuard};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use store::{Error, Result};

/// Named counters of the engine.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub commits: u64,
    pub commit_blocks: u64,
    pub commit_bytes: u64,
    pub checkpoints: u64,
    pub checkpoint_failures: u64,
    pub remap_calls: u64,
    pub remapped_blocks: u64,
    pub copied_blocks: u64,
    /// Blocks punched out of home files by checkpoints (fallocate PUNCH_HOLE).
    pub punched_blocks: u64,
    pub recovered_records: u64,
    /// Commits that swapped a staged file in (XFS_IOC_EXCHANGE_RANGE).
    pub exchanges: u64,
    /// Exchanges recovery found not yet done and did.
    pub exchanges_redone: u64,
}

pub(crate) struct Inner<H: HostFs> {
    pub(crate) st: State,
    pub(crate) media: Media<H>,
    pub(crate) journal: Journal,
    /// The store's on-media format (a format 1 store stays in format 1).
    pub(crate) format: Format,
    pub(crate) mode: CheckpointMode,
    pub(crate) config: RemapConfig,
    pub(crate) counters: Counters,
    /// Set when a commit's write or sync failed: the store then refuses every change (its
    /// durable state is unknown until it is opened again and recovered).
    pub(crate) failed: Option<String>,
    pub(crate) closed: bool,
    /// Block events for the FTL model, while tracing.
    pub(crate) trace: Option<Vec<crate::ftl::TraceEvent>>,
}

impl<H: HostFs> Inner<H> {
    pub(crate) fn record(&mut self, e: crate::ftl::TraceEvent) {
        if let Some(t) = self.trace.as_mut() {
            t.push(e);
        }
    }
}

/// The remap engine over any [`HostFs`] store directory (see the crate documentation).
pub struct RemapStore<H: HostFs> {
    inner: Mutex<Inner<H>>,
    /// Others' use of the home's file system, for `statfs` (hostfs::SharedUsage).
    pub(crate) usage: hostfs::SharedUsage,
}

/// The engine on a real directory.
pub type HostRemapStore = RemapStore<RealHostFs>;

/// A store id: distinct for every store created (a precise clock, the process, a counter).
fn new_store_id() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut x = t ^ (u64::from(std::process::id()) << 32) ^ seq.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) | 1
}

fn io(path: &Path, op: &'static str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op,
        source: e,
    }
}

/// The home directory recorded in the pool file at `pool`, and the store id.
pub fn recorded_home(pool: &Path) -> Result<(u64, PathBuf)> {
    let bytes = std::fs::read(pool).map_err(|e| io(pool, "read", e))?;
    let (id, home) = crate::format::decode_pool(&bytes)?;
    let home = PathBuf::from(std::ffi::OsString::from_vec(home));
    if !home.is_absolute() {
        return Err(Error::Corrupt {
            what: format!(
                "{}: recorded home {:?} is not absolute",
                pool.display(),
                home
            ),
            offset: 24,
        });
    }
    Ok((id, home))
}

impl HostRemapStore {
    /// Format a new store: `home` (an existing directory on XFS with reflink or Btrfs, or any
    /// file system with `copy_checkpoint`) holds the journal, the snapshot and the files;
    /// `pool` (a new or empty file) records the store id and the home directory.
    pub fn create(pool: &Path, home: &Path, config: &RemapConfig) -> Result<Self> {
        let home = home
            .canonicalize()
            .map_err(|e| io(home, "open home directory", e))?;
        let fs = RealHostFs::open(&home).map_err(host_err)?;
        let id = new_store_id();
        let record = crate::format::encode_pool(id, home.as_os_str().as_bytes())?;
        let store = Self::create_on(fs, id, config)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(pool)
            .map_err(|e| io(pool, "open", e))?;
        f.write_all(&record).map_err(|e| io(pool, "write", e))?;
        // persist: the pool file names its home; until this, no front end can open the
        // store (a crash leaves an empty pool file and a formatted home directory).
        f.sync_all().map_err(|e| io(pool, "fsync", e))?;
        Ok(store)
    }

    /// Open the store whose pool file is `pool`, in the home directory it records, running
    /// recovery.
    pub fn open(pool: &Path, config: &RemapConfig) -> Result<Self> {
        let (id, home) = recorded_home(pool)?;
        let fs = RealHostFs::open(&home).map_err(|e| match host_err(e) {
            Error::NotFound(_) => Error::NotFound(format!(
                "home directory {} of {} is missing (moved or deleted?)",
                home.display(),
                pool.display()
            )),
            other => other,
        })?;
        Self::open_on(fs, Some(id), config).map_err(|e| match e {
            Error::CrossStore(m) => Error::CrossStore(format!(
                "{} and its home directory {} do not belong together: {m}",
                pool.display(),
                home.display()
            )),
            other => other,
        })
    }
}

impl<H: HostFs> RemapStore<H> {
    /// Format a new store in the home directory `fs` (which must hold no store yet).
    pub fn create_on(fs: H, store_id: u64, config: &RemapConfig) -> Result<Self> {
        Self::create_on_format(fs, store_id, config, Format::NEWEST)
    }

    /// [`create_on`](Self::create_on) in an older on-media format (tests of what such a
    /// store, made by an earlier atomfs, still does).
    #[doc(hidden)]
    pub fn create_on_format(
        fs: H,
        store_id: u64,
        config: &RemapConfig,
        format: Format,
    ) -> Result<Self> {
        let mode = if config.copy_checkpoint {
            CheckpointMode::Copy
        } else {
            CheckpointMode::Remap
        };
        if mode == CheckpointMode::Remap && !fs.capabilities().has(Capability::Reflink) {
            return Err(Error::Unsupported(format!(
                "the remap engine needs reflink (FICLONERANGE), which {} at {} does not offer; \
                 use XFS (reflink=1) or Btrfs, or create it with copy-checkpoint \
                 (-o checkpoint=copy; `--engine remap-copy` in atomfs demo): correct but slower",
                fs.capabilities().fs_type,
                fs.root().display()
            )));
        }
        let names = Names::new();
        let journal = fs
            .open(&names.journal, &OpenOptions::create_new())
            .map_err(|e| match host_err(e) {
                Error::Exists(m) => Error::Exists(format!("{m}: the home directory holds a store")),
                other => other,
            })?;
        fs.write_all_at(
            &journal,
            0,
            &crate::format::encode_journal_header(store_id, format),
        )
        .map_err(host_err)?;
        // persist: the journal header (the store's id) is durable.
        fs.sync_data(&journal).map_err(host_err)?;
        fs.mkdir(&names.files_dir, 0o700).map_err(host_err)?;
        let media = Media::new(fs, names, journal);
        let st = State::empty();
        recovery::write_snapshot(&media, &st, 1, mode, format)?;
        // persist: the journal's and the files directory's entries are durable.
        media.fs.sync_dir(Path::new("")).map_err(host_err)?;
        Self::open_on(media.into_fs(), Some(store_id), config)
    }

    /// Open the store in the home directory `fs`, running recovery (redo of every committed
    /// record, then a checkpoint). `store_id`: the id the journal must carry.
    pub fn open_on(fs: H, store_id: Option<u64>, config: &RemapConfig) -> Result<Self> {
        let inner = recovery::open(fs, store_id, config)?;
        Ok(RemapStore {
            inner: Mutex::new(inner),
            usage: hostfs::SharedUsage::new(),
        })
    }

    pub(crate) fn live(&self) -> Result<MutexGuard<'_, Inner<H>>> {
        let g = self.inner.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        Ok(g)
    }

    /// How checkpoints move data home.
    pub fn checkpoint_mode(&self) -> CheckpointMode {
        self.inner.lock().mode
    }

    /// The engine's counters.
    pub fn counters(&self) -> Counters {
        self.inner.lock().counters
    }

    /// Checkpoint now (remap every committed pair home, reclaim the journal). Returns false
    /// when open transactions or pending O_ATOMIC writes hold it back.
    pub fn checkpoint(&self) -> Result<bool> {
        self.live()?.checkpoint()
    }

    /// The home directory.
    pub fn home(&self) -> PathBuf {
        self.inner.lock().media.fs.root().to_path_buf()
    }

    /// The journal file's path.
    pub fn journal_path(&self) -> PathBuf {
        let g = self.inner.lock();
        g.media.fs.root().join(&g.media.names.journal)
    }

    /// Start recording block events for the FTL model ([`crate::ftl`]).
    pub fn start_trace(&self) {
        self.inner.lock().trace = Some(Vec::new());
    }

    /// The block events recorded since [`start_trace`](Self::start_trace); tracing stops.
    pub fn take_trace(&self) -> Vec<crate::ftl::TraceEvent> {
        self.inner.lock().trace.take().unwrap_or_default()
    }

    /// What the home directory's file system offers, as probed at open.
    pub fn capabilities(&self) -> hostfs::Capabilities {
        self.inner.lock().media.fs.capabilities()
    }

    /// The store's on-media format.
    pub fn format(&self) -> Format {
        self.inner.lock().format
    }

    /// Bytes of journal in use.
    pub fn journal_len(&self) -> u64 {
        self.inner.lock().journal.len_bytes()
    }
}

impl<H: HostFs> Inner<H> {
    pub(crate) fn healthy(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::Io {
                path: self
                    .media
                    .fs
                    .root()
                    .join(&self.media.names.journal)
                    .display()
                    .to_string(),
                op: "commit",
                source: std::io::Error::other(format!(
                    "an earlier commit failed ({why}); reopen the store to recover"
                )),
            }),
            None => Ok(()),
        }
    }
}
