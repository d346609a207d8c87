//! Workload steps for the rest of the POSIX file API (docs/posix.md): symbolic links, hard
//! links, attribute changes, FIFOs, rename modes, fallocate, extended attributes and files
//! published from an unnamed file. An engine that does not offer a family yet
//! (`conformance::cases::awaited`) runs its workloads without those steps
//! ([`crate::workload::Workload::offered_by`]).

use conformance::cases::Feature;
use conformance::Rng;
use store::{
    Fallocate, Fh, FileKind, OpenFlags, RenameMode, Result, SetAttr, Store, TimeNs, TxId, XattrSet,
};

use crate::workload::{data, path, Handles, FILES, FILE_SPAN_MAX};

/// Names of the extended attributes a workload sets (`user.k0` …).
const XATTR_NAMES: u8 = 3;
/// Largest generated attribute value.
const XATTR_VALUE_MAX: u64 = 300;
/// Largest fallocate range.
const FALLOCATE_LEN_MAX: u64 = 8000;
/// A fixed epoch for generated modification times (2020-09-13), so that model and store
/// are given the same values.
const MTIME_BASE: TimeNs = 1_600_000_000_000_000_000;

/// Which [`PosixOp`] steps a target runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PosixSteps {
    /// None of them (a target that keeps names and bytes only, such as the fixtures).
    None,
    /// Hard links, attribute changes and every family not in the list (what the engine
    /// does not offer yet: `conformance::cases::awaited`).
    Lacking(&'static [Feature]),
}

impl PosixSteps {
    /// The steps engine `engine_name` runs: all but the families it does not offer yet.
    pub fn of_engine(engine_name: &str) -> PosixSteps {
        PosixSteps::Lacking(conformance::cases::awaited(engine_name))
    }

    /// Whether `op` is one of them.
    pub fn allow(&self, op: &PosixOp) -> bool {
        match self {
            PosixSteps::None => false,
            PosixSteps::Lacking(lacking) => op.feature().is_none_or(|f| !lacking.contains(&f)),
        }
    }
}

/// One call of the POSIX file API beyond files and directories. Paths are indexes into
/// [`FILES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PosixOp {
    /// A symbolic link at `file` with target `t<target>`.
    Symlink {
        file: usize,
        target: u8,
    },
    /// A hard link at `to` of what is at `from`.
    Link {
        from: usize,
        to: usize,
    },
    /// chmod, and set the modification time when `mtime` is some offset from a fixed epoch.
    SetAttr {
        file: usize,
        perm: u32,
        mtime: Option<u32>,
    },
    /// fallocate through a handle of `file`: `how` 0 allocate, 1 allocate keeping the size,
    /// 2 punch a hole, 3 zero the range, 4 zero keeping the size.
    Fallocate {
        file: usize,
        how: u8,
        off: u64,
        len: u64,
    },
    /// Set `user.k<name>` of `file` to a pattern; `how` 0 either, 1 create, 2 replace.
    SetXattr {
        file: usize,
        name: u8,
        tag: u8,
        len: usize,
        how: u8,
    },
    RemoveXattr {
        file: usize,
        name: u8,
    },
    /// A FIFO at `file`.
    Mkfifo {
        file: usize,
    },
    /// rename with RENAME_EXCHANGE (`exchange`) or RENAME_NOREPLACE.
    RenameWith {
        from: usize,
        to: usize,
        exchange: bool,
    },
    /// An unnamed file written with `len` bytes of `tag` and linked at `file` (in a
    /// transaction only: the atomic publish of a new file).
    Publish {
        file: usize,
        len: usize,
        tag: u8,
    },
}

impl PosixOp {
    /// A random step; `in_tx` allows the steps that are more than one durable call.
    pub fn generate(rng: &mut Rng, in_tx: bool) -> PosixOp {
        let file = rng.below(FILES.len() as u64) as usize;
        let other = rng.below(FILES.len() as u64) as usize;
        let tag = rng.next_u64() as u8;
        match rng.below(if in_tx { 100 } else { 90 }) {
            0..=9 => PosixOp::Symlink {
                file,
                target: tag % 4,
            },
            10..=19 => PosixOp::Link {
                from: file,
                to: other,
            },
            20..=31 => PosixOp::SetAttr {
                file,
                perm: [0o600, 0o640, 0o644, 0o755][rng.below(4) as usize],
                mtime: rng.chance(60).then(|| rng.below(1 << 30) as u32),
            },
            32..=49 => {
                let off = rng.below(FILE_SPAN_MAX);
                PosixOp::Fallocate {
                    file,
                    how: rng.below(5) as u8,
                    off,
                    len: 1 + rng.below(FALLOCATE_LEN_MAX),
                }
            }
            50..=65 => PosixOp::SetXattr {
                file,
                name: rng.below(u64::from(XATTR_NAMES)) as u8,
                tag,
                len: rng.below(XATTR_VALUE_MAX + 1) as usize,
                how: rng.below(3) as u8,
            },
            66..=72 => PosixOp::RemoveXattr {
                file,
                name: rng.below(u64::from(XATTR_NAMES)) as u8,
            },
            73..=77 => PosixOp::Mkfifo { file },
            78..=89 => PosixOp::RenameWith {
                from: file,
                to: other,
                exchange: rng.chance(50),
            },
            _ => PosixOp::Publish {
                file,
                len: 1 + rng.below(3000) as usize,
                tag,
            },
        }
    }

