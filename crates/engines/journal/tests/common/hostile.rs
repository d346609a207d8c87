//! Exercise a journal on a hostile PM image: open (recovery), fsck, reads, a commit, a
//! checkpoint, reopen. Shared by tests/bad_input.rs and the fuzz target `journal_open`.
//! An image that opens must come out of recovery clean (fsck finds nothing), and stay so.

use hostfs::SimHostFs;
use journal::home::HomeNamer;
use journal::{BlockKey, Journal, JournalConfig, Tx};
use pmem::SimRegion;
use std::path::PathBuf;
use std::sync::Arc;

/// The recorded end of every home file of these images (their files are a few blocks long):
/// a version past it is refused before a checkpoint could write there.
pub const HOME_EXTENT: u64 = 1 << 20;

/// Run the journal on `image`; an error is a clean refusal, a panic is a bug.
pub fn exercise(image: &[u8], cfg: &JournalConfig) -> Result<(), journal::JournalError> {
    let namer: HomeNamer = Arc::new(|id| PathBuf::from(format!("home{id}")));
    let region = Arc::new(SimRegion::from_image(image.to_vec()));
    let host = SimHostFs::default();
    let j = Journal::open(region.clone(), host.clone(), namer.clone(), cfg.clone())?;
    j.verify_extents(&|_| HOME_EXTENT)?;
    let findings = j.fsck();
    assert!(
        findings.problems.is_empty(),
        "fsck after recovery: {findings:?}"
    );
    let mut buf = vec![0u8; 4096];
    for file in 0..4u32 {
        for block in 0..4u32 {
            j.read_block(BlockKey { file, block }, &mut buf)?;
        }
    }
    let mut tx = Tx::new();
    tx.put_block(BlockKey { file: 1, block: 0 }, &[7u8; 4096]);
    j.commit(tx)?;
    j.checkpoint()?;
    let findings = j.fsck();
    assert!(
        findings.problems.is_empty(),
        "fsck after a commit: {findings:?}"
    );
    drop(j);
    let region = Arc::new(SimRegion::from_image(region.persistent_image()));
    let j = Journal::open(region, host, namer, cfg.clone())?;
    j.read_block(BlockKey { file: 1, block: 0 }, &mut buf)?;
    assert_eq!(buf, vec![7u8; 4096], "a committed block after reopen");
    Ok(())
}
