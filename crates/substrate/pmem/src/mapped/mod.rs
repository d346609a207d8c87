//! A region over a memory-mapped pool file.
//!
//! The file is mapped `MAP_SHARED` (with `MAP_SHARED_VALIDATE | MAP_SYNC` when the file system
//! supports it, i.e. DAX on real persistent memory). The [`Durability`] mode says honestly what
//! makes a store durable on that file system:
//!
//! - [`Durability::MapSync`] (DAX with MAP_SYNC) and [`Durability::Tmpfs`] (tmpfs, e.g.
//!   `/dev/shm`, whose page cache is DRAM: the emulated NVMM of the seeds): the cache-line flush
//!   plus the store fence is the persistence point. On tmpfs "durable" means durable for the
//!   emulation: it survives a process crash (the kill tests), not a power loss.
//! - [`Durability::Msync`] (any other file system): the page cache is not the medium, so the
//!   region also records the pages flushed since the last fence and `msync`s them at the fence.

mod cpu;

pub use cpu::FlushInstruction;

mod counters;

use crate::{check_range, lines_in, PmError, PmResult, Region, RegionStats};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Smallest pool file accepted (one page).
pub const POOL_LEN_MIN: u64 = 4096;

/// `statfs` magic number of tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `mmap` flag asking for synchronous page faults (DAX only), from linux/mman.h.
#[cfg(target_os = "linux")]
const MAP_SYNC: libc::c_int = 0x08_0000;

/// What makes a flushed and fenced store durable on this mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// DAX mapping with MAP_SYNC: flush + fence reach persistent memory.
    MapSync,
    /// tmpfs: the page cache is the (emulated) persistent memory; flush + fence are the
    /// persistence point. Survives process crashes, not power loss.
    Tmpfs,
    /// Ordinary file system: flush + fence + `msync` of the flushed pages at the fence.
    Msync,
}

impl Durability {
    /// True when the cache-line flush and fence alone are the persistence point.
    pub fn flush_is_persistence_point(self) -> bool {
        matches!(self, Durability::MapSync | Durability::Tmpfs)
    }
}

/// Pages (first, end) flushed since the last fence, in msync mode.
type DirtyPages = Vec<(u64, u64)>;

/// A region over a `mmap`ed pool file (see the module documentation).
pub struct MappedRegion {
    path: PathBuf,
    base: *mut u8,
    len: u64,
    page: u64,
    durability: Durability,
    flush_kind: FlushInstruction,
    dirty: Mutex<DirtyPages>,
    sync_error: Mutex<Option<std::io::Error>>,
    counters: counters::Counters,
    _file: File,
}

// SAFETY: the mapping is owned by the region and lives until drop; the Region contract makes
// callers serialise conflicting accesses to the same bytes; the bookkeeping uses atomics and
// mutexes.
unsafe impl Send for MappedRegion {}
// SAFETY: as above.
unsafe impl Sync for MappedRegion {}

fn invalid(path: &Path, reason: String) -> PmError {
    PmError::Invalid {
        path: path.to_path_buf(),
        reason,
    }
}

fn io_error(path: &Path, op: &'static str, source: std::io::Error) -> PmError {
    PmError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as u64
    } else {
        4096
    }
}

