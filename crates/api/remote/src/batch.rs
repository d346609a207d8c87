//! Writes batched in the client: a write through a handle bound to one of the client's
//! transactions is not sent at once. Its bytes go into the shared data area, its descriptor
//! into the batch, and the batch travels with the transaction's commit — or, before any
//! other call, as a request of its own (so every call sees every earlier write, in order:
//! read-your-writes, and the engine gets the calls in the application's order).
//!
//! What the Store API's caller sees is unchanged but for when a write's error arrives: a
//! batched write returns `data.len()` (what every engine's write returns), and an error the
//! server meets applying it dooms its transaction — the transaction's later batched writes
//! are skipped, its commit aborts it and returns that error (nothing applied), its abort
//! succeeds. When a batch is sent because it is full, the error comes back to the write
//! that filled it, if that write is in the doomed transaction. Only writes the server would
//! take are batched: through a handle this client opened for writing, not O_ATOMIC, bound
//! by this client's own `tx_begin`/`tx_add` (so BadHandle, BadMode and EBUSY answer at the
//! call, as before). A client killed with a batch pending never sent it: its transaction is
//! aborted with its connection, as any transaction of a client that goes away.

use std::collections::{HashMap, HashSet};

use store::{Fh, OpenFlags, Result, TxId};

use crate::wire::{malformed, Dec, Enc};

/// Most writes in one batch (their descriptors fit the shared message area).
pub(crate) const BATCH_WRITES_MAX: usize = 1024;
/// Bytes of one write's descriptor: transaction, handle, offset, data offset, length.
const ENTRY_LEN: usize = 40;
const _: () = assert!(BATCH_WRITES_MAX * ENTRY_LEN + 64 <= crate::shm::MESSAGE_LEN);

/// One batched write: its bytes are at `at` in the shared data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchedWrite {
    pub(crate) tx: u64,
    pub(crate) fh: u64,
    pub(crate) off: u64,
    pub(crate) at: u64,
    pub(crate) len: u64,
}

/// How the client sends the writes of a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writes {
    /// Opened for writing, not O_ATOMIC: batched while bound to a transaction.
    Batchable,
    /// Read-only or O_ATOMIC: every write is its own request.
    Direct,
}

/// What the client knows to batch writes: its handles, which of its transactions binds
/// each, its transactions the server reported doomed, and the pending batch.
#[derive(Default)]
pub(crate) struct Batcher {
    handles: HashMap<u64, Writes>,
    bound: HashMap<u64, u64>,
    doomed: HashSet<u64>,
    writes: Vec<BatchedWrite>,
    data_used: usize,
}

impl Batcher {
    /// A handle this client opened.
    pub(crate) fn opened(&mut self, fh: Fh, flags: OpenFlags) {
        let writes = if flags.write && !flags.atomic {
            Writes::Batchable
        } else {
            Writes::Direct
        };
        self.handles.insert(fh.0, writes);
    }

    /// A handle released (or no longer known to batch: O_ATOMIC).
    pub(crate) fn forget(&mut self, fh: Fh) {
        self.handles.remove(&fh.0);
        self.bound.remove(&fh.0);
    }

    /// The server bound `files` to `tx`.
    pub(crate) fn bind(&mut self, tx: TxId, files: &[Fh]) {
        for fh in files {
            if self.handles.get(&fh.0) == Some(&Writes::Batchable) {
                self.bound.insert(fh.0, tx.0);
            }
        }
    }

    /// `tx` ends (its commit or abort is being sent): its handles are unbound.
    pub(crate) fn ended(&mut self, tx: TxId) {
        self.bound.retain(|_, t| *t != tx.0);
        self.doomed.remove(&tx.0);
    }

    /// The server reported `tx` doomed: its later writes go one by one.
    pub(crate) fn doom(&mut self, tx: u64) {
        if self.bound.values().any(|&t| t == tx) {
            self.doomed.insert(tx);
        }
    }

