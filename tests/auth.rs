//! Authentication exchanges MariaDB cannot serve, played by a scripted upstream that speaks
//! MySQL 8's side of caching_sha2_password byte for byte: fast auth, full auth with the RSA
//! public-key request, and an auth switch. The proxy must relay every round unchanged, and
//! keep from the client the capabilities it cannot cache through (query attributes).

mod common;
mod rawclient;

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use mysql_async::prelude::*;
use qcache::protocol::codec::Packet;
use qcache::protocol::packets::{self, cap, com};
use rawclient::Peer;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// The scripted servers here negotiate CLIENT_DEPRECATE_EOF and no MariaDB extensions.
const EOF_AS_OK: packets::ResultFormat = packets::ResultFormat {
    deprecate_eof: true,
    extended_types: false,
};

const SCRAMBLE: &[u8; 20] = b"0123456789abcdefghij";
const PEM: &[u8] = b"-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Script {
    Fast,
    Full,
    Switch,
}

/// What the scripted server received, in order, for comparison with what the client sent.
type Log = Arc<Mutex<Vec<Packet>>>;

fn greeting(plugin: &str) -> Vec<u8> {
    let caps: u32 = cap::LONG_PASSWORD
        | cap::CONNECT_WITH_DB
        | cap::PROTOCOL_41
        | cap::TRANSACTIONS
        | cap::SECURE_CONNECTION
        | cap::MULTI_RESULTS
        | cap::PLUGIN_AUTH
        | cap::PLUGIN_AUTH_LENENC_DATA
        | cap::DEPRECATE_EOF
        | cap::MARIADB_CLIENT_MYSQL
        | cap::QUERY_ATTRIBUTES
        | cap::SSL;
    rawclient::mysql8_greeting(caps, SCRAMBLE, plugin)
}

/// One scripted MySQL 8 connection; answers every query with one row holding 4194304, but
/// BEGIN with an error. Logs the client's queries after its handshake.
async fn serve(tcp: TcpStream, script: Script, log: Log) {
    let mut peer = Peer::new(tcp);
    let plugin = if script == Script::Switch {
        "mysql_native_password"
    } else {
        "caching_sha2_password"
    };
    peer.send(0, &greeting(plugin)).await;
    let Some(resp) = peer.read().await else {
        return;
    };
    // qcache's own schema-catalog connection logs in too (as root); only the client's
    // exchange, as user `app`, is compared.
    let from_client = qcache::protocol::handshake::parse_handshake_response(&resp.payload)
        .is_ok_and(|r| r.user == "app");
    let log: Log = if from_client { log } else { Arc::default() };
    log.lock().unwrap().push(resp.clone());
    let mut seq = resp.seq.wrapping_add(1);
    match script {
        Script::Fast => {
            peer.send(seq, &[0x01, 0x03]).await;
            seq = seq.wrapping_add(1);
        }
        Script::Full => {
            peer.send(seq, &[0x01, 0x04]).await;
            let Some(req) = peer.read().await else { return };
            assert_eq!(&req.payload[..], &[0x02], "public key request");
            log.lock().unwrap().push(req.clone());
            let mut key = vec![0x01];
            key.extend_from_slice(PEM);
            peer.send(req.seq.wrapping_add(1), &key).await;
            let Some(enc) = peer.read().await else { return };
            log.lock().unwrap().push(enc.clone());
            seq = enc.seq.wrapping_add(1);
        }
        Script::Switch => {
            let mut sw = vec![0xfe];
            sw.extend_from_slice(b"caching_sha2_password\0");
            sw.extend_from_slice(SCRAMBLE);
            sw.push(0);
            peer.send(seq, &sw).await;
            let Some(ans) = peer.read().await else { return };
            log.lock().unwrap().push(ans.clone());
            peer.send(ans.seq.wrapping_add(1), &[0x01, 0x03]).await;
            seq = ans.seq.wrapping_add(2);
        }
    }
    peer.send(seq, &packets::ok_payload(0, 0, 2, 0)).await;
    while let Some(cmd) = peer.read().await {
        match cmd.payload.first() {
            Some(&com::QUIT) | None => return,
            // The schema catalog's queries: one table, test.t, so that reads of it can be
            // cached; no views, triggers or foreign keys.
            Some(&com::QUERY) if cmd.payload.windows(18).any(|w| w == b"information_schema") => {
                let tables = cmd
                    .payload
                    .windows(22)
                    .any(|w| w == b"information_schema.TAB");
                let names = ["a", "b", "c", "d", "e", "f"];
                let (cols, rows): (&[&str], Vec<Vec<Option<String>>>) = if tables {
                    (
                        &names[..3],
                        vec![vec![
                            Some("test".into()),
                            Some("t".into()),
                            Some("BASE TABLE".into()),
                        ]],
                    )
                } else {
                    (&names[..], Vec::new())
                };
                let cols: Vec<(&str, u8)> = cols
                    .iter()
                    .map(|c| (*c, packets::TYPE_VAR_STRING))
                    .collect();
                let wire = packets::text_result(&cols, &rows, 2, EOF_AS_OK);
                let _ = peer.io.write_all(&wire).await;
            }
            Some(&com::QUERY)
                if rawclient::session_settings_answer(&cmd.payload[1..], EOF_AS_OK).is_some() =>
            {
                let wire = rawclient::session_settings_answer(&cmd.payload[1..], EOF_AS_OK);
                let _ = peer.io.write_all(&wire.unwrap_or_default()).await;
            }
            Some(&com::QUERY) if cmd.payload[1..] == *b"BEGIN" => {
                log.lock().unwrap().push(cmd.clone());
                let err = packets::err_payload(1399, "XAE07", "XAER_RMFAIL: scripted refusal");
                peer.send(1, &err).await;
            }
            Some(&com::QUERY) => {
                log.lock().unwrap().push(cmd.clone());
                let wire = packets::text_result(
                    &[("v", packets::TYPE_LONGLONG)],
                    &[vec![Some("4194304".into())]],
                    2,
                    EOF_AS_OK,
                );
                let _ = peer.io.write_all(&wire).await;
            }
            _ => peer.send(1, &packets::ok_payload(0, 0, 2, 0)).await,
        }
    }
}

