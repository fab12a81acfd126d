//! Invalidation beyond proxied writes, against a private MariaDB with a ROW binlog: the schema
//! catalog (views, triggers, cascades) and the binlog tail (direct writes, statement-based
//! writes, outside DDL, a killed stream, a server without binlog), plus the measured lag from
//! a direct commit to the bump.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use qcache::cache::versions::{TableHandle, Versions};
use qcache::config::{BinlogMode, InvalidationConfig};
use qcache::invalidation::binlog::{self, BinlogHandle, BinlogStatus, WriteAnalyser};
use qcache::invalidation::{Catalog, Changed, ReadResolution};
use qcache::observe::stats::CacheStats;

/// How long a direct write may take to show up as a bump. The measured lag is milliseconds;
/// the margin is for a machine busy compiling.
const BUMP_WITHIN: Duration = Duration::from_secs(2);

fn cfg(mode: BinlogMode) -> InvalidationConfig {
    let db = common::db();
    // Every tail registers with its own server_id: two replicas with one id kick each other.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let id = 1_000_000 + (std::process::id() % 10_000) * 100 + NEXT.fetch_add(1, Ordering::Relaxed);
    InvalidationConfig {
        binlog: mode,
        server_id: id,
        user: db.user.clone(),
        password: db.password.clone(),
        ..InvalidationConfig::default()
    }
}

fn t(s: &str, n: &str) -> (String, String) {
    (s.to_string(), n.to_string())
}

/// A resolution without the privilege stamps a DEFINER view's read carries (schema "",
/// checked in `definer_views_carry_privilege_stamps`): the relations only.
fn relations(r: ReadResolution) -> ReadResolution {
    match r {
        ReadResolution::Tables(ts) => {
            ReadResolution::Tables(ts.into_iter().filter(|(s, _)| !s.is_empty()).collect())
        }
        other => other,
    }
}

/// A stand-in for the real write analyser (another module): the table after INSERT INTO,
/// REPLACE INTO, UPDATE, DELETE FROM, ALTER/DROP/TRUNCATE/CREATE TABLE, VIEW, and both names
/// of RENAME TABLE. Anything else is "unknown" (the tail then invalidates everything, which
/// parallel tests sharing the server see as epoch changes).
fn test_analyser() -> WriteAnalyser {
    Arc::new(|sql: &str, schema: &str| {
        let words: Vec<String> = sql
            .split(|c: char| c.is_whitespace() || c == '(' || c == ';' || c == ',')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_string())
            .collect();
        let name = |w: &str| {
            let w = w.replace('`', "").to_lowercase();
            match w.split_once('.') {
                Some((s, n)) => (s.to_string(), n.to_string()),
                None => (schema.to_string(), w),
            }
        };
        let up: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let at = |i: usize| up.get(i).map(String::as_str).unwrap_or("");
        let mut out = Vec::new();
        for i in 0..up.len() {
            match (at(i), at(i + 1)) {
                ("INSERT" | "REPLACE", "INTO") | ("DELETE", "FROM") => {
                    out.push(name(words.get(i + 2)?))
                }
                ("UPDATE", _) => out.push(name(words.get(i + 1)?)),
                ("ALTER" | "DROP" | "TRUNCATE", "TABLE") => {
                    let mut j = i + 2;
                    if at(j) == "IF" {
                        j += if at(j + 1) == "EXISTS" { 2 } else { 3 };
                    }
                    out.push(name(words.get(j)?))
                }
                ("RENAME", "TABLE") => {
                    out.push(name(words.get(i + 2)?));
                    out.push(name(words.get(i + 4)?));
                }
                ("CREATE", "TABLE") => out.push(name(words.get(i + 2)?)),
                // The server logs CREATE VIEW with ALGORITHM/DEFINER/SQL SECURITY between.
                ("VIEW", _) => out.push(name(words.get(i + 1)?)),
                _ => {}
            }
        }
        (!out.is_empty()).then_some(out)
    })
}

async fn loaded_catalog() -> Arc<Catalog> {
    let c = Catalog::new(common::db().addr(), &cfg(BinlogMode::On));
    c.refresh().await.expect("catalog loads");
    assert!(c.is_loaded());
    c
}

