//! `pmdk`: PMDK libpmemobj transactions (csrc/pmdk_tx.c) on a pool in /dev/shm with
//! `PMEM_IS_PMEM_FORCE=1`, so libpmem flushes with clwb + sfence like atomfs. The pattern is
//! the canonical one: `pmemobj_tx_begin`, `pmemobj_tx_add_range_direct` (undo snapshot of the
//! old bytes, persisted), `memcpy`, `pmemobj_tx_commit` (flushes the new bytes, drops the log).
//! Built only when libpmemobj is installed (`cfg(has_pmdk)` from build.rs); otherwise
//! [`Pmdk::new`] returns `Skipped`.

use crate::error::{BenchError, Result};
use crate::system::TwoFileUpdate;
use crate::workload::Write;

/// True when this binary was built with the PMDK baseline.
pub fn available() -> bool {
    cfg!(has_pmdk)
}

#[cfg(has_pmdk)]
mod ffi {
    use std::os::raw::{c_char, c_int, c_void};

    #[repr(C)]
    pub struct BenchPmdk {
        _private: [u8; 0],
    }

    extern "C" {
        pub fn bench_pmdk_errormsg() -> *const c_char;
        pub fn bench_pmdk_create(
            path: *const c_char,
            pool_size: u64,
            nfiles: u64,
            file_size: u64,
        ) -> *mut BenchPmdk;
        #[allow(clippy::too_many_arguments)]
        pub fn bench_pmdk_tx(
            h: *mut BenchPmdk,
            fa: u32,
            offa: u64,
            da: *const c_void,
            la: usize,
            fb: u32,
            offb: u64,
            db: *const c_void,
            lb: usize,
        ) -> c_int;
        pub fn bench_pmdk_read(
            h: *mut BenchPmdk,
            file: u32,
            off: u64,
            buf: *mut c_void,
            len: usize,
        ) -> c_int;
        pub fn bench_pmdk_close(h: *mut BenchPmdk);
    }
}

pub struct Pmdk {
    #[cfg(has_pmdk)]
    handle: *mut ffi::BenchPmdk,
    path: std::path::PathBuf,
}

#[cfg(has_pmdk)]
fn last_error() -> String {
    // SAFETY: pmemobj_errormsg returns a valid NUL-terminated thread-local string.
    unsafe { std::ffi::CStr::from_ptr(ffi::bench_pmdk_errormsg()) }
        .to_string_lossy()
        .into_owned()
}

impl Pmdk {
    /// A PMDK system, or `Skipped` when the binary was built without libpmemobj.
    pub fn new() -> Result<Self> {
        if !available() {
            return Err(BenchError::Skipped("libpmemobj not installed".into()));
        }
        // libpmem reads this when the first pool is opened: make /dev/shm count as pmem so
        // that it flushes cache lines (clwb) instead of calling msync.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
        Ok(Pmdk {
            #[cfg(has_pmdk)]
            handle: std::ptr::null_mut(),
            path: crate::scratch_path("pmdk.pool"),
        })
    }
}

#[cfg(has_pmdk)]
impl TwoFileUpdate for Pmdk {
    fn name(&self) -> String {
        "pmdk".into()
    }

    fn medium(&self) -> String {
        format!(
            "libpmemobj pool {} (PMEM_IS_PMEM_FORCE=1)",
            self.path.display()
        )
    }

    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let data = files as u64 * file_size;
        // Objects, allocator headers and the undo logs, with room to spare.
        let pool_size = data + data / 8 + (64 << 20);
        let cpath = std::ffi::CString::new(self.path.as_os_str().as_bytes())
            .map_err(|_| BenchError::Invalid("pool path contains NUL".into()))?;
        // SAFETY: cpath is a valid C string; the C side checks every result and returns NULL
        // on failure.
        let handle =
            unsafe { ffi::bench_pmdk_create(cpath.as_ptr(), pool_size, files as u64, file_size) };
        if handle.is_null() {
            let _ = std::fs::remove_file(&self.path);
            return Err(BenchError::System {
                system: "pmdk".into(),
                message: last_error(),
            });
        }
        self.handle = handle;
        Ok(())
    }

    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        if self.handle.is_null() {
            return Err(BenchError::Invalid("pmdk: no setup".into()));
        }
        // SAFETY: handle is live; the data pointers are valid for their lengths; the C side
        // bounds-checks the ranges against the objects.
        let rc = unsafe {
            ffi::bench_pmdk_tx(
                self.handle,
                a.file,
                a.off,
                a.data.as_ptr().cast(),
                a.data.len(),
                b.file,
                b.off,
                b.data.as_ptr().cast(),
                b.data.len(),
            )
        };
        if rc != 0 {
            return Err(BenchError::System {
                system: "pmdk".into(),
                message: last_error(),
            });
        }
        Ok(())
    }

    fn bytes_written(&self) -> Option<u64> {
        None // libpmemobj does not expose its store counts; not guessed.
    }

    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        if self.handle.is_null() {
            return Err(BenchError::Invalid("pmdk: no setup".into()));
        }
        // SAFETY: handle is live, buf is valid for writes of its length; bounds checked in C.
        let rc = unsafe {
            ffi::bench_pmdk_read(self.handle, file, off, buf.as_mut_ptr().cast(), buf.len())
        };
        if rc != 0 {
            return Err(BenchError::Invalid(format!(
                "pmdk: read {file}:{off} out of range"
            )));
        }
        Ok(())
    }
}

#[cfg(not(has_pmdk))]
impl TwoFileUpdate for Pmdk {
    fn name(&self) -> String {
        "pmdk".into()
    }
    fn medium(&self) -> String {
        "not built".into()
    }
    fn setup(&mut self, _: u32, _: u64) -> Result<()> {
        Err(BenchError::Skipped("libpmemobj not installed".into()))
    }
    fn tx(&mut self, _: Write<'_>, _: Write<'_>) -> Result<()> {
        Err(BenchError::Skipped("libpmemobj not installed".into()))
    }
    fn bytes_written(&self) -> Option<u64> {
        None
    }
    fn read(&mut self, _: u32, _: u64, _: &mut [u8]) -> Result<()> {
        Err(BenchError::Skipped("libpmemobj not installed".into()))
    }
}

impl Drop for Pmdk {
    fn drop(&mut self) {
        #[cfg(has_pmdk)]
        if !self.handle.is_null() {
            // SAFETY: handle came from bench_pmdk_create and is closed exactly once.
            unsafe { ffi::bench_pmdk_close(self.handle) };
            self.handle = std::ptr::null_mut();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
