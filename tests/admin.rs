//! Operating qcache: the HTTP admin endpoint (metrics, health, readiness, /cache, reload),
//! the admin statements with and without privilege, rules, reload mid-session, JSON logs.

mod common;
use common::setup;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::Conn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A tiny HTTP/1.1 client: (status, body).
async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr)
        .await
        .expect("admin endpoint reachable");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: qcache\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("send request");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("admin endpoint answers in time")
        .expect("read answer");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// `/metrics` as name{labels} → value (histogram buckets included).
async fn scrape(addr: SocketAddr) -> HashMap<String, f64> {
    let (status, body) = http(addr, "GET", "/metrics").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            (
                k.to_string(),
                v.parse().unwrap_or_else(|_| panic!("bad value {l:?}")),
            )
        })
        .collect()
}

fn metric(m: &HashMap<String, f64>, name: &str) -> f64 {
    *m.get(name)
        .unwrap_or_else(|| panic!("{name} missing from /metrics: {:?}", m.keys()))
}

fn admin(p: &common::TestProxy) -> SocketAddr {
    p.running.admin_addr.expect("admin endpoint enabled")
}

async fn admin_proxy(tweak: impl FnOnce(&mut qcache::config::Config)) -> common::TestProxy {
    common::proxy(|c| {
        c.admin.listen = "127.0.0.1:0".into();
        tweak(c)
    })
    .await
}

async fn status_rows(c: &mut Conn, sql: &str) -> HashMap<String, String> {
    let rows: Vec<(String, String)> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter().collect()
}

async fn qstatus(c: &mut Conn, name: &str) -> u64 {
    status_rows(c, "SHOW QCACHE STATUS")
        .await
        .get(name)
        .unwrap_or_else(|| panic!("{name} not in SHOW QCACHE STATUS"))
        .parse()
        .expect("numeric status")
}

fn server_code(e: mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(e) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test]
async fn metrics_move_with_hits_misses_writes_and_flushes() {
    let schema = common::fresh_schema("adm_metrics").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10)",
        ],
    )
    .await;
    let proxy = admin_proxy(|_| {}).await;
    let a = admin(&proxy);
    let m0 = scrape(a).await;
    assert_eq!(metric(&m0, "qcache_hits_total"), 0.0);
    assert_eq!(metric(&m0, "qcache_max_bytes"), 256.0 * 1024.0 * 1024.0);
    let mut c = proxy.conn(&schema).await;
    for _ in 0..3 {
        let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
        assert_eq!(v, Some(10));
    }
    let m1 = scrape(a).await;
    assert_eq!(metric(&m1, "qcache_hits_total"), 2.0);
    assert_eq!(metric(&m1, "qcache_misses_total"), 1.0);
    assert_eq!(metric(&m1, "qcache_inserts_total"), 1.0);
    assert_eq!(metric(&m1, "qcache_entries"), 1.0);
    assert!(metric(&m1, "qcache_bytes") > 0.0);
    assert_eq!(metric(&m1, "qcache_client_connections"), 1.0);
    assert_eq!(metric(&m1, "qcache_upstream_connections"), 1.0);
    assert_eq!(metric(&m1, "qcache_hit_latency_seconds_count"), 2.0);
    assert_eq!(
        metric(&m1, "qcache_hit_latency_seconds_bucket{le=\"+Inf\"}"),
        2.0
    );
    assert_eq!(metric(&m1, "qcache_upstream_latency_seconds_count"), 1.0);

    c.query_drop("UPDATE t SET v = 11 WHERE id = 1")
        .await
        .unwrap();
    let m2 = scrape(a).await;
    assert_eq!(
        metric(&m2, "qcache_invalidations_total{source=\"write\"}"),
        metric(&m1, "qcache_invalidations_total{source=\"write\"}") + 1.0
    );
    let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
    assert_eq!(v, Some(11));
    c.query_drop("SELECT NOW() FROM t").await.unwrap();
    c.query_drop("RESET QUERY CACHE").await.unwrap();
    let m3 = scrape(a).await;
    assert_eq!(metric(&m3, "qcache_misses_total"), 2.0);
    assert_eq!(metric(&m3, "qcache_hits_total"), 2.0);
    assert_eq!(metric(&m3, "qcache_entries"), 0.0);
    assert_eq!(
        metric(&m3, "qcache_invalidations_total{source=\"flush\"}"),
        metric(&m2, "qcache_invalidations_total{source=\"flush\"}") + 1.0
    );
    let not_cached: f64 = m3
        .iter()
        .filter(|(k, _)| k.starts_with("qcache_not_cached_total{"))
        .map(|(_, v)| v)
        .sum();
    assert!(not_cached >= 1.0, "NOW() counted as not cached: {m3:?}");
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn health_cache_summary_and_readiness_with_a_live_upstream() {
    let schema = common::fresh_schema("adm_ready").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = admin_proxy(|_| {}).await;
    let a = admin(&proxy);
    assert_eq!(http(a, "GET", "/healthz").await.0, 200);
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 200, "{body}");
    let mut c = proxy.conn(&schema).await;
    for _ in 0..2 {
        let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    }
    let (code, body) = http(a, "GET", "/cache").await;
    assert_eq!(code, 200);
    let j: serde_json::Value = serde_json::from_str(&body).expect("/cache is JSON");
    assert_eq!(j["entries"], 1);
    assert_eq!(j["hits"], 1);
    assert_eq!(j["inserts"], 1);
    assert!(j["hit_ratio"].as_f64().is_some_and(|r| r > 0.0), "{j}");
    assert_eq!(j["binlog"]["state"], "off");
    assert_eq!(http(a, "GET", "/nope").await.0, 404);
    drop(c);
    proxy.shutdown().await;
}

