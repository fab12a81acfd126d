//! Prepared statements through the cache: binary results byte-identical from a hit, keys
//! that separate parameter values, cursors and long data never cached, shared entries
//! across connections, and malformed executes answered cleanly.

mod common;
mod rawclient;

use mysql_async::prelude::*;
use mysql_async::{Row, Value};
use qcache::protocol::codec::Packet;
use qcache::protocol::packets::com;
use qcache::protocol::response::Expect;
use rawclient::Raw;

async fn prepare(r: &mut Raw, sql: &str) -> (u32, u16) {
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(sql.as_bytes());
    let (_, resp) = r.command(&p, Expect::Prepare).await;
    let (id, _, params) = resp.prepared.expect("prepared");
    (id, params)
}

/// COM_STMT_EXECUTE with LONGLONG parameters (None = NULL).
fn execute(id: u32, flags: u8, params: &[Option<i64>]) -> Vec<u8> {
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(flags);
    e.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        let mut bitmap = vec![0u8; params.len().div_ceil(8)];
        for (i, p) in params.iter().enumerate() {
            if p.is_none() {
                bitmap[i / 8] |= 1 << (i % 8);
            }
        }
        e.extend_from_slice(&bitmap);
        e.push(1);
        for _ in params {
            e.extend_from_slice(&[0x08, 0]);
        }
        for v in params.iter().flatten() {
            e.extend_from_slice(&v.to_le_bytes());
        }
    }
    e
}

/// COM_STMT_EXECUTE of a one-parameter statement with new-params-bound 0: the types are
/// not re-sent. [id][flags][iterations][bitmap][bound=0][value]
fn execute_untyped(id: u32, value: i64) -> Vec<u8> {
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    e.push(0);
    e.push(0);
    e.extend_from_slice(&value.to_le_bytes());
    e
}

async fn setup(schema: &str) {
    let mut d = common::direct_to(schema).await;
    d.query_drop("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20), d DECIMAL(8,2), f DOUBLE, dt DATETIME(3), n INT NULL)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t VALUES (1,'one',1.25,0.5,'2024-01-01 10:00:00.123',NULL),(2,'two',2.50,1.5,'2024-02-02 11:11:11.000',7)")
        .await
        .unwrap();
}

#[tokio::test]
async fn binary_hits_are_byte_identical_and_keyed_by_values() {
    let schema = common::fresh_schema("ps_bytes").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    for deprecate_eof in [false, true] {
        let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, deprecate_eof).await;
        let mut d = Raw::connect(&common::db().addr(), "root", &schema, deprecate_eof).await;
        let sql = "SELECT * FROM t WHERE id = ? OR n <=> ?";
        let (cid, params) = prepare(&mut c, sql).await;
        let (did, _) = prepare(&mut d, sql).await;
        assert_eq!(params, 2);
        let hits = stats().hits();
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for args in [[Some(1), None], [Some(2), None], [Some(1), Some(7)]] {
            let (miss, _) = c.command(&execute(cid, 0, &args), Expect::Results).await;
            let (hit, _) = c.command(&execute(cid, 0, &args), Expect::Results).await;
            let (server, _) = d.command(&execute(did, 0, &args), Expect::Results).await;
            assert_eq!(Raw::wire(&miss), Raw::wire(&server), "{args:?}");
            assert_eq!(
                Raw::wire(&hit),
                Raw::wire(&server),
                "{args:?} from the cache"
            );
            seen.push(Raw::wire(&hit));
        }
        assert_ne!(seen[0], seen[1], "different values must not share an entry");
        assert_ne!(
            seen[0], seen[2],
            "a NULL and a value must not share an entry"
        );
        assert_eq!(stats().hits(), hits + 3);
    }
    proxy.shutdown().await;
}

