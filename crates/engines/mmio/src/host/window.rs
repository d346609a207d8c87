//! [`Window`]: a byte range of a shared region as a region of its own (a log pool inside a
//! larger simulated region in tests and in the crash target).

use pmem::{Region, RegionStats};
use std::sync::Arc;

/// `[base, base + len)` of a shared region, as a region of its own.
pub struct Window<R: Region> {
    region: Arc<R>,
    base: u64,
    len: u64,
}

impl<R: Region> Window<R> {
    pub fn new(region: Arc<R>, base: u64, len: u64) -> Self {
        pmem::check_range(region.len(), base, len);
        Window { region, base, len }
    }
    fn at(&self, off: u64, len: u64) -> u64 {
        pmem::check_range(self.len, off, len);
        self.base + off
    }
}

impl<R: Region> Region for Window<R> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.region.read(self.at(off, buf.len() as u64), buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.region.write(self.at(off, data.len() as u64), data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.region.fill(self.at(off, len), len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.region.write_nt(self.at(off, data.len() as u64), data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.region.load_u64(self.at(off, 8))
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.region.store_u64(self.at(off, 8), value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.region.flush(self.at(off, len), len)
    }
    fn fence(&self) {
        self.region.fence()
    }
    fn stats(&self) -> RegionStats {
        self.region.stats()
    }
}
