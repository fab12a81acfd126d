//! Adversarial round 14 (issue #35 classes 7, 8, 9, 10, 12): what a client sees through
//! qcache against what the server alone would show or do.

mod common;
use common::setup;

use mysql_async::prelude::*;
use mysql_async::Conn;

/// `QCACHE EXPLAIN` never runs the statement it explains. The privilege check it makes
/// first (`EXPLAIN <statement>` on the session's connection) must not run anything either:
/// a multi-statement text after the SELECT (`SELECT 1; DELETE FROM t`) is a second
/// statement the server would run, as the session's user, unseen by the cache.
#[tokio::test]
async fn qcache_explain_runs_nothing_after_the_select() {
    let schema = common::fresh_schema("adv14_exms").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let before: Vec<i64> = c.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(before, vec![1, 2]);
    let explained = c
        .query_iter("QCACHE EXPLAIN SELECT 1; DELETE FROM t")
        .await
        .map(|_| ());
    println!("QCACHE EXPLAIN answered {explained:?}");
    drop(explained);
    let mut direct = common::direct_to(&schema).await;
    let on_server: Vec<i64> = direct.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(on_server, vec![1, 2], "QCACHE EXPLAIN ran the DELETE");
    // And the session goes on in step.
    let got: Vec<i64> = c.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(got, on_server);
    drop(c);
    proxy.shutdown().await;
}

/// What a session holds after `QCACHE EXPLAIN <read>`, as a row of text: its user variable,
/// LAST_INSERT_ID(), a sequence's next value, the advisory lock.
async fn session_marks(c: &mut Conn) -> String {
    let row: Vec<mysql_async::Row> = c
        .query("SELECT @x, LAST_INSERT_ID(), IS_USED_LOCK('adv14_lock') IS NOT NULL, @@sql_select_limit")
        .await
        .unwrap();
    format!(
        "{:?}",
        row[0]
            .clone()
            .unwrap()
            .into_iter()
            .map(|v| v.as_sql(true))
            .collect::<Vec<_>>()
    )
}

/// `QCACHE EXPLAIN` of a read with effects in its select list (an assignment, LAST_INSERT_ID(n),
/// GET_LOCK, NEXTVAL): qcache answers it without running the read, so the session must hold
/// afterwards what it held before (as a server that never saw the statement would).
#[tokio::test]
async fn qcache_explain_leaves_the_session_as_it_was() {
    let schema = common::fresh_schema("adv14_exfx").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            "CREATE SEQUENCE s",
            "CREATE TABLE log (n INT)",
            "CREATE FUNCTION f() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN INSERT INTO log VALUES (1); RETURN 1; END",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let before = session_marks(&mut c).await;
    let mut out = Vec::new();
    for read in [
        "SELECT @x := 5 FROM t WHERE id = 1",
        "SELECT LAST_INSERT_ID(7) FROM t WHERE id = 1",
        "SELECT GET_LOCK('adv14_lock', 0) FROM t WHERE id = 1",
        "SELECT NEXTVAL(s)",
        "SELECT id FROM t WHERE id = (SELECT @x := 9)",
        "SELECT id FROM t WHERE id = LAST_INSERT_ID(8)",
        "SELECT id FROM t WHERE id = (SELECT f())",
    ] {
        let r = c.query_drop(format!("QCACHE EXPLAIN {read}")).await;
        let after = session_marks(&mut c).await;
        out.push(format!("{read}: {r:?} -> {after}"));
    }
    let mut direct = common::direct_to(&schema).await;
    let next: Option<i64> = direct.query_first("SELECT NEXTVAL(s)").await.unwrap();
    out.push(format!("next value directly: {next:?}"));
    let logged: Option<i64> = direct
        .query_first("SELECT COUNT(*) FROM log")
        .await
        .unwrap();
    assert_eq!(logged, Some(0), "QCACHE EXPLAIN ran the function's INSERT");
    println!("{before}\n{}", out.join("\n"));
    for line in &out[..out.len() - 1] {
        println!("{line}");
        assert!(line.ends_with(&before), "{line}\nbefore: {before}");
    }
    assert_eq!(next, Some(1), "QCACHE EXPLAIN took a sequence value");
    drop(c);
    proxy.shutdown().await;
}
