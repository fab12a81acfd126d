//! Operator surfaces: metrics, health endpoints and the admin statements qcache answers.
//!
//! - [`http`]: the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`, `/cache`, `/reload`).
//! - [`metrics`]: latency histograms and the Prometheus collector over the cache's counters.
//! - [`statements`]: `SHOW QCACHE …` and `QCACHE INVALIDATE …` over the MySQL protocol.
//! - [`rules`]: `[[rules]]` from the config, consulted on a miss.

pub mod http;
pub mod metrics;
pub mod rules;
pub mod statements;

use std::sync::OnceLock;

/// Why an admin surface could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot listen on admin address {0}: {1}")]
    Bind(String, std::io::Error),
    #[error("log.level {0:?}: {1}")]
    LogLevel(String, String),
}

type LogReloader = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The tracing subscriber is process-global, so the handle that changes its filter is too.
static LOG_RELOADER: OnceLock<LogReloader> = OnceLock::new();

/// Called once by the binary after it installs its subscriber with a reloadable filter.
pub fn set_log_reloader(f: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static) {
    let _ = LOG_RELOADER.set(Box::new(f));
}

/// Applies a new `log.level` filter; without a reloadable subscriber (tests, library use)
/// there is nothing to change.
pub fn reload_log_level(level: &str) -> Result<(), AdminError> {
    match LOG_RELOADER.get() {
        Some(f) => f(level).map_err(|e| AdminError::LogLevel(level.to_string(), e)),
        None => Ok(()),
    }
}
