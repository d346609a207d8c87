//! File data through the journal: writes and truncations in a transaction, an O_ATOMIC
//! handle's shadow, or an internal transaction; reads as the handle sees the file.
//!
//! Growing a file (a write past its end, set_len) first writes zeros over the range that
//! may hold stale bytes (a home file or journal version left by a truncation, an aborted
//! append, a freed inode): up to the file's high-water mark, past which the home file is
//! shorter and the journal holds nothing.

use super::namespace::{Body, Inner, Node, Shadow};
use super::punched::Punched;
use super::JournalStore;
use crate::layout::HOME_BLOCK_MAX;
use hostfs::HostFs;
use pmem::Region;
use store::{Error, Fallocate, Fh, Ino, Result, TxId};

/// Largest file (the journal header's 24-bit home block number).
pub const FILE_SIZE_MAX: u64 = (HOME_BLOCK_MAX + 1) * 4096;
const ZERO_CHUNK: usize = 64 << 10;

/// What a data change through a handle belongs to.
enum Target {
    Tx(TxId),
    Shadow,
    Internal,
}

impl<R: Region, H: HostFs> JournalStore<R, H> {
    /// Offset past which file `ino` holds no stale bytes.
    fn high_water(&self, s: &mut Inner, ino: Ino) -> Result<u64> {
        if let Some(&hw) = s.high_water.get(&ino) {
            return Ok(hw);
        }
        let id = ino as u32;
        let hw = self
            .journal
            .home()
            .len(id)
            .map_err(crate::JournalError::Host)?
            .max(self.journal.journaled_end(id));
        s.high_water.insert(ino, hw);
        Ok(hw)
    }

    /// Bytes up to `end` were written: the high-water mark covers them (computed first from
    /// the media, so that a write below the old mark never lowers it).
    fn raise_high_water(&self, s: &mut Inner, ino: Ino, end: u64) -> Result<()> {
        let hw = self.high_water(s, ino)?.max(end);
        s.high_water.insert(ino, hw);
        Ok(())
    }

    /// Write zeros over [from, to) where stale bytes may lie.
    fn zero_fill(
        &self,
        s: &mut Inner,
        core: &mut crate::Tx,
        ino: Ino,
        from: u64,
        to: u64,
        durable: Option<u64>,
    ) -> Result<()> {
        let end = to.min(self.high_water(s, ino)?);
        let zeros = vec![0u8; ZERO_CHUNK];
        let mut at = from;
        while at < end {
            let n = (end - at).min(ZERO_CHUNK as u64) as usize;
            self.journal
                .write(core, ino as u32, at, &zeros[..n], durable)?;
            at += n as u64;
        }
        Ok(())
    }

    /// Which transaction a data change through `fh` joins; checks mode and ownership.
    fn target(s: &Inner, fh: Fh, bytes: bool) -> Result<(Ino, Target, bool)> {
        let h = s.handle(fh)?;
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let (ino, atomic, append) = (h.ino, h.atomic, h.flags.append);
        s.file_node(ino)?;
        let tx = s.data_tx(h);
        if bytes {
            s.check_owner(&[ino], tx)?;
        }
        let target = match tx {
            Some(t) => Target::Tx(t),
            None if atomic => Target::Shadow,
            None => Target::Internal,
        };
        Ok((ino, target, append))
    }

    /// Apply a change (`size` -> new size) to file `ino` in the core transaction `core`.
    fn capacity_check(&self, s: &Inner, ino: Ino, new_size: u64) -> Result<()> {
        let old = s.node(ino)?.blocks();
        let new = new_size.div_ceil(4096);
        let capacity = self.config.capacity_bytes / 4096;
        if new > old && s.used_blocks - old + new > capacity {
            return Err(Error::NoSpace(format!("inode {ino}: {new_size} bytes")));
        }
        Ok(())
    }

