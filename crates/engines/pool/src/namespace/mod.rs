//! The namespace: operations inside a transaction (`ops`), directory blocks and their DRAM
//! index (`dir`), uncommitted creates kept to their transaction (`creates`), and freeing an
//! inode whose last link and handle are gone (`orphan`).

pub(crate) mod creates;
pub(crate) mod dir;
pub(crate) mod ops;
pub(crate) mod orphan;
pub(crate) mod posix;
pub(crate) mod xattr;
pub(crate) mod xattr_record;
