//! The client of `scripts/bench-l2`: reads spread over a fleet of qcache instances (each
//! instance's hit counters read before and after), the hit-ratio curve of one instance, and
//! the cross-instance invalidation lag.
//!
//! ```sh
//! cargo run --release --example l2bench -- load  HOST:PORT[,HOST:PORT…] DB CONNS SECS KEYS point|range
//! cargo run --release --example l2bench -- curve HOST:PORT DB CONNS SECS KEYS point|range [STEP_MS]
//! cargo run --release --example l2bench -- lag   HOST:PORT HOST:PORT DB ROUNDS
//! ```
//!
//! `point` reads `SELECT c FROM sbtest1 WHERE id=K`, `range` reads a 100-row aggregate
//! starting at K; K is uniform over 1..=KEYS. `load` prints
//! `requests seconds qps l1_hits l2_hits hit_ratio`; `curve` prints one
//! `seconds hit_ratio` line per STEP_MS (default 1000) and `time_to_90 S plateau R` (S is
//! `never` when no step reached 0.9; R is the ratio over the last quarter of the run); `lag`
//! writes through the first instance and reads through the second until it sees the write,
//! and prints `p50_ms p99_ms max_ms`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

async fn conn(addr: &str, db: &str) -> Conn {
    let url = format!("mysql://root@{addr}/{db}?prefer_socket=false");
    Conn::new(Opts::from_url(&url).expect("url"))
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

/// (Qcache_hits, Qcache_l2_hits) as the instance reports them.
async fn hits(addr: &str) -> (u64, u64) {
    let mut c = conn(addr, "").await;
    let rows: Vec<(String, String)> = c
        .query("SHOW STATUS LIKE 'Qcache%hits'")
        .await
        .unwrap_or_default();
    let get = |n: &str| {
        rows.iter()
            .find(|(k, _)| k == n)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    let r = (get("Qcache_hits"), get("Qcache_l2_hits"));
    let _ = c.disconnect().await;
    r
}

fn sql(kind: &str, k: u64) -> String {
    match kind {
        "range" => format!(
            "SELECT SUM(k), COUNT(*) FROM sbtest1 WHERE id BETWEEN {k} AND {}",
            k + 99
        ),
        _ => format!("SELECT c FROM sbtest1 WHERE id={k}"),
    }
}

async fn reader(
    addr: String,
    db: String,
    kind: String,
    keys: u64,
    seed: u64,
    until: Instant,
    done: Rc<Cell<u64>>,
) {
    let mut c = conn(&addr, &db).await;
    let mut state = seed;
    while Instant::now() < until {
        let k = next(&mut state) % keys + 1;
        let _: Vec<mysql_async::Row> = c.query(sql(&kind, k)).await.expect("read");
        done.set(done.get() + 1);
    }
    let _ = c.disconnect().await;
}

async fn load(targets: Vec<String>, db: String, conns: usize, secs: f64, keys: u64, kind: String) {
    let mut before = Vec::new();
    for t in &targets {
        before.push(hits(t).await);
    }
    let done = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let tasks = (0..conns).map(|i| {
        reader(
            targets[i % targets.len()].clone(),
            db.clone(),
            kind.clone(),
            keys,
            0x5eed ^ (i as u64 + 1).wrapping_mul(0x1000_0001) ^ start.elapsed().as_nanos() as u64,
            until,
            done.clone(),
        )
    });
    futures::future::join_all(tasks).await;
    let took = start.elapsed().as_secs_f64();
    let (mut l1, mut l2) = (0, 0);
    for (t, b) in targets.iter().zip(&before) {
        let a = hits(t).await;
        l1 += a.0 - b.0;
        l2 += a.1 - b.1;
    }
    let n = done.get();
    println!(
        "{n} {took:.2} {:.0} {l1} {l2} {:.3}",
        n as f64 / took,
        (l1 + l2) as f64 / n.max(1) as f64
    );
}

async fn curve(
    target: String,
    db: String,
    conns: usize,
    secs: f64,
    keys: u64,
    kind: String,
    step: Duration,
) {
    let done = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let tasks = (0..conns).map(|i| {
        reader(
            target.clone(),
            db.clone(),
            kind.clone(),
            keys,
            0xc0ffee ^ (i as u64 + 1).wrapping_mul(0x7000_0003),
            until,
            done.clone(),
        )
    });
    let sampler = {
        let done = done.clone();
        let target = target.clone();
        async move {
            let mut prev = (hits(&target).await, done.get());
            let mut reached = None;
            let mut last = Vec::new();
            let steps = (secs / step.as_secs_f64()).round() as u32;
            for s in 1..=steps {
                tokio::time::sleep_until((start + step * s).into()).await;
                let now = (hits(&target).await, done.get());
                let reqs = now.1 - prev.1;
                let h = (now.0 .0 - prev.0 .0) + (now.0 .1 - prev.0 .1);
                let ratio = h as f64 / reqs.max(1) as f64;
                let at = (step * s).as_secs_f64();
                println!("{at:.2} {ratio:.3}");
                if ratio >= 0.9 && reached.is_none() {
                    reached = Some(at);
                }
                last.push((reqs, h));
                prev = now;
            }
            // The plateau: the hit ratio over the last quarter of the run.
            let tail = &last[last.len() - (last.len() / 4).max(1)..];
            let (r, h) = tail.iter().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
            let plateau = h as f64 / r.max(1) as f64;
            match reached {
                Some(s) => println!("time_to_90 {s:.2} plateau {plateau:.3}"),
                None => println!("time_to_90 never plateau {plateau:.3}"),
            }
        }
    };
    futures::future::join(futures::future::join_all(tasks), sampler).await;
}

async fn lag(a: String, b: String, db: String, rounds: u64) {
    let mut ca = conn(&a, &db).await;
    let mut cb = conn(&b, &db).await;
    ca.query_drop("CREATE TABLE IF NOT EXISTS l2lag (id INT PRIMARY KEY, v BIGINT NOT NULL)")
        .await
        .expect("create");
    ca.query_drop("REPLACE INTO l2lag VALUES (1, 0)")
        .await
        .expect("row");
    let mut lags = Vec::new();
    for i in 1..=rounds as i64 {
        // B holds the current row (a hit).
        for _ in 0..2 {
            let _: Option<i64> = cb
                .query_first("SELECT v FROM l2lag WHERE id = 1")
                .await
                .expect("read");
        }
        ca.query_drop(format!("UPDATE l2lag SET v = {i} WHERE id = 1"))
            .await
            .expect("write");
        let ok = Instant::now();
        loop {
            let v: Option<i64> = cb
                .query_first("SELECT v FROM l2lag WHERE id = 1")
                .await
                .expect("read");
            if v == Some(i) {
                break;
            }
            assert!(
                ok.elapsed() < Duration::from_secs(10),
                "B never saw write {i}"
            );
        }
        lags.push(ok.elapsed().as_secs_f64() * 1e3);
    }
    lags.sort_by(f64::total_cmp);
    let pct = |p: f64| lags[((lags.len() as f64 * p) as usize).min(lags.len() - 1)];
    println!(
        "{:.3} {:.3} {:.3}",
        pct(0.5),
        pct(0.99),
        lags[lags.len() - 1]
    );
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let arg = |i: usize| {
        a.get(i)
            .cloned()
            .unwrap_or_else(|| panic!("missing argument {i}; see the module doc"))
    };
    let num = |i: usize| arg(i).parse::<u64>().expect("a number");
    match arg(0).as_str() {
        "load" => rt.block_on(load(
            arg(1).split(',').map(str::to_string).collect(),
            arg(2),
            num(3) as usize,
            arg(4).parse().expect("seconds"),
            num(5),
            arg(6),
        )),
        "curve" => rt.block_on(curve(
            arg(1),
            arg(2),
            num(3) as usize,
            arg(4).parse().expect("seconds"),
            num(5),
            arg(6),
            Duration::from_millis(a.get(7).map_or(1000, |s| s.parse().expect("step ms"))),
        )),
        "lag" => rt.block_on(lag(arg(1), arg(2), arg(3), num(4))),
        m => panic!("unknown mode {m}"),
    }
}
