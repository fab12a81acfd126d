//! Adversarial round 4: `QCACHE EXPLAIN STATEMENT` against what the execute then does
//! (`SHOW QCACHE LAST`), around a session context a trigger made stale; and an execute
//! opening a cursor on a read of a writing stored function (the differential harness's
//! client cannot open cursors); and after stored code made a temporary table.

mod common;
mod rawclient;
use common::setup;

use qcache::protocol::packets::com;
use qcache::protocol::response::Expect;
use rawclient::Raw;

use std::collections::HashMap;

use mysql_async::prelude::*;
use mysql_async::Conn;

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

/// What EXPLAIN STATEMENT says the next execute does, and what it did.
async fn explain_then_execute(c: &mut Conn, st: &mysql_async::Statement) -> (String, String) {
    let ex = fields(c, &format!("QCACHE EXPLAIN STATEMENT {}", st.id())).await;
    let said = format!("{} {}", field(&ex, "decision"), field(&ex, "reason"));
    let _: Vec<i64> = c.exec(st, ()).await.unwrap();
    let last = fields(c, "SHOW QCACHE LAST").await;
    let did = format!("{} {}", field(&last, "outcome"), field(&last, "reason"));
    (said, did)
}

fn agrees(said: &str, did: &str) -> bool {
    let reason = |s: &str| s.split_whitespace().nth(1).map(str::to_string);
    match said.split_whitespace().next() {
        Some("hit") => did.starts_with("hit"),
        Some("store") => did.starts_with("miss-stored"),
        Some("send") => did.starts_with("miss-not-stored") && reason(said) == reason(did),
        _ => false,
    }
}

/// A trigger SETs sql_select_limit in the session (its context is stale until the next
/// admitted read re-reads it). EXPLAIN STATEMENT of a statement prepared before must name
/// what the execute then does.
/// (EXPLAIN once judged the context move before reading the stale context back, and said
/// `store` where the execute was `prepared_context_moved`.)
#[tokio::test]
async fn explain_statement_after_a_trigger_set_agrees_with_the_execute() {
    let schema = common::fresh_schema("adv4_ex").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2), (3)",
            "CREATE TABLE log (n INT)",
            "CREATE TRIGGER tr AFTER INSERT ON log FOR EACH ROW SET sql_select_limit = 1",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let st = c.prep("SELECT id FROM t WHERE id > 0").await.unwrap();
    let _: Vec<i64> = c.exec(&st, ()).await.unwrap();
    let (said, did) = explain_then_execute(&mut c, &st).await;
    assert!(
        agrees(&said, &did),
        "before the trigger: said {said}, did {did}"
    );
    c.query_drop("INSERT INTO log VALUES (1)").await.unwrap();
    let (said, did) = explain_then_execute(&mut c, &st).await;
    assert!(
        agrees(&said, &did),
        "after the trigger: said {said}, did {did}"
    );
    proxy.shutdown().await;
}

/// A prepared `SELECT bump_t(?)` (a stored function that UPDATEs t) executed with a cursor
/// (CURSOR_TYPE_READ_ONLY) in a plain session: `read::keyable` refuses the key (Cursor) and
/// the execute is relayed. What the function wrote must still invalidate another session's
/// entry of t. The writer runs with sql_log_bin=0, so the binlog tail cannot do it.
/// (The reader was once served v = 10 after the function made it 11: a key-less execute
/// was relayed without planning what it may write.)
#[tokio::test]
async fn cursor_execute_of_a_writing_function_invalidates() {
    let schema = common::fresh_schema("adv4_cur").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
            "CREATE FUNCTION bump_t(n INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE t SET v = v + n WHERE id = 1; RETURN n; END",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut reader = proxy.conn(&schema).await;
    let read = "SELECT v FROM t WHERE id = 1";
    let v: Option<i64> = reader.query_first(read).await.unwrap();
    assert_eq!(v, Some(10));
    let v: Option<i64> = reader.query_first(read).await.unwrap();
    assert_eq!(v, Some(10));
    let mut w = Raw::connect(&proxy.addr_string(), "root", &schema, false).await;
    let (_, r) = w.query("SET SESSION sql_log_bin = 0").await;
    assert!(!r.error);
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(b"SELECT bump_t(1)");
    let (_, resp) = w.command(&p, Expect::Prepare).await;
    let (id, _, _) = resp.prepared.expect("prepared");
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(1); // CURSOR_TYPE_READ_ONLY
    e.extend_from_slice(&1u32.to_le_bytes());
    let (pk, resp) = w.command(&e, Expect::Results).await;
    assert!(!resp.error, "{pk:?}");
    let mut f = vec![com::STMT_FETCH];
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&10u32.to_le_bytes());
    let (_, rows) = w.command(&f, Expect::Rows).await;
    assert_eq!(rows.rows, 1);
    let mut direct = common::direct_to(&schema).await;
    let truth: Option<i64> = direct.query_first(read).await.unwrap();
    assert_eq!(truth, Some(11), "the function ran");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let v: Option<i64> = reader.query_first(read).await.unwrap();
    assert_eq!(
        v, truth,
        "the reader was served the entry from before the write"
    );
    proxy.shutdown().await;
}

/// A stored function creates a temporary table named like a base table (#35): EXPLAIN,
/// text and STATEMENT, says the session's reads of that name are sent, as the read and the
/// execute then do.
#[tokio::test]
async fn explain_after_stored_code_made_a_temporary_table_agrees() {
    let schema = common::fresh_schema("adv4_tmp").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            "CREATE FUNCTION mk() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN \
             CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT); INSERT INTO t VALUES (7); \
             RETURN 1; END",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let read = "SELECT id FROM t WHERE id > 0";
    let st = c.prep(read).await.unwrap();
    let _: Vec<i64> = c.exec(&st, ()).await.unwrap();
    let (said, did) = explain_then_execute(&mut c, &st).await;
    assert!(
        said.starts_with("hit") && agrees(&said, &did),
        "before: said {said}, did {did}"
    );
    let _: Vec<i64> = c.query("SELECT mk()").await.unwrap();
    let (said, did) = explain_then_execute(&mut c, &st).await;
    assert!(
        said.starts_with("send") && agrees(&said, &did),
        "after, prepared: said {said}, did {did}"
    );
    let ex = fields(&mut c, &format!("QCACHE EXPLAIN {read}")).await;
    let said = format!("{} {}", field(&ex, "decision"), field(&ex, "reason"));
    let rows: Vec<i64> = c.query(read).await.unwrap();
    assert_eq!(rows, vec![7], "the session's own temporary table");
    let last = fields(&mut c, "SHOW QCACHE LAST").await;
    let did = format!("{} {}", field(&last, "outcome"), field(&last, "reason"));
    assert!(
        said.starts_with("send") && agrees(&said, &did),
        "after, text: said {said}, did {did}"
    );
}