/// A TCP forwarder to the test server: aborting it takes "the upstream" down, starting it
/// again on the same port brings it back, without touching the shared server.
async fn forwarder(listener: tokio::net::TcpListener, to: String) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((mut a, _)) = listener.accept().await else {
            return;
        };
        let to = to.clone();
        conns.spawn(async move {
            if let Ok(mut b) = TcpStream::connect(&to).await {
                let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
            }
        });
    }
}

#[tokio::test]
async fn readiness_follows_the_upstream() {
    let dead = format!("127.0.0.1:{}", common::free_port());
    let proxy = common::proxy_to(&dead, |c| c.admin.listen = "127.0.0.1:0".into()).await;
    let (code, body) = http(admin(&proxy), "GET", "/readyz").await;
    assert_eq!(code, 503);
    assert!(body.contains("unreachable"), "{body}");
    assert_eq!(http(admin(&proxy), "GET", "/healthz").await.0, 200);
    proxy.shutdown().await;

    // Up, down, back up on the same port.
    let db = common::db().addr();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    let task = tokio::spawn(forwarder(l, db.clone()));
    let proxy = common::proxy_to(&up.to_string(), |c| c.admin.listen = "127.0.0.1:0".into()).await;
    let a = admin(&proxy);
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 200, "{body}");
    task.abort();
    let _ = task.await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 503, "{body}");
    let l = tokio::net::TcpListener::bind(up)
        .await
        .expect("rebind the same port");
    let task = tokio::spawn(forwarder(l, db));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 200, "{body}");
    task.abort();
    proxy.shutdown().await;
}

#[tokio::test]
async fn readiness_requires_the_binlog_stream_when_it_is_on() {
    let server = common::own_server();
    let proxy = common::proxy_to(&server.addr(), |c| {
        c.admin.listen = "127.0.0.1:0".into();
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
    let a = admin(&proxy);
    let b = proxy.running.shared.binlog.clone().expect("binlog tail on");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 200, "{body}");
    let m = scrape(a).await;
    assert_eq!(metric(&m, "qcache_binlog_connected"), 1.0);
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 503, "{body}");
    proxy.running.abort().await;
}

