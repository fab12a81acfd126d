//! Command line: flags that override the config file, each also settable from a QCACHE_*
//! environment variable, and the `check-config` / `print-config` modes.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError, LogFormat, QueryCacheType};

#[derive(Debug, Parser)]
#[command(
    name = "qcache",
    version,
    about = "A MySQL wire-protocol caching proxy"
)]
pub struct Cli {
    /// TOML config file; without it the defaults apply.
    #[arg(long, short = 'c', env = "QCACHE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address clients connect to.
    #[arg(long, env = "QCACHE_LISTEN")]
    pub listen: Option<String>,
    /// MySQL/MariaDB server address (host:port).
    #[arg(long, env = "QCACHE_UPSTREAM")]
    pub upstream: Option<String>,
    /// Default query_cache_type of new sessions: ON, OFF or DEMAND.
    #[arg(long, env = "QCACHE_QUERY_CACHE_TYPE")]
    pub query_cache_type: Option<QueryCacheType>,
    /// Client connections accepted at once.
    #[arg(long, env = "QCACHE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Cache memory in bytes.
    #[arg(long, env = "QCACHE_MAX_BYTES")]
    pub max_bytes: Option<u64>,
    /// HTTP admin address ("" disables).
    #[arg(long, env = "QCACHE_ADMIN_LISTEN")]
    pub admin_listen: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "QCACHE_LOG_FORMAT", value_parser = parse_log_format)]
    pub log_format: Option<LogFormat>,
    /// Log filter, e.g. info or qcache=debug.
    #[arg(long, env = "QCACHE_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// PEM certificate qcache presents to clients (turns client TLS on).
    #[arg(long, env = "QCACHE_TLS_CERT")]
    pub tls_cert: Option<String>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "QCACHE_TLS_KEY")]
    pub tls_key: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a config file and exit (0 when valid).
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Print the effective configuration (file, then flags and environment) as TOML.
    PrintConfig,
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s.to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("expected text or json, got {s:?}")),
    }
}

impl Cli {
    /// The config file (or defaults) with the flags laid over it, validated.
    pub fn effective_config(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        self.overlay(&mut c);
        c.validate()?;
        Ok(c)
    }

    /// Flags win over the file; used again on reload so a SIGHUP keeps them.
    pub fn overlay(&self, c: &mut Config) {
        if let Some(v) = &self.listen {
            c.server.listen = v.clone();
        }
        if let Some(v) = &self.upstream {
            c.server.upstream = v.clone();
        }
        if let Some(v) = self.query_cache_type {
            c.cache.query_cache_type = v;
        }
        if let Some(v) = self.max_connections {
            c.server.max_connections = v;
        }
        if let Some(v) = self.max_bytes {
            c.cache.max_bytes = v;
        }
        if let Some(v) = &self.admin_listen {
            c.admin.listen = v.clone();
        }
        if let Some(v) = self.log_format {
            c.log.format = v;
        }
        if let Some(v) = &self.log_level {
            c.log.level = v.clone();
        }
        if let Some(v) = &self.tls_cert {
            c.tls.client.cert = v.clone();
        }
        if let Some(v) = &self.tls_key {
            c.tls.client.key = v.clone();
        }
    }
}
