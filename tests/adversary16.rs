//! Adversarial round 16 (issue #35 class 9, L2 going back in time): a fleet of qcache
//! instances sharing one private redis-server whose data goes back (a dump reloaded in the
//! same process) in ways the identity, the marker and the raise counter must still catch,
//! judged against the server's truth; and the false-positive side: ordinary writes from
//! several instances never take L2 down nor count a rollback.

mod common;

use std::time::{Duration, Instant};

use common::l2::{stat, wait_for, wait_up};
use common::redis::Redis;
use common::TestProxy;
use mysql_async::prelude::Queryable;
use qcache::config::{Config, ValidateHits};

const LAG_BOUND: Duration = Duration::from_secs(2);

async fn proxy(url: &str) -> TestProxy {
    proxy_with(url, ValidateHits::Local).await
}

/// An instance on `url`, its hits validated as `validate` says.
async fn proxy_with(url: &str, validate: ValidateHits) -> TestProxy {
    common::l2::proxy(url, |c: &mut Config| c.l2.validate_hits = validate).await
}

async fn setup(prefix: &str) -> String {
    let schema = common::fresh_schema(prefix).await;
    let mut c = common::direct_to(&schema).await;
    for sql in [
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)",
        "INSERT INTO t VALUES (1, 0)",
        "CREATE TABLE u (id INT PRIMARY KEY, v INT NOT NULL)",
        "INSERT INTO u VALUES (1, 0)",
    ] {
        c.query_drop(sql).await.unwrap();
    }
    schema
}

async fn read_v(c: &mut mysql_async::Conn, table: &str) -> i64 {
    c.query_first::<i64, _>(format!("SELECT v FROM {table} WHERE id = 1"))
        .await
        .expect("read through qcache")
        .expect("a row")
}

