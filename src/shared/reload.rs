//! Configuration reload (SIGHUP, POST /reload): re-read the file, flags and environment,
//! validate, say which changes need a restart, and swap the new config in; and the
//! process-wide log filter a reload may change.

use std::sync::{Arc, OnceLock};

use tracing::{info, warn};

use super::Shared;
use crate::cli::Cli;
use crate::config::Config;

/// Why the log filter could not be changed.
#[derive(Debug, thiserror::Error)]
#[error("log.level {0:?}: {1}")]
pub struct LogLevelError(String, String);

type LogReloader = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The tracing subscriber is process-global, so the handle that changes its filter is too.
static LOG_RELOADER: OnceLock<LogReloader> = OnceLock::new();

/// Called once by the binary after it installs its subscriber with a reloadable filter.
pub fn set_log_reloader(f: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static) {
    let _ = LOG_RELOADER.set(Box::new(f));
}

/// Applies a new `log.level` filter; without a reloadable subscriber (tests, library use)
/// there is nothing to change.
pub fn reload_log_level(level: &str) -> Result<(), LogLevelError> {
    match LOG_RELOADER.get() {
        Some(f) => f(level).map_err(|e| LogLevelError(level.to_string(), e)),
        None => Ok(()),
    }
}

impl Shared {
    pub fn swap_config(&self, c: Config) {
        self.digests.set_capacity(c.stats.digests);
        self.config.store(Arc::new(c));
        // Certificates may have been replaced in place: read them again.
        crate::tls::forget();
    }

    /// Where [`Shared::reload`] re-reads the config from.
    pub fn set_reload_source(&self, cli: Cli) {
        if let Ok(mut g) = self.reload_source.lock() {
            *g = Some(cli);
        }
    }

    /// Re-reads the config (file, then flags and environment), validates it and swaps it in.
    /// Returns notes about settings that need a restart; an invalid file keeps the running
    /// config and returns why.
    pub fn reload(&self) -> Result<Vec<String>, String> {
        let r = self.try_reload();
        if let Err(e) = &r {
            warn!(error = %e, "reload refused; keeping the running configuration");
        }
        r
    }

    fn try_reload(&self) -> Result<Vec<String>, String> {
        let new = {
            let g = self
                .reload_source
                .lock()
                .map_err(|_| "reload state poisoned")?;
            let cli = g
                .as_ref()
                .ok_or("started without a config source; nothing to re-read")?;
            cli.effective_config().map_err(|e| e.to_string())?
        };
        let old = self.config();
        refuse_other_server(&old, &new)?;
        reload_log_level(&new.log.level).map_err(|e| e.to_string())?;
        let mut notes = Vec::new();
        let mut restart = |changed: bool, key: &str| {
            if changed {
                notes.push(format!("{key} changed: takes effect after a restart"));
            }
        };
        restart(new.server.listen != old.server.listen, "server.listen");
        restart(new.server.socket != old.server.socket, "server.socket");
        restart(new.admin.listen != old.admin.listen, "admin.listen");
        restart(
            new.server.max_connections != old.server.max_connections,
            "server.max_connections",
        );
        restart(
            new.server.listen_backlog != old.server.listen_backlog,
            "server.listen_backlog",
        );
        restart(new.server.workers != old.server.workers, "server.workers");
        restart(
            new.server.placement != old.server.placement,
            "server.placement",
        );
        restart(
            new.cache.max_bytes != old.cache.max_bytes,
            "cache.max_bytes",
        );
        restart(
            new.cache.analysis_memo_entries != old.cache.analysis_memo_entries,
            "cache.analysis_memo_entries",
        );
        let (ni, oi) = (&new.invalidation, &old.invalidation);
        restart(
            (ni.binlog, ni.server_id) != (oi.binlog, oi.server_id),
            "invalidation.binlog/server_id",
        );
        restart(new.log.format != old.log.format, "log.format");
        restart(new.l2 != old.l2, "l2");
        for n in &notes {
            warn!("{n}");
        }
        self.cache.reconfigure(&new.cache);
        self.swap_config(new);
        info!("configuration reloaded");
        Ok(notes)
    }
}

/// A reload may not move qcache to another server or another account of its own: every
/// entry, table version, the catalog and the binlog tail's position describe the server
/// they came from, and serving them for another would be wrong answers. A restart starts
/// clean; the running configuration is kept.
fn refuse_other_server(old: &Config, new: &Config) -> Result<(), String> {
    let mut changed = Vec::new();
    if new.server.upstream != old.server.upstream {
        changed.push(format!(
            "server.upstream ({} -> {})",
            old.server.upstream, new.server.upstream
        ));
    }
    if new.invalidation.user != old.invalidation.user {
        changed.push("invalidation.user".to_string());
    }
    if new.invalidation.password != old.invalidation.password {
        changed.push("invalidation.password".to_string());
    }
    if changed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} changed: the cache, catalog and binlog position belong to the server and account \
         qcache started with; restart qcache to change them (the running configuration is kept)",
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per key a reload must refuse to change, and one it may.
    #[test]
    fn a_reload_to_another_server_or_account_is_refused() {
        let base = Config::default();
        type Edit = fn(&mut Config);
        let cases: [(&str, Edit, bool); 4] = [
            (
                "server.upstream",
                |c| c.server.upstream = "10.0.0.9:3306".into(),
                true,
            ),
            (
                "invalidation.user",
                |c| c.invalidation.user = "qc".into(),
                true,
            ),
            (
                "invalidation.password",
                |c| c.invalidation.password = "pw".into(),
                true,
            ),
            ("log.level", |c| c.log.level = "debug".into(), false),
        ];
        for (key, edit, refused) in cases {
            let mut new = base.clone();
            edit(&mut new);
            let r = refuse_other_server(&base, &new);
            assert_eq!(r.is_err(), refused, "{key}: {r:?}");
            if let Err(e) = r {
                assert!(e.contains(key) && e.contains("restart"), "{e}");
                assert!(!e.contains("pw\""), "{e}");
            }
        }
    }
}
