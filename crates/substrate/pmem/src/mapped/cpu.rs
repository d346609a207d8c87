//! CPU persistence primitives: cache-line flush (clwb, clflushopt or clflush, detected once at
//! run time), store fence, non-temporal copy.
//!
//! On targets other than x86_64 there is no cache-line flush: [`FlushInstruction::None`], and
//! the mapped region then always makes data durable with `msync`.

use crate::CACHE_LINE;
use std::sync::OnceLock;

/// The cache-line write-back instruction a region uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInstruction {
    /// `clwb`: writes the line back and may keep it cached (best).
    Clwb,
    /// `clflushopt`: writes back and invalidates; flushes of different lines overlap.
    Clflushopt,
    /// `clflush`: writes back and invalidates, serialised (slowest).
    Clflush,
    /// No cache-line flush on this target.
    None,
}

impl FlushInstruction {
    /// The best instruction this CPU supports (detected once, then cached).
    pub fn detect() -> Self {
        static DETECTED: OnceLock<FlushInstruction> = OnceLock::new();
        *DETECTED.get_or_init(detect_uncached)
    }

    /// The instruction's mnemonic.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstruction::Clwb => "clwb",
            FlushInstruction::Clflushopt => "clflushopt",
            FlushInstruction::Clflush => "clflush",
            FlushInstruction::None => "none",
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // __cpuid is unsafe before Rust 1.87 (rust-version is 1.80), safe after.
fn detect_uncached() -> FlushInstruction {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: cpuid is available on every x86_64 CPU; leaf 0 gives the highest leaf.
    let max_leaf = unsafe { __cpuid(0) }.eax;
    if max_leaf >= 7 {
        // SAFETY: leaf 7 exists (checked above).
        let ebx = unsafe { __cpuid_count(7, 0) }.ebx;
        if ebx & (1 << 24) != 0 {
            return FlushInstruction::Clwb;
        }
        if ebx & (1 << 23) != 0 {
            return FlushInstruction::Clflushopt;
        }
    }
    // SAFETY: leaf 1 exists on every x86_64 CPU.
    let edx = unsafe { __cpuid(1) }.edx;
    if edx & (1 << 19) != 0 {
        FlushInstruction::Clflush
    } else {
        FlushInstruction::None
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_uncached() -> FlushInstruction {
    FlushInstruction::None
}

/// Write back every cache line overlapping `[addr, addr + len)`.
///
/// # Safety
/// The range must be mapped memory (flushing does not change its content), and `kind` must be
/// supported by this CPU (as returned by [`FlushInstruction::detect`]).
#[inline]
pub unsafe fn flush_range(kind: FlushInstruction, addr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let line = CACHE_LINE as usize;
    let start = addr as usize & !(line - 1);
    let end = addr as usize + len;
    let mut at = start;
    while at < end {
        // SAFETY: `at` is inside a line overlapping the caller's mapped range; the
        // instruction is supported (caller's contract).
        unsafe { flush_line(kind, at as *const u8) };
        at += line;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_line(kind: FlushInstruction, addr: *const u8) {
    use std::arch::asm;
    // SAFETY (all arms): the caller guarantees `addr` is mapped and the instruction exists;
    // these instructions only write the line back, they change no memory content.
    match kind {
        FlushInstruction::Clwb => unsafe {
            asm!("clwb [{0}]", in(reg) addr, options(nostack, preserves_flags))
        },
        FlushInstruction::Clflushopt => unsafe {
            asm!("clflushopt [{0}]", in(reg) addr, options(nostack, preserves_flags))
        },
        FlushInstruction::Clflush => unsafe { std::arch::x86_64::_mm_clflush(addr) },
        FlushInstruction::None => {}
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn flush_line(_kind: FlushInstruction, _addr: *const u8) {}

/// Software prefetch of the line holding `addr` into all cache levels.
#[inline]
pub fn prefetch_line(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetcht0 is available on every x86_64 CPU (SSE) and never faults, whatever
    // the address: it is a hint that the CPU may drop.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Non-temporal 8-byte store of `value` at the 8-byte aligned `addr` (one untearable
/// write that bypasses the cache), durable at the next [`store_fence`].
///
/// # Safety
/// `addr` must be 8-byte aligned, mapped and writable; `kind` as in [`flush_range`].
pub unsafe fn stream_u64(kind: FlushInstruction, addr: *mut u8, value: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: aligned and writable (caller); movnti is SSE2, baseline on x86_64.
    unsafe {
        let _ = kind;
        std::arch::x86_64::_mm_stream_si64(addr as *mut i64, value as i64)
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: aligned and writable (caller): an atomic store, then the line written back.
    unsafe {
        (*(addr as *const std::sync::atomic::AtomicU64))
            .store(value, std::sync::atomic::Ordering::Release);
        flush_line(kind, addr);
    }
}

/// Non-temporal store of the 64 bytes of `line` to the 64-byte aligned `dst`, durable at the
/// next [`store_fence`].
///
/// # Safety
/// `dst..dst + 64` must be mapped and writable, `dst` 64-byte aligned.
pub unsafe fn stream_line(dst: *mut u8, line: &[u8; 64]) {
    // SAFETY: the caller's contract; `dst` is 64-byte aligned, so it suits either streaming
    // copy (16-byte or 64-byte stores), and 64 is a multiple of both.
    unsafe {
        if wide_stores() {
            stream_copy_wide(dst, line.as_ptr(), 64)
        } else {
            stream_copy(dst, line.as_ptr(), 64)
        }
    }
}

/// Can the streaming copies use 64-byte non-temporal stores (AVX-512F)? Each then writes a
/// whole line in one instruction, a quarter of the 16-byte stores' instructions (checked
/// once by the standard library, then a cached load).
#[inline]
fn wide_stores() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Store fence: orders and completes preceding flushes and non-temporal stores.
#[inline]
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence is available on every x86_64 CPU (SSE).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Copy `src` to `dst` with non-temporal stores for the 16-byte-aligned middle and cached
/// stores plus a flush for the unaligned edges. Durable at the next [`store_fence`] (after
/// which, on tmpfs/DAX, it has reached the persistence domain).
///
/// # Safety
/// `dst..dst + src.len()` must be mapped, writable and not overlap `src`; `kind` as in
/// [`flush_range`].
pub unsafe fn copy_nontemporal(kind: FlushInstruction, dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let wide = wide_stores();
    let align = if wide { 64 } else { 16 };
    let head = (dst.align_offset(align)).min(len);
    // SAFETY: every pointer below stays within `dst..dst + len` (caller's contract) and
    // within `src`; `dst + head` is `align`-aligned and `middle` a multiple of `align`, as
    // the streaming copy chosen needs.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        flush_range(kind, dst, head);
        let middle = (len - head) & !(align - 1);
        if wide {
            stream_copy_wide(dst.add(head), src.as_ptr().add(head), middle);
        } else {
            stream_copy(dst.add(head), src.as_ptr().add(head), middle);
        }
        let tail = len - head - middle;
        std::ptr::copy_nonoverlapping(
            src.as_ptr().add(head + middle),
            dst.add(head + middle),
            tail,
        );
        flush_range(kind, dst.add(head + middle), tail);
    }
}

/// Non-temporal copy of `len` bytes (a multiple of 16) to the 16-byte aligned `dst`.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let mut done = 0;
    while done < len {
        // SAFETY: `dst + done` is 16-byte aligned and 16 bytes inside the destination; the
        // source read is unaligned-safe (loadu) and inside `src`. movntdq is SSE2 (baseline).
        unsafe {
            let value = _mm_loadu_si128(src.add(done) as *const __m128i);
            _mm_stream_si128(dst.add(done) as *mut __m128i, value);
        }
        done += 16;
    }
}

/// Non-temporal copy of `len` bytes (a multiple of 64) to the 64-byte aligned `dst`, a
/// line per store.
///
/// # Safety
/// As `stream_copy`, with `dst` 64-byte aligned and `len` a multiple of 64; the CPU must
/// have AVX-512F (`wide_stores`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_copy_wide(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_stream_si512};
    let mut done = 0;
    while done < len {
        // SAFETY: `dst + done` is 64-byte aligned and 64 bytes inside the destination; the
        // source read is unaligned-safe (loadu) and inside `src`; AVX-512F is present (the
        // caller checked `wide_stores`).
        unsafe {
            let value = _mm512_loadu_si512(src.add(done) as *const __m512i);
            _mm512_stream_si512(dst.add(done) as *mut __m512i, value);
        }
        done += 64;
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy_wide(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: as stream_copy (never called: `wide_stores` is false on this target).
    unsafe { stream_copy(dst, src, len) }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: as in the x86_64 version; a plain copy (the region msyncs on this target).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}