    /// The transaction a write through `fh` would be batched in, if it is batched.
    pub(crate) fn target(&self, fh: Fh) -> Option<u64> {
        let tx = *self.bound.get(&fh.0)?;
        (!self.doomed.contains(&tx)).then_some(tx)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Where a write of `len` bytes would go in a data area of `data_len` bytes, if the
    /// batch has room for it.
    pub(crate) fn room(&self, len: usize, data_len: usize) -> Option<usize> {
        let fits = self.writes.len() < BATCH_WRITES_MAX
            && self
                .data_used
                .checked_add(len)
                .is_some_and(|e| e <= data_len);
        fits.then_some(self.data_used)
    }

    /// Add a write whose bytes were copied to `at` (from [`Batcher::room`]).
    pub(crate) fn push(&mut self, tx: u64, fh: Fh, off: u64, at: usize, len: usize) {
        assert_eq!(at, self.data_used, "batched write out of place");
        self.writes.push(BatchedWrite {
            tx,
            fh: fh.0,
            off,
            at: at as u64,
            len: len as u64,
        });
        self.data_used = at + len;
    }

    /// Append the batch to a request and empty it.
    pub(crate) fn take_into(&mut self, e: &mut Enc) {
        e.u32(self.writes.len() as u32);
        for w in self.writes.drain(..) {
            e.u64(w.tx).u64(w.fh).u64(w.off).u64(w.at).u64(w.len);
        }
        self.data_used = 0;
    }
}

/// A batch as the server reads it (lengths checked against the frame; offsets are checked
/// when the bytes are read from the data area).
pub(crate) fn decode(d: &mut Dec<'_>) -> Result<Vec<BatchedWrite>> {
    let n = d.count(ENTRY_LEN)?;
    if n > BATCH_WRITES_MAX {
        return Err(malformed("batch longer than the protocol allows"));
    }
    (0..n)
        .map(|_| {
            Ok(BatchedWrite {
                tx: d.u64()?,
                fh: d.u64()?,
                off: d.u64()?,
                at: d.u64()?,
                len: d.u64()?,
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    const RW: OpenFlags = OpenFlags {
        read: true,
        write: true,
        append: false,
        atomic: false,
    };

    #[test]
    fn only_writable_bound_handles_of_live_transactions_are_batched() {
        let mut b = Batcher::default();
        let (w, r, a, stranger) = (Fh(1), Fh(2), Fh(3), Fh(4));
        b.opened(w, RW);
        b.opened(r, OpenFlags::default());
        b.opened(a, OpenFlags { atomic: true, ..RW });
        b.bind(TxId(7), &[w, r, a, stranger]);
        assert_eq!(b.target(w), Some(7));
        assert_eq!(b.target(r), None, "read-only");
        assert_eq!(b.target(a), None, "O_ATOMIC");
        assert_eq!(b.target(stranger), None, "not this client's");
        b.doom(7);
        assert_eq!(b.target(w), None, "doomed");
        b.ended(TxId(7));
        b.bind(TxId(8), &[w]);
        assert_eq!(b.target(w), Some(8));
        b.forget(w);
        assert_eq!(b.target(w), None, "released");
    }

    #[test]
    fn a_batch_round_trips_and_respects_its_limits() {
        let mut b = Batcher::default();
        b.opened(Fh(1), RW);
        b.bind(TxId(5), &[Fh(1)]);
        assert_eq!(b.room(10, 16), Some(0));
        b.push(5, Fh(1), 100, 0, 10);
        assert_eq!(b.room(7, 16), None, "data area full");
        assert_eq!(b.room(6, 16), Some(10));
        b.push(5, Fh(1), 0, 10, 6);
        let mut e = Enc::default();
        b.take_into(&mut e);
        assert!(b.is_empty());
        assert_eq!(b.room(16, 16), Some(0), "emptied");
        let mut d = Dec::new(&e.0);
        let got = decode(&mut d).unwrap();
        d.finish().unwrap();
        let want = [(100, 0, 10), (0, 10, 6)].map(|(off, at, len)| BatchedWrite {
            tx: 5,
            fh: 1,
            off,
            at,
            len,
        });
        assert_eq!(got, want);
        for _ in 0..BATCH_WRITES_MAX {
            let at = b.room(0, 16).unwrap();
            b.push(5, Fh(1), 0, at, 0);
        }
        assert_eq!(b.room(0, 16), None, "descriptor limit");
        let mut lie = Enc::default();
        lie.u32(u32::MAX);
        assert!(decode(&mut Dec::new(&lie.0)).is_err());
    }
}
