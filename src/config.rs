//! Configuration: the TOML schema with its defaults and validation; `layers` lays variables
//! and flags over it.
//!
//! Every key here is documented, with its default, in `config/qcache.toml`; unknown keys are
//! errors so that a typo never silently falls back to a default.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod layers;
pub use layers::{checked, env_name, keys, layered, layered_with, Setting};

/// Longest path a `sockaddr_un` holds on Linux, without its terminating NUL: the limit of
/// `server.socket`.
pub const MAX_SOCKET_PATH: usize = 107;

/// Why a configuration could not be used. Each message is one line that says what is wrong,
/// where, and how to fix it: the binary prints it as is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source} (check the path given by --config or QCACHE_CONFIG)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}{at}: {message} (every key is documented in config/qcache.toml)")]
    Parse {
        path: String,
        /// `, line L, column C` when the parser knows where; empty otherwise.
        at: String,
        message: String,
    },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub cache: CacheConfig,
    pub invalidation: InvalidationConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    /// Operator rules, first match wins (see `rules`); none by default.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::rules::Rule>,
    pub tls: TlsConfig,
    pub compression: CompressionConfig,
    /// The shared second-level cache in Redis/Valkey (docs/fleet.md); off by default.
    pub l2: L2Config,
    /// Statistics beyond the global counters.
    pub stats: StatsConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// Statement shapes (digest and schema) with their own row in `SHOW QCACHE DIGESTS` and
    /// `/digests`, the most-called kept, the rest counted together as "other"; 0 turns
    /// per-digest counting off. A reload applies a new value.
    pub digests: usize,
}

/// Beyond this many rows a digest table is no longer something an operator reads, and each
/// session thread may hold twice as many.
pub const MAX_DIGESTS: usize = 100_000;

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig { digests: 1000 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where clients connect over TCP; empty: no TCP listener (then `socket` is required).
    pub listen: String,
    /// A Unix socket clients on the same host connect to, alongside TCP or instead of it
    /// (as mysqld's `--socket`); empty: none.
    pub socket: String,
    /// The MySQL/MariaDB server every session is relayed to.
    pub upstream: String,
    /// Client connections accepted at once; one more gets ERR 1040.
    pub max_connections: usize,
    /// Connections the kernel queues for accept. MySQL's server speaks first, so a client
    /// whose connect overflowed a full queue (with SYN cookies it still sees the connection
    /// established) waits for a greeting that never comes: a burst of connects needs room.
    pub listen_backlog: u32,
    /// Threads that run sessions; 0 means one per core this process may use (affinity and
    /// cgroup CPU quota respected). A sidecar sharing its pod's cores may want fewer.
    pub workers: usize,
    /// How sessions are given to those threads: `load` or `round-robin`.
    pub placement: Placement,
    /// Largest packet a client may send before it has authenticated.
    #[serde(deserialize_with = "size::deserialize")]
    pub pre_auth_max_packet: usize,
    /// Time a client has to complete the handshake and authentication.
    #[serde(with = "humantime_serde")]
    pub auth_timeout: Duration,
    /// Time to open the TCP connection to the upstream and read its greeting.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// A client that does not take a write for this long is disconnected, so that a stalled
    /// reader cannot hold an upstream connection forever.
    #[serde(with = "humantime_serde")]
    pub client_write_timeout: Duration,
    /// On SIGTERM, how long sessions may finish their current command or transaction.
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// Answer a plain BEGIN outside a transaction in qcache and send it upstream with the
    /// transaction's first statement (`session/begin.rs`).
    pub defer_begin: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:3307".into(),
            socket: String::new(),
            upstream: "127.0.0.1:3306".into(),
            max_connections: 4096,
            listen_backlog: 1024,
            workers: 0,
            placement: Placement::Load,
            pre_auth_max_packet: 64 * 1024,
            auth_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            client_write_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            defer_begin: true,
        }
    }
}

/// MySQL's `query_cache_type`: OFF (0), ON (1), DEMAND (2).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum QueryCacheType {
    #[serde(alias = "off", alias = "0")]
    #[serde(rename = "OFF")]
    Off,
    #[serde(alias = "on", alias = "1")]
    #[serde(rename = "ON")]
    #[default]
    On,
    #[serde(alias = "demand", alias = "2")]
    #[serde(rename = "DEMAND")]
    Demand,
}

impl QueryCacheType {
    pub fn as_str(self) -> &'static str {
        match self {
            QueryCacheType::Off => "OFF",
            QueryCacheType::On => "ON",
            QueryCacheType::Demand => "DEMAND",
        }
    }

    /// Parses the values MySQL accepts for `query_cache_type`, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "OFF" | "0" => Some(QueryCacheType::Off),
            "ON" | "1" => Some(QueryCacheType::On),
            "DEMAND" | "2" => Some(QueryCacheType::Demand),
            _ => None,
        }
    }
}

