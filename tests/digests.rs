//! Finding out why a query is not cached: per-digest statistics (`SHOW QCACHE DIGESTS`,
//! `/digests`, `FLUSH QCACHE DIGESTS`), `QCACHE EXPLAIN` and `SHOW QCACHE LAST`, checked
//! against what the statements then actually do.

mod common;
use common::setup;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Row, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn text(v: &Value) -> Option<String> {
    match v {
        Value::NULL => None,
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        other => Some(other.as_sql(true)),
    }
}

/// A result as rows of column name → text value.
async fn rows(c: &mut Conn, sql: &str) -> Vec<HashMap<String, Option<String>>> {
    let rows: Vec<Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            let cols = r.columns();
            cols.iter()
                .enumerate()
                .map(|(i, col)| (col.name_str().into_owned(), text(&r[i])))
                .collect()
        })
        .collect()
}

/// `QCACHE EXPLAIN` / `SHOW QCACHE LAST` as field → value.
async fn fields(c: &mut Conn, sql: &str) -> HashMap<String, Option<String>> {
    let list: Vec<(String, Option<String>)> =
        c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    list.into_iter().collect()
}

fn field(f: &HashMap<String, Option<String>>, name: &str) -> String {
    f.get(name)
        .unwrap_or_else(|| panic!("no field {name} in {f:?}"))
        .clone()
        .unwrap_or_else(|| "NULL".into())
}

async fn status(c: &mut Conn) -> HashMap<String, String> {
    let rows: Vec<(String, String)> = c.query("SHOW QCACHE STATUS").await.unwrap();
    rows.into_iter().collect()
}

async fn counter(c: &mut Conn, name: &str) -> u64 {
    status(c)
        .await
        .get(name)
        .map_or(0, |v| v.parse().expect("numeric status"))
}

/// The digest row of `sql` under `schema`.
fn row_of<'a>(
    list: &'a [HashMap<String, Option<String>>],
    sql: &str,
    schema: &str,
) -> &'a HashMap<String, Option<String>> {
    let d = format!("{:016x}", qcache::analysis::digest(sql.as_bytes()));
    list.iter()
        .find(|r| field(r, "digest") == d && field(r, "schema") == schema)
        .unwrap_or_else(|| panic!("no row for {sql} ({d}) in {list:?}"))
}

fn num(r: &HashMap<String, Option<String>>, col: &str) -> u64 {
    field(r, col)
        .parse()
        .unwrap_or_else(|_| panic!("{col} not a number in {r:?}"))
}