/// A commit made directly on the server shows in the binlog metrics: the commit counter and
/// the commit-lag histogram, whose buckets add up to its count.
#[tokio::test]
async fn binlog_commits_and_their_lag_are_exported() {
    let schema = common::fresh_schema("adm_binlog").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    let proxy = admin_proxy(|c| c.invalidation.binlog = qcache::config::BinlogMode::On).await;
    let a = admin(&proxy);
    let b = proxy.running.shared.binlog.clone().expect("binlog tail on");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let before = scrape(a).await;
    let commits = metric(&before, "qcache_binlog_commits_total");
    let mut direct = common::direct_to(&schema).await;
    direct.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let mut m = scrape(a).await;
    for _ in 0..100 {
        if metric(&m, "qcache_binlog_commits_total") > commits {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        m = scrape(a).await;
    }
    assert!(
        metric(&m, "qcache_binlog_commits_total") > commits,
        "commit not counted"
    );
    let count = metric(&m, "qcache_binlog_commit_lag_seconds_count");
    assert!(count >= 1.0, "no commit in the lag histogram");
    assert_eq!(
        metric(&m, "qcache_binlog_commit_lag_seconds_bucket{le=\"+Inf\"}"),
        count
    );
    // The header timestamp has whole seconds, so on a healthy tail most commits are within
    // the 1 s bucket plus scheduling delays; a bound well above that catches units mix-ups.
    let sum = metric(&m, "qcache_binlog_commit_lag_seconds_sum");
    assert!(sum / count < 30.0, "mean commit lag {}s", sum / count);
    assert!(metric(&m, "qcache_binlog_events_total") >= count);
    proxy.shutdown().await;
}

#[tokio::test]
async fn admin_statements_for_a_privileged_user() {
    let schema = common::fresh_schema("adm_stmt").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    for _ in 0..3 {
        let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    }
    let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert_eq!(st["Qcache_hits"], "2");
    assert_eq!(st["Qcache_misses"], "1");
    assert_eq!(st["Qcache_entries"], "1");

    let rows: Vec<(String, String, u64, u64, u64, u8, String)> =
        c.query("SHOW QCACHE ENTRIES LIMIT 5").await.unwrap();
    assert_eq!(rows.len(), 1);
    let (digest, tables, bytes, hits, _age, current, sql) = &rows[0];
    assert_eq!(digest.len(), 16);
    assert_eq!(
        *digest,
        format!("{:016x}", qcache::analysis::digest(b"SELECT id FROM t"))
    );
    assert_eq!(*tables, format!("{schema}.t"));
    assert!(*bytes > 0);
    assert_eq!((*hits, *current), (2, 1));
    assert_eq!(sql, "SELECT id FROM t");

    let tables: Vec<(String, u64, u64)> = c.query("SHOW QCACHE TABLES").await.unwrap();
    let row = tables
        .iter()
        .find(|r| r.0 == format!("{schema}.t"))
        .expect("table listed");
    assert_eq!(row.2, 1);
    let before = row.1;

    c.query_drop(format!("QCACHE INVALIDATE TABLE {schema}.t"))
        .await
        .unwrap();
    let tables: Vec<(String, u64, u64)> = c.query("SHOW QCACHE TABLES").await.unwrap();
    let row = tables
        .iter()
        .find(|r| r.0 == format!("{schema}.t"))
        .unwrap();
    assert!(row.1 > before, "version bumped");
    let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    assert_eq!(
        qstatus(&mut c, "Qcache_hits").await,
        2,
        "invalidated: a miss"
    );
    // Unqualified names use the session's database.
    c.query_drop("QCACHE INVALIDATE TABLE t").await.unwrap();
    let e = c.query_drop("SHOW QCACHE NONSENSE").await.unwrap_err();
    assert_eq!(server_code(e), 1064);
    c.query_drop("FLUSH QUERY CACHE").await.unwrap();
    c.query_drop("RESET QUERY CACHE").await.unwrap();
    assert_eq!(qstatus(&mut c, "Qcache_entries").await, 0);

    // A prepared statement's entry shows its SQL, not the execute packet's bytes.
    let _: Option<i64> = c
        .exec_first("SELECT id FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    let rows: Vec<(String, String, u64, u64, u64, u8, String)> =
        c.query("SHOW QCACHE ENTRIES LIMIT 5").await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].6, "SELECT id FROM t WHERE id = ?");
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn state_changing_statements_need_reload_or_admin_users() {
    let schema = common::fresh_schema("adm_priv").await;
    let user = common::unique_name("qcnr");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"),
        ],
    )
    .await;
    let url = |p: &common::TestProxy| {
        format!("mysql://{user}:pw@{}/{schema}?prefer_socket=false", p.addr)
    };
    let proxy = common::proxy(|_| {}).await;
    let mut c = Conn::from_url(url(&proxy))
        .await
        .expect("connect as the plain user");
    for sql in [
        format!("QCACHE INVALIDATE TABLE {schema}.t"),
        "RESET QUERY CACHE".to_string(),
        "FLUSH QUERY CACHE".to_string(),
    ] {
        let e = c.query_drop(&sql).await.unwrap_err();
        match e {
            mysql_async::Error::Server(e) => {
                assert_eq!(e.code, 1227, "{sql}");
                assert_eq!(e.state, "42000");
                assert!(e.message.contains("RELOAD"), "{}", e.message);
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    // The counters are for everyone, and the session still works.
    let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert!(st.contains_key("Qcache_hits"));
    let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    drop(c);
    proxy.shutdown().await;

    let proxy = common::proxy(|cfg| cfg.admin.users = vec![user.clone()]).await;
    let mut c = Conn::from_url(url(&proxy)).await.unwrap();
    c.query_drop(format!("QCACHE INVALIDATE TABLE {schema}.t"))
        .await
        .unwrap();
    c.query_drop("RESET QUERY CACHE").await.unwrap();
    drop(c);
    proxy.shutdown().await;
    let mut d = common::direct().await;
    d.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
}

/// Every `expr` and template query in the dashboard, with where it is.
fn dashboard_queries(d: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("every panel has a title");
        assert_eq!(
            p["datasource"]["uid"], "prometheus",
            "{title}: the provisioned datasource's uid"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(!expr.trim().is_empty(), "{title}: empty query");
            out.push((title.to_string(), expr.to_string()));
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        let q = v["definition"].as_str().expect("definition").to_string();
        out.push((format!("variable {}", v["name"]), q));
    }
    out
}

/// The dashboard shipped in deploy/grafana queries only metrics qcache exports: the JSON is
/// parsed, every metric name in its queries is looked up among the samples of a running
/// qcache's `/metrics` (binlog tail and L2 on, after a hit, a miss, a read not cached, a
/// write and a commit that bypassed qcache), so a renamed metric breaks this test, not the
/// dashboard. It has binlog, L2 and process panels.
#[tokio::test]
async fn dashboard_queries_only_metrics_qcache_exports() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana");
    let text = std::fs::read_to_string(dir.join("dashboards/qcache.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let provisioned =
        std::fs::read_to_string(dir.join("provisioning/datasources/prometheus.yml")).unwrap();
    assert!(provisioned.contains("uid: prometheus"), "{provisioned}");
    let queries = dashboard_queries(&dashboard);
    let name = regex::Regex::new(r"\b(?:qcache|process)_[a-z0-9_]+").unwrap();
    let mut wanted: Vec<(String, String)> = Vec::new();
    for (title, expr) in &queries {
        let names: Vec<&str> = name.find_iter(expr).map(|m| m.as_str()).collect();
        assert!(!names.is_empty(), "{title}: no qcache metric in {expr}");
        wanted.extend(names.into_iter().map(|n| (n.to_string(), title.clone())));
    }
    for family in ["qcache_binlog_", "qcache_l2_", "process_"] {
        assert!(
            wanted.iter().any(|(n, _)| n.starts_with(family)),
            "no panel shows {family}* metrics"
        );
    }
    let mut ids: Vec<u64> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().expect("panel id"))
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "panel ids are unique");

    let schema = common::fresh_schema("adm_dash").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    // L2 on too, so that its panels' metrics are exported.
    let redis = common::redis::Redis::start();
    let proxy = admin_proxy(|c| {
        c.invalidation.binlog = qcache::config::BinlogMode::On;
        c.l2.mode = qcache::config::L2Mode::On;
        c.l2.url = qcache::config::L2Url::One(redis.url());
    })
    .await;
    let b = proxy.running.shared.binlog.clone().expect("binlog tail on");
    assert!(b.wait_until_connected(Duration::from_secs(20)).await);
    let mut c = proxy.conn(&schema).await;
    for _ in 0..2 {
        let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    }
    let _: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    c.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let mut direct = common::direct_to(&schema).await;
    direct.query_drop("INSERT INTO t VALUES (2)").await.unwrap();
    let a = admin(&proxy);
    let mut m = scrape(a).await;
    for _ in 0..100 {
        if m.get("qcache_binlog_commits_total").copied().unwrap_or(0.0) > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        m = scrape(a).await;
    }
    let exported: std::collections::BTreeSet<&str> = m
        .keys()
        .map(|k| k.split_once('{').map_or(k.as_str(), |(n, _)| n))
        .collect();
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(n, _)| !exported.contains(n.as_str()))
        .map(|(n, title)| format!("{n} (panel {title:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics qcache does not export: {missing:?}; exported: {exported:?}"
    );
    drop(c);
    proxy.shutdown().await;
}

/// Cached statement text carries literals (here an email and a token) and other users' rows:
/// a user without RELOAD gets error 1227 for every admin statement that lists cached data,
/// each asked on a fresh connection so that no earlier answer (the per-session RELOAD
/// memo) decides for it. A user with RELOAD (not in `admin.users`) is answered, with the
/// other user's statement in it.
#[tokio::test]
async fn listing_cached_data_needs_reload_or_admin_users() {
    let schema = common::fresh_schema("adm_list").await;
    let plain = common::unique_name("qcpl");
    let reloader = common::unique_name("qcrl");
    setup(
        &schema,
        &[
            "CREATE TABLE accounts (email VARCHAR(64) PRIMARY KEY, token VARCHAR(64))",
            "INSERT INTO accounts VALUES ('alice@example.com', 's3cr3t-token')",
            &format!("CREATE USER '{plain}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{plain}'@'%'"),
            &format!("CREATE USER '{reloader}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{reloader}'@'%'"),
            &format!("GRANT RELOAD ON *.* TO '{reloader}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let url = |user: &str| {
        format!(
            "mysql://{user}:pw@{}/{schema}?prefer_socket=false",
            proxy.addr
        )
    };
    // root caches a statement whose text holds the secret.
    let mut root = proxy.conn(&schema).await;
    let secret_sql = "SELECT token FROM accounts WHERE email = 'alice@example.com'";
    for _ in 0..2 {
        let _: Option<String> = root.query_first(secret_sql).await.unwrap();
    }
    assert_eq!(qstatus(&mut root, "Qcache_hits").await, 1);

    let listings = [
        "SHOW QCACHE ENTRIES",
        "SHOW QCACHE ENTRIES LIMIT 10",
        "show qcache tables",
        "SHOW QCACHE TABLES;",
    ];
    for sql in listings {
        let mut c = Conn::from_url(url(&plain))
            .await
            .expect("plain user connects");
        match c.query_iter(sql).await.map(drop) {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.state.as_str()), (1227, "42000"), "{sql}");
                assert!(e.message.contains("RELOAD"), "{sql}: {}", e.message);
                assert!(!e.message.contains("alice"), "{sql}: {}", e.message);
            }
            other => panic!("{sql}: a user without RELOAD was answered: {other:?}"),
        }
        // Denied, not disconnected.
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM accounts")
            .await
            .unwrap();
        assert_eq!(n, Some(1), "{sql}");
    }

    let mut r = Conn::from_url(url(&reloader))
        .await
        .expect("RELOAD user connects");
    let rows: Vec<(String, String, u64, u64, u64, u8, String)> =
        r.query("SHOW QCACHE ENTRIES").await.unwrap();
    assert!(rows.iter().any(|row| row.6 == secret_sql), "{rows:?}");
    let tables: Vec<(String, u64, u64)> = r.query("SHOW QCACHE TABLES").await.unwrap();
    assert!(
        tables.iter().any(|t| t.0 == format!("{schema}.accounts")),
        "{tables:?}"
    );
    drop((root, r));
    proxy.shutdown().await;
    let mut d = common::direct().await;
    for u in [&plain, &reloader] {
        d.query_drop(format!("DROP USER '{u}'@'%'")).await.unwrap();
    }
}

