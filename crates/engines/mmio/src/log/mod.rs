//! The log pool: its on-media layout (`layout.rs`), namespace intent records (`intent.rs`),
//! the old values of extended attributes changed in transactions (`saved_xattr.rs`), the
//! commit and abort of one file's epoch (`commit.rs`) and checkpointing (`checkpoint.rs`).

pub(crate) mod checkpoint;
mod commit;
pub mod intent;
pub mod layout;
pub(crate) mod saved_xattr;
