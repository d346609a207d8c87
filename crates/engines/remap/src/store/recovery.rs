//! Open and recovery: check the journal header, load the snapshot, redo every committed
//! record of the snapshot's generation (the scan stops at the first torn or foreign record:
//! partial commits are discarded), rebuild the derived attributes, then checkpoint — which
//! re-remaps every committed pair (zero-copy, idempotent: a torn earlier remap is just done
//! again) and retires the journal.
//!
//! Decision table of a record at the scan position:
//!
//! | header valid | generation, seq as expected | payload crc | data crcs | action              |
//! |--------------|-----------------------------|-------------|-----------|---------------------|
//! | no           | -                           | -           | -         | end of journal      |
//! | yes          | no (older generation)       | -           | -         | end of journal      |
//! | yes          | yes                         | fails       | -         | end (torn commit)   |
//! | yes          | yes                         | ok          | fail      | end (torn commit)   |
//! | yes          | yes                         | ok          | ok        | redo, go on         |

use super::commit::{meta_op, node_ops};
use super::{Counters, Inner};
use crate::atree::Pair;
use crate::format::ops::{decode_ops, encode_ops, Op, HOLE_INDEX};
use crate::format::{check_journal_header, decode_snapshot, encode_snapshot, Format, BLOCK};
use crate::journal::media::{Media, Names};
use crate::journal::{scan, Journal};
use crate::namespace::inode::Inode;
use crate::namespace::state::State;
use crate::{host_err, CheckpointMode, RemapConfig};
use hostfs::{Capability, HostFs, OpenOptions};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use store::{Error, FileKind, Ino, Result, ROOT_INO};

/// Snapshot flag: checkpoints copy instead of remapping.
const FLAG_COPY: u32 = 1;

/// Write the snapshot of `st` as generation `generation` and make it durable: the
/// checkpoint mark. Returns its length in bytes. Every inode in memory is in it: the
/// reachable ones, and the open ones without a name (an unnamed file that a later `link`
/// may name: its data is home from here on, and recovery drops it unless a later record
/// named it).
pub(crate) fn write_snapshot<H: HostFs>(
    media: &Media<H>,
    st: &State,
    generation: u64,
    mode: CheckpointMode,
    format: Format,
) -> Result<u64> {
    let mut ops = Vec::new();
    let mut inos: Vec<&Ino> = st.inodes.keys().collect();
    inos.sort_unstable();
    for ino in inos {
        let Some(i) = st.inodes.get(ino) else {
            continue;
        };
        ops.push(Op::Meta(meta_op(i)));
        ops.extend(node_ops(i, true));
        if !i.home_holes.is_empty() {
            ops.push(Op::Holes {
                ino: *ino,
                runs: runs_of(&i.home_holes),
            });
        }
        for (name, &child) in &i.entries {
            ops.push(Op::AddEntry {
                dir: *ino,
                ino: child,
                name: name.clone(),
            });
        }
    }
    let flags = if mode == CheckpointMode::Copy {
        FLAG_COPY
    } else {
        0
    };
    assert!(
        ops.iter().all(|op| op.in_format(format)),
        "a format {} store is never given a newer format's record",
        format.number()
    );
    let bytes = encode_snapshot(format, generation, st.next_ino, flags, &encode_ops(&ops));
    let fs = &media.fs;
    // A leftover temporary name may still name the current snapshot's inode (a rename not
    // yet durable at a crash): drop the name rather than truncating through it.
    match fs.unlink(&media.names.snapshot_tmp) {
        Err(e) if !e.is_not_found() => return Err(host_err(e)),
        _ => {}
    }
    let tmp = fs
        .open(&media.names.snapshot_tmp, &OpenOptions::create_new())
        .map_err(host_err)?;
    fs.write_all_at(&tmp, 0, &bytes).map_err(host_err)?;
    // persist: the new snapshot's bytes are durable before its name replaces the old one.
    fs.sync_all(&tmp).map_err(host_err)?;
    fs.rename(&media.names.snapshot_tmp, &media.names.snapshot)
        .map_err(host_err)?;
    // persist: the rename is durable: from here recovery starts from this snapshot and
    // ignores every journal record of an older generation.
    fs.sync_dir(Path::new("")).map_err(host_err)?;
    Ok(bytes.len() as u64)
}

/// Runs (first block, blocks) of a set of blocks.
fn runs_of(blocks: &std::collections::BTreeSet<u64>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &b in blocks {
        match runs.last_mut() {
            Some((first, n)) if *first + *n == b => *n += 1,
            _ => runs.push((b, 1)),
        }
    }
    runs
}

