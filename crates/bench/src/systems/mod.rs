//! The benchmarked systems, each an adapter over [`TwoFileUpdate`](crate::system::TwoFileUpdate).

pub mod engine_mix;
pub mod ext4;
pub mod ext4_mix;
pub mod file_io;
pub mod fileset;
pub mod fio;
pub mod floor;
pub mod fuse_mount;
pub mod mix;
pub mod mmio;
pub mod pmdk;
pub mod pool;
pub mod pool_file;
pub mod served;
pub mod sqlite;
pub mod sqlite_loop;
pub mod sqlite_vfs;
pub mod undo;
