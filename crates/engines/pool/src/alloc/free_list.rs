//! Volatile allocators (seed §III-C "Allocator"): free lists of blocks, log slots and inodes
//! live in DRAM only and are rebuilt at mount by walking the metadata (recovery/recover.rs).
//!
//! A free list has two tiers. Each thread that allocates or frees has its own small *cache*
//! of free numbers (only that thread takes its lock, so the lock and the numbers stay in its
//! core's cache); caches exchange numbers with a shared *depot*, split in shards behind their
//! own locks, a batch at a time. The foreground thread that allocates pending blocks and the
//! checkpoint thread that frees them thus meet on a shared lock once per batch instead of
//! once per block. Every cache is registered with its list, so fsck sees the numbers in
//! caches as free, and a thread that finds the depot empty takes numbers from other caches
//! (a thread that ended leaves its cache behind).

use crate::sharing::Padded;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

const SHARDS: usize = 8;
/// Most numbers moved between a cache and the depot at once.
const BATCH_MAX: usize = 32;

/// Threads whose counts a list keeps on lines of their own (`FreeList::counts`); more
/// threads count in one shared counter, with a locked add.
const COUNTS: usize = 32;

/// One thread's cache of one list.
struct CacheCell {
    nums: Mutex<Vec<u64>>,
    /// Numbers this thread freed minus numbers it allocated (through this cache), on the
    /// cache's own line. Only the owner writes it: a plain load and store, not a locked
    /// add. A locked add to one shared count, which the checkpoint threads' frees moved to
    /// their cores, was a cache-line transfer that also waited for every non-temporal
    /// store in flight.
    net: AtomicI64,
    /// Whether `net` is summed by `free_count` (one of the first `COUNTS` caches); if not,
    /// the thread counts in `FreeList::net_shared`.
    own_count: bool,
}

type Cache = Arc<CacheCell>;

/// A two-tier set of free numbers (block numbers, log slots, inode numbers).
pub(crate) struct FreeList {
    id: usize,
    shards: Vec<Mutex<Vec<u64>>>,
    /// Every thread cache of this list (registered on the thread's first use).
    caches: Mutex<Vec<Cache>>,
    /// Numbers moved per batch (smaller for small lists, so that one cache cannot hold
    /// most of them).
    batch: usize,
    /// Numbers free when the list was made.
    free_at_start: u64,
    /// The caches whose `net` `free_count` sums: free now = `free_at_start` + the sum of
    /// every thread's `net` (numbers moved between caches and the depot stay free).
    counts: Box<[OnceLock<Cache>]>,
    /// Entries of `counts` claimed so far (some may be being filled in).
    counts_claimed: AtomicUsize,
    /// `net` of the threads beyond the first `COUNTS` (a locked add each).
    net_shared: Padded<AtomicI64>,
    total: u64,
    /// Debug builds: which numbers are handed out, asserted on every alloc and free (a
    /// double free or a free of a number never handed out stops there). Release builds
    /// check only the range: the set is a shared word per 64 numbers, which would move
    /// between the allocating and the freeing threads' cores.
    #[cfg(debug_assertions)]
    allocated: Shadow,
}

/// The numbers of a free list that are handed out, one bit each (debug builds).
#[cfg(debug_assertions)]
struct Shadow(Box<[std::sync::atomic::AtomicU64]>);

#[cfg(debug_assertions)]
impl Shadow {
    fn new(total: u64, is_free: &impl Fn(u64) -> bool) -> Shadow {
        let words = (0..total.div_ceil(64))
            .map(|w| {
                let bits = (w * 64..((w + 1) * 64).min(total))
                    .filter(|&n| !is_free(n))
                    .fold(0u64, |acc, n| acc | 1 << (n % 64));
                std::sync::atomic::AtomicU64::new(bits)
            })
            .collect();
        Shadow(words)
    }

