//! Crash points and the enumeration of their crash images.

use super::{Line, LINE};
use crate::CACHE_LINE;
use std::borrow::Cow;

/// How the crash images of a crash point are enumerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashConfig {
    /// Enumerate every crash state when there are at most this many (default 4096 = 2^12).
    pub exhaustive_limit: u64,
    /// Otherwise, the number of sampled images (default 256).
    pub sample_count: u64,
    /// Seed of the sample (the fence index and the image index are mixed in, so every image
    /// is reproducible on its own).
    pub seed: u64,
}

impl Default for CrashConfig {
    fn default() -> Self {
        CrashConfig {
            exhaustive_limit: 4096,
            sample_count: 256,
            seed: 0,
        }
    }
}

/// A line that is not certainly durable, with its distinct possible persisted contents.
///
/// A line written by ordinary (write-back) stores only persists whole at one of the contents
/// it had, in store order (`choices`). A line written (also) by non-temporal stores since it
/// was last durable persists as any combination of its 8-byte words, each at its durable value
/// or at any value a store gave it (`words`): write-combining buffers keep no order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLine {
    /// Line number (byte offset / 64).
    pub line: u64,
    /// Distinct contents the line may have after a crash; `choices[0]` is its durable content
    /// (the line's stores did not reach the media at all), the others follow in store order.
    /// For a line with non-temporal stores: its durable content only (see `words`).
    pub choices: Vec<Line>,
    /// For a line with non-temporal stores: for each 8-byte word, its distinct possible values
    /// (`words[w][0]` durable). Empty for a line written by ordinary stores only.
    pub words: Vec<Vec<[u8; 8]>>,
    /// Index of the line's current (cache) content among its [`count`](Self::count) states.
    pub current: usize,
}

impl PendingLine {
    /// `None` when every possible content equals the durable one (the line adds no state).
    pub(super) fn new(line: u64, durable: Line, history: &[Line], current: &[u8]) -> Option<Self> {
        let mut choices = vec![durable];
        for content in history {
            if !choices.contains(content) {
                choices.push(*content);
            }
        }
        if choices.len() == 1 {
            return None;
        }
        let current = choices
            .iter()
            .position(|c| c[..] == *current)
            .unwrap_or(choices.len() - 1);
        Some(PendingLine {
            line,
            choices,
            words: Vec::new(),
            current,
        })
    }

    /// A line with non-temporal stores: every word independently at any of its values.
    pub(super) fn torn(line: u64, durable: Line, history: &[Line], current: &[u8]) -> Option<Self> {
        let mut words: Vec<Vec<[u8; 8]>> = Vec::with_capacity(LINE / 8);
        let mut at = 0;
        let mut radix = 1;
        for w in 0..LINE / 8 {
            let word = |content: &[u8]| -> [u8; 8] {
                let mut v = [0u8; 8];
                v.copy_from_slice(&content[w * 8..w * 8 + 8]);
                v
            };
            let mut values = vec![word(&durable)];
            for content in history {
                let v = word(content);
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            let now = values.iter().position(|v| *v == word(current)).unwrap_or(0);
            at += now * radix;
            radix *= values.len();
            words.push(values);
        }
        if radix == 1 {
            return None;
        }
        Some(PendingLine {
            line,
            choices: vec![durable],
            words,
            current: at,
        })
    }

    /// Number of distinct contents the line may have after a crash (saturating).
    pub fn count(&self) -> u64 {
        if self.words.is_empty() {
            return self.choices.len() as u64;
        }
        self.words
            .iter()
            .fold(1u64, |n, values| n.saturating_mul(values.len() as u64))
    }

    /// Content number `choice` (`choice < count()`; 0 is the durable content).
    pub fn content(&self, choice: usize) -> Line {
        if self.words.is_empty() {
            return self.choices[choice];
        }
        let mut line = [0u8; LINE];
        let mut rest = choice;
        for (w, values) in self.words.iter().enumerate() {
            line[w * 8..w * 8 + 8].copy_from_slice(&values[rest % values.len()]);
            rest /= values.len();
        }
        line
    }
}

/// The set of crash images of a crash at one moment of a run.
///
/// Each pending line independently takes one of its choices, so the number of crash states is
/// the product of the numbers of choices (saturating at `u64::MAX`); distinct choices give
/// distinct images. When that number is at most [`CrashConfig::exhaustive_limit`] the images
/// are enumerated exhaustively (image `i` is the mixed-radix decomposition of `i`; image 0 is
/// the persistent image), otherwise [`CrashConfig::sample_count`] images are drawn at random
/// from a seed (image 0: no pending line persisted; image 1: every pending line at its cache
/// content; the others uniformly random per line).
#[derive(Clone, Debug)]
pub struct CrashPoint<'a> {
    fences_before: u64,
    /// The region's cache image: every line that is not pending is durable at its content
    /// there, and every image overwrites each pending line with its choice.
    base: Cow<'a, [u8]>,
    lines: Vec<PendingLine>,
    config: CrashConfig,
}

