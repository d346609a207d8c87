//! `fsck` of the journal: headers, areas, the version table against a rebuild from the
//! headers, the free list. Read-only.

use super::Journal;
use crate::layout::superblock::Superblock;
use crate::layout::swap_record::SwapRecord;
use crate::versions::VersionTable;
use hostfs::HostFs;
use pmem::Region;

/// What fsck found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckFindings {
    pub problems: Vec<String>,
    /// Valid versions in the checkpoint area.
    pub valid_versions: u64,
    /// Invalid (garbage) headers in the checkpoint area.
    pub invalid_blocks: u64,
    pub free_blocks: u64,
}

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Check the journal's on-media structures against its DRAM state.
    pub fn fsck(&self) -> FsckFindings {
        let st = self.state.lock();
        let mut f = FsckFindings::default();
        if let Err(e) = Superblock::read(&self.region) {
            f.problems.push(format!("superblock: {e}"));
            return f;
        }
        match SwapRecord::decode(&self.read_swap_record(), &self.geometry) {
            Ok(None) => {}
            Ok(Some(_)) => f
                .problems
                .push("a swap record is armed outside a swap".into()),
            Err(e) => f.problems.push(format!("swap record: {e}")),
        }
        let mut seen = vec![false; self.geometry.blocks() as usize];
        let mut rebuilt = VersionTable::new();
        for slot in 0..self.geometry.blocks() {
            match self.header(slot) {
                Ok(h) => match seen.get_mut(h.j_blocknr as usize) {
                    Some(s) if !*s => *s = true,
                    _ => f
                        .problems
                        .push(format!("journal block {} matched twice", h.j_blocknr)),
                },
                Err(e) => f.problems.push(format!("header {slot}: {e}")),
            }
        }
        for pos in st.p_first..st.p_checkpoint {
            match self.header(self.geometry.slot(pos)) {
                Ok(h) if h.flags.valid() => {
                    f.valid_versions += 1;
                    let _ = rebuilt.push(h.home, pos);
                }
                Ok(h) if h.flags.occupied() => f.invalid_blocks += 1,
                Ok(_) => f
                    .problems
                    .push(format!("free header at checkpoint position {pos}")),
                Err(_) => {}
            }
        }
        for (key, latest) in rebuilt.latest_sorted() {
            if st.versions.get(&key).map(|v| v.latest) != Some(latest) {
                f.problems
                    .push(format!("version table: latest of {key:?} is not {latest}"));
            }
        }
        if rebuilt.len() != st.versions.len() {
            f.problems.push(format!(
                "version table has {} blocks, headers {}",
                st.versions.len(),
                rebuilt.len()
            ));
        }
        f.free_blocks = st.free_blocks(&self.geometry);
        if st.free.len() as u64 != f.free_blocks {
            f.problems.push(format!(
                "free list {} != free area {}",
                st.free.len(),
                f.free_blocks
            ));
        }
        f
    }
}
