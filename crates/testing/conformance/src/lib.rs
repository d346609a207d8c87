//! `conformance` — the engine-neutral conformance suite of atomfs, and [`ModelStore`], the
//! reference model it is proven against.
//!
//! An engine's test crate implements [`Harness`] (how to make, reopen and crash a store) and
//! invokes [`conformance_tests!`], which expands to one `#[test]` per case (see [`cases`]), so a
//! failure names the case. Every case ends with `fsck` clean.
//!
//! ```ignore
//! struct PoolHarness;
//! impl conformance::Harness for PoolHarness { /* fresh, reopen_clean, reopen_unclean */ }
//! conformance::conformance_tests!(PoolHarness);
//! ```
//!
//! [`ModelStore`] is a complete, simple, in-memory implementation of the Store API used as the
//! oracle of differential and crash tests. It is a test oracle, not an engine: nothing in it is
//! persistent or fast. This crate runs the whole suite against it (tests/model.rs).

#![forbid(unsafe_code)]

pub mod cases;
pub mod model;
pub mod tree;

pub use model::ModelStore;
pub use test_support::Rng;
pub use tree::{build_into, diff, snapshot, Node, Tree};

use store::Store;

/// What the suite needs from an engine's test: stores to test, and ways to reopen them.
pub trait Harness: Sync {
    /// A new, empty store (large enough for a 64 MiB file and a few thousand files).
    fn fresh(&self) -> Box<dyn Store>;
    /// A new, empty store small enough that a test fills its pool or log quickly (a few MiB),
    /// or `None` when the engine cannot be made small (the space case then reports a skip).
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        None
    }
    /// Unmount cleanly and open the same store again.
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store>;
    /// Stop without unmounting (as a crash at a quiescent point: every call has returned) and
    /// open the same store again, running recovery.
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store>;
    /// Whether the engine promises durability and atomicity across `reopen_unclean` (the NC
    /// baseline does not; cases then check only what survives a clean reopen).
    fn supports_crash_guarantees(&self) -> bool {
        true
    }
    /// Parts of the POSIX file API the engine offers but the host file system under this
    /// harness's stores refuses (a host-file engine's home on a FUSE file system without
    /// RENAME_EXCHANGE, say): their cases check that the call is refused with Unsupported and
    /// changes nothing, and say why, as for [`cases::awaited`].
    fn host_lacks(&self) -> &'static [cases::Feature] {
        &[]
    }
}

/// The harness of [`ModelStore`]: reopening keeps exactly what is durable in the model.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelHarness;

/// Capacity of the model's small store (bytes of file data).
pub const MODEL_SMALL_CAPACITY: u64 = 4 << 20;

fn model_of(store: &dyn Store) -> &ModelStore {
    match store.as_any().downcast_ref::<ModelStore>() {
        Some(model) => model,
        None => panic!("ModelHarness given a {} store", store.engine_name()),
    }
}

impl Harness for ModelHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(ModelStore::new())
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        Some(Box::new(ModelStore::with_capacity(Some(
            MODEL_SMALL_CAPACITY,
        ))))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        if let Err(e) = store.unmount() {
            panic!("model unmount failed: {e}");
        }
        Box::new(model_of(store.as_ref()).crash())
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        Box::new(model_of(store.as_ref()).crash())
    }
}

/// Expands to one `#[test]` per conformance case, each calling the case with `$harness`
/// (an expression evaluated once per test). Long cases are `#[ignore]`d: run them with
/// `cargo test -p <crate> --release -- --ignored`.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::conformance_tests!(@emit $harness;
            open_create_flags, open_append, read_only_handle_rejects_writes, read_write_seek,
            read_past_eof, sparse_holes_read_zeros, set_len_shrink_extend, large_file_64mib,
            many_files_in_one_dir, mkdir_rmdir_read_dir, rename_moves, rename_replaces,
            rename_errors, namespace_error_order, unlink_keeps_open_file, hard_links, stat_fields, paths,
            tx_multi_file_commit, tx_abort_restores_everything, tx_file_in_two_transactions,
            tx_created_file_refuses_changes_from_outside, tx_created_file_free_after_commit,
            tx_aborted_create_handles_not_found,
            tx_finished_transaction, released_handle, tx_uncommitted_lost_on_crash,
            tx_namespace_commit_survives_crash, atomic_invisible_until_fsync, atomic_syncv,
            atomic_two_handles_one_file, atomic_abortv, concurrent_transactions, reopen_preserves_committed,
            legacy_calls_durable, no_space_in_transaction_rolls_back, statfs_and_fsync,
            unmount_closes, symlinks, special_files, unnamed_files, rename_modes,
            fallocate_modes, fallocate_in_transaction, xattrs, xattrs_in_transaction;
            ignored: large_file_1gib, many_files_100k);
    };
    (@emit $harness:expr; $($case:ident),* $(,)?; ignored: $($slow:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::cases::$case(&$harness);
            }
        )*
        $(
            #[test]
            #[ignore = "long: run with --release -- --ignored"]
            fn $slow() {
                $crate::cases::$slow(&$harness);
            }
        )*
    };
}
