//! [`JournalStore`]: the Store API over the NJS journal.
//!
//! File data lives in home files (one per inode, `<ino>.data` in the home directory); the
//! namespace and inode attributes live in the metadata log (`atomfs-journal.meta`, see
//! [`meta_log`]). Both reach the home directory only through the journal: over-writes and
//! the metadata header are journaled in PM, appends go home directly, and one journal
//! commit makes a transaction's data and metadata durable together.

mod api;
mod data;
mod home_check;
pub mod meta_log;
mod namespace;
mod posix;
mod punched;
mod shared;

use crate::home::HomeNamer;
use crate::layout::superblock;
use crate::{BlockKey, Checkpointer, Journal, JournalConfig};
use home_check::LastClose;
use hostfs::{HostFs, RealHostFs};
use meta_log::{
    header_block, parse_header, parse_log, MetaFormat, Record, EXTENT_GRAIN, EXTENT_RECORD_LEN,
    LOG_START,
};
use namespace::{Extents, Inner};
use parking_lot::{Mutex, MutexGuard};
use pmem::{MappedRegion, Region};
use std::collections::HashMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Ino, Result, TxId};

/// Home file id of the metadata log.
pub const META_FILE: u32 = 0;
/// Name of the metadata log in the home directory.
pub const META_NAME: &str = "atomfs-journal.meta";

/// The engine over a real home directory and a mapped PM journal file.
pub type HostJournalStore = JournalStore<MappedRegion, RealHostFs>;

/// Limits of a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub journal: JournalConfig,
    /// Bytes of file data the store holds at most (statfs, NoSpace).
    pub capacity_bytes: u64,
    /// The metadata log is compacted when it is longer than this and than 4 times a snapshot.
    pub log_compact_min: u64,
    /// Longest metadata log: a commit past it fails with NoSpace (nothing of it is applied).
    pub metadata_log_bytes_max: u64,
    /// Open file handles at once (EMFILE past it).
    pub open_files_max: usize,
    /// Open user transactions at once (EMFILE past it).
    pub open_transactions_max: usize,
    /// Bytes of extended attribute names and values one inode holds (ENOSPC past it).
    pub xattr_bytes_max: u64,
}

/// The longest metadata log any store reads (a sanity bound on a corrupt header).
pub const METADATA_LOG_BYTES_LIMIT: u64 = 1 << 34;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            journal: JournalConfig::default(),
            capacity_bytes: 1 << 40,
            log_compact_min: 4 << 20,
            metadata_log_bytes_max: METADATA_LOG_BYTES_LIMIT,
            open_files_max: 65_536,
            open_transactions_max: 4_096,
            xattr_bytes_max: 128 << 10,
        }
    }
}

/// Home file names: the metadata log, then one data file per inode.
pub fn home_namer() -> HomeNamer {
    Arc::new(|id| match id {
        META_FILE => PathBuf::from(META_NAME),
        ino => PathBuf::from(format!("{ino}.data")),
    })
}

/// The journal engine's Store (see the module documentation).
pub struct JournalStore<R: Region, H: HostFs> {
    journal: Arc<Journal<R, H>>,
    inner: Mutex<Inner>,
    config: StoreConfig,
    checkpointer: Mutex<Option<Checkpointer>>,
}

impl HostJournalStore {
    /// A new store: the PM journal file `pm` (created, or empty) in front of the home
    /// directory `home`, which the journal records.
    pub fn create(home: &Path, pm: &Path, config: &StoreConfig) -> Result<Self> {
        let len = crate::layout::Geometry::new(config.journal.journal_blocks)
            .map(|g| g.region_len())
            .ok_or_else(|| Error::InvalidArgument("journal block count".into()))?;
        let home = home.canonicalize().map_err(|e| Error::Io {
            path: home.display().to_string(),
            op: "open home directory",
            source: e,
        })?;
        let host = RealHostFs::open(&home).map_err(crate::JournalError::Host)?;
        let record = superblock::encode_home(home.as_os_str().as_bytes()).ok_or_else(|| {
            Error::NameTooLong {
                len: home.as_os_str().len(),
                max: superblock::HOME_PATH_MAX,
            }
        })?;
        let region = MappedRegion::create(pm, len).map_err(|e| pm_err(pm, e))?;
        region.write(superblock::HOME_RECORD_OFF, &record);
        // persist: the home record is durable before the superblock makes the journal valid,
        // so a valid journal always names its home directory.
        region.persist(superblock::HOME_RECORD_OFF, record.len() as u64);
        Self::create_on(region, host, config)
    }

