//! Adversarial round 14 (issue #35 classes 7, 8, 9, 10, 12): what a client sees through
//! qcache against what the server alone would show or do.

mod common;
use common::setup;

use mysql_async::prelude::*;
use mysql_async::Conn;

/// `QCACHE EXPLAIN` never runs the statement it explains. The privilege check it makes
/// first (`EXPLAIN <statement>` on the session's connection) must not run anything either:
/// a multi-statement text after the SELECT (`SELECT 1; DELETE FROM t`) is a second
/// statement the server would run, as the session's user, unseen by the cache.
#[tokio::test]
async fn qcache_explain_runs_nothing_after_the_select() {
    let schema = common::fresh_schema("adv14_exms").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut c = proxy.conn(&schema).await;
    let before: Vec<i64> = c.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(before, vec![1, 2]);
    for text in [
        "QCACHE EXPLAIN SELECT 1; DELETE FROM t",
        "QCACHE EXPLAIN SELECT 1 /*! ; DELETE FROM t */",
        "QCACHE EXPLAIN SELECT 1 /*M!100000 ; DELETE FROM t */",
        "QCACHE EXPLAIN SELECT '\\'; DELETE FROM t; '' ",
    ] {
        let explained = c.query_iter(text).await.map(|_| ());
        println!("{text}: {explained:?}");
    }
    let mut direct = common::direct_to(&schema).await;
    let on_server: Vec<i64> = direct.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(on_server, vec![1, 2], "QCACHE EXPLAIN ran the DELETE");
    // And the session goes on in step.
    let got: Vec<i64> = c.query("SELECT id FROM t ORDER BY id").await.unwrap();
    assert_eq!(got, on_server);
    drop(c);
    proxy.shutdown().await;
}

/// What a session holds after `QCACHE EXPLAIN <read>`, as a row of text: its user variable,
/// LAST_INSERT_ID(), a sequence's next value, the advisory lock.
async fn session_marks(c: &mut Conn) -> String {
    let row: Vec<mysql_async::Row> = c
        .query("SELECT @x, LAST_INSERT_ID(), IS_USED_LOCK('adv14_lock') IS NOT NULL, @@sql_select_limit")
        .await
        .unwrap();
    format!(
        "{:?}",
        row[0]
            .clone()
            .unwrap()
            .into_iter()
            .map(|v| v.as_sql(true))
            .collect::<Vec<_>>()
    )
}

