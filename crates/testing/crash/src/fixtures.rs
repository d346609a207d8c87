//! Fixtures of the harness's own tests — **not engines**. A check that cannot fail is
//! worthless, so the harness is run against stores whose crash behaviour is known:
//!
//! - [`Flaw::None`]: a correct shadow-copy store. The whole durable state (the
//!   [`ModelStore`]'s crash state) is serialised, with a checksum, into the inactive one of two
//!   slots, persisted, and then an 8-byte commit word naming the slot is stored and persisted.
//!   The harness must report zero violations.
//! - [`Flaw::InPlace`]: writes the state in place into a single slot (no shadow, no commit
//!   word): a crash tears it. The harness must report violations.
//! - [`Flaw::NoFenceBeforeCommit`]: flushes the new slot but forgets the fence before the
//!   commit word, so the word may persist before the data it names.
//! - [`Flaw::LateNoFenceBeforeCommit`]: the same, late in a workload only.
//! - [`Flaw::NtSealWithoutChecksum`]: a commit record sealed in its last word, written by a
//!   non-temporal line store, trusted without a checksum.
//! - [`Flaw::ChecksumFallback`]: correct, relying on its checksum to detect a torn slot;
//!   [`Flaw::SkipsChecksum`]: the same without verifying the checksum.
//! - [`Flaw::LosesTimes`]: claims durable file times, loses them at recovery.
//! - [`Flaw::TimesAhead`]: claims file times logged with each unit, stamps them anew at
//!   recovery (later than every acknowledged time).
//! - [`Flaw::LazyCommit`]: correct protocol, but only one change in four is written (the
//!   others wait for a later one): calls return before their effect is durable.
//! - [`Flaw::TornRecovery`]: correct at run time; recovery rewrites the active slot in place.
//! - [`Flaw::DriftingRecovery`]: a second recovery of a recovered image loses a file.
//!
//! Each store keeps its live state in a [`ModelStore`] and persists after every mutating call
//! that changed the durable state.

use crate::CrashTarget;
use conformance::{snapshot, ModelStore, Node, Tree};
use pmem::{Region, SimRegion};
use std::any::Any;
use std::sync::{Arc, Mutex};
use store::{
    DirEntry, Error, Fh, FsckReport, Ino, Metadata, OpenFlags, Result, SetAttr, StatFs, Store,
    TxId, ROOT_INO,
};

/// The known defect of a fixture store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    None,
    InPlace,
    NoFenceBeforeCommit,
    LazyCommit,
    /// [`Flaw::NoFenceBeforeCommit`] from the 13th change on only: a budget spent on the
    /// first crash points of a workload misses it.
    LateNoFenceBeforeCommit,
    /// Commits with a 64-byte commit record written by one non-temporal line store and a
    /// fence: each slot's length in a word of its own, the commit word (the seal) last,
    /// and recovery trusts the length of a sealed record without the slot's checksum. Correct
    /// if a line persisted in store order; write-combining keeps no order, so the seal may
    /// persist with the old length. Only a simulator that tears non-temporal lines word by
    /// word catches it.
    NtSealWithoutChecksum,
    /// A correct variant that relies on its checksum: the slot and the commit word are
    /// persisted by one fence, and recovery verifies the named slot's checksum and falls back
    /// to the other slot when it fails. Zero violations.
    ChecksumFallback,
    /// [`Flaw::ChecksumFallback`] whose recovery does not verify the checksum: a torn slot
    /// is accepted. Only torn images with the new commit word catch it.
    SkipsChecksum,
    /// Correct in names and bytes, but claims durable times and loses them: recovery sets
    /// every file's mtime back to the epoch. Only an oracle comparing times catches it.
    LosesTimes,
    /// Correct in names and bytes, but claims that file times are part of each unit's
    /// atomicity (as the pool's are) while persisting none: recovery stamps every file with
    /// the time of the recovery, later than every acknowledged time — as an unfinished unit's
    /// times left in place by a recovery that did not undo them would be. An oracle requiring
    /// times at least the acknowledged ones passes it; only comparing them exactly catches it.
    TimesAhead,
    /// Correct while running, but recovery rewrites the active slot in place: a crash during
    /// recovery tears the only good copy. Only crashing the recovery itself can catch it.
    TornRecovery,
    /// Recovery is not idempotent: it counts recoveries in a word of its own and, from the
    /// second one on, loses the last file (as a replay applied twice would). Only recovering
    /// a recovered image again can catch it.
    DriftingRecovery,
}

