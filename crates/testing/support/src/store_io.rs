//! Files of a [`Store`] by path, for tests: a failure fails the test, naming the path.

use store::{Fh, OpenOptions, Store};

/// Open the existing file `path` read-write, outside any transaction.
pub fn open_rw(s: &dyn Store, path: &str) -> Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(s, path, None)
        .unwrap_or_else(|e| panic!("open {path}: {e}"))
}

/// Open `path` read-write, creating it when missing, O_ATOMIC when `atomic`.
pub fn create_rw(s: &dyn Store, path: &str, atomic: bool) -> Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
        .unwrap_or_else(|e| panic!("open {path}: {e}"))
}

/// The whole contents of the file `path`.
pub fn read_path(s: &dyn Store, path: &str) -> Vec<u8> {
    store::path::read_file(s, path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}
