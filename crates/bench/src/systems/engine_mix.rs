//! Every registered engine in the `engines` suite, reached only through the engine registry
//! (`engines::create` with typed `key=value` options, then the `Store` API), as every front
//! end reaches it.
//!
//! The pool file is a file in the scratch directory (/dev/shm: the tmpfs page cache is the
//! emulated NVMM), fallocated after setup so that no run pays tmpfs page allocation (real
//! NVMM has none). An engine that keeps its files in a home directory (it declares the
//! option `home`) gets one on the ext4 RAM disk, the medium of the ext4 reference, so that
//! both write file data to the same kind of device. An engine that declares `size` gets a
//! pool of twice the data plus 128 MB (rounded up to 2 MiB); every other option keeps its default.
//!
//! Handles: the two-file set is opened plainly and bound by `tx_begin` for each transaction;
//! the overwrite and append files are opened O_ATOMIC, so `fsync` commits the write before
//! it (what the LD_PRELOAD shim gives an unmodified program); namespace calls are each their
//! own transaction, durable when they return.

use super::file_io::fill_through;
use super::mix::{ns_name, MixShape, MixSystem, NsOp};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::workload::Write;
use engines::{Engine, OpenedStore, Options};
use std::path::PathBuf;
use std::rc::Rc;
use store::{Fh, Ino, OpenFlags, Store, ROOT_INO};

/// Pool bytes beyond twice the data (logs, inode table, pending blocks).
const POOL_SLACK: u64 = 128 << 20;

/// Pool sizes are a multiple of this (pages, and 2 MiB huge pages where the scratch
/// directory has them).
const POOL_ALIGN: u64 = 2 << 20;

/// Bytes of the pattern the namespace mix's files are written from.
pub const NS_DATA_MAX: usize = 4096;

/// The open handles of a set-up store.
struct Handles {
    tx: Vec<Fh>,
    overwrite: Fh,
    append: Fh,
    ns_dir: Ino,
}

pub struct EngineMix {
    engine: &'static dyn Engine,
    disk: Rc<Ext4Disk>,
    pool: PathBuf,
    home: Option<PathBuf>,
    options: Options,
    opened: Option<OpenedStore>,
    handles: Option<Handles>,
    shape: Option<MixShape>,
    append_len: u64,
    ns_data: Vec<u8>,
}

/// The options the suite gives `engine` for a store holding `data` bytes of files: `home`
/// (when the engine takes one), `size` (when it takes one) and `checkpoint=copy` (remap:
/// the homes are on ext4); nothing else.
pub fn options_for(engine: &dyn Engine, data: u64, home: Option<&std::path::Path>) -> Options {
    let mut options = Options::new();
    let takes = |key: &str| engine.options().iter().any(|o| o.key == key);
    if let (true, Some(home)) = (takes("home"), home) {
        options.set("home", home.display().to_string());
    }
    if takes("size") {
        let size = (2 * data + POOL_SLACK).div_ceil(POOL_ALIGN) * POOL_ALIGN;
        options.set("size", size.to_string());
    }
    if engine.name() == "remap" {
        // The suite's homes are on ext4, which cannot remap (no reflink): say so by option.
        options.set("checkpoint", "copy");
    }
    options
}

/// Whether `engine` keeps its files in a home directory (declares the option `home`).
pub fn takes_home(engine: &dyn Engine) -> bool {
    engine.options().iter().any(|o| o.key == "home")
}

/// Allocate every page of the file at `path` (tmpfs: no later run pays the allocation);
/// its contents are unchanged. Err says why not.
pub fn preallocate(path: &std::path::Path) -> std::result::Result<(), String> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let len = libc::off_t::try_from(len).map_err(|e| e.to_string())?;
    // SAFETY: fallocate on a valid open descriptor; mode 0 allocates holes only and never
    // changes existing bytes; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