impl std::str::FromStr for QueryCacheType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        QueryCacheType::parse(s).ok_or_else(|| format!("expected OFF, ON or DEMAND, got {s:?}"))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Default `query_cache_type` of new sessions.
    pub query_cache_type: QueryCacheType,
    /// Total bytes of cached results (and their bookkeeping) before eviction.
    #[serde(deserialize_with = "size::deserialize")]
    pub max_bytes: u64,
    /// Largest single result stored, like MySQL's `query_cache_limit`.
    #[serde(deserialize_with = "size::deserialize")]
    pub max_result_bytes: usize,
    /// Optional upper bound on an entry's age, on top of invalidation.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// When true the user name is left out of the key: all users share entries.
    pub shared_between_users: bool,
    /// How long a session waits for another session already filling the same key.
    #[serde(with = "humantime_serde")]
    pub stampede_timeout: Duration,
    /// Distinct statement shapes whose analysis is remembered, (shape, database) pairs
    /// whose resolved tables are, and statements whose slice plans are.
    pub analysis_memo_entries: usize,
    /// Cached `COUNT`/`SUM`/`MIN`/`MAX` results of one table are patched from the rows of an
    /// autocommit `INSERT … VALUES` through qcache instead of invalidated (`policy::patch`).
    pub patch_aggregates: bool,
    /// Share of the server time its patches saved (misses they kept from happening) that
    /// a statement shape's verification may spend re-reading patched entries from the
    /// server in the background and comparing them (`policy::verify`: a shape's first
    /// patches are verified in advance, and a shape verified clean many times spends less);
    /// 0 verifies none, 1 every patch. A difference drops the entry and turns patching off
    /// for its statement shape.
    pub verify_patched: f64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            query_cache_type: QueryCacheType::On,
            max_bytes: 256 * 1024 * 1024,
            max_result_bytes: 1024 * 1024,
            ttl: None,
            shared_between_users: false,
            stampede_timeout: Duration::from_secs(2),
            analysis_memo_entries: 16 * 1024,
            patch_aggregates: false,
            verify_patched: 0.05,
        }
    }
}

/// What a write that qcache cannot analyse precisely invalidates.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Conservative {
    /// Every table of the session's default schema.
    Schema,
    /// The whole cache.
    #[default]
    All,
}

pub use crate::workers::Placement;

/// How finely writes invalidate (`invalidation.granularity`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// Entries that read only rows where a column equals constants depend on those row
    /// slices; writes whose rows qcache can name bump only their slices.
    #[default]
    Row,
    /// Every write invalidates every entry of its tables.
    Table,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BinlogMode {
    #[default]
    Auto,
    On,
    Off,
}

#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct InvalidationConfig {
    /// Unparsable or unknown writes invalidate this much.
    pub unknown_write: Conservative,
    /// `CALL` (and SQL-level `EXECUTE`) invalidate this much.
    pub call: Conservative,
    /// Row-slice or table invalidation.
    pub granularity: Granularity,
    /// With row granularity: a read joining a child table on a parent's primary key, the
    /// parent pinned by constants, depends on the derived slices of the child
    /// (`cache::fkmap`).
    pub derived_slices: bool,
    /// Most parent-row mappings (pk → pinned column's value) held for the binlog's child row
    /// events; 0 learns none (those then bump every derived slice of their table).
    pub parent_map_entries: u64,
    /// A child write through qcache asks the server for its rows' parent values (`SELECT
    /// pk, col … WHERE pk IN (…)` on qcache's own connection) before its OK; false: it bumps
    /// every derived slice of its table.
    pub derived_lookups: bool,
    /// Declares that every write to a parent table goes through this instance (no direct
    /// writes, no other instances): a child write's parent lookup is then sent beside the
    /// write instead of after its answer (`engine::fkslices::timing`). Ignored while a
    /// binlog tail runs or L2 is on: those exist to see writes from elsewhere.
    pub derived_lookups_with_write: bool,
    /// A child write's OK goes to the client as soon as the server's arrives; its parent
    /// lookup runs after, while the derived slices it asks are pending (no entry stamping
    /// them is served until their bumps are made: `engine::fkslices::timing`). Ignored with
    /// L2 on (other instances cannot see a pending mark) and inside transactions.
    pub derived_lookups_deferred: bool,
    /// Tail the server's binlog to see writes that bypass qcache.
    pub binlog: BinlogMode,
    /// server_id qcache uses when it registers as a replica; 0 picks a random one at start,
    /// so that sidecars sharing one config never evict each other's binlog streams.
    pub server_id: u32,
    /// Credentials for the binlog tail and the schema catalog (never the application's).
    pub user: String,
    pub password: String,
    /// While the binlog stream has been down this long, hits stop (misses still work).
    #[serde(with = "humantime_serde")]
    pub max_lag: Duration,
}

/// By hand, so that a `{:?}` of the config (a log line, a panic message) never shows the
/// password.
impl std::fmt::Debug for InvalidationConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvalidationConfig")
            .field("unknown_write", &self.unknown_write)
            .field("call", &self.call)
            .field("granularity", &self.granularity)
            .field("derived_slices", &self.derived_slices)
            .field("parent_map_entries", &self.parent_map_entries)
            .field("derived_lookups", &self.derived_lookups)
            .field(
                "derived_lookups_with_write",
                &self.derived_lookups_with_write,
            )
            .field("derived_lookups_deferred", &self.derived_lookups_deferred)
            .field("binlog", &self.binlog)
            .field("server_id", &self.server_id)
            .field("user", &self.user)
            .field("password", &redact_secret(&self.password))
            .field("max_lag", &self.max_lag)
            .finish()
    }
}

