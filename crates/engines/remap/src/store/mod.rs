//! [`RemapStore`]: the engine's state behind one lock, its life cycle (format, open with
//! recovery, unmount) and the [`store::Store`] implementation (`ops`).

mod checkpoint;
mod commit;
mod ops;
mod recovery;

use crate::journal::media::{Media, Names};
use crate::journal::Journal;
use crate::namespace::state::State;
use crate::{host_err, CheckpointMode, RemapConfig};
use hostfs::{Capability, HostFs, OpenOptions, RealHostFs};
use parking_lot::{Mutex, MutexGuard};
use std::path::Path;
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
    pub recovered_records: u64,
}

pub(crate) struct Inner<H: HostFs> {
    pub(crate) st: State,
    pub(crate) media: Media<H>,
    pub(crate) journal: Journal,
    pub(crate) mode: CheckpointMode,
    pub(crate) config: RemapConfig,
    pub(crate) counters: Counters,
    /// Set when a commit's write or sync failed: the store then refuses every change (its
    /// durable state is unknown until it is opened again and recovered).
    pub(crate) failed: Option<String>,
    pub(crate) closed: bool,
}

/// The remap engine over any [`HostFs`] store directory (see the crate documentation).
pub struct RemapStore<H: HostFs> {
    inner: Mutex<Inner<H>>,
}

/// The engine on a real directory.
pub type HostRemapStore = RemapStore<RealHostFs>;

fn split(path: &Path) -> Result<(&Path, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{}: not a file name", path.display())))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name.to_string()))
}

impl HostRemapStore {
    /// Format a new store whose journal is the file `path`; its directory is the store
    /// directory (home files in `<path>.files/`, the snapshot in `<path>.meta`).
    pub fn create(path: &Path, config: &RemapConfig) -> Result<Self> {
        let (dir, name) = split(path)?;
        let fs = RealHostFs::open(dir).map_err(host_err)?;
        Self::create_on(fs, &name, config)
    }

    /// Open the store whose journal is `path`, running recovery.
    pub fn open(path: &Path, config: &RemapConfig) -> Result<Self> {
        let (dir, name) = split(path)?;
        let fs = RealHostFs::open(dir).map_err(host_err)?;
        Self::open_on(fs, &name, config)
    }
}

impl<H: HostFs> RemapStore<H> {
    /// Format a new store in `fs` named `name` (the journal file's name).
    pub fn create_on(fs: H, name: &str, config: &RemapConfig) -> Result<Self> {
        let mode = if config.copy_checkpoint {
            CheckpointMode::Copy
        } else {
            CheckpointMode::Remap
        };
        if mode == CheckpointMode::Remap && !fs.capabilities().has(Capability::Reflink) {
            return Err(Error::Unsupported(format!(
                "the remap engine needs reflink (FICLONERANGE), which {} at {} does not offer; \
                 use XFS (reflink=1) or Btrfs, or pass --copy-checkpoint (option \
                 copy_checkpoint=true: checkpoint by copy, correct but slower)",
                fs.capabilities().fs_type,
                fs.root().display()
            )));
        }
        let names = Names::new(name);
        let journal = fs
            .open(&names.journal, &OpenOptions::create_new())
            .map_err(host_err)?;
        fs.write_all_at(&journal, 0, &crate::format::encode_journal_header())
            .map_err(host_err)?;
        // persist: the journal header (what identifies the store) is durable.
        fs.sync_data(&journal).map_err(host_err)?;
        fs.mkdir(&names.files_dir, 0o755).map_err(host_err)?;
        let media = Media::new(fs, names, journal);
        let st = State::empty();
        recovery::write_snapshot(&media, &st, 1, mode)?;
        // persist: the journal's and the home directory's entries are durable.
        media.fs.sync_dir(Path::new("")).map_err(host_err)?;
        let Media { fs, names, .. } = media;
        drop(names);
        Self::open_on(fs, name, config)
    }

    /// Open the store named `name` in `fs`, running recovery (redo of every committed record,
    /// then a checkpoint).
    pub fn open_on(fs: H, name: &str, config: &RemapConfig) -> Result<Self> {
        let inner = recovery::open(fs, name, config)?;
        Ok(RemapStore {
            inner: Mutex::new(inner),
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

    /// The journal file's path (the store's path), for tools and reopening.
    pub fn journal_path(&self) -> std::path::PathBuf {
        let g = self.inner.lock();
        g.media.fs.root().join(&g.media.names.journal)
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
