//! Suite `sqlite`: the FCFS seed's SQLite experiment (§VI-F 1, Figs. 12-13; mobibench:
//! random row updates, values of 0–16 KB, one thread, every update its own transaction; plus
//! a 0–4 KB point) with the same SQLite library for every configuration: the atomfs VFS with
//! the journal off against SQLite's WAL and rollback journal on the ext4 RAM disk and on
//! tmpfs. Systems are interleaved round-robin and repeated like every figure (runner.rs); each
//! gets the same fixed-seed table and updates. See docs/bench.md.

use super::{Mode, Options};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::runner::{normalized_rows, row, simple_bar, Figure, FigureResult, Metric};
use crate::systems::sqlite::Db;
use crate::workload::Rng;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a configuration keeps its database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// An atomfs pool in /dev/shm through the VFS `atomfs` (libatomfs_sqlite.so).
    AtomfsVfs,
    /// The ext4 RAM disk (ext4 on a /dev/shm-backed loop device).
    Ext4,
    /// A directory in /dev/shm: fsync is a no-op, so nothing is durable. A reference.
    Tmpfs,
}

/// One configuration: a row of results.json.
struct Config {
    name: &'static str,
    place: Place,
    /// `PRAGMA journal_mode` value.
    journal: &'static str,
    guarantee: &'static str,
}

/// SQLite's rollback journal mode used for the `sqlite-rollback-*` systems (see docs/bench.md
/// for why this one).
pub const ROLLBACK_JOURNAL: &str = "delete";

const CONFIGS: &[Config] = &[
    Config {
        name: "atomfs-sqlite",
        place: Place::AtomfsVfs,
        journal: "off",
        guarantee: "atomic and durable at commit (the VFS opens the database in atomic mode)",
    },
    Config {
        name: "sqlite-wal-ext4",
        place: Place::Ext4,
        journal: "wal",
        guarantee: "atomic and durable at commit",
    },
    Config {
        name: "sqlite-rollback-ext4",
        place: Place::Ext4,
        journal: ROLLBACK_JOURNAL,
        guarantee: "atomic and durable at commit",
    },
    Config {
        name: "sqlite-wal-tmpfs",
        place: Place::Tmpfs,
        journal: "wal",
        guarantee: "atomic, NOT durable (tmpfs: fsync does nothing): a reference",
    },
    Config {
        name: "sqlite-rollback-tmpfs",
        place: Place::Tmpfs,
        journal: ROLLBACK_JOURNAL,
        guarantee: "atomic, NOT durable (tmpfs: fsync does nothing): a reference",
    },
    Config {
        name: "sqlite-nc-tmpfs",
        place: Place::Tmpfs,
        journal: "off",
        guarantee: "none: no journal, not durable (the seed's NC version)",
    },
];

