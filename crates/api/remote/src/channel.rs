//! A connection's messages: posted in the shared memory and announced by a sequence word,
//! with the socket kept for what memory cannot carry.
//!
//! One message is in flight per direction and connection (a request, then its reply). To
//! send, a side copies the message into its message area (or, when it is longer than the
//! area or carries a descriptor, sends it as a socket frame first), writes its length and
//! where it is, then bumps its sequence word. The receiver spins on that word for at most
//! [`SPIN`] (a round trip then costs no system call and no scheduler wakeup) — but only
//! while the peer last ran on another CPU: spinning on the peer's own CPU would keep it
//! from answering (on a loaded machine the scheduler often puts both on one CPU). Then it
//! announces that it sleeps (its state word) and blocks on the socket. A sender that finds
//! the peer asleep rings its doorbell: an empty socket frame. The state store and the
//! sequence load on one side, and the sequence store and the state load on the other, are
//! sequentially consistent, so at least one side sees the other: the message is never missed
//! (a doorbell that arrives for a message already taken is ignored).
//!
//! The socket also tells each side when the other is gone: a sleeping receiver wakes with
//! end of file. Spinning is bounded, so an idle connection costs no CPU: both sides sleep.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::conn;
use crate::shm::{
    Area, Shm, CLIENT_STATE, LEN, REPLY_WORD, REQUEST_WORD, SEQ, SERVER_STATE, WHERE,
};
use crate::wire::malformed;
use store::Result;

/// How long a receiver spins on the sequence word before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// A side's state word.
const AWAKE: u32 = 0;
const SLEEPING: u32 = 1;
/// In a side's state line after the state: the CPU it last ran on, as far as it knows.
const CPU: usize = 4;
const UNKNOWN_CPU: u32 = u32::MAX;

/// Where a message is: in the message area, or the next message frame on the socket.
const IN_MEMORY: u32 = 1;
const ON_SOCKET: u32 = 2;

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Client,
    Server,
}

/// The words and area one side writes, and those it reads.
struct Roles {
    out_word: usize,
    out_area: Area,
    peer_state: usize,
    in_word: usize,
    in_area: Area,
    own_state: usize,
}

impl Side {
    fn roles(self) -> Roles {
        match self {
            Side::Client => Roles {
                out_word: REQUEST_WORD,
                out_area: Area::Request,
                peer_state: SERVER_STATE,
                in_word: REPLY_WORD,
                in_area: Area::Reply,
                own_state: CLIENT_STATE,
            },
            Side::Server => Roles {
                out_word: REPLY_WORD,
                out_area: Area::Reply,
                peer_state: CLIENT_STATE,
                in_word: REQUEST_WORD,
                in_area: Area::Request,
                own_state: SERVER_STATE,
            },
        }
    }
}

/// A message: its bytes and the descriptor that came with it.
pub(crate) type Message = (Vec<u8>, Option<OwnedFd>);

/// One end of a connection.
pub(crate) struct Channel {
    stream: UnixStream,
    shm: Shm,
    roles: Roles,
    /// Sequence numbers of the last message sent and received.
    sent: u32,
    received: u32,
    /// A message frame read from the socket before its sequence number was seen.
    early: Option<Message>,
}

impl Channel {
    pub(crate) fn new(stream: UnixStream, shm: Shm, side: Side) -> Channel {
        Channel {
            stream,
            shm,
            roles: side.roles(),
            sent: 0,
            received: 0,
            early: None,
        }
    }

    pub(crate) fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Replace the socket by another descriptor of it (same connection).
    pub(crate) fn set_stream(&mut self, stream: UnixStream) {
        self.stream = stream;
    }

    pub(crate) fn shm(&self) -> &Shm {
        &self.shm
    }

    pub(crate) fn shm_mut(&mut self) -> &mut Shm {
        &mut self.shm
    }

