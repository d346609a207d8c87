//! Fuzz target `mmio_open`: hostile mmio log pools through open (recovery), fsck, reads, a
//! write, a transaction with a create and a rename, unmount and reopen
//! (crates/engines/mmio/tests/common/hostile.rs). Never a panic, and every path the engine
//! hands the host file system stays inside the store directory.
//!
//! Input: byte 0 picks one of the valid base images (committed undo entries, committed redo
//! entries, an open transaction with namespace intents, uncommitted O_ATOMIC writes), the
//! rest is a list of 13-byte mutations of the pool (op, offset, value: xor/set a byte,
//! store a u32/u64 or an edge value, write an intent record with a hostile path; aimed at
//! the superblock, the per-file metadata, the transaction records, the index entries, the
//! intent records, the log or the home record); op bit 7 re-seals every checksum after them.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/engines/mmio/tests/common/hostile.rs"]
mod hostile;

fuzz_target!(|data: &[u8]| {
    if let Some((pool, host)) = hostile::image_of(data) {
        hostile::exercise(pool, &host);
    }
});