/// A tiny HTTP/1.1 GET: the body.
async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("admin endpoint");
    let req = format!("GET {path} HTTP/1.1\r\nHost: qcache\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("answer in time")
        .unwrap();
    let t = String::from_utf8_lossy(&raw).into_owned();
    assert!(t.starts_with("HTTP/1.1 200"), "{t}");
    t.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// Eight sessions at once: each reads five rows of its own four times (one store and
/// three hits per row), a not-cacheable shape three times, and — with the cache off — a
/// third shape twice. Every count of every row is exact, and agrees with the global ones.
#[tokio::test]
async fn counts_exact_under_concurrent_sessions() {
    let schema = common::fresh_schema("dg_conc").await;
    let mut values = Vec::new();
    for i in 0..80 {
        values.push(format!("({i}, {i})"));
    }
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            &format!("INSERT INTO t VALUES {}", values.join(",")),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut root = proxy.conn(&schema).await;
    root.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    let hits0 = counter(&mut root, "Qcache_hits").await;
    let nd0 = counter(&mut root, "Qcache_not_cached_non_deterministic").await;
    let mut tasks = Vec::new();
    for s in 0..8 {
        let mut c = proxy.conn(&schema).await;
        tasks.push(tokio::spawn(async move {
            for round in 0..4 {
                for k in 0..5 {
                    let id = s * 10 + k;
                    let v: Option<i64> = c
                        .query_first(format!("SELECT v FROM t WHERE id = {id}"))
                        .await
                        .unwrap();
                    assert_eq!(v, Some(id as i64));
                }
                if round < 3 {
                    c.query_drop("SELECT NOW(), v FROM t WHERE id = 1")
                        .await
                        .unwrap();
                }
            }
            c.query_drop("SET query_cache_type = OFF").await.unwrap();
            for _ in 0..2 {
                c.query_drop("SELECT v + 1 FROM t WHERE id = 2")
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let list = rows(&mut root, "SHOW QCACHE DIGESTS").await;
    let point = row_of(&list, "SELECT v FROM t WHERE id = 1", &schema);
    assert_eq!(
        [
            num(point, "calls"),
            num(point, "hits"),
            num(point, "misses"),
            num(point, "stores")
        ],
        [160, 120, 40, 40],
        "{point:?}"
    );
    assert_eq!(field(point, "not_cached"), "");
    assert_eq!(num(point, "rows_sent"), 160);
    assert!(num(point, "bytes_sent") > 160 * 20, "{point:?}");
    assert_eq!(field(point, "digest_text"), "SELECT v FROM t WHERE id = ?");
    let upstream: f64 = field(point, "upstream_ms_total").parse().unwrap();
    let max: f64 = field(point, "upstream_ms_max").parse().unwrap();
    let min: f64 = field(point, "upstream_ms_min").parse().unwrap();
    let saved: f64 = field(point, "time_saved_ms").parse().unwrap();
    assert!(upstream > 0.0 && max > 0.0 && max <= upstream, "{point:?}");
    // The shortest of 40 misses: above zero, at most their mean.
    assert!(
        min > 0.0 && min <= max && min <= upstream / 40.0 + 0.001,
        "{point:?}"
    );
    // 120 hits at the mean of 40 misses.
    assert!(
        (saved - upstream * 3.0).abs() < 0.01 + upstream * 0.001,
        "{point:?}"
    );
    assert!(field(point, "first_seen") <= field(point, "last_seen"));

    let now = row_of(&list, "SELECT NOW(), v FROM t WHERE id = 1", &schema);
    assert_eq!(
        [
            num(now, "calls"),
            num(now, "hits"),
            num(now, "misses"),
            num(now, "stores")
        ],
        [24, 0, 24, 0]
    );
    assert_eq!(field(now, "not_cached"), "non_deterministic:24");
    let off = row_of(&list, "SELECT v + 1 FROM t WHERE id = 2", &schema);
    assert_eq!((num(off, "calls"), num(off, "hits")), (16, 0));
    assert_eq!(field(off, "not_cached"), "not_requested:16");

    // The global counters moved by as much.
    assert_eq!(counter(&mut root, "Qcache_hits").await - hits0, 120);
    assert_eq!(
        counter(&mut root, "Qcache_not_cached_non_deterministic").await - nd0,
        24
    );
    proxy.shutdown().await;
}

/// With `stats.digests = N`, N + 1000 shapes leave N rows and "other", and every call is
/// in one of them.
#[tokio::test]
async fn bounded_to_n_rows_and_other() {
    let schema = common::fresh_schema("dg_bound").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    let n = 20;
    let proxy = common::proxy(|c| c.stats.digests = n).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    // The first N shapes three times, interleaved with 1000 others once each.
    for i in 0..(n + 1000) {
        let reps = if i < n { 3 } else { 1 };
        for _ in 0..reps {
            c.query_drop(format!("SELECT id AS c{i} FROM t"))
                .await
                .unwrap();
        }
    }
    let list = rows(&mut c, "SHOW QCACHE DIGESTS").await;
    assert_eq!(list.len(), n + 1, "N rows and other");
    let other = list.last().unwrap();
    assert_eq!(field(other, "digest"), "other");
    assert_eq!(field(other, "digest_text"), "NULL");
    let total: u64 = list.iter().map(|r| num(r, "calls")).sum();
    assert_eq!(total, 3 * n as u64 + 1000);
    for r in &list[..n] {
        let t = field(r, "digest_text");
        let i: usize = t
            .trim_start_matches("SELECT id AS c")
            .trim_end_matches(" FROM t")
            .parse()
            .unwrap_or_else(|_| panic!("{t}"));
        assert!(i < n, "a frequent shape holds each row: {t}");
    }
    proxy.shutdown().await;
}

/// LIKE filters on the normalised text, ORDER BY any column either way, LIMIT; FLUSH
/// starts again; `/digests` has the same rows as JSON, without a literal in sight.
#[tokio::test]
async fn like_order_limit_flush_and_json() {
    let schema = common::fresh_schema("dg_query").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, email VARCHAR(64))",
            "INSERT INTO t VALUES (1, 'alice@example.com')",
            "CREATE TABLE u (id INT PRIMARY KEY)",
        ],
    )
    .await;
    let proxy = common::proxy(|c| c.admin.listen = "127.0.0.1:0".into()).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    let shapes = [
        ("SELECT id FROM t WHERE email = 'alice@example.com'", 5),
        ("SELECT email FROM t WHERE id = 1", 3),
        ("SELECT id FROM u", 2),
        ("SELECT COUNT(*) FROM t", 1),
    ];
    for (sql, n) in shapes {
        for _ in 0..n {
            c.query_drop(sql).await.unwrap();
        }
    }
    let all = rows(&mut c, "SHOW QCACHE DIGESTS").await;
    let calls: Vec<u64> = all.iter().map(|r| num(r, "calls")).collect();
    assert!(calls.windows(2).all(|w| w[0] >= w[1]), "{calls:?}");
    assert_eq!(
        field(&all[0], "digest_text"),
        "SELECT id FROM t WHERE email = ?"
    );
    let like = rows(
        &mut c,
        "SHOW QCACHE DIGESTS LIKE '%from t%' ORDER BY calls ASC LIMIT 2",
    )
    .await;
    let texts: Vec<String> = like.iter().map(|r| field(r, "digest_text")).collect();
    assert_eq!(
        texts,
        ["SELECT COUNT(*) FROM t", "SELECT email FROM t WHERE id = ?"]
    );
    let by_text = rows(
        &mut c,
        "SHOW QCACHE DIGESTS LIKE 'select%' ORDER BY digest_text",
    )
    .await;
    let texts: Vec<String> = by_text.iter().map(|r| field(r, "digest_text")).collect();
    let mut sorted = texts.clone();
    sorted.sort();
    assert_eq!(texts, sorted);
    assert_eq!(texts.len(), 4);
    let e = c
        .query_drop("SHOW QCACHE DIGESTS ORDER BY nonsense")
        .await
        .unwrap_err();
    assert!(
        matches!(e, mysql_async::Error::Server(ref s) if s.code == 1064),
        "{e:?}"
    );

    let body = http_get(proxy.running.admin_addr.unwrap(), "/digests").await;
    assert!(!body.contains("alice"), "no literal in /digests: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let list = json["digests"].as_array().expect("digests array");
    let first = list
        .iter()
        .find(|d| d["digest_text"] == "SELECT id FROM t WHERE email = ?")
        .expect("row in JSON");
    assert_eq!(first["calls"], 5);
    assert_eq!(first["hits"], 4);
    assert_eq!(first["stores"], 1);
    assert_eq!(first["schema"], schema.as_str());
    assert!(first["upstream_ms_total"].as_f64().unwrap() > 0.0);
    assert_eq!(json["capacity"], 1000);
    assert!(json["other"].is_null());

    c.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    assert!(rows(&mut c, "SHOW QCACHE DIGESTS").await.is_empty());
    let body = http_get(proxy.running.admin_addr.unwrap(), "/digests").await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["digests"].as_array().map(Vec::len), Some(0));
    // A hit after the flush still names its shape (the text travels with the entry).
    c.query_drop("SELECT id FROM u").await.unwrap();
    let after = rows(&mut c, "SHOW QCACHE DIGESTS").await;
    assert_eq!(after.len(), 1);
    assert_eq!(num(&after[0], "hits"), 1);
    assert_eq!(field(&after[0], "digest_text"), "SELECT id FROM u");
    proxy.shutdown().await;
}

/// A user without RELOAD is refused the digest table and its flush; LAST and EXPLAIN of
/// its own statements are answered, with what would show other sessions' data hidden.
#[tokio::test]
async fn unprivileged_user_refused_digests_but_explains_own() {
    let schema = common::fresh_schema("dg_priv").await;
    let plain = common::unique_name("qcdg");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
            "CREATE VIEW vt AS SELECT id FROM t",
            &format!("CREATE USER '{plain}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{plain}'@'%'"),
        ],
    )
    .await;
    for shared in [false, true] {
        let proxy = common::proxy(|c| c.cache.shared_between_users = shared).await;
        let url = format!(
            "mysql://{plain}:pw@{}/{schema}?prefer_socket=false",
            proxy.addr
        );
        for sql in [
            "SHOW QCACHE DIGESTS",
            "SHOW QCACHE DIGESTS LIKE '%' LIMIT 1",
            "FLUSH QCACHE DIGESTS",
        ] {
            let mut c = Conn::from_url(url.clone()).await.unwrap();
            match c.query_drop(sql).await {
                Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1227, "{sql}"),
                other => panic!("{sql}: answered to a user without RELOAD: {other:?}"),
            }
        }
        let mut c = Conn::from_url(url.clone()).await.unwrap();
        c.query_drop("SELECT id FROM vt").await.unwrap();
        let last = fields(&mut c, "SHOW QCACHE LAST").await;
        assert_eq!(field(&last, "outcome"), "miss-stored");
        assert_eq!(field(&last, "statement"), "SELECT id FROM vt");
        let ex = fields(&mut c, "QCACHE EXPLAIN SELECT id FROM vt").await;
        assert_eq!(field(&ex, "tables"), format!("{schema}.vt"));
        assert!(field(&ex, "base_tables").contains("needs RELOAD"), "{ex:?}");
        assert!(field(&ex, "rule").contains("needs RELOAD"), "{ex:?}");
        if shared {
            assert!(
                field(&ex, "entry_present").contains("needs RELOAD"),
                "{ex:?}"
            );
            assert_eq!(field(&ex, "decision"), "hit or store");
        } else {
            assert_eq!(field(&ex, "entry_present"), "yes");
            assert_eq!(field(&ex, "decision"), "hit");
        }
        // EXPLAIN and LAST are not statements LAST speaks of.
        let last = fields(&mut c, "SHOW QCACHE LAST").await;
        assert_eq!(field(&last, "statement"), "SELECT id FROM vt");
        drop(c);
        proxy.shutdown().await;
    }
    let mut d = common::direct().await;
    d.query_drop(format!("DROP USER '{plain}'@'%'"))
        .await
        .unwrap();
}

