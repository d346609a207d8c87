//! The benchmarked systems, each an adapter over [`TwoFileUpdate`](crate::system::TwoFileUpdate).

pub mod ext4;
pub mod fileset;
pub mod fio;
pub mod floor;
pub mod mmio;
pub mod pmdk;
pub mod pool;
pub mod pool_file;
pub mod undo;
