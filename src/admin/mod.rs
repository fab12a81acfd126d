//! Operator surfaces: metrics, health endpoints and the admin statements qcache answers.
//!
//! - [`http`]: the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`, `/cache`, `/reload`).
//! - [`metrics`]: the Prometheus collector over the latency histograms and the cache's counters.
//! - [`statements`]: `SHOW QCACHE …` and `QCACHE INVALIDATE …` over the MySQL protocol.

pub mod http;
pub mod metrics;
pub mod statements;

/// Why an admin surface could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot listen on admin address {0}: {1}")]
    Bind(String, std::io::Error),
}