impl EngineMix {
    pub fn new(engine: &'static dyn Engine, disk: Rc<Ext4Disk>) -> Self {
        let mut ns_data = vec![0u8; NS_DATA_MAX];
        let mut rng = crate::workload::Rng::new(0x4E53);
        ns_data.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        EngineMix {
            engine,
            pool: crate::scratch_path(&format!("engines-{}.pool", engine.name())),
            home: None,
            options: Options::new(),
            opened: None,
            handles: None,
            shape: None,
            append_len: 0,
            ns_data,
            disk,
        }
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> BenchError {
        BenchError::System {
            system: self.name(),
            message: format!("{what}: {e}"),
        }
    }

    fn parts(&self) -> Result<(&dyn Store, &Handles)> {
        match (&self.opened, &self.handles) {
            (Some(o), Some(h)) => Ok((o.store.as_ref(), h)),
            _ => Err(BenchError::Invalid(format!("{}: no setup", self.name()))),
        }
    }

    /// Create the files of `shape` in the open store; the handles the runs use.
    fn build(store: &dyn Store, shape: MixShape) -> store::Result<Handles> {
        let plain = OpenFlags {
            read: true,
            write: true,
            ..Default::default()
        };
        let atomic = OpenFlags {
            atomic: true,
            ..plain
        };
        let tx_dir = store.mkdir(ROOT_INO, b"tx", 0o755, None)?.ino;
        let mut tx = Vec::new();
        for i in 0..shape.tx_files {
            let meta = store.create(tx_dir, format!("{i:05}").as_bytes(), 0o644, None)?;
            let fh = store.open(meta.ino, plain)?;
            fill_through(store, fh, shape.tx_file_len)?;
            tx.push(fh);
        }
        let meta = store.create(ROOT_INO, b"overwrite.dat", 0o644, None)?;
        let fill = store.open(meta.ino, plain)?;
        fill_through(store, fill, shape.overwrite_len)?;
        store.release(fill)?;
        let overwrite = store.open(meta.ino, atomic)?;
        let meta = store.create(ROOT_INO, b"append.log", 0o644, None)?;
        let append = store.open(meta.ino, atomic)?;
        let ns_dir = store.mkdir(ROOT_INO, b"ns", 0o755, None)?.ino;
        Ok(Handles {
            tx,
            overwrite,
            append,
            ns_dir,
        })
    }

    fn write_all(&self, store: &dyn Store, fh: Fh, off: u64, data: &[u8]) -> Result<()> {
        match store.write(fh, off, data) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => Err(self.err("write", format!("short write {n} of {}", data.len()))),
            Err(e) => Err(self.err("write", e)),
        }
    }

    fn tx_fh(&self, h: &Handles, file: u32) -> Result<Fh> {
        h.tx.get(file as usize)
            .copied()
            .ok_or_else(|| self.err("two-file tx", format!("no file {file}")))
    }

    fn create_file(&self, store: &dyn Store, dir: Ino, name: u64, len: u64) -> Result<()> {
        let meta = store
            .create(dir, ns_name(name).as_bytes(), 0o644, None)
            .map_err(|e| self.err("create", e))?;
        let flags = OpenFlags {
            write: true,
            ..Default::default()
        };
        let fh = store
            .open(meta.ino, flags)
            .map_err(|e| self.err("open", e))?;
        let len = (len as usize).min(self.ns_data.len());
        let written = self
            .write_all(store, fh, 0, &self.ns_data[..len])
            .and_then(|()| store.fsync(fh, true).map_err(|e| self.err("fsync", e)));
        let released = store.release(fh).map_err(|e| self.err("release", e));
        written.and(released)
    }
}

impl MixSystem for EngineMix {
    fn name(&self) -> String {
        self.engine.name().to_string()
    }

