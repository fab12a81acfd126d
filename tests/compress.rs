//! Protocol compression on each leg, independently: zlib clients (mysql_async, the `mariadb`
//! CLI) and zstd clients (a raw client) in front of a plain or zlib-compressed MariaDB leg,
//! zstd toward a scripted MySQL 8 upstream, results and cache hits byte-identical to a plain
//! connection's, large results and LOCAL INFILE across many frames, and corrupt frames.

mod common;
mod rawclient;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use mysql_async::prelude::*;
use mysql_async::{Compression, Opts, OptsBuilder, Row};
use qcache::config::UpstreamCompression;
use qcache::protocol::codec;
use qcache::protocol::compress::{Algorithm, Codec};
use qcache::protocol::packets::{self, cap, com};
use rawclient::{Peer, Raw};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The scripted servers here negotiate CLIENT_DEPRECATE_EOF and no MariaDB extensions.
const EOF_AS_OK: packets::ResultFormat = packets::ResultFormat {
    deprecate_eof: true,
    extended_types: false,
};

async fn compressed_conn(url: &str) -> mysql_async::Conn {
    let opts = OptsBuilder::from_opts(Opts::from_url(url).expect("url"))
        .compression(Compression::default());
    tokio::time::timeout(Duration::from_secs(20), mysql_async::Conn::new(opts))
        .await
        .expect("connect timed out")
        .expect("compressed connect")
}

async fn status(conn: &mut mysql_async::Conn, name: &str) -> String {
    let row: Option<(String, String)> = conn
        .query_first(format!("SHOW SESSION STATUS LIKE '{name}'"))
        .await
        .unwrap();
    row.map(|r| r.1).unwrap_or_default()
}

/// Whether the server's own leg (qcache to the server) is compressed: `SHOW SESSION STATUS`
/// describes the client's leg through qcache, information_schema is the server's word.
async fn upstream_compression(conn: &mut mysql_async::Conn) -> String {
    let v: Option<String> = conn
        .query_first(
            "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = 'COMPRESSION'",
        )
        .await
        .unwrap();
    v.unwrap_or_default()
}

async fn hits(conn: &mut mysql_async::Conn) -> u64 {
    status(conn, "Qcache_hits").await.parse().unwrap()
}

fn values(rows: Vec<Row>) -> Vec<Vec<mysql_async::Value>> {
    rows.into_iter().map(|r| r.unwrap()).collect()
}

async fn typed_table(schema: &str) {
    let mut c = common::direct_to(schema).await;
    c.query_drop(
        "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(200), b BLOB, d DECIMAL(10,3), \
         f DOUBLE, dt DATETIME(6), n INT NULL)",
    )
    .await
    .unwrap();
    for i in 0..200 {
        c.exec_drop(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, NOW(6), NULL)",
            (
                i,
                format!("row {i} {}", "x".repeat(i % 50)),
                vec![i as u8; i],
                i * 7,
                1.5,
            ),
        )
        .await
        .unwrap();
    }
}

/// A zlib client in front of a plain upstream leg: the server's own session sees no
/// compression, results equal a direct connection's, and repeats are cache hits.
#[tokio::test]
async fn zlib_client_plain_upstream_matches_and_hits() {
    let schema = common::fresh_schema("cz").await;
    typed_table(&schema).await;
    let p = common::proxy(|_| {}).await;
    let mut direct = common::direct_to(&schema).await;
    let want = values(direct.query("SELECT * FROM t ORDER BY id").await.unwrap());

    let mut c = compressed_conn(&p.url(&schema)).await;
    assert_eq!(upstream_compression(&mut c).await, "OFF", "upstream leg");
    assert_eq!(status(&mut c, "Compression").await, "ON", "client leg");
    let before = hits(&mut c).await;
    for _ in 0..3 {
        let got = values(c.query("SELECT * FROM t ORDER BY id").await.unwrap());
        assert_eq!(got, want);
    }
    assert_eq!(hits(&mut c).await, before + 2);
    // Prepared statements ride the same frames.
    let got: Vec<(i32, String)> = c
        .exec("SELECT id, s FROM t WHERE id < ? ORDER BY id", (5,))
        .await
        .unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].1, format!("row 4 {}", "x".repeat(4)));
    // A plain client shares the compressed client's entries.
    let mut plain = p.conn(&schema).await;
    let before = hits(&mut plain).await;
    let got = values(plain.query("SELECT * FROM t ORDER BY id").await.unwrap());
    assert_eq!(got, want);
    assert_eq!(hits(&mut plain).await, before + 1);
    drop((c, plain));
    p.shutdown().await;
}

