//! Classification fails closed (issue #17, section 1): a statement that reaches the server
//! through qcache and may write — behind a versioned comment the server skips, run by
//! MariaDB's ANALYZE, swapping partitions, calling a stored function from a statement that
//! writes nothing itself, ending another session's XA transaction — invalidates what it
//! changed. Each case caches a read through qcache, runs the statement through qcache, and
//! compares the next read through qcache with the same read made directly. The binlog tail is
//! off, so nothing but the statement's classification can invalidate.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Row;

/// Rows as text, for comparing.
async fn rows(conn: &mut mysql_async::Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    let rs: Vec<Row> = conn
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rs.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.as_ref(i).and_then(|v| match v {
                        mysql_async::Value::NULL => None,
                        v => Some(v.as_sql(true)),
                    })
                })
                .collect()
        })
        .collect()
}

async fn hits(conn: &mut mysql_async::Conn) -> u64 {
    let r: Option<(String, u64)> = conn
        .query_first("SHOW STATUS LIKE 'Qcache_hits'")
        .await
        .unwrap();
    r.map(|(_, n)| n).unwrap_or(0)
}

struct Case {
    name: &'static str,
    /// Run directly before anything is cached.
    setup: &'static [&'static str],
    /// Read through qcache before (cached) and after the statement, compared with direct.
    reads: &'static [&'static str],
    /// Through qcache; errors are ignored (the server's answer is what it is).
    statement: &'static str,
}

const SETUP: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
    "INSERT INTO t VALUES (1, 10), (2, 20)",
];

const CASES: &[Case] = &[
    Case {
        name: "versioned comment above the server's version hides an UPDATE",
        setup: SETUP,
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "/*!999999 SELECT */ UPDATE t SET v = v + 1",
    },
    Case {
        name: "MariaDB versioned comment above the server's version",
        setup: SETUP,
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "/*M!999999 SELECT 1 FROM t */ UPDATE t SET v = v + 1",
    },
    Case {
        name: "MySQL 5.7+ versioned comment MariaDB skips",
        setup: SETUP,
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "/*!50700 SELECT */ DELETE FROM t WHERE id = 1",
    },
    Case {
        name: "ANALYZE FORMAT=JSON UPDATE runs the update",
        setup: SETUP,
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "ANALYZE FORMAT=JSON UPDATE t SET v = v + 1",
    },
    Case {
        name: "ANALYZE DELETE runs the delete",
        setup: SETUP,
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "analyze  delete from t where id = 2",
    },
    Case {
        name: "EXCHANGE PARTITION writes the other table too",
        setup: &[
            "CREATE TABLE p (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) \
             (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            "CREATE TABLE e (id INT PRIMARY KEY, v INT)",
            "INSERT INTO p VALUES (1, 1), (200, 2)",
            "INSERT INTO e VALUES (5, 5)",
        ],
        reads: &[
            "SELECT id, v FROM e ORDER BY id",
            "SELECT id, v FROM p ORDER BY id",
        ],
        statement: "ALTER TABLE p EXCHANGE PARTITION p0 WITH TABLE e",
    },
    Case {
        name: "SHOW … WHERE calls a stored function that writes",
        setup: &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
            "CREATE FUNCTION bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE t SET v = v + 1; RETURN 1; END",
        ],
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "SHOW TABLES WHERE bump() = 1",
    },
    Case {
        name: "EXPLAIN evaluates a constant subquery calling a writing function",
        setup: &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
            "CREATE FUNCTION bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE t SET v = v + 1; RETURN 1; END",
        ],
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "EXPLAIN SELECT id FROM t WHERE v = (SELECT bump())",
    },
    Case {
        name: "ANALYZE SELECT runs a writing function",
        setup: &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20)",
            "CREATE FUNCTION bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN UPDATE t SET v = v + 1; RETURN 1; END",
        ],
        reads: &["SELECT id, v FROM t ORDER BY id"],
        statement: "ANALYZE SELECT bump()",
    },
];

#[tokio::test]
async fn statements_that_may_write_invalidate() {
    let proxy = common::proxy(|_| {}).await;
    let mut failures = Vec::new();
    for case in CASES {
        let schema = common::fresh_schema("classify").await;
        let mut direct = common::direct_to(&schema).await;
        for s in case.setup {
            direct
                .query_drop(*s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        let mut conn = proxy.conn(&schema).await;
        conn.query_drop("SET SESSION sql_log_bin = 0")
            .await
            .unwrap();
        for r in case.reads {
            // Twice: the second is a hit, so the entry is surely stored.
            rows(&mut conn, r).await;
            rows(&mut conn, r).await;
        }
        if let Err(e) = conn.query_drop(case.statement).await {
            failures.push(format!("{}: the statement failed: {e}", case.name));
            continue;
        }
        for r in case.reads {
            let want = rows(&mut direct, r).await;
            let got = rows(&mut conn, r).await;
            if got != want {
                failures.push(format!(
                    "{}: after `{}`, `{r}` through qcache gave {got:?}, the server {want:?}",
                    case.name, case.statement
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// A prepared XA transaction left by a session that is gone, committed by another: the
/// committing session cannot know what it wrote.
#[tokio::test]
async fn xa_commit_of_a_detached_transaction_invalidates() {
    let proxy = common::proxy(|_| {}).await;
    let schema = common::fresh_schema("classify_xa").await;
    let mut direct = common::direct_to(&schema).await;
    for s in SETUP {
        direct.query_drop(*s).await.unwrap();
    }
    // Through qcache first, so that its catalog knows t before the prepared transaction
    // holds t's metadata lock.
    let mut conn = proxy.conn(&schema).await;
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
    // A catalog refresh is rate-limited (100 ms): wait until reads of t are cached.
    let mut known = false;
    for _ in 0..50 {
        rows(&mut conn, "SELECT COUNT(*) FROM t").await;
        let before = hits(&mut conn).await;
        rows(&mut conn, "SELECT COUNT(*) FROM t").await;
        if hits(&mut conn).await > before {
            known = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(known, "reads of t never became cacheable");
    let xid = common::unique_name("x");
    let mut a = common::direct_to(&schema).await;
    a.query_drop(format!("XA START '{xid}'")).await.unwrap();
    a.query_drop("UPDATE t SET v = v + 1").await.unwrap();
    a.query_drop(format!("XA END '{xid}'")).await.unwrap();
    a.query_drop(format!("XA PREPARE '{xid}'")).await.unwrap();
    drop(a);
    let read = "SELECT id, v FROM t ORDER BY id";
    rows(&mut conn, read).await;
    let before = hits(&mut conn).await;
    rows(&mut conn, read).await;
    let why: Vec<(String, String)> = conn.query("SHOW QCACHE STATUS").await.unwrap();
    let why: Vec<_> = why
        .into_iter()
        .filter(|(k, _)| k.contains("not_cached"))
        .collect();
    assert_eq!(
        hits(&mut conn).await,
        before + 1,
        "the read was not cached: {why:?}"
    );
    // The detached transaction may take a moment to be listed after its session ended.
    let mut done = false;
    for _ in 0..50 {
        if conn.query_drop(format!("XA COMMIT '{xid}'")).await.is_ok() {
            done = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(done, "XA COMMIT never succeeded");
    assert_eq!(rows(&mut conn, read).await, rows(&mut direct, read).await);
}
