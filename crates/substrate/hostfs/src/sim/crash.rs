//! Crash points of the host model and the enumeration of their crash images.

use super::image::{HostImage, ImageNode};
use super::state::{FileImage, Key, State, ROOT_INO};
use crate::FileKind;
use pmem::CrashConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One independent choice of a crash: a group of alternative pending updates, or a
/// directory entry changed since its directory's last sync.
#[derive(Clone, Debug)]
enum Choice {
    /// Option 0: none of the updates reached the media; option k: update `ops[k - 1]` did
    /// (the unit's content at that moment), the earlier ones being overwritten by it.
    Updates { ops: Vec<usize> },
    /// Option 0: the durable binding; option k: `bindings[k - 1]`.
    Entry {
        dir: u64,
        name: Vec<u8>,
        bindings: Vec<Option<u64>>,
    },
    /// Option 0: the pending exchange `index` did not reach the media; option 1: it did.
    Exchange { index: usize },
    /// Option 0: the durable value of the attribute; option k: `values[k - 1]`.
    Xattr {
        ino: u64,
        name: Vec<u8>,
        values: Vec<Option<Vec<u8>>>,
    },
}

impl Choice {
    fn options(&self) -> u64 {
        match self {
            Choice::Updates { ops } => ops.len() as u64 + 1,
            Choice::Entry { bindings, .. } => bindings.len() as u64 + 1,
            Choice::Exchange { .. } => 2,
            Choice::Xattr { values, .. } => values.len() as u64 + 1,
        }
    }
}

/// The crash images of a crash at one moment: at a sync (just before it takes effect, see
/// [`SimHostFs::set_sync_hook`](super::SimHostFs::set_sync_hook)) or now
/// ([`SimHostFs::crash_point`](super::SimHostFs::crash_point)).
///
/// Every choice (a group of alternative updates of one sector, block, page or length; an
/// all-or-nothing update; a changed directory entry) is made independently, so the number
/// of crash states is the product of their option counts (saturating). Up to
/// [`CrashConfig::exhaustive_limit`] states the images are enumerated exhaustively (image `i`
/// is the mixed-radix decomposition of `i`; image 0 is the durable state), above it
/// [`CrashConfig::sample_count`] images are drawn from the seed (image 0: nothing pending
/// reached the media; image 1: everything did; the others uniformly per choice).
#[derive(Clone, Debug)]
pub struct HostCrashPoint {
    sync_index: u64,
    clock: u64,
    state: Arc<State>,
    choices: Vec<Choice>,
    config: CrashConfig,
}

impl HostCrashPoint {
    pub(super) fn new(state: State, clock: u64, config: CrashConfig) -> HostCrashPoint {
        let mut groups: BTreeMap<&Key, Vec<usize>> = BTreeMap::new();
        for (index, op) in state.ops.iter().enumerate() {
            groups.entry(&op.key).or_default().push(index);
        }
        // Exchanges first: an image applies them before the later entry changes.
        let mut choices: Vec<Choice> = (0..state.exchanges.len())
            .map(|index| Choice::Exchange { index })
            .collect();
        choices.extend(groups.into_values().map(|ops| Choice::Updates { ops }));
        for ((dir, name), history) in &state.entry_history {
            let durable = state
                .inodes
                .get(dir)
                .and_then(|d| d.durable_entries.get(name).copied());
            let mut bindings: Vec<Option<u64>> = Vec::new();
            for binding in history {
                if *binding != durable && !bindings.contains(binding) {
                    bindings.push(*binding);
                }
            }
            if !bindings.is_empty() {
                choices.push(Choice::Entry {
                    dir: *dir,
                    name: name.clone(),
                    bindings,
                });
            }
        }
        for ((ino, name), history) in &state.xattr_history {
            let durable = state
                .inodes
                .get(ino)
                .and_then(|n| n.durable_xattrs.get(name).cloned());
            let mut values: Vec<Option<Vec<u8>>> = Vec::new();
            for value in history {
                if *value != durable && !values.contains(value) {
                    values.push(value.clone());
                }
            }
            if !values.is_empty() {
                choices.push(Choice::Xattr {
                    ino: *ino,
                    name: name.clone(),
                    values,
                });
            }
        }
        HostCrashPoint {
            sync_index: state.syncs,
            clock,
            state: Arc::new(state),
            choices,
            config,
        }
    }

