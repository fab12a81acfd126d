//! The binlog tail: a task registered as a replica that bumps the versions of the tables each
//! committed transaction changed, so that writes bypassing qcache (cron jobs, consoles, other
//! qcache instances) invalidate too.
//!
//! Tables are collected from ROW events (through TABLE_MAP) and statement events (through the
//! same analyser as proxied writes), widened through the catalog (FK cascades are not in the
//! binlog), and bumped at the commit event — never before, or a reader could cache the old
//! rows under the new version. A broken stream may have lost events, so everything is
//! invalidated before the tail reports itself connected again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use mysql_async::binlog::events::{Event, EventData};
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Row};
use tokio::sync::watch;

use super::catalog::{upstream_opts, Catalog, TableName};
use crate::cache::versions::Versions;
use crate::config::{BinlogMode, Conservative, InvalidationConfig};

/// The tables a statement writes, given its text and default schema; `None` = cannot tell
/// (the tail then invalidates per `invalidation.unknown_write`). The same analyser proxied
/// writes go through.
pub type WriteAnalyser = Arc<dyn Fn(&str, &str) -> Option<Vec<(String, String)>> + Send + Sync>;

/// Why the tail is not streaming.
#[derive(Debug, thiserror::Error)]
pub enum BinlogError {
    #[error("binlog: upstream: {0}")]
    Upstream(#[from] mysql_async::Error),
    /// The server cannot give us a binlog: `auto` mode turns the tail off on this one.
    #[error("binlog unavailable: {0}")]
    Unavailable(String),
    #[error("binlog: no event or heartbeat for {0:?}")]
    Stalled(Duration),
    #[error("binlog: connecting and requesting the stream took longer than {0:?}")]
    Timeout(Duration),
    #[error("binlog: the server ended the stream")]
    Ended,
}

/// Where the tail stands, for logs, admin and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinlogStatus {
    /// Not connected yet.
    Starting,
    Connected,
    /// Lost the stream (or never got it in `on` mode); the last error.
    Reconnecting(String),
    /// Disabled: by config, or by `auto` because the server cannot stream (the reason).
    Off(String),
}

/// Heartbeats the server sends on an idle stream, so that a dead TCP connection is noticed.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// No event (heartbeats included) for this long means the stream is dead.
const STALL: Duration = Duration::from_secs(5);
/// Connecting, the checks and the dump request together.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a commit waits for the catalog reload after a DDL before it invalidates
/// conservatively instead: a reload takes tens of ms, but seconds on a busy server.
const SETTLE_MAX: Duration = Duration::from_millis(100);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Histogram buckets of commit-event-arrival → bump-done, in µs: bucket i counts
/// durations < 2^i µs (the last one catches the rest).
const HIST_BUCKETS: usize = 24;
/// Upper bounds, in ms, of the commit-lag histogram (commit event header timestamp vs its
/// arrival). The header has whole seconds, so a measured lag overstates the true one by up
/// to a second: the finer bounds only say "well under a second".
pub const COMMIT_LAG_BOUNDS_MS: [u64; 9] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000,
];
const COMMIT_LAG_BUCKETS: usize = COMMIT_LAG_BOUNDS_MS.len() + 1;

/// Shared between the task and the handle.
struct Shared {
    state: Mutex<State>,
    /// True while `state` has no `disconnected_since`: lets every cache lookup ask
    /// [`BinlogHandle::disconnected_for`] without taking the lock both workers would share.
    healthy: AtomicBool,
    connected: watch::Sender<bool>,
    commits: watch::Sender<u64>,
    events: AtomicU64,
    bumps: AtomicU64,
    reconnects: AtomicU64,
    /// Milliseconds between an event's header timestamp (whole seconds) and its arrival;
    /// u64::MAX = none yet.
    last_event_lag_ms: AtomicU64,
    hist: [AtomicU64; HIST_BUCKETS],
    /// Commit events by header-timestamp lag (see [`COMMIT_LAG_BOUNDS_MS`]); the last is the
    /// overflow bucket.
    commit_lag: [AtomicU64; COMMIT_LAG_BUCKETS],
    commit_lag_sum_ms: AtomicU64,
    conn_id: AtomicU32,
}

