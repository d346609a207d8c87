//! The crash-simulator region.
//!
//! [`SimRegion`] models two images of the region: the *persistent* image (what survives a crash
//! for certain) and the *cache* image (what loads see). Every store changes the cache image and
//! makes the 64-byte lines it touches *pending*; for each pending line the simulator keeps its
//! durable content and the list of its intermediate contents since the line was last durable.
//! Only the cache image is stored whole: a line that is not pending is durable at its cache
//! content, so the persistent image is the cache image with every pending line at its durable
//! content (one buffer per region, and a crash point borrows it instead of copying it):
//!
//! - A store is split at aligned 8-byte word boundaries; after each word the line's content is
//!   recorded. So a 16-byte store can be torn into its two 8-byte halves, and an aligned
//!   8-byte [`store_u64`](Region::store_u64) is one atomic step. A store that stays inside one
//!   aligned 8-byte word is also one step.
//! - A pending line that was not flushed may reach the persistent image, whole, at *any* of its
//!   intermediate contents, or not at all.
//! - [`flush`](Region::flush) marks a line as flushed with its current content; the next
//!   [`fence`](Region::fence) *by the same thread* makes that content durable (as on the CPU,
//!   where `sfence` orders only its own thread's flushes). Until that fence the line may still
//!   persist at any of its intermediate contents (or not at all). A store after the flush but
//!   before the fence adds to the line's history: after the fence the flushed content is
//!   durable and the later contents remain possible.
//! - [`write_nt`](Region::write_nt) is a store followed by a flush (durable at the next fence),
//!   but weaker until then: write-combining keeps no order, so a line written by a
//!   non-temporal store since it was last durable persists as any combination of its 8-byte
//!   words, each at its durable value or at a value a store gave it (docs/pmem.md lists
//!   which x86 orders are kept).
//!
//! A crash may happen anywhere; the interesting places are the fences, because between two
//! fences nothing becomes *certain*. Just before every fence takes effect, the fence hook
//! ([`SimRegion::set_fence_hook`]) receives a [`CrashPoint`]: the set of crash images of a crash
//! at that moment, countable and enumerable (exhaustively up to a limit, else a seeded sample).
//! [`SimRegion::crash_point`] gives the same for a crash right now (after the last fence).
//! A crash image opens as a region again with [`SimRegion::from_image`].
//!
//! The simulator is for tests: one mutex guards all state.

mod crash;

pub use crash::{CrashConfig, CrashPoint, PendingLine};

use crate::{check_range, Region, RegionStats, CACHE_LINE};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

const LINE: usize = CACHE_LINE as usize;

/// Content of one cache line.
pub type Line = [u8; LINE];

