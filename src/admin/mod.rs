//! Operator surfaces: metrics, health endpoints and the admin statements qcache answers.
//!
//! - [`http`]: the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`, `/cache`, `/reload`).
//! - [`metrics`]: the Prometheus collector over the latency histograms and the cache's counters.
//! - [`statements`]: `SHOW QCACHE …` and `QCACHE INVALIDATE …` over the MySQL protocol.

pub mod http;
pub mod metrics;
pub mod statements;

/// Moved to `crate::rules` (the config holds the rules, so they sit below it); kept here for
/// `session/query.rs`, removed once the branches editing it have merged.
pub use crate::rules;

/// Moved to `shared::reload` (the shared state reloads the config); kept here for
/// `main.rs`, removed once the `ops` branch has merged and main.rs imports it from there.
pub use crate::shared::set_log_reloader;

/// Why an admin surface could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot listen on admin address {0}: {1}")]
    Bind(String, std::io::Error),
}
