//! TLS on both legs: a private MariaDB with TLS driven through qcache by mysql_async and the
//! `mariadb` CLI in each combination of client/upstream TLS, and caching_sha2_password full
//! authentication in every combination against a scripted MySQL 8 upstream that plays TLS
//! and the RSA public-key exchange; and a response written into a full TLS socket.

mod common;
mod rawclient;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::BytesMut;
use mysql_async::prelude::*;
use mysql_async::{OptsBuilder, SslOpts};
use qcache::config::{Config, UpstreamTlsMode};
use qcache::protocol::codec::{self, Packet};
use qcache::protocol::packets::{self, cap, com};
use rawclient::Peer;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

/// The scripted servers here negotiate CLIENT_DEPRECATE_EOF and no MariaDB extensions.
const EOF_AS_OK: packets::ResultFormat = packets::ResultFormat {
    deprecate_eof: true,
    extended_types: false,
};

/// A self-signed certificate for 127.0.0.1 and localhost, written to files once per test
/// binary; used by qcache (client leg), by the private MariaDB, and as the CA of both.
struct Pki {
    cert: PathBuf,
    key: PathBuf,
    _dir: tempfile::TempDir,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("rcgen");
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
        Pki {
            cert,
            key,
            _dir: dir,
        }
    })
}

/// The `mariadb` CLI off the runtime's thread: the proxy under test runs on it.
async fn cli(addr: String, args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        common::mariadb_cli(&addr, &args, "")
    })
    .await
    .unwrap()
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// A private MariaDB that offers TLS with [`pki`]'s certificate.
fn tls_server() -> &'static common::TestDb {
    static DB: OnceLock<common::TestDb> = OnceLock::new();
    DB.get_or_init(|| {
        let p = pki();
        common::own_server_with(&[
            format!("--ssl-cert={}", path(&p.cert)),
            format!("--ssl-key={}", path(&p.key)),
            format!("--ssl-ca={}", path(&p.cert)),
        ])
    })
}

fn client_tls(c: &mut Config) {
    c.tls.client.cert = path(&pki().cert);
    c.tls.client.key = path(&pki().key);
}

fn upstream_tls(c: &mut Config, mode: UpstreamTlsMode) {
    c.tls.upstream.mode = mode;
    c.tls.upstream.ca = path(&pki().cert);
}

/// TLS options that trust [`pki`]'s certificate and check the name.
fn ssl_opts() -> SslOpts {
    let pem = std::fs::read(&pki().cert).unwrap();
    SslOpts::default()
        .with_root_certs(vec![pem.into()])
        .with_disable_built_in_roots(true)
}

async fn connect(
    addr: &str,
    user: &str,
    pass: &str,
    tls: bool,
) -> mysql_async::Result<mysql_async::Conn> {
    connect_compressed(addr, user, pass, tls, false).await
}

async fn connect_compressed(
    addr: &str,
    user: &str,
    pass: &str,
    tls: bool,
    compress: bool,
) -> mysql_async::Result<mysql_async::Conn> {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut b = OptsBuilder::default()
        .ip_or_hostname(host.to_string())
        .tcp_port(port.parse().unwrap())
        .user(Some(user))
        .pass(Some(pass))
        .prefer_socket(false);
    if tls {
        b = b.ssl_opts(ssl_opts());
    }
    if compress {
        b = b.compression(mysql_async::Compression::default());
    }
    tokio::time::timeout(common::CONNECT_TIMEOUT, mysql_async::Conn::new(b))
        .await
        .expect("connect timed out")
}

/// The server's view of the session's cipher: empty when its leg is plain. Read from
/// information_schema: `SHOW SESSION STATUS` describes the client's own leg through qcache.
async fn server_cipher(c: &mut mysql_async::Conn) -> String {
    let row: Option<String> = c
        .query_first(
            "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = 'SSL_CIPHER'",
        )
        .await
        .unwrap();
    row.unwrap_or_default()
}

