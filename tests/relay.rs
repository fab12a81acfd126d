//! The transparent relay: every command, every type, large packets, auth paths and faults,
//! through the real proxy against a real MariaDB, with real clients.

mod common;
mod rawclient;

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Row, Value};
use qcache::protocol::packets::{self, com};
use qcache::protocol::response::Expect;
use rawclient::Raw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The `mariadb` CLI off the test's runtime thread, which the in-process proxy needs.
async fn cli(addr: &str, args: &[&str], stdin: &str) -> std::process::Output {
    let (addr, stdin) = (addr.to_string(), stdin.to_string());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        common::mariadb_cli(&addr, &args, &stdin)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn every_type_and_null_match_direct_in_both_protocols() {
    let schema = common::fresh_schema("relay_types").await;
    common::setup_types(&schema).await;
    let proxy =
        common::proxy(|c| c.cache.query_cache_type = qcache::config::QueryCacheType::Off).await;
    let mut via = proxy.conn(&schema).await;
    let mut direct = common::direct_to(&schema).await;
    let q = "SELECT * FROM types ORDER BY id";
    let a: Vec<Row> = via.query(q).await.unwrap();
    let b: Vec<Row> = direct.query(q).await.unwrap();
    assert_eq!(a.len(), 2);
    let av: Vec<Vec<Value>> = a.into_iter().map(|r| r.unwrap()).collect();
    let bv: Vec<Vec<Value>> = b.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(av, bv, "text protocol differs");
    assert!(
        av[1][1..].iter().all(|v| *v == Value::NULL),
        "NULL row: {:?}",
        av[1]
    );
    let a: Vec<Row> = via.exec(q, ()).await.unwrap();
    let b: Vec<Row> = direct.exec(q, ()).await.unwrap();
    let av: Vec<Vec<Value>> = a.into_iter().map(|r| r.unwrap()).collect();
    let bv: Vec<Vec<Value>> = b.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(av, bv, "binary protocol differs");
    // NULL parameters in the binary protocol
    let n: Vec<(i32, Option<i32>)> = via
        .exec(
            "SELECT id, ti FROM types WHERE ti <=> ? OR id = ?",
            (Value::NULL, 1),
        )
        .await
        .unwrap();
    assert_eq!(n.len(), 2);
    proxy.shutdown().await;
}

#[tokio::test]
async fn raw_bytes_identical_to_direct() {
    let schema = common::fresh_schema("relay_bytes").await;
    common::setup_types(&schema).await;
    let proxy =
        common::proxy(|c| c.cache.query_cache_type = qcache::config::QueryCacheType::Off).await;
    for deprecate_eof in [false, true] {
        let mut via = Raw::connect(&proxy.addr_string(), "root", &schema, deprecate_eof).await;
        let mut direct = Raw::connect(&common::db().addr(), "root", &schema, deprecate_eof).await;
        for q in [
            "SELECT * FROM types ORDER BY id",
            "SELECT 1",
            "UPDATE types SET ti = ti WHERE id = 1",
            "SELECT nosuchcolumn FROM types",
            "SHOW WARNINGS",
        ] {
            let (a, ra) = via.query(q).await;
            let (b, _) = direct.query(q).await;
            assert_eq!(
                Raw::wire(&a),
                Raw::wire(&b),
                "{q} (deprecate_eof={deprecate_eof})"
            );
            assert!(ra.is_done());
        }
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn blob_of_20_mib_both_protocols() {
    let schema = common::fresh_schema("relay_blob").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE b (id INT PRIMARY KEY, data LONGBLOB)")
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let blob: Vec<u8> = (0..20 * 1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    c.exec_drop("INSERT INTO b VALUES (1, ?)", (blob.clone(),))
        .await
        .unwrap();
    // text protocol: the blob inlined as a hex literal, so the COM_QUERY itself is > 16 MiB
    let hex: String = blob[..9 * 1024 * 1024]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    c.query_drop(format!("INSERT INTO b VALUES (2, x'{hex}')"))
        .await
        .unwrap();
    let t: Option<Vec<u8>> = c
        .query_first("SELECT data FROM b WHERE id = 1")
        .await
        .unwrap();
    assert!(t.as_deref() == Some(&blob[..]), "text read differs");
    let b: Option<Vec<u8>> = c
        .exec_first("SELECT data FROM b WHERE id = ?", (1,))
        .await
        .unwrap();
    assert!(b.as_deref() == Some(&blob[..]), "binary read differs");
    let two: Option<Vec<u8>> = c
        .query_first("SELECT data FROM b WHERE id = 2")
        .await
        .unwrap();
    assert!(two.as_deref() == Some(&blob[..9 * 1024 * 1024]));
    proxy.shutdown().await;
}

#[tokio::test]
async fn stored_procedure_with_several_result_sets() {
    let schema = common::fresh_schema("relay_proc").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE PROCEDURE p() BEGIN SELECT 1 AS a; SELECT 2 AS b, 3 AS c; END")
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let mut result = c.query_iter("CALL p()").await.unwrap();
    let first: Vec<i64> = result.collect().await.unwrap();
    let second: Vec<(i64, i64)> = result.collect().await.unwrap();
    drop(result);
    assert_eq!(first, vec![1]);
    assert_eq!(second, vec![(2, 3)]);
    // the connection is still in step afterwards
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    proxy.shutdown().await;
}

#[tokio::test]
async fn load_data_local_infile_with_the_cli() {
    let schema = common::fresh_schema("relay_infile").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE l (id INT, name VARCHAR(20))")
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    let rows: String = (0..5000).map(|i| format!("{i},name{i}\n")).collect();
    std::fs::write(&file, rows).unwrap();
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE l FIELDS TERMINATED BY ','; SELECT COUNT(*) FROM l;",
        file.display()
    );
    let out = cli(
        &proxy.addr_string(),
        &["--local-infile=1", "-N", "-B", &schema],
        &sql,
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5000");
    proxy.shutdown().await;
}

#[tokio::test]
async fn change_user_and_reset_connection() {
    let schema = common::fresh_schema("relay_chuser").await;
    let user = common::unique_name("u");
    let mut d = common::direct().await;
    d.query_drop(format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw1'"))
        .await
        .unwrap();
    d.query_drop(format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"))
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    c.query_drop("SET @x = 42").await.unwrap();
    assert!(c.reset().await.unwrap());
    let x: Option<Option<i64>> = c.query_first("SELECT @x").await.unwrap();
    assert_eq!(x, Some(None), "user variable survived COM_RESET_CONNECTION");
    c.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some(user.clone()))
            .with_pass(Some("pw1".into()))
            .with_db_name(Some(schema.clone())),
    )
    .await
    .unwrap();
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
    assert_eq!(who, Some(format!("{user}@%")));
    proxy.shutdown().await;
}

#[tokio::test]
async fn wrong_password_reaches_the_client() {
    let proxy = common::proxy(|_| {}).await;
    let url = format!("mysql://root:wrong@{}/test?prefer_socket=false", proxy.addr);
    let err = mysql_async::Conn::from_url(url).await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1045, "{e:?}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    proxy.shutdown().await;
}

/// ed25519 (MariaDB's auth_ed25519 plugin) is relayed like any plugin: the server asks for
/// it by auth switch and the `mariadb` CLI answers; a wrong password is the server's 1045.
#[tokio::test]
async fn ed25519_accounts_log_in_through_the_proxy() {
    let mut admin = common::direct().await;
    admin
        .query_drop("INSTALL PLUGIN IF NOT EXISTS ed25519 SONAME 'auth_ed25519'")
        .await
        .expect("the server's auth_ed25519 plugin (Debian package mariadb-server)");
    let user = common::unique_name("ed");
    admin
        .query_drop(format!(
            "CREATE USER '{user}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('s3cret-ed')"
        ))
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let pass = "--password=s3cret-ed".to_string();
    let u = format!("--user={user}");
    let out = cli(
        &proxy.addr_string(),
        &[&u, &pass, "-N", "-B", "-e", "SELECT CURRENT_USER(), 6 * 7"],
        "",
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{user}@%\t42\n")
    );
    let out = cli(
        &proxy.addr_string(),
        &[&u, "--password=wrong", "-e", "SELECT 1"],
        "",
    )
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1045") && err.contains("Access denied"),
        "{err}"
    );
    admin
        .query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn upstream_down_gives_a_clear_error_naming_qcache() {
    let port = common::free_port();
    let upstream = format!("127.0.0.1:{port}");
    let proxy = common::proxy_to(&upstream, |_| {}).await;
    let out = cli(&proxy.addr_string(), &["-e", "SELECT 1"], "").await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Can't connect") && err.contains("qcache") && err.contains(&upstream),
        "{err}"
    );
    // and through mysql_async
    let e = mysql_async::Conn::from_url(proxy.url("test"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("qcache"), "{e}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn connection_limit_answers_1040_and_others_continue() {
    let proxy = common::proxy(|c| c.server.max_connections = 2).await;
    let mut a = proxy.conn("test").await;
    let _b = proxy.conn("test").await;
    let url = proxy.url("test");
    let err = mysql_async::Conn::from_url(url).await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1040, "{e:?}"),
        other => panic!("expected ERR 1040, got {other:?}"),
    }
    let one: Option<i64> = a.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    proxy.shutdown().await;
}

/// Reads until the proxy closes; true when it did within the time limit.
async fn closed_within(tcp: &mut tokio::net::TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn malformed_and_oversized_pre_auth_packets_are_disconnected() {
    let proxy = common::proxy(|c| c.server.pre_auth_max_packet = 4096).await;
    // garbage instead of a handshake response
    let mut t = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let _ = rawclient::read_greeting(&mut t).await;
    t.write_all(&[5, 0, 0, 1, 1, 2, 3, 4, 5]).await.unwrap();
    assert!(closed_within(&mut t, Duration::from_secs(5)).await);
    // a header announcing a packet over the pre-auth limit
    let mut t = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let _ = rawclient::read_greeting(&mut t).await;
    t.write_all(&[0xff, 0xff, 0x0f, 1]).await.unwrap();
    t.write_all(&vec![0u8; 8192]).await.unwrap_or(());
    assert!(closed_within(&mut t, Duration::from_secs(5)).await);
    // an old-protocol (pre-4.1) response
    let mut t = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let _ = rawclient::read_greeting(&mut t).await;
    t.write_all(&[6, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
    assert!(closed_within(&mut t, Duration::from_secs(5)).await);
    // a client that never answers the greeting is cut off at auth_timeout (10 s default is
    // too slow for a test; covered in the robustness tests with a short timeout)
    let mut ok = proxy.conn("test").await;
    let one: Option<i64> = ok.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    proxy.shutdown().await;
}

#[tokio::test]
async fn stalled_client_during_auth_is_cut_off() {
    let proxy = common::proxy(|c| c.server.auth_timeout = Duration::from_millis(500)).await;
    let mut t = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let _ = rawclient::read_greeting(&mut t).await;
    assert!(closed_within(&mut t, Duration::from_secs(5)).await);
    proxy.shutdown().await;
}

#[tokio::test]
async fn tls_request_without_tls_gets_a_clear_error() {
    let proxy = common::proxy(|_| {}).await;
    let mut t = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let _ = rawclient::read_greeting(&mut t).await;
    let mut p = vec![0u8; 32];
    p[0..4].copy_from_slice(
        &(qcache::protocol::packets::cap::PROTOCOL_41 | qcache::protocol::packets::cap::SSL)
            .to_le_bytes(),
    );
    let mut out = bytes::BytesMut::new();
    qcache::protocol::codec::encode(1, &p, &mut out);
    t.write_all(&out).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = t.read(&mut buf).await.unwrap();
    let e = packets::parse_err(&buf[4..n]).expect("an ERR packet");
    // 1105 on the wire, 2026 in the text: libmariadb clients cannot read client codes.
    assert_eq!(e.code, 1105);
    assert!(
        e.message.contains("TLS") && e.message.contains("[2026]"),
        "{}",
        e.message
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn cursor_fetch_field_list_statistics_ping_and_friends() {
    let schema = common::fresh_schema("relay_cmds").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(10))")
        .await
        .unwrap();
    d.query_drop("INSERT INTO c VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e')")
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    for deprecate_eof in [false, true] {
        let mut r = Raw::connect(&proxy.addr_string(), "root", &schema, deprecate_eof).await;
        // prepare, execute with a read-only cursor, fetch in pieces
        let mut p = vec![com::STMT_PREPARE];
        p.extend_from_slice(b"SELECT id, v FROM c ORDER BY id");
        let (_, resp) = r.command(&p, Expect::Prepare).await;
        let (id, cols, params) = resp.prepared.expect("prepared");
        assert_eq!((cols, params), (2, 0));
        let mut e = vec![com::STMT_EXECUTE];
        e.extend_from_slice(&id.to_le_bytes());
        e.push(1); // CURSOR_TYPE_READ_ONLY
        e.extend_from_slice(&1u32.to_le_bytes());
        let (_, resp) = r.command(&e, Expect::Results).await;
        assert!(resp.cursor, "cursor opened");
        let mut rows = 0;
        loop {
            let mut f = vec![com::STMT_FETCH];
            f.extend_from_slice(&id.to_le_bytes());
            f.extend_from_slice(&2u32.to_le_bytes());
            let (_, resp) = r.command(&f, Expect::Rows).await;
            rows += resp.rows;
            if resp.last_status.unwrap_or(0) & packets::status::LAST_ROW_SENT != 0 {
                break;
            }
            assert!(rows <= 5);
        }
        assert_eq!(rows, 5);
        // reset and close
        let mut s = vec![com::STMT_RESET];
        s.extend_from_slice(&id.to_le_bytes());
        let (pk, _) = r.command(&s, Expect::OnePacket).await;
        assert_eq!(pk[0].payload[0], 0);
        let mut s = vec![com::STMT_CLOSE];
        s.extend_from_slice(&id.to_le_bytes());
        r.send(0, &s).await;
        // COM_FIELD_LIST
        let mut f = vec![com::FIELD_LIST];
        f.extend_from_slice(b"c\0");
        let (pk, resp) = r.command(&f, Expect::FieldList).await;
        assert!(!resp.error);
        assert_eq!(pk.len(), 3, "two column definitions and the end");
        // COM_STATISTICS answers a bare string
        let (pk, _) = r.command(&[com::STATISTICS], Expect::OnePacket).await;
        assert!(String::from_utf8_lossy(&pk[0].payload).contains("Uptime"));
        // COM_PING, COM_SET_OPTION, COM_INIT_DB
        let (pk, _) = r.command(&[com::PING], Expect::OnePacket).await;
        assert_eq!(pk[0].payload[0], 0);
        let (pk, _) = r.command(&[com::SET_OPTION, 1, 0], Expect::OnePacket).await;
        assert!(matches!(pk[0].payload[0], 0x00 | 0xfe));
        let mut i = vec![com::INIT_DB];
        i.extend_from_slice(schema.as_bytes());
        let (pk, _) = r.command(&i, Expect::OnePacket).await;
        assert_eq!(pk[0].payload[0], 0);
        // an unknown command: the server's answer decides
        let (pk, resp) = r.command(&[0x60], Expect::Results).await;
        assert!(resp.error, "{:?}", pk);
        // and the session is still in step
        let (pk, _) = r.query("SELECT COUNT(*) FROM c").await;
        assert_eq!(pk.len(), if deprecate_eof { 4 } else { 5 });
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn mariadb_execute_direct_with_last_statement_id() {
    let proxy = common::proxy(|_| {}).await;
    let mut r = Raw::connect(&proxy.addr_string(), "root", "test", true).await;
    // pipelined: PREPARE and EXECUTE(0xFFFFFFFF) sent together, as MariaDB Connector/C does
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(b"SELECT ? + 1");
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&u32::MAX.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    e.push(0); // null bitmap
    e.push(1); // new params bound
    e.extend_from_slice(&[0x08, 0]); // LONGLONG
    e.extend_from_slice(&41i64.to_le_bytes());
    r.send(0, &p).await;
    r.send(0, &e).await;
    let (_, prep) = r.response(Expect::Prepare).await;
    assert!(prep.prepared.is_some());
    let (pk, resp) = r.response(Expect::Results).await;
    assert!(!resp.error, "{:?}", pk);
    assert_eq!(resp.rows, 1);
    proxy.shutdown().await;
}

#[tokio::test]
async fn kill_from_another_session_and_upstream_death_close_cleanly() {
    let proxy = common::proxy(|_| {}).await;
    let mut victim = proxy.conn("test").await;
    let server_id: Option<u64> = victim.query_first("SELECT CONNECTION_ID()").await.unwrap();
    let mut other = proxy.conn("test").await;
    // COM_PROCESS_KILL through the proxy
    other
        .query_drop(format!("KILL {}", server_id.unwrap()))
        .await
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(10), victim.query_drop("SELECT 1")).await;
    assert!(
        res.expect("no hang").is_err(),
        "the killed session must fail"
    );
    let one: Option<i64> = other.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    proxy.shutdown().await;
}

#[tokio::test]
async fn binlog_dump_is_relayed_as_a_stream() {
    let proxy = common::proxy(|_| {}).await;
    let mut setup = common::direct().await;
    setup
        .query_drop("CREATE TABLE IF NOT EXISTS binlog_probe (id INT)")
        .await
        .unwrap();
    let conn = proxy.conn("test").await;
    let req = mysql_async::BinlogStreamRequest::new(4242);
    let mut stream = conn.get_binlog_stream(req).await.unwrap();
    use futures::StreamExt;
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("stream open")
        .expect("a valid event");
    let _ = first.header().event_type();
    // A dump session never ends by itself; a graceful stop would wait for its deadline.
    proxy.running.abort().await;
}

#[tokio::test]
async fn the_cli_works_through_the_proxy() {
    let proxy = common::proxy(|_| {}).await;
    let out = cli(
        &proxy.addr_string(),
        &["-N", "-B", "test"],
        "SELECT 1; SELECT 'a' UNION SELECT 'b'; SHOW DATABASES LIKE 'test'; DO 1;\n",
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\na\nb\ntest\n");
    proxy.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_lets_an_open_transaction_finish() {
    let schema = common::fresh_schema("relay_drain").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let proxy = common::proxy(|c| c.server.shutdown_timeout = Duration::from_secs(10)).await;
    let mut c = proxy.conn(&schema).await;
    let mut idle = proxy.conn(&schema).await;
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let stopping = tokio::spawn(proxy.running.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // the idle session was closed; the one in a transaction may finish it
    assert!(idle.query_drop("SELECT 1").await.is_err());
    c.query_drop("INSERT INTO t VALUES (2)").await.unwrap();
    c.query_drop("COMMIT").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("shutdown finishes")
        .unwrap();
    let n: Option<i64> = d.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(n, Some(2));
}

/// The session as a client sees it: who, where, its variables, its temporary table, its
/// SQL prepared statement, its transaction, and a read of `t` twice (a fill and a hit
/// through qcache).
async fn session_view(c: &mut mysql_async::Conn) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT CURRENT_USER(), USER(), DATABASE(), @x, @@session.sql_mode, @@in_transaction",
        "SELECT COUNT(*) FROM tt",
        "EXECUTE s",
        "SELECT id FROM t ORDER BY id",
        "SELECT id FROM t ORDER BY id",
    ] {
        out.push(match c.query::<Row, _>(sql).await {
            Ok(rows) => format!(
                "{sql}: {:?}",
                rows.into_iter()
                    .map(|r| r.unwrap().into_iter().map(|v| v.as_sql(true)).collect())
                    .collect::<Vec<Vec<String>>>()
            ),
            Err(mysql_async::Error::Server(e)) => format!("{sql}: error {}", e.code),
            Err(e) => format!("{sql}: {e}"),
        });
    }
    out
}

/// Builds a session's state, then a COM_CHANGE_USER that the server refuses: its error
/// code, and the session as seen after it.
async fn failed_change_user(
    c: &mut mysql_async::Conn,
    opts: mysql_async::ChangeUserOpts,
) -> (String, Vec<String>) {
    for sql in [
        "SET @x = 42",
        "SET SESSION sql_mode = 'ANSI_QUOTES'",
        "CREATE TEMPORARY TABLE tt (a INT)",
        "PREPARE s FROM 'SELECT 7'",
        "SELECT id FROM t ORDER BY id",
        "BEGIN",
        "INSERT INTO t VALUES (100)",
    ] {
        c.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let err = match c.change_user(opts).await {
        Ok(()) => "accepted".to_string(),
        Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
        Err(e) => format!("{e}"),
    };
    (err, session_view(c).await)
}

/// Issue #35, class 7: a COM_CHANGE_USER the server refuses (wrong password, unknown user,
/// an account whose plugin the client does not speak) leaves the server's connection open
/// and usable, as the old user, its default database kept and the rest of the session reset.
/// Through qcache the same: the server's error relayed, the session usable, and what qcache
/// follows of it (variables, temporary tables, prepared statements, transaction) as the
/// server has it. Before the fix qcache closed the client's connection after the error.
#[tokio::test]
async fn a_failed_change_user_keeps_the_session_as_the_server_does() {
    // A server of its own: for an unknown user MariaDB answers with a switch to a plugin
    // of its choosing among those loaded, and another test of this binary loads ed25519,
    // which mysql_async cannot speak.
    let server = common::own_server();
    let schema = common::unique_name("relay_chfail");
    let user = common::unique_name("cu");
    let mut d = mysql_async::Conn::from_url(server.url("")).await.unwrap();
    for sql in [
        format!("CREATE DATABASE `{schema}`"),
        format!("CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"),
        format!("INSERT INTO `{schema}`.t VALUES (1), (2)"),
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'right'"),
        format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"),
    ] {
        d.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let proxy = common::proxy_to(&server.addr(), |_| {}).await;
    let kinds = [
        ("wrong password", user.clone(), "wrong"),
        ("unknown user", common::unique_name("nobody"), "x"),
    ];
    for (what, u, pw) in kinds {
        let opts = || {
            mysql_async::ChangeUserOpts::default()
                .with_user(Some(u.clone()))
                .with_pass(Some(pw.to_string()))
                .with_db_name(Some(schema.clone()))
        };
        let mut direct = mysql_async::Conn::from_url(server.url(&schema))
            .await
            .unwrap();
        let want = failed_change_user(&mut direct, opts()).await;
        let mut via = proxy.conn(&schema).await;
        let got = failed_change_user(&mut via, opts()).await;
        println!("{what}: directly {want:?}");
        assert_eq!(got, want, "{what}: through qcache vs directly");
        assert!(want.0.starts_with("error"), "{what}: {want:?}");
    }
    proxy.shutdown().await;
}

/// The raw COM_CHANGE_USER of class 7 with an authentication switch: the account uses
/// ed25519, the client offers mysql_native_password, the server switches plugins and
/// refuses the client's answer. The client's connection stays usable, as the old user.
#[tokio::test]
async fn a_change_user_refused_after_an_auth_switch_keeps_the_session() {
    let schema = common::fresh_schema("relay_chsw").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)",
        ],
    )
    .await;
    let mut admin = common::direct().await;
    admin
        .query_drop("INSTALL PLUGIN IF NOT EXISTS ed25519 SONAME 'auth_ed25519'")
        .await
        .expect("the server's auth_ed25519 plugin");
    let user = common::unique_name("sw");
    admin
        .query_drop(format!(
            "CREATE USER '{user}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('pw')"
        ))
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let mut seen = Vec::new();
    for addr in [common::db().addr(), proxy.addr_string()] {
        let mut c = Raw::connect(&addr, "root", &schema, true).await;
        let (_, r) = c.query("SET @x = 5").await;
        assert!(!r.error);
        let (_, r) = c.query("SELECT id FROM t").await;
        assert!(!r.error);
        let mut p = vec![com::CHANGE_USER];
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(20);
        p.extend_from_slice(&[7u8; 20]);
        p.extend_from_slice(schema.as_bytes());
        p.push(0);
        p.extend_from_slice(&[33, 0]);
        p.extend_from_slice(b"mysql_native_password\0");
        c.send(0, &p).await;
        let switch = c.read().await.expect("an auth switch request");
        assert_eq!(switch.payload.first(), Some(&0xfe), "{addr}: {switch:?}");
        assert!(
            switch.payload.starts_with(b"\xfeclient_ed25519\0"),
            "{addr}: {switch:?}"
        );
        c.send(switch.seq.wrapping_add(1), &[9u8; 64]).await;
        let err = c.read().await.expect("the server's answer");
        assert_eq!(err.payload.first(), Some(&0xff), "{addr}: {err:?}");
        let code = u16::from_le_bytes([err.payload[1], err.payload[2]]);
        let mut view = vec![code.to_string()];
        for sql in [
            "SELECT CURRENT_USER(), DATABASE(), @x",
            "SELECT id FROM t",
            "SELECT id FROM t",
        ] {
            view.push(raw_answer(&mut c, sql).await);
        }
        seen.push(view);
    }
    assert_eq!(seen[1], seen[0], "through qcache vs directly");
    proxy.shutdown().await;
}

/// A text query's answer packets through a raw client, or how it ended when the connection
/// closed instead.
async fn raw_answer(c: &mut Raw, sql: &str) -> String {
    use qcache::protocol::response::{Response, Step};
    let mut p = vec![com::QUERY];
    p.extend_from_slice(sql.as_bytes());
    c.send(0, &p).await;
    let mut r = Response::new(Expect::Results, c.deprecate_eof());
    let mut out = Vec::new();
    loop {
        let Some(p) = c.read().await else {
            return format!("{sql}: the connection closed after {out:?}");
        };
        let step = r.feed(&p.payload).expect("well-formed response");
        out.push(p.payload.to_vec());
        if step == Step::Done {
            return format!("{sql}: {out:?}");
        }
    }
}

/// A statement over the server's `max_allowed_packet`, as a query, a prepare and a
/// parameter's long data: the server answers 1153 (SQLSTATE 08S01) and closes while the rest is still being written;
/// through qcache the client gets the same error and the same close, never a bare lost
/// connection. A server of its own with a 1 MiB limit, so that a 24 MiB statement (far more
/// than the sockets buffer) is over it: a 70 MiB one against the shared server's 64 MiB
/// takes a debug build half a minute to scan.
#[tokio::test]
async fn oversize_statement_gets_the_servers_error() {
    let db = common::own_server_with(&["--max-allowed-packet=1M".to_string()]);
    let schema = "test";
    let proxy = common::proxy_to(&db.addr(), |_| {}).await;
    let mut sql = b"SELECT LENGTH('".to_vec();
    sql.resize(sql.len() + 24 * 1024 * 1024, b'a');
    sql.extend_from_slice(b"')");
    for cmd in [com::QUERY, com::STMT_PREPARE, com::STMT_SEND_LONG_DATA] {
        let mut payload = vec![cmd];
        if cmd == com::STMT_SEND_LONG_DATA {
            // Statement 1, parameter 0: the server reads no further than the size.
            payload.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
        }
        payload.extend_from_slice(&sql);
        let mut seen = Vec::new();
        for addr in [db.addr(), proxy.addr_string()] {
            let mut r = Raw::connect(&addr, "root", schema, true).await;
            // The write may fail part way: the server stops reading at its limit.
            let _ = r.try_send(0, &payload).await;
            let answer = tokio::time::timeout(Duration::from_secs(30), r.read())
                .await
                .expect("an answer or a close, not a hang");
            let err = answer.map(|p| {
                let p = &p.payload;
                assert_eq!(
                    p.first(),
                    Some(&0xff),
                    "not an ERR: {:?}",
                    &p[..p.len().min(16)]
                );
                let code = u16::from_le_bytes([p[1], p[2]]);
                (code, String::from_utf8_lossy(&p[3..]).into_owned())
            });
            let closed = tokio::time::timeout(Duration::from_secs(30), r.read())
                .await
                .expect("a close, not a hang")
                .is_none();
            seen.push((err, closed));
        }
        assert_eq!(
            seen[0], seen[1],
            "command {cmd}: direct, then through qcache"
        );
        let (err, closed) = &seen[0];
        assert_eq!(err.as_ref().map(|e| e.0), Some(1153), "{err:?}");
        assert!(err.as_ref().unwrap().1.starts_with("#08S01"), "{err:?}");
        assert!(closed);
    }
    proxy.shutdown().await;
}

/// adversary18: the commands qcache relays as they came (`Route::Relay(Expect)`) and those
/// whose answer it follows (COM_INIT_DB, COM_DROP_DB of the default database) answer through
/// qcache as directly, byte for byte, on a plain and a compressed client leg; a cached read
/// after each answers as directly too.
#[tokio::test]
async fn adversary18_relayed_commands_answer_as_directly() {
    use qcache::protocol::compress::Algorithm;
    let schema = common::fresh_schema("adv18relay").await;
    let other = format!("{schema}_o");
    common::setup(
        &schema,
        &[
            "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(8))",
            "INSERT INTO c VALUES (1,'a'),(2,'b'),(3,'c')",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let direct = common::db().addr();
    let with = |cmd: u8, rest: &[u8]| [&[cmd][..], rest].concat();
    for alg in [None, Some(Algorithm::Zlib)] {
        for deprecate_eof in [false, true] {
            let mut seen: Vec<Vec<(u8, Vec<u8>)>> = Vec::new();
            for addr in [direct.clone(), proxy.addr_string()] {
                let mut d = common::direct_to("").await;
                d.query_drop(format!("DROP DATABASE IF EXISTS `{other}`"))
                    .await
                    .unwrap();
                d.query_drop(format!("CREATE DATABASE `{other}`"))
                    .await
                    .unwrap();
                d.query_drop(format!("CREATE TABLE `{other}`.c (id INT, v INT)"))
                    .await
                    .unwrap();
                d.query_drop(format!("INSERT INTO `{other}`.c VALUES (9, 9)"))
                    .await
                    .unwrap();
                let _ = d.disconnect().await;
                let mut r =
                    Raw::connect_compressed(&addr, "root", &schema, deprecate_eof, alg).await;
                let mut out = Vec::new();
                let mut note = |pk: Vec<qcache::protocol::codec::Packet>| {
                    out.extend(pk.into_iter().map(|p| (p.seq, p.payload.to_vec())));
                };
                let read = "SELECT id, v FROM c ORDER BY id";
                for _ in 0..2 {
                    note(r.query(read).await.0);
                }
                note(r.command(&[], Expect::OnePacket).await.0);
                note(r.command(&[0x60], Expect::Results).await.0);
                note(
                    r.command(&with(com::FIELD_LIST, b"c\0"), Expect::FieldList)
                        .await
                        .0,
                );
                note(
                    r.command(&with(com::FIELD_LIST, b"nosuch\0"), Expect::FieldList)
                        .await
                        .0,
                );
                note(
                    r.command(&with(com::FIELD_LIST, b"c\0v%"), Expect::FieldList)
                        .await
                        .0,
                );
                note(r.command(&[com::PING], Expect::OnePacket).await.0);
                note(
                    r.command(
                        &with(com::STMT_RESET, &77u32.to_le_bytes()),
                        Expect::OnePacket,
                    )
                    .await
                    .0,
                );
                let mut f = with(com::STMT_FETCH, &77u32.to_le_bytes());
                f.extend_from_slice(&1u32.to_le_bytes());
                note(r.command(&f, Expect::Rows).await.0);
                note(r.query(read).await.0);
                // COM_INIT_DB refused, then accepted: the read follows the default database
                note(
                    r.command(&with(com::INIT_DB, b"nosuch_adv18"), Expect::OnePacket)
                        .await
                        .0,
                );
                note(r.query(read).await.0);
                note(
                    r.command(&with(com::INIT_DB, other.as_bytes()), Expect::OnePacket)
                        .await
                        .0,
                );
                for _ in 0..2 {
                    note(r.query(read).await.0);
                }
                note(r.query("SELECT DATABASE()").await.0);
                // COM_DROP_DB of the default database: no default database after it
                note(
                    r.command(&with(com::DROP_DB, other.as_bytes()), Expect::OnePacket)
                        .await
                        .0,
                );
                note(r.query("SELECT DATABASE()").await.0);
                note(r.query(read).await.0);
                note(
                    r.command(&with(com::INIT_DB, schema.as_bytes()), Expect::OnePacket)
                        .await
                        .0,
                );
                note(r.query(read).await.0);
                note(
                    r.command(&with(com::DROP_DB, b"nosuch_adv18"), Expect::OnePacket)
                        .await
                        .0,
                );
                note(r.query("SELECT DATABASE()").await.0);
                note(r.query(read).await.0);
                seen.push(out);
            }
            let (a, b) = (&seen[0], &seen[1]);
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                assert_eq!(
                    (x.0, String::from_utf8_lossy(&x.1)),
                    (y.0, String::from_utf8_lossy(&y.1)),
                    "packet {i} (compression {alg:?}, deprecate_eof {deprecate_eof}): directly, then through qcache"
                );
            }
            assert_eq!(a.len(), b.len(), "as many packets");
        }
    }
    proxy.shutdown().await;
}

/// adversary18: the diagnostics a hit leaves (warnings, FOUND_ROWS(), ROW_COUNT(),
/// Last_query_cost), read after hits, after COM_RESET_CONNECTION and after a read-back, on
/// a compressed client leg and a plain one, answer as directly, byte for byte.
#[tokio::test]
async fn adversary18_diagnostics_after_hits_compressed_and_plain() {
    use qcache::protocol::compress::Algorithm;
    let schema = common::fresh_schema("adv18diag").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(8))",
            "INSERT INTO c VALUES (1,'a'),(2,'b'),(3,'c')",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let direct = common::db().addr();
    let steps: &[&str] = &[
        "SELECT id, v FROM c WHERE id > 1",
        "SELECT id, v FROM c WHERE id > 1",
        "SELECT FOUND_ROWS()",
        "SELECT id, v FROM c WHERE id > 1",
        "SELECT ROW_COUNT()",
        "SELECT CAST(v AS INT) FROM c WHERE id = 1",
        "SELECT CAST(v AS INT) FROM c WHERE id = 1",
        "SHOW WARNINGS",
        "SELECT CAST(v AS INT) FROM c WHERE id = 1",
        "SELECT @@warning_count",
        "SELECT id, v FROM c WHERE id > 1",
        "SHOW SESSION STATUS LIKE 'Last_query_cost'",
        "RESET",
        "SELECT FOUND_ROWS(), ROW_COUNT(), @@warning_count",
        "SELECT id, v FROM c WHERE id > 1",
        "SHOW SESSION STATUS LIKE 'Last_query_cost'",
        "SELECT id, v FROM c WHERE id > 1 LIMIT 1",
        "SELECT FOUND_ROWS()",
        "SET @x = 1",
        "SELECT id, v FROM c WHERE id > 1 LIMIT 1",
        "SHOW WARNINGS",
        "SELECT FOUND_ROWS()",
    ];
    for alg in [None, Some(Algorithm::Zlib)] {
        let mut seen: Vec<Vec<(u8, Vec<u8>)>> = Vec::new();
        for addr in [direct.clone(), proxy.addr_string()] {
            let mut r = Raw::connect_compressed(&addr, "root", &schema, true, alg).await;
            let mut out = Vec::new();
            for s in steps {
                let pk = if *s == "RESET" {
                    r.command(&[com::RESET_CONNECTION], Expect::OnePacket)
                        .await
                        .0
                } else {
                    r.query(s).await.0
                };
                out.extend(pk.into_iter().map(|p| (p.seq, p.payload.to_vec())));
            }
            seen.push(out);
        }
        let (a, b) = (&seen[0], &seen[1]);
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            assert_eq!(
                (x.0, String::from_utf8_lossy(&x.1)),
                (y.0, String::from_utf8_lossy(&y.1)),
                "packet {i} (compression {alg:?}): directly, then through qcache"
            );
        }
        assert_eq!(a.len(), b.len(), "as many packets");
    }
    proxy.shutdown().await;
}

/// adversary18: refused logins (a wrong password, none, an unknown account, a database that
/// does not exist or is not the account's) are refused through qcache with the server's
/// code, SQLSTATE and message, as directly.
#[tokio::test]
async fn adversary18_refused_logins_as_directly() {
    let schema = common::fresh_schema("adv18login").await;
    let user = common::unique_name("adv18u");
    let mut d = common::direct().await;
    d.query_drop(format!(
        "CREATE USER '{user}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('pw')"
    ))
    .await
    .unwrap();
    d.query_drop(format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"))
        .await
        .unwrap();
    let proxy = common::proxy(|_| {}).await;
    let db = common::db();
    let cases: Vec<(String, Option<&str>, String)> = vec![
        (user.clone(), Some("wrong"), schema.clone()),
        (user.clone(), None, schema.clone()),
        ("nosuch_adv18".into(), Some("pw"), schema.clone()),
        (user.clone(), Some("pw"), "nosuch_adv18_db".into()),
        (user.clone(), Some("pw"), "mysql".into()),
        (user.clone(), Some("pw"), schema.clone()),
    ];
    for (u, pw, dbname) in cases {
        let mut outcomes = Vec::new();
        for (host, port) in [
            (db.host.clone(), db.port),
            ("127.0.0.1".to_string(), proxy.addr.port()),
        ] {
            let opts = mysql_async::OptsBuilder::default()
                .ip_or_hostname(host)
                .tcp_port(port)
                .prefer_socket(false)
                .user(Some(u.clone()))
                .pass(pw.map(str::to_string))
                .db_name(Some(dbname.clone()));
            let got = match mysql_async::Conn::new(opts).await {
                Ok(mut c) => {
                    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.unwrap();
                    let _ = c.disconnect().await;
                    format!("ok {who:?}")
                }
                Err(mysql_async::Error::Server(e)) => {
                    format!("{} {} {}", e.code, e.state, e.message)
                }
                Err(e) => format!("other: {e}"),
            };
            outcomes.push(got);
        }
        assert_eq!(
            outcomes[0], outcomes[1],
            "{u} {pw:?} {dbname}: directly, then through qcache"
        );
    }
    d.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
    proxy.shutdown().await;
}
