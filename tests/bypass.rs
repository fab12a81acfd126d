//! Writes the proxy does not see, and writes whose effects reach other tables: the binlog
//! tail invalidating after direct writes and across two qcache instances, and the schema
//! catalog widening proxied writes through views, triggers and cascading foreign keys.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use qcache::config::BinlogMode;

async fn first_i64(c: &mut Conn, q: &str) -> Option<i64> {
    c.query_first(q)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"))
}

/// Polls `q` through `c` until it returns `want`; the time it took.
async fn until(c: &mut Conn, q: &str, want: i64, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if first_i64(c, q).await == Some(want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{q} did not return {want} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn binlog_proxy() -> common::TestProxy {
    let p = common::proxy(|c| c.invalidation.binlog = BinlogMode::On).await;
    let b = p
        .running
        .shared
        .binlog
        .clone()
        .expect("binlog tail running");
    assert!(
        b.wait_until_connected(Duration::from_secs(20)).await,
        "binlog stream did not connect: {:?}",
        b.status()
    );
    p
}

#[tokio::test]
async fn direct_writes_invalidate_through_the_binlog() {
    let schema = common::fresh_schema("bp_direct").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 0)").await.unwrap();
    let proxy = binlog_proxy().await;
    let mut c = proxy.conn(&schema).await;
    let q = "SELECT v FROM t WHERE id = 1";
    let mut lags = Vec::new();
    for i in 1..=30 {
        assert_eq!(first_i64(&mut c, q).await, Some(i - 1));
        assert_eq!(first_i64(&mut c, q).await, Some(i - 1));
        d.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        lags.push(until(&mut c, q, i, Duration::from_secs(5)).await);
    }
    lags.sort();
    println!(
        "direct write to invalidation visible: p50 {:?}, max {:?}",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    // DDL from outside
    d.query_drop("ALTER TABLE t ADD COLUMN w INT DEFAULT 3")
        .await
        .unwrap();
    let q2 = "SELECT * FROM t";
    let start = Instant::now();
    loop {
        let row: Option<mysql_async::Row> = c.query_first(q2).await.unwrap();
        if row.map(|r| r.len()) == Some(3) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "outside ALTER not seen"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn two_instances_stay_coherent_through_the_binlog() {
    let schema = common::fresh_schema("bp_two").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 0)").await.unwrap();
    let a = binlog_proxy().await;
    let b = common::proxy(|c| {
        c.invalidation.binlog = BinlogMode::On;
    })
    .await;
    let bl = b.running.shared.binlog.clone().unwrap();
    assert!(bl.wait_until_connected(Duration::from_secs(20)).await);
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let q = "SELECT v FROM t WHERE id = 1";
    for i in 1..=10 {
        assert_eq!(first_i64(&mut cb, q).await, Some(i - 1));
        assert_eq!(first_i64(&mut cb, q).await, Some(i - 1));
        ca.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        until(&mut cb, q, i, Duration::from_secs(5)).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// Direct writers and proxied readers: a read that starts more than the lag bound after a
/// direct write was acknowledged must see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staleness_after_direct_writes_stays_within_the_lag_bound() {
    let schema = common::fresh_schema("bp_stale").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE c (id INT PRIMARY KEY, v BIGINT)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO c VALUES (0, 0), (1, 0)")
        .await
        .unwrap();
    let proxy = Arc::new(binlog_proxy().await);
    const BOUND: Duration = Duration::from_millis(500);
    let acked: Arc<Vec<AckLog>> = Arc::new((0..2).map(|_| Mutex::new(Vec::new())).collect());
    let deadline = Instant::now() + Duration::from_secs(5);
    let failed = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for k in 0..2i64 {
        let (acked, schema) = (acked.clone(), schema.clone());
        tasks.push(tokio::spawn(async move {
            let mut w = common::direct_to(&schema).await;
            let mut i = 0;
            while Instant::now() < deadline {
                i += 1;
                w.query_drop(format!("UPDATE c SET v = {i} WHERE id = {k}"))
                    .await
                    .unwrap();
                acked[k as usize].lock().unwrap().push((Instant::now(), i));
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }));
    }
    let max_seen_lag = Arc::new(AtomicI64::new(0));
    for r in 0..2i64 {
        let (acked, proxy, schema, failed, max_seen_lag) = (
            acked.clone(),
            proxy.clone(),
            schema.clone(),
            failed.clone(),
            max_seen_lag.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut c = proxy.conn(&schema).await;
            let mut n = r;
            while Instant::now() < deadline {
                n += 1;
                let k = (n % 2) as usize;
                let started = Instant::now();
                // the newest value acknowledged more than BOUND before this read began
                let floor = acked[k]
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .find(|(t, _)| started.duration_since(*t) > BOUND)
                    .map(|(_, v)| *v)
                    .unwrap_or(0);
                let v: i64 = c
                    .query_first(format!("SELECT v FROM c WHERE id = {k}"))
                    .await
                    .unwrap()
                    .unwrap();
                if v < floor {
                    failed.store(true, Ordering::Relaxed);
                    panic!("key {k}: read {v}, but {floor} was acknowledged more than {BOUND:?} earlier");
                }
                // how far behind the newest acknowledged value this read was
                let newest = acked[k].lock().unwrap().last().map(|(_, v)| *v).unwrap_or(0);
                max_seen_lag.fetch_max(newest - v, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(!failed.load(Ordering::Relaxed));
    println!(
        "reads lagged at most {} writes behind; hits {}",
        max_seen_lag.load(Ordering::Relaxed),
        proxy.running.shared.cache.stats().hits()
    );
}

use std::sync::Mutex;

/// Per key: (when the direct write was acknowledged, the value it wrote).
type AckLog = Mutex<Vec<(Instant, i64)>>;

#[tokio::test]
async fn binlog_auto_turns_itself_off_without_log_bin_and_caching_still_works() {
    // The machine's own MariaDB (127.0.0.1:3306) runs without a binlog.
    let proxy = common::proxy_to("127.0.0.1:3306", |c| {
        c.invalidation.binlog = BinlogMode::Auto;
        c.invalidation.user = "root".into();
        c.invalidation.password = String::new();
    })
    .await;
    let b = proxy
        .running
        .shared
        .binlog
        .clone()
        .expect("auto starts the tail");
    let why = b.wait_until_off(Duration::from_secs(20)).await;
    assert!(why.as_deref().unwrap_or("").contains("log_bin"), "{why:?}");
    let url = format!("mysql://root@{}/test?prefer_socket=false", proxy.addr);
    let mut c = Conn::from_url(url).await.unwrap();
    let t = common::unique_name("bp_auto");
    c.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, v INT)"))
        .await
        .unwrap();
    c.query_drop(format!("INSERT INTO {t} VALUES (1, 1)"))
        .await
        .unwrap();
    // The CREATE's OK did not wait for the catalog: until its reload lands, reads of the new
    // table are not cached (`ddl_pending`).
    proxy.catalog_settled().await;
    let q = format!("SELECT v FROM {t} WHERE id = 1");
    assert_eq!(first_i64(&mut c, &q).await, Some(1));
    assert_eq!(first_i64(&mut c, &q).await, Some(1));
    assert!(proxy.running.shared.cache.stats().hits() >= 1);
    c.query_drop(format!("UPDATE {t} SET v = 2")).await.unwrap();
    assert_eq!(first_i64(&mut c, &q).await, Some(2));
    c.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn views_triggers_and_cascades_widen_proxied_writes() {
    let schema = common::fresh_schema("bp_catalog").await;
    let mut d = common::direct_to(&schema).await;
    for s in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE b (id INT PRIMARY KEY, w INT)",
        "INSERT INTO a VALUES (1, 1)",
        "INSERT INTO b VALUES (1, 10)",
        "CREATE VIEW ab AS SELECT a.id, a.v, b.w FROM a JOIN b ON a.id = b.id",
        "CREATE VIEW ab2 AS SELECT id, v + w AS s FROM ab",
        "CREATE TABLE log (n INT)",
        "CREATE TRIGGER a_ins AFTER INSERT ON a FOR EACH ROW INSERT INTO log VALUES (NEW.id)",
        "CREATE TABLE parent (id INT PRIMARY KEY) ENGINE=InnoDB",
        "CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent(id) ON DELETE CASCADE) ENGINE=InnoDB",
        "INSERT INTO parent VALUES (1), (2)",
        "INSERT INTO child VALUES (10, 1), (20, 2)",
    ] {
        d.query_drop(s).await.unwrap();
    }
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let hits = || proxy.running.shared.cache.stats().hits();
    // a view over two tables, and a view on that view
    for q in [
        "SELECT w FROM ab WHERE id = 1",
        "SELECT s FROM ab2 WHERE id = 1",
    ] {
        first_i64(&mut c, q).await;
    }
    let h = hits();
    assert_eq!(
        first_i64(&mut c, "SELECT w FROM ab WHERE id = 1").await,
        Some(10)
    );
    assert_eq!(
        first_i64(&mut c, "SELECT s FROM ab2 WHERE id = 1").await,
        Some(11)
    );
    assert_eq!(hits(), h + 2, "views are cached");
    c.query_drop("UPDATE b SET w = 20 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(
        first_i64(&mut c, "SELECT w FROM ab WHERE id = 1").await,
        Some(20)
    );
    assert_eq!(
        first_i64(&mut c, "SELECT s FROM ab2 WHERE id = 1").await,
        Some(21)
    );
    // a trigger writing a second table
    let q = "SELECT COUNT(*) FROM log";
    assert_eq!(first_i64(&mut c, q).await, Some(0));
    assert_eq!(first_i64(&mut c, q).await, Some(0));
    c.query_drop("INSERT INTO a VALUES (2, 2)").await.unwrap();
    assert_eq!(
        first_i64(&mut c, q).await,
        Some(1),
        "trigger's table not invalidated"
    );
    // ON DELETE CASCADE
    let q = "SELECT COUNT(*) FROM child";
    assert_eq!(first_i64(&mut c, q).await, Some(2));
    assert_eq!(first_i64(&mut c, q).await, Some(2));
    c.query_drop("DELETE FROM parent WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(
        first_i64(&mut c, q).await,
        Some(1),
        "cascade's table not invalidated"
    );
    // a view created through the proxy is known to the next read
    c.query_drop("CREATE VIEW only_b AS SELECT w FROM b")
        .await
        .unwrap();
    assert_eq!(
        first_i64(&mut c, "SELECT MAX(w) FROM only_b").await,
        Some(20)
    );
    assert_eq!(
        first_i64(&mut c, "SELECT MAX(w) FROM only_b").await,
        Some(20)
    );
    c.query_drop("UPDATE b SET w = 30").await.unwrap();
    assert_eq!(
        first_i64(&mut c, "SELECT MAX(w) FROM only_b").await,
        Some(30)
    );
    proxy.shutdown().await;
}
