//! The store's DRAM tables: known names (the path table), open files and their users, handles,
//! open transactions, and inodes created by open transactions. One mutex guards them all
//! (`MmioStore::tables`); nothing here is persistent.

use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::transaction::{TxPhase, TxState};
use pmem::Region;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use store::{Error, Fh, Ino, OpenFlags, Result};

pub(crate) struct Handle<R: Region, M: FileMedia> {
    pub(crate) file: Arc<MmioFile<R, M>>,
    pub(crate) flags: OpenFlags,
    /// The file's create was aborted while this handle was open: the file is gone, and every
    /// call through the handle but `release` is NotFound (`Tables::live`).
    pub(crate) gone: bool,
}

#[derive(Default)]
pub(crate) struct FileUse {
    pub(crate) handles: usize,
    pub(crate) atomic_handles: usize,
    pub(crate) tx: Option<u64>,
    /// Its only name is in the trash (deleted at the last release): unlinked while open, or
    /// never named yet.
    pub(crate) unlinked: Option<(PathBuf, Trashed)>,
}

/// Why an open file's only name is in the trash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trashed {
    /// Its last name was unlinked while it was open: it gets no new one (linkat(2)).
    Unlinked,
    /// Made by `tmpfile` (O_TMPFILE): `link` gives it its first name.
    Unnamed,
}

/// Hasher of the store's tables: their keys are handle, transaction and inode numbers the
/// store or the host hands out (no one picks them to flood a bucket), so one multiply is
/// enough; SipHash cost two lookups' worth on every read, write and fsync.
#[derive(Clone, Copy, Default)]
pub(crate) struct IdHasher(u64);

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

pub(crate) type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

pub(crate) struct Tables<R: Region, M: FileMedia> {
    /// Known inodes: ino -> (parent, name).
    pub(crate) names: IdMap<Ino, (Ino, Vec<u8>)>,
    pub(crate) open: IdMap<Ino, (Arc<MmioFile<R, M>>, FileUse)>,
    pub(crate) handles: IdMap<u64, Handle<R, M>>,
    pub(crate) txs: IdMap<u64, TxState>,
    /// Files and directories created by open transactions: ino -> creating transaction.
    /// Such an inode is its creator's until that ends (`check_owner`).
    pub(crate) created: IdMap<Ino, u64>,
}

impl<R: Region, M: FileMedia> Tables<R, M> {
    /// The handle `fh`, if it names a file that still exists.
    pub(crate) fn live(&self, fh: Fh) -> Result<&Handle<R, M>> {
        match self.handles.get(&fh.0) {
            None => Err(Error::BadHandle(fh.0)),
            Some(h) if h.gone => Err(Error::NotFound(format!(
                "inode {} (its create was aborted)",
                h.file.ino
            ))),
            Some(h) => Ok(h),
        }
    }

    /// The transaction `tx`, if it is open (neither committing nor aborting).
    pub(crate) fn open_tx(&self, tx: u64) -> Result<&TxState> {
        match self.txs.get(&tx) {
            Some(st) if st.phase == TxPhase::Open => Ok(st),
            _ => Err(Error::NoSuchTransaction(tx)),
        }
    }

    /// [`Tables::open_tx`], mutable.
    pub(crate) fn open_tx_mut(&mut self, tx: u64) -> Result<&mut TxState> {
        self.open_tx(tx)?;
        self.txs.get_mut(&tx).ok_or(Error::NoSuchTransaction(tx))
    }

    /// [`Tables::live`], mutable.
    pub(crate) fn live_mut(&mut self, fh: Fh) -> Result<&mut Handle<R, M>> {
        self.live(fh)?;
        self.handles.get_mut(&fh.0).ok_or(Error::BadHandle(fh.0))
    }
}
