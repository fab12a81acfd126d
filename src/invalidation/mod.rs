//! Invalidation: every source of "this changed", and the one place it is applied.
//!
//! Every source produces an [`Invalidation`] value (what changed, and its [`Source`]) and
//! hands it to [`Invalidator::apply`] (`apply.rs`), which moves the versions, keeps the
//! parent-row maps right, counts it, and tells L2 unless it came from L2. The sources, one
//! producer each:
//!
//! - `writes.rs`: writes through qcache (text, prepared, multi-statement) once acknowledged,
//!   and transaction ends;
//! - `binlog.rs`: the binlog tail's commits, DDL events and gaps;
//! - `l2.rs`: bumps learned from L2's channel (applied quietly: not published back);
//! - `ddl.rs`: the catalog reload after DDL through qcache;
//! - `admin.rs`: `QCACHE INVALIDATE TABLE`, `RESET QUERY CACHE`.
//!
//! How the session uses the catalog (`catalog.rs`):
//!
//! - On a miss, [`Catalog::resolve_read`] turns the tables a SELECT names into the tables its
//!   entry is stamped with (views expanded to their base tables, the views kept too).
//!   `Opaque` → do not cache; `DdlPending` → do not cache, and do not wait; `Unknown` →
//!   `refresh_if_older(100 ms)` and resolve again, then do not cache if still unknown (a
//!   temporary table stays unknown).
//! - On a data write, [`Catalog::expand_data_write`] widens its tables through triggers and
//!   foreign-key cascades; `None` → invalidate per `invalidation.unknown_write`.
//! - A DDL is registered with the catalog ([`Catalog::register_ddl`], `pending.rs`) before
//!   its OK goes to the client (or the binlog tail reports its position past it); its reload
//!   runs in the background and lands ([`Catalog::ddl_landed`]) after its second bump
//!   (`ddl.rs`). Until then what it named is unknown to every lookup above.
//! - [`binlog::spawn`] starts the tail; [`BinlogHandle::disconnected_for`] compared with
//!   `invalidation.max_lag` says when hits must stop.

pub mod admin;
pub mod apply;
pub mod binlog;
pub mod catalog;
pub mod ddl;
pub mod l2;
pub mod pending;
pub mod writes;

pub use apply::{Invalidation, Invalidator, Source, What};
pub use binlog::{BinlogError, BinlogHandle, BinlogStatus, WriteAnalyser};
pub use catalog::{Catalog, CatalogError, Changed, ReadResolution, TableName};