    /// Write `data` at `off` (at the end for append handles).
    pub(super) fn write_data(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut s = self.lock_open()?;
        let (ino, target, append) = Self::target(&s, fh, !data.is_empty())?;
        let change = |size: u64| -> Result<(u64, u64)> {
            let off = if append { size } else { off };
            let end = off
                .checked_add(data.len() as u64)
                .filter(|&e| e <= FILE_SIZE_MAX)
                .ok_or_else(|| Error::FileTooLarge(format!("write at {off}")))?;
            Ok((off, end))
        };
        if data.is_empty() {
            return Ok(0);
        }
        match target {
            Target::Shadow => {
                let size = match s.shadows.get(&ino) {
                    Some(sh) => sh.size,
                    None => s.node(ino)?.meta.size,
                };
                let (off, end) = change(size)?;
                let shadow = self.shadow_of(&mut s, fh)?;
                let r = self.shadow_write(&mut s, ino, shadow, (off, end), data);
                r.map(|_| data.len())
            }
            Target::Tx(t) => {
                let size = s.node(ino)?.meta.size;
                let (off, end) = change(size)?;
                self.tx_write(&mut s, t, ino, off, end, data)
                    .map(|_| data.len())
            }
            Target::Internal => {
                let size = s.node(ino)?.meta.size;
                let (off, end) = change(size)?;
                let t = s.begin();
                let r = self.tx_write(&mut s, t, ino, off, end, data);
                self.finish_internal(&mut s, t, r).map(|_| data.len())
            }
        }
    }

    /// Commit an internal transaction after `r` succeeded, else roll it back.
    pub(super) fn finish_internal(&self, s: &mut Inner, t: TxId, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => self.commit(s, t),
            Err(e) => {
                if let Some(dead) = s.txs.remove(&t.0) {
                    s.roll_back(dead);
                }
                Err(e)
            }
        }
    }

    /// A write in transaction `t`.
    fn tx_write(
        &self,
        s: &mut Inner,
        t: TxId,
        ino: Ino,
        off: u64,
        end: u64,
        data: &[u8],
    ) -> Result<()> {
        let size = s.node(ino)?.meta.size;
        self.capacity_check(s, ino, size.max(end))?;
        s.save(t, ino)?;
        let durable = Some(s.durable.get(&ino).copied().unwrap_or(0));
        let mut core = std::mem::take(&mut s.tx_mut(t)?.core);
        let mut r = Ok(());
        if off > size {
            r = self.zero_fill(s, &mut core, ino, size, off, durable);
        }
        if r.is_ok() {
            r = self
                .journal
                .write(&mut core, ino as u32, off, data, durable)
                .map_err(Error::from);
        }
        s.tx_mut(t)?.core = core;
        r?;
        self.raise_high_water(s, ino, end)?;
        change_punched(s, ino, |p| p.fill(off, end))?;
        self.set_size(s, ino, size.max(end))
    }

    /// Change the size (and times) of file `ino`, keeping the block count right.
    fn set_size(&self, s: &mut Inner, ino: Ino, size: u64) -> Result<()> {
        let now = store::now_ns();
        change_node(s, ino, |node| {
            node.meta.size = size;
            node.meta.mtime = now;
            node.meta.ctime = now;
            if let Body::File { punched } = &mut node.body {
                punched.cut(size);
            }
        })
    }

    /// The O_ATOMIC shadow of the file of `fh` (taken out; the caller puts it back), or a
    /// new one.
    fn shadow_of(&self, s: &mut Inner, fh: Fh) -> Result<Shadow> {
        let ino = s.handle(fh)?.ino;
        let size = s.node(ino)?.meta.size;
        Ok(s.shadows.remove(&ino).unwrap_or(Shadow {
            core: crate::Tx::new(),
            size,
        }))
    }

    /// A write to an O_ATOMIC handle's shadow (journal only: nothing reaches the home file
    /// before the fsync commits it).
    fn shadow_write(
        &self,
        s: &mut Inner,
        ino: Ino,
        mut shadow: Shadow,
        (off, end): (u64, u64),
        data: &[u8],
    ) -> Result<()> {
        let mut r = self.capacity_check(s, ino, shadow.size.max(end));
        if r.is_ok() && off > shadow.size {
            r = self.zero_fill(s, &mut shadow.core, ino, shadow.size, off, None);
        }
        if r.is_ok() {
            r = self
                .journal
                .write(&mut shadow.core, ino as u32, off, data, None)
                .map_err(Error::from);
        }
        if r.is_ok() {
            r = self.raise_high_water(s, ino, end);
            shadow.size = shadow.size.max(end);
        }
        s.shadows.insert(ino, shadow);
        r
    }

    /// Truncate or extend (zeros) the file of `fh`.
    pub(super) fn set_len_data(&self, fh: Fh, len: u64) -> Result<()> {
        let mut s = self.lock_open()?;
        let (ino, target, _) = Self::target(&s, fh, true)?;
        if len > FILE_SIZE_MAX {
            return Err(Error::FileTooLarge(format!("length {len}")));
        }
        match target {
            Target::Shadow => {
                let mut shadow = self.shadow_of(&mut s, fh)?;
                let mut r = self.capacity_check(&s, ino, len);
                if r.is_ok() && len > shadow.size {
                    r = self.zero_fill(&mut s, &mut shadow.core, ino, shadow.size, len, None);
                }
                if r.is_ok() {
                    shadow.size = len;
                }
                s.shadows.insert(ino, shadow);
                r
            }
            Target::Tx(t) => self.tx_set_len(&mut s, t, ino, len),
            Target::Internal => {
                let t = s.begin();
                let r = self.tx_set_len(&mut s, t, ino, len);
                self.finish_internal(&mut s, t, r)
            }
        }
    }

    fn tx_set_len(&self, s: &mut Inner, t: TxId, ino: Ino, len: u64) -> Result<()> {
        let size = s.node(ino)?.meta.size;
        self.capacity_check(s, ino, len)?;
        s.save(t, ino)?;
        if len > size {
            let durable = Some(s.durable.get(&ino).copied().unwrap_or(0));
            let mut core = std::mem::take(&mut s.tx_mut(t)?.core);
            let r = self.zero_fill(s, &mut core, ino, size, len, durable);
            s.tx_mut(t)?.core = core;
            r?;
        }
        self.set_size(s, ino, len)
    }

    /// Read at `off` as the handle sees the file.
    pub(super) fn read_data(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let s = self.lock_open()?;
        let h = s.live_handle(fh)?;
        if !h.flags.read {
            return Err(Error::BadMode(fh.0, "reading"));
        }
        let ino = h.ino;
        let (size, core) = match s.shadows.get(&ino) {
            Some(sh) => (sh.size, Some(&sh.core)),
            None => {
                let size = s.file_node(ino)?.meta.size;
                let tx = s.data_tx(h).and_then(|t| s.txs.get(&t.0)).map(|t| &t.core);
                (size, tx)
            }
        };
        if off >= size {
            return Ok(0);
        }
        let n = buf.len().min((size - off) as usize);
        self.journal.read(core, ino as u32, off, &mut buf[..n])?;
        Ok(n)
    }

    /// Commit the O_ATOMIC shadows of `fhs` as one transaction.
    pub(super) fn install_shadows(&self, s: &mut Inner, fhs: &[Fh]) -> Result<()> {
        for fh in fhs {
            s.live_handle(*fh)?;
        }
        let t = s.begin();
        let mut r = Ok(());
        for fh in fhs {
            let ino = s.handle(*fh)?.ino;
            // Two handles of one file share its shadow: the first installs it.
            let Some(shadow) = s.shadows.remove(&ino) else {
                continue;
            };
            // The shadow keeps no ranges: every punched block counts as allocated again.
            r = s
                .save(t, ino)
                .and_then(|_| change_punched(s, ino, |p| *p = Punched::default()))
                .and_then(|_| self.set_size(s, ino, shadow.size));
            if r.is_err() {
                break;
            }
            s.tx_mut(t)?.core.absorb(shadow.core);
        }
        self.finish_internal(s, t, r)
    }
}

