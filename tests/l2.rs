//! The shared second level (L2) in Redis: several qcache instances on one private MariaDB and
//! one private redis-server per test. Writes through one instance, direct writes, the fill
//! race, and Redis killed, restarted, stalled, flushed or answering garbage.

mod common;

use std::time::{Duration, Instant};

use common::redis::Redis;
use common::TestProxy;
use mysql_async::prelude::Queryable;
use qcache::config::{BinlogMode, Config, Granularity, L2Url, ValidateHits};
use qcache::faults::Fault;
use qcache::l2::L2;

/// How long a write from elsewhere may take to show through another instance in these tests.
/// Measured lags are below a few milliseconds; the margin is for a machine busy compiling.
const LAG_BOUND: Duration = Duration::from_secs(2);

use common::l2::{on as l2_on, proxy, stat, wait_for, wait_up};

fn l2(p: &TestProxy) -> &L2 {
    common::l2::of(p)
}

async fn setup(prefix: &str, rows: i64) -> String {
    let schema = common::fresh_schema(prefix).await;
    let mut c = common::direct_to(&schema).await;
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
        .await
        .unwrap();
    let values: Vec<String> = (1..=rows).map(|i| format!("({i}, 0)")).collect();
    c.query_drop(format!("INSERT INTO t VALUES {}", values.join(",")))
        .await
        .unwrap();
    schema
}

async fn read_v(c: &mut mysql_async::Conn, id: i64) -> i64 {
    c.query_first::<i64, _>(format!("SELECT v FROM t WHERE id = {id}"))
        .await
        .expect("read through qcache")
        .expect("a row")
}

/// Writes through `a` and reads through each of `readers` right after each OK; returns how
/// many reads were stale.
async fn write_then_read(
    schema: &str,
    a: &TestProxy,
    readers: &[&TestProxy],
    rounds: i64,
) -> usize {
    let mut ca = a.conn(schema).await;
    let mut cs = Vec::new();
    for r in readers {
        cs.push(r.conn(schema).await);
    }
    for c in cs.iter_mut() {
        read_v(c, 1).await;
    }
    let hits = || -> u64 {
        readers
            .iter()
            .map(|r| r.running.shared.cache.stats().hits())
            .sum()
    };
    let hits_before = hits();
    let mut stale = 0;
    for i in 1..=rounds {
        ca.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        for c in cs.iter_mut() {
            // Twice: the first may fill, the second is a hit.
            for _ in 0..2 {
                if read_v(c, 1).await != i {
                    stale += 1;
                }
            }
        }
    }
    // Fresh reads prove nothing if none was served from a cache.
    assert!(
        hits() > hits_before,
        "no read was served from the cache: the freshness check compared the server with itself"
    );
    stale
}

/// The check above catches staleness: two instances with neither L2 nor a binlog tail serve
/// the old row through B after A's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_l2_or_binlog_b_serves_stale_rows() {
    let schema = setup("l2_control", 1).await;
    let a = common::proxy(|_| {}).await;
    let b = common::proxy(|_| {}).await;
    let stale = write_then_read(&schema, &a, &[&b], 10).await;
    assert!(
        stale > 0,
        "the control setup was expected to serve stale rows"
    );
}

/// Strict mode: once A's OK is received, no read through B or C is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_validation_never_stale_after_the_writers_ok() {
    let redis = Redis::start();
    let schema = setup("l2_remote", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(&redis.url(), strict).await;
    let c = proxy(&redis.url(), strict).await;
    let stale = write_then_read(&schema, &a, &[&b, &c], 30).await;
    assert_eq!(stale, 0, "stale reads through B or C after A's OK");
    assert!(stat(&b, "Qcache_l2_remote_checks") > 0);
    assert_eq!(stat(&b, "Qcache_l2_downs"), 0);
    // A version raised in Redis that B was never told of (no notification): B's L1 hit is
    // still refused, and the read answered fresh.
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 30);
    assert_eq!(read_v(&mut cb, 1).await, 30);
    let rejects = stat(&b, "Qcache_l2_remote_rejects");
    // The read is of one row slice: its table's and its slices' versions (not the hash of
    // the unknown-rows version, which INCR cannot raise; the others are enough).
    for k in redis.keys("qcache:v:[tck]:*") {
        redis.cli(&["INCR", &k]);
    }
    assert_eq!(read_v(&mut cb, 1).await, 30);
    assert_eq!(stat(&b, "Qcache_l2_remote_rejects"), rejects + 1);
}

