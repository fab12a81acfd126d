//! The binlog stream kept alive on MariaDB: every kind of transaction the server logs (XA
//! with long xids, large transactions, statement and row mixes, DDL, sequences, temporary
//! tables, triggers, scheduled events, rotation) passes through the tail without losing its
//! stream and without a stale read; a killed dump thread resumes without emptying the cache;
//! a real gap (the binlog reset while the tail was away) still invalidates everything.
//!
//! Each test runs its own private mariadbd (the options differ), so nothing another test
//! does can count as a stream loss here.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use qcache::config::BinlogMode;

/// How long a direct write may take to show through qcache. The tail sees commits within
/// milliseconds; the margin is for a machine busy compiling.
const FRESH_WITHIN: Duration = Duration::from_secs(5);

/// A 37-byte xid as an ORM's two-phase commit writes it (`_sa_…`).
const LONG_XID: &str =
    "X'5f73615f31323334353637383961626364656630313233343536373839616263646566303132'";

fn server(args: &[&str]) -> common::TestDb {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    common::own_server_with(&args)
}

fn url(host: &str, port: u16, db: &str) -> String {
    format!("mysql://root@{host}:{port}/{db}?prefer_socket=false")
}

async fn connect(u: String) -> Conn {
    tokio::time::timeout(
        common::CONNECT_TIMEOUT,
        Conn::new(mysql_async::Opts::from_url(&u).unwrap()),
    )
    .await
    .unwrap_or_else(|_| panic!("connecting to {u} timed out"))
    .unwrap_or_else(|e| panic!("cannot connect to {u}: {e}"))
}

async fn direct(db: &common::TestDb, schema: &str) -> Conn {
    connect(url(&db.host, db.port, schema)).await
}

struct Proxy {
    running: qcache::server::Running,
}

impl Proxy {
    async fn conn(&self, schema: &str) -> Conn {
        connect(url("127.0.0.1", self.running.addr.port(), schema)).await
    }

    fn tail(&self) -> std::sync::Arc<qcache::invalidation::BinlogHandle> {
        self.running
            .shared
            .binlog
            .clone()
            .expect("binlog tail running")
    }

    fn hits(&self) -> u64 {
        self.running.shared.cache.stats().hits()
    }

    /// `SHOW QCACHE STATUS` as qcache answers it.
    fn status(&self, name: &str) -> Option<String> {
        let rows = qcache::admin::statements::status(&self.running.shared);
        rows.rows.into_iter().find_map(|r| match (&r[0], &r[1]) {
            (Some(n), v) if n == name => Some(v.clone().unwrap_or_default()),
            _ => None,
        })
    }

    fn metrics(&self) -> String {
        qcache::admin::metrics::render(&self.running.shared)
            .expect("metrics render")
            .0
    }
}

/// qcache in front of `db` with the binlog tail on, registered under its own server id,
/// and connected.
async fn proxy(db: &common::TestDb, user: &str) -> Proxy {
    proxy_at(db.addr(), user).await
}

/// [`proxy`] with the upstream at `addr` (a relay in front of the server).
async fn proxy_at(addr: String, user: &str) -> Proxy {
    common::init_tracing();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut config = qcache::config::Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.server.upstream = addr;
    config.admin.listen = String::new();
    config.invalidation.user = user.into();
    config.invalidation.password = String::new();
    config.invalidation.binlog = BinlogMode::On;
    config.invalidation.server_id =
        2_000_000 + (std::process::id() % 10_000) * 10 + NEXT.fetch_add(1, Ordering::Relaxed);
    let running = qcache::server::start(config)
        .await
        .unwrap_or_else(|e| panic!("qcache::server::start failed: {e:#}"));
    let p = Proxy { running };
    let tail = p.tail();
    assert!(
        tail.wait_until_connected(Duration::from_secs(20)).await,
        "binlog stream did not connect: {:?}",
        tail.status()
    );
    p
}

