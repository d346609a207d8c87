//! Accounting of persistent-memory writes per named area and per block.
//!
//! [`Accounted`] wraps any region and counts, for every area named with
//! [`Region::define_area`] (and for the bytes outside every area, reported as
//! [`UNNAMED_AREA`]):
//! - bytes stored (`write`, `fill`, `write_nt`, `store_u64`), split exactly at area borders;
//! - cache lines flushed (`flush` and `write_nt`), a line on a border counting in each area it
//!   overlaps;
//! - fences: a fence counts once for every area that had a line flushed since the previous
//!   fence (by any thread), so an area's fence count is the number of persistence points
//!   that made some of its lines durable.
//!
//! and, per block of `block_size` bytes (4 KB by default), the number of cache lines flushed
//! into it: the wear figure of the seeds. Areas should not overlap; if they do, each counts.

use crate::{lines_in, Region, RegionStats, CACHE_LINE};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;

/// Name under which bytes outside every defined area are reported.
pub const UNNAMED_AREA: &str = "(unnamed)";

/// Default accounting block size.
pub const BLOCK_SIZE_DEFAULT: u64 = 4096;

#[derive(Default)]
struct Counters {
    bytes_stored: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
    flushed_since_fence: AtomicBool,
}

impl Counters {
    fn reset(&self) {
        self.bytes_stored.store(0, Ordering::Relaxed);
        self.lines_flushed.store(0, Ordering::Relaxed);
        self.fences.store(0, Ordering::Relaxed);
        self.flushed_since_fence.store(false, Ordering::Relaxed);
    }

    fn add_lines(&self, lines: u64) {
        if lines > 0 {
            self.lines_flushed.fetch_add(lines, Ordering::Relaxed);
            self.flushed_since_fence.store(true, Ordering::Relaxed);
        }
    }

    fn fence(&self) {
        if self.flushed_since_fence.swap(false, Ordering::Relaxed) {
            self.fences.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Area {
    name: &'static str,
    off: u64,
    len: u64,
    counters: Counters,
}

/// Counts of one area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AreaReport {
    pub name: &'static str,
    pub off: u64,
    pub len: u64,
    pub bytes_stored: u64,
    pub lines_flushed: u64,
    pub fences: u64,
}

/// A snapshot of the accounting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountingReport {
    /// The defined areas in offset order, then [`UNNAMED_AREA`] (offset 0, length 0).
    pub areas: Vec<AreaReport>,
    /// Block size of `block_writes`.
    pub block_size: u64,
    /// Lines flushed into each block.
    pub block_writes: Vec<u64>,
    /// Totals of the wrapped region since the last reset.
    pub total: RegionStats,
}

impl AccountingReport {
    /// The counts of the area called `name`.
    pub fn area(&self, name: &str) -> Option<&AreaReport> {
        self.areas.iter().find(|area| area.name == name)
    }

    /// Bytes written back to the medium (lines flushed × 64).
    pub fn bytes_flushed(&self) -> u64 {
        self.total.lines_flushed * CACHE_LINE
    }

    /// The most lines flushed into one block (the wear hot spot).
    pub fn block_writes_max(&self) -> u64 {
        self.block_writes.iter().copied().max().unwrap_or(0)
    }
}

impl fmt::Display for AccountingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<20} {:>14} {:>14} {:>10}",
            "area", "bytes stored", "lines flushed", "fences"
        )?;
        for area in &self.areas {
            writeln!(
                f,
                "{:<20} {:>14} {:>14} {:>10}",
                area.name, area.bytes_stored, area.lines_flushed, area.fences
            )?;
        }
        let t = &self.total;
        writeln!(
            f,
            "{:<20} {:>14} {:>14} {:>10}",
            "total", t.bytes_stored, t.lines_flushed, t.fences
        )?;
        let written = self.block_writes.iter().filter(|&&n| n > 0).count();
        write!(
            f,
            "blocks of {} B written: {} of {}, most lines flushed into one block: {}",
            self.block_size,
            written,
            self.block_writes.len(),
            self.block_writes_max()
        )
    }
}

/// A region that counts its writes per area and per block (see the module documentation).
pub struct Accounted<R> {
    inner: R,
    areas: RwLock<Vec<Area>>,
    unnamed: Counters,
    block_size: u64,
    block_writes: Box<[AtomicU64]>,
    base_lock: RwLock<RegionStats>,
}

impl<R: Region> Accounted<R> {
    /// Wrap `inner` with 4 KB accounting blocks.
    pub fn new(inner: R) -> Self {
        Self::with_block_size(inner, BLOCK_SIZE_DEFAULT)
    }

    /// Wrap `inner` with accounting blocks of `block_size` bytes (at least one cache line).
    pub fn with_block_size(inner: R, block_size: u64) -> Self {
        let block_size = block_size.max(CACHE_LINE);
        let blocks = inner.len().div_ceil(block_size) as usize;
        let base = inner.stats();
        Accounted {
            inner,
            areas: RwLock::new(Vec::new()),
            unnamed: Counters::default(),
            block_size,
            block_writes: (0..blocks).map(|_| AtomicU64::new(0)).collect(),
            base_lock: RwLock::new(base),
        }
    }