/// One case of "what is never cached": statements run first on the session, the read,
/// and the reason EXPLAIN must give and the statement must then be counted under.
struct Case {
    prep: &'static [&'static str],
    sql: &'static str,
    reason: &'static str,
}

const CASES: &[Case] = &[
    Case {
        prep: &[],
        sql: "SELECT NOW(), v FROM t",
        reason: "non_deterministic",
    },
    Case {
        prep: &[],
        sql: "SELECT RAND() FROM t",
        reason: "non_deterministic",
    },
    Case {
        prep: &[],
        sql: "SELECT CONNECTION_ID() FROM t",
        reason: "non_deterministic",
    },
    Case {
        prep: &[],
        sql: "SELECT f() FROM t",
        reason: "stored_function",
    },
    Case {
        prep: &[],
        sql: "SELECT @x FROM t",
        reason: "user_variable",
    },
    Case {
        prep: &[],
        sql: "SELECT @@sql_mode, v FROM t",
        reason: "system_variable",
    },
    Case {
        prep: &[],
        sql: "SELECT v FROM t FOR UPDATE",
        reason: "locking",
    },
    Case {
        prep: &[],
        sql: "SELECT v FROM t LOCK IN SHARE MODE",
        reason: "locking",
    },
    Case {
        prep: &[],
        sql: "SELECT v FROM t WHERE id = 1 INTO @y",
        reason: "into",
    },
    Case {
        prep: &[],
        sql: "SELECT SQL_CALC_FOUND_ROWS v FROM t",
        reason: "calc_found_rows",
    },
    Case {
        prep: &[],
        sql: "SELECT table_name FROM information_schema.tables WHERE table_name = 't'",
        reason: "system_schema",
    },
    Case {
        prep: &[],
        sql: "SELECT 1",
        reason: "no_table",
    },
    Case {
        prep: &["CREATE TEMPORARY TABLE tmp (a INT)"],
        sql: "SELECT a FROM tmp",
        reason: "temporary_table",
    },
    Case {
        prep: &[],
        sql: "SELECT n FROM vnow",
        reason: "opaque_view",
    },
    Case {
        prep: &[],
        sql: "SELECT a FROM no_such_table",
        reason: "unknown_table",
    },
    Case {
        prep: &[],
        sql: "SELECT v FROM t; SELECT v FROM t",
        reason: "multi_statement",
    },
    Case {
        prep: &["SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"],
        sql: "SELECT v FROM t",
        reason: "read_uncommitted",
    },
    Case {
        prep: &["CALL p()"],
        sql: "SELECT v FROM t",
        reason: "session_untracked",
    },
    Case {
        prep: &[],
        sql: "SELECT SQL_NO_CACHE v FROM t",
        reason: "not_requested",
    },
    Case {
        prep: &["SET query_cache_type = OFF"],
        sql: "SELECT v FROM t",
        reason: "not_requested",
    },
    Case {
        prep: &["BEGIN", "INSERT INTO t2 VALUES (5)"],
        sql: "SELECT a FROM t2",
        reason: "written_in_transaction",
    },
    Case {
        prep: &[],
        sql: "SELECT v FROM secret",
        reason: "rule",
    },
];