/// Runs `sql` three times; returns (hits, inserts) added.
async fn thrice(c: &mut Conn, sql: &str) -> (u64, u64) {
    let h0 = qstatus(c, "Qcache_hits").await;
    let i0 = qstatus(c, "Qcache_inserts").await;
    for _ in 0..3 {
        let _: Vec<i64> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    (
        qstatus(c, "Qcache_hits").await - h0,
        qstatus(c, "Qcache_inserts").await - i0,
    )
}

fn rules(text: &str) -> Vec<qcache::rules::Rule> {
    qcache::config::Config::from_toml(text, "rules")
        .expect("rules parse")
        .rules
}

#[tokio::test]
async fn every_rule_match_kind_and_action() {
    let schema = common::fresh_schema("adm_rules").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT PRIMARY KEY)",
            "CREATE TABLE items (id INT PRIMARY KEY)",
            "CREATE TABLE misc (id INT PRIMARY KEY)",
            "INSERT INTO orders VALUES (1)",
            "INSERT INTO items VALUES (1)",
            "INSERT INTO misc VALUES (1)",
            "CREATE VIEW v_open AS SELECT id FROM orders",
        ],
    )
    .await;
    let digest = qcache::analysis::digest(b"SELECT id FROM misc WHERE id = 1");
    let text = format!(
        r#"
        [[rules]]
        schema = "{schema}"
        table = "ord*"
        action = "never"
        [[rules]]
        regex = "(?i)/\\* nocache \\*/"
        action = "never"
        [[rules]]
        digest = "{digest:016x}"
        action = "never"
        [[rules]]
        user = "nobody_such"
        action = "never"
        [[rules]]
        table = "items"
        action = "cache"
        ttl = "300ms"
        "#
    );
    let rs = rules(&text);
    let proxy = common::proxy(move |c| c.rules = rs).await;
    let mut c = proxy.conn(&schema).await;
    // schema + table glob → never
    assert_eq!(thrice(&mut c, "SELECT id FROM orders").await, (0, 0));
    // ... also through a view over that table
    assert_eq!(thrice(&mut c, "SELECT id FROM v_open").await, (0, 0));
    // regex → never
    assert_eq!(
        thrice(&mut c, "SELECT /* nocache */ id FROM misc").await,
        (0, 0)
    );
    // digest → never, for any literal of that shape
    assert_eq!(
        thrice(&mut c, "SELECT id FROM misc WHERE id = 2").await,
        (0, 0)
    );
    // user that is not this one → no match, default caching
    assert_eq!(thrice(&mut c, "SELECT id FROM misc").await, (2, 1));
    // cache with TTL: hits, then a miss once it expired
    assert_eq!(thrice(&mut c, "SELECT id FROM items").await, (2, 1));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(thrice(&mut c, "SELECT id FROM items").await, (2, 1));
    let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert_eq!(st["Qcache_not_cached_rule"], "12", "{st:?}");
    drop(c);
    proxy.shutdown().await;

    // A user rule that matches this user.
    let who = common::db().user.clone();
    let rs = rules(&format!(
        "[[rules]]\nuser = \"{who}\"\naction = \"never\"\n"
    ));
    let proxy = common::proxy(move |c| c.rules = rs).await;
    let mut c = proxy.conn(&schema).await;
    assert_eq!(thrice(&mut c, "SELECT id FROM misc").await, (0, 0));
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn reload_changes_rules_mid_session_and_refuses_a_broken_file() {
    let schema = common::fresh_schema("adm_reload").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = admin_proxy(|_| {}).await;
    let a = admin(&proxy);
    // Without a config source there is nothing to re-read.
    assert_eq!(http(a, "POST", "/reload").await.0, 400);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qcache.toml");
    let base = proxy.running.shared.config().as_ref().clone();
    std::fs::write(&path, base.to_toml()).unwrap();
    let cli = <qcache::cli::Cli as clap::Parser>::parse_from([
        "qcache",
        "--config",
        path.to_str().unwrap(),
    ]);
    proxy.running.shared.set_reload_source(cli);

    let mut c = proxy.conn(&schema).await;
    assert_eq!(thrice(&mut c, "SELECT id FROM t").await, (2, 1));

    let mut never = base.clone();
    never.rules = rules(&format!(
        "[[rules]]\nschema = \"{schema}\"\ntable = \"t\"\naction = \"never\"\n"
    ));
    never.log.slow_miss = Some(Duration::from_millis(1));
    std::fs::write(&path, never.to_toml()).unwrap();
    let (code, body) = http(a, "POST", "/reload").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(proxy.running.shared.config().rules.len(), 1);
    // Same connection, new behaviour: the old entry still hits (rules apply on misses), a new
    // statement is never stored.
    assert_eq!(
        thrice(&mut c, "SELECT id FROM t WHERE id = 1").await,
        (0, 0)
    );

    std::fs::write(&path, "[cache]\nmax_bytes = \"lots\"\n").unwrap();
    let (code, body) = http(a, "POST", "/reload").await;
    assert_eq!(code, 400);
    assert!(body.contains("max_bytes"), "{body}");
    assert_eq!(
        proxy.running.shared.config().rules.len(),
        1,
        "old config kept"
    );
    std::fs::write(&path, "[[rules]]\nregex = \"(\"\naction = \"never\"\n").unwrap();
    assert_eq!(http(a, "POST", "/reload").await.0, 400);

    // A restart-only change is applied to nothing but reported.
    let mut moved = never.clone();
    moved.server.listen = "127.0.0.1:1".into();
    std::fs::write(&path, moved.to_toml()).unwrap();
    let (code, body) = http(a, "POST", "/reload").await;
    assert_eq!(code, 200);
    assert!(body.contains("server.listen changed"), "{body}");
    // The connection survived every reload.
    let v: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(v, Some(1));
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn json_log_lines_are_json() {
    let schema = common::fresh_schema("adm_json").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let d = common::db();
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qcache.toml");
    let mut cfg = common::test_config(&d.addr());
    cfg.server.listen = format!("127.0.0.1:{port}");
    cfg.log.slow_miss = Some(Duration::from_nanos(1));
    std::fs::write(&path, cfg.to_toml()).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_qcache"))
        .args(["--config", path.to_str().unwrap(), "--log-format", "json"])
        .args(["--log-level", "info"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run qcache");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "qcache did not start listening");
    let url = format!("mysql://{}@{addr}/{schema}?prefer_socket=false", d.user);
    let mut c = Conn::from_url(url)
        .await
        .expect("connect through the binary");
    for _ in 0..2 {
        let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    }
    let _ = c.query_drop("QCACHE NONSENSE").await;
    c.disconnect().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let out = child.wait_with_output().expect("qcache exits");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut messages = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        messages.push(v["message"].as_str().unwrap_or_default().to_string());
        if v["message"] == "answered with an error" {
            assert_eq!(v["code"], 1064, "{line}");
        }
        // What a session logs carries its span (id, client, user), though a hit served at
        // once runs outside it (#36): inside a command, and when it ends.
        if ["slow miss", "answered with an error", "session ended"]
            .contains(&v["message"].as_str().unwrap_or_default())
        {
            assert_eq!(v["span"]["name"], "session", "{line}");
            assert_eq!(v["span"]["user"], d.user.as_str(), "{line}");
            assert!(v["span"]["id"].is_u64(), "{line}");
        }
    }
    for want in [
        "session started",
        "session ended",
        "slow miss",
        "answered with an error",
    ] {
        assert!(
            messages.iter().any(|m| m == want),
            "no {want:?} in {messages:?}"
        );
    }
}

/// SIGHUP re-reads the file: a new `log.level` applies without a restart, and sessions open
/// across the reload keep working.
#[tokio::test]
async fn sighup_applies_a_new_log_level() {
    let schema = common::fresh_schema("adm_hup").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let d = common::db();
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qcache.toml");
    let mut cfg = common::test_config(&d.addr());
    cfg.server.listen = format!("127.0.0.1:{port}");
    cfg.log.level = "warn".into();
    std::fs::write(&path, cfg.to_toml()).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_qcache"))
        .args(["--config", path.to_str().unwrap(), "--log-format", "json"])
        .env_remove("QCACHE_LOG_LEVEL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run qcache");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "qcache did not start listening");
    let url = format!("mysql://{}@{addr}/{schema}?prefer_socket=false", d.user);
    let mut quiet = Conn::from_url(&url)
        .await
        .expect("connect through the binary");
    let _: Option<i64> = quiet.query_first("SELECT id FROM t").await.unwrap();

    cfg.log.level = "info".into();
    std::fs::write(&path, cfg.to_toml()).unwrap();
    let hup = |sig: &str| {
        std::process::Command::new("kill")
            .arg(sig)
            .arg(child.id().to_string())
            .status()
            .expect("kill runs")
    };
    hup("-HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut loud = Conn::from_url(&url)
        .await
        .expect("connect after the reload");
    let _: Option<i64> = loud.query_first("SELECT id FROM t").await.unwrap();
    // The session opened before the reload is still served.
    let _: Option<i64> = quiet.query_first("SELECT id FROM t").await.unwrap();
    loud.disconnect().await.unwrap();
    quiet.disconnect().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    hup("-TERM");
    let out = child.wait_with_output().expect("qcache exits");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let messages: Vec<String> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            v["message"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    let started = messages.iter().filter(|m| *m == "session started").count();
    assert_eq!(
        started, 1,
        "only the session after the reload logs at info: {messages:?}"
    );
    assert!(
        messages.iter().any(|m| m == "configuration reloaded"),
        "{messages:?}"
    );
}

/// Issue #39 item 3: a reload that points qcache at another server must never serve the
/// first server's entries. It is refused (a restart starts clean), and what qcache serves
/// afterwards matches the server it relays to.
#[tokio::test]
async fn a_reload_to_another_upstream_never_serves_the_old_servers_entries() {
    let other = common::own_server();
    let schema = common::fresh_schema("adm_upstream").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    // The same schema and table on the other server, with a different row.
    let mut o = Conn::from_url(other.url("")).await.unwrap();
    o.query_drop(format!("CREATE DATABASE `{schema}`"))
        .await
        .unwrap();
    o.query_drop(format!("CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"))
        .await
        .unwrap();
    o.query_drop(format!("INSERT INTO `{schema}`.t VALUES (2)"))
        .await
        .unwrap();
    drop(o);

    let proxy = admin_proxy(|_| {}).await;
    let a = admin(&proxy);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qcache.toml");
    let base = proxy.running.shared.config().as_ref().clone();
    std::fs::write(&path, base.to_toml()).unwrap();
    let cli = <qcache::cli::Cli as clap::Parser>::parse_from([
        "qcache",
        "--config",
        path.to_str().unwrap(),
    ]);
    proxy.running.shared.set_reload_source(cli);

    let mut c = proxy.conn(&schema).await;
    assert_eq!(thrice(&mut c, "SELECT id FROM t").await, (2, 1));
    drop(c);

    let mut moved = base.clone();
    moved.server.upstream = other.addr();
    std::fs::write(&path, moved.to_toml()).unwrap();
    let (code, body) = http(a, "POST", "/reload").await;
    let upstream = proxy.running.shared.config().server.upstream.clone();
    // Whatever the reload did, a read answers with the rows of the server qcache now relays to.
    let want: i64 = if upstream == other.addr() { 2 } else { 1 };
    let mut c = proxy.conn(&schema).await;
    let got: Vec<i64> = c.query("SELECT id FROM t").await.unwrap();
    assert_eq!(got, vec![want], "reload answered {code}: {body}");
    // This build refuses the move, saying what changed and that a restart applies it.
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("server.upstream") && body.contains("restart"),
        "{body}"
    );
    assert_eq!(upstream, base.server.upstream);
    drop(c);
    proxy.shutdown().await;
}

/// Issue #39 item 2: with a wrong password for qcache's own account, reads are not cached
/// for a reason that names the cause (not `unknown_table`), and `SHOW QCACHE STATUS` and
/// `/readyz` say which account failed and the server's message.
#[tokio::test]
async fn a_wrong_password_for_qcaches_own_account_is_named_where_operators_look() {
    let schema = common::fresh_schema("adm_account").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let proxy = admin_proxy(|c| c.invalidation.password = "not-the-password".into()).await;
    let a = admin(&proxy);
    let mut c = proxy.conn(&schema).await;
    for _ in 0..3 {
        let got: Vec<i64> = c.query("SELECT id FROM t").await.unwrap();
        assert_eq!(got, vec![1]);
    }
    // The binary protocol reaches the same rule.
    for _ in 0..2 {
        let got: Vec<i64> = c.exec("SELECT id FROM t WHERE id = ?", (1,)).await.unwrap();
        assert_eq!(got, vec![1]);
    }
    let rows = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert_eq!(
        rows.get("Qcache_not_cached_unknown_table"),
        None,
        "{rows:?}"
    );
    assert_eq!(
        rows.get("Qcache_not_cached_catalog_unavailable")
            .map(String::as_str),
        Some("5"),
        "{rows:?}"
    );
    // And QCACHE EXPLAIN says the same.
    let ex: Vec<(String, Option<String>)> =
        c.query("QCACHE EXPLAIN SELECT id FROM t").await.unwrap();
    assert!(
        ex.iter().any(|(_, v)| v
            .as_deref()
            .is_some_and(|v| v.contains("catalog_unavailable"))),
        "{ex:?}"
    );
    let catalog = rows
        .get("Qcache_catalog")
        .cloned()
        .unwrap_or_else(|| panic!("no Qcache_catalog row in {rows:?}"));
    let user = &common::db().user;
    assert!(
        catalog.contains(&format!("'{user}'")) && catalog.contains("Access denied"),
        "{catalog}"
    );
    assert!(!catalog.contains("not-the-password"), "{catalog}");
    let (code, body) = http(a, "GET", "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains(&format!("'{user}'")) && body.contains("Access denied"),
        "{body}"
    );
    assert!(body.contains("invalidation.password"), "{body}");
    drop(c);
    proxy.shutdown().await;
}

/// `QCACHE EXPLAIN` tells a user no more than the server would: for objects in a database
/// the user cannot read, a table, a MERGE view, a TEMPTABLE view, a DEFINER view and a missing
/// name all get the server's own answer to `EXPLAIN` of the same statement (1142, alike
/// but for the name), never a verdict that tells them apart.
#[tokio::test]
async fn explain_reveals_nothing_the_server_would_not() {
    let hidden = common::fresh_schema("adm_hidden").await;
    let mine = common::fresh_schema("adm_mine").await;
    let low = common::unique_name("qclow");
    setup(
        &hidden,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "CREATE ALGORITHM=MERGE VIEW vm AS SELECT id, v FROM t",
            "CREATE ALGORITHM=TEMPTABLE VIEW vt AS SELECT id, v FROM t",
            "CREATE SQL SECURITY DEFINER VIEW vd AS SELECT id FROM t",
            &format!("CREATE USER '{low}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{mine}`.* TO '{low}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut via = Conn::from_url(format!(
        "mysql://{low}:pw@{}/{mine}?prefer_socket=false",
        proxy.addr
    ))
    .await
    .unwrap();
    let mut direct = Conn::from_url(format!(
        "mysql://{low}:pw@{}/{mine}?prefer_socket=false",
        common::db().addr()
    ))
    .await
    .unwrap();
    let mut seen = Vec::new();
    for obj in ["t", "vm", "vt", "vd", "missing"] {
        let stmt = format!("SELECT id FROM `{hidden}`.{obj} WHERE id = 1");
        let answer = |r: Result<(), mysql_async::Error>| match r {
            Err(mysql_async::Error::Server(e)) => {
                let name = format!("`{obj}`");
                format!(
                    "{} {} {}",
                    e.code,
                    e.state,
                    e.message.replace(&name, "`OBJ`")
                )
            }
            other => format!("{other:?}"),
        };
        let server = answer(direct.query_drop(format!("EXPLAIN {stmt}")).await);
        let qcache = answer(via.query_drop(format!("QCACHE EXPLAIN {stmt}")).await);
        assert_eq!(qcache, server, "{obj}");
        seen.push(qcache);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    assert!(seen[0].starts_with("1142 "), "{seen:?}");
    // What the user may read is still explained.
    via.query_drop(format!("CREATE TABLE `{mine}`.own (id INT)"))
        .await
        .unwrap_err();
    setup(&mine, &["CREATE TABLE own (id INT)"]).await;
    let rows: Vec<mysql_async::Row> = via
        .query("QCACHE EXPLAIN SELECT id FROM own")
        .await
        .unwrap();
    assert!(!rows.is_empty());
}

/// What a Prometheus setup expects of any process: `qcache_build_info` and the standard
/// `process_*` metrics (resident memory, open descriptors, CPU, start time), read from /proc.
/// And `QCACHE INVALIDATE TABLE` of a table the server does not have is its error 1146, not OK.
#[tokio::test]
async fn build_info_process_metrics_and_unknown_tables() {
    let schema = common::fresh_schema("adm_proc").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    let proxy = admin_proxy(|_| {}).await;
    let m = scrape(admin(&proxy)).await;
    let info: Vec<(&String, &f64)> = m
        .iter()
        .filter(|(k, _)| k.starts_with("qcache_build_info{"))
        .collect();
    assert_eq!(info.len(), 1, "{info:?}");
    assert!(info[0]
        .0
        .contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))));
    assert_eq!(*info[0].1, 1.0);
    let get = |n: &str| *m.get(n).unwrap_or_else(|| panic!("{n} not exported"));
    assert!(get("process_resident_memory_bytes") > 1e6);
    assert!(get("process_open_fds") >= 3.0);
    assert!(get("process_cpu_seconds_total") >= 0.0);
    let started = get("process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started > now - 3600.0 && started <= now + 1.0,
        "{started} vs {now}"
    );

    let mut c = proxy.conn(&schema).await;
    c.query_drop(format!("QCACHE INVALIDATE TABLE {schema}.t"))
        .await
        .unwrap();
    for sql in [
        format!("QCACHE INVALIDATE TABLE {schema}.nope"),
        "QCACHE INVALIDATE TABLE nope".to_string(),
    ] {
        let e = c.query_drop(&sql).await.unwrap_err();
        assert_eq!(server_code(e), 1146, "{sql}");
    }
    // The session goes on.
    let _: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
    proxy.shutdown().await;
}

