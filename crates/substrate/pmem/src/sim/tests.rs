//! Tests of the crash simulator's semantics.

use super::*;
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;

/// Every image of a crash point.
fn all_images(point: &CrashPoint<'_>) -> Vec<Vec<u8>> {
    point.images().collect()
}

/// Crash points seen by a fence hook: (exhaustive, images).
type Seen = Arc<Mutex<Vec<(bool, Vec<Vec<u8>>)>>>;

/// A region whose fence hook stores every crash point's images (and their exhaustiveness).
fn recording_region(len: u64) -> (SimRegion, Seen) {
    let region = SimRegion::new(len);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    region.set_fence_hook(Box::new(move |point| {
        let images = all_images(point);
        sink.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((point.is_exhaustive(), images));
    }));
    (region, seen)
}

fn take(seen: &Seen) -> Vec<(bool, Vec<Vec<u8>>)> {
    std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()))
}

#[test]
fn persisted_value_is_in_every_crash_image() {
    let (region, seen) = recording_region(512);
    region.write(100, b"durable bytes");
    region.persist(100, 13);
    // Later unrelated unflushed stores and a further fence.
    region.write(300, &[7; 40]);
    region.fill(0, 64, 9);
    region.flush(0, 64);
    region.fence();
    let points = take(&seen);
    assert_eq!(points.len(), 2);
    let later = &points[1].1;
    assert!(later.len() > 1, "the unflushed lines give several images");
    for image in later.iter().chain(all_images(&region.crash_point()).iter()) {
        assert_eq!(&image[100..113], b"durable bytes");
    }
    assert_eq!(&region.persistent_image()[100..113], b"durable bytes");
}

#[test]
fn unflushed_store_may_or_may_not_persist() {
    let region = SimRegion::new(256);
    region.write(64, &[0xAB; 8]);
    let images = all_images(&region.crash_point());
    assert_eq!(images.len(), 2);
    assert!(images.iter().any(|i| i[64..72] == [0xAB; 8]));
    assert!(images.iter().any(|i| i[64..72] == [0; 8]));
    // A fence without a flush does not make it durable.
    region.fence();
    assert_eq!(region.persistent_image()[64..72], [0; 8]);
    assert_eq!(region.cache_image()[64..72], [0xAB; 8]);
    assert_eq!(region.crash_point().state_count(), 2);
}

#[test]
fn store_u64_is_never_torn_but_16_byte_writes_are() {
    let region = SimRegion::new(128);
    region.store_u64(8, u64::MAX);
    let images = all_images(&region.crash_point());
    assert_eq!(images.len(), 2, "one atomic step: old or new");
    for image in &images {
        let word = u64::from_le_bytes(image[8..16].try_into().expect("8 bytes"));
        assert!(
            word == 0 || word == u64::MAX,
            "torn 8-byte store: {word:#x}"
        );
    }
    region.persist(8, 8);

    region.write(16, &[0xFF; 16]);
    let images = all_images(&region.crash_point());
    // Old, first half only, both halves.
    assert_eq!(images.len(), 3);
    let torn = images
        .iter()
        .any(|i| i[16..24] == [0xFF; 8] && i[24..32] == [0; 8]);
    assert!(torn, "a 16-byte store can be torn at the 8-byte boundary");
    assert!(images.iter().all(|i| i[8..16] == [0xFF; 8]));
}

#[test]
fn flushed_but_not_fenced_may_or_may_not_persist() {
    let region = SimRegion::new(128);
    region.write(0, &[1; 8]);
    region.flush(0, 8);
    let images = all_images(&region.crash_point());
    assert!(images.iter().any(|i| i[..8] == [1; 8]));
    assert!(images.iter().any(|i| i[..8] == [0; 8]));
    region.fence();
    assert_eq!(region.persistent_image()[..8], [1; 8]);
    assert_eq!(region.crash_point().state_count(), 1);
    assert_eq!(region.pending_line_count(), 0);
}