/// For every reason of "What is never cached" that can be known before running: EXPLAIN
/// names it, and running the statement then counts it under that reason, in the global
/// counter, the digest row and LAST.
#[tokio::test]
async fn explain_names_each_reason_and_agrees_with_the_run() {
    let schema = common::fresh_schema("dg_why").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
            "CREATE TABLE t2 (a INT)",
            "CREATE TABLE secret (v INT)",
            "CREATE FUNCTION f() RETURNS INT DETERMINISTIC RETURN 1",
            "CREATE PROCEDURE p() BEGIN END",
            "CREATE VIEW vnow AS SELECT NOW() AS n, v FROM t",
        ],
    )
    .await;
    let rules = qcache::config::Config::from_toml(
        "[[rules]]\ntable = \"secret\"\naction = \"never\"\n",
        "rules",
    )
    .unwrap()
    .rules;
    let proxy = common::proxy(move |c| c.rules = rules).await;
    for case in CASES {
        let mut c = proxy.conn(&schema).await;
        for p in case.prep {
            c.query_drop(*p)
                .await
                .unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        let ex = fields(&mut c, &format!("QCACHE EXPLAIN {}", case.sql)).await;
        assert_eq!(field(&ex, "decision"), "send", "{}: {ex:?}", case.sql);
        assert_eq!(field(&ex, "reason"), case.reason, "{}: {ex:?}", case.sql);
        if case.reason == "rule" {
            assert!(field(&ex, "rule").starts_with("rules[0]"), "{ex:?}");
        }
        let name = format!("Qcache_not_cached_{}", case.reason);
        let before = counter(&mut c, &name).await;
        // Some of them are refused by the server (an unknown table): counted all the same.
        let _ = c.query_drop(case.sql).await;
        let after = counter(&mut c, &name).await;
        assert_eq!(after, before + 1, "{}: {name}", case.sql);
        let last = fields(&mut c, "SHOW QCACHE LAST").await;
        assert_eq!(field(&last, "outcome"), "miss-not-stored", "{}", case.sql);
        assert_eq!(field(&last, "reason"), case.reason, "{}", case.sql);
        let _ = c.query_drop("ROLLBACK").await;
    }
    proxy.shutdown().await;
}

