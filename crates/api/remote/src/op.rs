//! The operations of the protocol: one code per Store call, plus the handshake and goodbye.
//! A request body is the code, then the call's arguments in the order of the Store method
//! (see client.rs for the encoding of each and server.rs for its decoding). A reply body is
//! a status byte — [`OK`] then the result, or [`ERR`] then the error.

/// First bytes of a client's handshake.
pub(crate) const MAGIC: &[u8; 8] = b"ATFSRMT\0";
/// Protocol version; a server refuses any other. Version 4: requests and replies posted in
/// the shared memory (channel.rs, layout in shm.rs); writes batched in the client (BATCH,
/// and TX_COMMIT carries a batch; batch.rs).
pub(crate) const VERSION: u32 = 4;

pub(crate) const OK: u8 = 0;
pub(crate) const ERR: u8 = 1;

/// Where a read's or write's bytes travel: the shared buffer, or (larger than it) a memory
/// file passed with the frame.
pub(crate) const DATA_SHM: u8 = 1;
pub(crate) const DATA_FD: u8 = 2;

macro_rules! ops {
    ($($name:ident = $code:expr),* $(,)?) => {
        $(pub(crate) const $name: u8 = $code;)*
    };
}

ops! {
    ENGINE_NAME = 1,
    LOOKUP = 2,
    GETATTR = 3,
    SETATTR = 4,
    CREATE = 5,
    MKDIR = 6,
    SYMLINK = 7,
    READLINK = 8,
    UNLINK = 9,
    RMDIR = 10,
    RENAME = 11,
    LINK = 12,
    READ_DIR = 13,
    OPEN = 14,
    RELEASE = 15,
    READ = 16,
    WRITE = 17,
    SET_LEN = 18,
    FSYNC = 19,
    FSTAT = 20,
    SET_ATOMIC = 21,
    SYNCV = 22,
    ABORTV = 23,
    TX_BEGIN = 24,
    TX_ADD = 25,
    TX_COMMIT = 26,
    TX_ABORT = 27,
    STATFS = 28,
    STATS = 29,
    FSCK = 30,
    BYE = 31,
    LIMITS = 32,
    MKNOD = 33,
    TMPFILE = 34,
    RENAME_WITH = 35,
    FALLOCATE = 36,
    GETXATTR = 37,
    SETXATTR = 38,
    LISTXATTR = 39,
    REMOVEXATTR = 40,
    // Writes batched in the client (batch.rs).
    BATCH = 48,
    // Advisory locks (locks.rs), numbered apart from the Store calls.
    LOCK = 64,
    LOCK_TEST = 65,
    LOCK_RELEASE = 66,
}
