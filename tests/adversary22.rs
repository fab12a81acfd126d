//! Adversary round 22: what the scenario format cannot say, compared byte for byte with the
//! server: clients that track session state (CLIENT_SESSION_TRACK, which mysql_async does
//! not ask for) and clients that pipeline commands.

mod common;
mod rawclient;

use qcache::protocol::packets::cap;
use rawclient::Raw;

/// Runs `steps` on a connection through `proxy` and one straight to the server (both
/// asking for `extra` capabilities), in `schema`; returns each step whose answer's bytes
/// differ, with both answers.
async fn wire_differences(
    proxy: &common::TestProxy,
    schema: &str,
    extra: u32,
    steps: &[&str],
) -> Vec<String> {
    let mut via = Raw::connect_with_caps(&proxy.addr_string(), "root", schema, extra).await;
    let mut direct = Raw::connect_with_caps(&common::db().addr(), "root", schema, extra).await;
    let mut out = Vec::new();
    for (i, sql) in steps.iter().enumerate() {
        let (p, _) = via.query(sql).await;
        let (d, _) = direct.query(sql).await;
        let (p, d) = (Raw::wire(&p), Raw::wire(&d));
        if p != d {
            out.push(format!(
                "step {i} `{sql}`:\n  qcache {:?}\n  server {:?}",
                String::from_utf8_lossy(&p),
                String::from_utf8_lossy(&d)
            ));
        }
    }
    out
}

/// A client tracking its transaction state: the server reports the first read of a
/// transaction in that read's final OK (SESSION_STATE_CHANGED and the state's bytes); a
/// hit must say what the server would have said.
#[tokio::test]
async fn session_track_transaction_state_after_a_hit() {
    let schema = common::fresh_schema("a22_track").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let q = "SELECT v FROM t WHERE id = 1";
    for setting in ["STATE", "CHARACTERISTICS"] {
        let set = format!("SET SESSION session_track_transaction_info = '{setting}'");
        let steps = [
            set.as_str(),
            q,
            q,
            "BEGIN",
            q,
            q,
            "COMMIT",
            "START TRANSACTION READ ONLY",
            q,
            "COMMIT",
            "SET autocommit = 0",
            q,
            q,
            "COMMIT",
            q,
            "SET autocommit = 1",
            q,
        ];
        let hits = proxy.running.shared.cache.stats().hits();
        let diffs = wire_differences(&proxy, &schema, cap::SESSION_TRACK, &steps).await;
        assert!(
            proxy.running.shared.cache.stats().hits() > hits,
            "{setting}: nothing was served from the cache"
        );
        assert!(diffs.is_empty(), "{setting}:\n{}", diffs.join("\n"));
    }
}

/// Sends every statement of `steps` before reading any answer (a pipelining client), on a
/// connection through `proxy` and one straight to the server; returns the answers whose
/// bytes differ.
async fn pipelined_differences(
    proxy: &common::TestProxy,
    schema: &str,
    steps: &[&str],
) -> Vec<String> {
    use qcache::protocol::packets::com;
    use qcache::protocol::response::Expect;
    let mut out = Vec::new();
    let mut answers: Vec<Vec<Vec<u8>>> = Vec::new();
    for addr in [proxy.addr_string(), common::db().addr()] {
        let mut c = Raw::connect(&addr, "root", schema, true).await;
        for sql in steps {
            let mut p = vec![com::QUERY];
            p.extend_from_slice(sql.as_bytes());
            c.send(0, &p).await;
        }
        let mut got = Vec::new();
        for _ in steps {
            let (p, _) = c.response(Expect::Results).await;
            got.push(Raw::wire(&p));
        }
        answers.push(got);
    }
    for (i, sql) in steps.iter().enumerate() {
        if answers[0][i] != answers[1][i] {
            out.push(format!(
                "step {i} `{sql}`:\n  qcache {:?}\n  server {:?}",
                String::from_utf8_lossy(&answers[0][i]),
                String::from_utf8_lossy(&answers[1][i])
            ));
        }
    }
    out
}

/// A client that sends its statements before reading the answers: hits served in the
/// command loop between statements that read or put right the diagnostics, writes that
/// invalidate, and a session setting, all answered as the server answers them in order.
#[tokio::test]
async fn pipelined_statements_around_hits() {
    let schema = common::fresh_schema("a22_pipe").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
        ],
    )
    .await;
    let proxy = common::proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::Off).await;
    let q = "SELECT id, v FROM t ORDER BY id";
    // Filled once, so that the pipelined run's reads are hits from its first.
    let mut warm = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    warm.query(q).await;
    let steps = [
        q,
        "SELECT FOUND_ROWS(), ROW_COUNT()",
        "DO 1/0",
        q,
        "SHOW WARNINGS",
        "SELECT @@warning_count",
        "DO 1/0",
        q,
        "SHOW STATUS LIKE 'Last_query_cost'",
        q,
        "UPDATE t SET v = v + 1 WHERE id = 2",
        q,
        q,
        "SET sql_select_limit = 1",
        q,
        q,
        "SELECT FOUND_ROWS()",
        "SET sql_select_limit = DEFAULT",
        "UPDATE t SET v = v - 1 WHERE id = 2",
        q,
        q,
        "SELECT ROW_COUNT()",
    ];
    let hits = proxy.running.shared.cache.stats().hits();
    let diffs = pipelined_differences(&proxy, &schema, &steps).await;
    assert!(
        proxy.running.shared.cache.stats().hits() > hits,
        "nothing was served from the cache"
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