/// zlib toward MariaDB, with plain and compressed clients, and results over 16 MiB (which
/// span continuation packets and many frames) on both legs.
#[tokio::test]
async fn zlib_upstream_large_results_both_legs() {
    let p = common::proxy(|c| c.compression.upstream = UpstreamCompression::Zlib).await;
    let mut plain = p.conn("test").await;
    assert_eq!(upstream_compression(&mut plain).await, "ON");
    assert_eq!(status(&mut plain, "Compression").await, "OFF", "client leg");
    let mut comp = compressed_conn(&p.url("test")).await;
    assert_eq!(upstream_compression(&mut comp).await, "ON");
    let mut direct = common::direct().await;
    let sql = "SELECT REPEAT(CONCAT(CHAR(65 + seq % 26), 'qcache'), 3000000) AS big, seq \
               FROM seq_1_to_2";
    let want: Vec<(Vec<u8>, i64)> = direct.query(sql).await.unwrap();
    assert!(want[0].0.len() > 16 << 20);
    for conn in [&mut plain, &mut comp] {
        let got: Vec<(Vec<u8>, i64)> = conn.query(sql).await.unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(g.0 == w.0 && g.1 == w.1, "large result differs");
        }
        // A 17 MiB parameter goes up through the same legs.
        let param = vec![b'p'; 17 << 20];
        let len: Option<i64> = conn.exec_first("SELECT LENGTH(?)", (param,)).await.unwrap();
        assert_eq!(len, Some(17 << 20));
    }
    drop((plain, comp));
    p.shutdown().await;
}

/// The exact bytes: a compressed client (zlib and zstd) gets, after decompression, the same
/// packets with the same sequence ids as a plain client, on a miss and on a hit.
#[tokio::test]
async fn decompressed_bytes_equal_plain_bytes() {
    let schema = common::fresh_schema("cb").await;
    typed_table(&schema).await;
    for upstream in [UpstreamCompression::Off, UpstreamCompression::Zlib] {
        let p = common::proxy(|c| c.compression.upstream = upstream).await;
        let addr = p.addr_string();
        let user = common::db().user.clone();
        for deprecate_eof in [false, true] {
            let sql = format!(
                "SELECT * FROM t WHERE id % 3 = {} ORDER BY id",
                deprecate_eof as u8
            );
            let mut plain = Raw::connect(&addr, &user, &schema, deprecate_eof).await;
            let (miss, _) = plain.query(&sql).await;
            let (hit, _) = plain.query(&sql).await;
            assert_eq!(Raw::wire(&miss), Raw::wire(&hit));
            for alg in [Algorithm::Zlib, Algorithm::Zstd] {
                let mut raw =
                    Raw::connect_compressed(&addr, &user, &schema, deprecate_eof, Some(alg)).await;
                for _ in 0..2 {
                    let (got, _) = raw.query(&sql).await;
                    assert_eq!(Raw::wire(&got), Raw::wire(&miss), "{alg:?} {upstream:?}");
                }
                // An error and an OK come through too.
                let (err, _) = raw.query("SELECT * FROM no_such_table").await;
                assert_eq!(err[0].payload[0], 0xff);
                let (ok, _) = raw.query("DO 1").await;
                assert_eq!(ok[0].payload[0], 0x00);
                assert_eq!(ok[0].seq, 1);
            }
        }
        p.shutdown().await;
    }
}