async fn exec(c: &mut Conn, sql: &str) {
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn first(c: &mut Conn, q: &str) -> Option<String> {
    c.query_first::<Option<String>, _>(q)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"))
        .flatten()
}

/// Reads `q` through qcache until it returns `want`; fails after [`FRESH_WITHIN`].
async fn fresh(c: &mut Conn, q: &str, want: &str, what: &str) -> Duration {
    let start = Instant::now();
    loop {
        let got = first(c, q).await;
        if got.as_deref() == Some(want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < FRESH_WITHIN,
            "{what}: `{q}` through qcache still returns {got:?}, not {want:?}, {FRESH_WITHIN:?} \
             after the direct write"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Reads `q` through qcache twice, so the second read is a hit when it is cacheable.
async fn warm(c: &mut Conn, q: &str) -> Option<String> {
    first(c, q).await;
    first(c, q).await
}

/// The tail has not lost its stream once.
fn assert_no_loss(p: &Proxy, when: &str) {
    let tail = p.tail();
    assert_eq!(
        tail.reconnects(),
        0,
        "{when}: the binlog stream was lost: {:?}",
        tail.status()
    );
    assert!(
        tail.connected(),
        "{when}: tail not connected: {:?}",
        tail.status()
    );
}

/// An XA transaction with a 37-byte xid, prepared then committed: MariaDB 10.11 ended the dump
/// of a replica that does not declare the GTID capability at its GTID event (error 1236
/// "Failed to replace GTID event with backwards-compatible event").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xa_with_a_long_xid_keeps_the_stream() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    exec(&mut d, "CREATE TABLE t (id INT PRIMARY KEY, v INT)").await;
    exec(&mut d, "INSERT INTO t VALUES (1, 0)").await;
    let p = proxy(&db, "root").await;
    let mut c = p.conn("test").await;
    let q = "SELECT v FROM t WHERE id = 1";
    assert_eq!(warm(&mut c, q).await.as_deref(), Some("0"));
    for (i, end) in ["COMMIT", "ROLLBACK"].iter().enumerate() {
        exec(&mut d, &format!("XA START {LONG_XID}")).await;
        exec(&mut d, &format!("UPDATE t SET v = {} WHERE id = 1", i + 10)).await;
        exec(&mut d, &format!("XA END {LONG_XID}")).await;
        exec(&mut d, &format!("XA PREPARE {LONG_XID}")).await;
        exec(&mut d, &format!("XA {end} {LONG_XID}")).await;
    }
    fresh(&mut c, q, "10", "XA commit").await;
    // A plain commit after them still arrives: the stream is alive.
    exec(&mut d, "UPDATE t SET v = 99 WHERE id = 1").await;
    fresh(&mut c, q, "99", "commit after XA").await;
    assert_no_loss(&p, "after XA with a long xid");
    p.running.abort().await;
}

/// One step of the workload: the read is cached, the direct statements change what it
/// returns, and qcache must return the new value within the bound.
async fn step(c: &mut Conn, d: &mut Conn, what: &str, sqls: &[&str], q: &str, want: &str) {
    warm(c, q).await;
    for sql in sqls {
        exec(d, sql).await;
    }
    fresh(c, q, want, what).await;
}

fn xa(xid: &str, body: &[&str], end: &str) -> Vec<String> {
    let mut v = vec![format!("XA START {xid}")];
    v.extend(body.iter().map(|s| s.to_string()));
    v.push(format!("XA END {xid}"));
    match end {
        "ONE PHASE" => v.push(format!("XA COMMIT {xid} ONE PHASE")),
        end => {
            v.push(format!("XA PREPARE {xid}"));
            v.push(format!("XA {end} {xid}"));
        }
    }
    v
}

/// Every kind of transaction MariaDB logs, in every binlog format, with the tail attached:
/// the stream is never lost and no read through qcache stays stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_transaction_keeps_the_stream_and_reads_fresh() {
    let db = server(&["--binlog-format=MIXED", "--event-scheduler=ON"]);
    let mut d = direct(&db, "test").await;
    let mut d2 = direct(&db, "test").await;
    for sql in [
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (1, 0), (2, 0)",
        "CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(255))",
        "CREATE TABLE m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
        "INSERT INTO m VALUES (1, 0)",
        "CREATE TABLE t_cs (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t_cs VALUES (1, 0)",
        "CREATE TABLE tr_src (id INT)",
        "CREATE TRIGGER trg AFTER INSERT ON tr_src FOR EACH ROW UPDATE t SET v = NEW.id WHERE id = 1",
    ] {
        exec(&mut d, sql).await;
    }
    let p = proxy(&db, "root").await;
    let mut c = p.conn("test").await;
    let hits_before = p.hits();
    let q = "SELECT v FROM t WHERE id = 1";
    let x = LONG_XID;

    for fmt in ["ROW", "STATEMENT", "MIXED"] {
        exec(&mut d, &format!("SET SESSION binlog_format = {fmt}")).await;
        let base = match fmt {
            "ROW" => 100,
            "STATEMENT" => 200,
            _ => 300,
        };
        let v = |n: i32| (base + n).to_string();
        let set = |n: i32| format!("UPDATE t SET v = {} WHERE id = 1", base + n);
        step(
            &mut c,
            &mut d,
            &format!("{fmt} autocommit"),
            &[&set(1)],
            q,
            &v(1),
        )
        .await;
        // Unsafe for statement logging: MIXED logs it as rows.
        let unsafe_set = format!(
            "UPDATE t SET v = {} + 0 * LENGTH(UUID()) WHERE id = 1",
            base + 2
        );
        if fmt != "STATEMENT" {
            step(
                &mut c,
                &mut d,
                &format!("{fmt} unsafe"),
                &[&unsafe_set],
                q,
                &v(2),
            )
            .await;
        }
        // A large transaction: thousands of rows over many events, then the change.
        let big = [
            "BEGIN".to_string(),
            "DELETE FROM big".to_string(),
            "INSERT INTO big SELECT seq, REPEAT('x', 200) FROM seq_1_to_20000".to_string(),
            "UPDATE big SET pad = 'y' WHERE id % 7 = 0".to_string(),
            set(3),
            "COMMIT".to_string(),
        ];
        let big: Vec<&str> = big.iter().map(String::as_str).collect();
        step(
            &mut c,
            &mut d,
            &format!("{fmt} large transaction"),
            &big,
            q,
            &v(3),
        )
        .await;
        // XA, prepared then committed, rolled back, and one-phase.
        let body = set(4);
        let commit = xa(x, &[&body], "COMMIT");
        let commit: Vec<&str> = commit.iter().map(String::as_str).collect();
        step(
            &mut c,
            &mut d,
            &format!("{fmt} XA commit"),
            &commit,
            q,
            &v(4),
        )
        .await;
        let body = set(99);
        let rollback = xa(x, &[&body], "ROLLBACK");
        for sql in &rollback {
            exec(&mut d, sql).await;
        }
        let body = set(5);
        let one = xa("'one-phase'", &[&body], "ONE PHASE");
        let one: Vec<&str> = one.iter().map(String::as_str).collect();
        step(
            &mut c,
            &mut d,
            &format!("{fmt} XA one phase"),
            &one,
            q,
            &v(5),
        )
        .await;
        // XA prepared, the binlog rotated, then committed from another connection's view.
        for sql in [
            format!("XA START {x}"),
            set(6),
            format!("XA END {x}"),
            format!("XA PREPARE {x}"),
        ] {
            exec(&mut d, &sql).await;
        }
        warm(&mut c, q).await;
        exec(&mut d2, "FLUSH BINARY LOGS").await;
        exec(&mut d, &format!("XA COMMIT {x}")).await;
        fresh(&mut c, q, &v(6), &format!("{fmt} XA commit after rotation")).await;
        // Non-transactional changes inside a rolled-back transaction still happened.
        let qm = "SELECT v FROM m WHERE id = 1";
        let mv = format!("UPDATE m SET v = {} WHERE id = 1", base + 7);
        step(
            &mut c,
            &mut d,
            &format!("{fmt} MyISAM in a rolled-back transaction"),
            &["BEGIN", &mv, "ROLLBACK"],
            qm,
            &v(7),
        )
        .await;
        // Temporary tables feeding a write.
        let tmp = [
            "CREATE TEMPORARY TABLE tmp (v INT)".to_string(),
            format!("INSERT INTO tmp VALUES ({})", base + 8),
            "UPDATE t JOIN tmp SET t.v = tmp.v WHERE t.id = 1".to_string(),
            "DROP TEMPORARY TABLE tmp".to_string(),
        ];
        let tmp: Vec<&str> = tmp.iter().map(String::as_str).collect();
        step(
            &mut c,
            &mut d,
            &format!("{fmt} temporary table"),
            &tmp,
            q,
            &v(8),
        )
        .await;
        // A trigger writes t.
        let trig = format!("INSERT INTO tr_src VALUES ({})", base + 9);
        step(
            &mut c,
            &mut d,
            &format!("{fmt} trigger"),
            &[&trig],
            q,
            &v(9),
        )
        .await;
        // CREATE … SELECT replacing a table that has a cached read.
        let qcs = "SELECT v FROM t_cs WHERE id = 1";
        let cs = format!(
            "CREATE OR REPLACE TABLE t_cs SELECT id, {} AS v FROM t WHERE id = 1",
            base + 10
        );
        step(
            &mut c,
            &mut d,
            &format!("{fmt} CREATE ... SELECT"),
            &[&cs],
            qcs,
            &v(10),
        )
        .await;
        // DDL: the table swapped for another.
        let swap = [
            "CREATE TABLE t_new LIKE t".to_string(),
            format!("INSERT INTO t_new SELECT id, {} FROM t", base + 11),
            "RENAME TABLE t TO t_old, t_new TO t".to_string(),
            "DROP TABLE t_old".to_string(),
        ];
        let swap: Vec<&str> = swap.iter().map(String::as_str).collect();
        step(&mut c, &mut d, &format!("{fmt} DDL swap"), &swap, q, &v(11)).await;
        // Sequences (their engine cannot be logged as statements: the server refuses that).
        let seq = [
            "DROP SEQUENCE IF EXISTS sq".to_string(),
            format!("CREATE SEQUENCE sq START WITH {}", base + 12),
            "UPDATE t SET v = NEXTVAL(sq) WHERE id = 1".to_string(),
        ];
        let seq: Vec<&str> = seq.iter().map(String::as_str).collect();
        if fmt != "STATEMENT" {
            step(&mut c, &mut d, &format!("{fmt} sequence"), &seq, q, &v(12)).await;
        }
        // Many small statements in one transaction, and a rotation just before it.
        let mut many = vec!["FLUSH BINARY LOGS".to_string(), "BEGIN".to_string()];
        for i in 0..200 {
            many.push(format!("UPDATE t SET v = {i} WHERE id = 2"));
        }
        many.push(set(13));
        many.push("COMMIT".into());
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        step(
            &mut c,
            &mut d,
            &format!("{fmt} many statements"),
            &many,
            q,
            &v(13),
        )
        .await;
        assert_no_loss(&p, fmt);
    }

    // The event scheduler writes on its own.
    exec(&mut d, "SET SESSION binlog_format = MIXED").await;
    let ev = "CREATE EVENT ev ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 SECOND \
              DO UPDATE t SET v = 500 WHERE id = 1";
    step(&mut c, &mut d, "scheduled event", &[ev], q, "500").await;

    assert_no_loss(&p, "the end of the workload");
    assert!(
        p.hits() > hits_before + 20,
        "reads were not served from the cache ({} hits): the test proves nothing",
        p.hits() - hits_before
    );
    // The binlog's invalidations are counted where the docs say.
    let counted: Option<String> = c
        .query_first("SHOW STATUS LIKE 'Qcache_invalidations_binlog'")
        .await
        .unwrap()
        .map(|(_, v): (String, String)| v);
    let counted: u64 = counted.and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(counted > 20, "Qcache_invalidations_binlog = {counted}");
    let metrics = p.metrics();
    assert!(
        metrics.lines().any(|l| l
            .strip_prefix("qcache_invalidations_total{source=\"binlog\"} ")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 20)),
        "qcache_invalidations_total{{source=\"binlog\"}} not counted:\n{metrics}"
    );
    assert_eq!(p.status("Qcache_binlog_reconnects").as_deref(), Some("0"));
    p.running.abort().await;
}

/// The id of the server's dump thread (the tail's connection).
async fn dump_thread(d: &mut Conn) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let id: Option<u64> = d
            .query_first(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'",
            )
            .await
            .unwrap();
        if let Some(id) = id {
            return id;
        }
        assert!(Instant::now() < deadline, "no Binlog Dump thread");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Tables `a` and `b`, one row each (`v = 1`), read by [`QA`] and [`QB`].
async fn tables_a_and_b(d: &mut Conn) {
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES (1, 1)",
        "INSERT INTO b VALUES (1, 1)",
    ] {
        exec(d, sql).await;
    }
}

