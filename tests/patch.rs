//! Cached aggregates patched from known inserted rows (`policy::patch`) through the real
//! proxy: the read after an INSERT is served from the cache (a hit counted) and equals the
//! server's answer, text and prepared; writes qcache cannot patch invalidate as before; the
//! verifier re-reads patched entries and catches a wrong patch (the debug fault); patched
//! MIN/MAX answers are the server's byte for byte (metadata and rows, text and binary).

mod common;
mod rawclient;
use common::{setup, status};
use rawclient::Raw;

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};
use qcache::faults::Fault;

const TABLE: &[&str] = &[
    "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, \
     v BIGINT NULL, s VARCHAR(10) NULL)",
];

const READ: &str = "SELECT COUNT(*), COUNT(v), SUM(v) FROM t WHERE k IN (1, 3)";

/// The answer's values as text (NULL as None), as the client decoded them.
async fn answer(c: &mut Conn, prepared: bool) -> Vec<Option<String>> {
    let row: Row = if prepared {
        c.exec_first(READ, ()).await.unwrap().unwrap()
    } else {
        c.query_first(READ).await.unwrap().unwrap()
    };
    (0..row.len())
        .map(|i| match row.as_ref(i).unwrap() {
            mysql_async::Value::NULL => None,
            mysql_async::Value::Bytes(b) => Some(String::from_utf8(b.clone()).unwrap()),
            mysql_async::Value::Int(n) => Some(n.to_string()),
            mysql_async::Value::UInt(n) => Some(n.to_string()),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// Reads through the proxy and directly; asserts they agree and says whether the proxy's
/// read was a hit.
async fn read_both(c: &mut Conn, d: &mut Conn, prepared: bool) -> (bool, Vec<Option<String>>) {
    let before = status(c, "Qcache_hits").await;
    let got = answer(c, prepared).await;
    let hit = status(c, "Qcache_hits").await > before;
    let want = answer(d, prepared).await;
    assert_eq!(got, want, "proxy and server differ (prepared: {prepared})");
    (hit, got)
}

/// A proxy with patching on, once its catalog is loaded (until then no read is patchable:
/// the catalog cannot vouch for its table).
async fn proxy(verify: f64) -> common::TestProxy {
    let p = common::proxy(|c| {
        c.cache.patch_aggregates = true;
        c.cache.verify_patched = verify;
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.running.shared.catalog.is_loaded() {
        assert!(Instant::now() < deadline, "catalog not loaded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p
}

#[tokio::test]
async fn an_insert_patches_the_cached_count_and_sum() {
    let schema = common::fresh_schema("patch_served").await;
    setup(&schema, TABLE).await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    for prepared in [false, true] {
        let (hit, first) = read_both(&mut c, &mut d, prepared).await;
        assert!(!hit, "first read is a miss");
        assert_eq!(first, vec![Some("0".into()), Some("0".into()), None]);
        assert!(
            read_both(&mut c, &mut d, prepared).await.0,
            "second read is a hit"
        );
    }
    let patched = status(&mut c, "Qcache_patched").await;
    let inserts = [
        // A NULL, a row the WHERE keeps out, a negative, several rows, past BIGINT's sum.
        "INSERT INTO t (k, v) VALUES (1, 5)",
        "INSERT INTO t (k, v, s) VALUES (1, NULL, 'x'), (2, 100, 'y'), (3, -8, NULL)",
        "INSERT INTO t (v, k) VALUES (9223372036854775807, 3), (9223372036854775807, 1)",
        "INSERT INTO t (k, v) VALUES (7, 1)",
    ];
    for (i, ins) in inserts.iter().enumerate() {
        c.query_drop(*ins).await.unwrap();
        for prepared in [false, true] {
            let (hit, _) = read_both(&mut c, &mut d, prepared).await;
            assert!(
                hit,
                "after {ins} (prepared: {prepared}): served from the patched entry"
            );
        }
        // The last: its row is one the WHERE keeps out, in a slice (k = 7) that is not the
        // entries': its bumps leave them current as they were, with nothing to patch.
        let reached = if i < 3 { 2 * (i as u64 + 1) } else { 6 };
        assert_eq!(
            status(&mut c, "Qcache_patched").await,
            patched + reached,
            "both entries patched by {ins}, when it reached them"
        );
    }
    let (_, last) = read_both(&mut c, &mut d, false).await;
    assert_eq!(
        last,
        vec![
            Some("5".into()),
            Some("4".into()),
            Some("18446744073709551611".into())
        ]
    );
}

#[tokio::test]
async fn writes_it_cannot_patch_invalidate() {
    let schema = common::fresh_schema("patch_refused").await;
    setup(&schema, TABLE).await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let writes: &[&[&str]] = &[
        &["INSERT IGNORE INTO t (k, v) VALUES (1, 1)"],
        &["INSERT INTO t (k) VALUES (1)"],
        &["INSERT INTO t (k, v) VALUES (1, 2 + 3)"],
        &["INSERT INTO t (k, v) VALUES ('1', 1)"],
        &["BEGIN", "INSERT INTO t (k, v) VALUES (1, 4)", "COMMIT"],
        &["UPDATE t SET v = v + 1 WHERE k = 1"],
        &["DELETE FROM t WHERE v = 4"],
        &["REPLACE INTO t (id, k, v) VALUES (100, 1, 50)"],
        &["INSERT INTO t (id, k, v) VALUES (100, 1, 60) ON DUPLICATE KEY UPDATE v = 70"],
    ];
    for stmts in writes {
        answer(&mut c, false).await;
        assert!(
            read_both(&mut c, &mut d, false).await.0,
            "cached before {stmts:?}"
        );
        let patched = status(&mut c, "Qcache_patched").await;
        for s in *stmts {
            c.query_drop(*s).await.unwrap();
        }
        let (hit, _) = read_both(&mut c, &mut d, false).await;
        assert!(!hit, "{stmts:?}: not patched, so invalidated");
        assert_eq!(status(&mut c, "Qcache_patched").await, patched, "{stmts:?}");
    }
    // Strict mode refuses a value past BIGINT: nothing changed, nothing patched.
    answer(&mut c, false).await;
    let patched = status(&mut c, "Qcache_patched").await;
    assert!(c
        .query_drop("INSERT INTO t (k, v) VALUES (1, 9223372036854775808)")
        .await
        .is_err());
    read_both(&mut c, &mut d, false).await;
    assert_eq!(status(&mut c, "Qcache_patched").await, patched);
}

/// Polls `name` until it reaches `at_least` (the verifier runs in the background).
async fn wait_status(c: &mut Conn, name: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = status(c, name).await;
        if n >= at_least || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_verifier_confirms_right_patches() {
    let schema = common::fresh_schema("patch_verified").await;
    setup(&schema, TABLE).await;
    let p = proxy(1.0).await;
    let mut c = p.conn(&schema).await;
    answer(&mut c, false).await;
    c.query_drop("INSERT INTO t (k, v) VALUES (1, 5)")
        .await
        .unwrap();
    assert_eq!(status(&mut c, "Qcache_patched").await, 1);
    assert_eq!(wait_status(&mut c, "Qcache_patch_verified", 1).await, 1);
    assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
}

/// The verifier re-reads patched entries whose WHERE holds ranges (its statement states the
/// ranges as inclusive bounds) and agrees with the patches: rows in, out, at the bounds.
#[tokio::test]
async fn the_verifier_confirms_ranged_patches() {
    let schema = common::fresh_schema("patch_ranges_verified").await;
    setup(&schema, TABLE).await;
    let p = proxy(1.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let reads = [
        "SELECT COUNT(*), SUM(v) FROM t WHERE k BETWEEN 1 AND 3 AND v >= -5",
        "SELECT COUNT(*), COUNT(v) FROM t WHERE k > 1 AND 10 > v",
    ];
    let inserts = [
        "INSERT INTO t (k, v) VALUES (1, -5), (3, 10), (4, 9)",
        "INSERT INTO t (k, v) VALUES (2, NULL), (0, 1), (3, -6)",
    ];
    for sql in reads {
        c.query_drop(sql).await.unwrap();
    }
    for (i, ins) in inserts.iter().enumerate() {
        c.query_drop(*ins).await.unwrap();
        let n = 2 * (i as u64 + 1);
        assert_eq!(status(&mut c, "Qcache_patched").await, n, "after {ins}");
        assert_eq!(wait_status(&mut c, "Qcache_patch_verified", n).await, n);
        for sql in reads {
            let before = status(&mut c, "Qcache_hits").await;
            let got: Vec<Row> = c.query(sql).await.unwrap();
            assert!(status(&mut c, "Qcache_hits").await > before, "{sql}: a hit");
            let want: Vec<Row> = d.query(sql).await.unwrap();
            assert_eq!(
                got.into_iter().map(Row::unwrap).collect::<Vec<_>>(),
                want.into_iter().map(Row::unwrap).collect::<Vec<_>>(),
                "{sql} after {ins}"
            );
        }
    }
    assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
}

/// Prepares `sql` on `r` and returns the bytes of its execution's answer.
async fn prepared_answer(r: &mut Raw, sql: &str) -> Vec<u8> {
    use qcache::protocol::packets::com;
    use qcache::protocol::response::Expect;
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(sql.as_bytes());
    let (_, resp) = r.command(&p, Expect::Prepare).await;
    let (id, _, _) = resp.prepared.expect("prepared");
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    let (answer, _) = r.command(&e, Expect::Results).await;
    Raw::wire(&answer)
}

/// A patched MIN/MAX answer is the server's, byte for byte: the column definitions the
/// server sends for MIN/MAX of each integer type (its own type, length and flags: UNSIGNED
/// kept, ZEROFILL dropped), the row in text and in binary (each type's width), both result
/// endings. Served from the cache after each insert (a hit).
#[tokio::test]
async fn patched_min_max_bytes_are_the_servers() {
    let schema = common::fresh_schema("patch_minmax_bytes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, \
           t TINYINT NULL, tu TINYINT UNSIGNED NULL, s SMALLINT NULL, su SMALLINT UNSIGNED NULL, \
           m MEDIUMINT NULL, mu MEDIUMINT UNSIGNED NULL, i INT NOT NULL, iu INT UNSIGNED NULL, \
           b BIGINT NULL, bu BIGINT UNSIGNED NULL, z INT(4) ZEROFILL NULL)",
        ],
    )
    .await;
    let p = proxy(0.0).await;
    let reads = [
        "SELECT MIN(t), MAX(tu), MAX(s), MIN(su), MAX(m), MIN(mu) FROM w WHERE k >= 1",
        "SELECT MIN(i), MAX(iu), MIN(b), MAX(bu), MAX(z), COUNT(*) FROM w WHERE k BETWEEN 1 AND 2",
    ];
    let inserts = [
        "INSERT INTO w (k, t, tu, s, su, m, mu, i, iu, b, bu, z) VALUES \
         (1, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL)",
        "INSERT INTO w (k, t, tu, s, su, m, mu, i, iu, b, bu, z) VALUES \
         (1, -1, 200, -2, 40000, -3, 9000000, -4, 3000000000, -5, 10000000000000000000, 7)",
        "INSERT INTO w (k, t, tu, s, su, m, mu, i, iu, b, bu, z) VALUES \
         (2, -128, 255, 32767, 0, 8388607, 0, -2147483648, 4294967295, \
          -9223372036854775808, 18446744073709551615, 9999), \
         (3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5)",
    ];
    let mut c = p.conn(&schema).await;
    for deprecate_eof in [false, true] {
        c.query_drop("DELETE FROM w").await.unwrap();
        let mut rp = Raw::connect(&p.addr_string(), "root", &schema, deprecate_eof).await;
        let mut rd = Raw::connect(&common::db().addr(), "root", &schema, deprecate_eof).await;
        for sql in reads {
            rp.query(sql).await;
            prepared_answer(&mut rp, sql).await;
        }
        let patched = status(&mut c, "Qcache_patched").await;
        for (n, ins) in inserts.iter().enumerate() {
            c.query_drop(*ins).await.unwrap();
            assert_eq!(
                status(&mut c, "Qcache_patched").await,
                patched + 4 * (n as u64 + 1),
                "{ins}: every entry patched"
            );
            for sql in reads {
                let hits = p.running.shared.cache.stats().hits();
                let (got, _) = rp.query(sql).await;
                let (want, _) = rd.query(sql).await;
                assert_eq!(
                    Raw::wire(&got),
                    Raw::wire(&want),
                    "text {sql} after {ins} (deprecate_eof={deprecate_eof})"
                );
                let got = prepared_answer(&mut rp, sql).await;
                let want = prepared_answer(&mut rd, sql).await;
                assert_eq!(
                    got, want,
                    "binary {sql} after {ins} (deprecate_eof={deprecate_eof})"
                );
                assert_eq!(
                    p.running.shared.cache.stats().hits(),
                    hits + 2,
                    "{sql} after {ins}: both served from the patched entries"
                );
            }
        }
    }
}

/// The corrupting fault makes every patch wrong: the read after the insert is served wrong
/// (what the differential scenario `patch/fault_*` reports), and the verifier counts the
/// mismatch, drops the entry and turns the shape's patching off. At the default share too:
/// a shape's first patches are verified before any budget was earned.
#[tokio::test]
async fn the_verifier_catches_a_wrong_patch() {
    for share in [1.0, 0.05] {
        the_verifier_catches_a_wrong_patch_at(share).await;
    }
}

async fn the_verifier_catches_a_wrong_patch_at(share: f64) {
    let schema = common::fresh_schema("patch_wrong").await;
    setup(&schema, TABLE).await;
    let p = proxy(share).await;
    p.running
        .shared
        .cache
        .versions()
        .faults
        .set(Fault::Patches, true);
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    answer(&mut c, false).await;
    c.query_drop("INSERT INTO t (k, v) VALUES (1, 5)")
        .await
        .unwrap();
    assert_eq!(status(&mut c, "Qcache_patched").await, 1);
    assert_eq!(wait_status(&mut c, "Qcache_patch_mismatches", 1).await, 1);
    // Dropped: the next read is the server's; and the shape is no longer patched.
    let (hit, _) = read_both(&mut c, &mut d, false).await;
    assert!(!hit, "the wrong entry was dropped");
    answer(&mut c, false).await;
    c.query_drop("INSERT INTO t (k, v) VALUES (1, 6)")
        .await
        .unwrap();
    assert_eq!(
        status(&mut c, "Qcache_patched").await,
        1,
        "shape turned off"
    );
    read_both(&mut c, &mut d, false).await;
}

const PAGE: &str = "SELECT p.name, COUNT(*), SUM(i.qty) FROM items i \
                    JOIN products p ON p.id = i.product_id WHERE i.product_id = 1";

/// The per-product page's one row: the product's name, the count and the sum.
async fn page(c: &mut Conn) -> (Option<String>, u64, String) {
    let r: Option<(Option<String>, u64, String)> = c.query_first(PAGE).await.unwrap();
    r.unwrap()
}

/// The per-product page (an aggregate over a join pinned to one product's row): an insert
/// for the product patches it, the product's name carried, and the verifier's re-read of
/// the join confirms the patch; with the corrupting fault on, it catches the wrong one.
#[tokio::test]
async fn the_verifier_checks_joined_patches() {
    let tables: &[&str] = &[
        "CREATE TABLE products (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NULL)",
        "CREATE TABLE items (id INT AUTO_INCREMENT PRIMARY KEY, product_id INT NULL, \
         qty INT NOT NULL)",
        "INSERT INTO products (id, name) VALUES (1, 'Lamp'), (2, 'Desk')",
        "INSERT INTO items (product_id, qty) VALUES (1, 2), (2, 3)",
    ];
    for corrupt in [false, true] {
        let schema = common::fresh_schema("patch_joined").await;
        setup(&schema, tables).await;
        let p = proxy(1.0).await;
        p.running
            .shared
            .cache
            .versions()
            .faults
            .set(Fault::Patches, corrupt);
        let mut c = p.conn(&schema).await;
        let mut d = common::direct_to(&schema).await;
        // EXPLAIN names the join's rule: pinned by the product's key, or not.
        let explained = [
            (PAGE.to_string(), "yes: "),
            (
                PAGE.replace("p.id = i.product_id", "p.id = i.qty"),
                "no (not_simple)",
            ),
            (
                PAGE.replace("i.product_id = 1", "i.product_id IN (1, 2)"),
                "no (not_simple)",
            ),
        ];
        for (sql, want) in explained {
            let rows: Vec<(String, Option<String>)> =
                c.query(format!("QCACHE EXPLAIN {sql}")).await.unwrap();
            let got = rows
                .iter()
                .find(|(f, _)| f == "patched_by_insert")
                .and_then(|(_, v)| v.clone())
                .unwrap_or_default();
            assert!(got.starts_with(want), "{sql}: {got}");
        }
        assert_eq!(page(&mut c).await, (Some("Lamp".into()), 1, "2".into()));
        c.query_drop("INSERT INTO items (product_id, qty) VALUES (1, 5)")
            .await
            .unwrap();
        assert_eq!(
            status(&mut c, "Qcache_patched").await,
            1,
            "corrupt: {corrupt}"
        );
        let hits = status(&mut c, "Qcache_hits").await;
        let served = page(&mut c).await;
        assert_eq!(
            status(&mut c, "Qcache_hits").await,
            hits + 1,
            "served patched"
        );
        if corrupt {
            assert_ne!(served, page(&mut d).await, "the fault made the patch wrong");
            assert_eq!(wait_status(&mut c, "Qcache_patch_mismatches", 1).await, 1);
        } else {
            assert_eq!(served, page(&mut d).await);
            assert_eq!(served, (Some("Lamp".into()), 2, "7".into()));
            assert_eq!(wait_status(&mut c, "Qcache_patch_verified", 1).await, 1);
            assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
        }
    }
}

/// Verification is budgeted by server time (`policy::verify`): a shape's first patches are
/// verified, one at a time; patches nobody reads save nothing, so no more are; patches
/// served afterwards earn their share of the misses they saved, and some are verified
/// again, not all.
#[tokio::test]
async fn verification_is_budgeted_by_server_time() {
    let schema = common::fresh_schema("patch_budget").await;
    setup(&schema, TABLE).await;
    let p = proxy(0.5).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    answer(&mut c, false).await;
    let first = qcache::policy::verify::TRUST_FIRST as u64;
    for n in 1..=10u64 {
        c.query_drop("INSERT INTO t (k, v) VALUES (1, 5)")
            .await
            .unwrap();
        assert_eq!(status(&mut c, "Qcache_patched").await, n);
        if n <= first {
            assert_eq!(wait_status(&mut c, "Qcache_patch_verified", n).await, n);
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        status(&mut c, "Qcache_patch_verified").await,
        first,
        "patches nobody read saved nothing to spend"
    );
    let cycles = 100;
    for _ in 0..cycles {
        c.query_drop("INSERT INTO t (k, v) VALUES (3, 1)")
            .await
            .unwrap();
        assert!(read_both(&mut c, &mut d, false).await.0, "served patched");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let verified = status(&mut c, "Qcache_patch_verified").await;
    assert!(
        verified > first && verified < first + cycles,
        "{verified}: some served patches verified again, not all"
    );
    assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
}

/// `QCACHE EXPLAIN` says whether a read's entry is patched by a known insert, or why not.
#[tokio::test]
async fn explain_says_whether_an_insert_patches() {
    let schema = common::fresh_schema("patch_explain").await;
    setup(&schema, TABLE).await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let said = |sql: &str| format!("QCACHE EXPLAIN {sql}");
    let cases = [
        (READ, "yes: "),
        ("SELECT k, COUNT(*), SUM(v) FROM t GROUP BY k", "yes: "),
        (
            "SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY NULL",
            "no (not_simple)",
        ),
        ("SELECT COUNT(*) FROM t WHERE id = 1", "no (generated)"),
        ("SELECT AVG(v) FROM t", "no (aggregate)"),
        (
            "SELECT MIN(v), MAX(k) FROM t WHERE k BETWEEN 1 AND 3 AND v > -1",
            "yes: ",
        ),
        ("SELECT COUNT(*) FROM t WHERE k <> 1", "no (token)"),
        ("SELECT MAX(s) FROM t", "no (column)"),
    ];
    for (sql, want) in cases {
        let rows: Vec<(String, Option<String>)> = c.query(said(sql)).await.unwrap();
        let got = rows
            .iter()
            .find(|(f, _)| f == "patched_by_insert")
            .and_then(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{sql}: no patched_by_insert in {rows:?}"));
        assert!(got.starts_with(want), "{sql}: {got}");
    }
    // With the switch off, EXPLAIN says so.
    let off = common::proxy(|c| c.cache.patch_aggregates = false).await;
    let mut c = off.conn(&schema).await;
    let rows: Vec<(String, Option<String>)> = c.query(said(READ)).await.unwrap();
    assert!(rows.iter().any(|(f, v)| f == "patched_by_insert"
        && v.as_deref().is_some_and(|v| v.starts_with("no (off)"))));
}

/// Writers insert through qcache while readers read the patched aggregate: no read ever
/// returns fewer rows than inserts acknowledged before it started, nor more than were
/// sent, and SUM always agrees with COUNT (every row adds 1). Patches race with other
/// sessions' bumps here; a patch whose window saw another write must be dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_inserts_never_serve_a_count_out_of_bounds() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let schema = common::fresh_schema("patch_race").await;
    setup(&schema, TABLE).await;
    let p = proxy(0.0).await;
    let started = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let q = "SELECT COUNT(*), SUM(v) FROM t WHERE k = 1";
    let mut readers = Vec::new();
    for r in 0..2 {
        let mut c = p.conn(&schema).await;
        let (started, acked, done) = (started.clone(), acked.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut reads = 0u64;
            while !done.load(Ordering::SeqCst) {
                let lo = acked.load(Ordering::SeqCst);
                let row: (u64, Option<String>) = if (reads + r).is_multiple_of(2) {
                    c.query_first(q).await.unwrap().unwrap()
                } else {
                    c.exec_first(q, ()).await.unwrap().unwrap()
                };
                let hi = started.load(Ordering::SeqCst);
                assert!(
                    lo <= row.0 && row.0 <= hi,
                    "count {} outside [{lo}, {hi}]",
                    row.0
                );
                let sum = row.1.map(|s| s.parse::<u64>().unwrap()).unwrap_or(0);
                assert_eq!(sum, row.0, "SUM(v) = COUNT(*) when every v is 1");
                reads += 1;
            }
            reads
        }));
    }
    let mut writers = Vec::new();
    for _ in 0..4 {
        let mut c = p.conn(&schema).await;
        let (started, acked) = (started.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for _ in 0..40 {
                started.fetch_add(1, Ordering::SeqCst);
                c.query_drop("INSERT INTO t (k, v) VALUES (1, 1)")
                    .await
                    .unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let mut reads = 0;
    for r in readers {
        reads += r.await.unwrap();
    }
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let got: (u64, Option<String>) = c.query_first(q).await.unwrap().unwrap();
    let want: (u64, Option<String>) = d.query_first(q).await.unwrap().unwrap();
    assert_eq!(got, want);
    assert_eq!(got.0, 160);
    let patched = status(&mut c, "Qcache_patched").await;
    println!("{reads} reads, {patched} patches");
    assert!(patched > 0, "some inserts patched the entries");
}

/// With L2 on nothing is patched (L2's copy would not be), and `QCACHE EXPLAIN` says so
/// rather than promising a patch the fill then refuses. Two instances share one L2: the
/// second reads what the server says after an insert through the first.
#[tokio::test]
async fn with_l2_nothing_is_patched_and_explain_says_so() {
    use qcache::config::{L2Mode, L2Url};
    let redis = common::redis::Redis::start();
    let schema = common::fresh_schema("patch_l2").await;
    setup(&schema, TABLE).await;
    let url = redis.url();
    let on = |c: &mut qcache::config::Config| {
        c.cache.patch_aggregates = true;
        c.cache.verify_patched = 0.0;
        c.l2.mode = L2Mode::On;
        c.l2.url = L2Url::One(url.to_string());
        c.l2.timeout = Duration::from_millis(500);
    };
    let a = common::proxy(on).await;
    let b = common::proxy(on).await;
    for p in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !p.running.shared.catalog.is_loaded() {
            assert!(Instant::now() < deadline, "catalog not loaded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let rows: Vec<(String, Option<String>)> =
        ca.query(format!("QCACHE EXPLAIN {READ}")).await.unwrap();
    let said = rows
        .iter()
        .find(|(f, _)| f == "patched_by_insert")
        .and_then(|(_, v)| v.clone());
    assert!(
        said.as_deref().is_some_and(|s| s.starts_with("no (l2)")),
        "{said:?}"
    );
    for prepared in [false, true] {
        read_both(&mut ca, &mut d, prepared).await;
        read_both(&mut cb, &mut d, prepared).await;
        ca.query_drop("INSERT INTO t (k, v) VALUES (1, 5)")
            .await
            .unwrap();
        // The writing instance answers at once; the other learns the bump from L2's channel,
        // within the lag a write through another instance may take to show (generous: the
        // test machine may be busy).
        read_both(&mut ca, &mut d, prepared).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = answer(&mut cb, prepared).await;
            let want = answer(&mut d, prepared).await;
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the other instance still serves {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(status(&mut ca, "Qcache_patched").await, 0);
}

/// The weekly dashboard and its kin (GROUP BY a column or `DATE(col)`, WHERE ranges on
/// DATETIME and DATE columns): after each insert (into an existing group, a new group at
/// the start, middle or end, NULL values and keys, outside the range, at its bounds) the
/// hit is the server's answer byte for byte, metadata and rows, text and binary, both
/// result endings.
#[tokio::test]
async fn patched_groups_are_the_servers_bytes() {
    let schema = common::fresh_schema("patch_groups_bytes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, created DATETIME NULL, \
           d DATE NULL, k INT NULL, amount INT NULL)",
        ],
    )
    .await;
    let p = proxy(0.0).await;
    let reads = [
        "SELECT DATE(created), COUNT(*), SUM(amount) FROM orders \
         WHERE created >= '2024-01-08' AND created < '2024-01-15' GROUP BY DATE(created)",
        "SELECT k, COUNT(*), SUM(amount), MIN(amount), MAX(amount) FROM orders GROUP BY k",
        "SELECT COUNT(d), d, MAX(amount) FROM orders \
         WHERE d BETWEEN '2024-01-09' AND '2024-01-12' GROUP BY d",
        "SELECT created, COUNT(*) FROM orders WHERE created <= '2024-01-12 12:00:00' \
         AND created > '2024-01-09' GROUP BY created",
        "SELECT DATE(created) AS day, COUNT(*), COUNT(amount) FROM orders GROUP BY DATE(created)",
        "SELECT DATE(d), SUM(k) FROM orders WHERE d = '2024-01-10' GROUP BY DATE(d)",
    ];
    let seed = "INSERT INTO orders (created, d, k, amount) VALUES \
                ('2024-01-10 10:00:00', '2024-01-10', 5, 100), \
                ('2024-01-10 23:59:59', '2024-01-10', 5, 250), \
                ('2024-01-12 00:00:00', '2024-01-12', 9, 7)";
    let inserts = [
        // Into existing groups.
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-10 11:30:00', '2024-01-10', 5, 3)",
        // New groups at the start, the middle and the end.
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-08 00:00:00', '2024-01-09', 1, 4)",
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-11 08:00:00', '2024-01-11', 7, 6), \
         ('2024-01-14 23:59:59', '2024-01-12', 12, 8)",
        // NULL values, NULL keys (their group sorts first).
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-11 09:00:00', '2024-01-11', NULL, NULL)",
        "INSERT INTO orders (created, d, k, amount) VALUES (NULL, NULL, 5, 1)",
        // Outside the ranges, and at their bounds.
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-15 00:00:00', '2024-01-13', 5, 50), \
         ('2024-01-07 23:59:59', '2024-01-08', 5, 60)",
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-12 12:00:00', '2024-01-12', 2, 9), \
         ('2024-01-09 00:00:00', '2024-01-09', 2, 10), ('2024-01-09 00:00:01', '2024-01-10', 2, 11)",
        // A date literal into a DATETIME column is its midnight.
        "INSERT INTO orders (created, d, k, amount) VALUES ('2024-01-13', '2024-01-10', 3, 12)",
    ];
    same_bytes_after_inserts(&p, &schema, &reads, seed, &inserts).await;
}

/// Caches each of `reads` (text and prepared) after `seed`, then after each of `inserts`
/// asserts every read is a hit whose bytes are the server's, text and binary, both result
/// endings, and that no more entries were patched than there are (an entry the insert
/// leaves as it was and whose slices its bumps do not reach stays current unpatched), and
/// some were.
async fn same_bytes_after_inserts(
    p: &common::TestProxy,
    schema: &str,
    reads: &[&str],
    seed: &str,
    inserts: &[&str],
) {
    let mut c = p.conn(schema).await;
    for deprecate_eof in [false, true] {
        c.query_drop("DELETE FROM orders").await.unwrap();
        c.query_drop(seed).await.unwrap();
        let mut rp = Raw::connect(&p.addr_string(), "root", schema, deprecate_eof).await;
        let mut rd = Raw::connect(&common::db().addr(), "root", schema, deprecate_eof).await;
        for sql in reads.iter().copied() {
            rp.query(sql).await;
            prepared_answer(&mut rp, sql).await;
        }
        let first = status(&mut c, "Qcache_patched").await;
        let mut patched = first;
        for ins in inserts.iter() {
            c.query_drop(*ins).await.unwrap();
            let now = status(&mut c, "Qcache_patched").await;
            assert!(
                now - patched <= 2 * reads.len() as u64,
                "{ins}: at most every entry patched"
            );
            patched = now;
            for sql in reads.iter().copied() {
                let hits = p.running.shared.cache.stats().hits();
                let (got, _) = rp.query(sql).await;
                let (want, _) = rd.query(sql).await;
                assert_eq!(
                    Raw::wire(&got),
                    Raw::wire(&want),
                    "text {sql} after {ins} (deprecate_eof={deprecate_eof})"
                );
                // The diagnostics after the hit count the rows it now has.
                let (got, _) = rp.query("SELECT FOUND_ROWS()").await;
                let (want, _) = rd.query("SELECT FOUND_ROWS()").await;
                assert_eq!(
                    Raw::wire(&got),
                    Raw::wire(&want),
                    "FOUND_ROWS() after {sql} after {ins}"
                );
                let hits = hits + 1;
                let got = prepared_answer(&mut rp, sql).await;
                let want = prepared_answer(&mut rd, sql).await;
                assert_eq!(
                    got, want,
                    "binary {sql} after {ins} (deprecate_eof={deprecate_eof})"
                );
                assert_eq!(
                    p.running.shared.cache.stats().hits(),
                    hits + 1,
                    "{sql} after {ins}: both served from the patched entries"
                );
            }
        }
        assert!(patched > first, "the inserts patched entries");
    }
}

const ORDERS: &[&str] = &["CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, \
     created DATETIME NULL, amount DECIMAL(10,2) NULL)"];

const DASHBOARD: &str = "SELECT DATE(created), COUNT(*), SUM(amount) FROM orders \
     WHERE created >= '2024-01-08' AND created < '2024-01-15' GROUP BY DATE(created)";

/// Every row of `sql` as the client decoded it, text or prepared.
async fn rows(c: &mut Conn, sql: &str, prepared: bool) -> Vec<Vec<mysql_async::Value>> {
    let rows: Vec<Row> = if prepared {
        c.exec(sql, ()).await.unwrap()
    } else {
        c.query(sql).await.unwrap()
    };
    rows.into_iter().map(Row::unwrap).collect()
}

/// Reads `sql` through the proxy and directly; asserts they agree and says whether the
/// proxy's read was a hit.
async fn rows_both(c: &mut Conn, d: &mut Conn, sql: &str, prepared: bool) -> bool {
    let before = status(c, "Qcache_hits").await;
    let got = rows(c, sql, prepared).await;
    let hit = status(c, "Qcache_hits").await > before;
    assert_eq!(
        got,
        rows(d, sql, prepared).await,
        "{sql} (prepared: {prepared})"
    );
    hit
}

/// Inserts whose temporal or decimal values qcache does not read exactly as the server
/// does invalidate the dashboard's entries, text and prepared; the next read is the server's.
#[tokio::test]
async fn refused_dashboard_inserts_invalidate() {
    let schema = common::fresh_schema("patch_groups_refused").await;
    setup(&schema, ORDERS).await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    c.query_drop("INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', 5)")
        .await
        .unwrap();
    let writes = [
        "INSERT INTO orders (created, amount) VALUES ('2024-1-9 10:00:00', 1)",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00.6', 1)",
        "INSERT INTO orders (created, amount) VALUES (20240109100000, 1)",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09T10:00:00', 1)",
        "INSERT INTO orders (created, amount) VALUES (NOW(), 1)",
        "INSERT INTO orders (amount) VALUES (1)",
        // More decimals than the column (rounded by the server, with a note), as a number
        // and as a string; a number as a string the server reads otherwise than a literal.
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', 1.234)",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', '1.234')",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', '1.5e0')",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', ' 1.5')",
    ];
    for w in writes {
        for prepared in [false, true] {
            rows_both(&mut c, &mut d, DASHBOARD, prepared).await;
            assert!(
                rows_both(&mut c, &mut d, DASHBOARD, prepared).await,
                "cached"
            );
        }
        let patched = status(&mut c, "Qcache_patched").await;
        c.query_drop(w).await.unwrap();
        assert_eq!(status(&mut c, "Qcache_patched").await, patched, "{w}");
        for prepared in [false, true] {
            assert!(
                !rows_both(&mut c, &mut d, DASHBOARD, prepared).await,
                "{w} (prepared: {prepared}): invalidated"
            );
        }
    }
}

/// The verifier re-reads grouped patches (its statement groups and bounds as the read
/// does) and agrees; with the corrupting fault it catches the wrong patch, drops the entry
/// and turns the shape off.
#[tokio::test]
async fn the_verifier_checks_grouped_patches() {
    let schema = common::fresh_schema("patch_groups_verified").await;
    setup(&schema, ORDERS).await;
    let p = proxy(1.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    rows_both(&mut c, &mut d, DASHBOARD, false).await;
    let inserts = [
        "INSERT INTO orders (created, amount) VALUES ('2024-01-10 10:00:00', 5.25)",
        "INSERT INTO orders (created, amount) VALUES ('2024-01-10 11:00:00', NULL), \
         ('2024-01-08 00:00:00', -2.1), ('2024-01-15 00:00:00', 9)",
    ];
    for (i, ins) in inserts.iter().enumerate() {
        c.query_drop(*ins).await.unwrap();
        let n = i as u64 + 1;
        assert_eq!(status(&mut c, "Qcache_patched").await, n, "{ins}");
        assert_eq!(wait_status(&mut c, "Qcache_patch_verified", n).await, n);
        assert!(
            rows_both(&mut c, &mut d, DASHBOARD, false).await,
            "{ins}: a hit"
        );
    }
    assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
    p.running
        .shared
        .cache
        .versions()
        .faults
        .set(Fault::Patches, true);
    c.query_drop("INSERT INTO orders (created, amount) VALUES ('2024-01-12 10:00:00', 1)")
        .await
        .unwrap();
    assert_eq!(status(&mut c, "Qcache_patched").await, 3);
    assert_eq!(wait_status(&mut c, "Qcache_patch_mismatches", 1).await, 1);
    assert!(
        !rows_both(&mut c, &mut d, DASHBOARD, false).await,
        "the wrong entry was dropped"
    );
    c.query_drop("INSERT INTO orders (created, amount) VALUES ('2024-01-12 11:00:00', 1)")
        .await
        .unwrap();
    assert_eq!(
        status(&mut c, "Qcache_patched").await,
        3,
        "shape turned off"
    );
    rows_both(&mut c, &mut d, DASHBOARD, false).await;
}

/// The dashboard exactly: SUM of a DECIMAL(10,2) (and of a DECIMAL(5,0) UNSIGNED), exact,
/// with the server's scale and text, after inserts of fractions, integers, negatives,
/// NULLs, new groups and rows outside the week: every hit the server's bytes.
#[tokio::test]
async fn patched_decimal_sums_are_the_servers_bytes() {
    let schema = common::fresh_schema("patch_decimal_bytes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, created DATETIME NULL, \
           amount DECIMAL(10,2) NULL, qty DECIMAL(5,0) UNSIGNED NULL)",
        ],
    )
    .await;
    let p = proxy(0.0).await;
    let reads = [
        DASHBOARD,
        "SELECT COUNT(*), SUM(amount), COUNT(amount), SUM(qty) FROM orders",
        "SELECT DATE(created), SUM(qty), SUM(amount) FROM orders GROUP BY DATE(created)",
    ];
    let seed = "INSERT INTO orders (created, amount, qty) VALUES \
                ('2024-01-10 10:00:00', 100.25, 3), ('2024-01-12 09:00:00', 0.05, NULL)";
    let inserts = [
        "INSERT INTO orders (created, amount, qty) VALUES ('2024-01-10 12:00:00', 12.5, 1)",
        "INSERT INTO orders (created, amount, qty) VALUES ('2024-01-09 08:00:00', -100.30, 2), \
         ('2024-01-13 00:00:00', 7, 0)",
        "INSERT INTO orders (created, amount, qty) VALUES ('2024-01-11 01:00:00', NULL, NULL), \
         ('2024-01-16 00:00:00', 99999999.99, 99999), ('2024-01-12 10:00:00', -0.05, 4)",
        "INSERT INTO orders (created, amount, qty) VALUES ('2024-01-10 13:00:00', 0.1, 10)",
    ];
    same_bytes_after_inserts(&p, &schema, &reads, seed, &inserts).await;
}

/// One bound parameter of a raw execute: its type, flags and value bytes.
type RawParam = (u8, u8, Vec<u8>);

/// A DATETIME parameter (7 bytes; 4 at midnight, as clients send it).
fn p_datetime(y: u16, m: u8, d: u8, h: u8, mi: u8, s: u8) -> RawParam {
    let mut v = y.to_le_bytes().to_vec();
    v.extend_from_slice(&[m, d]);
    if (h, mi, s) != (0, 0, 0) {
        v.extend_from_slice(&[h, mi, s]);
    }
    let mut b = vec![v.len() as u8];
    b.extend(v);
    (0x0c, 0, b)
}

/// A DATE parameter.
fn p_date(y: u16, m: u8, d: u8) -> RawParam {
    let mut b = vec![4u8];
    b.extend_from_slice(&y.to_le_bytes());
    b.extend_from_slice(&[m, d]);
    (0x0a, 0, b)
}

/// A VAR_STRING parameter.
fn p_str(s: &str) -> RawParam {
    let mut b = vec![s.len() as u8];
    b.extend_from_slice(s.as_bytes());
    (0xfd, 0, b)
}

/// A LONGLONG parameter.
fn p_int(n: i64) -> RawParam {
    (0x08, 0, n.to_le_bytes().to_vec())
}

/// Prepares `sql` on `r`, executes it with `params` (types sent) and returns the bytes of
/// the execution's answer.
async fn executed(r: &mut Raw, sql: &str, params: &[RawParam]) -> Vec<u8> {
    use qcache::protocol::packets::com;
    use qcache::protocol::response::Expect;
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(sql.as_bytes());
    let (_, resp) = r.command(&p, Expect::Prepare).await;
    let (id, _, _) = resp.prepared.expect("prepared");
    let mut e = vec![com::STMT_EXECUTE];
    e.extend_from_slice(&id.to_le_bytes());
    e.push(0);
    e.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        e.extend(std::iter::repeat_n(0u8, params.len().div_ceil(8)));
        e.push(1);
        for (ty, flags, _) in params {
            e.extend_from_slice(&[*ty, *flags]);
        }
        for (_, _, v) in params {
            e.extend_from_slice(v);
        }
    }
    let (answer, _) = r.command(&e, Expect::Results).await;
    Raw::wire(&answer)
}

/// The dashboard as the issue writes it, `created >= ? AND created < ?`.
const DASHBOARD_P: &str = "SELECT DATE(created), COUNT(*), SUM(amount) FROM orders \
     WHERE created >= ? AND created < ? GROUP BY DATE(created)";

/// Parameterised reads (binary protocol, the week bound as DATETIME, DATE and string
/// parameters; integer ranges; MIN/MAX of DECIMAL, DATETIME and DATE columns) and a text
/// MIN/MAX read stay served after prepared INSERTs with typed parameters and text ones:
/// every hit is the server's answer byte for byte, both result endings, every entry patched.
#[tokio::test]
async fn parameterised_patches_are_the_servers_bytes() {
    use mysql_async::Value as V;
    let schema = common::fresh_schema("patch_params_bytes").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, created DATETIME NULL, \
           d DATE NULL, amount DECIMAL(10,2) NULL, k INT NULL)",
        ],
    )
    .await;
    let p = proxy(0.0).await;
    let week = |a: RawParam, b: RawParam| vec![a, b];
    let reads: Vec<(&str, Vec<RawParam>)> = vec![
        (
            DASHBOARD_P,
            week(
                p_datetime(2024, 1, 8, 0, 0, 0),
                p_datetime(2024, 1, 15, 0, 0, 0),
            ),
        ),
        (
            DASHBOARD_P,
            week(
                p_datetime(2024, 1, 9, 12, 0, 0),
                p_datetime(2024, 1, 12, 23, 59, 59),
            ),
        ),
        (DASHBOARD_P, week(p_date(2024, 1, 8), p_date(2024, 1, 15))),
        (
            DASHBOARD_P,
            week(p_str("2024-01-08"), p_str("2024-01-14 12:00:00")),
        ),
        (
            "SELECT k, COUNT(*), MIN(amount), MAX(created), MIN(d) FROM orders \
             WHERE k BETWEEN ? AND ? GROUP BY k",
            vec![p_int(2), p_int(9)],
        ),
        (
            "SELECT COUNT(*), MAX(amount), MIN(created), MAX(d) FROM orders WHERE d >= ?",
            vec![p_datetime(2024, 1, 10, 0, 0, 0)],
        ),
        (
            "SELECT MIN(amount), MAX(amount), MIN(created), MAX(created), MIN(d), MAX(d) \
             FROM orders",
            vec![],
        ),
    ];
    let text = "SELECT MIN(amount), MAX(amount), MIN(created), MAX(created), MIN(d), MAX(d) \
                FROM orders";
    let seed = "INSERT INTO orders (created, d, amount, k) VALUES \
                ('2024-01-10 10:00:00', '2024-01-10', 100.25, 5), \
                ('2024-01-12 09:00:00', '2024-01-12', 0.05, 9)";
    let insert = "INSERT INTO orders (created, d, amount, k) VALUES (?, ?, ?, ?)";
    let date = |y, m, d, h, mi, s| V::Date(y, m, d, h, mi, s, 0);
    let inserts: Vec<Vec<V>> = vec![
        // Into existing groups; a new minimum amount and a new maximum date.
        vec![
            date(2024, 1, 10, 11, 30, 0),
            date(2024, 1, 13, 0, 0, 0),
            V::Bytes(b"-3.50".to_vec()),
            V::Int(5),
        ],
        // New groups at the start and the end; a string date, an integer amount.
        vec![
            V::Bytes(b"2024-01-08 00:00:00".to_vec()),
            date(2024, 1, 8, 0, 0, 0),
            V::Int(7),
            V::Int(2),
        ],
        vec![
            date(2024, 1, 14, 23, 59, 59),
            V::Bytes(b"2024-01-14".to_vec()),
            V::Bytes(b"99999999.99".to_vec()),
            V::Int(9),
        ],
        // NULLs; outside the week and the key range.
        vec![V::NULL, V::NULL, V::NULL, V::Int(3)],
        vec![
            date(2024, 1, 15, 0, 0, 0),
            date(2024, 1, 7, 0, 0, 0),
            V::Bytes(b"-99999999.99".to_vec()),
            V::Int(10),
        ],
    ];
    let mut c = p.conn(&schema).await;
    for deprecate_eof in [false, true] {
        c.query_drop("DELETE FROM orders").await.unwrap();
        c.query_drop(seed).await.unwrap();
        let mut rp = Raw::connect(&p.addr_string(), "root", &schema, deprecate_eof).await;
        let mut rd = Raw::connect(&common::db().addr(), "root", &schema, deprecate_eof).await;
        for (sql, params) in &reads {
            executed(&mut rp, sql, params).await;
        }
        rp.query(text).await;
        let entries = reads.len() as u64 + 1;
        let patched = status(&mut c, "Qcache_patched").await;
        let mut reached = patched;
        for (n, row) in inserts.iter().enumerate() {
            // A text insert between the prepared ones: both kinds patch.
            if n == 3 {
                c.query_drop(
                    "INSERT INTO orders (created, d, amount, k) \
                     VALUES ('2024-01-11 08:00:00', '2024-01-11', 12.5, 4)",
                )
                .await
                .unwrap();
            }
            c.exec_drop(insert, row.clone()).await.unwrap();
            // An entry the insert leaves as it was, whose slices its bumps do not reach,
            // stays current unpatched.
            let more = if n >= 3 { 2 } else { 1 };
            let now = status(&mut c, "Qcache_patched").await;
            assert!(
                now <= patched + entries * (n as u64 + more),
                "{row:?}: at most every entry patched"
            );
            reached = reached.max(now);
            for (sql, params) in &reads {
                let hits = p.running.shared.cache.stats().hits();
                let got = executed(&mut rp, sql, params).await;
                let want = executed(&mut rd, sql, params).await;
                assert_eq!(
                    got, want,
                    "binary {sql} {params:?} after {row:?} (deprecate_eof={deprecate_eof})"
                );
                assert_eq!(
                    p.running.shared.cache.stats().hits(),
                    hits + 1,
                    "{sql} {params:?} after {row:?}: served from the patched entry"
                );
            }
            let hits = p.running.shared.cache.stats().hits();
            let (got, _) = rp.query(text).await;
            let (want, _) = rd.query(text).await;
            assert_eq!(
                Raw::wire(&got),
                Raw::wire(&want),
                "text {text} after {row:?}"
            );
            assert_eq!(p.running.shared.cache.stats().hits(), hits + 1);
        }
        assert!(reached > patched, "the inserts patched entries");
    }
}

/// Parameters qcache does not compare or store exactly as the server does leave the
/// entry to the write's invalidation: an integer or a fraction of a second in the read's
/// range, a time for a DATE, a DOUBLE amount, a fraction of a second inserted. The read
/// after the insert is the server's (a miss).
#[tokio::test]
async fn parameters_it_cannot_read_exactly_invalidate() {
    use mysql_async::Value as V;
    let schema = common::fresh_schema("patch_params_refused").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, created DATETIME NULL, \
           d DATE NULL, amount DECIMAL(10,2) NULL, k INT NULL)",
        ],
    )
    .await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let date = |y, m, dd, h, mi, s, us| V::Date(y, m, dd, h, mi, s, us);
    let good = vec![date(2024, 1, 8, 0, 0, 0, 0), date(2024, 1, 15, 0, 0, 0, 0)];
    // Reads: (params, patchable); the patchable one last (it stays cached and patched).
    let reads: Vec<(Vec<V>, bool)> = vec![
        (vec![V::Int(20240108), V::Int(20240115)], false),
        (
            vec![
                date(2024, 1, 8, 0, 0, 0, 500_000),
                date(2024, 1, 15, 0, 0, 0, 0),
            ],
            false,
        ),
        (
            vec![V::Bytes(b"2024-1-08".to_vec()), V::Int(20240115)],
            false,
        ),
        (vec![V::NULL, date(2024, 1, 15, 0, 0, 0, 0)], false),
        (good.clone(), true),
    ];
    let insert = "INSERT INTO orders (created, d, amount, k) VALUES (?, ?, ?, ?)";
    c.exec_drop(
        insert,
        vec![date(2024, 1, 9, 1, 0, 0, 0), V::NULL, V::Int(1), V::Int(1)],
    )
    .await
    .unwrap();
    for (params, patchable) in &reads {
        let hits = status(&mut c, "Qcache_hits").await;
        read_p(&mut c, params.clone()).await;
        read_p(&mut c, params.clone()).await;
        assert_eq!(
            status(&mut c, "Qcache_hits").await,
            hits + 1,
            "{params:?}: cached"
        );
        let patched = status(&mut c, "Qcache_patched").await;
        c.exec_drop(
            insert,
            vec![date(2024, 1, 10, 1, 0, 0, 0), V::NULL, V::Int(2), V::Int(1)],
        )
        .await
        .unwrap();
        assert_eq!(
            status(&mut c, "Qcache_patched").await,
            patched + u64::from(*patchable),
            "{params:?}"
        );
        let hits = status(&mut c, "Qcache_hits").await;
        let got = read_p(&mut c, params.clone()).await;
        assert_eq!(got, read_p(&mut d, params.clone()).await, "{params:?}");
        assert_eq!(
            status(&mut c, "Qcache_hits").await,
            hits + u64::from(*patchable),
            "{params:?}: patched, or invalidated"
        );
    }
    // Inserts whose values the patch cannot know exactly: the entry is dropped.
    let writes: Vec<Vec<V>> = vec![
        vec![
            date(2024, 1, 9, 1, 0, 0, 0),
            V::NULL,
            V::Double(1.5),
            V::Int(1),
        ],
        vec![
            date(2024, 1, 9, 1, 0, 0, 250_000),
            V::NULL,
            V::Int(1),
            V::Int(1),
        ],
        vec![V::Int(20240109), V::NULL, V::Int(1), V::Int(1)],
        vec![
            date(2024, 1, 9, 1, 0, 0, 0),
            V::NULL,
            V::Bytes(b"1.234".to_vec()),
            V::Int(1),
        ],
    ];
    for w in writes {
        read_p(&mut c, good.clone()).await;
        let patched = status(&mut c, "Qcache_patched").await;
        c.exec_drop(insert, w.clone()).await.unwrap();
        assert_eq!(status(&mut c, "Qcache_patched").await, patched, "{w:?}");
        let hits = status(&mut c, "Qcache_hits").await;
        let got = read_p(&mut c, good.clone()).await;
        assert_eq!(got, read_p(&mut d, good.clone()).await, "{w:?}");
        assert_eq!(
            status(&mut c, "Qcache_hits").await,
            hits,
            "{w:?}: invalidated"
        );
    }
}

/// The verifier re-reads parameterised patches (its statement states the bound values)
/// and MIN/MAX of DECIMAL and temporal columns, and agrees; with the corrupting fault it
/// catches each wrong patch, drops the entry and turns the shape off.
#[tokio::test]
async fn the_verifier_checks_parameterised_and_min_max_patches() {
    use mysql_async::Value as V;
    let schema = common::fresh_schema("patch_params_verified").await;
    setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, created DATETIME NULL, \
           d DATE NULL, amount DECIMAL(10,2) NULL, k INT NULL)",
        ],
    )
    .await;
    let p = proxy(1.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let week = vec![
        V::Date(2024, 1, 8, 0, 0, 0, 0),
        V::Bytes(b"2024-01-15".to_vec()),
    ];
    let minmax = "SELECT MAX(d), MIN(amount), MAX(created) FROM orders WHERE k = ?";
    let reads: [(&str, Vec<V>); 2] = [(DASHBOARD_P, week), (minmax, vec![V::Int(1)])];
    let insert = "INSERT INTO orders (created, d, amount, k) VALUES (?, ?, ?, ?)";
    let row = |day: u32, amount: &str| {
        vec![
            V::Date(2024, 1, day as u8, 10, 0, 0, 0),
            V::Date(2024, 1, day as u8, 0, 0, 0, 0),
            V::Bytes(amount.as_bytes().to_vec()),
            V::Int(1),
        ]
    };
    for (sql, params) in &reads {
        exec_both(&mut c, &mut d, sql, params.clone()).await;
    }
    for (i, (day, amount)) in [(10, "5.25"), (9, "-1.50"), (12, "100")].iter().enumerate() {
        c.exec_drop(insert, row(*day, amount)).await.unwrap();
        let n = 2 * (i as u64 + 1);
        assert_eq!(status(&mut c, "Qcache_patched").await, n);
        assert_eq!(wait_status(&mut c, "Qcache_patch_verified", n).await, n);
        for (sql, params) in &reads {
            assert!(
                exec_both(&mut c, &mut d, sql, params.clone()).await,
                "{sql}: a hit"
            );
        }
    }
    assert_eq!(status(&mut c, "Qcache_patch_mismatches").await, 0);
    p.running
        .shared
        .cache
        .versions()
        .faults
        .set(Fault::Patches, true);
    c.exec_drop(insert, row(11, "1")).await.unwrap();
    assert_eq!(status(&mut c, "Qcache_patched").await, 8);
    assert_eq!(wait_status(&mut c, "Qcache_patch_mismatches", 2).await, 2);
    for (sql, params) in &reads {
        assert!(
            !exec_both(&mut c, &mut d, sql, params.clone()).await,
            "{sql}: the wrong entry was dropped"
        );
    }
    c.exec_drop(insert, row(13, "2")).await.unwrap();
    assert_eq!(
        status(&mut c, "Qcache_patched").await,
        8,
        "shapes turned off"
    );
    for (sql, params) in &reads {
        exec_both(&mut c, &mut d, sql, params.clone()).await;
    }
}

/// The dashboard executed with `params`, its rows as the client decoded them.
async fn read_p(c: &mut Conn, params: Vec<mysql_async::Value>) -> Vec<Vec<mysql_async::Value>> {
    let rows: Vec<Row> = c.exec(DASHBOARD_P, params).await.unwrap();
    rows.into_iter().map(Row::unwrap).collect()
}

/// Executes `sql` with `params` through the proxy and directly; asserts they agree and
/// says whether the proxy's was a hit.
async fn exec_both(c: &mut Conn, d: &mut Conn, sql: &str, params: Vec<mysql_async::Value>) -> bool {
    let before = status(c, "Qcache_hits").await;
    let got: Vec<Row> = c.exec(sql, params.clone()).await.unwrap();
    let hit = status(c, "Qcache_hits").await > before;
    let want: Vec<Row> = d.exec(sql, params).await.unwrap();
    assert_eq!(
        got.into_iter().map(Row::unwrap).collect::<Vec<_>>(),
        want.into_iter().map(Row::unwrap).collect::<Vec<_>>(),
        "{sql}"
    );
    hit
}

/// A session whose `sql_select_limit` cuts its results keeps its grouped entries out of
/// patching: a new group before the cut would push the last one out on the server, and a
/// patch would add it instead. Its reads are still cached, and each is the server's.
#[tokio::test]
async fn a_select_limit_keeps_entries_from_patches() {
    let schema = common::fresh_schema("patch_select_limit").await;
    setup(&schema, ORDERS).await;
    let p = proxy(0.0).await;
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    for conn in [&mut c, &mut d] {
        conn.query_drop("SET SESSION sql_select_limit = 1")
            .await
            .unwrap();
    }
    c.query_drop("INSERT INTO orders (created, amount) VALUES ('2024-01-10 10:00:00', 1)")
        .await
        .unwrap();
    for prepared in [false, true] {
        rows_both(&mut c, &mut d, DASHBOARD, prepared).await;
        assert!(
            rows_both(&mut c, &mut d, DASHBOARD, prepared).await,
            "cached"
        );
    }
    let patched = status(&mut c, "Qcache_patched").await;
    c.query_drop("INSERT INTO orders (created, amount) VALUES ('2024-01-09 10:00:00', 2)")
        .await
        .unwrap();
    assert_eq!(status(&mut c, "Qcache_patched").await, patched);
    for prepared in [false, true] {
        assert!(
            !rows_both(&mut c, &mut d, DASHBOARD, prepared).await,
            "invalidated (prepared: {prepared})"
        );
    }
}