/// Default mode: a write through A is seen through B within the lag (B learns it from the
/// bump channel); the lag is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_validation_fresh_within_the_lag() {
    let redis = Redis::start();
    let schema = setup("l2_local", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let mut lags = Vec::new();
    for i in 1..=20 {
        // B holds the current row in L1.
        read_v(&mut cb, 1).await;
        read_v(&mut cb, 1).await;
        ca.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        let ok = Instant::now();
        while read_v(&mut cb, 1).await != i {
            assert!(
                ok.elapsed() < LAG_BOUND,
                "B still stale after {LAG_BOUND:?}"
            );
        }
        lags.push(ok.elapsed());
    }
    lags.sort();
    println!(
        "write through A -> fresh through B: p50 {:?} max {:?}",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    assert!(stat(&b, "Qcache_l2_notifications") > 0);
}

/// A result filled by B is served to A from L2, and copied into A's L1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_by_one_instance_is_a_hit_for_another() {
    let redis = Redis::start();
    let schema = setup("l2_share", 3).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    let direct: Vec<(i64, i64)> = common::direct_to(&schema)
        .await
        .query("SELECT id, v FROM t ORDER BY id")
        .await
        .unwrap();
    let via_b: Vec<(i64, i64)> = cb.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
    assert_eq!(via_b, direct);
    wait_for("B's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let mut ca = a.conn(&schema).await;
    let via_a: Vec<(i64, i64)> = ca.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
    assert_eq!(via_a, direct);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    // Now in A's L1: the next read does not go to L2.
    let via_a: Vec<(i64, i64)> = ca.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
    assert_eq!(via_a, direct);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    assert!(a.running.shared.cache.stats().hits() >= 1);
    // The same figures through SHOW STATUS and /metrics.
    let rows: Vec<(String, String)> = ca.query("SHOW STATUS LIKE 'Qcache_l2%'").await.unwrap();
    assert!(
        rows.contains(&("Qcache_l2_hits".into(), "1".into())),
        "{rows:?}"
    );
    assert!(
        rows.contains(&("Qcache_l2_up".into(), "1".into())),
        "{rows:?}"
    );
    let (metrics, _) = qcache::admin::metrics::render(&a.running.shared).unwrap();
    for name in [
        "qcache_l2_hits_total 1",
        "qcache_l2_up 1",
        "qcache_l2_stale_rejections_total",
        "qcache_l2_errors_total",
        "qcache_l2_store_bytes_total",
        "qcache_l2_latency_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }
}

/// A write from elsewhere (directly to the server) is seen through A and B within the binlog
/// lag, L2 entries included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_write_fresh_through_every_instance() {
    let redis = Redis::start();
    let schema = setup("l2_direct", 1).await;
    let binlog = |c: &mut Config| c.invalidation.binlog = BinlogMode::On;
    let a = proxy(&redis.url(), binlog).await;
    let b = proxy(&redis.url(), binlog).await;
    for p in [&a, &b] {
        let h = p.running.shared.binlog.clone().unwrap();
        wait_for("binlog tail", Duration::from_secs(20), || h.connected()).await;
    }
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let mut direct = common::direct_to(&schema).await;
    for i in 1..=5 {
        read_v(&mut ca, 1).await;
        read_v(&mut cb, 1).await;
        direct
            .query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        let ok = Instant::now();
        for c in [&mut ca, &mut cb] {
            while read_v(c, 1).await != i {
                assert!(ok.elapsed() < LAG_BOUND, "stale after a direct write");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// The fill race across instances: an entry computed before A's write but stored in L2 after
/// it (as B's slow fill would be) carries the versions read before the write and is never
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_fill_from_before_a_write_is_never_served() {
    let redis = Redis::start();
    let schema = setup("l2_race", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    wait_for("B's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let key = redis.keys("qcache:e:*").remove(0);
    let client = redis::Client::open(redis.url()).unwrap();
    let mut rc = client.get_multiplexed_async_connection().await.unwrap();
    let old: Vec<u8> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut rc)
        .await
        .unwrap();
    let mut ca = a.conn(&schema).await;
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    // B's fill lands now, after the write's OK.
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(&old)
        .query_async(&mut rc)
        .await
        .unwrap();
    // A fresh instance has nothing in L1: only L2 could serve the old row, and must not.
    let c = proxy(&redis.url(), |_| {}).await;
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 1).await, 1);
    assert_eq!(stat(&c, "Qcache_l2_hits"), 0);
    assert_eq!(stat(&c, "Qcache_l2_stale"), 1);
}

/// Versions lost from Redis (evicted, deleted) come back higher than before: entries stamped
/// with the old ones are refused, not served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_versions_never_revive_old_entries() {
    let redis = Redis::start();
    let schema = setup("l2_lostv", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    read_v(&mut ca, 1).await;
    wait_for("A's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    for k in redis.keys("qcache:v:*") {
        redis.cli(&["DEL", &k]);
    }
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(stat(&b, "Qcache_l2_hits"), 0);
    assert_eq!(stat(&b, "Qcache_l2_stale"), 1);
}

/// Values in Redis that are not qcache entries (a lying or corrupted store) are misses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_entries_are_refused() {
    let redis = Redis::start();
    let schema = setup("l2_garbage", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    read_v(&mut ca, 1).await;
    wait_for("A's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    for k in redis.keys("qcache:e:*") {
        redis.cli(&["SET", &k, "QC2E but not really an entry"]);
    }
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(stat(&b, "Qcache_l2_hits"), 0);
    assert!(stat(&b, "Qcache_l2_malformed") >= 1);
    assert_eq!(
        stat(&b, "Qcache_l2_downs"),
        0,
        "a bad value is not an outage"
    );
}

/// Redis killed: no client error, no stale read through the writer, L1 keeps serving and the
/// binlog keeps the other instance fresh; Redis back: the outage and the recovery counted,
/// L2 used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted() {
    let mut redis = Redis::start();
    let schema = setup("l2_kill", 1).await;
    let binlog = |c: &mut Config| c.invalidation.binlog = BinlogMode::On;
    let a = proxy(&redis.url(), binlog).await;
    let b = proxy(&redis.url(), binlog).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    read_v(&mut ca, 1).await;
    read_v(&mut cb, 1).await;
    redis.kill();
    let hits_before = a.running.shared.cache.stats().hits();
    for i in 1..=5 {
        ca.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .expect("writes go on without Redis");
        assert_eq!(read_v(&mut ca, 1).await, i, "stale through the writer");
        assert_eq!(read_v(&mut ca, 1).await, i);
        let ok = Instant::now();
        while read_v(&mut cb, 1).await != i {
            assert!(ok.elapsed() < LAG_BOUND, "B stale beyond the binlog lag");
        }
    }
    assert!(
        a.running.shared.cache.stats().hits() > hits_before,
        "L1 kept serving"
    );
    wait_for("A to see L2 down", LAG_BOUND, || !l2(&a).healthy()).await;
    assert!(stat(&a, "Qcache_l2_downs") >= 1);
    redis.restart();
    wait_up(&a).await;
    wait_up(&b).await;
    assert!(stat(&a, "Qcache_l2_recoveries") >= 1);
    // L2 in use again: B's fill is A's hit. While the instances settle which of them tail
    // the binlog (`l2.binlog_tails`), a tail that restarts may find nobody covered its gap
    // and drop every L2 entry (fail closed), so a fill may be lost: each round reads a new
    // statement, until one of B's fills is A's hit. A session of A's from before the loss
    // keeps its entries its own (a privilege change may have been missed meanwhile:
    // `PrivilegeChange::missed`), so a new one reads.
    let mut cb2 = b.conn(&schema).await;
    let mut ca = a.conn(&schema).await;
    let deadline = Instant::now() + 4 * LAG_BOUND;
    for round in 0.. {
        assert!(Instant::now() < deadline, "L2 never served A a fill of B's");
        let read = format!("SELECT COUNT(*) FROM t WHERE id > -{round}");
        let keys = redis.keys("qcache:e:*").len();
        let n: i64 = cb2.query_first(&read).await.unwrap().unwrap();
        assert_eq!(n, 1);
        wait_for("B's entry", LAG_BOUND, || {
            redis.keys("qcache:e:*").len() > keys
        })
        .await;
        let n: i64 = ca.query_first(&read).await.unwrap().unwrap();
        assert_eq!(n, 1);
        if stat(&a, "Qcache_l2_hits") >= 1 {
            break;
        }
    }
}

/// Redis stalled (SIGSTOP): an L1 hit does not wait for it, a miss and a write wait at most
/// the timeout once, then L2 is bypassed; resumed: recovery counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stalled_is_skipped_not_waited_on() {
    let redis = Redis::start();
    let schema = setup("l2_stall", 3).await;
    let timeout = Duration::from_millis(100);
    let a = proxy(&redis.url(), |c| c.l2.timeout = timeout).await;
    let mut ca = a.conn(&schema).await;
    read_v(&mut ca, 1).await;
    redis.stall();
    let t = Instant::now();
    assert_eq!(read_v(&mut ca, 1).await, 0);
    let hit = t.elapsed();
    let t = Instant::now();
    assert_eq!(read_v(&mut ca, 2).await, 0);
    let miss = t.elapsed();
    let t = Instant::now();
    ca.query_drop("UPDATE t SET v = 7 WHERE id = 1")
        .await
        .unwrap();
    let write = t.elapsed();
    assert_eq!(read_v(&mut ca, 1).await, 7);
    let t = Instant::now();
    assert_eq!(read_v(&mut ca, 3).await, 0);
    let later_miss = t.elapsed();
    println!(
        "stalled Redis: hit {hit:?}, miss {miss:?}, write {write:?}, later miss {later_miss:?}"
    );
    // Generous bounds for a loaded machine; the point is "not the stall's length".
    assert!(
        hit < Duration::from_millis(100),
        "L1 hit waited on Redis: {hit:?}"
    );
    assert!(miss < timeout * 10, "miss waited {miss:?}");
    assert!(write < timeout * 10, "write waited {write:?}");
    assert!(!l2(&a).healthy());
    redis.resume();
    wait_up(&a).await;
    assert!(stat(&a, "Qcache_l2_recoveries") >= 1);
    assert_eq!(read_v(&mut ca, 1).await, 7);
}

/// FLUSHALL (every version and entry gone): nothing stale, nothing failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_flushed_is_harmless() {
    let redis = Redis::start();
    let schema = setup("l2_flush", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(&redis.url(), strict).await;
    assert_eq!(write_then_read(&schema, &a, &[&b], 3).await, 0);
    redis.cli(&["FLUSHALL"]);
    assert_eq!(write_then_read(&schema, &a, &[&b], 5).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_downs"), 0);
}

/// After a FLUSHALL, the first instance to check marks Redis again (`Adoption::Mark`); a
/// writer A that checks after it finds the marker back and the fleet's raise count below the
/// one it saw (`Adoption::InvalidateFleet`, on the server it follows). A's write must still
/// be raised in Redis before its OK: B, strict and healthy, confirms its hits there, and a
/// raise only queued leaves B vouching for the row from before the write. The FLUSHALL and
/// the marker are applied at once here (what A finds when another instance re-marked first),
/// and A's resync, if it goes down, is held (`Fault::HeldL2Recovery`), so that the window,
/// milliseconds otherwise (a flake of `redis_flushed_is_harmless` under load), stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_finding_redis_marked_again_raises_before_its_ok() {
    let redis = Redis::start();
    let schema = setup("l2_remarked", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(&redis.url(), strict).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    // A fleet that has raised a while: after the FLUSHALL, the few raises of whoever adopts
    // first do not bring the count back past what the other saw.
    redis.cli(&["INCRBY", "qcache:raises:", "1000"]);
    // Both instances' checks (every 250 ms) have read it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let faults = &a.running.shared.cache.versions().faults;
    faults.set(Fault::HeldL2Recovery, true);
    let noticed = |p: &TestProxy| stat(p, "Qcache_l2_downs") + stat(p, "Qcache_l2_rollbacks");
    let (a_before, b_before) = (noticed(&a), noticed(&b));
    let identity = qcache::policy::l2::identity(
        &redis.cli(&["INFO", "server"]),
        &redis.cli(&["INFO", "replication"]),
    )
    .expect("the test Redis's identity");
    let time: Vec<u64> = redis
        .cli(&["TIME"])
        .lines()
        .map(|l| l.trim().parse().expect("TIME"))
        .collect();
    let marker = qcache::policy::l2::marker_value(&identity, time[0] * 1_000_000 + time[1]);
    let out = redis.cli_one_connection(&[
        "MULTI",
        "FLUSHALL",
        &format!("SET qcache:epoch: {marker}"),
        "EXEC",
    ]);
    assert!(
        out.lines().filter(|l| l.trim() == "OK").count() >= 3,
        "{out}"
    );
    wait_for("A and B to notice", LAG_BOUND, || {
        noticed(&a) > a_before && noticed(&b) > b_before
    })
    .await;
    wait_up(&b).await;
    // B serves the row from a cache (filled, then a hit checked in Redis).
    let served = || b.running.shared.cache.stats().hits() + stat(&b, "Qcache_l2_hits");
    let deadline = Instant::now() + LAG_BOUND;
    loop {
        let before = served();
        assert_eq!(read_v(&mut cb, 1).await, 1);
        if served() > before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B never served the row from a cache"
        );
    }
    ca.query_drop("UPDATE t SET v = 2 WHERE id = 1")
        .await
        .unwrap();
    let a_up = l2(&a).usable();
    assert_eq!(
        read_v(&mut cb, 1).await,
        2,
        "B served a hit older than A's acknowledged write (A's L2 usable: {a_up}, downs {})",
        stat(&a, "Qcache_l2_downs")
    );
    faults.set(Fault::HeldL2Recovery, false);
    wait_up(&a).await;
    assert_eq!(read_v(&mut cb, 1).await, 2);
    assert_eq!(read_v(&mut ca, 1).await, 2);
}

/// A writer whose L2 connections are lost while Redis stays reachable reconnects at once and
/// resyncs. A write acknowledged while that resync is under way (L2 still down: its OK waits
/// for nothing) must be raised before L2 is read again, by A or by anyone: otherwise A serves
/// the row from before its own write from L2, and B (strict) confirms its hit against a
/// version that never moved. Its bump is queued after the resync took what it raises (A's
/// resync held there, `Fault::HeldL2Recovery`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_acknowledged_during_a_resync_is_raised_before_l2_is_read() {
    let redis = Redis::start();
    let out = redis.cli(&[
        "ACL",
        "SETUSER",
        "qa",
        "on",
        ">qa-pw",
        "~qcache:*",
        "&qcache:*",
        "+@all",
    ]);
    assert!(out.contains("OK"), "{out}");
    let schema = setup("l2_resync", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(
        &format!("redis://qa:qa-pw@127.0.0.1:{}", redis.port),
        |_| {},
    )
    .await;
    let b = proxy(&redis.url(), strict).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(read_v(&mut cb, 1).await, 0);
    let faults = &a.running.shared.cache.versions().faults;
    faults.set(Fault::HeldL2Recovery, true);
    redis.cli(&["CLIENT", "KILL", "USER", "qa"]);
    wait_for("A's L2 down", LAG_BOUND, || !l2(&a).healthy()).await;
    // A reconnects at once (its channel only once L2 is healthy again): its resync reads
    // whose data Redis holds, takes what it must raise, and holds.
    wait_for("A's reconnection", LAG_BOUND, || {
        redis.cli(&["CLIENT", "LIST"]).contains(" user=qa ")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    faults.set(Fault::HeldL2Recovery, false);
    wait_up(&a).await;
    assert_eq!(
        read_v(&mut ca, 1).await,
        1,
        "A served from L2 the row from before its own acknowledged write"
    );
    assert_eq!(
        read_v(&mut cb, 1).await,
        1,
        "B (strict) served a hit older than A's acknowledged write"
    );
}

/// Another server behind the same connection (Redis made a replica of another and promoted
/// again at once: a new `master_replid`, the same process and data): every instance takes L2
/// down and adopts the server at its reconnection. A write through A while A reconnects must
/// wait for its raise (bounded by `l2.timeout`), not be acknowledged with it only queued
/// while B, strict and already back, confirms its hits. A's resync is held
/// (`Fault::HeldL2Recovery`) for less than the timeout: a write acknowledged meanwhile is one
/// whose raise has not landed, and B must not serve the row from before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_while_the_writer_adopts_another_server_waits_for_its_raise() {
    let redis = Redis::start();
    let other = Redis::start();
    let schema = setup("l2_promoted", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(&redis.url(), strict).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let faults = &a.running.shared.cache.versions().faults;
    faults.set(Fault::HeldL2Recovery, true);
    let downs = (stat(&a, "Qcache_l2_downs"), stat(&b, "Qcache_l2_downs"));
    // A replica of another server, promoted again before it synced: a new history.
    let out = redis.cli_one_connection(&[
        &format!("REPLICAOF 127.0.0.1 {}", other.port),
        "REPLICAOF NO ONE",
    ]);
    assert_eq!(out.lines().filter(|l| l.trim() == "OK").count(), 2, "{out}");
    wait_for("A and B to take L2 down", LAG_BOUND, || {
        stat(&a, "Qcache_l2_downs") > downs.0 && stat(&b, "Qcache_l2_downs") > downs.1
    })
    .await;
    wait_up(&b).await;
    // B serves the row from a cache, checked in Redis.
    let served = || b.running.shared.cache.stats().hits() + stat(&b, "Qcache_l2_hits");
    let deadline = Instant::now() + LAG_BOUND;
    loop {
        let before = served();
        assert_eq!(read_v(&mut cb, 1).await, 0);
        if served() > before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B never served the row from a cache"
        );
    }
    let write = tokio::spawn(async move {
        ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
            .await
            .unwrap();
        ca
    });
    // Well within A's `l2.timeout` (500 ms here).
    tokio::time::sleep(Duration::from_millis(150)).await;
    if write.is_finished() {
        assert_eq!(
            read_v(&mut cb, 1).await,
            1,
            "B served a hit older than A's acknowledged write (A's L2 usable: {})",
            l2(&a).usable()
        );
    }
    faults.set(Fault::HeldL2Recovery, false);
    let mut ca = write.await.unwrap();
    assert_eq!(read_v(&mut cb, 1).await, 1);
    wait_up(&a).await;
    assert_eq!(read_v(&mut ca, 1).await, 1);
}

/// Strict mode with one instance cut off from a Redis the writer still reaches (B's user
/// refused and its connections closed; the same holds while B adopts a flushed Redis anew,
/// or after one of its own round trips timed out): A's write is raised in Redis before its
/// OK, but B can neither check its hit there nor hear A's bump (its channel is down too).
/// An L1 entry B filled meanwhile must not be served as if checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_hits_cut_off_from_redis_are_not_served_unchecked() {
    let redis = Redis::start();
    let out = redis.cli(&[
        "ACL",
        "SETUSER",
        "qb",
        "on",
        ">qb-pw",
        "~qcache:*",
        "&qcache:*",
        "+@all",
    ]);
    assert!(out.contains("OK"), "{out}");
    let schema = setup("l2_cutoff", 1).await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(
        &format!("redis://qb:qb-pw@127.0.0.1:{}", redis.port),
        strict,
    )
    .await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let out = redis.cli(&["ACL", "SETUSER", "qb", "off"]);
    assert!(out.contains("OK"), "{out}");
    redis.cli(&["CLIENT", "KILL", "USER", "qb"]);
    wait_for("B's L2 down", LAG_BOUND, || {
        !l2(&b).usable() && !l2(&b).notifications_up()
    })
    .await;
    // Filled from the server while cut off (nothing in L2 to ask), then read again.
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(read_v(&mut cb, 1).await, 0);
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    assert!(l2(&a).usable(), "A's raise landed");
    assert!(!l2(&b).usable(), "B still cut off");
    assert_eq!(
        read_v(&mut cb, 1).await,
        1,
        "B served an L1 entry it could not check after A's acknowledged write"
    );
}

/// A server that speaks no RESP at all: L2 stays down, clients never see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_answering_garbage_is_bypassed() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0
                        || s.write_all(b"\x00\xffnot redis at all\r\n:x\r\n$-7\r\n")
                            .await
                            .is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    let schema = setup("l2_fake", 1).await;
    let a = common::proxy(|c| l2_on(c, &format!("redis://127.0.0.1:{port}"))).await;
    let mut ca = a.conn(&schema).await;
    for i in 1..=3 {
        ca.query_drop(format!("UPDATE t SET v = {i} WHERE id = 1"))
            .await
            .unwrap();
        assert_eq!(read_v(&mut ca, 1).await, i);
        assert_eq!(read_v(&mut ca, 1).await, i);
    }
    assert!(!l2(&a).healthy());
    assert!(
        a.running.shared.cache.stats().hits() >= 3,
        "L1 serves on its own"
    );
}

/// Cross-instance single flight: three instances missing the same slow query at once send
/// it upstream once; the others are served the lease holder's result from L2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_upstream_query_for_a_fleet_wide_miss() {
    let redis = Redis::start();
    let schema = setup("l2_lease", 1500).await;
    let lease = |c: &mut Config| c.l2.lease = Duration::from_secs(10);
    let ps = [
        proxy(&redis.url(), lease).await,
        proxy(&redis.url(), lease).await,
        proxy(&redis.url(), lease).await,
    ];
    let slow = "SELECT COUNT(*) FROM t a, t b WHERE a.id + b.id > a.v";
    let mut conns = Vec::new();
    for p in &ps {
        conns.push(p.conn(&schema).await);
    }
    let reads = conns
        .iter_mut()
        .map(|c| async move { c.query_first::<i64, _>(slow).await.unwrap().unwrap() });
    let counts = futures::future::join_all(reads).await;
    assert!(counts.iter().all(|&n| n == 1500 * 1500), "{counts:?}");
    let upstream: u64 = ps
        .iter()
        .map(|p| p.running.shared.latencies.miss.count())
        .sum();
    let served: u64 = ps.iter().map(|p| stat(p, "Qcache_l2_lease_served")).sum();
    assert_eq!(
        upstream, 1,
        "the fleet sent the query upstream {upstream} times"
    );
    assert_eq!(served, 2);
}

