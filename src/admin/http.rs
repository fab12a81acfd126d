//! The HTTP admin endpoint on `admin.listen`: `/metrics`, `/healthz`, `/readyz`, `/cache`,
//! `/digests` and `POST /reload`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

use super::AdminError;
use crate::invalidation::binlog::BinlogStatus;
use crate::shared::Shared;

/// A readiness answer is reused this long, so a busy prober does not open a connection to
/// the upstream per request.
const READY_CACHE: Duration = Duration::from_secs(1);
/// Longest a readiness probe waits for the upstream's greeting.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The last readiness answer and when it was found.
type ReadyCache = Arc<Mutex<Option<(Instant, Result<(), String>)>>>;

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    ready: ReadyCache,
}

/// Binds `addr` and serves the admin endpoint until `drain` turns true. Returns the bound
/// address (the real port when the config said 0).
pub async fn spawn(
    addr: &str,
    shared: Arc<Shared>,
    mut drain: watch::Receiver<bool>,
) -> Result<SocketAddr, AdminError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| AdminError::Bind(addr.to_string(), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| AdminError::Bind(addr.to_string(), e))?;
    let state = AppState {
        shared,
        ready: Arc::new(Mutex::new(None)),
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/cache", get(cache_summary))
        .route("/digests", get(digests))
        .route("/reload", post(reload))
        .with_state(state);
    tokio::spawn(async move {
        let stop = async move {
            let _ = drain.wait_for(|d| *d).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            warn!(error = %e, "admin endpoint stopped");
        }
    });
    info!(addr = %bound, "admin endpoint listening");
    Ok(bound)
}

