//! The crash model of a store directory.
//!
//! [`SimHostFs`] keeps, per file, a live image (what reads see) and a durable image (what
//! survives a crash for certain), and per directory a live and a durable set of entries.
//! Every update that is not yet certainly durable is *pending*; a crash keeps any
//! combination of them that the rules below allow (docs/hostfs.md states each rule with the
//! kernel behaviour it stands for and the test that checks it):
//!
//! - `write_at`: each sector ([`SimConfig::sector_len`], 512 B by default) it touches is a
//!   separate unit; after a crash a unit holds its durable content or its content after any
//!   one write since (old or new, never a mix within a sector), each unit independently,
//!   until `sync_data`.
//! - A length change (`set_len`, a write past the end) survives only after
//!   `sync_data`/`sync_all`; until then the length is the durable one or any since.
//! - `create`, `link`, `unlink`, `rename`, `mkdir`, `rmdir` change directory entries; each
//!   changed entry independently keeps its durable binding or takes any binding it had since,
//!   until `sync_dir` of its directory. A rename over an existing name thus leaves the old or
//!   the new target there, never neither.
//! - `clone_range`: each block ([`SimConfig::block_len`]) of the destination independently,
//!   until `sync_data` of the destination.
//! - `exchange_range` and `atomic_write`: all or nothing.
//! - Mapped stores ([`HostFs::map`](crate::HostFs::map)): each page
//!   ([`SimConfig::page_len`]) is a unit; flush + fence (msync) makes the flushed pages
//!   durable at their content then.
//! - A failed fsync (injected by [`Faulty`](crate::Faulty)) drops the file's pending data:
//!   it can no longer reach the media, though reads still see it.
//!
//! Every sync is a crash point: [`SimHostFs::set_sync_hook`] receives the crash images of a
//! crash just before the sync takes effect, and [`SimHostFs::crash_point`] those of a crash
//! now. [`SimHostFs::set_clock`] shares a counter with other simulators (bump it from a
//! `pmem::SimRegion` fence hook too) so that a harness can pair a host crash image with a
//! persistent-memory one taken at the same moment.

mod crash;
mod cut;
mod image;
mod map;
mod ops;
mod posix;
mod state;

pub use crash::HostCrashPoint;
pub use cut::{CutHost, CutMap};
pub use image::{HostImage, ImageNode};
pub use map::SimMap;

use crate::{Capabilities, FsType, HostFsResult};
use pmem::CrashConfig;
use state::{Inode, State, ROOT_INO};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The hook called at every sync, just before it takes effect.
pub type SyncHook = Box<dyn FnMut(&HostCrashPoint) + Send>;

/// Granularities, capabilities and crash enumeration of a [`SimHostFs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Unit of torn writes (512 by default; 4096 models 4Kn drives).
    pub sector_len: u64,
    /// Unit of clone-range (the file system block).
    pub block_len: u64,
    /// Unit of mapped stores (the page).
    pub page_len: u64,
    /// What the model offers (all of reflink, exchange-range and atomic writes by default).
    pub capabilities: Capabilities,
    pub crash: CrashConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            sector_len: 512,
            block_len: 4096,
            page_len: 4096,
            capabilities: Capabilities {
                fs_type: FsType::Simulated,
                reflink: true,
                exchange_range: true,
                atomic_write_unit: Some((512, 65536)),
                dax: false,
                direct_io_align: Some((512, 512)),
            },
            crash: CrashConfig::default(),
        }
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    hook: Mutex<Option<SyncHook>>,
    clock: Mutex<Arc<AtomicU64>>,
    config: SimConfig,
}

/// The crash model (see the module documentation). Cloning gives another handle to the same
/// model.
#[derive(Clone)]
pub struct SimHostFs {
    shared: Arc<Shared>,
}

/// An open file of a [`SimHostFs`].
#[derive(Clone, Debug)]
pub struct SimFile {
    ino: u64,
    path: PathBuf,
    write: bool,
}

impl SimFile {
    /// The file's inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }
}

