//! Command line: flags that override the config file (each named flag is a key's alias, with
//! its own older QCACHE_* variable), and the `check-config` / `print-config` modes.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError, Setting};

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
    #[arg(long, env = "QCACHE_LISTEN", value_parser = key("server.listen"))]
    pub listen: Option<String>,
    /// Unix socket path clients may connect to, besides TCP (with --listen "": instead).
    #[arg(long, env = "QCACHE_SOCKET", value_parser = key("server.socket"))]
    pub socket: Option<String>,
    /// MySQL/MariaDB server address (host:port).
    #[arg(long, env = "QCACHE_UPSTREAM", value_parser = key("server.upstream"))]
    pub upstream: Option<String>,
    /// Default query_cache_type of new sessions: ON, OFF or DEMAND.
    #[arg(long, env = "QCACHE_QUERY_CACHE_TYPE", value_parser = key_any_case("cache.query_cache_type", str::to_ascii_uppercase))]
    pub query_cache_type: Option<String>,
    /// Client connections accepted at once.
    #[arg(long, env = "QCACHE_MAX_CONNECTIONS", value_parser = key("server.max_connections"))]
    pub max_connections: Option<String>,
    /// Threads that run sessions (0: one per usable core).
    #[arg(long, env = "QCACHE_WORKERS", value_parser = key("server.workers"))]
    pub workers: Option<String>,
    /// Answer a plain BEGIN in qcache and send it with the transaction's first statement:
    /// true or false.
    #[arg(long, env = "QCACHE_DEFER_BEGIN", value_parser = key("server.defer_begin"))]
    pub defer_begin: Option<String>,
    /// Cache memory: bytes, or with a unit (256MB, 1GiB).
    #[arg(long, env = "QCACHE_MAX_BYTES", value_parser = key("cache.max_bytes"))]
    pub max_bytes: Option<String>,
    /// Statement shapes with their own row in SHOW QCACHE DIGESTS (0: off).
    #[arg(long, env = "QCACHE_STATS_DIGESTS", value_parser = key("stats.digests"))]
    pub stats_digests: Option<String>,
    /// HTTP admin address ("" disables).
    #[arg(long, env = "QCACHE_ADMIN_LISTEN", value_parser = key("admin.listen"))]
    pub admin_listen: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "QCACHE_LOG_FORMAT", value_parser = key_any_case("log.format", str::to_ascii_lowercase))]
    pub log_format: Option<String>,
    /// Log filter, e.g. info or qcache=debug.
    #[arg(long, env = "QCACHE_LOG_LEVEL", value_parser = key("log.level"))]
    pub log_level: Option<String>,
    /// server_id of the binlog tail; each replica of a sidecar fleet needs its own, or the
    /// server drops the older stream.
    #[arg(long, env = "QCACHE_SERVER_ID", value_parser = key("invalidation.server_id"))]
    pub server_id: Option<String>,
    /// Password of invalidation.user (from a secret, rather than in the config file).
    #[arg(long, env = "QCACHE_INVALIDATION_PASSWORD", hide_env_values = true)]
    pub invalidation_password: Option<crate::config::Secret>,
    /// PEM certificate qcache presents to clients (turns client TLS on).
    #[arg(long, env = "QCACHE_TLS_CERT", value_parser = key("tls.client.cert"))]
    pub tls_cert: Option<String>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "QCACHE_TLS_KEY", value_parser = key("tls.client.key"))]
    pub tls_key: Option<String>,
    /// Protocol compression toward the server: off, zlib, zstd or auto.
    #[arg(long, env = "QCACHE_COMPRESS_UPSTREAM", value_parser = key_any_case("compression.upstream", str::to_ascii_lowercase))]
    pub compress_upstream: Option<String>,
    /// Second-level cache in Redis/Valkey: off or on.
    #[arg(long, env = "QCACHE_L2_MODE", value_parser = key_any_case("l2.mode", str::to_ascii_lowercase))]
    pub l2_mode: Option<String>,
    /// Redis URL (redis:// or rediss://, credentials inside); commas list cluster nodes.
    #[arg(long, env = "QCACHE_L2_URL", hide_env_values = true)]
    pub l2_url: Option<crate::config::Secret>,
    /// local or remote: whether every hit first checks its tables' versions in L2.
    #[arg(long, env = "QCACHE_L2_VALIDATE_HITS", value_parser = key_any_case("l2.validate_hits", str::to_ascii_lowercase))]
    pub l2_validate_hits: Option<String>,
    /// Longest wait for an L2 round trip, e.g. 50ms.
    #[arg(long, env = "QCACHE_L2_TIMEOUT", value_parser = key("l2.timeout"))]
    pub l2_timeout: Option<String>,
    /// Upper bound on an entry's life in Redis, e.g. 10m.
    #[arg(long, env = "QCACHE_L2_TTL", value_parser = key("l2.ttl"))]
    pub l2_ttl: Option<String>,
    /// Largest result stored in L2: bytes, or with a unit (1MiB).
    #[arg(long, env = "QCACHE_L2_MAX_ENTRY_BYTES", value_parser = key("l2.max_entry_bytes"))]
    pub l2_max_entry_bytes: Option<String>,
    /// Prefix of qcache's keys and channel in Redis.
    #[arg(long, env = "QCACHE_L2_KEY_PREFIX", value_parser = key("l2.key_prefix"))]
    pub l2_key_prefix: Option<String>,
    /// Cross-instance fill lease, e.g. 200ms (0 turns it off).
    #[arg(long, env = "QCACHE_L2_LEASE", value_parser = key("l2.lease"))]
    pub l2_lease: Option<String>,
    /// PEM CA certificates a rediss:// server must chain to (default: the system's roots).
    #[arg(long, env = "QCACHE_L2_TLS_CA", value_parser = key("l2.tls_ca"))]
    pub l2_tls_ca: Option<String>,
    /// PEM client certificate shown to Redis (mutual TLS); with --l2-tls-key.
    #[arg(long, env = "QCACHE_L2_TLS_CERT", value_parser = key("l2.tls_cert"))]
    pub l2_tls_cert: Option<String>,
    /// PEM private key of --l2-tls-cert.
    #[arg(long, env = "QCACHE_L2_TLS_KEY", value_parser = key("l2.tls_key"))]
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