    /// Number of syncs completed before this crash point.
    pub fn sync_index(&self) -> u64 {
        self.sync_index
    }

    /// The shared crash clock at this point (see [`SimHostFs::set_clock`](super::SimHostFs::set_clock)).
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Number of independent choices (pending update groups and changed entries).
    pub fn choice_count(&self) -> usize {
        self.choices.len()
    }

    /// Number of distinct crash states (saturating).
    pub fn state_count(&self) -> u64 {
        self.choices
            .iter()
            .fold(1u64, |n, c| n.saturating_mul(c.options()))
    }

    /// True when [`images`](Self::images) enumerates every crash state.
    pub fn is_exhaustive(&self) -> bool {
        self.state_count() <= self.config.exhaustive_limit
    }

    /// Number of images.
    pub fn image_count(&self) -> u64 {
        if self.is_exhaustive() {
            self.state_count()
        } else {
            self.config.sample_count.max(2)
        }
    }

    /// The option of every choice for image `index`.
    fn options_of(&self, index: u64) -> Vec<u64> {
        if self.is_exhaustive() {
            let mut rest = index;
            return self
                .choices
                .iter()
                .map(|c| {
                    let option = rest % c.options();
                    rest /= c.options();
                    option
                })
                .collect();
        }
        match index {
            0 => vec![0; self.choices.len()],
            1 => self.choices.iter().map(|c| c.options() - 1).collect(),
            _ => {
                let mut rng = SplitMix64(mix(self.config.seed, self.sync_index, index));
                self.choices
                    .iter()
                    .map(|c| rng.below(c.options()))
                    .collect()
            }
        }
    }

    /// Crash image number `index` (`index < image_count()`).
    pub fn image(&self, index: u64) -> HostImage {
        let options = self.options_of(index);
        let mut applied: Vec<usize> = Vec::new();
        let mut entries: BTreeMap<u64, BTreeMap<Vec<u8>, u64>> = BTreeMap::new();
        let mut xattrs: BTreeMap<u64, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
        for (ino, node) in &self.state.inodes {
            if node.kind == FileKind::Dir {
                entries.insert(*ino, node.durable_entries.clone());
            }
            if !node.durable_xattrs.is_empty() {
                xattrs.insert(*ino, node.durable_xattrs.clone());
            }
        }
        for (choice, &option) in self.choices.iter().zip(&options) {
            match choice {
                Choice::Updates { ops } => {
                    if option > 0 {
                        applied.extend(ops.get(option as usize - 1));
                    }
                }
                Choice::Entry {
                    dir,
                    name,
                    bindings,
                } => {
                    if option > 0 {
                        let dir_entries = entries.entry(*dir).or_default();
                        match bindings.get(option as usize - 1).copied().flatten() {
                            Some(ino) => dir_entries.insert(name.clone(), ino),
                            None => dir_entries.remove(name),
                        };
                    }
                }
                Choice::Exchange { index } => {
                    if option > 0 {
                        for (dir, name, ino) in self.state.exchanges[*index].entries.iter() {
                            entries.entry(*dir).or_default().insert(name.clone(), *ino);
                        }
                    }
                }
                Choice::Xattr { ino, name, values } => {
                    if option > 0 {
                        let attrs = xattrs.entry(*ino).or_default();
                        match values.get(option as usize - 1).cloned().flatten() {
                            Some(value) => attrs.insert(name.clone(), value),
                            None => attrs.remove(name),
                        };
                    }
                }
            }
        }
        applied.sort_unstable();
        self.build(&entries, &xattrs, &applied)
    }