/// B fills t's entry into L2, A reads it from there, then the dump is taken (`save`, which
/// may do more around the SAVE) and A writes t; both instances see the write's raise.
async fn filled_saved_then_written(
    redis: &Redis,
    schema: &str,
    a: &TestProxy,
    b: &TestProxy,
    save: impl FnOnce(),
) -> (mysql_async::Conn, mysql_async::Conn) {
    let mut ca = a.conn(schema).await;
    let mut cb = b.conn(schema).await;
    assert_eq!(read_v(&mut cb, "t").await, 0);
    wait_for("B's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    assert_eq!(read_v(&mut ca, "t").await, 0);
    save();
    let raised = stat(a, "Qcache_l2_bumps");
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    wait_for("A's raise", LAG_BOUND, || {
        stat(a, "Qcache_l2_bumps") > raised
    })
    .await;
    // B's pings read the counter A's raise moved.
    tokio::time::sleep(Duration::from_millis(600)).await;
    (ca, cb)
}

/// Every instance (and a new one) must read t as the server has it now.
async fn nobody_serves_the_old_row(
    redis: &Redis,
    schema: &str,
    who: [(&str, &mut mysql_async::Conn); 2],
) {
    let c = proxy(&redis.url()).await;
    let mut cc = c.conn(schema).await;
    let direct = read_v(&mut common::direct_to(schema).await, "t").await;
    assert_eq!(direct, 1);
    let [(na, ca), (nb, cb)] = who;
    for (name, conn) in [(na, ca), (nb, cb), ("C (new)", &mut cc)] {
        for _ in 0..2 {
            assert_eq!(
                read_v(conn, "t").await,
                direct,
                "{name} served the row from before the acknowledged write"
            );
        }
    }
}

/// The marker deleted by hand (`DEL qcache:epoch:`) and a dump taken before a ping writes it
/// back: the dump holds t's entry and versions but no marker. After A's write, the same
/// process reloads that dump (`DEBUG RELOAD NOSAVE`: same run_id and master_replid). A, the
/// only instance following this server, finds no marker: `Adoption::Mark`, taken for an
/// emptied server, only writes the marker again (and takes the lower count for its own),
/// although the data went back and still vouches for t's entry from before A's write. (With
/// a second instance, whichever pings after the first re-marked sees the marker with a low
/// count and catches it; both may also ping before either re-marks.) A new instance then
/// adopts the data as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_marker_deleted_then_an_older_dump_reloaded() {
    let redis = Redis::start_fresh(|_| vec!["--enable-debug-command".into(), "yes".into()]);
    let schema = setup("adv16_mark").await;
    let a = proxy(&redis.url()).await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v(&mut ca, "t").await, 0);
    wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    redis.cli(&["DEL", "qcache:epoch:"]);
    assert!(redis.cli(&["SAVE"]).contains("OK"));
    wait_for("the marker written again", LAG_BOUND, || {
        !redis.cli(&["GET", "qcache:epoch:"]).trim().is_empty()
    })
    .await;
    let raised = stat(&a, "Qcache_l2_bumps");
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    wait_for("A's raise", LAG_BOUND, || {
        stat(&a, "Qcache_l2_bumps") > raised
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(redis.cli(&["DEBUG", "RELOAD", "NOSAVE"]).contains("OK"));
    assert!(
        !redis.keys("qcache:e:*").is_empty(),
        "the old entry is back from the dump"
    );
    assert!(
        redis.cli(&["GET", "qcache:epoch:"]).trim().is_empty(),
        "the dump holds no marker"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    wait_up(&a).await;
    let c = proxy(&redis.url()).await;
    let mut cc = c.conn(&schema).await;
    let direct = read_v(&mut common::direct_to(&schema).await, "t").await;
    assert_eq!(direct, 1);
    for (name, conn) in [("A (the writer)", &mut ca), ("C (new)", &mut cc)] {
        for _ in 0..2 {
            assert_eq!(
                read_v(conn, "t").await,
                direct,
                "{name} served the row from before the acknowledged write"
            );
        }
    }
}

/// A dump from before A's write to t reloaded in the same process, then, before any ping
/// reads the counter, writes to another table u raise it again: as many raises as the
/// reload lost, or more, and the count is back at (or past) what the instances saw. Each
/// INCR answers a value above every one seen before unless the counter went back, so a
/// raise answered with a count at or below the seen one is itself the evidence; t's
/// version is still the one from before A's write, and its old entry is vouched for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_older_dump_reloaded_then_raises_catch_up_before_a_ping() {
    let redis = Redis::start_fresh(|_| vec!["--enable-debug-command".into(), "yes".into()]);
    let schema = setup("adv16_catchup").await;
    let a = proxy(&redis.url()).await;
    let b = proxy(&redis.url()).await;
    let (mut ca, mut cb) = filled_saved_then_written(&redis, &schema, &a, &b, || {
        assert!(redis.cli(&["SAVE"]).contains("OK"));
    })
    .await;
    assert!(redis.cli(&["DEBUG", "RELOAD", "NOSAVE"]).contains("OK"));
    // At once, within the ping interval: several writes to u through A.
    for i in 1..=6 {
        ca.query_drop(format!("UPDATE u SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    wait_up(&a).await;
    wait_up(&b).await;
    nobody_serves_the_old_row(
        &redis,
        &schema,
        [("A (the writer)", &mut ca), ("B", &mut cb)],
    )
    .await;
}

/// The false-positive side: three instances (hits validated against L2, so that a read right
/// after another instance's write is fresh) writing and reading t and u for a few seconds,
/// each write through another instance, while the pings check the identity, the marker and
/// the counter: L2 never goes down and no rollback is counted, and every read is fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_ordinary_writes_from_several_instances_are_no_rollback() {
    let redis = Redis::start();
    let schema = setup("adv16_quiet").await;
    let strict = ValidateHits::Remote;
    let ps = [
        proxy_with(&redis.url(), strict).await,
        proxy_with(&redis.url(), strict).await,
        proxy_with(&redis.url(), strict).await,
    ];
    let mut conns = Vec::new();
    for p in &ps {
        conns.push(p.conn(&schema).await);
    }
    // The first instance on a fresh Redis adopts it (counted as a rollback): from here on.
    let base: Vec<(u64, u64)> = ps
        .iter()
        .map(|p| (stat(p, "Qcache_l2_downs"), stat(p, "Qcache_l2_rollbacks")))
        .collect();
    let until = Instant::now() + Duration::from_secs(4);
    let mut i = 0i64;
    while Instant::now() < until {
        i += 1;
        let table = if i % 2 == 0 { "t" } else { "u" };
        let w = (i % 3) as usize;
        conns[w]
            .query_drop(format!("UPDATE {table} SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        for (n, c) in conns.iter_mut().enumerate() {
            assert_eq!(read_v(c, table).await, i, "instance {n} read a stale row");
        }
    }
    assert!(i > 10, "only {i} writes in the window");
    for (n, (p, (downs, rollbacks))) in ps.iter().zip(base).enumerate() {
        assert_eq!(
            stat(p, "Qcache_l2_downs"),
            downs,
            "instance {n}: L2 marked down"
        );
        assert_eq!(
            stat(p, "Qcache_l2_rollbacks"),
            rollbacks,
            "instance {n}: a rollback"
        );
    }
}

/// FLUSHALL, then a dump from before A's write reloaded in the same process. The FLUSHALL is
/// `Adoption::Mark` for the instances that followed the server: they re-mark it and take
/// its restarted count (near 0) as what they saw. The dump then brings back the marker (the
/// same identity), t's old version and entry, and a count above that (30 raises of u before
/// the dump): nothing compared says the data went back, and the pre-write row is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_flushall_then_an_older_dump_reloaded() {
    let redis = Redis::start_fresh(|_| vec!["--enable-debug-command".into(), "yes".into()]);
    let schema = setup("adv16_flushreload").await;
    let a = proxy(&redis.url()).await;
    let b = proxy(&redis.url()).await;
    // A fleet that has raised for a while: the dump's count is well above what a FLUSHALL
    // and a few raises after it count again.
    let mut cw = a.conn(&schema).await;
    for i in 1..=30 {
        cw.query_drop(format!("UPDATE u SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
    }
    let (mut ca, mut cb) = filled_saved_then_written(&redis, &schema, &a, &b, || {
        assert!(redis.cli(&["SAVE"]).contains("OK"));
    })
    .await;
    redis.cli(&["FLUSHALL"]);
    wait_for("the marker written again", LAG_BOUND, || {
        !redis.cli(&["GET", "qcache:epoch:"]).trim().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(redis.cli(&["DEBUG", "RELOAD", "NOSAVE"]).contains("OK"));
    assert!(
        !redis.keys("qcache:e:*").is_empty(),
        "the old entry is back from the dump"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    wait_up(&a).await;
    wait_up(&b).await;
    nobody_serves_the_old_row(
        &redis,
        &schema,
        [("A (the writer)", &mut ca), ("B", &mut cb)],
    )
    .await;
}