/// Every column type MariaDB has, a row of edge values and a row of NULLs, through both
/// protocols: miss and hit are the server's bytes, with and without DEPRECATE_EOF and with
/// MariaDB's extended type info (which changes the column definitions of JSON, INET6, UUID
/// and the geometries).
#[tokio::test]
async fn every_column_type_from_a_hit_is_byte_identical() {
    use qcache::protocol::packets::mariadb_cap::EXTENDED_TYPE_INFO;
    let schema = common::fresh_schema("ps_types").await;
    common::setup_types(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let hits = || proxy.running.shared.cache.stats().hits();
    let before = hits();
    for (deprecate_eof, ext) in [(false, 0), (true, 0), (true, EXTENDED_TYPE_INFO)] {
        let case = format!("deprecate_eof={deprecate_eof} ext={ext}");
        let addr = proxy.addr_string();
        let mut c = Raw::connect_mariadb(&addr, "root", &schema, deprecate_eof, ext).await;
        let mut d =
            Raw::connect_mariadb(&common::db().addr(), "root", &schema, deprecate_eof, ext).await;

        let q = "SELECT * FROM types ORDER BY id";
        let (server, resp) = d.query(q).await;
        assert!(!resp.error, "{case}: the server refused the text query");
        let (miss, _) = c.query(q).await;
        let (hit, _) = c.query(q).await;
        assert_eq!(Raw::wire(&miss), Raw::wire(&server), "text miss, {case}");
        assert_eq!(Raw::wire(&hit), Raw::wire(&server), "text hit, {case}");

        let sql = "SELECT * FROM types WHERE id = ?";
        let (cid, _) = prepare(&mut c, sql).await;
        let (did, _) = prepare(&mut d, sql).await;
        for id in [1, 2] {
            let (server, resp) = d
                .command(&execute(did, 0, &[Some(id)]), Expect::Results)
                .await;
            assert!(!resp.error, "{case}: the server refused execute {id}");
            let (miss, _) = c
                .command(&execute(cid, 0, &[Some(id)]), Expect::Results)
                .await;
            let (hit, _) = c
                .command(&execute(cid, 0, &[Some(id)]), Expect::Results)
                .await;
            let what = format!("binary row {id}, {case}");
            assert_eq!(Raw::wire(&miss), Raw::wire(&server), "miss, {what}");
            assert_eq!(Raw::wire(&hit), Raw::wire(&server), "hit, {what}");
        }
    }
    // At least the text hit and the two binary hits of each case came from the cache.
    assert!(hits() >= before + 9, "hits {} -> {}", before, hits());
    proxy.shutdown().await;
}

#[tokio::test]
async fn same_sql_on_two_connections_shares_entries_and_survives_reprepare() {
    let schema = common::fresh_schema("ps_share").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut a = proxy.conn(&schema).await;
    let mut b = proxy.conn(&schema).await;
    let q = "SELECT s, d, f, dt, n FROM t WHERE id = ?";
    let ra: Vec<Row> = a.exec(q, (2,)).await.unwrap();
    let hits = stats().hits();
    let rb: Vec<Row> = b.exec(q, (2,)).await.unwrap();
    assert_eq!(stats().hits(), hits + 1, "b was served a's entry");
    let va: Vec<Vec<Value>> = ra.into_iter().map(Row::unwrap).collect();
    let vb: Vec<Vec<Value>> = rb.into_iter().map(Row::unwrap).collect();
    assert_eq!(va, vb);
    // close and prepare again: still the same entry
    let stmt = a.prep(q).await.unwrap();
    a.close(stmt).await.unwrap();
    let _: Vec<Row> = a.exec(q, (2,)).await.unwrap();
    assert_eq!(stats().hits(), hits + 2);
    // values through the cache equal the server's
    let mut d = common::direct_to(&schema).await;
    let rd: Vec<Row> = d.exec(q, (2,)).await.unwrap();
    let vd: Vec<Vec<Value>> = rd.into_iter().map(Row::unwrap).collect();
    assert_eq!(va, vd);
    proxy.shutdown().await;
}

/// COM_RESET_CONNECTION makes the server forget the session's statements: an execute of an
/// old id gets the server's error, never the result cached under it, and the statement
/// prepared next answers for its own SQL.
#[tokio::test]
async fn statements_forgotten_by_a_reset_are_never_served() {
    let schema = common::fresh_schema("ps_reset").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let mut d = Raw::connect(&common::db().addr(), "root", &schema, true).await;
    let (old, _) = prepare(&mut c, "SELECT s FROM t WHERE id = ?").await;
    for _ in 0..2 {
        let (_, resp) = c
            .command(&execute(old, 0, &[Some(2)]), Expect::Results)
            .await;
        assert!(!resp.error);
    }
    let (_, resp) = c.command(&[com::RESET_CONNECTION], Expect::OnePacket).await;
    assert!(!resp.error, "reset refused");

    let hits = stats().hits();
    let (_, resp) = c
        .command(&execute(old, 0, &[Some(2)]), Expect::Results)
        .await;
    assert!(
        resp.error,
        "the server forgot statement {old}; so must qcache"
    );
    assert_eq!(stats().hits(), hits);

    let sql = "SELECT n FROM t WHERE id = ?";
    let (new, _) = prepare(&mut c, sql).await;
    let (did, _) = prepare(&mut d, sql).await;
    let (server, _) = d
        .command(&execute(did, 0, &[Some(2)]), Expect::Results)
        .await;
    for _ in 0..2 {
        let (got, _) = c
            .command(&execute(new, 0, &[Some(2)]), Expect::Results)
            .await;
        assert_eq!(Raw::wire(&got), Raw::wire(&server), "statement {new}");
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn cursors_and_long_data_are_never_cached_and_still_correct() {
    let schema = common::fresh_schema("ps_cursor").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, false).await;
    let (id, _) = prepare(&mut c, "SELECT id FROM t WHERE id >= ? ORDER BY id").await;
    let inserts = stats().inserts();
    for _ in 0..2 {
        let (_, resp) = c
            .command(&execute(id, 1, &[Some(1)]), Expect::Results)
            .await;
        assert!(resp.cursor);
        let mut f = vec![com::STMT_FETCH];
        f.extend_from_slice(&id.to_le_bytes());
        f.extend_from_slice(&10u32.to_le_bytes());
        let (_, rows) = c.command(&f, Expect::Rows).await;
        assert_eq!(rows.rows, 2);
        let mut r = vec![com::STMT_RESET];
        r.extend_from_slice(&id.to_le_bytes());
        c.command(&r, Expect::OnePacket).await;
    }
    assert_eq!(stats().inserts(), inserts, "a cursor execution was stored");
    // long data: the value is not in the execute packet
    let (id, _) = prepare(&mut c, "SELECT COUNT(*) FROM t WHERE s = ?").await;
    for _ in 0..2 {
        let mut ld = vec![com::STMT_SEND_LONG_DATA];
        ld.extend_from_slice(&id.to_le_bytes());
        ld.extend_from_slice(&0u16.to_le_bytes());
        ld.extend_from_slice(b"two");
        c.send(0, &ld).await;
        let mut e = vec![com::STMT_EXECUTE];
        e.extend_from_slice(&id.to_le_bytes());
        e.push(0);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.push(0);
        e.push(1);
        e.extend_from_slice(&[0xfe, 0]); // STRING, value sent as long data
        let (pk, resp) = c.command(&e, Expect::Results).await;
        assert!(!resp.error, "{pk:?}");
        assert_eq!(resp.rows, 1);
        let last_row: &Packet = &pk[pk.len() - 2];
        // binary row: header, null bitmap, COUNT(*) = 1 as LONGLONG
        assert_eq!(&last_row.payload[..], &[0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    }
    assert_eq!(
        stats().inserts(),
        inserts,
        "a long-data execution was stored"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn malformed_executes_get_clean_errors() {
    let schema = common::fresh_schema("ps_bad").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    // unknown statement id: the server's own error
    let (pk, resp) = c.command(&execute(9999, 0, &[]), Expect::Results).await;
    assert!(resp.error, "{pk:?}");
    let (id, _) = prepare(&mut c, "SELECT s FROM t WHERE id = ?").await;
    let inserts = stats().inserts();
    // truncated: parameters announced, values missing
    let mut e = execute(id, 0, &[Some(1)]);
    e.truncate(e.len() - 6);
    let (pk, resp) = c.command(&e, Expect::Results).await;
    assert!(resp.error, "{pk:?}");
    // no types ever sent and new-params-bound = 0
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    e.push(0);
    e.push(0);
    let (_, _) = c.command(&e, Expect::Results).await;
    // way too short
    let (pk, resp) = c.command(&[com::STMT_EXECUTE, 1], Expect::Results).await;
    assert!(resp.error, "{pk:?}");
    assert_eq!(stats().inserts(), inserts, "a malformed execute was stored");
    // the session still works, and a good execute is cached
    let (_, resp) = c
        .command(&execute(id, 0, &[Some(1)]), Expect::Results)
        .await;
    assert!(!resp.error);
    proxy.shutdown().await;
}

#[tokio::test]
async fn hints_and_query_cache_type_apply_to_prepared_selects() {
    let schema = common::fresh_schema("ps_hint").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let stats = || proxy.running.shared.cache.stats();
    let mut c = proxy.conn(&schema).await;
    let inserts = stats().inserts();
    for _ in 0..2 {
        let _: Vec<Row> = c
            .exec("SELECT SQL_NO_CACHE s FROM t WHERE id = ?", (1,))
            .await
            .unwrap();
    }
    assert_eq!(stats().inserts(), inserts);
    c.query_drop("SET query_cache_type = DEMAND").await.unwrap();
    for _ in 0..2 {
        let _: Vec<Row> = c.exec("SELECT s FROM t WHERE id = ?", (1,)).await.unwrap();
    }
    assert_eq!(stats().inserts(), inserts);
    let hits = stats().hits();
    for _ in 0..2 {
        let _: Vec<Row> = c
            .exec("SELECT SQL_CACHE s FROM t WHERE id = ?", (1,))
            .await
            .unwrap();
    }
    assert_eq!(stats().inserts(), inserts + 1);
    assert_eq!(stats().hits(), hits + 1);
    proxy.shutdown().await;
}

/// A client sends parameter types once and then executes with new-params-bound = 0, as
/// libmariadb (sysbench) does. When the execute that carried the types was a hit, the
/// server never saw them: the next miss must still work.
#[tokio::test]
async fn types_sent_only_in_a_hit_reach_the_server_on_the_next_miss() {
    let schema = common::fresh_schema("ps_types").await;
    setup(&schema).await;
    let proxy = common::proxy(|_| {}).await;
    let sql = "SELECT s FROM t WHERE id = ?";
    let mut a = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let (aid, _) = prepare(&mut a, sql).await;
    let (_, resp) = a
        .command(&execute(aid, 0, &[Some(1)]), Expect::Results)
        .await;
    assert!(!resp.error);
    let mut b = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let (bid, _) = prepare(&mut b, sql).await;
    let hits = proxy.running.shared.cache.stats().hits();
    let (_, resp) = b
        .command(&execute(bid, 0, &[Some(1)]), Expect::Results)
        .await;
    assert!(!resp.error);
    assert_eq!(proxy.running.shared.cache.stats().hits(), hits + 1);
    let e = execute_untyped(bid, 2);
    for _ in 0..2 {
        expect_one_row(&mut b, &e).await;
    }
    proxy.shutdown().await;
}

/// Runs `execute` and requires one row, showing the server's error if there was one.
async fn expect_one_row(c: &mut Raw, execute: &[u8]) {
    let (pk, resp) = c.command(execute, Expect::Results).await;
    assert!(
        !resp.error,
        "{:?}",
        qcache::protocol::packets::parse_err(&pk[0].payload)
    );
    assert_eq!(resp.rows, 1);
}

/// The same through stampede protection: a session whose typed execute waited for another
/// session's identical miss and was served its result never sent the types either, so its
/// next untyped execute must carry them (sysbench at 64 threads hit ER 1210 here).
#[tokio::test]
async fn types_of_an_execute_served_by_another_sessions_fill_reach_the_server() {
    let schema = common::fresh_schema("ps_follow").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE big (id INT PRIMARY KEY)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO big SELECT seq FROM seq_1_to_3000")
        .await
        .unwrap();
    let proxy = common::proxy(|c| {
        c.cache.stampede_timeout = std::time::Duration::from_secs(60);
    })
    .await;
    // Slow enough (a 9M-row join) that the second session arrives while the first fills.
    let sql = "SELECT COUNT(*) FROM big a JOIN big b WHERE a.id > ? AND b.id > 0";
    let mut a = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let (aid, _) = prepare(&mut a, sql).await;
    let mut b = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let (bid, _) = prepare(&mut b, sql).await;
    let leader = tokio::spawn(async move {
        let (_, resp) = a
            .command(&execute(aid, 0, &[Some(0)]), Expect::Results)
            .await;
        assert!(!resp.error);
    });
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let waits = proxy
        .running
        .shared
        .cache
        .stats()
        .stampede_waits
        .load(std::sync::atomic::Ordering::Relaxed);
    let (_, resp) = b
        .command(&execute(bid, 0, &[Some(0)]), Expect::Results)
        .await;
    assert!(!resp.error);
    leader.await.unwrap();
    assert_eq!(
        proxy
            .running
            .shared
            .cache
            .stats()
            .stampede_waits
            .load(std::sync::atomic::Ordering::Relaxed),
        waits + 1,
        "the second execute did not wait for the first (the join was too fast?)"
    );
    // Untyped execute with another value: a miss that must reach the server with types.
    expect_one_row(&mut b, &execute_untyped(bid, 2990)).await;
    proxy.shutdown().await;
}

/// A prepared write whose first parameter came as long data: the execute packet holds only
/// the second one's value, which read from the start looks like a short string. The write's
/// rows are not in the packet, so it must invalidate as a write with unknown rows (found by
/// the third adversarial round: the sliced entry of the real value stayed cached).
#[tokio::test]
async fn a_long_data_write_names_no_rows() {
    let schema = common::fresh_schema("ps_long_write").await;
    let proxy = common::proxy(|_| {}).await;
    let mut m = mysql_async::Conn::from_url(proxy.url(&schema))
        .await
        .unwrap();
    m.query_drop(
        "CREATE TABLE lw (id INT PRIMARY KEY, name VARCHAR(20) COLLATE utf8mb4_bin NOT NULL)",
    )
    .await
    .unwrap();
    let read = "SELECT id FROM lw WHERE name = 'alice'";
    for _ in 0..2 {
        let rows: Vec<i64> = m.query(read).await.unwrap();
        assert!(rows.is_empty());
    }
    let mut c = Raw::connect(&proxy.addr_string(), "root", &schema, false).await;
    // Not through the binlog: what qcache does for its own write must be right by itself.
    let (_, resp) = c.query("SET SESSION sql_log_bin = 0").await;
    assert!(!resp.error);
    let (id, params) = prepare(&mut c, "INSERT INTO lw (name, id) VALUES (?, ?)").await;
    assert_eq!(params, 2);
    let mut ld = vec![com::STMT_SEND_LONG_DATA];
    ld.extend_from_slice(&id.to_le_bytes());
    ld.extend_from_slice(&0u16.to_le_bytes());
    ld.extend_from_slice(b"alice");
    c.send(0, &ld).await;
    // id's LONGLONG bytes read as a length-encoded string are "bob".
    let id_value = i64::from_le_bytes([3, b'b', b'o', b'b', 0, 0, 0, 0]);
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    e.push(0);
    e.push(1);
    e.extend_from_slice(&[0xfe, 0, 0x08, 0]);
    e.extend_from_slice(&id_value.to_le_bytes());
    let (pk, resp) = c.command(&e, Expect::Results).await;
    assert!(!resp.error, "{pk:?}");
    let rows: Vec<i64> = m.query(read).await.unwrap();
    assert_eq!(
        rows,
        vec![id_value],
        "the long-data row was not seen through qcache"
    );
    proxy.shutdown().await;
}

/// Row slices with a client that sends parameter types only on the first execute (as
/// libmariadb does): the later, untyped executes of a write still name their rows, so
/// another customer's entry stays served.
#[tokio::test]
async fn untyped_executes_of_a_write_name_their_rows() {
    let schema = common::fresh_schema("ps_rows").await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop(
        "CREATE TABLE o (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, \
         KEY (customer_id))",
    )
    .await
    .unwrap();
    d.query_drop("INSERT INTO o (customer_id) VALUES (1), (2)")
        .await
        .unwrap();
    let proxy = common::proxy(|c| {
        c.invalidation.granularity = qcache::config::Granularity::Row;
    })
    .await;
    let mut c = proxy.conn(&schema).await;
    let two = "SELECT id FROM o WHERE customer_id = 2 ORDER BY id";
    let mut w = Raw::connect(&proxy.addr_string(), "root", &schema, true).await;
    let (id, _) = prepare(&mut w, "INSERT INTO o (customer_id) VALUES (?)").await;
    let hits = || proxy.running.shared.cache.stats().hits();
    for (i, e) in [execute(id, 0, &[Some(1)]), execute_untyped(id, 1)]
        .iter()
        .enumerate()
    {
        let _: Vec<i64> = c.query(two).await.unwrap();
        let (pk, resp) = w.command(e, Expect::Results).await;
        assert!(
            !resp.error,
            "{:?}",
            qcache::protocol::packets::parse_err(&pk[0].payload)
        );
        let h = hits();
        let got: Vec<i64> = c.query(two).await.unwrap();
        assert_eq!(got, vec![2]);
        assert_eq!(hits(), h + 1, "customer 2's entry served after execute {i}");
    }
    proxy.shutdown().await;
}

// ----- issue #35: the server's view of a prepared statement, differential ----------------

/// A raw differential step: the connection (its index) and one command's payload, in which
/// the statement ids `LAST_ID` and `FIRST_ID` stand for the ids the connection's last and
/// first successful prepares got (the server numbers statements across connections, so
/// runs get different ids).
type RawStep = (usize, Vec<u8>);

/// A placeholder id, replaced by the connection's last prepared id (`raw_run`).
const LAST_ID: u32 = 0xFFFF_FF00;
/// A placeholder id, replaced by the connection's first prepared id.
const FIRST_ID: u32 = 0xFFFF_FF01;
/// MariaDB's "the statement prepared last", sent as it is.
const MINUS_ONE: u32 = u32::MAX;

/// The header of a COM_STMT_EXECUTE: id, flags, one iteration.
fn exec_head(id: u32, flags: u8) -> Vec<u8> {
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(flags);
    e.extend_from_slice(&1u32.to_le_bytes());
    e
}

/// An execute of a one-parameter statement: `types` None sends new-params-bound 0.
fn exec1(id: u32, types: Option<[u8; 2]>, value: Option<&[u8]>) -> Vec<u8> {
    let mut e = exec_head(id, 0);
    e.push(if value.is_none() { 1 } else { 0 });
    match types {
        Some(t) => {
            e.push(1);
            e.extend_from_slice(&t);
        }
        None => e.push(0),
    }
    if let Some(v) = value {
        e.extend_from_slice(v);
    }
    e
}

fn lenenc(s: &[u8]) -> Vec<u8> {
    assert!(s.len() < 251);
    let mut v = vec![s.len() as u8];
    v.extend_from_slice(s);
    v
}

const LONGLONG: [u8; 2] = [0x08, 0];
const ULONGLONG: [u8; 2] = [0x08, 0x80];
const STRING: [u8; 2] = [0xfe, 0];
const TINY: [u8; 2] = [0x01, 0];

fn prep(conn: usize, sql: &str) -> RawStep {
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(sql.as_bytes());
    (conn, p)
}

fn query(conn: usize, sql: &str) -> RawStep {
    let mut p = vec![com::QUERY];
    p.extend_from_slice(sql.as_bytes());
    (conn, p)
}

fn stmt_cmd(cmd: u8, id: u32, rest: &[u8]) -> Vec<u8> {
    let mut p = vec![cmd];
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(rest);
    p
}

/// MariaDB's extended capability for COM_STMT_BULK_EXECUTE.
const STMT_BULK_OPERATIONS: u32 = 1 << 2;

/// Runs `steps` on connections to `addr` (default database `schema`), MariaDB's bulk
/// execute asked for: one line per step describing the
/// answer, the schema's name written back as `{db}`.
async fn raw_run(addr: &str, schema: &str, steps: &[RawStep]) -> Vec<String> {
    let mut conns: Vec<(Raw, Vec<u32>)> = Vec::new();
    let mut out = Vec::new();
    for (c, payload) in steps {
        while conns.len() <= *c {
            let r = Raw::connect_mariadb(addr, "root", schema, true, STMT_BULK_OPERATIONS).await;
            conns.push((r, Vec::new()));
        }
        let (conn, ids) = &mut conns[*c];
        let mut payload = payload.clone();
        for (placeholder, id) in [(LAST_ID, ids.last()), (FIRST_ID, ids.first())] {
            if payload.len() >= 5 && payload[1..5] == placeholder.to_le_bytes() {
                let id = id.copied().unwrap_or(0);
                payload[1..5].copy_from_slice(&id.to_le_bytes());
            }
        }
        let expect = match payload[0] {
            com::STMT_PREPARE => Expect::Prepare,
            com::STMT_CLOSE | com::STMT_SEND_LONG_DATA => Expect::Nothing,
            com::STMT_RESET => Expect::OnePacket,
            com::STMT_FETCH => Expect::Rows,
            _ => Expect::Results,
        };
        let (mut pk, resp) = conn.command(&payload, expect).await;
        if let Some((id, _, _)) = resp.prepared {
            ids.push(id);
            // The id itself differs between runs.
            let mut ok = pk[0].payload.to_vec();
            ok[1..5].fill(0);
            pk[0] = Packet::new(pk[0].seq, ok);
        }
        let text: Vec<String> = pk
            .iter()
            .map(|p| String::from_utf8_lossy(&p.payload).into_owned())
            .collect();
        let mut text = format!("{text:?}").replace(schema, "{db}");
        // Errors name the ids.
        for (k, id) in ids.iter().enumerate() {
            text = text.replace(&format!("({id})"), &format!("(#{k})"));
        }
        out.push(text);
    }
    for (mut r, _) in conns {
        r.send(0, &[com::QUIT]).await;
    }
    out
}

/// Runs `steps` straight to the server, then through qcache with its binlog tail off and on,
/// each in a fresh schema prepared by `setup`, and fails at the first answer that differs.
async fn raw_differential(prefix: &str, setup: &[&str], steps: &[RawStep]) {
    let mut want = None;
    for mode in ["direct", "tail off", "tail on"] {
        let schema = common::fresh_schema(prefix).await;
        let mut d = common::direct_to(&schema).await;
        for s in setup {
            d.query_drop(*s).await.unwrap();
        }
        let _ = d.disconnect().await;
        let proxy = match mode {
            "direct" => None,
            "tail off" => Some(common::proxy(|_| {}).await),
            _ => Some(tail_proxy(|_| {}).await),
        };
        let addr = match &proxy {
            Some(p) => p.addr_string(),
            None => common::db().addr(),
        };
        let got = raw_run(&addr, &schema, steps).await;
        if let Some(p) = proxy {
            p.shutdown().await;
        }
        let Some(want) = &want else {
            want = Some(got);
            continue;
        };
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(
                g,
                w,
                "{mode}: step {i} ({:?}): through qcache (left) differs from the server (right)",
                String::from_utf8_lossy(&steps[i].1)
            );
        }
    }
}

/// A proxy with its binlog tail on (a server id of its own), connected.
async fn tail_proxy(tweak: fn(&mut qcache::config::Config)) -> common::TestProxy {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let p = common::proxy(|c| {
        tweak(c);
        c.invalidation.binlog = qcache::config::BinlogMode::On;
        c.invalidation.server_id = 3_000_000
            + (std::process::id() % 10_000) * 10
            + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })
    .await;
    let b = p
        .running
        .shared
        .binlog
        .clone()
        .expect("binlog tail running");
    assert!(
        b.wait_until_connected(std::time::Duration::from_secs(20))
            .await,
        "binlog stream did not connect: {:?}",
        b.status()
    );
    p
}

const ECHO_SETUP: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20))",
    "INSERT INTO t VALUES (1, 'one')",
];
const ECHO: &str = "SELECT ? AS v FROM t WHERE id = 1";

/// Class 2: an execute that sends new parameter types and is answered from the cache must
/// still leave the server with those types, so that the next execute without types is
/// decoded as the client meant it, and its result is not stored for other sessions under a
/// key naming types the server did not use.
#[tokio::test]
async fn parameter_types_changed_by_a_hit_reach_the_server() {
    let s8 = lenenc(b"12345678");
    let s7 = lenenc(b"abcdefg");
    let steps = vec![
        prep(0, ECHO),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        prep(1, ECHO),
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        // A hit of connection 0's fill: the server still holds LONGLONG for connection 1.
        (1, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // Without types: the server must read a STRING, as the client last said.
        (1, exec1(LAST_ID, None, Some(&s7))),
        (0, exec1(LAST_ID, None, Some(&s7))),
        // Signed and unsigned: only the flag changes.
        (
            1,
            exec1(LAST_ID, Some(LONGLONG), Some(&(-1i64).to_le_bytes())),
        ),
        (
            0,
            exec1(LAST_ID, Some(ULONGLONG), Some(&(-1i64).to_le_bytes())),
        ),
        (
            1,
            exec1(LAST_ID, Some(ULONGLONG), Some(&(-1i64).to_le_bytes())),
        ),
        (1, exec1(LAST_ID, None, Some(&(-2i64).to_le_bytes()))),
        (0, exec1(LAST_ID, None, Some(&(-2i64).to_le_bytes()))),
        // A narrower type after a hit: too few bytes for the old one (error 1210 if the
        // server kept LONGLONG).
        (0, exec1(LAST_ID, Some(TINY), Some(&[7]))),
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&9i64.to_le_bytes()))),
        (1, exec1(LAST_ID, Some(TINY), Some(&[7]))),
        (1, exec1(LAST_ID, None, Some(&[8]))),
        (0, exec1(LAST_ID, None, Some(&[8]))),
        // NULL with and without types.
        (1, exec1(LAST_ID, Some(STRING), None)),
        (1, exec1(LAST_ID, None, None)),
        (0, exec1(LAST_ID, None, None)),
    ];
    raw_differential("ps35_types", ECHO_SETUP, &steps).await;
}

