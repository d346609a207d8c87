//! Freeing an inode whose last link is gone and whose last handle is closed.

use crate::core::{Core, InodeState};
use crate::media::layout::*;
use pmem::Region;
use store::Result;

impl<R: Region> Core<R> {
    /// Free inode `st.ino` (nlink 0, committed, no open handle): drop its redo entries,
    /// clear its kind, then give its blocks and number back. Not atomic and need not be: the
    /// inode is unreachable, and recovery frees any inode left with nlink 0.
    pub(crate) fn free_inode(&self, st: &mut InodeState) -> Result<()> {
        let ino = st.ino;
        let off = self.geo.inode(ino);
        if self.read_u8(off + I_KIND) == KIND_FREE {
            return Ok(());
        }
        let versions: Vec<_> = st.pending.drain().flat_map(|(_, l)| l).collect();
        for v in &versions {
            self.clear_entry(self.geo.data_entry(v.slot));
        }
        // persist: the inode's redo entries are gone before the inode slot can be reused.
        self.region.fence();
        let mut blocks = Vec::new();
        self.walk_tree(ino, &mut |pbn, _, _| {
            blocks.push(pbn);
            Ok(())
        })?;
        let attribute_blocks = self.xattr_blocks(ino)?;
        self.region.write(off + I_KIND, &[KIND_FREE]);
        // persist: the inode is free before its blocks can be handed out again.
        self.region.persist(off, 8);
        let tree: std::collections::HashSet<u64> = blocks.iter().copied().collect();
        for v in versions {
            self.data_slots.free(v.slot);
            if !tree.contains(&v.pbn) {
                self.blocks.free(v.pbn);
            }
            if v.committed {
                self.data_entry_retired(v.txid);
            }
        }
        for pbn in blocks.into_iter().chain(attribute_blocks) {
            self.blocks.free(pbn);
        }
        st.dir = None;
        st.naming = crate::core::Naming::Named;
        st.dir_reserved.clear();
        st.drop_map();
        self.inodes_free.free(ino);
        Ok(())
    }
}
