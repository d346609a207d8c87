//! NC (no consistency, seed §VI-C): data and metadata are written in place with no log, and
//! each call is durable when it returns. NC gives no crash guarantee, but a transaction can
//! still be aborted (by the application, or because it ran out of space): the old bytes of
//! every range it writes in place are kept in DRAM (`VolatileUndo`) and written back on
//! abort. Nothing extra reaches NVMM and the commit path is unchanged (one fence); a crash
//! may leave anything.

use crate::core::Core;
use crate::log::transaction::Tx;
use pmem::Region;

/// Bytes of saved ranges a cleared `VolatileUndo` keeps allocated for reuse.
const KEEP_MAX: usize = 1 << 20;

/// The old bytes of every range a transaction wrote in place, in the order written.
#[derive(Default)]
pub(crate) struct VolatileUndo {
    /// (region address, length) of each saved range; its bytes follow in `bytes`.
    ranges: Vec<(u64, usize)>,
    /// Saved bytes in `bytes[..used]`. The vector keeps its length (zeroed once, when it
    /// grows) across transactions, so that saving a range is one copy, not a fill and a copy.
    bytes: Vec<u8>,
    used: usize,
}

impl VolatileUndo {
    /// Save the current contents of `[addr, addr + len)` before they are overwritten.
    pub(crate) fn save<R: Region>(&mut self, region: &R, addr: u64, len: usize) {
        if len == 0 {
            return;
        }
        let at = self.used;
        if self.bytes.len() < at + len {
            self.bytes.resize(at + len, 0);
        }
        region.read(addr, &mut self.bytes[at..at + len]);
        self.used = at + len;
        self.ranges.push((addr, len));
    }

    /// Append the ranges of a transaction merged into this one (syncv).
    pub(crate) fn absorb(&mut self, other: VolatileUndo) {
        self.ranges.extend(other.ranges);
        self.bytes.truncate(self.used);
        self.bytes.extend_from_slice(&other.bytes[..other.used]);
        self.used = self.bytes.len();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Write every saved range back, newest first (so a range saved twice ends with its
    /// oldest contents), and flush it. Returns the bytes written back.
    pub(crate) fn restore<R: Region>(&mut self, region: &R) -> u64 {
        let mut end = self.used;
        let mut restored = 0;
        for &(addr, len) in self.ranges.iter().rev() {
            let old = &self.bytes[end - len..end];
            region.write(addr, old);
            region.flush(addr, len as u64);
            end -= len;
            restored += len as u64;
        }
        self.clear();
        restored
    }

    pub(crate) fn clear(&mut self) {
        self.ranges.clear();
        self.used = 0;
        if self.bytes.len() > KEEP_MAX {
            // A large transaction's buffer is not kept for the next one.
            self.bytes = Vec::new();
        }
    }
}

impl<R: Region> Core<R> {
    /// NC: overwrite data in place, keeping the old bytes in DRAM for an abort.
    pub(crate) fn write_nc(&self, tx: &mut Tx, pbn: u64, boff: u64, chunk: &[u8]) {
        let addr = self.geo.block(pbn) + boff;
        tx.modes.nc.save(&*self.region, addr, chunk.len());
        self.write_in_place(pbn, boff, chunk);
    }

    /// NC: metadata about to be written in place (`meta_update`): keep its old bytes.
    pub(crate) fn nc_save_meta(&self, tx: &mut Tx, writes: &[(u64, &[u8])]) {
        for (addr, bytes) in writes {
            tx.modes.nc.save(&*self.region, *addr, bytes.len());
        }
    }

    /// NC abort: every byte the transaction wrote in place goes back to its old value.
    pub(crate) fn nc_abort(&self, tx: &mut Tx) {
        if tx.modes.nc.is_empty() {
            return;
        }
        tx.modes.nc.restore(&*self.region);
        // persist: NC makes each call durable when it returns, an abort included.
        self.region.fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::DramRegion;

    #[test]
    fn restore_puts_back_the_oldest_bytes_newest_range_first() {
        let region = DramRegion::new(4096);
        region.write(0, b"abcdefgh");
        let mut undo = VolatileUndo::default();
        undo.save(&region, 2, 4); // "cdef"
        region.write(2, b"XXXX");
        undo.save(&region, 0, 8); // "abXXXXgh"
        region.write(0, b"YYYYYYYY");
        let mut other = VolatileUndo::default();
        other.save(&region, 100, 3);
        region.write(100, b"zzz");
        undo.absorb(other);
        assert_eq!(undo.restore(&region), 15);
        let mut back = [0u8; 8];
        region.read(0, &mut back);
        assert_eq!(&back, b"abcdefgh");
        let mut tail = [1u8; 3];
        region.read(100, &mut tail);
        assert_eq!(tail, [0, 0, 0]);
        assert!(undo.is_empty());
    }

    #[test]
    fn a_cleared_undo_is_reused_without_old_bytes_leaking() {
        let region = DramRegion::new(4096);
        region.write(0, b"0123456789");
        let mut undo = VolatileUndo::default();
        undo.save(&region, 0, 10);
        undo.clear();
        assert!(undo.is_empty());
        // A second transaction saves less than the first: only its own bytes come back.
        region.write(20, b"ab");
        undo.save(&region, 20, 2);
        region.write(20, b"XY");
        assert_eq!(undo.restore(&region), 2);
        let mut back = [0u8; 2];
        region.read(20, &mut back);
        assert_eq!(&back, b"ab");
        let mut first = [0u8; 10];
        region.read(0, &mut first);
        assert_eq!(
            &first, b"0123456789",
            "a cleared range is never written back"
        );
        // Absorbing a reused undo takes only its saved bytes.
        let mut a = VolatileUndo::default();
        a.save(&region, 0, 4);
        a.clear();
        a.save(&region, 4, 2);
        let mut b = VolatileUndo::default();
        b.save(&region, 6, 2);
        a.absorb(b);
        region.write(4, b"zzzz");
        assert_eq!(a.restore(&region), 4);
        let mut mid = [0u8; 4];
        region.read(4, &mut mid);
        assert_eq!(&mid, b"4567");
    }
}