fn reachable(st: &State) -> HashSet<Ino> {
    let mut seen = HashSet::from([ROOT_INO]);
    let mut todo = vec![ROOT_INO];
    while let Some(dir) = todo.pop() {
        let Some(i) = st.inodes.get(&dir) else {
            continue;
        };
        for &child in i.entries.values() {
            if st.inodes.contains_key(&child) && seen.insert(child) {
                todo.push(child);
            }
        }
    }
    seen
}

fn read_file<H: HostFs>(fs: &H, path: &Path) -> Result<Vec<u8>> {
    let f = fs.open(path, &OpenOptions::read_only()).map_err(host_err)?;
    let len = fs.file_stat(&f).map_err(host_err)?.len;
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let n = fs.read_full_at(&f, 0, &mut buf).map_err(host_err)?;
    buf.truncate(n);
    Ok(buf)
}

/// Open and recover a store.
pub(crate) fn open<H: HostFs>(
    fs: H,
    store_id: Option<u64>,
    config: &RemapConfig,
) -> Result<Inner<H>> {
    let names = Names::new();
    let journal = fs
        .open(&names.journal, &OpenOptions::read_write())
        .map_err(host_err)?;
    let mut head = [0u8; 64];
    fs.read_full_at(&journal, 0, &mut head).map_err(host_err)?;
    let (found, format) = check_journal_header(&head)?;
    if store_id.is_some_and(|id| id != found) {
        return Err(Error::CrossStore(format!(
            "the journal belongs to store {found:#x}, the pool file names {:#x}",
            store_id.unwrap_or(0)
        )));
    }
    let snapshot = read_file(&fs, &names.snapshot)?;
    let (sh, flags, payload) = decode_snapshot(&snapshot)?;
    if sh.format != format {
        return Err(Error::Corrupt {
            what: format!(
                "remap snapshot of format {} in a store of format {}",
                sh.format.number(),
                format.number()
            ),
            offset: 8,
        });
    }
    let mode = if flags & FLAG_COPY != 0 {
        CheckpointMode::Copy
    } else {
        CheckpointMode::Remap
    };
    if mode == CheckpointMode::Remap {
        fs.require(Capability::Reflink).map_err(host_err)?;
    }
    let mut st = State::empty();
    st.inodes.clear();
    st.next_ino = sh.next_ino.max(ROOT_INO + 1);
    for op in decode_ops(payload, crate::format::HEADER_LEN as u64)? {
        if !op.in_format(format) {
            return Err(Error::Corrupt {
                what: "remap snapshot: a format 2 operation in a store of format 1".into(),
                offset: 0,
            });
        }
        apply(&mut st, &op, 0, false)?;
    }
    let media = Media::new(fs, names, journal);
    let (records, end) = scan(&media, sh.generation, format)?;
    let mut counters = Counters::default();
    let mut exchanges = Vec::new();
    for rec in &records {
        for op in &rec.ops {
            apply(&mut st, op, rec.data_start, true)?;
            if let Op::Exchange { ino, size, blocks } = op {
                exchanges.push((*ino, *size, blocks.clone()));
            }
        }
        counters.recovered_records += 1;
    }
    finish(&mut st)?;
    let next_seq = records.len() as u64 + 1;
    let mut inner = Inner {
        st,
        media,
        journal: Journal::new(format, sh.generation, next_seq, end),
        format,
        mode,
        config: config.clone(),
        counters,
        failed: None,
        closed: false,
        trace: None,
    };
    // Complete the exchange commits that may not have swapped (store/exchange.rs), then
    // redo: remap every committed pair home and retire the journal.
    for (ino, size, blocks) in &exchanges {
        if inner.st.inodes.contains_key(ino) {
            inner.redo_exchange(*ino, *size, blocks)?;
        }
    }
    inner.checkpoint()?;
    Ok(inner)
}