    /// Mark `n` handed out (`out`) or given back; assert it was in the other state.
    fn flip(&self, n: u64, out: bool) {
        let (word, bit) = (&self.0[(n / 64) as usize], 1u64 << (n % 64));
        let before = if out {
            word.fetch_or(bit, Ordering::Relaxed)
        } else {
            word.fetch_and(!bit, Ordering::Relaxed)
        };
        assert_eq!(
            before & bit != 0,
            !out,
            "free list: number {n} {}",
            if out {
                "handed out twice"
            } else {
                "freed but not handed out (double free)"
            }
        );
    }
}

static NEXT_LIST: AtomicUsize = AtomicUsize::new(1);
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// This thread's home shard and its cache of each free list it used (by list id).
    static THREAD: RefCell<(usize, Vec<(usize, Cache)>)> =
        RefCell::new((NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % SHARDS, Vec::new()));
}

impl FreeList {
    /// A free list over numbers `0..total` where `is_free(n)` says which start free.
    pub(crate) fn new(total: u64, is_free: impl Fn(u64) -> bool) -> FreeList {
        let mut lists: Vec<Vec<u64>> = (0..SHARDS).map(|_| Vec::new()).collect();
        let mut free = 0;
        // Contiguous runs per shard keep neighbouring numbers together; lowest numbers are
        // handed out first within a shard.
        let run = total.div_ceil(SHARDS as u64).max(1);
        for n in (0..total).rev() {
            if is_free(n) {
                lists[((n / run) as usize).min(SHARDS - 1)].push(n);
                free += 1;
            }
        }
        FreeList {
            id: NEXT_LIST.fetch_add(1, Ordering::Relaxed),
            shards: lists.into_iter().map(Mutex::new).collect(),
            caches: Mutex::new(Vec::new()),
            batch: ((total / (SHARDS as u64 * 8)) as usize).clamp(1, BATCH_MAX),
            free_at_start: free,
            counts: (0..COUNTS).map(|_| OnceLock::new()).collect(),
            counts_claimed: AtomicUsize::new(0),
            net_shared: Padded::new(AtomicI64::new(0)),
            total,
            #[cfg(debug_assertions)]
            allocated: Shadow::new(total, &is_free),
        }
    }

    /// Run `f` with this thread's cache of this list and its home shard (the cache made and
    /// registered on the thread's first use of the list). No reference count is touched on
    /// this path: the thread-local entry keeps the cache alive.
    fn with_mine<T>(&self, f: impl FnOnce(&Cache, usize) -> T) -> T {
        THREAD.with(|t| {
            let mut t = t.borrow_mut();
            let home = t.0;
            let at = match t.1.iter().position(|(id, _)| *id == self.id) {
                Some(at) => at,
                None => {
                    let claimed = self.counts_claimed.fetch_add(1, Ordering::Relaxed);
                    let cache: Cache = Arc::new(CacheCell {
                        nums: Mutex::new(Vec::with_capacity(2 * self.batch)),
                        net: AtomicI64::new(0),
                        own_count: claimed < COUNTS,
                    });
                    if let Some(entry) = self.counts.get(claimed) {
                        // Claimed by this thread alone: the set cannot fail.
                        let _ = entry.set(cache.clone());
                    }
                    self.caches.lock().push(cache.clone());
                    // Forget caches of lists that are gone (only this thread held them besides
                    // the list), so a long-lived thread does not collect them.
                    t.1.retain(|(_, c)| Arc::strong_count(c) > 1);
                    t.1.push((self.id, cache));
                    t.1.len() - 1
                }
            };
            f(&t.1[at].1, home)
        })
    }

    /// Take one free number, or None when all are in use.
    pub(crate) fn alloc(&self) -> Option<u64> {
        let mut one: smallvec::SmallVec<[u64; 1]> = smallvec::SmallVec::new();
        self.alloc_many(1, &mut one);
        one.pop()
    }