/// `SHOW SESSION STATUS LIKE name` as the client sees it.
async fn shown_status(c: &mut mysql_async::Conn, name: &str) -> String {
    let row: Option<(String, String)> = c
        .query_first(format!("SHOW SESSION STATUS LIKE '{name}'"))
        .await
        .unwrap();
    row.map(|r| r.1).unwrap_or_default()
}

#[tokio::test]
async fn every_combination_of_client_and_upstream_tls_with_mysql_async() {
    let db = tls_server();
    for (ctls, mode) in [
        (false, UpstreamTlsMode::Disabled),
        (true, UpstreamTlsMode::Disabled),
        (false, UpstreamTlsMode::Preferred),
        (true, UpstreamTlsMode::Preferred),
        (true, UpstreamTlsMode::Required),
        (true, UpstreamTlsMode::VerifyCa),
        (false, UpstreamTlsMode::VerifyIdentity),
    ] {
        let proxy = common::proxy_to(&db.addr(), |c| {
            client_tls(c);
            upstream_tls(c, mode);
        })
        .await;
        let what = format!("client tls {ctls}, upstream {mode:?}");
        let mut c = connect(&proxy.addr_string(), &db.user, &db.password, ctls)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let cipher = server_cipher(&mut c).await;
        assert_eq!(
            !cipher.is_empty(),
            mode != UpstreamTlsMode::Disabled,
            "{what}: server cipher {cipher:?}"
        );
        // Session status describes the client's leg, as it would directly.
        let cipher = shown_status(&mut c, "Ssl_cipher").await;
        let version = shown_status(&mut c, "Ssl_version").await;
        assert_eq!(!cipher.is_empty(), ctls, "{what}: shown cipher {cipher:?}");
        assert_eq!(
            version.starts_with("TLSv1."),
            ctls,
            "{what}: shown version {version:?}"
        );
        let v: Option<i64> = c.query_first("SELECT 6 * 7").await.unwrap();
        assert_eq!(v, Some(42), "{what}");
        // COM_CHANGE_USER authenticates again over the same legs.
        c.change_user(mysql_async::ChangeUserOpts::default())
            .await
            .unwrap_or_else(|e| panic!("{what}: change_user: {e}"));
        let v: Option<i64> = c.query_first("SELECT 7 * 6").await.unwrap();
        assert_eq!(v, Some(42), "{what}");
        c.disconnect().await.unwrap();
        proxy.shutdown().await;
    }
}