    /// Open an existing store in `home`, running recovery.
    pub fn open(home: &Path, pm: &Path, config: &StoreConfig) -> Result<Self> {
        let region = MappedRegion::open(pm).map_err(|e| pm_err(pm, e))?;
        let host = RealHostFs::open(home).map_err(|e| match e.errno() {
            libc::ENOENT | libc::ENOTDIR => Error::NotFound(format!(
                "home directory {} of {} is missing (moved or deleted?): {e}",
                home.display(),
                pm.display()
            )),
            _ => crate::JournalError::Host(e).into(),
        })?;
        Self::open_on(region, host, config)
    }

    /// Open the store whose PM journal file is `pm`, in the home directory it records.
    pub fn open_recorded(pm: &Path, config: &StoreConfig) -> Result<Self> {
        let home = recorded_home(pm)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the journal records no home directory",
                pm.display()
            ))
        })?;
        Self::open(&home, pm, config)
    }
}

/// The home directory recorded in the PM journal file `pm` (reads the file; never maps it).
pub fn recorded_home(pm: &Path) -> Result<Option<PathBuf>> {
    use std::io::Read;
    let io = |op, e| Error::Io {
        path: pm.display().to_string(),
        op,
        source: e,
    };
    let file = std::fs::File::open(pm).map_err(|e| io("open", e))?;
    let mut page = Vec::with_capacity(4096);
    file.take(4096)
        .read_to_end(&mut page)
        .map_err(|e| io("read", e))?;
    let head: [u8; 20] = page
        .get(..20)
        .and_then(|h| h.try_into().ok())
        .ok_or(crate::JournalError::BadMagic)?;
    superblock::Superblock::decode(&head)?;
    let record = page
        .get(superblock::HOME_RECORD_OFF as usize..)
        .unwrap_or_default();
    Ok(superblock::decode_home(record)?.map(|p| PathBuf::from(std::ffi::OsString::from_vec(p))))
}

fn pm_err(path: &Path, e: pmem::PmError) -> Error {
    Error::Io {
        path: path.display().to_string(),
        op: "PM journal file",
        source: std::io::Error::other(e.to_string()),
    }
}

impl<R: Region, H: HostFs> JournalStore<R, H> {
    /// Format `region` as an empty store over `host` and open it.
    pub fn create_on(region: R, host: H, config: &StoreConfig) -> Result<Self> {
        Self::create_on_format(region, host, config, MetaFormat::V2)
    }

    /// Format `region` as an empty store whose metadata log is `format` (an older format:
    /// what the previous build wrote, for compatibility tests) and open it.
    #[doc(hidden)]
    pub fn create_on_format(
        region: R,
        host: H,
        config: &StoreConfig,
        format: MetaFormat,
    ) -> Result<Self> {
        let journal = Journal::create(region, host, home_namer(), config.journal.clone())?;
        let mut core = crate::Tx::new();
        let mut log = Vec::new();
        let root = namespace::root_node();
        namespace::inode_record(&root).encode(&mut log);
        Record::Extent {
            ino: META_FILE as Ino,
            end: EXTENT_GRAIN,
        }
        .encode(&mut log);
        journal.write(&mut core, META_FILE, LOG_START, &log, Some(0))?;
        core.put_block(
            meta_header_key(),
            &header_block(format, LOG_START + log.len() as u64),
        );
        journal.commit(core)?;
        Self::start(journal, config)
    }

    /// Open a store on `region` and `host`, running recovery.
    pub fn open_on(region: R, host: H, config: &StoreConfig) -> Result<Self> {
        let journal = Journal::open(region, host, home_namer(), config.journal.clone())?;
        Self::start(journal, config)
    }