    /// Take `count` free numbers into `out`. Returns false when fewer than `count` were
    /// free; `out` then holds what could be taken (the caller gives them back).
    pub(crate) fn alloc_many(&self, count: usize, out: &mut impl Extend<u64>) -> bool {
        self.with_mine(|cache, home| {
            let mut mine = cache.nums.lock();
            if mine.len() < count {
                let need = count - mine.len();
                // Gathered with the cache unlocked: at most one lock is held at any time.
                drop(mine);
                let gathered = self.gather(home, need, cache);
                mine = cache.nums.lock();
                mine.extend(gathered);
            }
            let n = count.min(mine.len());
            let at = mine.len() - n;
            #[cfg(debug_assertions)]
            for &number in &mine[at..] {
                self.allocated.flip(number, true);
            }
            out.extend(mine.drain(at..));
            self.count(cache, -(n as i64));
            n == count
        })
    }

    /// Collect at least `want` numbers (a batch when there are enough): from the home
    /// shard, then the other shards, then other threads' caches (`own` excepted). Takes one
    /// lock at a time.
    fn gather(&self, home: usize, want: usize, own: &Cache) -> Vec<u64> {
        let goal = want.max(self.batch);
        let mut got = Vec::with_capacity(goal);
        for i in 0..SHARDS {
            let mut shard = self.shards[(home + i) % SHARDS].lock();
            let n = (goal - got.len()).min(shard.len());
            let at = shard.len() - n;
            got.extend(shard.drain(at..));
            drop(shard);
            if got.len() >= want {
                return got;
            }
        }
        let others: Vec<Cache> = self.caches.lock().clone();
        for other in others.iter().filter(|c| !Arc::ptr_eq(c, own)) {
            let mut theirs = other.nums.lock();
            let n = (goal - got.len()).min(theirs.len());
            let at = theirs.len() - n;
            got.extend(theirs.drain(at..));
            drop(theirs);
            if got.len() >= want {
                break;
            }
        }
        got
    }

    /// Give a number back.
    pub(crate) fn free(&self, n: u64) {
        self.free_many(&[n]);
    }

    /// Give numbers back: into this thread's cache, spilling batches to the depot when the
    /// cache holds more than two batches.
    pub(crate) fn free_many(&self, numbers: &[u64]) {
        if numbers.is_empty() {
            return;
        }
        assert!(
            numbers.iter().all(|&n| n < self.total),
            "free list: a freed number is out of range (0..{})",
            self.total
        );
        #[cfg(debug_assertions)]
        for &number in numbers {
            self.allocated.flip(number, false);
        }
        self.with_mine(|cache, home| {
            let mut mine = cache.nums.lock();
            mine.extend_from_slice(numbers);
            self.count(cache, numbers.len() as i64);
            if mine.len() > 2 * self.batch {
                let keep = self.batch;
                let mut shard = self.shards[home].lock();
                shard.extend(mine.drain(keep..));
            }
        })
    }

