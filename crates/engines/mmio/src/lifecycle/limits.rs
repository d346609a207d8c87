//! The store's bounded resources (`Store::limits`, what `atomfs info` shows): each with its
//! maximum, its use now and the error a call past it gets.
//!
//! | limit | where it is enforced | error |
//! |---|---|---|
//! | file name bytes (255) | `namespace/paths.rs` | ENAMETOOLONG |
//! | host blocks | the host file system | ENOSPC |
//! | open handles (`open_handles_max`) | `file/handles.rs` `open_handle` | EMFILE |
//! | open files (`files_max` metadata slots) | `file/mod.rs` `MmioFile::open` | EMFILE |
//! | open transactions (`transactions_max`) | `transaction/mod.rs` `begin_tx` | EMFILE |
//! | files per transaction (`tx_files_max`) | `add_to_tx`, `commit_files` | EMFILE |
//! | multi-file commits at once (`tx_records_max`) | `transaction/commit.rs` | EMFILE |
//! | namespace intents (`intents_max`) | `namespace/intents.rs` `log_intent` | EMFILE |
//! | log entries (`index_entries_max`) and log bytes | `file/mod.rs` (after a checkpoint) | ENOSPC |
//! | bytes per file per uncommitted epoch (`epoch_bytes_max`) | `MmioFile::charge_epoch` | ENOSPC |

use crate::host::FileMedia;
use crate::lifecycle::MmioStore;
use pmem::Region;
use std::sync::atomic::Ordering;
use store::{Error, Limit, Result};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    pub(crate) fn limit_list(&self) -> Result<Vec<Limit>> {
        let space = self.space()?;
        let s = &*self.shared;
        let (cfg, sb) = (&s.config, &s.sb);
        let t = self.tables.lock();
        let epoch_largest = (t.open.values())
            .map(|(f, _)| f.epoch_bytes.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let intents_used: usize = t.txs.values().map(|tx| tx.intents.len()).sum();
        let used = |max: u32, free: usize| Some((max as u64).saturating_sub(free as u64));
        Ok(vec![
            Limit::new("file name bytes", space.name_max, None, "ENAMETOOLONG"),
            Limit::new(
                "host blocks (the store directory's file system)",
                space.blocks_total,
                Some(space.blocks_total.saturating_sub(space.blocks_free)),
                "ENOSPC",
            ),
            Limit::new(
                "open handles",
                cfg.open_handles_max as u64,
                Some(t.handles.len() as u64),
                "EMFILE",
            ),
            Limit::new(
                "open files (per-file metadata slots, files_max)",
                sb.files_max as u64,
                used(sb.files_max, s.free_file_slots.lock().len()),
                "EMFILE",
            ),
            Limit::new(
                "open transactions",
                cfg.transactions_max as u64,
                Some(t.txs.len() as u64),
                "EMFILE",
            ),
            Limit::new(
                "files per transaction",
                cfg.tx_files_max as u64,
                t.txs.values().map(|tx| tx.inos.len() as u64).max(),
                "EMFILE",
            ),
            Limit::new(
                "multi-file commits at once (transaction records)",
                sb.tx_records_max as u64,
                used(sb.tx_records_max, s.free_tx_records.lock().len()),
                "EMFILE",
            ),
            Limit::new(
                "namespace operations in open transactions (intent records)",
                sb.intents_max as u64,
                Some(intents_used as u64),
                "EMFILE",
            ),
            Limit::new(
                "log entries (index entries; committed ones are checkpointed to make room)",
                sb.index_entries_max as u64,
                used(sb.index_entries_max, s.free_entries.lock().len()),
                "ENOSPC",
            ),
            Limit::new(
                "log bytes (committed entries are checkpointed to make room)",
                sb.log_len,
                Some(sb.log_len.saturating_sub(s.log_space.lock().free_bytes())),
                "ENOSPC",
            ),
            Limit::new(
                "bytes per file in one uncommitted epoch (largest now)",
                cfg.epoch_bytes_max,
                Some(epoch_largest),
                "ENOSPC",
            ),
        ])
    }

    /// EMFILE when `open_handles_max` handles are open (nothing is changed then).
    pub(crate) fn check_handle_room(&self, handles: usize) -> Result<()> {
        let max = self.shared.config.open_handles_max;
        if handles >= max {
            return Err(Error::TooMany {
                what: "open handles (mmio open_handles_max)",
                max: max as u64,
            });
        }
        Ok(())
    }
}
