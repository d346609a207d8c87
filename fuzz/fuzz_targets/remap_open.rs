//! Fuzz target `remap_open`: a remap store's journal or snapshot with structure-blind
//! mutations (xored bytes, truncations) through open (recovery), fsck, reads, writes, a
//! mkdir, unmount and reopen (crates/engines/remap/tests/common/hostile.rs). Never a panic;
//! a store fsck found clean stays clean after the operations and a reopen.
//!
//! Input: byte 0 picks the file (bit 0: journal, else snapshot) and the base image (bit 1);
//! the rest is a list of 5-byte mutations (offset u32, xor byte; top offset bit: truncate).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "../../crates/engines/remap/tests/common/hostile.rs"]
mod hostile;

fn bases() -> &'static [hostfs::HostImage; 2] {
    static BASES: OnceLock<[hostfs::HostImage; 2]> = OnceLock::new();
    BASES.get_or_init(|| [hostile::base_image(false), hostile::base_image(true)])
}

fuzz_target!(|data: &[u8]| {
    hostile::run(bases(), data);
});