const QA: &str = "SELECT v FROM a WHERE id = 1";
const QB: &str = "SELECT v FROM b WHERE id = 1";

/// Kill the server's dump thread: the tail resumes where it left off, so a cached entry of a
/// table nobody touched is still served, while a write made during the gap still
/// invalidates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_dump_thread_resumes_without_emptying_the_cache() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    tables_a_and_b(&mut d).await;
    let p = proxy(&db, "root").await;
    let tail = p.tail();
    let mut c = p.conn("test").await;
    let (qa, qb) = (QA, QB);
    // A commit after the start, so the tail has applied something to resume after.
    step(
        &mut c,
        &mut d,
        "before the kill",
        &["UPDATE b SET v = 2 WHERE id = 1"],
        qb,
        "2",
    )
    .await;
    assert_eq!(warm(&mut c, qa).await.as_deref(), Some("1"));
    assert_eq!(warm(&mut c, qb).await.as_deref(), Some("2"));

    let id = dump_thread(&mut d).await;
    exec(&mut d, &format!("KILL {id}")).await;
    // Made while the tail is away (it waits before reconnecting).
    exec(&mut d, "UPDATE b SET v = 3 WHERE id = 1").await;
    until("the tail to resume", || {
        tail.resumes() >= 1 && tail.connected()
    })
    .await;

    let hits = p.hits();
    assert_eq!(first(&mut c, qa).await.as_deref(), Some("1"));
    assert_eq!(
        p.hits(),
        hits + 1,
        "the entry of an untouched table was not served after the resume"
    );
    fresh(&mut c, qb, "3", "a write made while the stream was down").await;
    assert_eq!(
        tail.gaps(),
        0,
        "the tail started afresh: {:?}",
        tail.status()
    );
    assert_eq!(tail.reconnects(), 1);
    assert_eq!(p.status("Qcache_binlog_reconnects").as_deref(), Some("1"));
    assert_eq!(p.status("Qcache_binlog_resumes").as_deref(), Some("1"));
    let metrics = p.metrics();
    let ends: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("qcache_binlog_stream_ends_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(ends, 1, "one stream end, counted by cause:\n{metrics}");
    p.running.abort().await;
}

