//! The query cache through the real proxy: hits and misses, byte identity, every
//! invalidation path, the not-cached rules, session control, users, transactions,
//! eviction, stampedes, and a concurrent stale-read check.

mod common;
use common::{setup, status};
mod rawclient;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use qcache::config::QueryCacheType;
use rawclient::Raw;

async fn first_i64(c: &mut Conn, q: &str) -> Option<i64> {
    c.query_first(q)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

#[tokio::test]
async fn hits_and_misses_are_counted() {
    let schema = common::fresh_schema("qc_count").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    assert_eq!(status(&mut c, "Qcache_hits").await, 0);
    for _ in 0..3 {
        assert_eq!(
            first_i64(&mut c, "SELECT v FROM t WHERE id = 1").await,
            Some(10)
        );
    }
    assert_eq!(status(&mut c, "Qcache_hits").await, 2);
    assert_eq!(status(&mut c, "Qcache_inserts").await, 1);
    assert_eq!(status(&mut c, "Qcache_queries_in_cache").await, 1);
    // a different statement text is a different entry
    assert_eq!(
        first_i64(&mut c, "SELECT v FROM t WHERE id=1").await,
        Some(10)
    );
    assert_eq!(status(&mut c, "Qcache_inserts").await, 2);
    // SHOW STATUS LIKE with a wider pattern lists every Qcache_ variable
    let rows: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'Qcache%'").await.unwrap();
    for name in [
        "Qcache_hits",
        "Qcache_inserts",
        "Qcache_not_cached",
        "Qcache_lowmem_prunes",
        "Qcache_queries_in_cache",
        "Qcache_free_memory",
        "Qcache_total_blocks",
    ] {
        assert!(
            rows.iter().any(|(n, _)| n == name),
            "{name} missing from {rows:?}"
        );
    }
    proxy.shutdown().await;
}

/// MariaDB's extended type info is relayed, not hidden: drivers such as node-mysql2 learn
/// from it that a LONGTEXT column holds JSON (its suite failed six files through qcache
/// when the capability was withheld). Misses and hits equal the server's bytes for a client
/// with it and for one without, they never share an entry, and the result sets qcache
/// builds itself carry the (empty) extended field a client with it parses.
#[tokio::test]
async fn extended_type_info_is_relayed_and_keyed() {
    use qcache::protocol::packets::mariadb_cap::EXTENDED_TYPE_INFO;
    let schema = common::fresh_schema("qc_ext").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, j JSON)",
            r#"INSERT INTO t VALUES (1, '{"a": 1}')"#,
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let q = "SELECT id, j FROM t";
    let mut wires = Vec::new();
    for ext in [EXTENDED_TYPE_INFO, 0] {
        let mut c = Raw::connect_mariadb(&proxy.addr_string(), "root", &schema, true, ext).await;
        let mut d = Raw::connect_mariadb(&common::db().addr(), "root", &schema, true, ext).await;
        let (server, _) = d.query(q).await;
        let (miss, _) = c.query(q).await;
        let (hit, _) = c.query(q).await;
        assert_eq!(Raw::wire(&miss), Raw::wire(&server), "miss (ext={ext})");
        assert_eq!(Raw::wire(&hit), Raw::wire(&server), "hit (ext={ext})");
        let says_json = server[2].payload.windows(4).any(|w| w == b"json");
        assert_eq!(
            says_json,
            ext != 0,
            "the server's column definition (ext={ext})"
        );
        wires.push(Raw::wire(&server));

        // qcache's own result: after the six names, the extended block (empty) only when
        // negotiated, then the fixed fields' length 0x0c.
        let (own, resp) = c.query("SHOW SESSION STATUS LIKE 'Qcache_hits'").await;
        assert!(!resp.error);
        let mut at = 0;
        let def = &own[1].payload;
        for _ in 0..6 {
            at += 1 + def[at] as usize;
        }
        let want: &[u8] = if ext != 0 { &[0x00, 0x0c] } else { &[0x0c] };
        assert_eq!(
            &def[at..at + want.len()],
            want,
            "qcache's column definition (ext={ext})"
        );
    }
    assert_ne!(
        wires[0], wires[1],
        "the two clients must differ, or this proves nothing"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn hit_bytes_are_identical_to_the_servers() {
    let schema = common::fresh_schema("qc_bytes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20), d DECIMAL(10,2), n INT NULL)",
            "INSERT INTO t VALUES (1,'a',1.50,NULL),(2,'bé',2.25,7)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    for deprecate_eof in [false, true] {
        let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, deprecate_eof).await;
        let mut d = Raw::connect(&common::db().addr(), "root", &schema, deprecate_eof).await;
        let q = "SELECT * FROM t ORDER BY id";
        let (miss, _) = c.query(q).await;
        let (hit, _) = c.query(q).await;
        let (server, _) = d.query(q).await;
        assert_eq!(
            Raw::wire(&miss),
            Raw::wire(&server),
            "miss (deprecate_eof={deprecate_eof})"
        );
        assert_eq!(
            Raw::wire(&hit),
            Raw::wire(&server),
            "hit (deprecate_eof={deprecate_eof})"
        );
        // status flags follow the session: inside a transaction the hit says IN_TRANS
        c.query("BEGIN").await;
        d.query("BEGIN").await;
        let (_, _) = c.query("SELECT s FROM t WHERE id = 2").await;
        let (_, _) = d.query("SELECT s FROM t WHERE id = 2").await;
        let (hit, _) = c.query(q).await;
        let (server, _) = d.query(q).await;
        assert_eq!(Raw::wire(&hit), Raw::wire(&server), "in transaction");
        c.query("COMMIT").await;
        d.query("COMMIT").await;
    }
    assert!(proxy.running.shared.cache.stats().hits() >= 3);
    proxy.shutdown().await;
}

/// Caches `read`, runs `write` through the proxy, and checks `read` sees the change.
/// `read` is served from the cache when repeated (a hit), `write` then changes its answer,
/// and the next `read` is not served from the cache (a miss): without the first, the check
/// would pass against a proxy that caches nothing.
async fn assert_invalidates(p: &common::TestProxy, c: &mut Conn, read: &str, write: &str) {
    let hits = || p.running.shared.cache.stats().hits();
    let before: Vec<mysql_async::Row> = c
        .query(read)
        .await
        .unwrap_or_else(|e| panic!("{read}: {e}"));
    // Right after DDL the catalog reloads in the background and reads are not stored
    // meanwhile (fail closed): the read becomes a hit once it has.
    let start = std::time::Instant::now();
    loop {
        let h = hits();
        let again: Vec<mysql_async::Row> = c.query(read).await.unwrap();
        assert_eq!(format!("{before:?}"), format!("{again:?}"));
        if hits() == h + 1 {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{read} repeated was not a hit within 5 s (before {write})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    c.query_drop(write)
        .await
        .unwrap_or_else(|e| panic!("{write}: {e}"));
    let h = hits();
    let after: Result<Vec<mysql_async::Row>, _> = c.query(read).await;
    assert_eq!(hits(), h, "{read} after {write} was a hit");
    let after = format!("{after:?}");
    assert_ne!(
        format!("Ok({before:?})"),
        after,
        "{write} did not invalidate {read}"
    );
}

#[tokio::test]
async fn every_write_path_invalidates() {
    let schema = common::fresh_schema("qc_writes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 1), (2, 2)",
            "INSERT INTO u VALUES (1, 100)",
            "CREATE PROCEDURE bump_t() UPDATE t SET v = v + 1000",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let read = "SELECT * FROM t ORDER BY id";
    assert_invalidates(&proxy, &mut c, read, "INSERT INTO t VALUES (3, 3)").await;
    assert_invalidates(&proxy, &mut c, read, "UPDATE t SET v = v + 1 WHERE id = 1").await;
    assert_invalidates(&proxy, &mut c, read, "DELETE FROM t WHERE id = 3").await;
    assert_invalidates(&proxy, &mut c, read, "REPLACE INTO t VALUES (2, 20)").await;
    assert_invalidates(
        &proxy,
        &mut c,
        read,
        "INSERT INTO t SELECT id + 10, v FROM u",
    )
    .await;
    assert_invalidates(
        &proxy,
        &mut c,
        read,
        "UPDATE t JOIN u ON t.id = u.id SET t.v = u.v + 1",
    )
    .await;
    assert_invalidates(
        &proxy,
        &mut c,
        "SELECT * FROM u",
        "UPDATE t, u SET u.v = u.v + 1 WHERE t.id = u.id",
    )
    .await;
    assert_invalidates(
        &proxy,
        &mut c,
        read,
        "DELETE t FROM t JOIN u ON t.id = u.id",
    )
    .await;
    assert_invalidates(
        &proxy,
        &mut c,
        "SELECT * FROM u",
        "DELETE FROM u USING u JOIN t WHERE u.id = 1",
    )
    .await;
    assert_invalidates(&proxy, &mut c, read, "CALL bump_t()").await;
    // A CALL may have set session variables qcache cannot see: the session uses the cache
    // again only after a reset (`lost_track`), which the next hit-before-write needs.
    c.reset().await.unwrap();
    assert_invalidates(
        &proxy,
        &mut c,
        read,
        "ALTER TABLE t ADD COLUMN w INT DEFAULT 5",
    )
    .await;
    assert_invalidates(&proxy, &mut c, read, "TRUNCATE TABLE t").await;
    c.query_drop("INSERT INTO t (id, v) VALUES (9, 9)")
        .await
        .unwrap();
    // RENAME: another table takes t's name
    c.query_drop("CREATE TABLE t2 (id INT PRIMARY KEY, v INT, w INT)")
        .await
        .unwrap();
    assert_invalidates(&proxy, &mut c, read, "RENAME TABLE t TO t_old, t2 TO t").await;
    assert_invalidates(&proxy, &mut c, read, "DROP TABLE t").await;
    // LOAD DATA through the CLI (LOCAL)
    c.query_drop("CREATE TABLE l (id INT, v INT)")
        .await
        .unwrap();
    let _ = first_i64(&mut c, "SELECT COUNT(*) FROM l").await;
    assert_eq!(first_i64(&mut c, "SELECT COUNT(*) FROM l").await, Some(0));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.csv");
    std::fs::write(&file, "1,1\n2,2\n").unwrap();
    let addr = proxy.addr_string();
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE l FIELDS TERMINATED BY ','",
        file.display()
    );
    let s2 = schema.clone();
    let out = tokio::task::spawn_blocking(move || {
        common::mariadb_cli(&addr, &["--local-infile=1", &s2], &sql)
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(first_i64(&mut c, "SELECT COUNT(*) FROM l").await, Some(2));
    // DROP DATABASE: every table of it
    let other = common::fresh_schema("qc_dropdb").await;
    setup(
        &other,
        &["CREATE TABLE x (id INT)", "INSERT INTO x VALUES (1)"],
    )
    .await;
    let q = format!("SELECT COUNT(*) FROM `{other}`.x");
    assert_eq!(first_i64(&mut c, &q).await, Some(1));
    assert_eq!(first_i64(&mut c, &q).await, Some(1));
    c.query_drop(format!("DROP DATABASE `{other}`"))
        .await
        .unwrap();
    assert!(
        c.query_first::<i64, _>(&q).await.is_err(),
        "dropped database still served"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn prepared_writes_invalidate_text_reads_and_back() {
    let schema = common::fresh_schema("qc_ps").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 1)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    for i in 2..5 {
        assert_eq!(
            first_i64(&mut c, "SELECT v FROM t WHERE id = 1").await,
            Some(i - 1)
        );
        let p: Option<i64> = c
            .exec_first("SELECT v FROM t WHERE id = ?", (1,))
            .await
            .unwrap();
        assert_eq!(p, Some(i - 1));
        c.exec_drop("UPDATE t SET v = ? WHERE id = ?", (i, 1))
            .await
            .unwrap();
    }
    c.query_drop("UPDATE t SET v = 100 WHERE id = 1")
        .await
        .unwrap();
    let p: Option<i64> = c
        .exec_first("SELECT v FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    assert_eq!(p, Some(100));
    proxy.shutdown().await;
}

/// Each query runs twice; none may be stored.
async fn assert_not_cached(c: &mut Conn, proxy: &common::TestProxy, q: &str) {
    let stats = proxy.running.shared.cache.stats();
    let (inserts, hits) = (stats.inserts(), stats.hits());
    let _ = c.query_iter(q).await.map(drop);
    let _: Result<Vec<mysql_async::Row>, _> = c.query(q).await;
    assert_eq!(stats.inserts(), inserts, "{q} was stored");
    assert_eq!(stats.hits(), hits, "{q} was served from the cache");
}

/// A read shape's tables are remembered per default database and catalog generation: a
/// table replaced by a view, and the same statement under another database, are resolved
/// again, so writes to what they now read still invalidate them.
#[tokio::test]
async fn remembered_tables_follow_the_catalog_and_the_database() {
    let a = common::fresh_schema("qc_plan_a").await;
    let b = common::fresh_schema("qc_plan_b").await;
    for schema in [&a, &b] {
        setup(
            schema,
            &[
                "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
                "INSERT INTO t VALUES (1, 10)",
                "INSERT INTO u VALUES (1, 20)",
            ],
        )
        .await;
    }
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&a).await;
    let q = "SELECT v FROM t WHERE id = 1";
    assert_eq!(first_i64(&mut c, q).await, Some(10));
    assert_eq!(first_i64(&mut c, q).await, Some(10));

    // The same shape in another database depends on that database's table.
    c.query_drop(format!("USE {b}")).await.unwrap();
    assert_eq!(first_i64(&mut c, q).await, Some(10));
    c.query_drop("UPDATE t SET v = 11 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut c, q).await, Some(11));

    // Replaced by a view over u: the shape now depends on u.
    c.query_drop(format!("USE {a}")).await.unwrap();
    c.query_drop("DROP TABLE t").await.unwrap();
    c.query_drop("CREATE VIEW t AS SELECT id, v FROM u")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut c, q).await, Some(20));
    assert_eq!(first_i64(&mut c, q).await, Some(20));
    c.query_drop("UPDATE u SET v = 21 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(
        first_i64(&mut c, q).await,
        Some(21),
        "served from before the write"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn what_must_not_be_cached_is_not() {
    let schema = common::fresh_schema("qc_never").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(10))",
            "INSERT INTO t VALUES (1, 1, 'x'), (2, 2, 'y')",
            "CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC RETURN x + 1",
            "CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB)",
            "INSERT INTO big VALUES (1, REPEAT('z', 2000000))",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("SET @u = 1").await.unwrap();
    c.query_drop("CREATE TEMPORARY TABLE tmp (id INT)")
        .await
        .unwrap();
    for q in [
        "SELECT NOW(), v FROM t",
        "SELECT RAND() FROM t",
        "SELECT UUID(), v FROM t",
        "SELECT CONNECTION_ID() FROM t",
        "SELECT LAST_INSERT_ID() FROM t",
        "SELECT CURRENT_USER(), v FROM t",
        "SELECT DATABASE() FROM t",
        "SELECT v FROM t WHERE id = @u",
        "SELECT @@version, v FROM t",
        "SELECT v FROM t WHERE id = 1 FOR UPDATE",
        "SELECT v FROM t WHERE id = 1 LOCK IN SHARE MODE",
        "SELECT v INTO @out FROM t WHERE id = 1",
        "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mysql' LIMIT 1",
        "SELECT user FROM mysql.user LIMIT 1",
        "SELECT 1",
        "SELECT * FROM tmp",
        "SELECT SQL_CALC_FOUND_ROWS v FROM t LIMIT 1",
        "SELECT f(v) FROM t",
        "SELECT CAST('abc' AS UNSIGNED) FROM t",
        "SELECT b FROM big",
        "SELECT v FROM t; SELECT s FROM t",
        "SELECT SQL_NO_CACHE v FROM t",
        "SELECT SLEEP(0) FROM t",
    ] {
        assert_not_cached(&mut c, &proxy, q).await;
    }
    // something cacheable still is
    assert_eq!(first_i64(&mut c, "SELECT COUNT(*) FROM t").await, Some(2));
    assert_eq!(first_i64(&mut c, "SELECT COUNT(*) FROM t").await, Some(2));
    assert!(proxy.running.shared.cache.stats().hits() >= 1);
    assert!(status(&mut c, "Qcache_not_cached").await >= 20);
    proxy.shutdown().await;
}

#[tokio::test]
async fn temporary_table_shadowing_a_real_one_is_never_served_from_it() {
    let schema = common::fresh_schema("qc_tmp").await;
    setup(
        &schema,
        &["CREATE TABLE t (id INT)", "INSERT INTO t VALUES (1)"],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut a = proxy.conn(&schema).await;
    let mut b = proxy.conn(&schema).await;
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM t").await, Some(1));
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM t").await, Some(1));
    b.query_drop("CREATE TEMPORARY TABLE t (id INT)")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut b, "SELECT COUNT(*) FROM t").await, Some(0));
    b.query_drop("DROP TEMPORARY TABLE t").await.unwrap();
    assert_eq!(first_i64(&mut b, "SELECT COUNT(*) FROM t").await, Some(1));
    proxy.shutdown().await;
}

#[tokio::test]
async fn query_cache_type_off_on_demand_and_hints() {
    let schema = common::fresh_schema("qc_type").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut c = proxy.conn(&schema).await;
    let v: Option<String> = c.query_first("SELECT @@query_cache_type").await.unwrap();
    assert_eq!(v.as_deref(), Some("ON"));
    c.query_drop("SET SESSION query_cache_type = DEMAND")
        .await
        .unwrap();
    let v: Option<String> = c
        .query_first("SELECT @@session.query_cache_type")
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("DEMAND"));
    let i = stats().inserts();
    first_i64(&mut c, "SELECT id FROM t").await;
    first_i64(&mut c, "SELECT id FROM t").await;
    assert_eq!(
        stats().inserts(),
        i,
        "DEMAND cached a query without SQL_CACHE"
    );
    first_i64(&mut c, "SELECT SQL_CACHE id FROM t").await;
    first_i64(&mut c, "SELECT SQL_CACHE id FROM t").await;
    assert_eq!(stats().inserts(), i + 1);
    // An entry stored by an ON session under these exact bytes is still no hit for DEMAND
    // without SQL_CACHE (the hit path tried before scanning must not apply here).
    let mut on = proxy.conn(&schema).await;
    first_i64(&mut on, "SELECT id FROM t WHERE id > 0").await;
    first_i64(&mut on, "SELECT id FROM t WHERE id > 0").await;
    let h = stats().hits();
    first_i64(&mut c, "SELECT id FROM t WHERE id > 0").await;
    assert_eq!(stats().hits(), h, "DEMAND served a query without SQL_CACHE");
    c.query_drop("SET @@session.query_cache_type = 0")
        .await
        .unwrap();
    let h = stats().hits();
    first_i64(&mut c, "SELECT SQL_CACHE id FROM t").await;
    assert_eq!(stats().hits(), h, "OFF served a hit");
    c.query_drop("SET query_cache_type = ON").await.unwrap();
    first_i64(&mut c, "SELECT SQL_NO_CACHE id FROM t").await;
    first_i64(&mut c, "SELECT /*!40001 SQL_NO_CACHE */ id FROM t").await;
    assert_eq!(stats().hits(), h);
    // a session that never said anything starts from the config default
    let off = common::proxy(|c| c.cache.query_cache_type = QueryCacheType::Off).await;
    let mut o = off.conn(&schema).await;
    first_i64(&mut o, "SELECT id FROM t").await;
    first_i64(&mut o, "SELECT id FROM t").await;
    assert_eq!(off.running.shared.cache.stats().inserts(), 0);
    let v: Option<String> = o.query_first("SELECT @@query_cache_type").await.unwrap();
    assert_eq!(v.as_deref(), Some("OFF"));
    off.shutdown().await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn session_settings_are_part_of_the_key() {
    let schema = common::fresh_schema("qc_ctx").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, s VARCHAR(10) CHARACTER SET utf8mb4)",
            "SET time_zone = '+00:00'",
            "INSERT INTO t VALUES (1, '2024-01-01 00:00:00', 'é')",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut a = proxy.conn(&schema).await;
    let mut b = proxy.conn(&schema).await;
    a.query_drop("SET time_zone = '+00:00'").await.unwrap();
    b.query_drop("SET time_zone = '+05:00'").await.unwrap();
    let q = "SELECT CAST(ts AS CHAR) FROM t";
    let ta: Option<String> = a.query_first(q).await.unwrap();
    let ta2: Option<String> = a.query_first(q).await.unwrap();
    let tb: Option<String> = b.query_first(q).await.unwrap();
    assert_eq!(ta, ta2);
    assert_eq!(ta.as_deref(), Some("2024-01-01 00:00:00"));
    assert_eq!(tb.as_deref(), Some("2024-01-01 05:00:00"));
    // sql_mode changes what a statement means
    let q = "SELECT 'a' || 'b' FROM t";
    let x: Option<String> = a.query_first(q).await.unwrap();
    b.query_drop("SET sql_mode = 'PIPES_AS_CONCAT'")
        .await
        .unwrap();
    let y: Option<String> = b.query_first(q).await.unwrap();
    assert_eq!(x.as_deref(), Some("0"));
    assert_eq!(y.as_deref(), Some("ab"));
    // SET NAMES changes the bytes of the result
    let q = "SELECT s FROM t";
    let u: Option<Vec<u8>> = a.query_first(q).await.unwrap();
    b.query_drop("SET NAMES latin1").await.unwrap();
    let l: Option<Vec<u8>> = b.query_first(q).await.unwrap();
    assert_eq!(u, Some("é".as_bytes().to_vec()));
    assert_eq!(l, Some(vec![0xe9]));
    // USE changes which table an unqualified name means
    let other = common::fresh_schema("qc_ctx_other").await;
    setup(
        &other,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (7), (8)",
        ],
    )
    .await;
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM t").await, Some(1));
    a.query_drop(format!("USE `{other}`")).await.unwrap();
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM t").await, Some(2));
    proxy.shutdown().await;
}

#[tokio::test]
async fn users_with_different_grants_never_share_entries() {
    let schema = common::fresh_schema("qc_users").await;
    setup(
        &schema,
        &[
            "CREATE TABLE secret (id INT)",
            "INSERT INTO secret VALUES (42)",
            "CREATE TABLE open (id INT)",
        ],
    )
    .await;
    let user = common::unique_name("lim");
    let mut d = common::direct().await;
    d.query_drop(format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"))
        .await
        .unwrap();
    d.query_drop(format!("GRANT SELECT ON `{schema}`.open TO '{user}'@'%'"))
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let mut root = proxy.conn(&schema).await;
    assert_eq!(
        first_i64(&mut root, "SELECT id FROM secret").await,
        Some(42)
    );
    assert_eq!(
        first_i64(&mut root, "SELECT id FROM secret").await,
        Some(42)
    );
    let url = format!(
        "mysql://{user}:pw@{}/{schema}?prefer_socket=false",
        proxy.addr
    );
    let mut lim = Conn::from_url(url).await.unwrap();
    let r: Result<Option<i64>, _> = lim.query_first("SELECT id FROM secret").await;
    assert!(
        r.is_err(),
        "a user without the grant was served another user's entry"
    );
    proxy.shutdown().await;
}

/// The read that opens a transaction's snapshot must reach the server even when its result
/// is cached; when it is, nothing is copied or stored again, and the entry held is kept (a
/// replacement used to be counted as a Qcache_lowmem_prune, one per read-only transaction).
#[tokio::test]
async fn a_snapshot_opening_read_of_a_cached_result_stores_nothing() {
    let schema = common::fresh_schema("qc_establish").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 1), (2, 2)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let q = "SELECT v FROM t WHERE id = 1";
    assert_eq!(first_i64(&mut c, q).await, Some(1));
    assert_eq!(first_i64(&mut c, q).await, Some(1));
    assert_eq!(status(&mut c, "Qcache_inserts").await, 1);
    assert_eq!(status(&mut c, "Qcache_hits").await, 1);
    for _ in 0..3 {
        c.query_drop("BEGIN").await.unwrap();
        // Opens the snapshot: forwarded, not a hit, not stored again.
        assert_eq!(first_i64(&mut c, q).await, Some(1));
        // The snapshot is open: this one may hit.
        assert_eq!(first_i64(&mut c, q).await, Some(1));
        c.query_drop("COMMIT").await.unwrap();
    }
    assert_eq!(status(&mut c, "Qcache_inserts").await, 1);
    assert_eq!(status(&mut c, "Qcache_hits").await, 4);
    assert_eq!(status(&mut c, "Qcache_lowmem_prunes").await, 0);
    assert_eq!(status(&mut c, "Qcache_queries_in_cache").await, 1);
    // A snapshot-opening read of a result not cached yet still fills.
    c.query_drop("BEGIN").await.unwrap();
    assert_eq!(
        first_i64(&mut c, "SELECT v FROM t WHERE id = 2").await,
        Some(2)
    );
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(status(&mut c, "Qcache_inserts").await, 2);
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn transactions_read_your_writes_and_isolate_others() {
    let schema = common::fresh_schema("qc_txn").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 1)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut a = proxy.conn(&schema).await;
    let mut b = proxy.conn(&schema).await;
    let q = "SELECT v FROM t WHERE id = 1";
    assert_eq!(first_i64(&mut b, q).await, Some(1));
    assert_eq!(first_i64(&mut b, q).await, Some(1));
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("UPDATE t SET v = 2 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut a, q).await, Some(2), "read-your-writes");
    assert_eq!(
        first_i64(&mut b, q).await,
        Some(1),
        "uncommitted data leaked"
    );
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        first_i64(&mut b, q).await,
        Some(2),
        "COMMIT did not invalidate"
    );
    // implicit commit by DDL
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop("UPDATE t SET v = 3 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut b, q).await, Some(2));
    a.query_drop("CREATE TABLE other (id INT)").await.unwrap();
    assert_eq!(
        first_i64(&mut b, q).await,
        Some(3),
        "implicit commit did not invalidate"
    );
    // autocommit=0: the first read opens a transaction
    a.query_drop("SET autocommit = 0").await.unwrap();
    a.query_drop("UPDATE t SET v = 4 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(first_i64(&mut a, q).await, Some(4));
    assert_eq!(first_i64(&mut b, q).await, Some(3));
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(first_i64(&mut b, q).await, Some(4));
    // ROLLBACK: nothing changed, and nothing stale remains
    a.query_drop("UPDATE t SET v = 5 WHERE id = 1")
        .await
        .unwrap();
    a.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(first_i64(&mut b, q).await, Some(4));
    assert_eq!(first_i64(&mut a, q).await, Some(4));
    // `a` is in the transaction its last read opened (autocommit=0): a graceful shutdown
    // would wait out its deadline for it.
    drop((a, b));
    proxy.shutdown().await;
}

#[tokio::test]
async fn repeatable_read_snapshot_is_respected() {
    let schema = common::fresh_schema("qc_rr").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 1)",
            "CREATE TABLE u (id INT PRIMARY KEY) ENGINE=InnoDB",
            "INSERT INTO u VALUES (1)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut a = proxy.conn(&schema).await;
    let mut b = proxy.conn(&schema).await;
    let q = "SELECT v FROM t WHERE id = 1";
    a.query_drop("START TRANSACTION").await.unwrap();
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM u").await, Some(1));
    b.query_drop("UPDATE t SET v = 2 WHERE id = 1")
        .await
        .unwrap();
    // b fills the cache with the new value
    assert_eq!(first_i64(&mut b, q).await, Some(2));
    assert_eq!(first_i64(&mut b, q).await, Some(2));
    // a's snapshot predates the update: it must still see 1
    assert_eq!(first_i64(&mut a, q).await, Some(1));
    assert_eq!(first_i64(&mut a, q).await, Some(1));
    a.query_drop("COMMIT").await.unwrap();
    assert_eq!(first_i64(&mut a, q).await, Some(2));
    // a read-only transaction can hit entries unchanged since it began, once it has read
    // their tables on the server (which then holds their metadata locks until it ends)
    a.query_drop("START TRANSACTION").await.unwrap();
    assert_eq!(first_i64(&mut a, "SELECT COUNT(*) FROM u").await, Some(1));
    let hits = proxy.running.shared.cache.stats().hits();
    assert_eq!(first_i64(&mut a, q).await, Some(2));
    assert_eq!(
        proxy.running.shared.cache.stats().hits(),
        hits,
        "served a table the transaction had not read on the server"
    );
    assert_eq!(first_i64(&mut a, q).await, Some(2));
    a.query_drop("COMMIT").await.unwrap();
    assert!(proxy.running.shared.cache.stats().hits() > hits);
    proxy.shutdown().await;
}

/// Prepares `sql` on `r` and returns the bytes of its execution's answer.
async fn prepared_answer(r: &mut Raw, sql: &str) -> Vec<u8> {
    use qcache::protocol::packets::com;
    use qcache::protocol::response::Expect;
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(sql.as_bytes());
    let (_, resp) = r.command(&p, Expect::Prepare).await;
    let (id, _, _) = resp.prepared.expect("prepared");
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    let (answer, _) = r.command(&e, Expect::Results).await;
    Raw::wire(&answer)
}

/// A plain BEGIN answered by qcache (`server.defer_begin`, on by default) opens the same
/// transaction as one the server answered: the same OK bytes, a snapshot taken at the first
/// read (which travels with BEGIN), writes inside it rolled back, and an empty BEGIN/COMMIT
/// that never reaches the server. Run with the setting on and off.
#[tokio::test]
async fn deferred_begin_opens_the_same_transaction() {
    let schema = common::fresh_schema("qc_begin").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            "INSERT INTO t VALUES (1, 1)",
        ],
    )
    .await;
    let q = "SELECT v FROM t WHERE id = 1";
    for defer in [true, false] {
        let proxy = common::proxy(|c| c.server.defer_begin = defer).await;
        // BEGIN and COMMIT as prepared statements (sysbench's way): the same answers.
        let mut raw = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
        let mut direct_raw = Raw::connect(&common::db().addr(), "root", &schema, true).await;
        for sql in ["BEGIN", "COMMIT", "BEGIN", "ROLLBACK"] {
            assert_eq!(
                prepared_answer(&mut raw, sql).await,
                prepared_answer(&mut direct_raw, sql).await,
                "prepared {sql} (defer={defer})"
            );
        }
        for extra in [0, qcache::protocol::packets::cap::SESSION_TRACK] {
            let addr = proxy.addr_string();
            let mut raw = Raw::connect_with_caps(&addr, "root", &schema, extra).await;
            let mut direct_raw =
                Raw::connect_with_caps(&common::db().addr(), "root", &schema, extra).await;
            let mut statements = vec![
                "BEGIN",
                "SELECT 1",
                "COMMIT",
                "START TRANSACTION",
                "ROLLBACK",
            ];
            if extra != 0 {
                // With transaction state tracked, BEGIN's OK says so: the server's to give.
                statements.extend([
                    "SET SESSION session_track_transaction_info = 'STATE'",
                    "BEGIN",
                    "SELECT 1",
                    "COMMIT",
                ]);
            } else {
                // A read-only transaction's OK carries IN_TRANS_READONLY.
                statements.extend([
                    "SET SESSION TRANSACTION READ ONLY",
                    "BEGIN",
                    "SELECT 1",
                    "COMMIT",
                ]);
            }
            for sql in statements {
                let (via, _) = raw.query(sql).await;
                let (server, _) = direct_raw.query(sql).await;
                assert_eq!(
                    Raw::wire(&via),
                    Raw::wire(&server),
                    "{sql} (defer={defer}, caps +{extra:#x})"
                );
            }
        }

        let mut a = proxy.conn(&schema).await;
        // Writes from another session go through qcache, so that they invalidate at their
        // OK rather than at the binlog's pace; `d` reads the server itself.
        let mut w = proxy.conn(&schema).await;
        let mut d = common::direct_to(&schema).await;
        // An empty transaction: with BEGIN deferred the server never sees it.
        let begins = status(&mut a, "Com_begin").await;
        a.query_drop("BEGIN").await.unwrap();
        a.query_drop("COMMIT").await.unwrap();
        let want = if defer { begins } else { begins + 1 };
        assert_eq!(status(&mut a, "Com_begin").await, want, "defer={defer}");

        // The snapshot opens at the first read, which carries BEGIN along, whether it is
        // cached (it is, from the read before) or not.
        let _ = first_i64(&mut a, q).await;
        for (first, prepared) in [("SELECT COUNT(*) FROM t", false), (q, false), (q, true)] {
            let what = format!("defer={defer}, first={first}, prepared BEGIN={prepared}");
            if prepared {
                a.exec_drop("BEGIN", ()).await.unwrap();
            } else {
                a.query_drop("BEGIN").await.unwrap();
            }
            let _ = first_i64(&mut a, first).await;
            let before = first_i64(&mut a, q).await;
            w.query_drop("UPDATE t SET v = v + 1 WHERE id = 1")
                .await
                .unwrap();
            let during = first_i64(&mut a, q).await;
            assert_eq!(during, before, "the transaction's snapshot moved ({what})");
            let in_txn: Option<i64> = a.query_first("SELECT @@in_transaction").await.unwrap();
            assert_eq!(in_txn, Some(1), "{what}");
            if prepared {
                a.exec_drop("COMMIT", ()).await.unwrap();
            } else {
                a.query_drop("COMMIT").await.unwrap();
            }
            assert_eq!(first_i64(&mut a, q).await, before.map(|v| v + 1));
        }

        // A write after a deferred BEGIN runs inside the transaction: ROLLBACK undoes it.
        let v = first_i64(&mut a, q).await;
        a.query_drop("BEGIN").await.unwrap();
        a.query_drop("UPDATE t SET v = 100 WHERE id = 1")
            .await
            .unwrap();
        assert_eq!(first_i64(&mut a, q).await, Some(100));
        a.query_drop("ROLLBACK").await.unwrap();
        assert_eq!(first_i64(&mut a, q).await, v, "the write outlived ROLLBACK");
        assert_eq!(first_i64(&mut d, q).await, v);

        // A prepared read as the first statement.
        a.query_drop("START TRANSACTION").await.unwrap();
        let p: Option<i64> = a.exec_first(q, ()).await.unwrap();
        w.query_drop("UPDATE t SET v = v + 1 WHERE id = 1")
            .await
            .unwrap();
        let again: Option<i64> = a.exec_first(q, ()).await.unwrap();
        assert_eq!(
            again, p,
            "prepared read: the snapshot moved (defer={defer})"
        );
        a.query_drop("COMMIT").await.unwrap();
        drop((a, w, d));
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn eviction_keeps_memory_under_max_bytes() {
    let schema = common::fresh_schema("qc_evict").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY, s TEXT)"]).await;
    let mut d = common::direct_to(&schema).await;
    for i in 0..200 {
        d.query_drop(format!("INSERT INTO t VALUES ({i}, REPEAT('x', 8000))"))
            .await
            .unwrap();
    }
    let max = 512 * 1024u64;
    let proxy = common::proxy(|c| {
        c.cache.max_bytes = max;
        c.cache.max_result_bytes = 64 * 1024;
    })
    .await;
    let mut c = proxy.conn(&schema).await;
    for i in 0..200 {
        let _: Option<String> = c
            .query_first(format!("SELECT s FROM t WHERE id = {i}"))
            .await
            .unwrap();
    }
    let cache = &proxy.running.shared.cache;
    assert!(cache.weight() <= max, "weight {} > {max}", cache.weight());
    assert!(status(&mut c, "Qcache_lowmem_prunes").await > 0);
    assert!(
        cache.len() > 10,
        "the cache keeps what fits ({} entries)",
        cache.len()
    );
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stampede_sends_one_query_upstream() {
    let schema = common::fresh_schema("qc_stampede").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    let mut d = common::direct_to(&schema).await;
    let values: Vec<String> = (0..150).map(|i| format!("({i})")).collect();
    d.query_drop(format!("INSERT INTO t VALUES {}", values.join(",")))
        .await
        .unwrap();
    let proxy =
        Arc::new(common::proxy(|c| c.cache.stampede_timeout = Duration::from_secs(30)).await);
    // slow but cacheable: a three-way cross join
    let q = "SELECT COUNT(*) FROM t a, t b, t c WHERE a.id + b.id > c.id";
    let mut conns = Vec::new();
    for _ in 0..8 {
        conns.push(proxy.conn(&schema).await);
    }
    let start = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for mut c in conns {
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let n: Option<i64> = c.query_first(q).await.unwrap();
            n
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    let stats = proxy.running.shared.cache.stats();
    assert_eq!(
        stats.inserts(),
        1,
        "not cached: {:?}",
        stats.not_cached_reasons()
    );
    assert_eq!(stats.hits(), 7, "followers were served the leader's result");
}

/// Writers set increasing values and note each acknowledged one; readers check that no read
/// returns less than what was acknowledged before it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_older_than_an_acknowledged_write() {
    let schema = common::fresh_schema("qc_stale").await;
    const KEYS: i64 = 4;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE c (id INT PRIMARY KEY, v BIGINT) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("CREATE TABLE side (id INT PRIMARY KEY, c_id INT)")
        .await
        .unwrap();
    for k in 0..KEYS {
        d.query_drop(format!("INSERT INTO c VALUES ({k}, 0)"))
            .await
            .unwrap();
        d.query_drop(format!("INSERT INTO side VALUES ({k}, {k})"))
            .await
            .unwrap();
    }
    let proxy = Arc::new(common::proxy(|_| {}).await);
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..KEYS).map(|_| AtomicI64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut tasks = Vec::new();
    for k in 0..KEYS {
        let (proxy, acked, schema) = (proxy.clone(), acked.clone(), schema.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let mut i = 0i64;
            while Instant::now() < deadline {
                i += 1;
                if i % 3 == 0 {
                    c.query_drop("BEGIN").await.unwrap();
                    c.exec_drop("UPDATE c SET v = ? WHERE id = ?", (i, k))
                        .await
                        .unwrap();
                    c.query_drop("COMMIT").await.unwrap();
                } else {
                    c.query_drop(format!("UPDATE c SET v = {i} WHERE id = {k}"))
                        .await
                        .unwrap();
                }
                acked[k as usize].fetch_max(i, Ordering::SeqCst);
            }
            0u64
        }));
    }
    for r in 0..4 {
        let (proxy, acked, schema, stop) =
            (proxy.clone(), acked.clone(), schema.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let mut reads = 0u64;
            let mut n = 0i64;
            while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                n += 1;
                let k = (n + r) % KEYS;
                let floor = acked[k as usize].load(Ordering::SeqCst);
                let v: i64 = match n % 4 {
                    0 => c
                        .query_first(format!("SELECT v FROM c WHERE id = {k}"))
                        .await
                        .unwrap()
                        .unwrap(),
                    1 => c
                        .exec_first("SELECT v FROM c WHERE id = ?", (k,))
                        .await
                        .unwrap()
                        .unwrap(),
                    2 => c
                        .query_first(format!(
                            "SELECT c.v FROM c JOIN side s ON s.c_id = c.id WHERE s.id = {k}"
                        ))
                        .await
                        .unwrap()
                        .unwrap(),
                    _ => {
                        let all: Vec<(i64, i64)> =
                            c.query("SELECT id, v FROM c ORDER BY id").await.unwrap();
                        all[k as usize].1
                    }
                };
                if v < floor {
                    stop.store(true, Ordering::Relaxed);
                    panic!("stale read: key {k} read {v} after {floor} was acknowledged");
                }
                reads += 1;
            }
            reads
        }));
    }
    let mut reads = 0;
    for t in tasks {
        reads += t.await.unwrap();
    }
    let stats = proxy.running.shared.cache.stats();
    println!(
        "{reads} reads, {} hits, {} inserts",
        stats.hits(),
        stats.inserts()
    );
    assert!(reads > 100);
    assert!(stats.hits() > 0, "the test must exercise hits");
}