/// "store" → run → "hit" → run is a hit; a view shows its base tables; a write makes it
/// "store" again; a cache rule's TTL shows; a result with warnings is the one thing EXPLAIN
/// cannot know before running, and says so.
#[tokio::test]
async fn explain_store_then_hit_views_rules_and_warnings() {
    let schema = common::fresh_schema("dg_store").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
            "CREATE VIEW vt AS SELECT id, v FROM t",
            "CREATE TABLE ttl_t (id INT)",
        ],
    )
    .await;
    let rules = qcache::config::Config::from_toml(
        "[[rules]]\ntable = \"ttl_t\"\naction = \"cache\"\nttl = \"5s\"\n",
        "rules",
    )
    .unwrap()
    .rules;
    let proxy = common::proxy(move |c| c.rules = rules).await;
    let mut c = proxy.conn(&schema).await;
    let sql = "SELECT v FROM vt WHERE id = 1";
    let ex = fields(&mut c, &format!("QCACHE EXPLAIN {sql}")).await;
    assert_eq!(field(&ex, "decision"), "store", "{ex:?}");
    assert_eq!(field(&ex, "entry_present"), "no");
    assert_eq!(field(&ex, "tables"), format!("{schema}.vt"));
    // The view itself too: redefining it changes what the read returns (and, since the
    // catalog follows definers, the privileges the view runs with).
    assert_eq!(field(&ex, "base_tables"), format!("{schema}.t,{schema}.vt"));
    assert!(
        field(&ex, "definer_privileges").contains("user root"),
        "{ex:?}"
    );
    assert_eq!(field(&ex, "rule"), "none");
    assert_eq!(field(&ex, "digest_text"), "SELECT v FROM vt WHERE id = ?");
    assert_eq!(field(&ex, "key.database"), schema);
    assert_eq!(field(&ex, "query_cache_type"), "ON");
    // EXPLAIN ran nothing: no miss, no store.
    assert_eq!(counter(&mut c, "Qcache_inserts").await, 0);
    assert_eq!(counter(&mut c, "Qcache_misses").await, 0);

    c.query_drop(sql).await.unwrap();
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "miss-stored"
    );
    let ex = fields(&mut c, &format!("QCACHE EXPLAIN {sql}")).await;
    assert_eq!(field(&ex, "decision"), "hit");
    assert_eq!(field(&ex, "entry_present"), "yes");
    let hits = counter(&mut c, "Qcache_hits").await;
    c.query_drop(sql).await.unwrap();
    assert_eq!(counter(&mut c, "Qcache_hits").await, hits + 1);
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(field(&last, "outcome"), "hit");
    assert_eq!(field(&last, "rows_sent"), "1");

    // A write to the base table: the entry is no longer servable.
    c.query_drop("UPDATE t SET v = 11 WHERE id = 1")
        .await
        .unwrap();
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert!(field(&last, "outcome").starts_with("relayed"), "{last:?}");
    let ex = fields(&mut c, &format!("QCACHE EXPLAIN {sql}")).await;
    assert_eq!(field(&ex, "decision"), "store");

    let ex = fields(&mut c, "QCACHE EXPLAIN SELECT id FROM ttl_t").await;
    assert_eq!(field(&ex, "decision"), "store");
    assert!(field(&ex, "rule").starts_with("rules[0]"), "{ex:?}");
    assert_eq!(field(&ex, "ttl"), "5s");

    // Warnings are known only once the server answers.
    let warn_sql = "SELECT CAST('1x' AS SIGNED) FROM t";
    let ex = fields(&mut c, &format!("QCACHE EXPLAIN {warn_sql}")).await;
    assert_eq!(field(&ex, "decision"), "store");
    assert!(field(&ex, "reason").contains("warnings"), "{ex:?}");
    let before = counter(&mut c, "Qcache_not_cached_warnings").await;
    c.query_drop(warn_sql).await.unwrap();
    assert_eq!(
        counter(&mut c, "Qcache_not_cached_warnings").await,
        before + 1
    );
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(field(&last, "outcome"), "miss-not-stored");
    assert_eq!(field(&last, "reason"), "warnings");

    // Writes are relayed, never cached.
    let ex = fields(&mut c, "QCACHE EXPLAIN UPDATE t SET v = 1").await;
    assert_eq!(field(&ex, "decision"), "relay");

    // A transaction whose tables changed since its snapshot: known before running.
    let mut a = proxy.conn(&schema).await;
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("SELECT v FROM t WHERE id = 1").await.unwrap();
    c.query_drop("UPDATE t SET v = 12 WHERE id = 1")
        .await
        .unwrap();
    let ex = fields(&mut a, "QCACHE EXPLAIN SELECT id FROM t").await;
    assert_eq!(field(&ex, "in_transaction"), "yes");
    assert_eq!(
        (field(&ex, "decision"), field(&ex, "reason")),
        ("send".to_string(), "changed_since_snapshot".to_string()),
        "{ex:?}"
    );
    let before = counter(&mut a, "Qcache_not_cached_changed_since_snapshot").await;
    a.query_drop("SELECT id FROM t").await.unwrap();
    assert_eq!(
        counter(&mut a, "Qcache_not_cached_changed_since_snapshot").await,
        before + 1
    );
    a.query_drop("COMMIT").await.unwrap();
    drop((a, c));
    proxy.shutdown().await;

    // Too large: like warnings, known once the result is in.
    let proxy = common::proxy(|c| c.cache.max_result_bytes = 16).await;
    let mut c = proxy.conn(&schema).await;
    let ex = fields(&mut c, "QCACHE EXPLAIN SELECT id, v FROM t").await;
    assert_eq!(field(&ex, "decision"), "store");
    assert!(field(&ex, "reason").contains("max_result_bytes"), "{ex:?}");
    c.query_drop("SELECT id, v FROM t").await.unwrap();
    assert_eq!(counter(&mut c, "Qcache_not_cached_too_large").await, 1);
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(field(&last, "reason"), "too_large");
    proxy.shutdown().await;
}

