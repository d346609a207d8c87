//! The shared memory of a connection: a memfd the client creates, seals against resizing and
//! passes at the handshake (SCM_RIGHTS); both sides map it whole.
//!
//! Layout (layout version [`LAYOUT_VERSION`]; u32 words in the machine's byte order, both
//! sides being on one machine):
//!
//! ```text
//!  offset            what                                           written by
//!  0                 magic "ATFSSHM\0", layout version, message     client (once)
//!                    area length, data area length
//!  64                request word: seq, len, where                  client
//!  128               server state: AWAKE / SLEEPING, its CPU        server
//!  192               reply word: seq, len, where                    server
//!  256               client state: AWAKE / SLEEPING, its CPU        client
//!  4096              request area  (message area length bytes)      client
//!  4096 + M          reply area    (message area length bytes)      server
//!  4096 + 2M         data area     (data area length bytes)         either, one at a time
//! ```
//!
//! Each word sits on a cache line of its own, so the two sides' spinning does not bounce
//! one line. The header is read once by the server at the handshake; the lengths it uses
//! afterwards are its own copies (the client can change the header, never the mapping's
//! size: the memfd is sealed against shrinking and growing).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;

use crate::wire::malformed;
use store::{Error, Result};

/// Version of the layout above; part of the protocol version (op.rs).
pub(crate) const LAYOUT_VERSION: u32 = 1;
const MAGIC: u64 = u64::from_le_bytes(*b"ATFSSHM\0");

/// Offsets of the header fields.
const MAGIC_AT: usize = 0;
const VERSION_AT: usize = 8;
const MESSAGE_LEN_AT: usize = 12;
const DATA_LEN_AT: usize = 16;
pub(crate) const REQUEST_WORD: usize = 64;
pub(crate) const SERVER_STATE: usize = 128;
pub(crate) const REPLY_WORD: usize = 192;
pub(crate) const CLIENT_STATE: usize = 256;
/// Within a request or reply word: the sequence number, the message's length, where it is.
pub(crate) const SEQ: usize = 0;
pub(crate) const LEN: usize = 4;
pub(crate) const WHERE: usize = 8;
const HEADER_LEN: usize = 4096;

/// Length of each message area: a request or reply up to it travels in the shared memory,
/// a longer one (or one with a descriptor) as a socket frame.
pub(crate) const MESSAGE_LEN: usize = 64 << 10;

fn io(op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: "atomfs server shared memory".into(),
        op,
        source,
    }
}

/// Which message area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Area {
    Request,
    Reply,
}

/// A mapped shared memory of a connection.
pub(crate) struct Shm {
    ptr: *mut u8,
    len: usize,
    message_len: usize,
    data_len: usize,
}

// SAFETY: the mapping is process-wide memory owned by this value. The header words are
// accessed only as atomics; the areas are written by one side at a time, as the protocol
// (channel.rs) hands them over, and a misbehaving peer can only garble bytes this side
// copies out and checks before use.
unsafe impl Send for Shm {}