/// Change node `ino` by `f`, keeping `allocated` and the block count right.
fn change_node(s: &mut Inner, ino: Ino, f: impl FnOnce(&mut Node)) -> Result<()> {
    let node = s.node_mut(ino)?;
    let before = node.blocks();
    f(node);
    node.refresh_allocated();
    let after = node.blocks();
    s.used_blocks = s.used_blocks - before + after;
    Ok(())
}

/// Change the punched block ranges of file `ino` (nothing for another kind).
fn change_punched(s: &mut Inner, ino: Ino, f: impl FnOnce(&mut Punched)) -> Result<()> {
    change_node(s, ino, |node| {
        if let Body::File { punched } = &mut node.body {
            f(punched);
        }
    })
}

/// What a fallocate does to a file of `size` bytes, as the reference model: storage past the
/// end of file is never kept, so a KEEP_SIZE range is cut at the size.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// The size after it.
    new_size: u64,
    /// The range its storage change covers (`[off, limit)`).
    limit: u64,
    /// Bytes below the old size that become zeros: `[off, zero_end)` (punch, zero range).
    zero_end: u64,
}

impl Plan {
    fn of(op: Fallocate, off: u64, end: u64, size: u64) -> Plan {
        let (keep, grows) = match op {
            Fallocate::Allocate { keep_size } | Fallocate::ZeroRange { keep_size } => {
                (keep_size, !keep_size && end > size)
            }
            Fallocate::PunchHole => (true, false),
        };
        let limit = if keep { end.min(size) } else { end };
        let zero_end = match op {
            Fallocate::Allocate { .. } => off,
            _ => limit.min(size).max(off),
        };
        Plan {
            new_size: if grows { end } else { size },
            limit: limit.max(off),
            zero_end,
        }
    }
}

