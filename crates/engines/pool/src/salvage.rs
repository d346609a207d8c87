//! `salvage`: copy every readable file of a possibly damaged pool out through a sink,
//! reporting what could not be read. The pool is repaired first (repair.rs) on the region
//! given, which the caller makes a private copy: salvage never writes the pool itself.

use crate::config::PoolConfig;
use crate::repair::{repair, RepairReport};
use crate::store_impl::PoolStore;
use pmem::Region;
use std::sync::Arc;
use store::{FileKind, OpenFlags, Result, Store, ROOT_INO};

/// Where salvaged files go (the CLI: a host directory; tests: a map).
pub trait SalvageSink {
    /// Make directory `path` (relative, `/`-separated, never empty).
    fn dir(&mut self, path: &str) -> std::io::Result<()>;
    /// Write file `path` with `data`.
    fn file(&mut self, path: &str, data: &[u8]) -> std::io::Result<()>;
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
                FileKind::File => match read_all(s, entry.ino).map_err(|e| e.to_string()) {
                    Ok(data) => match sink.file(&child, &data) {
                        Ok(()) => {
                            report.files += 1;
                            report.bytes += data.len() as u64;
                        }
                        Err(e) => report.unreadable.push((shown(&child), e.to_string())),
                    },
                    Err(e) => report.unreadable.push((shown(&child), e)),
                },
                FileKind::Symlink => report
                    .unreadable
                    .push((shown(&child), "symbolic link: not copied".into())),
            }
        }
    }
}

fn shown(path: &str) -> String {
    format!("/{path}")
}

fn read_all(s: &dyn Store, ino: u64) -> Result<Vec<u8>> {
    let flags = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let fh = s.open(ino, flags)?;
    let size = s.fstat(fh).map(|m| m.size);
    let mut data = Vec::new();
    let read = size.and_then(|size| {
        data = vec![0u8; size as usize];
        let mut off = 0usize;
        while off < data.len() {
            let n = s.read(fh, off as u64, &mut data[off..])?;
            if n == 0 {
                data.truncate(off);
                break;
            }
            off += n;
        }
        Ok(())
    });
    let released = s.release(fh);
    read.and(released)?;
    Ok(data)
}
