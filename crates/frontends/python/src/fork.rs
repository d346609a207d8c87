//! What a forked child may do with the stores of its parent: nothing.
//!
//! An engine keeps its indexes, allocators and checkpoint threads in the memory of the process
//! that opened the store, and the pool is mapped shared: a child writing through its copy
//! would race the parent on the same persistent bytes, with none of the parent's threads (a
//! fork copies only the calling thread) and possibly a lock copied in its held state. So each
//! open store remembers the fork generation it was opened in; a `pthread_atfork` child handler
//! bumps the generation, and every call of an inherited store fails with EBUSY, and dropping it
//! in the child neither checkpoints nor unmounts it. The child may open stores of its own
//! (not the parent's: the parent still holds that store's lock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

extern "C" fn bump_in_child() {
    // An atomic add is async-signal-safe, as a fork handler in a threaded parent must be.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Register the child handler (once per process).
pub fn install() {
    INSTALL.call_once(|| {
        // SAFETY: registers a handler that only does an atomic add; no prepare or parent
        // handler. A failure (ENOMEM) leaves fork detection off, which the docs mention.
        unsafe { libc::pthread_atfork(None, None, Some(bump_in_child)) };
    });
}

/// The fork generation of this process: 0 in the process that imported the module, one more
/// in each generation of forked children.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}
