// The list of suites, in a file of its own so that the `atomfs` command includes the same
// list in `atomfs bench --help` (crates/frontends/cli/src/bench.rs) without linking this
// crate. Included by crates/bench/src/suites.rs; not a module.

/// Every suite name, with a one-line description (`all` runs each of them). The pool
/// engine's suites are run by `suites::pool::run`.
pub const SUITES: &[(&str, &str)] = &[
    ("external", "two-file atomic update: FCFS and NC vs PMDK and the ext4 protocols, against a bare durable copy"),
    ("fcfs-micro", "Fig. 7a/b: two-file update latency and NVMM bytes per tx, FCFS vs NC, FG-WAL, SCSP"),
    ("fcfs-threads", "Fig. 7c: throughput vs threads (1..cores; the seed used 12), FCFS vs SOC vs NC"),
    ("fcfs-value-size", "Fig. 8: throughput vs value size 64 B..16 KB, normalized to NC"),
    ("fcfs-idle", "Fig. 9: throughput vs idle time 0..90 %, FCFS vs SOC vs SYNC (and NC)"),
    ("fcfs-latency", "Fig. 10: throughput vs emulated NVMM write latency 50..1600 ns"),
    ("recovery", "Fig. 11: recovery time vs log size, FCFS (lazy) vs FCFS-IR (checkpoint at recovery)"),
    ("floor", "every pool mode's distance from a bare durable copy, and the copy bandwidth"),
    ("sqlite", "SQLite row updates: the atomfs VFS (journal off) vs WAL and rollback journal on ext4 and tmpfs"),
    ("fuse", "fio on an atomfs FUSE mount vs ext4 on a RAM disk (and tmpfs): fsync'd 4 KiB writes, sequential I/O"),
    ("mmio", "Libnvmmio Figs. 6-9: FIO jobs on one file, mmio vs pread/pwrite+fdatasync (tmpfs, ext4) and fcfs"),
    ("engines", "one workload mix on every registered engine vs ext4 files with fsync, and which engine for which workload"),
    ("cache", "First Responder: synchronous 4 KiB random writes through the cache engine's API vs ext4 pwrite+fdatasync, and the flush-period sensitivity"),
    ("journal", "NJS Fig. 10a/11a: 4 KiB writes + fsync (sequential, re-write, random) through the journal engine vs ext4 data=journal with its journal on a RAM disk, ordered, no journal; the delta sweep"),
    ("distributed", "GlusterFS (scripts/gluster.sh): synchronous 4 KiB random writes on the mount vs through each host-file engine with its home there and PM in /dev/shm"),
    ("remap", "ACCFS Figs. 6-8, 11: random 8 KiB writes, fsync every 1..64, remap (O_ATOMIC, XFS reflink) vs ext4 ordered/journal and XFS on loop devices; device bytes per update byte; SQLite journal off on remap vs WAL/DELETE"),
];
