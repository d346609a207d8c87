//! The SQLite update loop of the `engines` suite: one table `kv(id INTEGER PRIMARY KEY, v
//! BLOB)`, one-row updates each in its own transaction, `synchronous=FULL`, 4 KB pages, the
//! system libsqlite3 for every system (`systems/sqlite.rs`).
//!
//! On an engine the database lives in a store the atomfs VFS (`libatomfs_sqlite.so`, loaded
//! by `systems/sqlite_vfs.rs`) creates itself from the URI
//! `file:/engines.db?vfs=atomfs&pool=POOL&engine=NAME&options=K=V,...` — the same options
//! the file workloads give the engine (`engine_mix::options_for`: a home directory on the
//! ext4 RAM disk when the engine takes one, the pool file in /dev/shm), with the journal off
//! (the VFS commits each transaction atomically). The reference `ext4` is SQLite in WAL mode
//! on the ext4 RAM disk.

use super::engine_mix::{options_for, preallocate, takes_home};
use super::ext4_mix::EXT4;
use super::sqlite::Db;
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use engines::Engine;
use std::path::PathBuf;
use std::rc::Rc;

/// Where a [`SqliteLoop`] keeps its database.
#[derive(Clone, Copy)]
pub enum SqlTarget {
    /// A store of this engine, created by the VFS.
    Engine(&'static dyn Engine),
    /// A directory on the ext4 RAM disk, WAL mode.
    Ext4,
}

pub struct SqliteLoop {
    target: SqlTarget,
    disk: Rc<Ext4Disk>,
    db: Option<Db>,
    /// Pool files and directories to delete after the connection closes.
    cleanup: Vec<PathBuf>,
    medium: String,
}

impl SqliteLoop {
    pub fn new(target: SqlTarget, disk: Rc<Ext4Disk>) -> Self {
        SqliteLoop {
            target,
            disk,
            db: None,
            cleanup: Vec::new(),
            medium: String::new(),
        }
    }

    pub fn name(&self) -> String {
        match self.target {
            SqlTarget::Engine(e) => e.name().to_string(),
            SqlTarget::Ext4 => EXT4.into(),
        }
    }

    pub fn guarantee(&self) -> &'static str {
        "atomic and durable at commit"
    }

    pub fn medium(&self) -> String {
        self.medium.clone()
    }

    fn journal(&self) -> &'static str {
        match self.target {
            SqlTarget::Engine(_) => "off",
            SqlTarget::Ext4 => "wal",
        }
    }

    /// The database's file name (a URI on an engine) and whether it is a URI.
    fn place(&mut self, data: u64) -> Result<(String, bool)> {
        let dir = |name: &str| self.disk.root().join(format!("engines-sqlite-{name}"));
        match self.target {
            SqlTarget::Engine(engine) => {
                let ext = super::sqlite_vfs::ensure_loaded()?;
                let pool = crate::scratch_path(&format!("engines-sqlite-{}.pool", engine.name()));
                self.cleanup.push(pool.clone());
                let home = takes_home(engine).then(|| dir(engine.name()));
                if let Some(home) = &home {
                    std::fs::create_dir_all(home).map_err(|e| BenchError::io("mkdir", home, e))?;
                    self.cleanup.push(home.clone());
                }
                let options = options_for(engine, data, home.as_deref());
                let options: Vec<String> =
                    options.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let options = options.join(",");
                self.medium = format!(
                    "atomfs engine {} through the VFS atomfs ({ext}); store created by the VFS \
                     from the URI: pool file {} (tmpfs, fallocated){}; options {options}",
                    engine.name(),
                    pool.display(),
                    home.map(|h| format!(
                        "; home directory {} on {}",
                        h.display(),
                        self.disk.label()
                    ))
                    .unwrap_or_default(),
                );
                let uri = format!(
                    "file:/engines.db?vfs=atomfs&pool={}&engine={}&options={}",
                    crate::suites::sqlite::uri_value(&pool.display().to_string()),
                    crate::suites::sqlite::uri_value(engine.name()),
                    crate::suites::sqlite::uri_value(&options)
                );
                Ok((uri, true))
            }
            SqlTarget::Ext4 => {
                let dir = dir(EXT4);
                std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("mkdir", &dir, e))?;
                self.cleanup.push(dir.clone());
                self.medium = format!("{} on {}", dir.display(), self.disk.label());
                Ok((dir.join("engines.db").display().to_string(), false))
            }
        }
    }

    fn db(&mut self) -> Result<&mut Db> {
        self.db
            .as_mut()
            .ok_or_else(|| BenchError::Invalid("sqlite loop: database closed".into()))
    }

    /// Open the database, set its PRAGMAs (each read back), create the table and insert
    /// `rows` rows of `fill(id)` in one transaction.
    pub fn setup(
        &mut self,
        rows: u64,
        value_max: u64,
        fill: &mut dyn FnMut() -> Vec<u8>,
    ) -> Result<()> {
        let (filename, uri) = self.place(2 * rows * value_max.max(4096))?;
        let journal = self.journal();
        self.medium = format!(
            "{}; PRAGMA page_size=4096; PRAGMA journal_mode={journal}; PRAGMA synchronous=FULL",
            self.medium
        );
        self.db = Some(Db::open(&filename, uri)?);
        let db = self.db()?;
        for (pragma, value, expect) in [
            ("page_size", "4096", "4096"),
            ("journal_mode", journal, journal),
            ("synchronous", "FULL", "2"),
        ] {
            let set = db.query(&format!("PRAGMA {pragma}={value}"))?;
            let got = if set.is_empty() {
                db.query(&format!("PRAGMA {pragma}"))?
            } else {
                set
            };
            if !got.eq_ignore_ascii_case(expect) {
                return Err(BenchError::Invalid(format!(
                    "PRAGMA {pragma}={value} reads back as {got:?}"
                )));
            }
        }
        db.query("CREATE TABLE kv(id INTEGER PRIMARY KEY, v BLOB)")?;
        db.prepare()?;
        db.query("BEGIN")?;
        for id in 0..rows {
            db.put(true, id as i64, &fill())?;
        }
        db.query("COMMIT")?;
        if let SqlTarget::Engine(_) = self.target {
            if let Some(pool) = self.cleanup.first() {
                preallocate(pool).map_err(|e| BenchError::Invalid(format!("fallocate: {e}")))?;
            }
        }
        Ok(())
    }

    /// Update row `id` to `value`: one transaction, durable when it returns.
    pub fn update(&mut self, id: i64, value: &[u8]) -> Result<()> {
        self.db()?.put(false, id, value)
    }

    /// `length(v)` of row `id`.
    pub fn value_length(&mut self, id: i64) -> Option<u64> {
        self.db.as_mut()?.value_length(id)
    }

    /// `PRAGMA integrity_check` must say ok.
    pub fn check(&mut self) -> Result<()> {
        let ok = self.db()?.query("PRAGMA integrity_check")?;
        if ok != "ok" {
            return Err(BenchError::Invalid(format!("integrity_check: {ok}")));
        }
        Ok(())
    }
}

impl Drop for SqliteLoop {
    fn drop(&mut self) {
        // Close the connection (and with it the store) before deleting its files.
        self.db = None;
        for p in &self.cleanup {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
    }
}