/// `invalidation.parent_map_entries` by default: parent rows remembered for derived slices.
pub const DEFAULT_PARENT_MAP_ENTRIES: u64 = 200_000;

impl Default for InvalidationConfig {
    fn default() -> Self {
        InvalidationConfig {
            unknown_write: Conservative::All,
            call: Conservative::All,
            granularity: Granularity::default(),
            derived_slices: true,
            parent_map_entries: DEFAULT_PARENT_MAP_ENTRIES,
            derived_lookups: true,
            derived_lookups_with_write: false,
            derived_lookups_deferred: true,
            binlog: BinlogMode::Auto,
            server_id: 0,
            user: "root".into(),
            password: String::new(),
            max_lag: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// HTTP endpoint for /metrics, /healthz, /readyz, /cache; empty disables it.
    pub listen: String,
    /// Users allowed to run the privileged admin statements (all but `SHOW QCACHE STATUS`)
    /// besides those holding RELOAD.
    #[serde(deserialize_with = "comma_list::deserialize")]
    pub users: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: "127.0.0.1:9307".into(),
            users: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing filter directive, e.g. `info` or `qcache=debug`.
    pub level: String,
    /// Misses slower than this are logged at info with their digest; unset: off.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub slow_miss: Option<Duration>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
            slow_miss: None,
        }
    }
}

impl InvalidationConfig {
    /// The configured server_id, or a random one in a range replicas rarely use.
    pub fn effective_server_id(&self) -> u32 {
        if self.server_id != 0 {
            return self.server_id;
        }
        (1 << 30) | (random_id() as u32 & 0x3fff_ffff)
    }
}

/// 64 random bits for what qcache names at start (a random server_id, the L2 instance id,
/// the binlog tail's witness lock): the standard library's randomly keyed hasher over the
/// time and the process id.
pub fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Protocol compression on the two legs, each independent of the other. The cache always
/// holds plain packets, so compressed and plain clients share entries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Algorithms offered to clients; a client compresses only if it asks.
    #[serde(deserialize_with = "comma_list::deserialize")]
    pub client: Vec<crate::protocol::compress::Algorithm>,
    /// Compression toward the server.
    pub upstream: UpstreamCompression,
    /// zlib level (0–9) for frames qcache compresses with zlib, on either leg.
    pub zlib_level: u32,
    /// zstd level (1–22) toward the server; toward a client, the level it asked for.
    pub zstd_level: i32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        use crate::protocol::compress::Algorithm;
        CompressionConfig {
            client: vec![Algorithm::Zlib, Algorithm::Zstd],
            upstream: UpstreamCompression::Off,
            zlib_level: 6,
            zstd_level: 3,
        }
    }
}

impl CompressionConfig {
    /// What the client leg compresses with: the client's pick (`client_caps`) among what
    /// qcache offered (`offer`). A client that sets both bits gets zlib, as MySQL's server
    /// decides; a zstd client that sends no level gets MySQL's client default, 3.
    pub fn client_codec(
        &self,
        client_caps: u32,
        offer: u32,
        zstd_level: Option<u8>,
    ) -> Option<crate::protocol::compress::Codec> {
        use crate::protocol::compress::{Algorithm, Codec};
        use crate::protocol::packets::cap;
        let asked = client_caps & offer;
        if asked & cap::COMPRESS != 0 {
            Some(Codec::new(Algorithm::Zlib, self.zlib_level as i32))
        } else if asked & cap::ZSTD_COMPRESSION != 0 {
            let level = zstd_level.map_or(3, i32::from);
            Some(Codec::new(Algorithm::Zstd, level))
        } else {
            None
        }
    }

    /// What the upstream leg compresses with, out of what the server offers (`server_caps`)
    /// and `upstream` allows.
    pub fn upstream_codec(&self, server_caps: u32) -> Option<crate::protocol::compress::Codec> {
        use crate::protocol::compress::{Algorithm, Codec};
        use crate::protocol::packets::cap;
        let zlib = server_caps & cap::COMPRESS != 0;
        let zstd = server_caps & cap::ZSTD_COMPRESSION != 0;
        let alg = match self.upstream {
            UpstreamCompression::Off => None,
            UpstreamCompression::Zlib => zlib.then_some(Algorithm::Zlib),
            UpstreamCompression::Zstd => zstd.then_some(Algorithm::Zstd),
            UpstreamCompression::Auto if zstd => Some(Algorithm::Zstd),
            UpstreamCompression::Auto => zlib.then_some(Algorithm::Zlib),
        }?;
        let level = match alg {
            Algorithm::Zlib => self.zlib_level as i32,
            Algorithm::Zstd => self.zstd_level,
        };
        Some(Codec::new(alg, level))
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamCompression {
    /// Never (the default: on loopback or a sidecar, compression only costs CPU).
    #[default]
    Off,
    /// zlib when the server offers it, else none.
    Zlib,
    /// zstd when the server offers it, else none.
    Zstd,
    /// zstd when offered, else zlib when offered, else none.
    Auto,
}

impl std::str::FromStr for UpstreamCompression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(UpstreamCompression::Off),
            "zlib" => Ok(UpstreamCompression::Zlib),
            "zstd" => Ok(UpstreamCompression::Zstd),
            "auto" => Ok(UpstreamCompression::Auto),
            _ => Err(format!("expected off, zlib, zstd or auto, got {s:?}")),
        }
    }
}

