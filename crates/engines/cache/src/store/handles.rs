//! Open files: handles, reads, writes and lengths routed to the cache — alone (durable when
//! the call returns), in the file's transaction, or in its O_ATOMIC unit.

use super::{CacheStore, Handle, Tables};
use hostfs::HostFs;
use pmem::Region;
use std::sync::atomic::Ordering;
use store::{Error, Fh, FileKind, Ino, OpenFlags, Result};

/// Where a data change of a file goes.
pub(super) enum Route {
    Alone(u64),
    Tx(u64, u64),
    Atomic(u64, Ino),
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    pub(super) fn handle(t: &Tables, fh: Fh) -> Result<Handle> {
        let h = t
            .handles
            .get(&fh.0)
            .copied()
            .ok_or(Error::BadHandle(fh.0))?;
        if t.gone.contains(&h.ino) {
            return Err(Error::NotFound(format!(
                "inode {} (its transaction aborted)",
                h.ino
            )));
        }
        Ok(h)
    }

    fn key(t: &Tables, ino: Ino) -> Result<u64> {
        t.keys
            .get(&ino)
            .copied()
            .ok_or_else(|| Error::IsDir(format!("inode {ino}")))
    }

    pub(super) fn do_open(&self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        let mut t = self.t.lock();
        if t.gone.contains(&ino) || !(t.names.contains(ino) || t.keys.contains_key(&ino)) {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        if !t.keys.contains_key(&ino) {
            // Not a cached file: say what it is.
            return Err(match self.meta(&t, ino)?.kind {
                FileKind::Symlink => Error::SymlinkLoop(format!("inode {ino} is a symlink")),
                kind if kind.is_special() => Error::special_open(ino, kind),
                _ => Error::IsDir(format!("inode {ino}")),
            });
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        t.handles.insert(
            fh,
            Handle {
                ino,
                flags,
                atomic: flags.atomic,
            },
        );
        *t.open_count.entry(ino).or_default() += 1;
        Ok(Fh(fh))
    }

    pub(super) fn do_release(&self, fh: Fh) -> Result<()> {
        let mut t = self.t.lock();
        let h = t.handles.remove(&fh.0).ok_or(Error::BadHandle(fh.0))?;
        let others_atomic = t.handles.values().any(|o| o.ino == h.ino && o.atomic);
        if h.atomic && !others_atomic {
            if let Some(unit) = t.atomic_units.remove(&h.ino) {
                self.cache.abort(unit)?;
            }
        }
        let n = t.open_count.entry(h.ino).or_default();
        *n = n.saturating_sub(1);
        if *n == 0 {
            t.open_count.remove(&h.ino);
            t.gone.remove(&h.ino);
            if t.unnamed.contains(&h.ino) && Self::in_trash(&t, h.ino) {
                // (Named by an open transaction: its commit or abort decides.)
                t.unnamed.remove(&h.ino);
                self.delete_unnamed(&mut t, h.ino)?;
            } else if t.orphans.remove(&h.ino) {
                self.drop_file(&mut t, h.ino)?;
            }
        }
        Ok(())
    }

    pub(super) fn route(&self, t: &mut Tables, h: &Handle) -> Result<Route> {
        let key = Self::key(t, h.ino)?;
        if let Some(&tx) = t.bound.get(&h.ino) {
            return Ok(Route::Tx(tx, key));
        }
        if let Some(&creator) = t.created_by.get(&h.ino) {
            return Err(Error::FileInTransaction(creator));
        }
        if h.atomic || t.atomic_units.contains_key(&h.ino) {
            return Ok(Route::Atomic(key, h.ino));
        }
        Ok(Route::Alone(key))
    }

    /// Run `f` on the unit of a transaction or an O_ATOMIC file (begun at its first change).
    pub(super) fn in_unit<T>(
        &self,
        t: &mut Tables,
        route: &Route,
        f: impl FnOnce(&mut crate::Unit, u64) -> Result<T>,
    ) -> Result<T> {
        match *route {
            Route::Tx(tx, key) => {
                let state = t.txs.get_mut(&tx).ok_or(Error::NoSuchTransaction(tx))?;
                if state.unit.is_none() {
                    state.unit = Some(self.cache.begin()?);
                }
                match state.unit.as_mut() {
                    Some(unit) => f(unit, key),
                    None => Err(Error::NoSuchTransaction(tx)),
                }
            }
            Route::Atomic(key, ino) => {
                if let std::collections::hash_map::Entry::Vacant(e) = t.atomic_units.entry(ino) {
                    e.insert(self.cache.begin()?);
                }
                match t.atomic_units.get_mut(&ino) {
                    Some(unit) => f(unit, key),
                    None => Err(Error::BadHandle(ino)),
                }
            }
            Route::Alone(_) => unreachable!("in_unit of a lone write"),
        }
    }

    pub(super) fn do_read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let key = {
            let t = self.t.lock();
            let h = Self::handle(&t, fh)?;
            if !h.flags.read {
                return Err(Error::BadMode(fh.0, "reading"));
            }
            Self::key(&t, h.ino)?
        };
        self.cache.read(key, off, buf)
    }

    pub(super) fn do_write(&self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        let mut t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        if data.is_empty() {
            return Ok(0);
        }
        let route = self.route(&mut t, &h)?;
        let key = match route {
            Route::Alone(k) | Route::Tx(_, k) | Route::Atomic(k, _) => k,
        };
        let off = if h.flags.append {
            self.cache.len(key)?
        } else {
            off
        };
        match route {
            Route::Alone(key) => {
                drop(t);
                self.cache.write(key, off, data)?;
            }
            _ => self.in_unit(&mut t, &route, |u, key| {
                self.cache.write_in(u, key, off, data)
            })?,
        }
        Ok(data.len())
    }

    pub(super) fn do_set_len(&self, fh: Fh, len: u64) -> Result<()> {
        let mut t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if !h.flags.write {
            return Err(Error::BadMode(fh.0, "writing"));
        }
        let route = self.route(&mut t, &h)?;
        match route {
            Route::Alone(key) => {
                drop(t);
                self.cache.set_len(key, len)
            }
            _ => self.in_unit(&mut t, &route, |u, key| self.cache.set_len_in(u, key, len)),
        }
    }

    pub(super) fn do_fsync(&self, fh: Fh) -> Result<()> {
        let mut t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if h.atomic {
            if let Some(unit) = t.atomic_units.remove(&h.ino) {
                self.cache.commit(unit)?;
            }
            return Ok(());
        }
        let key = Self::key(&t, h.ino)?;
        drop(t);
        // Durable in PM already; a home write-back that failed is reported here.
        if self.cache.flush_error().is_some() {
            self.cache.flush_file(key)?;
        }
        Ok(())
    }

    pub(super) fn do_set_atomic(&self, fh: Fh, atomic: bool) -> Result<()> {
        let mut t = self.t.lock();
        let h = Self::handle(&t, fh)?;
        if !atomic {
            let others = t
                .handles
                .iter()
                .any(|(k, o)| *k != fh.0 && o.ino == h.ino && o.atomic);
            if !others {
                if let Some(unit) = t.atomic_units.remove(&h.ino) {
                    self.cache.commit(unit)?;
                }
            }
        }
        if let Some(hh) = t.handles.get_mut(&fh.0) {
            hh.atomic = atomic;
        }
        Ok(())
    }

    pub(super) fn do_syncv(&self, fhs: &[Fh], commit: bool) -> Result<()> {
        let mut t = self.t.lock();
        let mut inos = Vec::new();
        for fh in fhs {
            inos.push(Self::handle(&t, *fh)?.ino);
        }
        let units: Vec<_> = inos
            .iter()
            .filter_map(|ino| t.atomic_units.remove(ino))
            .collect();
        if commit {
            // One commit point for every file (a group commit).
            return self.cache.commit_group(units);
        }
        units.into_iter().try_for_each(|u| self.cache.abort(u))
    }
}