/// Class 2, siblings: COM_STMT_RESET, long data, a re-prepare and MariaDB's bulk execute
/// after types changed in a hit.
#[tokio::test]
async fn parameter_types_survive_reset_long_data_reprepare_and_bulk() {
    let s8 = lenenc(b"12345678");
    let s7 = lenenc(b"abcdefg");
    let mut long = stmt_cmd(com::STMT_SEND_LONG_DATA, LAST_ID, &0u16.to_le_bytes());
    long.extend_from_slice(b"hijklmn");
    // [id][flags][types if flags & 128][per row: indicator, value]
    let mut bulk = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &0u16.to_le_bytes());
    bulk.push(0);
    bulk.extend_from_slice(&s7);
    let mut bulk_typed = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &128u16.to_le_bytes());
    bulk_typed.extend_from_slice(&STRING);
    bulk_typed.push(0);
    bulk_typed.extend_from_slice(&s7);
    let steps = vec![
        prep(0, ECHO),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        prep(1, ECHO),
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (1, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // A reset keeps the types the server holds (or not): the same either way.
        (1, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
        (1, exec1(LAST_ID, None, Some(&s7))),
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (1, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // Long data for the parameter, then an execute without types.
        (1, long.clone()),
        (1, exec1(LAST_ID, None, Some(&[]))),
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (1, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // Bulk execute without types (the server refuses a bulk SELECT before it reads
        // any types: it keeps those it holds).
        (1, bulk.clone()),
        (1, exec1(LAST_ID, None, Some(&s7))),
        // A bulk with types: refused too, before the server read them: it keeps LONGLONG.
        (1, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (1, bulk_typed.clone()),
        (1, exec1(LAST_ID, None, Some(&s7))),
        // Another session asking for the LONGLONG those bytes make must not get that string.
        prep(2, ECHO),
        (2, exec1(LAST_ID, Some(LONGLONG), Some(&s7))),
        // A statement prepared again starts with no types.
        prep(1, ECHO),
        (1, exec1(LAST_ID, None, Some(&s7))),
        (1, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (1, exec1(LAST_ID, None, Some(&s7))),
    ];
    raw_differential("ps35_siblings", ECHO_SETUP, &steps).await;
}

/// Class 2, a bulk execute after a hit: MariaDB refuses a bulk SELECT (1295) *before* it
/// reads the types the bulk carries, so the server keeps those it held. A write between
/// makes the LONGLONG execute a miss (the server holds LONGLONG) while the STRING one after
/// it is a hit (the client's last types are STRING): the bulk, with or without types, must
/// not count as having given the server STRING, or the execute without types after it goes
/// up as it came and the server reads its string as a LONGLONG. This is the timing under
/// which `parameter_types_survive_reset_long_data_reprepare_and_bulk` failed under load
/// with the tail on (a hit suspended while the tail lagged made its step 11 a miss).
#[tokio::test]
async fn a_refused_bulk_execute_gives_the_server_no_types() {
    let s8 = lenenc(b"12345678");
    let s7 = lenenc(b"abcdefg");
    let mut bump = vec![com::QUERY];
    bump.extend_from_slice(b"UPDATE t SET id = id WHERE id = 1");
    let mut bulk = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &0u16.to_le_bytes());
    bulk.push(0);
    bulk.extend_from_slice(&s7);
    let mut bulk_long = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &128u16.to_le_bytes());
    bulk_long.extend_from_slice(&LONGLONG);
    bulk_long.push(0);
    bulk_long.extend_from_slice(&5i64.to_le_bytes());
    let mut steps = Vec::new();
    for (conn, b) in [(0, bulk), (1, bulk_long)] {
        steps.extend([
            prep(conn, ECHO),
            (
                conn,
                exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes())),
            ),
            (conn, bump.clone()),
            (conn, exec1(LAST_ID, Some(STRING), Some(&s8))),
            // A miss (its entry was filled before the write): the server holds LONGLONG.
            (
                conn,
                exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes())),
            ),
            // A hit: the client's last types are STRING, the server's still LONGLONG.
            (conn, exec1(LAST_ID, Some(STRING), Some(&s8))),
            (conn, b),
            (conn, exec1(LAST_ID, None, Some(&s7))),
            (conn, exec1(LAST_ID, None, Some(&s8))),
        ]);
    }
    raw_differential("ps35_bulk_refused", ECHO_SETUP, &steps).await;
}

