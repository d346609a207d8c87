//! Configuration of a pool: the protocol mode, the geometry fixed at format time, and the
//! runtime limits.

/// Which update protocol the pool runs. `Fcfs` is the engine; the others are the comparison
/// protocols of the seed's evaluation (§VI-C), each a correct implementation of its protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Mode {
    /// FCFS: metadata undo log, cache-line redo into pending blocks, TLVI, concurrently
    /// selective checkpointing in background threads.
    #[default]
    Fcfs,
    /// No consistency: data and metadata written in place, no logging (durable on return).
    Nc,
    /// Fine-grained WAL: every data cache line is undo-logged (old line persisted) before it
    /// is written in place.
    FgWal,
    /// Short-circuit shadow paging: copy-on-write of whole 4 KB blocks, pointer swap at commit.
    Scsp,
    /// FCFS with strict commit-order checkpointing of each version (no selective merge).
    Soc,
    /// FCFS with the checkpoint done synchronously inside the commit.
    Sync,
}

impl Mode {
    /// Every mode: FCFS, then the comparison modes.
    pub const ALL: [Mode; 6] = [
        Mode::Fcfs,
        Mode::Nc,
        Mode::FgWal,
        Mode::Scsp,
        Mode::Soc,
        Mode::Sync,
    ];

    /// Short lower-case name, as used by the CLI and the benchmark tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fcfs => "fcfs",
            Mode::Nc => "nc",
            Mode::FgWal => "fg-wal",
            Mode::Scsp => "scsp",
            Mode::Soc => "soc",
            Mode::Sync => "sync",
        }
    }

    /// Parse a name as printed by [`Mode::name`].
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Geometry (fixed at format time, stored in the superblock) and runtime knobs.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Update protocol.
    pub mode: Mode,
    /// Number of inodes in the inode table (format time).
    pub inode_count: u64,
    /// Number of 64-byte entries in the metadata undo log (format time). Commit entries live
    /// here too.
    pub metadata_log_entries: u64,
    /// Number of 64-byte entries in the data redo log (format time): one per pending version.
    pub data_log_entries: u64,
    /// Keep a crc32c of every file data block in its block pointer, verified on read and by
    /// fsck (format time: a pool formatted with it is version 2, docs/format.md).
    pub data_checksums: bool,
    /// Longest pending list of one block before it is checkpointed.
    pub pending_versions_max: usize,
    /// Checkpointing starts when fewer than this percentage of blocks are free.
    pub free_blocks_low_percent: u64,
    /// Checkpointing also starts when more than this many data-log entries (pending
    /// versions) are in use, whatever the log's size (0: only when either log is 80 % full).
    /// A bounded set of pending blocks and log slots in flight stays within reach of the
    /// TLB and the caches; at the default of 8192 (32 MB of pending blocks) FCFS's 0-4 KB
    /// transactions ran at 2.41-2.69 µs against 2.58-2.86 with the log-full trigger alone
    /// (docs/engines/pool.md, "Checkpointing starts at 8192 pending versions").
    pub checkpoint_pending_high: u64,
    /// Checkpoint everything after this many milliseconds without a commit (0: never on idle).
    pub checkpoint_idle_ms: u64,
    /// Background checkpointing threads (0: checkpoint only on demand and at unmount).
    pub checkpoint_threads: usize,
    /// Transactions open at once (explicit and O_ATOMIC).
    pub open_transactions_max: usize,
    /// Open file handles at once.
    pub open_files_max: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            mode: Mode::Fcfs,
            inode_count: 16_384,
            metadata_log_entries: 65_536,
            data_log_entries: 131_072,
            data_checksums: false,
            pending_versions_max: 5,
            free_blocks_low_percent: 10,
            checkpoint_pending_high: 8_192,
            checkpoint_idle_ms: 1_000,
            checkpoint_threads: 1,
            open_transactions_max: 4_096,
            open_files_max: 65_536,
        }
    }
}

impl PoolConfig {
    /// A configuration that shrinks every limit so that tests reach the edges.
    pub fn test_min() -> Self {
        PoolConfig {
            mode: Mode::Fcfs,
            inode_count: 64,
            metadata_log_entries: 256,
            data_log_entries: 64,
            data_checksums: false,
            pending_versions_max: 2,
            free_blocks_low_percent: 10,
            checkpoint_pending_high: 0,
            checkpoint_idle_ms: 0,
            checkpoint_threads: 0,
            open_transactions_max: 4,
            open_files_max: 16,
        }
    }

    /// The same configuration with data checksums on or off (format time).
    pub fn with_data_checksums(mut self, on: bool) -> Self {
        self.data_checksums = on;
        self
    }

    /// The same configuration in another mode.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
}