async fn scripted(script: Script) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let log: Log = Arc::default();
    let l2 = log.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(serve(tcp, script, l2.clone()));
        }
    });
    (addr, log)
}

/// mysql_async as user `app` through `proxy`, with the settings it would otherwise ask the
/// scripted server for.
async fn app_conn(proxy: &common::TestProxy) -> mysql_async::Conn {
    let url = format!(
        "mysql://app:secret@{}/test?prefer_socket=false&max_allowed_packet=4194304&wait_timeout=28800",
        proxy.addr
    );
    mysql_async::Conn::from_url(url).await.unwrap()
}

/// A raw client through the proxy playing the client side, asking for `unoffered`
/// capabilities on top of those offered; returns what it sent.
async fn raw_client(proxy: &str, script: Script, unoffered: u32) -> Vec<Packet> {
    let mut peer = Peer::new(TcpStream::connect(proxy).await.unwrap());
    let g = peer.read().await.unwrap();
    let parsed = qcache::protocol::handshake::parse_greeting(&g.payload).unwrap();
    assert_eq!(
        parsed.capabilities & cap::SSL,
        0,
        "qcache must not offer TLS it cannot do"
    );
    assert_eq!(
        parsed.capabilities & cap::QUERY_ATTRIBUTES,
        0,
        "the server's offer of query attributes must not reach the client"
    );
    let caps = rawclient::client_caps(true) & parsed.capabilities | unoffered;
    let mut r = BytesMut::new();
    r.extend_from_slice(&caps.to_le_bytes());
    r.extend_from_slice(&(1u32 << 24).to_le_bytes());
    r.extend_from_slice(&[255]);
    r.extend_from_slice(&[0; 23]);
    r.extend_from_slice(b"app\0");
    r.extend_from_slice(&[32]);
    r.extend_from_slice(&[0xab; 32]);
    r.extend_from_slice(b"test\0");
    r.extend_from_slice(if script == Script::Switch {
        b"mysql_native_password\0"
    } else {
        b"caching_sha2_password\0"
    });
    let mut sent = vec![Packet::new(1, r.to_vec())];
    peer.send(1, &r).await;
    loop {
        let p = peer.read().await.expect("server packet");
        match (p.payload.first(), script) {
            (Some(0x00), _) => break,
            (Some(0xff), _) => panic!("refused: {:?}", packets::parse_err(&p.payload)),
            (Some(0x01), _) if p.payload[..] == [0x01, 0x03] => continue,
            (Some(0x01), Script::Full) if p.payload[..] == [0x01, 0x04] => {
                let req = Packet::new(p.seq.wrapping_add(1), vec![0x02]);
                peer.send(req.seq, &req.payload).await;
                sent.push(req);
            }
            (Some(0x01), Script::Full) => {
                assert_eq!(&p.payload[1..], PEM, "public key relayed unchanged");
                let enc = Packet::new(p.seq.wrapping_add(1), vec![0x5a; 256]);
                peer.send(enc.seq, &enc.payload).await;
                sent.push(enc);
            }
            (Some(0xfe), Script::Switch) => {
                let ans = Packet::new(p.seq.wrapping_add(1), vec![0x77; 32]);
                peer.send(ans.seq, &ans.payload).await;
                sent.push(ans);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    peer.send(0, &[com::PING]).await;
    let ok = peer.read().await.expect("ping answer");
    assert_eq!(ok.payload[0], 0);
    sent
}

#[tokio::test]
async fn caching_sha2_fast_full_and_switch_are_relayed_byte_for_byte() {
    for script in [Script::Fast, Script::Full, Script::Switch] {
        let (upstream, log) = scripted(script).await;
        let proxy = common::proxy_to(&upstream, |_| {}).await;
        let sent = raw_client(&proxy.addr_string(), script, 0).await;
        let got = log.lock().unwrap().clone();
        // the handshake response loses nothing but capability bits qcache cleared
        assert_eq!(got.len(), sent.len(), "{script:?}");
        for (a, b) in sent.iter().zip(&got) {
            assert_eq!(
                a, b,
                "{script:?}: the server received other bytes than the client sent"
            );
        }
        proxy.shutdown().await;
    }
}

/// Query attributes would put name/value pairs before the statement qcache reads (a write
/// behind them would invalidate nothing), so a client that asks for them though qcache did
/// not offer them is not heard by the server, which did.
#[tokio::test]
async fn query_attributes_are_never_negotiated() {
    let (upstream, log) = scripted(Script::Fast).await;
    let proxy = common::proxy_to(&upstream, |_| {}).await;
    let sent = raw_client(&proxy.addr_string(), Script::Fast, cap::QUERY_ATTRIBUTES).await;
    let got = log.lock().unwrap().clone();
    let caps = |p: &Packet| u32::from_le_bytes(p.payload[0..4].try_into().unwrap());
    assert_ne!(caps(&sent[0]) & cap::QUERY_ATTRIBUTES, 0);
    assert_eq!(caps(&got[0]), caps(&sent[0]) & !cap::QUERY_ATTRIBUTES);
    assert_eq!(got[0].payload[4..], sent[0].payload[4..]);
    proxy.shutdown().await;
}

/// A deferred BEGIN the server refuses: the statement that carried it along (a cacheable
/// read) or waited for it (anything else) gets the server's error, a write never runs, and
/// the session goes on outside a transaction.
#[tokio::test]
async fn a_refused_deferred_begin_fails_the_next_statement_cleanly() {
    let (upstream, log) = scripted(Script::Fast).await;
    let proxy = common::proxy_to(&upstream, |_| {}).await;
    let mut c = app_conn(&proxy).await;
    for next in ["SELECT a FROM t", "SELECT NOW()", "UPDATE t SET a = 1"] {
        c.query_drop("BEGIN").await.unwrap();
        let e = c.query_drop(next).await.unwrap_err();
        assert!(e.to_string().contains("scripted refusal"), "{next}: {e}");
        let v: Option<u64> = c.query_first("SELECT 2").await.unwrap();
        assert_eq!(v, Some(4194304), "after {next}");
    }
    let queries: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.first() == Some(com::QUERY))
        .map(|p| String::from_utf8_lossy(&p.payload[1..]).into_owned())
        .collect();
    assert_eq!(queries.iter().filter(|q| *q == "BEGIN").count(), 3);
    assert!(
        !queries.iter().any(|q| q.starts_with("UPDATE")),
        "the write ran outside the transaction its client opened: {queries:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn mysql_async_fast_auth_against_a_mysql8_upstream() {
    let (upstream, _log) = scripted(Script::Fast).await;
    let proxy = common::proxy_to(&upstream, |_| {}).await;
    let mut c = app_conn(&proxy).await;
    let v: Option<u64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(v, Some(4194304));
    c.ping().await.unwrap();
    proxy.shutdown().await;
}
