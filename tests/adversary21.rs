//! adversary21: patching by default under writes qcache does not see coming. Inserts through
//! qcache from two sessions race with direct inserts (the binlog's) into the same table and
//! with readers: once the binlog has caught up, the cached count and sum are the server's
//! (a patch that missed a direct row must not outlive that row's binlog event), and while
//! it races no answer counts fewer rows than were acknowledged through qcache.

mod common;
use common::{setup, status};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;

const TABLE: &[&str] =
    &["CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, v INT NULL)"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn direct_inserts_racing_patches_leave_the_servers_answer() {
    let schema = common::fresh_schema("adv21_race").await;
    setup(&schema, TABLE).await;
    let p = common::proxy(|c| {
        c.cache.patch_aggregates = true;
        c.cache.verify_patched = 0.0;
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.running.shared.catalog.is_loaded() {
        assert!(Instant::now() < deadline, "catalog not loaded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let q = "SELECT k, COUNT(*), SUM(v) FROM t GROUP BY k";
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let mut c = p.conn(&schema).await;
        let (acked, done) = (acked.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !done.load(Ordering::SeqCst) {
                let lo = acked.load(Ordering::SeqCst);
                let rows: Vec<(i64, u64, Option<String>)> = if (n + r).is_multiple_of(2) {
                    c.query(q).await.unwrap()
                } else {
                    c.exec(q, ()).await.unwrap()
                };
                // Group 1 holds qcache's inserts (v = 1 each): never fewer than acknowledged.
                let mine = rows.iter().find(|r| r.0 == 1).map_or(0, |r| r.1);
                assert!(mine >= lo, "group 1 counts {mine}, {lo} acknowledged");
                for (k, count, sum) in &rows {
                    let sum: u64 = sum.as_deref().map_or(0, |s| s.parse().unwrap());
                    assert_eq!(
                        sum,
                        count * (*k as u64),
                        "SUM(v) = k * COUNT(*) in group {k}"
                    );
                }
                n += 1;
            }
        }));
    }
    let mut writers = Vec::new();
    for _ in 0..2 {
        let mut c = p.conn(&schema).await;
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            for _ in 0..30 {
                c.query_drop("INSERT INTO t (k, v) VALUES (1, 1)")
                    .await
                    .unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let mut d = common::direct_to(&schema).await;
    writers.push(tokio::spawn(async move {
        for i in 0..30 {
            let k = 2 + i % 2;
            d.query_drop(format!("INSERT INTO t (k, v) VALUES ({k}, {k})"))
                .await
                .unwrap();
        }
    }));
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        r.await.unwrap();
    }
    let mut c = p.conn(&schema).await;
    let mut d = common::direct_to(&schema).await;
    let want: Vec<(i64, u64, Option<String>)> = d.query(q).await.unwrap();
    assert_eq!(want.iter().map(|r| r.1).sum::<u64>(), 90);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<(i64, u64, Option<String>)> = c.query(q).await.unwrap();
        let got_b: Vec<(i64, u64, Option<String>)> = c.exec(q, ()).await.unwrap();
        if got == want && got_b == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the binlog caught up qcache still answers {got:?} / {got_b:?}, the server {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let patched = status(&mut c, "Qcache_patched").await;
    println!("patched: {patched}");
    assert!(
        patched > 0,
        "some inserts through qcache patched the grouped entry"
    );
}
