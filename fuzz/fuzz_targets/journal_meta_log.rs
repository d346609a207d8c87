//! Fuzz target `journal_meta_log`: hostile metadata logs of the journal engine (the records
//! after the header: inodes, Node records with link targets, device numbers and punched
//! blocks, entries, extended attributes, extents, home records) through the record parser
//! and replay, as open reads them. Never a panic; every record that parses encodes back to
//! bytes that parse to the same record.
//!
//! `cargo fuzz run journal_meta_log` (long runs); a short deterministic run is the unit test
//! `damaged_logs_replay_without_panics` of crates/engines/journal/src/engine/meta_log.rs.
#![no_main]

use journal::meta_log::{parse_log, replay_log};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(records) = parse_log(data) {
        let mut again = Vec::new();
        for r in &records {
            r.encode(&mut again);
        }
        assert_eq!(parse_log(&again), Ok(records));
    }
    let _ = replay_log(data, 1 << 20);
});
