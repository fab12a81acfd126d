//! Issue #17 sections 2 and 3 through the real proxy: a transaction's snapshot is taken
//! where the server may have opened its read view (whatever statement that was), and the
//! key holds the session context the server has, not the text of a SET.
//!
//! Each test runs the same steps through qcache and straight against the server and
//! compares what a later reader sees, so it fails the way a client would notice.

mod common;

use mysql_async::prelude::*;
use mysql_async::Conn;

async fn setup(schema: &str, sql: &[&str]) {
    let mut d = common::direct_to(schema).await;
    for s in sql {
        d.query_drop(*s)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// Every row as text, or the error's code.
async fn rows(c: &mut Conn, q: &str) -> Result<Vec<Vec<Option<String>>>, u16> {
    match c.query::<mysql_async::Row, _>(q).await {
        Ok(rs) => Ok(rs
            .into_iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| match r.as_ref(i) {
                        Some(mysql_async::Value::NULL) | None => None,
                        Some(mysql_async::Value::Bytes(b)) => {
                            Some(String::from_utf8_lossy(b).into_owned())
                        }
                        Some(v) => Some(v.as_sql(true)),
                    })
                    .collect()
            })
            .collect()),
        Err(mysql_async::Error::Server(e)) => Err(e.code),
        Err(e) => panic!("{q}: {e}"),
    }
}

/// One step of a two-reader scenario: which connection, and the statement.
type Step<'a> = (usize, &'a str);

/// Runs `steps` on three connections through qcache, then the same on three direct
/// connections, and compares every answer.
async fn differential(schema_prefix: &str, init: &[&str], steps: &[Step<'_>]) {
    let mut answers = Vec::new();
    let proxy = common::proxy(|_| {}).await;
    for through in [false, true] {
        let schema = common::fresh_schema(schema_prefix).await;
        setup(&schema, init).await;
        let mut conns = Vec::new();
        for _ in 0..3 {
            conns.push(if through {
                proxy.conn(&schema).await
            } else {
                common::direct_to(&schema).await
            });
        }
        let mut got = Vec::new();
        for (i, q) in steps {
            // CHECKSUM TABLE names the table with its (per-run) schema.
            let r = rows(&mut conns[*i], q).await.map(|rs| {
                rs.into_iter()
                    .map(|r| {
                        r.into_iter()
                            .map(|v| v.map(|v| v.replace(&schema, "{db}")))
                            .collect()
                    })
                    .collect::<Vec<Vec<_>>>()
            });
            got.push(r);
        }
        answers.push(got);
    }
    for (n, (d, p)) in answers[0].iter().zip(&answers[1]).enumerate() {
        assert_eq!(d, p, "step {n} ({:?}): direct vs through qcache", steps[n]);
    }
    proxy.shutdown().await;
}

const TABLE: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
    "INSERT INTO t VALUES (1, 1)",
];

/// A read view opened by a statement qcache does not take for a read, then a write through
/// qcache by another session, then a read in the old view: that result is the old
/// snapshot's and must never become a current entry for everyone.
async fn opened_by(prefix: &str, begin: &str, openers: &[&str]) {
    let mut steps: Vec<Step> = vec![(0, begin)];
    steps.extend(openers.iter().map(|o| (0, *o)));
    steps.extend_from_slice(&[
        (1, "UPDATE t SET v = 2 WHERE id = 1"),
        (0, "SELECT v FROM t WHERE id = 1"),
        (0, "SELECT v FROM t WHERE id = 1"),
        (0, "COMMIT"),
        (2, "SELECT v FROM t WHERE id = 1"),
        (2, "SELECT v FROM t WHERE id = 1"),
        (0, "SELECT v FROM t WHERE id = 1"),
    ]);
    differential(prefix, TABLE, &steps).await;
}

#[tokio::test]
async fn read_view_opened_by_checksum_table() {
    opened_by("snap_checksum", "BEGIN", &["CHECKSUM TABLE t"]).await;
}

#[tokio::test]
async fn read_view_opened_by_handler_read() {
    opened_by(
        "snap_handler",
        "BEGIN",
        &["HANDLER t OPEN", "HANDLER t READ `PRIMARY` FIRST"],
    )
    .await;
}

#[tokio::test]
async fn read_view_opened_by_analyze_select() {
    opened_by("snap_analyze", "BEGIN", &["ANALYZE SELECT * FROM t"]).await;
}

#[tokio::test]
async fn read_view_opened_by_consistent_snapshot_spelled_oddly() {
    opened_by(
        "snap_consistent",
        "START TRANSACTION WITH /* c */ CONSISTENT\n  SNAPSHOT",
        &["DO 0"],
    )
    .await;
}

#[tokio::test]
async fn read_view_opened_under_autocommit_0() {
    opened_by("snap_ac0", "SET autocommit = 0", &["CHECKSUM TABLE t"]).await;
}

#[tokio::test]
async fn read_view_opened_by_xa_start_and_checksum() {
    differential(
        "snap_xa",
        TABLE,
        &[
            (0, "XA START 'x1'"),
            (0, "CHECKSUM TABLE t"),
            (1, "UPDATE t SET v = 2 WHERE id = 1"),
            (0, "SELECT v FROM t WHERE id = 1"),
            (0, "XA END 'x1'"),
            (0, "XA ROLLBACK 'x1'"),
            (2, "SELECT v FROM t WHERE id = 1"),
            (2, "SELECT v FROM t WHERE id = 1"),
        ],
    )
    .await;
}

/// A transaction's first statements that reach the server without certainly opening the
/// read view (`SELECT 1`, a locking read) do not make hits safe: a hit then leaves the view
/// to open at a later read, after writes the transaction must not see.
async fn view_not_opened_by(prefix: &str, first: &str) {
    differential(
        prefix,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 1), (2, 2)",
        ],
        &[
            (2, "SELECT v FROM t WHERE id = 1"),
            (2, "SELECT v FROM t WHERE id = 1"),
            (0, "BEGIN"),
            (0, first),
            (0, "SELECT v FROM t WHERE id = 1"),
            (1, "UPDATE t SET v = 10 WHERE id = 1"),
            (0, "SELECT v FROM t WHERE id = 1"),
            (0, "COMMIT"),
            (0, "SELECT v FROM t WHERE id = 1"),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_tableless_select_does_not_open_the_view() {
    view_not_opened_by("snap_select1", "SELECT 1").await;
}

#[tokio::test]
async fn a_locking_read_does_not_open_the_view() {
    view_not_opened_by("snap_forupdate", "SELECT v FROM t WHERE id = 2 FOR UPDATE").await;
}