    fn start(journal: Journal<R, H>, config: &StoreConfig) -> Result<Self> {
        let ino_max = journal.geometry().format().file_id_max() as Ino;
        let Replayed {
            nodes,
            extents,
            log_len,
            homes,
            last,
            format,
        } = read_metadata(&journal, ino_max)?;
        let (extents, record_now) = match extents {
            Extents::Recorded(e) => {
                // Before anything can be written home: no version past its file's end.
                journal.verify_extents(&|f| e.get(&(f as Ino)).copied().unwrap_or(0))?;
                (e, false)
            }
            Extents::Unrecorded => (HashMap::new(), true),
        };
        let store = JournalStore {
            journal: Arc::new(journal),
            inner: Mutex::new(Inner::new(nodes, extents, log_len, ino_max, format)),
            config: config.clone(),
            checkpointer: Mutex::new(None),
        };
        {
            let mut s = store.inner.lock();
            s.homes = homes;
            // Before anything is written home: no home file changed behind our back.
            store.check_homes(&s, last)?;
            if last == LastClose::Clean {
                // persist: the log no longer ends with Clean before any home file can change
                // (an append is written home before its commit).
                store.log_records(&mut s, &[Record::Opened])?;
            }
        }
        if record_now {
            store.record_extents()?;
        }
        store.free_orphans()?;
        if config.journal.checkpoint_period.is_some() {
            let c = store.journal.start_checkpointer().map_err(|e| Error::Io {
                path: "checkpoint thread".into(),
                op: "spawn",
                source: e,
            })?;
            *store.checkpointer.lock() = Some(c);
        }
        Ok(store)
    }

    /// The journal under the store (inspect, bench).
    pub fn journal(&self) -> &Journal<R, H> {
        &self.journal
    }

