//! Adversarial round 4: `QCACHE EXPLAIN STATEMENT` against what the execute then does
//! (`SHOW QCACHE LAST`), around a session context a trigger made stale.

mod common;
use common::setup;

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
///
/// FAILS (ignored so the suite stays green): after the trigger EXPLAIN STATEMENT says
/// `store` ("stored unless the result has warnings, …"), and the execute right after is
/// `miss-not-stored prepared_context_moved`. `explain_statement` (src/session/explain.rs)
/// computes `Execute::context_moved` from `self.st.prepare_ctx` *before* `explain_read`
/// calls `identify_for`, whose `reread_stale_context` moves `prepare_ctx` (sql_select_limit
/// is now set); `execute_select` computes it after `identify_for`. Run with `--run-ignored all`.
#[tokio::test]
#[ignore = "diverges: EXPLAIN STATEMENT judges the context move before re-reading a stale context"]
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
    assert!(agrees(&said, &did), "before the trigger: said {said}, did {did}");
    c.query_drop("INSERT INTO log VALUES (1)").await.unwrap();
    let (said, did) = explain_then_execute(&mut c, &st).await;
    assert!(agrees(&said, &did), "after the trigger: said {said}, did {did}");
    proxy.shutdown().await;
}
