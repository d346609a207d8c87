//! The volatile allocators (seed §III-C "Allocator"), rebuilt at every open.

mod free_list;

pub(crate) use free_list::{FreeList, U64Map};
