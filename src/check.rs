//! `qcache check-consistency`: a stale-read checker users run against their own qcache.
//!
//! It creates its own tables in the given database (two single-row-per-key tables and a view
//! joining them), then runs concurrent writers and readers for a fixed time. Each writer owns
//! some keys and writes strictly increasing values to them (text and prepared statements,
//! some inside transactions, optionally some directly to the server). Every acknowledged
//! write is recorded with the instant its OK arrived. Readers (point reads, joins, SUM/MAX
//! aggregates, the view, reads inside transactions; text and prepared) take the floor of each
//! key they read *before* sending the read: the highest value acknowledged through the target
//! before that instant, or, for direct writes, acknowledged more than `allowed_lag` before it.
//! A read that returns less than its floor is stale: the one thing a cache must never do.
//!
//! Because values only grow, "less than the floor" is a proof of staleness with no false
//! positives from races: a write acknowledged after the read started can only raise a value.
//!
//! Row slices (`invalidation.granularity = "row"`) get reads and writes of their own shape: an
//! orders-like table whose rows belong to customers, read per customer (`WHERE customer_id =
//! ?`, `IN` lists, a join chain from a customers table), while writers insert rows for their
//! customers (one or two per statement), delete a customer's oldest row and move a row from
//! one customer to another (an UPDATE of the slice column). Each customer's MIN(v) and MAX(v)
//! only grow: inserts and moves bring a value above every other of the customer, deletes and
//! moves take away its lowest, and every customer keeps at least two rows. Each row also
//! carries its customer's own day (`at`, a DATETIME, moved with the row), so a read bounded by
//! that day's range reads exactly the customer's rows: the date-range slices of the design.
//!
//! With several targets (instances of one fleet sharing an L2), writers and readers are spread
//! over them; a write acknowledged through one target counts for reads through another after
//! `cross_lag` (0 when every hit is validated against L2), so stale reads *across* instances
//! are reported too, naming the reading target.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

/// What one run does; the CLI maps its flags onto this.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The qcache (or any MySQL endpoint) under test, `host:port`.
    pub target: String,
    /// Further instances of the same fleet, driven at once (see the module doc).
    pub more_targets: Vec<String>,
    /// How long a write acknowledged through one target may take to show through another.
    pub cross_lag: Duration,
    /// The server itself, for `direct_writes`.
    pub direct: Option<String>,
    pub user: String,
    pub password: String,
    pub database: String,
    pub duration: Duration,
    pub writers: usize,
    pub readers: usize,
    /// Send a share of the writes straight to `direct`, bypassing the target.
    pub direct_writes: bool,
    /// Which share of writes goes direct when `direct_writes` is on (0.0–1.0).
    pub direct_share: f64,
    /// How long a direct write may take to become visible through the target.
    pub allowed_lag: Duration,
    /// Seed of the statement mix, so that a failing run can be repeated.
    pub seed: u64,
    /// Keys each writer owns (and customers of the slice table).
    pub keys_per_writer: usize,
    /// Only the slice-shaped reads and writes (module doc).
    pub slices_only: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            target: "127.0.0.1:3307".into(),
            more_targets: Vec::new(),
            cross_lag: Duration::from_millis(50),
            direct: None,
            user: "root".into(),
            password: String::new(),
            database: "test".into(),
            duration: Duration::from_secs(10),
            writers: 4,
            readers: 8,
            direct_writes: false,
            direct_share: 0.25,
            allowed_lag: Duration::from_millis(50),
            seed: 1,
            keys_per_writer: 4,
            slices_only: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("invalid options: {0}")]
    Options(String),
    #[error("cannot connect to {what} ({addr}): {source}")]
    Connect {
        what: &'static str,
        addr: String,
        source: mysql_async::Error,
    },
    #[error("setting up the check tables failed: {0}")]
    Setup(mysql_async::Error),
}

/// One read that returned a value older than a write acknowledged before it began.
#[derive(Debug, Clone)]
pub struct StaleRead {
    /// Which kind of read (e.g. `point/prepared`, `join/text`, `sum/txn`).
    pub kind: String,
    /// Key or key range read.
    pub keys: String,
    pub got: i64,
    /// The lowest value the read was allowed to return.
    pub floor: i64,
    /// Where the write that set `floor` went and how long before the read it was
    /// acknowledged, where the ledger still holds it (for diagnosis).
    pub by: Option<String>,
}

impl std::fmt::Display for StaleRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} returned {}, but {} had been acknowledged before the read began",
            self.kind, self.keys, self.got, self.floor
        )?;
        match &self.by {
            Some(by) => write!(f, " ({by})"),
            None => Ok(()),
        }
    }
}

/// What a run saw.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub reads: u64,
    pub writes: u64,
    /// Of `writes`, those sent directly to the server.
    pub direct_writes: u64,
    /// Statements that failed (connection errors and the like); not violations, but shown.
    pub errors: u64,
    pub error_examples: Vec<String>,
    pub stale_reads: u64,
    /// The first stale reads seen (at most [`MAX_EXAMPLES`]).
    pub stale_examples: Vec<StaleRead>,
    /// Growth of `Qcache_hits` as the target reports it, when it does.
    pub hits: Option<u64>,
    pub elapsed: Duration,
}

/// How many stale reads and errors a report keeps word for word.
pub const MAX_EXAMPLES: usize = 10;

