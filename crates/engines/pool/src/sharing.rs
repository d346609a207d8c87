//! What the transactions' threads share with the checkpoint threads, and how they meet.
//!
//! [`Padded`]: a value alone on its cache lines.
//!
//! The foreground thread and the background checkpoint threads write different shared
//! words (the commit counter and the checkpoint counters, a free list's count, the lock of
//! the committed-transaction table). Next to each other, every write by one thread takes
//! the line from the other core and the other thread's next access to any word of that line
//! misses (false sharing); on x86 a locked instruction then also waits for the thread's
//! outstanding flushes. 128 bytes: the adjacent-line prefetcher moves lines in pairs.

//!
//! [`lock_spinning`]: take a lock that a checkpoint thread may hold for a few microseconds
//! (one batch of blocks) by spinning first. A blocked `parking_lot` lock sleeps in the
//! kernel after a few yields, and waking the sleeper costs far more than the wait it saved
//! (tens of microseconds in a virtual machine whose idle core halts); measured in `micro`:
//! about one transaction in a hundred met a checkpoint on one of its inodes.

use parking_lot::{Mutex, MutexGuard};
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

/// How long `lock_spinning` spins before it waits like `Mutex::lock`: a few checkpoint
/// batches.
const SPIN_MAX: Duration = Duration::from_micros(50);
/// How long it spins without giving up the core: about one checkpoint batch.
const SPIN_BUSY: Duration = Duration::from_micros(10);

/// `T` aligned to, and padded to a multiple of, 128 bytes.
#[derive(Default, Debug)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

impl<T> Padded<T> {
    pub(crate) const fn new(value: T) -> Self {
        Padded(value)
    }
}

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Padded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// `m.lock()`, but spinning on `try_lock` for up to `SPIN_MAX` first: busy for the first
/// `SPIN_BUSY`, then yielding the core between tries (with more threads than cores the
/// holder may be waiting for this very core).
pub(crate) fn lock_spinning<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    let mut guard = None;
    spin_while(|| {
        guard = if m.is_locked() { None } else { m.try_lock() };
        guard.is_none()
    });
    guard.unwrap_or_else(|| m.lock())
}

/// Wait while `busy()` holds (asked after every pause), for at most `SPIN_MAX`: busy for
/// the first `SPIN_BUSY`, then yielding the core between rounds.
pub(crate) fn spin_while(mut busy: impl FnMut() -> bool) {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if !busy() {
                return;
            }
            std::hint::spin_loop();
        }
        let waited = start.elapsed();
        if waited >= SPIN_MAX {
            return;
        }
        if waited >= SPIN_BUSY {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{lock_spinning, Padded};
    use parking_lot::Mutex;
    use std::sync::Arc;

    #[test]
    fn spinning_lock_excludes_and_waits_past_its_spin() {
        let m = Arc::new(Mutex::new(0u64));
        let held = m.lock();
        let other = {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut g = lock_spinning(&m);
                *g += 1;
                *g
            })
        };
        // Held well past the spin budget: the other thread must wait, not get in.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(*held, 0);
        drop(held);
        assert_eq!(other.join().expect("spinning thread"), 1);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *lock_spinning(&m) += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("counting thread");
        }
        assert_eq!(*m.lock(), 40_001);
    }
    use std::sync::atomic::AtomicU64;

    #[test]
    fn neighbours_never_share_a_line() {
        struct Two {
            a: Padded<AtomicU64>,
            b: Padded<AtomicU64>,
        }
        let two = Two {
            a: Padded::default(),
            b: Padded::default(),
        };
        let (a, b) = (&*two.a as *const _ as usize, &*two.b as *const _ as usize);
        assert_eq!(a % 128, 0);
        assert_eq!(b % 128, 0);
        assert!(a.abs_diff(b) >= 128);
        assert_eq!(std::mem::size_of::<Padded<u8>>(), 128);
    }
}
