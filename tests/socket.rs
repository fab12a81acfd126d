//! The Unix-socket listener (`server.socket`), as mysqld's `--socket`: clients (mysql_async,
//! the `mariadb` CLI) log in and hit the cache over it, alongside TCP or instead of it; TLS
//! is not offered on it (and `tls.client.require` is met by it); `max_connections` counts
//! both listeners; the file is removed at shutdown; a stale file is replaced at start, a
//! live socket or a file that is not a socket never is.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::BytesMut;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use qcache::protocol::codec::{self, Packet};
use qcache::protocol::packets::cap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// A fresh directory and the socket path in it (kept short: a path has at most 107 bytes).
fn socket_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("qcs")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let path = dir.path().join("qcache.sock");
    (dir, path)
}

fn opts(socket: &Path, db: &str) -> OptsBuilder {
    let d = common::db();
    OptsBuilder::default()
        .socket(Some(socket.to_str().unwrap()))
        .user(Some(d.user.clone()))
        .pass((!d.password.is_empty()).then(|| d.password.clone()))
        .db_name((!db.is_empty()).then(|| db.to_string()))
}

async fn over_socket(socket: &Path, db: &str) -> mysql_async::Result<Conn> {
    tokio::time::timeout(common::CONNECT_TIMEOUT, Conn::new(opts(socket, db)))
        .await
        .expect("connect over the socket in time")
}

async fn qstatus(c: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, String)> = c
        .query_first(format!("SHOW STATUS LIKE '{name}'"))
        .await
        .unwrap();
    row.map(|r| r.1.parse().unwrap()).unwrap_or(0)
}

#[tokio::test]
async fn mysql_async_over_the_socket_logs_in_and_hits_alongside_tcp() {
    let schema = common::fresh_schema("sock_hit").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 'one')")
        .await
        .unwrap();
    let (_dir, path) = socket_path();
    let p = path.clone();
    let proxy = common::proxy(move |c| c.server.socket = p.display().to_string()).await;
    assert_eq!(proxy.running.socket.as_deref(), Some(path.as_path()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o777, "anyone may connect, as to mysqld's");

    let mut s = over_socket(&path, &schema)
        .await
        .expect("login over the socket");
    let direct: Vec<(i32, String)> = d.query("SELECT id, v FROM t").await.unwrap();
    for _ in 0..3 {
        let rows: Vec<(i32, String)> = s.query("SELECT id, v FROM t").await.unwrap();
        assert_eq!(rows, direct);
    }
    assert_eq!(qstatus(&mut s, "Qcache_hits").await, 2);
    // Prepared statements and a write's invalidation, over the socket.
    let v: Option<String> = s
        .exec_first("SELECT v FROM t WHERE id = ?", (1,))
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("one"));
    s.query_drop("UPDATE t SET v = 'uno' WHERE id = 1")
        .await
        .unwrap();
    let rows: Vec<(i32, String)> = s.query("SELECT id, v FROM t").await.unwrap();
    assert_eq!(rows, vec![(1, "uno".to_string())]);

    // TCP still works, and shares the cache.
    let mut t = proxy.conn(&schema).await;
    let rows: Vec<(i32, String)> = t.query("SELECT id, v FROM t").await.unwrap();
    assert_eq!(rows, vec![(1, "uno".to_string())]);
    assert_eq!(qstatus(&mut t, "Qcache_hits").await, 3);
    drop((s, t));
    proxy.shutdown().await;
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

#[tokio::test]
async fn socket_only_when_listen_is_empty() {
    let (_dir, path) = socket_path();
    let p = path.clone();
    let proxy = common::proxy(move |c| {
        c.server.listen = String::new();
        c.server.socket = p.display().to_string();
    })
    .await;
    assert!(proxy.running.addr.ip().is_unspecified() && proxy.running.addr.port() == 0);
    let mut s = over_socket(&path, "").await.expect("login over the socket");
    let one: Option<i64> = s.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    drop(s);
    proxy.running.abort().await;
    assert!(!path.exists(), "removed on a fast stop too");
}

/// The `mariadb` CLI with `--socket`, as a user on the host runs it.
#[tokio::test]
async fn the_mariadb_cli_over_the_socket() {
    let schema = common::fresh_schema("sock_cli").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (7)").await.unwrap();
    let (_dir, path) = socket_path();
    let p = path.clone();
    let proxy = common::proxy(move |c| c.server.socket = p.display().to_string()).await;
    let user = common::db().user.clone();
    let sock = path.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("mariadb")
            .args([
                "--no-defaults",
                &format!("--socket={sock}"),
                &format!("--user={user}"),
                "--connect-timeout=10",
                "--batch",
                "--skip-column-names",
                &schema,
                "-e",
                "SELECT id FROM t; SELECT id FROM t; SHOW STATUS LIKE 'Qcache_hits'",
            ])
            .output()
            .expect("run the mariadb client")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, ["7", "7", "Qcache_hits\t1"], "{stdout}");
    proxy.shutdown().await;
}

/// A self-signed certificate and key in `dir`, for qcache's client leg.
fn certificate(dir: &Path) -> (String, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    (cert.display().to_string(), key.display().to_string())
}

async fn read_packet(s: &mut UnixStream, buf: &mut BytesMut) -> Packet {
    loop {
        if let Some(p) = codec::decode(buf, 1 << 20).expect("framing") {
            return p;
        }
        let n = tokio::time::timeout(common::CONNECT_TIMEOUT, s.read_buf(buf))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "closed without an answer");
    }
}

