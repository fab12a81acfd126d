//! Issue #35: a read that may give a TIME value the session's date (which the server takes
//! from the session's clock) is not cached, on every path that plans a read: text,
//! `QCACHE EXPLAIN` (and `EXPLAIN STATEMENT`), and executes whose parameter values are or may be dates (the
//! differential harness's executes carry no parameters). Plain reads of the TIME column
//! stay cached.

mod common;
use common::setup;

use std::collections::HashMap;

use mysql_async::prelude::*;
use mysql_async::{Conn, Value};

/// `SHOW QCACHE LAST` as `outcome reason`.
async fn last(c: &mut Conn) -> String {
    let rows: Vec<(String, Option<String>)> = c.query("SHOW QCACHE LAST").await.unwrap();
    let f: HashMap<String, Option<String>> = rows.into_iter().collect();
    let get = |k: &str| f.get(k).cloned().flatten().unwrap_or_default();
    format!("{} {}", get("outcome"), get("reason"))
        .trim()
        .to_string()
}

/// `Qcache_not_cached_time_with_date` from `SHOW QCACHE STATUS` (absent until counted).
async fn refused_count(c: &mut Conn) -> u64 {
    let rows: Vec<(String, String)> = c.query("SHOW QCACHE STATUS").await.unwrap();
    rows.iter()
        .find(|(k, _)| k == "Qcache_not_cached_time_with_date")
        .map_or(0, |(_, v)| v.parse().unwrap())
}

const REFUSED: &str = "miss-not-stored time_with_date";

#[tokio::test]
async fn a_time_read_as_a_date_is_not_cached_on_any_path() {
    let schema = common::fresh_schema("timecol").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, tm TIME, dt DATETIME)",
            "INSERT INTO t VALUES (1, '10:00:00', '2020-01-01 10:00:00')",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;

    // Text reads, and QCACHE EXPLAIN of them.
    for sql in [
        "SELECT CAST(tm AS DATETIME) FROM t",
        "SELECT id FROM t WHERE tm < dt",
        "SELECT id FROM t WHERE tm = '2020-01-01 10:00:00'",
        "SELECT tm FROM t UNION SELECT dt FROM t",
    ] {
        let ex: Vec<(String, Option<String>)> =
            c.query(format!("QCACHE EXPLAIN {sql}")).await.unwrap();
        assert!(
            ex.iter()
                .any(|(_, v)| v.as_deref().is_some_and(|v| v.contains("time_with_date"))),
            "{sql}: {ex:?}"
        );
        let before = refused_count(&mut c).await;
        for round in 0..2 {
            c.query_drop(sql).await.unwrap();
            assert_eq!(last(&mut c).await, REFUSED, "{sql} ({round})");
        }
        let after = refused_count(&mut c).await;
        assert_eq!(after, before + 2, "{sql}");
    }
    for sql in [
        "SELECT tm FROM t WHERE id = 1",
        "SELECT id FROM t WHERE tm > '09:00:00'",
    ] {
        c.query_drop(sql).await.unwrap();
        c.query_drop(sql).await.unwrap();
        assert_eq!(last(&mut c).await, "hit", "{sql}");
    }

    // Executes: the values decide. (statement, value, the second execute's outcome)
    let rows: Vec<(&str, Value, &str)> = vec![
        (
            "SELECT id FROM t WHERE tm = ?",
            Value::from("10:00:00"),
            "hit",
        ),
        (
            "SELECT id FROM t WHERE tm = ?",
            Value::from("2020-01-01 10:00:00"),
            REFUSED,
        ),
        (
            "SELECT id FROM t WHERE tm = ?",
            Value::Date(2020, 1, 1, 10, 0, 0, 0),
            REFUSED,
        ),
        ("SELECT tm FROM t WHERE id = ?", Value::Int(1), "hit"),
        (
            "SELECT id, DATE(tm) FROM t WHERE id = ?",
            Value::Int(1),
            REFUSED,
        ),
    ];
    for (sql, value, want) in rows {
        let st = c.prep(sql).await.unwrap();
        c.exec_drop(&st, vec![value.clone()]).await.unwrap();
        // EXPLAIN STATEMENT judges the parameters its last execute bound as the execute does.
        let ex: Vec<(String, Option<String>)> = c
            .query(format!("QCACHE EXPLAIN STATEMENT {}", st.id()))
            .await
            .unwrap();
        let ex: HashMap<String, Option<String>> = ex.into_iter().collect();
        let said = format!(
            "{} {}",
            ex.get("decision").cloned().flatten().unwrap_or_default(),
            ex.get("reason").cloned().flatten().unwrap_or_default()
        );
        let agrees = match want {
            "hit" => said.starts_with("hit"),
            _ => said.contains("time_with_date"),
        };
        assert!(agrees, "{sql} with {value:?}: EXPLAIN said {said}");
        c.exec_drop(&st, vec![value.clone()]).await.unwrap();
        assert_eq!(last(&mut c).await, want, "{sql} with {value:?}");
    }
}

/// Issue #35 (adversary round 17): a TIME-typed parameter (the binary protocol's
/// MYSQL_TYPE_TIME, which `Value::Time` sends) compared with a DATETIME column takes the
/// session's current date, as a TIME column does; the table has no TIME column. A writer
/// whose clock a trigger moved (unseen) got another session's cached rows.
#[tokio::test]
async fn a_time_parameter_met_by_a_datetime_is_not_cached() {
    let schema = common::fresh_schema("timeparam").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, dt DATETIME)",
            "INSERT INTO t VALUES (1, '2020-01-01 10:00:00'), (2, '2030-01-01 10:00:00')",
            "CREATE TABLE log (n INT)",
            // 2019-01-01 00:00:00 UTC: before both rows' dates.
            "CREATE TRIGGER tr BEFORE INSERT ON log FOR EACH ROW \
             IF NEW.n = 2 THEN SET @@session.timestamp = 1546300800; END IF",
        ],
    )
    .await;
    let sql = "SELECT id FROM t WHERE dt < ? ORDER BY id";
    let ten = Value::Time(false, 0, 10, 0, 0, 0);
    // What the server answers a session whose clock the trigger moved.
    let mut direct = common::direct_to(&schema).await;
    direct
        .query_drop("INSERT INTO log VALUES (2)")
        .await
        .unwrap();
    let want: Vec<i32> = direct.exec(sql, (ten.clone(),)).await.unwrap();

    let proxy = common::proxy(|_| {}).await;
    let mut other = proxy.conn(&schema).await;
    let first: Vec<i32> = other.exec(sql, (ten.clone(),)).await.unwrap();
    let again: Vec<i32> = other.exec(sql, (ten.clone(),)).await.unwrap();
    assert_eq!(first, again);
    let mut writer = proxy.conn(&schema).await;
    writer
        .query_drop("INSERT INTO log VALUES (2)")
        .await
        .unwrap();
    let got: Vec<i32> = writer.exec(sql, (ten.clone(),)).await.unwrap();
    assert_eq!(got, want, "the writer's clock decides the TIME's date");
    assert_eq!(last(&mut writer).await, REFUSED);

    // Values known to be no TIME stay cached: a DATETIME, a string.
    for v in [
        Value::Date(2025, 1, 1, 0, 0, 0, 0),
        Value::from("2025-01-01"),
    ] {
        other.exec_drop(sql, (v.clone(),)).await.unwrap();
        other.exec_drop(sql, (v.clone(),)).await.unwrap();
        assert_eq!(last(&mut other).await, "hit", "{v:?}");
    }
}
