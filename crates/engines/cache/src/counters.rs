//! Named counters of the engine (`stats`): every write case, forced and periodic flushes,
//! read hits and misses, recovery work.

use crate::slot::WriteCase;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counters {
    cases: [AtomicU64; WriteCase::ALL.len()],
    pub multi_chunk_writes: AtomicU64,
    pub forced_flushes: AtomicU64,
    pub chunks_flushed: AtomicU64,
    pub flush_errors: AtomicU64,
    pub read_hits: AtomicU64,
    pub read_misses: AtomicU64,
    /// Read misses loaded into a clean chunk (the next read of the block hits PM).
    pub read_fills: AtomicU64,
    /// Read fills that freed a clean chunk of another file first (Case 3-3).
    pub read_fill_evictions: AtomicU64,
    /// Read misses not cached (no room without a home write, or the length in flux).
    pub read_fills_skipped: AtomicU64,
    pub orphan_chunks_dropped: AtomicU64,
    pub home_conflicts_resolved: AtomicU64,
    pub homes_adopted: AtomicU64,
}

impl Counters {
    pub fn case(&self, case: WriteCase) {
        self.cases[case.index()].fetch_add(1, Ordering::Relaxed);
    }
    pub fn case_count(&self, case: WriteCase) -> u64 {
        self.cases[case.index()].load(Ordering::Relaxed)
    }
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn named(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = WriteCase::ALL
            .iter()
            .map(|c| (c.name().to_string(), self.case_count(*c)))
            .collect();
        for (name, c) in [
            ("multi_chunk_writes", &self.multi_chunk_writes),
            ("forced_flushes", &self.forced_flushes),
            ("chunks_flushed", &self.chunks_flushed),
            ("flush_errors", &self.flush_errors),
            ("read_hits", &self.read_hits),
            ("read_misses", &self.read_misses),
            ("read_fills", &self.read_fills),
            ("read_fill_evictions", &self.read_fill_evictions),
            ("read_fills_skipped", &self.read_fills_skipped),
            ("orphan_chunks_dropped", &self.orphan_chunks_dropped),
            ("home_conflicts_resolved", &self.home_conflicts_resolved),
            ("homes_adopted", &self.homes_adopted),
        ] {
            out.push((name.to_string(), c.load(Ordering::Relaxed)));
        }
        out
    }
}