/// The `[tls]` section is defined beside the contexts built from it, so that `tls` needs
/// nothing from here and `validate` can build them (one arrow, config → tls).
pub use crate::tls::{ClientTlsConfig, TlsConfig, UpstreamTlsConfig, UpstreamTlsMode};

impl Config {
    /// Parses TOML text; unknown keys are reported with their name.
    pub fn from_toml(text: &str, path: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_string(),
            at: e
                .span()
                .map(|s| {
                    let (line, column) = line_column(text, s.start);
                    // The line itself names the key, which a type error's message does not.
                    let quoted = text.lines().nth(line - 1).unwrap_or("").trim();
                    let quoted: String = quoted.chars().take(80).collect();
                    format!(", line {line}, column {column} ({quoted})")
                })
                .unwrap_or_default(),
            // The parser's own rendering quotes the line with a caret under it over several
            // lines; the operator gets one line, and the position above.
            message: one_line(e.message()),
        })?;
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Config::from_toml(&text, &path.display().to_string())
    }

    /// Checks what serde cannot: addresses resolve, sizes are sane.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if !(0.0..=1.0).contains(&self.cache.verify_patched) {
            return bad("cache.verify_patched must be a share from 0 to 1".into());
        }
        if self.compression.zlib_level > 9 {
            return bad("compression.zlib_level must be 0 to 9".into());
        }
        if !(1..=22).contains(&self.compression.zstd_level) {
            return bad("compression.zstd_level must be 1 to 22".into());
        }
        if !self.server.listen.is_empty() && self.server.listen.parse::<SocketAddr>().is_err() {
            return bad(format!(
                "server.listen {:?} is not an IP:port address",
                self.server.listen
            ));
        }
        if self.server.listen.is_empty() && self.server.socket.is_empty() {
            return bad(
                "server.listen and server.socket are both empty: set at least one, or clients \
                 have nowhere to connect"
                    .into(),
            );
        }
        if self.server.socket.len() > MAX_SOCKET_PATH {
            return bad(format!(
                "server.socket {:?} is {} bytes long; a Unix socket path may have at most {}",
                self.server.socket,
                self.server.socket.len(),
                MAX_SOCKET_PATH
            ));
        }
        if let Err(why) = check_host_port(&self.server.upstream) {
            return bad(format!(
                "server.upstream {:?} {why}: expected host:port, e.g. 127.0.0.1:3306",
                self.server.upstream
            ));
        }
        if !self.admin.listen.is_empty() && self.admin.listen.parse::<SocketAddr>().is_err() {
            return bad(format!(
                "admin.listen {:?} is not an IP:port address",
                self.admin.listen
            ));
        }
        if self.server.max_connections == 0 {
            return bad("server.max_connections must be at least 1".into());
        }
        if self.server.listen_backlog == 0 {
            return bad("server.listen_backlog must be at least 1".into());
        }
        // Each is an OS thread with its own event loop; beyond the cores they only add
        // wake-ups, and a typo such as 10000 should not start ten thousand threads.
        if self.server.workers > 1024 {
            return bad(format!(
                "server.workers = {} is more than 1024",
                self.server.workers
            ));
        }
        if self.server.pre_auth_max_packet < 1024 {
            return bad("server.pre_auth_max_packet must be at least 1024".into());
        }
        if self.cache.max_result_bytes as u64 > self.cache.max_bytes {
            return bad("cache.max_result_bytes is larger than cache.max_bytes".into());
        }
        if self.stats.digests > MAX_DIGESTS {
            return bad(format!(
                "stats.digests = {} is more than {MAX_DIGESTS}",
                self.stats.digests
            ));
        }
        if self.cache.analysis_memo_entries == 0 {
            return bad("cache.analysis_memo_entries must be at least 1".into());
        }
        if let Err(e) = crate::tls::Contexts::build(&self.tls) {
            return bad(e.to_string());
        }
        self.l2.validate()?;
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return bad(format!(
                "log.level {:?} is not a valid filter",
                self.log.level
            ));
        }
        Ok(())
    }

    /// A copy safe to print or log: passwords and URL credentials replaced by
    /// [`REDACTED`] (`print-config`).
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        c.invalidation.password = redact_secret(&c.invalidation.password).to_string();
        c.l2.url = match &c.l2.url {
            L2Url::One(u) => L2Url::One(redact(u)),
            L2Url::Cluster(v) => L2Url::Cluster(v.iter().map(|u| redact(u)).collect()),
        };
        c
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot print config: {e}\n"))
    }
}

