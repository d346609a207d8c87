//! Frames over a Unix stream socket, and a descriptor passed with SCM_RIGHTS.
//!
//! A frame is a 4-byte little-endian length, then that many bytes. An empty frame is a
//! doorbell (channel.rs): "look at the shared memory"; every message has at least one byte.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::wire::{malformed, BYTES_MAX};
use store::{Error, Result};

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

/// Ring the peer's doorbell: an empty frame, sent without blocking (when the socket's buffer
/// is full the peer has frames to read and wakes anyway) and without SIGPIPE (a peer that is
/// gone is found by the next receive).
pub(crate) fn ring(stream: &UnixStream) {
    let frame = 0u32.to_le_bytes();
    // SAFETY: send of 4 bytes from a live buffer on an open socket.
    unsafe {
        libc::send(
            stream.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

/// Receive one frame that may carry a descriptor (blocking).
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
    let n = loop {
        // SAFETY: msg describes the live iovec (4 bytes) and control buffer above;
        // MSG_CMSG_CLOEXEC makes a received descriptor close-on-exec.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io("receive", e));
        }
        break n as usize;
    };
    if n == 0 {
        return Err(malformed("connection closed"));
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
