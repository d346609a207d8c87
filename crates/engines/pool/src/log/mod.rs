//! The FCFS-Log's metadata side (seed §III-B, §III-D): 64-byte entries and their seal
//! (`entry`), the running transaction with its undo logging, commit and abort
//! (`transaction`) with its states (`tx_state`), the byte ranges it has logged (`logged_ranges`), and what committed
//! transactions still owe the log until their data entries are checkpointed (`commits`).

pub(crate) mod commits;
pub(crate) mod entry;
pub(crate) mod logged_ranges;
pub(crate) mod transaction;
pub(crate) mod tx_state;
