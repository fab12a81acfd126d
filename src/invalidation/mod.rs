//! Invalidation sources beyond proxied writes: the binlog tail and the schema catalog.

pub mod binlog;
pub mod catalog;

pub use binlog::{BinlogError, BinlogHandle, BinlogStatus, WriteAnalyser};
pub use catalog::{Catalog, CatalogError, ReadResolution, TableName};
