//! Crash images without waste. The regions of the `pool` test geometry are 4 MiB: allocating,
//! faulting in, copying and freeing such buffers four times per image cost more than
//! recovering and checking it. Now the first image of a crash point is written into a recycled
//! buffer, a recovered region hands its buffer over to the second recovery, and the next image
//! of the same point is written over the used buffer by rewriting only the lines the
//! recoveries wrote and the point's pending lines.

use pmem::{CrashPoint, SimRegion};
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// Spare image buffers kept per thread (images nest at most two deep: a crashed recovery's
/// images are checked while the outer image's region is alive).
const SPARE_BUFFERS_MAX: usize = 4;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    /// Images written over a used buffer on this thread (to verify one in
    /// [`REUSE_CHECK_EVERY`]).
    static REUSED: Cell<u64> = const { Cell::new(0) };
}

/// An empty buffer, with the capacity of an earlier image when one is spare.
pub(crate) fn take_buffer() -> Vec<u8> {
    SPARE
        .with(|spare| spare.borrow_mut().pop())
        .unwrap_or_default()
}

/// Give a buffer back for a later image.
pub(crate) fn give_back(buffer: Vec<u8>) {
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < SPARE_BUFFERS_MAX {
            spare.push(buffer);
        }
    });
}

/// A buffer that holds an image of a crash point except in the lines `stale`: the next image
/// of the same point rewrites only those lines and the pending ones.
pub(crate) struct Used {
    pub(crate) buf: Vec<u8>,
    pub(crate) stale: Vec<u64>,
}

/// The durable image of a region whose store is gone and the lines written since the region
/// was created from its image, taking the buffer over; `Err` when something still holds it.
pub(crate) fn take_back(region: Arc<SimRegion>) -> Result<(Vec<u8>, Vec<u64>), Arc<SimRegion>> {
    Arc::try_unwrap(region).map(SimRegion::into_persistent_image_and_written)
}

/// The buffer of a region that is no longer needed, for the next image of the same point.
pub(crate) fn reuse(region: Arc<SimRegion>) -> Option<Used> {
    take_back(region)
        .ok()
        .map(|(buf, stale)| Used { buf, stale })
}

/// Crash images checked between two verifications of a reused buffer against a fresh image
/// (in builds with debug assertions: the test suite checks the reuse itself).
const REUSE_CHECK_EVERY: u64 = 16;

/// Call `f` for at most `budget` images of `cp`, spread over its index range (each at an
/// offset drawn from `salt` inside its stretch, so that one image per point does not always
/// pick the same kind of image). The first image
/// is written into a recycled buffer; `f` may hand the buffer back ([`Used`]) so that the
/// next image rewrites only the lines that changed. Returns how many images were passed.
pub(crate) fn for_each_chosen(
    cp: &CrashPoint<'_>,
    budget: u64,
    salt: u64,
    mut f: impl FnMut(u64, Vec<u8>) -> Option<Used>,
) -> u64 {
    let count = cp.image_count();
    let n = count.min(budget);
    let stretch = count.checked_div(n).unwrap_or(1).max(1);
    let offset = scramble(salt) % stretch;
    let mut used: Option<Used> = None;
    for k in 0..n {
        let i = if n == count {
            k
        } else {
            k * count / n + offset
        };
        let image = match used.take() {
            Some(Used { mut buf, stale }) => {
                cp.image_over(i, &mut buf, &stale);
                if cfg!(debug_assertions)
                    && REUSED
                        .with(|r| r.replace(r.get() + 1))
                        .is_multiple_of(REUSE_CHECK_EVERY)
                {
                    assert!(
                        buf == cp.image(i),
                        "a reused buffer differs from crash image {i}"
                    );
                }
                buf
            }
            None => {
                let mut buf = take_buffer();
                cp.image_into(i, &mut buf);
                buf
            }
        };
        used = f(i, image);
    }
    if let Some(u) = used {
        give_back(u.buf);
    }
    n
}

/// A well-mixed function of `x` (the splitmix64 finaliser).
fn scramble(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