impl Shm {
    /// A new shared memory with a data area of `data_len` bytes (client side), sealed against
    /// resizing, and its descriptor to pass to the server (the mapping stays when the
    /// descriptor is closed).
    pub(crate) fn create(data_len: usize) -> Result<(Shm, OwnedFd)> {
        let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        // SAFETY: a NUL-terminated name; memfd_create has no other preconditions.
        let raw = unsafe { libc::memfd_create(c"atomfs-remote".as_ptr(), flags) };
        if raw < 0 {
            return Err(io("memfd_create", std::io::Error::last_os_error()));
        }
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = HEADER_LEN + 2 * MESSAGE_LEN + data_len;
        // SAFETY: ftruncate on the descriptor just created.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io("ftruncate", std::io::Error::last_os_error()));
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on the descriptor just created; F_ADD_SEALS takes an int.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io("seal", std::io::Error::last_os_error()));
        }
        let shm = Shm::map(&fd, len, MESSAGE_LEN, data_len)?;
        shm.set_u64(MAGIC_AT, MAGIC);
        shm.word(VERSION_AT)
            .store(LAYOUT_VERSION, std::sync::atomic::Ordering::Relaxed);
        let lens = [(MESSAGE_LEN_AT, MESSAGE_LEN), (DATA_LEN_AT, data_len)];
        for (at, n) in lens {
            shm.word(at)
                .store(n as u32, std::sync::atomic::Ordering::Relaxed);
        }
        Ok((shm, fd))
    }

    /// Map a shared memory received from a client (server side): sealed, its header's
    /// magic and layout version ours, its size what its header says and at most `max`.
    pub(crate) fn open(fd: OwnedFd, max: usize) -> Result<Shm> {
        // SAFETY: an all-zero stat is valid for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on an open descriptor into a valid stat buffer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io("fstat", std::io::Error::last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(malformed("the shared memory is not a memory file"));
        }
        // SAFETY: fcntl F_GET_SEALS on an open descriptor.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        let needed = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        if seals < 0 || seals & needed != needed {
            return Err(malformed(
                "the shared memory is not sealed against resizing",
            ));
        }
        let len = usize::try_from(st.st_size).map_err(|_| malformed("shared memory size"))?;
        if !(HEADER_LEN..=max).contains(&len) {
            return Err(malformed("shared memory size out of range"));
        }
        let mut shm = Shm::map(&fd, len, 0, 0)?;
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        if shm.get_u64(MAGIC_AT) != MAGIC {
            return Err(Error::BadMagic("atomfs server shared memory".into()));
        }
        let version = shm.word(VERSION_AT).load(relaxed);
        if version != LAYOUT_VERSION {
            return Err(Error::UnsupportedVersion {
                what: "atomfs server shared memory layout".into(),
                found: version,
                supported: LAYOUT_VERSION,
            });
        }
        let message_len = shm.word(MESSAGE_LEN_AT).load(relaxed) as usize;
        let data_len = shm.word(DATA_LEN_AT).load(relaxed) as usize;
        let total = message_len
            .checked_mul(2)
            .and_then(|m| m.checked_add(HEADER_LEN))
            .and_then(|m| m.checked_add(data_len));
        if total != Some(len) {
            return Err(malformed("shared memory header does not match its size"));
        }
        (shm.message_len, shm.data_len) = (message_len, data_len);
        Ok(shm)
    }

    fn map(fd: &OwnedFd, len: usize, message_len: usize, data_len: usize) -> Result<Shm> {
        // SAFETY: a shared read-write mapping of `len` bytes of a regular file of that size
        // (sealed: it cannot shrink under the mapping); the result is checked against
        // MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io("mmap", std::io::Error::last_os_error()));
        }
        Ok(Shm {
            ptr: ptr.cast(),
            len,
            message_len,
            data_len,
        })
    }

    /// The u32 word at `at` of the header, as an atomic.
    pub(crate) fn word(&self, at: usize) -> &AtomicU32 {
        assert!(
            at.is_multiple_of(4) && at + 4 <= HEADER_LEN,
            "header word {at}"
        );
        // SAFETY: `at` is 4-aligned inside the header, which is inside the mapping (a page
        // aligned, live for as long as `self`); AtomicU32 has the size and alignment of u32,
        // and every access to a header word from either process is atomic.
        unsafe { &*self.ptr.add(at).cast::<AtomicU32>() }
    }

    fn set_u64(&self, at: usize, v: u64) {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        self.word(at).store(v as u32, relaxed);
        self.word(at + 4).store((v >> 32) as u32, relaxed);
    }

    fn get_u64(&self, at: usize) -> u64 {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        u64::from(self.word(at).load(relaxed)) | u64::from(self.word(at + 4).load(relaxed)) << 32
    }

    /// Length of each message area.
    pub(crate) fn message_len(&self) -> usize {
        self.message_len
    }

    /// Length of the data area.
    pub(crate) fn data_len(&self) -> usize {
        self.data_len
    }

    fn area_start(&self, area: Area) -> usize {
        match area {
            Area::Request => HEADER_LEN,
            Area::Reply => HEADER_LEN + self.message_len,
        }
    }

    /// Copy a message into a message area.
    pub(crate) fn put_message(&mut self, area: Area, body: &[u8]) -> Result<()> {
        if body.len() > self.message_len {
            return Err(malformed("message larger than the shared message area"));
        }
        self.copy_in(self.area_start(area), body);
        Ok(())
    }

    /// Copy the first `len` bytes of a message area out.
    pub(crate) fn get_message(&self, area: Area, len: usize) -> Result<Vec<u8>> {
        if len > self.message_len {
            return Err(malformed("message longer than the shared message area"));
        }
        let mut out = vec![0u8; len];
        self.copy_out(self.area_start(area), &mut out);
        Ok(out)
    }

    /// Copy `data` into the data area at `off`.
    pub(crate) fn put_at(&mut self, off: usize, data: &[u8]) -> Result<()> {
        if off
            .checked_add(data.len())
            .is_none_or(|end| end > self.data_len)
        {
            return Err(malformed("data beyond the shared data area"));
        }
        self.copy_in(HEADER_LEN + 2 * self.message_len + off, data);
        Ok(())
    }

    /// Copy `out.len()` bytes of the data area at `off` out.
    pub(crate) fn get_at(&self, off: usize, out: &mut [u8]) -> Result<()> {
        if off
            .checked_add(out.len())
            .is_none_or(|end| end > self.data_len)
        {
            return Err(malformed("length beyond the shared data area"));
        }
        self.copy_out(HEADER_LEN + 2 * self.message_len + off, out);
        Ok(())
    }

    /// Copy `data` to the start of the data area.
    pub(crate) fn put(&mut self, data: &[u8]) -> Result<()> {
        self.put_at(0, data)
    }

    /// Copy the first `out.len()` bytes of the data area out.
    pub(crate) fn get(&self, out: &mut [u8]) -> Result<()> {
        self.get_at(0, out)
    }

    fn copy_in(&mut self, at: usize, data: &[u8]) {
        assert!(at + data.len() <= self.len, "copy past the shared memory");
        // SAFETY: in bounds of the mapping (asserted); the mapping and `data` do not overlap
        // (data is private memory of this process).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), data.len()) };
    }

    fn copy_out(&self, at: usize, out: &mut [u8]) {
        assert!(at + out.len() <= self.len, "copy past the shared memory");
        // SAFETY: in bounds (asserted). The peer may write the mapping concurrently (only a
        // misbehaving peer would): the bytes are then garbage, copied as plain bytes into
        // private memory and checked there before any use (Dec never trusts a length).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), out.as_mut_ptr(), out.len()) };
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`, once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