/// The value parser of a named flag: its text read as the file reads `key`, kept as text
/// for the layering (crate::config::layered_with).
fn key(
    key: &'static str,
) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |s| crate::config::checked(key, s)
}

/// [`key`] for a flag whose words were read in any case (and trimmed) before they were
/// aliases: the text is folded to the file's spelling first.
fn key_any_case(
    key: &'static str,
    fold: fn(&str) -> String,
) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |s| crate::config::checked(key, &fold(s.trim()))
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

/// A named flag: its name, the key it sets, its variable's suffix, the value given.
type NamedFlag<'a> = (&'static str, &'static str, &'static str, Option<&'a str>);

impl Cli {
    /// The config file (or defaults) with the variables and flags laid over it, validated;
    /// used again on reload so a SIGHUP keeps them.
    ///
    /// Precedence, highest first: `--set key=value`, the named flags (each with its own
    /// variable), the `QCACHE_<SECTION>_<KEY>` variables, the file, the defaults. Every
    /// value is text read as the file reads it (crate::config::layered_with).
    pub fn effective_config(&self) -> Result<Config, ConfigError> {
        // Variables that are not valid UTF-8 cannot name a key or hold a value of one.
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let c = crate::config::layered_with(self.config.as_deref(), env, self.named(), &self.set)?;
        c.validate()?;
        Ok(c)
    }

    /// The named flags given, as the keys they set.
    fn named(&self) -> Vec<Setting> {
        self.core_flags()
            .into_iter()
            .chain(self.l2_flags())
            .filter_map(|(flag, key, var, raw)| {
                Some(Setting {
                    key: key.to_string(),
                    raw: raw?.to_string(),
                    source: format!("--{flag} (or QCACHE_{var})"),
                })
            })
            .collect()
    }