struct State {
    status: BinlogStatus,
    disconnected_since: Option<Instant>,
}

/// The running tail. Dropping the last handle stops the task.
pub struct BinlogHandle {
    shared: Arc<Shared>,
    task: Option<tokio::task::AbortHandle>,
}

impl std::fmt::Debug for BinlogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinlogHandle")
            .field("status", &self.status())
            .finish()
    }
}

impl Drop for BinlogHandle {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// Starts the tail (unless `cfg.binlog` is `off`). Must be called inside a tokio runtime.
pub fn spawn(
    upstream_addr: String,
    cfg: InvalidationConfig,
    versions: Arc<Versions>,
    catalog: Arc<Catalog>,
    analyse: WriteAnalyser,
) -> Arc<BinlogHandle> {
    let off = cfg.binlog == BinlogMode::Off;
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            status: if off {
                BinlogStatus::Off("invalidation.binlog = off".into())
            } else {
                BinlogStatus::Starting
            },
            disconnected_since: (!off).then(Instant::now),
        }),
        healthy: AtomicBool::new(off),
        connected: watch::Sender::new(false),
        commits: watch::Sender::new(0),
        events: AtomicU64::new(0),
        bumps: AtomicU64::new(0),
        reconnects: AtomicU64::new(0),
        last_event_lag_ms: AtomicU64::new(u64::MAX),
        hist: std::array::from_fn(|_| AtomicU64::new(0)),
        commit_lag: std::array::from_fn(|_| AtomicU64::new(0)),
        commit_lag_sum_ms: AtomicU64::new(0),
        conn_id: AtomicU32::new(0),
    });
    let task = (!off).then(|| {
        let tail = Tail {
            shared: shared.clone(),
            opts: upstream_opts(&upstream_addr, &cfg),
            addr: upstream_addr,
            cfg,
            versions,
            catalog,
            analyse,
            txn: Txn::default(),
            warned_format: false,
            refreshing: Vec::new(),
            event_lag_ms: None,
        };
        tokio::spawn(tail.run()).abort_handle()
    });
    Arc::new(BinlogHandle { shared, task })
}

impl BinlogHandle {
    pub fn connected(&self) -> bool {
        *self.shared.connected.borrow()
    }

    pub fn status(&self) -> BinlogStatus {
        self.shared.lock().status.clone()
    }

    /// Event header timestamp vs arrival, for the last event that had one. The header has
    /// one-second resolution, so this says "seconds behind", not milliseconds; for the
    /// fine-grained part see [`BinlogHandle::lag_histogram`].
    pub fn last_event_lag(&self) -> Option<Duration> {
        match self.shared.last_event_lag_ms.load(Ordering::Relaxed) {
            u64::MAX => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// How long the stream has been down; `None` while connected, and when the tail is off
    /// (then there is no binlog bound to keep and hits are served as without a tail).
    /// The session stops serving hits while this exceeds `invalidation.max_lag`.
    pub fn disconnected_for(&self) -> Option<Duration> {
        if self.shared.healthy.load(Ordering::Acquire) {
            return None;
        }
        let st = self.shared.lock();
        match st.status {
            BinlogStatus::Off(_) | BinlogStatus::Connected => None,
            _ => st.disconnected_since.map(|t| t.elapsed()),
        }
    }

    /// Events read, including heartbeats.
    pub fn events(&self) -> u64 {
        self.shared.events.load(Ordering::Relaxed)
    }

    /// Table bumps made (a bump_all counts one).
    pub fn bumps(&self) -> u64 {
        self.shared.bumps.load(Ordering::Relaxed)
    }

    /// Times the stream was lost and the tail started over.
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    /// Commit events processed (their tables are bumped when this moves).
    pub fn commits(&self) -> u64 {
        *self.shared.commits.borrow()
    }

    /// Changes after every processed commit: lets a caller wait for the tail instead of polling.
    pub fn subscribe_commits(&self) -> watch::Receiver<u64> {
        self.shared.commits.subscribe()
    }

    /// Time from a commit event's arrival to its bumps being done: (upper bound, count) per
    /// power-of-two bucket, empty buckets left out.
    pub fn lag_histogram(&self) -> Vec<(Duration, u64)> {
        self.shared
            .hist
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let n = c.load(Ordering::Relaxed);
                (n > 0).then(|| (Duration::from_micros(1u64 << i), n))
            })
            .collect()
    }

