//! Thin wrappers over the system calls the real implementation needs and std lacks.

use crate::{FileKind, FsType, Stat, StatFs};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `_IOW(type, nr, size)` of asm-generic/ioctl.h.
const fn iow(kind: u8, nr: u8, size: usize) -> libc::c_ulong {
    ((1 as libc::c_ulong) << 30)
        | ((size as libc::c_ulong) << 16)
        | ((kind as libc::c_ulong) << 8)
        | nr as libc::c_ulong
}

/// struct file_clone_range of linux/fs.h.
#[repr(C)]
struct FileCloneRange {
    src_fd: i64,
    src_offset: u64,
    src_length: u64,
    dest_offset: u64,
}

/// FICLONERANGE = _IOW(0x94, 13, struct file_clone_range).
const FICLONERANGE: libc::c_ulong = iow(0x94, 13, std::mem::size_of::<FileCloneRange>());

/// struct xfs_exchange_range of xfs/xfs_fs.h (Linux 6.10).
#[repr(C)]
struct XfsExchangeRange {
    file1_fd: i32,
    pad: u32,
    file1_offset: u64,
    file2_offset: u64,
    length: u64,
    flags: u64,
}

/// XFS_IOC_EXCHANGE_RANGE = _IOW('X', 129, struct xfs_exchange_range).
const XFS_IOC_EXCHANGE_RANGE: libc::c_ulong =
    iow(b'X', 129, std::mem::size_of::<XfsExchangeRange>());
/// Check the arguments only.
pub const XFS_EXCHANGE_RANGE_DRY_RUN: u64 = 1 << 2;

const _: () = assert!(std::mem::size_of::<FileCloneRange>() == 32);
const _: () = assert!(std::mem::size_of::<XfsExchangeRange>() == 40);

/// FICLONERANGE from `src` into `dst`.
pub fn clone_range(
    src: &OwnedFd,
    src_off: u64,
    dst: &OwnedFd,
    dst_off: u64,
    len: u64,
) -> io::Result<()> {
    let arg = FileCloneRange {
        src_fd: i64::from(src.as_raw_fd()),
        src_offset: src_off,
        src_length: len,
        dest_offset: dst_off,
    };
    // SAFETY: FICLONERANGE reads one file_clone_range from the pointer, which is valid.
    check(unsafe { libc::ioctl(dst.as_raw_fd(), FICLONERANGE, &arg as *const FileCloneRange) })
}

/// XFS_IOC_EXCHANGE_RANGE between `file1` and `file2`.
pub fn exchange_range(
    file1: &OwnedFd,
    off1: u64,
    file2: &OwnedFd,
    off2: u64,
    len: u64,
    flags: u64,
) -> io::Result<()> {
    let arg = XfsExchangeRange {
        file1_fd: file1.as_raw_fd(),
        pad: 0,
        file1_offset: off1,
        file2_offset: off2,
        length: len,
        flags,
    };
    // SAFETY: the ioctl reads one xfs_exchange_range from the pointer, which is valid.
    check(unsafe {
        libc::ioctl(
            file2.as_raw_fd(),
            XFS_IOC_EXCHANGE_RANGE,
            &arg as *const XfsExchangeRange,
        )
    })
}

/// What statx reports about O_DIRECT, atomic writes and DAX.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatxExtras {
    pub dio_align: Option<(u32, u32)>,
    pub atomic_unit: Option<(u32, u32)>,
    pub dax: bool,
}

const STATX_DIOALIGN: u32 = 0x2000;
const STATX_WRITE_ATOMIC: u32 = 0x1_0000;
const STATX_ATTR_DAX: u64 = 0x20_0000;

/// statx of an open file, read at the offsets of struct statx (linux/stat.h, Linux 6.11):
/// stx_mask at 0, stx_attributes at 8, stx_dio_mem_align at 152, stx_dio_offset_align at
/// 156, stx_atomic_write_unit_min at 168 and _max at 172. The buffer is 256 bytes, the
/// struct's size; fields a kernel does not know are left zero.
pub fn statx_extras(fd: BorrowedFd<'_>) -> io::Result<StatxExtras> {
    let mut buf = [0u64; 32];
    // SAFETY: the path is an empty C string with AT_EMPTY_PATH (statx of `fd` itself), and
    // `buf` is 256 writable bytes, the size of struct statx.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_DIOALIGN | STATX_WRITE_ATOMIC,
            buf.as_mut_ptr(),
        )
    };
    check(rc as i32)?;
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_ne_bytes)
    };
    let mask = u32_at(0);
    let attributes = u64::from(u32_at(8)) | (u64::from(u32_at(12)) << 32);
    let dio = (u32_at(156), u32_at(152));
    let atomic = (u32_at(168), u32_at(172));
    Ok(StatxExtras {
        dio_align: (mask & STATX_DIOALIGN != 0 && dio.0 != 0).then_some(dio),
        atomic_unit: (mask & STATX_WRITE_ATOMIC != 0 && atomic.0 != 0).then_some(atomic),
        dax: attributes & STATX_ATTR_DAX != 0,
    })
}

