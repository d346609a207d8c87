//! NC (no consistency, seed §VI-C): data and metadata are written in place with no log, and
//! each call is durable when it returns. NC gives no crash guarantee, but a transaction can
//! still be aborted (by the application, or because it ran out of space): the old bytes of
//! every range it writes in place are kept in DRAM (`VolatileUndo`) and written back on
//! abort. Nothing extra reaches NVMM and the commit path is unchanged (one fence); a crash
//! may leave anything.

use crate::core::Core;
use crate::tx::Tx;
use pmem::Region;

/// The old bytes of every range a transaction wrote in place, in the order written.
#[derive(Default)]
pub struct VolatileUndo {
    /// (region address, length) of each saved range; its bytes follow in `bytes`.
    ranges: Vec<(u64, usize)>,
    bytes: Vec<u8>,
}

impl VolatileUndo {
    /// Save the current contents of `[addr, addr + len)` before they are overwritten.
    pub fn save<R: Region>(&mut self, region: &R, addr: u64, len: usize) {
        if len == 0 {
            return;
        }
        let at = self.bytes.len();
        self.bytes.resize(at + len, 0);
        region.read(addr, &mut self.bytes[at..]);
        self.ranges.push((addr, len));
    }

    /// Append the ranges of a transaction merged into this one (syncv).
    pub fn absorb(&mut self, other: VolatileUndo) {
        self.ranges.extend(other.ranges);
        self.bytes.extend(other.bytes);
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Write every saved range back, newest first (so a range saved twice ends with its
    /// oldest contents), and flush it. Returns the bytes written back.
    pub fn restore<R: Region>(&mut self, region: &R) -> u64 {
        let mut end = self.bytes.len();
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

    pub fn clear(&mut self) {
        self.ranges.clear();
        self.bytes.clear();
    }
}

impl<R: Region> Core<R> {
    /// NC: overwrite data in place, keeping the old bytes in DRAM for an abort.
    pub fn write_nc(&self, tx: &mut Tx, pbn: u64, boff: u64, chunk: &[u8]) {
        let addr = self.geo.block(pbn) + boff;
        tx.modes.nc.save(&*self.region, addr, chunk.len());
        self.write_in_place(pbn, boff, chunk);
    }

    /// NC: metadata about to be written in place (`meta_update`): keep its old bytes.
    pub fn nc_save_meta(&self, tx: &mut Tx, writes: &[(u64, &[u8])]) {
        for (addr, bytes) in writes {
            tx.modes.nc.save(&*self.region, *addr, bytes.len());
        }
    }

    /// NC abort: every byte the transaction wrote in place goes back to its old value.
    pub fn nc_abort(&self, tx: &mut Tx) {
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
}
