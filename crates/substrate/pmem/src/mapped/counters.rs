//! The region's statistics counters, updated without a locked instruction on the hot path.
//!
//! A locked read-modify-write (`lock xadd`, what `AtomicU64::fetch_add` compiles to) after a
//! `clwb` or a non-temporal store waits for them to complete (locked instructions are ordered
//! with flushes and drain the write-combining buffers): one shared `fetch_add` per call made
//! every flush and every `write_nt` a fence, and the counter line bounced between a
//! foreground thread and a checkpoint thread. Each thread therefore counts in a shard of its
//! own (claimed once with a compare-exchange), by a plain load and store: it is the shard's
//! only writer, so no update is lost. A thread that finds no free shard among a few probes
//! (more than `SHARDS` threads have used the region) counts in a shared shard with
//! `fetch_add`, which is exact too.

use std::sync::atomic::{AtomicU64, Ordering};

const SHARDS: usize = 64;
const PROBES: usize = 4;

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// A number no other thread of the process has (0 = free shard).
    static TOKEN: u64 = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
}

#[repr(align(128))]
#[derive(Default)]
struct Shard {
    owner: AtomicU64,
    bytes_stored: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
}

pub(super) struct Counters {
    shards: Box<[Shard]>,
    shared: Shard,
}

/// Add `n` to a counter only the calling thread writes.
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    if n != 0 {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
}

impl Counters {
    pub(super) fn new() -> Counters {
        Counters {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            shared: Shard::default(),
        }
    }

    #[inline]
    pub(super) fn add(&self, bytes_stored: u64, lines_flushed: u64, fences: u64) {
        let token = TOKEN.with(|t| *t);
        let start = token as usize % SHARDS;
        for i in 0..PROBES {
            let shard = &self.shards[(start + i) % SHARDS];
            let owner = shard.owner.load(Ordering::Relaxed);
            let mine = owner == token
                || (owner == 0
                    && shard
                        .owner
                        .compare_exchange(0, token, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok());
            if mine {
                bump(&shard.bytes_stored, bytes_stored);
                bump(&shard.lines_flushed, lines_flushed);
                bump(&shard.fences, fences);
                return;
            }
        }
        let shared = &self.shared;
        shared
            .bytes_stored
            .fetch_add(bytes_stored, Ordering::Relaxed);
        shared
            .lines_flushed
            .fetch_add(lines_flushed, Ordering::Relaxed);
        shared.fences.fetch_add(fences, Ordering::Relaxed);
    }

    /// (bytes stored, lines flushed, fences) summed over every thread.
    pub(super) fn sum(&self) -> (u64, u64, u64) {
        let mut total = (0u64, 0u64, 0u64);
        for shard in self.shards.iter().chain(std::iter::once(&self.shared)) {
            total.0 = total
                .0
                .wrapping_add(shard.bytes_stored.load(Ordering::Relaxed));
            total.1 = total
                .1
                .wrapping_add(shard.lines_flushed.load(Ordering::Relaxed));
            total.2 = total.2.wrapping_add(shard.fences.load(Ordering::Relaxed));
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_threads_lose_no_count() {
        let counters = std::sync::Arc::new(Counters::new());
        // More threads than shards: some count in the shared shard.
        let threads: Vec<_> = (0..SHARDS + 20)
            .map(|_| {
                let c = counters.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(3, 2, 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("counter thread");
        }
        let n = (SHARDS as u64 + 20) * 1000;
        assert_eq!(counters.sum(), (3 * n, 2 * n, n));
    }
}
