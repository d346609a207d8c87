//! The crash-simulator region.
//!
//! [`SimRegion`] keeps two images of the region: the *persistent* image (what survives a crash
//! for certain) and the *cache* image (what loads see). Every store changes the cache image and
//! makes the 64-byte lines it touches *pending*; for each pending line the simulator keeps the
//! list of its intermediate contents since the line was last durable:
//!
//! - A store is split at aligned 8-byte word boundaries; after each word the line's content is
//!   recorded. So a 16-byte store can be torn into its two 8-byte halves, and an aligned
//!   8-byte [`store_u64`](Region::store_u64) is one atomic step. A store that stays inside one
//!   aligned 8-byte word is also one step.
//! - A pending line that was not flushed may reach the persistent image, whole, at *any* of its
//!   intermediate contents, or not at all.
//! - [`flush`](Region::flush) marks a line as flushed with its current content; the next
//!   [`fence`](Region::fence) makes that content durable. Until that fence the line may still
//!   persist at any of its intermediate contents (or not at all). A store after the flush but
//!   before the fence adds to the line's history: after the fence the flushed content is
//!   durable and the later contents remain possible.
//! - [`write_nt`](Region::write_nt) is a store followed by a flush (durable at the next fence).
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
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

const LINE: usize = CACHE_LINE as usize;

/// Content of one cache line.
pub type Line = [u8; LINE];

/// The hook called at every fence, just before the fence takes effect.
pub type FenceHook = Box<dyn FnMut(&CrashPoint<'_>) + Send>;

/// A line that is not (or not certainly) durable.
#[derive(Clone, Debug, Default)]
struct PendingState {
    /// Contents the line had since it was last durable, oldest first (consecutive duplicates
    /// are not recorded twice).
    history: Vec<Line>,
    /// Index in `history` of the content the line had when it was last flushed, if it was
    /// flushed since the last fence.
    flushed_at: Option<usize>,
}

struct Inner {
    /// Both images are padded to a whole number of lines; `len` is the visible length.
    persistent: Vec<u8>,
    cache: Vec<u8>,
    pending: BTreeMap<u64, PendingState>,
    fences: u64,
    bytes_stored: u64,
    lines_flushed: u64,
    config: CrashConfig,
    hook: Option<FenceHook>,
}

thread_local! {
    /// Address of the SimRegion whose fence hook is running on this thread (0 when none).
    static HOOK_OWNER: Cell<usize> = const { Cell::new(0) };
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
    /// to run recovery on it).
    pub fn from_image(image: Vec<u8>) -> Self {
        let len = image.len() as u64;
        let mut padded = image;
        padded.resize(len.div_ceil(CACHE_LINE) as usize * LINE, 0);
        SimRegion {
            len,
            inner: Mutex::new(Inner {
                cache: padded.clone(),
                persistent: padded,
                pending: BTreeMap::new(),
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
        let image = inner.persistent[..self.len as usize].to_vec();
        CrashPoint::new(inner.fences, image.into(), lines, inner.config)
    }

    /// The durable image: what certainly survives a crash now.
    pub fn persistent_image(&self) -> Vec<u8> {
        self.lock().persistent[..self.len as usize].to_vec()
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
            HOOK_OWNER.with(|owner| owner.get()) != me,
            "SimRegion: the fence hook must not touch the region that calls it"
        );
        // A panic in another thread while holding the lock leaves consistent state (every
        // mutation is completed before anything can panic), so a poisoned lock is usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Store `bytes` at `off`, one aligned 8-byte word at a time, recording the history.
    fn store(&self, inner: &mut Inner, off: u64, bytes: impl Fn(usize) -> u8, len: u64) {
        check_range(self.len, off, len);
        let end = off + len;
        let mut word_start = off;
        while word_start < end {
            let word_end = ((word_start / 8 + 1) * 8).min(end);
            for pos in word_start..word_end {
                inner.cache[pos as usize] = bytes((pos - off) as usize);
            }
            record(inner, word_start / CACHE_LINE);
            word_start = word_end;
        }
        inner.bytes_stored += len;
    }

    fn mark_flushed(&self, inner: &mut Inner, off: u64, len: u64) {
        check_range(self.len, off, len);
        if len == 0 {
            return;
        }
        for line in off / CACHE_LINE..=(off + len - 1) / CACHE_LINE {
            if let Some(state) = inner.pending.get_mut(&line) {
                state.flushed_at = Some(state.history.len() - 1);
            }
        }
        inner.lines_flushed += crate::lines_in(off, len);
    }
}

/// Record the current cache content of `line` in its history.
fn record(inner: &mut Inner, line: u64) {
    let start = (line * CACHE_LINE) as usize;
    let mut content = [0u8; LINE];
    content.copy_from_slice(&inner.cache[start..start + LINE]);
    let state = inner.pending.entry(line).or_default();
    if state.history.last() != Some(&content) {
        state.history.push(content);
    }
}

/// The pending lines with their distinct possible persisted contents.
fn pending_lines(inner: &Inner) -> Vec<PendingLine> {
    inner
        .pending
        .iter()
        .filter_map(|(&line, state)| {
            let start = (line * CACHE_LINE) as usize;
            let mut durable = [0u8; LINE];
            durable.copy_from_slice(&inner.persistent[start..start + LINE]);
            let current = &inner.cache[start..start + LINE];
            PendingLine::new(line, durable, &state.history, current)
        })
        .collect()
}

/// Apply a fence: flushed lines become durable at their flushed content.
fn apply_fence(inner: &mut Inner) {
    let Inner {
        pending,
        persistent,
        ..
    } = inner;
    pending.retain(|&line, state| {
        let Some(index) = state.flushed_at.take() else {
            return true;
        };
        let start = (line * CACHE_LINE) as usize;
        persistent[start..start + LINE].copy_from_slice(&state.history[index]);
        state.history.drain(..=index);
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
        self.store(&mut inner, off, |i| data[i], data.len() as u64);
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        let mut inner = self.lock();
        self.store(&mut inner, off, |_| byte, len);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        let mut inner = self.lock();
        self.store(&mut inner, off, |i| data[i], data.len() as u64);
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
        self.store(&mut inner, off, |i| word[i], 8);
    }

    fn flush(&self, off: u64, len: u64) {
        let mut inner = self.lock();
        self.mark_flushed(&mut inner, off, len);
    }

    fn fence(&self) {
        let mut inner = self.lock();
        if let Some(mut hook) = inner.hook.take() {
            let lines = pending_lines(&inner);
            let point = CrashPoint::new(
                inner.fences,
                inner.persistent[..self.len as usize].into(),
                lines,
                inner.config,
            );
            let me = self as *const SimRegion as usize;
            HOOK_OWNER.with(|owner| owner.set(me));
            let guard = ResetHookOwner;
            hook(&point);
            drop(guard);
            drop(point);
            inner.hook = Some(hook);
        }
        apply_fence(&mut inner);
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

/// Clears [`HOOK_OWNER`] when the hook returns or unwinds.
struct ResetHookOwner;

impl Drop for ResetHookOwner {
    fn drop(&mut self) {
        HOOK_OWNER.with(|owner| owner.set(0));
    }
}

#[cfg(test)]
mod tests;