/// The `mariadb` CLI with --compress over both compressed legs: output equal to a direct
/// connection's, and LOAD DATA LOCAL INFILE of a file that needs hundreds of frames (the
/// frame sequence wraps past 255).
#[tokio::test]
async fn cli_compress_with_local_infile() {
    let schema = common::fresh_schema("cc").await;
    let mut direct = common::direct_to(&schema).await;
    direct
        .query_drop("CREATE TABLE li (id INT PRIMARY KEY, v VARCHAR(100))")
        .await
        .unwrap();
    let p = common::proxy(|c| c.compression.upstream = UpstreamCompression::Zlib).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.tsv");
    let mut data = String::new();
    for i in 0..200_000 {
        data.push_str(&format!("{i}\tvalue-{}\n", i * 7919 % 100_003));
    }
    std::fs::write(&file, &data).unwrap();
    let addr = p.addr_string();
    let (schema2, file2) = (schema.clone(), file.display().to_string());
    let out = tokio::task::spawn_blocking(move || {
        let load = format!(
            "LOAD DATA LOCAL INFILE '{file2}' INTO TABLE li; \
             SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(v ORDER BY id)) FROM li; \
             SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(v ORDER BY id)) FROM li; \
             SHOW SESSION STATUS LIKE 'Compression'"
        );
        common::mariadb_cli(
            &addr,
            &[
                "--compress",
                "--local-infile=1",
                "-N",
                "-D",
                &schema2,
                "-e",
                &load,
            ],
            "",
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: (i64, i64, String) = direct
        .query_first("SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(v ORDER BY id)) FROM li")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(want.0, 200_000);
    let line = format!("{}\t{}\t{}", want.0, want.1, want.2);
    assert_eq!(stdout.matches(&line).count(), 2, "{stdout}");
    assert!(stdout.contains("Compression\tON"), "{stdout}");
    p.shutdown().await;
}

/// A frame that does not inflate ends that session cleanly; others go on.
#[tokio::test]
async fn corrupt_frames_close_the_session() {
    let p = common::proxy(|_| {}).await;
    let user = common::db().user.clone();
    for alg in [Algorithm::Zlib, Algorithm::Zstd] {
        let mut raw =
            Raw::connect_compressed(&p.addr_string(), &user, "test", true, Some(alg)).await;
        // Claims 64 plain bytes; the body is not a compressed stream.
        raw.send_wire(b"\x09\0\0\0\x40\0\0not-zlib!").await;
        let got = tokio::time::timeout(Duration::from_secs(10), raw.read())
            .await
            .expect("the proxy neither answered nor closed");
        assert!(got.is_none(), "expected a close, got {got:?}");
        // A frame whose plain length lies about its packet is also refused.
        let mut raw =
            Raw::connect_compressed(&p.addr_string(), &user, "test", true, Some(alg)).await;
        let mut good = BytesMut::new();
        let mut plain = BytesMut::new();
        codec::encode(
            0,
            format!("\x03SELECT '{}'", "y".repeat(200)).as_bytes(),
            &mut plain,
        );
        Codec::new(alg, 3).encode(&plain, 0, &mut good);
        good[4] = good[4].wrapping_add(9);
        raw.send_wire(&good).await;
        let got = tokio::time::timeout(Duration::from_secs(10), raw.read())
            .await
            .expect("the proxy neither answered nor closed");
        assert!(got.is_none(), "expected a close, got {got:?}");
    }
    let mut c = compressed_conn(&p.url("test")).await;
    let one: Option<i32> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    drop(c);
    p.shutdown().await;
}

/// With compression.client = [], qcache does not offer it and a client that insists is
/// refused with a message saying why.
#[tokio::test]
async fn compression_not_offered_is_refused() {
    let p = common::proxy(|c| c.compression.client.clear()).await;
    let mut tcp = tokio::net::TcpStream::connect(p.addr).await.unwrap();
    let g = rawclient::read_greeting(&mut tcp).await;
    let parsed = qcache::protocol::handshake::parse_greeting(&g.payload).unwrap();
    assert_eq!(
        parsed.capabilities & (cap::COMPRESS | cap::ZSTD_COMPRESSION),
        0
    );
    let mut peer = Peer::new(tcp);
    let mut resp = BytesMut::new();
    resp.extend_from_slice(&(rawclient::client_caps(true) | cap::COMPRESS).to_le_bytes());
    resp.extend_from_slice(&(1u32 << 24).to_le_bytes());
    resp.extend_from_slice(&[45; 1]);
    resp.extend_from_slice(&[0; 23]);
    resp.extend_from_slice(b"root\0\0test\0mysql_native_password\0");
    peer.send(1, &resp).await;
    let err = peer.read().await.expect("an ERR");
    assert_eq!(err.payload[0], 0xff);
    let msg = String::from_utf8_lossy(&err.payload);
    assert!(msg.contains("compression was not offered"), "{msg}");
    p.shutdown().await;
}

/// zstd toward a server that offers it: a scripted MySQL 8 upstream checks the handshake
/// response (zstd bit and level byte, no zlib bit) and then speaks zstd frames, renumbering
/// its inner packets the way MySQL's `net_flush` does; a plain client sees the same bytes
/// every time and its repeats are cache hits.
#[tokio::test]
async fn zstd_upstream_against_scripted_mysql8() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap().to_string();
    let queries = Arc::new(AtomicUsize::new(0));
    let seen = queries.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve_zstd(tcp, seen.clone()));
        }
    });
    let p = common::proxy_to(&up, |c| {
        c.compression.upstream = UpstreamCompression::Zstd;
        c.compression.zstd_level = 7;
    })
    .await;
    let mut raw = Raw::connect(&p.addr_string(), "app", "test", true).await;
    let (first, _) = raw.query("SELECT v FROM scripted").await;
    assert_eq!(first.len(), 1 + 1 + 50 + 1);
    for (i, pkt) in first.iter().enumerate() {
        assert_eq!(pkt.seq as usize, i + 1, "renumbered as a plain stream");
    }
    for _ in 0..2 {
        let (again, _) = raw.query("SELECT v FROM scripted").await;
        assert_eq!(Raw::wire(&again), Raw::wire(&first));
    }
    let (ok, _) = raw
        .command(&[com::PING], qcache::protocol::response::Expect::OnePacket)
        .await;
    assert_eq!(ok[0].payload[0], 0);
    assert_eq!(
        queries.load(Ordering::SeqCst),
        1,
        "repeats came from the cache"
    );
    drop(raw);
    p.shutdown().await;
}