/// Prepared executes count under the shape of their SQL, the same row as the text
/// protocol's literal-for-literal twin.
#[tokio::test]
async fn prepared_executes_count_under_their_shape() {
    let schema = common::fresh_schema("dg_prep").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    for id in [1, 2, 1, 2, 1] {
        let v: Option<i64> = c
            .exec_first("SELECT v FROM t WHERE id = ?", (id,))
            .await
            .unwrap();
        assert_eq!(v, Some(id * 10));
    }
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(field(&last, "prepared"), "yes");
    assert_eq!(field(&last, "outcome"), "hit");
    let list = rows(&mut c, "SHOW QCACHE DIGESTS").await;
    let r = row_of(&list, "SELECT v FROM t WHERE id = ?", &schema);
    assert_eq!(
        [num(r, "calls"), num(r, "hits"), num(r, "stores")],
        [5, 3, 2],
        "{r:?}"
    );
    proxy.shutdown().await;
}

/// `QCACHE EXPLAIN STATEMENT <id>`: a binary-protocol prepared statement explained with the
/// parameters its last execute bound, under the session as it is now, and each verdict
/// checked against what the next execute then does.
#[tokio::test]
async fn explain_prepared_statements_agrees_with_the_execute() {
    let schema = common::fresh_schema("dg_expst").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let explain = |id: u32| format!("QCACHE EXPLAIN STATEMENT {id}");

    // With a parameter: unknown until an execute binds one.
    let st = c.prep("SELECT v FROM t WHERE id = ?").await.unwrap();
    let ex = fields(&mut c, &explain(st.id())).await;
    assert_eq!(field(&ex, "decision"), "unknown until executed", "{ex:?}");
    assert!(field(&ex, "parameters").contains("not bound yet"), "{ex:?}");
    assert!(field(&ex, "entry_present").contains("unknown"), "{ex:?}");
    assert_eq!(field(&ex, "tables"), format!("{schema}.t"));
    assert_eq!(field(&ex, "digest_text"), "SELECT v FROM t WHERE id = ?");
    // LAST is the statement prepared last.
    let last_ex = fields(&mut c, "QCACHE EXPLAIN STATEMENT LAST").await;
    assert_eq!(field(&last_ex, "statement_id"), st.id().to_string());

    let v: Option<i64> = c.exec_first(&st, (1,)).await.unwrap();
    assert_eq!(v, Some(10));
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "miss-stored"
    );
    let ex = fields(&mut c, &explain(st.id())).await;
    assert_eq!(field(&ex, "decision"), "hit", "{ex:?}");
    assert_eq!(field(&ex, "entry_present"), "yes");
    assert!(field(&ex, "parameters").contains("last execute"), "{ex:?}");
    let hits = counter(&mut c, "Qcache_hits").await;
    let _: Option<i64> = c.exec_first(&st, (1,)).await.unwrap();
    assert_eq!(counter(&mut c, "Qcache_hits").await, hits + 1);

    // Other values: their own key.
    let _: Option<i64> = c.exec_first(&st, (2,)).await.unwrap();
    let ex = fields(&mut c, &explain(st.id())).await;
    assert_eq!(field(&ex, "decision"), "hit", "{ex:?}");
    // A write: the entry is gone, the next execute stores.
    c.query_drop("UPDATE t SET v = 21 WHERE id = 2")
        .await
        .unwrap();
    let ex = fields(&mut c, &explain(st.id())).await;
    assert_eq!(field(&ex, "decision"), "store", "{ex:?}");
    assert_eq!(field(&ex, "entry_present"), "no");
    let v: Option<i64> = c.exec_first(&st, (2,)).await.unwrap();
    assert_eq!(v, Some(21));
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "miss-stored"
    );
    // The session's context changed since the last execute: keyed as it is now.
    c.query_drop("SET div_precision_increment = 7")
        .await
        .unwrap();
    let ex = fields(&mut c, &explain(st.id())).await;
    assert_eq!(field(&ex, "decision"), "store", "{ex:?}");
    let _: Option<i64> = c.exec_first(&st, (2,)).await.unwrap();
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "miss-stored"
    );

    // Without parameters: known before the first execute.
    let all = c.prep("SELECT id, v FROM t").await.unwrap();
    let ex = fields(&mut c, &explain(all.id())).await;
    assert_eq!(field(&ex, "decision"), "store", "{ex:?}");
    assert_eq!(field(&ex, "parameters"), "none");
    let _: Vec<(i64, i64)> = c.exec(&all, ()).await.unwrap();
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "miss-stored"
    );
    let ex = fields(&mut c, &explain(all.id())).await;
    assert_eq!(field(&ex, "decision"), "hit", "{ex:?}");
    let _: Vec<(i64, i64)> = c.exec(&all, ()).await.unwrap();
    assert_eq!(
        field(&fields(&mut c, "SHOW QCACHE LAST").await, "outcome"),
        "hit"
    );

    // Not cacheable by its shape: the typed reason, and the execute counts it.
    let now = c.prep("SELECT v, NOW() FROM t WHERE id = ?").await.unwrap();
    let ex = fields(&mut c, &explain(now.id())).await;
    assert_eq!(
        (field(&ex, "decision"), field(&ex, "reason")),
        ("send".to_string(), "non_deterministic".to_string()),
        "{ex:?}"
    );
    let before = counter(&mut c, "Qcache_not_cached_non_deterministic").await;
    let _: Option<Row> = c.exec_first(&now, (1,)).await.unwrap();
    assert_eq!(
        counter(&mut c, "Qcache_not_cached_non_deterministic").await,
        before + 1
    );
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(field(&last, "reason"), "non_deterministic");

    // A prepared write is relayed.
    let upd = c.prep("UPDATE t SET v = ? WHERE id = ?").await.unwrap();
    let ex = fields(&mut c, &explain(upd.id())).await;
    assert_eq!(field(&ex, "decision"), "relay", "{ex:?}");

    let ex = fields(&mut c, "QCACHE EXPLAIN STATEMENT 99999").await;
    assert!(field(&ex, "decision").contains("no such"), "{ex:?}");

    // SQL-level EXECUTE: never cached, and it stops the session's caching, as EXPLAIN says.
    c.query_drop("PREPARE s FROM 'SELECT v FROM t WHERE id = 1'")
        .await
        .unwrap();
    let ex = fields(&mut c, "QCACHE EXPLAIN EXECUTE s").await;
    assert_eq!(
        (field(&ex, "decision"), field(&ex, "reason")),
        ("relay".to_string(), "not_a_read".to_string()),
        "{ex:?}"
    );
    assert!(field(&ex, "effect").contains("stops caching"), "{ex:?}");
    c.query_drop("EXECUTE s").await.unwrap();
    let ex = fields(&mut c, &explain(all.id())).await;
    assert_eq!(
        (field(&ex, "decision"), field(&ex, "reason")),
        ("send".to_string(), "session_untracked".to_string()),
        "{ex:?}"
    );
    let _: Vec<(i64, i64)> = c.exec(&all, ()).await.unwrap();
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    assert_eq!(
        (field(&last, "outcome"), field(&last, "reason")),
        (
            "miss-not-stored".to_string(),
            "session_untracked".to_string()
        )
    );
    drop(c);
    proxy.shutdown().await;
}