impl Report {
    /// A run passes when nothing was stale and it actually read and wrote.
    pub fn passed(&self) -> bool {
        self.stale_reads == 0 && self.reads > 0 && self.writes > 0
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(f, "duration:      {:.1} s", self.elapsed.as_secs_f64())?;
        writeln!(
            f,
            "reads:         {} ({:.0}/s)",
            self.reads,
            self.reads as f64 / secs
        )?;
        writeln!(
            f,
            "writes:        {} ({:.0}/s), {} direct",
            self.writes,
            self.writes as f64 / secs,
            self.direct_writes
        )?;
        match self.hits {
            Some(h) => writeln!(f, "Qcache_hits:   +{h}")?,
            None => writeln!(f, "Qcache_hits:   not reported by the target")?,
        }
        writeln!(f, "errors:        {}", self.errors)?;
        for e in &self.error_examples {
            writeln!(f, "  {e}")?;
        }
        writeln!(f, "stale reads:   {}", self.stale_reads)?;
        for s in &self.stale_examples {
            writeln!(f, "  {s}")?;
        }
        if self.passed() {
            write!(f, "result:        PASS")
        } else if self.stale_reads > 0 {
            write!(f, "result:        FAIL (stale reads)")
        } else {
            write!(f, "result:        FAIL (no reads or no writes completed)")
        }
    }
}

/// The config's duration syntax (`10s`, `50ms`, `1m30s`), for the checker's flags.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s)
}

/// A small deterministic generator (splitmix64): the statement mix needs repeatability from
/// `--seed`, not cryptographic quality.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// What the ledger keeps values of: the two one-row-per-key tables, and per customer the
/// lowest and highest `v` of its rows in the slice table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    C = 0,
    J = 1,
    SliceMin = 2,
    SliceMax = 3,
}

/// One acknowledged write: the value and when its OK arrived.
#[derive(Debug, Clone, Copy)]
struct Ack {
    at: Instant,
    value: i64,
    direct: bool,
    /// The target it went through (ignored when `direct`).
    via: usize,
}

/// Acknowledged writes of one (table, key), oldest first.
#[derive(Default)]
struct History {
    /// Value known to be visible for every read starting now or later.
    settled: i64,
    recent: VecDeque<Ack>,
}

/// The shared record of acknowledged writes.
struct Ledger {
    /// Indexed `[table][key]` (customers are keys too).
    keys: [Vec<Mutex<History>>; 4],
    allowed_lag: Duration,
    cross_lag: Duration,
}

/// How long an acknowledgement stays in `recent` before it is folded into `settled`: long
/// enough that no reader can still be computing a floor with an earlier start instant.
const FOLD_AFTER: Duration = Duration::from_secs(5);

impl Ledger {
    fn new(nkeys: usize, allowed_lag: Duration, cross_lag: Duration) -> Ledger {
        let mk = || (0..nkeys).map(|_| Mutex::new(History::default())).collect();
        Ledger {
            keys: [mk(), mk(), mk(), mk()],
            allowed_lag,
            cross_lag,
        }
    }

    fn ack(&self, table: Table, key: usize, ack: Ack) {
        let Some(h) = self.keys[table as usize].get(key) else {
            return;
        };
        let mut h = h.lock().unwrap_or_else(|p| p.into_inner());
        h.recent.push_back(ack);
        let fold_before = ack
            .at
            .checked_sub(FOLD_AFTER + self.allowed_lag.max(self.cross_lag));
        while let Some(first) = h.recent.front().copied() {
            if fold_before.is_some_and(|t| first.at < t) {
                h.settled = h.settled.max(first.value);
                h.recent.pop_front();
            } else {
                break;
            }
        }
    }

    /// How the acknowledged write of `value` to (table, key) reached the ledger, relative to
    /// a read through `via` that started at `start`: for a stale read's report.
    fn provenance(
        &self,
        table: Table,
        key: usize,
        value: i64,
        start: Instant,
        via: usize,
    ) -> Option<String> {
        let h = self.keys[table as usize].get(key)?;
        let h = h.lock().unwrap_or_else(|p| p.into_inner());
        let a = h.recent.iter().find(|a| a.value == value)?;
        let path = if a.direct {
            "written directly".to_string()
        } else if a.via == via {
            "written through the same target".to_string()
        } else {
            format!("written through target {}", a.via)
        };
        let before = start.saturating_duration_since(a.at);
        Some(format!(
            "{path}, acknowledged {before:?} before the read began"
        ))
    }

    /// The lowest value a read of (table, key) through target `via` that starts at `start`
    /// may return.
    fn floor(&self, table: Table, key: usize, start: Instant, via: usize) -> i64 {
        let Some(h) = self.keys[table as usize].get(key) else {
            return 0;
        };
        let h = h.lock().unwrap_or_else(|p| p.into_inner());
        let mut floor = h.settled;
        for a in &h.recent {
            let lag = if a.direct {
                self.allowed_lag
            } else if a.via != via {
                self.cross_lag
            } else {
                Duration::ZERO
            };
            if a.at + lag < start {
                floor = floor.max(a.value);
            }
        }
        floor
    }
}

/// Counters and examples shared by all workers.
#[derive(Default)]
struct Tally {
    reads: AtomicU64,
    writes: AtomicU64,
    direct_writes: AtomicU64,
    errors: AtomicU64,
    stale: AtomicU64,
    examples: Mutex<(Vec<StaleRead>, Vec<String>)>,
}

impl Tally {
    fn error(&self, what: &str, e: impl std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut ex = self.examples.lock().unwrap_or_else(|p| p.into_inner());
        if ex.1.len() < MAX_EXAMPLES {
            ex.1.push(format!("{what}: {e}"));
        }
    }

    fn stale(&self, s: StaleRead) {
        self.stale.fetch_add(1, Ordering::Relaxed);
        let mut ex = self.examples.lock().unwrap_or_else(|p| p.into_inner());
        if ex.0.len() < MAX_EXAMPLES {
            ex.0.push(s);
        }
    }
}

