//! qcache: a MySQL wire-protocol caching proxy.
//!
//! How a packet travels, module by module (top to bottom: a module imports only from the
//! ones below it; `tests/module_graph.rs` checks that):
//!
//! - [`server`] accepts clients (connection limit, signals) and starts one [`session`] per
//!   client on a [`workers`] runtime; [`shutdown`] drains or stops them; [`listener`] is
//!   where clients connect (TCP, the Unix socket).
//! - [`session`] owns one client and its upstream connection: it relays the handshake, then
//!   runs the command loop. SELECTs go through the cache; writes bump table versions before
//!   their OK is forwarded; everything else is relayed untouched.
//! - [`admin`] exposes metrics, health and the admin statements, all read from the shared
//!   state.
//! - [`shared`] is what every session shares: config (and its reload), cache, analysis memo,
//!   read plans, catalog, binlog tail, latency histograms (`observe::latency`).
//! - [`policy`] decides, without I/O, what may be cached, stored and served, and why not.
//! - [`l2`] is the shared second level in Redis: its client, its tasks and their RESP codec.
//! - [`cache`] holds results: keys, the bounded store, table versions, fill guards, read
//!   plans, and the writes a session owes it (`cache::writes`).
//! - [`observe`] counts: cache statistics, latency histograms, per-digest statistics.
//! - [`analysis`] classifies statements, computes digests and asks sqlparser which tables a
//!   statement reads or writes (memoised by digest).
//! - [`invalidation`] sees writes that bypass qcache (binlog) and widens writes through views,
//!   triggers and foreign keys (schema catalog).
//! - [`cli`] and [`config`] describe how it is run; [`rules`] are the operator's `[[rules]]`.
//! - [`tls`] builds the rustls contexts of both legs from `[tls]`, and the RSA password
//!   exchange where the legs differ (`tls::sha2`).
//! - [`transport`] is the buffered packet connection both legs use (TCP, TLS, the Unix
//!   socket, protocol compression): whole packets in, queued writes out.
//! - [`protocol`] is sans-IO: packet framing, OK/ERR/EOF, the handshake packets, commands and
//!   the response state machine that knows where every response ends.
//! - [`check`] is `qcache check-consistency`: the stale-read checker users run against it.
//! - [`clock`] is the hit path's monotonic clock, in nanoseconds.
//! - [`faults`] holds the debug-build switches that break one invariant on purpose, so tests
//!   can show their checkers fail.

// No function outside tests longer than clippy.toml's too-many-lines-threshold: a long
// function is split into named steps (CI runs clippy with -D warnings).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod admin;
pub mod analysis;
pub mod cache;
pub mod check;
pub mod cli;
pub mod clock;
pub mod config;
pub mod engine;
pub mod faults;
pub mod invalidation;
pub mod l2;
pub mod listener;
pub mod observe;
pub mod policy;
pub mod protocol;
pub mod rules;
pub mod server;
pub mod session;
pub mod shared;
pub mod shutdown;
pub mod tls;
pub mod transport;
pub mod workers;