    /// The family of the API this step needs, `None` for calls every engine offers
    /// (hard links, attribute changes).
    pub fn feature(&self) -> Option<Feature> {
        match self {
            PosixOp::Symlink { .. } => Some(Feature::Symlinks),
            PosixOp::Link { .. } | PosixOp::SetAttr { .. } => None,
            PosixOp::Fallocate { .. } => Some(Feature::Fallocate),
            PosixOp::SetXattr { .. } | PosixOp::RemoveXattr { .. } => Some(Feature::Xattrs),
            PosixOp::Mkfifo { .. } => Some(Feature::SpecialFiles),
            PosixOp::RenameWith { .. } => Some(Feature::RenameModes),
            PosixOp::Publish { .. } => Some(Feature::UnnamedFiles),
        }
    }

    /// Files whose paths name another inode (or none) after this step.
    pub fn moved_files(&self) -> Vec<usize> {
        match *self {
            PosixOp::RenameWith { from, to, .. } => vec![from, to],
            _ => vec![],
        }
    }

    /// Run the step on `s` under directory `prefix`.
    pub fn exec(
        &self,
        s: &dyn Store,
        prefix: &str,
        tx: Option<TxId>,
        handles: &mut Handles,
    ) -> Result<()> {
        let file = |i: usize| path(prefix, FILES[i]);
        let at = |i: usize| store::resolve_parent(s, file(i).as_bytes());
        // What the path names itself (link(2) does not follow a symbolic link) and what it
        // leads to (chmod, utimes and setxattr on a path follow one, as the calls do).
        let ino = |i: usize| store::resolve(s, file(i).as_bytes()).map(|m| m.ino);
        let target = |i: usize| store::path::resolve_follow(s, file(i).as_bytes()).map(|m| m.ino);
        match *self {
            PosixOp::Symlink { file: f, target } => {
                let (parent, name) = at(f)?;
                let target = format!("t{target}");
                s.symlink(parent, &name, target.as_bytes(), tx).map(|_| ())
            }
            PosixOp::Link { from, to } => {
                let ino = ino(from)?;
                let (parent, name) = at(to)?;
                s.link(ino, parent, &name, tx).map(|_| ())
            }
            PosixOp::SetAttr {
                file: f,
                perm,
                mtime,
            } => {
                let attr = SetAttr {
                    perm: Some(perm),
                    mtime: mtime.map(|m| MTIME_BASE + u64::from(m) * 1_000_003),
                    ..SetAttr::default()
                };
                s.setattr(target(f)?, &attr, tx).map(|_| ())
            }
            PosixOp::Fallocate {
                file: f,
                how,
                off,
                len,
            } => {
                let fh = handles.get(s, &file(f), tx, false, false)?;
                let op = match how {
                    0 => Fallocate::Allocate { keep_size: false },
                    1 => Fallocate::Allocate { keep_size: true },
                    2 => Fallocate::PunchHole,
                    3 => Fallocate::ZeroRange { keep_size: false },
                    _ => Fallocate::ZeroRange { keep_size: true },
                };
                s.fallocate(fh, op, off, len)
            }
            PosixOp::SetXattr {
                file: f,
                name,
                tag,
                len,
                how,
            } => {
                let how = match how {
                    0 => XattrSet::Either,
                    1 => XattrSet::Create,
                    _ => XattrSet::Replace,
                };
                let name = format!("user.k{name}");
                s.setxattr(target(f)?, name.as_bytes(), &data(tag, len), how, tx)
            }
            PosixOp::RemoveXattr { file: f, name } => {
                let name = format!("user.k{name}");
                s.removexattr(target(f)?, name.as_bytes(), tx)
            }
            PosixOp::Mkfifo { file: f } => {
                let (parent, name) = at(f)?;
                s.mknod(parent, &name, FileKind::Fifo, 0o644, 0, tx)
                    .map(|_| ())
            }
            PosixOp::RenameWith { from, to, exchange } => {
                let (p1, n1) = at(from)?;
                let (p2, n2) = at(to)?;
                let mode = if exchange {
                    RenameMode::Exchange
                } else {
                    RenameMode::NoReplace
                };
                s.rename_with(p1, &n1, p2, &n2, mode, tx)?;
                if from != to {
                    handles.forget(&file(from));
                    handles.forget(&file(to));
                }
                Ok(())
            }
            PosixOp::Publish { file: f, len, tag } => {
                let (parent, name) = at(f)?;
                let flags = OpenFlags {
                    read: true,
                    write: true,
                    ..OpenFlags::default()
                };
                let (meta, fh): (_, Fh) = s.tmpfile(parent, 0o644, flags, tx)?;
                handles.keep(fh);
                s.write(fh, 0, &data(tag, len))?;
                s.link(meta.ino, parent, &name, tx).map(|_| ())
            }
        }
    }
}