// Layout (little-endian):
//   [0, 8)            commit word: (sequence << 1) | active slot
//   [4096 + i*slot_len) slot i: [len u64][checksum u64][payload: len bytes]
// payload: entries of [kind u8 (0 dir, 1 file)][path len u32][path][data len u64][data]
// Slots start at 4096 so that the region is a whole number of pages (mapped pools).
const SLOTS_AT: u64 = 4096;
const SLOT_HEADER: u64 = 16;
/// Word counting recoveries, for [`Flaw::DriftingRecovery`] only.
const RECOVERY_COUNT_AT: u64 = 64;
/// The commit record of [`Flaw::NtSealWithoutChecksum`]: `[payload length of slot 0][of slot
/// 1][0; 5 words][commit word]`, one line. Rewriting it changes the new slot's length and the
/// commit word: in store order, a persisted commit word implies the length before it.
const RECORD_AT: u64 = 128;

fn checksum(bytes: &[u8]) -> u64 {
    // FNV-1a, 64 bits.
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn encode(tree: &Tree) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, node) in tree {
        let special;
        let (kind, data): (u8, &[u8]) = match node {
            Node::Dir => (0, &[]),
            Node::File(d) => (1, d),
            Node::Symlink(t) => (2, t),
            Node::Special { kind, rdev } => {
                special = [&[kind.code()][..], &rdev.to_le_bytes()].concat();
                (3, &special)
            }
            Node::Xattr(v) => (4, v),
        };
        out.push(kind);
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

fn take<'a>(bytes: &mut &'a [u8], n: usize, at: u64) -> Result<&'a [u8]> {
    if bytes.len() < n {
        return Err(Error::corrupt("fixture payload truncated", at));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn decode(mut bytes: &[u8]) -> Result<Tree> {
    let mut tree = Tree::new();
    while !bytes.is_empty() {
        let kind = take(&mut bytes, 1, 0)?[0];
        let plen = u32::from_le_bytes(
            take(&mut bytes, 4, 0)?
                .try_into()
                .map_err(|_| Error::corrupt("len", 0))?,
        );
        let path = take(&mut bytes, plen as usize, 0)?.to_vec();
        let dlen = u64::from_le_bytes(
            take(&mut bytes, 8, 0)?
                .try_into()
                .map_err(|_| Error::corrupt("len", 0))?,
        );
        let data = take(
            &mut bytes,
            usize::try_from(dlen).map_err(|_| Error::corrupt("len", 0))?,
            0,
        )?
        .to_vec();
        let node = match kind {
            0 => Node::Dir,
            1 => Node::File(data),
            2 => Node::Symlink(data),
            3 => special(&data)?,
            4 => Node::Xattr(data),
            _ => return Err(Error::corrupt("fixture entry kind", 0)),
        };
        tree.insert(path, node);
    }
    Ok(tree)
}

fn special(data: &[u8]) -> Result<Node> {
    let bad = || Error::corrupt("fixture special file", 0);
    let (&code, rdev) = data.split_first().ok_or_else(bad)?;
    let kind = store::FileKind::from_code(code)
        .filter(|k| k.is_special())
        .ok_or_else(bad)?;
    let rdev = u64::from_le_bytes(rdev.try_into().map_err(|_| bad())?);
    Ok(Node::Special { kind, rdev })
}

/// Build a model store holding `tree`.
fn build(tree: &Tree) -> Result<ModelStore> {
    let m = ModelStore::new();
    conformance::build_into(&m, tree)?;
    Ok(m)
}

struct Persisted {
    word: u64,
    last_checksum: Option<u64>,
    calls: u64,
}

/// A fixture store (see the module documentation).
pub struct ShadowStore<R: Region> {
    model: ModelStore,
    region: Arc<R>,
    flaw: Flaw,
    slot_len: u64,
    persisted: Mutex<Persisted>,
}

impl<R: Region> ShadowStore<R> {
    /// Format: an empty store persisted in slot 0 (with a correct protocol: formatting is not
    /// what the fixtures test).
    pub fn format(region: Arc<R>, flaw: Flaw, slot_len: u64) -> Result<Self> {
        check_len(region.len(), slot_len)?;
        let s = ShadowStore {
            model: ModelStore::new(),
            region,
            flaw,
            slot_len,
            persisted: Mutex::new(Persisted {
                word: 1,
                last_checksum: None,
                calls: 0,
            }),
        };
        let payload = encode(&snapshot(&s.model)?);
        s.write_slot(0, &payload);
        s.region
            .persist(SLOTS_AT, SLOT_HEADER + payload.len() as u64);
        if flaw == Flaw::NtSealWithoutChecksum {
            s.write_record(payload.len() as u64, 0);
        } else {
            s.region.store_u64(0, 0);
            // persist: the commit word names slot 0, which is durable since the fence above.
            s.region.persist(0, 8);
        }
        s.lock().word = 0;
        Ok(s)
    }

    /// Open (recover): read the slot the commit word names, check it, rebuild the state, and
    /// persist it again (so recovery has fences of its own to crash).
    pub fn open(region: Arc<R>, flaw: Flaw, slot_len: u64) -> Result<Self> {
        check_len(region.len(), slot_len)?;
        let sealed = flaw == Flaw::NtSealWithoutChecksum;
        let mut word = region.load_u64(if sealed { RECORD_AT + 56 } else { 0 });
        let mut slot = word & 1;
        let len_at = |slot: u64| {
            if sealed {
                RECORD_AT + slot * 8
            } else {
                SLOTS_AT + slot * slot_len
            }
        };
        // The flaws of NtSealWithoutChecksum and SkipsChecksum: the checksum is not verified.
        let verify = !sealed && flaw != Flaw::SkipsChecksum;
        let salted = matches!(flaw, Flaw::ChecksumFallback | Flaw::SkipsChecksum);
        let salt = if salted { word } else { 0 };
        let mut read = read_slot(region.as_ref(), slot, slot_len, len_at(slot), verify, salt);
        if read.is_err() && flaw == Flaw::ChecksumFallback && word > 0 {
            // The commit word and the slot it names were persisted by one fence: a slot that
            // fails its checksum was torn by a crash before that fence; the other slot holds
            // the state of the previous commit word.
            slot = 1 - slot;
            word = ((word >> 1).wrapping_sub(1) << 1) | slot;
            read = read_slot(region.as_ref(), slot, slot_len, len_at(slot), true, word);
        }
        let payload = read?;
        let base = SLOTS_AT + slot * slot_len;
        let mut tree = decode(&payload)?;
        if flaw == Flaw::DriftingRecovery {
            let recoveries = region.load_u64(RECOVERY_COUNT_AT);
            if recoveries > 0 {
                let last = tree
                    .iter()
                    .rev()
                    .find(|(_, n)| matches!(n, Node::File(_)))
                    .map(|(p, _)| p.clone());
                if let Some(last) = last {
                    tree.remove(&last); // the flaw
                }
            }
            region.store_u64(RECOVERY_COUNT_AT, recoveries + 1);
            // persist: the recovery count (used only by this flaw).
            region.persist(RECOVERY_COUNT_AT, 8);
        }
        let model = build(&tree)?;
        if flaw == Flaw::LosesTimes {
            lose_times(&model, &tree)?;
        }
        let s = ShadowStore {
            model,
            region,
            flaw,
            slot_len,
            persisted: Mutex::new(Persisted {
                word,
                last_checksum: None,
                calls: 0,
            }),
        };
        if flaw == Flaw::TornRecovery {
            // The flaw: rewrite the active slot in place (first its header with a zero length,
            // as a careless "reformat" would), then the payload again.
            s.region.store_u64(base, 0);
            s.region.persist(base, 8);
            s.write_slot(slot, &payload);
            s.region.persist(base, SLOT_HEADER + payload.len() as u64);
            s.lock().last_checksum = Some(checksum(&payload));
        } else {
            s.persist()?;
        }
        Ok(s)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Persisted> {
        self.persisted.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write_slot(&self, slot: u64, payload: &[u8]) {
        self.write_slot_salted(slot, payload, 0)
    }

    /// A slot whose checksum also covers `salt` (the commit word that will name it).
    fn write_slot_salted(&self, slot: u64, payload: &[u8], salt: u64) {
        let base = SLOTS_AT + slot * self.slot_len;
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        header[8..].copy_from_slice(&(checksum(payload) ^ salt_of(salt)).to_le_bytes());
        self.region.write(base, &header);
        self.region.write(base + SLOT_HEADER, payload);
    }

    /// The commit record of [`Flaw::NtSealWithoutChecksum`], one non-temporal line store.
    fn write_record(&self, len: u64, word: u64) {
        let mut line = [0u8; 64];
        self.region.read(RECORD_AT, &mut line);
        let at = (word & 1) as usize * 8;
        line[at..at + 8].copy_from_slice(&len.to_le_bytes());
        line[56..].copy_from_slice(&word.to_le_bytes());
        self.region.write_line_nt(RECORD_AT, &line);
        // persist: the record (length, then the seal in its last word) — the flaw: its words
        // may persist in any order.
        self.region.fence();
    }

    /// Persist the model's durable state with this fixture's protocol (and flaw).
    fn persist(&self) -> Result<()> {
        let mut p = self.lock();
        let payload = encode(&snapshot(&self.model.crash())?);
        if payload.len() as u64 > self.slot_len - SLOT_HEADER {
            return Err(Error::NoSpace(format!(
                "fixture slot of {} bytes",
                self.slot_len
            )));
        }
        let sum = checksum(&payload);
        if p.last_checksum == Some(sum) {
            return Ok(());
        }
        p.calls += 1;
        if self.flaw == Flaw::LazyCommit && p.calls % 4 != 1 {
            return Ok(()); // the flaw: this change is acknowledged but never written
        }
        let len = SLOT_HEADER + payload.len() as u64;
        match self.flaw {
            Flaw::InPlace => {
                self.write_slot(0, &payload);
                // persist (flawed): slot 0 is overwritten in place; a crash before this fence
                // completes leaves it torn.
                self.region.persist(SLOTS_AT, len);
            }
            Flaw::None
            | Flaw::LazyCommit
            | Flaw::NoFenceBeforeCommit
            | Flaw::LateNoFenceBeforeCommit
            | Flaw::NtSealWithoutChecksum
            | Flaw::LosesTimes
            | Flaw::TimesAhead
            | Flaw::ChecksumFallback
            | Flaw::SkipsChecksum
            | Flaw::TornRecovery
            | Flaw::DriftingRecovery => {
                let slot = 1 - (p.word & 1);
                if matches!(self.flaw, Flaw::ChecksumFallback | Flaw::SkipsChecksum) {
                    let word = ((p.word >> 1) + 1) << 1 | slot;
                    // The checksum covers the commit word: an older content of the slot
                    // cannot pass for the one this word names.
                    self.write_slot_salted(slot, &payload, word);
                    self.region.flush(SLOTS_AT + slot * self.slot_len, len);
                    self.region.store_u64(0, word);
                    self.region.flush(0, 8);
                    // persist: the slot and the commit word together; recovery verifies the
                    // named slot's checksum and falls back to the other slot if it is torn.
                    self.region.fence();
                    p.word = word;
                    p.last_checksum = Some(sum);
                    return Ok(());
                }
                self.write_slot(slot, &payload);
                let late = self.flaw == Flaw::LateNoFenceBeforeCommit && p.calls > 12;
                if self.flaw == Flaw::NoFenceBeforeCommit || late {
                    self.region.flush(SLOTS_AT + slot * self.slot_len, len); // the flaw: no fence
                } else {
                    // persist: the new slot is durable before the commit word can name it.
                    self.region.persist(SLOTS_AT + slot * self.slot_len, len);
                }
                let word = ((p.word >> 1) + 1) << 1 | slot;
                if self.flaw == Flaw::NtSealWithoutChecksum {
                    self.write_record(payload.len() as u64, word);
                } else {
                    self.region.store_u64(0, word);
                    // persist: the commit word (8-byte atomic store) switches to the new slot.
                    self.region.persist(0, 8);
                }
                p.word = word;
            }
        }
        p.last_checksum = Some(sum);
        Ok(())
    }

    fn after<T>(&self, r: Result<T>) -> Result<T> {
        let v = r?;
        self.persist()?;
        Ok(v)
    }
}

/// What a commit word adds to the checksum of the slot it names (0 adds nothing).
fn salt_of(word: u64) -> u64 {
    word.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The flaw of [`Flaw::LosesTimes`]: every file's mtime back to the epoch.
fn lose_times(model: &ModelStore, tree: &Tree) -> Result<()> {
    for (path, node) in tree {
        if matches!(node, Node::File(_)) {
            let ino = store::path::resolve(model, path)?.ino;
            let attr = SetAttr {
                mtime: Some(1),
                ..Default::default()
            };
            model.setattr(ino, &attr, None)?;
        }
    }
    Ok(())
}

/// The payload of `slot` (its length read at `len_at`), its checksum verified if `verify`.
fn read_slot<R: Region + ?Sized>(
    region: &R,
    slot: u64,
    slot_len: u64,
    len_at: u64,
    verify: bool,
    salt: u64,
) -> Result<Vec<u8>> {
    let base = SLOTS_AT + slot * slot_len;
    let len = region.load_u64(len_at);
    if len > slot_len - SLOT_HEADER {
        return Err(Error::corrupt(format!("slot length {len}"), base));
    }
    let sum = region.load_u64(base + 8);
    let mut payload = vec![0u8; len as usize];
    region.read(base + SLOT_HEADER, &mut payload);
    if verify && checksum(&payload) ^ salt_of(salt) != sum {
        return Err(Error::corrupt("slot checksum mismatch", base));
    }
    Ok(payload)
}

fn check_len(region_len: u64, slot_len: u64) -> Result<()> {
    if slot_len <= SLOT_HEADER || region_len < SLOTS_AT + 2 * slot_len {
        return Err(Error::InvalidArgument(format!(
            "region of {region_len} bytes too small for slots of {slot_len}"
        )));
    }
    Ok(())
}

impl<R: Region> Store for ShadowStore<R> {
    fn engine_name(&self) -> String {
        fixture_name(self.flaw)
    }
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Metadata> {
        self.model.lookup(parent, name)
    }
    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.model.getattr(ino)
    }
    fn setattr(&self, ino: Ino, attr: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.after(self.model.setattr(ino, attr, tx))
    }
    fn create(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.after(self.model.create(parent, name, perm, tx))
    }
    fn mkdir(&self, parent: Ino, name: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.after(self.model.mkdir(parent, name, perm, tx))
    }
    fn unlink(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.after(self.model.unlink(parent, name, tx))
    }
    fn rmdir(&self, parent: Ino, name: &[u8], tx: Option<TxId>) -> Result<()> {
        self.after(self.model.rmdir(parent, name, tx))
    }
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<()> {
        self.after(self.model.rename(parent, name, new_parent, new_name, tx))
    }
    fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
        tx: Option<TxId>,
    ) -> Result<Metadata> {
        self.after(self.model.link(ino, new_parent, new_name, tx))
    }
    fn read_dir(&self, ino: Ino) -> Result<Vec<DirEntry>> {
        self.model.read_dir(ino)
    }
    fn open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.model.open(ino, flags)
    }
    fn release(&self, fh: Fh) -> Result<()> {
        self.after(self.model.release(fh))
    }
    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.model.read(fh, off, buf)
    }
    fn write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.after(self.model.write(fh, off, data))
    }
    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.after(self.model.set_len(fh, len))
    }
    fn fsync(&self, fh: Fh, datasync: bool) -> Result<()> {
        self.after(self.model.fsync(fh, datasync))
    }
    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        self.model.fstat(fh)
    }
    fn set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        self.after(self.model.set_atomic(fh, atomic))
    }
    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        self.after(self.model.syncv(fhs))
    }
    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        self.after(self.model.abortv(fhs))
    }
    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.model.tx_begin(files)
    }
    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        self.model.tx_add(tx, fh)
    }
    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.after(self.model.tx_commit(tx))
    }
    fn tx_abort(&self, tx: TxId) -> Result<()> {
        self.after(self.model.tx_abort(tx))
    }
    fn statfs(&self) -> Result<StatFs> {
        self.model.statfs()
    }
    fn stats(&self) -> Vec<(String, u64)> {
        self.model.stats()
    }
    fn fsck(&self) -> Result<FsckReport> {
        let mut report = self.model.fsck()?;
        if self.model.getattr(ROOT_INO).is_err() {
            report.problem("no root", "fixture");
        }
        Ok(report)
    }
    fn unmount(&self) -> Result<()> {
        // Flushes whatever LazyCommit skipped: a clean unmount is durable for every fixture.
        self.lock().last_checksum = None;
        if self.flaw == Flaw::LazyCommit {
            self.lock().calls = 0; // the next persist is call 1: written
        }
        self.persist()?;
        self.model.unmount()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Name of a fixture by its flaw.
pub fn fixture_name(flaw: Flaw) -> String {
    match flaw {
        Flaw::None => "fixture-shadow",
        Flaw::InPlace => "fixture-inplace",
        Flaw::NoFenceBeforeCommit => "fixture-nofence",
        Flaw::LateNoFenceBeforeCommit => "fixture-latenofence",
        Flaw::NtSealWithoutChecksum => "fixture-ntseal",
        Flaw::LosesTimes => "fixture-losestimes",
        Flaw::TimesAhead => "fixture-timesahead",
        Flaw::ChecksumFallback => "fixture-checksumfallback",
        Flaw::SkipsChecksum => "fixture-skipschecksum",
        Flaw::LazyCommit => "fixture-lazy",
        Flaw::TornRecovery => "fixture-tornrecovery",
        Flaw::DriftingRecovery => "fixture-driftingrecovery",
    }
    .into()
}

/// The fixture flaw named `name` (as printed by [`fixture_name`]).
pub fn flaw_by_name(name: &str) -> Option<Flaw> {
    [
        Flaw::None,
        Flaw::InPlace,
        Flaw::NoFenceBeforeCommit,
        Flaw::LateNoFenceBeforeCommit,
        Flaw::NtSealWithoutChecksum,
        Flaw::LosesTimes,
        Flaw::TimesAhead,
        Flaw::ChecksumFallback,
        Flaw::SkipsChecksum,
        Flaw::LazyCommit,
        Flaw::TornRecovery,
        Flaw::DriftingRecovery,
    ]
    .into_iter()
    .find(|&f| fixture_name(f) == name)
}

/// A fixture as a crash target on the simulator.
#[derive(Clone, Copy, Debug)]
pub struct ShadowTarget {
    pub flaw: Flaw,
    /// Bytes per slot (the region holds two).
    pub slot_len: u64,
}

impl ShadowTarget {
    pub fn new(flaw: Flaw) -> Self {
        ShadowTarget {
            flaw,
            slot_len: 256 << 10,
        }
    }
}

impl CrashTarget for ShadowTarget {
    fn name(&self) -> String {
        fixture_name(self.flaw)
    }
    /// The fixtures keep names and bytes only.
    fn posix_steps(&self) -> crate::workload::PosixSteps {
        crate::workload::PosixSteps::None
    }
    /// The fixtures persist names and bytes only and rebuild their state at recovery (new
    /// times): they do not claim durable times, except [`Flaw::LosesTimes`], which claims
    /// them and loses them, and [`Flaw::TimesAhead`], which claims them atomic.
    fn durable_times(&self) -> bool {
        matches!(self.flaw, Flaw::LosesTimes | Flaw::TimesAhead)
    }
    fn atomic_times(&self) -> bool {
        self.flaw == Flaw::TimesAhead
    }
    fn region_len(&self) -> u64 {
        SLOTS_AT + 2 * self.slot_len
    }
    fn format(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        Ok(Box::new(ShadowStore::format(
            region,
            self.flaw,
            self.slot_len,
        )?))
    }
    fn recover(&self, region: Arc<SimRegion>) -> Result<Box<dyn Store>> {
        Ok(Box::new(ShadowStore::open(
            region,
            self.flaw,
            self.slot_len,
        )?))
    }
}

impl crate::torture::KillTarget for ShadowTarget {
    fn name(&self) -> String {
        fixture_name(self.flaw)
    }
    /// The fixtures keep names and bytes only.
    fn posix_steps(&self) -> crate::workload::PosixSteps {
        crate::workload::PosixSteps::None
    }
    fn create_pool(&self, path: &std::path::Path) -> Result<Box<dyn Store>> {
        let region = pmem::MappedRegion::create(path, self.region_len()).map_err(pm_error)?;
        Ok(Box::new(ShadowStore::format(
            Arc::new(region),
            self.flaw,
            self.slot_len,
        )?))
    }
    fn open_pool(&self, path: &std::path::Path) -> Result<Box<dyn Store>> {
        let region = pmem::MappedRegion::open(path).map_err(pm_error)?;
        Ok(Box::new(ShadowStore::open(
            Arc::new(region),
            self.flaw,
            self.slot_len,
        )?))
    }
}

fn pm_error(e: pmem::PmError) -> Error {
    Error::Io {
        path: format!("{e}"),
        op: "map pool",
        source: std::io::Error::other(e.to_string()),
    }
}
