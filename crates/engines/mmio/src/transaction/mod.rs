//! Transactions of the Store API: begin, add a file, commit, abort, and the ownership rule of
//! files and directories created inside an open transaction. The multi-file commit record is
//! in `commit.rs`.

mod commit;

use crate::file::MmioFile;
use crate::host::FileMedia;
use crate::lifecycle::MmioStore;
use crate::log::intent::Intent;
use crate::namespace::tables::Tables;
use pmem::Region;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::{Error, Fh, Ino, Result, TxId};

/// A transaction's bound files and namespace intents.
pub(crate) type TxParts<R, M> = (Vec<Arc<MmioFile<R, M>>>, Vec<(u32, Intent)>);

/// Where a transaction is in its life. Calls join it (files, namespace changes) only while it
/// is `Open`; its commit or abort moves it to `Ending` on entry, exactly once, and `end_tx`
/// removes it. A second commit or abort racing the first finds it `Ending`: no such
/// transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TxPhase {
    #[default]
    Open,
    Ending,
}

#[derive(Default)]
pub(crate) struct TxState {
    pub(crate) phase: TxPhase,
    pub(crate) inos: Vec<Ino>,
    /// Namespace intents of the transaction, oldest first: (record index, intent).
    pub(crate) intents: Vec<(u32, Intent)>,
    pub(crate) trash_seq: u64,
    /// Host storage to free after the commit: ranges its punches zeroed (ino, start, end).
    pub(crate) punches: Vec<(Ino, u64, u64)>,
}

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    /// A namespace call in `tx` needs it open: checked after the names and before the
    /// call's own errors (conformance case `namespace_error_order`).
    pub(crate) fn tx_open(t: &Tables<R, M>, tx: Option<TxId>) -> Result<()> {
        match tx {
            Some(tx) => t.open_tx(tx.0).map(|_| ()),
            None => Ok(()),
        }
    }

    /// A file or directory created by an open transaction is that transaction's until it
    /// ends (its abort removes it): a change to it made in `tx` (None: outside any
    /// transaction, or O_ATOMIC) fails with FileInTransaction(creator) — the rule of the
    /// Store API (store/src/lib.rs "Transactions").
    pub(crate) fn check_owner(t: &Tables<R, M>, inos: &[Ino], tx: Option<u64>) -> Result<()> {
        for ino in inos {
            match t.created.get(ino) {
                Some(&owner) if tx != Some(owner) => return Err(Error::FileInTransaction(owner)),
                _ => {}
            }
        }
        Ok(())
    }

    /// `check_owner` of the directory a new entry `path` goes into, after the call's own
    /// error (the name exists).
    pub(crate) fn check_new_entry(
        &self,
        t: &Tables<R, M>,
        parent: Ino,
        path: &Path,
        tx: Option<TxId>,
    ) -> Result<()> {
        let busy = Self::check_owner(t, &[parent], tx.map(|t| t.0));
        if busy.is_err() && self.shared.media.stat(path).is_ok() {
            return Err(Error::Exists(path.display().to_string()));
        }
        busy
    }

    /// The transaction the writes of file `ino` belong to (the one it is bound to).
    pub(crate) fn bound_tx(t: &Tables<R, M>, ino: Ino) -> Option<u64> {
        t.open.get(&ino).and_then(|(_, u)| u.tx)
    }

    /// Writes of this file are deferred to a commit (transaction or O_ATOMIC).
    pub(crate) fn deferred(t: &Tables<R, M>, ino: Ino) -> bool {
        t.open
            .get(&ino)
            .is_some_and(|(_, u)| u.tx.is_some() || u.atomic_handles > 0)
    }

    pub(crate) fn sync_handles(&self, fhs: &[Fh]) -> Result<()> {
        let files = self.files_of_handles(fhs)?;
        self.commit_files(&files, None)?
    }

    pub(crate) fn abort_handles(&self, fhs: &[Fh]) -> Result<()> {
        for f in self.files_of_handles(fhs)? {
            f.abort(&self.shared)?;
        }
        Ok(())
    }

    pub(crate) fn begin_tx(&self, files: &[Fh]) -> Result<TxId> {
        let id = {
            let t = self.tables.lock();
            if t.txs.len() >= self.shared.config.transactions_max {
                return Err(Error::TooMany {
                    what: "open transactions",
                    max: self.shared.config.transactions_max as u64,
                });
            }
            self.next_tx.fetch_add(1, Ordering::Relaxed)
        };
        self.tables.lock().txs.insert(id, TxState::default());
        for &fh in files {
            if let Err(e) = self.add_to_tx(TxId(id), fh) {
                let _ = self.abort_tx(TxId(id));
                return Err(e);
            }
        }
        Ok(TxId(id))
    }

    pub(crate) fn add_to_tx(&self, tx: TxId, fh: Fh) -> Result<()> {
        let mut t = self.tables.lock();
        let len = t.open_tx(tx.0)?.inos.len();
        let file = t.live(fh)?.file.clone();
        let bound = t.open.get(&file.ino).ok_or(Error::BadHandle(fh.0))?.1.tx;
        match bound {
            Some(other) if other == tx.0 => return Ok(()),
            Some(other) => return Err(Error::FileInTransaction(other)),
            None => {}
        }
        Self::check_owner(&t, &[file.ino], Some(tx.0))?;
        if len >= self.shared.config.tx_files_max {
            return Err(Error::TooMany {
                what: "files in one transaction",
                max: self.shared.config.tx_files_max as u64,
            });
        }
        if let Some((_, u)) = t.open.get_mut(&file.ino) {
            u.tx = Some(tx.0);
        }
        // Writes made before the binding are not part of the transaction.
        if file.needs_commit()
            && t.open
                .get(&file.ino)
                .is_some_and(|(_, u)| u.atomic_handles == 0)
        {
            file.commit(&self.shared)?;
        }
        if let Some(state) = t.txs.get_mut(&tx.0) {
            state.inos.push(file.ino);
        }
        Ok(())
    }

    pub(crate) fn commit_tx(&self, tx: TxId) -> Result<()> {
        let (files, intents) = self.start_ending(tx)?;
        let result = match self.commit_files(&files, Some((tx.0, &intents))) {
            Ok(after) => {
                let punches = self
                    .tables
                    .lock()
                    .txs
                    .get_mut(&tx.0)
                    .map(|st| std::mem::take(&mut st.punches))
                    .unwrap_or_default();
                for (ino, off, end) in punches {
                    if let Some(f) = files.iter().find(|f| f.ino == ino) {
                        // The zeros are committed: freeing their storage changes no byte a
                        // reader sees, and a failure to free it loses nothing.
                        let _ = f.punch_home(&self.shared, off, end);
                    }
                }
                after
            }
            Err(before) => {
                // Nothing was committed: roll the whole transaction back.
                for f in &files {
                    let _ = f.abort(&self.shared);
                }
                let mut t = self.tables.lock();
                let _ = self.undo_intents(&mut t, &intents);
                Err(before)
            }
        };
        self.end_tx(tx)?;
        result
    }

    pub(crate) fn abort_tx(&self, tx: TxId) -> Result<()> {
        let (files, intents) = self.start_ending(tx)?;
        let mut first_err = None;
        for f in &files {
            if let Err(e) = f.abort(&self.shared) {
                first_err.get_or_insert(e);
            }
        }
        {
            let mut t = self.tables.lock();
            if let Err(e) = self.undo_intents(&mut t, &intents) {
                first_err.get_or_insert(e);
            }
        }
        self.end_tx(tx)?;
        first_err.map_or(Ok(()), Err)
    }

    /// Remove an `Ending` transaction: unbind its files (closing those nobody uses any more)
    /// and release what it created.
    pub(crate) fn end_tx(&self, tx: TxId) -> Result<()> {
        let mut t = self.tables.lock();
        // Unmount may have dropped every transaction meanwhile: nothing is left to end then.
        let Some(state) = t.txs.remove(&tx.0) else {
            return Ok(());
        };
        assert_eq!(
            state.phase,
            TxPhase::Ending,
            "transaction {} ends twice",
            tx.0
        );
        t.created.retain(|_, owner| *owner != tx.0);
        for &ino in &state.inos {
            if let Some((_, u)) = t.open.get_mut(&ino).filter(|(_, u)| u.tx == Some(tx.0)) {
                u.tx = None;
            }
            self.maybe_close(&mut t, ino)?;
        }
        Ok(())
    }

    /// Commit or abort of `tx` starts: `Open` -> `Ending` (refused unless `Open`), and the
    /// files and intents it ends with.
    pub(crate) fn start_ending(&self, tx: TxId) -> Result<TxParts<R, M>> {
        let mut t = self.tables.lock();
        let state = t.open_tx_mut(tx.0)?;
        state.phase = TxPhase::Ending;
        let (inos, intents) = (state.inos.clone(), state.intents.clone());
        let files = inos
            .iter()
            .filter_map(|i| t.open.get(i).map(|(f, _)| f.clone()))
            .collect();
        Ok((files, intents))
    }
}

