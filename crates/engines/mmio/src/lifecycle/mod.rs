//! The store's life cycle: [`MmioStore`] itself, format and open (with recovery) over any log
//! pool region and file media, unmount, and what the store reports about itself. The real
//! directory and mapped log pool file are opened in `host_open.rs`; the Store API is served
//! by `store_api.rs` from the namespace, file handle and transaction subsystems.

mod host_open;
mod limits;
mod report;

pub use host_open::{recorded_home, HostMmioStore};

use crate::host::FileMedia;
use crate::log::intent::TRASH_NAME;
use crate::log::layout::{self, Superblock};
use crate::namespace::tables::{IdMap, Tables};
pub use crate::recovery::RecoveryReport;
use crate::shared::{checkpoint_loop, Shared};
use crate::{io_err, MmioConfig, MmioError};
use parking_lot::Mutex;
use pmem::Region;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Error, Fh, FileKind, OpenFlags, Result, ROOT_INO};

/// Name of the background checkpoint thread (profilers and the bench tell it apart by it).
pub const CHECKPOINT_THREAD_NAME: &str = "mmio-ckpt";

/// The mmio engine (see the crate documentation).
pub struct MmioStore<R: Region, M: FileMedia> {
    pub(crate) shared: Arc<Shared<R, M>>,
    pub(crate) tables: Mutex<Tables<R, M>>,
    pub(crate) next_fh: AtomicU64,
    pub(crate) next_tx: AtomicU64,
    closed: AtomicBool,
    pub(crate) root_id: u64,
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

    pub(crate) fn check(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Map a file for Libnvmmio-style access (see [`crate::NvMap`]).
    pub fn nvmmap(&self, path: &[u8]) -> Result<crate::NvMap<'_, R, M>> {
        let meta = store::resolve(self, path)?;
        let fh = self.open_handle(
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

    pub(crate) fn unmount_store(&self) -> Result<()> {
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
            if let Some((trash, _)) = unlinked {
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

    /// Drop the store without unmounting (as a crash at a quiescent point, for tests):
    /// nothing is checkpointed or closed; the log pool keeps whatever it holds.
    pub fn crash(self) {
        self.closed.store(true, Ordering::Release);
        drop(self);
    }
}

/// Create the trash directory, or delete what it holds: after recovery every intent is
/// settled, so what is left are files unlinked while open before a crash, unnamed files
/// (O_TMPFILE) never named, and saved attribute values of settled transactions.
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
