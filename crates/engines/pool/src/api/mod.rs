//! The engine behind the `store::Store` trait: `PoolStore` with its handles and O_ATOMIC
//! (`pool_store`), and the table of open transactions with the DRAM follow-up of their
//! commit and abort (`transaction_table`).

pub(crate) mod pool_store;
pub(crate) mod posix;
pub(crate) mod transaction_table;
