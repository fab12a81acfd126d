//! Adversarial round 20: the paths round 19 did not reach.
//!
//! - L2: two qcache instances sharing a private redis-server. A fills under one session
//!   context, B reads under another (sql_mode, time_zone, character_set_results,
//!   collation_connection, default database, sql_select_limit, div_precision_increment),
//!   text and binary protocol crossed, diagnostics after the L2 hit, privileges (a user of
//!   B lacking what A's user had, a REVOKE made directly), Redis flushed or a key deleted
//!   between A's fill and B's read. The same steps run directly on two connections with
//!   the same settings; every step's outcome (`common::outcome`) must match, and B must
//!   count L2 hits where a hit was allowed.
//! - The binlog tail: writes made directly on the server (not through qcache), under
//!   STATEMENT, MIXED and ROW session formats and MINIMAL/NOBLOB row images, must reach
//!   every read qcache had served from its cache (a hit before the write proves it had),
//!   within the tail's lag.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::outcome::{self, Outcome};
use common::redis::Redis;
use common::TestProxy;
use mysql_async::Conn;

const LAG_BOUND: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// L2 step lists
// ---------------------------------------------------------------------------------------

/// A step: who runs it and the statement. `a`/`b` are root sessions on instance A/B (or,
/// directly, two root connections); `a:user`/`b:user` are sessions of `user{u}` (password
/// `pw`); `!` is a root connection straight to the server in every run. A `P ` prefix runs
/// the statement through the binary protocol. After an `a…` read through qcache the run
/// waits (briefly) for A's entry to reach Redis.
type Step = (&'static str, &'static str);

struct Run<'a> {
    schema: &'a str,
    suffix: String,
    proxies: Option<(&'a TestProxy, &'a TestProxy, &'a Redis)>,
    conns: std::collections::HashMap<String, Conn>,
}

impl Run<'_> {
    fn fill(&self, s: &str) -> String {
        s.replace("{db}", self.schema).replace("{u}", &self.suffix)
    }

    async fn conn(&mut self, who: &str) -> &mut Conn {
        if !self.conns.contains_key(who) {
            let direct = who.starts_with('!');
            let inst = who.chars().next().unwrap();
            let (user, pw) = match who.split_once(':') {
                Some((_, u)) => (format!("{u}{}", self.suffix), "pw"),
                None => ("root".to_string(), ""),
            };
            let addr = match (self.proxies, direct, inst) {
                (Some((a, _, _)), false, 'a') => a.addr.to_string(),
                (Some((_, b, _)), false, 'b') => b.addr.to_string(),
                _ => common::db().addr(),
            };
            let auth = if pw.is_empty() {
                user
            } else {
                format!("{user}:{pw}")
            };
            let url = format!("mysql://{auth}@{addr}/{}?prefer_socket=false", self.schema);
            let c = Conn::from_url(url)
                .await
                .unwrap_or_else(|e| panic!("connect {who}: {e}"));
            self.conns.insert(who.to_string(), c);
        }
        self.conns.get_mut(who).unwrap()
    }
}