/// One scripted connection. qcache's schema catalog logs in too, uncompressed, as root; it
/// gets an OK and a one-row answer to anything. The client (`app`) must arrive with zstd.
async fn serve_zstd(tcp: tokio::net::TcpStream, queries: Arc<AtomicUsize>) {
    let mut peer = Peer::new(tcp);
    let caps = rawclient::client_caps(true)
        | cap::COMPRESS
        | cap::ZSTD_COMPRESSION
        | cap::CONNECT_ATTRS
        | cap::SSL;
    peer.send(
        0,
        &rawclient::mysql8_greeting(caps, b"abcdefghijklmnopqrst", "mysql_native_password"),
    )
    .await;
    let Some(resp) = peer.read().await else {
        return;
    };
    let parsed = qcache::protocol::handshake::parse_handshake_response(&resp.payload).unwrap();
    peer.send(2, &packets::ok_payload(0, 0, 2, 0)).await;
    if parsed.user != "app" {
        while let Some(cmd) = peer.read().await {
            match cmd.payload.first() {
                Some(&com::QUIT) | None => return,
                Some(&com::QUERY) => {
                    // Enough of a catalog that `test.scripted` is a known table.
                    let sql = String::from_utf8_lossy(&cmd.payload[1..]).into_owned();
                    let wire = if sql.contains("information_schema.TABLES") {
                        let row = ["test", "scripted", "BASE TABLE"].map(|v| Some(v.into()));
                        let cols = [("s", 253), ("t", 253), ("k", 253)];
                        packets::text_result(&cols, &[row.to_vec()], 2, EOF_AS_OK)
                    } else if sql.contains("information_schema") {
                        packets::text_result(&[("x", 253)], &[], 2, EOF_AS_OK)
                    } else {
                        let row = vec![Some("4194304".into())];
                        packets::text_result(&[("v", packets::TYPE_LONGLONG)], &[row], 2, EOF_AS_OK)
                    };
                    let _ = peer.io.write_all(&wire).await;
                }
                _ => peer.send(1, &packets::ok_payload(0, 0, 2, 0)).await,
            }
        }
        return;
    }
    assert_ne!(parsed.capabilities & cap::ZSTD_COMPRESSION, 0);
    assert_eq!(parsed.capabilities & cap::COMPRESS, 0);
    assert_eq!(parsed.zstd_level.map(|l| l.0), Some(7));

    let mut zstd = Codec::new(Algorithm::Zstd, 3);
    let mut raw = std::mem::take(&mut peer.buf);
    let mut plain = BytesMut::new();
    loop {
        let pkt = loop {
            if let Some(p) = codec::decode(&mut plain, 1 << 24).unwrap() {
                break p;
            }
            if let Some(seq) = zstd.decode_frame(&mut raw, &mut plain).unwrap() {
                assert_eq!(seq, 0, "a command starts the frame sequence at 0");
                continue;
            }
            if peer.io.read_buf(&mut raw).await.unwrap_or(0) == 0 {
                return;
            }
        };
        assert_eq!(pkt.seq, 0);
        let mut out = BytesMut::new();
        match pkt.payload[0] {
            com::QUIT => return,
            com::QUERY if rawclient::is_session_settings(&pkt.payload[1..]) => {
                let wire = rawclient::session_settings_answer(&pkt.payload[1..], EOF_AS_OK);
                zstd.encode(&wire.unwrap_or_default(), 1, &mut out);
            }
            com::QUERY => {
                // The client's reads; qcache asks who the session is once, on its own.
                if String::from_utf8_lossy(&pkt.payload[1..]).contains("scripted") {
                    queries.fetch_add(1, Ordering::SeqCst);
                }
                let name = "long_enough_column_name_to_compress";
                let rows: Vec<Vec<Option<String>>> = (0..50)
                    .map(|i| vec![Some(format!("value {i:04}"))])
                    .collect();
                let wire = packets::text_result(&[(name, 253)], &rows, 2, EOF_AS_OK);
                // Two flushes, as a server does when its buffer fills: the second frame's
                // inner ids restart at the frame count (MySQL's net_flush re-sync).
                let cut = boundary_near(&wire, wire.len() / 2);
                let next = zstd.encode(&wire[..cut], 1, &mut out);
                zstd.encode(&renumber(&wire[cut..], next), next, &mut out);
            }
            _ => {
                let mut ok = BytesMut::new();
                codec::encode(1, &packets::ok_payload(0, 0, 2, 0), &mut ok);
                zstd.encode(&ok, 1, &mut out);
            }
        }
        peer.io.write_all(&out).await.unwrap();
    }
}