    /// Every image, one at a time.
    pub fn images(&self) -> impl Iterator<Item = HostImage> + '_ {
        (0..self.image_count()).map(|index| self.image(index))
    }

    /// A one-line description of image `index`, to reproduce a failure.
    pub fn describe(&self, index: u64) -> String {
        let how = if self.is_exhaustive() {
            "exhaustive".to_string()
        } else {
            format!("sampled, seed {}", self.config.seed)
        };
        format!(
            "host crash before sync {} (clock {}, {} choices, {} states): image {} of {} ({how})",
            self.sync_index + 1,
            self.clock,
            self.choices.len(),
            self.state_count(),
            index,
            self.image_count()
        )
    }

    /// The image of the chosen entries with the chosen updates (indices into the pending
    /// updates, in order) applied to the durable contents.
    fn build(
        &self,
        entries: &BTreeMap<u64, BTreeMap<Vec<u8>, u64>>,
        xattrs: &BTreeMap<u64, BTreeMap<Vec<u8>, Vec<u8>>>,
        applied: &[usize],
    ) -> HostImage {
        let reachable = reachable(entries);
        let mut files: BTreeMap<u64, FileImage> = BTreeMap::new();
        for (_, ino) in reachable.iter().filter(|(_, ino)| self.is_file(*ino)) {
            if let Some(node) = self.state.inodes.get(ino) {
                files
                    .entry(*ino)
                    .or_insert_with(|| FileImage::new(&node.durable));
            }
        }
        for &index in applied {
            let Some(op) = self.state.ops.get(index) else {
                continue;
            };
            for piece in &op.pieces {
                if let Some(file) = files.get_mut(&piece.ino()) {
                    file.apply(piece);
                }
            }
        }
        let contents: BTreeMap<u64, Vec<u8>> = files
            .into_iter()
            .map(|(ino, f)| (ino, f.finish()))
            .collect();
        let mut image = HostImage::default();
        for (path, ino) in reachable {
            let Some(inode) = self.state.inodes.get(&ino) else {
                continue;
            };
            let node = match (inode.kind, contents.get(&ino)) {
                (FileKind::File, Some(data)) => ImageNode::File {
                    ino,
                    data: data.clone(),
                },
                (FileKind::Symlink, _) => ImageNode::Symlink {
                    ino,
                    target: inode.target.clone(),
                },
                (FileKind::Other, _) => ImageNode::Special {
                    ino,
                    mode_type: inode.mode_type(),
                    rdev: inode.rdev,
                },
                _ => ImageNode::Dir,
            };
            if let Some(attrs) = xattrs.get(&ino).filter(|a| !a.is_empty()) {
                image.xattrs.insert(path.clone(), attrs.clone());
            }
            if inode.kind != FileKind::Symlink {
                image.perms.insert(path.clone(), inode.durable_perm);
            }
            image.nodes.insert(path, node);
        }
        if let Some(attrs) = xattrs.get(&ROOT_INO).filter(|a| !a.is_empty()) {
            image.xattrs.insert(Vec::new(), attrs.clone());
        }
        image
    }

    fn is_file(&self, ino: u64) -> bool {
        self.state
            .inodes
            .get(&ino)
            .is_some_and(|n| n.kind == FileKind::File)
    }
}

/// Every path reachable from the store directory through `entries`, with its inode (each
/// directory visited once, so a cycle a crash could produce ends the walk).
fn reachable(entries: &BTreeMap<u64, BTreeMap<Vec<u8>, u64>>) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut stack: Vec<(Vec<u8>, u64)> = vec![(Vec::new(), ROOT_INO)];
    seen.insert(ROOT_INO);
    while let Some((path, dir)) = stack.pop() {
        for (name, &ino) in entries.get(&dir).into_iter().flatten() {
            let mut child = path.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(name);
            if entries.contains_key(&ino) {
                if seen.insert(ino) {
                    out.push((child.clone(), ino));
                    stack.push((child, ino));
                }
            } else {
                out.push((child, ino));
            }
        }
    }
    out
}

fn mix(seed: u64, sync: u64, index: u64) -> u64 {
    let step = |state: u64, value: u64| SplitMix64(state ^ value).next_u64();
    step(step(step(0x686f_7374, seed), sync), index)
}

/// The splitmix64 generator: tiny, seeded, good enough to pick crash states.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}
