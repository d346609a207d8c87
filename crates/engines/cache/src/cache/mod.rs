//! [`Cache`]: the PM pool of one store — tags, chunks, file records — and the operations on
//! it, split by concept: [`files`] (records, keys, lengths), [`write`] (the cases),
//! [`read`], [`flush`] (home write-back) and [`recovery`].

pub mod files;
pub mod flush;
pub mod home_space;
pub mod home_state;
pub mod intents;
pub mod limits;
pub mod read;
pub mod recovery;
pub mod unit;
pub mod write;

pub use home_state::{HomeChange, HomeConflict, HomeConflictPolicy, HomeStampCheck, Prefer};
pub use recovery::RecoveryReport;
pub use unit::{Unit, UnitState};

use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::superblock::NEXT_KEY_AT;
use crate::format::{Geometry, Superblock, Tag, TAG_LEN};
use crate::slot::Pair;
use crate::stride::StrideTable;
use crate::CacheConfig;
use files::Files;
use parking_lot::{Mutex, MutexGuard};
use pmem::Region;
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::AtomicU64;
use store::{Error, Result};

/// The cache of one store (see the crate documentation).
pub struct Cache<R: Region, B: Backing> {
    region: R,
    sb: Superblock,
    backing: B,
    config: CacheConfig,
    slot_locks: Vec<Mutex<()>>,
    files: Mutex<Files>,
    next_stamp: AtomicU64,
    counters: Counters,
    /// Chunks that may be dirty (a superset; the tag decides).
    dirty: Mutex<BTreeSet<u64>>,
    /// Dirty chunks written into their home file (not synced) by the stat rule, with the
    /// tag they had: not written again while the tag is the same.
    shown: Mutex<std::collections::HashMap<u64, Tag>>,
    /// The last home write-back error, until a flush succeeds.
    flush_error: Mutex<Option<String>>,
    /// Stamps of the open transactions (their chunks pin their slots).
    open_units: Mutex<HashSet<u64>>,
    /// Free unit words.
    free_units: Mutex<Vec<u64>>,
    /// Free intent records.
    free_intents: Mutex<Vec<u64>>,
}

impl<R: Region, B: Backing> Cache<R, B> {
    /// Format `region` as an empty cache pool for the home directory `home`.
    pub fn format(region: R, backing: B, config: CacheConfig, home: &[u8]) -> Result<Self> {
        let slots = Geometry::slots_for(
            region.len(),
            config.files_max,
            config.units_max,
            config.intents_max,
        );
        if slots < 1 {
            return Err(Error::InvalidArgument(format!(
                "cache pool of {} bytes holds no slot with {} file records",
                region.len(),
                config.files_max
            )));
        }
        let geometry = Geometry::new(
            slots,
            config.files_max,
            config.units_max,
            config.intents_max,
        )?;
        let store_id = store::now_ns() ^ u64::from(std::process::id()) << 32;
        let sb = Superblock::new(geometry, store_id, home)?;
        region.fill(0, geometry.chunks_off(), 0);
        // persist: every unit word, record and tag is zero (free) before the superblock
        // makes the pool valid.
        region.persist(0, geometry.chunks_off());
        sb.write_to(&region, 1);
        Ok(Self::assemble(region, sb, backing, config))
    }

    /// Open a formatted pool and run recovery.
    pub fn open(region: R, backing: B, config: CacheConfig) -> Result<(Self, RecoveryReport)> {
        let (cache, report) = Self::open_deferred(region, backing, config)?;
        cache.close_recovered_units();
        Ok((cache, report))
    }

    /// Open and recover, leaving the unit words of rolled-back transactions open: the caller
    /// undoes their namespace intents, then calls [`close_recovered_units`](Self::close_recovered_units).
    pub fn open_deferred(
        region: R,
        backing: B,
        config: CacheConfig,
    ) -> Result<(Self, RecoveryReport)> {
        let sb = Superblock::read_from(&region)?;
        let cache = Self::assemble(region, sb, backing, config);
        let report = cache.recover()?;
        Ok((cache, report))
    }

    fn assemble(region: R, sb: Superblock, backing: B, config: CacheConfig) -> Self {
        let g = sb.geometry();
        let stride = StrideTable::with_min(config.stride_fixed, config.stride_min);
        Cache {
            slot_locks: (0..g.slots()).map(|_| Mutex::new(())).collect(),
            files: Mutex::new(Files::new(g.files_max(), stride)),
            next_stamp: AtomicU64::new(1),
            counters: Counters::default(),
            dirty: Mutex::new(BTreeSet::new()),
            shown: Mutex::new(std::collections::HashMap::new()),
            flush_error: Mutex::new(None),
            open_units: Mutex::new(HashSet::new()),
            free_units: Mutex::new((0..g.units_max()).rev().collect()),
            free_intents: Mutex::new((0..g.intents_max()).rev().collect()),
            region,
            sb,
            backing,
            config,
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.sb.geometry()
    }
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }
    pub fn region(&self) -> &R {
        &self.region
    }
    pub fn backing(&self) -> &B {
        &self.backing
    }
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Named counters, with the pool's occupancy.
    pub fn stats(&self) -> Vec<(String, u64)> {
        let mut out = self.counters.named();
        out.push(("slots".into(), self.geometry().slots()));
        out.push(("dirty_chunks_max".into(), self.dirty.lock().len() as u64));
        out.push(("files".into(), self.files.lock().count()));
        out.push((
            "flush_error_pending".into(),
            u64::from(self.flush_error.lock().is_some()),
        ));
        out
    }

    /// The last home write-back error not yet cleared by a successful flush.
    pub fn flush_error(&self) -> Option<String> {
        self.flush_error.lock().clone()
    }