/// A directory for scratch pools: `/dev/shm` when it is a writable tmpfs directory (the
/// emulated NVMM), else the system temporary directory.
pub fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let usable = File::open(shm)
        .and_then(|dir| is_tmpfs(&dir))
        .unwrap_or(false)
        && std::fs::metadata(shm)
            .map(|m| !m.permissions().readonly())
            .unwrap_or(false);
    if usable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl MappedRegion {
    /// Create a new pool file of `len` bytes and map it. The file must not exist yet, or be
    /// empty: a store registry creates (mode 0600) and locks the file before an engine formats
    /// it, so that no other process can open the store while it is being made.
    pub fn create(path: impl AsRef<Path>, len: u64) -> PmResult<Self> {
        let path = path.as_ref();
        check_len(path, len, POOL_LEN_MIN)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| io_error(path, "create", e))?;
        let existing = file.metadata().map_err(|e| io_error(path, "stat", e))?;
        if !existing.is_file() || existing.len() != 0 {
            return Err(io_error(
                path,
                "create",
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "file exists and is not empty",
                ),
            ));
        }
        file.set_len(len)
            .map_err(|e| io_error(path, "set_len", e))?;
        // persist: the file's size must survive a crash before anything is stored in it.
        file.sync_all().map_err(|e| io_error(path, "fsync", e))?;
        Self::map(path, file, len)
    }

    /// Open and map an existing pool file; its size is the file's size.
    pub fn open(path: impl AsRef<Path>) -> PmResult<Self> {
        Self::open_with_min(path, POOL_LEN_MIN)
    }

    /// [`open`](Self::open) requiring at least `len_min` bytes (and at least one page).
    pub fn open_with_min(path: impl AsRef<Path>, len_min: u64) -> PmResult<Self> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_error(path, "open", e))?;
        let meta = file.metadata().map_err(|e| io_error(path, "stat", e))?;
        if !meta.is_file() {
            return Err(invalid(path, "not a regular file".into()));
        }
        check_len(path, meta.len(), len_min.max(POOL_LEN_MIN))?;
        Self::map(path, file, meta.len())
    }

    /// Map `map_len` bytes (a positive multiple of the page size) of an already open host
    /// file that is not a pool file: its length may be anything, even smaller than the
    /// mapping (engines that map user files whole, remapping on growth, map ahead of the end).
    ///
    /// The caller must never touch bytes of the mapping in pages entirely beyond the file's
    /// current end (the kernel answers such an access with SIGBUS), and must not let the file
    /// shrink under a live mapping.
    pub fn map_host_file(path: impl AsRef<Path>, file: File, map_len: u64) -> PmResult<Self> {
        let path = path.as_ref();
        let page = page_size();
        if map_len == 0 || map_len & (page - 1) != 0 {
            return Err(invalid(
                path,
                format!(
                    "mapping length {map_len} is not a positive multiple of the page size {page}"
                ),
            ));
        }
        Self::map(path, file, map_len)
    }

    fn map(path: &Path, file: File, len: u64) -> PmResult<Self> {
        let size = usize::try_from(len)
            .map_err(|_| invalid(path, format!("{len} bytes do not fit the address space")))?;
        let (base, map_sync) = map_file(&file, size).map_err(|e| io_error(path, "mmap", e))?;
        let durability = if map_sync {
            Durability::MapSync
        } else if is_tmpfs(&file).map_err(|e| io_error(path, "fstatfs", e))?
            && FlushInstruction::detect() != FlushInstruction::None
        {
            Durability::Tmpfs
        } else {
            Durability::Msync
        };
        Ok(MappedRegion {
            path: path.to_path_buf(),
            base,
            len,
            page: page_size(),
            durability,
            flush_kind: FlushInstruction::detect(),
            dirty: Mutex::new(Vec::new()),
            sync_error: Mutex::new(None),
            counters: counters::Counters::new(),
            _file: file,
        })
    }

    /// Fault every page of the mapping in, writable, without changing a byte
    /// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14+): later first touches take no page fault,
    /// and on tmpfs no page is zeroed inside a timed loop (real NVMM mapped with DAX has no
    /// such cost). Benchmarks call it before timing. Fails (with the kernel's error) where the
    /// kernel lacks the advice or memory runs out; nothing is changed then.
    pub fn populate(&self) -> PmResult<()> {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        // SAFETY: `base..base + len` is exactly this region's live mapping (made by `map`,
        // unmapped only in drop); MADV_POPULATE_WRITE only faults pages in and changes no
        // byte of memory that Rust code could observe.
        let rc = unsafe {
            libc::madvise(
                self.base.cast::<libc::c_void>(),
                self.len as usize,
                MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            return Err(io_error(
                &self.path,
                "madvise(MADV_POPULATE_WRITE)",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// The pool file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What makes data durable on this mapping.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The cache-line flush instruction in use.
    pub fn flush_instruction(&self) -> FlushInstruction {
        self.flush_kind
    }

    /// The first `msync` failure since the last call, if any. A failed msync means the
    /// fence did not make the flushed data durable; engines check this at commit.
    pub fn take_sync_error(&self) -> PmResult<()> {
        let error = self
            .sync_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match error {
            Some(source) => Err(io_error(&self.path, "msync", source)),
            None => Ok(()),
        }
    }

    fn ptr(&self, off: u64) -> *mut u8 {
        // SAFETY: callers checked `off <= len`, so the pointer stays inside the mapping.
        unsafe { self.base.add(off as usize) }
    }

    /// In msync mode, remember the pages of `[off, off + len)` for the next fence.
    fn note_dirty(&self, off: u64, len: u64) {
        if self.durability != Durability::Msync || len == 0 {
            return;
        }
        let first = off / self.page;
        let end = (off + len).div_ceil(self.page);
        let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
        match dirty.last_mut() {
            Some(last) if last.1 >= first && last.0 <= end => {
                *last = (last.0.min(first), last.1.max(end))
            }
            _ => dirty.push((first, end)),
        }
    }

    /// msync every page range flushed since the last fence.
    ///
    /// The dirty list stays locked until the msyncs are done: a fence on another thread that
    /// finds the list empty because this one took its pages must not return before they are
    /// durable, so it waits here.
    fn sync_dirty(&self) {
        let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
        let mut ranges = std::mem::take(&mut *dirty);
        ranges.sort_unstable();
        let mut merged: DirtyPages = Vec::with_capacity(ranges.len());
        for (first, end) in ranges {
            match merged.last_mut() {
                Some(last) if first <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((first, end)),
            }
        }
        for (first, end) in merged {
            let off = first * self.page;
            let len = (end * self.page).min(self.len) - off;
            // SAFETY: page-aligned range inside the mapping.
            let rc = unsafe {
                libc::msync(
                    self.ptr(off) as *mut libc::c_void,
                    len as usize,
                    libc::MS_SYNC,
                )
            };
            if rc != 0 {
                let mut slot = self.sync_error.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(std::io::Error::last_os_error());
            }
        }
        drop(dirty);
    }
}

fn check_len(path: &Path, len: u64, len_min: u64) -> PmResult<()> {
    if len < len_min {
        return Err(invalid(
            path,
            format!("pool file too small: {len} bytes, need at least {len_min}"),
        ));
    }
    let page = page_size();
    // The page size is a power of two.
    if len & (page - 1) != 0 {
        return Err(invalid(
            path,
            format!("pool size {len} is not a multiple of the page size {page}"),
        ));
    }
    Ok(())
}

/// Map `size` bytes of `file` shared; returns the base and whether MAP_SYNC was granted.
fn map_file(file: &File, size: usize) -> std::io::Result<(*mut u8, bool)> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let fd = file.as_raw_fd();
    #[cfg(target_os = "linux")]
    {
        let flags = libc::MAP_SHARED_VALIDATE | MAP_SYNC;
        // SAFETY: a fresh mapping chosen by the kernel; fd is open for reading and writing.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, flags, fd, 0) };
        if base != libc::MAP_FAILED {
            return Ok((base as *mut u8, true));
        }
    }
    // SAFETY: as above, plain shared mapping.
    let base = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED, fd, 0) };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok((base as *mut u8, false))
}

fn is_tmpfs(file: &File) -> std::io::Result<bool> {
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs fills the struct on success; we read it only then.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful call.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets.
    Ok(stat.f_type as i64 == TMPFS_MAGIC)
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: the mapping was created with this base and length and is not used after.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len as usize) };
    }
}

