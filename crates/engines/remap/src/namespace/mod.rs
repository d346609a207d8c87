//! The namespace in memory: inodes with their A-trees, handles, transactions.

pub mod inode;
pub mod posix;
pub mod sparse;
pub mod state;
