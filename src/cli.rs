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
    /// Address clients connect to over TCP ("" for none: then --socket is needed).
    #[arg(long, env = "QCACHE_LISTEN")]
    pub listen: Option<String>,
    /// Unix socket path clients may connect to, besides TCP (with --listen "": instead).
    #[arg(long, env = "QCACHE_SOCKET")]
    pub socket: Option<String>,
    /// MySQL/MariaDB server address (host:port).
    #[arg(long, env = "QCACHE_UPSTREAM")]
    pub upstream: Option<String>,
    /// Default query_cache_type of new sessions: ON, OFF or DEMAND.
    #[arg(long, env = "QCACHE_QUERY_CACHE_TYPE")]
    pub query_cache_type: Option<QueryCacheType>,
    /// Client connections accepted at once.
    #[arg(long, env = "QCACHE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Threads that run sessions (0: one per usable core).
    #[arg(long, env = "QCACHE_WORKERS")]
    pub workers: Option<usize>,
    /// Answer a plain BEGIN in qcache and send it with the transaction's first statement:
    /// true or false.
    #[arg(long, env = "QCACHE_DEFER_BEGIN")]
    pub defer_begin: Option<bool>,
    /// Cache memory: bytes, or with a unit (256MB, 1GiB).
    #[arg(long, env = "QCACHE_MAX_BYTES", value_parser = crate::config::parse_size)]
    pub max_bytes: Option<u64>,
    /// Statement shapes with their own row in SHOW QCACHE DIGESTS (0: off).
    #[arg(long, env = "QCACHE_STATS_DIGESTS")]
    pub stats_digests: Option<usize>,
    /// HTTP admin address ("" disables).
    #[arg(long, env = "QCACHE_ADMIN_LISTEN")]
    pub admin_listen: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "QCACHE_LOG_FORMAT", value_parser = parse_log_format)]
    pub log_format: Option<LogFormat>,
    /// Log filter, e.g. info or qcache=debug.
    #[arg(long, env = "QCACHE_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// server_id of the binlog tail; each replica of a sidecar fleet needs its own, or the
    /// server drops the older stream.
    #[arg(long, env = "QCACHE_SERVER_ID")]
    pub server_id: Option<u32>,
    /// Password of invalidation.user (from a secret, rather than in the config file).
    #[arg(long, env = "QCACHE_INVALIDATION_PASSWORD", hide_env_values = true)]
    pub invalidation_password: Option<crate::config::Secret>,
    /// PEM certificate qcache presents to clients (turns client TLS on).
    #[arg(long, env = "QCACHE_TLS_CERT")]
    pub tls_cert: Option<String>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "QCACHE_TLS_KEY")]
    pub tls_key: Option<String>,
    /// Protocol compression toward the server: off, zlib, zstd or auto.
    #[arg(long, env = "QCACHE_COMPRESS_UPSTREAM")]
    pub compress_upstream: Option<crate::config::UpstreamCompression>,
    /// Second-level cache in Redis/Valkey: off or on.
    #[arg(long, env = "QCACHE_L2_MODE")]
    pub l2_mode: Option<crate::config::L2Mode>,
    /// Redis URL (redis:// or rediss://, credentials inside); commas list cluster nodes.
    #[arg(long, env = "QCACHE_L2_URL", hide_env_values = true)]
    pub l2_url: Option<crate::config::Secret>,
    /// local or remote: whether every hit first checks its tables' versions in L2.
    #[arg(long, env = "QCACHE_L2_VALIDATE_HITS")]
    pub l2_validate_hits: Option<crate::config::ValidateHits>,
    /// Longest wait for an L2 round trip, e.g. 50ms.
    #[arg(long, env = "QCACHE_L2_TIMEOUT", value_parser = crate::config::parse_duration)]
    pub l2_timeout: Option<std::time::Duration>,
    /// Upper bound on an entry's life in Redis, e.g. 10m.
    #[arg(long, env = "QCACHE_L2_TTL", value_parser = crate::config::parse_duration)]
    pub l2_ttl: Option<std::time::Duration>,
    /// Largest result stored in L2: bytes, or with a unit (1MiB).
    #[arg(long, env = "QCACHE_L2_MAX_ENTRY_BYTES", value_parser = parse_usize_size)]
    pub l2_max_entry_bytes: Option<usize>,
    /// Prefix of qcache's keys and channel in Redis.
    #[arg(long, env = "QCACHE_L2_KEY_PREFIX")]
    pub l2_key_prefix: Option<String>,
    /// Cross-instance fill lease, e.g. 200ms (0 turns it off).
    #[arg(long, env = "QCACHE_L2_LEASE", value_parser = crate::config::parse_duration)]
    pub l2_lease: Option<std::time::Duration>,
    /// PEM CA certificates a rediss:// server must chain to (default: the system's roots).
    #[arg(long, env = "QCACHE_L2_TLS_CA")]
    pub l2_tls_ca: Option<String>,
    /// PEM client certificate shown to Redis (mutual TLS); with --l2-tls-key.
    #[arg(long, env = "QCACHE_L2_TLS_CERT")]
    pub l2_tls_cert: Option<String>,
    /// PEM private key of --l2-tls-cert.
    #[arg(long, env = "QCACHE_L2_TLS_KEY")]
    pub l2_tls_key: Option<String>,
    /// Any config key, as `section.key=value` (repeatable), read as the file reads it:
    /// `--set cache.ttl=1m30s --set l2.max_entry_bytes=1MiB`. Applied last, so it wins over
    /// every other flag and variable. Each key is also the variable QCACHE_<SECTION>_<KEY>
    /// (`QCACHE_CACHE_TTL`), which wins over the file.
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub set: Vec<String>,
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
    /// Run concurrent writers and readers against a qcache and report stale reads; exits
    /// non-zero on any (see docs/reliability.md).
    CheckConsistency(CheckArgs),
}