#[test]
fn store_after_flush_keeps_flushed_content_durable_at_fence() {
    let region = SimRegion::new(64);
    region.write(0, &[1; 8]);
    region.flush(0, 64);
    region.write(8, &[2; 8]);
    region.fence();
    // The flushed content is durable; the later store may or may not be.
    let persistent = region.persistent_image();
    assert_eq!(persistent[..8], [1; 8]);
    assert_eq!(persistent[8..16], [0; 8]);
    let images = all_images(&region.crash_point());
    assert_eq!(images.len(), 2);
    assert!(images.iter().all(|i| i[..8] == [1; 8]));
    assert!(images.iter().any(|i| i[8..16] == [2; 8]));
    assert!(images.iter().any(|i| i[8..16] == [0; 8]));
}

#[test]
fn write_nt_is_durable_at_next_fence() {
    let region = SimRegion::new(256);
    region.write_nt(10, &[5; 100]);
    assert!(region.crash_point().state_count() > 1);
    region.fence();
    assert_eq!(region.persistent_image()[10..110], [5; 100]);
    assert_eq!(region.pending_line_count(), 0);
}

#[test]
fn store_u64_nt_is_atomic_and_durable_at_next_fence() {
    let region = SimRegion::new(256);
    region.store_u64(64, u64::MAX);
    region.persist(64, 8);
    region.store_u64_nt(64, 0x0102_0304_0506_0708);
    let point = region.crash_point();
    let words: HashSet<u64> = all_images(&point)
        .iter()
        .map(|image| u64::from_le_bytes(image[64..72].try_into().expect("8 bytes")))
        .collect();
    // Never torn: the old word or the new one, whole.
    assert_eq!(words, HashSet::from([u64::MAX, 0x0102_0304_0506_0708]));
    region.fence();
    assert_eq!(
        region.persistent_image()[64..72],
        0x0102_0304_0506_0708u64.to_le_bytes()
    );
}

#[test]
fn copy_nt_within_is_durable_at_next_fence() {
    let region = SimRegion::new(1024);
    region.write(0, &[7; 200]);
    region.persist(0, 200);
    region.copy_nt_within(0, 512, 200);
    assert!(region.crash_point().state_count() > 1);
    region.fence();
    assert_eq!(region.persistent_image()[512..712], [7; 200]);
}

#[test]
fn from_image_reopens_a_crash_image() {
    let region = SimRegion::new(200);
    region.write(0, b"hello");
    region.persist(0, 5);
    region.write(150, b"maybe");
    let point = region.crash_point();
    for image in point.images() {
        let reopened = SimRegion::from_image(image.clone());
        assert_eq!(reopened.len(), 200);
        assert_eq!(reopened.persistent_image(), image);
        let mut buf = [0u8; 5];
        reopened.read(0, &mut buf);
        assert_eq!(&buf, b"hello");
    }
}

#[test]
fn sampling_is_reproducible_by_seed() {
    let run = |seed: u64| {
        let region = SimRegion::new(64 * 64);
        region.set_crash_config(CrashConfig {
            exhaustive_limit: 16,
            sample_count: 20,
            seed,
        });
        for line in 0..32u64 {
            region.write(line * 64, &[line as u8 + 1; 16]);
        }
        let point = region.crash_point();
        assert!(!point.is_exhaustive());
        assert_eq!(point.state_count(), 3u64.pow(32));
        assert_eq!(point.image_count(), 20);
        (all_images(&point), point.describe(5))
    };
    let (a, description) = run(7);
    assert_eq!(a, run(7).0);
    assert_ne!(a, run(8).0);
    assert!(description.contains("seed 7"), "{description}");
    // Image 0: nothing persisted; image 1: everything at its cache content.
    assert!(a[0].iter().all(|&b| b == 0));
    assert_eq!(a[1][..16], [1; 16]);
    assert_eq!(a[1][31 * 64..31 * 64 + 16], [32; 16]);
}

#[test]
fn state_count_saturates() {
    let region = SimRegion::new(64 * 100);
    for line in 0..100u64 {
        region.write(line * 64, &[1; 64]);
    }
    assert_eq!(region.crash_point().state_count(), u64::MAX);
}