/// Table and view names of one run.
#[derive(Clone)]
struct Names {
    c: String,
    j: String,
    v: String,
    /// The slice table: (id, customer_id, v), read per customer.
    s: String,
    /// Customers, the head of the join chain to `s`.
    cu: String,
}

impl Names {
    fn new() -> Names {
        // Unique per process and per run, so that runs (and tests) never share tables.
        static RUN: AtomicU64 = AtomicU64::new(0);
        let base = format!(
            "qcache_check_{}_{}",
            std::process::id(),
            RUN.fetch_add(1, Ordering::Relaxed)
        );
        Names {
            c: format!("{base}_c"),
            j: format!("{base}_j"),
            v: format!("{base}_v"),
            s: format!("{base}_s"),
            cu: format!("{base}_cu"),
        }
    }
}

fn opts(addr: &str, o: &CheckOptions) -> Result<Opts, CheckError> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| CheckError::Options(format!("{addr:?} is not host:port")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| CheckError::Options(format!("bad port in {addr:?}")))?;
    let b = OptsBuilder::default()
        .ip_or_hostname(host.trim_matches(|c| c == '[' || c == ']'))
        .tcp_port(port)
        .user(Some(o.user.clone()))
        .pass((!o.password.is_empty()).then(|| o.password.clone()))
        .db_name(Some(o.database.clone()))
        // Otherwise mysql_async may move a loopback connection to the server's Unix socket,
        // around the proxy under test.
        .prefer_socket(false);
    Ok(b.into())
}

async fn connect(what: &'static str, addr: &str, o: &CheckOptions) -> Result<Conn, CheckError> {
    let opts = opts(addr, o)?;
    match tokio::time::timeout(Duration::from_secs(10), Conn::new(opts)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(source)) => Err(CheckError::Connect {
            what,
            addr: addr.to_string(),
            source,
        }),
        Err(_) => Err(CheckError::Connect {
            what,
            addr: addr.to_string(),
            source: mysql_async::Error::Other("connect timed out after 10 s".into()),
        }),
    }
}

async fn qcache_hits(c: &mut Conn) -> Option<u64> {
    let rows: Vec<(String, String)> = c.query("SHOW STATUS LIKE 'Qcache_hits'").await.ok()?;
    rows.first()?.1.parse().ok()
}

/// Runs the check and reports what it saw. Errors are for a run that could not start; a run
/// that found stale reads returns `Ok` with a report that does not pass.
pub async fn run(o: &CheckOptions) -> Result<Report, CheckError> {
    if o.writers == 0 || o.readers == 0 || o.keys_per_writer == 0 {
        return Err(CheckError::Options(
            "writers, readers and keys per writer must be at least 1".into(),
        ));
    }
    if o.direct_writes && o.direct.is_none() {
        return Err(CheckError::Options("--direct-writes needs --direct".into()));
    }
    let names = Names::new();
    let nkeys = o.writers * o.keys_per_writer;
    let mut admin = connect("the target", &o.target, o).await?;
    setup(&mut admin, &names, nkeys)
        .await
        .map_err(CheckError::Setup)?;
    let hits_before = qcache_hits(&mut admin).await;

    let ledger = Arc::new(Ledger::new(nkeys, o.allowed_lag, o.cross_lag));
    let targets: Vec<String> = std::iter::once(o.target.clone())
        .chain(o.more_targets.iter().cloned())
        .collect();
    let mut hits_before = vec![hits_before];
    for t in &targets[1..] {
        let mut c = connect("a target", t, o).await?;
        hits_before.push(qcache_hits(&mut c).await);
        let _ = c.disconnect().await;
    }
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..o.writers {
        let keys: Vec<usize> = (w * o.keys_per_writer..(w + 1) * o.keys_per_writer).collect();
        let ctx = Worker {
            o: o.clone(),
            names: names.clone(),
            ledger: ledger.clone(),
            tally: tally.clone(),
            stop: stop.clone(),
            rng: Rng(o.seed ^ (w as u64 + 1).wrapping_mul(0x1000_0001)),
            nkeys,
            via: w % targets.len(),
            targets: targets.clone(),
        };
        tasks.spawn(ctx.write_loop(keys));
    }
    for r in 0..o.readers {
        let ctx = Worker {
            o: o.clone(),
            names: names.clone(),
            ledger: ledger.clone(),
            tally: tally.clone(),
            stop: stop.clone(),
            rng: Rng(o.seed ^ (r as u64 + 1).wrapping_mul(0x7000_0003)),
            nkeys,
            // Readers start on another target than the writer of the same index.
            via: (r + 1) % targets.len(),
            targets: targets.clone(),
        };
        tasks.spawn(ctx.read_loop());
    }
    tokio::time::sleep(o.duration).await;
    stop.store(true, Ordering::Relaxed);
    // A worker stuck on a dead connection must not hold the report back forever.
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tally.error("shutdown", "workers did not finish within 30 s; aborted");
        tasks.abort_all();
    }
    let elapsed = started.elapsed();
    let mut hits_after = vec![qcache_hits(&mut admin).await];
    for t in &targets[1..] {
        match connect("a target", t, o).await {
            Ok(mut c) => {
                hits_after.push(qcache_hits(&mut c).await);
                let _ = c.disconnect().await;
            }
            Err(_) => hits_after.push(None),
        }
    }
    if let Err(e) = teardown(&mut admin, &names).await {
        tally.error("dropping the check tables", e);
    }
    let _ = admin.disconnect().await;

    let (stale_examples, error_examples) = {
        let ex = tally.examples.lock().unwrap_or_else(|p| p.into_inner());
        (ex.0.clone(), ex.1.clone())
    };
    Ok(Report {
        reads: tally.reads.load(Ordering::Relaxed),
        writes: tally.writes.load(Ordering::Relaxed),
        direct_writes: tally.direct_writes.load(Ordering::Relaxed),
        errors: tally.errors.load(Ordering::Relaxed),
        error_examples,
        stale_reads: tally.stale.load(Ordering::Relaxed),
        stale_examples,
        hits: hits_before
            .iter()
            .zip(&hits_after)
            .map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?)))
            .sum(),
        elapsed,
    })
}

