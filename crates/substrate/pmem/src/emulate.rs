//! The NVMM emulator: slower writes on top of any region.
//!
//! As in Mnemosyne (and the FCFS and NJS evaluations that use it), DRAM stands in for NVMM and
//! the difference in write cost is added by software: every cache line written back (by
//! `flush` or `write_nt`) costs an extra `write_latency_ns` of spinning, and the bytes written
//! back pass through a token bucket that caps the write bandwidth at `write_bandwidth_max`
//! bytes per second (shared by all threads). Reads are not slowed. The default configuration
//! is off (no delay); the seeds use 150–300 ns and 1–4 GB/s.

use crate::{lines_in, Region, RegionStats, CACHE_LINE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// NVMM emulation parameters (0 = off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulatorConfig {
    /// Extra latency per cache line written back, in nanoseconds.
    pub write_latency_ns: u64,
    /// Write bandwidth cap in bytes per second over written-back lines (0 = no cap).
    pub write_bandwidth_max: u64,
}

impl EmulatorConfig {
    /// True when the configuration adds no delay.
    pub fn is_off(&self) -> bool {
        self.write_latency_ns == 0 && self.write_bandwidth_max == 0
    }
}

/// A region with emulated NVMM write latency and bandwidth (see the module documentation).
pub struct Emulated<R> {
    inner: R,
    config: EmulatorConfig,
    epoch: Instant,
    /// Nanoseconds after `epoch` when the bandwidth-limited medium is free again.
    busy_until_ns: AtomicU64,
}

impl<R: Region> Emulated<R> {
    /// Wrap `inner` with the given emulation parameters.
    pub fn new(inner: R, config: EmulatorConfig) -> Self {
        Emulated {
            inner,
            config,
            epoch: Instant::now(),
            busy_until_ns: AtomicU64::new(0),
        }
    }

    /// The wrapped region.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Unwrap.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The emulation parameters.
    pub fn config(&self) -> EmulatorConfig {
        self.config
    }

    /// Charge `lines` written-back cache lines: latency plus bandwidth.
    fn charge(&self, lines: u64) {
        if lines == 0 || self.config.is_off() {
            return;
        }
        let mut deadline = self.now_ns() + lines * self.config.write_latency_ns;
        if self.config.write_bandwidth_max > 0 {
            let bytes = lines * CACHE_LINE;
            let cost =
                (bytes as u128 * 1_000_000_000 / self.config.write_bandwidth_max as u128) as u64;
            let now = self.now_ns();
            let mut busy = self.busy_until_ns.load(Ordering::Relaxed);
            let done = loop {
                let done = busy.max(now) + cost;
                match self.busy_until_ns.compare_exchange_weak(
                    busy,
                    done,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break done,
                    Err(current) => busy = current,
                }
            };
            deadline = deadline.max(done);
        }
        self.spin_until(deadline);
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn spin_until(&self, deadline_ns: u64) {
        let deadline = self.epoch + Duration::from_nanos(deadline_ns);
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    }
}

impl<R: Region> Region for Emulated<R> {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        self.inner.read(off, buf)
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.inner.write(off, data)
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.inner.fill(off, len, byte)
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.inner.write_nt(off, data);
        self.charge(lines_in(off, data.len() as u64));
    }

    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        self.inner.write_line_nt(off, line);
        self.charge(1);
    }

    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        self.inner.copy_nt_within(src, dst, len);
        self.charge(lines_in(dst, len));
    }

    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }

    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value)
    }

    fn store_u64_nt(&self, off: u64, value: u64) {
        self.inner.store_u64_nt(off, value);
        self.charge(1);
    }

    fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len);
        self.charge(lines_in(off, len));
    }

    fn fence(&self) {
        self.inner.fence()
    }

    fn stats(&self) -> RegionStats {
        self.inner.stats()
    }

    fn define_area(&self, name: &'static str, off: u64, len: u64) {
        self.inner.define_area(name, off, len)
    }

    fn prefetch(&self, off: u64) {
        self.inner.prefetch(off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DramRegion;

    #[test]
    fn default_is_off_and_passes_through() {
        let region = Emulated::new(DramRegion::new(4096), EmulatorConfig::default());
        assert!(region.config().is_off());
        region.write(10, b"abc");
        region.persist(0, 4096);
        let mut buf = [0u8; 3];
        region.read(10, &mut buf);
        assert_eq!(&buf, b"abc");
        assert_eq!(region.stats().lines_flushed, 64);
        assert_eq!(region.stats().fences, 1);
    }

    #[test]
    fn latency_delays_each_flushed_line() {
        let latency = 20_000; // 20 µs per line, large enough to measure reliably
        let config = EmulatorConfig {
            write_latency_ns: latency,
            write_bandwidth_max: 0,
        };
        let region = Emulated::new(DramRegion::new(4096), config);
        let start = Instant::now();
        region.flush(0, 640); // 10 lines
        region.write_nt(1024, &[1; 128]); // 2 lines
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_nanos(12 * latency), "{elapsed:?}");
    }

    #[test]
    fn bandwidth_cap_limits_throughput() {
        // 64 KB at 16 MB/s must take at least 4 ms, whatever the flush sizes.
        let config = EmulatorConfig {
            write_latency_ns: 0,
            write_bandwidth_max: 16 << 20,
        };
        let region = Emulated::new(DramRegion::new(1 << 16), config);
        let start = Instant::now();
        for chunk in 0..16u64 {
            region.flush(chunk * 4096, 4096);
        }
        let elapsed = start.elapsed();
        let floor = Duration::from_nanos((1u64 << 16) * 1_000_000_000 / (16 << 20));
        assert!(elapsed >= floor, "{elapsed:?} < {floor:?}");
    }
}
