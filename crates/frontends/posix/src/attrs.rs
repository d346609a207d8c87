//! chown(2) and utimensat(2) on pool inodes, with the kernel's permission rules for the
//! calling process (the shim serves the process's own user: its effective ids decide, as
//! they would for a file on a local file system).

use crate::ops::err;
use crate::pools::Pool;
use crate::PResult;
use store::{now_ns, FileKind, Metadata, SetAttr, TimeNs};

/// One time argument of utimensat(2) and its relatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeArg {
    /// UTIME_NOW (or a NULL times array).
    Now,
    /// UTIME_OMIT: leave it.
    Omit,
    /// This time, in nanoseconds since the epoch.
    At(TimeNs),
}

/// The caller's effective user and group and its supplementary groups.
struct Caller {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Caller {
    fn now() -> Caller {
        // SAFETY: geteuid and getegid take no arguments and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // SAFETY: a count of 0 asks for the number of supplementary groups only.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut groups = vec![0 as libc::gid_t; usize::try_from(n).unwrap_or(0)];
        // SAFETY: `groups` has room for `groups.len()` ids, the count passed.
        let got = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(got).unwrap_or(0));
        Caller { uid, gid, groups }
    }

    fn privileged(&self) -> bool {
        self.uid == 0
    }

    fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether the caller may write `meta` by its permission bits.
    fn may_write(&self, meta: &Metadata) -> bool {
        let bit = if self.uid == meta.uid {
            0o200
        } else if self.in_group(meta.gid) {
            0o020
        } else {
            0o002
        };
        meta.perm & bit != 0
    }
}

/// chown(2) of the inode `meta` describes: `None` leaves the owner (or the group) as it is.
/// Without privilege only the owner may change the group, and only to one of its own groups,
/// and nobody gives a file away (EPERM). A change of a regular file clears its set-user-ID bit
/// when it is executable, and its set-group-ID bit when it is group-executable, as Linux does.
pub fn chown(pool: &Pool, meta: &Metadata, uid: Option<u32>, gid: Option<u32>) -> PResult<()> {
    if uid.is_none() && gid.is_none() {
        return Ok(());
    }
    let caller = Caller::now();
    if !caller.privileged() {
        let gives_away = uid.is_some_and(|u| u != meta.uid);
        let foreign_group = gid.is_some_and(|g| g != meta.gid && !caller.in_group(g));
        if caller.uid != meta.uid || gives_away || foreign_group {
            return Err(libc::EPERM);
        }
    }
    let mut perm = meta.perm;
    if meta.kind == FileKind::File {
        if perm & 0o111 != 0 {
            perm &= !0o4000;
        }
        if perm & 0o010 != 0 {
            perm &= !0o2000;
        }
    }
    let attr = SetAttr {
        uid,
        gid,
        perm: (perm != meta.perm).then_some(perm),
        ..SetAttr::default()
    };
    pool.store
        .setattr(meta.ino, &attr, None)
        .map(|_| ())
        .map_err(err)
}

/// utimensat(2) of the inode `meta` describes. Explicit times need the owner (or privilege,
/// else EPERM); setting both to now needs write permission too (else EACCES).
pub fn utimens(pool: &Pool, meta: &Metadata, atime: TimeArg, mtime: TimeArg) -> PResult<()> {
    if atime == TimeArg::Omit && mtime == TimeArg::Omit {
        return Ok(());
    }
    let caller = Caller::now();
    if !caller.privileged() && caller.uid != meta.uid {
        let explicit = matches!(atime, TimeArg::At(_)) || matches!(mtime, TimeArg::At(_));
        if explicit {
            return Err(libc::EPERM);
        }
        if !caller.may_write(meta) {
            return Err(libc::EACCES);
        }
    }
    let now = now_ns();
    let value = |t: TimeArg| match t {
        TimeArg::Now => Some(now),
        TimeArg::Omit => None,
        TimeArg::At(ns) => Some(ns),
    };
    let attr = SetAttr {
        atime: value(atime),
        mtime: value(mtime),
        ..SetAttr::default()
    };
    pool.store
        .setattr(meta.ino, &attr, None)
        .map(|_| ())
        .map_err(err)
}