/// adversary29, class 2: parameter types the server has no handler for (MariaDB 10.11
/// accepts 0x00 to 0x10 and 0xf6 to 0xff; 0x11 to 0xf5 — TIMESTAMP2, JSON, 99 — get
/// ER_WRONG_ARGUMENTS before the server stores any type, so it keeps the types it held).
/// Such an execute must not teach qcache types the server never took: the execute without
/// types after it runs with the old ones, and its result must not be stored under a key
/// naming the refused types, where the same execute with those types sent again (in this
/// session or another) would be served rows instead of the server's error. Also after a
/// hit left the server holding older types than the client's.
#[tokio::test]
async fn parameter_types_the_server_refuses_teach_nothing() {
    let s8 = lenenc(b"12345678");
    let bad: [u8; 2] = [99, 0];
    let json: [u8; 2] = [0xf5, 0];
    let mut bump = vec![com::QUERY];
    bump.extend_from_slice(b"UPDATE t SET id = id WHERE id = 1");
    let steps = vec![
        prep(0, ECHO),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(bad), Some(&s8))),
        (0, exec1(LAST_ID, None, Some(&s8))),
        (0, exec1(LAST_ID, Some(bad), Some(&s8))),
        (0, exec1(LAST_ID, Some(json), Some(&s8))),
        (0, exec1(LAST_ID, None, Some(&s8))),
        (0, exec1(LAST_ID, Some(json), Some(&s8))),
        prep(1, ECHO),
        (1, exec1(LAST_ID, Some(bad), Some(&s8))),
        (1, exec1(LAST_ID, Some(json), Some(&s8))),
        // After a hit: the server holds LONGLONG, the client's last are STRING.
        prep(2, ECHO),
        (2, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (2, bump),
        (2, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (2, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (2, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (2, exec1(LAST_ID, Some(bad), Some(&s8))),
        (2, exec1(LAST_ID, None, Some(&s8))),
    ];
    raw_differential("ps29_bad_types", ECHO_SETUP, &steps).await;
}

/// adversary29, long data naming a parameter the statement lacks: MariaDB puts the
/// statement in an error state (ER_WRONG_ARGUMENTS "… to mysqld_stmt_send_long_data") and
/// refuses every execute of it from then on, until COM_STMT_RESET; a long data packet too
/// short to name a parameter is ignored. An execute after the first refused one must get
/// that error, never the rows another execute cached: a statement without parameters (its
/// one key), one with, through its id and through MariaDB's -1.
#[tokio::test]
async fn long_data_for_a_missing_parameter_fails_every_execute_until_reset() {
    let s8 = lenenc(b"12345678");
    let long_to = |id: u32, param: u16| {
        let mut l = stmt_cmd(com::STMT_SEND_LONG_DATA, id, &param.to_le_bytes());
        l.extend_from_slice(b"zzz");
        l
    };
    let exec0 = || {
        let mut e = exec_head(LAST_ID, 0);
        e.truncate(10);
        e
    };
    let steps = vec![
        prep(0, "SELECT s FROM t WHERE id = 1"),
        (0, exec0()),
        (0, exec0()),
        (0, long_to(LAST_ID, 0)),
        (0, exec0()),
        (0, exec0()),
        (0, exec0()),
        (0, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
        (0, exec0()),
        prep(0, ECHO),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, long_to(LAST_ID, 1)),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, None, Some(&s8))),
        (0, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // Through -1.
        (0, long_to(MINUS_ONE, 7)),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, stmt_cmd(com::STMT_RESET, MINUS_ONE, &[])),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        // Too short to name a parameter: ignored, the statement served as before.
        (0, stmt_cmd(com::STMT_SEND_LONG_DATA, LAST_ID, &[0])),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
    ];
    raw_differential("ps29_long_missing", ECHO_SETUP, &steps).await;
}

