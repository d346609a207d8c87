//! Checkpointing (seed §3.6): the latest valid versions of the checkpoint area are written
//! home, sorted by home file and offset, made durable (sync_data), and only then leave the
//! journal by one 8-byte store of p_first. The home writes run without the state lock, so
//! commits go on meanwhile; a failed write or sync leaves every version in the journal, to
//! be retried by the next checkpoint (a committed version is never dropped).

use super::{CheckpointPhase, Journal};
use crate::layout::{BlockKey, Flags, BLOCK_LEN};
use crate::JournalResult;
use hostfs::HostFs;
use pmem::Region;
use std::collections::BTreeSet;

/// Copies of the latest versions a checkpoint writes home, sorted by home block.
type Snapshot = Vec<(BlockKey, Box<[u8]>)>;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Write every committed version home and empty the checkpoint area.
    pub fn checkpoint(&self) -> JournalResult<()> {
        let _one = self.checkpointing.lock();
        let (upto, snapshot) = self.checkpoint_snapshot();
        let result = self.write_home(&snapshot);
        let mut st = self.state.lock();
        assert_eq!(
            st.phase,
            CheckpointPhase::WritingHome { upto },
            "checkpoint phase on exit"
        );
        st.phase = CheckpointPhase::Idle;
        result?;
        if upto <= st.p_first {
            return Ok(());
        }
        st.stats.checkpoints += 1;
        st.stats.checkpointed_blocks += snapshot.len() as u64;
        self.store_first_pointer(upto, st.stats.checkpoints);
        for pos in st.p_first..upto {
            let slot = self.geometry.slot(pos);
            self.put_flags(slot, Flags::FREE);
            st.free.insert(slot, self.header_known(slot).write_count);
        }
        st.p_first = upto;
        st.versions.retain_from(upto);
        Ok(())
    }

    /// Under the state lock: the end of the area to checkpoint and a copy of the latest
    /// versions in it; the phase becomes WritingHome.
    fn checkpoint_snapshot(&self) -> (u64, Snapshot) {
        let mut st = self.state.lock();
        assert_eq!(st.phase, CheckpointPhase::Idle, "checkpoint phase on entry");
        let upto = st.p_checkpoint;
        let mut snapshot = Vec::new();
        for (key, pos) in st.versions.latest_sorted() {
            if pos >= upto {
                continue;
            }
            let h = self.header_known(self.geometry.slot(pos));
            let mut buf = vec![0u8; BLOCK_LEN as usize].into_boxed_slice();
            self.read_jblock(h.j_blocknr, &mut buf);
            snapshot.push((key, buf));
        }
        st.phase = CheckpointPhase::WritingHome { upto };
        (upto, snapshot)
    }

    /// Write the snapshot home in (file, block) order and sync every file written.
    fn write_home(&self, snapshot: &Snapshot) -> JournalResult<()> {
        let mut files = BTreeSet::new();
        for (key, data) in snapshot {
            self.home
                .write_at(key.file, key.block as u64 * BLOCK_LEN, data)?;
            files.insert(key.file);
        }
        for file in files {
            // persist: the home copies are durable before p_first lets the journal forget them.
            self.home.sync(file)?;
        }
        Ok(())
    }
}
