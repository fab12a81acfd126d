//! The statements after a hit see what they would have seen (issue #17, section 6): the
//! server's diagnostics (warnings, errors, FOUND_ROWS(), ROW_COUNT()) after a SELECT served
//! from the cache, and qcache's own variables, compared with the server directly.

mod common;

use mysql_async::prelude::*;
use mysql_async::Conn;

use common::steps::{assert_same, run, Step};

/// Runs `steps` directly and through a fresh qcache (tweaked), and compares step by step.
async fn differential(
    prefix: &str,
    steps: &[Step],
    tweak: impl FnOnce(&mut qcache::config::Config),
) {
    let schema = common::fresh_schema(prefix).await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (a INT, b INT)").await.unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
        .await
        .unwrap();
    d.query_drop("CREATE TABLE u (a INT)").await.unwrap();
    let want = run(&schema, steps, None).await;
    let proxy = common::proxy(tweak).await;
    let got = run(&schema, steps, Some(&proxy)).await;
    assert_same(steps, &want, &got);
    // The same answers prove nothing if none came from the cache.
    let hits = proxy.running.shared.cache.stats().hits();
    println!("{prefix}: {hits} hits");
    assert!(hits > 0, "{prefix}: no step was served from the cache");
    proxy.shutdown().await;
}

fn steps(body: &[Step]) -> Vec<Step> {
    body.to_vec()
}

#[tokio::test]
async fn warnings_and_errors_after_a_hit_are_the_selects() {
    let s = steps(&[
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW WARNINGS"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW COUNT(*) WARNINGS"),
        ("c", "SELECT CAST('x' AS INT)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT @@warning_count, @@error_count"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW ERRORS"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SHOW COUNT(*) ERRORS"),
        ("c", "SELECT * FROM {db}.no_such_table"),
        ("c", "P SELECT a FROM {db}.t ORDER BY a"),
        ("c", "P SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT @@error_count"),
    ]);
    differential("dg_warn", &s, |_| {}).await;
}

#[tokio::test]
async fn found_rows_and_row_count_after_a_hit_are_the_selects() {
    let s = steps(&[
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (1), (2), (3)"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT FOUND_ROWS(), ROW_COUNT()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1"),
        ("c", "SELECT FOUND_ROWS()"),
        // An offset counts the rows it skipped.
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1, 1"),
        ("c", "SELECT 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1, 1"),
        ("c", "SELECT FOUND_ROWS()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1 OFFSET 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 1 OFFSET 1"),
        ("c", "SELECT FOUND_ROWS()"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 5, 1"),
        ("c", "SELECT a FROM {db}.t ORDER BY a LIMIT 5, 1"),
        ("c", "SELECT FOUND_ROWS()"),
        // A write after a hit: its own ROW_COUNT(), the hit's FOUND_ROWS().
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "SELECT a FROM {db}.t ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (4)"),
        ("c", "SELECT FOUND_ROWS(), ROW_COUNT()"),
        // Prepared.
        ("c", "P SELECT a FROM {db}.t WHERE a > 0 ORDER BY a"),
        ("c", "INSERT INTO {db}.u VALUES (1), (2), (3)"),
        ("c", "P SELECT a FROM {db}.t WHERE a > 0 ORDER BY a"),
        ("c", "P SELECT FOUND_ROWS(), ROW_COUNT()"),
    ]);
    differential("dg_found", &s, |_| {}).await;
}

