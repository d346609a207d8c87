//! `NativeFile`: one open file handle and its cursor.

use crate::errors::IntoPy;
use crate::shared::Shared;
use crate::store::{stat_tuple, StatTuple};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use store::{Error, Fh, Ino, Result, Store};

/// Largest single read, so that `read(-1)` of a huge file fails cleanly instead of aborting
/// on allocation.
const READ_MAX: u64 = 1 << 31;

struct State {
    pos: u64,
    closed: bool,
}

/// One open file (see the Python class `atomfs.RawFile`). The cursor and the closed flag are
/// behind one mutex, taken with the GIL released: calls on one file run one at a time, and a
/// closed handle (whose number the engine may reuse) is never used again.
#[pyclass(module = "atomfs._native", frozen)]
pub struct NativeFile {
    shared: Arc<Shared>,
    fh: Fh,
    ino: Ino,
    append: bool,
    state: Mutex<State>,
    /// Mirrors `state.closed` for the `closed` property, which must not wait for the lock
    /// while holding the GIL.
    closed: AtomicBool,
}

impl NativeFile {
    pub fn new(shared: Arc<Shared>, fh: Fh, ino: Ino, append: bool) -> Self {
        NativeFile {
            shared,
            fh,
            ino,
            append,
            state: Mutex::new(State {
                pos: 0,
                closed: false,
            }),
            closed: AtomicBool::new(false),
        }
    }

    /// This file's handle, checked to be open and of the store `shared`. Takes the file's
    /// lock: call it with the GIL released.
    pub fn handle_for(&self, shared: &Arc<Shared>) -> Result<Fh> {
        if !shared.same(&self.shared) {
            return Err(Error::CrossStore("a file of another store".into()));
        }
        let state = self.state.lock().map_err(|_| Error::Closed)?;
        if state.closed {
            return Err(Error::BadHandle(self.fh.0));
        }
        Ok(self.fh)
    }

    /// Run `f` on the store, the handle and the cursor, with the GIL released.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&dyn Store, Fh, &mut u64) -> Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let store = self.shared.store()?;
            let mut state = self.state.lock().map_err(|_| Error::Closed)?;
            if state.closed {
                return Err(Error::BadHandle(self.fh.0));
            }
            f(store, self.fh, &mut state.pos)
        })
        .py(py)
    }
}

fn read_at(store: &dyn Store, fh: Fh, offset: u64, size: i64) -> Result<Vec<u8>> {
    let want = match u64::try_from(size) {
        Ok(n) => n,
        Err(_) => store.fstat(fh)?.size.saturating_sub(offset),
    };
    if want > READ_MAX {
        return Err(Error::InvalidArgument(format!(
            "read of {want} bytes: at most {READ_MAX} at once"
        )));
    }
    let mut buf = vec![0u8; want as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = store.read(fh, offset + done as u64, &mut buf[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

#[pymethods]
impl NativeFile {
    #[getter]
    fn ino(&self) -> u64 {
        self.ino
    }

    /// The engine's handle number.
    #[getter]
    fn handle(&self) -> u64 {
        self.fh.0
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Read up to `size` bytes at the cursor (`size < 0`: to the end of the file).
    #[pyo3(signature = (size=-1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.call(py, |s, fh, pos| {
            let data = read_at(s, fh, *pos, size)?;
            *pos += data.len() as u64;
            Ok(data)
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// Read up to `size` bytes at `offset`, leaving the cursor alone.
    fn pread<'py>(&self, py: Python<'py>, size: u64, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let size = i64::try_from(size.min(READ_MAX + 1)).unwrap_or(i64::MAX);
        let data = self.call(py, |s, fh, _| read_at(s, fh, offset, size))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Write all of `data` at the cursor (at the end for an append file); returns its length.
    fn write(&self, py: Python<'_>, data: &[u8]) -> PyResult<usize> {
        let append = self.append;
        self.call(py, |s, fh, pos| {
            let n = s.write(fh, *pos, data)?;
            *pos = if append {
                s.fstat(fh)?.size
            } else {
                *pos + n as u64
            };
            Ok(n)
        })
    }

    /// Write all of `data` at `offset`, leaving the cursor alone.
    fn pwrite(&self, py: Python<'_>, data: &[u8], offset: u64) -> PyResult<usize> {
        self.call(py, |s, fh, _| s.write(fh, offset, data))
    }

    /// Move the cursor (`whence` 0: from the start, 1: from the cursor, 2: from the end).
    #[pyo3(signature = (offset, whence=0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        self.call(py, |s, fh, pos| {
            let base = match whence {
                0 => 0,
                1 => *pos,
                2 => s.fstat(fh)?.size,
                _ => return Err(Error::InvalidArgument(format!("invalid whence {whence}"))),
            };
            let new = base.checked_add_signed(offset).ok_or_else(|| {
                Error::InvalidArgument(format!("negative seek position {offset}"))
            })?;
            *pos = new;
            Ok(new)
        })
    }

    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.call(py, |_, _, pos| Ok(*pos))
    }

    /// Truncate or extend the file to `size` (default: the cursor); the cursor stays.
    #[pyo3(signature = (size=None))]
    fn truncate(&self, py: Python<'_>, size: Option<u64>) -> PyResult<u64> {
        self.call(py, |s, fh, pos| {
            let len = size.unwrap_or(*pos);
            s.set_len(fh, len)?;
            Ok(len)
        })
    }

    /// fsync: make the file durable; for an O_ATOMIC file, commit its pending writes.
    #[pyo3(signature = (datasync=false))]
    fn sync(&self, py: Python<'_>, datasync: bool) -> PyResult<()> {
        self.call(py, |s, fh, _| s.fsync(fh, datasync))
    }

    /// Switch O_ATOMIC mode; switching it off commits the pending writes.
    fn set_atomic(&self, py: Python<'_>, atomic: bool) -> PyResult<()> {
        self.call(py, |s, fh, _| s.set_atomic(fh, atomic))
    }

    fn fstat(&self, py: Python<'_>) -> PyResult<StatTuple> {
        self.call(py, |s, fh, _| s.fstat(fh))
            .map(|m| stat_tuple(&m))
    }

    /// Release the handle (pending O_ATOMIC writes not yet synced are dropped). Closing twice
    /// is a no-op.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut state = self.state.lock().map_err(|_| Error::Closed)?;
            if state.closed {
                return Ok(());
            }
            state.closed = true;
            self.closed.store(true, Ordering::Release);
            let Ok(store) = self.shared.store() else {
                return Ok(()); // inherited across fork: the handle is the parent's
            };
            match store.release(self.fh) {
                // The store was closed first: its handles went with it.
                Err(Error::Closed) => Ok(()),
                other => other,
            }
        })
        .py(py)
    }
}

impl Drop for NativeFile {
    fn drop(&mut self) {
        let open = self.state.lock().map(|s| !s.closed).unwrap_or(false);
        if open {
            if let Ok(store) = self.shared.store() {
                // Nowhere to report from a destructor; the engine reclaims handles at unmount.
                let _ = store.release(self.fh);
            }
        }
    }
}
