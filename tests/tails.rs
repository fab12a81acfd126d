//! A fleet's binlog tails (`l2.binlog_tails`, issue #38): three real qcache processes share a
//! private Redis in front of a private binlog-enabled mariadbd. With one slot, the server has
//! ONE `Binlog Dump` thread; killing the tail hands the stream to a survivor within the
//! stated bound, and writes made directly during and after the takeover are seen by the
//! survivors (no read more than the bound behind a write acknowledged before it); a graceful
//! stop hands over at once; with Redis gone, every instance streams on its own.
//!
//! `QCACHE_TAILS_TEST_K=0` runs the same tests with the lease off (every instance streams):
//! they must fail, on the stream count.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::redis::Redis;
use common::TestDb;
use mysql_async::prelude::Queryable;

/// The takeover bound this branch states (docs/fleet.md): lease 1 s + one acquire pace +
/// opening the stream. Measured figures are printed.
const TAKEOVER_BOUND: Duration = Duration::from_millis(2000);
/// `invalidation.max_lag` in these tests.
const MAX_LAG: Duration = Duration::from_millis(500);
/// How far behind a direct write a read through a survivor may be: `max_lag` of silence
/// before its hits stop, one heartbeat period, and scheduling slack on a busy machine.
const READ_BOUND: Duration = Duration::from_millis(1000);

