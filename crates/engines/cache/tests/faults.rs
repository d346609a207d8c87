//! Faults of the home file system during write-back (hostfs::Faulty over the crash model):
//! EIO on write and ENOSPC on fdatasync while chunks are flushed home leave the chunks dirty
//! in PM (nothing lost: reads return the data), surface in `stats` (flush_errors,
//! flush_error_pending) and in the next fsync of the file; once the fault is gone, the next
//! fsync flushes the file and the home file holds the data.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, CacheStore};
use hostfs::{
    Fault, FaultKind, FaultOp, FaultPlan, Faulty, HostFs, OpenOptions, SimConfig, SimHostFs,
};
use pmem::DramRegion;
use std::path::Path;
use store::{OpenFlags, Store, ROOT_INO};

fn stat(s: &dyn Store, name: &str) -> u64 {
    s.stats()
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| *v)
}

fn home_contents<H: HostFs>(host: &H, name: &str) -> Vec<u8> {
    let f = host
        .open(Path::new(name), &OpenOptions::read_only())
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let n = host.read_full_at(&f, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn check_fault(op: FaultOp, kind: FaultKind) {
    let plan = FaultPlan::new();
    let host = Faulty::new(SimHostFs::new(SimConfig::default()), plan.clone());
    let config = CacheConfig {
        flush_period: None,
        ..CacheConfig::test_min()
    };
    let s = CacheStore::create_on(DramRegion::new(8 << 20), host, &config, b"sim").unwrap();
    let m = s.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let fh = s.open(m.ino, rw).unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    s.write(fh, 0, &data).unwrap();
    plan.add(Fault {
        times: 1000,
        ..Fault::once(op, kind)
    });
    let _ = s.cache().flush_all(); // the periodic flush (fails here)
    assert!(stat(&s, "flush_errors") > 0, "{op:?}: {:?}", s.stats());
    assert_eq!(stat(&s, "flush_error_pending"), 1);
    assert!(
        s.fsync(fh, false).is_err(),
        "{op:?}: fsync reports the failed write-back"
    );
    let mut back = vec![0u8; data.len()];
    assert_eq!(s.read(fh, 0, &mut back).unwrap(), data.len());
    assert!(back == data, "{op:?}: nothing lost, the chunks stay in PM");
    if op == FaultOp::Write {
        assert!(home_contents(s.host(), "f") != data, "{op:?}: not home yet");
    }
    plan.clear();
    s.fsync(fh, false).unwrap();
    assert_eq!(
        home_contents(s.host(), "f"),
        data,
        "{op:?}: home after the fault is gone"
    );
    assert_eq!(
        stat(&s, "flush_error_pending"),
        0,
        "{op:?}: nothing pending any more"
    );
    s.release(fh).unwrap();
    s.unmount().unwrap();
}

#[test]
fn eio_on_home_writes_keeps_chunks_dirty_and_reports_it() {
    check_fault(FaultOp::Write, FaultKind::Io);
}

#[test]
fn enospc_on_home_sync_keeps_chunks_dirty_and_reports_it() {
    check_fault(FaultOp::SyncFile, FaultKind::NoSpace);
}
