//! Names the machine results were measured on (results without it are not comparable).

use serde_json::{json, Value};

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn memory_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The emulated NVMM: the scratch directory, its file system and its page size (a tmpfs
/// mounted `huge=always` or `huge=within_size` maps its files with 2 MiB pages, like NVMM
/// mapped with DAX or the kernel's direct map; plain tmpfs uses 4 KiB pages).
pub fn nvmm() -> Value {
    let dir = crate::scratch_base();
    let canonical = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    // The longest mount point that contains the directory.
    let mount = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[1].to_string(), f[2].to_string(), f[3].to_string()))
        })
        .filter(|(point, _, _)| canonical.starts_with(point))
        .max_by_key(|(point, _, _)| point.len());
    let (fs, options) = mount
        .map(|(_, fs, options)| (fs, options))
        .unwrap_or_else(|| ("unknown".into(), String::new()));
    let huge = fs == "tmpfs"
        && options
            .split(',')
            .any(|o| o == "huge=always" || o == "huge=within_size");
    json!({
        "dir": dir.display().to_string(),
        "fs": fs,
        "pages": if huge { "2M" } else { "4K" },
    })
}

/// Nanoseconds for a cache line to go from one core to another and back (two threads on
/// cores 0 and 1 taking turns to write one word; None on a single core). On a VM the host
/// may place the two vCPUs close together or far apart, and may move them while a run
/// goes on: on the 2-vCPU VM of 2026-11-25 this read 55-80 ns or 300-330 ns at different
/// times. Every cache line that a transaction's thread and a checkpoint thread both write
/// costs that much (docs/engines/pool.md, the decision on padded words), so results name it. Measured
/// when the results are written, at the end of the run.
pub fn core_round_trip_ns() -> Option<f64> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    const TRIPS: u64 = 20_000;
    const STOP: u64 = u64::MAX;
    /// The word on a line of its own.
    #[repr(align(128))]
    struct Line(AtomicU64);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let pin = |cpu: usize| -> bool {
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it;
        // sched_setaffinity(0, ..) only reads the set and changes this thread's affinity.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    };
    let line = Line(AtomicU64::new(0));
    let word = &line.0;
    let pinned = AtomicBool::new(true);
    let (trips, elapsed) = std::thread::scope(|scope| {
        let partner = std::thread::Builder::new().spawn_scoped(scope, || {
            if !pin(1) {
                pinned.store(false, Ordering::Relaxed);
            }
            let mut next = 1;
            loop {
                match word.load(Ordering::Acquire) {
                    STOP => return,
                    v if v == next => {
                        word.store(next + 1, Ordering::Release);
                        next += 2;
                    }
                    _ => std::hint::spin_loop(),
                }
            }
        });
        if partner.is_err() {
            return (0, Duration::ZERO);
        }
        // The caller's own affinity is left alone: both sides run in threads of their own.
        let timer = std::thread::Builder::new().spawn_scoped(scope, || {
            if !pin(0) {
                pinned.store(false, Ordering::Relaxed);
            }
            // At most ~50 ms (both threads on one core would take turns per time slice).
            let start = Instant::now();
            let mut trips = 0;
            while trips < TRIPS {
                word.store(2 * trips + 1, Ordering::Release);
                while word.load(Ordering::Acquire) != 2 * trips + 2 {
                    std::hint::spin_loop();
                }
                trips += 1;
                if trips % 16 == 0 && start.elapsed() > Duration::from_millis(50) {
                    break;
                }
            }
            let elapsed = start.elapsed();
            word.store(STOP, Ordering::Release);
            (trips, elapsed)
        });
        match timer {
            Ok(timer) => timer.join().unwrap_or((0, Duration::ZERO)),
            Err(_) => {
                word.store(STOP, Ordering::Release);
                (0, Duration::ZERO)
            }
        }
    });
    if !pinned.load(Ordering::Relaxed) || trips == 0 {
        return None;
    }
    Some((elapsed.as_nanos() as f64 / trips as f64 * 10.0).round() / 10.0)
}

/// `"machine"` of results.json: cpu model, cores, memory, kernel, flush instruction, where
/// the emulated NVMM lives, and the core-to-core round trip (`core_round_trip_ns`).
pub fn describe() -> Value {
    json!({
        "core_round_trip_ns": core_round_trip_ns(),
        "cpu": cpu_model(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory_bytes": memory_bytes(),
        "kernel": kernel(),
        "flush": crate::flush::FlushKind::detect().as_str(),
        "nvmm": nvmm(),
    })
}

/// `git rev-parse HEAD` of the working directory, or "unknown".
pub fn revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Bytes of memory available now (MemAvailable), for scaling `--full` down.
pub fn memory_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    /// The round trip is a plausible positive time on two cores or more, and absent on one.
    #[test]
    fn the_core_round_trip_is_measured_on_two_cores() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match super::core_round_trip_ns() {
            Some(ns) => assert!(cores >= 2 && ns > 1.0 && ns < 10_000_000.0, "{ns} ns"),
            None => assert!(cores < 2, "no round trip measured on {cores} cores"),
        }
    }
}
