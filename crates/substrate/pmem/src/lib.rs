//! `pmem` — the persistent-memory substrate of atomfs.
//!
//! Every persistent byte an engine writes to persistent memory goes through the [`Region`]
//! trait: `write` (a cached store), `flush` (write the cache lines back: clwb, clflushopt or
//! clflush, chosen at run time), `fence` (sfence: order and complete the flushes), `persist`
//! (= flush + fence), `write_nt` (non-temporal copy for large writes, durable at the next
//! fence) and `store_u64` (an aligned 8-byte store, which the hardware makes atomic).
//! A persistence point is always a flush followed by a fence.
//!
//! Implementations:
//! - [`DramRegion`]: plain heap memory, volatile; flush and fence only count. For unit tests and
//!   for the no-consistency baselines that must not pay for persistence.
//! - [`MappedRegion`]: a `mmap`ed pool file with an honest [`Durability`] mode (flush + fence
//!   on DAX and tmpfs, plus `msync` elsewhere), run-time choice of clwb/clflushopt/clflush.
//! - [`SimRegion`]: the crash simulator (persistent and cache images, torn unflushed lines,
//!   crash images at every fence), see [`sim`].
//!
//! Wrappers, each a [`Region`] over any region, costing nothing when not used:
//! - [`Emulated`]: the NVMM emulator (extra latency per flushed line, write-bandwidth cap).
//! - [`Accounted`]: bytes stored, lines flushed and fences per named area
//!   ([`Region::define_area`]) and lines flushed per block (wear).
//!
//! Engines are generic over `R: Region` so that the mapped fast path is monomorphised and pays
//! nothing for the simulator.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod account;
pub mod crc;
mod dram;
pub mod emulate;
mod error;
pub mod floor;
pub mod mapped;
pub mod sim;

pub use account::{Accounted, AccountingReport, AreaReport};
pub use dram::DramRegion;
pub use emulate::{Emulated, EmulatorConfig};
pub use error::{PmError, PmResult};
pub use mapped::{Durability, FlushInstruction, MappedRegion};
pub use sim::{CrashConfig, CrashPoint, SimRegion};

/// Size of a CPU cache line, the unit of flushing and of the crash simulator.
pub const CACHE_LINE: u64 = 64;

/// A byte range with persistent-memory semantics.
///
/// Offsets are relative to the start of the region. Every method asserts that the range lies
/// inside the region (an out-of-range access is a bug in the caller: engines validate every
/// pointer they read from media before using it). Concurrent calls on *disjoint* byte ranges are
/// allowed from many threads; callers serialise conflicting accesses to the same bytes.
pub trait Region: Send + Sync + 'static {
    /// Length of the region in bytes.
    fn len(&self) -> u64;

    /// True when the region has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `buf.len()` bytes at `off` into `buf` (a load; sees the latest stores).
    fn read(&self, off: u64, buf: &mut [u8]);

    /// Store `data` at `off` through the CPU cache. Not durable until flushed and fenced.
    fn write(&self, off: u64, data: &[u8]);

    /// Fill `len` bytes at `off` with `byte` through the CPU cache.
    fn fill(&self, off: u64, len: u64, byte: u8);

    /// Non-temporal copy of `data` to `off`: bypasses the cache, durable at the next
    /// [`fence`](Region::fence) without a flush. Used for large writes.
    fn write_nt(&self, off: u64, data: &[u8]);

    /// Non-temporal store of one whole, aligned cache line (`off` a multiple of 64): what
    /// [`write_nt`](Region::write_nt) does for it, with no alignment cases to handle. Log
    /// entries and completed edge lines are written this way.
    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        assert!(
            off.is_multiple_of(CACHE_LINE),
            "pmem: unaligned line store at {off}"
        );
        self.write_nt(off, line)
    }

    /// Non-temporal copy of `len` bytes from `src` to `dst` inside the region (the two
    /// ranges must not overlap): what `write_nt(dst, ..)` of the bytes `read` at `src` does,
    /// without the round trip through a buffer. Durable at the next
    /// [`fence`](Region::fence) without a flush.
    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        const CHUNK: u64 = 512;
        let mut buf = [0u8; CHUNK as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(CHUNK);
            self.read(src + done, &mut buf[..n as usize]);
            self.write_nt(dst + done, &buf[..n as usize]);
            done += n;
        }
    }

    /// Aligned 8-byte load. `off` must be 8-byte aligned.
    fn load_u64(&self, off: u64) -> u64;

    /// Aligned 8-byte store, atomic with respect to crashes (it is never torn).
    /// Not durable until flushed and fenced. `off` must be 8-byte aligned.
    fn store_u64(&self, off: u64, value: u64);

    /// Aligned 8-byte non-temporal store, atomic with respect to crashes like
    /// [`store_u64`](Region::store_u64): it bypasses the cache (no read of the cold line),
    /// durable at the next [`fence`](Region::fence) without a flush. For words that are not
    /// read again soon, such as the seal of a log entry being freed. `off` must be 8-byte
    /// aligned.
    fn store_u64_nt(&self, off: u64, value: u64) {
        self.store_u64(off, value);
        self.flush(off, 8);
    }

    /// Write back every cache line overlapping `[off, off + len)`.
    fn flush(&self, off: u64, len: u64);

    /// Store fence: every flush and non-temporal store issued before it is durable after it.
    fn fence(&self);

    /// flush + fence: `[off, off + len)` is durable when this returns.
    fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    /// Counters of stores, flushes and fences (per-area counts: [`Accounted`]).
    fn stats(&self) -> RegionStats;

    /// Name the area `[off, off + len)` (metadata log, data log, inode table, data blocks...)
    /// for accounting. Engines call it once per area at mount; regions that do not account
    /// ignore it.
    fn define_area(&self, name: &'static str, off: u64, len: u64) {
        let _ = (name, off, len);
    }

    /// Hint that the line holding `off` will be read soon (a software prefetch into the
    /// CPU cache). No effect on contents or durability; an offset outside the region is
    /// ignored. Regions that are not memory mappings ignore it.
    fn prefetch(&self, off: u64) {
        let _ = off;
    }
}