/// With client TLS configured: TCP offers it, the socket does not, and an SSL request sent
/// over the socket anyway gets a clear error; with `tls.client.require`, a plain client on
/// the socket is accepted (as require_secure_transport treats a socket as secure) while a
/// plain TCP client is refused.
#[tokio::test]
async fn tls_is_not_offered_on_the_socket_and_require_is_met_by_it() {
    let (dir, path) = socket_path();
    let (cert, key) = certificate(dir.path());
    let p = path.clone();
    let proxy = common::proxy(move |c| {
        c.server.socket = p.display().to_string();
        c.tls.client.cert = cert;
        c.tls.client.key = key;
        c.tls.client.require = true;
    })
    .await;

    let mut tcp = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let mut buf = BytesMut::new();
    let g = loop {
        if let Some(p) = codec::decode(&mut buf, 1 << 20).unwrap() {
            break p;
        }
        assert!(tcp.read_buf(&mut buf).await.unwrap() > 0);
    };
    let caps = qcache::protocol::handshake::parse_greeting(&g.payload)
        .unwrap()
        .capabilities;
    assert_ne!(caps & cap::SSL, 0, "TCP offers TLS");
    drop(tcp);

    let mut s = UnixStream::connect(&path).await.unwrap();
    let mut buf = BytesMut::new();
    let g = read_packet(&mut s, &mut buf).await;
    let caps = qcache::protocol::handshake::parse_greeting(&g.payload)
        .unwrap()
        .capabilities;
    assert_eq!(caps & cap::SSL, 0, "the socket does not offer TLS");
    // An SSL request regardless: capabilities, max packet, charset, 23 zero bytes.
    let mut req = Vec::new();
    let asked = cap::PROTOCOL_41 | cap::SECURE_CONNECTION | cap::SSL | cap::PLUGIN_AUTH;
    req.extend_from_slice(&asked.to_le_bytes());
    req.extend_from_slice(&(1u32 << 24).to_le_bytes());
    req.push(45);
    req.extend_from_slice(&[0; 23]);
    let mut out = BytesMut::new();
    codec::encode(1, &req, &mut out);
    s.write_all(&out).await.unwrap();
    let err = read_packet(&mut s, &mut buf).await;
    let text = String::from_utf8_lossy(&err.payload);
    assert_eq!(err.payload[0], 0xff, "an ERR: {text}");
    assert!(text.contains("not offered on the Unix socket"), "{text}");

    // require: plain over the socket is fine, plain over TCP is refused.
    let mut c = over_socket(&path, "").await.expect("plain over the socket");
    c.ping().await.unwrap();
    let e = Conn::new(
        OptsBuilder::from_opts(mysql_async::Opts::from_url(&proxy.url("")).unwrap())
            .prefer_socket(false),
    )
    .await
    .expect_err("plain TCP refused under require");
    assert!(
        matches!(e, mysql_async::Error::Server(ref s) if s.code == 3159),
        "{e:?}"
    );
    drop(c);
    proxy.shutdown().await;
}

/// `max_connections` counts clients of both listeners: the one over the limit gets MySQL's
/// 1040 whichever way it came.
#[tokio::test]
async fn max_connections_counts_both_listeners() {
    let (_dir, path) = socket_path();
    let p = path.clone();
    let proxy = common::proxy(move |c| {
        c.server.socket = p.display().to_string();
        c.server.max_connections = 1;
    })
    .await;
    let held = over_socket(&path, "").await.expect("the first client");
    for via_socket in [true, false] {
        let e = if via_socket {
            over_socket(&path, "").await.map(drop)
        } else {
            Conn::from_url(proxy.url("")).await.map(drop)
        };
        match e {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1040, "{e:?}"),
            other => panic!("socket={via_socket}: expected 1040, got {other:?}"),
        }
    }
    drop(held);
    proxy.shutdown().await;
}

/// A socket file left by a killed qcache is replaced; a live socket and a regular file are
/// errors that name the setting, and neither is touched.
#[tokio::test]
async fn stale_socket_replaced_live_socket_and_other_files_refused() {
    let (_dir, path) = socket_path();
    // Stale: bound, then closed without removing the file (as a SIGKILL leaves it).
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let p = path.clone();
    let proxy = common::proxy(move |c| c.server.socket = p.display().to_string()).await;
    let mut s = over_socket(&path, "").await.expect("login after replacing");
    s.ping().await.unwrap();

    // Live: a second qcache on the same path fails to start and leaves it alone.
    let mut cfg = common::test_config(&common::db().addr());
    cfg.server.socket = path.display().to_string();
    let err = match qcache::server::start(cfg).await {
        Ok(_) => panic!("a second qcache took a live socket"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("another process is listening"), "{err}");
    assert!(err.contains("server.socket"), "{err}");
    s.ping().await.expect("the first qcache still serves");
    drop(s);
    proxy.shutdown().await;

    // Not a socket: never deleted.
    std::fs::write(&path, "precious").unwrap();
    let mut cfg = common::test_config(&common::db().addr());
    cfg.server.socket = path.display().to_string();
    let err = match qcache::server::start(cfg).await {
        Ok(_) => panic!("a regular file was replaced"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}
