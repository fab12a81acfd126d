//! Invalidation sources beyond proxied writes: the binlog tail and the schema catalog.
//!
//! How the session uses them:
//!
//! - On a miss, [`Catalog::resolve_read`] turns the tables a SELECT names into the tables its
//!   entry is stamped with (views expanded to their base tables, the views kept too).
//!   `Opaque` → do not cache; `Unknown` → `refresh_if_older(100 ms)` and resolve again, then
//!   do not cache if still unknown (a temporary table stays unknown).
//! - On a write, [`Catalog::expand_write`] widens its tables through triggers and foreign-key
//!   cascades; `None` → invalidate per `invalidation.unknown_write`.
//! - After forwarding DDL, [`Catalog::refresh`] before the OK goes to the client.
//! - [`binlog::spawn`] starts the tail; [`BinlogHandle::disconnected_for`] compared with
//!   `invalidation.max_lag` says when hits must stop.

pub mod binlog;
pub mod catalog;

pub use binlog::{BinlogError, BinlogHandle, BinlogStatus, WriteAnalyser};
pub use catalog::{Catalog, CatalogError, Changed, ReadResolution, TableName};
