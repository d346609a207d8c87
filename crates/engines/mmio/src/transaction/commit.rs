//! A commit of several files (and a transaction's namespace intents) as one atomic unit: one
//! transaction record, one 8-byte commit word.

use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::lifecycle::MmioStore;
use crate::log::intent::Intent;
use crate::log::layout::{self, TxFile};
use pmem::Region;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::{Error, Result};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    /// Commit several files (and a transaction's namespace intents) as one atomic unit: one
    /// transaction record, one 8-byte commit word. A single file without intents commits with
    /// its own epoch store.
    ///
    /// The outer error is a failure before the commit point (nothing committed); the inner one
    /// a failure after it (committed; recovery finishes what is left).
    pub(crate) fn commit_files(
        &self,
        files: &[Arc<MmioFile<R, M>>],
        tx: Option<(u64, &[(u32, Intent)])>,
    ) -> Result<Result<()>> {
        let mut files: Vec<_> = files.iter().filter(|f| f.needs_commit()).cloned().collect();
        files.sort_by_key(|f| f.slot);
        files.dedup_by_key(|f| f.slot);
        let intents = tx.map_or(&[][..], |(_, i)| i);
        if files.len() <= 1 && intents.is_empty() {
            return files
                .first()
                .map_or(Ok(Ok(())), |f| f.commit(&self.shared).map(Ok));
        }
        let s = &*self.shared;
        if files.len() > s.config.tx_files_max {
            return Err(Error::TooMany {
                what: "files in one transaction",
                max: s.config.tx_files_max as u64,
            });
        }
        let mut guards: Vec<_> = files.iter().map(|f| f.state.write()).collect();
        for (f, st) in files.iter().zip(&guards) {
            f.prepare_commit(s, st)?;
        }
        let record = s.free_tx_records.lock().pop().ok_or(Error::TooMany {
            what: "concurrent multi-file commits (tx_records_max)",
            max: s.sb.tx_records_max as u64,
        })?;
        let list: Vec<TxFile> = files
            .iter()
            .map(|f| TxFile {
                slot: f.slot,
                target_epoch: f.epoch.load(Ordering::Acquire) + 1,
            })
            .collect();
        let at = s.sb.tx_at(record);
        assert_eq!(
            s.pool.load_u64(at),
            0,
            "transaction record {record} is in use"
        );
        for tf in &list {
            let stored = s
                .pool
                .load_u64(s.sb.file_meta_at(tf.slot) + layout::fm::EPOCH);
            assert_eq!(
                stored + 1,
                tf.target_epoch,
                "file slot {}: epoch word",
                tf.slot
            );
        }
        s.pool.write(
            at + 8,
            &layout::encode_tx_body(tx.map_or(0, |(id, _)| id), &list),
        );
        // persist: the record's file list is durable before its commit word.
        s.pool.persist(at + 8, layout::TX_RECORD_LEN - 8);
        s.pool.store_u64(at, layout::TX_COMMITTED);
        // persist: COMMIT POINT of the transaction: recovery bumps every listed epoch and
        // finishes the transaction's namespace intents.
        s.pool.persist(at, 8);
        for tf in &list {
            let e = s.sb.file_meta_at(tf.slot) + layout::fm::EPOCH;
            s.pool.store_u64(e, tf.target_epoch);
            s.pool.flush(e, 8);
        }
        // persist: every file's epoch is bumped.
        s.pool.fence();
        s.counters.tx_commits.fetch_add(1, Ordering::Relaxed);
        let mut first_err = None;
        for ((f, st), tf) in files.iter().zip(guards.iter_mut()).zip(&list) {
            if let Err(e) = f.finish_commit(s, st, tf.target_epoch) {
                first_err.get_or_insert(e);
            }
        }
        drop(guards);
        if !intents.is_empty() {
            if let Err(e) = self.finish_intents(intents) {
                first_err.get_or_insert(e);
            }
        }
        if first_err.is_none() {
            s.pool.store_u64(at, 0);
            // persist: the record is freed only once everything it commits is settled.
            s.pool.persist(at, 8);
            s.free_tx_records.lock().push(record);
        }
        Ok(first_err.map_or(Ok(()), Err))
    }
}