/// The PRAGMAs a configuration runs, in this order, before creating its table: (name, value,
/// expected read-back). page_size first, before anything is written; synchronous=FULL
/// everywhere: SQLite syncs the journal or WAL and the database at every commit.
fn pragmas(journal: &str) -> [(&'static str, String, String); 3] {
    [
        ("page_size", "4096".into(), "4096".into()),
        ("journal_mode", journal.into(), journal.into()),
        ("synchronous", "FULL".into(), "2".into()),
    ]
}

/// The PRAGMAs of `journal` as one line for results.json.
fn pragma_line(journal: &str) -> String {
    pragmas(journal)
        .iter()
        .map(|(p, v, _)| format!("PRAGMA {p}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// How big and how long, per mode.
struct Sizes {
    rows: u64,
    updates_per_run: u64,
    updates_min: u64,
    run_time_max: Duration,
    reps: u32,
}

fn sizes(mode: Mode) -> Sizes {
    match mode {
        Mode::Tiny => Sizes {
            rows: 40,
            updates_per_run: 30,
            updates_min: 10,
            run_time_max: Duration::from_secs(1),
            reps: 2,
        },
        Mode::Quick => Sizes {
            rows: 1_000,
            updates_per_run: 5_000,
            updates_min: 200,
            run_time_max: Duration::from_millis(1500),
            reps: 5,
        },
        // The seed: 10,000 updates; mobibench's update test updates the rows it inserted.
        Mode::Full => Sizes {
            rows: 10_000,
            updates_per_run: 10_000,
            updates_min: 10_000,
            run_time_max: Duration::from_secs(600),
            reps: 5,
        },
    }
}

/// A fixed-seed stream of (row id, value) updates, values of uniform length in [0, max].
struct Updates {
    rng: Rng,
    rows: u64,
    max: u64,
    pattern: Vec<u8>,
}

impl Updates {
    fn new(seed: u64, rows: u64, max: u64) -> Self {
        let mut fill = Rng::new(seed ^ 0x5EED_DA7A);
        let pattern = (0..2 * max + 4096).map(|_| fill.next_u64() as u8).collect();
        Updates {
            rng: Rng::new(seed),
            rows,
            max,
            pattern,
        }
    }

    fn value(&mut self) -> &[u8] {
        let len = self.rng.upto(self.max);
        let start = self.rng.upto(self.pattern.len() as u64 - len) as usize;
        &self.pattern[start..start + len as usize]
    }

    fn next(&mut self) -> (i64, &[u8]) {
        let id = self.rng.upto(self.rows - 1) as i64;
        (id, self.value())
    }
}

/// Percent-encode the characters a `file:` URI query value cannot hold as they are.
pub(crate) fn uri_value(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '%' | '&' | '#' | '?' | '=' | ' ' => format!("%{:02X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// One configuration with its open, filled database.
struct SqlSystem {
    config: &'static Config,
    db: Option<Db>,
    /// Files and directories to delete after the connection closes.
    cleanup: Vec<PathBuf>,
    medium: String,
}

impl SqlSystem {
    /// Open the database of `config` for point `max` (creating its pool or directory).
    fn open(config: &'static Config, disk: &Ext4Disk, max: u64, rows: u64) -> Result<Self> {
        let tag = format!("{}-{max}", config.name);
        let mut sys = SqlSystem {
            config,
            db: None,
            cleanup: Vec::new(),
            medium: String::new(),
        };
        let (filename, uri) = match config.place {
            Place::AtomfsVfs => {
                let ext = crate::systems::sqlite_vfs::ensure_loaded()?;
                let pool = crate::scratch_path(&format!("{tag}.pool"));
                let mut lock = pool.clone().into_os_string();
                lock.push(".lock");
                sys.cleanup.push(PathBuf::from(lock));
                sys.cleanup.push(pool.clone());
                create_pool(&pool, 4 * rows * max.max(4096) + (128 << 20))?;
                sys.medium = format!(
                    "atomfs pool {} through the VFS atomfs: {ext}",
                    pool.display()
                );
                let pool = uri_value(&pool.display().to_string());
                (format!("file:/bench.db?vfs=atomfs&pool={pool}"), true)
            }
            Place::Ext4 | Place::Tmpfs => {
                let dir = if config.place == Place::Ext4 {
                    disk.root().join(&tag)
                } else {
                    crate::scratch_path(&tag)
                };
                std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("mkdir", &dir, e))?;
                sys.cleanup.push(dir.clone());
                sys.medium = match config.place {
                    Place::Ext4 => format!("{}: {}", disk.label(), dir.display()),
                    _ => format!("tmpfs {}", dir.display()),
                };
                (dir.join("bench.db").display().to_string(), false)
            }
        };
        sys.medium = format!("{}; {}", sys.medium, pragma_line(config.journal));
        sys.db = Some(Db::open(&filename, uri)?);
        sys.configure()?;
        Ok(sys)
    }

    fn db(&mut self) -> Result<&mut Db> {
        self.db
            .as_mut()
            .ok_or_else(|| BenchError::Invalid("sqlite: database closed".into()))
    }

    /// The PRAGMAs of [`pragmas`], each read back and checked; the table; the statements.
    fn configure(&mut self) -> Result<()> {
        let name = self.config.name;
        let journal = self.config.journal;
        let db = self.db()?;
        for (pragma, value, expect) in pragmas(journal) {
            let set = db.query(&format!("PRAGMA {pragma}={value}"))?;
            let got = if set.is_empty() {
                db.query(&format!("PRAGMA {pragma}"))?
            } else {
                set
            };
            if !got.eq_ignore_ascii_case(&expect) {
                return Err(BenchError::System {
                    system: name.into(),
                    message: format!("PRAGMA {pragma}={value} reads back as {got:?}"),
                });
            }
        }
        db.query("CREATE TABLE kv(id INTEGER PRIMARY KEY, v BLOB)")?;
        db.prepare()
    }

    /// Insert `rows` rows (one transaction), values from `updates`' value stream.
    fn fill(&mut self, rows: u64, updates: &mut Updates) -> Result<()> {
        let db = self.db()?;
        db.query("BEGIN")?;
        for id in 0..rows {
            db.put(true, id as i64, updates.value())?;
        }
        db.query("COMMIT")?;
        Ok(())
    }

    /// Run up to `n` updates (each its own transaction); (elapsed, updates done).
    fn run(&mut self, updates: &mut Updates, n: u64, sizes: &Sizes) -> Result<(Duration, u64)> {
        let db = self
            .db
            .as_mut()
            .ok_or_else(|| BenchError::Invalid("closed".into()))?;
        let start = Instant::now();
        let mut done = 0;
        let mut last = (0, 0);
        while done < n {
            if crate::interrupted() {
                return Err(BenchError::Interrupted);
            }
            let (id, value) = updates.next();
            last = (id, value.len() as u64);
            db.put(false, id, value)?;
            done += 1;
            if done >= sizes.updates_min && start.elapsed() >= sizes.run_time_max {
                break;
            }
        }
        let elapsed = start.elapsed();
        // The last update must be there (untimed).
        if done > 0 && db.value_length(last.0) != Some(last.1) {
            return Err(BenchError::System {
                system: self.config.name.into(),
                message: format!(
                    "row {} does not hold the {} bytes just written",
                    last.0, last.1
                ),
            });
        }
        Ok((elapsed, done))
    }

    /// `PRAGMA integrity_check` must say ok.
    fn check(&mut self) -> Result<()> {
        let name = self.config.name;
        let ok = self.db()?.query("PRAGMA integrity_check")?;
        if ok != "ok" {
            return Err(BenchError::System {
                system: name.into(),
                message: format!("integrity_check: {ok}"),
            });
        }
        Ok(())
    }
}

impl Drop for SqlSystem {
    fn drop(&mut self) {
        // Close the connection (and with it the pool) before deleting its files.
        self.db = None;
        for p in &self.cleanup {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Create and format an atomfs pool file as `atomfs_pool_create` does (the pool engine with
/// its default configuration), then unmount it for the VFS to open.
fn create_pool(path: &Path, size: u64) -> Result<()> {
    let err = |e: store::Error| BenchError::System {
        system: "atomfs-sqlite".into(),
        message: format!("create pool {}: {e}", path.display()),
    };
    let store = pool::create(path, size, &pool::PoolConfig::default()).map_err(err)?;
    store.unmount().map_err(err)
}

/// Seeds of the initial table and of the warm-up run (the measured runs use seed + rep).
const FILL_SEED: u64 = 0xF111;
const WARM_SEED: u64 = 0x5741_524D;

/// The system the figure's ratios are taken against.
const REFERENCE: &str = "atomfs-sqlite";

/// The values of the figure's x axis: the seed's 0–16 KB and a 0–4 KB point.
const VALUE_MAXES: [u64; 2] = [4096, 16384];

/// A system's error, named after the system (interruptions stay as they are).
fn named(system: &str, e: BenchError) -> BenchError {
    match e {
        BenchError::Interrupted | BenchError::Skipped(_) => e,
        e => BenchError::System {
            system: system.into(),
            message: e.to_string(),
        },
    }
}

/// Open and fill every configuration for point `max`; skipped ones are recorded in `res`.
fn setup_point(
    max: u64,
    sz: &Sizes,
    seed: u64,
    disk: &Ext4Disk,
    res: &mut FigureResult,
) -> Result<Vec<SqlSystem>> {
    let mut live = Vec::new();
    for config in CONFIGS {
        if crate::interrupted() {
            return Err(BenchError::Interrupted);
        }
        let made = SqlSystem::open(config, disk, max, sz.rows).and_then(|mut s| {
            s.fill(sz.rows, &mut Updates::new(seed ^ FILL_SEED, sz.rows, max))?;
            Ok(s)
        });
        match made.map_err(|e| named(config.name, e)) {
            Ok(s) => {
                if !res.systems.iter().any(|(n, _, _)| n == config.name) {
                    res.systems.push((
                        config.name.into(),
                        s.medium.clone(),
                        config.guarantee.into(),
                    ));
                }
                live.push(s);
            }
            Err(BenchError::Skipped(why)) => {
                if !res.skipped.iter().any(|(n, _)| n == config.name) {
                    res.skipped.push((config.name.into(), why));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(live)
}

/// One point: warm-up, then `reps` interleaved rounds, then integrity checks; rows into `res`.
fn run_point(
    max: u64,
    sz: &Sizes,
    seed: u64,
    disk: &Ext4Disk,
    bar: &indicatif::ProgressBar,
    res: &mut FigureResult,
) -> Result<()> {
    let mut live = setup_point(max, sz, seed, disk, res)?;
    for sys in live.iter_mut() {
        bar.set_message(format!("{} x={max} warm-up", sys.config.name));
        let mut updates = Updates::new(seed ^ WARM_SEED, sz.rows, max);
        let n = (sz.updates_per_run / 10).max(sz.updates_min);
        sys.run(&mut updates, n, sz)
            .map_err(|e| named(sys.config.name, e))?;
        bar.inc(1);
    }
    let mut samples: Vec<Vec<(Duration, u64)>> = live.iter().map(|_| Vec::new()).collect();
    for rep in 0..sz.reps {
        for (i, sys) in live.iter_mut().enumerate() {
            let name = sys.config.name;
            bar.set_message(format!("{name} x={max} run {}/{}", rep + 1, sz.reps));
            let mut updates = Updates::new(seed.wrapping_add(rep as u64), sz.rows, max);
            let sample = sys.run(&mut updates, sz.updates_per_run, sz);
            samples[i].push(sample.map_err(|e| named(name, e))?);
            bar.inc(1);
        }
    }
    for (sys, runs) in live.iter_mut().zip(samples) {
        sys.check().map_err(|e| named(sys.config.name, e))?;
        let txs: Vec<u64> = runs.iter().map(|r| r.1).collect();
        let secs = |r: &(Duration, u64)| r.0.as_secs_f64().max(1e-12);
        let rate = runs.iter().map(|r| r.1 as f64 / secs(r)).collect();
        let latency = runs
            .iter()
            .map(|r| secs(r) * 1e6 / r.1.max(1) as f64)
            .collect();
        let (name, p) = (sys.config.name, Some(max as f64));
        res.rows
            .push(row("sqlite", name, p, Metric::TxPerS, rate, txs.clone()));
        res.rows
            .push(row("sqlite", name, p, Metric::TxLatencyUs, latency, txs));
    }
    bar.inc(((CONFIGS.len() - live.len()) as u64) * (sz.reps as u64 + 1));
    Ok(())
}

/// Run the suite: one figure (`sqlite`), x = the largest value of the random lengths.
pub fn run(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<(Figure, FigureResult)>> {
    if !crate::systems::sqlite::available() {
        return Err(crate::systems::sqlite::not_built());
    }
    let sz = sizes(opts.mode);
    let disk = Ext4Disk::create(4 * sz.rows * 16384 + (256 << 20))?;
    if !disk.is_ramdisk() {
        notes.push(disk.label());
    }
    notes.push(format!(
        "sqlite: SQLite {} (the system library, for every configuration); table kv(id INTEGER \
         PRIMARY KEY, v BLOB) of {} rows; runs of {} updates (stopping after {:.1} s once {} \
         are done), {} runs per system and point after a warm-up",
        crate::systems::sqlite::library_version().unwrap_or_default(),
        sz.rows,
        sz.updates_per_run,
        sz.run_time_max.as_secs_f64(),
        sz.updates_min,
        sz.reps
    ));
    let steps = (VALUE_MAXES.len() * CONFIGS.len()) as u64 * (sz.reps as u64 + 1);
    let bar = simple_bar("sqlite", steps, opts.progress);
    let mut res = FigureResult::default();
    for max in VALUE_MAXES {
        run_point(max, &sz, opts.seed, &disk, &bar, &mut res)?;
    }
    bar.finish_and_clear();
    drop(disk);
    // Run r of every system ran back to back: their ratio, run by run, cancels the drift of a
    // shared machine better than the ratio of medians.
    let norm = normalized_rows(&res.rows, Metric::TxPerS, REFERENCE);
    res.rows.extend(norm);
    let fig = Figure {
        id: "sqlite".into(),
        title: "SQLite: one-row updates of random 0–max B values, 1 thread, one tx each".into(),
        x_label: Some("max value size (bytes)".into()),
        reference: REFERENCE.into(),
        metrics: vec![Metric::TxPerS, Metric::TxPerSNorm, Metric::TxLatencyUs],
        points: Vec::new(),
        systems: Vec::new(),
    };
    Ok(vec![(fig, res)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_seeded_and_inside_the_table_and_value_range() {
        let (mut a, mut b) = (Updates::new(9, 100, 4096), Updates::new(9, 100, 4096));
        let mut longest = 0;
        for _ in 0..5000 {
            let (id, value) = a.next();
            let (id_b, value_b) = b.next();
            assert_eq!((id, value), (id_b, value_b), "same seed, same stream");
            assert!((0..100).contains(&id));
            assert!(value.len() <= 4096);
            longest = longest.max(value.len());
        }
        assert!(
            longest > 4000,
            "lengths should cover the range, longest {longest}"
        );
        assert_ne!(
            Updates::new(10, 100, 4096).next().0,
            Updates::new(9, 100, 4096).next().0
        );
    }

    #[test]
    fn pool_paths_are_escaped_in_the_uri() {
        assert_eq!(uri_value("/dev/shm/a.pool"), "/dev/shm/a.pool");
        assert_eq!(uri_value("/x&y=z?#%"), "/x%26y%3Dz%3F%23%25");
    }

    #[test]
    fn every_configuration_checks_synchronous_full() {
        for c in CONFIGS {
            let p = pragmas(c.journal);
            assert!(p
                .iter()
                .any(|(n, v, e)| *n == "synchronous" && v == "FULL" && e == "2"));
            assert_eq!(p[0].0, "page_size", "page_size must come before any write");
        }
    }
}
