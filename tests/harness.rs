//! Tests of the test harness itself: the private server is configured the way the other
//! tests rely on, schemas are isolated, the CLI helper works, and the proxy helper connects.

mod common;

use mysql_async::prelude::Queryable;

#[tokio::test]
async fn private_server_answers() {
    let db = common::db();
    assert!(db.port > 0);
    assert_eq!(db.addr(), format!("{}:{}", db.host, db.port));
    let mut conn = common::direct().await;
    let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    let current: Option<String> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(current.as_deref(), Some("test"));
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn private_server_is_not_the_machines_server() {
    // The machine's own MariaDB on :3306 must never be what the tests use unless asked for.
    if std::env::var(common::ENV_URL).is_err() {
        let db = common::db();
        assert_ne!(db.port, 3306);
        let dir = db.datadir.as_ref().expect("a private server has a datadir");
        assert!(dir.join("binlog.index").exists(), "{}", dir.display());
        let mut conn = common::direct().await;
        let datadir: Option<String> = conn.query_first("SELECT @@datadir").await.unwrap();
        let datadir = datadir.unwrap();
        assert_eq!(
            datadir.trim_end_matches('/'),
            dir.display().to_string().trim_end_matches('/')
        );
    }
}

#[tokio::test]
async fn server_is_configured_as_tests_need() {
    let mut conn = common::direct().await;
    let row: Option<(i64, String, i64, i64)> = conn
        .query_first("SELECT @@log_bin, @@binlog_format, @@local_infile, @@max_allowed_packet")
        .await
        .unwrap();
    let (log_bin, format, local_infile, max_packet) = row.unwrap();
    assert_eq!(
        log_bin, 1,
        "binlog must be on for the binlog invalidation tests"
    );
    assert_eq!(format, "ROW");
    assert_eq!(
        local_infile, 1,
        "LOAD DATA LOCAL INFILE tests need local_infile"
    );
    assert_eq!(
        max_packet,
        64 * 1024 * 1024,
        "20 MiB blob tests need a large packet"
    );
    let server_id: Option<i64> = conn.query_first("SELECT @@server_id").await.unwrap();
    assert_ne!(
        server_id,
        Some(0),
        "a binlog replica needs a non-zero server_id upstream"
    );
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn fresh_schemas_are_distinct_and_usable() {
    let a = common::fresh_schema("harness").await;
    let b = common::fresh_schema("harness").await;
    assert_ne!(a, b);
    let mut conn = common::direct_to(&a).await;
    conn.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        .await
        .unwrap();
    conn.query_drop("INSERT INTO t VALUES (1, 'x')")
        .await
        .unwrap();
    let v: Option<String> = conn.query_first("SELECT v FROM t").await.unwrap();
    assert_eq!(v.as_deref(), Some("x"));
    let in_b: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '{b}'"
        ))
        .await
        .unwrap();
    assert_eq!(in_b, Some(0));
    conn.disconnect().await.unwrap();
}

#[test]
fn unique_names_are_valid_identifiers() {
    let long = "x".repeat(200);
    for prefix in ["plain", "with-dash and space", long.as_str()] {
        let n = common::unique_name(prefix);
        assert!(n.len() <= 64, "{n}");
        assert!(
            n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{n}"
        );
    }
    assert_ne!(common::unique_name("a"), common::unique_name("a"));
}

#[test]
fn db_is_shared_across_threads() {
    // Several tests call db() at once on different threads; all must get the same server.
    let ports: Vec<u16> = (0..4)
        .map(|_| std::thread::spawn(|| common::db().port))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert!(ports.windows(2).all(|w| w[0] == w[1]), "{ports:?}");
}

#[test]
fn mariadb_cli_reaches_the_server() {
    let out = common::mariadb_cli(
        &common::db().addr(),
        &["--batch", "--skip-column-names", "test"],
        "SELECT 40 + 2;\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
}

#[tokio::test]
async fn proxy_relays_select_1() {
    let proxy = common::proxy(|_| {}).await;
    assert!(proxy.addr.ip().is_loopback());
    assert_ne!(proxy.addr.port(), 0);
    let mut conn = proxy.conn("test").await;
    let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    // The session must stay on TCP through the proxy: had mysql_async switched to the
    // server's Unix socket (prefer_socket), the server would see the client as "localhost".
    let host: Option<String> = conn
        .query_first("SELECT host FROM information_schema.processlist WHERE id = CONNECTION_ID()")
        .await
        .unwrap();
    let host = host.unwrap();
    assert!(host.starts_with("127.0.0.1:"), "{host}");
    conn.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn own_server_is_separate_and_can_be_killed() {
    let own = common::own_server();
    assert_ne!(own.port, common::db().port);
    let opts = mysql_async::Opts::from_url(&own.url("test")).unwrap();
    let mut conn = mysql_async::Conn::new(opts).await.unwrap();
    let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    own.kill();
    assert!(conn.query_drop("SELECT 1").await.is_err());
    // The shared server is untouched.
    let mut shared = common::direct().await;
    shared.query_drop("SELECT 1").await.unwrap();
}