/// Runs `steps`; the outcomes with the run's names put back, and the L2 hits B counted.
async fn run_steps(
    schema: &str,
    steps: &[Step],
    proxies: Option<(&TestProxy, &TestProxy, &Redis)>,
) -> (Vec<Outcome>, u64, u64) {
    let mut r = Run {
        schema,
        suffix: common::unique_name("u"),
        proxies,
        conns: Default::default(),
    };
    let mut out = Vec::new();
    for (who, sql) in steps {
        let sql = r.fill(sql);
        if let Some(ms) = sql.strip_prefix("sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            out.push(String::new());
            continue;
        }
        if let Some(cmd) = sql.strip_prefix("redis ") {
            if let Some((_, _, redis)) = r.proxies {
                let args: Vec<&str> = cmd.split(' ').collect();
                if args == ["DELETE-ENTRIES"] {
                    for k in redis.keys("qcache:e:*") {
                        redis.cli(&["DEL", &k]);
                    }
                } else {
                    redis.cli(&args);
                }
            }
            out.push(String::new());
            continue;
        }
        let before = r
            .proxies
            .map(|(_, _, redis)| redis.keys("qcache:e:*").len());
        let c = r.conn(who).await;
        let o = match sql.strip_prefix("P ") {
            Some(sql) => outcome::run_prepared(c, sql).await,
            None => outcome::run_text(c, &sql).await,
        };
        if let (Some((_, _, redis)), Some(before), true) = (r.proxies, before, who.starts_with('a'))
        {
            let deadline = Instant::now() + Duration::from_millis(700);
            while redis.keys("qcache:e:*").len() <= before && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        out.push(o.replace(&r.suffix, "{u}").replace(schema, "{db}"));
    }
    for (_, c) in r.conns.drain() {
        let _ = c.disconnect().await;
    }
    let hits = r
        .proxies
        .map(|(_, b, _)| common::l2::stat(b, "Qcache_l2_hits"))
        .unwrap_or(0);
    let local = r
        .proxies
        .map(|(_, b, _)| b.running.shared.cache.stats().hits())
        .unwrap_or(0);
    (out, hits, local)
}

fn assert_same(steps: &[Step], want: &[Outcome], got: &[Outcome]) {
    let label = |o: &[Outcome]| -> Vec<(String, Outcome)> {
        o.iter()
            .enumerate()
            .map(|(i, o)| {
                let (who, sql) = steps.get(i).copied().unwrap_or(("?", "?"));
                (format!("step {i} ({who}: {sql})"), o.clone())
            })
            .collect()
    };
    if let Err(e) = outcome::compare(&label(want), &label(got)) {
        panic!("qcache answered differently: {e}");
    }
}

/// The steps directly, then through two instances sharing a fresh Redis (each run on a
/// schema of its own, set up alike); compared, and B must count at least `min_l2_hits` L2
/// hits. With `binlog`, both instances tail the binlog.
async fn l2_differential(prefix: &str, setup: &[&str], steps: &[Step], min_l2_hits: u64) {
    l2_differential_with(prefix, setup, steps, min_l2_hits, Tails::None).await
}

/// Which instances tail the binlog.
#[derive(Clone, Copy, PartialEq)]
enum Tails {
    None,
    AOnly,
    Both,
}

async fn l2_differential_with(
    prefix: &str,
    setup: &[&str],
    steps: &[Step],
    min_l2_hits: u64,
    tails: Tails,
) {
    let mut schemas = Vec::new();
    for _ in 0..2 {
        let schema = common::fresh_schema(prefix).await;
        let filled: Vec<String> = setup.iter().map(|s| s.replace("{db}", &schema)).collect();
        let refs: Vec<&str> = filled.iter().map(String::as_str).collect();
        common::setup(&schema, &refs).await;
        schemas.push(schema);
    }
    let (want, _, _) = run_steps(&schemas[0], steps, None).await;
    let redis = Redis::start();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let tweak = |on: bool| {
        move |c: &mut qcache::config::Config| {
            if on {
                c.invalidation.binlog = qcache::config::BinlogMode::On;
                c.invalidation.server_id = 5_000_000
                    + (std::process::id() % 10_000) * 10
                    + NEXT.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let a = common::l2::proxy(&redis.url(), tweak(tails != Tails::None)).await;
    let b = common::l2::proxy(&redis.url(), tweak(tails == Tails::Both)).await;
    let (got, hits, local) = run_steps(&schemas[1], steps, Some((&a, &b, &redis))).await;
    assert_same(steps, &want, &got);
    assert!(
        hits >= min_l2_hits && hits + local > 0,
        "B counted {hits} L2 hits (expected at least {min_l2_hits}) and {local} local hits: \
         the comparison proved nothing"
    );
}

const T: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20) CHARACTER SET utf8mb4, \
     ts TIMESTAMP NULL, d DECIMAL(10,2))",
    "INSERT INTO t VALUES (1, 10, 'Abc', '2020-01-01 10:00:00', 1.25), \
     (2, 20, 'äöü', '2021-06-01 12:30:00', 2.50), (3, 30, 'x1', NULL, 3.75)",
];

/// Diagnostics after an L2 hit and its L1 copy: FOUND_ROWS() of a LIMIT read, ROW_COUNT(),
/// @@warning_count, GET DIAGNOSTICS, SHOW COUNT(*) WARNINGS, Last_query_cost; text and
/// binary. (SQL_CALC_FOUND_ROWS reads and reads that warn are never stored: not probed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_hit_diagnostics() {
    let steps: &[Step] = &[
        ("a", "SELECT id FROM t ORDER BY id LIMIT 2"),
        ("b", "DO CAST('1x' AS SIGNED)"),
        ("b", "SELECT id FROM t ORDER BY id LIMIT 2"),
        ("b", "SELECT FOUND_ROWS()"),
        ("b", "SELECT id FROM t ORDER BY id LIMIT 2"),
        ("b", "SELECT @@warning_count, ROW_COUNT()"),
        ("a", "SELECT v FROM t WHERE id >= 2 ORDER BY id"),
        ("b", "DO CAST('1x' AS SIGNED)"),
        ("b", "SELECT v FROM t WHERE id >= 2 ORDER BY id"),
        ("b", "GET DIAGNOSTICS @n = NUMBER, @r = ROW_COUNT"),
        ("b", "SELECT @n, @r"),
        ("b", "SELECT v FROM t WHERE id >= 2 ORDER BY id"),
        ("b", "SHOW COUNT(*) WARNINGS"),
        ("b", "SHOW COUNT(*) ERRORS"),
        ("a", "SELECT s FROM t WHERE id = 1"),
        ("b", "SELECT s FROM t WHERE id = 1"),
        ("b", "SELECT ROW_COUNT(), FOUND_ROWS()"),
        ("a", "P SELECT id FROM t ORDER BY id LIMIT 1"),
        ("b", "DO CAST('1x' AS SIGNED)"),
        ("b", "P SELECT id FROM t ORDER BY id LIMIT 1"),
        ("b", "SELECT FOUND_ROWS(), @@warning_count"),
        ("b", "P SELECT id FROM t ORDER BY id LIMIT 1"),
        ("b", "SHOW WARNINGS"),
    ];
    l2_differential("adv20_diag", T, steps, 3).await;
}

