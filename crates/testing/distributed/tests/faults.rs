//! Faults of the GlusterFS servers under each host-file engine (src/faults.rs has the
//! scenario and its oracle): the brick of the single-brick volume SIGKILLed by its pid while
//! commits, checkpoints and flushes run, then restarted (`gluster volume start VOL force`);
//! the client mount lost (`umount -l`) and mounted again; the FUSE client process SIGKILLed
//! (the store then has to be reopened on the new mount); one brick of the replica volume
//! SIGKILLed while writes go on, restarted and healed. After each, every acknowledged
//! transaction is present and whole once the store is reopened, and fsck is clean; what the
//! store did while the volume was away is printed (`--nocapture`).
//!
//! The `#[ignore]`d `keeps_committing_into_pm_while_the_brick_is_away` tests check what the
//! store should do while its home file system is away and does not yet (each ignore reason
//! says what it does now): keep accepting commits into PM, fail with a clear "home file system
//! unavailable" error only when the log is full, never hang, and go on by itself when the
//! volume returns. mmio's brick and client tests are ignored too (the process dies of SIGBUS);
//! `mmio_brick_killed_in_a_child_process` runs its brick fault in a child process instead.
//!
//! The tests take turns (one fault at a time); the cluster is torn down at the end when it was
//! brought up here.

use distributed::cluster::{Cluster, Volume};
use distributed::faults::{scenario, Fault, Observation, Timing};
use distributed::{cluster, HostEngine, Layout};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The cluster and this process's layout on `volume`, or `None` (reason printed).
fn setup(volume: Volume) -> Option<(&'static Cluster, &'static Layout)> {
    static SINGLE: OnceLock<Layout> = OnceLock::new();
    static REPLICA: OnceLock<Layout> = OnceLock::new();
    let c = cluster(&format!("fault tests on {}", volume.name()))?;
    let (cell, tag) = match volume {
        Volume::Single => (&SINGLE, "fault"),
        Volume::Replica => (&REPLICA, "fault-replica"),
    };
    Some((c, cell.get_or_init(|| Layout::new(&c.mount(volume), tag))))
}

/// Wait until the mount answers again (the client reconnects to a restarted brick by itself).
fn wait_mount(mount: &Path, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        let probe = mount.join(format!(".atomfs-probe-{}", std::process::id()));
        if std::fs::write(&probe, b"x").is_ok() && std::fs::remove_file(&probe).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} did not come back in {limit:?}", mount.display());
}

/// A brick SIGKILLed by its pid and restarted with `gluster volume start VOL force`.
struct BrickKilled {
    cluster: &'static Cluster,
    volume: Volume,
    index: usize,
}

impl Fault for BrickKilled {
    fn name(&self) -> String {
        format!("brick {} of {} SIGKILLed", self.index, self.volume.name())
    }
    fn inject(&self) {
        let pid = self.cluster.kill_brick(self.volume, self.index);
        println!("{}: pid {pid}", self.name());
    }
    fn repair(&self) {
        self.cluster.restart_bricks(self.volume);
        wait_mount(&self.cluster.mount(self.volume), Duration::from_secs(30));
        if self.volume == Volume::Replica {
            // Reported, not asserted: entries of files deleted while the brick was away can
            // stay in gluster's heal index (docs/distributed.md).
            let healed = self
                .cluster
                .wait_healed(self.volume, Duration::from_secs(3));
            println!("replica volume healed within 3 s: {healed}");
        }
    }
}

/// The client mount detached (`umount -l`) and mounted again.
struct MountLost {
    cluster: &'static Cluster,
}

impl Fault for MountLost {
    fn name(&self) -> String {
        "the client mount lost (umount -l)".into()
    }
    fn inject(&self) {
        self.cluster.lose_mount(Volume::Single);
    }
    fn repair(&self) {
        self.cluster.remount();
        wait_mount(&self.cluster.mount(Volume::Single), Duration::from_secs(30));
    }
}

/// The FUSE client process SIGKILLed; the dead mount detached (`umount -l`) and the volume
/// mounted again at the same place.
struct ClientKilled {
    cluster: &'static Cluster,
}

