//! The trait of the `engines` suite's file workloads: every registered engine (through the
//! engine registry, `systems/engine_mix.rs`) and plain ext4 files with fsync (the reference,
//! `systems/ext4_mix.rs`) implement it. Every call is durable when it returns; what a crash
//! can leave of it is the system's [`guarantee`](MixSystem::guarantee).
//!
//! The SQLite update loop of the suite goes through SQLite instead (`systems/sqlite_loop.rs`).

use crate::error::Result;
use crate::workload::Write;

/// Sizes of the files a [`MixSystem`] creates at setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixShape {
    /// Files of the two-file transactions.
    pub tx_files: u32,
    /// Length of each of them.
    pub tx_file_len: u64,
    /// Length of the file of the random overwrites.
    pub overwrite_len: u64,
    /// Longest the append file grows before it is truncated to empty (log rotation).
    pub append_len_max: u64,
}

impl MixShape {
    /// Bytes of file data the shape holds at most.
    pub fn data_bytes(&self) -> u64 {
        self.tx_files as u64 * self.tx_file_len + self.overwrite_len + self.append_len_max
    }
}

/// One operation of the namespace mix, on files of the mix's directory named by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsOp {
    /// Create file `name` (which does not exist) holding `len` bytes, durable.
    Create { name: u64, len: u64 },
    /// Rename `from` to `to` (replacing `to` when it exists), durable.
    Rename { from: u64, to: u64 },
    /// Remove `name`, durable.
    Unlink { name: u64 },
}

/// File name of namespace-mix file `n`.
pub fn ns_name(n: u64) -> String {
    format!("f{n:08}")
}

/// The file workloads of the `engines` suite on one system.
pub trait MixSystem {
    /// Name in tables, JSON rows and plots (the engine's name, or "ext4").
    fn name(&self) -> String;

    /// What a crash can leave of a call (for the JSON).
    fn guarantee(&self) -> &'static str;

    /// Where the store (pool file, home directory) or the files live.
    fn medium(&self) -> String;

    /// Create the files of `shape` (zero-filled or filled with a pattern, durable) and the
    /// empty directory of the namespace mix.
    fn setup(&mut self, shape: MixShape) -> Result<()>;

    /// Update two ranges of two distinct files of the two-file set, durably (atomically on
    /// the atomfs engines).
    fn two_file_tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()>;

    /// Overwrite `data` at `off` of the overwrite file, then fsync.
    fn overwrite(&mut self, off: u64, data: &[u8]) -> Result<()>;

    /// Append `data` to the append file, then fsync; when the file would grow past the
    /// shape's `append_len_max` it is first truncated to empty (durably).
    fn append(&mut self, data: &[u8]) -> Result<()>;

    /// One namespace operation, durable when it returns.
    fn namespace(&mut self, op: NsOp) -> Result<()>;

    /// Remove every file the namespace mix left (untimed, between runs).
    fn namespace_clear(&mut self) -> Result<()>;

    /// Read back `buf.len()` bytes at `off` of two-file-set file `file` (tests check that
    /// the data landed).
    fn read_tx_file(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()>;
}