/// `Last_query_cost` after an L2 hit: the server's value for the last SELECT it ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_hit_last_query_cost() {
    let steps: &[Step] = &[
        ("a", "SELECT id, v FROM t WHERE v > 0 ORDER BY id"),
        ("b", "SELECT 1 FROM DUAL WHERE 1 = 0"),
        ("b", "SELECT id, v FROM t WHERE v > 0 ORDER BY id"),
        ("b", "SHOW SESSION STATUS LIKE 'Last_query_cost'"),
        ("b", "SELECT id, v FROM t WHERE v > 0 ORDER BY id"),
        ("b", "SHOW SESSION STATUS LIKE 'Last_query_cost'"),
    ];
    l2_differential("adv20_cost", T, steps, 1).await;
}

/// A's text fill read by B's binary execute and the reverse: each protocol's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_text_and_binary_crossed() {
    let steps: &[Step] = &[
        (
            "a",
            "SELECT id, v, s, ts, d FROM t WHERE id >= 1 ORDER BY id",
        ),
        (
            "b",
            "P SELECT id, v, s, ts, d FROM t WHERE id >= 1 ORDER BY id",
        ),
        (
            "b",
            "SELECT id, v, s, ts, d FROM t WHERE id >= 1 ORDER BY id",
        ),
        (
            "a",
            "P SELECT id, v*2, s, d FROM t WHERE id >= 2 ORDER BY id",
        ),
        ("b", "SELECT id, v*2, s, d FROM t WHERE id >= 2 ORDER BY id"),
        (
            "b",
            "P SELECT id, v*2, s, d FROM t WHERE id >= 2 ORDER BY id",
        ),
    ];
    l2_differential("adv20_proto", T, steps, 2).await;
}

/// A fill under one context read by a session in another context on the other instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_fill_under_one_context_read_under_another() {
    let steps: &[Step] = &[
        // Both in the default context first: a read B shares with A (an L2 hit).
        ("a", "SELECT id, v, d FROM t WHERE id < 3 ORDER BY id"),
        ("b", "SELECT id, v, d FROM t WHERE id < 3 ORDER BY id"),
        // sql_mode
        ("b", "SET sql_mode = 'PIPES_AS_CONCAT,ANSI_QUOTES'"),
        ("a", "SELECT id, s || 'x' FROM t ORDER BY id"),
        ("b", "SELECT id, s || 'x' FROM t ORDER BY id"),
        ("a", "SELECT \"s\" FROM t ORDER BY id"),
        ("b", "SELECT \"s\" FROM t ORDER BY id"),
        // time_zone
        ("b", "SET time_zone = '+05:00'"),
        ("a", "SELECT id, ts FROM t ORDER BY id"),
        ("b", "SELECT id, ts FROM t ORDER BY id"),
        ("a", "SELECT id, UNIX_TIMESTAMP(ts) FROM t ORDER BY id"),
        ("b", "SELECT id, UNIX_TIMESTAMP(ts) FROM t ORDER BY id"),
        // character_set_results
        ("b", "SET character_set_results = latin1"),
        ("a", "SELECT id, s FROM t ORDER BY id"),
        ("b", "SELECT id, s FROM t ORDER BY id"),
        ("b", "SET character_set_results = NULL"),
        ("b", "SELECT id, s FROM t ORDER BY id"),
        // collation_connection
        ("b", "SET collation_connection = utf8mb4_bin"),
        ("a", "SELECT id FROM t WHERE s = 'abc' ORDER BY id"),
        ("b", "SELECT id FROM t WHERE s = 'abc' ORDER BY id"),
        ("a", "SELECT id, 'Abc' = s FROM t ORDER BY id"),
        ("b", "SELECT id, 'Abc' = s FROM t ORDER BY id"),
        // sql_select_limit
        ("b", "SET sql_select_limit = 1"),
        ("a", "SELECT id FROM t ORDER BY id"),
        ("b", "SELECT id FROM t ORDER BY id"),
        ("b", "P SELECT id FROM t ORDER BY id"),
        // div_precision_increment
        ("b", "SET div_precision_increment = 9"),
        ("a", "SELECT id, v / 7, d / 3 FROM t ORDER BY id"),
        ("b", "SELECT id, v / 7, d / 3 FROM t ORDER BY id"),
        ("b", "P SELECT id, v / 7, d / 3 FROM t ORDER BY id"),
        // max_statement_time does not change the rows of a fast read
        ("b", "SET max_statement_time = 100"),
        ("a", "SELECT id, v FROM t WHERE v > 5 ORDER BY id"),
        ("b", "SELECT id, v FROM t WHERE v > 5 ORDER BY id"),
        // Both back to the default context: a read B shares with A
        (
            "b",
            "SET sql_mode = DEFAULT, time_zone = DEFAULT, sql_select_limit = DEFAULT",
        ),
        (
            "b",
            "SET collation_connection = DEFAULT, div_precision_increment = DEFAULT",
        ),
        (
            "b",
            "SET character_set_results = DEFAULT, max_statement_time = DEFAULT",
        ),
        ("a", "SELECT id, v, d FROM t WHERE id < 3 ORDER BY id"),
        ("b", "SELECT id, v, d FROM t WHERE id < 3 ORDER BY id"),
    ];
    l2_differential("adv20_ctx", T, steps, 1).await;
}