/// Over 16 MiB each way inside TLS on both legs, plain and then with zlib compression
/// inside the TLS on both legs too.
/// A response written while the client's socket is full reaches the client whole. rustls
/// takes plaintext into its buffer and reports it written before its records reach the
/// socket; until 27ef109 nothing flushed them, so the tail of a response could wait in that
/// buffer for a next write that never came. A slow reader and 16 KiB socket buffers keep
/// the socket full for the whole write, so the last write finds it full.
#[tokio::test]
async fn a_response_written_into_a_full_tls_socket_arrives_whole() {
    const LEN: usize = 8 << 20;
    let mut cfg = Config::default();
    client_tls(&mut cfg);
    upstream_tls(&mut cfg, UpstreamTlsMode::VerifyIdentity);
    let tls = qcache::tls::Contexts::build(&cfg.tls).unwrap();
    let acceptor = tls.acceptor.clone().unwrap();
    let connector = tls.connector.clone().unwrap();
    // Small buffers on both ends (accepted sockets inherit the listener's): the kernel
    // cannot absorb what rustls holds back.
    let lsock = tokio::net::TcpSocket::new_v4().unwrap();
    lsock.set_send_buffer_size(16 * 1024).unwrap();
    lsock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = lsock.listen(8).unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = tokio::spawn(async move {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(16 * 1024).unwrap();
        let tcp = sock.connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut s = connector.connect(name, tcp).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        let read_all = async {
            while got < LEN {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                tokio::time::sleep(std::time::Duration::from_micros(500)).await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read_all).await;
        got
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let mut conn = qcache::transport::PacketConn::new(tcp, 1 << 30);
    conn.accept_tls(&acceptor).await.unwrap();
    conn.wbuf().extend_from_slice(&vec![b'x'; LEN]);
    conn.flush().await.unwrap();
    // The connection stays open and silent, as a session waiting for the next command.
    let got = reader.await.unwrap();
    assert_eq!(got, LEN, "the tail of the response never left qcache");
    drop(conn);
}

#[tokio::test]
async fn large_results_through_tls_on_both_legs() {
    for compress in [false, true] {
        large_result_through_tls(compress).await;
    }
}

async fn large_result_through_tls(compress: bool) {
    let db = tls_server();
    let proxy = common::proxy_to(&db.addr(), |c| {
        client_tls(c);
        upstream_tls(c, UpstreamTlsMode::VerifyIdentity);
        if compress {
            c.compression.upstream = qcache::config::UpstreamCompression::Zlib;
        }
    })
    .await;
    let mut c = connect_compressed(&proxy.addr_string(), &db.user, &db.password, true, compress)
        .await
        .unwrap();
    let row: Option<(String, String)> = c
        .query_first("SHOW SESSION STATUS LIKE 'Compression'")
        .await
        .unwrap();
    assert_eq!(row.unwrap().1, if compress { "ON" } else { "OFF" });
    assert!(!server_cipher(&mut c).await.is_empty());
    // 20 MiB in one row: crosses the 16 MiB packet boundary, inside TLS records both ways.
    let n = 20 * 1024 * 1024;
    let v: Option<Vec<u8>> = c
        .query_first(format!("SELECT REPEAT('x', {n})"))
        .await
        .unwrap();
    let v = v.unwrap();
    assert_eq!(v.len(), n);
    assert!(v.iter().all(|&b| b == b'x'));
    // and a large packet from the client
    let big = "y".repeat(17 * 1024 * 1024);
    let len: Option<u64> = c.exec_first("SELECT LENGTH(?)", (big,)).await.unwrap();
    assert_eq!(len, Some(17 * 1024 * 1024));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn require_refuses_a_plain_client_with_mysqls_error() {
    let db = tls_server();
    let proxy = common::proxy_to(&db.addr(), |c| {
        client_tls(c);
        c.tls.client.require = true;
    })
    .await;
    let err = connect(&proxy.addr_string(), &db.user, &db.password, false)
        .await
        .expect_err("a plain client must be refused");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 3159, "{e:?}");
            assert_eq!(e.state, "08004");
            assert!(e.message.contains("insecure transport"), "{e:?}");
        }
        other => panic!("expected ER_SECURE_TRANSPORT_REQUIRED, got {other:?}"),
    }
    let mut c = connect(&proxy.addr_string(), &db.user, &db.password, true)
        .await
        .unwrap();
    c.ping().await.unwrap();
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_client_that_requires_tls_from_a_qcache_without_it_gets_a_clear_error() {
    let db = tls_server();
    let proxy = common::proxy_to(&db.addr(), |_| {}).await;
    let err = connect(&proxy.addr_string(), &db.user, &db.password, true)
        .await
        .expect_err("no TLS is offered");
    assert!(
        matches!(
            err,
            mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer)
        ),
        "{err:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn upstream_tls_required_against_a_server_without_it_is_a_clear_error() {
    // The shared server of this binary has no certificate.
    let proxy = common::proxy(|c| upstream_tls(c, UpstreamTlsMode::Required)).await;
    let d = common::db();
    let err = connect(&proxy.addr_string(), &d.user, &d.password, false)
        .await
        .expect_err("refused");
    let msg = err.to_string();
    assert!(msg.contains("does not offer TLS"), "{msg}");
    proxy.shutdown().await;
}

/// The server reached under a name its certificate does not carry (127.0.0.2, forwarded to
/// the TLS server): verify_identity refuses it with an error naming the failure, while
/// verify_ca (chain only) and required accept it; a CA that did not sign the certificate
/// fails verify_ca too.
#[tokio::test]
async fn verify_identity_refuses_a_certificate_for_another_name() {
    let db = tls_server();
    let fwd = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let fwd_addr = fwd.local_addr().unwrap().to_string();
    let target = db.addr();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = fwd.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut out) = TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    let other_ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, other_ca.cert.pem()).unwrap();
    for (mode, ca, ok) in [
        (UpstreamTlsMode::VerifyIdentity, path(&pki().cert), false),
        (UpstreamTlsMode::VerifyCa, path(&pki().cert), true),
        (UpstreamTlsMode::Required, path(&pki().cert), true),
        (UpstreamTlsMode::VerifyCa, path(&other), false),
    ] {
        let proxy = common::proxy_to(&fwd_addr, |c| {
            c.tls.upstream.mode = mode;
            c.tls.upstream.ca = ca.clone();
        })
        .await;
        let what = format!("{mode:?} with CA {ca}");
        let res = connect(&proxy.addr_string(), &db.user, &db.password, false).await;
        match (res, ok) {
            (Ok(mut c), true) => {
                assert!(!server_cipher(&mut c).await.is_empty(), "{what}");
                c.disconnect().await.unwrap();
            }
            (Err(e), false) => {
                let msg = e.to_string();
                assert!(msg.contains("TLS to the server"), "{what}: {msg}");
                assert!(msg.contains(&fwd_addr), "{what}: {msg}");
            }
            (Ok(_), false) => panic!("{what}: accepted"),
            (Err(e), true) => panic!("{what}: {e}"),
        }
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn the_cli_with_and_without_tls_in_each_upstream_mode() {
    let db = tls_server();
    for (ctls, mode) in [
        (true, UpstreamTlsMode::Disabled),
        (true, UpstreamTlsMode::VerifyIdentity),
        (false, UpstreamTlsMode::Disabled),
        (false, UpstreamTlsMode::VerifyIdentity),
    ] {
        let proxy = common::proxy_to(&db.addr(), |c| {
            client_tls(c);
            upstream_tls(c, mode);
        })
        .await;
        let mut args: Vec<String> = if ctls {
            vec![
                "--ssl".into(),
                "--ssl-verify-server-cert".into(),
                format!("--ssl-ca={}", path(&pki().cert)),
            ]
        } else {
            vec!["--skip-ssl".into()]
        };
        args.extend([
            "-N".into(),
            "-e".into(),
            "SHOW SESSION STATUS LIKE 'Ssl_cipher'; SELECT 'ok'".into(),
        ]);
        let out = cli(proxy.addr_string(), args).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "client tls {ctls}, {mode:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("ok"), "{stdout}");
        // Session status describes the client's own leg, whatever the upstream leg is.
        let line = stdout.lines().next().unwrap_or_default();
        assert_eq!(
            line.split('\t').nth(1).is_some_and(|v| !v.is_empty()),
            ctls,
            "{mode:?}: {stdout}"
        );
        proxy.shutdown().await;
    }
}

// ---- caching_sha2_password full authentication against a scripted MySQL 8 ----

const SCRAMBLE: &[u8; 20] = b"0123456789abcdefghij";
const PASSWORD: &str = "s3cret pass";

fn greeting(ssl: bool) -> Vec<u8> {
    let mut caps: u32 = cap::LONG_PASSWORD
        | cap::CONNECT_WITH_DB
        | cap::PROTOCOL_41
        | cap::TRANSACTIONS
        | cap::SECURE_CONNECTION
        | cap::MULTI_RESULTS
        | cap::PLUGIN_AUTH
        | cap::PLUGIN_AUTH_LENENC_DATA
        | cap::DEPRECATE_EOF
        | cap::MARIADB_CLIENT_MYSQL;
    if ssl {
        caps |= cap::SSL;
    }
    rawclient::mysql8_greeting(caps, SCRAMBLE, "caching_sha2_password")
}

/// The scripted server's RSA key: 1024 bits keeps its generation quick in a debug build.
fn server_key() -> &'static RsaPrivateKey {
    static KEY: OnceLock<RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap())
}