/// The same guarantees on a 3-node Redis Cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_remote_validation_never_stale() {
    let nodes = common::redis::cluster().unwrap_or_else(|e| panic!("cluster did not start: {e}"));
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let schema = setup("l2_cluster", 1).await;
    let cfg = |c: &mut Config| {
        c.l2.url = L2Url::Cluster(urls.clone());
        c.l2.validate_hits = ValidateHits::Remote;
    };
    let a = proxy("redis://unused", cfg).await;
    let b = proxy("redis://unused", cfg).await;
    assert_eq!(write_then_read(&schema, &a, &[&b], 10).await, 0);
    assert!(stat(&b, "Qcache_l2_remote_checks") > 0);
    // L2 shared: a read filled by B is a hit for A.
    let mut cb = b.conn(&schema).await;
    let n: i64 = cb
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    let stored = || nodes.iter().any(|n| !n.keys("qcache:e:*").is_empty());
    wait_for("an entry in the cluster", LAG_BOUND, stored).await;
    let mut ca = a.conn(&schema).await;
    let m: i64 = ca
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, m);
    assert!(stat(&a, "Qcache_l2_hits") >= 1);
}

/// `check-consistency` across a fleet: options for a short run over `targets`.
fn fleet_check(
    targets: &[&TestProxy],
    schema: &str,
    cross_lag: Duration,
) -> qcache::check::CheckOptions {
    let d = common::db();
    qcache::check::CheckOptions {
        target: targets[0].addr_string(),
        more_targets: targets[1..].iter().map(|p| p.addr_string()).collect(),
        cross_lag,
        user: d.user.clone(),
        password: d.password.clone(),
        database: schema.to_string(),
        duration: Duration::from_secs(3),
        writers: 2,
        readers: 6,
        ..Default::default()
    }
}

async fn run_check(o: &qcache::check::CheckOptions) -> qcache::check::Report {
    let r = tokio::time::timeout(Duration::from_secs(90), qcache::check::run(o))
        .await
        .expect("check run hung")
        .expect("check run could not start");
    println!("{r}");
    r
}

/// Strict mode: no stale read across instances, with no allowance at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_check_passes_with_remote_validation() {
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_chk_remote").await;
    let strict = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), strict).await;
    let b = proxy(&redis.url(), strict).await;
    let r = run_check(&fleet_check(&[&a, &b], &schema, Duration::ZERO)).await;
    assert!(r.passed(), "{r}");
    assert_eq!(r.errors, 0, "{r}");
    // The run must have been served from the caches, or it proves nothing about them.
    let served: u64 = [&a, &b]
        .iter()
        .map(|p| p.running.shared.cache.stats().hits() + stat(p, "Qcache_l2_hits"))
        .sum();
    assert!(served > 0, "nothing served from L1 or L2");
}

/// Default mode: across instances within the notification lag (generous for a loaded
/// machine; the measured lag is in docs/fleet.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_check_passes_with_local_validation_within_the_lag() {
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_chk_local").await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let r = run_check(&fleet_check(&[&a, &b], &schema, Duration::from_secs(1))).await;
    // Without binlog tails, a write is seen elsewhere only through L2: an instance that
    // lost Redis meanwhile (a round trip past `l2.timeout` on a loaded machine) is outside
    // the lag bound by design (docs/fleet.md, "When Redis fails"). Said with the verdict.
    let health: Vec<String> = [("A", &a), ("B", &b)]
        .iter()
        .map(|(n, p)| {
            format!(
                "{n}: downs {} notify_losses {} errors {}",
                stat(p, "Qcache_l2_downs"),
                stat(p, "Qcache_l2_notify_losses"),
                stat(p, "Qcache_l2_errors")
            )
        })
        .collect();
    println!("{}", health.join("; "));
    assert!(r.passed(), "{r}\n{}", health.join("; "));
    assert_eq!(r.errors, 0, "{r}");
}

/// The checker catches a broken fleet: L2 entries served without their version check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_check_fails_when_versions_are_not_checked() {
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_chk_broken").await;
    let broken = |c: &mut Config| c.l2.unsafe_skip_version_check = true;
    let a = proxy(&redis.url(), broken).await;
    let b = proxy(&redis.url(), broken).await;
    let r = run_check(&fleet_check(&[&a, &b], &schema, Duration::from_secs(1))).await;
    assert!(
        r.stale_reads > 0,
        "a fleet serving unchecked L2 entries passed:\n{r}"
    );
}

/// And two isolated instances (no L2, no binlog) serve each other's writes stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_check_fails_for_isolated_instances() {
    let schema = common::fresh_schema("l2_chk_isolated").await;
    let a = common::proxy(|_| {}).await;
    let b = common::proxy(|_| {}).await;
    // One writer (through A), so B's own writes never refresh its stale entries.
    let mut o = fleet_check(&[&a, &b], &schema, Duration::ZERO);
    o.writers = 1;
    let r = run_check(&o).await;
    assert!(r.stale_reads > 0, "isolated instances passed:\n{r}");
}

/// A binlog tail starting while another instance's tail watches keeps the fleet's L2
/// entries; one starting alone (every tail was down) invalidates them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_restart_invalidates_l2_only_when_nobody_watched() {
    let redis = Redis::start();
    let schema = setup("l2_gap", 1).await;
    let binlog = |c: &mut Config| c.invalidation.binlog = BinlogMode::On;
    let a = proxy(&redis.url(), binlog).await;
    assert_eq!(
        stat(&a, "Qcache_l2_gaps_uncovered"),
        1,
        "the first tail watched alone"
    );
    let mut ca = a.conn(&schema).await;
    read_v(&mut ca, 1).await;
    wait_for("A's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    // B joins while A's tail watches: the entry stays good.
    let b = proxy(&redis.url(), binlog).await;
    // B's start is decided after its tail looks for another's heartbeat: wait for the verdict.
    wait_for("B's gap verdict", LAG_BOUND, || {
        stat(&b, "Qcache_l2_gaps_covered") + stat(&b, "Qcache_l2_gaps_uncovered") > 0
    })
    .await;
    assert_eq!(
        stat(&b, "Qcache_l2_gaps_covered"),
        1,
        "tails: {:?}, b uncovered {}",
        redis.cli(&["ZRANGE", "qcache:tails:", "0", "-1", "WITHSCORES"]),
        stat(&b, "Qcache_l2_gaps_uncovered")
    );
    // B is served A's entry from L2. On a machine loaded enough that a notification
    // channel stays silent for a second, or that a tail loses its lease and starts again
    // alone, the fleet drops its entries (fail closed): such a round proves nothing, and
    // another is read.
    let mut cb = b.conn(&schema).await;
    // What makes an instance bypass or drop L2 for a while, as counted.
    let counted = [
        "Qcache_l2_notify_losses",
        "Qcache_l2_gaps_uncovered",
        "Qcache_l2_gaps_covered",
        "Qcache_l2_downs",
        "Qcache_l2_stale",
        "Qcache_l2_misses",
    ];
    let disturbances = || {
        [&a, &b]
            .iter()
            .map(|p| counted[..4].iter().map(|n| stat(p, n)).sum::<u64>())
            .sum::<u64>()
    };
    let deadline = Instant::now() + 4 * LAG_BOUND;
    for round in 0.. {
        let disturbed = disturbances();
        let read = format!("SELECT v FROM t WHERE id = 1 AND {round} >= 0");
        if round > 0 {
            // After a drop, each instance bypasses L2 until it has resubscribed and resynced.
            wait_up(&a).await;
            wait_up(&b).await;
        }
        let hits = stat(&b, "Qcache_l2_hits");
        if round > 0 {
            let keys = redis.keys("qcache:e:*").len();
            let _: Option<i64> = ca.query_first(&read).await.unwrap();
            wait_for("A's entry", LAG_BOUND, || {
                redis.keys("qcache:e:*").len() > keys
            })
            .await;
        }
        let got: Option<i64> = if round == 0 {
            Some(read_v(&mut cb, 1).await)
        } else {
            cb.query_first(&read).await.unwrap()
        };
        assert_eq!(got, Some(0));
        if stat(&b, "Qcache_l2_hits") == hits + 1 {
            break;
        }
        // Under a full run's load B's first read after joining has missed A's entry with
        // none of the disturbances above counted (a miss, never a wrong answer; the cause
        // is not found: the gap verdict counted before L2 was read again was one, fixed).
        // B must be served one of A's fills within the bound; an unexplained miss is
        // printed with what each instance counted, for the next look.
        if disturbances() == disturbed {
            for (name, p) in [("A", &a), ("B", &b)] {
                let seen: Vec<String> = counted
                    .iter()
                    .map(|n| format!("{n}={}", stat(p, n)))
                    .collect();
                eprintln!("round {round}: B missed with nothing counted; {name}: {seen:?}");
            }
        }
        assert!(
            Instant::now() < deadline,
            "B was never served A's entry from L2 ({} disturbances)",
            disturbances()
        );
    }
    // Both gone: nobody watches. A newcomer must not trust what is in L2.
    drop(cb);
    drop(ca);
    a.shutdown().await;
    b.shutdown().await;
    let c = proxy(&redis.url(), binlog).await;
    assert_eq!(stat(&c, "Qcache_l2_gaps_uncovered"), 1);
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 1).await, 0);
    assert_eq!(stat(&c, "Qcache_l2_hits"), 0);
    assert_eq!(stat(&c, "Qcache_l2_stale"), 1);
}

/// AUTH and ACL in the URL: a user limited to qcache's keys and channel is enough; a wrong
/// password leaves L2 down and clients unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_user_in_the_url() {
    let redis = Redis::start_with(common::free_port(), &["--requirepass", "admin-pw"]);
    let out = redis.cli(&[
        "-a",
        "admin-pw",
        "--no-auth-warning",
        "ACL",
        "SETUSER",
        "qc",
        "on",
        ">qc-pw",
        "~qcache:*",
        "&qcache:*",
        "+@all",
    ]);
    assert!(out.contains("OK"), "{out}");
    let url = format!("redis://qc:qc-pw@127.0.0.1:{}", redis.port);
    let schema = setup("l2_acl", 1).await;
    let a = proxy(&url, |_| {}).await;
    let b = proxy(&url, |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    let stored = || {
        !redis
            .cli(&[
                "-a",
                "admin-pw",
                "--no-auth-warning",
                "--scan",
                "--pattern",
                "qcache:e:*",
            ])
            .trim()
            .is_empty()
    };
    wait_for("B's entry", LAG_BOUND, stored).await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    let bad = format!("redis://qc:wrong@127.0.0.1:{}", redis.port);
    let c = common::proxy(|cfg| l2_on(cfg, &bad)).await;
    let mut cc = c.conn(&schema).await;
    cc.query_drop("UPDATE t SET v = 2 WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(read_v(&mut cc, 1).await, 2);
    assert!(!l2(&c).healthy());
}

/// rediss://: L2 over TLS, the server's certificate verified against `l2.tls_ca`; a client
/// without that CA (the system's roots) refuses the server, and L2 stays down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_redis() {
    let (redis, ca) = Redis::start_tls();
    let url = format!("rediss://127.0.0.1:{}", redis.port);
    let schema = setup("l2_tls", 1).await;
    let with_ca = |c: &mut Config| c.l2.tls_ca = ca.clone();
    let a = proxy(&url, with_ca).await;
    let b = proxy(&url, with_ca).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    wait_for("B's store", LAG_BOUND, || stat(&b, "Qcache_l2_stores") == 1).await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    let c = common::proxy(|cfg| l2_on(cfg, &url)).await;
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 1).await, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!l2(&c).healthy(), "an unverified server was trusted");
}