async fn metrics(State(s): State<AppState>) -> Response {
    match super::metrics::render(&s.shared) {
        Ok((body, content_type)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response(),
    }
}

async fn readyz(State(s): State<AppState>) -> Response {
    let cached = s
        .ready
        .lock()
        .ok()
        .and_then(|g| g.clone())
        .filter(|(at, _)| at.elapsed() < READY_CACHE)
        .map(|(_, r)| r);
    let result = match cached {
        Some(r) => r,
        None => {
            let r = readiness(&s.shared).await;
            if let Ok(mut g) = s.ready.lock() {
                *g = Some((Instant::now(), r.clone()));
            }
            r
        }
    };
    match result {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()).into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// Ready when the upstream answers a login and, when the binlog tail is on, its stream is
/// connected (without it, writes that bypass qcache could go unseen).
///
/// The probe logs in as `invalidation.user` and quits cleanly. A bare TCP connect that hangs
/// up after the greeting would count as a handshake error, and MySQL blocks a host after
/// `max_connect_errors` of those in a row: on an idle system the probes alone would lock
/// qcache's host out. Errors that stop every session count against readiness, and so does a
/// refusal of qcache's own account (nothing would be cached, bypassing writes unseen): the
/// body names the account and the server's message.
async fn readiness(shared: &Shared) -> Result<(), String> {
    let cfg = shared.config();
    let upstream = &cfg.server.upstream;
    let timeout = cfg.server.connect_timeout.min(PROBE_TIMEOUT);
    let opts = crate::invalidation::catalog::upstream_opts(upstream, &cfg.invalidation);
    match tokio::time::timeout(timeout, mysql_async::Conn::new(opts)).await {
        Err(_) => {
            return Err(format!(
                "upstream {upstream} did not answer within {timeout:?}"
            ))
        }
        Ok(Ok(conn)) => {
            let _ = tokio::time::timeout(timeout, conn.disconnect()).await;
        }
        // Too many connections, host blocked, server shutting down: sessions would fail too.
        Ok(Err(mysql_async::Error::Server(e))) if [1040, 1129, 1053].contains(&e.code) => {
            return Err(format!(
                "upstream {upstream} refused: {} ({})",
                e.message, e.code
            ));
        }
        // qcache's own account refused (wrong password, no such user): sessions still
        // relay, but nothing is cached and writes that bypass qcache go unseen. Say so.
        Ok(Err(mysql_async::Error::Server(e))) if [1045, 1044, 1698].contains(&e.code) => {
            return Err(format!(
                "qcache's own account '{}' cannot log in to {upstream}: {} ({}); set \
                 invalidation.user and invalidation.password (or QCACHE_INVALIDATION_PASSWORD)",
                cfg.invalidation.user, e.message, e.code
            ));
        }
        Ok(Err(mysql_async::Error::Server(_))) => {}
        Ok(Err(e)) => return Err(format!("upstream {upstream} unreachable: {e}")),
    }
    // Nothing loaded means nothing cached. Try again here, rate-limited, so that an instance
    // that started while its server was away becomes ready without waiting for a read.
    if !shared.catalog.is_loaded() {
        let _ = shared
            .catalog
            .refresh_if_older(std::time::Duration::from_secs(1))
            .await;
        if let Some(why) = shared.catalog.last_error() {
            return Err(why);
        }
    }
    if let Some(b) = &shared.binlog {
        match b.status() {
            BinlogStatus::Connected | BinlogStatus::Off(_) => {}
            BinlogStatus::Starting => return Err("binlog stream not connected yet".into()),
            BinlogStatus::Reconnecting(e) => return Err(format!("binlog stream down: {e}")),
            // Ready while the fleet's tails are heard within the lag bound.
            BinlogStatus::Standby => {
                if shared.hits_suspended() {
                    return Err("standby: no binlog tail of the fleet heard".into());
                }
            }
        }
    }
    Ok(())
}

async fn cache_summary(State(s): State<AppState>) -> Response {
    let sh = &s.shared;
    let stats = sh.cache.stats();
    let hits = stats.hits();
    let misses = sh.latencies.miss.count();
    let not_cached: serde_json::Map<String, serde_json::Value> = stats
        .not_cached_reasons()
        .into_iter()
        .map(|(r, n)| (r.to_string(), n.into()))
        .collect();
    let not_cached_total: u64 = not_cached.values().filter_map(|v| v.as_u64()).sum();
    let lookups = hits + misses + not_cached_total;
    let binlog = match &sh.binlog {
        None => serde_json::json!({ "state": "off" }),
        Some(b) => {
            let state = match b.status() {
                BinlogStatus::Starting => "starting".to_string(),
                BinlogStatus::Connected => "connected".to_string(),
                BinlogStatus::Reconnecting(e) => format!("reconnecting: {e}"),
                BinlogStatus::Off(e) => format!("off: {e}"),
                BinlogStatus::Standby => "standby".to_string(),
            };
            serde_json::json!({
                "state": state,
                "connected": b.connected(),
                "lag_seconds": b.last_event_lag().map(|d| d.as_secs_f64()),
                "reconnects": b.reconnects(),
                "resumes": b.resumes(),
                "gaps": b.gaps(),
                "events": b.events(),
            })
        }
    };
    let body = serde_json::json!({
        "entries": sh.cache.len(),
        "bytes": sh.cache.weight(),
        "max_bytes": sh.cache.max_bytes(),
        "hits": hits,
        "misses": misses,
        "inserts": stats.inserts(),
        "not_cached": not_cached_total,
        "not_cached_by_reason": not_cached,
        // Hits over every SELECT that consulted qcache, cacheable or not.
        "hit_ratio": if lookups == 0 { 0.0 } else { hits as f64 / lookups as f64 },
        "client_connections": sh.connections.load(std::sync::atomic::Ordering::Relaxed),
        "binlog": binlog,
    });
    axum::Json(body).into_response()
}

/// Per-digest statistics: statement shapes with literals as `?`, so no literal a client
/// sent is ever shown here.
async fn digests(State(s): State<AppState>) -> Response {
    axum::Json(super::statements::digests_json(&s.shared)).into_response()
}

async fn reload(State(s): State<AppState>) -> Response {
    match s.shared.reload() {
        Ok(notes) => {
            let mut body = "configuration reloaded\n".to_string();
            for n in notes {
                body.push_str(&n);
                body.push('\n');
            }
            (StatusCode::OK, body).into_response()
        }
        Err(why) => (StatusCode::BAD_REQUEST, format!("reload refused: {why}\n")).into_response(),
    }
}