impl Default for SimHostFs {
    fn default() -> Self {
        Self::new(SimConfig::default())
    }
}

impl SimHostFs {
    /// An empty, durable store directory.
    pub fn new(config: SimConfig) -> SimHostFs {
        assert!(
            config.sector_len.is_power_of_two()
                && config.block_len.is_multiple_of(config.sector_len)
                && config.page_len.is_multiple_of(config.sector_len),
            "hostfs: sector, block and page lengths must be powers of two, sectors dividing the others"
        );
        Self::with_state(State::new(), config)
    }

    fn with_state(state: State, config: SimConfig) -> SimHostFs {
        SimHostFs {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                hook: Mutex::new(None),
                clock: Mutex::new(Arc::new(AtomicU64::new(0))),
                config,
            }),
        }
    }

    /// A store directory whose durable and live state is `image` (a crash image, to run
    /// recovery on it).
    pub fn from_image(image: &HostImage, config: SimConfig) -> SimHostFs {
        let mut state = State::new();
        let mut by_ino: std::collections::BTreeMap<u64, u64> = Default::default();
        // Files keep their inode numbers (a file system's survive a crash, and engines find
        // files by them); directories are numbered after the highest.
        let file_ino_max = image
            .nodes
            .values()
            .filter_map(|n| match n {
                ImageNode::File { ino, .. }
                | ImageNode::Symlink { ino, .. }
                | ImageNode::Special { ino, .. } => Some(*ino),
                ImageNode::Dir => None,
            })
            .max()
            .unwrap_or(0);
        state.next_ino = state.next_ino.max(file_ino_max + 1);
        for (path, node) in &image.nodes {
            let (parent, name) = match path.iter().rposition(|&b| b == b'/') {
                Some(at) => (&path[..at], &path[at + 1..]),
                None => (&path[..0], &path[..]),
            };
            let Some(dir) = lookup_bytes(&state, parent) else {
                continue;
            };
            let ino = match node {
                ImageNode::Dir => {
                    // A directory's own "." link, as `mkdir` counts it (its name adds one more
                    // below): 2 for a directory, as the live model reports.
                    let mut inode = Inode::new(crate::FileKind::Dir, 0o755);
                    inode.nlink = 1;
                    new_inode(&mut state, inode)
                }
                ImageNode::File { ino, .. }
                | ImageNode::Symlink { ino, .. }
                | ImageNode::Special { ino, .. } => match by_ino.get(ino) {
                    Some(&existing) => existing,
                    None => {
                        let inode = inode_of(node);
                        let new = if *ino > ROOT_INO && !state.inodes.contains_key(ino) {
                            state.inodes.insert(*ino, inode);
                            *ino
                        } else {
                            new_inode(&mut state, inode)
                        };
                        by_ino.insert(*ino, new);
                        new
                    }
                },
            };
            if let Some(d) = state.inodes.get_mut(&dir) {
                d.live_entries.insert(name.to_vec(), ino);
                d.durable_entries.insert(name.to_vec(), ino);
            }
            if let Some(n) = state.inodes.get_mut(&ino) {
                n.nlink += 1;
            }
        }
        for (path, attrs) in &image.xattrs {
            if let Some(n) = lookup_bytes(&state, path).and_then(|i| state.inodes.get_mut(&i)) {
                n.live_xattrs = attrs.clone();
                n.durable_xattrs = attrs.clone();
            }
        }
        for (path, &perm) in &image.perms {
            if let Some(n) = lookup_bytes(&state, path).and_then(|i| state.inodes.get_mut(&i)) {
                n.perm = perm & 0o7777;
                n.durable_perm = perm & 0o7777;
            }
        }
        Self::with_state(state, config)
    }

    /// The configuration.
    pub fn config(&self) -> SimConfig {
        self.shared.config
    }

    /// Install the hook called at every sync (`sync_data`, `sync_all`, `sync_dir`, the fence
    /// of a mapping), just before the sync takes effect. It runs without the model locked: it
    /// may read the model, and must not expect other threads to be held off.
    pub fn set_sync_hook(&self, hook: SyncHook) {
        *self.shared.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Remove the sync hook and return it.
    pub fn take_sync_hook(&self) -> Option<SyncHook> {
        self.shared
            .hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Share a crash clock: every sync of this model adds one to it, and every crash point
    /// records its value. Bump the same counter from a `pmem::SimRegion` fence hook to order
    /// the crash points of both simulators on one time line.
    pub fn set_clock(&self, clock: Arc<AtomicU64>) {
        *self.shared.clock.lock().unwrap_or_else(|e| e.into_inner()) = clock;
    }

    /// The crash images of a crash now.
    pub fn crash_point(&self) -> HostCrashPoint {
        let state = self.lock().clone();
        HostCrashPoint::new(state, self.clock_value(), self.shared.config.crash)
    }

    /// The durable image: what survives a crash now for certain (image 0 of
    /// [`crash_point`](Self::crash_point)).
    pub fn durable_image(&self) -> HostImage {
        self.crash_point().image(0)
    }

    /// The live image: what reads see now.
    pub fn live_image(&self) -> HostImage {
        // Read through the model's own operations (the tree walk of any HostFs).
        HostImage::read(self).unwrap_or_default()
    }

    /// Number of syncs completed.
    pub fn sync_count(&self) -> u64 {
        self.lock().syncs
    }

    /// Number of pending updates and changed directory entries.
    pub fn pending_count(&self) -> usize {
        let state = self.lock();
        state.ops.len() + state.entry_history.len()
    }

    fn clock_value(&self) -> u64 {
        self.shared
            .clock
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .load(Ordering::SeqCst)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation completes before anything can panic: a poisoned lock is usable.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sync point: call the hook with the crash images of a crash now, then apply `sync`.
    pub(crate) fn sync_point(&self, sync: impl FnOnce(&mut State)) -> HostFsResult<()> {
        let hook = self.take_sync_hook();
        if let Some(mut hook) = hook {
            hook(&self.crash_point());
            let mut slot = self.shared.hook.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(hook);
            }
        }
        self.shared
            .clock
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fetch_add(1, Ordering::SeqCst);
        let mut state = self.lock();
        sync(&mut state);
        state.syncs += 1;
        Ok(())
    }
}

/// A durable inode holding what an image's file, symlink or special node says.
fn inode_of(node: &ImageNode) -> Inode {
    match node {
        ImageNode::File { data, .. } => {
            let mut inode = Inode::new(crate::FileKind::File, 0o644);
            inode.live = data.clone();
            inode.durable = Arc::new(data.clone());
            inode
        }
        ImageNode::Symlink { target, .. } => {
            let mut inode = Inode::new(crate::FileKind::Symlink, 0o777);
            inode.target = target.clone();
            inode
        }
        ImageNode::Special {
            mode_type, rdev, ..
        } => {
            let mut inode = Inode::new(crate::FileKind::Other, 0o644);
            inode.node = crate::NodeKind::from_mode_type(*mode_type);
            inode.rdev = *rdev;
            inode
        }
        ImageNode::Dir => Inode::new(crate::FileKind::Dir, 0o755),
    }
}

fn new_inode(state: &mut State, inode: Inode) -> u64 {
    let ino = state.next_ino;
    state.next_ino += 1;
    state.inodes.insert(ino, inode);
    ino
}

/// The inode at `path` (components joined by `/`, empty: the store directory) in the live
/// namespace.
fn lookup_bytes(state: &State, path: &[u8]) -> Option<u64> {
    let mut ino = ROOT_INO;
    if path.is_empty() {
        return Some(ino);
    }
    for component in path.split(|&b| b == b'/') {
        ino = *state.inodes.get(&ino)?.live_entries.get(component)?;
    }
    Some(ino)
}

impl SimHostFs {
    pub(crate) fn root_path() -> &'static Path {
        Path::new("<simulated>")
    }
}

#[cfg(test)]
mod tests;
