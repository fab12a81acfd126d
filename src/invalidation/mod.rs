//! Invalidation sources beyond proxied writes: the binlog tail and the schema catalog.

pub mod catalog;

pub use catalog::{Catalog, CatalogError, ReadResolution, TableName};
