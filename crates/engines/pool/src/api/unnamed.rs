//! O_TMPFILE: an unnamed file and the handle that keeps it alive.

use crate::api::pool_store::PoolStore;
use crate::core::Naming;
use pmem::Region;
use store::{Fh, Metadata, OpenFlags, Result, Store, TxId};

impl<R: Region> PoolStore<R> {
    /// A regular file with no name, made in directory `parent` (in `tx` when given, its
    /// handle then bound to `tx`), open with `flags`. It lives while a handle is open or
    /// until `link` names it; its last `release` frees it (`PoolStore::reap`), and so does
    /// recovery after a crash (nlink 0).
    pub(crate) fn unnamed_file(
        &self,
        parent: u64,
        perm: u32,
        flags: OpenFlags,
        tx: Option<TxId>,
    ) -> Result<(Metadata, Fh)> {
        let ino = self.ns_op(tx, |core, t| core.unnamed_node(t, parent, perm))?;
        self.core.cell(ino).lock().naming = Naming::Unnamed;
        let opened = self.open(ino, flags).and_then(|fh| {
            if let Some(id) = tx {
                if let Err(e) = self.tx_add(id, fh) {
                    let _ = self.release(fh);
                    return Err(e);
                }
            }
            Ok(fh)
        });
        match opened {
            Ok(fh) => Ok((self.core.metadata(ino)?, fh)),
            Err(e) => {
                // No handle keeps it: free it now (recovery would at the next mount).
                let _ns = self.core.ns.lock();
                let _ = self.reap(ino);
                Err(e)
            }
        }
    }
}
