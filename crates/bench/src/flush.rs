//! Cache-line write-back for the `floor` reference and the machine description.
//!
//! Local stand-in until `pmem::MappedRegion` lands on main (then `floor` uses it): picks clwb,
//! else clflushopt, else clflush at run time, like PMDK's libpmem and atomfs's pmem crate.

use crate::error::{BenchError, Result};
use std::path::{Path, PathBuf};

/// Cache-line size the flushes step by.
pub const LINE: usize = 64;

/// Which write-back instruction this CPU offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    Clwb,
    Clflushopt,
    Clflush,
    /// Not x86-64: no cache-line write-back available; flushes are no-ops.
    None,
}

impl FlushKind {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID leaf 7, subleaf 0, EBX: bit 24 = CLWB, bit 23 = CLFLUSHOPT (the std
            // feature-detection macro does not know these two).
            #[allow(unused_unsafe)]
            // SAFETY: cpuid is available on every x86-64 CPU; leaf 7 is valid when the max
            // leaf is >= 7, which is checked first.
            let ebx = unsafe {
                if std::arch::x86_64::__cpuid(0).eax >= 7 {
                    std::arch::x86_64::__cpuid_count(7, 0).ebx
                } else {
                    0
                }
            };
            if ebx & (1 << 24) != 0 {
                FlushKind::Clwb
            } else if ebx & (1 << 23) != 0 {
                FlushKind::Clflushopt
            } else {
                FlushKind::Clflush
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        FlushKind::None
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            FlushKind::Clwb => "clwb",
            FlushKind::Clflushopt => "clflushopt",
            FlushKind::Clflush => "clflush",
            FlushKind::None => "none",
        }
    }
}

/// Write back every cache line overlapping `[ptr, ptr + len)`.
///
/// # Safety
/// `[ptr, ptr + len)` must lie inside one live mapping of this process.
pub unsafe fn flush(kind: FlushKind, ptr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = ptr as usize & !(LINE - 1);
    let end = ptr as usize + len;
    let mut line = start;
    while line < end {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller guarantees the line is mapped; these instructions only write
        // the line back (clwb keeps it cached, the others evict it) and never fault on a
        // mapped address.
        unsafe {
            match kind {
                FlushKind::Clwb => {
                    std::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags))
                }
                FlushKind::Clflushopt => std::arch::asm!(
                    "clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags)
                ),
                FlushKind::Clflush => std::arch::x86_64::_mm_clflush(line as *const u8),
                FlushKind::None => {}
            }
        }
        line += LINE;
    }
}

/// Store fence: every earlier flush is complete (durable on NVMM) after it.
pub fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and no memory-safety preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// A file in /dev/shm mapped shared: the emulated NVMM of the seeds (DRAM page cache).
/// Unmapped and deleted on drop.
pub struct ShmMap {
    ptr: *mut u8,
    len: usize,
    path: PathBuf,
}

// SAFETY: ShmMap owns its mapping; concurrent access is governed by &/&mut as for a Vec.
unsafe impl Send for ShmMap {}

impl ShmMap {
    /// Creates `path` (which must not exist) with `len` zero bytes and maps it.
    pub fn create(path: &Path, len: usize) -> Result<Self> {
        use std::os::unix::io::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| BenchError::io("create", path, e))?;
        file.set_len(len as u64)
            .map_err(|e| BenchError::io("set_len", path, e))?;
        // SAFETY: a fresh shared mapping of a file we own, of the length we just set; the
        // result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            let _ = std::fs::remove_file(path);
            return Err(BenchError::io("mmap", path, err));
        }
        Ok(ShmMap {
            ptr: ptr as *mut u8,
            len,
            path: path.to_path_buf(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is our live mapping; shared reads through &self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr..ptr+len is our live mapping; &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for ShmMap {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in `create`; no slice outlives &self.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len.max(1)) };
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_and_fence_on_a_shm_mapping_keep_the_data() {
        let path = crate::scratch_path("flush-test");
        let mut map = ShmMap::create(&path, 8192).expect("map");
        let kind = FlushKind::detect();
        map.as_mut_slice()[100..300].fill(7);
        // SAFETY: the range is inside the mapping.
        unsafe { flush(kind, map.as_slice()[100..].as_ptr(), 200) };
        sfence();
        assert!(map.as_slice()[100..300].iter().all(|&b| b == 7));
        drop(map);
        assert!(!path.exists(), "dropping the map removes its file");
    }
}
