//! Privileges are part of the answer: the same multi-session steps run directly and through
//! qcache must give the same rows and errors when grants, roles and accounts change between
//! them (issue #17, section 4). Each scenario runs twice on the same server, with its own
//! user names per run.

mod common;

use mysql_async::prelude::*;

use common::steps::{assert_same, run, Step};

/// Runs `steps` directly and through a fresh qcache (tweaked), and compares step by step.
async fn differential(
    prefix: &str,
    steps: &[Step],
    tweak: impl FnOnce(&mut qcache::config::Config),
) {
    let schema = common::fresh_schema(prefix).await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE t (a INT, b INT)").await.unwrap();
    d.query_drop("INSERT INTO t VALUES (1, 10), (2, 20)")
        .await
        .unwrap();
    let want = run(&schema, steps, None).await;
    let proxy = common::proxy(tweak).await;
    let got = run(&schema, steps, Some(&proxy)).await;
    assert_same(steps, &want, &got);
    // The same answers prove nothing if none came from the cache.
    let hits = proxy.running.shared.cache.stats().hits();
    println!("{prefix}: {hits} hits");
    assert!(hits > 0, "{prefix}: no step was served from the cache");
    proxy.shutdown().await;
}

const SETUP_ALICE: &[Step] = &[
    ("!root", "CREATE USER alice{u}@'%' IDENTIFIED BY 'pw'"),
    ("!root", "GRANT SELECT ON {db}.t TO alice{u}@'%'"),
];

fn with_setup(steps: &[Step]) -> Vec<Step> {
    let mut v = SETUP_ALICE.to_vec();
    v.extend_from_slice(steps);
    v.push(("!root", "DROP USER IF EXISTS alice{u}@'%'"));
    v
}

#[tokio::test]
async fn a_table_revoke_through_qcache_is_honoured() {
    let steps = with_setup(&[
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "REVOKE SELECT ON {db}.t FROM alice{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "GRANT SELECT (a) ON {db}.t TO alice{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "REVOKE SELECT (a) ON {db}.t FROM alice{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
    ]);
    differential("pv_table", &steps, |_| {}).await;
}

#[tokio::test]
async fn a_global_revoke_keeps_old_sessions_apart_from_new_ones() {
    let steps = vec![
        ("!root", "CREATE USER alice{u}@'%' IDENTIFIED BY 'pw'"),
        ("!root", "GRANT SELECT ON *.* TO alice{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "REVOKE SELECT ON *.* FROM alice{u}@'%'"),
        // The server keeps the old session's global privileges; a new session has none.
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("b:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("b:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        // SET ROLE recomputes them.
        ("a:alice{u}", "SET ROLE NONE"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("!root", "DROP USER IF EXISTS alice{u}@'%'"),
    ];
    differential("pv_global", &steps, |_| {}).await;
}

#[tokio::test]
async fn roles_are_part_of_the_key() {
    let steps = vec![
        ("!root", "CREATE USER alice{u}@'%' IDENTIFIED BY 'pw'"),
        ("!root", "CREATE ROLE r{u}"),
        ("!root", "GRANT SELECT ON {db}.t TO r{u}"),
        ("!root", "GRANT r{u} TO alice{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SET ROLE r{u}"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("b:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SET ROLE NONE"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        // A default role applies at connect.
        ("root", "SET DEFAULT ROLE r{u} FOR alice{u}@'%'"),
        ("c:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("c:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        // A change to the role reaches its holders.
        ("root", "REVOKE SELECT ON {db}.t FROM r{u}"),
        ("c:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("!root", "DROP USER IF EXISTS alice{u}@'%'"),
        ("!root", "DROP ROLE IF EXISTS r{u}"),
    ];
    differential("pv_roles", &steps, |_| {}).await;
}

#[tokio::test]
async fn grant_table_edits_count_at_flush_privileges() {
    let steps = with_setup(&[
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        (
            "root",
            "DELETE FROM mysql.tables_priv WHERE User = 'alice{u}'",
        ),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "FLUSH PRIVILEGES"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
    ]);
    differential("pv_tables", &steps, |_| {}).await;
}

#[tokio::test]
async fn users_that_share_entries_still_lose_them_on_revoke() {
    let steps = vec![
        ("!root", "CREATE USER alice{u}@'%' IDENTIFIED BY 'pw'"),
        ("!root", "CREATE USER bob{u}@'%' IDENTIFIED BY 'pw'"),
        ("!root", "GRANT SELECT ON {db}.t TO alice{u}@'%'"),
        ("!root", "GRANT SELECT ON {db}.t TO bob{u}@'%'"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("b:bob{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("root", "REVOKE SELECT ON {db}.t FROM bob{u}@'%'"),
        ("b:bob{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("!root", "DROP USER IF EXISTS alice{u}@'%'"),
        ("!root", "DROP USER IF EXISTS bob{u}@'%'"),
    ];
    differential("pv_shared", &steps, |c| c.cache.shared_between_users = true).await;
}

/// A REVOKE made straight to the server reaches qcache through the binlog.
#[tokio::test]
async fn a_revoke_from_elsewhere_is_seen_on_the_binlog() {
    let steps = with_setup(&[
        // The setup's own statements come back on the binlog; one that arrives after
        // alice's first read invalidates its entry, and a loaded CI run then saw no hit.
        ("root", "sleep 1000"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
        ("!root", "REVOKE SELECT ON {db}.t FROM alice{u}@'%'"),
        ("root", "sleep 1000"),
        ("a:alice{u}", "SELECT a FROM {db}.t ORDER BY a"),
    ]);
    differential("pv_binlog", &steps, |c| {
        c.invalidation.binlog = qcache::config::BinlogMode::On;
    })
    .await;
}
