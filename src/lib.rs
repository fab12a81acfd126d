//! qcache: a MySQL wire-protocol caching proxy.
//!
//! How a packet travels, module by module:
//!
//! - [`server`] accepts clients (connection limit, signals, graceful shutdown) and starts one
//!   [`session`] per client.
//! - [`session`] owns one client and its upstream connection: it relays the handshake, then
//!   runs the command loop. SELECTs go through the cache; writes bump table versions before
//!   their OK is forwarded; everything else is relayed untouched.
//! - [`protocol`] is sans-IO: packet framing, OK/ERR/EOF, the handshake packets, commands and
//!   the response state machine that knows where every response ends.
//! - [`analysis`] classifies statements, computes digests and asks sqlparser which tables a
//!   statement reads or writes (memoised by digest).
//! - [`cache`] holds results: keys, the bounded store, table versions, fill guards.
//! - [`invalidation`] sees writes that bypass qcache (binlog) and widens writes through views,
//!   triggers and foreign keys (schema catalog).
//! - [`admin`] exposes metrics, health and the admin statements.
//! - [`workers`] holds the per-core runtimes sessions run on.
//! - [`tls`] builds the rustls contexts of both legs from `[tls]`.
//! - [`policy`] decides, without I/O, what may be cached, stored and served, and why not.
//! - [`config`] and [`cli`] describe how it is run.
//! - [`check`] is `qcache check-consistency`: the stale-read checker users run against it.

pub mod admin;
pub mod analysis;
pub mod cache;
pub mod check;
pub mod cli;
pub mod config;
pub mod invalidation;
pub mod policy;
pub mod protocol;
pub mod server;
pub mod session;
pub mod tls;
pub mod workers;
