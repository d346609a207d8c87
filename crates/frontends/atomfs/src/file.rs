//! Open files and the options to open them.

use crate::fs::{path_bytes, Shared};
use crate::{io_error, Fs, Metadata, Result};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use store::{Fh, Ino};

/// An open file of a [`Fs`]. Closed when dropped (pending O_ATOMIC writes not yet
/// [`sync_all`](File::sync_all)ed are then dropped, as a crash would drop them).
///
/// `Read`, `Write` and `Seek` use a cursor kept in the `File`; [`read_at`](File::read_at) and
/// [`write_at`](File::write_at) ignore it.
#[derive(Debug)]
pub struct File {
    pub(crate) shared: Arc<Shared>,
    pub(crate) fh: Fh,
    ino: Ino,
    pos: u64,
    append: bool,
}

impl File {
    /// The engine's handle of this open file (for calls on [`Fs::store`]).
    pub fn handle(&self) -> Fh {
        self.fh
    }

    /// The inode number of the file.
    pub fn ino(&self) -> Ino {
        self.ino
    }

    /// Read at `offset`, without moving the cursor. Returns the bytes read (0 at end of file).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.shared.store.read(self.fh, offset, buf)
    }

    /// Read exactly `buf.len()` bytes at `offset`; [`Error::InvalidArgument`](crate::Error)
    /// when the file ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(crate::Error::InvalidArgument(format!(
                    "file ends before offset {}",
                    offset + buf.len() as u64
                )));
            }
            done += n;
        }
        Ok(())
    }

    /// Write all of `data` at `offset`, without moving the cursor (at the end of the file for
    /// a file opened to append).
    pub fn write_at(&self, data: &[u8], offset: u64) -> Result<usize> {
        self.shared.store.write(self.fh, offset, data)
    }

    /// Truncate or extend (with a hole) the file to `len` bytes.
    pub fn set_len(&self, len: u64) -> Result<()> {
        self.shared.store.set_len(self.fh, len)
    }

    /// Make the file durable; for a file in atomic mode, commit its pending writes as one unit.
    pub fn sync_all(&self) -> Result<()> {
        self.shared.store.fsync(self.fh, false)
    }

    /// Like [`sync_all`](File::sync_all), metadata other than the size not included.
    pub fn sync_data(&self) -> Result<()> {
        self.shared.store.fsync(self.fh, true)
    }

    /// Switch atomic mode (O_ATOMIC) on or off. Switching it off commits the pending writes.
    pub fn set_atomic(&self, atomic: bool) -> Result<()> {
        self.shared.store.set_atomic(self.fh, atomic)
    }

    /// Attributes of the file as this handle sees it.
    pub fn metadata(&self) -> Result<Metadata> {
        self.shared.store.fstat(self.fh)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // A failed release has nowhere to go from a destructor; the engine reclaims the handle
        // at unmount anyway.
        let _ = self.shared.store.release(self.fh);
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(buf, self.pos).map_err(io_error)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.write_at(buf, self.pos).map_err(io_error)?;
        self.pos = if self.append {
            self.metadata().map_err(io_error)?.size
        } else {
            self.pos + n as u64
        };
        Ok(n)
    }

    /// Writes are handed to the engine at once; nothing to flush (use `sync_all` to commit an
    /// atomic-mode file).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match pos {
            SeekFrom::Start(off) => {
                self.pos = off;
                return Ok(off);
            }
            SeekFrom::Current(delta) => (self.pos, delta),
            SeekFrom::End(delta) => (self.metadata().map_err(io_error)?.size, delta),
        };
        match base.checked_add_signed(delta) {
            Some(new) => {
                self.pos = new;
                Ok(new)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing offset",
            )),
        }
    }
}

/// Options to open a file, mirroring `std::fs::OpenOptions`, plus [`atomic`](OpenOptions::atomic).
/// Get one from [`Fs::options`].
#[derive(Clone, Debug)]
pub struct OpenOptions<'fs> {
    fs: &'fs Fs,
    opts: store::OpenOptions,
}

impl<'fs> OpenOptions<'fs> {
    pub(crate) fn new(fs: &'fs Fs) -> Self {
        OpenOptions {
            fs,
            opts: store::OpenOptions::new(),
        }
    }
    /// Open for reading.
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.opts.read = on;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.opts.write = on;
        self
    }
    /// Every write goes to the end of the file.
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.opts.append = on;
        self
    }
    /// Truncate the file to 0 bytes when it is opened (needs write access).
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.opts.truncate = on;
        self
    }
    /// Create the file when it does not exist (needs write access).
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.opts.create = on;
        self
    }
    /// Create the file, failing when it exists.
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.opts.create_new = on;
        self
    }
    /// O_ATOMIC: writes become durable together at the next `sync_all` (or
    /// [`Fs::syncv`]), and are dropped by [`Fs::abortv`], by closing without a sync, or by a
    /// crash.
    pub fn atomic(&mut self, on: bool) -> &mut Self {
        self.opts.atomic = on;
        self
    }
    /// Permission bits of a created file (default 0o644).
    pub fn mode(&mut self, perm: u32) -> &mut Self {
        self.opts.perm = Some(perm);
        self
    }

    /// Open the file at `path` (inside the file system) with these options.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<File> {
        self.open_with(path, None)
    }

    /// Open the file at `path` as part of the transaction `tx`: its creation and truncation
    /// belong to `tx`, and the file is bound to it (every write through it too).
    pub fn open_in(&self, tx: &crate::Tx, path: impl AsRef<Path>) -> Result<File> {
        self.open_with(path, Some(tx.id()))
    }

    fn open_with(&self, path: impl AsRef<Path>, tx: Option<store::TxId>) -> Result<File> {
        let store = &*self.fs.shared.store;
        let fh = self.opts.open(store, path_bytes(path.as_ref()), tx)?;
        let ino = match store.fstat(fh) {
            Ok(meta) => meta.ino,
            Err(e) => {
                let _ = store.release(fh);
                return Err(e);
            }
        };
        Ok(File {
            shared: self.fs.shared.clone(),
            fh,
            ino,
            pos: 0,
            append: self.opts.append,
        })
    }
}
