//! Slots: pairs of chunks with their tags, and the seed's write cases (§5.2.2).

pub mod case;
pub mod pair;

pub use case::WriteCase;
pub use pair::Pair;