/// What the scripted server saw from the tests' user `app` (qcache's schema catalog logs
/// in too, as another user): whether its leg was TLS, and the password it recovered.
type Seen = Arc<Mutex<Vec<(bool, String)>>>;

/// One MySQL 8 connection doing caching_sha2_password full authentication as the server
/// does: cleartext over TLS, the public-key request and RSA-OAEP over plain TCP.
async fn serve_mysql8(
    tcp: TcpStream,
    ssl: bool,
    clear_switch: bool,
    acceptor: TlsAcceptor,
    seen: Seen,
) {
    let mut tcp = tcp;
    let mut g = BytesMut::new();
    codec::encode(0, &greeting(ssl), &mut g);
    if tcp.write_all(&g).await.is_err() {
        return;
    }
    // The first packet is read exactly: after an SSL request the ClientHello follows at
    // once, and it belongs to the TLS layer, not to a packet buffer.
    let mut head = [0u8; 4];
    if tcp.read_exact(&mut head).await.is_err() {
        return;
    }
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut first = vec![0u8; len];
    if tcp.read_exact(&mut first).await.is_err() {
        return;
    }
    let mut resp = Packet::new(head[3], first);
    let mut tls = false;
    let mut peer = if resp.payload.len() == 32 {
        assert!(ssl, "an SSL request to a server that did not offer it");
        let stream = acceptor.accept(tcp).await.expect("server-side TLS");
        tls = true;
        let mut peer = Peer::new(stream);
        let Some(r) = peer.read().await else { return };
        resp = r;
        assert_eq!(resp.seq, 2, "the response after an SSL request is packet 2");
        peer
    } else {
        assert_eq!(resp.seq, 1);
        Peer::new(tcp)
    };
    let caps = u32::from_le_bytes(resp.payload[0..4].try_into().unwrap());
    assert_eq!(caps & cap::SSL != 0, tls, "CLIENT_SSL says what the leg is");
    let mut seq = resp.seq.wrapping_add(1);
    if clear_switch {
        // Ask for the password in the clear; whatever comes back is what would have leaked.
        peer.send(seq, b"\xfemysql_clear_password\0").await;
        let app = resp.payload.get(32..36) == Some(b"app\0");
        if let (Some(p), true) = (peer.read().await, app) {
            seen.lock()
                .unwrap()
                .push((tls, String::from_utf8_lossy(&p.payload).into_owned()));
        }
        return;
    }
    peer.send(seq, &[0x01, 0x04]).await;
    let Some(mut p) = peer.read().await else {
        return;
    };
    assert_eq!(p.seq, seq.wrapping_add(1));
    let password = if tls {
        p.payload.to_vec()
    } else {
        assert_eq!(&p.payload[..], &[0x02], "a plain leg must ask for the key");
        let pem = server_key()
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        let mut key = vec![0x01];
        key.extend_from_slice(pem.as_bytes());
        peer.send(p.seq.wrapping_add(1), &key).await;
        p = peer.read().await.expect("encrypted password");
        assert_eq!(p.seq, seq.wrapping_add(3));
        let mut d = server_key()
            .decrypt(Oaep::new::<sha1::Sha1>(), &p.payload)
            .expect("RSA-OAEP under the server's key");
        for (i, b) in d.iter_mut().enumerate() {
            *b ^= SCRAMBLE[i % SCRAMBLE.len()];
        }
        d
    };
    let password =
        String::from_utf8_lossy(password.strip_suffix(b"\0").unwrap_or(&password)).into_owned();
    let ok = password == PASSWORD;
    if resp.payload.get(32..36) == Some(b"app\0") {
        seen.lock().unwrap().push((tls, password));
    }
    seq = p.seq.wrapping_add(1);
    if !ok {
        peer.send(seq, &packets::err_payload(1045, "28000", "Access denied"))
            .await;
        return;
    }
    peer.send(seq, &packets::ok_payload(0, 0, 2, 0)).await;
    while let Some(cmd) = peer.read().await {
        match cmd.payload.first() {
            Some(&com::QUIT) | None => return,
            Some(&com::QUERY) => {
                let wire = packets::text_result(
                    &[("v", packets::TYPE_LONGLONG)],
                    &[vec![Some("42".into())]],
                    2,
                    EOF_AS_OK,
                );
                let _ = peer.io.write_all(&wire).await;
                let _ = peer.io.flush().await;
            }
            _ => peer.send(1, &packets::ok_payload(0, 0, 2, 0)).await,
        }
    }
}