impl<R: Region, H: HostFs> JournalStore<R, H> {
    /// fallocate through `fh`. The content change is the write path's: zeros journaled over
    /// the punched or zeroed bytes below the size, and a growth zero-filled as set_len does,
    /// in the handle's transaction, its O_ATOMIC shadow or an internal transaction, so it is
    /// atomic, durable and undone like a write. The storage change is accounting only
    /// ([`Punched`]): the home file keeps its blocks (the checkpoint writes the zeros home).
    pub(super) fn fallocate_data(&self, fh: Fh, op: Fallocate, off: u64, len: u64) -> Result<()> {
        let mut s = self.lock_open()?;
        s.handle(fh)?;
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate of 0 bytes".into()));
        }
        let (ino, target, _) = Self::target(&s, fh, true)?;
        let end = off
            .checked_add(len)
            .filter(|&e| e <= FILE_SIZE_MAX)
            .ok_or_else(|| Error::FileTooLarge(format!("fallocate to {off} + {len}")))?;
        match target {
            Target::Shadow => {
                let mut shadow = self.shadow_of(&mut s, fh)?;
                let plan = Plan::of(op, off, end, shadow.size);
                let r = self.capacity_check(&s, ino, plan.new_size).and_then(|_| {
                    self.zero_plan(&mut s, &mut shadow.core, ino, shadow.size, off, plan, None)
                });
                if r.is_ok() {
                    shadow.size = plan.new_size;
                }
                s.shadows.insert(ino, shadow);
                r
            }
            Target::Tx(t) => self.tx_fallocate(&mut s, t, ino, op, (off, end)),
            Target::Internal => {
                let t = s.begin();
                let r = self.tx_fallocate(&mut s, t, ino, op, (off, end));
                self.finish_internal(&mut s, t, r)
            }
        }
    }

    /// The zeros of `plan` on a file of `size` bytes, into `core`.
    #[allow(clippy::too_many_arguments)]
    fn zero_plan(
        &self,
        s: &mut Inner,
        core: &mut crate::Tx,
        ino: Ino,
        size: u64,
        off: u64,
        plan: Plan,
        durable: Option<u64>,
    ) -> Result<()> {
        let zeros = vec![0u8; ZERO_CHUNK];
        let mut at = off;
        while at < plan.zero_end {
            let n = (plan.zero_end - at).min(ZERO_CHUNK as u64) as usize;
            self.journal
                .write(core, ino as u32, at, &zeros[..n], durable)?;
            at += n as u64;
        }
        if plan.new_size > size {
            self.zero_fill(s, core, ino, size, plan.new_size, durable)?;
        }
        Ok(())
    }

    fn tx_fallocate(
        &self,
        s: &mut Inner,
        t: TxId,
        ino: Ino,
        op: Fallocate,
        (off, end): (u64, u64),
    ) -> Result<()> {
        let size = s.node(ino)?.meta.size;
        let plan = Plan::of(op, off, end, size);
        self.capacity_check(s, ino, plan.new_size)?;
        s.save(t, ino)?;
        let durable = Some(s.durable.get(&ino).copied().unwrap_or(0));
        let mut core = std::mem::take(&mut s.tx_mut(t)?.core);
        let r = self.zero_plan(s, &mut core, ino, size, off, plan, durable);
        s.tx_mut(t)?.core = core;
        r?;
        let recorded = s.format == super::meta_log::MetaFormat::V2;
        change_punched(s, ino, |p| match op {
            // A version 1 log cannot record punched blocks: they stay counted.
            Fallocate::PunchHole if recorded => {
                p.punch(off, plan.zero_end);
            }
            Fallocate::PunchHole => {}
            _ => p.fill(off, plan.limit),
        })?;
        self.set_size(s, ino, plan.new_size)
    }
}