impl Region for MappedRegion {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.len, off, buf.len() as u64);
        // SAFETY: in range (checked); `buf` is not part of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(off), buf.as_mut_ptr(), buf.len()) }
    }

    fn write(&self, off: u64, data: &[u8]) {
        check_range(self.len, off, data.len() as u64);
        // SAFETY: in range (checked); `data` is not part of the mapping (a caller passing a
        // slice of the mapping would need another region reference, not this API).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr(off), data.len()) }
        self.counters.add(data.len() as u64, 0, 0);
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        check_range(self.len, off, len);
        // SAFETY: in range (checked).
        unsafe { std::ptr::write_bytes(self.ptr(off), byte, len as usize) }
        self.counters.add(len, 0, 0);
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        check_range(self.len, off, data.len() as u64);
        // SAFETY: in range (checked), not overlapping `data`; the flush instruction was
        // detected on this CPU.
        unsafe { cpu::copy_nontemporal(self.flush_kind, self.ptr(off), data) }
        self.counters
            .add(data.len() as u64, lines_in(off, data.len() as u64), 0);
        self.note_dirty(off, data.len() as u64);
    }

    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        assert!(
            off.is_multiple_of(crate::CACHE_LINE),
            "pmem: unaligned line store at {off}"
        );
        check_range(self.len, off, 64);
        // SAFETY: in range (checked) and 64-byte aligned (asserted; the mapping is page
        // aligned); `line` is not part of the mapping.
        unsafe { cpu::stream_line(self.ptr(off), line) }
        self.counters.add(64, 1, 0);
        self.note_dirty(off, 64);
    }

    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        check_range(self.len, src, len);
        check_range(self.len, dst, len);
        assert!(
            src + len <= dst || dst + len <= src,
            "pmem: overlapping copy {src}..+{len} -> {dst}"
        );
        // SAFETY: both ranges are in the mapping (checked) and disjoint (asserted). The source
        // slice lives only for this call, during which, per the Region contract, no other
        // thread writes those bytes (conflicting accesses are serialised by the caller).
        unsafe {
            let source = std::slice::from_raw_parts(self.ptr(src), len as usize);
            cpu::copy_nontemporal(self.flush_kind, self.ptr(dst), source)
        }
        self.counters.add(len, lines_in(dst, len), 0);
        self.note_dirty(dst, len);
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte load at {off}");
        check_range(self.len, off, 8);
        // SAFETY: aligned, in range; the mapping is page aligned so the word is naturally
        // aligned; AtomicU64 has the layout of u64.
        unsafe { (*(self.ptr(off) as *const AtomicU64)).load(Ordering::Acquire) }
    }

    fn store_u64(&self, off: u64, value: u64) {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte store at {off}");
        check_range(self.len, off, 8);
        // SAFETY: as in load_u64. An aligned 8-byte store is a single untearable write.
        unsafe { (*(self.ptr(off) as *const AtomicU64)).store(value, Ordering::Release) }
        self.counters.add(8, 0, 0);
    }

    fn store_u64_nt(&self, off: u64, value: u64) {
        assert!(off & 7 == 0, "pmem: unaligned 8-byte store at {off}");
        check_range(self.len, off, 8);
        // SAFETY: aligned, in range (checked); the flush instruction was detected on this CPU.
        unsafe { cpu::stream_u64(self.flush_kind, self.ptr(off), value) }
        self.counters.add(8, 1, 0);
        self.note_dirty(off, 8);
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.len, off, len);
        // SAFETY: in range; the instruction was detected on this CPU.
        unsafe { cpu::flush_range(self.flush_kind, self.ptr(off), len as usize) }
        self.counters.add(0, lines_in(off, len), 0);
        self.note_dirty(off, len);
    }

    fn fence(&self) {
        cpu::store_fence();
        if self.durability == Durability::Msync {
            // persist: on an ordinary file system the flushed lines are only in the page
            // cache; msync writes the flushed pages to the file before the fence returns.
            self.sync_dirty();
        }
        self.counters.add(0, 0, 1);
    }

    fn prefetch(&self, off: u64) {
        if off < self.len {
            cpu::prefetch_line(self.ptr(off));
        }
    }

    fn stats(&self) -> RegionStats {
        let (bytes_stored, lines_flushed, fences) = self.counters.sum();
        RegionStats {
            bytes_stored,
            lines_flushed,
            fences,
        }
    }
}

#[cfg(test)]
mod tests;