    /// Whether `stamp` belongs to an open transaction.
    pub(crate) fn is_open(&self, stamp: u64) -> bool {
        self.open_units.lock().contains(&stamp)
    }

    fn slot_of(&self, key: u64, index: u64) -> u64 {
        key.wrapping_add(index) % self.geometry().slots()
    }

    fn lock_slot(&self, slot: u64) -> MutexGuard<'_, ()> {
        match self.slot_locks.get(slot as usize) {
            Some(lock) => lock.lock(),
            None => panic!("cache: slot {slot} out of range"),
        }
    }

    /// The tag of `chunk`; a tag that does not decode is corruption.
    fn tag(&self, chunk: u64) -> Result<Tag> {
        let at = self.geometry().tag_at(chunk);
        let mut b = [0u8; TAG_LEN as usize];
        self.region.read(at, &mut b);
        Tag::decode(&b).map_err(|what| Error::corrupt(format!("cache tag {chunk}: {what}"), at))
    }

    fn pair(&self, slot: u64) -> Result<Pair> {
        Ok(Pair::new(
            slot,
            [self.tag(slot * 2)?, self.tag(slot * 2 + 1)?],
        ))
    }

    /// Store word 0 (key and status) of `chunk`'s tag and persist it.
    fn set_status(&self, chunk: u64, tag: &Tag) {
        let at = self.geometry().tag_at(chunk);
        self.region.store_u64(at, tag.word0());
        // persist: a status flip of the seed's cases, one atomic 8-byte store.
        self.region.persist(at, 8);
    }

    /// Write a whole new tag: the body with V = 0, then word 0 (same cache line, persisted
    /// in store order), then persist.
    fn put_tag(&self, chunk: u64, tag: &Tag) {
        let at = self.geometry().tag_at(chunk);
        let body = Tag {
            status: crate::format::Status::default(),
            ..*tag
        };
        self.region.write(at, &body.encode());
        self.region.store_u64(at, tag.word0());
        // persist: the tag is durable after the chunk data it validates (fenced before).
        self.region.persist(at, TAG_LEN);
    }

    fn next_key_word(&self) -> u64 {
        self.region.load_u64(NEXT_KEY_AT)
    }

    fn record_error(&self, e: &Error) {
        Counters::bump(&self.counters.flush_errors);
        *self.flush_error.lock() = Some(e.to_string());
    }
}

impl<R: Region, B: Backing> Cache<R, B> {
    /// Every cached file as (key, home id).
    pub fn file_list(&self) -> Vec<(u64, u64)> {
        let files = self.files.lock();
        files
            .keys()
            .into_iter()
            .filter_map(|k| files.get(k).map(|f| (k, f.id)))
            .collect()
    }

    /// Check tags against records and home lengths (read-only).
    pub fn fsck(&self) -> Result<store::FsckReport> {
        let mut report = store::FsckReport::default();
        let g = self.geometry();
        let lens: std::collections::HashMap<u64, u64> = self
            .file_list()
            .into_iter()
            .filter_map(|(k, _)| self.len(k).ok().map(|l| (k, l)))
            .collect();
        let mut valid = 0;
        for slot in 0..g.slots() {
            let pair = match self.pair(slot) {
                Ok(p) => p,
                Err(e) => {
                    report.problem(e.to_string(), format!("slot {slot}"));
                    continue;
                }
            };
            for side in 0..2 {
                let t = *pair.tag(side);
                if !t.valid() {
                    continue;
                }
                valid += 1;
                let at = format!("chunk {}", pair.chunk(side));
                match lens.get(&t.key) {
                    None => report.problem(format!("valid chunk of unknown key {}", t.key), at),
                    Some(&len) if t.index >= len.div_ceil(crate::format::CHUNK_SIZE) => {
                        report.problem(format!("chunk {} past the length {len}", t.index), at)
                    }
                    Some(_) => {}
                }
                if t.not_complete() {
                    report.problem(
                        "not-complete bit set at rest",
                        format!("chunk {}", pair.chunk(side)),
                    );
                }
            }
            if pair.tag(0).valid()
                && pair.tag(1).holds(pair.tag(0).key, pair.tag(0).index)
                && !self.is_open(pair.tag(0).stamp)
                && !self.is_open(pair.tag(1).stamp)
            {
                report.problem(
                    "two valid copies of one chunk at rest",
                    format!("slot {slot}"),
                );
            }
        }
        let conflicts = self.home_conflicts()?;
        for (key, id) in self.file_list() {
            if conflicts.iter().any(|c| c.key == key) {
                continue;
            }
            if let (Ok(home), Some(&len)) = (self.backing.len(id), lens.get(&key)) {
                if home > len {
                    report.problem(
                        format!("home file ({home} bytes) longer than {len}"),
                        format!("key {key}"),
                    );
                }
            }
        }
        for c in &conflicts {
            let name = self.backing.path_hint(c.id);
            report.problem(
                format!("{}; {}", c.describe(name.as_deref()), home_state::CHOICES),
                format!("key {}", c.key),
            );
        }
        match self.live_intents() {
            Ok(live) => {
                for (slot, stamp, _) in &live {
                    if !self.is_open(*stamp) {
                        report.problem(
                            "namespace intent of no open transaction at rest",
                            format!("intent {slot}"),
                        );
                    }
                }
                report.checked.push(("intents".into(), live.len() as u64));
            }
            Err(e) => report.problem(e.to_string(), "intents"),
        }
        report.checked.push(("tags".into(), g.chunks()));
        report.checked.push(("valid chunks".into(), valid));
        report.checked.push(("files".into(), lens.len() as u64));
        Ok(report)
    }
}