#[test]
#[should_panic(expected = "must not touch the region")]
fn hook_must_not_reenter() {
    let region = Arc::new(SimRegion::new(64));
    let inner = Arc::clone(&region);
    region.set_fence_hook(Box::new(move |_| {
        inner.write(0, &[1]);
    }));
    region.fence();
}

/// A small log-append run: 4 records of 16 bytes, each persisted and followed by a persisted
/// 8-byte commit counter. Crash images explored: per record 3 (nothing, first word, both
/// words) and per counter 2 (old, new) = 4 × (3 + 2) = 20.
#[test]
fn small_run_explores_expected_number_of_images() {
    let region = SimRegion::new(1024);
    let checked = Arc::new(Mutex::new((0u64, 0u64)));
    let sink = Arc::clone(&checked);
    region.set_fence_hook(Box::new(move |point| {
        let mut counts = sink.lock().unwrap_or_else(|e| e.into_inner());
        point.for_each_image(|_, image| {
            counts.0 += 1;
            // Every committed record (counter value c => records 0..c) is whole.
            let committed = u64::from_le_bytes(image[640..648].try_into().expect("8 bytes"));
            assert!(committed <= 4);
            for record in 0..committed as usize {
                let expect = [record as u8 + 1; 16];
                if image[record * 64..record * 64 + 16] == expect {
                    counts.1 += 1;
                } else {
                    panic!("committed record {record} lost: {}", point.describe(0));
                }
            }
        });
    }));
    for record in 0..4u64 {
        region.write(record * 64, &[record as u8 + 1; 16]);
        region.persist(record * 64, 16); // persist: the record, before its commit
        region.store_u64(640, record + 1);
        region.persist(640, 8); // persist: the commit counter
    }
    let (images, records_checked) = *checked.lock().unwrap_or_else(|e| e.into_inner());
    println!(
        "small run: {images} crash images checked, {records_checked} committed records verified"
    );
    assert_eq!(images, 20);
    // Records checked: at the record fence of record r, 3 images with counter r check r
    // records each; at its commit fence the old counter checks r and the new one r + 1:
    // sum over r = 0..4 of (3r + 2r + 1) = 34.
    assert_eq!(records_checked, 34);
    assert_eq!(region.fence_count(), 8);
}

#[derive(Clone, Debug)]
enum Op {
    Write { off: u64, len: u64, byte: u8 },
    StoreU64 { word: u64, value: u8 },
    Flush { off: u64, len: u64 },
    WriteNt { off: u64, len: u64, byte: u8 },
    Fence,
}

const PROP_LEN: u64 = 256;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (64..PROP_LEN, 1..40u64, 1..=255u8).prop_map(|(off, len, byte)| Op::Write {
            off,
            len: len.min(PROP_LEN - off),
            byte
        }),
        (0..8u64, 1..=255u8).prop_map(|(word, value)| Op::StoreU64 { word, value }),
        (0..PROP_LEN, 1..100u64).prop_map(|(off, len)| Op::Flush {
            off,
            len: len.min(PROP_LEN - off)
        }),
        (64..PROP_LEN, 1..40u64, 1..=255u8).prop_map(|(off, len, byte)| Op::WriteNt {
            off,
            len: len.min(PROP_LEN - off),
            byte
        }),
        Just(Op::Fence),
    ]
}

/// Reference facts about each line: every content it ever had, whether its current content
/// is certainly durable (no store since a flush that a fence then completed), and whether a
/// non-temporal store ever wrote to it (then it may persist word by word).
struct Model {
    contents: Vec<HashSet<Vec<u8>>>,
    flushed: Vec<bool>,
    durable: Vec<bool>,
    non_temporal: Vec<bool>,
}