/// A catalog, a registry and a connected tail.
async fn tail() -> (Arc<Versions>, Arc<Catalog>, Arc<BinlogHandle>) {
    common::init_tracing();
    let versions = Arc::new(Versions::new());
    let catalog = loaded_catalog().await;
    let handle = binlog::spawn(
        common::db().addr(),
        cfg(BinlogMode::On),
        versions.clone(),
        Arc::new(CacheStats::new()),
        catalog.clone(),
        test_analyser(),
    );
    assert!(
        handle.wait_until_connected(Duration::from_secs(10)).await,
        "binlog tail did not connect: {:?}",
        handle.status()
    );
    (versions, catalog, handle)
}

async fn exec(conn: &mut mysql_async::Conn, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Polls until the table's version moves past `before`.
async fn bumped(t: &TableHandle, before: u64, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if t.version() > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t.version() > before
}

#[tokio::test]
async fn catalog_resolves_views_triggers_and_cascades() {
    let s = common::fresh_schema("cat").await;
    let mut c = common::direct_to(&s).await;
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE b (id INT PRIMARY KEY, w INT)",
        "CREATE TABLE audit (id INT)",
        "CREATE TABLE log2 (id INT)",
        "CREATE TABLE parent (id INT PRIMARY KEY) ENGINE=InnoDB",
        "CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent(id) \
         ON DELETE CASCADE) ENGINE=InnoDB",
        "CREATE TABLE other (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent(id)) \
         ENGINE=InnoDB",
        "CREATE VIEW v_ab AS SELECT a.id, b.w FROM a JOIN b ON a.id = b.id",
        "CREATE VIEW v_v AS SELECT id FROM v_ab WHERE id > 1",
        "CREATE TRIGGER a_ai AFTER INSERT ON a FOR EACH ROW INSERT INTO audit VALUES (NEW.id)",
        "CREATE TRIGGER b_ai AFTER INSERT ON b FOR EACH ROW BEGIN \
           IF NEW.id > 0 THEN INSERT INTO log2 VALUES (NEW.id); END IF; \
         END",
    ] {
        exec(&mut c, sql).await;
    }
    let cat = loaded_catalog().await;

    assert_eq!(
        relations(cat.resolve_read(&[t(&s, "v_ab")])),
        ReadResolution::Tables(vec![t(&s, "a"), t(&s, "b"), t(&s, "v_ab")])
    );
    assert_eq!(
        relations(cat.resolve_read(&[t(&s, "v_v")])),
        ReadResolution::Tables(vec![t(&s, "a"), t(&s, "b"), t(&s, "v_ab"), t(&s, "v_v")])
    );
    assert!(matches!(
        cat.resolve_read(&[t(&s, "nope")]),
        ReadResolution::Unknown(_)
    ));

    let w = cat.expand_write(&[t(&s, "a")]).expect("trigger analysed");
    assert_eq!(w, vec![t(&s, "a"), t(&s, "audit")]);
    let w = cat
        .expand_write(&[t(&s, "b")])
        .expect("block trigger analysed");
    assert_eq!(w, vec![t(&s, "b"), t(&s, "log2")]);
    // ON DELETE CASCADE reaches child; a plain (RESTRICT) reference does not.
    let w = cat.expand_write(&[t(&s, "parent")]).expect("no triggers");
    assert_eq!(w, vec![t(&s, "child"), t(&s, "parent")]);

    let mut names = cat.schema_tables(&s);
    names.sort();
    assert_eq!(
        names,
        ["a", "audit", "b", "child", "log2", "other", "parent", "v_ab", "v_v"]
    );
}

/// A DEFINER view's read carries its definer's privilege stamps, read from the server; an
/// INVOKER view's does not. Column DEFAULTs that advance a sequence widen writes to the table.
#[tokio::test]
async fn definer_views_carry_privilege_stamps() {
    let s = common::fresh_schema("catdef").await;
    let mut c = common::direct_to(&s).await;
    for sql in [
        "CREATE TABLE base (id INT)",
        "CREATE SEQUENCE seq NOCACHE",
        "CREATE TABLE filled (id INT DEFAULT NEXTVAL(seq), v INT)",
        "CREATE DEFINER = CURRENT_USER SQL SECURITY DEFINER VIEW vd AS SELECT id FROM base",
        "CREATE SQL SECURITY INVOKER VIEW vi AS SELECT id FROM vd",
        "CREATE SQL SECURITY INVOKER VIEW vj AS SELECT id FROM base",
    ] {
        exec(&mut c, sql).await;
    }
    let me: String = c
        .query_first("SELECT CURRENT_USER()")
        .await
        .unwrap()
        .unwrap();
    let cat = loaded_catalog().await;
    let stamps = qcache::policy::privileges::definer_stamps(&me);
    for v in ["vd", "vi"] {
        let ReadResolution::Tables(ts) = cat.resolve_read(&[t(&s, v)]) else {
            panic!("{v} not resolved");
        };
        for st in &stamps {
            assert!(ts.contains(st), "{v}: {ts:?}");
        }
    }
    let ReadResolution::Tables(ts) = cat.resolve_read(&[t(&s, "vj")]) else {
        panic!("vj not resolved");
    };
    assert_eq!(ts, vec![t(&s, "base"), t(&s, "vj")]);
    assert_eq!(
        cat.expand_write(&[t(&s, "filled")]),
        Some(vec![t(&s, "filled"), t(&s, "seq")])
    );
}

