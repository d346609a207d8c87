//! Tests of the accounting wrapper: exact counts for known sequences.

use super::*;
use crate::{DramRegion, SimRegion};

fn area<'a>(report: &'a AccountingReport, name: &str) -> &'a AreaReport {
    report
        .area(name)
        .unwrap_or_else(|| panic!("area {name} missing"))
}

#[test]
fn counts_per_area_exactly() {
    let region = Accounted::new(DramRegion::new(64 * 1024));
    region.define_area("metadata log", 0, 4096);
    region.define_area("data", 8192, 16384);

    region.write(100, &[1; 100]); // metadata log: 100 bytes, lines 1..=3
    region.flush(100, 100);
    region.fence();
    region.store_u64(8192, 7); // data: 8 bytes
    region.write_nt(8200, &[2; 120]); // data: 120 bytes, lines 128..=129 (2 lines)
    region.write(4000, &[3; 200]); // 96 bytes metadata log, 104 bytes unnamed
    region.flush(4000, 200); // lines 62, 63 in the log; 64, 65 unnamed
    region.fence();
    region.fence(); // nothing flushed since the last fence: no area charged

    let report = region.report();
    let log = area(&report, "metadata log");
    assert_eq!(
        (log.bytes_stored, log.lines_flushed, log.fences),
        (196, 3 + 2, 2)
    );
    let data = area(&report, "data");
    assert_eq!(
        (data.bytes_stored, data.lines_flushed, data.fences),
        (128, 2, 1)
    );
    let unnamed = area(&report, UNNAMED_AREA);
    assert_eq!(
        (unnamed.bytes_stored, unnamed.lines_flushed, unnamed.fences),
        (104, 2, 1)
    );
    assert_eq!(
        report.total,
        RegionStats {
            bytes_stored: 428,
            lines_flushed: 9,
            fences: 3
        }
    );
    assert_eq!(report.bytes_flushed(), 576);
    assert_eq!(report.areas.len(), 3);
    assert_eq!(report.areas[0].name, "metadata log");
}

#[test]
fn block_write_counts_and_reset() {
    let region = Accounted::with_block_size(SimRegion::new(16384), 4096);
    region.write(0, &[1; 64]);
    for _ in 0..5 {
        region.persist(0, 64); // block 0: 1 line each time
    }
    region.persist(4032, 128); // lines 63 (block 0) and 64 (block 1)
    region.write_nt(8192, &[9; 4096]); // block 2: 64 lines
    region.fence();
    let report = region.report();
    assert_eq!(report.block_writes, vec![6, 1, 64, 0]);
    assert_eq!(report.block_writes_max(), 64);
    let text = report.to_string();
    assert!(text.contains("written: 3 of 4"), "{text}");

    region.reset();
    let report = region.report();
    assert_eq!(report.block_writes, vec![0; 4]);
    assert_eq!(report.total, RegionStats::default());
    assert!(report
        .areas
        .iter()
        .all(|a| a.bytes_stored == 0 && a.lines_flushed == 0 && a.fences == 0));
    region.persist(0, 1);
    assert_eq!(region.report().total.fences, 1);
}

#[test]
fn redefining_an_area_replaces_it() {
    let region = Accounted::new(DramRegion::new(8192));
    region.define_area("log", 0, 1024);
    region.define_area("log", 4096, 1024);
    region.write(0, &[1; 10]);
    region.write(4096, &[1; 20]);
    let report = region.report();
    assert_eq!(report.areas.len(), 2);
    assert_eq!(area(&report, "log").bytes_stored, 20);
    assert_eq!(area(&report, UNNAMED_AREA).bytes_stored, 10);
}