/// Apply one operation of the snapshot (`from_journal` false) or of a committed record
/// whose data blocks start at journal block `data_start`.
fn apply(st: &mut State, op: &Op, data_start: u64, from_journal: bool) -> Result<()> {
    match op {
        Op::Meta(m) => {
            let i = st
                .inodes
                .entry(m.ino)
                .or_insert_with(|| Inode::new(m.ino, m.kind, m.perm, m.parent));
            if i.meta.kind != m.kind {
                return Err(Error::Corrupt {
                    what: format!("remap: inode {} changes kind", m.ino),
                    offset: 0,
                });
            }
            (i.meta.perm, i.meta.uid, i.meta.gid) = (m.perm, m.uid, m.gid);
            (i.meta.atime, i.meta.mtime, i.meta.ctime) = (m.atime, m.mtime, m.ctime);
            i.meta.size = m.size;
            i.meta.allocated = m.size.div_ceil(BLOCK) * BLOCK;
            i.parent = m.parent;
            if from_journal {
                i.dirty |= m.kind == FileKind::File;
            } else {
                i.home_blocks = m.size.div_ceil(BLOCK);
            }
        }
        Op::AddEntry { dir, ino, name } => {
            if let Some(d) = st.inodes.get_mut(dir) {
                d.entries.insert(name.clone(), *ino);
            }
        }
        Op::DelEntry { dir, name } => {
            if let Some(d) = st.inodes.get_mut(dir) {
                d.entries.remove(name);
            }
        }
        Op::Data { ino, cut, pairs } => {
            let Some(i) = st.inodes.get_mut(ino) else {
                return Ok(());
            };
            if let Some(c) = cut {
                i.atree.cut(*c);
                i.home_blocks = i.home_blocks.min(*c);
            }
            for p in pairs {
                let pair = match p.data_index {
                    HOLE_INDEX => Pair::CommittedHole,
                    index => Pair::Committed(data_start + u64::from(index)),
                };
                i.atree.insert(p.file_block, pair);
            }
            i.dirty = true;
        }
        Op::Node { ino, rdev, target } => {
            if let Some(i) = st.inodes.get_mut(ino) {
                apply_node(i, *rdev, target)?;
            }
        }
        Op::Xattrs { ino, attrs } => {
            if let Some(i) = st.inodes.get_mut(ino) {
                i.xattrs = attrs.iter().cloned().collect();
            }
        }
        Op::Holes { ino, runs } => {
            if let Some(i) = st.inodes.get_mut(ino) {
                for &(first, n) in runs {
                    i.home_holes.extend(first..first + n);
                }
            }
        }
        Op::NextIno(n) => st.next_ino = st.next_ino.max(*n),
        Op::Exchange { ino, size, .. } => {
            // The file's content is the staged one, in its home file once `open` has
            // completed the swap: no pair, every block home.
            if let Some(i) = st.inodes.get_mut(ino) {
                i.atree.clear();
                i.home_blocks = size.div_ceil(BLOCK);
                i.dirty = false;
            }
        }
    }
    Ok(())
}

/// A symlink's target or a special file's device number; corruption for any other kind.
fn apply_node(i: &mut Inode, rdev: u64, target: &[u8]) -> Result<()> {
    let kind = i.meta.kind;
    let fits = match kind {
        FileKind::Symlink => rdev == 0 && !target.is_empty(),
        k if k.is_special() => target.is_empty() && (k.is_device() || rdev == 0),
        _ => false,
    };
    if !fits {
        return Err(Error::Corrupt {
            what: format!(
                "remap: node record (rdev {rdev}, target of {} bytes) of inode {}, a {kind:?}",
                target.len(),
                i.meta.ino
            ),
            offset: 0,
        });
    }
    i.meta.rdev = rdev;
    i.target = target.to_vec();
    Ok(())
}

/// After the redo: drop entries naming no inode and inodes no entry reaches, and derive
/// link counts and directory parents from the entries.
fn finish(st: &mut State) -> Result<()> {
    if st.inodes.get(&ROOT_INO).map(|r| r.meta.kind) != Some(FileKind::Dir) {
        return Err(Error::Corrupt {
            what: "remap snapshot has no root directory".into(),
            offset: 0,
        });
    }
    let known: HashSet<Ino> = st.inodes.keys().copied().collect();
    for i in st.inodes.values_mut() {
        i.entries.retain(|_, child| known.contains(child));
    }
    let live = reachable(st);
    st.inodes.retain(|ino, _| live.contains(ino));
    let mut links: HashMap<Ino, u32> = HashMap::new();
    let mut subdirs: HashMap<Ino, u32> = HashMap::new();
    let mut parents: Vec<(Ino, Ino)> = Vec::new();
    for (&dir, i) in &st.inodes {
        for &child in i.entries.values() {
            *links.entry(child).or_default() += 1;
            if st
                .inodes
                .get(&child)
                .is_some_and(|c| c.meta.kind == FileKind::Dir)
            {
                *subdirs.entry(dir).or_default() += 1;
                parents.push((child, dir));
            }
        }
    }
    for (child, dir) in parents {
        if let Some(c) = st.inodes.get_mut(&child) {
            c.parent = dir;
        }
    }
    for (&ino, i) in st.inodes.iter_mut() {
        i.meta.nlink = match i.meta.kind {
            FileKind::Dir => 2 + subdirs.get(&ino).copied().unwrap_or(0),
            _ => links.get(&ino).copied().unwrap_or(0),
        };
        if ino == ROOT_INO {
            i.parent = ROOT_INO;
        }
        let blocks = i.meta.size.div_ceil(BLOCK);
        i.home_holes.split_off(&blocks.min(i.home_blocks));
        i.set_allocated();
    }
    let max = st.inodes.keys().copied().max().unwrap_or(ROOT_INO);
    st.next_ino = st.next_ino.max(max + 1);
    Ok(())
}
