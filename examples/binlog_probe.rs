//! End-to-end binlog invalidation lag, for `scripts/bench-binlog`: commits a write directly on
//! the server and polls a cached SELECT of that row through qcache until the new value shows,
//! printing one line per probe: the microseconds from the write's OK to the first read that
//! saw it. The binlog's own timestamps have whole seconds; this has the poll's resolution
//! (one cache hit, well under a millisecond).
//!
//! ```sh
//! cargo run --example binlog_probe -- PROXY_ADDR DIRECT_ADDR DATABASE COUNT PAUSE_MS
//! ```

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

/// A probe whose write is not visible after this long counts as lost.
const GIVE_UP: Duration = Duration::from_secs(30);

async fn connect(addr: &str, db: &str) -> Conn {
    // prefer_socket=false: otherwise mysql_async switches a loopback connection to the
    // server's Unix socket, which would route the "proxied" reads around qcache.
    let url = format!("mysql://root@{addr}/{db}?prefer_socket=false");
    let opts = Opts::from_url(&url).unwrap_or_else(|e| panic!("bad address {addr}: {e}"));
    Conn::new(opts)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
}

async fn qcache_hits(proxy: &mut Conn) -> u64 {
    let row: Option<(String, u64)> = proxy
        .query_first("SHOW STATUS LIKE 'Qcache_hits'")
        .await
        .expect("SHOW STATUS through qcache");
    row.map_or(0, |(_, v)| v)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [proxy_addr, direct_addr, db, count, pause_ms] = args.as_slice() else {
        eprintln!("usage: binlog_probe PROXY_ADDR DIRECT_ADDR DATABASE COUNT PAUSE_MS");
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("COUNT is a number");
    let pause = Duration::from_millis(pause_ms.parse().expect("PAUSE_MS is a number"));

    let mut direct = connect(direct_addr, db).await;
    let mut proxy = connect(proxy_addr, db).await;
    // A table of the probe's own: the load's writes never invalidate its entry, so the only
    // thing that can is the binlog tail reaching the probe's commit.
    let table = format!("qcache_probe_{}", std::process::id());
    direct
        .query_drop(format!(
            "CREATE TABLE {table} (id INT PRIMARY KEY, v BIGINT NOT NULL)"
        ))
        .await
        .expect("create the probe table");
    direct
        .query_drop(format!("INSERT INTO {table} VALUES (1, 0)"))
        .await
        .expect("insert the probe row");
    let select = format!("SELECT v FROM {table} WHERE id = 1");

    let hits_before = qcache_hits(&mut proxy).await;
    let mut stale_polls = 0u64;
    let mut lost = 0u64;
    for i in 1..=count {
        // Fill the entry and make sure it is served from the cache, or the probe would time a
        // miss instead of an invalidation.
        let mut seen: Option<i64> = None;
        let deadline = Instant::now() + GIVE_UP;
        while seen != Some(i as i64 - 1) && Instant::now() < deadline {
            seen = proxy.query_first(&select).await.expect("probe read");
        }
        let _: Option<i64> = proxy.query_first(&select).await.expect("probe read");

        direct
            .query_drop(format!("UPDATE {table} SET v = {i} WHERE id = 1"))
            .await
            .expect("probe write");
        let written = Instant::now();
        loop {
            let v: Option<i64> = proxy.query_first(&select).await.expect("probe read");
            if v == Some(i as i64) {
                println!("{}", written.elapsed().as_micros());
                break;
            }
            stale_polls += 1;
            if written.elapsed() > GIVE_UP {
                lost += 1;
                eprintln!("probe {i}: write not visible through qcache after {GIVE_UP:?}");
                break;
            }
        }
        tokio::time::sleep(pause).await;
    }
    let hits = qcache_hits(&mut proxy).await - hits_before;
    eprintln!(
        "binlog_probe: {count} probes, {lost} lost, {stale_polls} polls served the old value, \
         {hits} cache hits"
    );
    direct
        .query_drop(format!("DROP TABLE {table}"))
        .await
        .expect("drop the probe table");
    // A probe that never saw the old value from the cache measured nothing.
    if lost > 0 || hits < count {
        std::process::exit(1);
    }
}