async fn setup(c: &mut Conn, n: &Names, nkeys: usize) -> Result<(), mysql_async::Error> {
    c.query_drop(format!("DROP VIEW IF EXISTS `{}`", n.v))
        .await?;
    c.query_drop(format!(
        "DROP TABLE IF EXISTS `{}`, `{}`, `{}`, `{}`",
        n.c, n.j, n.s, n.cu
    ))
    .await?;
    c.query_drop(format!(
        "CREATE TABLE `{}` (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
        n.c
    ))
    .await?;
    c.query_drop(format!(
        "CREATE TABLE `{}` (id INT PRIMARY KEY, w BIGINT NOT NULL) ENGINE=InnoDB",
        n.j
    ))
    .await?;
    c.query_drop(format!(
        "CREATE VIEW `{}` AS SELECT c.id, c.v, j.w FROM `{}` c JOIN `{}` j ON j.id = c.id",
        n.v, n.c, n.j
    ))
    .await?;
    let rows: Vec<String> = (0..nkeys).map(|k| format!("({k}, 0)")).collect();
    let rows = rows.join(", ");
    c.query_drop(format!("INSERT INTO `{}` VALUES {rows}", n.c))
        .await?;
    c.query_drop(format!("INSERT INTO `{}` VALUES {rows}", n.j))
        .await?;
    c.query_drop(format!(
        "CREATE TABLE `{}` (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=InnoDB",
        n.cu
    ))
    .await?;
    c.query_drop(format!(
        "CREATE TABLE `{}` (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
         v BIGINT NOT NULL, at DATETIME NOT NULL, KEY (customer_id), KEY (at)) ENGINE=InnoDB",
        n.s
    ))
    .await?;
    let names: Vec<String> = (0..nkeys).map(|k| format!("({k}, 'c{k}')")).collect();
    c.query_drop(format!(
        "INSERT INTO `{}` VALUES {}",
        n.cu,
        names.join(", ")
    ))
    .await?;
    // Every customer starts with `v` = 1..=SLICE_START.
    let rows: Vec<String> = (0..nkeys)
        .flat_map(|k| {
            (1..=SLICE_START).map(move |v| format!("({k}, {v}, '{} 0{v}:00:00')", day_of(k)))
        })
        .collect();
    c.query_drop(format!(
        "INSERT INTO `{}` (customer_id, v, at) VALUES {}",
        n.s,
        rows.join(", ")
    ))
    .await?;
    Ok(())
}

/// Rows each customer starts with (`v` = 1..=SLICE_START).
const SLICE_START: i64 = 3;

/// Customer `k`'s day in the slice table, `YYYY-MM-DD`: 2026-01-01 and `k` days on. (The
/// checker keeps its own calendar: it is a client and imports nothing of the proxy's.)
fn day_of(k: usize) -> String {
    let (mut y, mut m, mut d) = (2026u32, 1u32, 1 + k as u64);
    loop {
        let leap = (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
        let len = match m {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        if d <= len {
            return format!("{y:04}-{m:02}-{d:02}");
        }
        d -= len;
        m += 1;
        if m > 12 {
            m = 1;
            y += 1;
        }
    }
}

async fn teardown(c: &mut Conn, n: &Names) -> Result<(), mysql_async::Error> {
    c.query_drop(format!("DROP VIEW IF EXISTS `{}`", n.v))
        .await?;
    c.query_drop(format!(
        "DROP TABLE IF EXISTS `{}`, `{}`, `{}`, `{}`",
        n.c, n.j, n.s, n.cu
    ))
    .await
}

/// A writer's view of its customers' rows in the slice table: their `v`s, lowest first, and
/// the next value to write. Only the owning writer changes a customer's rows.
struct Customers {
    keys: Vec<usize>,
    rows: Vec<VecDeque<i64>>,
    next: Vec<i64>,
    /// A slice write failed without an answer: whether it happened is unknown, so this
    /// writer's view may be wrong and it stops writing slices (reads stay checked against
    /// what was acknowledged).
    lost: bool,
}

impl Customers {
    fn new(keys: Vec<usize>) -> Customers {
        let n = keys.len();
        Customers {
            keys,
            rows: vec![(1..=SLICE_START).collect(); n],
            next: vec![SLICE_START + 1; n],
            lost: false,
        }
    }

    fn take_next(&mut self, i: usize) -> i64 {
        let v = self.next[i];
        self.next[i] += 1;
        v
    }
}

/// One slice write: the statement (text with literals, or prepared with parameters), then
/// what it does to the writer's view once acknowledged.
struct SliceWrite {
    text: String,
    prepared: String,
    params: Vec<mysql_async::Value>,
    /// (customer index in `Customers`, value appended) and (customer index) whose lowest
    /// row goes.
    appends: Vec<(usize, i64)>,
    removes_lowest: Option<usize>,
}

impl SliceWrite {
    /// Applies an acknowledged write to the view; returns the ledger entries it proves.
    fn apply(&self, cs: &mut Customers) -> Vec<(Table, usize, i64)> {
        let mut out = Vec::new();
        if let Some(i) = self.removes_lowest {
            cs.rows[i].pop_front();
            if let Some(&lowest) = cs.rows[i].front() {
                out.push((Table::SliceMin, cs.keys[i], lowest));
            }
        }
        for &(i, v) in &self.appends {
            cs.rows[i].push_back(v);
            out.push((Table::SliceMax, cs.keys[i], v));
        }
        out
    }
}

struct Worker {
    o: CheckOptions,
    names: Names,
    ledger: Arc<Ledger>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    rng: Rng,
    nkeys: usize,
    /// Index in `targets` of the one this worker talks to.
    via: usize,
    targets: Vec<String>,
}

/// A connection that is reopened after an error, so that one failure does not end a worker.
struct Link {
    what: &'static str,
    addr: String,
    conn: Option<Conn>,
}

impl Link {
    async fn get(&mut self, o: &CheckOptions, tally: &Tally) -> Option<&mut Conn> {
        if self.conn.is_none() {
            match connect(self.what, &self.addr, o).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    tally.error("connect", e);
                    // Do not spin against a target that is down.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return None;
                }
            }
        }
        self.conn.as_mut()
    }

    /// After an error the connection's state (an open transaction) is unknown: drop it.
    fn fail(&mut self) {
        self.conn = None;
    }
}