    /// Send a message (with a descriptor, if given).
    pub(crate) fn send(&mut self, body: &[u8], fd: Option<&OwnedFd>) -> Result<()> {
        assert!(
            !body.is_empty(),
            "an empty message would read as a doorbell"
        );
        let r = &self.roles;
        let place = if fd.is_none() && body.len() <= self.shm.message_len() {
            self.shm.put_message(r.out_area, body)?;
            IN_MEMORY
        } else {
            match fd {
                Some(fd) => conn::send_with_fd(&mut self.stream, body, fd)?,
                None => conn::send(&mut self.stream, body)?,
            }
            ON_SOCKET
        };
        let seq = self.sent.wrapping_add(1);
        let word = |at: usize| self.shm.word(r.out_word + at);
        word(LEN).store(body.len() as u32, Ordering::Relaxed);
        word(WHERE).store(place, Ordering::Relaxed);
        // Publishes the message (the stores above happen before it).
        word(SEQ).store(seq, Ordering::SeqCst);
        self.sent = seq;
        if self.shm.word(r.peer_state).load(Ordering::SeqCst) == SLEEPING {
            conn::ring(&self.stream);
        }
        Ok(())
    }

    /// Receive the next message: spin on the sequence word for at most `spin` while the
    /// peer last ran on another CPU, then sleep on the socket. An error when the peer is
    /// gone or out of step.
    pub(crate) fn recv(&mut self, spin: Duration) -> Result<Message> {
        let want = self.received.wrapping_add(1);
        let until = Instant::now() + spin;
        let mut cpu = self.publish_cpu(UNKNOWN_CPU);
        while !self.arrived(want, Ordering::Acquire)? {
            cpu = self.publish_cpu(cpu);
            // Spinning on the peer's CPU would only keep the peer from running: sleep, and
            // let the scheduler run it here.
            if Instant::now() < until && !self.peer_on(cpu) {
                std::hint::spin_loop();
                continue;
            }
            self.sleep(want)?;
        }
        self.received = want;
        self.take()
    }

    /// Write the CPU this side runs on into its state line, if it is not `last` already;
    /// returns it.
    fn publish_cpu(&self, last: u32) -> u32 {
        // SAFETY: sched_getcpu has no preconditions (-1 on failure: unknown).
        let cpu = u32::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(UNKNOWN_CPU);
        if cpu != last {
            self.shm
                .word(self.roles.own_state + CPU)
                .store(cpu, Ordering::Relaxed);
        }
        cpu
    }

    /// Whether the peer last said it runs on `cpu`.
    fn peer_on(&self, cpu: u32) -> bool {
        cpu != UNKNOWN_CPU
            && self
                .shm
                .word(self.roles.peer_state + CPU)
                .load(Ordering::Relaxed)
                == cpu
    }

    /// Whether message `want` is posted (any other new number is a peer out of step).
    fn arrived(&self, want: u32, order: Ordering) -> Result<bool> {
        let seq = self.shm.word(self.roles.in_word + SEQ).load(order);
        if seq == want {
            Ok(true)
        } else if seq == self.received {
            Ok(false)
        } else {
            Err(malformed("shared memory sequence out of step"))
        }
    }

    /// Block on the socket until a doorbell or a message frame arrives, unless message
    /// `want` is already posted.
    fn sleep(&mut self, want: u32) -> Result<()> {
        let state = self.shm.word(self.roles.own_state);
        state.store(SLEEPING, Ordering::SeqCst);
        if !self.arrived(want, Ordering::SeqCst)? {
            let (body, fd) = conn::recv_with_fd(&mut self.stream)?;
            if !body.is_empty() {
                if self.early.is_some() {
                    return Err(malformed("two message frames for one message"));
                }
                self.early = Some((body, fd));
            }
        }
        self.shm
            .word(self.roles.own_state)
            .store(AWAKE, Ordering::SeqCst);
        Ok(())
    }

    /// The posted message: from the message area, or the socket's next message frame.
    fn take(&mut self) -> Result<Message> {
        let word = |at: usize| self.shm.word(self.roles.in_word + at);
        let (len, place) = (
            word(LEN).load(Ordering::Relaxed) as usize,
            word(WHERE).load(Ordering::Relaxed),
        );
        match place {
            IN_MEMORY => Ok((self.shm.get_message(self.roles.in_area, len)?, None)),
            ON_SOCKET => {
                if let Some(m) = self.early.take() {
                    return Ok(m);
                }
                loop {
                    let (body, fd) = conn::recv_with_fd(&mut self.stream)?;
                    if !body.is_empty() {
                        return Ok((body, fd));
                    }
                }
            }
            _ => Err(malformed("shared memory message place")),
        }
    }
}
