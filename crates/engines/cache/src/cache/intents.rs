//! The namespace intent area of the pool: records written before a transaction's namespace
//! change, freed after its commit or abort finished (format: format/intent.rs).

use super::Cache;
use crate::backing::Backing;
use crate::format::intent::{Intent, INTENT_LEN};
use pmem::Region;
use store::{Error, Result};

impl<R: Region, B: Backing> Cache<R, B> {
    /// Persist `intent` of the open transaction `stamp`; returns its record number.
    pub fn log_intent(&self, stamp: u64, intent: &Intent) -> Result<u64> {
        assert!(
            self.is_open(stamp),
            "cache: intent of a transaction that is not open"
        );
        if intent.kind.is_posix() && !self.sb.has_posix_intents() {
            return Err(Error::Unsupported(format!(
                "{:?} inside a transaction on a cache pool of format version {} \
                 (made by an older build; version {} pools log it)",
                intent.kind,
                self.sb.version(),
                crate::format::superblock::VERSION
            )));
        }
        let bytes = intent.encode().ok_or(Error::NameTooLong {
            len: intent.a.len().max(intent.b.len()),
            max: crate::format::intent::PATH_MAX,
        })?;
        let slot = self.free_intents.lock().pop().ok_or(Error::TooMany {
            what: "namespace operations in open transactions",
            max: self.geometry().intents_max(),
        })?;
        let at = self.geometry().intent_at(slot);
        assert_eq!(self.region.load_u64(at), 0, "cache: intent {slot} in use");
        self.region.write(at, &bytes);
        // persist: the record is whole before its stamp makes it live.
        self.region.persist(at, INTENT_LEN);
        self.region.store_u64(at, stamp);
        // persist: the intent is live before the home directory changes.
        self.region.persist(at, 8);
        Ok(slot)
    }

    /// Free an intent whose change was finished or undone.
    pub fn free_intent(&self, slot: u64) {
        let at = self.geometry().intent_at(slot);
        self.region.store_u64(at, 0);
        // persist: the intent is done with.
        self.region.persist(at, 8);
        self.free_intents.lock().push(slot);
    }

    /// Every live intent as (record, stamp, intent).
    pub fn live_intents(&self) -> Result<Vec<(u64, u64, Intent)>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; INTENT_LEN as usize];
        for slot in 0..self.geometry().intents_max() {
            let at = self.geometry().intent_at(slot);
            let stamp = self.region.load_u64(at);
            if stamp == 0 {
                continue;
            }
            self.region.read(at, &mut buf);
            let intent = Intent::decode(&buf)
                .map_err(|what| Error::corrupt(format!("cache intent {slot}: {what}"), at))?;
            if intent.kind.is_posix() && !self.sb.has_posix_intents() {
                return Err(Error::corrupt(
                    format!(
                        "cache intent {slot}: kind {:?} in a version-1 pool",
                        intent.kind
                    ),
                    at,
                ));
            }
            out.push((slot, stamp, intent));
        }
        Ok(out)
    }

    pub(crate) fn rebuild_free_intents(&self) {
        let g = self.geometry();
        let free: Vec<u64> = (0..g.intents_max())
            .rev()
            .filter(|&i| self.region.load_u64(g.intent_at(i)) == 0)
            .collect();
        *self.free_intents.lock() = free;
    }
}