/// A plain write (`mix` 0..=3) of `value` to `key`: the rows it changed once acknowledged.
async fn plain_write(
    conn: &mut Conn,
    n: &Names,
    mix: usize,
    key: usize,
    value: i64,
) -> Result<Vec<(Table, usize, i64)>, mysql_async::Error> {
    match mix {
        0 => {
            conn.query_drop(format!("UPDATE `{}` SET v = {value} WHERE id = {key}", n.c))
                .await?;
            Ok(vec![(Table::C, key, value)])
        }
        1 => {
            conn.exec_drop(
                format!("UPDATE `{}` SET w = ? WHERE id = ?", n.j),
                (value, key as i64),
            )
            .await?;
            Ok(vec![(Table::J, key, value)])
        }
        2 => {
            // Both tables in one transaction: acknowledged by the COMMIT's OK.
            conn.query_drop("START TRANSACTION").await?;
            conn.exec_drop(
                format!("UPDATE `{}` SET v = ? WHERE id = ?", n.c),
                (value, key as i64),
            )
            .await?;
            conn.query_drop(format!("UPDATE `{}` SET w = {value} WHERE id = {key}", n.j))
                .await?;
            conn.query_drop("COMMIT").await?;
            Ok(vec![(Table::C, key, value), (Table::J, key, value)])
        }
        _ => {
            // autocommit=0 style: the write is only acknowledged by COMMIT.
            conn.query_drop("SET autocommit = 0").await?;
            conn.query_drop(format!("UPDATE `{}` SET v = {value} WHERE id = {key}", n.c))
                .await?;
            conn.query_drop("COMMIT").await?;
            conn.query_drop("SET autocommit = 1").await?;
            Ok(vec![(Table::C, key, value)])
        }
    }
}