impl Model {
    fn check(&self, region: &SimRegion, exhaustive: bool, images: &[Vec<u8>]) {
        let cache = region.cache_image();
        if exhaustive {
            let distinct: HashSet<&Vec<u8>> = images.iter().collect();
            assert_eq!(
                distinct.len(),
                images.len(),
                "exhaustive images are distinct"
            );
        }
        for image in images {
            for line in 0..(PROP_LEN / 64) as usize {
                let range = line * 64..line * 64 + 64;
                if self.non_temporal[line] {
                    // Each 8-byte word at a value it had in some content of the line.
                    for w in 0..8 {
                        let word = &image[range.start + w * 8..range.start + w * 8 + 8];
                        assert!(self.contents[line]
                            .iter()
                            .any(|c| &c[w * 8..w * 8 + 8] == word));
                    }
                } else {
                    assert!(self.contents[line].contains(&image[range.clone()]));
                }
                if self.durable[line] {
                    assert_eq!(image[range.clone()], cache[range.clone()]);
                }
            }
            // Line 0 holds only whole 8-byte values (k repeated in every byte) or zero.
            for word in image[..64].chunks(8) {
                assert!(
                    word.iter().all(|&b| b == word[0]),
                    "torn 8-byte store {word:?}"
                );
            }
        }
    }