fn slots() -> u32 {
    std::env::var("QCACHE_TAILS_TEST_K")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

struct Instance {
    child: Option<Child>,
    port: u16,
    log: std::path::PathBuf,
}

impl Instance {
    fn start(db: &TestDb, redis: &Redis, k: u32, n: usize) -> Instance {
        let port = common::free_port();
        let log = std::env::temp_dir().join(format!(
            "qcache-tails-{}-{n}-{port}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_qcache"))
            .env_clear()
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", "", "--upstream", &db.addr()])
            .args(["--l2-mode", "on", "--l2-url", &redis.url()])
            .args(["--log-level", "info"])
            .args(["--set", &format!("l2.binlog_tails={k}")])
            .args(["--set", "invalidation.binlog=on"])
            .args([
                "--set",
                &format!("invalidation.max_lag={}ms", MAX_LAG.as_millis()),
            ])
            .args(["--set", &format!("invalidation.user={}", db.user)])
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("start qcache");
        Instance {
            child: Some(child),
            port,
            log,
        }
    }

    fn url(&self, db: &TestDb, schema: &str) -> String {
        format!(
            "mysql://{}@127.0.0.1:{}/{schema}?prefer_socket=false",
            db.user, self.port
        )
    }

    async fn conn(&self, db: &TestDb, schema: &str) -> mysql_async::Conn {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match mysql_async::Conn::from_url(self.url(db, schema)).await {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => {
                    panic!(
                        "qcache on {} never answered: {e}\n{}",
                        self.port,
                        self.log_text()
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn term(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn status_of(c: &mut mysql_async::Conn) -> HashMap<String, String> {
    let rows: Vec<(String, String)> = c.query("SHOW QCACHE STATUS").await.unwrap();
    rows.into_iter().collect()
}

async fn dumps(direct: &mut mysql_async::Conn) -> u64 {
    direct
        .query_first::<u64, _>(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'",
        )
        .await
        .unwrap()
        .unwrap_or(0)
}

/// Waits until the server has `want` dump threads and as many instances say they stream;
/// then checks it stays so for a second. Returns the statuses.
async fn settle(
    direct: &mut mysql_async::Conn,
    conns: &mut [mysql_async::Conn],
    want: u64,
    within: Duration,
) -> Vec<HashMap<String, String>> {
    let deadline = Instant::now() + within;
    let mut last = (0, Vec::new());
    while Instant::now() < deadline {
        let n = dumps(direct).await;
        let mut st = Vec::new();
        for c in conns.iter_mut() {
            st.push(status_of(c).await);
        }
        let tailing = st.iter().filter(|s| s["Qcache_l2_tailing"] == "1").count() as u64;
        let connected = st
            .iter()
            .filter(|s| s["Qcache_binlog"] == "CONNECTED")
            .count() as u64;
        // With one slot, every instance names the tail (its heartbeat heard).
        let tails: Vec<&String> = st
            .iter()
            .filter(|s| s["Qcache_l2_tailing"] == "1")
            .map(|s| &s["Qcache_l2_instance"])
            .collect();
        let named = want != 1
            || st
                .iter()
                .all(|s| tails.first().is_some_and(|t| s["Qcache_l2_tails"] == **t));
        if n == want && tailing == want && connected == want && named {
            // Stable?
            let mut steady = true;
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                steady &= dumps(direct).await == want;
            }
            if steady {
                return st;
            }
        }
        last = (n, st);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let roles: Vec<String> = last
        .1
        .iter()
        .map(|s| format!("{} tailing={}", s["Qcache_binlog"], s["Qcache_l2_tailing"]))
        .collect();
    panic!(
        "wanted {want} binlog stream(s); the server has {} Binlog Dump thread(s); instances: {roles:?}",
        last.0
    );
}

async fn fleet(k: u32) -> (TestDb, Redis, Vec<Instance>, String) {
    common::init_tracing();
    let db = common::own_server();
    let redis = Redis::start();
    let mut direct = mysql_async::Conn::from_url(db.url("")).await.unwrap();
    let schema = common::unique_name("tails");
    direct
        .query_drop(format!("CREATE DATABASE {schema}"))
        .await
        .unwrap();
    direct
        .query_drop(format!(
            "CREATE TABLE {schema}.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    direct
        .query_drop(format!("INSERT INTO {schema}.t VALUES (1, 0)"))
        .await
        .unwrap();
    let instances = (0..3).map(|n| Instance::start(&db, &redis, k, n)).collect();
    (db, redis, instances, schema)
}

const READ: &str = "SELECT v FROM t WHERE id = 1";

async fn read(c: &mut mysql_async::Conn) -> i64 {
    c.query_first::<i64, _>(READ).await.unwrap().unwrap()
}

/// One tail for three instances; the tail killed; a survivor takes over within the bound;
/// direct writes before, during and after are seen by the survivors within READ_BOUND.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_stream_for_three_and_takeover_after_kill() {
    let k = slots();
    let (db, _redis, mut inst, schema) = fleet(k).await;
    let mut direct = mysql_async::Conn::from_url(db.url(&schema)).await.unwrap();
    let mut conns = Vec::new();
    for i in &inst {
        conns.push(i.conn(&db, &schema).await);
    }
    let st = settle(&mut direct, &mut conns, 1, Duration::from_secs(15)).await;
    let standbys = st
        .iter()
        .filter(|s| s["Qcache_binlog"] == "STANDBY")
        .count();
    assert_eq!(standbys, 2, "{st:?}");
    let tail = st
        .iter()
        .position(|s| s["Qcache_l2_tailing"] == "1")
        .unwrap();
    // Every instance names the tail.
    for s in &st {
        assert_eq!(
            s["Qcache_l2_tails"], st[tail]["Qcache_l2_instance"],
            "{s:?}"
        );
    }
    eprintln!("one Binlog Dump for three instances; the tail is instance {tail}");

    // Warm every instance, then a direct write reaches all of them.
    for c in conns.iter_mut() {
        assert_eq!(read(c).await, 0);
        assert_eq!(read(c).await, 0);
    }
    direct
        .query_drop("UPDATE t SET v = 1 WHERE id = 1")
        .await
        .unwrap();
    let acked = Instant::now();
    for (n, c) in conns.iter_mut().enumerate() {
        loop {
            if read(c).await == 1 {
                break;
            }
            assert!(
                acked.elapsed() < READ_BOUND,
                "instance {n} never saw the write"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    eprintln!(
        "a direct write seen by every instance after {:?}",
        acked.elapsed()
    );

    // Readers on the survivors, a direct writer, and the tail killed in the middle.
    let survivors: Vec<usize> = (0..3).filter(|&i| i != tail).collect();
    let writes: Arc<Mutex<Vec<(Instant, i64)>>> = Arc::new(Mutex::new(vec![(acked, 1)]));
    let reads: Arc<Mutex<Vec<(usize, Instant, i64)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for &s in &survivors {
        let mut c = inst[s].conn(&db, &schema).await;
        let (reads, stop) = (reads.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let v = read(&mut c).await;
                reads.lock().unwrap().push((s, started, v));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
    }
    let writer = {
        let (writes, stop) = (writes.clone(), stop.clone());
        let mut w = mysql_async::Conn::from_url(db.url(&schema)).await.unwrap();
        tokio::spawn(async move {
            let mut v = 2;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                w.query_drop(format!("UPDATE t SET v = {v} WHERE id = 1"))
                    .await
                    .unwrap();
                writes.lock().unwrap().push((Instant::now(), v));
                v += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed = Instant::now();
    inst[tail].kill();
    // Takeover: a survivor streams (its stream connected) and names itself the tail.
    let mut took = None;
    let mut new_tail = None;
    while killed.elapsed() < Duration::from_secs(10) {
        for &s in &survivors {
            let st = status_of(&mut conns[s]).await;
            if st["Qcache_l2_tailing"] == "1" && st["Qcache_binlog"] == "CONNECTED" {
                took.get_or_insert(killed.elapsed());
                new_tail.get_or_insert(s);
            }
        }
        if took.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = took.unwrap_or_else(|| {
        panic!(
            "no survivor took over within 10 s\n{}",
            inst[survivors[0]].log_text()
        )
    });
    // When the other survivor hears the new tail (its hits may resume).
    let other = survivors
        .iter()
        .copied()
        .find(|&s| Some(s) != new_tail)
        .unwrap();
    let mut heard = None;
    while killed.elapsed() < Duration::from_secs(10) {
        let st = status_of(&mut conns[other]).await;
        if st["Qcache_l2_tails"]
            == status_of(&mut conns[new_tail.unwrap()]).await["Qcache_l2_instance"]
        {
            heard = Some(killed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "TAKEOVER: tail killed → instance {} streaming after {took:?}; the other survivor hears it after {heard:?}",
        new_tail.unwrap()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    writer.await.unwrap();

    // Every read against every write acknowledged before it started.
    let writes = writes.lock().unwrap().clone();
    let reads = reads.lock().unwrap().clone();
    let mut behind = 0;
    let mut stale = Vec::new();
    let mut worst = Duration::ZERO;
    for &(s, started, v) in &reads {
        // The oldest write newer than what was read, acknowledged before the read began.
        if let Some(&(ack, w)) = writes.iter().find(|(ack, w)| *w > v && *ack < started) {
            behind += 1;
            let by = started - ack;
            worst = worst.max(by);
            if by > READ_BOUND {
                stale.push((s, v, w, by));
            }
        }
    }
    eprintln!(
        "{} reads through the survivors, {} direct writes: {behind} behind a write (within the lag), worst {worst:?}, {} stale (more than {READ_BOUND:?} behind)",
        reads.len(),
        writes.len(),
        stale.len()
    );
    assert!(stale.is_empty(), "stale reads: {stale:?}");
    // And at the end, every survivor serves the last write.
    let last = writes.last().unwrap().1;
    for &s in &survivors {
        assert_eq!(read(&mut conns[s]).await, last, "instance {s}");
    }
    // Still one stream.
    let mut live: Vec<mysql_async::Conn> = Vec::new();
    for &s in &survivors {
        live.push(inst[s].conn(&db, &schema).await);
    }
    settle(&mut direct, &mut live, 1, Duration::from_secs(10)).await;
    assert!(
        took <= TAKEOVER_BOUND,
        "takeover took {took:?}, over the stated {TAKEOVER_BOUND:?}"
    );
}

/// SIGTERM on the tail frees its slot at once: a standby streams well within the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_hands_over_quickly() {
    let k = slots();
    let (db, _redis, mut inst, schema) = fleet(k).await;
    let mut direct = mysql_async::Conn::from_url(db.url(&schema)).await.unwrap();
    let mut conns = Vec::new();
    for i in &inst {
        conns.push(i.conn(&db, &schema).await);
    }
    let st = settle(&mut direct, &mut conns, 1, Duration::from_secs(15)).await;
    let tail = st
        .iter()
        .position(|s| s["Qcache_l2_tailing"] == "1")
        .unwrap();
    let stopped = Instant::now();
    inst[tail].term();
    let stop_took = stopped.elapsed();
    let survivors: Vec<usize> = (0..3).filter(|&i| i != tail).collect();
    let mut took = None;
    while stopped.elapsed() < Duration::from_secs(10) && took.is_none() {
        for &s in &survivors {
            let st = status_of(&mut conns[s]).await;
            if st["Qcache_l2_tailing"] == "1" && st["Qcache_binlog"] == "CONNECTED" {
                took = Some(stopped.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = took.expect("no survivor took over after a graceful stop");
    eprintln!("HANDOVER: SIGTERM → a survivor streaming after {took:?} (the process exited after {stop_took:?})");
    assert!(took < Duration::from_millis(1000), "handover took {took:?}");
}

/// Redis killed: nobody can hear the channel, so every instance streams on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_redis_every_instance_streams() {
    let k = slots();
    let (db, mut redis, inst, schema) = fleet(k).await;
    let mut direct = mysql_async::Conn::from_url(db.url(&schema)).await.unwrap();
    let mut conns = Vec::new();
    for i in &inst {
        conns.push(i.conn(&db, &schema).await);
    }
    settle(&mut direct, &mut conns, 1, Duration::from_secs(15)).await;
    redis.kill();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(10);
    let mut n = 0;
    while Instant::now() < deadline {
        n = dumps(&mut direct).await;
        if n == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "Redis killed: {n} Binlog Dump threads after {:?}",
        killed.elapsed()
    );
    assert_eq!(n, 3, "every instance streams on its own without Redis");
    // A direct write is seen everywhere through each instance's own stream.
    for c in conns.iter_mut() {
        let _ = read(c).await;
        let _ = read(c).await;
    }
    direct
        .query_drop("UPDATE t SET v = 42 WHERE id = 1")
        .await
        .unwrap();
    let acked = Instant::now();
    for (i, c) in conns.iter_mut().enumerate() {
        while read(c).await != 42 {
            assert!(
                acked.elapsed() < READ_BOUND,
                "instance {i} never saw the write"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    drop(inst);
}