impl Fault for ClientKilled {
    fn name(&self) -> String {
        "the FUSE client process SIGKILLed".into()
    }
    fn inject(&self) {
        let pid = self.cluster.kill_client(Volume::Single);
        println!("{}: pid {pid}", self.name());
    }
    fn repair(&self) {
        self.cluster.lose_mount(Volume::Single);
        self.cluster.remount();
        wait_mount(&self.cluster.mount(Volume::Single), Duration::from_secs(30));
    }
}

fn client_killed(engine: HostEngine) -> Option<Observation> {
    let _turn = turn();
    let (cluster, layout) = setup(Volume::Single)?;
    let fault = ClientKilled { cluster };
    let obs = scenario(engine, layout, &fault, Timing::default());
    println!("{} with {}:\n{obs}", engine.name(), fault.name());
    Some(obs)
}

fn brick_killed(engine: HostEngine) -> Option<Observation> {
    let _turn = turn();
    let (cluster, layout) = setup(Volume::Single)?;
    let fault = BrickKilled {
        cluster,
        volume: Volume::Single,
        index: 0,
    };
    let obs = scenario(engine, layout, &fault, Timing::default());
    println!("{} with {}:\n{obs}", engine.name(), fault.name());
    Some(obs)
}

fn mount_lost(engine: HostEngine) -> Option<Observation> {
    let _turn = turn();
    let (cluster, layout) = setup(Volume::Single)?;
    let fault = MountLost { cluster };
    let obs = scenario(engine, layout, &fault, Timing::default());
    println!("{} with {}:\n{obs}", engine.name(), fault.name());
    Some(obs)
}

fn replica_brick_killed(engine: HostEngine) -> Option<Observation> {
    let _turn = turn();
    let (cluster, layout) = setup(Volume::Replica)?;
    let fault = BrickKilled {
        cluster,
        volume: Volume::Replica,
        index: 1,
    };
    let obs = scenario(engine, layout, &fault, Timing::default());
    println!("{} with {}:\n{obs}", engine.name(), fault.name());
    Some(obs)
}

/// With one replica brick left, the volume stays writable: nothing fails, nothing hangs.
fn assert_transparent(obs: &Observation) {
    for phase in [&obs.before, &obs.during, &obs.after] {
        assert!(!phase.hung && phase.failed == 0, "{obs}");
    }
    assert!(obs.unmount_error.is_none(), "{obs}");
}

/// What the store should do while the home file system is away: keep committing into PM (or
/// fail with a clear "home file system unavailable" error once the log is full), never hang,
/// and commit again by itself once the volume is back.
fn assert_ideal(obs: &Observation) {
    assert!(!obs.during.hung && !obs.after.hung, "a commit hung:\n{obs}");
    if let Some(e) = &obs.during.first_error {
        assert!(
            e.contains("home file system unavailable"),
            "unclear error while the volume was away: {e}\n{obs}"
        );
        assert!(
            obs.during.acknowledged > 0,
            "no commit went into PM:\n{obs}"
        );
    }
    assert!(
        obs.after.failed == 0 && obs.after.acknowledged > 0,
        "the store did not recover by itself once the volume was back:\n{obs}"
    );
    assert!(obs.unmount_error.is_none(), "{obs}");
}

/// The fault child's test: runs only when a parent started this binary for it.
#[test]
fn fault_child() {
    distributed::faults::child_commits();
}

