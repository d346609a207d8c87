//! fallocate through a handle. The content change is made by the engine's own write path, so
//! it is atomic, durable and part of the file's transaction like any write, and the logs stay
//! coherent with it: a punched or zeroed range is a logged write of zeros (past the committed
//! size, zeros written home directly), a growth is a pending size. The host is then told only
//! what changes no byte a reader sees:
//!
//! - an allocation (mode 0 or KEEP_SIZE) reserves host storage for the range, cut at the size
//!   (storage past the end of file is never kept), at once: it is content-neutral;
//! - a punch frees host storage after the zeros are committed *and checkpointed*: under the
//!   file's lock held exclusively (no write can slip in), every committed log entry is
//!   drained home first, so no older entry is left to be checkpointed over the hole later and
//!   bring its bytes back. A punch inside a transaction frees the storage after the commit
//!   (nothing on abort); one through an O_ATOMIC handle zeroes the range at its fsync but
//!   leaves the host storage allocated (freed by a later punch outside one).

use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::shared::Shared;
use hostfs::FallocateHow;
use pmem::Region;
use store::{Error, Fallocate, Fh, Result};

/// Zeros written per call of the write path.
const ZERO_CHUNK: usize = 1 << 20;

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn fallocate_handle(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let (file, flags, deferred, bound) = {
            let t = self.tables.lock();
            let h = t.live(fh)?;
            let bound = Self::bound_tx(&t, h.file.ino);
            if h.flags.write {
                Self::check_owner(&t, &[h.file.ino], bound)?;
            }
            (
                h.file.clone(),
                h.flags,
                Self::deferred(&t, h.file.ino),
                bound,
            )
        };
        if !flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        let end = off
            .checked_add(len)
            .filter(|&end| end <= i64::MAX as u64)
            .ok_or_else(|| Error::FileTooLarge(format!("inode {}", file.ino)))?;
        let s = &*self.shared;
        let done = file.fallocate_content(s, op, off, end).and_then(|limit| {
            if !deferred {
                file.commit(s)?;
            }
            Ok(limit)
        });
        let limit = match done {
            Ok(limit) => limit,
            Err(e) => {
                if !deferred {
                    // As a write: a failed call outside a transaction leaves nothing behind.
                    let _ = file.abort(s);
                }
                return Err(e);
            }
        };
        if limit <= off {
            return Ok(());
        }
        match op {
            Fallocate::PunchHole if !deferred => file.punch_home(s, off, limit),
            Fallocate::PunchHole => {
                // Freed after the transaction's commit (nothing on abort); an O_ATOMIC
                // handle's punch keeps its storage.
                if let Some(tx) = bound {
                    if let Some(st) = self.tables.lock().txs.get_mut(&tx) {
                        st.punches.push((file.ino, off, limit));
                    }
                }
                Ok(())
            }
            Fallocate::Allocate { .. } | Fallocate::ZeroRange { .. } => {
                file.allocate_home(s, off, limit)
            }
        }
    }
}

impl<R: Region, M: FileMedia> MmioFile<R, M> {
    /// The content change of `op` on `[off, end)` (uncommitted until the next commit).
    /// Returns the end of the range it applies to (cut at the size under KEEP_SIZE).
    fn fallocate_content(
        &self,
        s: &Shared<R, M>,
        op: Fallocate,
        off: u64,
        end: u64,
    ) -> Result<u64> {
        let size = self.size();
        let (keep_size, zero) = match op {
            Fallocate::Allocate { keep_size } => (keep_size, false),
            Fallocate::PunchHole => (true, true),
            Fallocate::ZeroRange { keep_size } => (keep_size, true),
        };
        if !keep_size && end > size {
            self.set_len(s, end)?;
        }
        let limit = if keep_size { end.min(size) } else { end };
        if zero && limit > off {
            let zeros = vec![0u8; ZERO_CHUNK.min((limit - off) as usize)];
            let mut at = off;
            while at < limit {
                let n = zeros.len().min((limit - at) as usize);
                self.write(s, at, &zeros[..n], false)?;
                at += n as u64;
            }
        }
        Ok(limit)
    }

    /// Reserve host storage for `[off, end)` (cut at the host file's length).
    fn allocate_home(&self, s: &Shared<R, M>, off: u64, end: u64) -> Result<()> {
        let st = self.state.read();
        let path = st
            .path
            .clone()
            .ok_or_else(|| Error::NotFound(format!("file {} was unlinked", self.ino)))?;
        let end = end.min(st.host_len);
        if end <= off {
            return Ok(());
        }
        let how = FallocateHow::Allocate { keep_size: true };
        s.media
            .fallocate(&path, how, off, end - off)
            .map_err(|e| io_err(&path, "fallocate", e))
    }

    /// Free the host storage of `[off, end)`, whose zeros are committed: drain every
    /// committed entry home under the file's lock held exclusively, then punch.
    pub(crate) fn punch_home(&self, s: &Shared<R, M>, off: u64, end: u64) -> Result<()> {
        let st = self.state.write();
        self.checkpoint_locked(s, &st)?;
        if self.live_entries() > 0 {
            // Another caller's write between its write and its commit: its bytes may be home
            // already (undo logging), so the storage stays (the content is right either way).
            return Ok(());
        }
        let path = st
            .path
            .clone()
            .ok_or_else(|| Error::NotFound(format!("file {} was unlinked", self.ino)))?;
        let end = end.min(st.host_len);
        if end <= off {
            return Ok(());
        }
        // Reads of the range stop touching the mapping before the storage goes (a read fault
        // would allocate it again on tmpfs).
        self.holes.add(off, end);
        s.media
            .fallocate(&path, FallocateHow::PunchHole, off, end - off)
            .map_err(|e| io_err(&path, "fallocate", e))
    }
}