/// A shared region is a region: the crash harness keeps an `Arc<SimRegion>` (to install fence
/// hooks and take crash images) while the engine owns another handle.
impl<R: Region + ?Sized> Region for std::sync::Arc<R>
where
    std::sync::Arc<R>: Send + Sync,
{
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        (**self).read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        (**self).write(off, data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        (**self).fill(off, len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        (**self).write_nt(off, data)
    }
    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        (**self).write_line_nt(off, line)
    }
    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        (**self).copy_nt_within(src, dst, len)
    }
    fn load_u64(&self, off: u64) -> u64 {
        (**self).load_u64(off)
    }
    fn store_u64(&self, off: u64, value: u64) {
        (**self).store_u64(off, value)
    }
    fn store_u64_nt(&self, off: u64, value: u64) {
        (**self).store_u64_nt(off, value)
    }
    fn flush(&self, off: u64, len: u64) {
        (**self).flush(off, len)
    }
    fn fence(&self) {
        (**self).fence()
    }
    fn persist(&self, off: u64, len: u64) {
        (**self).persist(off, len)
    }
    fn stats(&self) -> RegionStats {
        (**self).stats()
    }
    fn define_area(&self, name: &'static str, off: u64, len: u64) {
        (**self).define_area(name, off, len)
    }
    fn prefetch(&self, off: u64) {
        (**self).prefetch(off)
    }
}

/// Counters every region keeps (cheap relaxed atomics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Bytes stored with `write`, `fill`, `write_nt` and `store_u64`.
    pub bytes_stored: u64,
    /// Cache lines written back by `flush` (plus lines written by `write_nt`).
    pub lines_flushed: u64,
    /// Fences issued.
    pub fences: u64,
}

/// Panics with a clear message when `[off, off+len)` is not inside a region of `region_len`
/// bytes. This is an invariant check (callers validate untrusted offsets first).
#[inline]
pub fn check_range(region_len: u64, off: u64, len: u64) {
    let end = off.checked_add(len);
    assert!(
        matches!(end, Some(e) if e <= region_len),
        "pmem: access [{off}, {off}+{len}) outside region of {region_len} bytes"
    );
}

/// Number of cache lines overlapping `[off, off + len)`.
#[inline]
pub fn lines_in(off: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = off / CACHE_LINE;
    let last = (off + len - 1) / CACHE_LINE;
    last - first + 1
}
