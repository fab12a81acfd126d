//! The binlog tail: a task registered as a replica that bumps the versions of the tables each
//! committed transaction changed, so that writes bypassing qcache (cron jobs, consoles, other
//! qcache instances) invalidate too.
//!
//! Tables are collected from ROW events (through TABLE_MAP) and statement events (through the
//! same analyser as proxied writes), widened through the catalog (FK cascades are not in the
//! binlog), and bumped at the commit event — never before, or a reader could cache the old
//! rows under the new version.
//!
//! On MariaDB the tail declares the GTID capability, so the server sends its own events (GTID,
//! GTID list, checkpoints, annotations) instead of rewriting them into old forms, a rewrite
//! that fails for some transactions (XA with long xids) and ends the dump.
//!
//! A lost stream is resumed from the last event after which nothing was pending (its file,
//! offset and identity): the server replays what came after it, and the tail checks that the
//! first events it gets back are the file's format description and that very event, and first
//! that the server answering is the process it read them from, with no RESET since (`Proof`:
//! a fresh server on the same address writes a file of the same name). Only when the server
//! cannot give them (purged or reset binlog, a restart, another server) is everything
//! invalidated. Until the replay has caught up with the server's position at reconnect, the
//! tail counts as disconnected (so hits stop once that lasts longer than `max_lag`).

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{FutureExt, StreamExt};
use mysql_async::binlog::events::{Event, EventData};
use mysql_async::binlog::EventFlags;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Row};
use tokio::sync::watch;

use super::apply::{Invalidation, Invalidator, Source, What};
use super::catalog::{own_session_opts, Catalog, Changed, TableName};
use crate::analysis::slices::{normalize, temporal_day, temporal_keys, ColType, ColumnInfo, Lit};
use crate::analysis::ServerVersion;
use crate::cache::versions::Versions;
use crate::config::{random_id, BinlogMode, Conservative, Granularity, InvalidationConfig};
use crate::faults::Faults;
use crate::observe::stats::{CacheStats, InvalidationSource};
use crate::policy::lag::{CatchUp, TailLag};

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
    /// The binlog parser panicked on a packet (mysql_common unwraps some reads).
    #[error("binlog: the event parser failed: {0}")]
    Panic(String),
    /// The events since the resume position cannot be had: the tail starts afresh.
    #[error("binlog: cannot resume: {0}")]
    Gap(String),
    /// The fleet's lease gave the stream to other instances (`l2.binlog_tails`): this one
    /// listens to them instead.
    #[error("binlog: standby (other instances stream)")]
    Standby,
}

/// How a stream ended, for the log line and `qcache_binlog_stream_ends_total{cause}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndCause {
    /// Connecting, the checks or the dump request failed (server down, access denied).
    Connect,
    /// The server sent an error on the stream (its code and text are in the log line).
    ServerError,
    /// The connection broke (reset, closed mid-packet).
    Io,
    /// The server ended the stream cleanly.
    Ended,
    /// No event or heartbeat for a while: the connection is taken for dead.
    Stalled,
    /// Connecting and requesting the stream took too long.
    Timeout,
    /// A packet the binlog parser could not read.
    Unreadable,
    /// The resume position is gone (purged or reset binlog, another server).
    Gap,
}

impl EndCause {
    pub const ALL: [EndCause; 8] = [
        EndCause::Connect,
        EndCause::ServerError,
        EndCause::Io,
        EndCause::Ended,
        EndCause::Stalled,
        EndCause::Timeout,
        EndCause::Unreadable,
        EndCause::Gap,
    ];