/// More of a session's context, each set on B only, after a read both share: the parsing
/// rules a SQL-level PREPARE captured, a temporary table shadowing the base table, the
/// client character set, lc_time_names, group_concat_max_len, ONLY_FULL_GROUP_BY,
/// default_week_format, a time zone under FROM_UNIXTIME.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_more_contexts_on_the_reader() {
    let steps: &[Step] = &[
        ("a", "SELECT id, v FROM t WHERE id < 3 ORDER BY id"),
        ("b", "SELECT id, v FROM t WHERE id < 3 ORDER BY id"),
        // prepare-time sql_mode
        ("b", "SET sql_mode = 'ANSI_QUOTES'"),
        ("b", "PREPARE s FROM 'SELECT \"s\" FROM t ORDER BY id'"),
        ("b", "SET sql_mode = DEFAULT"),
        ("a", "SELECT \"s\" FROM t ORDER BY id"),
        ("b", "EXECUTE s"),
        ("b", "SELECT \"s\" FROM t ORDER BY id"),
        ("b", "DEALLOCATE PREPARE s"),
        // lc_time_names
        ("b", "SET lc_time_names = 'de_DE'"),
        (
            "a",
            "SELECT id, DATE_FORMAT(ts, '%W %M') FROM t ORDER BY id",
        ),
        (
            "b",
            "SELECT id, DATE_FORMAT(ts, '%W %M') FROM t ORDER BY id",
        ),
        ("b", "SET lc_time_names = DEFAULT"),
        // group_concat_max_len
        ("b", "SET group_concat_max_len = 4"),
        ("a", "SELECT GROUP_CONCAT(v ORDER BY id) FROM t"),
        ("b", "SELECT GROUP_CONCAT(v ORDER BY id) FROM t"),
        ("b", "SET group_concat_max_len = DEFAULT"),
        // ONLY_FULL_GROUP_BY
        ("b", "SET sql_mode = 'ONLY_FULL_GROUP_BY'"),
        ("a", "SELECT s, COUNT(*) FROM t GROUP BY v ORDER BY v"),
        ("b", "SELECT s, COUNT(*) FROM t GROUP BY v ORDER BY v"),
        ("b", "SET sql_mode = DEFAULT"),
        // default_week_format
        ("b", "SET default_week_format = 3"),
        ("a", "SELECT id, WEEK(ts) FROM t ORDER BY id"),
        ("b", "SELECT id, WEEK(ts) FROM t ORDER BY id"),
        ("b", "SET default_week_format = DEFAULT"),
        // time_zone under FROM_UNIXTIME
        ("b", "SET time_zone = '-03:00'"),
        (
            "a",
            "SELECT id, FROM_UNIXTIME(1600000000 + v) FROM t ORDER BY id",
        ),
        (
            "b",
            "SELECT id, FROM_UNIXTIME(1600000000 + v) FROM t ORDER BY id",
        ),
        ("b", "SET time_zone = DEFAULT"),
        // the client character set
        ("b", "SET character_set_client = latin1"),
        ("a", "SELECT id FROM t WHERE s = 'äöü'"),
        ("b", "SELECT id FROM t WHERE s = 'äöü'"),
        ("b", "SET character_set_client = DEFAULT"),
        // a temporary table shadowing t
        ("b", "CREATE TEMPORARY TABLE t (id INT, v INT)"),
        ("a", "SELECT id, v FROM t WHERE id > 1 ORDER BY id"),
        ("b", "SELECT id, v FROM t WHERE id > 1 ORDER BY id"),
        ("b", "P SELECT id, v FROM t WHERE id > 1 ORDER BY id"),
        ("b", "DROP TEMPORARY TABLE t"),
        ("b", "SELECT id, v FROM t WHERE id > 1 ORDER BY id"),
    ];
    l2_differential("adv20_ctx2", T, steps, 1).await;
}

/// A's session in the schema, B's in another database with a table of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_default_database_differs() {
    let other = common::fresh_schema("adv20_other").await;
    common::setup(
        &other,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)",
            "INSERT INTO t VALUES (1, 111)",
        ],
    )
    .await;
    let use_other: &'static str = Box::leak(format!("USE {other}").into_boxed_str());
    let steps: Vec<Step> = vec![
        ("b", use_other),
        ("a", "SELECT id, v FROM t ORDER BY id"),
        ("b", "SELECT id, v FROM t ORDER BY id"),
        ("a", "P SELECT id, v FROM t WHERE id > 0 ORDER BY id"),
        ("b", "P SELECT id, v FROM t WHERE id > 0 ORDER BY id"),
        ("b", "USE {db}"),
        ("b", "SELECT id, v FROM t ORDER BY id"),
    ];
    l2_differential("adv20_db", T, &steps, 1).await;
}

