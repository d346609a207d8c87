//! Hostile log pools, deterministically: the `mmio_open` fuzz target's entry point
//! (tests/common/hostile.rs) over a few hundred mutated images, so that every test run
//! checks what the fuzzer checks — open gives Ok or a clean error, the store works or fails
//! cleanly afterwards, and no path the engine hands the host file system leaves the store
//! directory. One seed drives the inputs; it is printed with the failing input's index.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "common/hostile.rs"]
mod hostile;

use hostile::{exercise, image_of, BASE_KINDS, MUTATION_LEN};

const SEED: u64 = 0x6d6d_696f_2d66_757a;
const INPUTS: usize = 1000;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Input `i`: base `i % BASE_KINDS`, 1..=4 mutations, every other one re-sealed.
fn input(i: usize, rng: &mut u64) -> Vec<u8> {
    let mut data = vec![(i % BASE_KINDS) as u8];
    let count = 1 + (splitmix(rng) % 4) as usize;
    for k in 0..count {
        let r = splitmix(rng);
        let mut op = (r & 0x7f) as u8;
        if i % 2 == 1 && k == 0 {
            op |= 0x80;
        }
        data.push(op);
        data.extend_from_slice(&((r >> 8) as u32).to_le_bytes());
        data.extend_from_slice(&splitmix(rng).to_le_bytes());
    }
    assert_eq!((data.len() - 1) % MUTATION_LEN, 0);
    data
}

#[test]
fn unmutated_bases_open_and_work() {
    for kind in 0..BASE_KINDS {
        let (pool, host) = image_of(&[kind as u8]).unwrap();
        let out = exercise(pool, &host);
        assert!(out.opened, "base image {kind} must open");
        assert!(
            out.paths_seen > 0,
            "base image {kind}: the engine reached its files"
        );
    }
}

#[test]
fn mutated_pools_open_cleanly_or_fail_cleanly_and_stay_in_the_store() {
    let mut rng = SEED;
    let (mut opened, mut refused) = (0, 0);
    for i in 0..INPUTS {
        let data = input(i, &mut rng);
        let (pool, host) = image_of(&data).unwrap();
        let out = std::panic::catch_unwind(|| exercise(pool, &host)).unwrap_or_else(|_| {
            panic!("seed {SEED:#x} input {i} ({data:02x?}): a panic on a hostile pool")
        });
        if out.opened {
            opened += 1;
        } else {
            refused += 1;
        }
    }
    println!("{INPUTS} hostile pools: {opened} opened, {refused} refused with an error");
    assert_eq!(opened + refused, INPUTS);
    assert!(
        opened > 0 && refused > 0,
        "the mutations reach both outcomes"
    );
}

#[test]
fn intent_records_naming_paths_outside_the_store_are_refused() {
    // Mutation kind 4 writes a valid-looking intent record with a hostile path; re-sealed.
    // value: bits 8.. pick the path, bit 4 puts it second (only renames and removals
    // carry a second path), bits 0..2 the kind (1 + value % 4).
    for (k, value) in [0u64, 0x101, 0x202, 0x303, 0x401, 0x500, 0x612, 0x711]
        .into_iter()
        .enumerate()
    {
        let mut data = vec![(k % BASE_KINDS) as u8, 0x80 | (4 << 3) | 5];
        data.extend_from_slice(&(k as u32).to_le_bytes());
        data.extend_from_slice(&value.to_le_bytes());
        let (pool, host) = image_of(&data).unwrap();
        let out = exercise(pool, &host);
        assert!(
            !out.opened,
            "hostile intent path {value:#x} must be refused"
        );
    }
}

#[test]
fn the_path_oracle_flags_paths_outside_the_store() {
    use hostfs::HostFs;
    let rec = hostile::Recording::new(hostfs::SimHostFs::new(hostfs::SimConfig::default()));
    let _ = rec.stat(std::path::Path::new("inside/file"));
    let _ = rec.stat(std::path::Path::new(""));
    assert!(rec.escapes().is_empty());
    let _ = rec.stat(std::path::Path::new("../outside"));
    let _ = rec.rename(
        std::path::Path::new("a"),
        std::path::Path::new("/etc/passwd"),
    );
    assert_eq!(rec.escapes().len(), 2, "{:?}", rec.escapes());
}