/// The hook called at every fence, just before the fence takes effect.
pub type FenceHook = Box<dyn FnMut(&CrashPoint<'_>) + Send>;

/// A line that is not (or not certainly) durable.
#[derive(Clone, Debug)]
struct PendingState {
    /// The content that survives a crash for certain (the line's persistent content).
    durable: Line,
    /// Contents the line had since it was last durable, oldest first (consecutive duplicates
    /// are not recorded twice).
    history: Vec<Line>,
    /// For each thread that flushed the line since its own last fence: the index in
    /// `history` of the content the line had at that thread's last flush.
    flushes: Vec<(ThreadId, usize)>,
    /// A non-temporal store wrote to the line since it was last durable: the line may persist
    /// as any combination of its 8-byte words (write-combining keeps no order).
    non_temporal: bool,
}

struct Inner {
    /// The cache image, padded to a whole number of lines (`len` is the visible length). A
    /// line that is not in `pending` is durable at this content.
    cache: Vec<u8>,
    pending: BTreeMap<u64, PendingState>,
    /// Lines stored to since the region was created (a line may appear more than once): the
    /// only lines where the cache image can differ from the image the region started from.
    written: Vec<u64>,
    fences: u64,
    bytes_stored: u64,
    lines_flushed: u64,
    config: CrashConfig,
    hook: Option<FenceHook>,
}

thread_local! {
    /// Addresses of the SimRegions whose fence hooks are running on this thread (hooks may
    /// nest when a hook runs recovery on another SimRegion that has its own hook).
    static HOOK_OWNERS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The crash-simulator region (see the module documentation).
pub struct SimRegion {
    len: u64,
    inner: Mutex<Inner>,
}

impl SimRegion {
    /// A zero-filled region of `len` bytes, entirely durable.
    pub fn new(len: u64) -> Self {
        Self::from_image(vec![0; len as usize])
    }

    /// A region whose persistent and cache images are `image` (for example a crash image,
    /// to run recovery on it). Takes the buffer over without copying it.
    pub fn from_image(image: Vec<u8>) -> Self {
        let len = image.len() as u64;
        let mut padded = image;
        padded.resize(len.div_ceil(CACHE_LINE) as usize * LINE, 0);
        SimRegion {
            len,
            inner: Mutex::new(Inner {
                cache: padded,
                pending: BTreeMap::new(),
                written: Vec::new(),
                fences: 0,
                bytes_stored: 0,
                lines_flushed: 0,
                config: CrashConfig::default(),
                hook: None,
            }),
        }
    }

    /// Install the hook called at every fence, just before the fence takes effect, with the
    /// crash images of a crash at that moment.
    ///
    /// The hook runs while the region is locked: it must not touch the region that calls it
    /// (doing so panics with a clear message rather than deadlocking). Other threads using the
    /// region wait until it returns. To run recovery on an image, open it with
    /// [`SimRegion::from_image`].
    pub fn set_fence_hook(&self, hook: FenceHook) {
        self.lock().hook = Some(hook);
    }

    /// Remove the fence hook and return it.
    pub fn take_fence_hook(&self) -> Option<FenceHook> {
        self.lock().hook.take()
    }

    /// Set how crash images are enumerated (limit of exhaustive enumeration, sample size, seed).
    pub fn set_crash_config(&self, config: CrashConfig) {
        self.lock().config = config;
    }

    /// The current crash-enumeration configuration.
    pub fn crash_config(&self) -> CrashConfig {
        self.lock().config
    }

    /// The crash images of a crash now (after the last fence). Owns a copy of the persistent
    /// image, so it can outlive the region.
    pub fn crash_point(&self) -> CrashPoint<'static> {
        let inner = self.lock();
        let lines = pending_lines(&inner);
        let image = inner.cache[..self.len as usize].to_vec();
        CrashPoint::new(inner.fences, image.into(), lines, inner.config)
    }

    /// The durable image: what certainly survives a crash now.
    pub fn persistent_image(&self) -> Vec<u8> {
        let inner = self.lock();
        let mut image = inner.cache.clone();
        durable_lines(&inner, &mut image);
        image.truncate(self.len as usize);
        image
    }

    /// The durable image, taking the region's buffer over instead of copying it (for a
    /// second recovery of a recovered image, or to reuse the buffer).
    pub fn into_persistent_image(self) -> Vec<u8> {
        self.into_persistent_image_and_written().0
    }

    /// [`into_persistent_image`](Self::into_persistent_image), with the lines (numbers, maybe
    /// repeated) outside which the image equals the one the region was created from: a
    /// caller can turn the buffer back into another image by rewriting only those lines.
    pub fn into_persistent_image_and_written(self) -> (Vec<u8>, Vec<u64>) {
        let len = self.len as usize;
        let mut inner = self
            .inner
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut image = std::mem::take(&mut inner.cache);
        durable_lines(&inner, &mut image);
        image.truncate(len);
        (image, std::mem::take(&mut inner.written))
    }

    /// The cache image: what loads see now.
    pub fn cache_image(&self) -> Vec<u8> {
        self.lock().cache[..self.len as usize].to_vec()
    }

    /// Number of fences executed so far.
    pub fn fence_count(&self) -> u64 {
        self.lock().fences
    }

    /// Number of lines that are not certainly durable.
    pub fn pending_line_count(&self) -> usize {
        self.lock().pending.len()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        let me = self as *const SimRegion as usize;
        assert!(
            !HOOK_OWNERS.with(|owners| owners.borrow().contains(&me)),
            "SimRegion: the fence hook must not touch the region that calls it"
        );
        // A panic in another thread while holding the lock leaves consistent state (every
        // mutation is completed before anything can panic), so a poisoned lock is usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Store `bytes` at `off`, one aligned 8-byte word at a time, recording the history.
    fn store(&self, inner: &mut Inner, off: u64, source: Source<'_>) {
        let len = source.len();
        check_range(self.len, off, len);
        let end = off + len;
        let Inner {
            cache,
            pending,
            written,
            ..
        } = inner;
        let mut line_start = off;
        while line_start < end {
            let line = line_start / CACHE_LINE;
            let line_end = ((line + 1) * CACHE_LINE).min(end);
            let base = (line * CACHE_LINE) as usize;
            let state = pending.entry(line).or_insert_with(|| {
                written.push(line);
                let mut durable = [0u8; LINE];
                durable.copy_from_slice(&cache[base..base + LINE]);
                PendingState {
                    durable,
                    history: Vec::new(),
                    flushes: Vec::new(),
                    non_temporal: false,
                }
            });
            state
                .history
                .reserve((line_end - line_start).div_ceil(8) as usize + 1);
            let mut word_start = line_start;
            while word_start < line_end {
                let word_end = ((word_start / 8 + 1) * 8).min(line_end);
                let target = &mut cache[word_start as usize..word_end as usize];
                match source {
                    Source::Bytes(data) => target.copy_from_slice(
                        &data[(word_start - off) as usize..(word_end - off) as usize],
                    ),
                    Source::Fill(byte, _) => target.fill(byte),
                }
                let content = &cache[base..base + LINE];
                if state.history.last().map(|last| &last[..]) != Some(content) {
                    let mut copy = [0u8; LINE];
                    copy.copy_from_slice(content);
                    state.history.push(copy);
                }
                word_start = word_end;
            }
            line_start = line_end;
        }
        inner.bytes_stored += len;
    }

    fn mark_flushed(&self, inner: &mut Inner, off: u64, len: u64) {
        check_range(self.len, off, len);
        if len == 0 {
            return;
        }
        let me = std::thread::current().id();
        for line in off / CACHE_LINE..=(off + len - 1) / CACHE_LINE {
            if let Some(state) = inner.pending.get_mut(&line) {
                let index = state.history.len() - 1;
                match state.flushes.iter_mut().find(|(thread, _)| *thread == me) {
                    Some(flush) => flush.1 = index,
                    None => state.flushes.push((me, index)),
                }
            }
        }
        inner.lines_flushed += crate::lines_in(off, len);
    }
}

/// The bytes a store writes.
#[derive(Clone, Copy)]
enum Source<'a> {
    Bytes(&'a [u8]),
    /// A byte repeated `len` times.
    Fill(u8, u64),
}

impl Source<'_> {
    fn len(&self) -> u64 {
        match self {
            Source::Bytes(data) => data.len() as u64,
            Source::Fill(_, len) => *len,
        }
    }
}

/// The pending lines with their distinct possible persisted contents.
fn pending_lines(inner: &Inner) -> Vec<PendingLine> {
    inner
        .pending
        .iter()
        .filter_map(|(&line, state)| {
            let start = (line * CACHE_LINE) as usize;
            let current = &inner.cache[start..start + LINE];
            if state.non_temporal {
                PendingLine::torn(line, state.durable, &state.history, current)
            } else {
                PendingLine::new(line, state.durable, &state.history, current)
            }
        })
        .collect()
}

/// Mark the lines of a non-temporal store: until durable they persist word by word.
fn mark_non_temporal(inner: &mut Inner, off: u64, len: u64) {
    if len == 0 {
        return;
    }
    for line in off / CACHE_LINE..=(off + len - 1) / CACHE_LINE {
        if let Some(state) = inner.pending.get_mut(&line) {
            state.non_temporal = true;
        }
    }
}

/// Put every pending line of `image` (a copy of the padded cache image) at its durable content.
fn durable_lines(inner: &Inner, image: &mut [u8]) {
    for (&line, state) in &inner.pending {
        let start = (line * CACHE_LINE) as usize;
        image[start..start + LINE].copy_from_slice(&state.durable);
    }
}

/// Apply a fence issued by thread `me`: the lines it flushed become durable at the content
/// they had at its flush (flushes by other threads of older contents are then complete too).
fn apply_fence(inner: &mut Inner, me: ThreadId) {
    inner.pending.retain(|_, state| {
        let Some(&(_, index)) = state.flushes.iter().find(|(thread, _)| *thread == me) else {
            return true;
        };
        state.durable = state.history[index];
        state.history.drain(..=index);
        state.flushes.retain(|&(_, other)| other > index);
        for flush in &mut state.flushes {
            flush.1 -= index + 1;
        }
        !state.history.is_empty()
    });
    inner.fences += 1;
}

impl Region for SimRegion {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.len, off, buf.len() as u64);
        let inner = self.lock();
        buf.copy_from_slice(&inner.cache[off as usize..off as usize + buf.len()]);
    }

    fn write(&self, off: u64, data: &[u8]) {
        let mut inner = self.lock();
        self.store(&mut inner, off, Source::Bytes(data));
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        let mut inner = self.lock();
        self.store(&mut inner, off, Source::Fill(byte, len));
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        let mut inner = self.lock();
        self.store(&mut inner, off, Source::Bytes(data));
        mark_non_temporal(&mut inner, off, data.len() as u64);
        // Non-temporal stores: durable at the next fence, like a store followed by a flush.
        self.mark_flushed(&mut inner, off, data.len() as u64);
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte load at {off}");
        let mut word = [0u8; 8];
        self.read(off, &mut word);
        u64::from_le_bytes(word)
    }

    fn store_u64(&self, off: u64, value: u64) {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte store at {off}");
        let word = value.to_le_bytes();
        let mut inner = self.lock();
        // Aligned and 8 bytes long: `store` records it as a single step (never torn).
        self.store(&mut inner, off, Source::Bytes(&word));
    }

    fn flush(&self, off: u64, len: u64) {
        let mut inner = self.lock();
        self.mark_flushed(&mut inner, off, len);
    }

    fn fence(&self) {
        let mut inner = self.lock();
        if let Some(mut hook) = inner.hook.take() {
            let lines = pending_lines(&inner);
            // The crash point borrows the cache image: it overwrites every pending line.
            let point = CrashPoint::new(
                inner.fences,
                inner.cache[..self.len as usize].into(),
                lines,
                inner.config,
            );
            let me = self as *const SimRegion as usize;
            HOOK_OWNERS.with(|owners| owners.borrow_mut().push(me));
            let guard = PopHookOwner;
            hook(&point);
            drop(guard);
            drop(point);
            inner.hook = Some(hook);
        }
        apply_fence(&mut inner, std::thread::current().id());
    }

    fn stats(&self) -> RegionStats {
        let inner = self.lock();
        RegionStats {
            bytes_stored: inner.bytes_stored,
            lines_flushed: inner.lines_flushed,
            fences: inner.fences,
        }
    }
}

/// Pops [`HOOK_OWNERS`] when the hook returns or unwinds.
struct PopHookOwner;

impl Drop for PopHookOwner {
    fn drop(&mut self) {
        HOOK_OWNERS.with(|owners| owners.borrow_mut().pop());
    }
}

#[cfg(test)]
mod tests;