/// The first packet boundary in `wire` at or after `at`.
fn boundary_near(wire: &[u8], at: usize) -> usize {
    let mut b = 0;
    while b < at && b + 4 <= wire.len() {
        b += 4 + u32::from_le_bytes([wire[b], wire[b + 1], wire[b + 2], 0]) as usize;
    }
    b
}

/// `wire`'s packets numbered from `seq`.
fn renumber(wire: &[u8], mut seq: u8) -> Vec<u8> {
    let mut out = wire.to_vec();
    let mut at = 0;
    while at + 4 <= out.len() {
        let len = u32::from_le_bytes([out[at], out[at + 1], out[at + 2], 0]) as usize;
        out[at + 3] = seq;
        seq = seq.wrapping_add(1);
        at += 4 + len;
    }
    out
}

/// Several results in one response over a zlib client leg: the server re-numbers its
/// packets to the frame count at the end of each result, and a client checks that
/// (mysql_async's `sync_seq_id`), so qcache must end a frame there and number as the server
/// does. Found by mysql_async's own test suite through qcache (`PacketsOutOfSync`).
#[tokio::test]
async fn multi_results_over_a_zlib_client() {
    let schema = common::fresh_schema("cm").await;
    let mut direct = common::direct_to(&schema).await;
    direct
        .query_drop("CREATE PROCEDURE two() BEGIN SELECT 1 AS a; SELECT 'x' AS b, 2 AS c; END")
        .await
        .unwrap();
    for upstream in [UpstreamCompression::Off, UpstreamCompression::Zlib] {
        let p = common::proxy(|c| c.compression.upstream = upstream).await;
        let mut c = compressed_conn(&p.url(&schema)).await;
        for _ in 0..3 {
            let mut r = c
                .query_iter("SELECT 1; SELECT 2, 3; SELECT 'four'")
                .await
                .unwrap();
            let a: Vec<i64> = r.collect().await.unwrap();
            let b: Vec<(i64, i64)> = r.collect().await.unwrap();
            let d: Vec<String> = r.collect().await.unwrap();
            drop(r);
            assert_eq!((a, b, d), (vec![1], vec![(2, 3)], vec!["four".to_string()]));

            // A procedure's results, then its final OK, by text and prepared statement.
            let mut r = c.query_iter("CALL two()").await.unwrap();
            let a: Vec<i64> = r.collect().await.unwrap();
            let b: Vec<(String, i64)> = r.collect().await.unwrap();
            drop(r);
            assert_eq!((a, b), (vec![1], vec![("x".to_string(), 2)]));
            let mut r = c.exec_iter("CALL two()", ()).await.unwrap();
            let a: Vec<i64> = r.collect().await.unwrap();
            let b: Vec<(String, i64)> = r.collect().await.unwrap();
            drop(r);
            assert_eq!((a, b), (vec![1], vec![("x".to_string(), 2)]));

            // An error after a result ends the response; the session goes on.
            let mut r = c
                .query_iter("SELECT 5; SELECT * FROM no_such_t")
                .await
                .unwrap();
            let a: Vec<i64> = r.collect().await.unwrap();
            assert_eq!(a, vec![5]);
            let err = r.collect::<Row>().await.unwrap_err();
            drop(r);
            assert!(err.to_string().contains("no_such_t"), "{err}");
            let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
            assert_eq!(one, Some(1));
        }
        drop(c);
        p.shutdown().await;
    }
}
