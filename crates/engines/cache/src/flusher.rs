//! The periodic flush thread (§5.2.3): every `period` it writes the dirty chunks home and
//! marks them clean. It holds only a weak reference to the cache and stops when the cache
//! is gone or when the [`Flusher`] is dropped. A failed flush leaves the chunks dirty and the
//! error pending in the cache ([`Cache::flush_error`]); the next period tries again.

use crate::backing::Backing;
use crate::cache::Cache;
use parking_lot::{Condvar, Mutex};
use pmem::Region;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// The running flush thread; dropping it stops and joins the thread.
pub struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// Start flushing `cache` every `period` (a zero period is write-through and needs no
    /// thread: `None`).
    pub fn start<R: Region, B: Backing>(
        cache: &Arc<Cache<R, B>>,
        period: Duration,
    ) -> Option<Self> {
        if period.is_zero() {
            return None;
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let weak: Weak<Cache<R, B>> = Arc::downgrade(cache);
        let signal = stop.clone();
        let thread = std::thread::Builder::new()
            .name("atomfs-cache-flush".into())
            .spawn(move || flush_loop(weak, signal, period))
            .ok()?;
        Some(Flusher {
            stop,
            thread: Some(thread),
        })
    }
}

fn flush_loop<R: Region, B: Backing>(
    cache: Weak<Cache<R, B>>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    period: Duration,
) {
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, period);
            }
            if *stopped {
                return;
            }
        }
        let Some(c) = cache.upgrade() else { return };
        // An error stays pending in the cache (stats, fsync); the chunks stay dirty.
        let _ = c.flush_all();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