/// A byte size as the file, variables and flags write it: a plain number of bytes, or a
/// number with a unit, `KB`/`MB`/`GB`/`TB` (powers of 1000), `KiB`/`MiB`/`GiB`/`TiB` (powers of
/// 1024), or `K`/`M`/`G`/`T` as MySQL's option files read them (powers of 1024). Units are
/// case-insensitive; a space before one is allowed.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 268435456, 256MB or 1GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000_u64.pow(2),
        "gb" => 1000_u64.pow(3),
        "tb" => 1000_u64.pow(4),
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit {u:?} in {s:?} (B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A duration as the file, variables and flags write it (`50ms`, `10s`, `1m30s`, `1h`):
/// humantime's syntax, the one `humantime_serde` reads in the file.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{s:?} is not a duration like 50ms, 10s or 1m30s: {e}"))
}

/// Serde for size keys: an integer of bytes, or a string [`parse_size`] reads. Written back
/// as the integer.
mod size {
    use serde::de::{Deserializer, Error, Visitor};

    pub fn deserialize<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<u64>,
    {
        struct V;
        impl Visitor<'_> for V {
            type Value = u64;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size: bytes, or a string like \"256MB\" or \"1GiB\"")
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<u64, E> {
                Ok(v)
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<u64, E> {
                u64::try_from(v).map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<u64, E> {
                super::parse_size(v).map_err(E::custom)
            }
        }
        let n = d.deserialize_any(V)?;
        T::try_from(n).map_err(|_| D::Error::custom(format!("{n} is too large")))
    }
}

/// What a secret prints as.
pub const REDACTED: &str = "<redacted>";

/// A password as it may be printed: empty stays empty (that no password is set is worth
/// seeing), anything else is [`REDACTED`].
pub fn redact_secret(secret: &str) -> &'static str {
    if secret.is_empty() {
        ""
    } else {
        REDACTED
    }
}

/// `text` with the credentials of every URL in it (`scheme://user:password@host…`) replaced:
/// the password by [`REDACTED`], and a userinfo without a colon whole (Redis reads
/// `redis://secret@host` as a password in some clients). The one redaction every printed
/// URL and message goes through.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the path, query, fragment, or anything that cannot be in it.
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..=colon]);
                        out.push_str(REDACTED);
                    }
                    None => out.push_str(REDACTED),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A flag's value that may hold a secret (a password, a URL with credentials): `{:?}` of
/// the command line shows it redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", redact(redact_secret_or_url(&self.0)))
    }
}

/// A URL keeps its shape with its credentials hidden; anything else is a bare secret.
fn redact_secret_or_url(s: &str) -> &str {
    if s.contains("://") {
        s
    } else {
        redact_secret(s)
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// Why `addr` is not `host:port` (an IPv6 address in brackets), if it is not: caught by
/// `check-config` rather than by every session's failed connect.
fn check_host_port(addr: &str) -> Result<(), &'static str> {
    let (host, port) = addr.rsplit_once(':').ok_or("has no port")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err("has no host");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err("has no valid port"),
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Joins a message's lines with "; " so that it prints as one line.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the second-level cache is used.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum L2Mode {
    #[default]
    Off,
    On,
}

/// How much a hit trusts local knowledge of table versions.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ValidateHits {
    /// Hits are judged by this instance's versions (its writes, its binlog tail, and the
    /// bumps other instances publish): no round trip on an L1 hit.
    #[default]
    Local,
    /// Every hit first reads its tables' versions from L2 (one round trip).
    Remote,
}

impl std::str::FromStr for L2Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(L2Mode::Off),
            "on" => Ok(L2Mode::On),
            _ => Err(format!("expected off or on, got {s:?}")),
        }
    }
}

impl std::str::FromStr for ValidateHits {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(ValidateHits::Local),
            "remote" => Ok(ValidateHits::Remote),
            _ => Err(format!("expected local or remote, got {s:?}")),
        }
    }
}

/// `url`: one address (standalone) or a list (cluster seed nodes): a TOML list, or one
/// string with commas between the nodes (as a variable or a flag gives it).
#[derive(Clone, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum L2Url {
    One(String),
    Cluster(Vec<String>),
}

impl<'de> Deserialize<'de> for L2Url {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = L2Url;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a URL, a list of URLs, or URLs separated by commas")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<L2Url, E> {
                Ok(if s.contains(',') {
                    L2Url::parse_flag(s)
                } else {
                    L2Url::One(s.to_string())
                })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<L2Url, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(L2Url::Cluster)
            }
        }
        d.deserialize_any(V)
    }
}

/// A list: in TOML, or one string with commas between its items (how a variable or a flag
/// writes it), so that each source reads a list the same way.
mod comma_list {
    use std::marker::PhantomData;