/// QCACHE EXPLAIN says what the key holds of the optimizer's settings: after a SET of
/// optimizer_switch (which changes only the flags it names) it shows the effective value
/// read back from the server, and a session whose value differs finds no entry where a
/// session with the same SET text but another effective value stored one (row order is
/// data: the flag decides a join's order).
#[tokio::test]
async fn explain_shows_the_effective_optimizer_switch() {
    let schema = common::fresh_schema("dg_optsw").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t1 (a INT NOT NULL)",
            "CREATE TABLE t2 (b INT NOT NULL)",
            "INSERT INTO t1 VALUES (1), (2), (3)",
            "INSERT INTO t2 VALUES (1), (2), (3)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let join = "SELECT t1.a, t2.b FROM t1 LEFT JOIN t2 ON t2.b >= t1.a";
    let mut a = proxy.conn(&schema).await;
    a.query_drop("SET optimizer_switch = 'outer_join_with_cache=off'")
        .await
        .unwrap();
    a.query_drop("SET optimizer_switch = 'mrr=off'")
        .await
        .unwrap();
    let _: Vec<(i64, Option<i64>)> = a.query(join).await.unwrap();
    let ex_a = fields(&mut a, &format!("QCACHE EXPLAIN {join}")).await;
    assert_eq!(field(&ex_a, "entry_present"), "yes", "{ex_a:?}");
    assert!(
        field(&ex_a, "key.variables_set").contains("outer_join_with_cache=off"),
        "{ex_a:?}"
    );
    let mut b = proxy.conn(&schema).await;
    b.query_drop("SET optimizer_switch = 'mrr=off'")
        .await
        .unwrap();
    let ex_b = fields(&mut b, &format!("QCACHE EXPLAIN {join}")).await;
    assert!(
        field(&ex_b, "key.variables_set").contains("outer_join_with_cache=on"),
        "{ex_b:?}"
    );
    assert_ne!(
        field(&ex_a, "key.fingerprint"),
        field(&ex_b, "key.fingerprint")
    );
    assert_eq!(field(&ex_b, "entry_present"), "no", "{ex_b:?}");
    proxy.shutdown().await;
}