async fn mysql8(ssl: bool) -> (String, Seen) {
    mysql8_with(ssl, false).await
}

async fn mysql8_with(ssl: bool, clear_switch: bool) -> (String, Seen) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = rustls::pki_types::CertificateDer::from(ck.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::try_from(ck.key_pair.serialize_der()).unwrap();
    let sc = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(sc));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(serve_mysql8(
                tcp,
                ssl,
                clear_switch,
                acceptor.clone(),
                s2.clone(),
            ));
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn caching_sha2_full_auth_in_every_tls_combination() {
    let _ = server_key();
    for (ctls, utls) in [(false, false), (true, false), (false, true), (true, true)] {
        let (upstream, seen) = mysql8(utls).await;
        let proxy = common::proxy_to(&upstream, |c| {
            client_tls(c);
            // `required` without a CA: the scripted server's certificate is throwaway.
            c.tls.upstream.mode = if utls {
                UpstreamTlsMode::Required
            } else {
                UpstreamTlsMode::Disabled
            };
        })
        .await;
        let what = format!("client tls {ctls}, upstream tls {utls}");
        let mut c = connect(&proxy.addr_string(), "app", PASSWORD, ctls)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let v: Option<i64> = c.query_first("SELECT 42").await.unwrap();
        assert_eq!(v, Some(42), "{what}");
        drop(c);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, vec![(utls, PASSWORD.to_string())], "{what}");
        proxy.shutdown().await;
    }
}