/// The binlog is reset while the tail is away: the events it missed are gone, so everything
/// cached is invalidated, the untouched table's entry too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_gap_still_invalidates_everything() {
    real_gap(false).await;
}

/// The same gap with the debug-build `Fault::BinlogGaps` switch on (a gap invalidates
/// nothing): the write made while the tail was away is not seen, so the test above can fail.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_left_uninvalidated_serves_stale_rows() {
    real_gap(true).await;
}

async fn real_gap(broken: bool) {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE c (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES (1, 1)",
        "INSERT INTO c VALUES (1, 1)",
        "CREATE USER qtail@'%'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO qtail@'%'",
    ] {
        exec(&mut d, sql).await;
    }
    let p = proxy(&db, "qtail").await;
    #[cfg(debug_assertions)]
    p.running
        .shared
        .cache
        .versions()
        .faults
        .set(qcache::faults::Fault::BinlogGaps, broken);
    let tail = p.tail();
    let mut c = p.conn("test").await;
    let (qa, qc) = (
        "SELECT v FROM a WHERE id = 1",
        "SELECT v FROM c WHERE id = 1",
    );
    step(
        &mut c,
        &mut d,
        "before the gap",
        &["UPDATE a SET v = 2 WHERE id = 1"],
        qa,
        "2",
    )
    .await;
    assert_eq!(warm(&mut c, qc).await.as_deref(), Some("1"));

    // Keep the tail out while the binlog is reset under it.
    exec(&mut d, "ALTER USER qtail@'%' ACCOUNT LOCK").await;
    let id = dump_thread(&mut d).await;
    exec(&mut d, &format!("KILL {id}")).await;
    until("the tail to notice", || !tail.connected()).await;
    // The new first file must not share the old one's second of creation.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    exec(&mut d, "RESET MASTER").await;
    exec(&mut d, "UPDATE a SET v = 3 WHERE id = 1").await;
    exec(&mut d, "ALTER USER qtail@'%' ACCOUNT UNLOCK").await;
    until("the tail to start afresh", || {
        tail.gaps() >= 1 && tail.connected()
    })
    .await;
    // A session from before the gap keeps its entries its own (a privilege change may have
    // been missed in it: `PrivilegeChange::missed`): a new one reads what sessions share.
    let mut c = p.conn("test").await;

    if broken {
        // Nothing told the cache of the write made in the gap: the old row is served.
        assert_eq!(first(&mut c, qa).await.as_deref(), Some("2"));
        p.running.abort().await;
        return;
    }
    fresh(&mut c, qa, "3", "a write made while the tail was away").await;
    let hits = p.hits();
    assert_eq!(first(&mut c, qc).await.as_deref(), Some("1"));
    assert_eq!(
        p.hits(),
        hits,
        "an entry cached before the gap was served after it"
    );
    assert_eq!(tail.resumes(), 0);
    assert_eq!(p.status("Qcache_binlog_gaps").as_deref(), Some("1"));
    p.running.abort().await;
}