    /// Record a store of `[off, off + len)`: `before` and `after` are the cache images around it.
    fn stored(&mut self, before: &[u8], after: &[u8], off: u64, len: u64) {
        for line in off / 64..=(off + len - 1) / 64 {
            let line = line as usize;
            self.durable[line] = false;
            self.flushed[line] = false;
            // Every word-granular prefix of the store is a content the line had.
            let start = line as u64 * 64;
            let mut content = before[line * 64..line * 64 + 64].to_vec();
            for pos in start.max(off)..(start + 64).min(off + len) {
                content[(pos - start) as usize] = after[pos as usize];
                if pos % 8 == 7 || pos + 1 == off + len {
                    self.contents[line].insert(content.clone());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn crash_images_respect_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let (region, seen) = recording_region(PROP_LEN);
        region.set_crash_config(CrashConfig { exhaustive_limit: 4096, sample_count: 64, seed: 3 });
        let lines = (PROP_LEN / 64) as usize;
        let mut model = Model {
            contents: vec![HashSet::from([vec![0u8; 64]]); lines],
            flushed: vec![false; lines],
            durable: vec![true; lines],
            non_temporal: vec![false; lines],
        };
        for op in ops {
            match op {
                Op::Write { off, len, byte } | Op::WriteNt { off, len, byte } => {
                    let data = vec![byte; len as usize];
                    let before = region.cache_image();
                    if matches!(op, Op::WriteNt { .. }) {
                        region.write_nt(off, &data);
                    } else {
                        region.write(off, &data);
                    }
                    model.stored(&before, &region.cache_image(), off, len);
                    if matches!(op, Op::WriteNt { .. }) {
                        for line in off / 64..=(off + len - 1) / 64 {
                            model.flushed[line as usize] = true;
                            model.non_temporal[line as usize] = true;
                        }
                    }
                }
                Op::StoreU64 { word, value } => {
                    let before = region.cache_image();
                    region.store_u64(word * 8, u64::from_ne_bytes([value; 8]));
                    model.stored(&before, &region.cache_image(), word * 8, 8);
                }
                Op::Flush { off, len } => {
                    region.flush(off, len);
                    for line in off / 64..=(off + len - 1) / 64 {
                        model.flushed[line as usize] = true;
                    }
                }
                Op::Fence => {
                    region.fence();
                    let points = take(&seen);
                    prop_assert_eq!(points.len(), 1);
                    let (exhaustive, images) = &points[0];
                    model.check(&region, *exhaustive, images);
                    for line in 0..lines {
                        if model.flushed[line] {
                            model.durable[line] = true;
                            model.flushed[line] = false;
                        }
                    }
                    for line in 0..lines {
                        if model.durable[line] {
                            let range = line * 64..line * 64 + 64;
                            prop_assert_eq!(
                                &region.persistent_image()[range.clone()],
                                &region.cache_image()[range]
                            );
                        }
                    }
                }
            }
        }
        let point = region.crash_point();
        let images = all_images(&point);
        model.check(&region, point.is_exhaustive(), &images);
        if point.is_exhaustive() {
            prop_assert_eq!(images.len() as u64, point.state_count());
        }
        prop_assert_eq!(&images[0], &region.persistent_image());
    }
}

/// The simulator must catch an ordering bug: a commit word persisted in the same fence as the
/// record it exposes can reach the media while the record does not.
#[test]
fn missing_fence_between_record_and_commit_is_caught() {
    let region = SimRegion::new(1024);
    region.write(64, &[7; 100]);
    region.store_u64(0, 1);
    region.flush(64, 100);
    region.flush(0, 8);
    let point = region.crash_point();
    let mut torn = 0;
    point.for_each_image(|_, image| {
        if image[0] == 1 && image[64..164] != [7; 100] {
            torn += 1;
        }
    });
    // Commit word: 2 choices; record lines 1 (8 words), 2 (5 words): 9 × 6 = 54 record states,
    // of which 53 are not the whole record.
    assert_eq!(point.state_count(), 2 * 9 * 6);
    assert_eq!(torn, 53);
}

/// An engine generic over `R: Region` can own an `Arc<SimRegion>` while the harness keeps
/// another handle to take crash images.
#[test]
fn shared_handle_is_a_region() {
    fn engine_commit<R: Region>(region: &R) {
        region.write(0, b"commit");
        region.persist(0, 6);
    }
    let harness = Arc::new(SimRegion::new(128));
    let engine = Arc::clone(&harness);
    engine_commit(&engine);
    assert_eq!(&harness.persistent_image()[..6], b"commit");
    assert_eq!(Region::stats(&engine).fences, 1);
}

/// A fence completes only the calling thread's flushes.
#[test]
fn fence_completes_only_its_own_threads_flushes() {
    let region = Arc::new(SimRegion::new(256));
    region.write(0, &[1; 8]);
    let other = Arc::clone(&region);
    std::thread::spawn(move || other.flush(0, 8))
        .join()
        .expect("flusher");
    region.fence();
    assert_eq!(
        region.persistent_image()[..8],
        [0; 8],
        "another thread's flush is not fenced"
    );
    assert_eq!(region.pending_line_count(), 1);
    let other = Arc::clone(&region);
    std::thread::spawn(move || {
        other.flush(0, 8);
        other.fence();
    })
    .join()
    .expect("flusher");
    assert_eq!(region.persistent_image()[..8], [1; 8]);
    assert_eq!(region.pending_line_count(), 0);

    // Two threads flush different contents of one line; the older thread's fence makes only
    // its content durable, the newer one stays pending until its own fence.
    region.write(64, &[2; 8]);
    region.flush(64, 8);
    let other = Arc::clone(&region);
    let (to_main, from_thread) = std::sync::mpsc::channel();
    let (to_thread, from_main) = std::sync::mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        other.write(72, &[3; 8]);
        other.flush(64, 16);
        to_main.send(()).expect("send");
        from_main.recv().expect("recv");
        other.fence();
    });
    from_thread.recv().expect("recv");
    region.fence();
    assert_eq!(region.persistent_image()[64..80], [[2; 8], [0; 8]].concat());
    to_thread.send(()).expect("send");
    handle.join().expect("thread");
    assert_eq!(region.persistent_image()[64..80], [[2; 8], [3; 8]].concat());
    assert_eq!(region.pending_line_count(), 0);
}

/// A hook may run recovery on another SimRegion with its own hook; after that nested fence
/// the outer region is still protected against re-entry.
#[test]
fn hooks_nest_over_different_regions() {
    let outer = Arc::new(SimRegion::new(64));
    let outer_in_hook = Arc::clone(&outer);
    let nested_points = Arc::new(Mutex::new(0u64));
    let counter = Arc::clone(&nested_points);
    outer.set_fence_hook(Box::new(move |point| {
        let recovered = SimRegion::from_image(point.image(0));
        let counter = Arc::clone(&counter);
        recovered.set_fence_hook(Box::new(move |_| {
            *counter.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }));
        recovered.persist(0, 8);
        // Still inside the outer hook: touching the outer region must be refused.
        let reentry =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| outer_in_hook.fence_count()));
        assert!(
            reentry.is_err(),
            "re-entry after a nested hook must still panic"
        );
    }));
    outer.fence();
    assert_eq!(*nested_points.lock().unwrap_or_else(|e| e.into_inner()), 1);
    assert_eq!(outer.fence_count(), 1);
}