    /// The wrapped region.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Snapshot of every counter.
    pub fn report(&self) -> AccountingReport {
        let areas = self.areas.read().unwrap_or_else(|e| e.into_inner());
        let mut reports: Vec<AreaReport> = areas
            .iter()
            .map(|a| report(a.name, a.off, a.len, &a.counters))
            .collect();
        reports.push(report(UNNAMED_AREA, 0, 0, &self.unnamed));
        let base = *self.base_lock.read().unwrap_or_else(|e| e.into_inner());
        let now = self.inner.stats();
        AccountingReport {
            areas: reports,
            block_size: self.block_size,
            block_writes: self
                .block_writes
                .iter()
                .map(|n| n.load(Ordering::Relaxed))
                .collect(),
            total: RegionStats {
                bytes_stored: now.bytes_stored - base.bytes_stored,
                lines_flushed: now.lines_flushed - base.lines_flushed,
                fences: now.fences - base.fences,
            },
        }
    }

    /// Zero every counter (areas stay defined).
    pub fn reset(&self) {
        for area in self.areas.read().unwrap_or_else(|e| e.into_inner()).iter() {
            area.counters.reset();
        }
        self.unnamed.reset();
        for block in self.block_writes.iter() {
            block.store(0, Ordering::Relaxed);
        }
        *self.base_lock.write().unwrap_or_else(|e| e.into_inner()) = self.inner.stats();
    }

    /// Apply `count(counters, start, len)` to every area piece of `[off, off + len)` and to
    /// the uncovered pieces (unnamed).
    fn for_pieces(&self, off: u64, len: u64, count: impl Fn(&Counters, u64, u64)) {
        if len == 0 {
            return;
        }
        let end = off + len;
        let areas = self.areas.read().unwrap_or_else(|e| e.into_inner());
        let mut covered_to = off;
        for area in areas.iter() {
            let (start, stop) = (area.off.max(off), (area.off + area.len).min(end));
            if start < stop {
                count(&area.counters, start, stop - start);
                if start > covered_to {
                    count(&self.unnamed, covered_to, start - covered_to);
                }
                covered_to = covered_to.max(stop);
            }
        }
        if covered_to < end {
            count(&self.unnamed, covered_to, end - covered_to);
        }
    }

    fn count_stored(&self, off: u64, len: u64) {
        self.for_pieces(off, len, |counters, _, n| {
            counters.bytes_stored.fetch_add(n, Ordering::Relaxed);
        });
    }

    fn count_flushed(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.for_pieces(off, len, |counters, start, n| {
            counters.add_lines(lines_in(start, n))
        });
        let first_line = off / CACHE_LINE;
        let end_line = (off + len).div_ceil(CACHE_LINE);
        let lines_per_block = self.block_size / CACHE_LINE;
        let mut line = first_line;
        while line < end_line {
            let block = line / lines_per_block;
            let block_end = ((block + 1) * lines_per_block).min(end_line);
            if let Some(counter) = self.block_writes.get(block as usize) {
                counter.fetch_add(block_end - line, Ordering::Relaxed);
            }
            line = block_end;
        }
    }
}

fn report(name: &'static str, off: u64, len: u64, counters: &Counters) -> AreaReport {
    AreaReport {
        name,
        off,
        len,
        bytes_stored: counters.bytes_stored.load(Ordering::Relaxed),
        lines_flushed: counters.lines_flushed.load(Ordering::Relaxed),
        fences: counters.fences.load(Ordering::Relaxed),
    }
}

impl<R: Region> Region for Accounted<R> {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        self.inner.read(off, buf)
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.inner.write(off, data);
        self.count_stored(off, data.len() as u64);
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.inner.fill(off, len, byte);
        self.count_stored(off, len);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.inner.write_nt(off, data);
        self.count_stored(off, data.len() as u64);
        self.count_flushed(off, data.len() as u64);
    }

    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        self.inner.write_line_nt(off, line);
        self.count_stored(off, 64);
        self.count_flushed(off, 64);
    }

    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        self.inner.copy_nt_within(src, dst, len);
        self.count_stored(dst, len);
        self.count_flushed(dst, len);
    }

    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }

    fn store_u64_nt(&self, off: u64, value: u64) {
        self.inner.store_u64_nt(off, value);
        self.count_stored(off, 8);
        self.count_flushed(off, 8);
    }

    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value);
        self.count_stored(off, 8);
    }

    fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len);
        self.count_flushed(off, len);
    }

    fn fence(&self) {
        self.inner.fence();
        for area in self.areas.read().unwrap_or_else(|e| e.into_inner()).iter() {
            area.counters.fence();
        }
        self.unnamed.fence();
    }

    fn stats(&self) -> RegionStats {
        self.inner.stats()
    }

    fn prefetch(&self, off: u64) {
        self.inner.prefetch(off)
    }

    /// Record the area (kept in offset order); a second definition of the same name replaces
    /// the first.
    fn define_area(&self, name: &'static str, off: u64, len: u64) {
        {
            let mut areas = self.areas.write().unwrap_or_else(|e| e.into_inner());
            areas.retain(|area| area.name != name);
            let at = areas.partition_point(|area| area.off <= off);
            areas.insert(
                at,
                Area {
                    name,
                    off,
                    len,
                    counters: Counters::default(),
                },
            );
        }
        self.inner.define_area(name, off, len)
    }
}

#[cfg(test)]
mod tests;