#[tokio::test]
async fn catalog_refresh_sees_new_view_and_coalesces() {
    let s = common::fresh_schema("catref").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE base (id INT)").await;
    let cat = loaded_catalog().await;
    assert!(matches!(
        cat.resolve_read(&[t(&s, "later")]),
        ReadResolution::Unknown(_)
    ));
    exec(&mut c, "CREATE VIEW later AS SELECT id FROM base").await;
    cat.refresh().await.unwrap();
    assert_eq!(
        relations(cat.resolve_read(&[t(&s, "later")])),
        ReadResolution::Tables(vec![t(&s, "base"), t(&s, "later")])
    );

    // Twenty concurrent refreshes cost at most two loads: one running, one for all waiters.
    let (before, _) = cat.counters();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let cat = cat.clone();
        tasks.push(tokio::spawn(async move { cat.refresh().await }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let (after, _) = cat.counters();
    assert!(
        after - before <= 2,
        "{} loads for 20 refreshes",
        after - before
    );
    // A recent enough load is reused by refresh_if_older.
    cat.refresh_if_older(Duration::from_secs(60)).await.unwrap();
    assert_eq!(cat.counters().0, after);
}

/// A catalog's answers about `schemas` only: the server is shared with tests running in
/// parallel, whose schemas a partial refresh rightly does not follow.
fn answers_about(cat: &Catalog, schemas: &[&str]) -> Vec<String> {
    cat.answers()
        .into_iter()
        .filter(|l| {
            schemas
                .iter()
                .any(|s| l.starts_with(&format!("{s}.")) || l.starts_with(&format!("schema {s}:")))
        })
        .collect()
}

/// After each kind of DDL, reloading only what the statement names and patching the snapshot
/// gives the answers a full reload gives: views (nested, across schemas, turned opaque by a
/// drop, DEFINER and INVOKER), triggers, column defaults advancing a sequence, foreign keys
/// (added, dropped, following a renamed parent from another schema), mixed-case names on a
/// server that compares names by case, and whole schemas.
#[tokio::test]
async fn partial_refresh_answers_like_a_full_reload() {
    let s = common::fresh_schema("catpart").await;
    let s2 = common::fresh_schema("catpart_x").await;
    let mut c = common::direct_to(&s).await;
    for sql in [
        "CREATE TABLE parent (id INT PRIMARY KEY)",
        "CREATE TABLE child (id INT PRIMARY KEY, pid INT, \
         CONSTRAINT fk_c FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE)",
        "CREATE TABLE a (id INT)",
        "CREATE TABLE b (id INT)",
        "CREATE TABLE audit (id INT)",
    ] {
        exec(&mut c, sql).await;
    }
    let cat = loaded_catalog().await;
    let here = |names: &[&str]| Changed {
        objects: names.iter().map(|n| t(&s, &n.to_lowercase())).collect(),
        ..Changed::default()
    };
    let there = |names: &[&str]| Changed {
        objects: names.iter().map(|n| t(&s2, n)).collect(),
        ..Changed::default()
    };
    let whole = |schema: &str| Changed {
        schemas: vec![schema.to_string()],
        ..Changed::default()
    };
    let steps: Vec<(String, Changed)> =
        vec![
        ("CREATE VIEW v AS SELECT a.id FROM a JOIN b USING (id)".into(), here(&["v"])),
        (format!("CREATE VIEW `{s2}`.vv AS SELECT id FROM `{s}`.v"), there(&["vv"])),
        ("CREATE OR REPLACE VIEW v AS SELECT id FROM a".into(), here(&["v"])),
        ("ALTER VIEW v AS SELECT id FROM b".into(), here(&["v"])),
        ("CREATE SEQUENCE seq NOCACHE".into(), here(&["seq"])),
        (
            "CREATE TABLE filled (id INT DEFAULT NEXTVAL(seq), v INT)".into(),
            here(&["filled"]),
        ),
        (
            "ALTER TABLE b ALTER COLUMN id SET DEFAULT NEXTVAL(seq)".into(),
            here(&["b"]),
        ),
        (
            "CREATE DEFINER = CURRENT_USER SQL SECURITY DEFINER VIEW vdef AS SELECT id FROM b"
                .into(),
            here(&["vdef"]),
        ),
        (
            "ALTER SQL SECURITY INVOKER VIEW vdef AS SELECT id FROM filled".into(),
            here(&["vdef"]),
        ),
        (
            "CREATE TRIGGER trg AFTER INSERT ON a FOR EACH ROW INSERT INTO audit VALUES (NEW.id)"
                .into(),
            here(&["a"]),
        ),
        ("ALTER TABLE child ADD COLUMN x INT".into(), here(&["child"])),
        (
            "CREATE TABLE grand (id INT, cid INT, \
             CONSTRAINT fk_g FOREIGN KEY (cid) REFERENCES child (id) ON DELETE SET NULL)"
                .into(),
            here(&["grand"]),
        ),
        ("ALTER TABLE grand DROP FOREIGN KEY fk_g".into(), here(&["grand"])),
        (
            "ALTER TABLE grand ADD CONSTRAINT fk_g2 FOREIGN KEY (cid) REFERENCES child (id) \
             ON UPDATE CASCADE"
                .into(),
            here(&["grand"]),
        ),
        // The parent renamed: grand's foreign key follows it (InnoDB rewrites the child).
        ("RENAME TABLE child TO kid".into(), here(&["child", "kid"])),
        // The trigger moves with its table; v still reads b.
        ("RENAME TABLE a TO a2".into(), here(&["a", "a2"])),
        ("CREATE TABLE `MixedCase` (id INT)".into(), here(&["MixedCase"])),
        ("CREATE VIEW `ViewCase` AS SELECT id FROM `MixedCase`".into(), here(&["ViewCase"])),
        (
            format!(
                "CREATE TABLE `{s2}`.xchild (id INT, pid INT, \
                 FOREIGN KEY (pid) REFERENCES `{s}`.parent (id) ON DELETE CASCADE)"
            ),
            there(&["xchild"]),
        ),
        // A child in another schema follows the renamed parent too.
        ("RENAME TABLE parent TO parent2".into(), here(&["parent", "parent2"])),
        // vv (in the other schema) reads v: it turns opaque.
        ("DROP VIEW v".into(), here(&["v"])),
        ("DROP TABLE b, `MixedCase`".into(), here(&["b", "MixedCase"])),
        (format!("DROP DATABASE `{s2}`"), whole(&s2)),
        (format!("CREATE DATABASE `{s2}`"), whole(&s2)),
        (format!("CREATE TABLE `{s2}`.late (id INT)"), there(&["late"])),
    ];
    for (sql, changed) in steps {
        exec(&mut c, &sql).await;
        cat.refresh_changed(&changed)
            .await
            .expect("partial refresh");
        let full = loaded_catalog().await;
        let (partial, reloaded) = (
            answers_about(&cat, &[&s, &s2]),
            answers_about(&full, &[&s, &s2]),
        );
        assert!(!reloaded.is_empty());
        assert_eq!(partial, reloaded, "after {sql}");
    }
    exec(&mut c, &format!("DROP DATABASE `{s2}`")).await;
}

#[tokio::test]
async fn direct_row_writes_bump_within_the_bound() {
    let s = common::fresh_schema("rows").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY, v INT)").await;
    let (versions, _cat, _h) = tail().await;
    let tv = versions.table(&s, "t");
    for sql in [
        "INSERT INTO t VALUES (1, 1), (2, 2)",
        "UPDATE t SET v = v + 1 WHERE id = 1",
        "DELETE FROM t WHERE id = 2",
    ] {
        let before = tv.version();
        exec(&mut c, sql).await;
        assert!(
            bumped(&tv, before, BUMP_WITHIN).await,
            "{sql} did not bump t"
        );
    }
}

#[tokio::test]
async fn bump_happens_at_commit_not_before() {
    let s = common::fresh_schema("commit").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB").await;
    let (versions, _cat, h) = tail().await;
    let tv = versions.table(&s, "t");
    let before = tv.version();
    exec(&mut c, "BEGIN").await;
    exec(&mut c, "INSERT INTO t VALUES (1)").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tv.version(), before, "bumped before the commit");
    exec(&mut c, "COMMIT").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "commit did not bump t"
    );
    assert!(h.commits() > 0);
}

