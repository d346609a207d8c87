//! The physical floor: durable write bandwidth of a region.
//!
//! One durable copy of the data is the least any engine must do, so the engines' results are
//! reported as a distance from this floor. An operation is one write of `size` bytes made
//! durable: either a cached copy + flush + fence, or a non-temporal copy + fence. Operations
//! go to successive offsets, wrapping around the measured span, so large spans leave the CPU
//! caches.

use crate::Region;
use std::time::Instant;

/// How an operation copies its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyPath {
    /// `write` + `flush` + `fence`.
    CachedFlush,
    /// `write_nt` + `fence`.
    NonTemporal,
}

/// Result of [`measure`]: the median run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloorSample {
    pub size: u64,
    pub path: CopyPath,
    /// Operations per run.
    pub ops: u64,
    /// Median over runs of the mean time of one durable write.
    pub ns_per_op: f64,
    /// `size / ns_per_op` in MB/s (10^6 bytes per second).
    pub mb_per_s: f64,
}

/// Parameters of a measurement.
#[derive(Clone, Copy, Debug)]
pub struct FloorConfig {
    /// Bytes written per run (the number of operations is this divided by the size, at least 1).
    pub bytes_per_run: u64,
    /// Runs; the median is reported.
    pub runs: usize,
    /// Offset and length of the part of the region written to.
    pub span_off: u64,
    pub span_len: u64,
}

/// Measure the durable write bandwidth of `region` for writes of `size` bytes.
///
/// Panics if the span is outside the region or smaller than `size` (a caller bug).
pub fn measure<R: Region>(
    region: &R,
    size: u64,
    path: CopyPath,
    config: FloorConfig,
) -> FloorSample {
    assert!(
        size > 0 && size <= config.span_len,
        "floor: size {size} does not fit the span"
    );
    crate::check_range(region.len(), config.span_off, config.span_len);
    let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
    let ops = (config.bytes_per_run / size).max(1);
    let slots = config.span_len / size;
    let mut times: Vec<f64> = Vec::with_capacity(config.runs.max(1));
    let mut slot = 0;
    for _ in 0..config.runs.max(1) {
        let start = Instant::now();
        for _ in 0..ops {
            let off = config.span_off + slot * size;
            match path {
                CopyPath::CachedFlush => {
                    region.write(off, &data);
                    region.flush(off, size);
                }
                CopyPath::NonTemporal => region.write_nt(off, &data),
            }
            // persist: this write is durable before the next one starts (one persistence
            // point per operation, as an engine's commit record needs).
            region.fence();
            slot = (slot + 1) % slots;
        }
        times.push(start.elapsed().as_nanos() as f64 / ops as f64);
    }
    times.sort_by(f64::total_cmp);
    let ns_per_op = times[times.len() / 2];
    FloorSample {
        size,
        path,
        ops,
        ns_per_op,
        mb_per_s: size as f64 / ns_per_op * 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DramRegion, SimRegion};

    #[test]
    fn measure_writes_the_data_durably() {
        // Tiny run on the simulator: every operation must be durable at its fence.
        let region = SimRegion::new(8192);
        let config = FloorConfig {
            bytes_per_run: 4096,
            runs: 3,
            span_off: 1024,
            span_len: 4096,
        };
        for path in [CopyPath::CachedFlush, CopyPath::NonTemporal] {
            let sample = measure(&region, 1000, path, config);
            assert_eq!(sample.ops, 4);
            assert!(sample.ns_per_op > 0.0 && sample.mb_per_s > 0.0);
            let image = region.persistent_image();
            let expect: Vec<u8> = (0..1000u64).map(|i| (i * 31 + 7) as u8).collect();
            for slot in 0..4 {
                let off = 1024 + slot * 1000;
                assert_eq!(&image[off..off + 1000], &expect[..], "slot {slot}");
            }
            assert_eq!(region.pending_line_count(), 0);
        }
        assert_eq!(region.fence_count(), 2 * 3 * 4);
    }

    #[test]
    fn one_operation_at_least() {
        let region = DramRegion::new(4096);
        let config = FloorConfig {
            bytes_per_run: 10,
            runs: 1,
            span_off: 0,
            span_len: 4096,
        };
        let sample = measure(&region, 4096, CopyPath::CachedFlush, config);
        assert_eq!(sample.ops, 1);
        assert_eq!(region.stats().fences, 1);
    }
}