/// `QCACHE EXPLAIN` of a read with effects in its select list (an assignment, LAST_INSERT_ID(n),
/// GET_LOCK, NEXTVAL): qcache answers it without running the read, so the session must hold
/// afterwards what it held before (as a server that never saw the statement would).
#[tokio::test]
async fn qcache_explain_leaves_the_session_as_it_was() {
    let schema = common::fresh_schema("adv14_exfx").await;
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            "CREATE SEQUENCE s",
            "CREATE TABLE log (n INT)",
            "CREATE FUNCTION f() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN INSERT INTO log VALUES (1); RETURN 1; END",
            "CREATE VIEW vf AS SELECT id FROM t WHERE id = (SELECT f())",
        ],
    )
    .await;
    let low = common::unique_name("a14ex");
    setup(
        &schema,
        &[
            &format!("CREATE USER '{low}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT ALL ON `{schema}`.* TO '{low}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    // The privileged (root, RELOAD) and a user without the admin privilege.
    for who in ["root", "low"] {
        let mut c = match who {
            "root" => proxy.conn(&schema).await,
            _ => Conn::from_url(format!(
                "mysql://{low}:pw@{}/{schema}?prefer_socket=false",
                proxy.addr
            ))
            .await
            .unwrap(),
        };
        let before = session_marks(&mut c).await;
        let mut out = Vec::new();
        for read in [
            "SELECT @x := 5 FROM t WHERE id = 1",
            "SELECT LAST_INSERT_ID(7) FROM t WHERE id = 1",
            "SELECT GET_LOCK('adv14_lock', 0) FROM t WHERE id = 1",
            "SELECT NEXTVAL(s)",
            "SELECT id FROM t WHERE id = (SELECT @x := 9)",
            "SELECT id FROM t WHERE id = LAST_INSERT_ID(8)",
            "SELECT id FROM t WHERE id = GET_LOCK('adv14_lock', 0)",
            "SELECT id FROM t WHERE id = (SELECT f())",
            "SELECT 5 INTO @x",
            "SELECT id FROM t WHERE id = 1 INTO @x",
            "SELECT id FROM vf",
        ]
        .into_iter()
        .filter(|r| who == "root" || !r.contains("vf"))
        {
            let r = c.query_drop(format!("QCACHE EXPLAIN {read}")).await;
            let r = match r {
                Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
                other => format!("{other:?}"),
            };
            let after = session_marks(&mut c).await;
            out.push(format!("{who}: {read}: {r} -> {after}"));
        }
        let mut direct = common::direct_to(&schema).await;
        let next: Option<i64> = direct.query_first("SELECT NEXTVAL(s)").await.unwrap();
        let logged: Option<i64> = direct
            .query_first("SELECT COUNT(*) FROM log")
            .await
            .unwrap();
        println!("{before}\n{}", out.join("\n"));
        assert_eq!(
            logged,
            Some(0),
            "{who}: QCACHE EXPLAIN ran the function's INSERT"
        );
        for line in &out {
            assert!(line.ends_with(&before), "{line}\nbefore: {before}");
        }
        let want = if who == "root" { 1 } else { 2 };
        assert_eq!(
            next,
            Some(want),
            "{who}: QCACHE EXPLAIN took a sequence value"
        );
        drop(c);
    }
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{low}'@'%'"))
        .await
        .unwrap();
}

/// One step's answer as text: rows, or the server's error code.
async fn answer_of(
    c: &mut Conn,
    step: &str,
    r: mysql_async::Result<Vec<mysql_async::Row>>,
) -> String {
    let _ = c;
    match r {
        Ok(rows) => format!(
            "{step}: {:?}",
            rows.into_iter()
                .map(|r| r.unwrap().into_iter().map(|v| v.as_sql(true)).collect())
                .collect::<Vec<Vec<String>>>()
        ),
        Err(mysql_async::Error::Server(e)) => format!("{step}: error {}", e.code),
        Err(e) => format!("{step}: {e}"),
    }
}

/// Class 7 through the paths a hit takes: a binary-protocol statement executed twice (a
/// fill and a hit through qcache), a LIMIT read served from the cache (its FOUND_ROWS() the limit's), a role
/// set, then a COM_CHANGE_USER the server refuses. After it the old statement id, FOUND_ROWS(),
/// the role and the cached reads answer as directly.
#[tokio::test]
async fn a_failed_change_user_after_hits_and_prepared_statements() {
    let schema = common::fresh_schema("adv14_cu").await;
    let user = common::unique_name("a14cu");
    let role = common::unique_name("a14r");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
            &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'right'"),
            &format!("CREATE ROLE '{role}'"),
            &format!("GRANT SELECT ON `{schema}`.t TO '{role}'"),
            &format!("GRANT '{role}' TO '{user}'@'%'"),
            &format!("GRANT SELECT ON `{schema}`.t TO '{user}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let d = common::db();
    let _ = d;
    let mut seen = Vec::new();
    for via in [false, true] {
        let url =
            |host: String| format!("mysql://{user}:right@{host}/{schema}?prefer_socket=false");
        let mut c = if via {
            Conn::from_url(url(proxy.addr.to_string())).await.unwrap()
        } else {
            Conn::from_url(url(common::db().addr())).await.unwrap()
        };
        let mut view = Vec::new();
        c.query_drop(format!("SET ROLE '{role}'")).await.unwrap();
        let st = c
            .prep("SELECT id, v FROM t WHERE id > ? ORDER BY id")
            .await
            .unwrap();
        for _ in 0..2 {
            let r = c.exec(&st, (0,)).await;
            view.push(answer_of(&mut c, "exec", r).await);
        }
        for _ in 0..2 {
            let r = c.query("SELECT id FROM t ORDER BY id LIMIT 2").await;
            view.push(answer_of(&mut c, "calc", r).await);
        }
        let refused = c
            .change_user(
                mysql_async::ChangeUserOpts::default()
                    .with_user(Some(user.clone()))
                    .with_pass(Some("wrong".into()))
                    .with_db_name(Some(schema.clone())),
            )
            .await;
        view.push(match refused {
            Ok(()) => "change_user accepted".into(),
            Err(mysql_async::Error::Server(e)) => format!("change_user error {}", e.code),
            Err(e) => format!("change_user {e}"),
        });
        for step in [
            "SELECT FOUND_ROWS()",
            "SELECT CURRENT_USER(), CURRENT_ROLE(), DATABASE()",
            "SELECT id FROM t ORDER BY id LIMIT 2",
            "SELECT FOUND_ROWS()",
        ] {
            let r = c.query(step).await;
            view.push(answer_of(&mut c, step, r).await);
        }
        let r = c.exec(&st, (0,)).await;
        view.push(answer_of(&mut c, "old statement", r).await);
        seen.push(view);
    }
    for (d, q) in seen[0].iter().zip(&seen[1]) {
        println!("{d}\n  {q}");
    }
    assert_eq!(seen[1], seen[0], "through qcache vs directly");
    // The second execute and the second LIMIT read were hits.
    assert!(proxy.running.shared.cache.stats().hits() >= 2, "no hit");
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
    root.query_drop(format!("DROP ROLE '{role}'"))
        .await
        .unwrap();
}

mod l2diag {
    use super::*;
    use common::redis::Redis;
    use qcache::config::{L2Mode, L2Url};
    use std::time::{Duration, Instant};

    async fn l2_proxy(url: &str) -> common::TestProxy {
        let p = common::proxy(|c| {
            c.l2.mode = L2Mode::On;
            c.l2.url = L2Url::One(url.to_string());
            c.l2.timeout = Duration::from_millis(500);
        })
        .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !p
            .running
            .shared
            .l2
            .as_deref()
            .is_some_and(|l| l.usable() && l.notifications_up())
        {
            assert!(Instant::now() < deadline, "L2 never came up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p
    }

    fn l2_hits(p: &common::TestProxy) -> u64 {
        p.running
            .shared
            .l2
            .as_deref()
            .unwrap()
            .status_rows()
            .into_iter()
            .find(|(n, _)| *n == "Qcache_l2_hits")
            .map(|(_, v)| v)
            .unwrap()
    }

    async fn rows_of(c: &mut Conn, sql: &str, prepared: bool) -> String {
        let r: mysql_async::Result<Vec<mysql_async::Row>> = if prepared {
            c.exec(sql, ()).await
        } else {
            c.query(sql).await
        };
        answer_of(c, "", r).await
    }

    /// Class 8 for what the earlier L2 test does not read: after a read served from L2 (and
    /// its L1 copy), a read that itself warned, or counted found rows, `SHOW WARNINGS`,
    /// `@@warning_count`, `Last_query_cost` and `FOUND_ROWS()` answer as directly. Text and
    /// prepared.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn diagnostics_of_warned_and_counted_reads_after_l2_hits() {
        let redis = Redis::start();
        let schema = common::fresh_schema("adv14_l2diag").await;
        let mut rows = Vec::new();
        for i in 1..=20 {
            rows.push(format!("({i}, '{i}x')"));
        }
        setup(
            &schema,
            &[
                "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(10))",
                &format!("INSERT INTO t VALUES {}", rows.join(",")),
            ],
        )
        .await;
        let a = l2_proxy(&redis.url()).await;
        let b = l2_proxy(&redis.url()).await;
        let mut ca = a.conn(&schema).await;
        let mut cb = b.conn(&schema).await;
        let mut direct = common::direct_to(&schema).await;
        let readers = [
            "SHOW WARNINGS",
            "SELECT @@warning_count",
            "SHOW SESSION STATUS LIKE 'Last_query_cost'",
            "SELECT FOUND_ROWS()",
        ];
        let reads = [
            "SELECT id, CAST(s AS SIGNED) AS n FROM t WHERE id > -{n} ORDER BY id",
            "SELECT SQL_CALC_FOUND_ROWS id FROM t WHERE id > -{n} ORDER BY id LIMIT 2",
            "SELECT id, s FROM t WHERE id > -{n} AND s LIKE '1%' ORDER BY id",
        ];
        let mut n = 0;
        let mut diffs = Vec::new();
        let mut hits_seen = 0;
        for read in reads {
            for reader in readers {
                for prepared in [false, true] {
                    n += 1;
                    let sql = read.replace("{n}", &n.to_string());
                    let filled = rows_of(&mut ca, &sql, prepared).await;
                    let deadline = Instant::now() + Duration::from_millis(500);
                    while redis_keys(&redis) < n {
                        if Instant::now() > deadline {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    for round in ["L2 hit", "L1 copy"] {
                        let before = l2_hits(&b);
                        let mut got = Vec::new();
                        for c in [&mut direct, &mut cb] {
                            c.query_drop("DO CAST('1y' AS SIGNED)").await.unwrap();
                            let r = rows_of(c, &sql, prepared).await;
                            let d = rows_of(c, reader, false).await;
                            got.push((r, d));
                        }
                        if round == "L2 hit" && l2_hits(&b) > before {
                            hits_seen += 1;
                        }
                        if got[0] != got[1] {
                            diffs.push(format!(
                                "{sql} (prepared {prepared}) then {reader} after an {round}:\n  directly {:?}\n  through B {:?}",
                                got[0], got[1]
                            ));
                        }
                    }
                    let _ = filled;
                }
            }
        }
        println!("{} L2 hits on B", hits_seen);
        for d in &diffs {
            println!("{d}");
        }
        assert!(hits_seen > 0, "no read was an L2 hit");
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    }

    fn redis_keys(r: &Redis) -> usize {
        r.keys("qcache:e:*").len()
    }
}

/// Class 10 through `SHOW QCACHE LAST` (any user may run it): after a read the server
/// refuses (1142, alike for a table, a view of each kind and a missing name in a database the
/// user cannot read), what qcache says of it must be alike too (but for timings). Text,
/// binary prepare, SQL-level PREPARE.
#[tokio::test]
async fn show_qcache_last_after_a_denied_read_reveals_nothing() {
    let hidden = common::fresh_schema("adv14_hid").await;
    let mine = common::fresh_schema("adv14_min").await;
    let low = common::unique_name("a14low");
    setup(
        &hidden,
        &[
            "CREATE TABLE ta (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE nk (id INT, v INT)",
            "CREATE ALGORITHM=MERGE VIEW vm AS SELECT id, v FROM ta",
            "CREATE ALGORITHM=TEMPTABLE VIEW vt AS SELECT id, v FROM ta",
            "CREATE VIEW vn AS SELECT id, v, NOW() AS n FROM ta",
            "CREATE SEQUENCE sq",
            &format!("CREATE USER '{low}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{mine}`.* TO '{low}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut via = Conn::from_url(format!(
        "mysql://{low}:pw@{}/{mine}?prefer_socket=false",
        proxy.addr
    ))
    .await
    .unwrap();
    let mut seen: Vec<(String, String)> = Vec::new();
    for obj in ["ta", "nk", "vm", "vt", "vn", "sq", "mx"] {
        for how in ["text", "prepare", "sql prepare"] {
            let stmt = format!("SELECT id FROM `{hidden}`.{obj} WHERE id = 1");
            let counters = |rows: Vec<(String, String)>| -> Vec<(String, String)> {
                rows.into_iter()
                    .filter(|(k, _)| k.starts_with("Qcache_not_cached"))
                    .collect()
            };
            let before = counters(via.query("SHOW QCACHE STATUS").await.unwrap());
            let r = match how {
                "text" => via.query_drop(&stmt).await,
                "prepare" => via.prep(&stmt).await.map(drop),
                _ => via.query_drop(format!("PREPARE s FROM '{stmt}'")).await,
            };
            let code = match r {
                Err(mysql_async::Error::Server(e)) => e.code.to_string(),
                other => format!("{other:?}"),
            };
            let last: Vec<(String, Option<String>)> = via.query("SHOW QCACHE LAST").await.unwrap();
            let after = counters(via.query("SHOW QCACHE STATUS").await.unwrap());
            let moved: Vec<String> = after
                .iter()
                .filter(|kv| !before.contains(kv))
                .map(|(k, _)| k.clone())
                .collect();
            let said: Vec<String> = last
                .into_iter()
                .filter(|(k, _)| k != "upstream_ms" && k != "statement" && k != "digest")
                .map(|(k, v)| format!("{k}={}", v.unwrap_or_default()))
                .collect();
            seen.push((
                format!("{how} {obj}"),
                format!("{code} {} moved: {moved:?}", said.join(" ")),
            ));
        }
    }
    for (w, s) in &seen {
        println!("{w}: {s}");
    }
    for how in ["text", "prepare", "sql prepare"] {
        let mine: Vec<&(String, String)> = seen
            .iter()
            .filter(|(w, _)| w.rsplit_once(' ').unwrap().0 == how)
            .collect();
        for pair in mine.windows(2) {
            assert_eq!(pair[0].1, pair[1].1, "{} vs {}", pair[0].0, pair[1].0);
        }
    }
    drop(via);
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{low}'@'%'"))
        .await
        .unwrap();
}

/// Class 7, more refusals: the right password but a default database that is missing or
/// not the account's (the server authenticates, then refuses the database), and four
/// refusals in a row (MariaDB may close the connection after repeated failures). After
/// each, the session answers as directly.
#[tokio::test]
async fn change_user_refused_for_its_database_or_repeatedly() {
    let schema = common::fresh_schema("adv14_cudb").await;
    let other = common::fresh_schema("adv14_cuo").await;
    let user = common::unique_name("a14db");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            &format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'right'"),
            &format!("GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut seen = Vec::new();
    for via in [false, true] {
        let host = if via {
            proxy.addr.to_string()
        } else {
            common::db().addr()
        };
        let mut c = Conn::from_url(format!(
            "mysql://{user}:right@{host}/{schema}?prefer_socket=false"
        ))
        .await
        .unwrap();
        let mut view = Vec::new();
        let attempts: Vec<(&str, String)> = vec![
            ("right", common::unique_name("nodb")),
            ("right", other.clone()),
            ("wrong", schema.clone()),
            ("wrong", schema.clone()),
            ("wrong", schema.clone()),
            ("wrong", schema.clone()),
        ];
        for (pw, db) in attempts {
            c.query_drop("SET @x = 3").await.unwrap();
            for _ in 0..2 {
                let r = c.query("SELECT id FROM t ORDER BY id").await;
                view.push(answer_of(&mut c, "read", r).await);
            }
            let r = c
                .change_user(
                    mysql_async::ChangeUserOpts::default()
                        .with_user(Some(user.clone()))
                        .with_pass(Some(pw.to_string()))
                        .with_db_name(Some(db.clone())),
                )
                .await;
            view.push(match r {
                Ok(()) => "change_user accepted".into(),
                Err(mysql_async::Error::Server(e)) => format!("change_user error {}", e.code),
                Err(e) => format!("change_user {e}"),
            });
            for step in [
                "SELECT CURRENT_USER() = USER() OR 1, DATABASE() IS NULL, @x",
                "SELECT id FROM t ORDER BY id",
            ] {
                let r = c.query(step).await;
                view.push(answer_of(&mut c, step, r).await);
            }
        }
        seen.push(view);
    }
    for (d, q) in seen[0].iter().zip(&seen[1]) {
        println!("{d}\n  {q}");
    }
    assert_eq!(seen[1], seen[0], "through qcache vs directly");
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{user}'@'%'"))
        .await
        .unwrap();
}

/// A view can hide what the statement's text shows: `vf` is `SELECT id FROM t WHERE id =
/// (SELECT f())`, and f() writes `log`. For a user without the admin privilege QCACHE EXPLAIN
/// first asks the server `EXPLAIN SELECT id FROM vf` (the text looks like a plain read). A
/// guard: MariaDB 10.11 does not run the view's subquery while it explains (the same
/// subquery in the statement's own text it does run, `qcache_explain_leaves_the_session_as_it_was`).
#[tokio::test]
async fn qcache_explain_of_a_view_runs_nothing() {
    let schema = common::fresh_schema("adv14_exvf").await;
    let low = common::unique_name("a14vf");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            "CREATE TABLE log (n INT)",
            "CREATE FUNCTION f() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
             BEGIN INSERT INTO log VALUES (1); RETURN 1; END",
            "CREATE VIEW vf AS SELECT id FROM t WHERE id = (SELECT f())",
            &format!("CREATE USER '{low}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT, EXECUTE ON `{schema}`.* TO '{low}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut direct = common::direct_to(&schema).await;
    let mut c = Conn::from_url(format!(
        "mysql://{low}:pw@{}/{schema}?prefer_socket=false",
        proxy.addr
    ))
    .await
    .unwrap();
    // A cached read of log, filled and served before.
    for _ in 0..2 {
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM log").await.unwrap();
        assert_eq!(n, Some(0));
    }
    let r = c.query_drop("QCACHE EXPLAIN SELECT id FROM vf").await;
    println!("QCACHE EXPLAIN SELECT id FROM vf: {r:?}");
    let on_server: Option<i64> = direct
        .query_first("SELECT COUNT(*) FROM log")
        .await
        .unwrap();
    let through: Option<i64> = c.query_first("SELECT COUNT(*) FROM log").await.unwrap();
    println!("log rows: on the server {on_server:?}, through qcache {through:?}");
    assert_eq!(on_server, Some(0), "QCACHE EXPLAIN ran the view's function");
    drop(c);
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{low}'@'%'"))
        .await
        .unwrap();
}

/// Class 7's other side: a COM_CHANGE_USER the server accepts, to an account that may not
/// read what the old one had cached (text, prepared statement kept from before): the new
/// account gets the server's refusal, never the old account's rows.
#[tokio::test]
async fn a_change_user_to_a_weaker_account_after_hits() {
    let schema = common::fresh_schema("adv14_cuw").await;
    let low = common::unique_name("a14w");
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY)",
            "CREATE TABLE u (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1), (2)",
            &format!("CREATE USER '{low}'@'%' IDENTIFIED BY 'pw'"),
            &format!("GRANT SELECT ON `{schema}`.u TO '{low}'@'%'"),
        ],
    )
    .await;
    let proxy = common::proxy(|_| {}).await;
    let mut seen = Vec::new();
    for via in [false, true] {
        let mut c = if via {
            proxy.conn(&schema).await
        } else {
            common::direct_to(&schema).await
        };
        let mut view = Vec::new();
        for _ in 0..2 {
            let r = c.query("SELECT id FROM t ORDER BY id").await;
            view.push(answer_of(&mut c, "read", r).await);
            let r = c.exec("SELECT id FROM t WHERE id > ?", (0,)).await;
            view.push(answer_of(&mut c, "exec", r).await);
        }
        let r = c
            .change_user(
                mysql_async::ChangeUserOpts::default()
                    .with_user(Some(low.clone()))
                    .with_pass(Some("pw".into()))
                    .with_db_name(Some(schema.clone())),
            )
            .await;
        view.push(format!("change_user {:?}", r.map_err(|e| e.to_string())));
        for _ in 0..2 {
            let r = c.query("SELECT id FROM t ORDER BY id").await;
            view.push(answer_of(&mut c, "read after", r).await);
            let r = c.exec("SELECT id FROM t WHERE id > ?", (0,)).await;
            view.push(answer_of(&mut c, "exec after", r).await);
        }
        seen.push(view);
    }
    for (d, q) in seen[0].iter().zip(&seen[1]) {
        println!("{d}\n  {q}");
    }
    assert_eq!(seen[1], seen[0], "through qcache vs directly");
    assert!(proxy.running.shared.cache.stats().hits() >= 2, "no hit");
    proxy.shutdown().await;
    let mut root = common::direct().await;
    root.query_drop(format!("DROP USER '{low}'@'%'"))
        .await
        .unwrap();
}

mod l2rollback {
    use super::*;
    use common::redis::Redis;
    use qcache::config::{L2Mode, L2Url};
    use std::time::{Duration, Instant};

    async fn l2_proxy(url: &str) -> common::TestProxy {
        let p = common::proxy(|c| {
            c.l2.mode = L2Mode::On;
            c.l2.url = L2Url::One(url.to_string());
            c.l2.timeout = Duration::from_millis(500);
        })
        .await;
        wait_usable(&p).await;
        p
    }

    async fn wait_usable(p: &common::TestProxy) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !p
            .running
            .shared
            .l2
            .as_deref()
            .is_some_and(|l| l.usable() && l.notifications_up())
        {
            assert!(Instant::now() < deadline, "L2 never came up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn read_v(c: &mut Conn) -> i64 {
        c.query_first("SELECT v FROM t WHERE id = 1")
            .await
            .unwrap()
            .unwrap()
    }

    async fn until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Class 9, a rollback that keeps the server's identity: the Redis the fleet uses (R1)
    /// is made a replica of another (R0) that copied R1's data before A's write, then
    /// promoted again (`REPLICAOF host port`, `REPLICAOF NO ONE`): the same process, the
    /// same `run_id`, and R1's own marker back in its data, but the version A raised is gone
    /// and the entry from before the write is back. No instance may serve it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_resynced_from_an_older_copy_serves_nothing_from_before() {
        let r1 = Redis::start();
        let r0 = Redis::start();
        let schema = common::fresh_schema("adv14_resync").await;
        setup(
            &schema,
            &[
                "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)",
                "INSERT INTO t VALUES (1, 0)",
            ],
        )
        .await;
        let a = l2_proxy(&r1.url()).await;
        let b = l2_proxy(&r1.url()).await;
        let mut ca = a.conn(&schema).await;
        let mut cb = b.conn(&schema).await;
        assert_eq!(read_v(&mut cb).await, 0);
        until("B's entry in R1", || !r1.keys("qcache:e:*").is_empty()).await;
        assert_eq!(read_v(&mut ca).await, 0);
        // R0 copies R1 as it is before the write, then stands alone.
        let p1 = r1.port.to_string();
        let p0 = r0.port.to_string();
        assert!(r0.cli(&["REPLICAOF", "127.0.0.1", &p1]).contains("OK"));
        until("R0's copy", || {
            r0.cli(&["INFO", "replication"])
                .contains("master_link_status:up")
                && !r0.keys("qcache:e:*").is_empty()
        })
        .await;
        assert!(r0.cli(&["REPLICAOF", "NO", "ONE"]).contains("OK"));
        let run_id = |r: &Redis| {
            r.cli(&["INFO", "server"])
                .lines()
                .find_map(|l| l.strip_prefix("run_id:").map(str::to_string))
                .unwrap()
        };
        let r1_id = run_id(&r1);
        ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // R1 goes back to R0's copy, and is promoted again.
        assert!(r1.cli(&["REPLICAOF", "127.0.0.1", &p0]).contains("OK"));
        until("R1 resynced from R0", || {
            r1.cli(&["INFO", "replication"])
                .contains("master_link_status:up")
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(r1.cli(&["REPLICAOF", "NO", "ONE"]).contains("OK"));
        assert_eq!(run_id(&r1), r1_id, "the same server");
        assert!(!r1.keys("qcache:e:*").is_empty(), "the old entry is back");
        tokio::time::sleep(Duration::from_millis(500)).await;
        wait_usable(&a).await;
        wait_usable(&b).await;
        let c = l2_proxy(&r1.url()).await;
        let mut cc = c.conn(&schema).await;
        let direct = read_v(&mut common::direct_to(&schema).await).await;
        assert_eq!(direct, 1);
        let mut got = Vec::new();
        for (who, conn) in [("A (the writer)", &mut ca), ("B", &mut cb), ("C", &mut cc)] {
            for _ in 0..2 {
                got.push((who, read_v(conn).await));
            }
        }
        println!("{got:?}");
        for (who, v) in got {
            assert_eq!(v, direct, "{who} served the pre-write row");
        }
    }
}
