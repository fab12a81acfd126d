//! Rules with `max_stale` (stale-while-revalidate) and `cache_empty = false` through the real
//! proxy against the private mariadbd (issue #37 part 2): an outdated entry is served to
//! other sessions while one session refreshes it, within max_stale, after a change of rows
//! only, never to the writer, in a transaction, after DDL or without the option; and a rule
//! may keep empty results out of the cache.

mod common;
use common::setup;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

/// A read slow enough (a three-way cross join of `big`) that a refresh holds its fill claim
/// for a while, showing `t.v`.
const Q: &str =
    "SELECT t.v, COUNT(*) AS n FROM t, big b1, big b2, big b3 WHERE t.id = 1 GROUP BY t.v";

struct Fixture {
    proxy: common::TestProxy,
    schema: String,
}

/// A schema with `t` (one row, v = 1) and `big` (150 rows), and a proxy whose binlog tail
/// runs and whose one rule for `t` has `options` (TOML lines).
async fn fixture(prefix: &str, options: &str) -> Fixture {
    let schema = common::fresh_schema(prefix).await;
    let values: Vec<String> = (0..150).map(|i| format!("({i})")).collect();
    let insert = format!("INSERT INTO big VALUES {}", values.join(","));
    setup(
        &schema,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO t VALUES (1, 1)",
            "CREATE TABLE big (n INT)",
            &insert,
            "CREATE TABLE e (id INT PRIMARY KEY, v INT)",
            "INSERT INTO e VALUES (1, 1)",
        ],
    )
    .await;
    let rules = qcache::config::Config::from_toml(
        &format!(
            "[[rules]]\nschema = \"{schema}\"\ntable = \"t\"\naction = \"cache\"\n{options}\n\
             [[rules]]\nschema = \"{schema}\"\ntable = \"e\"\naction = \"cache\"\n{options}\n"
        ),
        "rules",
    )
    .expect("rules parse")
    .rules;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let proxy = common::proxy(|c| {
        c.rules = rules;
        c.invalidation.binlog = qcache::config::BinlogMode::On;
        c.invalidation.server_id =
            3_000_000 + (std::process::id() % 10_000) * 10 + NEXT.fetch_add(1, Ordering::Relaxed);
    })
    .await;
    let tail = proxy
        .running
        .shared
        .binlog
        .clone()
        .expect("binlog tail configured");
    assert!(
        tail.wait_until_connected(Duration::from_secs(20)).await,
        "binlog stream did not connect"
    );
    Fixture { proxy, schema }
}

impl Fixture {
    async fn conn(&self) -> Conn {
        self.proxy.conn(&self.schema).await
    }