    fn lock_open(&self) -> Result<MutexGuard<'_, Inner>> {
        let s = self.inner.lock();
        s.check_open()?;
        Ok(s)
    }

    /// A log written before extents were recorded: record every file's extent once, from
    /// the journal as it is.
    fn record_extents(&self) -> Result<()> {
        let mut s = self.inner.lock();
        let ends = self.journal.journaled_ends();
        let mut core = crate::Tx::new();
        let mut log = Vec::new();
        let mut extents = HashMap::new();
        for (&file, &end) in &ends {
            extents.insert(file as Ino, grain_up(end));
        }
        let meta_end = grain_up(s.log_len + (ends.len() as u64 + 1) * EXTENT_RECORD_LEN);
        let meta = extents.entry(META_FILE as Ino).or_insert(0);
        *meta = (*meta).max(meta_end);
        let mut sorted: Vec<_> = extents.iter().collect();
        sorted.sort_unstable();
        for (&ino, &end) in sorted {
            Record::Extent { ino, end }.encode(&mut log);
        }
        let new_len = s.log_len + log.len() as u64;
        self.journal
            .write(&mut core, META_FILE, s.log_len, &log, Some(s.log_len))?;
        core.put_block(meta_header_key(), &header_block(s.format, new_len));
        self.journal.commit(core)?;
        s.log_len = new_len;
        s.extents = extents;
        Ok(())
    }

    /// Files unlinked while open when the store stopped: freed now.
    fn free_orphans(&self) -> Result<()> {
        let mut s = self.inner.lock();
        let orphans: Vec<Ino> = s
            .nodes
            .iter()
            .filter(|(_, n)| n.meta.nlink == 0)
            .map(|(i, _)| *i)
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        let t = s.begin();
        for ino in orphans {
            s.reap(ino, t)?;
        }
        self.commit(&mut s, t)
    }

    /// Run `op` in transaction `tx`, or in an internal one committed when it succeeds.
    fn in_tx<T>(
        &self,
        tx: Option<TxId>,
        op: impl FnOnce(&mut Inner, TxId) -> Result<T>,
    ) -> Result<T> {
        let mut s = self.lock_open()?;
        match tx {
            Some(t) => op(&mut s, t),
            None => {
                let t = s.begin();
                match op(&mut s, t) {
                    Ok(v) => self.commit(&mut s, t).map(|_| v),
                    Err(e) => {
                        if let Some(dead) = s.txs.remove(&t.0) {
                            s.roll_back(dead);
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Commit transaction `t`: its metadata records and data in one journal commit. On an
    /// error every change of the transaction is rolled back.
    fn commit(&self, s: &mut Inner, t: TxId) -> Result<()> {
        let mut tx = s.txs.remove(&t.0).ok_or(Error::NoSuchTransaction(t.0))?;
        s.unbind(t);
        let core = std::mem::take(&mut tx.core);
        s.close_spans(&mut tx);
        match self.persist(s, &tx, core) {
            Ok(()) => {
                s.committed(&tx);
                // The transaction is committed: a compaction that fails leaves the log as
                // it is (valid, only longer) and is tried again after a later commit.
                let _ = self.maybe_compact(s);
                Ok(())
            }
            Err(e) => {
                s.roll_back(tx);
                Err(e)
            }
        }
    }

    fn persist(&self, s: &mut Inner, tx: &namespace::Tx, mut core: crate::Tx) -> Result<()> {
        let dirty = &tx.dirty;
        let mut log = Vec::new();
        for r in s.records(tx) {
            r.encode(&mut log);
        }
        if log.is_empty() && core.is_empty() {
            return Ok(());
        }
        let homes = self.grown_homes(s, core.appended_files())?;
        for h in &homes {
            Record::Home(*h).encode(&mut log);
        }
        let extents = grown_extents(s, &core, log.len() as u64);
        for &(ino, end) in &extents {
            Record::Extent { ino, end }.encode(&mut log);
        }
        let new_len = s.log_len + log.len() as u64;
        let log_max = self
            .config
            .metadata_log_bytes_max
            .min(METADATA_LOG_BYTES_LIMIT);
        if new_len > log_max {
            return Err(Error::NoSpace(format!(
                "metadata log full: {new_len} bytes past its {log_max}"
            )));
        }
        self.journal
            .write(&mut core, META_FILE, s.log_len, &log, Some(s.log_len))?;
        core.put_block(meta_header_key(), &header_block(s.format, new_len));
        self.journal.commit(core)?;
        s.log_len = new_len;
        s.extents.extend(extents);
        s.homes.extend(homes.into_iter().map(|h| (h.ino, h)));
        for &ino in &dirty.inodes {
            match s.nodes.get(&ino) {
                Some(n) => {
                    let size = n.meta.size;
                    s.durable.insert(ino, size);
                }
                None => {
                    s.homes.remove(&ino);
                }
            }
        }
        Ok(())
    }

    /// Append `records` to the metadata log in a commit of their own.
    fn log_records(&self, s: &mut Inner, records: &[Record]) -> Result<()> {
        let mut log = Vec::new();
        for r in records {
            r.encode(&mut log);
        }
        let core = crate::Tx::new();
        let extents = grown_extents(s, &core, log.len() as u64);
        let mut tail = Vec::new();
        for &(ino, end) in &extents {
            Record::Extent { ino, end }.encode(&mut tail);
        }
        // Extent records go first: a Clean record must stay the last one.
        tail.extend_from_slice(&log);
        let mut core = core;
        let new_len = s.log_len + tail.len() as u64;
        self.journal
            .write(&mut core, META_FILE, s.log_len, &tail, Some(s.log_len))?;
        core.put_block(meta_header_key(), &header_block(s.format, new_len));
        self.journal.commit(core)?;
        s.log_len = new_len;
        s.extents.extend(extents);
        Ok(())
    }

    /// A clean close: the home files' identities and change times, then Clean.
    fn record_clean_close(&self, s: &mut Inner) -> Result<()> {
        let records = self.close_records(s)?;
        self.log_records(s, &records)?;
        for r in records {
            if let Record::Home(h) = r {
                s.homes.insert(h.ino, h);
            }
        }
        Ok(())
    }

    /// Rewrite the metadata log as one snapshot when it has grown long.
    fn maybe_compact(&self, s: &mut Inner) -> Result<()> {
        // The snapshot is the DRAM namespace: only with no transaction open is that the
        // committed one.
        if !s.txs.is_empty() {
            return Ok(());
        }
        let estimate = s.nodes.len() as u64 * 128;
        // Compact early enough that the log stays well inside its maximum.
        let log_max = self
            .config
            .metadata_log_bytes_max
            .min(METADATA_LOG_BYTES_LIMIT);
        let compact_at = self.config.log_compact_min.min(log_max / 2);
        if s.log_len < compact_at || s.log_len < 4 * estimate || s.log_len < s.compact_after {
            return Ok(());
        }
        let mut log = Vec::new();
        for r in s.snapshot() {
            r.encode(&mut log);
        }
        // Attributes and link targets make a snapshot larger than the estimate: the next one
        // is built only once the log is twice this one, so a log that does not shrink is not
        // rewritten at every commit.
        s.compact_after = 2 * (LOG_START + log.len() as u64);
        let recorded = s.extents.get(&(META_FILE as Ino)).copied().unwrap_or(0);
        if LOG_START + log.len() as u64 > recorded {
            return Ok(());
        }
        let blocks = (log.len() as u64).div_ceil(4096) + 2;
        if blocks > self.journal.geometry().blocks() as u64 / 4 {
            return Ok(());
        }
        let mut core = crate::Tx::new();
        self.journal
            .write(&mut core, META_FILE, LOG_START, &log, Some(s.log_len))?;
        let new_len = LOG_START + log.len() as u64;
        core.put_block(meta_header_key(), &header_block(s.format, new_len));
        self.journal.commit(core)?;
        s.log_len = new_len;
        Ok(())
    }
}

impl<R: Region, H: HostFs> Drop for JournalStore<R, H> {
    fn drop(&mut self) {
        // Stop the checkpoint thread before the journal goes.
        self.checkpointer.lock().take();
    }
}

/// `end` rounded up to the extent grain.
fn grain_up(end: u64) -> u64 {
    end.div_ceil(EXTENT_GRAIN).max(1) * EXTENT_GRAIN
}

/// The Extent records a commit of `core` (and `log_bytes` of metadata records) needs: one for
/// each home file it journals past its recorded end, the metadata log's own included.
fn grown_extents(s: &Inner, core: &crate::Tx, log_bytes: u64) -> Vec<(Ino, u64)> {
    let recorded = |ino: Ino| s.extents.get(&ino).copied().unwrap_or(0);
    let mut out: Vec<(Ino, u64)> = core
        .journaled_ends()
        .into_iter()
        .map(|(file, end)| (file as Ino, end))
        .filter(|&(ino, end)| ino != META_FILE as Ino && end > recorded(ino))
        .map(|(ino, end)| (ino, grain_up(end)))
        .collect();
    let meta_end = s.log_len + log_bytes + (out.len() as u64 + 1) * EXTENT_RECORD_LEN;
    if meta_end > recorded(META_FILE as Ino) {
        out.push((META_FILE as Ino, grain_up(meta_end)));
    }
    out
}

fn meta_header_key() -> BlockKey {
    BlockKey {
        file: META_FILE,
        block: 0,
    }
}

/// Nodes and extents replayed from a metadata log.
struct Replayed {
    nodes: HashMap<Ino, namespace::Node>,
    extents: Extents,
    log_len: u64,
    homes: HashMap<Ino, meta_log::HomeRecord>,
    last: LastClose,
    format: MetaFormat,
}

/// Read and replay the metadata log.
fn read_metadata<R: Region, H: HostFs>(journal: &Journal<R, H>, ino_max: Ino) -> Result<Replayed> {
    let corrupt = |what: String| Error::Corrupt { what, offset: 0 };
    let mut header = vec![0u8; 4096];
    journal.read(None, META_FILE, 0, &mut header)?;
    let (format, log_len) = parse_header(&header)
        .map_err(|e| corrupt(format!("metadata log: {e}")))?
        .ok_or_else(|| corrupt("metadata log missing (not a journal store)".into()))?;
    if log_len > METADATA_LOG_BYTES_LIMIT {
        return Err(corrupt(format!("metadata log length {log_len}")));
    }
    let mut log = vec![0u8; (log_len - LOG_START) as usize];
    journal.read(None, META_FILE, LOG_START, &mut log)?;
    let records = parse_log(&log).map_err(|e| corrupt(format!("metadata log: {e}")))?;
    let (homes, last) = home_check::replay_homes(&records);
    let (nodes, extents) =
        namespace::replay(records, ino_max).map_err(|e| corrupt(format!("metadata log: {e}")))?;
    Ok(Replayed {
        nodes,
        extents,
        log_len,
        homes,
        last,
        format,
    })
}
