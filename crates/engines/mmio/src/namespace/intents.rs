//! The store's side of namespace intents (record format and host steps in `log/intent.rs`):
//! log one before a host operation inside a transaction, withdraw it when the operation
//! fails, finish a committed transaction's intents, undo an aborted one's newest first.

use crate::host::FileMedia;
use crate::io_err;
use crate::lifecycle::MmioStore;
use crate::log::intent::{self, Intent, IntentRecord, TRASH_NAME};
use crate::namespace::tables::Tables;
use pmem::Region;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::{Error, Result, TxId, ROOT_INO};

impl<R: Region, M: FileMedia> MmioStore<R, M> {
    /// After a commit: delete what the transaction removed (from the trash), free its intents.
    pub(crate) fn finish_intents(&self, intents: &[(u32, Intent)]) -> Result<()> {
        let s = &*self.shared;
        let mut t = self.tables.lock();
        for (_, it) in intents {
            if let Intent::Renamed { a, .. } = it {
                // An unnamed file (O_TMPFILE) that this transaction named keeps its name.
                for (_, u) in t.open.values_mut() {
                    if u.unlinked.as_ref().is_some_and(|(p, _)| p == a) {
                        u.unlinked = None;
                    }
                }
            }
            let mut relinked = None;
            if let Intent::Removed { b, .. } = it {
                if let Ok(st) = s.media.stat(b) {
                    let ino = self.ino_of(st.id);
                    t.names.remove(&ino);
                    if st.nlink > 1 {
                        // A hard-linked file lives on under its other names.
                        relinked = Some(ino);
                    } else {
                        self.detach_open(&mut t, ino)?;
                    }
                }
            }
            intent::finish(&s.media, it)?;
            if let (Some(ino), Intent::Removed { b, .. }) = (relinked, it) {
                use std::os::unix::ffi::OsStrExt;
                let name = b
                    .file_name()
                    .map(|n| n.as_bytes().to_vec())
                    .unwrap_or_default();
                let trash_ino = s
                    .media
                    .stat(Path::new(TRASH_NAME))
                    .map(|st| self.ino_of(st.id))
                    .unwrap_or(ROOT_INO);
                self.forget_name(&mut t, ino, trash_ino, &name);
            }
        }
        self.release_intents(intents);
        Ok(())
    }

    pub(crate) fn release_intents(&self, intents: &[(u32, Intent)]) {
        let s = &*self.shared;
        for (idx, _) in intents {
            intent::clear(&s.pool, s.sb.intent_at(*idx));
        }
        // persist: the intents are free.
        s.pool.fence();
        s.free_intents
            .lock()
            .extend(intents.iter().map(|(i, _)| *i));
    }

