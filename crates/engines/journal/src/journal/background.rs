//! The background checkpoint thread (seed §3.6: delayed checkpointing). It wakes at the
//! checkpoint period, or when a commit leaves the journal below its free-space threshold
//! after GC, and checkpoints; foreground commits wait for it only when the journal is full.

use super::Journal;
use hostfs::HostFs;
use parking_lot::{Condvar, Mutex};
use pmem::Region;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the background checkpoint thread.
pub const CHECKPOINT_THREAD_NAME: &str = "journal-ckpt";

/// What the thread is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Request {
    None,
    Checkpoint,
    Stop,
}

/// The wake-up channel between commits and the thread.
pub(super) struct Wake {
    request: Mutex<Request>,
    cond: Condvar,
}

impl Wake {
    fn new() -> Self {
        Wake {
            request: Mutex::new(Request::None),
            cond: Condvar::new(),
        }
    }

    /// Ask for a checkpoint (a stop request stays).
    pub(super) fn checkpoint_soon(&self) {
        let mut r = self.request.lock();
        if *r == Request::None {
            *r = Request::Checkpoint;
        }
        self.cond.notify_one();
    }

    /// Wait for a request or the period; returns false when asked to stop.
    fn wait(&self, period: Duration) -> bool {
        let deadline = Instant::now() + period;
        let mut r = self.request.lock();
        while *r == Request::None {
            if self.cond.wait_until(&mut r, deadline).timed_out() {
                break;
            }
        }
        let go_on = *r != Request::Stop;
        if go_on {
            *r = Request::None;
        }
        go_on
    }
}

/// The running background checkpointer; stops (and joins the thread) when dropped.
pub struct Checkpointer {
    wake: Arc<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        *self.wake.request.lock() = Request::Stop;
        self.wake.cond.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Start the background checkpoint thread (period: `checkpoint_period`, else 5 s).
    pub fn start_checkpointer(self: &Arc<Self>) -> std::io::Result<Checkpointer> {
        let wake = Arc::new(Wake::new());
        *self.wake.lock() = Some(wake.clone());
        let period = self
            .config
            .checkpoint_period
            .unwrap_or(Duration::from_secs(5));
        let journal: Weak<Self> = Arc::downgrade(self);
        let w = wake.clone();
        let thread = std::thread::Builder::new()
            .name(CHECKPOINT_THREAD_NAME.into())
            .spawn(move || {
                while w.wait(period) {
                    let Some(j) = journal.upgrade() else { return };
                    // An error (a failed home sync) keeps every version in the journal; the
                    // next round retries.
                    if j.checkpoint().is_err() {
                        j.state.lock().stats.checkpoint_errors += 1;
                    }
                }
            })?;
        Ok(Checkpointer {
            wake,
            thread: Some(thread),
        })
    }
}