/// Class 2 with long data: MariaDB reads long data as the kind of value (integer, string,
/// NULL) each parameter last received, whatever types come with the execute. An execute
/// served from the cache leaves the server with the values of an earlier one, so the long
/// data after it would be read as those (here a LONGLONG: a pointer-like integer instead of
/// the string). qcache replays the served execute before the long data. A write between
/// makes the LONGLONG execute a miss while the STRING one after it is still cached.
#[tokio::test]
async fn long_data_after_a_hit_reads_as_the_hits_values() {
    let s8 = lenenc(b"12345678");
    let s7 = lenenc(b"abcdefg");
    let mut long = stmt_cmd(com::STMT_SEND_LONG_DATA, LAST_ID, &0u16.to_le_bytes());
    long.extend_from_slice(b"hijklmn");
    let mut bump = vec![com::QUERY];
    bump.extend_from_slice(b"UPDATE t SET id = id WHERE id = 1");
    let steps = vec![
        prep(0, ECHO),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (0, bump),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
        (0, exec1(LAST_ID, None, Some(&s7))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, long.clone()),
        (0, exec1(LAST_ID, None, Some(&[]))),
        (0, exec1(LAST_ID, None, Some(&s8))),
        // The kind is the value's, not the type's: a NULL served from the cache after a
        // LONGLONG the server ran leaves long data a string, as directly.
        (0, exec1(LAST_ID, Some(LONGLONG), None)),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&6i64.to_le_bytes()))),
        (0, exec1(LAST_ID, Some(LONGLONG), None)),
        (0, long.clone()),
        (0, exec1(LAST_ID, Some(STRING), Some(&[]))),
        // Served again after the replay: another long data needs none.
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, long),
        (0, exec1(LAST_ID, None, Some(&[]))),
    ];
    raw_differential("ps35_long_kinds", ECHO_SETUP, &steps).await;
}

/// Class 4: MariaDB's statement id -1 ("the statement prepared last") after a failed
/// prepare, after a successful one, after closing it, and with reset, long data and close
/// sent to -1: qcache must mean the statement the server means, or none.
#[tokio::test]
async fn statement_id_minus_one_means_what_the_server_means() {
    let one = 1i64.to_le_bytes();
    let steps = vec![
        prep(0, "SELECT s FROM t WHERE id = ?"),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        // A prepare that fails: -1 names no statement now.
        prep(0, "SELECT nonsense FROM nowhere WHERE id = ?"),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, exec1(FIRST_ID, Some(LONGLONG), Some(&one))),
        // A successful prepare: -1 is that one.
        prep(0, "SELECT id FROM t WHERE id = ?"),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        // MariaDB refuses an execute of -1 without types (ER_MALFORMED_PACKET).
        (0, exec1(MINUS_ONE, None, Some(&one))),
        (0, exec1(MINUS_ONE, None, None)),
        (0, exec1(LAST_ID, None, Some(&one))),
        // Reset and close through -1.
        (0, stmt_cmd(com::STMT_RESET, MINUS_ONE, &[])),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, stmt_cmd(com::STMT_CLOSE, MINUS_ONE, &[])),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&one))),
        (0, exec1(FIRST_ID, Some(LONGLONG), Some(&one))),
        // Close of the last statement by its id.
        prep(0, "SELECT s FROM t WHERE id = ? + 0"),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        (0, stmt_cmd(com::STMT_CLOSE, LAST_ID, &[])),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&one))),
        // Close of another statement keeps -1.
        prep(0, "SELECT s FROM t WHERE id = ? + 1"),
        (0, stmt_cmd(com::STMT_CLOSE, FIRST_ID, &[])),
        (
            0,
            exec1(MINUS_ONE, Some(LONGLONG), Some(&0i64.to_le_bytes())),
        ),
        (
            0,
            exec1(MINUS_ONE, Some(LONGLONG), Some(&0i64.to_le_bytes())),
        ),
        // Long data through -1, then an execute of -1.
        (0, {
            let mut l = stmt_cmd(com::STMT_SEND_LONG_DATA, MINUS_ONE, &0u16.to_le_bytes());
            l.extend_from_slice(b"0");
            l
        }),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&[]))),
        // SQL-level PREPARE and EXECUTE IMMEDIATE in between.
        query(0, "PREPARE q FROM 'SELECT 42'"),
        (
            0,
            exec1(MINUS_ONE, Some(LONGLONG), Some(&0i64.to_le_bytes())),
        ),
        query(0, "EXECUTE IMMEDIATE 'SELECT 43'"),
        (
            0,
            exec1(MINUS_ONE, Some(LONGLONG), Some(&0i64.to_le_bytes())),
        ),
        // Another connection's -1 is its own.
        prep(1, "SELECT nonsense FROM nowhere"),
        (
            1,
            exec1(MINUS_ONE, Some(LONGLONG), Some(&0i64.to_le_bytes())),
        ),
    ];
    raw_differential("ps35_last", ECHO_SETUP, &steps).await;
}

/// Runs mysql_async `steps` (`common::steps`; `P …` through the binary protocol, whose
/// statements mysql_async keeps prepared per connection) straight to the server, then
/// through qcache with its binlog tail off and on, and compares step by step.
async fn steps_differential(
    prefix: &str,
    steps: &[common::steps::Step],
    tweak: fn(&mut qcache::config::Config),
) {
    let schema = common::fresh_schema(prefix).await;
    let want = common::steps::run(&schema, steps, None).await;
    for tail in [false, true] {
        let proxy = if tail {
            tail_proxy(tweak).await
        } else {
            common::proxy(tweak).await
        };
        let got = common::steps::run(&schema, steps, Some(&proxy)).await;
        for (i, ((who, sql), (w, g))) in steps.iter().zip(want.iter().zip(&got)).enumerate() {
            assert_eq!(
                g, w,
                "tail {tail}: step {i} ({who}: {sql}): through qcache (left) differs from the \
                 server (right)"
            );
        }
        proxy.shutdown().await;
    }
}

/// Tables `t` in `{db}` and `{db}_b` with different rows; steps that set them up again, so
/// that every run starts alike.
const TWO_DBS: &[common::steps::Step] = &[
    ("root", "CREATE DATABASE IF NOT EXISTS {db}_b"),
    (
        "root",
        "CREATE OR REPLACE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
    ),
    ("root", "INSERT INTO {db}.t VALUES (1, 'a')"),
    (
        "root",
        "CREATE OR REPLACE TABLE {db}_b.t (id INT PRIMARY KEY, v VARCHAR(10))",
    ),
    ("root", "INSERT INTO {db}_b.t VALUES (1, 'b')"),
];