/// Flags of `check-consistency`; they map onto [`crate::check::CheckOptions`].
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The qcache to check (host:port). Several (repeated, or separated by commas) check a
    /// fleet sharing an L2: work is spread over them and stale reads across them reported.
    #[arg(
        long,
        env = "QCACHE_CHECK_TARGET",
        value_delimiter = ',',
        required = true
    )]
    pub target: Vec<String>,
    /// With several targets: how long a write acknowledged through one may take to show
    /// through another (0 for l2.validate_hits = "remote").
    #[arg(long, default_value = "50ms", value_parser = crate::config::parse_duration)]
    pub cross_lag: std::time::Duration,
    /// The server itself (host:port), for --direct-writes.
    #[arg(long, env = "QCACHE_CHECK_DIRECT")]
    pub direct: Option<String>,
    #[arg(long, env = "QCACHE_CHECK_USER", default_value = "root")]
    pub user: String,
    #[arg(long, env = "QCACHE_CHECK_PASSWORD", default_value = "")]
    pub password: String,
    /// Database where the check creates (and drops) its tables.
    #[arg(long, env = "QCACHE_CHECK_DATABASE", default_value = "test")]
    pub database: String,
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    pub duration: std::time::Duration,
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    #[arg(long, default_value_t = 8)]
    pub readers: usize,
    /// Send a share of the writes directly to --direct, bypassing qcache (needs the binlog).
    #[arg(long)]
    pub direct_writes: bool,
    /// Share of writes sent directly with --direct-writes (0.0 to 1.0).
    #[arg(long, default_value_t = 0.25)]
    pub direct_share: f64,
    /// How long a direct write may take to become visible through qcache.
    #[arg(long, default_value = "50ms", value_parser = crate::config::parse_duration)]
    pub allowed_lag: std::time::Duration,
    /// Seed of the statement mix, to repeat a run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only the row-slice reads and writes (a customer's rows by `=`, IN and a join chain;
    /// inserts, deletes, rows moved between customers), without the point/aggregate mix.
    #[arg(long)]
    pub slices_only: bool,
}