impl<'a> CrashPoint<'a> {
    pub(super) fn new(
        fences_before: u64,
        base: Cow<'a, [u8]>,
        lines: Vec<PendingLine>,
        config: CrashConfig,
    ) -> Self {
        CrashPoint {
            fences_before,
            base,
            lines,
            config,
        }
    }

    /// Number of fences completed before this crash point (the fence hook's point `k` is a
    /// crash just before fence number `k + 1`, counting from 1, takes effect).
    pub fn fence_index(&self) -> u64 {
        self.fences_before
    }

    /// Lines that may hold more than one content after a crash.
    pub fn pending_lines(&self) -> &[PendingLine] {
        &self.lines
    }

    /// The durable image (every pending line at its durable content), a copy.
    pub fn persistent_image(&self) -> Vec<u8> {
        let mut image = self.base.to_vec();
        self.apply(&vec![0; self.lines.len()], &mut image);
        image
    }

    /// Number of distinct crash states (product of the lines' choices, saturating).
    pub fn state_count(&self) -> u64 {
        self.lines
            .iter()
            .fold(1u64, |n, line| n.saturating_mul(line.count()))
    }

    /// True when [`images`](Self::images) enumerates every crash state.
    pub fn is_exhaustive(&self) -> bool {
        self.state_count() <= self.config.exhaustive_limit
    }

    /// Number of images [`images`](Self::images) yields.
    pub fn image_count(&self) -> u64 {
        if self.is_exhaustive() {
            self.state_count()
        } else {
            self.config.sample_count
        }
    }

    /// The choice of each pending line for image `index` (`index < image_count()`).
    pub fn choices(&self, index: u64) -> Vec<usize> {
        if self.is_exhaustive() {
            let mut rest = index;
            return self
                .lines
                .iter()
                .map(|line| {
                    let n = line.count();
                    let choice = rest % n;
                    rest /= n;
                    choice as usize
                })
                .collect();
        }
        match index {
            0 => vec![0; self.lines.len()],
            1 => self.lines.iter().map(|line| line.current).collect(),
            _ => {
                let mut rng = SplitMix64::new(mix(self.config.seed, self.fences_before, index));
                self.lines
                    .iter()
                    .map(|line| rng.below(line.count()) as usize)
                    .collect()
            }
        }
    }

    /// Crash image number `index` (`index < image_count()`), the full region.
    pub fn image(&self, index: u64) -> Vec<u8> {
        let mut image = Vec::new();
        self.image_into(index, &mut image);
        image
    }

    /// Crash image number `index` written into `image` (resized to the region's length), so
    /// that a caller checking many images can reuse one allocation.
    pub fn image_into(&self, index: u64, image: &mut Vec<u8>) {
        image.clear();
        image.extend_from_slice(&self.base);
        self.apply(&self.choices(index), image);
    }

    /// Crash image number `index` written over `image`, which must hold an image of this crash
    /// point's region (the same base) except in the lines numbered in `stale` (for example a
    /// buffer returned by [`SimRegion::into_persistent_image_and_written`](super::SimRegion::into_persistent_image_and_written)
    /// after an earlier image of this point was recovered): only those lines and the pending
    /// lines are rewritten. A buffer of another length is rewritten whole.
    pub fn image_over(&self, index: u64, image: &mut Vec<u8>, stale: &[u64]) {
        if image.len() != self.base.len() {
            return self.image_into(index, image);
        }
        for &line in stale {
            let start = (line * CACHE_LINE) as usize;
            let end = (start + LINE).min(image.len());
            if start < end {
                image[start..end].copy_from_slice(&self.base[start..end]);
            }
        }
        self.apply(&self.choices(index), image);
    }

    /// Every image, one at a time.
    pub fn images(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        (0..self.image_count()).map(|index| self.image(index))
    }

    /// Call `f(index, image)` for every image, reusing one buffer (only pending lines are
    /// rewritten between images).
    pub fn for_each_image(&self, mut f: impl FnMut(u64, &[u8])) {
        let mut image = self.base.to_vec();
        for index in 0..self.image_count() {
            self.apply(&self.choices(index), &mut image);
            f(index, &image);
        }
    }

    /// A one-line description of image `index`, to reproduce a failure.
    pub fn describe(&self, index: u64) -> String {
        let how = if self.is_exhaustive() {
            "exhaustive".to_string()
        } else {
            format!("sampled, seed {}", self.config.seed)
        };
        format!(
            "crash before fence {} ({} pending lines, {} states): image {} of {} ({how})",
            self.fences_before + 1,
            self.lines.len(),
            self.state_count(),
            index,
            self.image_count()
        )
    }

    fn apply(&self, choices: &[usize], image: &mut [u8]) {
        for (line, &choice) in self.lines.iter().zip(choices) {
            let start = (line.line * CACHE_LINE) as usize;
            let end = (start + LINE).min(image.len());
            image[start..end].copy_from_slice(&line.content(choice)[..end - start]);
        }
    }
}

fn mix(seed: u64, fence: u64, index: u64) -> u64 {
    let step = |state: u64, value: u64| SplitMix64::new(state ^ value).next_u64();
    step(step(step(0, seed), fence), index)
}

/// The splitmix64 generator: tiny, seeded, good enough to pick crash states.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (bias negligible for small `n`).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}
