//! The FCFS-Log's metadata side (seed §III-B, §III-D): 64-byte entries and their seal
//! (`entry`), the running transaction with its undo logging, commit and abort
//! (`transaction`), and the byte ranges it has logged (`logged_ranges`).

pub(crate) mod entry;
pub(crate) mod logged_ranges;
pub(crate) mod transaction;
