//! The namespace subsystem: the store's DRAM tables and path table, the namespace calls of the
//! Store API on the host directory (`ops.rs`; symlinks, special files, links, unnamed files and
//! rename modes in `posix.rs`; extended attributes in `xattrs.rs`), and the store's side of
//! namespace intents.

mod intents;
mod ops;
mod paths;
mod posix;
pub(crate) mod tables;
mod xattrs;
