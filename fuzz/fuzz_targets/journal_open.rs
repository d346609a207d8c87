//! Fuzz target `journal_open`: hostile NJS journal images through open (recovery), fsck,
//! the extent check (no version past its home file's recorded end), reads, a commit, a
//! checkpoint and reopen (crates/engines/journal/tests/common/hostile.rs).
//! Never a panic, a hang or an out-of-range access; an image that opens comes out of
//! recovery fsck-clean.
//!
//! Input: byte 0 chooses the mode. With bit 7 set the rest of the input *is* the image.
//! Otherwise the rest is a list of 3-byte mutations (little-endian u16 offset into the
//! superblock, reserved headers and header array of a valid 16-block journal with committed
//! versions, then a byte to xor there); bit 6 re-seals the superblock checksum after them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "../../crates/engines/journal/tests/common/hostile.rs"]
mod hostile;

fn config() -> journal::JournalConfig {
    journal::JournalConfig {
        journal_blocks: 16,
        ..journal::JournalConfig::test_min()
    }
}

/// A valid journal with committed, not yet checkpointed versions.
fn base() -> &'static Vec<u8> {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        use std::sync::Arc;
        let g = journal::layout::Geometry::new(16).expect("geometry");
        let region = Arc::new(pmem::SimRegion::new(g.region_len()));
        let namer: journal::home::HomeNamer =
            Arc::new(|id| std::path::PathBuf::from(format!("home{id}")));
        let j = journal::Journal::create(region.clone(), hostfs::SimHostFs::default(), namer, config())
            .expect("create");
        for i in 0..6u32 {
            let mut tx = journal::Tx::new();
            tx.put_block(journal::BlockKey { file: 1, block: i % 3 }, &[i as u8; 4096]);
            j.commit(tx).expect("commit");
        }
        drop(j);
        region.persistent_image()
    })
}

fn reseal(image: &mut [u8]) {
    let crc = pmem::crc::crc32c(&image[0..16]);
    image[16..20].copy_from_slice(&crc.to_le_bytes());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let image = if mode & 0x80 != 0 {
        rest.to_vec()
    } else {
        let mut image = base().clone();
        let span = journal::layout::Geometry::new(16).expect("geometry").blocks_off() as usize;
        for m in rest.chunks_exact(3) {
            let at = u16::from_le_bytes([m[0], m[1]]) as usize % span;
            image[at] ^= m[2];
        }
        if mode & 0x40 != 0 {
            reseal(&mut image);
        }
        image
    };
    let _ = hostile::exercise(&image, &config());
});
