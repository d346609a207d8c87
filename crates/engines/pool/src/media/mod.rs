//! The pool's bytes: the on-media layout (`layout`), pool files mapped as the region
//! (`mapped`), and private DRAM images of a pool file for read-only work (`image`).

pub(crate) mod image;
pub(crate) mod layout;
pub(crate) mod mapped;
