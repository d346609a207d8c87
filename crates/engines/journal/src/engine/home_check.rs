//! Home files changed behind the store's back. The store records, in its metadata log, the
//! host identity (inode number) and a length each home file has at least: with every commit
//! that appends to it, and at a clean close with its times too (after the final
//! checkpoint, nothing of the store writes a data file until the next open). Open checks
//! every live inode's home file against its record before anything is written home, and
//! refuses with a Corrupt error naming the file when it is
//!
//! | found at open                                  | meaning                                   |
//! |------------------------------------------------|-------------------------------------------|
//! | no file at the home path                       | deleted or moved                          |
//! | another host inode number                      | replaced (e.g. copied over, restored)      |
//! | shorter than the recorded length               | truncated                                 |
//! | clean close recorded, a time differs           | written, truncated or chmod-ed meanwhile  |
//!
//! The store never shrinks, deletes or replaces a home file itself, and the lengths it
//! records are durable (appends are synced before their commit), so none of these follows
//! from a crash. After an unclean stop only the first three can be checked. fsck runs the
//! same check on an open store (times excluded). The times are modification and change
//! time (a write changes both on a real file system; utimes can reset the first only).

use super::meta_log::{HomeRecord, Record};
use super::namespace::{Body, Inner};
use super::{JournalStore, META_FILE};
use hostfs::HostFs;
use pmem::Region;
use store::{Error, Ino, Result};

/// How the previous run of the store ended, as its metadata log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastClose {
    /// The log ends with a Clean record: home files' times were recorded.
    Clean,
    Unclean,
}

impl<R: Region, H: HostFs> JournalStore<R, H> {
    /// Every problem with the home files of live inodes (empty: all as recorded).
    pub(super) fn home_problems(&self, s: &Inner, last: LastClose) -> Result<Vec<String>> {
        let home = self.journal.home();
        let mut records: Vec<&HomeRecord> = s
            .homes
            .values()
            .filter(|h| s.nodes.contains_key(&h.ino))
            .collect();
        records.sort_unstable_by_key(|h| h.ino);
        // The host crash model keeps no file times across its images: times are compared on
        // real file systems only.
        let times_kept = home.host().capabilities().fs_type != hostfs::FsType::Simulated;
        let mut problems = Vec::new();
        for rec in records {
            let path = home.path(rec.ino as u32);
            let name = format!("home file {} of inode {}", path.display(), rec.ino);
            let st = home
                .stat(rec.ino as u32)
                .map_err(crate::JournalError::Host)?;
            let Some(st) = st else {
                problems.push(format!(
                    "{name} is missing ({} bytes recorded): deleted or moved behind the \
                     store's back",
                    rec.len
                ));
                continue;
            };
            if st.ino != rec.host_ino {
                problems.push(format!(
                    "{name} was replaced behind the store's back (host inode {} recorded, {} \
                     found)",
                    rec.host_ino, st.ino
                ));
            } else if st.len < rec.len {
                problems.push(format!(
                    "{name} was shrunk behind the store's back ({} bytes recorded, {} found)",
                    rec.len, st.len
                ));
            } else if last == LastClose::Clean
                && times_kept
                && (rec.mtime_ns, rec.ctime_ns) != (0, 0)
                && (st.mtime_ns, st.ctime_ns) != (rec.mtime_ns, rec.ctime_ns)
            {
                problems.push(format!(
                    "{name} was changed behind the store's back after a clean close \
                     (modification and change times {} and {} recorded, {} and {} found)",
                    rec.mtime_ns, rec.ctime_ns, st.mtime_ns, st.ctime_ns
                ));
            }
        }
        Ok(problems)
    }

    /// At open: refuse home files changed behind the store's back.
    pub(super) fn check_homes(&self, s: &Inner, last: LastClose) -> Result<()> {
        let problems = self.home_problems(s, last)?;
        match problems.first() {
            None => Ok(()),
            Some(first) => Err(Error::Corrupt {
                what: if problems.len() == 1 {
                    first.clone()
                } else {
                    format!("{first} (and {} more home files)", problems.len() - 1)
                },
                offset: 0,
            }),
        }
    }

    /// The Home records a commit appending to `files` needs (a file longer than recorded,
    /// or not recorded yet).
    pub(super) fn grown_homes(
        &self,
        s: &Inner,
        files: impl Iterator<Item = u32>,
    ) -> Result<Vec<HomeRecord>> {
        let mut out = Vec::new();
        for file in files.filter(|&f| f != META_FILE) {
            let st = self
                .journal
                .home()
                .stat_open(file)
                .map_err(crate::JournalError::Host)?;
            let ino = file as Ino;
            let known = s.homes.get(&ino);
            if known.is_none_or(|h| h.host_ino != st.ino || h.len < st.len) {
                out.push(HomeRecord {
                    ino,
                    host_ino: st.ino,
                    len: st.len,
                    mtime_ns: 0,
                    ctime_ns: 0,
                });
            }
        }
        Ok(out)
    }

    /// At a clean close (after the final checkpoint): the Home records of every live file
    /// with a home file, times included, then Clean. Files written in this run are synced
    /// whole first; a file not written in this run is recorded as the host shows it.
    pub(super) fn close_records(&self, s: &Inner) -> Result<Vec<Record>> {
        let mut inos: Vec<Ino> = s
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n.body, Body::File { .. }))
            .map(|(i, _)| *i)
            .collect();
        inos.sort_unstable();
        let home = self.journal.home();
        let mut out = Vec::new();
        for ino in inos {
            if home.was_written(ino as u32) {
                // persist: the length and times recorded below are the ones a power loss
                // leaves (an aborted append's bytes included).
                home.sync_all(ino as u32)
                    .map_err(crate::JournalError::Host)?;
            }
            let st = home.stat(ino as u32).map_err(crate::JournalError::Host)?;
            if let Some(st) = st {
                out.push(Record::Home(HomeRecord {
                    ino,
                    host_ino: st.ino,
                    len: st.len,
                    mtime_ns: st.mtime_ns,
                    ctime_ns: st.ctime_ns,
                }));
            }
        }
        out.push(Record::Clean);
        Ok(out)
    }
}

/// Home records and the way the last run ended, from a metadata log.
pub fn replay_homes(records: &[Record]) -> (std::collections::HashMap<Ino, HomeRecord>, LastClose) {
    let mut homes = std::collections::HashMap::new();
    for rec in records {
        match rec {
            Record::Home(h) => {
                homes.insert(h.ino, *h);
            }
            Record::FreeInode { ino } => {
                homes.remove(ino);
            }
            _ => {}
        }
    }
    let last = match records.last() {
        Some(Record::Clean) => LastClose::Clean,
        _ => LastClose::Unclean,
    };
    (homes, last)
}