impl CheckArgs {
    pub fn options(&self) -> crate::check::CheckOptions {
        crate::check::CheckOptions {
            target: self.target.first().cloned().unwrap_or_default(),
            more_targets: self.target.iter().skip(1).cloned().collect(),
            cross_lag: self.cross_lag,
            direct: self.direct.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            database: self.database.clone(),
            duration: self.duration,
            writers: self.writers,
            readers: self.readers,
            direct_writes: self.direct_writes,
            direct_share: self.direct_share,
            allowed_lag: self.allowed_lag,
            seed: self.seed,
            slices_only: self.slices_only,
            ..Default::default()
        }
    }
}

fn parse_usize_size(s: &str) -> Result<usize, String> {
    let n = crate::config::parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("{s:?} is too large"))
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
    ///
    /// Precedence, highest first: `--set key=value`, the named flags (each with its own
    /// variable), the `QCACHE_<SECTION>_<KEY>` variables, the file, the defaults.
    pub fn effective_config(&self) -> Result<Config, ConfigError> {
        // Variables that are not valid UTF-8 cannot name a key or hold a value of one.
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let mut c = crate::config::layered(self.config.as_deref(), env, &[])?;
        self.overlay(&mut c);
        if !self.set.is_empty() {
            c = crate::config::layered_over(&c, &self.set)?;
        }
        c.validate()?;
        Ok(c)
    }

    /// Flags win over the file; used again on reload so a SIGHUP keeps them.
    pub fn overlay(&self, c: &mut Config) {
        if let Some(v) = &self.listen {
            c.server.listen = v.clone();
        }
        if let Some(v) = &self.socket {
            c.server.socket = v.clone();
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
        if let Some(v) = self.workers {
            c.server.workers = v;
        }
        if let Some(v) = self.defer_begin {
            c.server.defer_begin = v;
        }
        if let Some(v) = self.max_bytes {
            c.cache.max_bytes = v;
        }
        if let Some(v) = self.stats_digests {
            c.stats.digests = v;
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
        if let Some(v) = self.server_id {
            c.invalidation.server_id = v;
        }
        if let Some(v) = &self.invalidation_password {
            c.invalidation.password = v.0.clone();
        }
        if let Some(v) = &self.tls_cert {
            c.tls.client.cert = v.clone();
        }
        if let Some(v) = &self.tls_key {
            c.tls.client.key = v.clone();
        }
        if let Some(v) = self.compress_upstream {
            c.compression.upstream = v;
        }
        self.overlay_l2(&mut c.l2);
    }

    fn overlay_l2(&self, c: &mut crate::config::L2Config) {
        if let Some(v) = self.l2_mode {
            c.mode = v;
        }
        if let Some(v) = &self.l2_url {
            c.url = crate::config::L2Url::parse_flag(&v.0);
        }
        if let Some(v) = self.l2_validate_hits {
            c.validate_hits = v;
        }
        if let Some(v) = self.l2_timeout {
            c.timeout = v;
        }
        if let Some(v) = self.l2_ttl {
            c.ttl = v;
        }
        if let Some(v) = self.l2_max_entry_bytes {
            c.max_entry_bytes = v;
        }
        if let Some(v) = &self.l2_key_prefix {
            c.key_prefix = v.clone();
        }
        if let Some(v) = self.l2_lease {
            c.lease = v;
        }
        if let Some(v) = &self.l2_tls_ca {
            c.tls_ca = v.clone();
        }
        if let Some(v) = &self.l2_tls_cert {
            c.tls_cert = v.clone();
        }
        if let Some(v) = &self.l2_tls_key {
            c.tls_key = v.clone();
        }
    }
}