/// `SELECT @@query_cache_type` and every `SHOW … VARIABLES` spelling agree, for the
/// session's value and the configured (global) one, and the SELECT's column metadata is
/// the server's.
#[tokio::test]
async fn query_cache_type_reads_the_same_everywhere() {
    let proxy =
        common::proxy(|c| c.cache.query_cache_type = qcache::config::QueryCacheType::On).await;
    let mut c = proxy.conn("").await;
    let mut d = common::direct().await;
    let shown = |rows: Vec<(String, String)>| {
        rows.into_iter()
            .find(|r| r.0 == "query_cache_type")
            .map(|r| r.1)
    };
    c.query_drop("SET SESSION query_cache_type = DEMAND")
        .await
        .unwrap();
    for (sql, want) in [
        ("SELECT @@query_cache_type", "DEMAND"),
        ("SELECT @@session.query_cache_type", "DEMAND"),
        ("SELECT @@global.query_cache_type", "ON"),
    ] {
        let v: Option<String> = c.query_first(sql).await.unwrap();
        assert_eq!(v.as_deref(), Some(want), "{sql}");
    }
    for (sql, want) in [
        ("SHOW VARIABLES LIKE 'query_cache_type'", "DEMAND"),
        ("SHOW SESSION VARIABLES LIKE 'query_cache_type'", "DEMAND"),
        ("SHOW LOCAL VARIABLES LIKE 'query_cache%'", "DEMAND"),
        (
            "SHOW VARIABLES WHERE Variable_name = 'query_cache_type'",
            "DEMAND",
        ),
        ("SHOW VARIABLES", "DEMAND"),
        ("SHOW GLOBAL VARIABLES LIKE 'query_cache_type'", "ON"),
    ] {
        let rows: Vec<(String, String)> = c.query(sql).await.unwrap();
        assert_eq!(shown(rows).as_deref(), Some(want), "{sql}");
    }
    // The same columns as the server's own answer.
    let ours = c
        .query_iter("SELECT @@query_cache_type")
        .await
        .unwrap()
        .columns();
    let theirs = d
        .query_iter("SELECT @@query_cache_type")
        .await
        .unwrap()
        .columns();
    let meta = |cols: Option<std::sync::Arc<[mysql_async::Column]>>| {
        cols.unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{:?} {:?} {} {:?}",
                    c.name_str(),
                    c.column_type(),
                    c.column_length(),
                    c.flags()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(meta(ours), meta(theirs));
    proxy.shutdown().await;
}

/// `Compression` in session status is the client leg's: a compressed client behind an
/// uncompressed upstream leg sees ON, an uncompressed one behind a compressed leg OFF.
#[tokio::test]
async fn compression_status_describes_the_clients_leg() {
    use qcache::config::UpstreamCompression;
    for (client, upstream) in [
        (true, UpstreamCompression::Off),
        (false, UpstreamCompression::Zlib),
    ] {
        let proxy = common::proxy(|c| c.compression.upstream = upstream).await;
        let d = common::db();
        let mut b = mysql_async::OptsBuilder::default()
            .ip_or_hostname(proxy.addr.ip().to_string())
            .tcp_port(proxy.addr.port())
            .user(Some(d.user.clone()))
            .pass(Some(d.password.clone()))
            .prefer_socket(false);
        if client {
            b = b.compression(mysql_async::Compression::default());
        }
        let mut c = Conn::new(b).await.unwrap();
        let row: Option<(String, String)> = c
            .query_first("SHOW SESSION STATUS LIKE 'Compression'")
            .await
            .unwrap();
        let want = if client { "ON" } else { "OFF" };
        assert_eq!(
            row.map(|r| r.1).as_deref(),
            Some(want),
            "client compressed: {client}"
        );
        c.disconnect().await.unwrap();
        proxy.shutdown().await;
    }
}

/// How many statements qcache itself sends on a client's upstream connection for a session
/// that connects and reads (docs/reliability.md, "What qcache sends on a client's
/// connection"): the read-back of the key's settings and the account (a SELECT), and, when
/// the client's first statement is not a cacheable read (mysql_async's is `SELECT @@…`),
/// the `DO 0` that puts `ROW_COUNT()` back.
const PRIVATE_STATEMENTS: u64 = 2;
const PRIVATE_SELECTS: u64 = 1;
const PRIVATE_DOS: u64 = 1;
/// Queries of an account's MAX_QUERIES_PER_HOUR that a session through qcache spends on
/// statements of its own: measured 3 (the two above and one more not yet accounted for).
const PRIVATE_QUOTA: usize = 3;

/// A session status counter as the server reports it for this connection.
async fn session_status(c: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, String)> = c
        .query_first(format!("SHOW SESSION STATUS LIKE '{name}'"))
        .await
        .unwrap();
    row.unwrap_or_else(|| panic!("{name}")).1.parse().unwrap()
}