/// Class 3: a statement prepared in one database runs there after USE another: reads are
/// keyed, and writes invalidate, by the database it was prepared in.
#[tokio::test]
async fn prepared_statements_run_in_the_database_they_were_prepared_in() {
    let mut steps = TWO_DBS.to_vec();
    steps.extend_from_slice(&[
        ("x", "USE {db}"),
        ("x", "P SELECT v FROM t WHERE id = 1"),
        ("x", "USE {db}_b"),
        // mysql_async executes the statement prepared in {db}: the server reads {db}.t.
        ("x", "P SELECT v FROM t WHERE id = 1"),
        ("x", "P SELECT v FROM t WHERE id = 1"),
        ("y", "USE {db}_b"),
        ("y", "P SELECT v FROM t WHERE id = 1"),
        ("y", "SELECT v FROM t WHERE id = 1"),
        // A write prepared in {db}, executed after USE {db}_b, writes {db}.t.
        ("x", "USE {db}"),
        ("x", "P UPDATE t SET v = CONCAT(v, '+') WHERE id = 1"),
        ("z", "USE {db}"),
        ("z", "P SELECT v FROM t WHERE id = 1"),
        ("z", "SELECT v FROM t WHERE id = 1"),
        ("x", "USE {db}_b"),
        ("x", "P UPDATE t SET v = CONCAT(v, '+') WHERE id = 1"),
        ("z", "P SELECT v FROM t WHERE id = 1"),
        ("z", "SELECT v FROM t WHERE id = 1"),
        ("y", "P SELECT v FROM t WHERE id = 1"),
        // SQL-level PREPARE and EXECUTE, and EXECUTE IMMEDIATE, in the same shapes.
        ("w", "USE {db}"),
        ("w", "PREPARE r FROM 'SELECT v FROM t WHERE id = 1'"),
        (
            "w",
            "PREPARE u FROM 'UPDATE t SET v = CONCAT(v, ''!'') WHERE id = 1'",
        ),
        ("w", "USE {db}_b"),
        ("w", "EXECUTE r"),
        ("w", "EXECUTE u"),
        ("z", "SELECT v FROM t WHERE id = 1"),
        ("z", "P SELECT v FROM t WHERE id = 1"),
        ("w", "EXECUTE IMMEDIATE 'SELECT v FROM t WHERE id = 1'"),
        ("w", "EXECUTE r"),
        ("y", "SELECT v FROM t WHERE id = 1"),
        ("root", "DROP DATABASE {db}_b"),
    ]);
    steps_differential("ps35_db", &steps, |_| {}).await;
    steps_differential("ps35_db_schema_scope", &steps, |c| {
        c.invalidation.call = qcache::config::Conservative::Schema;
        c.invalidation.unknown_write = qcache::config::Conservative::Schema;
    })
    .await;
}

/// Class 3: the parsing rules (sql_mode) in force at PREPARE decide what the statement
/// means; the key and analysis must not take those of the EXECUTE.
#[tokio::test]
async fn prepared_statements_keep_the_sql_mode_they_were_prepared_under() {
    let mut steps = TWO_DBS.to_vec();
    steps.extend_from_slice(&[
        ("x", "SET SESSION sql_mode = ''"),
        ("y", "SET SESSION sql_mode = ''"),
        ("x", "SET SESSION sql_mode = 'PIPES_AS_CONCAT'"),
        ("x", "P SELECT 'x' || 'y' AS c FROM {db}.t WHERE id = 1"),
        ("x", "SET SESSION sql_mode = ''"),
        ("x", "P SELECT 'x' || 'y' AS c FROM {db}.t WHERE id = 1"),
        ("y", "P SELECT 'x' || 'y' AS c FROM {db}.t WHERE id = 1"),
        ("y", "SELECT 'x' || 'y' AS c FROM {db}.t WHERE id = 1"),
        ("x", "SET SESSION sql_mode = 'ANSI_QUOTES'"),
        ("x", "P SELECT \"v\" AS c FROM {db}.t WHERE id = 1"),
        ("x", "SET SESSION sql_mode = ''"),
        ("x", "P SELECT \"v\" AS c FROM {db}.t WHERE id = 1"),
        ("y", "P SELECT \"v\" AS c FROM {db}.t WHERE id = 1"),
        // Execute-time settings apply at each execute, and stay in the key.
        ("x", "SET SESSION div_precision_increment = 2"),
        ("x", "P SELECT id / 3 AS q FROM {db}.t WHERE id = 1"),
        ("x", "SET SESSION div_precision_increment = 6"),
        ("x", "P SELECT id / 3 AS q FROM {db}.t WHERE id = 1"),
        ("x", "P SELECT id / 3 AS q FROM {db}.t WHERE id = 1"),
        ("y", "SET SESSION div_precision_increment = 6"),
        ("y", "P SELECT id / 3 AS q FROM {db}.t WHERE id = 1"),
        ("x", "SET SESSION time_zone = '+05:00'"),
        (
            "x",
            "P SELECT FROM_UNIXTIME(id) AS f FROM {db}.t WHERE id = 1",
        ),
        ("x", "SET SESSION time_zone = '+00:00'"),
        (
            "x",
            "P SELECT FROM_UNIXTIME(id) AS f FROM {db}.t WHERE id = 1",
        ),
        (
            "x",
            "P SELECT FROM_UNIXTIME(id) AS f FROM {db}.t WHERE id = 1",
        ),
        ("y", "SET SESSION time_zone = '+00:00'"),
        (
            "y",
            "P SELECT FROM_UNIXTIME(id) AS f FROM {db}.t WHERE id = 1",
        ),
        ("y", "SET SESSION time_zone = '+05:00'"),
        (
            "y",
            "P SELECT FROM_UNIXTIME(id) AS f FROM {db}.t WHERE id = 1",
        ),
        // SQL-level PREPARE under one mode, EXECUTE under another.
        ("w", "SET SESSION sql_mode = 'PIPES_AS_CONCAT'"),
        (
            "w",
            "PREPARE p FROM 'SELECT ''x'' || ''y'' AS c FROM {db}.t WHERE id = 1'",
        ),
        ("w", "SET SESSION sql_mode = ''"),
        ("w", "EXECUTE p"),
        ("w", "SELECT 'x' || 'y' AS c FROM {db}.t WHERE id = 1"),
        ("root", "DROP DATABASE {db}_b"),
    ]);
    steps_differential("ps35_mode", &steps, |_| {}).await;
}

const ROWS_SETUP: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20))",
    "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')",
];

/// COM_STMT_FETCH of `n` rows from statement `id`.
fn fetch(id: u32, n: u32) -> Vec<u8> {
    stmt_cmd(com::STMT_FETCH, id, &n.to_le_bytes())
}

/// Adversary round 10: an execute that opens a cursor (CURSOR_TYPE_READ_ONLY) leaves the
/// statement's cursor open on the server; the server closes it when the statement is
/// executed again, so a COM_STMT_FETCH after a plain execute answers "no open cursor"
/// (1421). An execute qcache serves from the cache never reaches the server, which then
/// still holds the old cursor: the fetch must still get the server's answer to the client's
/// sequence, not rows of a cursor the client closed.
#[tokio::test]
async fn a_hit_after_a_cursor_closes_it_as_the_server_would() {
    let one = 1i64.to_le_bytes();
    let two = 2i64.to_le_bytes();
    let mut cursor = exec_head(LAST_ID, 1);
    cursor.extend_from_slice(&[0, 1, 0x08, 0]);
    cursor.extend_from_slice(&one);
    let steps = vec![
        prep(0, "SELECT id, s FROM t WHERE id >= ? ORDER BY id"),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&one))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&one))),
        (0, cursor.clone()),
        (0, fetch(LAST_ID, 1)),
        // Served from the cache through qcache: the server is not told.
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&one))),
        (0, fetch(LAST_ID, 10)),
        // The same with a hit of another value, and with the types left out.
        (0, cursor.clone()),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&two))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&two))),
        (0, fetch(LAST_ID, 10)),
        (0, cursor.clone()),
        (0, exec1(LAST_ID, None, Some(&one))),
        (0, fetch(LAST_ID, 10)),
    ];
    raw_differential("ps10_cursor", ROWS_SETUP, &steps).await;
}

// ----- adversary round 13: the replay before long data (33c96d6) ------------------------

const ADV13_SETUP: &[&str] = &[
    "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20))",
    "INSERT INTO t VALUES (1, 'one')",
    "CREATE TABLE t2 (id INT PRIMARY KEY, n INT)",
    "INSERT INTO t2 VALUES (1, 1), (2, 2)",
];

/// The steps that leave statement LAST_ID of connection 0 (`sql`, one parameter) with its
/// last execute served from the cache: a STRING execute filled, a LONGLONG one the server
/// runs, the STRING one again (a hit).
fn adv13_hit(sql: &str) -> Vec<RawStep> {
    let s8 = lenenc(b"12345678");
    vec![
        prep(0, sql),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
    ]
}

fn adv13_long() -> Vec<u8> {
    let mut long = stmt_cmd(com::STMT_SEND_LONG_DATA, LAST_ID, &0u16.to_le_bytes());
    long.extend_from_slice(b"hijklmn");
    long
}

