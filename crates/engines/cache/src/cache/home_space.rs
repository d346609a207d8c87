//! The storage of a home file (fallocate): allocated for `Fallocate::Allocate` once the
//! length is the cache's, freed after a punched range's zeros are written home. What reads return never changes here —
//! the data of a fallocate is the cache's (a length change, or zeros written through the
//! cache); this is a home change of the cache's own, so the home stamp is unsettled while
//! it happens and settled after.

use super::files::FileState;
use super::home_state::Check;
use super::Cache;
use crate::backing::Backing;
use crate::format::CHUNK_SIZE;
use pmem::Region;
use store::Result;

impl<R: Region, B: Backing> Cache<R, B> {
    /// Allocate the home storage of `[off, end)` of file `key`, cut at the file's length:
    /// the home file may grow up to that length (never past it: no length change of the file
    /// runs meanwhile, its operation lock is held).
    pub fn home_allocate(&self, key: u64, off: u64, end: u64) -> Result<()> {
        let f = self.file(key)?;
        let _op = f.op.lock();
        let end = end.min(self.record(&f).size);
        if end <= off {
            return Ok(());
        }
        self.space_of(&f, false, off, end - off)
    }

    /// Free the home storage of the whole chunks of `[off, end)` of file `key`, whose data
    /// is zeros: the file's dirty chunks are flushed home first (so none of them writes the
    /// range again), then the home range is punched. No write of the file runs meanwhile
    /// (its operation lock is held), so no newer data of the range reaches home before the
    /// punch.
    pub fn home_punch(&self, key: u64, off: u64, end: u64) -> Result<()> {
        let (first, last) = (off.div_ceil(CHUNK_SIZE), end / CHUNK_SIZE);
        if last <= first {
            return Ok(());
        }
        let f = self.file(key)?;
        let _op = f.op.lock();
        self.flush_file(key)?;
        let (from, to) = (first * CHUNK_SIZE, last * CHUNK_SIZE);
        self.space_of(&f, true, from, to - from)
    }

    fn space_of(&self, f: &FileState, punch: bool, off: u64, len: u64) -> Result<()> {
        self.begin_home_change(f, Check::No)?;
        let result = self.backing.space(f.id, punch, off, len);
        self.end_home_change(f, result.is_ok());
        result
    }
}