/// Over the Unix socket a client sends its caching_sha2 password in the clear (mysql_async
/// and libmysqlclient count a socket as secure): qcache must RSA-encrypt it for a plain
/// upstream, never relay it in the clear, and pass it inside TLS to a TLS upstream.
#[tokio::test]
async fn caching_sha2_full_auth_over_the_unix_socket() {
    let _ = server_key();
    for utls in [false, true] {
        let (upstream, seen) = mysql8(utls).await;
        let dir = tempfile::Builder::new()
            .prefix("qct")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("q.sock");
        let s2 = socket.display().to_string();
        let proxy = common::proxy_to(&upstream, |c| {
            c.server.socket = s2;
            c.tls.upstream.mode = if utls {
                UpstreamTlsMode::Required
            } else {
                UpstreamTlsMode::Disabled
            };
        })
        .await;
        let opts = mysql_async::OptsBuilder::default()
            .socket(Some(socket.display().to_string()))
            .user(Some("app"))
            .pass(Some(PASSWORD));
        let mut c = tokio::time::timeout(common::CONNECT_TIMEOUT, mysql_async::Conn::new(opts))
            .await
            .expect("in time")
            .unwrap_or_else(|e| panic!("upstream tls {utls}: {e}"));
        let v: Option<i64> = c.query_first("SELECT 42").await.unwrap();
        assert_eq!(v, Some(42));
        drop(c);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![(utls, PASSWORD.to_string())],
            "upstream tls {utls}"
        );
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_wrong_password_through_the_rsa_exchange_is_the_servers_error() {
    let (upstream, seen) = mysql8(false).await;
    let proxy = common::proxy_to(&upstream, client_tls).await;
    let err = connect(&proxy.addr_string(), "app", "wrong", true)
        .await
        .expect_err("refused");
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1045, "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![(false, "wrong".to_string())]
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_cleartext_plugin_from_a_tls_client_to_a_plain_server_is_refused() {
    let (upstream, seen) = mysql8_with(false, true).await;
    let proxy = common::proxy_to(&upstream, client_tls).await;
    let err = connect(&proxy.addr_string(), "app", PASSWORD, true)
        .await
        .expect_err("refused");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1251, "{e:?}");
            assert!(e.message.contains("in the clear"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let leaked: Vec<_> = seen.lock().unwrap().clone();
    assert!(leaked.is_empty(), "the server received {leaked:?}");
    proxy.shutdown().await;
}

/// A TLS client offering `mysql_clear_password` to a `mysql_native_password` account: the
/// server switches it to the account's plugin and it logs in (aiomysql's suite does this).
/// Through qcache to a plain upstream it logs in the same way, the password withheld from
/// the plain leg: the server's switch is the only way on.
#[tokio::test]
async fn a_cleartext_offer_is_switched_to_the_accounts_plugin() {
    let db = tls_server();
    let user = common::unique_name("clr");
    let mut d = mysql_async::Conn::from_url(db.url("")).await.unwrap();
    d.query_drop(format!(
        "CREATE USER '{user}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('pw')"
    ))
    .await
    .unwrap();
    let proxy = common::proxy_to(&db.addr(), |c| {
        client_tls(c);
        upstream_tls(c, UpstreamTlsMode::Disabled);
    })
    .await;
    for addr in [db.addr(), proxy.addr_string()] {
        let args: Vec<String> = vec![
            "--ssl".into(),
            format!("--ssl-ca={}", path(&pki().cert)),
            "--enable-cleartext-plugin".into(),
            "--default-auth=mysql_clear_password".into(),
            format!("--user={user}"),
            "--password=pw".into(),
            "-N".into(),
            "-e".into(),
            "SELECT CURRENT_USER()".into(),
        ];
        let out = cli(addr.clone(), args).await;
        assert!(
            out.status.success(),
            "{addr}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(&user));
    }
    d.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
    proxy.shutdown().await;
}

/// `preferred` and `required` authenticate no server, so they accept a certificate webpki
/// cannot read: X.509 version 1, which `openssl x509 -req` issues without extensions and
/// which mariadb-connector-nodejs's CI certificates are. Before, every session was refused
/// with "UnsupportedCertVersion". `verify_ca` still refuses it, saying why.
#[tokio::test]
async fn an_x509_v1_server_certificate_is_accepted_where_nothing_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let (key, csr, cert) = (
        dir.path().join("key.pem"),
        dir.path().join("req.csr"),
        dir.path().join("cert.pem"),
    );
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl (Debian's openssl package) runs");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let p = |p: &PathBuf| path(p);
    openssl(
        &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &p(&key)]
            .into_iter()
            .chain(["-subj", "/CN=v1", "-out", &p(&csr)])
            .collect::<Vec<_>>(),
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p(&csr),
        "-signkey",
        &p(&key),
        "-days",
        "2",
        "-out",
        &p(&cert),
    ]);
    let text = openssl(&["x509", "-in", &p(&cert), "-noout", "-text"]);
    assert!(text.contains("Version: 1 "), "not a v1 certificate: {text}");
    let db = common::own_server_with(&[
        format!("--ssl-cert={}", p(&cert)),
        format!("--ssl-key={}", p(&key)),
    ]);
    for mode in [UpstreamTlsMode::Preferred, UpstreamTlsMode::Required] {
        let proxy = common::proxy_to(&db.addr(), |c| c.tls.upstream.mode = mode).await;
        let mut c = connect(&proxy.addr_string(), &db.user, &db.password, false)
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert!(
            !server_cipher(&mut c).await.is_empty(),
            "{mode:?}: leg not encrypted"
        );
        drop(c);
        proxy.shutdown().await;
    }
    let proxy = common::proxy_to(&db.addr(), |c| {
        c.tls.upstream.mode = UpstreamTlsMode::VerifyCa;
        c.tls.upstream.ca = p(&cert);
    })
    .await;
    let err = connect(&proxy.addr_string(), &db.user, &db.password, false)
        .await
        .expect_err("verify_ca cannot check a v1 certificate");
    assert!(err.to_string().contains("[2026]"), "{err}");
    proxy.shutdown().await;
}