    /// Undo a transaction's namespace intents, newest first.
    pub(crate) fn undo_intents(
        &self,
        t: &mut Tables<R, M>,
        intents: &[(u32, Intent)],
    ) -> Result<()> {
        let s = &*self.shared;
        let mut first_err = None;
        for (idx, it) in intents.iter().rev() {
            if let Intent::Created { a } = it {
                if let Ok(st) = s.media.stat(a) {
                    let ino = self.ino_of(st.id);
                    if let Err(e) = self.detach_open(t, ino) {
                        first_err.get_or_insert(e);
                    }
                    // The file is gone: its handles answer NotFound from now on, and its
                    // entry leaves the open table, so that a new file given the same host
                    // inode number later is never reached through them.
                    if let Some((f, _)) = t.open.remove(&ino) {
                        for h in t.handles.values_mut() {
                            if Arc::ptr_eq(&h.file, &f) {
                                h.gone = true;
                            }
                        }
                    }
                    t.names.remove(&ino);
                }
            }
            match intent::undo(&s.media, it) {
                Ok(()) => {
                    intent::clear(&s.pool, s.sb.intent_at(*idx));
                    // persist: this intent is undone and free (older ones stay valid).
                    s.pool.fence();
                    s.free_intents.lock().push(*idx);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            match it {
                Intent::Removed { a, .. }
                | Intent::Renamed { a, .. }
                | Intent::Attr { a, .. }
                | Intent::Owner { a, .. } => self.relearn(t, a),
                Intent::Exchanged { a, b, .. } => {
                    self.relearn(t, a);
                    self.relearn(t, b);
                }
                Intent::Linked { a } => {
                    // The file's known name may have been the one the undo removed.
                    use std::os::unix::ffi::OsStrExt;
                    let dir = a.parent().unwrap_or(Path::new(""));
                    let dir_ino = match dir.as_os_str().is_empty() {
                        true => Some(ROOT_INO),
                        false => s.media.stat(dir).ok().map(|st| self.ino_of(st.id)),
                    };
                    if let (Some(dir_ino), Some(name)) = (dir_ino, a.file_name()) {
                        let name = name.as_bytes();
                        t.names.retain(|_, (p, n)| !(*p == dir_ino && n == name));
                    }
                }
                _ => {}
            }
        }
        self.refresh_paths(t);
        first_err.map_or(Ok(()), Err)
    }

    /// Write a durable intent for transaction `tx` before its host operation.
    pub(crate) fn log_intent(&self, t: &mut Tables<R, M>, tx: TxId, it: Intent) -> Result<u32> {
        t.open_tx(tx.0)?;
        let s = &*self.shared;
        let idx = s.free_intents.lock().pop().ok_or(Error::TooMany {
            what: "namespace operations in open transactions (intents_max)",
            max: s.sb.intents_max as u64,
        })?;
        let rec = IntentRecord {
            txid: tx.0,
            seq: s.intent_seq.fetch_add(1, Ordering::Relaxed),
            intent: it.clone(),
        };
        if let Err(e) = intent::publish(&s.pool, s.sb.intent_at(idx), &rec) {
            s.free_intents.lock().push(idx);
            return Err(e);
        }
        if let Ok(state) = t.open_tx_mut(tx.0) {
            state.intents.push((idx, it));
        }
        Ok(idx)
    }

    /// The host operation of the newest intent failed: withdraw the intent.
    pub(crate) fn withdraw_intent(&self, t: &mut Tables<R, M>, tx: TxId) {
        let s = &*self.shared;
        if let Some((idx, _)) = t.txs.get_mut(&tx.0).and_then(|st| st.intents.pop()) {
            intent::clear(&s.pool, s.sb.intent_at(idx));
            s.pool.fence();
            s.free_intents.lock().push(idx);
        }
    }

    /// Move `path` to the trash under an intent of `tx`; returns the trash path.
    pub(crate) fn remove_in_tx(
        &self,
        t: &mut Tables<R, M>,
        tx: TxId,
        path: &Path,
    ) -> Result<PathBuf> {
        let n = t.txs.get_mut(&tx.0).map(|st| {
            st.trash_seq += 1;
            st.trash_seq
        });
        let n = n.ok_or(Error::NoSuchTransaction(tx.0))?;
        let trash = Path::new(TRASH_NAME).join(format!("{}-{n}", tx.0));
        self.log_intent(
            t,
            tx,
            Intent::Removed {
                a: path.to_path_buf(),
                b: trash.clone(),
            },
        )?;
        if let Err(e) = self.shared.media.rename(path, &trash) {
            self.withdraw_intent(t, tx);
            return Err(io_err(path, "rename to trash", e));
        }
        let trash_id = self.stat_path(Path::new(TRASH_NAME))?.id;
        let trash_ino = self.ino_of(trash_id);
        t.names
            .insert(trash_ino, (ROOT_INO, TRASH_NAME.as_bytes().to_vec()));
        if let Ok(st) = self.stat_path(&trash) {
            t.names.insert(
                self.ino_of(st.id),
                (trash_ino, format!("{}-{n}", tx.0).into_bytes()),
            );
        }
        self.refresh_paths(t);
        Ok(trash)
    }
}
