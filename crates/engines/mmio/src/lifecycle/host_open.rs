//! [`HostMmioStore`]: the engine over a real directory and a mapped log pool file: create,
//! open (checking the directory's marker before touching anything), and the home directory
//! recorded in the log pool.

use crate::host::media::HostMedia;
use crate::lifecycle::MmioStore;
use crate::log::layout::{self, Superblock};
use crate::{io_err, MmioConfig, MmioError};
use pmem::{MappedRegion, Region};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use store::{Error, Result};

/// The engine over a real directory and a mapped log pool file.
pub type HostMmioStore = MmioStore<MappedRegion, HostMedia>;

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