    /// The named flags outside `[l2]`: (flag, key, variable suffix, value given).
    fn core_flags(&self) -> Vec<NamedFlag<'_>> {
        vec![
            ("listen", "server.listen", "LISTEN", self.listen.as_deref()),
            ("socket", "server.socket", "SOCKET", self.socket.as_deref()),
            (
                "upstream",
                "server.upstream",
                "UPSTREAM",
                self.upstream.as_deref(),
            ),
            (
                "query-cache-type",
                "cache.query_cache_type",
                "QUERY_CACHE_TYPE",
                self.query_cache_type.as_deref(),
            ),
            (
                "max-connections",
                "server.max_connections",
                "MAX_CONNECTIONS",
                self.max_connections.as_deref(),
            ),
            (
                "workers",
                "server.workers",
                "WORKERS",
                self.workers.as_deref(),
            ),
            (
                "defer-begin",
                "server.defer_begin",
                "DEFER_BEGIN",
                self.defer_begin.as_deref(),
            ),
            (
                "max-bytes",
                "cache.max_bytes",
                "MAX_BYTES",
                self.max_bytes.as_deref(),
            ),
            (
                "stats-digests",
                "stats.digests",
                "STATS_DIGESTS",
                self.stats_digests.as_deref(),
            ),
            (
                "admin-listen",
                "admin.listen",
                "ADMIN_LISTEN",
                self.admin_listen.as_deref(),
            ),
            (
                "log-format",
                "log.format",
                "LOG_FORMAT",
                self.log_format.as_deref(),
            ),
            (
                "log-level",
                "log.level",
                "LOG_LEVEL",
                self.log_level.as_deref(),
            ),
            (
                "server-id",
                "invalidation.server_id",
                "SERVER_ID",
                self.server_id.as_deref(),
            ),
            (
                "invalidation-password",
                "invalidation.password",
                "INVALIDATION_PASSWORD",
                self.invalidation_password.as_ref().map(|s| s.0.as_str()),
            ),
            (
                "tls-cert",
                "tls.client.cert",
                "TLS_CERT",
                self.tls_cert.as_deref(),
            ),
            (
                "tls-key",
                "tls.client.key",
                "TLS_KEY",
                self.tls_key.as_deref(),
            ),
            (
                "compress-upstream",
                "compression.upstream",
                "COMPRESS_UPSTREAM",
                self.compress_upstream.as_deref(),
            ),
        ]
    }

    /// The named flags of `[l2]`, as [`Cli::core_flags`].
    fn l2_flags(&self) -> Vec<NamedFlag<'_>> {
        vec![
            ("l2-mode", "l2.mode", "L2_MODE", self.l2_mode.as_deref()),
            (
                "l2-url",
                "l2.url",
                "L2_URL",
                self.l2_url.as_ref().map(|s| s.0.as_str()),
            ),
            (
                "l2-validate-hits",
                "l2.validate_hits",
                "L2_VALIDATE_HITS",
                self.l2_validate_hits.as_deref(),
            ),
            (
                "l2-timeout",
                "l2.timeout",
                "L2_TIMEOUT",
                self.l2_timeout.as_deref(),
            ),
            ("l2-ttl", "l2.ttl", "L2_TTL", self.l2_ttl.as_deref()),
            (
                "l2-max-entry-bytes",
                "l2.max_entry_bytes",
                "L2_MAX_ENTRY_BYTES",
                self.l2_max_entry_bytes.as_deref(),
            ),
            (
                "l2-key-prefix",
                "l2.key_prefix",
                "L2_KEY_PREFIX",
                self.l2_key_prefix.as_deref(),
            ),
            ("l2-lease", "l2.lease", "L2_LEASE", self.l2_lease.as_deref()),
            (
                "l2-tls-ca",
                "l2.tls_ca",
                "L2_TLS_CA",
                self.l2_tls_ca.as_deref(),
            ),
            (
                "l2-tls-cert",
                "l2.tls_cert",
                "L2_TLS_CERT",
                self.l2_tls_cert.as_deref(),
            ),
            (
                "l2-tls-key",
                "l2.tls_key",
                "L2_TLS_KEY",
                self.l2_tls_key.as_deref(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("qcache").chain(args.iter().copied()))
    }

    /// Every named flag sets a real key, under the variable its flag name spells
    /// (`--l2-key-prefix` → `QCACHE_L2_KEY_PREFIX`), except where an older name was kept.
    #[test]
    fn named_flags_alias_real_keys() {
        let cli = parse(&[]).unwrap();
        let keys = crate::config::keys();
        let flags: Vec<_> = cli.core_flags().into_iter().chain(cli.l2_flags()).collect();
        assert!(flags.len() > 25, "{}", flags.len());
        let mut vars = std::collections::HashSet::new();
        for (flag, key, var, given) in flags {
            assert!(keys.iter().any(|k| k == key), "--{flag}: no key {key}");
            assert!(vars.insert(var), "QCACHE_{var} twice");
            assert_eq!(given, None, "--{flag} given without being passed");
        }
    }

    /// A named flag given becomes a setting of its key, naming the flag and its variable
    /// for errors; flags not given set nothing.
    #[test]
    fn given_flags_become_settings() {
        let cli = parse(&["--upstream", "db:3306", "--max-bytes", "64MiB"]).unwrap();
        let named = cli.named();
        let got: Vec<(&str, &str, &str)> = named
            .iter()
            .map(|s| (s.key.as_str(), s.raw.as_str(), s.source.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "server.upstream",
                    "db:3306",
                    "--upstream (or QCACHE_UPSTREAM)"
                ),
                (
                    "cache.max_bytes",
                    "64MiB",
                    "--max-bytes (or QCACHE_MAX_BYTES)"
                ),
            ]
        );
    }

    /// Words once read in any case are folded to the file's spelling before the check.
    #[test]
    fn word_flags_fold_their_case() {
        for (args, key, want) in [
            (
                ["--query-cache-type", "demand"],
                "cache.query_cache_type",
                "DEMAND",
            ),
            (["--log-format", " JSON "], "log.format", "json"),
            (
                ["--compress-upstream", "Zstd"],
                "compression.upstream",
                "zstd",
            ),
            (["--l2-mode", "ON"], "l2.mode", "on"),
        ] {
            let cli = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let named = cli.named();
            let s = named.iter().find(|s| s.key == key).expect(key);
            assert_eq!(s.raw, want, "{args:?}");
        }
    }

    /// A bad value is refused while the command line is parsed, not later.
    #[test]
    fn bad_flag_values_are_refused_at_parse() {
        for args in [
            ["--workers", "many"],
            ["--max-bytes", "lots"],
            ["--defer-begin", "perhaps"],
            ["--query-cache-type", "sometimes"],
            ["--l2-timeout", "soon"],
        ] {
            assert!(parse(&args).is_err(), "{args:?}");
        }
    }

    /// `--set` repeats and keeps its order (the last one wins when layered).
    #[test]
    fn sets_repeat_in_order() {
        let cli = parse(&["--set", "cache.ttl=1m", "--set", "cache.ttl=2m"]).unwrap();
        assert_eq!(cli.set, ["cache.ttl=1m", "cache.ttl=2m"]);
        let c = crate::config::layered(None, [], &cli.set).unwrap();
        assert_eq!(c.cache.ttl, Some(std::time::Duration::from_secs(120)));
    }

    /// check-consistency: the first target is the target, the rest (repeated or comma
    /// separated) check a fleet.
    #[test]
    fn consistency_check_targets() {
        let cli = parse(&[
            "check-consistency",
            "--target",
            "a:1,b:2",
            "--target",
            "c:3",
            "--seed",
            "9",
        ])
        .unwrap();
        let Some(Command::CheckConsistency(args)) = cli.command else {
            panic!("not check-consistency");
        };
        let o = args.options();
        assert_eq!(o.target, "a:1");
        assert_eq!(o.more_targets, ["b:2", "c:3"]);
        assert_eq!(o.seed, 9);
        assert_eq!(o.user, "root");
        assert!(
            parse(&["check-consistency"]).is_err(),
            "a target is required"
        );
    }
}