#[cfg(test)]
mod tests {
    use super::TxPhase;
    use crate::{HostMedia, MmioConfig, MmioStore};
    use hostfs::{SimConfig, SimHostFs};
    use pmem::SimRegion;
    use std::sync::Arc;
    use store::{Error, TxId};

    type SimStore = MmioStore<Arc<SimRegion>, HostMedia<SimHostFs>>;

    fn store() -> SimStore {
        let cfg = MmioConfig::test_min();
        let media = HostMedia::on(SimHostFs::new(SimConfig::default()));
        let region = Arc::new(SimRegion::new(cfg.log_pool_len));
        MmioStore::create_on(region, media, &cfg).expect("create")
    }

    #[test]
    fn an_ending_transaction_takes_no_second_commit_or_abort_and_no_new_files() {
        let s = store();
        let tx = s.begin_tx(&[]).expect("begin");
        if let Some(state) = s.tables.lock().txs.get_mut(&tx.0) {
            state.phase = TxPhase::Ending;
        }
        assert!(matches!(s.commit_tx(tx), Err(Error::NoSuchTransaction(_))));
        assert!(matches!(s.abort_tx(tx), Err(Error::NoSuchTransaction(_))));
        let mkdir = s.make_dir(store::ROOT_INO, b"d", 0o755, Some(tx));
        assert!(matches!(mkdir, Err(Error::NoSuchTransaction(_))));
        s.end_tx(tx).expect("end");
        assert!(s.tables.lock().txs.is_empty());
    }

    #[test]
    #[should_panic(expected = "ends twice")]
    fn ending_an_open_transaction_without_its_commit_or_abort_trips() {
        let s = store();
        let tx = s.begin_tx(&[]).expect("begin");
        let _ = s.end_tx(TxId(tx.0));
    }
}