/// Issue #38 part 2: a DDL's OK goes to the client without waiting for the catalog's reload
/// (slowed by 300 ms here, `Fault::SlowCatalogReload`); until it lands, a read of what the
/// DDL named is not cached for the reason `ddl_pending` on every path that plans a read —
/// text, prepared execute, `QCACHE EXPLAIN` — and once it lands the read is served.
#[cfg(debug_assertions)]
#[tokio::test]
async fn a_ddls_ok_does_not_wait_and_its_tables_are_ddl_pending_until_the_reload_lands() {
    use qcache::faults::{Fault, SLOW_CATALOG_RELOAD};
    let schema = common::fresh_schema("adm_ddl_pending").await;
    let proxy = admin_proxy(|_| {}).await;
    let shared = &proxy.running.shared;
    let mut c = proxy.conn(&schema).await;
    // The first load, before the fault slows reloads down.
    let loading = std::time::Instant::now();
    while !shared.catalog.is_loaded() {
        assert!(loading.elapsed() < Duration::from_secs(10), "no catalog");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shared
        .cache
        .versions()
        .faults
        .set(Fault::SlowCatalogReload, true);
    let started = std::time::Instant::now();
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    assert!(
        started.elapsed() < SLOW_CATALOG_RELOAD,
        "the CREATE's OK waited {:?} for the catalog",
        started.elapsed()
    );
    assert!(shared.catalog.ddl_pending_any());
    c.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    for _ in 0..2 {
        let got: Vec<i64> = c.query("SELECT id FROM t").await.unwrap();
        assert_eq!(got, vec![1]);
        let got: Vec<i64> = c.exec("SELECT id FROM t WHERE id = ?", (1,)).await.unwrap();
        assert_eq!(got, vec![1]);
    }
    let ex: Vec<(String, Option<String>)> =
        c.query("QCACHE EXPLAIN SELECT id FROM t").await.unwrap();
    assert!(
        ex.iter()
            .any(|(_, v)| v.as_deref().is_some_and(|v| v.contains("ddl_pending"))),
        "{ex:?}"
    );
    // Still inside the window: the reads above were relayed, not waited for.
    assert!(shared.catalog.ddl_pending_any(), "the test ran too slowly");
    let rows = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert_eq!(
        rows.get("Qcache_not_cached_ddl_pending")
            .map(String::as_str),
        Some("4"),
        "{rows:?}"
    );
    assert_eq!(shared.cache.stats().hits(), 0);
    proxy.catalog_settled().await;
    for _ in 0..2 {
        let got: Vec<i64> = c.query("SELECT id FROM t").await.unwrap();
        assert_eq!(got, vec![1]);
    }
    assert_eq!(shared.cache.stats().hits(), 1);
    drop(c);
    proxy.shutdown().await;
}

/// Sessions placed by load (the default `server.placement`): light sessions all sit on the
/// first of two session threads (no cross-thread wake-ups), as `Qcache_worker_sessions`
/// tells; the session threads' counts leave with the sessions, and a session moved between
/// them (debug shuffle) is counted once, where it went, and in `Qcache_session_moves`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_sessions_share_one_session_thread() {
    qcache::workers::start(2, qcache::config::Placement::Load);
    let schema = common::fresh_schema("adm_workers").await;
    setup(&schema, &["CREATE TABLE t (id INT PRIMARY KEY)"]).await;
    let proxy = admin_proxy(|_| {}).await;
    // Where sessions go unshuffled is what this test asks: QCACHE_TEST_SHUFFLE=1 turns the
    // shuffle on for every test proxy, so it is turned off here (and on below, briefly).
    #[cfg(debug_assertions)]
    qcache::workers::shuffle_sessions(false);
    let mut conns = Vec::new();
    for _ in 0..6 {
        let mut c = proxy.conn(&schema).await;
        c.query_drop("SELECT id FROM t").await.unwrap();
        conns.push(c);
    }
    let mut c = proxy.conn(&schema).await;
    let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
    assert_eq!(st["Qcache_worker_sessions"], "7,0");
    for c in conns {
        c.disconnect().await.unwrap();
    }
    // Closed sessions leave their thread's count as the server sees them go.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
        if st["Qcache_worker_sessions"] == "1,0" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{st:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    #[cfg(debug_assertions)]
    {
        let moves = qstatus(&mut c, "Qcache_session_moves").await;
        qcache::workers::shuffle_sessions(true);
        c.query_drop("SELECT id FROM t").await.unwrap();
        let st = status_rows(&mut c, "SHOW QCACHE STATUS").await;
        qcache::workers::shuffle_sessions(false);
        // Where it is depends on how many loop tops saw the switch on (one may before the
        // SELECT is read: the answer to the last SHOW reaches the client first); that it
        // is counted once, wherever it went, does not.
        let per: Vec<u64> = st["Qcache_worker_sessions"]
            .split(',')
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(per.iter().sum::<u64>(), 1, "{per:?}");
        assert!(qstatus(&mut c, "Qcache_session_moves").await > moves);
    }
}
