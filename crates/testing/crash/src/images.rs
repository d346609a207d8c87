//! Crash images without waste: each image is written into a recycled buffer (the regions of
//! the `pool` test geometry are 4 MiB; allocating, faulting in and freeing two such buffers per
//! image cost more than recovering and checking it), and a recovered region hands its buffer
//! over to the second recovery instead of copying it.

use pmem::{CrashPoint, SimRegion};
use std::cell::RefCell;
use std::sync::Arc;

/// Spare image buffers kept per thread (images nest at most two deep: a crashed recovery's
/// images are checked while the outer image's region is alive).
const SPARE_BUFFERS_MAX: usize = 4;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
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

/// The durable image of a region whose store is gone, taking its buffer over when nothing
/// else holds the region (else a copy).
pub(crate) fn durable_image(region: Arc<SimRegion>) -> Vec<u8> {
    match Arc::try_unwrap(region) {
        Ok(region) => region.into_persistent_image(),
        Err(shared) => shared.persistent_image(),
    }
}

/// Recycle the buffer of a region that is no longer needed.
pub(crate) fn recycle(region: Arc<SimRegion>) {
    if let Ok(region) = Arc::try_unwrap(region) {
        give_back(region.into_persistent_image());
    }
}

/// Call `f` for at most `budget` images of `cp`, spread over its index range, each in a
/// recycled buffer. Returns how many images were passed.
pub(crate) fn for_each_chosen(
    cp: &CrashPoint<'_>,
    budget: u64,
    mut f: impl FnMut(u64, Vec<u8>),
) -> u64 {
    let count = cp.image_count();
    let n = count.min(budget);
    for k in 0..n {
        let i = if n == count { k } else { k * count / n };
        let mut image = take_buffer();
        cp.image_into(i, &mut image);
        f(i, image);
    }
    n
}