/// `q`'s rows as text, or the server's error code: text protocol, or prepared when `exec`.
async fn answer(c: &mut Conn, q: &str, exec: bool) -> String {
    let got: Result<Vec<(i64, i64)>, _> = match exec {
        false => c.query(q).await,
        true => c.exec(q, ()).await,
    };
    match got {
        Ok(rows) => format!("{rows:?}"),
        Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
        Err(e) => panic!("{q}: {e}"),
    }
}

/// Adversary round 30, a privilege change missed in a binlog gap: a database-level REVOKE
/// made directly while the tail was away (the binlog reset under it, so the tail starts
/// afresh and never reads it). The server keeps letting a session that used the database
/// before it read `t` (the privilege is sticky) and refuses a session connected after it.
/// The gap itself invalidates everything, but the entries filled after it by the old
/// session would answer the new one under the same key unless the gap splits sessions
/// from before it (`PrivilegeChange::missed` in `connected_fresh`); text and prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privilege_change_missed_in_a_gap_still_splits_sessions() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    for sql in [
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE t2 (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (1, 1), (2, 2)",
        "CREATE USER qtail@'%'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO qtail@'%'",
        "CREATE USER g@'%' IDENTIFIED BY 'pw'",
        "GRANT SELECT ON test.* TO g@'%'",
        "GRANT SELECT ON test.t2 TO g@'%'",
    ] {
        exec(&mut d, sql).await;
    }
    let p = proxy(&db, "qtail").await;
    let tail = p.tail();
    let g = |host: &str, port: u16| format!("mysql://g:pw@{host}:{port}/test?prefer_socket=false");
    let through = g("127.0.0.1", p.running.addr.port());
    let directly = g(&db.host, db.port);
    let (read, ordered) = (
        "SELECT id, v FROM t ORDER BY id",
        "SELECT id, v FROM t WHERE id > 0 ORDER BY id",
    );
    let mut old = connect(through.clone()).await;
    let mut old_direct = connect(directly.clone()).await;
    for q in [read, ordered] {
        for exec in [false, true] {
            assert_eq!(answer(&mut old, q, exec).await, "[(1, 1), (2, 2)]");
            assert_eq!(answer(&mut old_direct, q, exec).await, "[(1, 1), (2, 2)]");
        }
    }

    // The gap, as in `real_gap`, with the REVOKE made in it.
    exec(&mut d, "ALTER USER qtail@'%' ACCOUNT LOCK").await;
    let id = dump_thread(&mut d).await;
    exec(&mut d, &format!("KILL {id}")).await;
    until("the tail to notice", || !tail.connected()).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    exec(&mut d, "RESET MASTER").await;
    exec(&mut d, "REVOKE SELECT ON test.* FROM g@'%'").await;
    exec(&mut d, "ALTER USER qtail@'%' ACCOUNT UNLOCK").await;
    until("the tail to start afresh", || {
        tail.gaps() >= 1 && tail.connected()
    })
    .await;

    let mut new = connect(through).await;
    let mut new_direct = connect(directly).await;
    let hits = p.hits();
    // The old session first (its fill is what the new one must not get), then the new;
    // `ordered` the other way round.
    let mut got = Vec::new();
    let mut want = Vec::new();
    for exec in [false, true] {
        for _ in 0..2 {
            got.push(("old", read, exec, answer(&mut old, read, exec).await));
            want.push(answer(&mut old_direct, read, exec).await);
        }
        got.push(("new", read, exec, answer(&mut new, read, exec).await));
        want.push(answer(&mut new_direct, read, exec).await);
        got.push(("new", ordered, exec, answer(&mut new, ordered, exec).await));
        want.push(answer(&mut new_direct, ordered, exec).await);
        for _ in 0..2 {
            got.push(("old", ordered, exec, answer(&mut old, ordered, exec).await));
            want.push(answer(&mut old_direct, ordered, exec).await);
        }
    }
    let served = p.hits() - hits;
    exec(&mut d, "DROP USER g@'%'").await;
    assert_eq!(
        want[0], "[(1, 1), (2, 2)]",
        "the server kept the old session's"
    );
    assert_eq!(want[2], "error 1142", "the server refuses the new session");
    for ((who, q, exec, got), want) in got.iter().zip(&want) {
        assert_eq!(
            got, want,
            "{who} session after the gap, `{q}`, prepared {exec}"
        );
    }
    assert!(served > 0, "nothing served from the cache after the gap");
    p.running.abort().await;
}