/// Mutual TLS: a server started with `--tls-auth-clients yes` serves instances that show a
/// client certificate its CA signed (`l2.tls_cert`/`l2.tls_key`), together with an ACL user
/// and password in the URL; an instance without a client certificate, or with one from
/// another CA, is refused, stays down, and its clients are served without L2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_to_redis() {
    let (redis, files) = Redis::start_mtls();
    let schema = setup("l2_mtls", 1).await;
    // The ACL user is made over a TLS connection too: the server has no plain port.
    let out = std::process::Command::new("redis-cli")
        .args(["--tls", "--cacert", &files.ca])
        .args(["--cert", &files.client_cert, "--key", &files.client_key])
        .args(["-h", "127.0.0.1", "-p", &redis.port.to_string()])
        .args([
            "ACL",
            "SETUSER",
            "qc",
            "on",
            ">qc-pw",
            "~qcache:*",
            "&qcache:*",
            "+@all",
        ])
        .output()
        .expect("redis-cli runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("OK"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = format!("rediss://qc:qc-pw@127.0.0.1:{}", redis.port);
    let certs = |cert: &str, key: &str| {
        let (ca, cert, key) = (files.ca.clone(), cert.to_string(), key.to_string());
        move |c: &mut Config| {
            c.l2.tls_ca = ca;
            c.l2.tls_cert = cert;
            c.l2.tls_key = key;
        }
    };
    let a = proxy(&url, certs(&files.client_cert, &files.client_key)).await;
    let b = proxy(&url, certs(&files.client_cert, &files.client_key)).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    wait_for("B's store", LAG_BOUND, || stat(&b, "Qcache_l2_stores") == 1).await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    // A write through A reaches B over the channel of the same mutual-TLS server.
    ca.query_drop("UPDATE t SET v = 3 WHERE id = 1")
        .await
        .unwrap();
    let mut fresh = false;
    let deadline = std::time::Instant::now() + LAG_BOUND;
    while std::time::Instant::now() < deadline {
        if read_v(&mut cb, 1).await == 3 {
            fresh = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(fresh, "B never saw A's write");
    // No client certificate, and one the server's CA did not sign: refused, L2 down, the
    // clients still answered (from the server).
    let ca_only = files.ca.clone();
    let none = common::proxy(|c| {
        l2_on(c, &url);
        c.l2.tls_ca = ca_only;
    })
    .await;
    let rogue = common::proxy(|c| {
        l2_on(c, &url);
        certs(&files.rogue_cert, &files.rogue_key)(c);
    })
    .await;
    for p in [&none, &rogue] {
        let mut c = p.conn(&schema).await;
        assert_eq!(read_v(&mut c, 1).await, 3);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!l2(&none).healthy(), "served without a client certificate");
    assert!(
        !l2(&rogue).healthy(),
        "served with a certificate of another CA"
    );
    assert_eq!(
        stat(&none, "Qcache_l2_hits") + stat(&rogue, "Qcache_l2_hits"),
        0
    );
}

async fn local_hits(c: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, u64)> = c
        .query_first("SHOW STATUS LIKE 'Qcache_hits'")
        .await
        .expect("status");
    row.expect("Qcache_hits").1
}

/// Row slices travel through L2 (#22): entries that read one slice carry its versions, a
/// write through one instance raises only the slices it names (before its OK), so the
/// entries of other slices stay served fleet-wide — from L2 and from other instances' L1 —
/// while the touched slice's entries are never served stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_slices_travel_through_l2() {
    let redis = Redis::start();
    let schema = setup("l2_slices", 3).await;
    let row = |c: &mut Config| c.invalidation.granularity = Granularity::Row;
    let a = proxy(&redis.url(), row).await;
    let b = proxy(&redis.url(), |c| {
        row(c);
        c.l2.validate_hits = ValidateHits::Remote;
    })
    .await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(read_v(&mut cb, 2).await, 0);
    assert_eq!(read_v(&mut cb, 3).await, 0);
    wait_for("B's stores", LAG_BOUND, || {
        stat(&b, "Qcache_l2_stores") == 3
    })
    .await;
    // Sliced entries: they stamp slice versions, and the column is registered in Redis.
    assert!(
        !redis.keys("qcache:v:k:*").is_empty(),
        "no slice versions in L2"
    );
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(read_v(&mut ca, 2).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 2, "B's sliced entries shared");
    ca.query_drop("UPDATE t SET v = 5 WHERE id = 1")
        .await
        .unwrap();
    // A fresh instance: the untouched slice is served from L2, the touched one is not.
    let c = proxy(&redis.url(), row).await;
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 2).await, 0);
    assert_eq!(stat(&c, "Qcache_l2_hits"), 1, "slice 2 kept in L2");
    assert_eq!(read_v(&mut cc, 1).await, 5, "slice 1 served stale from L2");
    assert_eq!(stat(&c, "Qcache_l2_hits"), 1);
    assert_eq!(stat(&c, "Qcache_l2_stale"), 1);
    // B, strict: its L1 entry of slice 2 is still vouched for by L2; slice 1's is not.
    let rejects = stat(&b, "Qcache_l2_remote_rejects");
    let h = local_hits(&mut cb).await;
    assert_eq!(read_v(&mut cb, 2).await, 0);
    assert_eq!(
        local_hits(&mut cb).await,
        h + 1,
        "B's slice 2 entry dropped"
    );
    assert_eq!(stat(&b, "Qcache_l2_remote_rejects"), rejects);
    assert_eq!(read_v(&mut cb, 1).await, 5, "B served slice 1 stale");
    // Local validation: A learns C's write to slice 2 from the channel, precisely: its L1
    // entry of slice 1 stays a hit, slice 2 is fresh within the lag.
    assert_eq!(read_v(&mut ca, 1).await, 5);
    let h = local_hits(&mut ca).await;
    assert_eq!(read_v(&mut ca, 1).await, 5);
    assert_eq!(local_hits(&mut ca).await, h + 1);
    cc.query_drop("UPDATE t SET v = 7 WHERE id = 2")
        .await
        .unwrap();
    let deadline = Instant::now() + LAG_BOUND;
    while read_v(&mut ca, 2).await != 7 {
        assert!(
            Instant::now() < deadline,
            "A never saw C's write to slice 2"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let h = local_hits(&mut ca).await;
    assert_eq!(read_v(&mut ca, 1).await, 5);
    assert_eq!(
        local_hits(&mut ca).await,
        h + 1,
        "C's write to slice 2 dropped slice 1"
    );
    // A write whose rows are unknown (no slice named): every slice, everywhere.
    cc.query_drop("UPDATE t SET v = v + 1").await.unwrap();
    assert_eq!(read_v(&mut cb, 3).await, 1, "B served slice 3 stale");
    let deadline = Instant::now() + LAG_BOUND;
    while read_v(&mut ca, 1).await != 6 {
        assert!(
            Instant::now() < deadline,
            "A never saw C's write to every row"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A lookup reads versions with plain commands (MGET/HMGET in one pipeline with the entry's
/// GET); the script runs only to create a version or register a column. A registration lost
/// with its hash is registered again by the next lookup, and the entries stamped before are
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_read_versions_without_the_script() {
    let redis = Redis::start();
    let schema = setup("l2_plain", 3).await;
    let row = |c: &mut Config| c.invalidation.granularity = Granularity::Row;
    let a = proxy(&redis.url(), row).await;
    let b = proxy(&redis.url(), row).await;
    let mut cb = b.conn(&schema).await;
    for id in 1..=3 {
        assert_eq!(read_v(&mut cb, id).await, 0);
    }
    wait_for("B's stores", LAG_BOUND, || {
        stat(&b, "Qcache_l2_stores") == 3
    })
    .await;
    // Each of B's lookups met a slice version nobody had read yet: the script created it.
    assert_eq!(stat(&b, "Qcache_l2_script_reads"), 3);
    let mut ca = a.conn(&schema).await;
    for id in 1..=3 {
        assert_eq!(read_v(&mut ca, id).await, 0);
    }
    assert_eq!(stat(&a, "Qcache_l2_hits"), 3);
    assert_eq!(
        stat(&a, "Qcache_l2_script_reads"),
        0,
        "hits of registered columns ran the script"
    );
    // The table's unknown-rows hash goes (eviction): its registrations with it. A write
    // then finds no column registered and raises only the all-writes version.
    let hashes = redis.keys("qcache:v:u:*");
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    redis.cli(&["DEL", &hashes[0]]);
    cb.query_drop("UPDATE t SET v = 5 WHERE id = 1")
        .await
        .unwrap();
    // A fresh instance: the first lookup registers again (script), and every entry stamped
    // before the hash went is refused.
    let c = proxy(&redis.url(), row).await;
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 1).await, 5);
    assert_eq!(read_v(&mut cc, 2).await, 0);
    assert_eq!(stat(&c, "Qcache_l2_hits"), 0);
    assert_eq!(stat(&c, "Qcache_l2_stale"), 2);
    assert_eq!(stat(&c, "Qcache_l2_script_reads"), 1);
    // Registered again: a write through B to slice 2 raises it, seen by a lookup through C's
    // L2 path (its L1 entry learns it from the channel).
    wait_for("C's stores", LAG_BOUND, || {
        stat(&c, "Qcache_l2_stores") == 2
    })
    .await;
    cb.query_drop("UPDATE t SET v = 6 WHERE id = 2")
        .await
        .unwrap();
    let d = proxy(&redis.url(), row).await;
    let mut cd = d.conn(&schema).await;
    assert_eq!(read_v(&mut cd, 2).await, 6, "slice 2 served stale from L2");
    assert_eq!(read_v(&mut cd, 1).await, 5);
    assert_eq!(stat(&d, "Qcache_l2_hits"), 1, "slice 1 kept in L2");
    assert_eq!(stat(&d, "Qcache_l2_script_reads"), 0);
}

/// A TCP forwarder to Redis that, once frozen, stops delivering what Redis sends to the
/// connections that subscribed: a half-open pub/sub connection (a NAT or a balancer that
/// dropped it silently), where nothing is closed and nothing arrives.
struct Forwarder {
    url: String,
    freeze: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

async fn forwarder(to: String) -> Forwarder {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let to = to.trim_start_matches("redis://").to_string();
    let freeze = Arc::new(AtomicBool::new(false));
    let frozen = freeze.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&to).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let subscribed = Arc::new(AtomicBool::new(false));
            let sub = subscribed.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n @ 1..) = cr.read(&mut buf).await {
                    if buf[..n]
                        .windows(9)
                        .any(|w| w.eq_ignore_ascii_case(b"SUBSCRIBE"))
                    {
                        sub.store(true, Ordering::Release);
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let frozen = frozen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n @ 1..) = sr.read(&mut buf).await {
                    if subscribed.load(Ordering::Acquire) && frozen.load(Ordering::Acquire) {
                        continue;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Forwarder { url, freeze }
}

/// The bump channel stops delivering without closing (half-open): the instance notices
/// within the channel's silence bound (its own heartbeats stop arriving), drops its L1 and
/// subscribes again, so another instance's write is seen within the lag all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_bump_channel_is_noticed() {
    let redis = Redis::start();
    let schema = setup("l2_silent", 1).await;
    let fwd = forwarder(redis.url()).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&fwd.url, |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    assert_eq!(read_v(&mut cb, 1).await, 0);
    fwd.freeze.store(true, std::sync::atomic::Ordering::Release);
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    let ok = Instant::now();
    while read_v(&mut cb, 1).await != 1 {
        assert!(
            ok.elapsed() < LAG_BOUND,
            "B served a stale L1 entry while its bump channel delivered nothing"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("B fresh {:?} after A's OK", ok.elapsed());
    assert!(stat(&b, "Qcache_l2_notify_losses") >= 1);
    // Delivering again: B subscribes anew and learns A's writes from the channel.
    fwd.freeze
        .store(false, std::sync::atomic::Ordering::Release);
    // A subscription attempt made while frozen waits out its 2 s timeout first.
    wait_for("B's channel", Duration::from_secs(8), || {
        l2(&b).notifications_up()
    })
    .await;
    assert_eq!(read_v(&mut cb, 1).await, 1);
    ca.query_drop("UPDATE t SET v = 2 WHERE id = 1")
        .await
        .unwrap();
    let ok = Instant::now();
    while read_v(&mut cb, 1).await != 2 {
        assert!(ok.elapsed() < LAG_BOUND, "B never saw A's second write");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Redis's writes stall (`CLIENT PAUSE … WRITE`, as in a failover) while a write through A
/// has its raise in flight: the health ping times out, L2 is marked down and reconnects at
/// once. That resync must raise the batch the bump task holds, or it marks it raised while
/// its script still waits in Redis, the write's OK goes out, and A serves the old row from
/// L2 (and copies it into L1). Found by an adversarial run on b1c84c8: every read stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_never_marks_an_in_flight_raise_done() {
    let redis = Redis::start();
    for round in 0..3 {
        let schema = setup("l2_inflight", 2).await;
        let a = proxy(&redis.url(), |_| {}).await;
        let mut ca = a.conn(&schema).await;
        let mut cr = a.conn(&schema).await;
        let q = "SELECT v FROM t WHERE id = 1";
        let _: Option<i64> = ca.query_first(q).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while redis.keys("qcache:e:*").is_empty() {
            assert!(Instant::now() < deadline, "no L2 entry");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let out = redis.cli(&["CLIENT", "PAUSE", "1500", "WRITE"]);
        assert!(out.contains("OK"), "CLIENT PAUSE: {out}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
            .await
            .unwrap();
        for i in 0..5 {
            let got: Option<i64> = cr.query_first(q).await.unwrap();
            assert_eq!(
                got,
                Some(1),
                "round {round}, read {i} after the write's OK: the old row (downs {})",
                stat(&a, "Qcache_l2_downs")
            );
        }
        tokio::time::sleep(Duration::from_millis(1300)).await;
        drop((ca, cr));
        a.shutdown().await;
    }
}

/// Row order is data, in L2 too: an entry one instance stored under one session's optimizer
/// settings is not served by another instance to a session whose effective settings differ
/// (the same `SET optimizer_switch` text over other inherited flags), and an UPDATE of the
/// primary key through one instance stops both instances serving the old order of a read
/// that never names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_entries_keep_row_order_and_plan_settings() {
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_order").await;
    let mut d = common::direct_to(&schema).await;
    for sql in [
        "CREATE TABLE p (id INT PRIMARY KEY, a VARCHAR(10) NOT NULL)",
        "INSERT INTO p VALUES (1, 'one'), (2, 'two'), (3, 'three')",
        "CREATE TABLE t1 (a INT NOT NULL)",
        "CREATE TABLE t2 (b INT NOT NULL)",
        "INSERT INTO t1 VALUES (1), (2), (3)",
        "INSERT INTO t2 VALUES (1), (2), (3)",
    ] {
        d.query_drop(sql).await.unwrap();
    }
    // Remote validation: B judges its hits by L2's versions, so A's UPDATE is seen at once.
    let remote = |c: &mut Config| c.l2.validate_hits = ValidateHits::Remote;
    let a = proxy(&redis.url(), remote).await;
    let b = proxy(&redis.url(), remote).await;
    let entries = || redis.keys("qcache:e:*").len();
    let join = "SELECT t1.a, t2.b FROM t1 LEFT JOIN t2 ON t2.b >= t1.a";
    let mut ca = a.conn(&schema).await;
    ca.query_drop("SET optimizer_switch = 'outer_join_with_cache=off'")
        .await
        .unwrap();
    ca.query_drop("SET optimizer_switch = 'mrr=off'")
        .await
        .unwrap();
    let before = entries();
    let _: Vec<(i64, Option<i64>)> = ca.query(join).await.unwrap();
    wait_for("A's join entry in Redis", LAG_BOUND, || entries() > before).await;
    let mut cb = b.conn(&schema).await;
    cb.query_drop("SET optimizer_switch = 'mrr=off'")
        .await
        .unwrap();
    d.query_drop("SET optimizer_switch = 'mrr=off'")
        .await
        .unwrap();
    let want: Vec<(i64, Option<i64>)> = d.query(join).await.unwrap();
    let got: Vec<(i64, Option<i64>)> = cb.query(join).await.unwrap();
    assert_eq!(got, want, "B served A's plan's order");

    let full = "SELECT a FROM p";
    let before = entries();
    let _: Vec<String> = ca.query(full).await.unwrap();
    let _: Vec<String> = cb.query(full).await.unwrap();
    wait_for("the full read's entry in Redis", LAG_BOUND, || {
        entries() > before
    })
    .await;
    ca.query_drop("UPDATE p SET id = 10 WHERE id = 1")
        .await
        .unwrap();
    let want: Vec<String> = d.query(full).await.unwrap();
    assert_eq!(want, ["two", "three", "one"]);
    for (name, c) in [("A", &mut ca), ("B", &mut cb)] {
        for _ in 0..2 {
            let got: Vec<String> = c.query(full).await.unwrap();
            assert_eq!(got, want, "{name} served the old order");
        }
    }
}

/// What a diagnostics reader answers, as text (rows as debug strings), or its error.
async fn diag_answer(c: &mut mysql_async::Conn, reader: &str) -> String {
    match c.query::<mysql_async::Row, _>(reader).await {
        Ok(rows) => format!(
            "{:?}",
            rows.into_iter()
                .map(|r| r.unwrap().into_iter().map(|v| v.as_sql(true)).collect())
                .collect::<Vec<Vec<String>>>()
        ),
        Err(e) => format!("error {e}"),
    }
}

/// The same steps through B and directly: a statement that warns, the read (an L2 hit on B
/// the first round, its L1 copy the second), then `reader`.
async fn diag_steps(
    c: &mut mysql_async::Conn,
    read: &str,
    param: Option<i64>,
    reader: &str,
) -> (Vec<(i64, i64)>, String) {
    c.query_drop("DO CAST('1x' AS SIGNED)").await.unwrap();
    let rows: Vec<(i64, i64)> = match param {
        None => c.query(read).await.unwrap(),
        Some(p) => c.exec(read, (p,)).await.unwrap(),
    };
    (rows, diag_answer(c, reader).await)
}

/// Issue #35, class 8: after a hit served from L2 (and after hits on its L1 copy) the
/// session's diagnostics are what the server leaves after the SELECT, as after a local hit:
/// FOUND_ROWS(), SHOW WARNINGS, SHOW COUNT(*) WARNINGS and ROW_COUNT() answer as directly,
/// for text and prepared reads. Before the fix FOUND_ROWS() read 0 after an L2 hit of a
/// 3-row result (the L2 entry did not carry it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_after_an_l2_hit_match_the_server() {
    let redis = Redis::start();
    let schema = setup("l2_diag", 3).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let mut direct = common::direct_to(&schema).await;
    // L2 readable at both before the first read B is to take from it (the bumps of a tail's
    // start are raised first: `policy::l2::readable`); under load B's first read otherwise
    // went to the server.
    wait_for("L2 readable at both", LAG_BOUND, || {
        l2(&a).usable() && l2(&b).usable()
    })
    .await;
    let readers = [
        "SELECT FOUND_ROWS()",
        "SHOW WARNINGS",
        "SHOW COUNT(*) WARNINGS",
        "SELECT ROW_COUNT()",
    ];
    let mut hits = 0;
    for (i, reader) in readers.iter().enumerate() {
        for prepared in [false, true] {
            // A key of its own per reader and protocol, so each first read on B is an L2 hit.
            let n = i as i64 * 2 + i64::from(prepared) + 1;
            let (read, param) = if prepared {
                (
                    "SELECT id, v FROM t WHERE id > ? ORDER BY id".to_string(),
                    Some(-n),
                )
            } else {
                (
                    format!("SELECT id, v FROM t WHERE id > -{n} ORDER BY id"),
                    None,
                )
            };
            let filled: Vec<(i64, i64)> = match param {
                None => ca.query(&read).await.unwrap(),
                Some(p) => ca.exec(&read, (p,)).await.unwrap(),
            };
            assert_eq!(filled.len(), 3);
            let want = i * 2 + usize::from(prepared) + 1;
            wait_for("A's entry in Redis", LAG_BOUND, || {
                redis.keys("qcache:e:*").len() >= want
            })
            .await;
            for round in ["L2 hit", "L1 copy"] {
                let d = diag_steps(&mut direct, &read, param, reader).await;
                let q = diag_steps(&mut cb, &read, param, reader).await;
                assert_eq!(q, d, "{reader} after an {round} (prepared: {prepared})");
                if round == "L2 hit" {
                    hits += 1;
                    assert_eq!(stat(&b, "Qcache_l2_hits"), hits, "{read}: not an L2 hit");
                } else {
                    assert_eq!(stat(&b, "Qcache_l2_hits"), hits, "{read}: not an L1 hit");
                }
            }
        }
    }
}

/// Issue #35, class 9: Redis restarted from a snapshot older than A's write (kill -9 after
/// a SAVE made before it): the version A raised is gone, and the entry filled before the
/// write is back with the versions that vouch for it. Neither the writer nor the other
/// instance may serve it: they read what the server has. Before the fix both served the
/// pre-write row from L2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restored_from_an_older_snapshot_serves_nothing_from_before() {
    let mut redis = Redis::start();
    let schema = setup("l2_rollback", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    wait_for("B's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    assert!(redis.cli(&["SAVE"]).contains("OK"));
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    // kill -9 and start again on the same port and directory: the old dump is loaded.
    redis.restart();
    assert!(
        !redis.keys("qcache:e:*").is_empty(),
        "the old entry is back from the snapshot"
    );
    wait_for("A and B to notice", LAG_BOUND, || {
        stat(&a, "Qcache_l2_downs") >= 1 && stat(&b, "Qcache_l2_downs") >= 1
    })
    .await;
    wait_up(&a).await;
    wait_up(&b).await;
    // A third instance that never saw the Redis from before the restart.
    let c = proxy(&redis.url(), |_| {}).await;
    let mut cc = c.conn(&schema).await;
    let direct = read_v(&mut common::direct_to(&schema).await, 1).await;
    assert_eq!(direct, 1);
    for (who, conn) in [("A (the writer)", &mut ca), ("B", &mut cb), ("C", &mut cc)] {
        for _ in 0..2 {
            assert_eq!(
                read_v(conn, 1).await,
                direct,
                "{who} served the pre-write row"
            );
        }
    }
}

/// The third variant: the same process loads an older dump (`DEBUG RELOAD NOSAVE`), keeping
/// its `run_id`, its `master_replid`, its clients' connections and (in the dump) qcache's
/// marker. Only the fleet's raise counter went back: A's write raised it, and the dump is
/// from before. The first of A and B to notice (within a ping) invalidates the fleet; a new
/// C then reads fresh too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_reloading_an_older_dump_in_the_same_process_serves_nothing_from_before() {
    let redis = Redis::start_fresh(|_| vec!["--enable-debug-command".into(), "yes".into()]);
    let schema = setup("l2_reload", 1).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    wait_for("B's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    assert_eq!(read_v(&mut ca, 1).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    assert!(redis.cli(&["SAVE"]).contains("OK"));
    let raised = stat(&a, "Qcache_l2_bumps");
    ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    wait_for("A's raise", LAG_BOUND, || {
        stat(&a, "Qcache_l2_bumps") > raised
    })
    .await;
    // B's check reads the counter A's raise moved.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (a_back, b_back) = (
        stat(&a, "Qcache_l2_rollbacks"),
        stat(&b, "Qcache_l2_rollbacks"),
    );
    assert!(redis.cli(&["DEBUG", "RELOAD", "NOSAVE"]).contains("OK"));
    assert!(
        !redis.keys("qcache:e:*").is_empty(),
        "the old entry is back from the dump"
    );
    // A few pings' time: the first to notice raises `e` for the fleet (the other hears it
    // on the channel, and may then find the counter past what it saw).
    tokio::time::sleep(Duration::from_secs(1)).await;
    wait_up(&a).await;
    wait_up(&b).await;
    let c = proxy(&redis.url(), |_| {}).await;
    let mut cc = c.conn(&schema).await;
    let direct = read_v(&mut common::direct_to(&schema).await, 1).await;
    assert_eq!(direct, 1);
    for (who, conn) in [("A (the writer)", &mut ca), ("B", &mut cb), ("C", &mut cc)] {
        for _ in 0..2 {
            assert_eq!(
                read_v(conn, 1).await,
                direct,
                "{who} served the pre-write row"
            );
        }
    }
    assert!(
        stat(&a, "Qcache_l2_rollbacks") + stat(&b, "Qcache_l2_rollbacks") > a_back + b_back,
        "counted as a rollback"
    );
}

/// The second variant: Redis replaced (kill -9) by another server on the same port that
/// holds an older copy of the data, as a replica that missed the last raises would after a
/// failover; the instances are started after the switch, so none saw the old server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_instance_on_a_rolled_back_redis_serves_nothing_from_before() {
    let mut redis = Redis::start();
    let schema = setup("l2_failover", 1).await;
    {
        let a = proxy(&redis.url(), |_| {}).await;
        let mut ca = a.conn(&schema).await;
        assert_eq!(read_v(&mut ca, 1).await, 0);
        wait_for("A's entry in Redis", LAG_BOUND, || {
            !redis.keys("qcache:e:*").is_empty()
        })
        .await;
        assert!(redis.cli(&["SAVE"]).contains("OK"));
        ca.query_drop("UPDATE t SET v = 1 WHERE id = 1")
            .await
            .unwrap();
        drop(ca);
        a.shutdown().await;
    }
    redis.restart();
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    for _ in 0..2 {
        assert_eq!(read_v(&mut cb, 1).await, 1, "B served the pre-write row");
    }
}

/// A temporary table created by stored code (#35), named like a base table, is the
/// session's own: its rows never reach L2 for another instance, and a session that holds one
/// is never served the base table's entry from L2. Text and prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_tables_made_by_stored_code_stay_out_of_l2() {
    let redis = Redis::start();
    let schema = setup("l2_tmp", 2).await;
    let mut direct = common::direct_to(&schema).await;
    direct
        .query_drop(
            "CREATE FUNCTION mk() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN \
             CREATE TEMPORARY TABLE IF NOT EXISTS t (id INT PRIMARY KEY, v INT); \
             INSERT IGNORE INTO t VALUES (99, 99); RETURN 1; END",
        )
        .await
        .unwrap();
    let base: Vec<(i64, i64)> = direct
        .query("SELECT id, v FROM t ORDER BY id")
        .await
        .unwrap();
    let temp = vec![(99, 99)];
    // The catalog knows the function before any session runs it.
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    for p in [&a, &b] {
        wait_for("the catalog", LAG_BOUND, || {
            p.running.shared.catalog.is_loaded()
        })
        .await;
    }
    let read = "SELECT id, v FROM t ORDER BY id";
    let mut ca = a.conn(&schema).await;
    let _: Vec<i64> = ca.query("SELECT mk()").await.unwrap();
    let text: Vec<(i64, i64)> = ca.query(read).await.unwrap();
    assert_eq!(text, temp, "A's own temporary table, text");
    let prepared: Vec<(i64, i64)> = ca.exec(read, ()).await.unwrap();
    assert_eq!(prepared, temp, "A's own temporary table, prepared");
    // Nothing of A's reached Redis, so B reads the base table from the server.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut cb = b.conn(&schema).await;
    for _ in 0..2 {
        let via_b: Vec<(i64, i64)> = cb.query(read).await.unwrap();
        assert_eq!(via_b, base, "B reads the base table");
        let via_b: Vec<(i64, i64)> = cb.exec(read, ()).await.unwrap();
        assert_eq!(via_b, base, "B reads the base table, prepared");
    }
    assert_eq!(stat(&b, "Qcache_l2_hits"), 0, "nothing of A's in L2");
    wait_for("B's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    // B's entry of the base table is in L2 now; A's session still reads its own table.
    let text: Vec<(i64, i64)> = ca.query(read).await.unwrap();
    assert_eq!(text, temp, "A is not served B's entry from L2, text");
    let prepared: Vec<(i64, i64)> = ca.exec(read, ()).await.unwrap();
    assert_eq!(
        prepared, temp,
        "A is not served B's entry from L2, prepared"
    );
    // Another session on A has no temporary table: served the base table from L2.
    let mut ca2 = a.conn(&schema).await;
    let fresh: Vec<(i64, i64)> = ca2.query(read).await.unwrap();
    assert_eq!(fresh, base);
    assert!(
        stat(&a, "Qcache_l2_hits") >= 1,
        "the base table's entry is shared"
    );
}

/// FOUND_ROWS() after a read the server refuses before running it (an unknown column), right
/// after an L2 hit and after a hit on its L1 copy: what the server leaves, as directly
/// (qcache owes the server the hit's FOUND_ROWS and restores it before the refused read).
/// Text and prepared hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_after_a_refused_read_following_an_l2_hit() {
    let redis = Redis::start();
    let schema = setup("l2_refused", 3).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut ca = a.conn(&schema).await;
    let mut cb = b.conn(&schema).await;
    let mut direct = common::direct_to(&schema).await;
    let mut hits = 0;
    for prepared in [false, true] {
        let (read, param) = if prepared {
            ("SELECT id, v FROM t WHERE id > ? ORDER BY id", Some(-5))
        } else {
            ("SELECT id, v FROM t WHERE id > -5 ORDER BY id", None)
        };
        let filled: Vec<(i64, i64)> = match param {
            None => ca.query(read).await.unwrap(),
            Some(p) => ca.exec(read, (p,)).await.unwrap(),
        };
        assert_eq!(filled.len(), 3);
        let want = usize::from(prepared) + 1;
        wait_for("A's entry in Redis", LAG_BOUND, || {
            redis.keys("qcache:e:*").len() >= want
        })
        .await;
        for round in ["L2 hit", "L1 copy"] {
            let mut answers = Vec::new();
            for c in [&mut direct, &mut cb] {
                // A small FOUND_ROWS first, so a hit that restored nothing shows.
                c.query_drop("SELECT id FROM t WHERE id = 1").await.unwrap();
                let rows: Vec<(i64, i64)> = match param {
                    None => c.query(read).await.unwrap(),
                    Some(p) => c.exec(read, (p,)).await.unwrap(),
                };
                let refused = diag_answer(c, "SELECT nosuch FROM t").await;
                let found = diag_answer(c, "SELECT FOUND_ROWS()").await;
                answers.push((rows, refused, found));
            }
            assert_eq!(
                answers[1], answers[0],
                "after an {round} (prepared: {prepared})"
            );
            if round == "L2 hit" {
                hits += 1;
            }
            assert_eq!(stat(&b, "Qcache_l2_hits"), hits, "{read}: {round}");
        }
    }
}

/// One `cache` rule for table `t` of `schema`, with `option` (a TOML line).
fn cache_rule_for_t(schema: &str, option: &str) -> Vec<qcache::rules::Rule> {
    Config::from_toml(
        &format!("[[rules]]\nschema = \"{schema}\"\ntable = \"t\"\naction = \"cache\"\n{option}\n"),
        "rules",
    )
    .expect("rules parse")
    .rules
}

/// `max_stale` with L2 (issue #37 part 2): an outdated entry may be served while one session
/// refreshes it, but not when the fleet confirms every hit in L2 (`l2.validate_hits =
/// "remote"`): there a hit must be what L2 vouches for now, and a stale one never is. The
/// same steps with local validation serve the stale value (the control: the setup does
/// reach stale serving). A change learned from another instance through L2 is never served
/// stale at all (`policy::stale`, `Dropped::Shared`: L2's channel cannot tell a change of
/// rows from a DDL), so the write here is made through the same instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_stale_is_never_served_when_l2_confirms_hits() {
    for remote in [false, true] {
        let served_stale = stale_read_through_l2(remote, false).await;
        assert_eq!(
            served_stale, !remote,
            "validate_hits remote = {remote}: stale served = {served_stale}"
        );
    }
}

/// An entry copied into L1 from an L2 hit keeps its rule's `max_stale`, as the entry filled
/// from the server does (`Session::local_entry`): the same steps as above, A's first read
/// served from B's fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_copy_keeps_max_stale() {
    assert!(stale_read_through_l2(false, true).await);
}

/// The same through the binary protocol: each read is an execute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_copy_keeps_max_stale_prepared() {
    assert!(stale_read_through_l2_as(false, true, true).await);
}

/// Session 1 reads a slow query of `t` (filled in L1 and L2, or with `from_l2` served from
/// another instance's fill and copied into L1), session 3 writes `t`, session 1 starts
/// refreshing and session 2 reads meanwhile: whether it got the old value.
async fn stale_read_through_l2(remote: bool, from_l2: bool) -> bool {
    stale_read_through_l2_as(remote, from_l2, false).await
}

/// [`stale_read_through_l2`], each read as text or, with `prepared`, as an execute.
async fn stale_read_through_l2_as(remote: bool, from_l2: bool, prepared: bool) -> bool {
    const Q: &str =
        "SELECT t.v, COUNT(*) AS n FROM t, big b1, big b2, big b3 WHERE t.id = 1 GROUP BY t.v";
    async fn q(c: &mut mysql_async::Conn, prepared: bool) -> (i64, i64) {
        let row = if prepared {
            c.exec_first(Q, ()).await
        } else {
            c.query_first(Q).await
        };
        row.unwrap().unwrap()
    }
    let redis = Redis::start();
    let name = match (remote, prepared) {
        (true, _) => "l2_stale_r",
        (false, false) => "l2_stale_l",
        (false, true) => "l2_stale_ps",
    };
    let schema = setup(name, 1).await;
    let mut d = common::direct_to(&schema).await;
    d.query_drop("CREATE TABLE big (n INT)").await.unwrap();
    let values: Vec<String> = (0..150).map(|i| format!("({i})")).collect();
    d.query_drop(format!("INSERT INTO big VALUES {}", values.join(",")))
        .await
        .unwrap();
    let rules = cache_rule_for_t(&schema, "max_stale = \"30s\"");
    let cfg = |c: &mut Config| {
        c.rules = rules.clone();
        if remote {
            c.l2.validate_hits = ValidateHits::Remote;
        }
    };
    let a = proxy(&redis.url(), cfg).await;
    let b = if from_l2 {
        let b = proxy(&redis.url(), cfg).await;
        let mut cb = b.conn(&schema).await;
        let v = q(&mut cb, prepared).await;
        assert_eq!(v.0, 0);
        wait_for("B's entry", LAG_BOUND, || {
            !redis.keys("qcache:e:*").is_empty()
        })
        .await;
        Some(b)
    } else {
        None
    };
    let mut a1 = a.conn(&schema).await;
    let v = q(&mut a1, prepared).await;
    assert_eq!(v.0, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), u64::from(from_l2));
    let mut a3 = a.conn(&schema).await;
    a3.query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    let cache = a.running.shared.cache.clone();
    assert!(cache.entries().iter().all(|e| !e.current));
    let refresh = tokio::spawn(async move {
        let v = q(&mut a1, prepared).await;
        v.0
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while cache.fills_in_flight() == 0 {
        assert!(Instant::now() < deadline, "no refresh started");
        assert!(
            !refresh.is_finished(),
            "the refresh ended before it was seen"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut a2 = a.conn(&schema).await;
    let seen = q(&mut a2, prepared).await;
    assert_eq!(refresh.await.unwrap(), 1, "the refresh reads the new row");
    drop(b);
    seen.0 == 0
}

/// Issue #38 part 2 through L2: a DDL made directly reaches an instance through its binlog
/// tail; until its catalog reload lands (slowed by 300 ms on A, `Fault::SlowCatalogReload`)
/// what it named is `ddl_pending` there, and no read of it is served — neither A's own L1
/// entry nor the L2 entry B filled before the DDL — so every read shows the new column.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_from_the_binlog_is_pending_through_l2_too() {
    use qcache::faults::Fault;
    let redis = Redis::start();
    let schema = setup("l2_ddl_pending", 1).await;
    let binlog = |c: &mut Config| c.invalidation.binlog = BinlogMode::On;
    let a = proxy(&redis.url(), binlog).await;
    let b = proxy(&redis.url(), binlog).await;
    // Until its tail has caught up an instance serves no hit, L2's neither.
    for p in [&a, &b] {
        let tail = p
            .running
            .shared
            .binlog
            .clone()
            .expect("binlog tail running");
        assert!(
            tail.wait_until_connected(Duration::from_secs(20)).await,
            "binlog stream did not connect: {:?}",
            tail.status()
        );
    }
    // And L2 readable at both: the bumps of a tail's start, queued before L2 was, are raised
    // first (`policy::l2::readable`).
    wait_for("L2 readable at both", LAG_BOUND, || {
        l2(&a).usable() && l2(&b).usable()
    })
    .await;
    let mut cb = b.conn(&schema).await;
    let rows: Vec<mysql_async::Row> = cb.query("SELECT * FROM t").await.unwrap();
    assert_eq!(rows[0].len(), 2);
    wait_for("B's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    // A is served B's fill: the read takes the L2 path.
    let mut ca = a.conn(&schema).await;
    let rows: Vec<mysql_async::Row> = ca.query("SELECT * FROM t").await.unwrap();
    assert_eq!(rows[0].len(), 2);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    let shared = &a.running.shared;
    shared
        .cache
        .versions()
        .faults
        .set(Fault::SlowCatalogReload, true);
    let mut d = common::direct_to(&schema).await;
    d.query_drop("ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 5")
        .await
        .unwrap();
    wait_for("A's tail to see the DDL", LAG_BOUND, || {
        shared.catalog.ddl_pending_any()
    })
    .await;
    let served = || shared.cache.stats().hits() + stat(&a, "Qcache_l2_hits");
    for _ in 0..3 {
        let before = served();
        let rows: Vec<mysql_async::Row> = ca.query("SELECT * FROM t").await.unwrap();
        assert_eq!(
            rows[0].len(),
            3,
            "a read served the shape from before the DDL"
        );
        // Nothing is served while the DDL is pending (a machine slow enough that the
        // reload landed meanwhile proves nothing either way).
        if shared.catalog.ddl_pending_any() {
            assert_eq!(
                served(),
                before,
                "a read was served while the DDL was pending"
            );
        }
    }
    let status: Vec<(String, String)> = ca.query("SHOW QCACHE STATUS").await.unwrap();
    let pending = status
        .iter()
        .find(|(k, _)| k == "Qcache_not_cached_ddl_pending")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    assert!(
        pending.is_some_and(|n| n >= 1),
        "no read was refused as ddl_pending: {pending:?}"
    );
    // B (its reloads not slowed) reads the new shape too.
    let rows: Vec<mysql_async::Row> = cb.query("SELECT * FROM t").await.unwrap();
    assert_eq!(rows[0].len(), 3);
}

/// An entry copied into L1 from an L2 hit carries this instance's rule for the read, as an
/// entry filled from the server does (`Session::local_entry`): here the rule's TTL. B has no
/// rule and fills L2; A's rule gives the read a 1 s TTL, so A's copy expires after 1 s and
/// A asks L2 again rather than serve its copy on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_copy_keeps_the_local_rules_ttl() {
    l2_copy_keeps_the_rules_ttl(false).await;
}

/// The same through the binary protocol: an execute's L2 hit is dressed by the same
/// `local_entry` as a text read's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_l2_copy_keeps_the_local_rules_ttl_prepared() {
    l2_copy_keeps_the_rules_ttl(true).await;
}

/// `SELECT v FROM t WHERE id = ?` as text or as an execute of a prepared statement.
async fn read_v_as(c: &mut mysql_async::Conn, id: i64, prepared: bool) -> i64 {
    if !prepared {
        return read_v(c, id).await;
    }
    c.exec_first::<i64, _, _>("SELECT v FROM t WHERE id = ?", (id,))
        .await
        .expect("execute through qcache")
        .expect("a row")
}

async fn l2_copy_keeps_the_rules_ttl(prepared: bool) {
    let redis = Redis::start();
    let schema = setup(
        if prepared {
            "l2_rule_ttl_ps"
        } else {
            "l2_rule_ttl"
        },
        1,
    )
    .await;
    let rules = cache_rule_for_t(&schema, "ttl = \"1s\"");
    let a = proxy(&redis.url(), |c| c.rules = rules).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v_as(&mut cb, 1, prepared).await, 0);
    wait_for("B's entry", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(read_v_as(&mut ca, 1, prepared).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    // Within the TTL: A's own copy.
    assert_eq!(read_v_as(&mut ca, 1, prepared).await, 0);
    assert_eq!(stat(&a, "Qcache_l2_hits"), 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Past it: the copy is gone, L2 (which B's entry lives in, without a rule) serves again.
    assert_eq!(read_v_as(&mut ca, 1, prepared).await, 0);
    assert_eq!(
        stat(&a, "Qcache_l2_hits"),
        2,
        "A served its L2 copy past its rule's TTL (prepared: {prepared})"
    );
}

mod rawclient;

/// Adversary 13 guard: long data after an execute served from L2 (another instance's fill)
/// and after its L1 copy is read as directly: the served execute is sent again first
/// (`Prepared::replay_before_long_data`), whichever level served it. B's server last ran a
/// LONGLONG; without the replay the string sent as long data would be read as an integer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_after_an_l2_hit_reads_as_directly() {
    use qcache::protocol::packets::com;
    use qcache::protocol::response::Expect;
    let redis = Redis::start();
    let schema = setup("l2_longdata", 3).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    const SQL: &[u8] = b"SELECT ? AS e, v FROM t WHERE id = 1";
    fn exec(id: u32, ty: u8, value: &[u8]) -> Vec<u8> {
        let mut e = vec![com::STMT_EXECUTE];
        e.extend_from_slice(&id.to_le_bytes());
        e.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, ty, 0]);
        e.extend_from_slice(value);
        e
    }
    let s8: &[u8] = b"\x0812345678";
    let five = 5i64.to_le_bytes();
    // Steps on one connection: (the answer's text) for each, long data answering nothing.
    async fn run(addr: &str, schema: &str, s8: &[u8], five: &[u8]) -> Vec<String> {
        let mut c = rawclient::Raw::connect(addr, "root", schema, false).await;
        let mut p = vec![com::STMT_PREPARE];
        p.extend_from_slice(SQL);
        let (_, resp) = c.command(&p, Expect::Prepare).await;
        let id = resp.prepared.expect("prepared").0;
        let mut long = vec![com::STMT_SEND_LONG_DATA];
        long.extend_from_slice(&id.to_le_bytes());
        long.extend_from_slice(&[0, 0]);
        long.extend_from_slice(b"hijklmn");
        let steps = [
            (exec(id, 0x08, five), Expect::Results),
            (exec(id, 0xfe, s8), Expect::Results),
            (long.clone(), Expect::Nothing),
            (exec(id, 0xfe, &[]), Expect::Results),
            (exec(id, 0x08, five), Expect::Results),
            (exec(id, 0xfe, s8), Expect::Results),
            (long, Expect::Nothing),
            (exec(id, 0xfe, &[]), Expect::Results),
        ];
        let mut out = Vec::new();
        for (payload, expect) in steps {
            let (pk, _) = c.command(&payload, expect).await;
            let text: Vec<String> = pk
                .iter()
                .map(|p| String::from_utf8_lossy(&p.payload).into_owned())
                .collect();
            out.push(format!("{text:?}").replace(schema, "{db}"));
        }
        out
    }
    // A fills the STRING execute's entry; B's first STRING execute is an L2 hit, its
    // second a hit on the L1 copy.
    let mut ca = rawclient::Raw::connect(&a.addr_string(), "root", &schema, false).await;
    let mut p = vec![com::STMT_PREPARE];
    p.extend_from_slice(SQL);
    let (_, resp) = ca.command(&p, Expect::Prepare).await;
    let id = resp.prepared.expect("prepared").0;
    let (_, resp) = ca.command(&exec(id, 0xfe, s8), Expect::Results).await;
    assert!(!resp.error);
    wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let want = run(&common::db().addr(), &schema, s8, &five).await;
    let l1_before = local_hits_of(&b);
    let got = run(&b.addr_string(), &schema, s8, &five).await;
    assert_eq!(
        stat(&b, "Qcache_l2_hits"),
        1,
        "the first STRING execute: an L2 hit"
    );
    assert!(
        local_hits_of(&b) > l1_before,
        "the second: a hit on the L1 copy"
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g, w,
            "step {i}: through B (left) differs from the server (right)"
        );
    }
}

fn local_hits_of(p: &TestProxy) -> u64 {
    p.running.shared.cache.stats().hits()
}

/// Row order is data through L2 too (adversary round 23): B's entry of an unordered read
/// pinned to one slice, served to A from L2, is not kept valid by a write to another slice,
/// which moves the server's plan (index d to index c) and with it which row `LIMIT 1` keeps.
/// The slice decision is made where the entry is filled; L2 carries its stamps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unordered_read_from_l2_follows_a_plan_moved_by_another_slice() {
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_order").await;
    let mut d = common::direct_to(&schema).await;
    for s in [
        "CREATE TABLE o (id INT PRIMARY KEY, c INT, d INT, KEY (c), KEY (d))",
        "INSERT INTO o VALUES (1, 5, 30), (2, 5, 20), (3, 5, 10), (4, 5, 0), (5, 5, 0), \
         (6, 5, 0), (7, 5, 0), (8, 5, 0), (9, 5, 0), (10, 5, 0)",
        "INSERT INTO o SELECT seq + 100, 6, 0 FROM seq_1_to_100",
        "ANALYZE TABLE o",
    ] {
        d.query_drop(s).await.unwrap();
    }
    let a = proxy(&redis.url(), |c: &mut Config| {
        c.invalidation.granularity = Granularity::Row
    })
    .await;
    let b = proxy(&redis.url(), |c: &mut Config| {
        c.invalidation.granularity = Granularity::Row
    })
    .await;
    let read = "SELECT id FROM o WHERE c = 5 AND d > 0 LIMIT 1";
    let one = |rows: Vec<mysql_async::Row>| -> i64 { mysql_async::from_row(rows[0].clone()) };
    let mut cb = b.conn(&schema).await;
    let filled = one(cb.query(read).await.unwrap());
    wait_for("B's entry", Duration::from_secs(10), || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let mut ca = a.conn(&schema).await;
    assert_eq!(one(ca.query(read).await.unwrap()), filled);
    assert_eq!(
        stat(&a, "Qcache_l2_hits"),
        1,
        "A is served B's entry from L2"
    );
    ca.query_drop(format!("INSERT INTO o VALUES {}", "(1001, 6, 1), (1002, 6, 2), (1003, 6, 3), (1004, 6, 4), (1005, 6, 5), (1006, 6, 6), (1007, 6, 7), (1008, 6, 8), (1009, 6, 9), (1010, 6, 10), (1011, 6, 11), (1012, 6, 12), (1013, 6, 13), (1014, 6, 14), (1015, 6, 15), (1016, 6, 16), (1017, 6, 17), (1018, 6, 18), (1019, 6, 19), (1020, 6, 20), (1021, 6, 21), (1022, 6, 22), (1023, 6, 23), (1024, 6, 24), (1025, 6, 25), (1026, 6, 26), (1027, 6, 27), (1028, 6, 28), (1029, 6, 29), (1030, 6, 30), (1031, 6, 31), (1032, 6, 32), (1033, 6, 33), (1034, 6, 34), (1035, 6, 35), (1036, 6, 36), (1037, 6, 37), (1038, 6, 38), (1039, 6, 39), (1040, 6, 40)"))
        .await
        .unwrap();
    let direct = one(d.query(read).await.unwrap());
    assert_eq!(
        one(ca.query(read).await.unwrap()),
        direct,
        "A after the write"
    );
    assert_eq!(
        one(cb.query(read).await.unwrap()),
        direct,
        "B after the write"
    );
}

/// Guard (class 13 through L2): a session that holds table locks gets the server's answer
/// for a table it did not lock (ERROR 1100) even when another instance's entry for the same
/// read sits in L2 (a third instance is served from it meanwhile), text and prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_entries_are_not_served_to_a_locked_session() {
    let redis = Redis::start();
    let schema = setup("l2_locks", 1).await;
    {
        let mut d = common::direct_to(&schema).await;
        d.query_drop("CREATE TABLE u (id INT PRIMARY KEY)")
            .await
            .unwrap();
    }
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    let mut cb = b.conn(&schema).await;
    assert_eq!(read_v(&mut cb, 1).await, 0);
    let filled: Vec<i64> = cb.exec("SELECT v FROM t WHERE id = ?", (1,)).await.unwrap();
    assert_eq!(filled, vec![0]);
    wait_for("B's entries in Redis", LAG_BOUND, || {
        redis.keys("qcache:e:*").len() >= 2
    })
    .await;
    let code = |r: Result<Option<i64>, mysql_async::Error>| match r {
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        other => panic!("expected the server's error, got {other:?}"),
    };
    let mut ca = a.conn(&schema).await;
    ca.query_drop("LOCK TABLES u READ").await.unwrap();
    let text = ca
        .query_first::<i64, _>("SELECT v FROM t WHERE id = 1")
        .await;
    assert_eq!(code(text), Some(1100), "text read under LOCK TABLES");
    let prepared = ca
        .exec_first::<i64, _, _>("SELECT v FROM t WHERE id = ?", (1,))
        .await;
    assert_eq!(
        code(prepared),
        Some(1100),
        "prepared read under LOCK TABLES"
    );
    // The entries were there to serve: a session of a third instance is served from them.
    let c = proxy(&redis.url(), |_| {}).await;
    let mut cc = c.conn(&schema).await;
    assert_eq!(read_v(&mut cc, 1).await, 0);
    assert_eq!(stat(&c, "Qcache_l2_hits"), 1, "B's entry served from L2");
    ca.query_drop("UNLOCK TABLES").await.unwrap();
    assert_eq!(stat(&a, "Qcache_l2_hits"), 0);
}

/// A new user g with SELECT on `obj` of `schema` (`*`: the whole database), and on a table
/// `t2` made here, so that g can still use the database after a REVOKE of `obj`.
async fn user_kept_in(d: &mut mysql_async::Conn, schema: &str, obj: &str) -> String {
    d.query_drop("CREATE TABLE t2 (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let g = common::unique_name("g");
    for sql in [
        format!("CREATE USER '{g}'@'%' IDENTIFIED BY 'pw'"),
        format!("GRANT SELECT ON {schema}.{obj} TO '{g}'@'%'"),
        format!("GRANT SELECT ON {schema}.t2 TO '{g}'@'%'"),
    ] {
        d.query_drop(sql).await.unwrap();
    }
    g
}

/// `read`'s rows as text, or the server's error code.
async fn answer(c: &mut mysql_async::Conn, read: &str) -> String {
    match c.query::<(i64, i64), _>(read).await {
        Ok(rows) => format!("{rows:?}"),
        Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
        Err(e) => panic!("{e}"),
    }
}

/// Adversary L2, privileges under `cache.shared_between_users`: the key leaves the user out
/// and holds the instance's privilege epoch, numbered per instance; an L2 read of a shared
/// key depended only on the every-user stamp, which a REVOKE naming an account does not
/// raise. A fills `t` for g at A's epoch 0; the REVOKE from g through A moves A's epoch; B,
/// started after it, is at epoch 0 too, and a session of g on B found A's entry from before
/// the REVOKE in L2 (rows, where the server answers 1142).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_users_an_instance_started_after_a_revoke_never_serves_from_before_it() {
    let redis = Redis::start();
    let schema = setup("l2_shrev", 2).await;
    let mut d = common::direct_to(&schema).await;
    let g = user_kept_in(&mut d, &schema, "t").await;
    let shared = |c: &mut Config| c.cache.shared_between_users = true;
    let url = |addr: String| format!("mysql://{g}:pw@{addr}/{schema}?prefer_socket=false");
    let read = "SELECT id, v FROM t ORDER BY id";
    let a = proxy(&redis.url(), shared).await;
    let mut ga = mysql_async::Conn::from_url(url(a.addr_string()))
        .await
        .unwrap();
    assert_eq!(answer(&mut ga, read).await, "[(1, 0), (2, 0)]");
    wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let mut ra = a.conn(&schema).await;
    ra.query_drop(format!("REVOKE SELECT ON {schema}.t FROM '{g}'@'%'"))
        .await
        .unwrap();
    let b = proxy(&redis.url(), shared).await;
    let mut gd = mysql_async::Conn::from_url(url(common::db().addr()))
        .await
        .unwrap();
    let want = answer(&mut gd, read).await;
    let mut gb = mysql_async::Conn::from_url(url(b.addr_string()))
        .await
        .unwrap();
    let got = answer(&mut gb, read).await;
    let l2_hits = stat(&b, "Qcache_l2_hits");
    d.query_drop(format!("DROP USER '{g}'@'%'")).await.unwrap();
    assert_eq!(want, "error 1142");
    assert_eq!(
        got, want,
        "a session of g on B, started after the REVOKE (B's L2 hits: {l2_hits})"
    );
}

/// Adversary L2 guard: an entry A filled, served by B from L2 and then from its L1 copy, is
/// byte for byte what the server sends the same session, for a client with and without
/// CLIENT_DEPRECATE_EOF (the column-definitions EOF carries status flags too) and under a
/// sql_mode whose status flags (NO_BACKSLASH_ESCAPES, ANSI_QUOTES) the served session has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_hits_are_the_servers_bytes_with_and_without_deprecate_eof() {
    let redis = Redis::start();
    let schema = setup("l2_wire", 3).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |_| {}).await;
    wait_for("L2 readable at both", LAG_BOUND, || {
        l2(&a).usable() && l2(&b).usable()
    })
    .await;
    let modes = [
        None,
        Some("SET sql_mode = 'NO_BACKSLASH_ESCAPES,ANSI_QUOTES'"),
    ];
    let mut hits = 0;
    let mut n = 0;
    for deprecate_eof in [false, true] {
        for mode in modes {
            n += 1;
            let q = format!("SELECT id, v FROM t WHERE id > -{n} ORDER BY id");
            let connect = |addr: String| {
                let schema = schema.clone();
                async move {
                    let mut c =
                        rawclient::Raw::connect(&addr, "root", &schema, deprecate_eof).await;
                    if let Some(m) = mode {
                        let (_, r) = c.query(m).await;
                        assert!(!r.error, "{m}");
                    }
                    c
                }
            };
            let mut ca = connect(a.addr_string()).await;
            let (_, r) = ca.query(&q).await;
            assert!(!r.error);
            wait_for("A's entry in Redis", LAG_BOUND, || {
                redis.keys("qcache:e:*").len() >= n
            })
            .await;
            let mut cb = connect(b.addr_string()).await;
            let mut direct = connect(common::db().addr()).await;
            for round in ["L2 hit", "L1 copy"] {
                let (got, _) = cb.query(&q).await;
                let (want, _) = direct.query(&q).await;
                assert_eq!(
                    rawclient::Raw::wire(&got),
                    rawclient::Raw::wire(&want),
                    "{round} (deprecate_eof {deprecate_eof}, {mode:?})"
                );
                if round == "L2 hit" {
                    hits += 1;
                }
                assert_eq!(stat(&b, "Qcache_l2_hits"), hits, "{round}: {q}");
            }
        }
    }
}

