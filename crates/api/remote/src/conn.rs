//! Frames over a Unix stream socket, a descriptor passed with SCM_RIGHTS, and the shared
//! memory buffer that carries bulk data (a memfd the client creates and both sides map).
//!
//! A frame is a 4-byte little-endian length, then that many bytes. One request is in flight
//! per connection, so one buffer serves both directions: the client copies a write's data
//! into it before sending the request; the server copies a read's data into it before
//! replying.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::wire::{malformed, BYTES_MAX};
use store::{Error, Result};

/// How long a receive polls before it blocks.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Longest frame: the largest inline byte string plus room for the rest of a request.
const FRAME_MAX: usize = BYTES_MAX + 4096;

fn io(op: &'static str, source: std::io::Error) -> Error {
    Error::Io {
        path: "atomfs server socket".into(),
        op,
        source,
    }
}

/// Send one frame.
pub(crate) fn send(stream: &mut UnixStream, body: &[u8]) -> Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| malformed("frame too long to send"))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(body);
    stream.write_all(&frame).map_err(|e| io("send", e))
}

/// Receive one frame; None when the peer closed the connection between frames.
pub(crate) fn recv(stream: &mut UnixStream) -> Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io("receive", e)),
    }
    body(stream, u32::from_le_bytes(len) as usize).map(Some)
}

fn body(stream: &mut UnixStream, len: usize) -> Result<Vec<u8>> {
    if len > FRAME_MAX {
        return Err(malformed("frame longer than the protocol allows"));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(|e| io("receive", e))?;
    Ok(body)
}

/// Send one frame with a descriptor attached (SCM_RIGHTS).
pub(crate) fn send_with_fd(stream: &mut UnixStream, body: &[u8], fd: &OwnedFd) -> Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| malformed("frame too long to send"))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(body);
    let mut iov = libc::iovec {
        iov_base: frame.as_mut_ptr().cast(),
        iov_len: frame.len(),
    };
    // Room for one descriptor, aligned as cmsghdr requires.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points to `space` writable, aligned bytes, so CMSG_FIRSTHDR returns
    // a header inside them, and CMSG_DATA of it has room for one c_int (CMSG_SPACE above).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd.as_raw_fd());
    }
    let mut sent = 0usize;
    while sent < frame.len() {
        if sent > 0 {
            // The descriptor went with the first bytes; the rest is plain data.
            return stream.write_all(&frame[sent..]).map_err(|e| io("send", e));
        }
        // SAFETY: msg describes the live iovec and control buffer above.
        let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io("send", e));
        }
        sent = n as usize;
    }
    Ok(())
}

/// Receive one frame that may carry a descriptor.
pub(crate) fn recv_with_fd(stream: &mut UnixStream) -> Result<(Vec<u8>, Option<OwnedFd>)> {
    let mut len = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: len.as_mut_ptr().cast(),
        iov_len: len.len(),
    };
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // The peer usually answers within microseconds: poll without sleeping for a short while
    // before blocking, which saves the two scheduler wakeups of a blocking round trip.
    let spin_until = std::time::Instant::now() + SPIN;
    let n = loop {
        let spinning = std::time::Instant::now() < spin_until;
        let flags = libc::MSG_CMSG_CLOEXEC | if spinning { libc::MSG_DONTWAIT } else { 0 };
        // SAFETY: msg describes the live iovec (4 bytes) and control buffer above;
        // MSG_CMSG_CLOEXEC makes a received descriptor close-on-exec.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, flags) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock if spinning => {
                    std::hint::spin_loop();
                    continue;
                }
                _ => return Err(io("receive", e)),
            }
        }
        break n as usize;
    };
    if n == 0 {
        return Err(malformed("connection closed during the handshake"));
    }
    let mut fd = None;
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR/NXTHDR walk only
    // inside them, and a SCM_RIGHTS header's data holds (len - CMSG_LEN(0)) / 4 descriptors,
    // which are ours to close from now on.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<libc::c_int>();
                for i in 0..count {
                    let raw = std::ptr::read_unaligned(data.add(i));
                    let owned = OwnedFd::from_raw_fd(raw);
                    // Keep the first; any other descriptor is closed here.
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n < len.len() {
        stream
            .read_exact(&mut len[n..])
            .map_err(|e| io("receive", e))?;
    }
    let body = body(stream, u32::from_le_bytes(len) as usize)?;
    Ok((body, fd))
}

/// The shared buffer: a memfd mapped shared, by the client that created it and by the
/// server it was passed to.
pub(crate) struct Shm {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory owned by this value; access goes through
// &mut self (one request in flight per connection), so no two threads of this process use
// it at once.
unsafe impl Send for Shm {}

impl Shm {
    /// A new buffer of `len` bytes (client side), and its descriptor to pass to the server
    /// (the mapping stays when the descriptor is closed).
    pub(crate) fn create(len: usize) -> Result<(Shm, OwnedFd)> {
        // SAFETY: a NUL-terminated name; memfd_create has no other preconditions.
        let raw = unsafe { libc::memfd_create(c"atomfs-remote".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io("memfd_create", std::io::Error::last_os_error()));
        }
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on the descriptor just created.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io("ftruncate", std::io::Error::last_os_error()));
        }
        Ok((Shm::map(&fd, len)?, fd))
    }

    /// Map a buffer received from a client (server side): its size is the descriptor's.
    pub(crate) fn open(fd: OwnedFd, max: usize) -> Result<Shm> {
        // SAFETY: an all-zero stat is valid for fstat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on an open descriptor into a valid stat buffer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io("fstat", std::io::Error::last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(malformed("the shared buffer is not a memory file"));
        }
        let len = usize::try_from(st.st_size).map_err(|_| malformed("shared buffer size"))?;
        if len == 0 || len > max {
            return Err(malformed("shared buffer size out of range"));
        }
        Shm::map(&fd, len)
    }

    fn map(fd: &OwnedFd, len: usize) -> Result<Shm> {
        // SAFETY: a shared read-write mapping of `len` bytes of a regular file of that size;
        // the result is checked against MAP_FAILED.
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
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copy `data` to the start of the buffer.
    pub(crate) fn put(&mut self, data: &[u8]) -> Result<()> {
        if data.len() > self.len {
            return Err(malformed("data larger than the shared buffer"));
        }
        // SAFETY: the mapping is `self.len` bytes long and data.len() <= self.len; the
        // mapping and `data` do not overlap (data is private memory of this process).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, data.len()) };
        Ok(())
    }

    /// Copy the first `out.len()` bytes of the buffer out.
    pub(crate) fn get(&self, out: &mut [u8]) -> Result<()> {
        if out.len() > self.len {
            return Err(malformed("length larger than the shared buffer"));
        }
        // SAFETY: in bounds as above. The peer may write the mapping concurrently (only a
        // misbehaving peer would, and only during its own request): the bytes are then
        // garbage for that peer's request, copied as plain bytes into private memory and
        // never interpreted as anything but file data.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), out.len()) };
        Ok(())
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`, once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
