//! Policy: where a transaction's read view was opened, and which entries it may be served or
//! may store.
