//! `test_support` — the helpers atomfs's tests share, so that each exists once:
//!
//! - [`env`]: a test whose environment is missing prints why and passes, or fails when
//!   `ATOMFS_REQUIRE_ALL=1` (set by scripts/test.sh as root, as CI runs) asks for every test;
//! - [`scratch`]: fresh scratch directories under `/dev/shm/atomfs-*` (the emulated NVMM), removed
//!   when dropped unless the test failed;
//! - [`cc`]: the C compiler against the freshly built libraries in `target/<profile>`;
//! - [`fuse`]: whether FUSE can mount here, and a lazy unmount that leaves nothing behind;
//! - [`run`]: run a program and insist on success;
//! - [`programs`]: the real-program workloads (git, sqlite3, tar, cp, fio) run on a mounted store;
//! - [`store_io`]: open and read files of a [`store::Store`] by path;
//! - [`rng`]: a seeded generator whose output never changes between builds.
//!
//! Nothing here names an engine.

#![forbid(unsafe_code)]

pub mod cc;
pub mod env;
pub mod fuse;
pub mod programs;
pub mod rng;
pub mod run;
pub mod scratch;
pub mod store_io;

pub use env::{have, require_all, unavailable};
pub use rng::Rng;
pub use run::{checked, run};
pub use scratch::{scratch, Scratch};
pub use store_io::{create_rw, open_rw, read_path};
