//! What the store reports about itself: file system space and the engine's counters.

use crate::host::FileMedia;
use crate::io_err;
use crate::lifecycle::MmioStore;
use pmem::Region;
use std::sync::atomic::{AtomicU64, Ordering};
use store::{Result, StatFs};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn space(&self) -> Result<StatFs> {
        self.check()?;
        let s = &self.shared;
        // Files live on the host file system: its space is the store's. (The log pool's own
        // occupancy is in `stats`: log_free_bytes.)
        let host = s
            .media
            .space()
            .map_err(|e| io_err(s.media.describe().as_ref(), "statvfs", e))?;
        // Others' use of the host file system is taken once; the store's own (every host file
        // in its directory, each inode once) is counted now, so the store's writes and frees
        // always show whatever other programs do meanwhile (hostfs::SharedUsage).
        let (total, free) = s.usage.free(&host, self.own_bytes());
        let block_size = host.block_size.max(1);
        let (blocks_total, blocks_free) = (total / block_size, free / block_size);
        let free_slots = s.free_file_slots.lock().len() as u64;
        Ok(StatFs {
            block_size,
            blocks_total,
            blocks_free,
            inodes_total: s.sb.files_max as u64,
            inodes_free: free_slots,
            name_max: store::NAME_MAX as u64,
        })
    }

    /// Bytes the host allocated to the store's files (each inode once).
    fn own_bytes(&self) -> u64 {
        let media = &self.shared.media;
        let Ok(files) = media.walk() else {
            return 0;
        };
        let mut seen = std::collections::HashSet::new();
        files
            .into_iter()
            .filter(|(id, _)| seen.insert(*id))
            .filter_map(|(_, path)| media.stat(&path).ok())
            .map(|st| st.allocated.max(st.len.div_ceil(4096) * 4096))
            .sum()
    }

    pub(crate) fn counter_list(&self) -> Vec<(String, u64)> {
        let c = &self.shared.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ps = self.shared.pool.stats();
        vec![
            ("writes".into(), g(&c.writes)),
            ("reads".into(), g(&c.reads)),
            ("bytes_logged".into(), g(&c.bytes_logged)),
            ("bytes_direct".into(), g(&c.bytes_direct)),
            ("commits".into(), g(&c.commits)),
            ("tx_commits".into(), g(&c.tx_commits)),
            ("aborts".into(), g(&c.aborts)),
            ("entries_created".into(), g(&c.entries_created)),
            (
                "entries_checkpointed".into(),
                g(&c.background.entries_checkpointed),
            ),
            ("sync_checkpoints".into(), g(&c.sync_checkpoints)),
            (
                "background_checkpoints".into(),
                g(&c.background.background_checkpoints),
            ),
            ("policy_switches".into(), g(&c.policy_switches)),
            (
                "log_free_bytes".into(),
                self.shared.log_space.lock().free_bytes(),
            ),
            ("pool_fences".into(), ps.fences),
            ("pool_lines_flushed".into(), ps.lines_flushed),
            ("pool_bytes_stored".into(), ps.bytes_stored),
        ]
    }
}
