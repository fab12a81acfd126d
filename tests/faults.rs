//! Faults around the proxy: the upstream killed mid-result and mid-transaction, restarted,
//! silent after accepting; a client vanishing mid-result or too slow to read. Each test is
//! wrapped in a timeout so that a hang fails it instead of stalling the suite.

mod common;
mod rawclient;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use qcache::observe::stats::InvalidationSource;
use qcache::protocol::packets::com;
use qcache::protocol::response::Expect;
use rawclient::Raw;
use tokio::io::AsyncReadExt;

/// Every test here ends within this, or fails saying where it hung.
const TEST_LIMIT: Duration = Duration::from_secs(120);

async fn bounded<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no progress within {limit:?}"))
}

async fn conn_to(url: String) -> Conn {
    let opts = mysql_async::Opts::from_url(&url).expect("url");
    bounded("connect", Duration::from_secs(15), Conn::new(opts))
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// A table whose `SELECT id, REPEAT(pad, 1000) FROM big` streams 2,000 rows of 100 KB
/// (200 MB): far more than socket buffers hold, so the result is still streaming when the
/// test interferes, while the table itself stays small.
async fn make_big(c: &mut Conn) {
    c.query_drop("CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(100))")
        .await
        .unwrap();
    c.query_drop("INSERT INTO big SELECT seq, REPEAT('x', 100) FROM seq_1_to_2000")
        .await
        .unwrap();
}

const BIG_SELECT: &str = "SELECT id, REPEAT(pad, 1000) FROM big";

/// Lets the whole 200 MB result be cached if it ever completed, so that "nothing was stored"
/// means the proxy refused a partial result, not that the result was too large anyway.
fn cache_everything(c: &mut qcache::config::Config) {
    c.cache.max_result_bytes = 512 << 20;
    c.cache.max_bytes = 1 << 30;
}

/// Statements of other connections on the server whose text contains `marker`.
async fn running_with(direct: &mut Conn, marker: &str) -> u64 {
    let n: Option<u64> = direct
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE ID <> CONNECTION_ID() AND INFO LIKE CONCAT('%', ?, '%')",
            (marker,),
        )
        .await
        .unwrap();
    n.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_killed_mid_result_errors_fast_and_caches_nothing() {
    bounded("test", TEST_LIMIT, async {
        let server = common::own_server();
        let mut d = conn_to(server.url("test")).await;
        make_big(&mut d).await;
        let proxy = common::proxy_to(&server.addr(), cache_everything).await;
        let stats = proxy.running.shared.cache.stats();
        let inserts = stats.inserts();
        let mut c = proxy.conn("test").await;
        let mut result = c.query_iter(BIG_SELECT).await.unwrap();
        for _ in 0..10 {
            let row: Option<mysql_async::Row> = result.next().await.unwrap();
            assert!(row.is_some());
        }
        server.kill();
        let killed = Instant::now();
        // Whatever was buffered may still arrive; then the result must end in an error,
        // never in a clean end with rows missing.
        let mut rows = 10u64;
        let end = bounded("reading after the kill", Duration::from_secs(30), async {
            loop {
                match result.next().await {
                    Ok(Some(_)) => rows += 1,
                    Ok(None) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        })
        .await;
        assert!(end.is_err(), "a clean end after {rows} of 2000 rows");
        assert!(rows < 2000, "the whole result arrived before the kill");
        println!(
            "error after {rows} rows, {:?} after the kill: {:?}",
            killed.elapsed(),
            end.err()
        );
        assert!(killed.elapsed() < Duration::from_secs(10));
        assert_eq!(stats.inserts(), inserts, "a partial result was stored");
        assert_eq!(proxy.running.shared.cache.len(), 0);
        drop(result);
        drop(c);
        // The proxy itself is fine: a new client gets the clear upstream-down error quickly.
        let opts = mysql_async::Opts::from_url(&proxy.url("test")).unwrap();
        let again = bounded(
            "connect after kill",
            Duration::from_secs(15),
            Conn::new(opts),
        )
        .await;
        let e = again.expect_err("the upstream is dead").to_string();
        assert!(e.contains("qcache"), "{e}");
        proxy.running.abort().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_killed_mid_transaction_errors_and_invalidates() {
    bounded("test", TEST_LIMIT, async {
        let server = common::own_server();
        let mut d = conn_to(server.url("test")).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        d.query_drop("INSERT INTO t VALUES (1, 1)").await.unwrap();
        let proxy = common::proxy_to(&server.addr(), |_| {}).await;
        let shared = proxy.running.shared.clone();
        let mut c = proxy.conn("test").await;
        for _ in 0..2 {
            let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
            assert_eq!(v, Some(1));
        }
        assert!(shared.cache.stats().hits() >= 1);
        c.query_drop("START TRANSACTION").await.unwrap();
        c.query_drop("UPDATE t SET v = 2 WHERE id = 1")
            .await
            .unwrap();
        let txn_ends = shared
            .cache
            .stats()
            .invalidations(InvalidationSource::TxnEnd);
        server.kill();
        let killed = Instant::now();
        let commit = bounded(
            "COMMIT after the kill",
            Duration::from_secs(30),
            c.query_drop("COMMIT"),
        )
        .await;
        assert!(commit.is_err(), "COMMIT cannot succeed on a dead server");
        assert!(killed.elapsed() < Duration::from_secs(10));
        // The session ended inside a transaction whose COMMIT may have happened: its tables
        // count as changed.
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared
            .cache
            .stats()
            .invalidations(InvalidationSource::TxnEnd)
            == txn_ends
        {
            assert!(
                Instant::now() < deadline,
                "the written table was not invalidated"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        proxy.running.abort().await;
    })
    .await
}

/// The upstream dies and a new server comes up on the same address with different data:
/// new sessions work again, and once the binlog tail is back nothing cached from the old
/// server is served (its stream cannot resume there, so everything was invalidated).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_restarted_new_sessions_work_and_old_entries_are_gone() {
    bounded("test", TEST_LIMIT, async {
        let server = common::own_server();
        let port = server.port;
        let mut d = conn_to(server.url("test")).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        d.query_drop("INSERT INTO t VALUES (1, 1)").await.unwrap();
        drop(d);
        let proxy = common::proxy_to(&server.addr(), |c| {
            c.invalidation.binlog = qcache::config::BinlogMode::On;
        })
        .await;
        let shared = proxy.running.shared.clone();
        // Until the tail is connected, hits wait (writes elsewhere could be missed).
        let tail = shared.binlog.clone().expect("binlog tail");
        assert!(tail.wait_until_connected(Duration::from_secs(20)).await);
        let mut c = proxy.conn("test").await;
        for _ in 0..2 {
            let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
            assert_eq!(v, Some(1));
        }
        assert!(shared.cache.stats().hits() >= 1, "the entry was not cached");
        server.kill();
        let failed = bounded(
            "query on a dead upstream",
            Duration::from_secs(30),
            c.query_drop("SELECT 1"),
        )
        .await;
        assert!(failed.is_err());
        drop(c);

        let restarted = tokio::task::spawn_blocking(move || common::own_server_on(port))
            .await
            .unwrap();
        let mut d = conn_to(restarted.url("test")).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        d.query_drop("INSERT INTO t VALUES (1, 2)").await.unwrap();
        // While the stream is down, hits go on for at most `invalidation.max_lag` (1 s) and
        // then stop; once the tail is back on a server that cannot resume its stream, it has
        // invalidated everything before it says it is connected.
        let tail = shared.binlog.clone().expect("binlog tail running");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !(tail.reconnects() >= 1 && tail.connected()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the binlog tail did not reconnect to the restarted server: {:?}",
                tail.status()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut c = proxy.conn("test").await;
        let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
        assert_eq!(v, Some(2), "an entry cached from the old server was served");
        proxy.running.abort().await;
    })
    .await
}

/// A raw client sends the big SELECT, reads a little and disappears. The proxy must notice,
/// end the session, close the upstream connection (the server stops the query), store
/// nothing, and keep serving others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_vanishing_mid_result_releases_the_upstream() {
    bounded("test", TEST_LIMIT, async {
        let schema = common::fresh_schema("fault_vanish").await;
        let mut d = common::direct_to(&schema).await;
        make_big(&mut d).await;
        let proxy = common::proxy(cache_everything).await;
        let shared = proxy.running.shared.clone();
        let inserts = shared.cache.stats().inserts();
        let marker = common::unique_name("vanish");
        let sql = format!("SELECT id, REPEAT(pad, 1000) /* {marker} */ FROM big");
        let mut raw = Raw::connect(&proxy.addr_string(), &common::db().user, &schema, true).await;
        let mut payload = vec![com::QUERY];
        payload.extend_from_slice(sql.as_bytes());
        raw.send(0, &payload).await;
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while got < (4 << 20) {
            let n = bounded(
                "reading the start of the result",
                Duration::from_secs(30),
                raw.tcp.read(&mut buf),
            )
            .await
            .unwrap();
            assert!(n > 0, "closed early");
            got += n;
        }
        assert_eq!(
            running_with(&mut d, &marker).await,
            1,
            "query not running upstream"
        );
        drop(raw);
        let deadline = Instant::now() + Duration::from_secs(15);
        while running_with(&mut d, &marker).await > 0
            || shared.connections.load(Ordering::Relaxed) > 0
        {
            assert!(
                Instant::now() < deadline,
                "the upstream query or session outlived its client"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            shared.cache.stats().inserts(),
            inserts,
            "a partial result was stored"
        );
        let mut c = proxy.conn(&schema).await;
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM big").await.unwrap();
        assert_eq!(n, Some(2000));
        proxy.shutdown().await;
    })
    .await
}

/// A client that stops reading a large result is disconnected after
/// `server.client_write_timeout`, and its upstream query ends with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_client_is_cut_off_after_the_write_timeout() {
    bounded("test", TEST_LIMIT, async {
        let schema = common::fresh_schema("fault_slow").await;
        let mut d = common::direct_to(&schema).await;
        make_big(&mut d).await;
        let proxy = common::proxy(|c| {
            c.server.client_write_timeout = Duration::from_secs(1);
        })
        .await;
        let shared = proxy.running.shared.clone();
        let marker = common::unique_name("slow");
        let sql = format!("SELECT id, REPEAT(pad, 1000) /* {marker} */ FROM big");
        let mut raw = Raw::connect(&proxy.addr_string(), &common::db().user, &schema, true).await;
        let mut payload = vec![com::QUERY];
        payload.extend_from_slice(sql.as_bytes());
        raw.send(0, &payload).await;
        let sent = Instant::now();
        // Read nothing: the socket buffers fill and the proxy's writes stall.
        let deadline = sent + Duration::from_secs(20);
        while shared.connections.load(Ordering::Relaxed) > 0 {
            assert!(
                Instant::now() < deadline,
                "the stalled session was never closed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let closed_after = sent.elapsed();
        println!("stalled session closed {closed_after:?} after its query");
        assert!(closed_after >= Duration::from_secs(1));
        let deadline = Instant::now() + Duration::from_secs(15);
        while running_with(&mut d, &marker).await > 0 {
            assert!(
                Instant::now() < deadline,
                "the upstream query outlived the session"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // What was buffered can still be read, then the connection ends.
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        loop {
            match bounded(
                "draining the closed socket",
                Duration::from_secs(15),
                raw.tcp.read(&mut buf),
            )
            .await
            {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        println!("the stalled client could still read {total} buffered bytes");
        assert!(total < 200 << 20, "the whole result was buffered");
        proxy.shutdown().await;
    })
    .await
}

/// An upstream that accepts TCP and then says nothing: the client gets an ERR naming the
/// timeout after `server.connect_timeout`, not a hang and not a bare close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_upstream_gives_a_clear_timeout_error() {
    bounded("test", TEST_LIMIT, async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = listener.local_addr().unwrap().to_string();
        let holder = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let proxy = common::proxy_to(&upstream, |c| {
            c.server.connect_timeout = Duration::from_secs(1);
        })
        .await;
        let start = Instant::now();
        let opts = mysql_async::Opts::from_url(&proxy.url("test")).unwrap();
        let res = bounded("connect", Duration::from_secs(15), Conn::new(opts)).await;
        let e = res.expect_err("no server answered").to_string();
        println!("after {:?}: {e}", start.elapsed());
        assert!(e.contains("no greeting"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
        holder.abort();
        proxy.shutdown().await;
    })
    .await
}

/// The server ends a session while it is idle (KILL, `wait_timeout`): the client's
/// connection closes too, as a direct one would, so that a pool's liveness check sees it and
/// a dead session is not kept alive on cache hits. Found by the mysql_async and node-mysql2
/// test suites run through qcache (`should_reconnect`, `test-pool-disconnect`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_server_ends_while_idle_is_closed() {
    bounded("test", TEST_LIMIT, async {
        let schema = common::fresh_schema("fault_idle").await;
        let mut d = common::direct_to(&schema).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .unwrap();
        d.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
        let proxy = common::proxy(|_| {}).await;
        let user = common::db().user.clone();

        // KILL from another connection, after the session has a cached entry to be hit,
        // and hits enough that the loop waits on its parked watch of the server's leg
        // (`PacketConn::watch`), which no hit touches.
        let mut raw = Raw::connect(&proxy.addr_string(), &user, &schema, true).await;
        for _ in 0..5 {
            let (_, resp) = raw.query("SELECT id FROM t").await;
            assert!(!resp.error);
        }
        let id = qcache::protocol::handshake::parse_greeting(&raw.greeting.payload)
            .expect("greeting")
            .connection_id;
        d.query_drop(format!("KILL {id}")).await.unwrap();
        expect_close(&mut raw, "after KILL").await;

        // The server's own idle timeout.
        let mut raw = Raw::connect(&proxy.addr_string(), &user, &schema, true).await;
        let (_, resp) = raw.query("SET SESSION wait_timeout = 1").await;
        assert!(!resp.error);
        expect_close(&mut raw, "after wait_timeout").await;

        // Others are unaffected.
        let mut c = proxy.conn(&schema).await;
        let v: Option<i64> = c.query_first("SELECT id FROM t").await.unwrap();
        assert_eq!(v, Some(1));
        drop(c);
        proxy.shutdown().await;
    })
    .await
}

/// The idle-close watch of the server's leg after the other ways a session is served from
/// the cache without touching that leg: prepared executes, commands pipelined in one write,
/// a compressed session (adversary28; the watch parks the task's waker only for plain
/// legs, and a hit of any kind leaves it parked).
#[tokio::test]
async fn a_session_the_server_ends_after_other_hits_is_closed() {
    bounded("test", TEST_LIMIT, async {
        let schema = common::fresh_schema("fault_idle_hits").await;
        let mut d = common::direct_to(&schema).await;
        d.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .unwrap();
        d.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
        let proxy = common::proxy(|_| {}).await;
        let user = common::db().user.clone();
        let hits = || proxy.running.shared.cache.stats().hits();

        // Prepared: the execute's hits.
        let mut raw = Raw::connect(&proxy.addr_string(), &user, &schema, true).await;
        let mut p = vec![com::STMT_PREPARE];
        p.extend_from_slice(b"SELECT id FROM t");
        let (_, resp) = raw.command(&p, Expect::Prepare).await;
        let (stmt, _, _) = resp.prepared.expect("prepared");
        let mut e = vec![com::STMT_EXECUTE];
        e.extend_from_slice(&stmt.to_le_bytes());
        e.push(0);
        e.extend_from_slice(&1u32.to_le_bytes());
        let before = hits();
        for _ in 0..5 {
            let (_, resp) = raw.command(&e, Expect::Results).await;
            assert!(!resp.error);
        }
        assert!(
            hits() >= before + 4,
            "the executes were not served from the cache"
        );
        kill_and_expect_close(&mut d, &mut raw, "after KILL, prepared hits").await;

        // Pipelined: two hits sent in one write, both answered, then idle.
        let mut raw = Raw::connect(&proxy.addr_string(), &user, &schema, true).await;
        let (_, resp) = raw.query("SELECT id FROM t").await;
        assert!(!resp.error);
        let before = hits();
        let mut wire = bytes::BytesMut::new();
        let mut q = vec![com::QUERY];
        q.extend_from_slice(b"SELECT id FROM t");
        qcache::protocol::codec::encode(0, &q, &mut wire);
        qcache::protocol::codec::encode(0, &q, &mut wire);
        raw.send_wire(&wire).await;
        for _ in 0..2 {
            let (_, resp) = raw.response(Expect::Results).await;
            assert!(!resp.error);
        }
        assert!(
            hits() >= before + 2,
            "the pipelined reads were not served from the cache"
        );
        kill_and_expect_close(&mut d, &mut raw, "after KILL, pipelined hits").await;

        // Compressed.
        let mut raw = Raw::connect_compressed(
            &proxy.addr_string(),
            &user,
            &schema,
            true,
            Some(qcache::protocol::compress::Algorithm::Zlib),
        )
        .await;
        let before = hits();
        for _ in 0..5 {
            let (_, resp) = raw.query("SELECT id FROM t").await;
            assert!(!resp.error);
        }
        assert!(
            hits() >= before + 4,
            "the compressed reads were not served from the cache"
        );
        kill_and_expect_close(&mut d, &mut raw, "after KILL, compressed hits").await;

        // The server's idle timeout after hits (the watch parked).
        let mut raw = Raw::connect(&proxy.addr_string(), &user, &schema, true).await;
        let (_, resp) = raw.query("SET SESSION wait_timeout = 2").await;
        assert!(!resp.error);
        for _ in 0..5 {
            let (_, resp) = raw.query("SELECT id FROM t").await;
            assert!(!resp.error);
        }
        expect_close(&mut raw, "after wait_timeout, hits").await;
        proxy.shutdown().await;
    })
    .await
}

/// KILLs the server's connection behind `raw` (its id from the greeting qcache relayed) on
/// `d`, then [`expect_close`].
async fn kill_and_expect_close(d: &mut mysql_async::Conn, raw: &mut Raw, when: &str) {
    let id = qcache::protocol::handshake::parse_greeting(&raw.greeting.payload)
        .expect("greeting")
        .connection_id;
    d.query_drop(format!("KILL {id}")).await.unwrap();
    expect_close(raw, when).await;
}

/// The client connection closes within a few seconds; anything before the close must be an
/// error packet (MySQL 8 sends one before closing an idle session).
async fn expect_close(raw: &mut Raw, when: &str) {
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(p) = raw.read().await {
            assert_eq!(p.payload.first(), Some(&0xff), "{when}: unexpected packet");
        }
    })
    .await;
    assert!(closed.is_ok(), "{when}: the client connection stayed open");
}
