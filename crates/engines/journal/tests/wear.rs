//! Wear-aware allocation (seed §3.3, Fig. 14): after many random 4 KiB over-writes on a
//! journal of 1,024 blocks, the most-written journal block has at most 1.10 times the mean
//! write count; without the wear strategy the spread is reported (and is worse).
//!
//! The full run (10^6 over-writes) is ignored by default:
//! `cargo test -p atomfs-journal --release --test wear -- --ignored`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use journal::{BlockKey, Journal, JournalConfig, Tx, Variant};
use pmem::DramRegion;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

/// Max/mean write count after `writes` random over-writes of `home_blocks` home blocks
/// (with `hot_percent` of them going to the first 16 blocks).
fn wear_ratio(
    variant: Variant,
    writes: u64,
    home_blocks: u32,
    hot_percent: u32,
) -> (f64, u32, f64) {
    let cfg = JournalConfig {
        journal_blocks: 1024,
        variant,
        wear_slack: 4,
        ..JournalConfig::test_min()
    };
    let g = journal::layout::Geometry::new(1024).unwrap();
    let region = DramRegion::new(g.region_len());
    let namer: journal::home::HomeNamer = Arc::new(|id| PathBuf::from(format!("h{id}")));
    let j = Journal::create(region, SimHostFs::default(), namer, cfg).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut block = vec![0u8; 4096];
    for i in 0..writes {
        let hot = rng.gen_range(0..100) < hot_percent;
        let block_nr = rng.gen_range(0..if hot { 16 } else { home_blocks });
        let key = BlockKey {
            file: 1,
            block: block_nr,
        };
        block[(i % 4096) as usize] = i as u8;
        let mut tx = Tx::new();
        tx.put_block(key, &block);
        j.commit(tx).unwrap();
    }
    let counts = j.write_counts();
    let max = *counts.iter().max().unwrap();
    let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / counts.len() as f64;
    (max as f64 / mean, max, mean)
}

fn check(writes: u64) {
    for hot_percent in [0, 90] {
        let (ratio, max, mean) = wear_ratio(Variant::NJS, writes, 4096, hot_percent);
        println!("wear-aware, {hot_percent}% hot: {writes} over-writes, max {max}, mean {mean:.1}, max/mean {ratio:.3}");
        let no_wear = Variant {
            wear: false,
            ..Variant::NJS
        };
        let (ratio_off, max_off, mean_off) = wear_ratio(no_wear, writes, 4096, hot_percent);
        println!("no-wear,    {hot_percent}% hot: {writes} over-writes, max {max_off}, mean {mean_off:.1}, max/mean {ratio_off:.3}");
        assert!(
            ratio <= 1.10,
            "max/mean write count {ratio:.3} > 1.10 ({hot_percent}% hot)"
        );
    }
}

#[test]
fn wear_is_even_after_100k_overwrites() {
    check(100_000);
}

#[test]
#[ignore = "long: run with --release -- --ignored"]
fn wear_is_even_after_a_million_overwrites() {
    check(1_000_000);
}