/// The buffer-reusing accessors give what the copying ones give.
#[test]
fn buffer_reusing_accessors_match_the_copying_ones() {
    let region = SimRegion::new(300); // not a whole number of lines
    region.write(0, b"durable");
    region.persist(0, 7);
    region.write(8, b"flushed, no fence");
    region.flush(8, 17);
    region.write(130, &[9; 40]);
    region.write(290, b"tail");
    let point = region.crash_point();
    assert_eq!(point.persistent_image(), point.image(0));
    assert_eq!(point.persistent_image(), region.persistent_image());
    assert_ne!(region.persistent_image(), region.cache_image());
    let mut buf = vec![7; 1000];
    for index in 0..point.image_count() {
        point.image_into(index, &mut buf);
        assert_eq!(buf, point.image(index));
    }
    let durable = region.persistent_image();
    assert_eq!(durable.len(), 300);
    assert_eq!(region.into_persistent_image(), durable);
}

/// Recovering an image changes only the lines the region reports as written, so rewriting
/// those lines (and the pending ones) over a used buffer gives every image exactly.
#[test]
fn images_over_a_used_buffer_equal_fresh_images() {
    let region = SimRegion::new(64 * 40 + 24);
    for step in 0..30u64 {
        let off = (step * 389) % (64 * 40);
        region.write(off, &[step as u8 + 1; 20]);
        if step % 3 == 0 {
            region.flush(off, 20);
        }
        if step % 7 == 0 {
            region.fence();
        }
    }
    let point = region.crash_point();
    let mut buf = point.image(0);
    let mut stale = Vec::new();
    for index in 0..point.image_count() {
        point.image_over(index, &mut buf, &stale);
        assert_eq!(buf, point.image(index), "image {index}");
        // A "recovery" that writes some lines, persists some, leaves others pending.
        let used = SimRegion::from_image(std::mem::take(&mut buf));
        for k in 0..5u64 {
            let off = (index * 131 + k * 577) % (64 * 40);
            used.write(off, &[0xEE; 9]);
            if k % 2 == 0 {
                used.persist(off, 9);
            }
        }
        let (image, written) = used.into_persistent_image_and_written();
        buf = image;
        stale = written;
    }
    let mut short = vec![1; 10];
    point.image_over(1, &mut short, &[]);
    assert_eq!(
        short,
        point.image(1),
        "a buffer of another length is rewritten whole"
    );
}

/// A line written with non-temporal stores persists as any subset of its 8-byte words: its
/// last word (a seal) may persist without its first, which store order would forbid for
/// ordinary stores.
#[test]
fn non_temporal_line_persists_as_any_subset_of_its_words() {
    let region = SimRegion::new(4096);
    let mut line = [0u8; 64];
    for (w, chunk) in line.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(w as u64 + 1).to_le_bytes());
    }
    region.write_line_nt(64, &line);
    let point = region.crash_point();
    assert_eq!(point.state_count(), 256, "{}", point.describe(0));
    let seal_without_body = point.images().any(|image| {
        let word = |w: usize| image[64 + w * 8];
        word(7) == 8 && word(0) == 0
    });
    assert!(
        seal_without_body,
        "the seal never persisted before the body"
    );
    // The same line written by ordinary stores tears only in store order.
    let ordinary = SimRegion::new(4096);
    ordinary.write(64, &line);
    let point = ordinary.crash_point();
    assert_eq!(point.state_count(), 9);
    assert!(!point
        .images()
        .any(|image| image[64 + 56] == 8 && image[64] == 0));
}