#[tokio::test]
async fn statement_binlog_goes_through_the_analyser() {
    let s = common::fresh_schema("stmt").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY)").await;
    exec(&mut c, "CREATE TABLE other (id INT PRIMARY KEY)").await;
    let (versions, _cat, _h) = tail().await;
    let tv = versions.table(&s, "t");
    let ov = versions.table(&s, "other");
    let before = tv.version();
    exec(&mut c, "SET SESSION binlog_format = 'STATEMENT'").await;
    exec(&mut c, "INSERT INTO t VALUES (1)").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "statement INSERT did not bump t"
    );
    // Precise: not the other table. (The epoch is not checked: other tests' DDL on the same
    // server may be beyond the stand-in analyser and invalidate everything.)
    assert_eq!(ov.version(), 0);
}

#[tokio::test]
async fn outside_ddl_bumps_and_refreshes_the_catalog() {
    let s = common::fresh_schema("ddl").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let (versions, cat, _h) = tail().await;
    let tv = versions.table(&s, "t");
    let t2 = versions.table(&s, "t2");

    let before = tv.version();
    exec(&mut c, "ALTER TABLE t ADD COLUMN v INT").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "ALTER did not bump t"
    );

    let before = tv.version();
    exec(&mut c, "RENAME TABLE t TO t2").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "RENAME did not bump t"
    );

    let before = t2.version();
    exec(&mut c, "DROP TABLE t2").await;
    assert!(
        bumped(&t2, before, BUMP_WITHIN).await,
        "DROP did not bump t2"
    );

    // The tail refreshes the catalog after DDL: a view created outside becomes resolvable.
    exec(&mut c, "CREATE TABLE base (id INT)").await;
    exec(&mut c, "CREATE VIEW vw AS SELECT id FROM base").await;
    let deadline = Instant::now() + BUMP_WITHIN;
    loop {
        if let ReadResolution::Tables(ts) = relations(cat.resolve_read(&[t(&s, "vw")])) {
            assert_eq!(ts, vec![t(&s, "base"), t(&s, "vw")]);
            break;
        }
        assert!(Instant::now() < deadline, "catalog never saw the new view");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn cascades_and_triggers_widen_binlog_writes() {
    let s = common::fresh_schema("widen").await;
    let mut c = common::direct_to(&s).await;
    for sql in [
        "CREATE TABLE parent (id INT PRIMARY KEY) ENGINE=InnoDB",
        "CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent(id) \
         ON DELETE CASCADE) ENGINE=InnoDB",
        "INSERT INTO parent VALUES (1)",
        "INSERT INTO child VALUES (10, 1)",
    ] {
        exec(&mut c, sql).await;
    }
    let (versions, _cat, _h) = tail().await;
    let child = versions.table(&s, "child");
    let before = child.version();
    // InnoDB does not log the cascaded delete: only the catalog knows child changed.
    exec(&mut c, "DELETE FROM parent WHERE id = 1").await;
    assert!(
        bumped(&child, before, BUMP_WITHIN).await,
        "cascade did not bump child"
    );
}

/// A killed dump thread is a transient loss: the tail resumes where it stopped (the server
/// still has those events), so it invalidates nothing wholesale (tests/binlog.rs checks the
/// cache itself; here parallel tests' writes move the epoch too).
#[tokio::test]
async fn killed_stream_resumes_and_reconnects() {
    let s = common::fresh_schema("kill").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let (versions, _cat, h) = tail().await;
    // A commit after the start gives the tail a position to resume from.
    let tv = versions.table(&s, "t");
    let before = tv.version();
    exec(&mut c, "INSERT INTO t VALUES (0)").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "no bump before KILL"
    );
    let id = h.connection_id().expect("connection id while connected");
    let dump: Option<String> = c
        .query_first(format!(
            "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(dump.as_deref(), Some("Binlog Dump"));
    exec(&mut c, &format!("KILL {id}")).await;

    let deadline = Instant::now() + Duration::from_secs(10);
    while h.resumes() == 0 || !h.connected() || h.connection_id() == Some(id) {
        assert!(
            Instant::now() < deadline,
            "no resume after KILL: {:?}, {} gaps",
            h.status(),
            h.gaps()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(h.reconnects() >= 1);
    assert_eq!(
        h.gaps(),
        0,
        "a KILL lost no events, yet the tail started afresh"
    );
    assert_eq!(h.disconnected_for(), None);

    // And it still works.
    let before = tv.version();
    exec(&mut c, "INSERT INTO t VALUES (1)").await;
    assert!(
        bumped(&tv, before, BUMP_WITHIN).await,
        "no bump after reconnect"
    );
}

/// The machine's own MariaDB on :3306 runs without log_bin; this is the one test that uses it.
#[tokio::test]
async fn auto_mode_stays_off_without_log_bin() {
    let cfg = InvalidationConfig {
        binlog: BinlogMode::Auto,
        user: "root".into(),
        password: String::new(),
        ..InvalidationConfig::default()
    };
    let addr = "127.0.0.1:3306".to_string();
    let h = binlog::spawn(
        addr.clone(),
        cfg.clone(),
        Arc::new(Versions::new()),
        Arc::new(CacheStats::new()),
        Catalog::new(addr, &cfg),
        test_analyser(),
    );
    let why = h
        .wait_until_off(Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("auto mode did not turn off: {:?}", h.status()));
    println!("auto mode off: {why}");
    assert!(why.contains("log_bin"), "{why}");
    assert!(matches!(h.status(), BinlogStatus::Off(_)));
    assert!(!h.connected());
    // Off means no binlog bound to enforce: hits are not stopped.
    assert_eq!(h.disconnected_for(), None);
    // Stays off: no retries behind the log line.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.reconnects(), 0);
}

#[tokio::test]
async fn off_mode_never_connects() {
    let h = binlog::spawn(
        common::db().addr(),
        cfg(BinlogMode::Off),
        Arc::new(Versions::new()),
        Arc::new(CacheStats::new()),
        loaded_catalog().await,
        test_analyser(),
    );
    assert!(!h.wait_until_connected(Duration::from_millis(300)).await);
    assert!(matches!(h.status(), BinlogStatus::Off(_)));
    assert_eq!(h.disconnected_for(), None);
}

/// The external-commit-to-invalidation lag over 200 autocommit writes. Printed, and bounded
/// loosely here; the figures go to the report.
#[tokio::test]
async fn measured_commit_to_bump_lag() {
    let s = common::fresh_schema("lag").await;
    let mut c = common::direct_to(&s).await;
    exec(&mut c, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB").await;
    let (versions, _cat, h) = tail().await;
    let tv = versions.table(&s, "t");
    let mut commits = h.subscribe_commits();
    let mut from_ok = Vec::new();
    let mut from_send = Vec::new();
    for i in 0..200 {
        let before = tv.version();
        let sent = Instant::now();
        exec(&mut c, &format!("INSERT INTO t VALUES ({i})")).await;
        let ok = Instant::now();
        let deadline = ok + BUMP_WITHIN;
        while tv.version() <= before {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "write {i} not bumped within {BUMP_WITHIN:?}"
            );
            let _ = tokio::time::timeout(left, commits.changed()).await;
        }
        let seen = Instant::now();
        from_ok.push(seen.saturating_duration_since(ok));
        from_send.push(seen - sent);
    }
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    let (ok50, ok99) = (pct(&mut from_ok, 0.5), pct(&mut from_ok, 0.99));
    let (s50, s99) = (pct(&mut from_send, 0.5), pct(&mut from_send, 0.99));
    println!(
        "binlog lag over 200 commits: OK-to-bump p50 {ok50:?} p99 {ok99:?}; \
         send-to-bump p50 {s50:?} p99 {s99:?}; max {:?}; tail processing histogram {:?}; \
         last event header lag {:?}",
        from_ok.last().copied().unwrap_or_default(),
        h.lag_histogram(),
        h.last_event_lag()
    );
    assert!(ok99 < Duration::from_secs(1), "p99 {ok99:?}");
}

/// An idle stream is kept alive by heartbeats: the stall detector must not mistake a quiet
/// server for a dead connection (each false alarm would invalidate everything).
#[tokio::test]
async fn idle_stream_stays_connected() {
    let (_versions, _cat, h) = tail().await;
    let events = h.events();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(h.connected(), "{:?}", h.status());
    // A false stall shows as a reconnect (the epoch is not checked: parallel tests' DDL may
    // be beyond the stand-in analyser and invalidate everything legitimately).
    assert_eq!(h.reconnects(), 0, "idle stream was taken for dead");
    assert!(h.events() > events, "no heartbeat in 7 s");
}

/// `auto` with a user that may read data but not the binlog: off, saying which privilege —
/// both without the right to see the binlog position and without the right to stream it.
#[tokio::test]
async fn auto_mode_stays_off_without_replication_privileges() {
    let mut c = common::direct_to("").await;
    for grants in ["SELECT", "SELECT, BINLOG MONITOR"] {
        let user = common::unique_name("norepl");
        exec(
            &mut c,
            &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
        )
        .await;
        exec(&mut c, &format!("GRANT {grants} ON *.* TO '{user}'@'%'")).await;
        let cfg = InvalidationConfig {
            user: user.clone(),
            password: "pw".into(),
            ..cfg(BinlogMode::Auto)
        };
        let h = binlog::spawn(
            common::db().addr(),
            cfg.clone(),
            Arc::new(Versions::new()),
            Arc::new(CacheStats::new()),
            Catalog::new(common::db().addr(), &cfg),
            test_analyser(),
        );
        let why = h
            .wait_until_off(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{grants}: auto mode did not turn off: {:?}", h.status()));
        println!("auto mode off with {grants}: {why}");
        assert!(why.contains("needs"), "{why}");
        exec(&mut c, &format!("DROP USER '{user}'@'%'")).await;
    }
}

/// Adversary round 10: qcache's own connections (the catalog's, the parent lookups') are
/// new sessions of the server, and inherit its globals. A global `sql_select_limit` cuts
/// every SELECT of a session that did not set its own, information_schema's included
/// (checked on MariaDB 10.11): the catalog read the first four triggers of `a` (its BEFORE
/// ones) and not the AFTER trigger that writes `log`, so an INSERT into `a` through qcache
/// bumped `a` alone and `log`'s entry stayed. qcache's own sessions must read whole answers
/// whatever the globals say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_select_limit_does_not_cut_the_catalog() {
    let server = common::own_server();
    let opts = mysql_async::Opts::from_url(&server.url("test")).unwrap();
    let mut d = mysql_async::Conn::new(opts.clone()).await.unwrap();
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE log (id INT AUTO_INCREMENT PRIMARY KEY, aid INT)",
        "CREATE TRIGGER al AFTER INSERT ON a FOR EACH ROW INSERT INTO log (aid) VALUES (NEW.id)",
        "CREATE TRIGGER b0 BEFORE INSERT ON a FOR EACH ROW SET NEW.v = NEW.v",
        "CREATE TRIGGER b1 BEFORE INSERT ON a FOR EACH ROW SET NEW.v = NEW.v",
        "CREATE TRIGGER b2 BEFORE INSERT ON a FOR EACH ROW SET NEW.v = NEW.v",
        "CREATE TRIGGER b3 BEFORE INSERT ON a FOR EACH ROW SET NEW.v = NEW.v",
        "SET GLOBAL sql_select_limit = 4",
    ] {
        exec(&mut d, sql).await;
    }
    let proxy = common::proxy_to(&server.addr(), |_| {}).await;
    let stats = proxy.running.shared.cache.stats();
    let mut c = proxy.conn("test").await;
    let count = "SELECT COUNT(*) FROM log WHERE id > 0";
    let n: Option<i64> = c.query_first(count).await.unwrap();
    assert_eq!(n, Some(0));
    let hits = stats.hits();
    let n: Option<i64> = c.query_first(count).await.unwrap();
    assert_eq!(n, Some(0));
    assert!(stats.hits() > hits, "the read of log was not cached");
    exec(&mut c, "INSERT INTO a VALUES (1, 1)").await;
    let direct: Option<i64> = d.query_first(count).await.unwrap();
    assert_eq!(direct, Some(1), "the trigger wrote log");
    let n: Option<i64> = c.query_first(count).await.unwrap();
    assert_eq!(n, Some(1), "log's entry outlived the trigger's write");
    drop(c);
    proxy.shutdown().await;
    server.kill();
}
