//! Home-file extents: no journaled version may lie past the end its home file is recorded to
//! have. A crafted or corrupt header naming a home block far past its file would otherwise
//! make a checkpoint write there (a sparse write of gigabytes inside the home directory).
//! The Store records each file's extent in its metadata log and checks the journal against
//! it at open, before any checkpoint can run; a user of the bare journal passes its own bound.

use super::Journal;
use crate::layout::BLOCK_LEN;
use crate::{JournalError, JournalResult};
use hostfs::HostFs;
use pmem::Region;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Check every committed version against `extent(file)`, the recorded end (bytes) of its
    /// home file: a version of a block that ends past it is corruption. Nothing is written.
    pub fn verify_extents(&self, extent: &dyn Fn(u32) -> u64) -> JournalResult<()> {
        let st = self.state.lock();
        let mut worst: Option<(u64, crate::BlockKey, u64)> = None;
        for (key, v) in st.versions.iter() {
            let end = (key.block as u64 + 1) * BLOCK_LEN;
            if end > extent(key.file) {
                let pos = v.old.map_or(v.latest, |o| o.min(v.latest));
                if worst.is_none_or(|(e, _, _)| end > e) {
                    worst = Some((end, *key, pos));
                }
            }
        }
        match worst {
            None => Ok(()),
            Some((_, key, pos)) => Err(JournalError::corrupt(
                format!(
                    "journaled version of block {} of home file {} lies past the file's \
                     recorded end of {} bytes",
                    key.block,
                    key.file,
                    extent(key.file)
                ),
                self.geometry.header_off(self.geometry.slot(pos)),
            )),
        }
    }
}
