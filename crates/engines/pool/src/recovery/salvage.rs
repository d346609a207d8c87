//! `salvage`: copy every readable file of a possibly damaged pool out through a sink,
//! reporting what could not be read. The pool is repaired first (repair.rs) on the region
//! given, which the caller makes a private copy: salvage never writes the pool itself.

use crate::api::pool_store::PoolStore;
use crate::config::PoolConfig;
use crate::recovery::repair::{repair, RepairReport};
use pmem::Region;
use std::io::Read;
use std::sync::Arc;
use store::{FileKind, OpenFlags, Result, Store, ROOT_INO};

/// Where salvaged files go (the CLI: a host directory; tests: a map).
pub trait SalvageSink {
    /// Make directory `path` (relative, `/`-separated, never empty).
    fn dir(&mut self, path: &str) -> std::io::Result<()>;
    /// Write file `path` of `size` bytes from `data` (read it to the end). Returns the
    /// bytes written.
    fn file(&mut self, path: &str, size: u64, data: &mut dyn Read) -> std::io::Result<u64>;
}

/// What salvage copied and what it could not.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SalvageReport {
    pub files: u64,
    pub directories: u64,
    pub bytes: u64,
    /// (path in the pool, why) for everything not copied.
    pub unreadable: Vec<(String, String)>,
    /// The repair that made the pool readable (on the private copy).
    pub repair: RepairReport,
}

/// Salvage the pool on `region` (a private copy: it is repaired in place) into `sink`.
pub fn salvage<R: Region>(
    region: Arc<R>,
    cfg: &PoolConfig,
    sink: &mut dyn SalvageSink,
) -> Result<SalvageReport> {
    let mut report = SalvageReport {
        repair: repair(region.clone(), cfg)?,
        ..SalvageReport::default()
    };
    for q in &report.repair.quarantined {
        if q.blocks_unreadable > 0 {
            let what = format!(
                "inode {}: {} pointer(s) unreadable, {} byte(s) salvaged into {}",
                q.ino, q.blocks_unreadable, q.bytes_salvaged, q.path
            );
            report.unreadable.push((format!("inode {}", q.ino), what));
        }
    }
    let store = PoolStore::open(region, cfg)?;
    copy_tree(&store, sink, &mut report);
    let _ = store.unmount();
    Ok(report)
}

/// Depth-first copy from the root; every failure is noted and skipped.
fn copy_tree(s: &dyn Store, sink: &mut dyn SalvageSink, report: &mut SalvageReport) {
    let mut stack = vec![(ROOT_INO, String::new())];
    while let Some((dir, path)) = stack.pop() {
        let entries = match s.read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                report.unreadable.push((shown(&path), e.to_string()));
                continue;
            }
        };
        for entry in entries {
            let name = String::from_utf8_lossy(&entry.name).into_owned();
            let child = if path.is_empty() {
                name
            } else {
                format!("{path}/{name}")
            };
            match entry.kind {
                FileKind::Dir => match sink.dir(&child) {
                    Ok(()) => {
                        report.directories += 1;
                        stack.push((entry.ino, child));
                    }
                    Err(e) => report.unreadable.push((shown(&child), e.to_string())),
                },
                FileKind::File => match copy_file(s, entry.ino, &child, sink) {
                    Ok(bytes) => {
                        report.files += 1;
                        report.bytes += bytes;
                    }
                    Err(e) => report.unreadable.push((shown(&child), e.to_string())),
                },
                kind => report
                    .unreadable
                    .push((shown(&child), format!("{kind:?}: not copied"))),
            }
        }
    }
}

fn shown(path: &str) -> String {
    format!("/{path}")
}

/// Stream one file into the sink.
fn copy_file(
    s: &dyn Store,
    ino: u64,
    path: &str,
    sink: &mut dyn SalvageSink,
) -> std::io::Result<u64> {
    let flags = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let fh = s.open(ino, flags).map_err(std::io::Error::other)?;
    let copied = s.fstat(fh).map_err(std::io::Error::other).and_then(|meta| {
        let mut reader = StoreReader { s, fh, off: 0 };
        sink.file(path, meta.size, &mut reader)
    });
    let released = s.release(fh).map_err(std::io::Error::other);
    let copied = copied?;
    released?;
    Ok(copied)
}

/// `Read` over an open file of a store.
struct StoreReader<'a> {
    s: &'a dyn Store,
    fh: store::Fh,
    off: u64,
}

impl Read for StoreReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .s
            .read(self.fh, self.off, buf)
            .map_err(std::io::Error::other)?;
        self.off += n as u64;
        Ok(n)
    }
}
