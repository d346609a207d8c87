//! `NativeStore`: one open store, its namespace calls and its transactions.

use crate::errors::IntoPy;
use crate::file::NativeFile;
use crate::shared::{host_path, Shared};
use crate::tx::NativeTx;
use engines::Options;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Arc;
use store::{Error, FileKind, Metadata, Result, Store, TxId};

/// `(ino, kind, size, perm, nlink, uid, gid, allocated, atime_ns, mtime_ns, ctime_ns)`.
pub type StatTuple = (
    u64,
    &'static str,
    u64,
    u32,
    u32,
    u32,
    u32,
    u64,
    u64,
    u64,
    u64,
);

pub fn stat_tuple(m: &Metadata) -> StatTuple {
    (
        m.ino,
        kind_name(m.kind),
        m.size,
        m.perm,
        m.nlink,
        m.uid,
        m.gid,
        m.allocated,
        m.atime,
        m.mtime,
        m.ctime,
    )
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Dir => "dir",
        FileKind::Symlink => "symlink",
        FileKind::Fifo => "fifo",
        FileKind::Socket => "socket",
        FileKind::CharDevice => "chardev",
        FileKind::BlockDevice => "blockdev",
    }
}

fn options(pairs: Vec<(String, String)>) -> Options {
    let mut options = Options::new();
    for (key, value) in pairs {
        options.set(&key, value);
    }
    options
}

/// Create a store of `engine` in the new file `path` (runs with the GIL released).
#[pyfunction]
pub fn create(
    py: Python<'_>,
    path: &[u8],
    engine: &str,
    options: Vec<(String, String)>,
) -> PyResult<NativeStore> {
    let options = self::options(options);
    let opened = py
        .detach(|| engines::create(host_path(path), engine, &options))
        .py(py)?;
    Ok(NativeStore::new(Shared::new(opened)))
}

/// Open (and recover) the store in `path`, whichever engine made it.
#[pyfunction]
pub fn open(py: Python<'_>, path: &[u8], options: Vec<(String, String)>) -> PyResult<NativeStore> {
    let options = self::options(options);
    let opened = py
        .detach(|| engines::open(host_path(path), &options))
        .py(py)?;
    Ok(NativeStore::new(Shared::new(opened)))
}

/// `(key, default, help, at_create_only)` of one engine option.
type OptionRow = (String, String, String, bool);

/// `(name, description, [option])` of every engine.
#[pyfunction]
#[pyo3(name = "engines")]
pub fn engine_list() -> Vec<(String, String, Vec<OptionRow>)> {
    ::engines::ENGINES
        .iter()
        .map(|e| {
            let opts = e
                .options()
                .iter()
                .map(|o| {
                    let create_only = o.when == ::engines::OptionUse::Create;
                    (o.key.into(), o.default.into(), o.help.into(), create_only)
                })
                .collect();
            (e.name().into(), e.description().into(), opts)
        })
        .collect()
}

/// One open store (see the Python class `atomfs.Store`).
#[pyclass(module = "atomfs._native", frozen)]
pub struct NativeStore {
    pub(crate) shared: Arc<Shared>,
}

impl NativeStore {
    fn new(shared: Arc<Shared>) -> Self {
        NativeStore { shared }
    }

    /// Run `f` on the store with the GIL released.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&dyn Store) -> Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| f(self.shared.store()?)).py(py)
    }

    /// The transaction id of `tx`, which must belong to this store.
    fn tx_id(&self, py: Python<'_>, tx: Option<&Bound<'_, NativeTx>>) -> PyResult<Option<TxId>> {
        tx.map(|tx| tx.get().id_for(&self.shared))
            .transpose()
            .py(py)
    }

    /// Run `f` on the store and the handles of `files` (checked to be open files of this
    /// store), with the GIL released: a file's lock is only ever taken without the GIL.
    fn with_handles<T: Send>(
        &self,
        py: Python<'_>,
        files: &[Bound<'_, NativeFile>],
        f: impl FnOnce(&dyn Store, &[store::Fh]) -> Result<T> + Send,
    ) -> PyResult<T> {
        let files: Vec<&NativeFile> = files.iter().map(|f| f.get()).collect();
        self.call(py, |s| {
            let fhs = files
                .iter()
                .map(|file| file.handle_for(&self.shared))
                .collect::<Result<Vec<_>>>()?;
            f(s, &fhs)
        })
    }
}