/// Tracing tools (sqlcommenter, marginalia, Datadog DBM) put a comment that changes on every
/// request before or after the statement: such reads share one entry, text and prepared,
/// while a comment inside the statement (part of a column's name) and an executable comment
/// keep their own. What is served is checked against the server in
/// `tests/scenarios/comments/`.
#[tokio::test]
async fn trace_comments_share_one_entry() {
    let schema = common::fresh_schema("qc_trace").await;
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
    let base = "SELECT v FROM t WHERE id = 1";
    assert_eq!(first_i64(&mut c, base).await, Some(10));
    let mut hits = status(&mut c, "Qcache_hits").await;
    for sql in [
        "SELECT v FROM t WHERE id = 1 /*traceparent='00-4bf92f35-00f067aa-01'*/",
        "SELECT v FROM t WHERE id = 1 /*traceparent='00-5bf92f35-10f067aa-01'*/",
        "/*dddbs='svc',dde='prod'*/ SELECT v FROM t WHERE id = 1",
        "/* a */\n-- b\n# c\nSELECT v FROM t WHERE id = 1 -- d",
        "SELECT v FROM t WHERE id = 1 # e",
    ] {
        assert_eq!(first_i64(&mut c, sql).await, Some(10), "{sql}");
        hits += 1;
        assert_eq!(
            status(&mut c, "Qcache_hits").await,
            hits,
            "not a hit: {sql}"
        );
    }
    for sql in [
        "SELECT v /*x*/ FROM t WHERE id = 1",
        "SELECT v FROM t WHERE id = 1 /*!50000 AND 1 */",
        "SELECT v FROM t WHERE id = 1 /*+ BKA(t) */",
    ] {
        assert_eq!(first_i64(&mut c, sql).await, Some(10), "{sql}");
        assert_eq!(status(&mut c, "Qcache_hits").await, hits, "shared: {sql}");
    }
    // Prepared: the statement's SQL is keyed without its trace comments too.
    let v: Option<i64> = c
        .exec_first(
            "SELECT v FROM t WHERE id = ? /*traceparent='00-1-01'*/",
            (2,),
        )
        .await
        .unwrap();
    assert_eq!(v, Some(20));
    let hits = status(&mut c, "Qcache_hits").await;
    let v: Option<i64> = c
        .exec_first(
            "/*traceparent='00-2-01'*/ SELECT v FROM t WHERE id = ?",
            (2,),
        )
        .await
        .unwrap();
    assert_eq!(v, Some(20));
    assert_eq!(status(&mut c, "Qcache_hits").await, hits + 1, "prepared");
    // QCACHE EXPLAIN keys as the read does.
    let list: Vec<(String, Option<String>)> = c
        .query("QCACHE EXPLAIN /*x*/ SELECT v FROM t WHERE id = 1 /*y*/")
        .await
        .unwrap();
    let present = list.iter().find(|(n, _)| n == "entry_present");
    assert_eq!(
        present.and_then(|(_, v)| v.as_deref()),
        Some("yes"),
        "{list:?}"
    );
    proxy.shutdown().await;
}