/// B's user lacks what A's root had: a table, a column; a REVOKE made by `revoker` (through
/// A, or directly with both instances tailing the binlog), then reads on B by a session of
/// that user opened before it.
const PRIV_STEPS_HEAD: &[Step] = &[
    ("!", "CREATE USER 'r{u}'@'%' IDENTIFIED BY 'pw'"),
    ("!", "GRANT SELECT (id) ON {db}.t TO 'r{u}'@'%'"),
    ("!", "CREATE USER 'g{u}'@'%' IDENTIFIED BY 'pw'"),
    ("!", "GRANT SELECT ON {db}.t TO 'g{u}'@'%'"),
    ("a", "SELECT id, v FROM t ORDER BY id"),
    ("b:r", "SELECT id, v FROM t ORDER BY id"),
    ("b:r", "SELECT id FROM t ORDER BY id"),
    ("a", "SELECT id FROM t ORDER BY id"),
    ("b:r", "SELECT id FROM t ORDER BY id"),
    ("a:g", "SELECT id, s FROM t ORDER BY id"),
    ("b:g", "SELECT id, s FROM t ORDER BY id"),
    ("b:g", "SELECT id, s FROM t ORDER BY id"),
];

fn priv_steps(revoker: &'static str) -> Vec<Step> {
    let mut steps = PRIV_STEPS_HEAD.to_vec();
    steps.extend_from_slice(&[
        (revoker, "REVOKE SELECT ON {db}.t FROM 'g{u}'@'%'"),
        ("sleep", "sleep 300"),
        ("b:g", "SELECT id, s FROM t ORDER BY id"),
        ("a:g", "SELECT id, s FROM t ORDER BY id"),
        ("b:g", "P SELECT id, s FROM t ORDER BY id"),
        (revoker, "GRANT SELECT (id) ON {db}.t TO 'g{u}'@'%'"),
        ("sleep", "sleep 300"),
        ("b:g", "SELECT id FROM t ORDER BY id"),
        ("b:g", "SELECT id, s FROM t ORDER BY id"),
        ("!", "DROP USER 'r{u}'@'%'"),
        ("!", "DROP USER 'g{u}'@'%'"),
    ]);
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_privileges_revoked_through_the_other_instance() {
    l2_differential("adv20_priv", T, &priv_steps("a"), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_privileges_revoked_directly_with_binlog_tails() {
    // Until both tails have settled the gap of their first event (it invalidates L2).
    let mut steps = vec![("sleep", "sleep 2000")];
    steps.extend(priv_steps("!"));
    // Each tail applies what it sees, and B also what A's stamps tell it: the instances'
    // privilege generations need not match, so B may not find A's entries in L2; B's own
    // (local) hits before the REVOKE are what the comparison needs.
    l2_differential_with("adv20_privb", T, &steps, 0, Tails::Both).await;
}

/// Only A tails the binlog: a REVOKE and a row change made directly reach B through L2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_direct_changes_seen_by_one_tail_reach_the_other_instance() {
    let mut steps = vec![("sleep", "sleep 2000")];
    steps.extend(priv_steps("!"));
    steps.extend_from_slice(&[
        ("a", "SELECT id, v FROM t WHERE id = 2"),
        ("b", "SELECT id, v FROM t WHERE id = 2"),
        ("b", "SELECT id, v FROM t WHERE id = 2"),
        ("!", "SET SESSION binlog_format = STATEMENT"),
        ("!", "UPDATE t SET v = v + 1 WHERE id = 2"),
        ("sleep", "sleep 1000"),
        ("b", "SELECT id, v FROM t WHERE id = 2"),
        ("a", "SELECT id, v FROM t WHERE id = 2"),
    ]);
    l2_differential_with("adv20_privc", T, &steps, 0, Tails::AOnly).await;
}

/// Redis flushed, or its entries deleted by hand, between A's fill and B's read; a write
/// through A after B's refill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_redis_losing_entries_mid_read() {
    let steps: &[Step] = &[
        ("a", "SELECT id, v FROM t ORDER BY id"),
        ("b", "SELECT id, v FROM t ORDER BY id"),
        ("a", "SELECT id, s FROM t ORDER BY id"),
        ("b", "redis FLUSHALL"),
        ("b", "SELECT id, s FROM t ORDER BY id"),
        ("a", "UPDATE t SET s = 'new' WHERE id = 1"),
        ("b", "SELECT id, s FROM t ORDER BY id"),
        ("a", "SELECT id, d FROM t ORDER BY id"),
        ("b", "redis DELETE-ENTRIES"),
        ("b", "SELECT id, d FROM t ORDER BY id"),
        ("b", "SELECT id, d FROM t ORDER BY id"),
    ];
    l2_differential("adv20_flush", T, steps, 1).await;
}

// ---------------------------------------------------------------------------------------
// The binlog tail: writes made directly on the server
// ---------------------------------------------------------------------------------------

async fn tail_proxy() -> TestProxy {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let p = common::proxy(|c| {
        c.invalidation.binlog = qcache::config::BinlogMode::On;
        c.invalidation.server_id =
            4_000_000 + (std::process::id() % 10_000) * 10 + NEXT.fetch_add(1, Ordering::Relaxed);
    })
    .await;
    let tail = p.running.shared.binlog.clone().expect("binlog tail");
    assert!(
        tail.wait_until_connected(Duration::from_secs(20)).await,
        "binlog stream did not connect"
    );
    p
}

/// `reads` through qcache twice each (the second a hit), then `writes` on a direct
/// connection, then each read through qcache until it answers as directly (within the
/// tail's lag), then once more.
async fn direct_writes_reach(prefix: &str, setup: &[&str], reads: &[&str], writes: &[&str]) {
    let schema = common::fresh_schema(prefix).await;
    common::setup(&schema, setup).await;
    let p = tail_proxy().await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let mut w = common::direct_to(&schema).await;
    // Each read until it is a hit (the tail may still be applying the setup's events).
    for r in reads {
        let want = outcome::run_text(&mut d, r).await;
        let mut hit = false;
        for _ in 0..50 {
            let hits = p.running.shared.cache.stats().hits();
            let got = outcome::run_text(&mut c, r).await;
            assert_eq!(got, want, "before the writes: {r}");
            if p.running.shared.cache.stats().hits() > hits {
                hit = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(hit, "{r}: never a hit before the writes");
    }
    for s in writes {
        let s = &s.replace("{db}", &schema);
        let o = outcome::run_text(&mut w, s).await;
        assert!(!o.starts_with("ERROR"), "{s}: {o}");
    }
    for r in reads {
        let want = outcome::run_text(&mut d, r).await;
        let deadline = Instant::now() + LAG_BOUND;
        loop {
            let got = outcome::run_text(&mut c, r).await;
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{r}: stale after the direct writes {writes:?}\n-- directly:\n{want}\n-- through qcache:\n{got}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got = outcome::run_text(&mut c, r).await;
        assert_eq!(got, want, "{r}: the read after the fresh one");
    }
}

const TWO: &[&str] = &[
    "CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL)",
    "CREATE TABLE b (id INT PRIMARY KEY, w INT NOT NULL)",
    "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2), (3, 3, 3)",
    "INSERT INTO b VALUES (1, 100), (2, 200), (3, 300)",
];
const TWO_READS: &[&str] = &[
    "SELECT * FROM a",
    "SELECT * FROM b",
    "SELECT v FROM a WHERE id = 2",
    "SELECT w FROM b WHERE id = 3",
    "SELECT COUNT(*), SUM(v) FROM a",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_format_multi_table_writes() {
    direct_writes_reach(
        "adv20_stmt",
        TWO,
        TWO_READS,
        &[
            "SET SESSION binlog_format = STATEMENT",
            "UPDATE a JOIN b ON a.id = b.id SET a.v = a.v + 10, b.w = b.w + 1 WHERE a.id = 2",
            "DELETE a, b FROM a JOIN b ON a.id = b.id WHERE b.id = 3",
            "REPLACE INTO a VALUES (1, 50, 1)",
            "INSERT INTO b SELECT id + 10, v FROM a",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_format_and_transactions() {
    direct_writes_reach(
        "adv20_mixed",
        TWO,
        TWO_READS,
        &[
            "SET SESSION binlog_format = MIXED",
            "START TRANSACTION",
            "UPDATE a SET v = 99 WHERE id = 3",
            "ROLLBACK",
            "START TRANSACTION",
            "UPDATE a SET v = v + UUID_SHORT() % 1 + 5 WHERE id = 2",
            "INSERT INTO b VALUES (4, 400) ON DUPLICATE KEY UPDATE w = 1",
            "COMMIT",
            "INSERT INTO b SELECT id + 20, v FROM a LIMIT 1",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_and_noblob_row_images() {
    direct_writes_reach(
        "adv20_image",
        &[
            "CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL)",
            "CREATE TABLE c (id INT PRIMARY KEY, body BLOB, n INT)",
            "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2), (3, 3, 3)",
            "INSERT INTO c VALUES (1, 'x', 1), (2, 'y', 2)",
        ],
        &[
            "SELECT * FROM a",
            "SELECT v FROM a WHERE id = 2",
            "SELECT id FROM a WHERE k = 3",
            "SELECT id, body, n FROM c",
            "SELECT body FROM c WHERE id = 1",
        ],
        &[
            "SET SESSION binlog_row_image = MINIMAL",
            "UPDATE a SET v = 20 WHERE id = 2",
            "UPDATE a SET k = 30 WHERE id = 1",
            "DELETE FROM a WHERE id = 3",
            "SET SESSION binlog_row_image = NOBLOB",
            "UPDATE c SET body = 'changed' WHERE id = 1",
            "UPDATE c SET n = 5 WHERE id = 2",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_swap_alter_type_drop_create() {
    direct_writes_reach(
        "adv20_ddl",
        TWO,
        &[
            "SELECT * FROM a",
            "SELECT * FROM b",
            "SELECT v FROM a WHERE id = 2",
        ],
        &[
            "RENAME TABLE a TO tmp, b TO a, tmp TO b",
            "ALTER TABLE b MODIFY v VARCHAR(10) NOT NULL",
            "DROP TABLE a",
            "CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL)",
            "INSERT INTO a VALUES (2, 222, 2)",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_truncate_and_exchange() {
    direct_writes_reach(
        "adv20_part",
        &[
            "CREATE TABLE p (id INT PRIMARY KEY, v INT NOT NULL) \
             PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), \
             PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)",
            "INSERT INTO p VALUES (1, 1), (11, 11), (21, 21)",
            "CREATE TABLE x (id INT PRIMARY KEY, v INT NOT NULL)",
            "INSERT INTO x VALUES (12, 1200), (13, 1300)",
        ],
        &[
            "SELECT * FROM p ORDER BY id",
            "SELECT v FROM p WHERE id = 1",
            "SELECT v FROM p WHERE id = 11",
            "SELECT * FROM x ORDER BY id",
            "SELECT COUNT(*) FROM x",
        ],
        &[
            "ALTER TABLE p TRUNCATE PARTITION p0",
            "ALTER TABLE p EXCHANGE PARTITION p1 WITH TABLE x",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_procedures_truncate_under_statement_format() {
    direct_writes_reach(
        "adv20_trig",
        &[
            "CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL)",
            "CREATE TABLE b (id INT PRIMARY KEY, w INT NOT NULL)",
            "CREATE TABLE log (n INT)",
            "INSERT INTO a VALUES (1, 1, 1), (2, 2, 2)",
            "INSERT INTO b VALUES (1, 100)",
            "INSERT INTO log VALUES (0)",
            "CREATE TRIGGER tr AFTER UPDATE ON a FOR EACH ROW UPDATE b SET w = w + 1",
            "CREATE PROCEDURE pr() BEGIN INSERT INTO log VALUES (7); UPDATE a SET k = 9 WHERE id = 2; END",
        ],
        &[
            "SELECT * FROM a",
            "SELECT * FROM b",
            "SELECT * FROM log",
            "SELECT w FROM b WHERE id = 1",
        ],
        &[
            "SET SESSION binlog_format = STATEMENT",
            "UPDATE a SET v = 5 WHERE id = 1",
            "CALL pr()",
            "TRUNCATE TABLE log",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_under_statement_format() {
    let file = std::env::temp_dir().join(format!("{}.tsv", common::unique_name("adv20")));
    std::fs::write(&file, "5\t55\t5\n6\t66\t6\n2\t77\t7\n").unwrap();
    let load: &'static str = Box::leak(
        format!("LOAD DATA INFILE '{}' REPLACE INTO TABLE a", file.display()).into_boxed_str(),
    );
    direct_writes_reach(
        "adv20_load",
        TWO,
        TWO_READS,
        &["SET SESSION binlog_format = STATEMENT", load],
    )
    .await;
    let _ = std::fs::remove_file(file);
}

/// Direct writes through views, stored functions and an unqualified name in another default
/// database (STATEMENT format: the tail resolves names as the event's session did), and
/// definitions changed under reads: a view replaced, a column renamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_format_views_functions_and_other_databases() {
    let other = common::fresh_schema("adv20_oth").await;
    common::setup(
        &other,
        &[
            "CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL)",
            "INSERT INTO a VALUES (1, -1, -1)",
        ],
    )
    .await;
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let setup: Vec<&str> = TWO
        .iter()
        .copied()
        .chain([
            "CREATE VIEW va AS SELECT id, v FROM a WHERE v < 100",
            "CREATE VIEW vb AS SELECT id, w FROM b",
            "CREATE FUNCTION bump(x INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE b SET w = w + x WHERE id = 1; RETURN x; END",
        ])
        .collect();
    let reads: Vec<&str> = vec![
        "SELECT * FROM a",
        "SELECT * FROM b",
        "SELECT * FROM va",
        "SELECT * FROM vb",
        leak(format!("SELECT * FROM {other}.a")),
    ];
    let writes: Vec<&str> = vec![
        "SET SESSION binlog_format = STATEMENT",
        "UPDATE va SET v = 50 WHERE id = 1",
        "DO bump(5)",
        leak(format!("USE {other}")),
        "UPDATE a SET v = 77 WHERE id = 1",
        "CREATE OR REPLACE VIEW vb AS SELECT w, id FROM b WHERE id > 1",
        "ALTER TABLE a RENAME COLUMN k TO kk",
    ];
    // The last two name {other}'s objects unqualified only where meant: vb and a are
    // qualified back to the test's schema by the reads' own database.
    let writes: Vec<&str> = writes
        .into_iter()
        .map(|w| match w {
            "CREATE OR REPLACE VIEW vb AS SELECT w, id FROM b WHERE id > 1" => {
                "CREATE OR REPLACE VIEW {db}.vb AS SELECT w, id FROM {db}.b WHERE id > 1"
            }
            "ALTER TABLE a RENAME COLUMN k TO kk" => "ALTER TABLE {db}.a RENAME COLUMN k TO kk",
            w => w,
        })
        .collect();
    direct_writes_reach("adv20_view", &setup, &reads, &writes).await;
}

/// Privilege generations are numbered per instance, and the L2 key holds the number: an
/// instance that saw more changes (A, started first) keys a user's reads under numbers
/// another (B) reaches later for a different state of that user's privileges. A fills under
/// g's generation as of A while g may read `t`; the REVOKE through A moves both; a GRANT on
/// another table through B then brings B's g to the number A filled under, and a new
/// session of g on B finds A's entry from before the REVOKE in L2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_generations_of_different_histories_never_meet() {
    let redis = Redis::start();
    let schema = common::fresh_schema("adv20_gens").await;
    let mut setup: Vec<&str> = T.to_vec();
    setup.push("CREATE TABLE t2 (id INT PRIMARY KEY)");
    common::setup(&schema, &setup).await;
    let g = common::unique_name("g");
    let url = |p: &TestProxy| {
        format!(
            "mysql://{g}:pw@{}/{schema}?prefer_socket=false",
            p.addr_string()
        )
    };
    let a = common::l2::proxy(&redis.url(), |_| {}).await;
    let mut ra = a.conn(&schema).await;
    for sql in [
        format!("CREATE USER '{g}'@'%' IDENTIFIED BY 'pw'"),
        format!("GRANT SELECT ON {schema}.t TO '{g}'@'%'"),
    ] {
        outcome::run_text(&mut ra, &sql).await;
    }
    // Until A's raises of g's stamps have landed in L2.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let read = "SELECT id, s FROM t ORDER BY id";
    let mut ga = Conn::from_url(url(&a)).await.unwrap();
    let filled = outcome::run_text(&mut ga, read).await;
    assert!(!filled.starts_with("ERROR"), "{filled}");
    common::l2::wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let b = common::l2::proxy(&redis.url(), |_| {}).await;
    let mut rb = b.conn(&schema).await;
    outcome::run_text(
        &mut ra,
        &format!("REVOKE SELECT ON {schema}.t FROM '{g}'@'%'"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    outcome::run_text(
        &mut rb,
        &format!("GRANT SELECT ON {schema}.t2 TO '{g}'@'%'"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let direct_url = format!(
        "mysql://{g}:pw@{}/{schema}?prefer_socket=false",
        common::db().addr()
    );
    let mut gd = Conn::from_url(direct_url).await.unwrap();
    let want = outcome::run_text(&mut gd, read).await;
    let mut gb = Conn::from_url(url(&b)).await.unwrap();
    let got = outcome::run_text(&mut gb, read).await;
    let l2_hits = common::l2::stat(&b, "Qcache_l2_hits");
    outcome::run_text(&mut ra, &format!("DROP USER '{g}'@'%'")).await;
    assert_eq!(
        got.replace(&schema, "{db}"),
        want.replace(&schema, "{db}"),
        "a new session of g on B (B's L2 hits: {l2_hits})"
    );
}

/// The simplest case of the same: B starts after a REVOKE made through A; B's generations
/// are all 0, the number A filled g's read under before the REVOKE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_an_instance_started_after_a_revoke_never_serves_from_before_it() {
    let redis = Redis::start();
    let schema = common::fresh_schema("adv20_gen0").await;
    let mut setup: Vec<&str> = T.to_vec();
    setup.push("CREATE TABLE t2 (id INT PRIMARY KEY)");
    common::setup(&schema, &setup).await;
    let g = common::unique_name("g");
    let mut d = common::direct_to(&schema).await;
    for sql in [
        format!("CREATE USER '{g}'@'%' IDENTIFIED BY 'pw'"),
        format!("GRANT SELECT ON {schema}.t TO '{g}'@'%'"),
        // So that g can still connect to the database after the REVOKE.
        format!("GRANT SELECT ON {schema}.t2 TO '{g}'@'%'"),
    ] {
        outcome::run_text(&mut d, &sql).await;
    }
    let url = |addr: String| format!("mysql://{g}:pw@{addr}/{schema}?prefer_socket=false");
    let a = common::l2::proxy(&redis.url(), |_| {}).await;
    let read = "SELECT id, s FROM t ORDER BY id";
    let mut ga = Conn::from_url(url(a.addr_string())).await.unwrap();
    let filled = outcome::run_text(&mut ga, read).await;
    assert!(!filled.starts_with("ERROR"), "{filled}");
    common::l2::wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let mut ra = a.conn(&schema).await;
    outcome::run_text(
        &mut ra,
        &format!("REVOKE SELECT ON {schema}.t FROM '{g}'@'%'"),
    )
    .await;
    let b = common::l2::proxy(&redis.url(), |_| {}).await;
    let mut gd = Conn::from_url(url(common::db().addr())).await.unwrap();
    let want = outcome::run_text(&mut gd, read).await;
    let mut gb = Conn::from_url(url(b.addr_string())).await.unwrap();
    let got = outcome::run_text(&mut gb, read).await;
    let l2_hits = common::l2::stat(&b, "Qcache_l2_hits");
    outcome::run_text(&mut d, &format!("DROP USER '{g}'@'%'")).await;
    assert_eq!(
        got.replace(&schema, "{db}"),
        want.replace(&schema, "{db}"),
        "a session of g on B, started after the REVOKE (B's L2 hits: {l2_hits})"
    );
}
