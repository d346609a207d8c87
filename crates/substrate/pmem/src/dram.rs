//! A volatile region in heap memory.

use crate::{check_range, Region, RegionStats};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Heap memory behind the [`Region`] trait. Nothing survives the process: flush and fence only
/// count. Used by unit tests and by the no-consistency (NC) baselines.
pub struct DramRegion {
    // u64 words keep the buffer 8-byte aligned for `load_u64`/`store_u64`.
    words: Box<[UnsafeCell<u64>]>,
    len: u64,
    bytes_stored: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
}

// SAFETY: the buffer is only accessed through raw pointers in the Region methods; the Region
// contract makes callers serialise conflicting accesses to the same bytes, and the 8-byte
// accessors use atomics.
unsafe impl Sync for DramRegion {}
// SAFETY: the region owns its buffer; moving it to another thread moves the ownership.
unsafe impl Send for DramRegion {}

impl DramRegion {
    /// A zero-filled region of `len` bytes.
    pub fn new(len: u64) -> Self {
        let words = len.div_ceil(8) as usize;
        let words: Box<[UnsafeCell<u64>]> = (0..words).map(|_| UnsafeCell::new(0)).collect();
        DramRegion {
            words,
            len,
            bytes_stored: AtomicU64::new(0),
            lines_flushed: AtomicU64::new(0),
            fences: AtomicU64::new(0),
        }
    }

    /// A region holding a copy of `image`.
    pub fn from_bytes(image: &[u8]) -> Self {
        let region = Self::new(image.len() as u64);
        region.write(0, image);
        region
    }

    fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.words.as_ptr()) as *mut u8
    }
}

impl Region for DramRegion {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.len, off, buf.len() as u64);
        // SAFETY: the range is inside the buffer (checked above); `buf` is a distinct
        // allocation, so the copies cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base().add(off as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        }
    }

    fn write(&self, off: u64, data: &[u8]) {
        check_range(self.len, off, data.len() as u64);
        // SAFETY: in range (checked above); callers serialise conflicting accesses.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base().add(off as usize), data.len())
        }
        self.bytes_stored
            .fetch_add(data.len() as u64, Ordering::Relaxed);
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        check_range(self.len, off, len);
        // SAFETY: in range (checked above); callers serialise conflicting accesses.
        unsafe { std::ptr::write_bytes(self.base().add(off as usize), byte, len as usize) }
        self.bytes_stored.fetch_add(len, Ordering::Relaxed);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.write(off, data);
        self.lines_flushed
            .fetch_add(crate::lines_in(off, data.len() as u64), Ordering::Relaxed);
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte load at {off}");
        check_range(self.len, off, 8);
        // SAFETY: aligned (asserted), in range, and the buffer is made of u64 words; AtomicU64
        // has the same layout as u64.
        unsafe { (*(self.base().add(off as usize) as *const AtomicU64)).load(Ordering::Acquire) }
    }

    fn store_u64(&self, off: u64, value: u64) {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte store at {off}");
        check_range(self.len, off, 8);
        // SAFETY: as in load_u64.
        unsafe {
            (*(self.base().add(off as usize) as *const AtomicU64)).store(value, Ordering::Release)
        }
        self.bytes_stored.fetch_add(8, Ordering::Relaxed);
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.len, off, len);
        self.lines_flushed
            .fetch_add(crate::lines_in(off, len), Ordering::Relaxed);
    }

    fn fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }

    fn stats(&self) -> RegionStats {
        RegionStats {
            bytes_stored: self.bytes_stored.load(Ordering::Relaxed),
            lines_flushed: self.lines_flushed.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
        }
    }
}