/// Long data leaves the diagnostics alone: after a hit, a statement that went to the
/// server (an UPDATE: ROW_COUNT() 1; a DO that warns) and then long data for the served
/// statement, the client reads that statement's diagnostics. qcache's replay of the served
/// execute ran a SELECT in between: ROW_COUNT() -1, the warning gone.
#[tokio::test]
async fn adv13_long_data_keeps_a_later_statements_diagnostics() {
    let mut steps = adv13_hit(ECHO);
    steps.extend([
        query(0, "UPDATE t2 SET n = n + 1 WHERE id = 1"),
        (0, adv13_long()),
        query(0, "SELECT ROW_COUNT()"),
    ]);
    steps.extend(adv13_hit(ECHO));
    steps.extend([
        query(0, "DO CAST('1x' AS SIGNED)"),
        (0, adv13_long()),
        query(0, "SHOW WARNINGS"),
        query(0, "SELECT @@warning_count"),
    ]);
    raw_differential("adv13_ld_diag", ADV13_SETUP, &steps).await;
}

/// The replay reads the table as it is at the long data, not as the hit served it: rows
/// another session added since make its FOUND_ROWS() another count than the served one.
#[tokio::test]
async fn adv13_long_data_after_rows_changed_keeps_the_hits_found_rows() {
    let mut steps = adv13_hit("SELECT ? AS v FROM t");
    steps.extend([
        query(1, "INSERT INTO t VALUES (2, 'two'), (3, 'three')"),
        (0, adv13_long()),
        query(0, "SELECT FOUND_ROWS()"),
    ]);
    raw_differential("adv13_ld_found", ADV13_SETUP, &steps).await;
}

/// The replay refused (the table dropped by another session since the hit): directly the
/// long data says nothing and the diagnostics are still the served execute's (no
/// warning); through qcache the replay's error is there (SHOW WARNINGS: 1146).
#[tokio::test]
async fn adv13_long_data_replay_refused_leaves_no_error_behind() {
    let mut steps = adv13_hit(ECHO);
    steps.extend([
        query(1, "DROP TABLE t"),
        (0, adv13_long()),
        query(0, "SHOW WARNINGS"),
        query(0, "SELECT @@warning_count, FOUND_ROWS()"),
    ]);
    raw_differential("adv13_ld_refused", ADV13_SETUP, &steps).await;
}

/// Under autocommit=0 (or in a transaction the server began whose view is not open yet),
/// the replay before long data is the transaction's first read: it opens the read view at
/// the long data, where directly the execute that consumes the long data opens it. A write
/// another session commits in between is then seen directly and not through qcache.
#[tokio::test]
async fn adv13_long_data_replay_does_not_open_the_read_view() {
    let sql = "SELECT ? AS v, s FROM t WHERE id = 1";
    let mut steps = adv13_hit(sql);
    steps.extend([
        query(0, "SET autocommit = 0"),
        (0, adv13_long()),
        query(1, "UPDATE t SET s = 'changed' WHERE id = 1"),
        (0, exec1(LAST_ID, None, Some(&[]))),
        query(0, "SELECT s FROM t WHERE id = 1"),
        query(0, "COMMIT"),
        query(0, "SET autocommit = 1"),
    ]);
    // The same in a transaction the server began (READ WRITE is not deferred).
    steps.extend(adv13_hit(sql));
    steps.extend([
        query(0, "START TRANSACTION READ WRITE"),
        (0, adv13_long()),
        query(1, "UPDATE t SET s = 'again' WHERE id = 1"),
        (0, exec1(LAST_ID, None, Some(&[]))),
        query(0, "COMMIT"),
    ]);
    raw_differential("adv13_ld_view", ADV13_SETUP, &steps).await;
}

/// The replay is built from the hit's key material, which a session drops when it is over
/// 64 KiB (`execute_key`): after a hit with a 70 KB parameter there is nothing to replay,
/// and the long data after it is read by the server as the LONGLONG it last ran (a
/// pointer-like number) where, directly, it is the string sent. A documented limit
/// (docs/reliability.md, "Values the server last received": "Not covered: a served execute
/// whose parameters were over 64 KiB"); this test shows what it costs a client.
#[tokio::test]
async fn adv13_long_data_after_a_hit_with_a_large_parameter() {
    let big = vec![b'x'; 70_000];
    let mut big_s = vec![0xfd];
    big_s.extend_from_slice(&(big.len() as u32).to_le_bytes()[..3]);
    big_s.extend_from_slice(&big);
    let steps = vec![
        prep(0, "SELECT LENGTH(?) AS v FROM t WHERE id = 1"),
        (0, exec1(LAST_ID, Some(STRING), Some(&big_s))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&5i64.to_le_bytes()))),
        (0, exec1(LAST_ID, Some(STRING), Some(&big_s))),
        (0, adv13_long()),
        (0, exec1(LAST_ID, None, Some(&[]))),
    ];
    raw_differential("adv13_ld_large", ADV13_SETUP, &steps).await;
}

/// A bulk execute of a SELECT is refused (1295) after the server took its types, not its
/// values: after a hit it leaves the server with the values of the execute before the hit,
/// so the long data after it still needs the hit's execute replayed. Directly the long data
/// is the string sent; through qcache the bulk counted as the values having reached the
/// server (`Prepared::types_sent`), no replay was made, and the execute failed (1210).
#[tokio::test]
async fn adv13_long_data_after_a_hit_and_a_refused_bulk() {
    let s7 = lenenc(b"abcdefg");
    let mut bulk_typed = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &128u16.to_le_bytes());
    bulk_typed.extend_from_slice(&STRING);
    bulk_typed.push(0);
    bulk_typed.extend_from_slice(&s7);
    let mut bulk = stmt_cmd(com::STMT_BULK_EXECUTE, LAST_ID, &0u16.to_le_bytes());
    bulk.push(0);
    bulk.extend_from_slice(&s7);
    let mut steps = adv13_hit(ECHO);
    steps.extend([
        (0, bulk_typed),
        (0, adv13_long()),
        (0, exec1(LAST_ID, None, Some(&[]))),
    ]);
    steps.extend(adv13_hit(ECHO));
    steps.extend([
        (0, bulk),
        (0, adv13_long()),
        (0, exec1(LAST_ID, None, Some(&[]))),
    ]);
    raw_differential("adv13_ld_bulk", ADV13_SETUP, &steps).await;
}

/// Guard: long data and executes sent to MariaDB's -1 after a hit through -1, after a failed
/// prepare (-1 names no statement: the long data goes nowhere) and after a reset.
#[tokio::test]
async fn adv13_long_data_to_minus_one_after_a_hit() {
    let s8 = lenenc(b"12345678");
    let mut long_m1 = stmt_cmd(com::STMT_SEND_LONG_DATA, MINUS_ONE, &0u16.to_le_bytes());
    long_m1.extend_from_slice(b"hijklmn");
    let five = 5i64.to_le_bytes();
    let steps = vec![
        prep(0, ECHO),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&s8))),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&five))),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&s8))),
        (0, long_m1.clone()),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&[]))),
        (0, exec1(MINUS_ONE, Some(LONGLONG), Some(&five))),
        (0, exec1(MINUS_ONE, Some(STRING), Some(&s8))),
        // A failed prepare: -1 names nothing, the long data goes nowhere.
        prep(0, "SELECT nonsense FROM nowhere WHERE id = ?"),
        (0, long_m1.clone()),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, exec1(LAST_ID, Some(LONGLONG), Some(&five))),
        (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
        (0, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
        (0, adv13_long()),
        (0, exec1(LAST_ID, None, Some(&[]))),
    ];
    raw_differential("adv13_ld_m1", ADV13_SETUP, &steps).await;
}

/// An execute of a two-parameter statement: `types` None sends new-params-bound 0; a value
/// None is NULL, an empty one is sent as long data (nothing in the packet).
fn adv13_exec2(id: u32, types: Option<[[u8; 2]; 2]>, values: [Option<&[u8]>; 2]) -> Vec<u8> {
    let mut e = exec_head(id, 0);
    e.push(u8::from(values[0].is_none()) | (u8::from(values[1].is_none()) << 1));
    match types {
        Some([a, b]) => {
            e.push(1);
            e.extend_from_slice(&a);
            e.extend_from_slice(&b);
        }
        None => e.push(0),
    }
    for v in values.into_iter().flatten() {
        e.extend_from_slice(v);
    }
    e
}

