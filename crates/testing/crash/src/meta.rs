//! The metadata half of the oracle: size, permissions and link count of every entry, and the
//! modification and change times of every file, read back through the Store API.
//!
//! Trees ([`conformance::Tree`]) hold names and bytes; [`Metas`] adds what `stat` shows. The
//! driver records the live store's metas whenever a unit has returned (what was acknowledged
//! is what must survive) and before each unit starts (what a crash before the commit must
//! show); a recovered store's metas must equal them, and its file times must be at least the
//! acknowledged ones, for targets whose times are durable
//! ([`crate::CrashTarget::durable_times`]).

use std::collections::BTreeMap;
use store::{Error, FileKind, Ino, Result, Store, TimeNs, ROOT_INO};

/// What a crash must preserve of one entry besides its name and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: FileKind,
    /// Size of a file (directories: 0, their size is engine-defined).
    pub size: u64,
    pub perm: u32,
    pub nlink: u32,
    /// Modification and change times of a file (directories: 0).
    pub mtime: TimeNs,
    pub ctime: TimeNs,
}

/// Path (as in a [`conformance::Tree`]) → metadata.
pub type Metas = BTreeMap<Vec<u8>, Meta>;

/// The metas of the subtree at `path` ("" or "/tN"), with paths relative to it.
pub fn read_metas(s: &dyn Store, path: &str) -> Result<Metas> {
    let ino = if path.is_empty() {
        ROOT_INO
    } else {
        store::path::resolve(s, path)?.ino
    };
    let mut out = Metas::new();
    walk(s, ino, Vec::new(), &mut out, 0)?;
    Ok(out)
}

fn walk(s: &dyn Store, dir: Ino, prefix: Vec<u8>, out: &mut Metas, depth: usize) -> Result<()> {
    if depth > 64 {
        return Err(Error::corrupt("directory tree deeper than 64 levels", dir));
    }
    for entry in s.read_dir(dir)? {
        let mut path = prefix.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(&entry.name);
        let m = s.getattr(entry.ino)?;
        let file = m.kind == FileKind::File;
        out.insert(
            path.clone(),
            Meta {
                kind: m.kind,
                size: if file { m.size } else { 0 },
                perm: m.perm,
                nlink: m.nlink,
                mtime: if file { m.mtime } else { 0 },
                ctime: if file { m.ctime } else { 0 },
            },
        );
        if m.kind == FileKind::Dir {
            walk(s, entry.ino, path, out, depth + 1)?;
        }
    }
    Ok(())
}

/// Split recovered metas into thread directories (`tN/...`), as the trees are split.
pub fn split(metas: &Metas, threads: usize) -> Vec<Metas> {
    let mut parts = vec![Metas::new(); threads];
    for (path, meta) in metas {
        let text = String::from_utf8_lossy(path);
        let Some((top, rest)) = text.split_once('/') else {
            continue;
        };
        let t = top.strip_prefix('t').and_then(|n| n.parse::<usize>().ok());
        if let Some(t) = t.filter(|&t| t < threads) {
            parts[t].insert(rest.as_bytes().to_vec(), *meta);
        }
    }
    parts
}

/// How the oracle compares file times (mtime and ctime) of a state it knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Times {
    /// Not compared: the target does not keep times durable.
    Ignored,
    /// A file's times must not be older than the acknowledged ones: an acknowledged change's
    /// times survive, and a later unit in flight may have moved them forward (times not part
    /// of a unit's atomicity).
    AtLeast,
    /// A file's times must equal the state's: times are logged with the unit that changes
    /// them, so a state before a unit shows that state's times, not the unit's.
    Exact,
}

impl Times {
    /// The comparison a target asks for ([`crate::CrashTarget::durable_times`] and
    /// [`crate::CrashTarget::atomic_times`]).
    pub fn of(target: &dyn crate::CrashTarget) -> Times {
        match (target.durable_times(), target.atomic_times()) {
            (false, _) => Times::Ignored,
            (true, false) => Times::AtLeast,
            (true, true) => Times::Exact,
        }
    }

    /// The name of the first of `want`'s times that `got` breaks, if any.
    fn broken(self, want: &Meta, got: &Meta) -> Option<&'static str> {
        match self {
            Times::Ignored => None,
            Times::AtLeast if got.mtime < want.mtime => Some("mtime went back"),
            Times::AtLeast if got.ctime < want.ctime => Some("ctime went back"),
            Times::AtLeast => None,
            Times::Exact if got.mtime != want.mtime => Some("mtime differs"),
            Times::Exact if got.ctime != want.ctime => Some("ctime differs"),
            Times::Exact => None,
        }
    }
}

/// The first difference between `want` and `got`, or `None`: kinds, sizes, permissions and
/// link counts exactly, times as `times` says.
pub fn differ(want: &Metas, got: &Metas, times: Times) -> Option<String> {
    for (path, w) in want {
        let name = String::from_utf8_lossy(path);
        let Some(g) = got.get(path) else {
            return Some(format!("{name}: missing"));
        };
        let what = if w.kind != g.kind {
            "kind"
        } else if w.size != g.size {
            "size"
        } else if w.perm != g.perm {
            "permissions"
        } else if w.nlink != g.nlink {
            "link count"
        } else if let Some(what) = times.broken(w, g) {
            what
        } else {
            continue;
        };
        return Some(format!("{name}: {what} {w:?} expected, {g:?} found"));
    }
    got.keys()
        .find(|p| !want.contains_key(*p))
        .map(|p| format!("{}: unexpected", String::from_utf8_lossy(p)))
}
