//! Regression test: the background checkpoint lost committed redo data of a page the file
//! gained after the checkpoint took its snapshot of the file.
//!
//! The story. The checkpoint thread (and `checkpoint_all`) copies committed redo entries home
//! without the file's lock: it takes a snapshot of the file's mapping and host length, then
//! drains the file's queue batch after batch while commits go on. A commit that grows the file
//! (a write past the committed size goes home directly) and a later commit that overwrites the
//! new page (a redo entry) could both land while the drain ran. The drain then took the new
//! entry (committed), clipped its chunk to the *snapshot's* host length — which ended where the
//! new page begins — so it copied nothing home, and freed the entry. The committed overwrite
//! was gone: reads returned the page as first appended, and so did every recovery. Under
//! SQLite with the journal off (the atomfs VFS relies on O_ATOMIC) that is a torn transaction:
//! a bank-transfer workload on an mmio store lost part of committed transactions (sum of the
//! balances off) within a second of running.
//!
//! The test makes the interleaving deterministic: the log pool is wrapped in a region whose
//! fence blocks on the checkpointing thread (after the snapshot, inside the drain, holding the
//! file's checkpoint mutex) until the main thread has grown the file by a page and overwritten
//! that page, each with its own commit.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{HostMedia, MmioConfig, MmioStore, PolicyMode};
use pmem::{Region, RegionStats, SimRegion};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use store::Store;

/// Where the gated thread stands.
#[derive(Default)]
struct GateState {
    /// The gated thread is blocked in a fence.
    arrived: bool,
    /// The gated thread may go on.
    open: bool,
}

/// A log pool whose first fence on the armed thread waits until the gate opens.
struct GatedPool {
    inner: Arc<SimRegion>,
    armed: Mutex<Option<std::thread::ThreadId>>,
    done: AtomicBool,
    state: Arc<(Mutex<GateState>, Condvar)>,
}

impl GatedPool {
    fn hold_if_armed(&self) {
        let armed = *self.armed.lock().unwrap();
        if armed != Some(std::thread::current().id()) || self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        let (lock, cv) = &*self.state;
        let mut st = lock.lock().unwrap();
        st.arrived = true;
        cv.notify_all();
        while !st.open {
            st = cv.wait(st).unwrap();
        }
    }
}

impl Region for GatedPool {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.inner.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.inner.write(off, data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.inner.fill(off, len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.inner.write_nt(off, data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.inner.flush(off, len)
    }
    fn fence(&self) {
        self.hold_if_armed();
        self.inner.fence()
    }
    fn stats(&self) -> RegionStats {
        self.inner.stats()
    }
}

const PAGE: usize = 4096;

#[test]
fn checkpoint_keeps_redo_data_of_a_page_grown_after_its_snapshot() {
    let cfg = MmioConfig {
        policy_mode: PolicyMode::Redo,
        ..MmioConfig::test_min()
    };
    let len = cfg.log_pool_len;
    let sim = Sim {
        region: Arc::new(SimRegion::new(len)),
        host: hostfs::SimHostFs::new(host_config()),
    };
    let state: Arc<(Mutex<GateState>, Condvar)> = Arc::default();
    let pool = GatedPool {
        inner: sim.region.clone(),
        armed: Mutex::new(None),
        done: AtomicBool::new(false),
        state: state.clone(),
    };
    let media = HostMedia::on(sim.host.clone());
    let s = MmioStore::create_on(pool, media, &cfg).unwrap();
    let fh = open_rw(&s, "/f", false);
    // Three pages, appended (home directly), then page 0 overwritten: one committed redo entry,
    // so that the checkpoint below has a batch to fence.
    s.write(fh, 0, &[b'a'; 3 * PAGE]).unwrap();
    s.write(fh, 0, &[b'b'; PAGE]).unwrap();
    assert_eq!(
        s.live_entries(fh).unwrap(),
        1,
        "the test needs a committed entry"
    );

    std::thread::scope(|scope| {
        let checkpointer = scope.spawn(|| {
            *s.log_pool().armed.lock().unwrap() = Some(std::thread::current().id());
            s.checkpoint_all()
        });
        let (lock, cv) = &*state;
        let mut st = lock.lock().unwrap();
        while !st.arrived {
            st = cv.wait(st).unwrap();
        }
        drop(st);
        // The checkpoint has its snapshot (3 pages) and is inside its drain. The file grows by
        // a page (committed), then that page is overwritten (a committed redo entry).
        s.write(fh, 3 * PAGE as u64, &[b'c'; PAGE]).unwrap();
        s.write(fh, 3 * PAGE as u64, &[b'd'; PAGE]).unwrap();
        lock.lock().unwrap().open = true;
        cv.notify_all();
        checkpointer.join().unwrap().unwrap();
    });
    s.checkpoint_all().unwrap();

    let mut want = vec![b'a'; 4 * PAGE];
    want[..PAGE].fill(b'b');
    want[3 * PAGE..].fill(b'd');
    let got = read_path(&s, "/f");
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "the committed overwrite of the grown page was lost: page 3 reads {:?}",
        got[3 * PAGE] as char
    );
    // A power loss and a process kill (the cache image survives) both recover it too.
    for image in [sim.persistent_image(), sim.cache_image()] {
        let (_r, s2) = sim_reopen(image, &cfg).unwrap();
        assert!(read_path(&s2, "/f") == want, "recovered file differs");
    }
}