/// Every spelling of reading `@@query_cache_type` that is a whole column answers the
/// session's qcache value (the server's metadata and other columns kept); one inside an
/// expression is the server's, never cached. `SHOW [GLOBAL|SESSION] STATUS` in every form
/// reports qcache's `Qcache_*` counters, not MariaDB's own query cache's zeros, whatever
/// comments it holds.
#[tokio::test]
async fn query_cache_type_and_qcache_status_in_every_spelling() {
    let schema = common::fresh_schema("qc_spell").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = common::proxy(|c| c.cache.query_cache_type = QueryCacheType::On).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("SET SESSION query_cache_type = DEMAND")
        .await
        .unwrap();
    for sql in [
        "SELECT @@SESSION.query_cache_type AS q",
        "select @@local.query_cache_type `x`",
        "SELECT /*c*/ @@query_cache_type",
    ] {
        let row: mysql_async::Row = c.query_first(sql).await.unwrap().unwrap();
        let v: String = row.get(0).unwrap();
        assert_eq!(v, "DEMAND", "{sql}");
    }
    let (v, one): (String, i64) = c
        .query_first("SELECT @@query_cache_type, 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((v.as_str(), one), ("DEMAND", 1));
    let (a, v, g): (i64, String, String) = c
        .query_first("SELECT id AS a, @@session.query_cache_type, @@GLOBAL.query_cache_type FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a, v.as_str(), g.as_str()), (1, "DEMAND", "ON"));
    let row: mysql_async::Row = c
        .query_first("SELECT @@SESSION.query_cache_type AS q")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.columns_ref()[0].name_str(), "q");

    // A hit, so that qcache's counters differ from MariaDB's zeros.
    let mut on = proxy.conn(&schema).await;
    first_i64(&mut on, "SELECT id FROM t").await;
    first_i64(&mut on, "SELECT id FROM t").await;
    let hits = proxy.running.shared.cache.stats().hits();
    assert!(hits >= 1);
    for sql in [
        "SHOW GLOBAL STATUS WHERE Variable_name = 'Qcache_hits'",
        "SHOW STATUS WHERE Variable_name IN ('Qcache_hits', 'Uptime')",
        "SHOW SESSION STATUS LIKE 'Qcache_h_ts'",
        "SHOW GLOBAL STATUS",
        "SHOW STATUS",
        // Read as the server reads it: a comment is no word of the statement, a versioned
        // one it skips (`/*M!999999`) is a comment, the content of one it runs is code.
        "SHOW /*M!999999 FULL */ STATUS LIKE 'Qcache_h%'",
        "SHOW /*!50000 GLOBAL */ STATUS WHERE Variable_name = 'Qcache_hits'",
        "SHOW STATUS /* the counters */ LIKE 'Qcache_hits'",
    ] {
        let rows: Vec<(String, String)> = c.query(sql).await.unwrap();
        let got = rows.iter().find(|(n, _)| n == "Qcache_hits");
        assert_eq!(
            got.map(|(_, v)| v.as_str()),
            Some(hits.to_string().as_str()),
            "{sql}"
        );
    }
    proxy.shutdown().await;
}