/// Guard: a two-parameter statement whose second parameter alone comes as long data after
/// a hit whose values were of other kinds than the server's (an integer and a NULL the
/// server ran, a string and an integer served), then a NULL served and long data for the
/// first parameter, untyped executes after.
#[tokio::test]
async fn adv13_long_data_for_one_of_two_parameters_after_a_hit() {
    let sql = "SELECT CONCAT_WS('|', ?, ?) AS v FROM t WHERE id = 1";
    let s8 = lenenc(b"12345678");
    let five = 5i64.to_le_bytes();
    let mut long1 = stmt_cmd(com::STMT_SEND_LONG_DATA, LAST_ID, &1u16.to_le_bytes());
    long1.extend_from_slice(b"hijklmn");
    let ss = Some([STRING, STRING]);
    let ls = Some([LONGLONG, STRING]);
    let steps = vec![
        prep(0, sql),
        (0, adv13_exec2(LAST_ID, ss, [Some(&s8), Some(&s8)])),
        (
            0,
            adv13_exec2(LAST_ID, Some([LONGLONG, LONGLONG]), [Some(&five), None]),
        ),
        (0, adv13_exec2(LAST_ID, ss, [Some(&s8), Some(&s8)])),
        (0, long1.clone()),
        (0, adv13_exec2(LAST_ID, None, [Some(&s8), Some(&[])])),
        (0, adv13_exec2(LAST_ID, ls, [Some(&five), Some(&s8)])),
        (0, adv13_exec2(LAST_ID, ss, [Some(&s8), Some(&s8)])),
        (0, adv13_exec2(LAST_ID, ls, [Some(&five), Some(&s8)])),
        (0, adv13_long()),
        (0, adv13_exec2(LAST_ID, None, [Some(&[]), Some(&s8)])),
        (0, adv13_exec2(LAST_ID, ss, [None, Some(&s8)])),
        (0, adv13_exec2(LAST_ID, ls, [Some(&five), Some(&s8)])),
        (0, adv13_exec2(LAST_ID, ss, [None, Some(&s8)])),
        (0, adv13_long()),
        (0, long1),
        (0, adv13_exec2(LAST_ID, None, [Some(&[]), Some(&[])])),
    ];
    raw_differential("adv13_ld_two", ADV13_SETUP, &steps).await;
}

// ----- adversary round 13: a transaction the server rolled back with an error -------------

/// A's and B's steps of a deadlock InnoDB resolves by rolling back A's whole transaction
/// (ERROR 1213, no status flags): one line per answer, A's read of `u` after it last.
async fn adv13_deadlock_run(addr: &str, schema: &str) -> Vec<String> {
    let mut a = Raw::connect(addr, "root", schema, false).await;
    let mut b = Raw::connect(addr, "root", schema, false).await;
    let text = |pk: &[Packet]| {
        let t: Vec<String> = pk
            .iter()
            .map(|p| String::from_utf8_lossy(&p.payload).into_owned())
            .collect();
        format!("{t:?}").replace(schema, "{db}")
    };
    let mut out = Vec::new();
    for sql in [
        "SELECT v FROM u WHERE id = 3",
        "SELECT v FROM u WHERE id = 3",
        "BEGIN",
        "SELECT v FROM u WHERE id = 3",
        "SELECT v FROM u WHERE id = 3",
        "UPDATE t SET v = v + 1 WHERE id = 1",
    ] {
        out.push(format!("A {sql}: {}", text(&a.query(sql).await.0)));
    }
    // B, heavier (two rows), waits for A's row 1; A asking for B's row 2 closes the cycle
    // and is the victim.
    for sql in ["BEGIN", "UPDATE t SET v = v + 1 WHERE id IN (2, 4)"] {
        out.push(format!("B {sql}: {}", text(&b.query(sql).await.0)));
    }
    let mut wait = vec![com::QUERY];
    wait.extend_from_slice(b"UPDATE t SET v = v + 1 WHERE id = 1");
    b.send(0, &wait).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let sql = "UPDATE t SET v = v + 1 WHERE id = 2";
    out.push(format!("A {sql}: {}", text(&a.query(sql).await.0)));
    out.push(format!(
        "B (waited): {}",
        text(&b.response(Expect::Results).await.0)
    ));
    // The server rolled A's transaction back: A is in none, whatever it reads.
    for sql in [
        "SELECT v FROM u WHERE id = 3",
        "SELECT v FROM u WHERE id = 3",
    ] {
        out.push(format!("A {sql}: {}", text(&a.query(sql).await.0)));
    }
    out.push(format!("B COMMIT: {}", text(&b.query("COMMIT").await.0)));
    out
}

/// InnoDB resolves a deadlock by rolling back the victim's whole transaction and answering
/// ERROR 1213, which carries no status flags. Directly the victim's next statements run in
/// no transaction (their status flags say so: AUTOCOMMIT, not IN_TRANS); through qcache its
/// hits were served with IN_TRANS until an answer from the server told qcache otherwise.
#[tokio::test]
async fn adv13_hits_after_a_deadlock_are_in_no_transaction() {
    let setup = [
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0), (4, 0)",
        "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
        "INSERT INTO u VALUES (3, 0)",
    ];
    let mut want = None;
    for mode in ["direct", "tail off", "tail on"] {
        let schema = common::fresh_schema("adv13_deadlock").await;
        let mut d = common::direct_to(&schema).await;
        for s in setup {
            d.query_drop(s).await.unwrap();
        }
        let _ = d.disconnect().await;
        let proxy = match mode {
            "direct" => None,
            "tail off" => Some(common::proxy(|_| {}).await),
            _ => Some(tail_proxy(|_| {}).await),
        };
        let addr = match &proxy {
            Some(p) => p.addr_string(),
            None => common::db().addr(),
        };
        let got = adv13_deadlock_run(&addr, &schema).await;
        if let Some(p) = proxy {
            p.shutdown().await;
        }
        let Some(want) = &want else {
            assert!(got[8].contains("Deadlock"), "no deadlock: {got:?}");
            want = Some(got);
            continue;
        };
        for (g, w) in got.iter().zip(want) {
            assert_eq!(
                g, w,
                "{mode}: through qcache (left) differs from the server (right)"
            );
        }
    }
}

/// Guard: long data right after a hit (the replay's own case), then COM_STMT_RESET and
/// executes, with the diagnostics read after each: outside a transaction, after a deferred
/// BEGIN (the replay goes before it), and in a transaction opened WITH CONSISTENT SNAPSHOT
/// (the view already open), a write from another session to another table in between (the
/// executes after the reset are hits again).
#[tokio::test]
async fn adv13_long_data_then_reset_in_transactions() {
    let s8 = lenenc(b"12345678");
    let five = 5i64.to_le_bytes();
    let sql = "SELECT ? AS v, s FROM t WHERE id = 1";
    let mut steps = Vec::new();
    for begin in [
        None,
        Some("BEGIN"),
        Some("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
    ] {
        if let Some(b) = begin {
            steps.push(query(0, b));
        }
        steps.extend(adv13_hit(sql));
        steps.extend([
            (0, adv13_long()),
            query(0, "SELECT FOUND_ROWS(), ROW_COUNT(), @@warning_count"),
            query(1, "UPDATE t2 SET n = n + 1 WHERE id = 1"),
            (0, stmt_cmd(com::STMT_RESET, LAST_ID, &[])),
            (0, exec1(LAST_ID, Some(LONGLONG), Some(&five))),
            (0, exec1(LAST_ID, Some(STRING), Some(&s8))),
            (0, adv13_long()),
            (0, exec1(LAST_ID, None, Some(&[]))),
            query(0, "SHOW WARNINGS"),
            query(0, "SELECT n FROM t2 WHERE id = 1"),
            query(0, "COMMIT"),
        ]);
    }
    raw_differential("adv13_ld_reset_txn", ADV13_SETUP, &steps).await;
}

/// A session whose optimizer trace or profiling is on is sent no statement of qcache's own
/// (docs/guarantees.md): the replay before long data is one. After a hit, `SET
/// optimizer_trace` / `SET profiling` and long data, directly no statement ran since the SET
/// (the trace is empty, nothing is profiled); through qcache the replayed execute was traced
/// and profiled.
#[tokio::test]
async fn adv13_long_data_replay_is_not_traced_nor_profiled() {
    let mut steps = adv13_hit(ECHO);
    steps.extend([
        query(0, "SET SESSION optimizer_trace = 'enabled=on'"),
        (0, adv13_long()),
        query(0, "SELECT QUERY FROM information_schema.OPTIMIZER_TRACE"),
        query(0, "SET SESSION optimizer_trace = 'enabled=off'"),
    ]);
    steps.extend(adv13_hit(ECHO));
    steps.extend([
        query(0, "SET SESSION profiling = 1"),
        (0, adv13_long()),
        query(
            0,
            "SELECT COUNT(DISTINCT QUERY_ID) FROM information_schema.PROFILING",
        ),
        query(0, "SET SESSION profiling = 0"),
    ]);
    raw_differential("adv13_ld_trace", ADV13_SETUP, &steps).await;
}

/// The replay's diagnostics replace a later hit's: after a hit on the prepared statement,
/// a hit on a text read of two rows, then long data for the prepared statement, directly
/// FOUND_ROWS() is the text read's 2; through qcache the replayed execute (one row) leaves
/// 1. No statement reached the server between the hits and the long data.
#[tokio::test]
async fn adv13_long_data_after_a_later_hit_keeps_its_found_rows() {
    let two = "SELECT id FROM t2 WHERE id > 0";
    let mut steps = vec![query(0, two)];
    steps.extend(adv13_hit(ECHO));
    steps.extend([
        query(0, two),
        (0, adv13_long()),
        query(0, "SELECT FOUND_ROWS()"),
    ]);
    raw_differential("adv13_ld_later_hit", ADV13_SETUP, &steps).await;
}
