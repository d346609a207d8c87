//! The namespace subsystem: the store's DRAM tables and path table, the namespace calls of the
//! Store API on the host directory, and the store's side of namespace intents.

mod intents;
mod ops;
mod paths;
pub(crate) mod tables;