/// A qcache process of its own sharing `redis_url`: what is numbered per process (a
/// session's private key space) starts over there, as on another pod.
struct OtherProcess {
    child: std::process::Child,
    addr: String,
    _config: tempfile::NamedTempFile,
}

impl OtherProcess {
    fn start(redis_url: &str) -> OtherProcess {
        let d = common::db();
        let mut config = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(
            &mut config,
            format!(
                "[invalidation]\nbinlog = \"off\"\nuser = \"{}\"\npassword = \"{}\"\n\
                 [l2]\nmode = \"on\"\nurl = \"{redis_url}\"\ntimeout = \"500ms\"\n",
                d.user, d.password
            )
            .as_bytes(),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", common::free_port());
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_qcache"))
            .arg("--config")
            .arg(config.path())
            .args([
                "--listen",
                &addr,
                "--upstream",
                &d.addr(),
                "--admin-listen",
                "",
            ])
            .args(["--log-level", "warn"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("cannot start qcache");
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "qcache did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        OtherProcess {
            child,
            addr,
            _config: config,
        }
    }
}

impl Drop for OtherProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Adversary L2, a session's key space of its own: after a sticky privilege change (a
/// database-level one: the server keeps what a session had at its USE) a session connected
/// before it keys apart from every other (`SessionState::make_private`), by a number counted
/// per process, so the first such session of each instance has the same one. gA (on A,
/// connected before the REVOKE) keeps SELECT on the database; gB (on B, another process,
/// connected between the REVOKE and a GRANT) has none; both are made private by the GRANT,
/// under the same generation. gA's read filled L2 under the key gB's read then found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_key_spaces_of_two_processes_never_meet_in_l2() {
    let redis = Redis::start();
    let schema = setup("l2_private", 2).await;
    let mut d = common::direct_to(&schema).await;
    let g = user_kept_in(&mut d, &schema, "*").await;
    let url = |addr: String| format!("mysql://{g}:pw@{addr}/{schema}?prefer_socket=false");
    let read = "SELECT id, v FROM t ORDER BY id";
    let a = proxy(&redis.url(), |_| {}).await;
    let b = OtherProcess::start(&redis.url());
    let conn = |addr: String| {
        let u = url(addr);
        async move { mysql_async::Conn::from_url(u).await.unwrap() }
    };
    let mut ga = conn(a.addr_string()).await;
    assert_eq!(answer(&mut ga, "SELECT id, id FROM t2").await, "[]");
    let mut ra = a.conn(&schema).await;
    ra.query_drop(format!("REVOKE SELECT ON {schema}.* FROM '{g}'@'%'"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut gb = conn(b.addr.clone()).await;
    let mut gd = conn(common::db().addr()).await;
    for c in [&mut gb, &mut gd] {
        assert_eq!(answer(c, "SELECT id, id FROM t2").await, "[]");
    }
    ra.query_drop(format!("GRANT INSERT ON {schema}.* TO '{g}'@'%'"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let filled = answer(&mut ga, read).await;
    wait_for("A's entry in Redis", LAG_BOUND, || {
        !redis.keys("qcache:e:*").is_empty()
    })
    .await;
    let want = answer(&mut gd, read).await;
    let got = answer(&mut gb, read).await;
    d.query_drop(format!("DROP USER '{g}'@'%'")).await.unwrap();
    assert_eq!(filled, "[(1, 0), (2, 0)]", "gA kept SELECT on the database");
    assert_eq!(want, "error 1142");
    assert_eq!(got, want, "gB, on another process, after gA's fill");
}

/// Adversary L2, a privilege change whose notification B never got: B's channel delivers
/// nothing while a database-level REVOKE (sticky: a session keeps what it had at its USE)
/// goes through A. B notices the loss and drops its entries, but learned no change: its
/// session of g connected before the REVOKE (which the server still lets read `t`) and one
/// connected after it (refused) shared a key, and the second was served the first's rows.
/// A loss is now taken as a sticky change reaching every user
/// (`PrivilegeChange::missed`): sessions connected before it keep their entries their own
/// until they reconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_privilege_change_missed_on_the_channel_still_splits_sessions() {
    let redis = Redis::start();
    let schema = setup("l2_privloss", 2).await;
    let mut d = common::direct_to(&schema).await;
    let g = user_kept_in(&mut d, &schema, "*").await;
    let url = |addr: String| format!("mysql://{g}:pw@{addr}/{schema}?prefer_socket=false");
    let read = "SELECT id, v FROM t ORDER BY id";
    let conn = |addr: String| {
        let u = url(addr);
        async move { mysql_async::Conn::from_url(u).await.unwrap() }
    };
    let fwd = forwarder(redis.url()).await;
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&fwd.url, |_| {}).await;
    let mut old = conn(b.addr_string()).await;
    let mut old_direct = conn(common::db().addr()).await;
    for c in [&mut old, &mut old_direct] {
        assert_eq!(answer(c, "SELECT id, id FROM t2").await, "[]");
    }
    fwd.freeze.store(true, std::sync::atomic::Ordering::Release);
    let mut ra = a.conn(&schema).await;
    ra.query_drop(format!("REVOKE SELECT ON {schema}.* FROM '{g}'@'%'"))
        .await
        .unwrap();
    wait_for(
        "B to notice the lost channel",
        Duration::from_secs(8),
        || stat(&b, "Qcache_l2_notify_losses") >= 1,
    )
    .await;
    let mut new = conn(b.addr_string()).await;
    let mut new_direct = conn(common::db().addr()).await;
    let got_old = answer(&mut old, read).await;
    let want_old = answer(&mut old_direct, read).await;
    let got_new = answer(&mut new, read).await;
    let want_new = answer(&mut new_direct, read).await;
    d.query_drop(format!("DROP USER '{g}'@'%'")).await.unwrap();
    assert_eq!(
        want_old, "[(1, 0), (2, 0)]",
        "the server kept the old session's"
    );
    assert_eq!(want_new, "error 1142");
    assert_eq!(got_old, want_old, "g's session on B from before the REVOKE");
    assert_eq!(got_new, want_new, "g's session on B from after the REVOKE");
}

/// Adversary round 30, deferred parent lookups with L2 on: a child write's OK through A
/// must wait for its parent lookup and the raise in Redis of the derived slices it names
/// (`engine::fkslices::timing`: `Deferred` only without L2). B, strict (every hit vouched
/// for by Redis), reads the written customer's history right after each OK, text and
/// prepared, and a fresh instance reads it from L2: each answers as the server does, with
/// A's lookup slowed to 200 ms (`Fault::SlowParentLookups`) so that a lookup left after the
/// OK would still be asleep. B's entry of the written customer's history was a hit just
/// before each write, so the reads compared are those a stale entry would have answered.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_writes_derived_slices_are_raised_in_l2_before_its_ok() {
    use qcache::faults::SLOW_PARENT_LOOKUP;
    let redis = Redis::start();
    let schema = common::fresh_schema("l2_fkdefer").await;
    common::setup(
        &schema,
        &[
            "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, \
             KEY c (customer_id)) ENGINE=InnoDB",
            "CREATE TABLE order_items (order_id INT NOT NULL, product_id INT NOT NULL, \
             qty INT NOT NULL, PRIMARY KEY (order_id, product_id), \
             FOREIGN KEY (order_id) REFERENCES orders (id)) ENGINE=InnoDB",
            "INSERT INTO orders VALUES (1, 1), (2, 2), (3, 1)",
            "INSERT INTO order_items VALUES (1, 1, 1), (2, 1, 1), (3, 2, 2)",
        ],
    )
    .await;
    let history = |c: i64| {
        format!(
            "SELECT o.id, COUNT(*), MAX(i.qty) FROM orders o JOIN order_items i \
             ON i.order_id = o.id WHERE o.customer_id = {c} GROUP BY o.id ORDER BY o.id"
        )
    };
    let prepared = "SELECT o.id, COUNT(*), MAX(i.qty) FROM orders o JOIN order_items i \
                    ON i.order_id = o.id WHERE o.customer_id = ? GROUP BY o.id ORDER BY o.id";
    type Row = (i64, i64, i64);
    let (h1, h2) = (history(1), history(2));
    let a = proxy(&redis.url(), |_| {}).await;
    let b = proxy(&redis.url(), |c: &mut Config| {
        c.l2.validate_hits = ValidateHits::Remote
    })
    .await;
    let (mut ca, mut cb) = (a.conn(&schema).await, b.conn(&schema).await);
    let mut d = common::direct_to(&schema).await;
    a.running
        .shared
        .cache
        .versions()
        .faults
        .set(Fault::SlowParentLookups, true);
    let mut stale = Vec::new();
    let (mut served, mut early) = (0, Vec::new());
    for (round, product) in (10..16).enumerate() {
        // Both instances plan the history reads (A must know the derived column to ask).
        for c in [&mut ca, &mut cb] {
            for h in [&h1, &h2] {
                for _ in 0..2 {
                    let _: Vec<Row> = c.query(h.as_str()).await.unwrap();
                }
            }
            for k in [1, 2] {
                let _: Vec<Row> = c.exec(prepared, (k,)).await.unwrap();
                let _: Vec<Row> = c.exec(prepared, (k,)).await.unwrap();
            }
        }
        a.lookups_settled().await;
        // The entry the write must not leave served: B's, a hit just before.
        let h0 = local_hits_of(&b);
        let _: Vec<Row> = cb.query(h1.as_str()).await.unwrap();
        served += (local_hits_of(&b) > h0) as u32;
        let start = Instant::now();
        ca.query_drop(format!(
            "INSERT INTO order_items VALUES ({}, {product}, {product})",
            [1, 3][round % 2]
        ))
        .await
        .unwrap();
        let took = start.elapsed();
        let want: Vec<Row> = d.query(h1.as_str()).await.unwrap();
        let text: Vec<Row> = cb.query(h1.as_str()).await.unwrap();
        let exec: Vec<Row> = cb.exec(prepared, (1,)).await.unwrap();
        let c = proxy(&redis.url(), |_| {}).await;
        let mut cc = c.conn(&schema).await;
        let fresh: Vec<Row> = cc.query(h1.as_str()).await.unwrap();
        for (what, got) in [
            ("B text", text),
            ("B prepared", exec),
            ("new instance", fresh),
        ] {
            if got != want {
                stale.push(format!("round {round}, {what}: {got:?}, server {want:?}"));
            }
        }
        if took < SLOW_PARENT_LOOKUP {
            early.push(format!("round {round}: {took:?}"));
        }
        let kept: Vec<Row> = cb.query(h2.as_str()).await.unwrap();
        assert_eq!(kept, d.query::<Row, _>(h2.as_str()).await.unwrap());
        c.shutdown().await;
    }
    a.running
        .shared
        .cache
        .versions()
        .faults
        .set(Fault::SlowParentLookups, false);
    assert!(
        stale.is_empty(),
        "stale after A's OK:\n{}",
        stale.join("\n")
    );
    assert!(
        early.is_empty(),
        "OKs that did not wait for the lookup: {}",
        early.join(", ")
    );
    assert!(
        served >= 4,
        "B served customer 1's history before the write in {served} of 6 rounds"
    );
}
