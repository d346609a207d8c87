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

/// `"machine"` of results.json: cpu model, cores, memory, kernel, flush instruction, and
/// where the emulated NVMM lives.
pub fn describe() -> Value {
    json!({
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
