//! The one trait every benchmarked system implements (CONVENTIONS.md §15): a two-file
//! failure-atomic update, as in the FCFS seed's microbenchmark (its Figure 1).

use crate::error::Result;
use crate::workload::Write;

/// A way of updating two ranges of two files so that a crash leaves either both updates or
/// neither (except the no-consistency references, which say so in [`guarantee`]), durably:
/// when [`tx`](TwoFileUpdate::tx) returns, the update survives power loss on the system's
/// medium (emulated NVMM in /dev/shm, or the ext4 RAM disk).
///
/// [`guarantee`]: TwoFileUpdate::guarantee
pub trait TwoFileUpdate {
    /// Name in tables, JSON rows and plots ("pmdk", "ext4-undo", "fcfs", ...).
    fn name(&self) -> String;

    /// What a crash can leave: "atomic", "per-file atomic", "none" (no consistency).
    fn guarantee(&self) -> &'static str {
        "atomic"
    }

    /// Where the data lives and anything a reader of the results must know (e.g. a fallback
    /// medium). Goes into the JSON config.
    fn medium(&self) -> String;

    /// Create `files` files of `file_size` bytes each (zero-filled, durable).
    fn setup(&mut self, files: u32, file_size: u64) -> Result<()>;

    /// One durable, failure-atomic update of two ranges of two distinct files.
    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()>;

    /// Bytes written to the medium so far (data, logs, journals, metadata), when the system
    /// can count them; `None` when it cannot be measured (never guessed).
    fn bytes_written(&self) -> Option<u64>;

    /// The part of [`bytes_written`](TwoFileUpdate::bytes_written) written by checkpointing
    /// (background threads, and the checkpoint the system does at the end of a run), for
    /// systems that checkpoint; `None` when the system has no such split.
    fn ckpt_bytes_written(&self) -> Option<u64> {
        None
    }

    /// Read back `buf.len()` bytes at `off` of file `file` (tests check the data landed).
    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()>;

    /// Called (untimed) before each measured run; systems that count device bytes start here.
    fn run_start(&mut self) {}

    /// Called (untimed) after each measured run.
    fn run_end(&mut self) {}

    /// Let the system use `dur` of idle time (background checkpointing); default: sleep.
    fn idle(&mut self, dur: std::time::Duration) {
        std::thread::sleep(dur);
    }
}