/// Each user's calls of a shape are a row of their own, named in the `user` column.
#[tokio::test]
async fn rows_per_user() {
    let schema = common::fresh_schema("dg_user").await;
    let user = common::unique_name("dgu");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
            &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut root = proxy.conn(&schema).await;
    root.query_drop("FLUSH QCACHE DIGESTS").await.unwrap();
    let sql = "SELECT v FROM t WHERE id = 1";
    for _ in 0..3 {
        root.query_drop(sql).await.unwrap();
    }
    let url = format!(
        "mysql://{user}:pw@{}/{schema}?prefer_socket=false",
        proxy.addr
    );
    let mut other = Conn::from_url(url).await.unwrap();
    for _ in 0..2 {
        other.query_drop(sql).await.unwrap();
    }
    let list = rows(&mut root, "SHOW QCACHE DIGESTS").await;
    let d = format!("{:016x}", qcache::analysis::digest(sql.as_bytes()));
    let mut mine: Vec<(String, u64)> = list
        .iter()
        .filter(|r| field(r, "digest") == d && field(r, "schema") == schema)
        .map(|r| (field(r, "user"), num(r, "calls")))
        .collect();
    mine.sort();
    let mut want = vec![("root".to_string(), 3), (user.clone(), 2)];
    want.sort();
    assert_eq!(mine, want, "{list:?}");
    drop(other);
    proxy.shutdown().await;
    let mut d = common::direct().await;
    d.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
}