    /// Waits until the binlog tail has outdated every entry reading `t`.
    async fn until_outdated(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let entries = self.proxy.running.shared.cache.entries();
            let on_t: Vec<_> = entries
                .iter()
                .filter(|e| e.tables.iter().any(|t| t.ends_with(".t")))
                .collect();
            if !on_t.is_empty() && on_t.iter().all(|e| !e.current) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "binlog did not outdate the entry"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts a session reading `q` (it finds the entry outdated and refreshes it) and
    /// returns once it holds the fill claim.
    /// `prepared`: it executes `q` as a prepared statement (the binary protocol's key).
    async fn refresh_in_background(
        &self,
        q: &'static str,
        prepared: bool,
    ) -> tokio::task::JoinHandle<(i64, Duration)> {
        let mut c = self.conn().await;
        let cache = self.proxy.running.shared.cache.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let v = if prepared {
                v_prepared(&mut c, q).await
            } else {
                v_of(&mut c, q).await
            };
            (v, started.elapsed())
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while cache.fills_in_flight() == 0 {
            assert!(Instant::now() < deadline, "no refresh started");
            assert!(!task.is_finished(), "the refresh ended before it was seen");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        task
    }
}

async fn v_of(c: &mut Conn, q: &str) -> i64 {
    let row: Option<(i64, i64)> = c
        .query_first(q)
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"));
    row.expect("one row").0
}

async fn v_prepared(c: &mut Conn, q: &str) -> i64 {
    let row: Option<(i64, i64)> = c
        .exec_first(q, ())
        .await
        .unwrap_or_else(|e| panic!("{q}: {e}"));
    row.expect("one row").0
}

/// A `SHOW QCACHE STATUS` value; 0 when not reported (per-reason rows appear once counted).
async fn status(c: &mut Conn, name: &str) -> u64 {
    let rows: Vec<(String, String)> = c.query("SHOW QCACHE STATUS").await.unwrap();
    rows.iter()
        .find(|r| r.0 == name)
        .map_or(0, |r| r.1.parse().unwrap())
}

async fn direct(schema: &str, sql: &str) {
    setup(schema, &[sql]).await;
}

/// The main case: after a direct write seen through the binlog, a session reading while
/// another refreshes is served the old result at once; the refresh stores the new one.
#[tokio::test]
async fn stale_is_served_while_one_session_refreshes_and_the_refresh_replaces_it() {
    let f = fixture("stale_main", "max_stale = \"20s\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    let hits = status(&mut c, "Qcache_hits").await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    assert_eq!(status(&mut c, "Qcache_hits").await, hits + 1, "cached");

    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    let served = status(&mut c, "Qcache_stale_served").await;
    let refresh = f.refresh_in_background(Q, false).await;
    let started = Instant::now();
    assert_eq!(v_of(&mut c, Q).await, 1, "served stale while refreshing");
    let stale_took = started.elapsed();
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served + 1);
    let (fresh, refresh_took) = refresh.await.unwrap();
    assert_eq!(fresh, 2, "the refreshing session reads the server");
    assert!(
        stale_took < refresh_took,
        "stale answer {stale_took:?} did not wait for the refresh {refresh_took:?}"
    );
    // The refresh replaced the entry: a plain hit of the new value.
    let hits = status(&mut c, "Qcache_hits").await;
    assert_eq!(v_of(&mut c, Q).await, 2);
    assert_eq!(status(&mut c, "Qcache_hits").await, hits + 1);
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served + 1);

    // Visible in the digests.
    let rows: Vec<mysql_async::Row> = c
        .query("SHOW QCACHE DIGESTS ORDER BY calls DESC")
        .await
        .unwrap();
    let stale_hits: u64 = rows
        .iter()
        .map(|r| r.get::<Option<u64>, _>("stale_hits").flatten().unwrap_or(0))
        .sum();
    assert_eq!(stale_hits, 1, "digests count the stale hit");
}

/// `QCACHE EXPLAIN` says an outdated entry would be served stale, with its age, or why not.
#[tokio::test]
async fn explain_says_stale_and_why() {
    let f = fixture("stale_explain", "max_stale = \"20s\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    let rows = explain(&mut c).await;
    let stale = rows
        .iter()
        .find(|r| r.0 == "stale")
        .and_then(|r| r.1.clone());
    let stale = stale.unwrap_or_else(|| panic!("no stale row: {rows:?}"));
    assert!(
        stale.contains("not served stale: no refresh in flight"),
        "{stale}"
    );
    let refresh = f.refresh_in_background(Q, false).await;
    let rows = explain(&mut c).await;
    let stale = rows
        .iter()
        .find(|r| r.0 == "stale")
        .and_then(|r| r.1.clone());
    let stale = stale.unwrap_or_else(|| panic!("no stale row: {rows:?}"));
    assert!(stale.starts_with("served stale: age"), "{stale}");
    assert!(
        rows.iter()
            .any(|r| r.0 == "decision" && r.1.as_deref() == Some("hit (stale)")),
        "{rows:?}"
    );
    refresh.await.unwrap();
}

/// EXPLAIN asks about an outdated entry where the miss does, after the plan: when the plan
/// refuses the read (here a reload made the rule for `t` "never"), the read is relayed and
/// gets the new row, so EXPLAIN must say "send", not "hit (stale)", though a refresh is in
/// flight within `max_stale`.
#[tokio::test]
async fn explain_asks_about_stale_entries_only_where_the_miss_does() {
    let f = fixture("stale_explain_plan", "max_stale = \"20s\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    let refresh = f.refresh_in_background(Q, false).await;
    let shared = &f.proxy.running.shared;
    let mut cfg = (*shared.config()).clone();
    cfg.rules = qcache::config::Config::from_toml(
        &format!(
            "[[rules]]\nschema = \"{}\"\ntable = \"t\"\naction = \"never\"\n",
            f.schema
        ),
        "rules",
    )
    .expect("rules parse")
    .rules;
    shared.swap_config(cfg);
    let rows = explain(&mut c).await;
    let decision = rows
        .iter()
        .find(|r| r.0 == "decision")
        .and_then(|r| r.1.clone());
    let reason = rows
        .iter()
        .find(|r| r.0 == "reason")
        .and_then(|r| r.1.clone());
    let served = status(&mut c, "Qcache_stale_served").await;
    let v = v_of(&mut c, Q).await;
    assert_eq!(v, 2, "the read is relayed under the new rule");
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
    assert_eq!(
        (decision.as_deref(), reason.as_deref()),
        (Some("send"), Some("rule")),
        "EXPLAIN disagrees with the read: {rows:?}"
    );
    refresh.await.unwrap();
}

async fn explain(c: &mut Conn) -> Vec<(String, Option<String>)> {
    c.query(format!("QCACHE EXPLAIN {Q}")).await.unwrap()
}

/// Past max_stale an outdated entry is never served: the read waits for the refresh (or
/// makes its own) and gets the new value.
#[tokio::test]
async fn never_served_after_max_stale() {
    let f = fixture("stale_old", "max_stale = \"300ms\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let served = status(&mut c, "Qcache_stale_served").await;
    // A refresh in flight, and still the entry is too old to be served: this read waits
    // for the refresh and gets the new value.
    let refresh = f.refresh_in_background(Q, false).await;
    let mut other = f.conn().await;
    assert_eq!(v_of(&mut other, Q).await, 2);
    assert_eq!(refresh.await.unwrap().0, 2);
    assert_eq!(v_of(&mut c, Q).await, 2);
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
}

/// Read-your-own-writes: the session that wrote the table (through qcache) is never served
/// the outdated entry, text or prepared; another session is.
#[tokio::test]
async fn never_to_the_writing_session_text_and_prepared() {
    let f = fixture("stale_own", "max_stale = \"20s\"").await;
    let mut writer = f.conn().await;
    let mut other = f.conn().await;
    assert_eq!(v_of(&mut writer, Q).await, 1);
    assert_eq!(v_prepared(&mut writer, Q).await, 1);
    writer
        .query_drop("UPDATE t SET v = 3 WHERE id = 1")
        .await
        .unwrap();
    let served = status(&mut writer, "Qcache_stale_served").await;
    for prepared in [false, true] {
        let refresh = f.refresh_in_background(Q, prepared).await;
        let v = if prepared {
            v_prepared(&mut writer, Q).await
        } else {
            v_of(&mut writer, Q).await
        };
        assert_eq!(v, 3, "the writer reads its write (prepared: {prepared})");
        refresh.await.unwrap();
    }
    assert_eq!(status(&mut writer, "Qcache_stale_served").await, served);
    // The contrast: another session is served stale after a write it did not make.
    writer
        .query_drop("UPDATE t SET v = 4 WHERE id = 1")
        .await
        .unwrap();
    let refresh = f.refresh_in_background(Q, false).await;
    assert_eq!(v_of(&mut other, Q).await, 3, "another session: stale");
    assert_eq!(status(&mut other, "Qcache_stale_served").await, served + 1);
    assert_eq!(refresh.await.unwrap().0, 4);
}

/// Never inside a transaction.
#[tokio::test]
async fn never_in_a_transaction() {
    let f = fixture("stale_txn", "max_stale = \"20s\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    let served = status(&mut c, "Qcache_stale_served").await;
    let refresh = f.refresh_in_background(Q, false).await;
    c.query_drop("START TRANSACTION").await.unwrap();
    assert_eq!(v_of(&mut c, Q).await, 2, "a transaction reads the server");
    assert_eq!(v_of(&mut c, Q).await, 2);
    c.query_drop("COMMIT").await.unwrap();
    refresh.await.unwrap();
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
}

/// Never after DDL on the table (seen in the binlog), even with a change of rows beside it.
#[tokio::test]
async fn never_after_ddl() {
    let f = fixture("stale_ddl", "max_stale = \"20s\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    direct(
        &f.schema,
        "ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 0",
    )
    .await;
    f.until_outdated().await;
    // The catalog's own reload after the DDL runs beside the tail: let it land.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let served = status(&mut c, "Qcache_stale_served").await;
    let refresh = f.refresh_in_background(Q, false).await;
    let mut other = f.conn().await;
    assert_eq!(v_of(&mut other, Q).await, 2, "not served stale after DDL");
    refresh.await.unwrap();
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
}

/// `Q` with a trailing tag a rule's regex can match; the key leaves such a comment out
/// (`analysis::key_text`), so both texts read one entry.
const Q_TAGGED: &str = "SELECT t.v, COUNT(*) AS n FROM t, big b1, big b2, big b3 WHERE t.id = 1 \
                        GROUP BY t.v /* stale-ok */";

/// `max_stale` relaxes only the reads its rule matches: a read whose own text the rule does
/// not match (a regex on a trailing tag, which the key leaves out) shares the entry a
/// matching read stored, but never opted in. It was served the outdated entry (the
/// entry's rule decided); it must read the server's (the reader's rule decides too).
#[tokio::test]
async fn only_to_reads_their_rule_matches() {
    let f = fixture("stale_regex", "max_stale = \"20s\"\nregex = \"stale-ok\"").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q_TAGGED).await, 1);
    let hits = status(&mut c, "Qcache_hits").await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    assert_eq!(
        status(&mut c, "Qcache_hits").await,
        hits + 1,
        "one entry: a current hit for both texts"
    );
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    f.until_outdated().await;
    let served = status(&mut c, "Qcache_stale_served").await;
    let refresh = f.refresh_in_background(Q_TAGGED, false).await;
    assert_eq!(
        v_of(&mut c, Q).await,
        2,
        "not opted in: the server's answer"
    );
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
    assert_eq!(refresh.await.unwrap().0, 2);
    // A matching read is still served stale from an entry a matching read stored.
    direct(&f.schema, "UPDATE t SET v = 3 WHERE id = 1").await;
    f.until_outdated().await;
    assert_eq!(
        v_of(&mut c, Q_TAGGED).await,
        3,
        "nobody refreshing: it refreshes"
    );
    direct(&f.schema, "UPDATE t SET v = 4 WHERE id = 1").await;
    f.until_outdated().await;
    let refresh = f.refresh_in_background(Q_TAGGED, false).await;
    assert_eq!(v_of(&mut c, Q_TAGGED).await, 3, "opted in: served stale");
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served + 1);
    assert_eq!(refresh.await.unwrap().0, 4);
}

/// Off by default: a rule without max_stale never serves an outdated entry.
#[tokio::test]
async fn not_when_max_stale_is_unset() {
    let f = fixture("stale_off", "").await;
    let mut c = f.conn().await;
    assert_eq!(v_of(&mut c, Q).await, 1);
    direct(&f.schema, "UPDATE t SET v = 2 WHERE id = 1").await;
    // Without max_stale the entry is dropped when found outdated, so wait for the bump
    // through the versions rather than the listing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let served = status(&mut c, "Qcache_stale_served").await;
    let refresh = f.refresh_in_background(Q, false).await;
    let mut other = f.conn().await;
    assert_eq!(v_of(&mut other, Q).await, 2);
    refresh.await.unwrap();
    assert_eq!(status(&mut c, "Qcache_stale_served").await, served);
}

/// `cache_empty = false`: a result of no rows is not stored (text and prepared); one with
/// rows is.
#[tokio::test]
async fn cache_empty_false_stores_no_empty_result() {
    let f = fixture("stale_empty", "cache_empty = false").await;
    let mut c = f.conn().await;
    let empty = "SELECT id, v FROM e WHERE id = 99";
    let full = "SELECT id, v FROM e WHERE id = 1";
    let refused = status(&mut c, "Qcache_not_cached_empty_result").await;
    let inserts = status(&mut c, "Qcache_inserts").await;
    for _ in 0..2 {
        let r: Vec<(i64, i64)> = c.query(empty).await.unwrap();
        assert!(r.is_empty());
        let r: Vec<(i64, i64)> = c.exec(empty, ()).await.unwrap();
        assert!(r.is_empty());
    }
    let all: Vec<(String, String)> = c.query("SHOW QCACHE STATUS").await.unwrap();
    assert_eq!(
        status(&mut c, "Qcache_not_cached_empty_result").await,
        refused + 4,
        "{all:?}"
    );
    assert_eq!(status(&mut c, "Qcache_inserts").await, inserts);
    let hits = status(&mut c, "Qcache_hits").await;
    for _ in 0..2 {
        let r: Vec<(i64, i64)> = c.query(full).await.unwrap();
        assert_eq!(r, vec![(1, 1)]);
        let r: Vec<(i64, i64)> = c.exec(full, ()).await.unwrap();
        assert_eq!(r, vec![(1, 1)]);
    }
    assert_eq!(status(&mut c, "Qcache_inserts").await, inserts + 2);
    assert_eq!(status(&mut c, "Qcache_hits").await, hits + 2);
}