    /// Add `delta` to the free count of this thread (`cache` is its own).
    #[inline]
    fn count(&self, cache: &CacheCell, delta: i64) {
        if cache.own_count {
            let net = &cache.net;
            net.store(net.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        } else {
            self.net_shared.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// Numbers currently free (of the calls that have returned: one running on another
    /// thread may or may not be seen).
    pub(crate) fn free_count(&self) -> u64 {
        let claimed = self.counts_claimed.load(Ordering::Relaxed).min(COUNTS);
        let nets: i64 = self.counts[..claimed]
            .iter()
            .filter_map(|c| c.get())
            .map(|c| c.net.load(Ordering::Relaxed))
            .sum();
        let free = self.free_at_start as i64 + nets + self.net_shared.load(Ordering::Relaxed);
        free.clamp(0, self.total as i64) as u64
    }

    /// Every number free now, in no particular order (for fsck; a concurrent alloc or free
    /// may or may not be seen).
    pub(crate) fn free_numbers(&self) -> Vec<u64> {
        let mut all = Vec::with_capacity(self.free_count() as usize);
        for shard in &self.shards {
            all.extend_from_slice(&shard.lock());
        }
        let caches: Vec<Cache> = self.caches.lock().clone();
        for cache in caches {
            all.extend_from_slice(&cache.nums.lock());
        }
        all
    }

    /// Size of the number space.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

/// Hasher for maps keyed by a u64 the engine chose (block, inode, transaction and handle
/// numbers): one multiply, no SipHash (keys never come from outside in a way that matters for
/// hash flooding: they are dense numbers the engine hands out or validated block numbers).
#[derive(Default, Clone, Copy)]
pub(crate) struct U64Hasher(u64);

impl std::hash::Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

/// A HashMap keyed by engine-chosen u64 numbers.
pub(crate) type U64Map<V> =
    std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<U64Hasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_hands_out_each_number_once() {
        let list = FreeList::new(100, |n| n % 3 != 0);
        let mut seen = std::collections::HashSet::new();
        while let Some(n) = list.alloc() {
            assert!(n % 3 != 0 && seen.insert(n));
        }
        assert_eq!(seen.len(), 66);
        assert_eq!(list.free_count(), 0);
        list.free(4);
        assert_eq!(list.alloc(), Some(4));
    }

    #[test]
    fn numbers_cached_by_a_thread_that_ended_stay_free_and_allocatable() {
        let list = std::sync::Arc::new(FreeList::new(256, |_| true));
        let other = list.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            assert!(other.alloc_many(200, &mut got));
            other.free_many(&got); // into that thread's cache (and the depot)
        })
        .join()
        .expect("thread");
        assert_eq!(list.free_count(), 256);
        let mut seen = list.free_numbers();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..256).collect::<Vec<u64>>(),
            "fsck sees cached numbers"
        );
        let mut all = Vec::new();
        assert!(
            list.alloc_many(256, &mut all),
            "taken back from the ended thread's cache"
        );
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
        assert_eq!(list.alloc(), None);
    }

    /// Every thread counts its allocations and frees on its own line (the first `COUNTS`
    /// threads) or in the shared counter (the others): the free count stays exact with
    /// more threads than own counts, whichever thread allocated or freed a number.
    #[test]
    fn the_free_count_is_exact_with_more_threads_than_own_counts() {
        let list = std::sync::Arc::new(FreeList::new(4096, |_| true));
        let threads = COUNTS + 8;
        let taken: Vec<Vec<u64>> = (0..threads)
            .map(|_| {
                let l = list.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    assert!(l.alloc_many(50, &mut got));
                    l.free_many(&got[..10]);
                    got.split_off(10)
                })
            })
            .map(|t| t.join().expect("thread"))
            .collect();
        assert_eq!(list.free_count(), 4096 - 40 * threads as u64);
        // Freed by other threads than the ones that took them.
        for (i, numbers) in taken.into_iter().enumerate() {
            let l = list.clone();
            std::thread::spawn(move || l.free_many(&numbers[..(i % 40) + 1]))
                .join()
                .expect("thread");
        }
        let freed: u64 = (0..threads as u64).map(|i| i % 40 + 1).sum();
        assert_eq!(list.free_count(), 4096 - 40 * threads as u64 + freed);
        assert_eq!(list.free_numbers().len() as u64, list.free_count());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "double free")]
    fn a_double_free_is_caught() {
        let list = FreeList::new(64, |_| true);
        let n = list.alloc().expect("a free number");
        list.free(n);
        list.free(n);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "double free")]
    fn freeing_a_number_that_started_free_is_caught() {
        let list = FreeList::new(64, |n| n != 7);
        list.free(7); // in use from the start: fine
        list.free(8); // free from the start: a double free
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn freeing_a_number_out_of_range_is_caught() {
        FreeList::new(64, |_| true).free(64);
    }

    #[test]
    fn alloc_many_takes_across_shards_and_reports_shortage() {
        let list = FreeList::new(64, |_| true);
        let mut got = Vec::new();
        assert!(list.alloc_many(40, &mut got));
        assert_eq!(list.free_count(), 24);
        let mut rest = Vec::new();
        assert!(!list.alloc_many(30, &mut rest));
        assert_eq!(rest.len(), 24);
        got.extend(rest);
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), 64, "every number handed out once");
        assert_eq!(list.free_count(), 0);
        list.free_many(&got);
        assert_eq!(list.free_count(), 64);
        let mut again = list.free_numbers();
        again.sort_unstable();
        assert_eq!(again, got);
    }
}