    /// The label value on /metrics.
    pub fn label(self) -> &'static str {
        match self {
            EndCause::Connect => "connect",
            EndCause::ServerError => "server_error",
            EndCause::Io => "io",
            EndCause::Ended => "ended",
            EndCause::Stalled => "stalled",
            EndCause::Timeout => "timeout",
            EndCause::Unreadable => "unreadable",
            EndCause::Gap => "gap",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl BinlogError {
    /// `opened`: the dump request had been sent, so the failure is the stream's, not the
    /// connection attempt's.
    pub fn cause(&self, opened: bool) -> EndCause {
        match self {
            BinlogError::Timeout(_) => EndCause::Timeout,
            BinlogError::Gap(_) => EndCause::Gap,
            _ if !opened => EndCause::Connect,
            BinlogError::Upstream(mysql_async::Error::Server(_)) | BinlogError::Unavailable(_) => {
                EndCause::ServerError
            }
            BinlogError::Upstream(mysql_async::Error::Io(_)) => EndCause::Io,
            BinlogError::Upstream(_) | BinlogError::Panic(_) => EndCause::Unreadable,
            BinlogError::Stalled(_) => EndCause::Stalled,
            BinlogError::Ended | BinlogError::Standby => EndCause::Ended,
        }
    }
}

/// Where the tail stands, for logs, admin and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinlogStatus {
    /// Not connected yet.
    Starting,
    Connected,
    /// Lost the stream (or never got it in `on` mode), or replaying what it missed; the last
    /// error.
    Reconnecting(String),
    /// Disabled: by config, or by `auto` because the server cannot stream (the reason).
    Off(String),
    /// Not streaming because other instances of the fleet do (`l2.binlog_tails`): their
    /// heartbeats stand for the stream (see [`BinlogHandle::disconnected_for`]).
    Standby,
}

/// Heartbeats the server sends on an idle stream, so that a dead TCP connection is noticed.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// No event (heartbeats included) for this long means the stream is dead.
const STALL: Duration = Duration::from_secs(5);
/// Connecting, the checks and the dump request together.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How often, while a stream runs, the server's counters are asked on the witness: a
/// `RESET MASTER` under a stream that reads the first file leaves it waiting on the deleted
/// file with heartbeats flowing, so only this notices. It also keeps the witness from being
/// closed as idle (`wait_timeout`).
const WITNESS_CHECK: Duration = Duration::from_secs(1);
/// How often a lost witness is opened again while a stream runs.
const WITNESS_RETRY: Duration = Duration::from_secs(10);
/// How long one question to the witness may take.
const WITNESS_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A stream that lasted this long (and caught up) was healthy: the next loss retries at
/// [`BACKOFF_MIN`] again. Shorter lives keep doubling the wait, so a flapping stream backs off.
const STABLE: Duration = Duration::from_secs(10);
/// Resumes in a row that broke off before catching up, without moving forward, after which
/// the tail gives up the position and starts afresh (invalidating all): an event the server
/// cannot send, or the parser cannot read, would otherwise keep the tail replaying forever.
const MAX_FAILED_RESUMES: u32 = 2;
/// Prepared XA transactions whose tables are remembered until their XA COMMIT/ROLLBACK; past
/// this many the memory is dropped and such an end invalidates everything.
const MAX_PREPARED_XA: usize = 10_000;
/// `@mariadb_slave_capability`: MARIA_SLAVE_CAPABILITY_GTID (MariaDB 10.0+, still the newest
/// in 11.x). The server then sends GTID events as they are instead of rewriting them.
const MARIADB_CAPABILITY_GTID: u32 = 4;
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

/// Event types the tail reads by number: mysql_common knows MySQL's, not MariaDB's own.
mod event_type {
    pub const ROTATE: u8 = 4;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const INCIDENT: u8 = 26;
    pub const HEARTBEAT: u8 = 27;
    pub const TRANSACTION_PAYLOAD: u8 = 40;
    pub const MARIA_ANNOTATE_ROWS: u8 = 160;
    pub const MARIA_BINLOG_CHECKPOINT: u8 = 161;
    pub const MARIA_GTID: u8 = 162;
    pub const MARIA_GTID_LIST: u8 = 163;
    pub const MARIA_START_ENCRYPTION: u8 = 164;
    pub const MARIA_QUERY_COMPRESSED: u8 = 165;
    /// WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 (166–168) and v2 (169–171).
    pub const MARIA_ROWS_COMPRESSED: std::ops::RangeInclusive<u8> = 166..=171;
}

/// The server's error for a binlog it cannot read from the position asked for (purged,
/// missing, shorter) — and for events it cannot send.
const ER_MASTER_FATAL_ERROR_READING_BINLOG: u16 = 1236;

/// MariaDB GTID event flags (the byte after sequence number and domain id).
const FL_STANDALONE: u8 = 1;

/// What the tail task and its handle share.
struct TailShared {
    state: Mutex<State>,
    /// How far behind a connected stream is (`policy::lag`): fed by the stream's events and
    /// the probe of the server's binlog end.
    catch_up: Mutex<CatchUp>,
    /// `catch_up`'s time caught up as of (ms on `base`; u64::MAX: unknown), for the hit
    /// path, which takes no lock.
    as_of_ms: AtomicU64,
    /// The tail is off (`BinlogStatus::Off`): no bound to keep.
    off: AtomicBool,
    /// True while `state` has no `disconnected_since`: lets every cache lookup ask
    /// [`BinlogHandle::disconnected_for`] without taking the lock both workers would share.
    healthy: AtomicBool,
    connected: watch::Sender<bool>,
    commits: watch::Sender<u64>,
    events: AtomicU64,
    bumps: AtomicU64,
    reconnects: AtomicU64,
    /// Stream ends by [`EndCause`].
    ends: [AtomicU64; EndCause::ALL.len()],
    /// Reconnects that picked up where the last stream left off: nothing lost, nothing
    /// invalidated.
    resumes: AtomicU64,
    /// Fresh starts after a stream had run (position gone, another server, no position
    /// yet): each invalidated everything.
    gaps: AtomicU64,
    /// Milliseconds between an event's header timestamp (whole seconds) and its arrival;
    /// u64::MAX = none yet.
    last_event_lag_ms: AtomicU64,
    hist: [AtomicU64; HIST_BUCKETS],
    /// Commit events by header-timestamp lag (see [`COMMIT_LAG_BOUNDS_MS`]); the last is the
    /// overflow bucket.
    commit_lag: [AtomicU64; COMMIT_LAG_BUCKETS],
    commit_lag_sum_ms: AtomicU64,
    conn_id: AtomicU32,
    /// The witness connection's id, 0 while there is none (see [`Proof`]).
    witness_id: AtomicU32,
    /// Whether this instance should stream (false while a standby of the fleet's lease).
    want: watch::Sender<bool>,
    /// Set while a standby: [`BinlogHandle::disconnected_for`] then counts from the last
    /// tail heard, not from the own stream.
    standby: AtomicBool,
    /// Milliseconds after `base` when another instance's tail was last heard, or this
    /// instance became a standby, whichever is later.
    heard_ms: AtomicU64,
    /// The origin of the tail's millisecond clock, on [`crate::clock`].
    base: u64,
    /// Where the stream stands (file, offset of the last event after which nothing was
    /// pending): published in the tail's heartbeat.
    position: Mutex<Option<(String, u64)>>,
    /// Told the objects of every DDL the stream sees, so that standbys reload them too.
    on_ddl: Mutex<Option<DdlHook>>,
}

/// What the tail tells of each DDL it sees (installed by `shared`: L2 publishes it).
pub type DdlHook = Arc<dyn Fn(&Changed) + Send + Sync>;

struct State {
    status: BinlogStatus,
    disconnected_since: Option<Instant>,
}

/// The running tail. Dropping the last handle stops the task.
pub struct BinlogHandle {
    shared: Arc<TailShared>,
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
/// Its invalidations are counted in `stats` under [`InvalidationSource::Binlog`].
pub fn spawn(
    upstream_addr: String,
    cfg: InvalidationConfig,
    versions: Arc<Versions>,
    stats: Arc<CacheStats>,
    catalog: Arc<Catalog>,
    analyse: WriteAnalyser,
) -> Arc<BinlogHandle> {
    spawn_with(upstream_addr, cfg, versions, stats, catalog, analyse, true)
}

/// [`spawn`], streaming at once or starting as a standby (`stream_now` false: the fleet's
/// lease decides, through [`BinlogHandle::set_streaming`]).
pub fn spawn_with(
    upstream_addr: String,
    cfg: InvalidationConfig,
    versions: Arc<Versions>,
    stats: Arc<CacheStats>,
    catalog: Arc<Catalog>,
    analyse: WriteAnalyser,
    stream_now: bool,
) -> Arc<BinlogHandle> {
    let off = cfg.binlog == BinlogMode::Off;
    let standby = !off && !stream_now;
    let shared = Arc::new(TailShared {
        state: Mutex::new(State {
            status: if off {
                BinlogStatus::Off("invalidation.binlog = off".into())
            } else if standby {
                BinlogStatus::Standby
            } else {
                BinlogStatus::Starting
            },
            disconnected_since: (!off).then(Instant::now),
        }),
        healthy: AtomicBool::new(off),
        catch_up: Mutex::new(CatchUp::default()),
        as_of_ms: AtomicU64::new(u64::MAX),
        off: AtomicBool::new(off),
        connected: watch::Sender::new(false),
        commits: watch::Sender::new(0),
        events: AtomicU64::new(0),
        bumps: AtomicU64::new(0),
        reconnects: AtomicU64::new(0),
        ends: std::array::from_fn(|_| AtomicU64::new(0)),
        resumes: AtomicU64::new(0),
        gaps: AtomicU64::new(0),
        last_event_lag_ms: AtomicU64::new(u64::MAX),
        hist: std::array::from_fn(|_| AtomicU64::new(0)),
        commit_lag: std::array::from_fn(|_| AtomicU64::new(0)),
        commit_lag_sum_ms: AtomicU64::new(0),
        conn_id: AtomicU32::new(0),
        witness_id: AtomicU32::new(0),
        want: watch::Sender::new(!standby),
        standby: AtomicBool::new(standby),
        heard_ms: AtomicU64::new(0),
        base: crate::clock::now(),
        position: Mutex::new(None),
        on_ddl: Mutex::new(None),
    });
    let task = (!off).then(|| {
        let tail = Tail {
            shared: shared.clone(),
            opts: own_session_opts(&upstream_addr, &cfg),
            addr: upstream_addr,
            cfg,
            inv: Invalidator::new(versions, stats),
            catalog,
            analyse,
            txn: BinlogTxn::default(),
            warned_format: false,
            refreshing: Vec::new(),
            event_lag_ms: None,
            anchor: None,
            pos: Position::default(),
            ever_streamed: false,
            failed_resumes: 0,
            prepared: HashMap::new(),
            warned_types: HashSet::new(),
            server: ServerVersion::DEFAULT,
            witness: None,
            witness_tried: None,
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

    /// How long the stream has been down (or replaying what it missed); `None` while
    /// connected and caught up, and when the tail is off (then there is no binlog bound to
    /// keep and hits are served as without a tail).
    /// The session stops serving hits while this exceeds `invalidation.max_lag`.
    ///
    /// A standby has no stream of its own: the tails' heartbeats stand for it, so this is
    /// the time since a tail was last heard (or since it became a standby): the same rule,
    /// on the fleet's stream.
    pub fn disconnected_for(&self) -> Option<Duration> {
        if self.shared.healthy.load(Ordering::Acquire) {
            return None;
        }
        if self.shared.standby.load(Ordering::Acquire) {
            let heard = Duration::from_millis(self.shared.heard_ms.load(Ordering::Acquire));
            let now = Duration::from_millis(self.shared.now_ms());
            return Some(now.saturating_sub(heard));
        }
        let st = self.shared.lock();
        match st.status {
            BinlogStatus::Off(_) | BinlogStatus::Connected => None,
            _ => st.disconnected_since.map(|t| t.elapsed()),
        }
    }

    /// How far behind the server a connected, caught-up stream may be (`policy::lag`):
    /// None when unknown (no probe reached yet), and when the stream is not up (then
    /// [`BinlogHandle::disconnected_for`] is the bound).
    pub fn behind(&self) -> Option<Duration> {
        self.behind_at(crate::clock::now())
    }

    /// [`behind`](Self::behind) as of `now`.
    fn behind_at(&self, now: u64) -> Option<Duration> {
        match self.shared.as_of_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            t => {
                let now_ms = self.shared.ms_at(now);
                Some(Duration::from_millis(now_ms.saturating_sub(t)))
            }
        }
    }

    /// What the `max_lag` rule (`policy::lag::hits_stop`) is asked: down (or a standby
    /// hearing no tail) for how long, or streaming and behind by at most how much.
    pub fn lag(&self) -> TailLag {
        self.lag_at(crate::clock::now())
    }

    /// [`lag`](Self::lag) as of `now` (a [`crate::clock`] reading the caller already made).
    pub fn lag_at(&self, now: u64) -> TailLag {
        if let Some(d) = self.disconnected_for() {
            return TailLag::Down(d);
        }
        if self.shared.off.load(Ordering::Acquire) {
            return TailLag::Off;
        }
        TailLag::Behind(self.behind_at(now))
    }

    /// Events read, including heartbeats.
    pub fn events(&self) -> u64 {
        self.shared.events.load(Ordering::Relaxed)
    }

    /// Table bumps made (a bump_all counts one).
    pub fn bumps(&self) -> u64 {
        self.shared.bumps.load(Ordering::Relaxed)
    }

    /// Times the stream ended (or could not be opened) and the tail started over.
    pub fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    /// Stream ends by cause, every cause listed.
    pub fn ends(&self) -> Vec<(EndCause, u64)> {
        EndCause::ALL
            .iter()
            .map(|&c| (c, self.shared.ends[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Reconnects that resumed where the last stream left off (nothing invalidated).
    pub fn resumes(&self) -> u64 {
        self.shared.resumes.load(Ordering::Relaxed)
    }

    /// Times the tail had to start afresh after having streamed, invalidating everything.
    pub fn gaps(&self) -> u64 {
        self.shared.gaps.load(Ordering::Relaxed)
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

    /// The server's connection id of the tail's witness connection, while it has one.
    pub fn witness_connection_id(&self) -> Option<u32> {
        match self.shared.witness_id.load(Ordering::Relaxed) {
            0 => None,
            id => Some(id),
        }
    }

    /// Streams (true) or stands by (false): the fleet's lease (`l2::tails`) decides. A
    /// stream stopped here is started afresh next time (the gap rule decides what that
    /// costs): its witness connection is closed with it, so no position survives.
    pub fn set_streaming(&self, on: bool) {
        self.shared.want.send_if_modified(|w| {
            let changed = *w != on;
            *w = on;
            changed
        });
    }

    /// Whether this instance is meant to stream now.
    pub fn streaming_wanted(&self) -> bool {
        *self.shared.want.borrow()
    }

    /// Another instance's tail was heard (its heartbeat on the channel), saying it was
    /// `behind` the server at most (`policy::lag`): the fleet's stream counts as heard as
    /// of that much before now, so that a standby stops serving hits once the tail it hears
    /// is more than `max_lag` behind, as that tail does.
    pub fn heard(&self, behind: Duration) {
        let now = self.shared.now_ms();
        let at = now.saturating_sub(behind.as_millis() as u64);
        self.shared.heard_ms.fetch_max(at, Ordering::AcqRel);
    }

    /// The stream's position (file, offset), for the heartbeat.
    pub fn position(&self) -> Option<(String, u64)> {
        self.shared
            .position
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Installs what the tail tells of each DDL it sees.
    pub fn on_ddl(&self, hook: DdlHook) {
        *self.shared.on_ddl.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Whether the tail is off for good (config, or `auto` without a usable binlog).
    pub fn is_off(&self) -> bool {
        matches!(self.status(), BinlogStatus::Off(_))
    }

    /// Waits until the stream is up and caught up; false on timeout or when the tail is off.
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

impl TailShared {
    /// Milliseconds on the tail's clock (`base`).
    fn now_ms(&self) -> u64 {
        self.ms_at(crate::clock::now())
    }

    /// `at` (a [`crate::clock`] reading) in milliseconds on the tail's clock.
    fn ms_at(&self, at: u64) -> u64 {
        crate::clock::between(self.base, at) / 1_000_000
    }

    /// Changes what the tail knows of its lag, and publishes it to the hit path.
    fn catch_up(&self, f: impl FnOnce(&mut CatchUp)) {
        let mut c = self.catch_up.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut c);
        self.as_of_ms
            .store(c.as_of().unwrap_or(u64::MAX), Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stands by: the heartbeat clock starts now, so a standby that hears nobody stops
    /// serving hits after `max_lag`, as a tail whose stream broke does.
    fn set_standby(&self) {
        {
            let mut st = self.lock();
            self.off.store(false, Ordering::Release);
            st.status = BinlogStatus::Standby;
            st.disconnected_since = Some(Instant::now());
            let now = self.now_ms();
            self.heard_ms.fetch_max(now, Ordering::AcqRel);
            self.standby.store(true, Ordering::Release);
            self.healthy.store(false, Ordering::Release);
        }
        self.conn_id.store(0, Ordering::Relaxed);
        *self.position.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.connected.send_replace(false);
    }

    fn set_connected(&self) {
        {
            let mut st = self.lock();
            self.off.store(false, Ordering::Release);
            self.standby.store(false, Ordering::Release);
            st.status = BinlogStatus::Connected;
            st.disconnected_since = None;
            self.healthy.store(true, Ordering::Release);
        }
        self.connected.send_replace(true);
    }

    fn set_disconnected(&self, why: String) {
        {
            let mut st = self.lock();
            self.off.store(false, Ordering::Release);
            self.standby.store(false, Ordering::Release);
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
            self.off.store(true, Ordering::Release);
            self.healthy.store(true, Ordering::Release);
        }
        self.conn_id.store(0, Ordering::Relaxed);
        self.connected.send_replace(false);
    }
}

/// The tail's invalidation of `what`.
fn binlog(what: Vec<What>) -> Invalidation {
    Invalidation::new(Source::Here(InvalidationSource::Binlog), what)
}

/// What the current transaction changed so far.
#[derive(Default)]
struct BinlogTxn {
    tables: HashSet<TableName>,
    /// What the row images say of each table's rows (granularity row).
    rows: HashMap<TableName, RowsSeen>,
    /// Statements the analyser could not read, by default schema.
    unknown_schemas: HashSet<String>,
    /// A row event whose table map was missing, or an unreadable event.
    unknown_all: bool,
    /// Tables with update or delete row events: rows that may have moved, whose parent
    /// mappings (`cache::fkmap`) go before anything is bumped.
    moved: HashSet<TableName>,
    /// Inside an event group: BEGIN or a MariaDB GTID event (not standalone) up to its
    /// XID / COMMIT / XA PREPARE.
    open: bool,
}

/// The row images of one table in a transaction, per column: the keys of the values they
/// hold (`analysis::slices::normalize`), or that some image lacked or could not map it.
#[derive(Default)]
struct RowsSeen {
    keys: HashMap<String, Vec<String>>,
    unknown_columns: HashSet<String>,
    /// Nothing is known of the rows (an image qcache could not read, too many rows, a
    /// table the catalog does not describe like the image does).
    unknown: bool,
    images: usize,
    /// Columns some UPDATE row changed: its before and after images differ there, or one
    /// of them lacks it.
    changed: HashSet<String>,
    /// A row inserted or deleted (or not read as an update): the changes are not only
    /// `changed`'s columns.
    not_update: bool,
}

/// Beyond this many row images per table and transaction, the table is bumped whole.
const MAX_IMAGES: usize = 10_000;

impl RowsSeen {
    fn give_up(&mut self) {
        self.unknown = true;
        self.keys = HashMap::new();
        self.unknown_columns = HashSet::new();
        self.not_update = true;
    }

    /// When every row was an update and the images were read: the columns that changed.
    fn changed_columns(&self) -> Option<Vec<String>> {
        if self.unknown || self.not_update {
            return None;
        }
        let mut c: Vec<String> = self.changed.iter().cloned().collect();
        c.sort();
        Some(c)
    }

    /// The columns whose every image named the value.
    fn known(&self) -> Option<Vec<(String, Vec<String>)>> {
        if self.unknown {
            return None;
        }
        Some(
            self.keys
                .iter()
                .filter(|(c, _)| !self.unknown_columns.contains(*c))
                .map(|(c, k)| {
                    let mut k = k.clone();
                    k.sort();
                    k.dedup();
                    (c.clone(), k)
                })
                .collect(),
        )
    }
}

/// Folds the row images of `rows` into `seen`, for the sliceable columns of `cols`.
fn fold_images(
    seen: &mut RowsSeen,
    rows: &mysql_async::binlog::events::RowsEventData<'_>,
    tme: &mysql_async::binlog::events::TableMapEvent<'_>,
    cols: &[(String, ColumnInfo)],
) {
    use mysql_async::binlog::value::BinlogValue;
    if cols.len() as u64 != tme.columns_count() {
        // The catalog and the server disagree on the table's shape (a DDL in flight).
        seen.give_up();
        return;
    }
    for row in rows.rows(tme) {
        let Ok((before, after)) = row else {
            seen.give_up();
            return;
        };
        match (&before, &after) {
            (Some(b), Some(a)) => {
                let (pb, pa) = (image_positions(b, cols), image_positions(a, cols));
                for (i, (name, _)) in cols.iter().enumerate() {
                    let vb = pb.get(&i).and_then(|k| b.as_ref(*k));
                    let va = pa.get(&i).and_then(|k| a.as_ref(*k));
                    let same = match (vb, va) {
                        (Some(BinlogValue::Value(x)), Some(BinlogValue::Value(y))) => {
                            same_value(x, y)
                        }
                        // Missing (MINIMAL / NOBLOB images), JSON diffs: unknown, changed.
                        _ => false,
                    };
                    if !same {
                        seen.changed.insert(name.clone());
                    }
                }
            }
            _ => seen.not_update = true,
        }
        for img in [before, after].into_iter().flatten() {
            seen.images += 1;
            if seen.images > MAX_IMAGES {
                seen.give_up();
                return;
            }
            let at = image_positions(&img, cols);
            for (i, (name, info)) in cols.iter().enumerate() {
                if !info.ty.sliceable() {
                    continue;
                }
                let key = at
                    .get(&i)
                    .filter(|_| image_family_ok(tme, i, &info.ty))
                    .and_then(|k| img.as_ref(*k))
                    .and_then(|v| match v {
                        BinlogValue::Value(v) => image_key(&info.ty, v),
                        _ => None,
                    });
                match key {
                    // None for NULL: in no slice.
                    Some(k) => seen.keys.entry(name.clone()).or_default().extend(k),
                    None => {
                        seen.unknown_columns.insert(name.clone());
                    }
                }
            }
        }
    }
}

/// Whether the server logged column `i` in the type family the catalog says: else the key
/// read from its image would be wrong.
fn image_family_ok(
    tme: &mysql_async::binlog::events::TableMapEvent<'_>,
    i: usize,
    ty: &ColType,
) -> bool {
    use mysql_async::consts::ColumnType as T;
    let Ok(Some(t)) = tme.get_column_type(i) else {
        return false;
    };
    match ty {
        ColType::Int { .. } => matches!(
            t,
            T::MYSQL_TYPE_TINY
                | T::MYSQL_TYPE_SHORT
                | T::MYSQL_TYPE_INT24
                | T::MYSQL_TYPE_LONG
                | T::MYSQL_TYPE_LONGLONG
        ),
        ColType::Str { .. } => matches!(
            t,
            T::MYSQL_TYPE_VARCHAR | T::MYSQL_TYPE_VAR_STRING | T::MYSQL_TYPE_STRING
        ),
        ColType::Temporal {
            date_only: true, ..
        } => matches!(t, T::MYSQL_TYPE_DATE | T::MYSQL_TYPE_NEWDATE),
        ColType::Temporal {
            date_only: false, ..
        } => matches!(t, T::MYSQL_TYPE_DATETIME | T::MYSQL_TYPE_DATETIME2),
        ColType::Decimal { .. } | ColType::Other => false,
    }
}

/// The catalog ordinal of each value an image carries (ordinal → index in the image): `@i`
/// names, or the real names when the server logs them (binlog_row_metadata = FULL).
fn image_positions(
    img: &mysql_async::binlog::row::BinlogRow,
    cols: &[(String, ColumnInfo)],
) -> HashMap<usize, usize> {
    let mut at: HashMap<usize, usize> = HashMap::new();
    for (k, c) in img.columns_ref().iter().enumerate() {
        let name = c.name_str();
        let i = match name.strip_prefix('@').and_then(|n| n.parse::<usize>().ok()) {
            Some(i) => Some(i),
            None => cols.iter().position(|(n, _)| *n == name.to_lowercase()),
        };
        if let Some(i) = i {
            at.insert(i, k);
        }
    }
    at
}

/// Whether two values of one column in a before and an after image are the same stored
/// value: byte for byte (floats by their bits: -0 and 0 differ to a reader).
fn same_value(a: &mysql_async::Value, b: &mysql_async::Value) -> bool {
    use mysql_async::Value as V;
    match (a, b) {
        (V::Float(x), V::Float(y)) => x.to_bits() == y.to_bits(),
        (V::Double(x), V::Double(y)) => x.to_bits() == y.to_bits(),
        (V::Float(_) | V::Double(_), _) | (_, V::Float(_) | V::Double(_)) => false,
        _ => a == b,
    }
}

/// The slice keys of a value in a row image (one, or a temporal value's calendar buckets):
/// none for NULL, None when unmappable.
fn image_key(ty: &ColType, v: &mysql_async::Value) -> Option<Vec<String>> {
    use mysql_async::Value as V;
    let lit = match v {
        V::NULL => return Some(Vec::new()),
        // A DATE or DATETIME image: its calendar buckets, as a statement writing it names
        // them (`analysis::slices::temporal_keys`). Zero dates and zero parts are in none.
        V::Date(y, m, d, ..) if matches!(ty, ColType::Temporal { .. }) => {
            return temporal_day(*y, *m, *d).map(temporal_keys);
        }
        V::Int(n) => {
            let mut n = i128::from(*n);
            // Without signedness metadata an unsigned column's high values arrive negative.
            if let ColType::Int { min: 0, max } = ty {
                if n < 0 {
                    n += max + 1;
                }
            }
            Lit::Int(n.to_string())
        }
        V::UInt(n) => Lit::Int(n.to_string()),
        V::Bytes(b) if !matches!(ty, ColType::Temporal { .. }) => {
            Lit::Str(String::from_utf8(b.clone()).ok()?)
        }
        _ => return None,
    };
    normalize(ty, &lit).map(|k| vec![k])
}

/// What proves that a position read from the server still means the same history there:
/// taken when a stream is opened, kept with each anchor it gives, checked at reconnect.
///
/// File name, offset and format description are not enough. A fresh server on the same
/// address (a new container, a re-created datadir) or a `RESET MASTER` while the tail is away
/// writes a file of the same name, and the same statements give it the same offsets; the
/// format description's timestamp is a whole second, and the session's (`SET TIMESTAMP`
/// moves it), so it can match too. What cannot be forged is a connection: the tail keeps a
/// second one open, the *witness*, holding a user lock with a random name, and a reconnect
/// resumes only when the server answering says that this very connection holds it (the same
/// process, whatever the clocks say) and that no `RESET` ran since (`Com_reset`, which only
/// grows in one process). A restart, even one that kept its binlog, therefore invalidates
/// everything, as a server restart empties MariaDB's own query cache.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proof {
    /// The witness's user lock, and the connection id that holds it.
    lock: String,
    holder: u32,
    /// The server's counters when the stream was opened.
    counters: Counters,
}

/// The server's global counters that move when its binlog history may have been replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counters {
    /// `Com_reset`: RESET statements run (RESET MASTER among them, however issued: prepared,
    /// EXECUTE IMMEDIATE, in a procedure or an event). It only grows in one process: FLUSH
    /// STATUS leaves it (checked on MariaDB 10.11).
    resets: u64,
}

/// Reads [`Counters`]; `None` when the server does not give them.
async fn counters(conn: &mut Conn) -> Option<Counters> {
    let row: Option<(String, String)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_reset'")
        .await
        .ok()?;
    Some(Counters {
        resets: row?.1.trim().parse::<u64>().ok()?,
    })
}

/// The connection id holding `lock` on the server behind `conn`, if any.
async fn lock_holder(conn: &mut Conn, lock: &str) -> Option<u32> {
    conn.exec_first::<Option<u32>, _, _>("SELECT IS_USED_LOCK(?)", (lock,))
        .await
        .ok()
        .flatten()
        .flatten()
}

/// The witness connection of [`Proof`]: holding its lock, asked the server's counters every
/// [`WITNESS_CHECK`] while a stream runs.
struct Witness {
    conn: Conn,
    lock: String,
    checked: Instant,
}

impl Witness {
    async fn open(opts: &Opts) -> Result<Witness, String> {
        let mut conn = Conn::new(opts.clone()).await.map_err(|e| e.to_string())?;
        let lock = format!(
            "qcache-binlog-witness-{:016x}{:016x}",
            random_id(),
            random_id()
        );
        let got: Option<Option<i64>> = conn
            .exec_first("SELECT GET_LOCK(?, 0)", (&lock,))
            .await
            .map_err(|e| e.to_string())?;
        if got.flatten() != Some(1) {
            return Err(format!("GET_LOCK('{lock}', 0) did not return 1"));
        }
        Ok(Witness {
            conn,
            lock,
            checked: Instant::now(),
        })
    }

    fn id(&self) -> u32 {
        self.conn.id()
    }
}

/// Whether the history an anchor was read from is the one the server answering now holds:
/// `held_by` is who holds the anchor's witness lock there, `now` its counters.
fn same_history(anchor: &Proof, held_by: Option<u32>, now: Option<Counters>) -> Result<(), String> {
    if held_by != Some(anchor.holder) {
        return Err(
            "the server process the position was read from is gone (it restarted, or another \
             server answers on the address)"
                .into(),
        );
    }
    no_reset_since(anchor.counters, now)
}

/// Whether the server's counters say no RESET ran between `then` and `now` (None: unknown).
fn no_reset_since(then: Counters, now: Option<Counters>) -> Result<(), String> {
    match now {
        Some(c) if c == then => Ok(()),
        Some(c) => Err(format!(
            "RESET ran on the server since (Com_reset {} → {}): the binlog may have been reset",
            then.resets, c.resets
        )),
        None => Err("the server does not give its RESET count".into()),
    }
}

/// The identity of one event, to recognise it when the server sends it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EventId {
    kind: u8,
    timestamp: u32,
    server_id: u32,
    log_pos: u32,
    size: u32,
    /// xxh3 of the event body (checksum excluded).
    body: u64,
}

impl EventId {
    fn of(e: &Event) -> EventId {
        let h = e.header();
        EventId {
            kind: h.event_type_raw(),
            timestamp: h.timestamp(),
            server_id: h.server_id(),
            log_pos: h.log_pos(),
            size: h.event_size(),
            body: xxhash_rust::xxh3::xxh3_64(e.data()),
        }
    }

    /// A binlog file's format description: what it says and when it was written, without
    /// the parts the server changes when it sends it (position, in-use flag, and the
    /// "created" field it zeroes when a dump starts past the file's first event).
    fn of_fde(e: &Event) -> EventId {
        let h = e.header();
        let mut body = e.data().to_vec();
        // binlog version (2) + server version (50), then created (4).
        if let Some(created) = body.get_mut(52..56) {
            created.fill(0);
        }
        EventId {
            kind: h.event_type_raw(),
            timestamp: h.timestamp(),
            server_id: h.server_id(),
            log_pos: 0,
            size: 0,
            body: xxhash_rust::xxh3::xxh3_64(&body),
        }
    }
}

/// The server the tail streams from, as far as it tells: a position means nothing on another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServerId {
    server_id: u64,
    /// MySQL's @@server_uuid; MariaDB has none.
    uuid: Option<String>,
}

/// Where a lost stream resumes: just before an event after which nothing was pending, or at
/// the position a stream was started from (then only the file's format description is
/// checked).
#[derive(Debug, Clone)]
struct Anchor {
    file: String,
    /// The offset to ask for.
    offset: u64,
    /// The format description of `file`, which the server sends first.
    fde: EventId,
    /// The event at `offset`, already applied: the first real event the server sends back
    /// must be this one (then it is skipped).
    last: Option<EventId>,
    server: ServerId,
    /// `None` when the stream had no witness: the anchor cannot be resumed.
    proof: Option<Proof>,
}

/// The stream's place in the server's binlog.
#[derive(Debug, Default)]
struct Position {
    /// The file the stream is reading (from ROTATE events).
    file: String,
    /// End offset of the last event read in `file`, to tell real positions from events
    /// that carry none (artificial ones, those inside a compressed transaction payload).
    end: u64,
    /// The format description of `file`, once seen.
    fde: Option<EventId>,
    /// The offset this dump was asked for, until the stream moves to the next file.
    requested: Option<u64>,
    server: Option<ServerId>,
    proof: Option<Proof>,
    /// The server's counters when this stream was opened, for [`Tail::check_witness`].
    counters: Option<Counters>,
}

/// What became of one connection, for the decision after it ends.
#[derive(Debug, Default)]
struct Life {
    /// The dump request was sent.
    opened: bool,
    /// An event arrived.
    streamed: bool,
    /// It was asked to resume from the anchor.
    resuming: bool,
    /// The server sent the anchor back: nothing was lost.
    verified: bool,
    /// The replay reached the server's position at reconnect.
    caught_up: bool,
    /// The anchor moved during this stream.
    advanced: bool,
    /// When (ms on the tail's clock) SHOW MASTER STATUS was about to be asked for the
    /// stream's target: reaching the target is being caught up as of then.
    asked_ms: u64,
}

/// The dump the server accepted.
struct Opened {
    stream: BinlogStream,
    /// SHOW MASTER STATUS when the stream was asked for: once the stream reaches it, the
    /// tail has seen everything committed before it reconnected.
    target: (String, u64),
}

/// The task's state.
struct Tail {
    shared: Arc<TailShared>,
    opts: Opts,
    addr: String,
    cfg: InvalidationConfig,
    /// The entry point every bump of the tail goes through.
    inv: Invalidator,
    catalog: Arc<Catalog>,
    analyse: WriteAnalyser,
    txn: BinlogTxn,
    warned_format: bool,
    /// Catalog reloads started by DDL and not yet finished.
    refreshing: Vec<tokio::task::JoinHandle<()>>,
    /// Header timestamp vs arrival of the event being handled, when it has a timestamp.
    event_lag_ms: Option<u64>,
    /// Where the next stream resumes; `None` = start afresh at the server's end.
    anchor: Option<Anchor>,
    pos: Position,
    /// A stream has run before: a fresh start from now on is a gap.
    ever_streamed: bool,
    /// See [`MAX_FAILED_RESUMES`].
    failed_resumes: u32,
    /// Tables of XA transactions prepared and not yet committed or rolled back, by xid.
    prepared: HashMap<String, HashSet<TableName>>,
    /// Unknown event types already warned about.
    warned_types: HashSet<u8>,
    /// The server streamed from: which executable comments in its statements it ran.
    server: ServerVersion,
    /// See [`Proof`]: kept across streams while the server says it still holds its lock.
    witness: Option<Witness>,
    /// When a lost witness was last opened again, see [`Tail::check_witness`].
    witness_tried: Option<Instant>,
}

impl Tail {
    async fn run(mut self) {
        let mut backoff = BACKOFF_MIN;
        // In `auto` mode the first answer decides: a server that cannot stream turns the tail
        // off. Once it has streamed, losing it is a failure to retry, as in `on` mode.
        let mut decided = self.cfg.binlog == BinlogMode::On;
        let mut want = self.shared.want.subscribe();
        loop {
            if !*want.borrow_and_update() {
                self.stand_by(&mut want).await;
            }
            let mut life = Life::default();
            let started = Instant::now();
            let err = self.stream(&mut life).await;
            // A half-read transaction is replayed on resume, or covered by the fresh start's
            // bump_all.
            self.txn = BinlogTxn::default();
            if matches!(err, BinlogError::Standby) {
                // Handed over, not lost: the next stream starts afresh (`stand_by`).
                continue;
            }
            if life.streamed {
                decided = true;
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
            let cause = err.cause(life.opened);
            self.shared.set_disconnected(err.to_string());
            self.shared.reconnects.fetch_add(1, Ordering::Relaxed);
            self.shared.ends[cause.index()].fetch_add(1, Ordering::Relaxed);
            let (next, gap) = self.after_end(&err, &life);
            if life.caught_up && started.elapsed() >= STABLE {
                backoff = BACKOFF_MIN;
            }
            // A gap is decided (and invalidated): start afresh at once.
            let wait = if gap { Duration::ZERO } else { backoff };
            tracing::warn!(upstream = %self.addr, cause = cause.label(), error = %err, retry_in = ?wait, "binlog stream ended; {next}");
            tokio::time::sleep(wait).await;
            if !wait.is_zero() {
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    /// While the fleet's lease gives the stream to others: no position is kept (the witness
    /// closes with the stream, so none could be proved later), and the next stream starts
    /// afresh, under the gap rule (L2 decides whether another tail covered the gap).
    async fn stand_by(&mut self, want: &mut watch::Receiver<bool>) {
        self.anchor = None;
        self.set_witness(None);
        self.pos = Position::default();
        self.failed_resumes = 0;
        self.shared.set_standby();
        tracing::info!(upstream = %self.addr, "binlog: standby; other instances stream");
        if want.wait_for(|w| *w).await.is_err() {
            // The handle is gone: so is the tail.
            std::future::pending::<()>().await;
        }
        self.shared
            .set_disconnected("starting: this instance streams for the fleet".into());
    }

    /// Decides where the next stream starts after one ended; invalidates everything when
    /// the events since the anchor cannot be had. Returns what happens next, for the log,
    /// and whether it was such a gap.
    fn after_end(&mut self, err: &BinlogError, life: &Life) -> (String, bool) {
        if let Some(why) = gap_after(err, life, &mut self.failed_resumes) {
            let broken = self
                .inv
                .versions()
                .faults
                .on(crate::faults::Fault::BinlogGaps);
            if self.anchor.take().is_some() && !broken {
                // Entries may be stale from here on: do not wait for the fresh start.
                self.inv.apply(&binlog(vec![What::Everything]));
                self.shared.bumps.fetch_add(1, Ordering::Relaxed);
            }
            let next = format!("cannot resume ({why}): everything invalidated, starting afresh");
            return (next, true);
        }
        let next = match &self.anchor {
            Some(a) => format!("resuming from {}:{}", a.file, a.offset),
            None if self.ever_streamed => {
                "no position to resume from: starting afresh, invalidating everything".into()
            }
            None => "retrying".into(),
        };
        (next, false)
    }

    /// One connection's life: returns why it ended.
    async fn stream(&mut self, life: &mut Life) -> BinlogError {
        life.asked_ms = self.shared.now_ms();
        self.shared.catch_up(CatchUp::reset);
        // A server that accepts the connection but never answers must not park the tail.
        let Opened { mut stream, target } =
            match tokio::time::timeout(OPEN_TIMEOUT, self.open(life)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return e,
                Err(_) => return BinlogError::Timeout(OPEN_TIMEOUT),
            };
        life.opened = true;
        // Asks the server's binlog end every `policy::lag::probe_every`, for as long as this
        // stream lives.
        let _probe = AbortOnDrop(tokio::spawn(probe(
            self.opts.clone(),
            self.shared.clone(),
            crate::policy::lag::probe_every(self.cfg.max_lag),
        )));
        let resume = if life.resuming {
            self.anchor.clone()
        } else {
            None
        };
        // Before the anchor is confirmed, events only prove the position.
        let mut fde_seen = false;
        let mut want = self.shared.want.subscribe();
        loop {
            // mysql_common unwraps some reads of event bytes: a panic there must end this
            // stream, not the task (which would leave the tail "connected" forever).
            let next = tokio::select! {
                biased;
                _ = want.wait_for(|w| !*w) => return BinlogError::Standby,
                n = tokio::time::timeout(STALL, AssertUnwindSafe(stream.next()).catch_unwind()) => n,
            };
            let event = match next {
                Err(_) => return BinlogError::Stalled(STALL),
                Ok(Err(panic)) => return BinlogError::Panic(panic_text(&panic)),
                Ok(Ok(None)) => return BinlogError::Ended,
                Ok(Ok(Some(Err(e)))) => {
                    return if !self.ever_streamed {
                        unavailable_if_denied(
                            e,
                            "the user cannot read the binlog (needs REPLICATION SLAVE)",
                        )
                    } else {
                        e.into()
                    }
                }
                Ok(Ok(Some(Ok(ev)))) => ev,
            };
            if self
                .inv
                .versions()
                .faults
                .on(crate::faults::Fault::SlowBinlog)
            {
                tokio::time::sleep(crate::faults::SLOW_BINLOG_EVENT).await;
            }
            let arrived = Instant::now();
            self.shared.events.fetch_add(1, Ordering::Relaxed);
            if let Some(why) = self.check_witness().await {
                return BinlogError::Gap(why);
            }
            if !life.streamed {
                life.streamed = true;
                if resume.is_none() {
                    self.connected_fresh(&target, life);
                }
            }
            if let (Some(anchor), false) = (&resume, life.verified) {
                if let Err(gap) = self
                    .verify_resume(&event, anchor, &mut fde_seen, &target, life)
                    .await
                {
                    return gap;
                }
                continue;
            }
            let file_before = (!life.caught_up).then(|| self.pos.file.clone());
            if let Some((ddl, seq)) = self.on_event(&event, &stream, arrived).await {
                self.after_ddl(ddl, seq);
            }
            if self.after_event(&event) {
                life.advanced = true;
            }
            if life.caught_up && !self.txn.open {
                let at = (self.pos.file.clone(), self.pos.end);
                self.shared.catch_up(|c| c.applied(at));
            }
            if let Some(file) = file_before {
                if reached(&event, &file, &target) {
                    self.caught_up(life);
                }
            }
        }
    }

    /// The first event of a stream that does not resume: everything before the position it
    /// starts from happened while no tail was watching, so it is all invalidated before
    /// anyone is told the tail is connected.
    fn connected_fresh(&mut self, target: &(String, u64), life: &mut Life) {
        // After a stream that ran, a privilege change among what was missed too
        // (`PrivilegeChange::missed`); before the first, the sessions there are were as
        // new as any (a direct change then is as unseen as one with no tail).
        let mut what = vec![What::Gap];
        if self.ever_streamed {
            what.push(What::Privileges(
                crate::policy::privileges::PrivilegeChange::missed(),
            ));
        }
        self.inv.apply(&binlog(what));
        self.shared.bumps.fetch_add(1, Ordering::Relaxed);
        if self.ever_streamed {
            self.shared.gaps.fetch_add(1, Ordering::Relaxed);
        }
        self.ever_streamed = true;
        life.caught_up = true;
        // It starts at the server's end as asked before the dump.
        self.shared
            .catch_up(|c| c.caught_up(life.asked_ms, target.clone()));
        self.shared.set_connected();
        tracing::info!(upstream = %self.addr, server_id = self.cfg.server_id, file = %target.0, offset = target.1, "binlog stream connected");
    }

    /// A resumed stream's events until its anchor is verified: the server first sends a
    /// fake ROTATE naming the file, then the file's format description, then the events
    /// from the offset asked for, the first of which must be the anchor itself (applied
    /// before the loss). Ok: this event is consumed by the check; Err: the gap it found.
    async fn verify_resume(
        &mut self,
        event: &Event,
        anchor: &Anchor,
        fde_seen: &mut bool,
        target: &(String, u64),
        life: &mut Life,
    ) -> Result<(), BinlogError> {
        match event.header().event_type_raw() {
            event_type::ROTATE => {
                self.track_rotate(event);
                return Ok(());
            }
            event_type::FORMAT_DESCRIPTION if !*fde_seen => {
                *fde_seen = true;
                let id = EventId::of_fde(event);
                if self.pos.file != anchor.file || id != anchor.fde {
                    return Err(BinlogError::Gap(format!(
                        "{}:{} holds other events now (the binlog was reset, or this is another server)",
                        anchor.file, anchor.offset
                    )));
                }
                self.pos.fde = Some(id);
                if anchor.last.is_some() {
                    return Ok(());
                }
                // Resuming at a stream's starting point: the file is the same one.
            }
            _ if !*fde_seen || !is_real(event) => return Ok(()),
            _ => {
                if Some(EventId::of(event)) != anchor.last {
                    return Err(BinlogError::Gap(format!(
                        "the event at {}:{} is not the one last applied (the binlog was \
                         reset, or this is another server)",
                        anchor.file, anchor.offset
                    )));
                }
                self.pos.end = u64::from(event.header().log_pos());
            }
        }
        // A RESET between the check at reconnect and the dump request would not have been
        // seen there; the witness is in the same process, so ask again.
        if let Some(proof) = &anchor.proof {
            let now = self.witness_counters().await.ok().flatten();
            no_reset_since(proof.counters, now).map_err(BinlogError::Gap)?;
        }
        life.verified = true;
        self.ever_streamed = true;
        self.shared.resumes.fetch_add(1, Ordering::Relaxed);
        tracing::info!(upstream = %self.addr, file = %anchor.file, offset = anchor.offset, "binlog stream resumed where it left off; replaying what came after");
        self.check_caught_up(event, target, life);
        Ok(())
    }

    /// After the anchor came back: the stream stands at the anchor's end.
    fn check_caught_up(&mut self, event: &Event, target: &(String, u64), life: &mut Life) {
        let at = position_reached(&self.pos.file, self.pos.end, target);
        if !life.caught_up && (at || reached(event, &self.pos.file.clone(), target)) {
            self.caught_up(life);
        }
    }

    fn caught_up(&mut self, life: &mut Life) {
        life.caught_up = true;
        let at = (self.pos.file.clone(), self.pos.end);
        self.shared.catch_up(|c| c.caught_up(life.asked_ms, at));
        self.shared.set_connected();
        tracing::info!(upstream = %self.addr, "binlog stream caught up");
    }

    /// Keeps the stream's file name: a real ROTATE names the file the next events come from.
    /// The fake one at the start of a dump names the file asked for, which we know; its name
    /// is not used, because it arrives before the format description says events carry a
    /// checksum, so mysql_common leaves the checksum's 4 bytes on the end of the name.
    fn track_rotate(&mut self, event: &Event) {
        if !is_real(event) {
            return;
        }
        if let Ok(Some(EventData::RotateEvent(r))) = event.read_data() {
            self.pos.fde = None;
            self.pos.file = r.name().into_owned();
            self.pos.end = r.position();
            self.pos.requested = None;
        }
    }

    /// Tracks the position after an event was applied, and moves the anchor to it when
    /// nothing is pending. True when the anchor moved.
    fn after_event(&mut self, event: &Event) -> bool {
        let h = event.header();
        let kind = h.event_type_raw();
        if kind == event_type::ROTATE {
            // The rotate itself was applied; the next file's format description comes next
            // and becomes the anchor.
            self.track_rotate(event);
            return false;
        }
        if kind == event_type::FORMAT_DESCRIPTION {
            let id = EventId::of_fde(event);
            self.pos.fde = Some(id);
            // Resuming here sends this description, then the events after it.
            let offset = match self.pos.requested {
                Some(o) if !is_real(event) => o,
                _ => 4,
            };
            if self.txn.open {
                return false;
            }
            return self.set_anchor(offset, None);
        }
        if !is_real(event) || kind == event_type::TRANSACTION_PAYLOAD {
            return false;
        }
        let end = u64::from(h.log_pos());
        let size = u64::from(h.event_size());
        let Some(start) = end.checked_sub(size) else {
            return false;
        };
        // Events inside a compressed transaction payload, or out of order, carry no position
        // of their own.
        if start < self.pos.end {
            return false;
        }
        self.pos.end = end;
        if self.txn.open {
            return false;
        }
        self.set_anchor(start, Some(EventId::of(event)))
    }

    fn set_anchor(&mut self, offset: u64, last: Option<EventId>) -> bool {
        let (Some(fde), Some(server)) = (self.pos.fde, self.pos.server.clone()) else {
            return false;
        };
        if self.pos.file.is_empty() {
            return false;
        }
        *self
            .shared
            .position
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((self.pos.file.clone(), offset));
        self.anchor = Some(Anchor {
            file: self.pos.file.clone(),
            offset,
            fde,
            last,
            server,
            proof: self.pos.proof.clone(),
        });
        true
    }

    /// Checks the server can stream (binary logging on; a warning unless it is in ROW
    /// format) and reads who it is: its ids, and whether it is MariaDB.
    async fn server_of(&mut self, conn: &mut Conn) -> Result<(ServerId, bool), BinlogError> {
        let row: Option<Row> = conn
            .query_first(
                "SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, @@GLOBAL.server_id, @@version",
            )
            .await?;
        let (log_bin, format, server_id, version) = match row {
            Some(mut r) => (
                r.take_opt::<Option<i64>, _>(0)
                    .and_then(|v| v.ok())
                    .flatten(),
                r.take_opt::<Option<String>, _>(1)
                    .and_then(|v| v.ok())
                    .flatten(),
                r.take_opt::<Option<u64>, _>(2)
                    .and_then(|v| v.ok())
                    .flatten(),
                r.take_opt::<Option<String>, _>(3)
                    .and_then(|v| v.ok())
                    .flatten(),
            ),
            None => (None, None, None, None),
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
        if let Some(v) = &version {
            self.server = ServerVersion::from_greeting(v);
        }
        let mariadb = version.as_deref().unwrap_or("").contains("MariaDB");
        let uuid = if mariadb {
            None
        } else {
            conn.query_first::<Option<String>, _>("SELECT @@GLOBAL.server_uuid")
                .await
                .ok()
                .flatten()
                .flatten()
        };
        let server = ServerId {
            server_id: server_id.unwrap_or(0),
            uuid,
        };
        Ok((server, mariadb))
    }

    /// Connects, checks the server can stream, and asks for the binlog: from the anchor when
    /// there is one (and the server is the same), else from the server's current end.
    async fn open(&mut self, life: &mut Life) -> Result<Opened, BinlogError> {
        let mut conn = Conn::new(self.opts.clone()).await?;
        let (server, mariadb) = self.server_of(&mut conn).await?;
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
        let target = (String::from_utf8_lossy(&file).into_owned(), pos);
        let now = counters(&mut conn).await;
        if let Some(a) = &self.anchor {
            if a.server != server {
                return Err(BinlogError::Gap(format!(
                    "the server changed (server_id {} → {}, server_uuid {:?} → {:?})",
                    a.server.server_id, server.server_id, a.server.uuid, server.uuid
                )));
            }
            let Some(proof) = &a.proof else {
                return Err(BinlogError::Gap(
                    "the stream that gave the position had no witness connection".into(),
                ));
            };
            let held_by = lock_holder(&mut conn, &proof.lock).await;
            same_history(proof, held_by, now).map_err(BinlogError::Gap)?;
        }
        let proof = match now {
            Some(counters) => self.witness_for(&mut conn, counters).await,
            None => None,
        };
        // Heartbeats on an idle stream let a dead connection be told from a quiet server.
        conn.query_drop(format!(
            "SET @master_heartbeat_period = {}",
            HEARTBEAT.as_nanos()
        ))
        .await?;
        if mariadb {
            // Without it MariaDB rewrites each GTID event into an old form for us, and ends
            // the dump when it cannot (XA transactions with long xids).
            conn.query_drop(format!(
                "SET @mariadb_slave_capability = {MARIADB_CAPABILITY_GTID}"
            ))
            .await?;
        }
        self.shared.conn_id.store(conn.id(), Ordering::Relaxed);
        let (from_file, from_pos) = match &self.anchor {
            Some(a) => {
                life.resuming = true;
                (a.file.clone(), a.offset)
            }
            None => target.clone(),
        };
        self.pos = Position {
            file: from_file.clone(),
            end: from_pos,
            fde: None,
            requested: Some(from_pos),
            server: Some(server),
            proof,
            counters: now,
        };
        let request = BinlogStreamRequest::new(self.cfg.server_id)
            .with_filename(from_file.as_bytes())
            .with_pos(from_pos);
        let stream = conn.get_binlog_stream(request).await.map_err(|e| {
            if self.ever_streamed {
                e.into()
            } else {
                unavailable_if_denied(
                    e,
                    "the user cannot register as a replica (needs REPLICATION SLAVE)",
                )
            }
        })?;
        Ok(Opened { stream, target })
    }

    fn set_witness(&mut self, w: Option<Witness>) {
        let id = w.as_ref().map_or(0, Witness::id);
        self.shared.witness_id.store(id, Ordering::Relaxed);
        self.witness = w;
    }

    /// The [`Proof`] for a stream opened on `conn`, with the server's `counters` then: the
    /// witness kept from before when the server behind `conn` says it still holds its lock,
    /// else a new one. `None` when none can be had; the tail then streams all the same, but
    /// losing that stream invalidates everything.
    async fn witness_for(&mut self, conn: &mut Conn, counters: Counters) -> Option<Proof> {
        if let Some(w) = &self.witness {
            if lock_holder(conn, &w.lock).await != Some(w.id()) {
                self.set_witness(None);
            }
        }
        if self.witness.is_none() {
            match Witness::open(&self.opts).await {
                // A relay in front of several servers could have sent it to another.
                Ok(w) if lock_holder(conn, &w.lock).await == Some(w.id()) => {
                    self.set_witness(Some(w));
                }
                Ok(_) => {
                    tracing::warn!(upstream = %self.addr, "binlog: the witness connection reached another server process than the stream: a lost stream will invalidate everything")
                }
                Err(e) => {
                    tracing::warn!(upstream = %self.addr, error = %e, "binlog: cannot open the witness connection: a lost stream will invalidate everything")
                }
            }
        }
        self.witness.as_ref().map(|w| Proof {
            lock: w.lock.clone(),
            holder: w.id(),
            counters,
        })
    }

    /// Every [`WITNESS_CHECK`]: asks the witness the server's counters, and returns why the
    /// stream must end when a RESET ran since it was opened. A witness that
    /// does not answer is dropped: the anchors it proves then cannot be resumed (the check
    /// at reconnect finds its lock gone). Without one, a new one is tried every
    /// [`WITNESS_RETRY`], only to go on checking the counters (one in another process gives
    /// other counters, which ends the stream: safe).
    async fn check_witness(&mut self) -> Option<String> {
        let opened = self.pos.counters?;
        if self.witness.is_none() {
            if self
                .witness_tried
                .is_some_and(|t| t.elapsed() < WITNESS_RETRY)
            {
                return None;
            }
            self.witness_tried = Some(Instant::now());
            if let Ok(Ok(w)) =
                tokio::time::timeout(WITNESS_TIMEOUT, Witness::open(&self.opts)).await
            {
                self.set_witness(Some(w));
            }
        }
        let w = self.witness.as_mut()?;
        if w.checked.elapsed() < WITNESS_CHECK {
            return None;
        }
        w.checked = Instant::now();
        match self.witness_counters().await {
            Ok(Some(now)) => no_reset_since(opened, Some(now)).err(),
            _ => {
                tracing::warn!(upstream = %self.addr, "binlog: the witness connection does not answer: the next lost stream will invalidate everything");
                self.set_witness(None);
                None
            }
        }
    }

    /// The server's counters asked on the witness, within [`WITNESS_TIMEOUT`]; `Err` when
    /// it did not answer in time, `Ok(None)` when there is no witness or it gave none.
    async fn witness_counters(&mut self) -> Result<Option<Counters>, tokio::time::error::Elapsed> {
        match &mut self.witness {
            Some(w) => tokio::time::timeout(WITNESS_TIMEOUT, counters(&mut w.conn)).await,
            None => Ok(None),
        }
    }

    /// Folds one event into the transaction; bumps at commits. Returns the tables of a DDL
    /// statement, which needs a catalog refresh (done by the caller, which can await).
    async fn on_event(
        &mut self,
        event: &Event,
        stream: &BinlogStream,
        arrived: Instant,
    ) -> Option<(Ddl, u64)> {
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
        let kind = event.header().event_type_raw();
        match kind {
            event_type::MARIA_GTID => {
                self.on_mariadb_gtid(event.data(), arrived).await;
                return None;
            }
            // Annotations (the statement text of row events), the GTID list and checkpoint at
            // the head of each file, and the encryption marker change no table.
            event_type::MARIA_ANNOTATE_ROWS
            | event_type::MARIA_BINLOG_CHECKPOINT
            | event_type::MARIA_GTID_LIST
            | event_type::MARIA_START_ENCRYPTION => return None,
            // log_bin_compress: the rows' table id is readable, the statement is not.
            k if event_type::MARIA_ROWS_COMPRESSED.contains(&k) => {
                let id = rows_table_id(event.data());
                self.on_rows(id, stream);
                // Its images are not read: nothing is known of the table's rows.
                if let Some(tme) = id.and_then(|id| stream.get_tme(id)) {
                    let t = (
                        tme.database_name().to_lowercase(),
                        tme.table_name().to_lowercase(),
                    );
                    self.txn.rows.entry(t).or_default().give_up();
                }
                return None;
            }
            event_type::MARIA_QUERY_COMPRESSED => {
                self.txn.unknown_all = true;
                if !self.txn.open {
                    self.commit(arrived).await;
                }
                return None;
            }
            event_type::INCIDENT => {
                // The server says its binlog misses changes here.
                tracing::warn!(upstream = %self.addr, "binlog: incident event (the server lost changes); invalidating everything");
                self.txn.unknown_all = true;
                self.commit(arrived).await;
                return None;
            }
            _ => {}
        }
        let data = match event.read_data() {
            Ok(d) => d,
            Err(e) => {
                // We cannot tell what it changed: the whole transaction goes conservative.
                tracing::warn!(error = %e, event_type = kind, "binlog: unreadable event; invalidating everything at its commit");
                self.txn.unknown_all = true;
                return None;
            }
        };
        match data {
            Some(EventData::RowsEvent(rows)) => {
                self.on_rows(Some(rows.table_id()), stream);
                self.on_moves(&rows, stream);
                self.on_images(&rows, stream);
            }
            Some(EventData::XidEvent(_)) => self.commit(arrived).await,
            Some(EventData::QueryEvent(q)) => {
                let sql = q.query();
                let schema = q.schema().to_lowercase();
                let utf8 = event_client_utf8(q.status_vars());
                return self.on_query(&sql, &schema, utf8, arrived).await;
            }
            // Statement-based LOAD DATA: the file's rows travel in BEGIN_LOAD_QUERY events, the
            // statement (and so the table) in this one.
            Some(EventData::ExecuteLoadQueryEvent(q)) => {
                let sql = q.query();
                let schema = q.schema().to_lowercase();
                let utf8 = event_client_utf8(q.status_vars());
                return self.on_query(&sql, &schema, utf8, arrived).await;
            }
            Some(EventData::XaPrepareLogEvent(x)) => self.on_xa_prepare(&x, arrived).await,
            // A type this mysql_common does not know (MariaDB's beyond those above, or a
            // newer server's). One the server marks ignorable carries nothing a replica must
            // apply; any other may change data we cannot see: invalidate everything at the
            // end of its group, and go on.
            None => {
                let ignorable = event
                    .header()
                    .flags()
                    .contains(EventFlags::LOG_EVENT_IGNORABLE_F);
                if !ignorable {
                    if self.warned_types.insert(kind) {
                        tracing::warn!(upstream = %self.addr, event_type = kind, "binlog: unknown event type; its transaction invalidates everything");
                    }
                    self.txn.unknown_all = true;
                    if !self.txn.open {
                        self.commit(arrived).await;
                    }
                }
            }
            // TABLE_MAP is kept by the stream itself; ROTATE, FORMAT_DESCRIPTION, heartbeats,
            // MySQL's GTIDs and the like change no table.
            _ => {}
        }
        None
    }

    fn on_rows(&mut self, table_id: Option<u64>, stream: &BinlogStream) {
        match table_id.and_then(|id| stream.get_tme(id)) {
            Some(tme) => {
                self.txn.tables.insert((
                    tme.database_name().to_lowercase(),
                    tme.table_name().to_lowercase(),
                ));
            }
            None => self.txn.unknown_all = true,
        }
    }

    /// An update or delete rows event: its table's rows may have moved.
    fn on_moves(
        &mut self,
        rows: &mysql_async::binlog::events::RowsEventData<'_>,
        stream: &BinlogStream,
    ) {
        use mysql_async::binlog::events::RowsEventData as R;
        if matches!(rows, R::WriteRowsEvent(_) | R::WriteRowsEventV1(_)) {
            return;
        }
        if let Some(tme) = stream.get_tme(rows.table_id()) {
            self.txn.moved.insert((
                tme.database_name().to_lowercase(),
                tme.table_name().to_lowercase(),
            ));
        }
    }

    /// Granularity row: what the images of a rows event say of its table's rows. Rows events
    /// whose images are not read here (compressed ones) leave the table unknown.
    fn on_images(
        &mut self,
        rows: &mysql_async::binlog::events::RowsEventData<'_>,
        stream: &BinlogStream,
    ) {
        if self.cfg.granularity != Granularity::Row {
            return;
        }
        let Some(tme) = stream.get_tme(rows.table_id()) else {
            return;
        };
        let t = (
            tme.database_name().to_lowercase(),
            tme.table_name().to_lowercase(),
        );
        let cols = self.catalog.columns_by_ordinal(&t);
        let seen = self.txn.rows.entry(t).or_default();
        if seen.unknown {
            return;
        }
        let Some(cols) = cols else {
            seen.give_up();
            return;
        };
        // mysql_common unwraps some reads: a panic here must cost only precision.
        let folded = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut s = std::mem::take(seen);
            fold_images(&mut s, rows, tme, &cols);
            s
        }));
        match folded {
            Ok(s) => *seen = s,
            Err(_) => seen.give_up(),
        }
    }

    /// A MariaDB GTID event starts an event group; a standalone one (DDL, XA COMMIT/ROLLBACK
    /// of a prepared transaction) is followed by the single statement that ends it.
    async fn on_mariadb_gtid(&mut self, data: &[u8], arrived: Instant) {
        if self.txn.open {
            // The server never leaves a group unended; if it did, bump what it changed.
            self.commit(arrived).await;
        }
        let flags = data.get(12).copied().unwrap_or(FL_STANDALONE);
        self.txn = BinlogTxn {
            open: flags & FL_STANDALONE == 0,
            ..BinlogTxn::default()
        };
    }

    /// XA PREPARE ends the first half of an XA transaction: its changes are bumped now, and
    /// remembered until its XA COMMIT/ROLLBACK (a reader may cache the old rows meanwhile).
    async fn on_xa_prepare(&mut self, body: &[u8], arrived: Instant) {
        let one_phase = body.first().copied().unwrap_or(0) != 0;
        let known = !self.txn.unknown_all && self.txn.unknown_schemas.is_empty();
        if !one_phase && known {
            if let Some(xid) = xa_prepare_xid(body) {
                if self.prepared.len() >= MAX_PREPARED_XA {
                    self.prepared.clear();
                }
                self.prepared.insert(xid, self.txn.tables.clone());
            }
        }
        self.commit(arrived).await;
    }

    /// A DDL comes back with the number it was registered under with the catalog
    /// (`Catalog::register_ddl`), for [`after_ddl`](Self::after_ddl) to land.
    /// `client_utf8`: the logging session's client character set is UTF-8 (the event's
    /// charset; `policy::context::collation_utf8`). Where it is not and the text names
    /// relations or accounts beyond ASCII, what it names is not what qcache reads
    /// (`policy::context::names_undecodable`): DDL invalidates and reloads as unreadable
    /// DDL does, DML as a statement the analysis cannot name, accounts reach everyone.
    async fn on_query(
        &mut self,
        sql: &str,
        schema: &str,
        client_utf8: bool,
        arrived: Instant,
    ) -> Option<(Ddl, u64)> {
        // As the server ran it: a versioned comment it skipped is a comment.
        let text = crate::analysis::server_str(sql, self.server);
        let sql: &str = &text;
        let undecodable =
            crate::policy::context::names_undecodable(client_utf8, None, sql.as_bytes()).is_some();
        // GRANT, REVOKE, account and role statements, FLUSH PRIVILEGES: logged as statements
        // even under ROW format. Whose session logged it is unknown here, so CURRENT_USER
        // and the FOR-less forms reach everyone.
        if let Some(mut c) = crate::policy::privileges::statement_change(sql.as_bytes(), None) {
            c.all |= crate::policy::context::accounts_undecodable(client_utf8, &c.users);
            self.inv.apply(&Invalidation::one(
                Source::Here(InvalidationSource::Privileges),
                What::Privileges(c),
            ));
        }
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
                // PREPARE and COMMIT: bump its tables again. A prepared transaction the tail
                // did not see (prepared before it started) invalidates everything.
                "COMMIT" | "ROLLBACK" => {
                    match xa_query_xid(sql).and_then(|x| self.prepared.remove(&x)) {
                        Some(tables) => self.txn.tables.extend(tables),
                        // XA COMMIT … ONE PHASE is logged as a plain transaction; this is a
                        // second phase whose first the tail did not see.
                        None => self.txn.unknown_all = true,
                    }
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
                // Judged now, before the tail reports its position past it: code a session
                // runs after that is judged with it (`Catalog::note_ddl`).
                if w(0) == "CREATE" {
                    self.catalog.note_ddl(sql, schema);
                }
                let ddl = if undecodable {
                    Ddl::Unknown(schema.to_string())
                } else if matches!(second, "DATABASE" | "SCHEMA") {
                    let name = database_name(sql);
                    Ddl::Database(name)
                } else {
                    match (self.analyse)(sql, schema) {
                        Some(t) => Ddl::Tables(lower_all(t)),
                        None => Ddl::Unknown(schema.to_string()),
                    }
                };
                // Pending from here, before the tail reports its position past it: a session
                // told the DDL is passed finds what it named unknown until the reload lands.
                let seq = self.catalog.register_ddl(&ddl.changed());
                self.apply_ddl(&ddl);
                // DDL is its own event group, except CREATE … SELECT and temporary tables,
                // which sit inside a transaction whose rows and commit follow.
                if !self.txn.open {
                    self.commit(arrived).await;
                }
                return Some((ddl, seq));
            }
            // Statement-based DML (INSERT, UPDATE, DELETE, REPLACE, LOAD DATA …).
            _ => {
                match (!undecodable)
                    .then(|| (self.analyse)(sql, schema))
                    .flatten()
                {
                    Some(t) => {
                        // Rows this statement changed are in no image: whatever row events
                        // of the same transaction said of these tables is not all.
                        for t in lower_all(t) {
                            self.txn.rows.entry(t.clone()).or_default().give_up();
                            self.txn.tables.insert(t);
                        }
                    }
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
        // No wait for the reloads of the DDL before it: while one is pending, what it named
        // is unknown to the widening (`Catalog::expand_data_write`), which invalidates
        // conservatively for it, and other tables' writes also bump what it named.
        let stale_catalog = false;
        let faults = &self.inv.versions().faults;
        let inv = committed(
            &self.catalog,
            self.cfg.unknown_write,
            faults,
            txn,
            stale_catalog,
        );
        let bumps = self.inv.apply(&inv);
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

    fn apply_ddl(&self, ddl: &Ddl) -> u64 {
        let what = ddl_what(&self.catalog, self.cfg.unknown_write, ddl);
        let n = self.inv.apply(&binlog(what));
        self.shared.bumps.fetch_add(n, Ordering::Relaxed);
        n
    }

    /// Reloads the catalog after a DDL, then bumps its tables again: a reader that resolved a
    /// view with the old catalog between the first bump and the swap holds stamps that this
    /// second bump makes stale.
    ///
    /// The reload runs beside the tail, not in it: a burst of DDL (a migration, a test suite)
    /// would otherwise stall every later commit behind one reload per statement, while
    /// concurrent reloads coalesce in [`Catalog::refresh`]. No later commit waits for it: the
    /// DDL was registered as pending (`Catalog::register_ddl`) before it was applied, so
    /// commits are widened as for unknown tables where it matters until it lands.
    ///
    /// Lands DDL `seq` (`Catalog::ddl_landed`) once the second bump is applied, whether the
    /// reload worked or not.
    fn after_ddl(&mut self, ddl: Ddl, seq: u64) {
        self.refreshing.retain(|t| !t.is_finished());
        let hook = self
            .shared
            .on_ddl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(hook) = hook {
            // Standbys have no stream: their catalogs learn this DDL from here.
            hook(&ddl.changed());
        }
        let catalog = self.catalog.clone();
        let inv = self.inv.clone();
        let shared = self.shared.clone();
        let policy = self.cfg.unknown_write;
        self.refreshing.push(tokio::spawn(async move {
            let started = Instant::now();
            inv.versions().faults.before_catalog_reload().await;
            let r = catalog.refresh_changed(&ddl.changed()).await;
            tracing::debug!(took = ?started.elapsed(), ?ddl, "binlog: catalog refreshed after DDL");
            if let Err(e) = &r {
                tracing::warn!(error = %e, "binlog: catalog refresh after DDL failed; keeping the old one");
            }
            let what = match r {
                Ok(()) => ddl_what(&catalog, policy, &ddl),
                // Without a current catalog, widening may miss views and triggers, as for a
                // DDL through qcache (`invalidation::ddl`).
                Err(_) => vec![What::Everything],
            };
            let n = inv.apply(&binlog(what));
            shared.bumps.fetch_add(n, Ordering::Relaxed);
            catalog.ddl_landed(seq);
        }));
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

impl Ddl {
    /// What it changed in the schema catalog.
    fn changed(&self) -> Changed {
        match self {
            Ddl::Tables(t) if !t.is_empty() => Changed {
                objects: t.clone(),
                ..Changed::default()
            },
            Ddl::Database(Some(name)) => Changed {
                schemas: vec![name.to_lowercase()],
                ..Changed::default()
            },
            _ => Changed {
                everything: true,
                ..Changed::default()
            },
        }
    }
}

/// Whether a statement event's logging session had a UTF-8 client character set, by the
/// collation its Q_CHARSET_CODE status variable gives (`policy::context::collation_utf8`);
/// without one, not known to.
fn event_client_utf8(vars: &mysql_async::binlog::events::StatusVars<'_>) -> bool {
    use mysql_async::binlog::events::StatusVarVal;
    use mysql_async::binlog::StatusVarKey;
    match vars
        .get_status_var(StatusVarKey::Charset)
        .as_ref()
        .map(|v| v.get_value())
    {
        Some(Ok(StatusVarVal::Charset { charset_client, .. })) => {
            crate::policy::context::collation_utf8(charset_client)
        }
        _ => false,
    }
}

/// What a finished transaction invalidates. Parent rows that may have moved lose their
/// mappings before anything is bumped (`moved`, applied first by `invalidation::apply`),
/// so that no child row of the same transaction is named through a stale one.
fn committed(
    catalog: &Catalog,
    policy: Conservative,
    faults: &Faults,
    txn: BinlogTxn,
    stale_catalog: bool,
) -> Invalidation {
    let mut what = Vec::new();
    if txn.unknown_all {
        what.push(What::Everything);
    } else {
        for s in &txn.unknown_schemas {
            what.push(conservative(policy, s));
        }
        if !txn.tables.is_empty() {
            let tables: Vec<TableName> = txn.tables.into_iter().collect();
            what.extend(tables_rows(catalog, policy, faults, &tables, &txn.rows));
            if stale_catalog {
                let schemas: HashSet<&str> = tables.iter().map(|(s, _)| s.as_str()).collect();
                for s in schemas {
                    what.push(conservative(policy, s));
                }
            }
        }
    }
    // A committed transaction's row and DML events: changes of rows (DDL comes through
    // `apply_ddl`, never here).
    Invalidation {
        source: Source::Here(InvalidationSource::Binlog),
        moved: txn.moved.into_iter().collect(),
        what,
        data: true,
    }
}

/// [`tables_what`] where the row images name a table's rows: its slices only (and, for a child
/// table, its derived slices: `invalidation::apply`). A table also reached through a
/// trigger or cascade (whose rows no image shows, before MySQL 9.6) or carrying a
/// trigger is bumped whole.
fn tables_rows(
    catalog: &Catalog,
    policy: Conservative,
    faults: &Faults,
    tables: &[TableName],
    rows: &HashMap<TableName, RowsSeen>,
) -> Vec<What> {
    if rows.is_empty() {
        return tables_what(catalog, policy, tables, true);
    }
    let Some(all) = catalog.expand_data_write(tables) else {
        return tables_what(catalog, policy, tables, true);
    };
    let reached = catalog.reached_by_edges(tables);
    let mut what = Vec::with_capacity(all.len());
    for t in all {
        let seen = rows
            .get(&t)
            .filter(|_| !reached.contains(&t) && catalog.rows_knowable(&t));
        let known = seen.and_then(RowsSeen::known);
        // Only updates, whose images show every column that changed, and that moved no
        // row in an unordered read (`policy::order`).
        let changed = seen
            .filter(|_| catalog.images_show_changes(&t))
            .and_then(RowsSeen::changed_columns)
            .filter(|c| catalog.update_keeps_order(&t, c, faults));
        what.push(match (known, changed) {
            (Some(k), Some(c)) => What::Columns {
                table: t,
                set: c.into(),
                known: Some(k.into()),
            },
            (Some(k), None) => What::Rows {
                table: t,
                known: k.into(),
            },
            (None, _) => What::Table(t),
        });
    }
    what
}

/// What a DDL statement invalidates.
fn ddl_what(catalog: &Catalog, policy: Conservative, ddl: &Ddl) -> Vec<What> {
    match ddl {
        Ddl::Tables(t) => tables_what(catalog, policy, t, false),
        // Tables the registry does not know have no entries to invalidate.
        Ddl::Database(Some(name)) => vec![What::Schema(name.clone())],
        Ddl::Database(None) => vec![What::Everything],
        Ddl::Unknown(schema) => vec![conservative(policy, schema)],
    }
}

/// `tables` widened through triggers and cascades; conservative when the catalog cannot
/// widen them.
///
/// `data`: a data change, widened as one (`Catalog::expand_data_write`: unknown while DDL
/// naming what it reaches is pending); else a DDL's own tables, widened through the
/// catalog as it is.
fn tables_what(
    catalog: &Catalog,
    policy: Conservative,
    tables: &[TableName],
    data: bool,
) -> Vec<What> {
    let expanded = if data {
        catalog.expand_data_write(tables)
    } else {
        catalog.expand_write(tables)
    };
    match expanded {
        Some(all) => all.into_iter().map(What::Table).collect(),
        None => {
            let schemas: HashSet<&str> = tables.iter().map(|(s, _)| s.as_str()).collect();
            let mut what: Vec<What> = tables.iter().cloned().map(What::Table).collect();
            what.extend(schemas.into_iter().map(|s| conservative(policy, s)));
            what
        }
    }
}

/// What a write the tail could not analyse invalidates, per `invalidation.unknown_write`.
fn conservative(policy: Conservative, schema: &str) -> What {
    match policy {
        Conservative::Schema if !schema.is_empty() => What::Schema(schema.to_string()),
        _ => What::Everything,
    }
}

/// The commit-lag bucket of a lag in ms: the first bound it does not exceed, else overflow.
fn commit_lag_bucket(lag_ms: u64) -> usize {
    COMMIT_LAG_BOUNDS_MS
        .iter()
        .position(|&b| lag_ms <= b)
        .unwrap_or(COMMIT_LAG_BOUNDS_MS.len())
}

/// Whether the events since the anchor are lost after a stream ended as `err`: the reason,
/// or `None` to resume from the anchor. `failed` counts resumes in a row that got nowhere.
fn gap_after(err: &BinlogError, life: &Life, failed: &mut u32) -> Option<String> {
    if life.advanced || life.caught_up {
        *failed = 0;
    }
    let gap = match err {
        BinlogError::Gap(why) => Some(why.clone()),
        // The server refused to send from the anchor (purged, reset, position past the end
        // of the file): those events are gone.
        BinlogError::Upstream(mysql_async::Error::Server(e))
            if life.resuming
                && !life.verified
                && e.code == ER_MASTER_FATAL_ERROR_READING_BINLOG =>
        {
            Some(format!(
                "the server refused the position: {} ({})",
                e.message, e.code
            ))
        }
        // Broke off again before getting anywhere: an event the server cannot send, or that
        // the parser cannot read, would otherwise keep the tail replaying forever (and hits
        // suspended). A server that is simply down never gets this far.
        _ if life.opened && life.resuming && !life.caught_up && !life.advanced => {
            *failed += 1;
            (*failed >= MAX_FAILED_RESUMES)
                .then(|| format!("{failed} resumes in a row broke off before getting anywhere"))
        }
        _ => None,
    };
    if gap.is_some() {
        *failed = 0;
    }
    gap
}

/// An event with a place in the server's binlog file: not made up for the stream (the fake
/// ROTATE, heartbeats, a format description sent past the file's start).
fn is_real(e: &Event) -> bool {
    let h = e.header();
    h.log_pos() != 0
        && h.event_type_raw() != event_type::HEARTBEAT
        && !h.flags().contains(EventFlags::LOG_EVENT_ARTIFICIAL_F)
}

/// True once the stream, now reading `file`, has reached `target` (the server's position when
/// it was asked for): everything committed before the reconnect has been seen. A heartbeat
/// means the server has nothing more to send.
fn reached(e: &Event, file: &str, target: &(String, u64)) -> bool {
    if e.header().event_type_raw() == event_type::HEARTBEAT {
        return true;
    }
    is_real(e) && position_reached(file, u64::from(e.header().log_pos()), target)
}

/// True when offset `end` of `file` is at or past `target`.
fn position_reached(file: &str, end: u64, target: &(String, u64)) -> bool {
    crate::policy::lag::reached(file, end, target)
}

/// Aborts its task when dropped (the probe, when its stream ends).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The probe of a stream (`policy::lag`): asks the server's binlog end every `every` on a
/// connection of its own, noting when each question was about to be sent. A late answer
/// still counts (the time it was asked is what it proves), so a loaded machine makes the
/// bound conservative, not unknown; a question that fails, or gets no answer in 5 s, drops
/// the connection and leaves the bound to grow (fail closed).
async fn probe(opts: Opts, shared: Arc<TailShared>, every: Duration) {
    let mut conn: Option<Conn> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if conn.is_none() {
            conn = tokio::time::timeout(OPEN_TIMEOUT, Conn::new(opts.clone()))
                .await
                .ok()
                .and_then(|c| c.ok());
        }
        let Some(c) = conn.as_mut() else { continue };
        let asked = shared.now_ms();
        // A row of four columns (File, Position, Binlog_Do_DB, Binlog_Ignore_DB), read by
        // index: a tuple conversion of the whole row panics.
        let q = tokio::time::timeout(
            Duration::from_secs(5),
            c.query_first::<Row, _>("SHOW MASTER STATUS"),
        )
        .await;
        let end = |mut r: Row| {
            let file = r.take_opt::<Vec<u8>, _>(0)?.ok()?;
            let end = r.take_opt::<u64, _>(1)?.ok()?;
            Some((String::from_utf8_lossy(&file).into_owned(), end))
        };
        match q {
            Ok(Ok(Some(row))) => {
                if let Some(end) = end(row) {
                    shared.catch_up(|c| c.probed(asked, end));
                }
            }
            // No row (binary logging off) or an error: the stream's own end will say.
            Ok(_) => conn = None,
            Err(_) => conn = None,
        }
    }
}

/// The table id at the head of a rows event's body (6 bytes, little-endian).
fn rows_table_id(body: &[u8]) -> Option<u64> {
    let b = body.get(..6)?;
    Some(b.iter().rev().fold(0u64, |n, &x| (n << 8) | u64::from(x)))
}

/// The xid of an XA_PREPARE_LOG_EVENT body (one_phase 1, format_id 4, gtrid_length 4,
/// bqual_length 4, data), spelled as [`xa_query_xid`] spells it.
fn xa_prepare_xid(body: &[u8]) -> Option<String> {
    let u32_at = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?))
    };
    let format = u32_at(1)?;
    let g = u32_at(5)? as usize;
    let b = u32_at(9)? as usize;
    let data = body.get(13..13usize.checked_add(g)?.checked_add(b)?)?;
    Some(xid_key(&data[..g], &data[g..], u64::from(format)))
}

/// The xid of a logged `XA COMMIT|ROLLBACK X'gtrid',X'bqual',format` (the server logs this
/// canonical form whatever the client wrote).
fn xa_query_xid(sql: &str) -> Option<String> {
    let rest = sql.trim_start();
    let rest = rest.get(2..)?.trim_start();
    let verb_end = rest.find(char::is_whitespace)?;
    let args = rest[verb_end..].trim();
    let mut parts = args.splitn(3, ',');
    let hex = |p: &str| -> Option<Vec<u8>> {
        let p = p.trim();
        let inner = p
            .strip_prefix("X'")
            .or_else(|| p.strip_prefix("x'"))?
            .strip_suffix('\'')?;
        if inner.len() % 2 != 0 {
            return None;
        }
        (0..inner.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(inner.get(i..i + 2)?, 16).ok())
            .collect()
    };
    let gtrid = hex(parts.next()?)?;
    let bqual = hex(parts.next()?)?;
    let format: u64 = parts.next()?.trim().parse().ok()?;
    Some(xid_key(&gtrid, &bqual, format))
}

fn xid_key(gtrid: &[u8], bqual: &[u8], format: u64) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("{format}:{}:{}", hex(gtrid), hex(bqual))
}

/// What a caught panic said.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
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
            // Executable comments (/*!…*/, MariaDB's /*M!…*/) hold real SQL; treat their body
            // as text. (Those the server skipped are plain comments by now: `server_str`.)
            if let Some(body) = rest.strip_prefix('!').or_else(|| rest.strip_prefix("M!")) {
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

impl crate::l2::TailStatus for BinlogHandle {
    fn connected(&self) -> bool {
        BinlogHandle::connected(self)
    }

    fn reconnects(&self) -> u64 {
        BinlogHandle::reconnects(self)
    }

    fn set_streaming(&self, on: bool) {
        BinlogHandle::set_streaming(self, on)
    }

    fn heard(&self, behind: Duration) {
        BinlogHandle::heard(self, behind)
    }

    fn behind(&self) -> Option<Duration> {
        BinlogHandle::behind(self)
    }

    fn position(&self) -> Option<(String, u64)> {
        BinlogHandle::position(self)
    }

    fn is_off(&self) -> bool {
        BinlogHandle::is_off(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_match_statement_keys() {
        use mysql_async::Value as V;
        let uint = ColType::from_catalog("int", "int(10) unsigned", "", None);
        let int = ColType::from_catalog("int", "int(11)", "", None);
        let ci = ColType::from_catalog("varchar", "varchar(8)", "utf8mb4_general_ci", Some(8));
        // An unsigned value read without signedness metadata arrives negative.
        assert_eq!(
            image_key(&uint, &V::Int(-1)),
            normalize(&uint, &Lit::Int("4294967295".into())).map(|k| vec![k])
        );
        assert_eq!(image_key(&int, &V::Int(-1)), Some(vec!["i-1".into()]));
        assert_eq!(image_key(&int, &V::NULL), Some(vec![]));
        assert_eq!(
            image_key(&ci, &V::Bytes(b"AbC".to_vec())),
            normalize(&ci, &Lit::Str("abc".into())).map(|k| vec![k])
        );
        // Not mappable: the column is unknown for that write.
        assert_eq!(image_key(&ci, &V::Bytes("é".as_bytes().to_vec())), None);
        assert_eq!(image_key(&ci, &V::Bytes(b"a ".to_vec())), None);
        // A DATE / DATETIME image names the buckets a statement writing it names; a zero
        // date, or a value of another kind, names none.
        let dt = ColType::from_catalog("datetime", "datetime(6)", "", None);
        let date = ColType::from_catalog("date", "date", "", None);
        let day = crate::analysis::slices::temporal_day(2026, 11, 5).unwrap();
        assert_eq!(
            image_key(&dt, &V::Date(2026, 11, 5, 23, 59, 59, 999_999)),
            Some(temporal_keys(day))
        );
        assert_eq!(
            image_key(&date, &V::Date(2026, 11, 5, 0, 0, 0, 0)),
            Some(temporal_keys(day))
        );
        assert_eq!(image_key(&dt, &V::Date(0, 0, 0, 0, 0, 0, 0)), None);
        assert_eq!(image_key(&dt, &V::Date(2026, 2, 30, 0, 0, 0, 0)), None);
        assert_eq!(image_key(&dt, &V::Bytes(b"2026-11-05".to_vec())), None);
        assert_eq!(image_key(&dt, &V::Int(20261105)), None);
        assert_eq!(image_key(&date, &V::NULL), Some(vec![]));
        assert_eq!(image_key(&int, &V::Double(1.0)), None);
    }

    fn t(s: &str, n: &str) -> TableName {
        (s.into(), n.into())
    }

    /// `db.child` cascades from `db.parent`; `db.lone` has no edges.
    fn catalog() -> Arc<Catalog> {
        let s = |x: &str| x.to_string();
        let base = |n: &str| (s("db"), s(n), s("BASE TABLE"));
        super::super::catalog::Catalog::loaded_from(super::super::catalog::RawCatalog {
            tables: vec![base("parent"), base("child"), base("lone")],
            foreign_keys: vec![(
                s("db"),
                s("child"),
                s("db"),
                s("parent"),
                s("RESTRICT"),
                s("CASCADE"),
            )],
            ..Default::default()
        })
    }

    /// What each kind of binlog event gives, as far as the catalog and
    /// `invalidation.unknown_write` decide it (row images are `RowsSeen`'s).
    #[test]
    fn each_event_kind_gives_its_invalidation() {
        use Conservative::{All, Schema};
        let loaded = catalog();
        let unloaded = Catalog::new("127.0.0.1:1".into(), &InvalidationConfig::default());
        let ddl = |c: &Catalog, p, d: Ddl| ddl_what(c, p, &d);
        let table = |n: &str| What::Table(t("db", n));
        let rows: Vec<(&str, Vec<What>, Vec<What>)> = vec![
            (
                "DDL of a table: it, widened through cascades",
                ddl(&loaded, Schema, Ddl::Tables(vec![t("db", "parent")])),
                vec![table("child"), table("parent")],
            ),
            (
                "DDL the catalog cannot widen: its tables, then their schema",
                ddl(&unloaded, Schema, Ddl::Tables(vec![t("db", "lone")])),
                vec![table("lone"), What::Schema("db".into())],
            ),
            (
                "CREATE/ALTER/DROP DATABASE: its schema",
                ddl(&loaded, Schema, Ddl::Database(Some("db".into()))),
                vec![What::Schema("db".into())],
            ),
            (
                "a database statement whose name is unreadable: everything",
                ddl(&loaded, Schema, Ddl::Database(None)),
                vec![What::Everything],
            ),
            (
                "DDL the analyser cannot read, unknown_write = schema: its default schema",
                ddl(&loaded, Schema, Ddl::Unknown("db".into())),
                vec![What::Schema("db".into())],
            ),
            (
                "the same with no default schema: everything",
                ddl(&loaded, Schema, Ddl::Unknown(String::new())),
                vec![What::Everything],
            ),
            (
                "the same, unknown_write = all: everything",
                ddl(&loaded, All, Ddl::Unknown("db".into())),
                vec![What::Everything],
            ),
        ];
        for (rule, got, want) in rows {
            assert_eq!(got, want, "{rule}");
        }
    }

    /// What a commit gives for what its transaction collected.
    #[test]
    fn each_commit_gives_its_invalidation() {
        let loaded = catalog();
        let faults = Faults::default();
        let commit = |txn: BinlogTxn, stale: bool| {
            committed(&loaded, Conservative::Schema, &faults, txn, stale)
        };
        let binlog_of = |moved: Vec<TableName>, what| Invalidation {
            source: Source::Here(InvalidationSource::Binlog),
            moved,
            what,
            data: true,
        };
        let table = |n: &str| What::Table(t("db", n));
        let tables = |names: &[&str]| names.iter().map(|n| t("db", n)).collect();
        let rows: Vec<(&str, Invalidation, Invalidation)> = vec![
            (
                "statement or row events of tables: them, widened",
                commit(
                    BinlogTxn {
                        tables: tables(&["parent"]),
                        ..BinlogTxn::default()
                    },
                    false,
                ),
                binlog_of(vec![], vec![table("child"), table("parent")]),
            ),
            (
                "update or delete row events: their tables' parent mappings go first",
                commit(
                    BinlogTxn {
                        tables: tables(&["lone"]),
                        moved: tables(&["lone"]),
                        ..BinlogTxn::default()
                    },
                    false,
                ),
                binlog_of(vec![t("db", "lone")], vec![table("lone")]),
            ),
            (
                "a catalog reload still running: the tables, then their schema",
                commit(
                    BinlogTxn {
                        tables: tables(&["lone"]),
                        ..BinlogTxn::default()
                    },
                    true,
                ),
                binlog_of(vec![], vec![table("lone"), What::Schema("db".into())]),
            ),
            (
                "a statement the analyser cannot read: its default schema",
                commit(
                    BinlogTxn {
                        unknown_schemas: ["db".to_string()].into(),
                        ..BinlogTxn::default()
                    },
                    false,
                ),
                binlog_of(vec![], vec![What::Schema("db".into())]),
            ),
            (
                "a row event without its table map, or an unreadable event: everything",
                commit(
                    BinlogTxn {
                        tables: tables(&["lone"]),
                        unknown_all: true,
                        ..BinlogTxn::default()
                    },
                    false,
                ),
                binlog_of(vec![], vec![What::Everything]),
            ),
        ];
        for (rule, got, want) in rows {
            assert_eq!(got, want, "{rule}");
        }
    }

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
    fn xids_from_the_prepare_event_and_the_commit_statement_agree() {
        // XA_PREPARE_LOG_EVENT body as MariaDB 10.11 wrote it for a 37-byte gtrid.
        let mut body = vec![0u8];
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&37u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        let gtrid: Vec<u8> = (0..37u8).collect();
        body.extend_from_slice(&gtrid);
        let hex: String = gtrid.iter().map(|b| format!("{b:02X}")).collect();
        let from_event = xa_prepare_xid(&body).expect("prepare xid");
        let from_query = xa_query_xid(&format!("XA COMMIT X'{hex}',X'',1")).expect("query xid");
        assert_eq!(from_event, from_query);
        assert_eq!(
            xa_query_xid(&format!("XA ROLLBACK X'{hex}',X'',1")),
            Some(from_event)
        );
        assert_ne!(
            xa_query_xid("XA COMMIT X'01',X'',1"),
            xa_query_xid("XA COMMIT X'01',X'02',1")
        );
        // Truncated or odd bodies and texts give no xid (the end then invalidates all).
        assert_eq!(xa_prepare_xid(&body[..20]), None);
        assert_eq!(xa_prepare_xid(&[]), None);
        assert_eq!(xa_query_xid("XA COMMIT 'abc'"), None);
        assert_eq!(xa_query_xid("XA COMMIT X'0',X'',1"), None);
        assert_eq!(xa_query_xid("XA"), None);
    }

    #[test]
    fn rows_table_ids_and_file_indexes() {
        assert_eq!(rows_table_id(&[18, 0, 0, 0, 0, 0, 1, 0]), Some(18));
        assert_eq!(rows_table_id(&[1, 2, 0, 0, 0, 1]), Some(0x0100_0000_0201));
        assert_eq!(rows_table_id(&[1, 2]), None);
        let target = ("binlog.000009".to_string(), 500);
        assert!(position_reached("binlog.000009", 500, &target));
        assert!(!position_reached("binlog.000009", 499, &target));
        assert!(position_reached("binlog.000010", 4, &target));
        assert!(!position_reached("binlog.000008", 9999, &target));
        assert!(!position_reached("other", 9999, &target));
    }

    #[test]
    fn end_causes_have_distinct_labels_and_slots() {
        let labels: HashSet<&str> = EndCause::ALL.iter().map(|c| c.label()).collect();
        assert_eq!(labels.len(), EndCause::ALL.len());
        for (i, c) in EndCause::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        assert_eq!(BinlogError::Ended.cause(false), EndCause::Connect);
        assert_eq!(BinlogError::Ended.cause(true), EndCause::Ended);
        assert_eq!(BinlogError::Timeout(STALL).cause(false), EndCause::Timeout);
        assert_eq!(BinlogError::Gap("x".into()).cause(false), EndCause::Gap);
        assert_eq!(BinlogError::Stalled(STALL).cause(true), EndCause::Stalled);
    }

    #[test]
    fn a_position_resumes_only_in_the_process_and_history_it_came_from() {
        let counters = |resets| Counters { resets };
        let proof = Proof {
            lock: "qcache-binlog-witness-1".into(),
            holder: 42,
            counters: counters(3),
        };
        // The witness still holds its lock there and no RESET ran: the same history.
        assert!(same_history(&proof, Some(42), Some(counters(3))).is_ok());
        // The CI failure and its kin: a fresh server on the same address (whatever its
        // clock, its file's second and its offsets) holds no such lock.
        assert!(same_history(&proof, None, Some(counters(3))).is_err());
        // Another connection holds a lock of that name: not ours.
        assert!(same_history(&proof, Some(7), Some(counters(3))).is_err());
        // RESET MASTER in the same process, with a forged timestamp or in the same second.
        assert!(same_history(&proof, Some(42), Some(counters(4))).is_err());
        assert!(same_history(&proof, Some(42), None).is_err());
    }

    #[test]
    fn when_a_resume_becomes_a_gap() {
        let server = |code: u16| {
            BinlogError::Upstream(mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: "m".into(),
                state: "HY000".into(),
            }))
        };
        let life = |opened, resuming, verified, caught_up, advanced| Life {
            opened,
            streamed: opened,
            resuming,
            verified,
            caught_up,
            advanced,
            asked_ms: 0,
        };
        let io = || BinlogError::Ended;
        // (error, life, failed before, gap?, failed after)
        let cases: Vec<(BinlogError, Life, u32, bool, u32)> = vec![
            // A stream that caught up and then broke: resume.
            (io(), life(true, true, true, true, true), 1, false, 0),
            (
                server(1236),
                life(true, true, true, true, false),
                0,
                false,
                0,
            ),
            // The server refuses the anchor: gone.
            (
                server(1236),
                life(true, true, false, false, false),
                0,
                true,
                0,
            ),
            // Another refusal before the anchor came back: retry, counted.
            (
                server(1053),
                life(true, true, false, false, false),
                0,
                false,
                1,
            ),
            // The second resume in a row that got nowhere: give up the position.
            (io(), life(true, true, true, false, false), 1, true, 0),
            // Got past the anchor: the count starts over.
            (io(), life(true, true, true, false, true), 1, false, 0),
            // Could not even connect (server down): not counted.
            (io(), life(false, true, false, false, false), 1, false, 1),
            // Not resuming (a fresh start): nothing to lose.
            (io(), life(true, false, false, false, false), 0, false, 0),
            (
                BinlogError::Gap("x".into()),
                life(false, true, false, false, false),
                1,
                true,
                0,
            ),
        ];
        for (i, (err, life, before, gap, after)) in cases.into_iter().enumerate() {
            let mut failed = before;
            let got = gap_after(&err, &life, &mut failed);
            assert_eq!(got.is_some(), gap, "case {i}: {err} {life:?} → {got:?}");
            assert_eq!(failed, after, "case {i}: failed count");
        }
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