impl Worker {
    async fn write_loop(mut self, keys: Vec<usize>) {
        let mut next = vec![0i64; self.nkeys];
        // The customers of the slice table are numbered like the keys, and owned alike.
        let mut cs = Customers::new(keys.clone());
        let mut target = Link {
            what: "the target",
            addr: self.targets[self.via].clone(),
            conn: None,
        };
        let mut direct = self.o.direct.clone().map(|addr| Link {
            what: "the server (direct)",
            addr,
            conn: None,
        });
        while !self.stop.load(Ordering::Relaxed) {
            let key = keys[self.rng.below(keys.len())];
            next[key] += 1;
            let value = next[key];
            let go_direct = self.o.direct_writes && self.rng.chance(self.o.direct_share);
            let mix = match (cs.lost, self.o.slices_only) {
                (true, _) => self.rng.below(4),
                (false, true) => 4 + self.rng.below(3),
                (false, false) => self.rng.below(7),
            };
            let slice = (mix >= 4).then(|| self.slice_write(mix, &mut cs));
            let prepared = self.rng.chance(0.5);
            let link = match (go_direct, direct.as_mut()) {
                (true, Some(d)) => d,
                _ => &mut target,
            };
            let Some(conn) = link.get(&self.o, &self.tally).await else {
                continue;
            };
            let n = &self.names;
            let res: Result<Vec<(Table, usize, i64)>, mysql_async::Error> = async {
                if let Some(w) = &slice {
                    // Autocommit only: a transaction's writes may bump whole tables, which
                    // would hide what slices do (transactions are in the mix above).
                    if prepared {
                        conn.exec_drop(w.prepared.as_str(), w.params.clone())
                            .await?;
                    } else {
                        conn.query_drop(w.text.as_str()).await?;
                    }
                    return Ok(w.apply(&mut cs));
                }
                plain_write(conn, n, mix, key, value).await
            }
            .await;
            match res {
                Ok(acked) => {
                    let at = Instant::now();
                    for (t, k, value) in acked {
                        let ack = Ack {
                            at,
                            value,
                            direct: go_direct,
                            via: self.via,
                        };
                        self.ledger.ack(t, k, ack);
                    }
                    self.tally.writes.fetch_add(1, Ordering::Relaxed);
                    if go_direct {
                        self.tally.direct_writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    self.tally.error("write", e);
                    link.fail();
                    if slice.is_some() {
                        cs.lost = true;
                    }
                }
            }
        }
        for link in std::iter::once(&mut target).chain(direct.as_mut()) {
            if let Some(c) = link.conn.take() {
                let _ = c.disconnect().await;
            }
        }
    }

    /// Plans one write to the slice table (`mix` 4: insert one or two rows, 5: delete a
    /// customer's lowest row, 6: move it to another customer with a new highest value). A
    /// customer never drops below two rows, so its MIN and MAX both stay defined and
    /// growing; what cannot be done keeps to an insert.
    fn slice_write(&mut self, mix: usize, cs: &mut Customers) -> SliceWrite {
        let s = &self.names.s;
        let n = cs.keys.len();
        let i = self.rng.below(n);
        let other = (n > 1).then(|| (i + 1 + self.rng.below(n - 1)) % n);
        let removable = cs.rows[i].len() > 2;
        match (mix, other) {
            (5, _) if removable => {
                let low = cs.rows[i][0];
                let x = cs.keys[i] as i64;
                SliceWrite {
                    text: format!("DELETE FROM `{s}` WHERE customer_id = {x} AND v = {low}"),
                    prepared: format!("DELETE FROM `{s}` WHERE customer_id = ? AND v = ?"),
                    params: vec![x.into(), low.into()],
                    appends: Vec::new(),
                    removes_lowest: Some(i),
                }
            }
            (6, Some(j)) if removable => {
                let low = cs.rows[i][0];
                let (x, y) = (cs.keys[i] as i64, cs.keys[j] as i64);
                let v = cs.take_next(j);
                let at = format!("{} 23:00:00", day_of(cs.keys[j]));
                SliceWrite {
                    text: format!(
                        "UPDATE `{s}` SET customer_id = {y}, v = {v}, at = '{at}' \
                         WHERE customer_id = {x} AND v = {low}"
                    ),
                    prepared: format!(
                        "UPDATE `{s}` SET customer_id = ?, v = ?, at = ? \
                         WHERE customer_id = ? AND v = ?"
                    ),
                    params: vec![y.into(), v.into(), at.into(), x.into(), low.into()],
                    appends: vec![(j, v)],
                    removes_lowest: Some(i),
                }
            }
            _ => {
                // One row, or one for this customer and one for another.
                let mut targets = vec![i];
                if let Some(j) = other.filter(|_| self.rng.chance(0.3)) {
                    targets.push(j);
                }
                let appends: Vec<(usize, i64)> =
                    targets.iter().map(|&t| (t, cs.take_next(t))).collect();
                // Each row at a time of its customer's day (`v` seconds past noon).
                let at = |t: usize, v: i64| {
                    let secs = v.rem_euclid(3600);
                    format!(
                        "{} 12:{:02}:{:02}",
                        day_of(cs.keys[t]),
                        secs / 60,
                        secs % 60
                    )
                };
                let lits: Vec<String> = appends
                    .iter()
                    .map(|&(t, v)| format!("({}, {v}, '{}')", cs.keys[t], at(t, v)))
                    .collect();
                let marks = vec!["(?, ?, ?)"; appends.len()].join(", ");
                SliceWrite {
                    text: format!(
                        "INSERT INTO `{s}` (customer_id, v, at) VALUES {}",
                        lits.join(", ")
                    ),
                    prepared: format!("INSERT INTO `{s}` (customer_id, v, at) VALUES {marks}"),
                    params: appends
                        .iter()
                        .flat_map(|&(t, v)| [(cs.keys[t] as i64).into(), v.into(), at(t, v).into()])
                        .collect(),
                    appends,
                    removes_lowest: None,
                }
            }
        }
    }

    async fn read_loop(mut self) {
        let mut link = Link {
            what: "the target",
            addr: self.targets[self.via].clone(),
            conn: None,
        };
        let at = if self.targets.len() > 1 {
            format!("@{}", self.targets[self.via])
        } else {
            String::new()
        };
        while !self.stop.load(Ordering::Relaxed) {
            let Some(conn) = link.get(&self.o, &self.tally).await else {
                continue;
            };
            let key = self.rng.below(self.nkeys);
            let kind = if self.o.slices_only {
                7 + self.rng.below(5)
            } else {
                self.rng.below(12)
            };
            let prepared = self.rng.chance(0.5);
            let in_txn = self.rng.chance(0.2);
            let proto = match (in_txn, prepared) {
                (true, true) => "prepared/txn",
                (true, false) => "text/txn",
                (false, true) => "prepared",
                (false, false) => "text",
            };
            if kind >= 7 {
                let label = format!("{proto}{at}");
                if let Err(e) = self.slice_read(conn, kind, prepared, in_txn, &label).await {
                    self.tally.error("read", e);
                    link.fail();
                }
                continue;
            }
            let start = Instant::now();
            let (what, sql, params, floors) = self.plain_read(kind, key, prepared, start);
            let res: Result<Option<(i64, i64)>, mysql_async::Error> = async {
                if in_txn {
                    conn.query_drop("START TRANSACTION").await?;
                }
                let row = if prepared {
                    conn.exec_first(sql.as_str(), params.clone()).await?
                } else {
                    conn.query_first(sql.as_str()).await?
                };
                if in_txn {
                    conn.query_drop("COMMIT").await?;
                }
                Ok(row)
            }
            .await;
            if !self.judge_plain(res, what, &format!("{proto}{at}"), &sql, &params, &floors) {
                link.fail();
            }
        }
        if let Some(c) = link.conn.take() {
            let _ = c.disconnect().await;
        }
    }

    /// A plain read (`kind` 0..=6) of `key`, or of a range of up to 4 keys from it for the
    /// aggregates: (what, its SQL, its keys, the floors of its two columns, taken now, before
    /// it is sent).
    fn plain_read(
        &self,
        kind: usize,
        key: usize,
        prepared: bool,
        start: Instant,
    ) -> (&'static str, String, Vec<i64>, Vec<i64>) {
        let via = self.via;
        // A range of up to 4 keys for the aggregates.
        let lo = key.min(self.nkeys.saturating_sub(4));
        let hi = (lo + 3).min(self.nkeys - 1);
        let n = &self.names;
        let l = &self.ledger;
        // (what, keys, column floors) — taken before the read is sent.
        let (what, sql, params, floors): (&str, String, Vec<i64>, Vec<i64>) = match kind {
            0 | 1 => (
                "point",
                format!("SELECT v, v FROM `{}` WHERE id = ", n.c),
                vec![key as i64],
                vec![
                    l.floor(Table::C, key, start, via),
                    l.floor(Table::C, key, start, via),
                ],
            ),
            2 => (
                "point(j)",
                format!("SELECT w, w FROM `{}` WHERE id = ", n.j),
                vec![key as i64],
                vec![
                    l.floor(Table::J, key, start, via),
                    l.floor(Table::J, key, start, via),
                ],
            ),
            3 => (
                "join",
                format!(
                    "SELECT c.v, j.w FROM `{}` c JOIN `{}` j ON j.id = c.id WHERE c.id = ",
                    n.c, n.j
                ),
                vec![key as i64],
                vec![
                    l.floor(Table::C, key, start, via),
                    l.floor(Table::J, key, start, via),
                ],
            ),
            4 => (
                "view",
                format!("SELECT v, w FROM `{}` WHERE id = ", n.v),
                vec![key as i64],
                vec![
                    l.floor(Table::C, key, start, via),
                    l.floor(Table::J, key, start, via),
                ],
            ),
            5 => {
                let (mut sum, mut max) = (0i64, 0i64);
                for k in lo..=hi {
                    let f = l.floor(Table::C, k, start, via);
                    sum += f;
                    max = max.max(f);
                }
                (
                    "sum+max",
                    format!(
                        "SELECT CAST(SUM(v) AS SIGNED), MAX(v) FROM `{}` WHERE id BETWEEN ",
                        n.c
                    ),
                    vec![lo as i64, hi as i64],
                    vec![sum, max],
                )
            }
            _ => {
                // SUM over one table, MAX over the other, through a join.
                let sum = (lo..=hi).map(|k| l.floor(Table::J, k, start, via)).sum();
                let max = (lo..=hi)
                    .map(|k| l.floor(Table::C, k, start, via))
                    .max()
                    .unwrap_or(0);
                (
                    "sum+max(join)",
                    format!(
                        "SELECT CAST(SUM(j.w) AS SIGNED), MAX(c.v) FROM `{}` c \
                         JOIN `{}` j ON j.id = c.id WHERE c.id BETWEEN ",
                        n.c, n.j
                    ),
                    vec![lo as i64, hi as i64],
                    vec![sum, max],
                )
            }
        };
        let sql = if params.len() == 2 {
            if prepared {
                format!("{sql}? AND ?")
            } else {
                format!("{sql}{} AND {}", params[0], params[1])
            }
        } else if prepared {
            format!("{sql}?")
        } else {
            format!("{sql}{}", params[0])
        };
        (what, sql, params, floors)
    }

    /// Checks a plain read's row against its floors and counts it. False: the connection
    /// failed.
    fn judge_plain(
        &self,
        res: Result<Option<(i64, i64)>, mysql_async::Error>,
        what: &str,
        proto_at: &str,
        sql: &str,
        params: &[i64],
        floors: &[i64],
    ) -> bool {
        match res {
            Ok(Some((a, b))) => {
                self.tally.reads.fetch_add(1, Ordering::Relaxed);
                let keys = if params.len() == 2 {
                    format!("keys {}..={}", params[0], params[1])
                } else {
                    format!("key {}", params[0])
                };
                for (got, floor) in [(a, floors[0]), (b, floors[1])] {
                    if got < floor {
                        self.tally.stale(StaleRead {
                            kind: format!("{what}/{proto_at}"),
                            keys: keys.clone(),
                            got,
                            floor,
                            by: None,
                        });
                        break;
                    }
                }
            }
            Ok(None) => {
                self.tally.reads.fetch_add(1, Ordering::Relaxed);
                self.tally.error(
                    "read",
                    format!("{sql}: no row (the check rows are never deleted)"),
                );
            }
            Err(e) => {
                self.tally.error("read", e);
                return false;
            }
        }
        true
    }
}

/// The statement of a slice read `kind` (7..=11, as [`Worker::slice_read`] lists them) of
/// customers `x` and `y` of slice table `s` (customers `cu`): (what, the customers it reads,
/// its SQL, its parameters when prepared).
fn slice_statement(
    s: &str,
    cu: &str,
    kind: usize,
    x: usize,
    y: usize,
    prepared: bool,
) -> (&'static str, Vec<usize>, String, Vec<mysql_async::Value>) {
    let (what, custs, text): (&str, Vec<usize>, String) = match kind {
        7 => (
            "slice",
            vec![x],
            format!(
                "SELECT customer_id, MIN(v), MAX(v) FROM `{s}` WHERE customer_id = {{}} \
                 GROUP BY customer_id"
            ),
        ),
        8 => (
            "slice(in)",
            vec![x, y],
            format!(
                "SELECT customer_id, MIN(v), MAX(v) FROM `{s}` \
                 WHERE customer_id IN ({{}}) GROUP BY customer_id"
            ),
        ),
        9 => (
            "slice(join)",
            vec![x],
            format!(
                "SELECT c.id, MIN(o.v), MAX(o.v) FROM `{cu}` c \
                 JOIN `{s}` o ON o.customer_id = c.id WHERE c.id = {{}} GROUP BY c.id"
            ),
        ),
        10 => (
            "slice(rows)",
            vec![x],
            format!("SELECT customer_id, v FROM `{s}` WHERE customer_id = {{}} ORDER BY v, id"),
        ),
        _ => (
            "slice(dates)",
            vec![x],
            format!(
                "SELECT customer_id, MIN(v), MAX(v) FROM `{s}` WHERE at >= {{}} \
                 AND at < {{}} GROUP BY customer_id"
            ),
        ),
    };
    // The values of the `{}`s: customers, or the customer's day and the next.
    let values: Vec<mysql_async::Value> = if kind == 11 {
        vec![day_of(x).into(), day_of(x + 1).into()]
    } else {
        custs.iter().map(|&c| (c as i64).into()).collect()
    };
    let sql = if prepared {
        let qs = vec!["?"; custs.len()].join(", ");
        text.replace("{}", &qs)
    } else if kind == 11 {
        text.replacen("{}", &format!("'{}'", day_of(x)), 1)
            .replacen("{}", &format!("'{}'", day_of(x + 1)), 1)
    } else {
        let lits: Vec<String> = custs.iter().map(|c| c.to_string()).collect();
        text.replace("{}", &lits.join(", "))
    };
    (what, custs, sql, values)
}

impl Worker {
    /// One read of the slice table (`kind` 7: one customer, 8: an IN list of two, 9: through
    /// the join chain from customers, 10: the customer's rows themselves, 11: the customer's
    /// day by a date range), checked per customer against the floors of its MIN(v) and MAX(v).
    async fn slice_read(
        &mut self,
        conn: &mut Conn,
        kind: usize,
        prepared: bool,
        in_txn: bool,
        label: &str,
    ) -> Result<(), mysql_async::Error> {
        let (s, cu) = (self.names.s.clone(), self.names.cu.clone());
        let x = self.rng.below(self.nkeys);
        let y = if self.nkeys > 1 {
            (x + 1 + self.rng.below(self.nkeys - 1)) % self.nkeys
        } else {
            x
        };
        let (what, custs, sql, params) = slice_statement(&s, &cu, kind, x, y, prepared);
        // Floors before the read is sent.
        let start = Instant::now();
        let floors: Vec<(i64, i64)> = custs
            .iter()
            .map(|&c| {
                (
                    self.ledger.floor(Table::SliceMin, c, start, self.via),
                    self.ledger.floor(Table::SliceMax, c, start, self.via),
                )
            })
            .collect();
        if in_txn {
            conn.query_drop("START TRANSACTION").await?;
        }
        // Per customer: (MIN, MAX) as read.
        let got: Vec<(i64, i64, i64)> = if kind == 10 {
            let rows: Vec<(i64, i64)> = if prepared {
                conn.exec(sql.as_str(), params).await?
            } else {
                conn.query(sql.as_str()).await?
            };
            let lo = rows.iter().map(|r| r.1).min();
            let hi = rows.iter().map(|r| r.1).max();
            match (rows.first(), lo, hi) {
                (Some(r), Some(lo), Some(hi)) => vec![(r.0, lo, hi)],
                _ => Vec::new(),
            }
        } else if prepared {
            conn.exec(sql.as_str(), params).await?
        } else {
            conn.query(sql.as_str()).await?
        };
        if in_txn {
            conn.query_drop("COMMIT").await?;
        }
        self.tally.reads.fetch_add(1, Ordering::Relaxed);
        for (&c, &(fmin, fmax)) in custs.iter().zip(&floors) {
            let Some(&(_, lo, hi)) = got.iter().find(|r| r.0 == c as i64) else {
                self.tally.error(
                    "read",
                    format!("{sql}: no rows for customer {c} (each keeps at least two)"),
                );
                continue;
            };
            for (part, table, got, floor) in [
                ("MIN(v)", Table::SliceMin, lo, fmin),
                ("MAX(v)", Table::SliceMax, hi, fmax),
            ] {
                if got < floor {
                    self.tally.stale(StaleRead {
                        kind: format!("{what}/{label}"),
                        keys: format!("{part} of customer {c}"),
                        got,
                        floor,
                        by: self.ledger.provenance(table, c, floor, start, self.via),
                    });
                    break;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn customer_days() {
        assert_eq!(day_of(0), "2026-01-01");
        assert_eq!(day_of(31), "2026-02-01");
        assert_eq!(day_of(364), "2026-12-31");
        assert_eq!(day_of(365 + 59), "2027-03-01");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn floor_respects_lag_for_direct_writes_only() {
        let l = Ledger::new(1, Duration::from_millis(100), Duration::from_millis(30));
        let t0 = Instant::now();
        l.ack(
            Table::C,
            0,
            Ack {
                at: t0,
                value: 1,
                direct: false,
                via: 0,
            },
        );
        l.ack(
            Table::C,
            0,
            Ack {
                at: t0,
                value: 2,
                direct: true,
                via: 0,
            },
        );
        // A read starting right after both: the proxied write counts, the direct one not yet.
        assert_eq!(l.floor(Table::C, 0, t0 + Duration::from_millis(1), 0), 1);
        assert_eq!(l.floor(Table::C, 0, t0 + Duration::from_millis(101), 0), 2);
        // A read that started before the acknowledgement owes it nothing.
        assert_eq!(l.floor(Table::C, 0, t0, 0), 0);
        assert_eq!(l.floor(Table::J, 0, t0 + Duration::from_secs(1), 0), 0);
        // Through another target of the fleet, a proxied write counts after the cross lag.
        let ms = Duration::from_millis;
        l.ack(
            Table::J,
            0,
            Ack {
                at: t0,
                value: 5,
                direct: false,
                via: 1,
            },
        );
        assert_eq!(l.floor(Table::J, 0, t0 + ms(1), 1), 5);
        assert_eq!(l.floor(Table::J, 0, t0 + ms(1), 0), 0);
        assert_eq!(l.floor(Table::J, 0, t0 + ms(31), 0), 5);
    }
}