    fn guarantee(&self) -> &'static str {
        "atomic and durable: each transaction, each fsync'd write, each namespace call"
    }

    fn medium(&self) -> String {
        let home = match &self.home {
            Some(h) => format!("home directory {} on {}", h.display(), self.disk.label()),
            None => "the files live in the pool file".into(),
        };
        let options: Vec<String> = self
            .options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "atomfs engine {} via engines::create ({}): pool file {} (tmpfs, fallocated); \
             {home}; options {}",
            self.engine.name(),
            self.engine.description(),
            self.pool.display(),
            options.join(",")
        )
    }

    fn setup(&mut self, shape: MixShape) -> Result<()> {
        if takes_home(self.engine) {
            let home = self
                .disk
                .root()
                .join(format!("engines-{}-home", self.engine.name()));
            std::fs::create_dir_all(&home).map_err(|e| BenchError::io("mkdir", &home, e))?;
            self.home = Some(home);
        }
        self.options = options_for(self.engine, shape.data_bytes(), self.home.as_deref());
        let opened = engines::create(&self.pool, self.engine.name(), &self.options)
            .map_err(|e| self.err("engines::create", e))?;
        let handles = Self::build(opened.store.as_ref(), shape);
        self.opened = Some(opened);
        self.handles = Some(handles.map_err(|e| self.err("setup", e))?);
        self.shape = Some(shape);
        preallocate(&self.pool).map_err(|e| self.err("fallocate pool file", e))
    }

    fn two_file_tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let (store, h) = self.parts()?;
        let (fa, fb) = (self.tx_fh(h, a.file)?, self.tx_fh(h, b.file)?);
        let tx = store
            .tx_begin(&[fa, fb])
            .map_err(|e| self.err("tx_begin", e))?;
        let written = self
            .write_all(store, fa, a.off, a.data)
            .and_then(|()| self.write_all(store, fb, b.off, b.data));
        match written {
            Ok(()) => store.tx_commit(tx).map_err(|e| self.err("tx_commit", e)),
            Err(e) => {
                let _ = store.tx_abort(tx);
                Err(e)
            }
        }
    }

    fn overwrite(&mut self, off: u64, data: &[u8]) -> Result<()> {
        let (store, h) = self.parts()?;
        self.write_all(store, h.overwrite, off, data)?;
        store
            .fsync(h.overwrite, true)
            .map_err(|e| self.err("fsync", e))
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let max = self.shape.map_or(0, |s| s.append_len_max);
        let (store, h) = self.parts()?;
        let mut len = self.append_len;
        if len + data.len() as u64 > max {
            store
                .set_len(h.append, 0)
                .and_then(|()| store.fsync(h.append, true))
                .map_err(|e| self.err("truncate append file", e))?;
            len = 0;
        }
        self.write_all(store, h.append, len, data)?;
        store
            .fsync(h.append, true)
            .map_err(|e| self.err("fsync", e))?;
        self.append_len = len + data.len() as u64;
        Ok(())
    }

    fn namespace(&mut self, op: NsOp) -> Result<()> {
        let (store, h) = self.parts()?;
        let dir = h.ns_dir;
        match op {
            NsOp::Create { name, len } => self.create_file(store, dir, name, len),
            NsOp::Rename { from, to } => store
                .rename(
                    dir,
                    ns_name(from).as_bytes(),
                    dir,
                    ns_name(to).as_bytes(),
                    None,
                )
                .map_err(|e| self.err("rename", e)),
            NsOp::Unlink { name } => store
                .unlink(dir, ns_name(name).as_bytes(), None)
                .map_err(|e| self.err("unlink", e)),
        }
    }

    fn namespace_clear(&mut self) -> Result<()> {
        let (store, h) = self.parts()?;
        let entries = store
            .read_dir(h.ns_dir)
            .map_err(|e| self.err("read_dir", e))?;
        for entry in entries {
            store
                .unlink(h.ns_dir, &entry.name, None)
                .map_err(|e| self.err("unlink", e))?;
        }
        Ok(())
    }

    fn read_tx_file(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        let (store, h) = self.parts()?;
        let fh = self.tx_fh(h, file)?;
        match store.read(fh, off, buf) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(n) => Err(self.err("read", format!("short read {n} of {}", buf.len()))),
            Err(e) => Err(self.err("read", e)),
        }
    }
}

impl Drop for EngineMix {
    fn drop(&mut self) {
        if let (Some(o), Some(h)) = (&self.opened, self.handles.take()) {
            for fh in h.tx.into_iter().chain([h.overwrite, h.append]) {
                let _ = o.store.release(fh);
            }
        }
        if let Some(o) = self.opened.take() {
            let _ = o.unmount();
        }
        let _ = std::fs::remove_file(&self.pool);
        if let Some(home) = self.home.take() {
            let _ = std::fs::remove_dir_all(home);
        }
    }
}