    use serde::de::{value::StrDeserializer, Deserialize, Deserializer, Error, SeqAccess, Visitor};

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list, or items separated by commas")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(out)
            }
            fn visit_str<E: Error>(self, s: &str) -> Result<Vec<T>, E> {
                s.split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| T::deserialize(StrDeserializer::<E>::new(item)))
                    .collect()
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// By hand: a URL may carry Redis credentials.
impl std::fmt::Debug for L2Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            L2Url::One(u) => f.debug_tuple("One").field(&redact(u)).finish(),
            L2Url::Cluster(v) => f
                .debug_tuple("Cluster")
                .field(&v.iter().map(|u| redact(u)).collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl Default for L2Url {
    fn default() -> Self {
        L2Url::One("redis://127.0.0.1:6379".into())
    }
}

impl L2Url {
    /// From a flag or environment variable: commas separate cluster nodes.
    pub fn parse_flag(s: &str) -> L2Url {
        let parts: Vec<String> = s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        match parts.as_slice() {
            [one] if !s.contains(',') => L2Url::One(one.clone()),
            _ => L2Url::Cluster(parts),
        }
    }

    pub fn nodes(&self) -> Vec<&str> {
        match self {
            L2Url::One(u) => vec![u.as_str()],
            L2Url::Cluster(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct L2Config {
    /// `off` (default) or `on`.
    pub mode: L2Mode,
    /// `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS); a list means a cluster.
    pub url: L2Url,
    /// Results larger than this are kept in L1 only.
    #[serde(deserialize_with = "size::deserialize")]
    pub max_entry_bytes: usize,
    /// Upper bound on an entry's life in Redis, so abandoned entries go.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Longest wait for any L2 round trip; a slower L2 is skipped (and marked down).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Prefix of every key and of the notification channel; fleets sharing one Redis
    /// for different databases need different prefixes.
    pub key_prefix: String,
    /// `local` (default) or `remote`: see [`ValidateHits`].
    pub validate_hits: ValidateHits,
    /// PEM CA certificates that `rediss://` servers must chain to; empty: the system's roots.
    pub tls_ca: String,
    /// PEM client certificate (chain) shown to a `rediss://` server that asks for one
    /// (`tls-auth-clients yes`); with `tls_key`. Empty: none.
    pub tls_cert: String,
    /// PEM private key of `tls_cert`.
    pub tls_key: String,
    /// Cross-instance single flight: how long a fill lease lasts, and so how long another
    /// instance waits for its result before filling itself. 0 turns leases off.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How many instances of the fleet stream the binlog at once, chosen by a lease in Redis
    /// (docs/fleet.md, "A few tails for a fleet"); the others learn each commit's bumps from
    /// the bump channel. 0: every instance with a binlog tail streams (as before).
    pub binlog_tails: u32,
    /// Test-only: serve L2 entries without checking their versions (a deliberately broken
    /// setup that `check-consistency` must catch). Not settable from a file.
    #[serde(skip)]
    pub unsafe_skip_version_check: bool,
}

impl Default for L2Config {
    fn default() -> Self {
        L2Config {
            mode: L2Mode::Off,
            url: L2Url::default(),
            max_entry_bytes: 1024 * 1024,
            ttl: Duration::from_secs(600),
            timeout: Duration::from_millis(50),
            key_prefix: "qcache:".into(),
            validate_hits: ValidateHits::Local,
            tls_ca: String::new(),
            tls_cert: String::new(),
            tls_key: String::new(),
            lease: Duration::from_millis(200),
            // Two, so that one can fail without the fleet going blind for a takeover.
            binlog_tails: 2,
            unsafe_skip_version_check: false,
        }
    }
}

impl L2Config {
    pub fn enabled(&self) -> bool {
        self.mode == L2Mode::On
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let nodes = self.url.nodes();
        if nodes.is_empty() {
            return bad("l2.url names no node".into());
        }
        for n in nodes {
            if !(n.starts_with("redis://") || n.starts_with("rediss://")) {
                return bad(format!(
                    "l2.url {:?} must start with redis:// or rediss://",
                    redact(n)
                ));
            }
            if redis::Client::open(n).is_err() {
                return bad(format!("l2.url {:?} is not a valid Redis URL", redact(n)));
            }
        }
        if self.timeout.is_zero() {
            return bad("l2.timeout must be more than 0".into());
        }
        if self.ttl < Duration::from_secs(1) {
            return bad("l2.ttl must be at least 1s".into());
        }
        for (key, path) in [
            ("tls_ca", &self.tls_ca),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
        ] {
            if !path.is_empty() && std::fs::metadata(path).is_err() {
                return bad(format!("l2.{key} {path:?} cannot be read"));
            }
        }
        if self.tls_cert.is_empty() != self.tls_key.is_empty() {
            return bad("l2.tls_cert and l2.tls_key go together".into());
        }
        // A client certificate is only ever shown over TLS: a plain URL beside one is a
        // mistake that would otherwise go unnoticed until Redis refused the connection.
        if !self.tls_cert.is_empty() && self.url.nodes().iter().any(|n| !n.starts_with("rediss://"))
        {
            return bad("l2.tls_cert needs rediss:// in every l2.url".into());
        }
        if self.max_entry_bytes == 0 {
            return bad("l2.max_entry_bytes must be at least 1".into());
        }
        if self.key_prefix.is_empty() || self.key_prefix.len() > 64 {
            return bad("l2.key_prefix must be 1 to 64 bytes".into());
        }
        if self.binlog_tails > 64 {
            return bad("l2.binlog_tails must be 0 to 64".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_url_forms() {
        let c = Config::from_toml(
            "[l2]\nmode = \"on\"\nurl = [\"redis://a:1\", \"redis://b:2\"]\nvalidate_hits = \"remote\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(c.l2.url.nodes(), vec!["redis://a:1", "redis://b:2"]);
        assert_eq!(c.l2.validate_hits, ValidateHits::Remote);
        c.validate().unwrap();
        assert_eq!(
            L2Url::parse_flag("redis://x:1"),
            L2Url::One("redis://x:1".into())
        );
        assert_eq!(
            L2Url::parse_flag("redis://x:1,redis://y:2").nodes().len(),
            2
        );
        let mut c = Config::default();
        c.l2.url = L2Url::One("http://x".into());
        assert!(c.validate().unwrap_err().to_string().contains("l2.url"));
        // A client certificate needs its key, files that exist, and TLS.
        let pem = std::env::temp_dir().join(format!("qcache-l2-cfg-{}.pem", std::process::id()));
        std::fs::write(&pem, "x").unwrap();
        let pem = pem.to_string_lossy().into_owned();
        c.l2.url = L2Url::One("rediss://x:1".into());
        c.l2.tls_cert = pem.clone();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("go together"));
        c.l2.tls_key = pem.clone();
        assert!(c.validate().is_ok());
        c.l2.url = L2Url::One("redis://x:1".into());
        assert!(c.validate().unwrap_err().to_string().contains("rediss://"));
        c.l2.url = L2Url::One("rediss://x:1".into());
        c.l2.tls_key = "/nonexistent/key.pem".into();
        assert!(c.validate().unwrap_err().to_string().contains("l2.tls_key"));
        let _ = std::fs::remove_file(&pem);
    }

    /// One row per shape: what a URL or message prints as.
    #[test]
    fn redaction_hides_credentials_only() {
        let cases = [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://u:s3cret@h:1/0", "redis://u:<redacted>@h:1/0"),
            ("rediss://:s3cret@h:1", "rediss://:<redacted>@h:1"),
            ("redis://s3cret@h", "redis://<redacted>@h"),
            ("redis://u:p@ss@h:1", "redis://u:<redacted>@h:1"),
            (
                "l2.url \"redis://u:s3cret@h:1\" bad; and redis://:x@y too",
                "l2.url \"redis://u:<redacted>@h:1\" bad; and redis://:<redacted>@y too",
            ),
            ("no url here", "no url here"),
            ("mysql://root@h/db?x=a@b", "mysql://<redacted>@h/db?x=a@b"),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
        assert_eq!(redact_secret(""), "");
        assert_eq!(redact_secret("pw"), REDACTED);
    }

    /// print-config and `{:?}` of the config show no secret.
    #[test]
    fn printed_config_and_debug_show_no_secret() {
        let mut c = Config::default();
        c.invalidation.password = "s3cret-pw".into();
        c.l2.url = L2Url::Cluster(vec!["redis://u:s3cret-url@h:1".into()]);
        for printed in [c.redacted().to_toml(), format!("{c:?}"), format!("{c:#?}")] {
            assert!(!printed.contains("s3cret"), "{printed}");
            assert!(printed.contains(REDACTED), "{printed}");
        }
        let mut bad = Config::default();
        bad.l2.url = L2Url::One("http://u:s3cret@h".into());
        let err = bad.validate().unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "{err}");
    }

    /// `check-config` catches an upstream no session could reach.
    #[test]
    fn upstream_must_be_host_and_port() {
        for (addr, ok) in [
            ("127.0.0.1:3306", true),
            ("db.internal:3306", true),
            ("[::1]:3306", true),
            ("nohostport", false),
            ("", false),
            (":3306", false),
            ("db:0", false),
            ("db:port", false),
        ] {
            let mut c = Config::default();
            c.server.upstream = addr.into();
            let r = c.validate();
            assert_eq!(r.is_ok(), ok, "{addr:?}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("server.upstream"), "{e}");
            }
        }
    }

    /// One row per size spelling: the file, variables and flags all read sizes this way.
    #[test]
    fn sizes_and_durations_parse_alike_everywhere() {
        for (text, want) in [
            ("268435456", Some(268_435_456)),
            ("256MB", Some(256_000_000)),
            ("256 MiB", Some(256 << 20)),
            ("1GiB", Some(1 << 30)),
            ("64K", Some(64 << 10)),
            ("1gb", Some(1_000_000_000)),
            ("lots", None),
            ("1.5GB", None),
            ("-1", None),
        ] {
            assert_eq!(parse_size(text).ok(), want, "{text}");
        }
        let c = Config::from_toml(
            "[cache]\nmax_bytes = \"1GiB\"\nttl = \"1m30s\"\n[l2]\nmax_entry_bytes = \"64KiB\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(c.cache.max_bytes, 1 << 30);
        assert_eq!(c.cache.ttl, Some(Duration::from_secs(90)));
        assert_eq!(c.l2.max_entry_bytes, 64 << 10);
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("[cache]\nmax_bytez = 1\n", "x.toml").unwrap_err();
        assert!(err.to_string().contains("max_bytez"), "{err}");
    }

    /// What, where and how to fix, on one line.
    #[test]
    fn parse_errors_are_one_line_with_a_position() {
        let cases = [
            (
                "[cache]\nmax_bytez = 1\n",
                ", line 2, column 1 (max_bytez = 1): unknown field `max_bytez`",
            ),
            (
                "[server]\nlisten = 3307\n",
                ", line 2, column 10 (listen = 3307): invalid type",
            ),
            ("[server\n", ", line 1, column 8 ([server)"),
            (
                "# é\n[cache]\nttl = \"soon\"\n",
                ", line 3, column 7 (ttl = \"soon\")",
            ),
        ];
        for (text, want) in cases {
            let err = Config::from_toml(text, "x.toml").unwrap_err().to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.starts_with("config file x.toml, line"), "{err}");
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.ends_with("config/qcache.toml)"), "{err}");
        }
    }

    #[test]
    fn durations_and_enums_parse() {
        let c = Config::from_toml(
            "[cache]\nttl = \"60s\"\nquery_cache_type = \"DEMAND\"\n[invalidation]\nbinlog = \"off\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(c.cache.ttl, Some(Duration::from_secs(60)));
        assert_eq!(c.cache.query_cache_type, QueryCacheType::Demand);
        assert_eq!(c.invalidation.binlog, BinlogMode::Off);
    }

    #[test]
    fn workers_parse_and_are_bounded() {
        let c = Config::from_toml("[server]\nworkers = 1\n", "x.toml").unwrap();
        assert_eq!(c.server.workers, 1);
        c.validate().unwrap();
        let c = Config::from_toml("[server]\nworkers = 5000\n", "x.toml").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("server.workers"), "{err}");
    }

    #[test]
    fn a_socket_may_replace_tcp_but_something_must_listen() {
        let c =
            Config::from_toml("[server]\nlisten = \"\"\nsocket = \"/run/q.sock\"\n", "x").unwrap();
        c.validate().unwrap();
        let c = Config::from_toml("[server]\nlisten = \"\"\n", "x").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("server.socket"), "{err}");
        let long = format!("[server]\nsocket = \"/{}\"\n", "s".repeat(120));
        let err = Config::from_toml(&long, "x")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("at most 107"), "{err}");
    }

    #[test]
    fn example_file_matches_defaults() {
        let text = include_str!("../config/qcache.toml");
        let c = Config::from_toml(text, "config/qcache.toml").unwrap();
        c.validate().unwrap();
        assert_eq!(c, Config::default());
    }

    /// The client leg: the client's pick among what was offered, zlib when it sets both,
    /// its own zstd level (3 when it sends none).
    #[test]
    fn client_compression_is_the_clients_pick_of_the_offer() {
        use crate::protocol::compress::Algorithm::{Zlib, Zstd};
        use crate::protocol::packets::cap::{COMPRESS, ZSTD_COMPRESSION};
        let c = CompressionConfig {
            zlib_level: 4,
            ..CompressionConfig::default()
        };
        let both = COMPRESS | ZSTD_COMPRESSION;
        let cases = [
            (COMPRESS, both, None, Some((Zlib, 4))),
            (ZSTD_COMPRESSION, both, None, Some((Zstd, 3))),
            (ZSTD_COMPRESSION, both, Some(9), Some((Zstd, 9))),
            (both, both, Some(9), Some((Zlib, 4))),
            // Asked for what was not offered: nothing (the handshake refuses it).
            (COMPRESS, ZSTD_COMPRESSION, None, None),
            (0, both, None, None),
        ];
        for (asked, offer, level, want) in cases {
            let got = c
                .client_codec(asked, offer, level)
                .map(|k| (k.algorithm(), k.level()));
            assert_eq!(got, want, "asked {asked:#x} offer {offer:#x}");
        }
    }

    /// The upstream leg: one row per setting and server offer.
    #[test]
    fn upstream_compression_follows_the_setting_and_the_offer() {
        use crate::protocol::compress::Algorithm::{Zlib, Zstd};
        use crate::protocol::packets::cap::{COMPRESS, ZSTD_COMPRESSION};
        use UpstreamCompression::{Auto, Off, Zlib as ZlibOnly, Zstd as ZstdOnly};
        let both = COMPRESS | ZSTD_COMPRESSION;
        let cases = [
            (Off, both, None),
            (ZlibOnly, both, Some((Zlib, 6))),
            (ZlibOnly, ZSTD_COMPRESSION, None),
            (ZstdOnly, both, Some((Zstd, 5))),
            (ZstdOnly, COMPRESS, None),
            (Auto, both, Some((Zstd, 5))),
            (Auto, COMPRESS, Some((Zlib, 6))),
            (Auto, 0, None),
        ];
        for (upstream, offered, want) in cases {
            let c = CompressionConfig {
                upstream,
                zlib_level: 6,
                zstd_level: 5,
                ..CompressionConfig::default()
            };
            let got = c
                .upstream_codec(offered)
                .map(|k| (k.algorithm(), k.level()));
            assert_eq!(got, want, "{upstream:?} offered {offered:#x}");
        }
    }

    /// `compression.upstream` accepts its four words in any case and nothing else.
    #[test]
    fn upstream_compression_words() {
        let cases = [
            ("off", Some(UpstreamCompression::Off)),
            (" ZLIB ", Some(UpstreamCompression::Zlib)),
            ("zstd", Some(UpstreamCompression::Zstd)),
            ("Auto", Some(UpstreamCompression::Auto)),
            ("lz4", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<UpstreamCompression>().ok(), want, "{text:?}");
        }
    }
}