fn parent(store: &dyn Store, path: &[u8]) -> Result<(u64, Vec<u8>)> {
    store::resolve_parent(store, path)
}

#[pymethods]
impl NativeStore {
    /// The engine's name.
    #[getter]
    fn engine(&self) -> &'static str {
        self.shared.engine
    }

    /// The pool file.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        use std::os::unix::ffi::OsStrExt;
        PyBytes::new(py, self.shared.path.as_os_str().as_bytes())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Checkpoint everything and close the store, releasing its lock.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.shared.close()).py(py)
    }

    /// Engine name, capacity and usage, and the engine's counters.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (statfs, stats, engine_name) =
            self.call(py, |s| Ok((s.statfs()?, s.stats(), s.engine_name())))?;
        let info = PyDict::new(py);
        info.set_item("engine", self.shared.engine)?;
        info.set_item("engine_mode", engine_name)?;
        info.set_item("path", self.path(py))?;
        info.set_item("block_size", statfs.block_size)?;
        info.set_item("blocks_total", statfs.blocks_total)?;
        info.set_item("blocks_free", statfs.blocks_free)?;
        info.set_item("inodes_total", statfs.inodes_total)?;
        info.set_item("inodes_free", statfs.inodes_free)?;
        info.set_item("name_max", statfs.name_max)?;
        info.set_item("stats", stats.into_iter().collect::<Vec<_>>())?;
        Ok(info)
    }

    /// `([(what, location)], [(counter, value)])` of a read-only consistency check.
    #[allow(clippy::type_complexity)]
    fn fsck(&self, py: Python<'_>) -> PyResult<(Vec<(String, String)>, Vec<(String, u64)>)> {
        let report = self.call(py, |s| s.fsck())?;
        let problems = report
            .problems
            .into_iter()
            .map(|p| (p.what, p.location))
            .collect();
        Ok((problems, report.checked))
    }

    fn stat(&self, py: Python<'_>, path: &[u8]) -> PyResult<StatTuple> {
        self.call(py, |s| store::resolve(s, path))
            .map(|m| stat_tuple(&m))
    }

    #[pyo3(signature = (path, mode, tx=None))]
    fn mkdir(
        &self,
        py: Python<'_>,
        path: &[u8],
        mode: u32,
        tx: Option<&Bound<'_, NativeTx>>,
    ) -> PyResult<()> {
        let tx = self.tx_id(py, tx)?;
        self.call(py, |s| {
            let (dir, name) = parent(s, path)?;
            s.mkdir(dir, &name, mode & 0o7777, tx).map(|_| ())
        })
    }

    #[pyo3(signature = (path, tx=None))]
    fn remove(
        &self,
        py: Python<'_>,
        path: &[u8],
        tx: Option<&Bound<'_, NativeTx>>,
    ) -> PyResult<()> {
        let tx = self.tx_id(py, tx)?;
        self.call(py, |s| {
            let (dir, name) = parent(s, path)?;
            s.unlink(dir, &name, tx)
        })
    }

    #[pyo3(signature = (path, tx=None))]
    fn rmdir(&self, py: Python<'_>, path: &[u8], tx: Option<&Bound<'_, NativeTx>>) -> PyResult<()> {
        let tx = self.tx_id(py, tx)?;
        self.call(py, |s| {
            let (dir, name) = parent(s, path)?;
            s.rmdir(dir, &name, tx)
        })
    }

    #[pyo3(signature = (src, dst, tx=None))]
    fn rename(
        &self,
        py: Python<'_>,
        src: &[u8],
        dst: &[u8],
        tx: Option<&Bound<'_, NativeTx>>,
    ) -> PyResult<()> {
        let tx = self.tx_id(py, tx)?;
        self.call(py, |s| {
            let (dir, name) = parent(s, src)?;
            let (new_dir, new_name) = parent(s, dst)?;
            s.rename(dir, &name, new_dir, &new_name, tx)
        })
    }

    /// `[(name, ino, kind)]` of the directory at `path`.
    fn listdir(&self, py: Python<'_>, path: &[u8]) -> PyResult<Vec<(Vec<u8>, u64, &'static str)>> {
        let entries = self.call(py, |s| {
            let dir = store::resolve(s, path)?;
            if !dir.is_dir() {
                return Err(Error::NotDir(String::from_utf8_lossy(path).into_owned()));
            }
            s.read_dir(dir.ino)
        })?;
        Ok(entries
            .into_iter()
            .map(|e| (e.name, e.ino, kind_name(e.kind)))
            .collect())
    }

    /// Open the file at `path`; creation and truncation belong to `tx` when given, and the
    /// file is then bound to it.
    #[pyo3(signature = (path, read, write, append, truncate, create, create_new, atomic, perm, tx=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        &self,
        py: Python<'_>,
        path: &[u8],
        read: bool,
        write: bool,
        append: bool,
        truncate: bool,
        create: bool,
        create_new: bool,
        atomic: bool,
        perm: u32,
        tx: Option<&Bound<'_, NativeTx>>,
    ) -> PyResult<NativeFile> {
        let tx = self.tx_id(py, tx)?;
        let opts = store::OpenOptions {
            read,
            write,
            append,
            truncate,
            create,
            create_new,
            atomic,
            perm: Some(perm & 0o7777),
        };
        let (fh, meta) = self.call(py, |s| {
            let fh = opts.open(s, path, tx)?;
            match s.fstat(fh) {
                Ok(meta) => Ok((fh, meta)),
                Err(e) => {
                    let _ = s.release(fh);
                    Err(e)
                }
            }
        })?;
        Ok(NativeFile::new(self.shared.clone(), fh, meta.ino, append))
    }

    /// Begin a transaction bound to `files`.
    fn begin(&self, py: Python<'_>, files: Vec<Bound<'_, NativeFile>>) -> PyResult<NativeTx> {
        let id = self.with_handles(py, &files, |s, fhs| s.tx_begin(fhs))?;
        Ok(NativeTx::new(self.shared.clone(), id))
    }

    /// Commit the pending writes of several O_ATOMIC files as one unit.
    fn syncv(&self, py: Python<'_>, files: Vec<Bound<'_, NativeFile>>) -> PyResult<()> {
        self.with_handles(py, &files, |s, fhs| s.syncv(fhs))
    }

    /// Drop the pending writes of several O_ATOMIC files.
    fn abortv(&self, py: Python<'_>, files: Vec<Bound<'_, NativeFile>>) -> PyResult<()> {
        self.with_handles(py, &files, |s, fhs| s.abortv(fhs))
    }

    /// The whole content of the file at `path`.
    fn read_file<'py>(&self, py: Python<'py>, path: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.call(py, |s| store::path::read_file(s, path))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Replace the whole file at `path` (create or truncate, then write) as one transaction:
    /// `tx`, or one of its own.
    #[pyo3(signature = (path, data, tx=None))]
    fn write_file(
        &self,
        py: Python<'_>,
        path: &[u8],
        data: &[u8],
        tx: Option<&Bound<'_, NativeTx>>,
    ) -> PyResult<()> {
        let tx = self.tx_id(py, tx)?;
        self.call(py, |s| match tx {
            Some(tx) => store::path::write_file(s, path, data, Some(tx)),
            None => {
                let own = s.tx_begin(&[])?;
                match store::path::write_file(s, path, data, Some(own)) {
                    Ok(()) => s.tx_commit(own),
                    Err(e) => {
                        let _ = s.tx_abort(own);
                        Err(e)
                    }
                }
            }
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<atomfs._native.NativeStore engine={} path={:?}{}>",
            self.shared.engine,
            self.shared.path,
            if self.shared.is_closed() {
                " closed"
            } else {
                ""
            }
        )
    }
}