/// Issue #35, class 12: what qcache sends on the client's own connection shows in its
/// session status and counts against its account's MAX_QUERIES_PER_HOUR. A session that
/// connects, reads and asks for its status differs from a direct one by at most
/// PRIVATE_STATEMENTS in `Questions` (PRIVATE_SELECTS in `Com_select`, PRIVATE_DOS in
/// `Com_do`), and an account
/// limited to 12 queries an hour runs as many reads through qcache as directly, less at most
/// PRIVATE_QUOTA. Before: 3 more Questions, 2 more Com_select, 1 more Com_do at the first
/// read (the read-back, its FOUND_ROWS() restorer and `DO 0`, then the account's identity).
#[tokio::test]
async fn what_qcache_sends_on_a_clients_connection_is_bounded() {
    let schema = common::fresh_schema("diag_private").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2), (3)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    // The first session of a process also probes which optional variables the server has.
    // A statement's answer comes after the connect's read-back (and the probe) landed: a
    // session dropped before that would leave the probe to the next one, counted below.
    let mut first = proxy.conn(&schema).await;
    first.query_drop("DO 0").await.unwrap();
    drop(first);
    let mut counts = Vec::new();
    for via_proxy in [false, true] {
        let mut c = if via_proxy {
            proxy.conn(&schema).await
        } else {
            common::direct_to(&schema).await
        };
        let rows: Vec<i64> = c
            .query(format!(
                "SELECT id FROM t WHERE id > {} ORDER BY id",
                i64::from(via_proxy)
            ))
            .await
            .unwrap();
        assert!(!rows.is_empty());
        let mut n = Vec::new();
        for name in ["Com_select", "Com_do", "Questions"] {
            n.push(session_status(&mut c, name).await);
        }
        counts.push(n);
    }
    let (direct, via) = (&counts[0], &counts[1]);
    println!("Com_select, Com_do, Questions: directly {direct:?}, through qcache {via:?}");
    assert!(
        via[0] <= direct[0] + PRIVATE_SELECTS,
        "Com_select {via:?} vs {direct:?}"
    );
    assert!(
        via[1] <= direct[1] + PRIVATE_DOS,
        "Com_do {via:?} vs {direct:?}"
    );
    assert!(
        via[2] <= direct[2] + PRIVATE_STATEMENTS,
        "Questions {via:?} vs {direct:?}"
    );

    // MAX_QUERIES_PER_HOUR: distinct reads (so none is a hit) until the server refuses.
    let mut admin = common::direct().await;
    let mut ran = Vec::new();
    for via_proxy in [false, true] {
        let user = common::unique_name("mq");
        admin
            .query_drop(format!(
                "CREATE USER '{user}'@'%' IDENTIFIED BY 'pw' WITH MAX_QUERIES_PER_HOUR 12"
            ))
            .await
            .unwrap();
        admin
            .query_drop(format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"))
            .await
            .unwrap();
        let addr = if via_proxy {
            proxy.addr_string()
        } else {
            common::db().addr()
        };
        let url = format!("mysql://{user}:pw@{addr}/{schema}?prefer_socket=false");
        let mut c = mysql_async::Conn::from_url(url).await.unwrap();
        let mut ok = 0;
        for i in 0..40 {
            match c
                .query_drop(format!("SELECT id FROM t WHERE id > {i} - 100"))
                .await
            {
                Ok(()) => ok += 1,
                Err(mysql_async::Error::Server(e)) => {
                    assert_eq!(e.code, 1226, "{e:?}");
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        ran.push(ok);
    }
    println!(
        "reads before ERROR 1226: directly {}, through qcache {}",
        ran[0], ran[1]
    );
    assert!(ran[0] < 40, "the limit was never reached");
    assert!(
        ran[1] + PRIVATE_QUOTA >= ran[0],
        "through qcache {} reads, directly {}",
        ran[1],
        ran[0]
    );
}

/// Adversary round 10: `SELECT @@query_cache_type` reports the session's value through the
/// text protocol (qcache answers it); a driver that prepares every statement (the binary
/// protocol) must read the same value, not the server's own variable.
#[tokio::test]
async fn query_cache_type_reads_the_same_prepared() {
    let proxy =
        common::proxy(|c| c.cache.query_cache_type = qcache::config::QueryCacheType::On).await;
    let mut c = proxy.conn("").await;
    c.query_drop("SET SESSION query_cache_type = DEMAND")
        .await
        .unwrap();
    for sql in [
        "SELECT @@query_cache_type",
        "SELECT @@session.query_cache_type",
    ] {
        let text: Option<String> = c.query_first(sql).await.unwrap();
        assert_eq!(text.as_deref(), Some("DEMAND"), "{sql}");
        let prepared: Option<String> = c.exec_first(sql, ()).await.unwrap();
        assert_eq!(prepared, text, "{sql}: prepared (left), text (right)");
    }
    // Beside columns of other types, one of them NULL.
    type Mixed = (i64, Option<String>, String, Option<i64>);
    let sql = "SELECT 7 AS n, NULL AS z, @@query_cache_type AS q, 8 AS m";
    let text: Option<Mixed> = c.query_first(sql).await.unwrap();
    let prepared: Option<Mixed> = c.exec_first(sql, ()).await.unwrap();
    assert_eq!(prepared, text, "{sql}: prepared (left), text (right)");
    assert_eq!(text.map(|t| t.2).as_deref(), Some("DEMAND"));
    proxy.shutdown().await;
}

/// Issue #38 (writes at the server's speed) and #35 class 12: a transaction that opens with a
/// write costs no private statement. qcache answers a plain BEGIN itself and sends it ahead
/// of the first statement that needs it; that OK owes the server `ROW_COUNT()` 0, which the
/// server's own BEGIN sets, so no `DO 0` goes before it. Before: one `DO 0` (a round trip
/// on the client's connection, and one more `Com_do` and `Questions`) per transaction.
#[tokio::test]
async fn a_transaction_opened_by_a_write_costs_no_private_statement() {
    let schema = common::fresh_schema("diag_begin").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL)",
            "INSERT INTO t VALUES (1, 0), (2, 0)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut deltas = Vec::new();
    for via_proxy in [false, true] {
        let mut c = if via_proxy {
            proxy.conn(&schema).await
        } else {
            common::direct_to(&schema).await
        };
        // The connect's own private statements land before the first count.
        c.query_drop("SELECT n FROM t WHERE id = 1").await.unwrap();
        let mut before = Vec::new();
        for name in ["Com_do", "Questions"] {
            before.push(session_status(&mut c, name).await);
        }
        for i in 0..3 {
            c.query_drop("BEGIN").await.unwrap();
            c.query_drop(format!("UPDATE t SET n = n + {} WHERE id = 1", i + 1))
                .await
                .unwrap();
            let rc: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
            assert_eq!(rc, Some(1), "ROW_COUNT() after the UPDATE");
            c.query_drop("COMMIT").await.unwrap();
        }
        let mut d = Vec::new();
        for (name, b) in ["Com_do", "Questions"].into_iter().zip(before) {
            d.push(session_status(&mut c, name).await - b);
        }
        deltas.push(d);
    }
    let (direct, via) = (&deltas[0], &deltas[1]);
    println!(
        "Com_do, Questions over three transactions: directly {direct:?}, through qcache {via:?}"
    );
    assert_eq!(via[0], direct[0], "Com_do: {via:?} vs {direct:?}");
    assert!(via[1] <= direct[1], "Questions: {via:?} vs {direct:?}");
}