/// The server crashes and comes back on the same datadir, binlog included. Its file and
/// offsets are still there, but nothing can prove from the binlog that they are the history
/// the tail read (a fresh server or a RESET MASTER makes the same), so everything cached is
/// invalidated, as a restart empties MariaDB's own query cache; a write made after the
/// restart is seen. `applied` puts a commit after the tail's start, so that the anchor is an
/// applied event rather than the stream's starting point.
async fn restart_keeping_the_binlog(applied: bool) {
    let mut db = server(&[]);
    let mut d = direct(&db, "test").await;
    // Not `test`: the harness creates that one (IF NOT EXISTS) when a server starts, a DDL
    // that invalidates the schema.
    exec(&mut d, "CREATE DATABASE keep").await;
    let mut d = direct(&db, "keep").await;
    tables_a_and_b(&mut d).await;
    let p = proxy(&db, "root").await;
    let tail = p.tail();
    let mut c = p.conn("keep").await;
    let (qa, qb) = (QA, QB);
    let mut b = "1";
    if applied {
        step(
            &mut c,
            &mut d,
            "before the restart",
            &["UPDATE b SET v = 2 WHERE id = 1"],
            qb,
            "2",
        )
        .await;
        b = "2";
    }
    assert_eq!(warm(&mut c, qa).await.as_deref(), Some("1"));
    assert_eq!(warm(&mut c, qb).await.as_deref(), Some(b));
    drop((c, d));
    db.restart_with_data(&[]);
    let mut d = direct(&db, "keep").await;
    // Made without qcache, before the tail is back.
    exec(&mut d, "UPDATE b SET v = 3 WHERE id = 1").await;
    until("the tail to start afresh", || {
        tail.gaps() >= 1 && tail.connected()
    })
    .await;
    assert_eq!(
        tail.resumes(),
        0,
        "resumed into a restarted server's binlog"
    );
    let mut c = p.conn("keep").await;
    let hits = p.hits();
    assert_eq!(first(&mut c, qa).await.as_deref(), Some("1"));
    assert_eq!(
        p.hits(),
        hits,
        "an entry cached before the restart was served after it"
    );
    fresh(&mut c, qb, "3", "a write made after the restart").await;
    p.running.abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeping_the_binlog_invalidates_after_an_applied_event() {
    restart_keeping_the_binlog(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeping_the_binlog_invalidates_at_the_starting_point() {
    restart_keeping_the_binlog(false).await;
}

/// Locks the tail's user out (unlogged) and kills its dump thread; returns the tail's resumes
/// and gaps before the loss.
async fn lock_out(d: &mut Conn, p: &Proxy, user: &str) -> (u64, u64) {
    let tail = p.tail();
    let before = (tail.resumes(), tail.gaps());
    exec(d, "SET sql_log_bin = 0").await;
    exec(d, &format!("ALTER USER {user}@'%' ACCOUNT LOCK")).await;
    exec(d, "SET sql_log_bin = 1").await;
    let id = dump_thread(d).await;
    exec(d, &format!("KILL {id}")).await;
    until("the tail to notice", || !tail.connected()).await;
    before
}

async fn let_in(d: &mut Conn, p: &Proxy, user: &str, before: (u64, u64)) {
    exec(d, "SET sql_log_bin = 0").await;
    exec(d, &format!("ALTER USER {user}@'%' ACCOUNT UNLOCK")).await;
    exec(d, "SET sql_log_bin = 1").await;
    let tail = p.tail();
    until("the tail to come back", || {
        (tail.resumes() > before.0 || tail.gaps() > before.1) && tail.connected()
    })
    .await;
}

async fn with_tail_user(d: &mut Conn) {
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES (1, 1)",
        "CREATE USER qtail@'%'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO qtail@'%'",
    ] {
        exec(d, sql).await;
    }
}

/// A provisioning script run twice, as a replayed `mysqlbinlog` output runs it: `SET
/// TIMESTAMP` to a fixed past second, `RESET MASTER`, a write. The new first file's format
/// description takes the session's forged second, so it is byte for byte the one the tail
/// read, at the same offsets; only the value written differs. Served the first run's value
/// at 68bac0c (found by an adversarial run). `applied`: the tail applied the first run's
/// write and a DDL after it (the anchor); else its anchor is the stream's starting point.
async fn forged_timestamp_reset_master(applied: bool) {
    const FORGED: &str = "SET TIMESTAMP = 1700000000";
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    with_tail_user(&mut d).await;
    let run = |v: &str| {
        let mut s = vec![
            FORGED.to_string(),
            "RESET MASTER".to_string(),
            format!("UPDATE a SET v = {v} WHERE id = 1"),
        ];
        if applied {
            s.push("DROP TABLE IF EXISTS nothing_here".into());
        }
        s
    };
    let q = "SELECT v FROM a WHERE id = 1";
    let (p, mut c);
    if applied {
        exec(&mut d, FORGED).await;
        exec(&mut d, "RESET MASTER").await;
        p = proxy(&db, "qtail").await;
        c = p.conn("test").await;
        warm(&mut c, q).await;
        for sql in &run("2")[2..] {
            exec(&mut d, sql).await;
        }
        fresh(&mut c, q, "2", "the first run").await;
    } else {
        for sql in run("2") {
            exec(&mut d, &sql).await;
        }
        p = proxy(&db, "qtail").await;
        c = p.conn("test").await;
    }
    assert_eq!(warm(&mut c, q).await.as_deref(), Some("2"));
    let before = lock_out(&mut d, &p, "qtail").await;
    for sql in run("7") {
        exec(&mut d, &sql).await;
    }
    exec(&mut d, "SET TIMESTAMP = DEFAULT").await;
    let_in(&mut d, &p, "qtail", before).await;
    assert_eq!(
        first(&mut c, q).await.as_deref(),
        Some("7"),
        "the first run's row was served after the binlog was reset under the tail: {:?}",
        p.tail().status()
    );
    assert_eq!(p.tail().resumes(), before.0, "resumed into a reset binlog");
    p.running.abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_timestamp_reset_master_at_the_starting_point() {
    forged_timestamp_reset_master(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_timestamp_reset_master_after_an_applied_ddl() {
    forged_timestamp_reset_master(true).await;
}

/// No forged time: `RESET MASTER TO 2`, a write and a DDL (the anchor), all applied by the
/// tail; then, while it is away and within the same second, the same statements with another
/// value. The DDL's event is byte for byte the same (same thread, same text, exec time 0) and
/// the new file has the same second. Served the old value at 68bac0c on its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_second_reset_master_under_an_identical_ddl() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    with_tail_user(&mut d).await;
    // Up for seconds, as a production server is: at 68bac0c a server younger than 3 s made
    // the tail give up its position, which hid this.
    loop {
        let up: Option<(String, u64)> = d
            .query_first("SHOW GLOBAL STATUS LIKE 'Uptime'")
            .await
            .unwrap();
        if up.is_some_and(|(_, s)| s >= 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let p = proxy(&db, "qtail").await;
    let mut c = p.conn("test").await;
    let mut other = direct(&db, "test").await;
    let q = "SELECT v FROM a WHERE id = 1";
    warm(&mut c, q).await;
    // Start at the top of a second, so that all of it fits in one.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    tokio::time::sleep(Duration::from_nanos(
        1_000_000_000 - u64::from(now.subsec_nanos()),
    ))
    .await;
    let history = |v: &'static str| {
        [
            "RESET MASTER TO 2".to_string(),
            format!("UPDATE a SET v = {v} WHERE id = 1"),
            "DROP TABLE IF EXISTS nothing_here".to_string(),
        ]
    };
    for sql in history("2") {
        exec(&mut d, &sql).await;
    }
    // The reset ends the tail's stream; once it is back, the first history's row is cached.
    let tail = p.tail();
    until("the tail to come back", || tail.connected()).await;
    fresh(&mut c, q, "2", "the first history").await;
    warm(&mut c, q).await;
    let hits = p.hits();
    assert_eq!(first(&mut c, q).await.as_deref(), Some("2"));
    assert_eq!(p.hits(), hits + 1, "the first history's row is not cached");
    let before = lock_out(&mut other, &p, "qtail").await;
    for sql in history("7") {
        exec(&mut d, &sql).await;
    }
    let_in(&mut other, &p, "qtail", before).await;
    assert_eq!(
        first(&mut c, q).await.as_deref(),
        Some("7"),
        "the first history's row was served after RESET MASTER: {:?}",
        p.tail().status()
    );
    p.running.abort().await;
}

/// `RESET MASTER` while the tail reads the first file: the new first file has the old one's
/// name, so the server leaves the dump waiting on the deleted file, heartbeats flowing, while
/// the writes go to the new one. At daa13f9 qcache served the row from before for as long
/// as the new file stayed shorter than the old offset, and said it was connected (found by
/// an adversarial run); now the counters asked on the witness every second end the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_master_under_an_attached_stream_is_seen() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    with_tail_user(&mut d).await;
    let p = proxy(&db, "root").await;
    let mut c = p.conn("test").await;
    let q = "SELECT v FROM a WHERE id = 1";
    step(
        &mut c,
        &mut d,
        "before the reset",
        &["UPDATE a SET v = 2 WHERE id = 1"],
        q,
        "2",
    )
    .await;
    assert_eq!(warm(&mut c, q).await.as_deref(), Some("2"));
    exec(&mut d, "RESET MASTER").await;
    exec(&mut d, "UPDATE a SET v = 3 WHERE id = 1").await;
    fresh(
        &mut c,
        q,
        "3",
        "a write after RESET MASTER under the stream",
    )
    .await;
    let tail = p.tail();
    until("the gap to be counted", || tail.gaps() >= 1).await;
    p.running.abort().await;
}

/// A TCP relay in front of `upstream` that stops passing the bytes of the connection whose
/// greeting carried the id in `frozen` (the socket stays open): a peer that vanished without
/// a reset, as a dead host behind a firewall looks.
async fn freezing_relay(upstream: String, frozen: Arc<AtomicU32>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (frozen, id) = (frozen.clone(), Arc::new(AtomicU32::new(0)));
            let stuck = {
                let (frozen, id) = (frozen.clone(), id.clone());
                move || {
                    let id = id.load(Ordering::Relaxed);
                    id != 0 && frozen.load(Ordering::Relaxed) == id
                }
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let down = stuck.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut greeting = true;
                while let Ok(n @ 1..) = sr.read(&mut buf).await {
                    if std::mem::take(&mut greeting) {
                        // Header (4), protocol version (1), server version up to NUL, then the
                        // connection id.
                        if let Some(nul) = buf[5..n].iter().position(|&b| b == 0) {
                            if let Some(b) = buf.get(6 + nul..10 + nul) {
                                id.store(
                                    u32::from_le_bytes(b.try_into().unwrap()),
                                    Ordering::Relaxed,
                                );
                            }
                        }
                    }
                    while down() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n @ 1..) = cr.read(&mut buf).await {
                    while stuck() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// The witness stops answering (its bytes black-holed, its socket open) and then the stream
/// is lost: the tail must neither hang on the witness nor resume without it. At daa13f9 the
/// check on the witness after the anchor came back had no timeout, and the tail stayed
/// disconnected (hits suspended) until the kernel gave up on the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_that_stops_answering_neither_hangs_nor_proves() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    with_tail_user(&mut d).await;
    let frozen = Arc::new(AtomicU32::new(0));
    let p = proxy_at(freezing_relay(db.addr(), frozen.clone()).await, "qtail").await;
    let mut c = p.conn("test").await;
    let q = "SELECT v FROM a WHERE id = 1";
    step(
        &mut c,
        &mut d,
        "before",
        &["UPDATE a SET v = 2 WHERE id = 1"],
        q,
        "2",
    )
    .await;
    let witness = p
        .tail()
        .witness_connection_id()
        .expect("a witness connection");
    frozen.store(witness, Ordering::Relaxed);
    let tail = p.tail();
    let gaps = tail.gaps();
    let id = dump_thread(&mut d).await;
    exec(&mut d, &format!("KILL {id}")).await;
    exec(&mut d, "UPDATE a SET v = 3 WHERE id = 1").await;
    until("the tail to start afresh without its witness", || {
        tail.gaps() > gaps && tail.connected()
    })
    .await;
    fresh(&mut c, q, "3", "a write made while the witness was frozen").await;
    p.running.abort().await;
}

/// FLUSH STATUS, as monitoring scripts run it, leaves `Com_reset` alone: neither the check
/// every second nor the next reconnect takes it for a RESET, so the cache survives both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_status_is_not_taken_for_a_reset() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    with_tail_user(&mut d).await;
    let p = proxy(&db, "root").await;
    let tail = p.tail();
    let mut c = p.conn("test").await;
    let q = "SELECT v FROM a WHERE id = 1";
    assert_eq!(warm(&mut c, q).await.as_deref(), Some("1"));
    exec(&mut d, "FLUSH STATUS").await;
    // Two checks on the witness go by.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let id = dump_thread(&mut d).await;
    exec(&mut d, &format!("KILL {id}")).await;
    until("the tail to resume", || {
        tail.resumes() >= 1 && tail.connected()
    })
    .await;
    assert_eq!(tail.gaps(), 0, "{:?}", tail.status());
    let hits = p.hits();
    assert_eq!(first(&mut c, q).await.as_deref(), Some("1"));
    assert_eq!(p.hits(), hits + 1, "the entry did not survive FLUSH STATUS");
    p.running.abort().await;
}

/// A tail that keeps its stream but falls behind (`Fault::SlowBinlog`: each event handled
/// 400 ms late, as a slowed process or a slow consumer would) stays connected, yet once it
/// is more than `invalidation.max_lag` (1 s) behind the server (`policy::lag`: the server's
/// binlog end, probed, not yet reached) the instance serves no hit a direct write could have
/// made stale; once it has caught up, hits come back.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_tail_that_falls_behind_stops_hits() {
    let db = server(&[]);
    let mut d = direct(&db, "test").await;
    for sql in [
        "CREATE TABLE lagged (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE noise (id INT PRIMARY KEY)",
        "INSERT INTO lagged VALUES (1, 1)",
    ] {
        exec(&mut d, sql).await;
    }
    let p = proxy(&db, "root").await;
    let tail = p.tail();
    let mut c = p.conn("test").await;
    let q = "SELECT v FROM lagged WHERE id = 1";
    assert_eq!(warm(&mut c, q).await.as_deref(), Some("1"));
    let hits = p.hits();
    assert_eq!(first(&mut c, q).await.as_deref(), Some("1"));
    assert_eq!(p.hits(), hits + 1, "served from the cache");

    let faults = &p.running.shared.cache.versions().faults;
    faults.set(qcache::faults::Fault::SlowBinlog, true);
    // Ten transactions (about fifty events: twenty seconds at 400 ms each) ahead of the
    // write that makes the entry stale.
    for i in 0..10 {
        exec(&mut d, &format!("INSERT INTO noise VALUES ({i})")).await;
    }
    exec(&mut d, "UPDATE lagged SET v = 2 WHERE id = 1").await;
    let written = Instant::now();
    // Past max_lag and a probe period: the tail is streaming, and behind.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(tail.connected(), "still streaming: {:?}", tail.status());
    assert_eq!(tail.reconnects(), 0, "the stream was never lost");
    assert!(
        tail.behind().is_some_and(|b| b > Duration::from_secs(1)),
        "behind: {:?}",
        tail.behind()
    );
    assert!(p.running.shared.hits_suspended(), "hits suspended");
    let hits = p.hits();
    assert_eq!(
        first(&mut c, q).await.as_deref(),
        Some("2"),
        "the direct write, {:?} after it, with the tail behind",
        written.elapsed()
    );
    assert_eq!(p.hits(), hits, "no hit while behind");
    assert!(
        written.elapsed() < Duration::from_secs(15),
        "the tail had not caught up yet: this read proved the rule"
    );

    // Caught up again: hits come back.
    faults.set(qcache::faults::Fault::SlowBinlog, false);
    let deadline = Instant::now() + FRESH_WITHIN;
    loop {
        let hits = p.hits();
        assert_eq!(first(&mut c, q).await.as_deref(), Some("2"));
        if p.hits() > hits {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no hit {FRESH_WITHIN:?} after the tail was let go: behind {:?}",
            tail.behind()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!p.running.shared.hits_suspended());
    drop(c);
    p.running.shutdown().await;
}