/// mmio's brick fault in a child process (the fault kills it with SIGBUS): the child commits
/// and acknowledges on its stdout, the brick is SIGKILLed, the child dies; the brick is
/// restarted, the store opened again, every acknowledged transaction must be there whole, and
/// fsck clean. Prints how the child ended.
#[test]
fn mmio_brick_killed_in_a_child_process() {
    use distributed::faults::{check_child, CHILD_FAULT_ENV};
    use std::io::BufRead;
    let _turn = turn();
    let Some((cluster, layout)) = setup(Volume::Single) else {
        return;
    };
    let dirs = layout.fresh(HostEngine::Mmio, distributed::Profile::Torture);
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut child = std::process::Command::new(exe)
        .args(["--exact", "fault_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_FAULT_ENV[0], "mmio")
        .env(CHILD_FAULT_ENV[1], &dirs.pm)
        .env(CHILD_FAULT_ENV[2], &dirs.home)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
        {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let start = Instant::now();
    while !lines.iter().any(|l| l == "fault-now") {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => lines.push(line),
            Err(e) => panic!("the child never reached the fault ({e}): {lines:?}"),
        }
    }
    let pid = cluster.kill_brick(Volume::Single, 0);
    // The child dies of the fault, or is killed after 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("wait: {e}")) {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = reader.join();
    lines.extend(rx.try_iter());
    println!(
        "mmio child after brick pid {pid} was SIGKILLed: {} (after {:.1} s, {} lines)",
        match status {
            Some(s) => format!("ended: {s}"),
            None => "still running after 10 s; killed".into(),
        },
        start.elapsed().as_secs_f64(),
        lines.len()
    );
    cluster.restart_bricks(Volume::Single);
    wait_mount(&cluster.mount(Volume::Single), Duration::from_secs(30));
    match check_child(&dirs, &lines) {
        Ok(acked) => println!("mmio: {acked} acknowledged transactions, all present; fsck clean"),
        Err(e) => panic!("mmio after the brick fault: {e}"),
    }
}

macro_rules! engine_faults {
    ($module:ident, $engine:expr, brick: [$(#[$brick:meta])*], client: [$(#[$client:meta])*],
     ideal: $ideal:literal) => {
        mod $module {
            use super::*;

            /// Brick SIGKILLed during commits, checkpoints and flushes, then restarted: nothing
            /// acknowledged is lost once the store is reopened, fsck clean.
            #[test]
            $(#[$brick])*
            fn brick_killed_and_restarted() {
                brick_killed($engine);
            }

            /// The client mount detached and mounted again: the store holds a descriptor of
            /// its home directory (hostfs resolves every path beneath it), so it goes on
            /// through the detached mount — nothing fails, nothing hangs, nothing is lost.
            #[test]
            fn client_mount_lost_and_remounted() {
                if let Some(obs) = mount_lost($engine) {
                    assert_ideal(&obs);
                }
            }

            /// The client process SIGKILLed (the mount dead for good: the store's descriptors
            /// fail with ENOTCONN until it is reopened on the new mount); nothing acknowledged
            /// is lost once it is.
            #[test]
            $(#[$client])*
            fn client_process_killed_and_remounted() {
                client_killed($engine);
            }

            /// One of two replica bricks SIGKILLed while writes go on: nothing fails.
            #[test]
            fn replica_brick_killed_while_writing() {
                if let Some(obs) = replica_brick_killed($engine) {
                    assert_transparent(&obs);
                }
            }

            #[test]
            #[ignore = $ideal]
            fn keeps_committing_into_pm_while_the_brick_is_away() {
                if let Some(obs) = brick_killed($engine) {
                    assert_ideal(&obs);
                }
            }
        }
    };
}

engine_faults!(mmio, HostEngine::Mmio,
    brick: [#[ignore = "observed: the test process dies of SIGBUS when the brick is killed \
        (mmio's stores and checkpoints go through MAP_SHARED mappings of the home files, and a \
        page fault on a file whose brick is gone raises SIGBUS); run it alone to see; \
        mmio_brick_killed_in_a_child_process checks the data"]],
    client: [#[ignore = "not run in the test process: mmio reaches its home files through \
        MAP_SHARED mappings, which raise SIGBUS once the FUSE client is gone (as with the brick)"]],
    ideal: "observed: the process dies of SIGBUS while the brick is away (mapped home files)");
engine_faults!(journal, HostEngine::Journal,
    brick: [],
    client: [],
    ideal: "observed: between none and about a dozen more commits succeed, then every commit \
        fails at once with the home file's `fdatasync: Transport endpoint is not connected \
        (os error 107)`; \
        no commit goes into PM alone; commits succeed again by themselves once the brick is back");
engine_faults!(cache, HostEngine::Cache,
    brick: [],
    client: [],
    ideal: "observed: every commit fails at once with a home file's `fstat: File descriptor \
        in bad state (os error 77)` (none acknowledged, though the data would fit in PM); \
        commits succeed again by themselves once the brick is back");
engine_faults!(remap_copy, HostEngine::RemapCopy,
    brick: [],
    client: [],
    ideal: "observed: every commit fails at once with `remap.journal: fdatasync: Transport \
        endpoint is not connected (os error 107)` (remap's journal is a home file), and once the \
        brick is back every commit fails with `an earlier commit failed (...); reopen the store \
        to recover` until the store is reopened");
