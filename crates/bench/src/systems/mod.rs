//! The benchmarked systems, each an adapter over [`TwoFileUpdate`](crate::system::TwoFileUpdate).

pub mod ext4;
pub mod fileset;
pub mod floor;
pub mod pmdk;
pub mod pool;
pub mod undo;