    /// Commit events by how far their header timestamp lies behind their arrival:
    /// (upper bound, count) for every bucket of [`COMMIT_LAG_BOUNDS_MS`] then the overflow
    /// (`Duration::MAX`), and the sum of the measured lags. This is the lag external
    /// writes are seen with, to the second: the header has whole seconds.
    pub fn commit_lag_histogram(&self) -> (Vec<(Duration, u64)>, Duration) {
        let buckets = self
            .shared
            .commit_lag
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let bound = COMMIT_LAG_BOUNDS_MS
                    .get(i)
                    .map_or(Duration::MAX, |&ms| Duration::from_millis(ms));
                (bound, c.load(Ordering::Relaxed))
            })
            .collect();
        let sum = Duration::from_millis(self.shared.commit_lag_sum_ms.load(Ordering::Relaxed));
        (buckets, sum)
    }

    /// The server-side id of the streaming connection (for KILL in tests and admin).
    pub fn connection_id(&self) -> Option<u32> {
        match self.shared.conn_id.load(Ordering::Relaxed) {
            0 => None,
            id => Some(id),
        }
    }

    /// Waits until the stream is up; false on timeout or when the tail is off.
    pub async fn wait_until_connected(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.connected.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits until the tail has decided to stay off (`auto` without a usable binlog).
    pub async fn wait_until_off(&self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let BinlogStatus::Off(why) = self.status() {
                return Some(why);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_connected(&self) {
        {
            let mut st = self.lock();
            st.status = BinlogStatus::Connected;
            st.disconnected_since = None;
            self.healthy.store(true, Ordering::Release);
        }
        self.connected.send_replace(true);
    }

    fn set_disconnected(&self, why: String) {
        {
            let mut st = self.lock();
            st.status = BinlogStatus::Reconnecting(why);
            st.disconnected_since.get_or_insert_with(Instant::now);
            self.healthy.store(false, Ordering::Release);
        }
        self.conn_id.store(0, Ordering::Relaxed);
        self.connected.send_replace(false);
    }

    fn set_off(&self, why: String) {
        {
            let mut st = self.lock();
            st.status = BinlogStatus::Off(why);
            st.disconnected_since = None;
            self.healthy.store(true, Ordering::Release);
        }
        self.conn_id.store(0, Ordering::Relaxed);
        self.connected.send_replace(false);
    }
}

/// What the current transaction changed so far.
#[derive(Default)]
struct Txn {
    tables: HashSet<TableName>,
    /// Statements the analyser could not read, by default schema.
    unknown_schemas: HashSet<String>,
    /// A row event whose table map was missing, or an unreadable event.
    unknown_all: bool,
    /// Inside BEGIN … COMMIT/XID (or XA START … PREPARE).
    open: bool,
}

/// The task's state.
struct Tail {
    shared: Arc<Shared>,
    opts: Opts,
    addr: String,
    cfg: InvalidationConfig,
    versions: Arc<Versions>,
    catalog: Arc<Catalog>,
    analyse: WriteAnalyser,
    txn: Txn,
    warned_format: bool,
    /// Catalog reloads started by DDL and not yet finished.
    refreshing: Vec<tokio::task::JoinHandle<()>>,
    /// Header timestamp vs arrival of the event being handled, when it has a timestamp.
    event_lag_ms: Option<u64>,
}

impl Tail {
    async fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        // In `auto` mode the first answer decides: a server that cannot stream turns the tail
        // off. Once it has streamed, losing it is a failure to retry, as in `on` mode.
        let mut decided = self.cfg.binlog == BinlogMode::On;
        loop {
            let mut streamed = false;
            let err = self.stream(&mut streamed).await;
            // A half-read transaction is covered by the bump_all below.
            self.txn = Txn::default();
            let was_connected = self.shared.connected.send_replace(false);
            if was_connected || streamed {
                // Events may be lost from here until the next stream starts.
                self.versions.bump_all_gap();
                self.shared.bumps.fetch_add(1, Ordering::Relaxed);
            }
            if streamed {
                decided = true;
                backoff = BACKOFF_MIN;
            }
            if !decided {
                if let BinlogError::Unavailable(why) = &err {
                    tracing::warn!(
                        upstream = %self.addr,
                        "binlog invalidation off (invalidation.binlog = auto): {why}; writes that \
                         bypass qcache are not seen until it is enabled"
                    );
                    self.shared.set_off(why.clone());
                    return;
                }
            }
            self.shared.set_disconnected(err.to_string());
            self.shared.reconnects.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(upstream = %self.addr, error = %err, retry_in = ?backoff, "binlog stream lost; everything invalidated, reconnecting");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One connection's life: returns why it ended. `streamed` is set once events flow.
    async fn stream(&mut self, streamed: &mut bool) -> BinlogError {
        // A server that accepts the connection but never answers must not park the tail.
        let mut stream = match tokio::time::timeout(OPEN_TIMEOUT, self.open()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return e,
            Err(_) => return BinlogError::Timeout(OPEN_TIMEOUT),
        };
        // The server sends a (fake) ROTATE and the FORMAT_DESCRIPTION at once: the first event
        // proves the dump was accepted (a missing privilege shows up here).
        loop {
            let next = tokio::time::timeout(STALL, stream.next()).await;
            let event = match next {
                Err(_) => return BinlogError::Stalled(STALL),
                Ok(None) => return BinlogError::Ended,
                Ok(Some(Err(e))) => {
                    return if !*streamed {
                        unavailable_if_denied(
                            e,
                            "the user cannot read the binlog (needs REPLICATION SLAVE)",
                        )
                    } else {
                        e.into()
                    }
                }
                Ok(Some(Ok(ev))) => ev,
            };
            let arrived = Instant::now();
            if !*streamed {
                *streamed = true;
                // Everything before the position we start from happened while no tail was
                // watching: invalidate it all before anyone is told we are connected.
                self.versions.bump_all_gap();
                self.shared.bumps.fetch_add(1, Ordering::Relaxed);
                self.shared.set_connected();
                tracing::info!(upstream = %self.addr, server_id = self.cfg.server_id, "binlog stream connected");
            }
            if let Some(ddl) = self.on_event(&event, &stream, arrived).await {
                self.after_ddl(ddl);
            }
        }
    }

    /// Connects, checks the server can stream, and asks for the binlog from its current end.
    async fn open(&mut self) -> Result<BinlogStream, BinlogError> {
        let mut conn = Conn::new(self.opts.clone()).await?;
        let row: Option<Row> = conn
            .query_first("SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format")
            .await?;
        let (log_bin, format) = match row {
            Some(mut r) => (
                r.take_opt::<Option<i64>, _>(0)
                    .and_then(|v| v.ok())
                    .flatten(),
                r.take_opt::<Option<String>, _>(1)
                    .and_then(|v| v.ok())
                    .flatten(),
            ),
            None => (None, None),
        };
        if log_bin != Some(1) {
            return Err(BinlogError::Unavailable(
                "the server has binary logging off (@@log_bin = 0; start it with --log-bin)".into(),
            ));
        }
        let format = format.unwrap_or_default();
        if !format.eq_ignore_ascii_case("ROW") && !self.warned_format {
            self.warned_format = true;
            tracing::warn!(upstream = %self.addr, binlog_format = %format, "binlog_format is not ROW: statement events are analysed like proxied writes, and unanalysable ones invalidate conservatively");
        }
        let status: Option<Row> = match conn.query_first("SHOW MASTER STATUS").await {
            Ok(s) => s,
            Err(e) => {
                return Err(unavailable_if_denied(
                    e,
                    "the user cannot read the binlog position (needs BINLOG MONITOR or REPLICATION CLIENT)",
                ))
            }
        };
        let Some(mut status) = status else {
            return Err(BinlogError::Unavailable(
                "SHOW MASTER STATUS returned no row: binary logging is off".into(),
            ));
        };
        let file = status
            .take_opt::<Vec<u8>, _>(0)
            .and_then(|v| v.ok())
            .unwrap_or_default();
        let pos = status
            .take_opt::<u64, _>(1)
            .and_then(|v| v.ok())
            .unwrap_or(4);
        // Heartbeats on an idle stream let a dead connection be told from a quiet server.
        conn.query_drop(format!(
            "SET @master_heartbeat_period = {}",
            HEARTBEAT.as_nanos()
        ))
        .await?;
        self.shared.conn_id.store(conn.id(), Ordering::Relaxed);
        let request = BinlogStreamRequest::new(self.cfg.server_id)
            .with_filename(&file)
            .with_pos(pos);
        conn.get_binlog_stream(request).await.map_err(|e| {
            unavailable_if_denied(
                e,
                "the user cannot register as a replica (needs REPLICATION SLAVE)",
            )
        })
    }

    /// Folds one event into the transaction; bumps at commits. Returns the tables of a DDL
    /// statement, which needs a catalog refresh (done by the caller, which can await).
    async fn on_event(
        &mut self,
        event: &Event,
        stream: &BinlogStream,
        arrived: Instant,
    ) -> Option<Ddl> {
        self.shared.events.fetch_add(1, Ordering::Relaxed);
        let ts = event.header().timestamp();
        self.event_lag_ms = None;
        if ts != 0 {
            // Artificial events (the fake ROTATE, heartbeats) carry 0.
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            let lag = now.saturating_sub(u64::from(ts) * 1000);
            self.shared.last_event_lag_ms.store(lag, Ordering::Relaxed);
            self.event_lag_ms = Some(lag);
        }
        let data = match event.read_data() {
            Ok(d) => d,
            Err(e) => {
                // We cannot tell what it changed: the whole transaction goes conservative.
                tracing::warn!(error = %e, event_type = event.header().event_type_raw(), "binlog: unreadable event; invalidating everything at its commit");
                self.txn.unknown_all = true;
                return None;
            }
        };
        match data {
            Some(EventData::RowsEvent(rows)) => match stream.get_tme(rows.table_id()) {
                Some(tme) => {
                    self.txn.tables.insert((
                        tme.database_name().to_lowercase(),
                        tme.table_name().to_lowercase(),
                    ));
                }
                None => self.txn.unknown_all = true,
            },
            Some(EventData::XidEvent(_)) => self.commit(arrived).await,
            Some(EventData::QueryEvent(q)) => {
                let sql = q.query();
                let schema = q.schema().to_lowercase();
                return self.on_query(&sql, &schema, arrived).await;
            }
            // Statement-based LOAD DATA: the file's rows travel in BEGIN_LOAD_QUERY events, the
            // statement (and so the table) in this one.
            Some(EventData::ExecuteLoadQueryEvent(q)) => {
                let sql = q.query();
                let schema = q.schema().to_lowercase();
                return self.on_query(&sql, &schema, arrived).await;
            }
            Some(EventData::XaPrepareLogEvent(_)) => self.commit(arrived).await,
            // TABLE_MAP is kept by the stream itself; ROTATE, FORMAT_DESCRIPTION, heartbeats,
            // GTIDs and the MariaDB-only events we do not ask for change no table.
            _ => {}
        }
        None
    }

    async fn on_query(&mut self, sql: &str, schema: &str, arrived: Instant) -> Option<Ddl> {
        let words = leading_words(sql, 3);
        let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
        match w(0) {
            // A transaction's start: collect until its commit.
            "BEGIN" => self.txn.open = true,
            "COMMIT" => self.commit(arrived).await,
            // Non-transactional changes are logged inside a rolled-back transaction; bumping
            // them is harmless, and ROLLBACK TO SAVEPOINT does not end the transaction.
            "ROLLBACK" if w(1) != "TO" => self.commit(arrived).await,
            "ROLLBACK" | "SAVEPOINT" | "RELEASE" => {}
            "XA" => match w(1) {
                // Bumped at PREPARE already, but a reader may have cached the old rows between
                // PREPARE and COMMIT: XA is rare, so its end invalidates everything.
                "COMMIT" | "ROLLBACK" => {
                    self.txn.unknown_all = true;
                    self.commit(arrived).await;
                }
                "PREPARE" => self.commit(arrived).await,
                "START" | "BEGIN" => self.txn.open = true,
                _ => {}
            },
            // Accounts and privileges change no table data.
            "GRANT" | "REVOKE" | "FLUSH" => {}
            "CREATE" | "ALTER" | "DROP" | "RENAME" | "TRUNCATE" => {
                let second = if w(1) == "OR" || w(1) == "TEMPORARY" || w(1) == "DEFINER" {
                    // CREATE OR REPLACE VIEW …, CREATE TEMPORARY TABLE …: the analyser knows.
                    ""
                } else {
                    w(1)
                };
                if matches!(second, "USER" | "ROLE" | "SERVER") {
                    return None;
                }
                let ddl = if matches!(second, "DATABASE" | "SCHEMA") {
                    let name = database_name(sql);
                    Ddl::Database(name)
                } else {
                    match (self.analyse)(sql, schema) {
                        Some(t) => Ddl::Tables(lower_all(t)),
                        None => Ddl::Unknown(schema.to_string()),
                    }
                };
                // DDL commits implicitly and is its own event group.
                self.txn = Txn::default();
                self.apply_ddl(&ddl);
                self.commit_done(arrived);
                return Some(ddl);
            }
            // Statement-based DML (INSERT, UPDATE, DELETE, REPLACE, LOAD DATA …).
            _ => {
                match (self.analyse)(sql, schema) {
                    Some(t) => self.txn.tables.extend(lower_all(t)),
                    None => {
                        self.txn.unknown_schemas.insert(schema.to_string());
                    }
                }
                // MariaDB and MySQL wrap logged DML in BEGIN … COMMIT/XID; a bare statement
                // (old servers, some non-transactional paths) is its own commit, and waiting
                // for the next commit event would bump it late.
                if !self.txn.open {
                    self.commit(arrived).await;
                }
            }
        }
        None
    }

    /// Bumps what the finished transaction changed.
    async fn commit(&mut self, arrived: Instant) {
        let txn = std::mem::take(&mut self.txn);
        // Widen through the catalog as of the DDL that preceded this transaction; if its reload
        // is slow, do not hold every later commit behind it: invalidate conservatively.
        let stale_catalog = !txn.tables.is_empty() && !self.settle().await;
        let mut bumps = 0u64;
        if txn.unknown_all {
            self.versions.bump_all();
            bumps += 1;
        } else {
            for s in &txn.unknown_schemas {
                bumps += self.conservative(s);
            }
            if !txn.tables.is_empty() {
                let tables: Vec<TableName> = txn.tables.into_iter().collect();
                bumps += self.bump_tables(&tables);
                if stale_catalog {
                    let schemas: HashSet<&str> = tables.iter().map(|(s, _)| s.as_str()).collect();
                    for s in schemas {
                        bumps += self.conservative(s);
                    }
                }
            }
        }
        self.shared.bumps.fetch_add(bumps, Ordering::Relaxed);
        self.commit_done(arrived);
    }

    fn commit_done(&self, arrived: Instant) {
        let us = arrived.elapsed().as_micros() as u64;
        let bucket = (64 - us.leading_zeros() as usize).min(HIST_BUCKETS - 1);
        self.shared.hist[bucket].fetch_add(1, Ordering::Relaxed);
        if let Some(lag) = self.event_lag_ms {
            self.shared.commit_lag[commit_lag_bucket(lag)].fetch_add(1, Ordering::Relaxed);
            self.shared
                .commit_lag_sum_ms
                .fetch_add(lag, Ordering::Relaxed);
        }
        self.shared.commits.send_modify(|c| *c += 1);
    }

    fn bump_tables(&self, tables: &[TableName]) -> u64 {
        bump_tables(
            &self.versions,
            &self.catalog,
            self.cfg.unknown_write,
            tables,
        )
    }

    fn conservative(&self, schema: &str) -> u64 {
        conservative(&self.versions, self.cfg.unknown_write, schema)
    }

    fn apply_ddl(&self, ddl: &Ddl) -> u64 {
        let n = apply_ddl(&self.versions, &self.catalog, self.cfg.unknown_write, ddl);
        self.shared.bumps.fetch_add(n, Ordering::Relaxed);
        n
    }

    /// Reloads the catalog after a DDL, then bumps its tables again: a reader that resolved a
    /// view with the old catalog between the first bump and the swap holds stamps that this
    /// second bump makes stale.
    ///
    /// The reload runs beside the tail, not in it: a burst of DDL (a migration, a test suite)
    /// would otherwise stall every later commit behind one reload per statement, while
    /// concurrent reloads coalesce in [`Catalog::refresh`]. The next commit with data changes
    /// waits for the reloads in flight (see [`Tail::settle`]), so that it is widened through
    /// the new triggers and foreign keys, or invalidates conservatively if they are slow.
    fn after_ddl(&mut self, ddl: Ddl) {
        self.refreshing.retain(|t| !t.is_finished());
        let catalog = self.catalog.clone();
        let versions = self.versions.clone();
        let shared = self.shared.clone();
        let policy = self.cfg.unknown_write;
        self.refreshing.push(tokio::spawn(async move {
            let started = Instant::now();
            let r = catalog.refresh().await;
            tracing::debug!(took = ?started.elapsed(), ?ddl, "binlog: catalog refreshed after DDL");
            if let Err(e) = r {
                tracing::warn!(error = %e, "binlog: catalog refresh after DDL failed; keeping the old one");
            }
            let n = apply_ddl(&versions, &catalog, policy, &ddl);
            shared.bumps.fetch_add(n, Ordering::Relaxed);
        }));
    }

    /// Waits (at most [`SETTLE_MAX`]) for the catalog reloads started by earlier DDL; true
    /// when none is left running.
    async fn settle(&mut self) -> bool {
        self.refreshing.retain(|t| !t.is_finished());
        if self.refreshing.is_empty() {
            return true;
        }
        let started = Instant::now();
        let all = async {
            for task in self.refreshing.iter_mut() {
                // A reload task that panicked leaves the old catalog: nothing more to do.
                let _ = task.await;
            }
        };
        let done = tokio::time::timeout(SETTLE_MAX, all).await.is_ok();
        self.refreshing.retain(|t| !t.is_finished());
        tracing::debug!(took = ?started.elapsed(), done, "binlog: commit waited for catalog reloads");
        done
    }
}

/// What a DDL statement invalidates.
#[derive(Debug)]
enum Ddl {
    Tables(Vec<TableName>),
    /// CREATE/ALTER/DROP DATABASE: the named schema (None: name not readable).
    Database(Option<String>),
    /// The analyser could not read it: conservative for this default schema.
    Unknown(String),
}

/// Bumps what a DDL statement invalidates; returns the number of bumps.
fn apply_ddl(versions: &Versions, catalog: &Catalog, policy: Conservative, ddl: &Ddl) -> u64 {
    match ddl {
        Ddl::Tables(t) => bump_tables(versions, catalog, policy, t),
        // Tables the registry does not know have no entries to invalidate.
        Ddl::Database(Some(name)) => versions.bump_schema(name) as u64,
        Ddl::Database(None) => {
            versions.bump_all();
            1
        }
        Ddl::Unknown(schema) => conservative(versions, policy, schema),
    }
}

/// Bumps `tables` widened through triggers and cascades; conservative when the catalog
/// cannot widen them.
fn bump_tables(
    versions: &Versions,
    catalog: &Catalog,
    policy: Conservative,
    tables: &[TableName],
) -> u64 {
    match catalog.expand_write(tables) {
        Some(all) => {
            for (s, n) in &all {
                versions.bump_name(s, n);
            }
            all.len() as u64
        }
        None => {
            let schemas: HashSet<&str> = tables.iter().map(|(s, _)| s.as_str()).collect();
            let mut n = 0;
            for (s, t) in tables {
                versions.bump_name(s, t);
                n += 1;
            }
            for s in schemas {
                n += conservative(versions, policy, s);
            }
            n
        }
    }
}

/// Invalidates for a write we could not analyse, per `invalidation.unknown_write`.
fn conservative(versions: &Versions, policy: Conservative, schema: &str) -> u64 {
    match policy {
        Conservative::Schema if !schema.is_empty() => versions.bump_schema(schema) as u64,
        _ => {
            versions.bump_all();
            1
        }
    }
}

/// The commit-lag bucket of a lag in ms: the first bound it does not exceed, else overflow.
fn commit_lag_bucket(lag_ms: u64) -> usize {
    COMMIT_LAG_BOUNDS_MS
        .iter()
        .position(|&b| lag_ms <= b)
        .unwrap_or(COMMIT_LAG_BOUNDS_MS.len())
}

fn lower_all(t: Vec<(String, String)>) -> Vec<TableName> {
    t.into_iter()
        .map(|(s, n)| (s.to_lowercase(), n.to_lowercase()))
        .collect()
}

/// A server error that means "not allowed" becomes Unavailable, so `auto` turns off on it.
fn unavailable_if_denied(e: mysql_async::Error, what: &str) -> BinlogError {
    match &e {
        // ER_SPECIFIC_ACCESS_DENIED, ER_ACCESS_DENIED, ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED,
        // ER_MASTER_FATAL_ERROR_READING_BINLOG (binlog purged or disabled)
        mysql_async::Error::Server(s) if matches!(s.code, 1227 | 1045 | 1044 | 1142 | 1236) => {
            BinlogError::Unavailable(format!("{what}: {} ({})", s.message, s.code))
        }
        _ => e.into(),
    }
}

/// The first `n` words of a statement, upper-cased, after leading comments and whitespace
/// (the server prefixes some logged DDL with a `/* … */` comment).
fn leading_words(sql: &str, n: usize) -> Vec<String> {
    let mut s = sql.trim_start();
    loop {
        if let Some(rest) = s.strip_prefix("/*") {
            // MySQL's executable comments (/*!…*/) hold real SQL; treat their body as text.
            if let Some(body) = rest.strip_prefix('!') {
                let body = body.trim_start_matches(|c: char| c.is_ascii_digit());
                s = body.trim_start();
                continue;
            }
            match rest.find("*/") {
                Some(end) => s = rest[end + 2..].trim_start(),
                None => return Vec::new(),
            }
        } else if s.starts_with("--") || s.starts_with('#') {
            match s.find('\n') {
                Some(end) => s = s[end + 1..].trim_start(),
                None => return Vec::new(),
            }
        } else {
            break;
        }
    }
    s.split(|c: char| c.is_whitespace() || c == ';' || c == '(')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// The database named by CREATE/ALTER/DROP DATABASE|SCHEMA [IF [NOT] EXISTS] name.
fn database_name(sql: &str) -> Option<String> {
    let dialect = sqlparser::dialect::MySqlDialect {};
    let tokens = sqlparser::tokenizer::Tokenizer::new(&dialect, sql)
        .tokenize()
        .ok()?;
    let mut words = tokens.into_iter().filter_map(|t| match t {
        sqlparser::tokenizer::Token::Word(w) => Some(w),
        _ => None,
    });
    // Skip the verb and DATABASE/SCHEMA, then IF [NOT] EXISTS.
    let _verb = words.next()?;
    let _kind = words.next()?;
    for w in words {
        let upper = w.value.to_ascii_uppercase();
        if w.quote_style.is_none() && matches!(upper.as_str(), "IF" | "NOT" | "EXISTS") {
            continue;
        }
        return Some(w.value.to_lowercase());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_lag_buckets() {
        assert_eq!(commit_lag_bucket(0), 0);
        assert_eq!(commit_lag_bucket(250), 0);
        assert_eq!(commit_lag_bucket(251), 1);
        assert_eq!(commit_lag_bucket(999), 2);
        assert_eq!(commit_lag_bucket(300_000), COMMIT_LAG_BOUNDS_MS.len() - 1);
        assert_eq!(commit_lag_bucket(u64::MAX), COMMIT_LAG_BOUNDS_MS.len());
    }

    #[test]
    fn words_skip_comments() {
        assert_eq!(
            leading_words("/* generated by server */ DROP TABLE `t`", 2),
            vec!["DROP", "TABLE"]
        );
        assert_eq!(leading_words("  begin", 2), vec!["BEGIN"]);
        assert_eq!(
            leading_words("/*!40000 ALTER TABLE t DISABLE KEYS */", 2),
            vec!["ALTER", "TABLE"]
        );
        assert!(leading_words("/* unterminated", 1).is_empty());
    }

    #[test]
    fn database_names() {
        assert_eq!(
            database_name("DROP DATABASE IF EXISTS `Shop`"),
            Some("shop".into())
        );
        assert_eq!(database_name("create schema s2"), Some("s2".into()));
        assert_eq!(database_name("drop database"), None);
    }
}