/// pwritev2 with `flags`.
pub fn pwritev2(fd: &OwnedFd, off: u64, data: &[u8], flags: i32) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: one iovec over `data`, which the kernel only reads.
    let n = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, off as libc::off_t, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn kind_of(mode: u32) -> FileKind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::File,
        libc::S_IFDIR => FileKind::Dir,
        libc::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn stat_of(st: &libc::stat) -> Stat {
    let ns = |s: i64, n: i64| (s.max(0) as u64) * 1_000_000_000 + n.max(0) as u64;
    #[allow(clippy::unnecessary_cast)] // field widths differ between targets
    Stat {
        ino: st.st_ino as u64,
        kind: kind_of(st.st_mode as u32),
        len: st.st_size.max(0) as u64,
        perm: st.st_mode as u32 & 0o7777,
        nlink: st.st_nlink as u64,
        uid: st.st_uid,
        gid: st.st_gid,
        atime_ns: ns(st.st_atime, st.st_atime_nsec),
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        mode_type: st.st_mode as u32 & libc::S_IFMT,
        rdev: st.st_rdev as u64,
        allocated: (st.st_blocks.max(0) as u64).saturating_mul(512),
    }
}

/// fstatat of `name` in `dir`, not following a symlink (empty name: `dir` itself).
pub fn stat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH;
    // SAFETY: `name` is NUL-terminated; fstatat fills `st` on success, read only then.
    check(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags) })?;
    // SAFETY: initialised by the successful call.
    Ok(stat_of(&unsafe { st.assume_init() }))
}

/// fstatfs of any descriptor on the file system.
pub fn statfs(fd: BorrowedFd<'_>) -> io::Result<StatFs> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs fills the struct on success; read only then.
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: initialised by the successful call.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // field widths differ between targets
    Ok(StatFs {
        block_size: st.f_bsize as u64,
        blocks: st.f_blocks as u64,
        blocks_free: st.f_bfree as u64,
        blocks_available: st.f_bavail as u64,
        fs_type: FsType::from_magic(st.f_type as u64),
    })
}

/// The entries of the directory open as `dir` (consumed), without `.` and `..`.
pub fn read_dir(dir: OwnedFd) -> io::Result<Vec<(Vec<u8>, u64, u8)>> {
    use std::os::fd::IntoRawFd;
    let raw = dir.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor we own; fdopendir takes it over (closed
    // by closedir below) or fails, and then we close it.
    let stream = unsafe { libc::fdopendir(raw) };
    if stream.is_null() {
        let err = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        unsafe { libc::close(raw) };
        return Err(err);
    }
    let mut out = Vec::new();
    loop {
        // SAFETY: `stream` is a valid DIR*; readdir returns null at the end or a pointer to
        // an entry valid until the next readdir/closedir, which is copied right away.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: a non-null entry from readdir, with a NUL-terminated d_name.
        let (name, ino, kind) = unsafe {
            let e = &*entry;
            (
                CStr::from_ptr(e.d_name.as_ptr()).to_bytes().to_vec(),
                e.d_ino,
                e.d_type,
            )
        };
        if name != b"." && name != b".." {
            out.push((name, ino, kind));
        }
    }
    // SAFETY: `stream` is valid and not used after.
    unsafe { libc::closedir(stream) };
    Ok(out)
}

/// The kind of a `d_type`.
pub fn kind_of_dtype(d_type: u8) -> Option<FileKind> {
    match d_type {
        libc::DT_REG => Some(FileKind::File),
        libc::DT_DIR => Some(FileKind::Dir),
        libc::DT_LNK => Some(FileKind::Symlink),
        libc::DT_UNKNOWN => None,
        _ => Some(FileKind::Other),
    }
}
