//! fallocate: what reads return changes only through the cache, so it is atomic, durable
//! and part of the file's transaction exactly like a write:
//!
//! | mode | data (through the cache) | home storage (outside a transaction) |
//! |---|---|---|
//! | Allocate | the length grows to the end (mode 0 past EOF) | allocated after, up to the length |
//! | PunchHole | zeros written over the range inside the length | whole chunks punched after |
//! | ZeroRange | zeros inside the length; the length grows unless KEEP_SIZE | — |
//!
//! Zeros and growth together are one cache unit (one commit point). Storage past the end
//! of file is never kept: a KEEP_SIZE range is cut at the length. The zeros are a write:
//! a range wider than the cache's slots is refused (EFBIG), and in a transaction its chunks
//! pin their slots like any write. A transaction's punched ranges are freed at home after
//! its commit (an O_ATOMIC file's keep their home storage until a punch outside a unit).

use super::handles::Route;
use super::CacheStore;
use crate::format::CHUNK_SIZE;
use hostfs::HostFs;
use pmem::Region;
use store::{Error, Fallocate, Fh, Result};

/// What a fallocate does to the data: zeros over `[off, zero_end)`, the length to `grow`.
#[derive(Clone, Copy, Debug)]
struct Change {
    off: u64,
    zero_end: u64,
    grow: Option<u64>,
}

impl Change {
    fn of(op: Fallocate, off: u64, end: u64, size: u64) -> Change {
        let (keep, zeros) = match op {
            Fallocate::Allocate { keep_size } => (keep_size, false),
            Fallocate::ZeroRange { keep_size } => (keep_size, true),
            Fallocate::PunchHole => (true, true),
        };
        Change {
            off,
            // Past the length every byte reads as zero already.
            zero_end: if zeros { end.min(size).max(off) } else { off },
            grow: (!keep && end > size).then_some(end),
        }
    }

    fn zeros(&self) -> Option<Vec<u8>> {
        (self.zero_end > self.off).then(|| vec![0; (self.zero_end - self.off) as usize])
    }
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    pub(super) fn do_fallocate(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let mut t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let end = off
            .checked_add(len)
            .filter(|&e| e <= crate::cache::recovery::SIZE_MAX)
            .ok_or_else(|| Error::FileTooLarge(format!("fallocate to {off} + {len}")))?;
        let route = self.route(&mut t, &h)?;
        let key = match route {
            Route::Alone(k) | Route::Tx(_, k) | Route::Atomic(k, _) => k,
        };
        let size = self.cache.len(key)?;
        let change = Change::of(op, off, end, size);
        let chunks = change.zero_end.div_ceil(CHUNK_SIZE) - change.off / CHUNK_SIZE;
        if chunks > self.cache.geometry().slots() {
            return Err(Error::FileTooLarge(format!(
                "fallocate zeroing {} bytes spans more chunks than the cache has slots ({})",
                change.zero_end - change.off,
                self.cache.geometry().slots()
            )));
        }
        let apply = |unit: &mut crate::Unit, key: u64| -> Result<()> {
            if let Some(zeros) = change.zeros() {
                self.cache.write_in(unit, key, change.off, &zeros)?;
            }
            if let Some(len) = change.grow {
                self.cache.set_len_in(unit, key, len)?;
            }
            Ok(())
        };
        if let Route::Tx(tx, key) = route {
            self.in_unit(&mut t, &route, apply)?;
            if let (Fallocate::PunchHole, Some(state)) = (op, t.txs.get_mut(&tx)) {
                state.punched.push((key, change.off, change.zero_end));
            }
            return Ok(());
        }
        if let Route::Atomic(..) = route {
            return self.in_unit(&mut t, &route, apply);
        }
        drop(t);
        match (change.zeros(), change.grow) {
            (None, None) => {}
            (None, Some(len)) => self.cache.set_len(key, len)?,
            (Some(zeros), None) => self.cache.write(key, off, &zeros)?,
            (Some(_), Some(_)) => {
                let mut unit = self.cache.begin()?;
                match apply(&mut unit, key) {
                    Ok(()) => self.cache.commit(unit)?,
                    Err(e) => {
                        self.cache.abort(unit)?;
                        return Err(e);
                    }
                }
            }
        }
        match op {
            // An ENOSPC of the home leaves the length changed and the storage short, as
            // fallocate(2) may.
            Fallocate::Allocate { .. } => self.cache.home_allocate(key, off, end)?,
            Fallocate::PunchHole => self.cache.home_punch(key, change.off, change.zero_end)?,
            Fallocate::ZeroRange { .. } => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_zeros_inside_the_length_and_grows_only_without_keep_size() {
        let c = Change::of(Fallocate::PunchHole, 100, 9000, 5000);
        assert_eq!((c.off, c.zero_end, c.grow), (100, 5000, None));
        let c = Change::of(Fallocate::PunchHole, 6000, 9000, 5000);
        assert!(c.zeros().is_none());
        let c = Change::of(Fallocate::ZeroRange { keep_size: false }, 100, 9000, 5000);
        assert_eq!((c.zero_end, c.grow), (5000, Some(9000)));
        let c = Change::of(Fallocate::ZeroRange { keep_size: true }, 100, 9000, 5000);
        assert_eq!((c.zero_end, c.grow), (5000, None));
        let c = Change::of(Fallocate::Allocate { keep_size: false }, 0, 9000, 5000);
        assert_eq!((c.zeros(), c.grow), (None, Some(9000)));
        let c = Change::of(Fallocate::Allocate { keep_size: false }, 0, 4000, 5000);
        assert_eq!((c.zeros(), c.grow), (None, None));
        let c = Change::of(Fallocate::Allocate { keep_size: true }, 0, 9000, 5000);
        assert_eq!((c.zeros(), c.grow), (None, None));
    }
}
