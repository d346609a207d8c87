//! Concurrently selective checkpointing (seed §III-E): one block's versions merged into a
//! new permanent block (`block`), and the queue and threads that drive it (`background`).

mod background;
mod block;

pub(crate) use background::{checkpoint_thread, CheckpointQueue};
