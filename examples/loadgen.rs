//! A closed-loop load generator with redis-benchmark's client model, for MySQL point selects
//! and Redis GETs alike: one thread, one event loop, N connections with one request in flight
//! each. Comparing a server's CPU per request needs the same client on both sides: sysbench
//! runs a thread per connection, so every answer wakes a sleeping thread, a cost
//! redis-benchmark's event loop mostly does not impose on the server it measures.
//!
//! ```sh
//! cargo run --release --example loadgen -- mysql 127.0.0.1:3307 root test 50 10 10000
//! cargo run --release --example loadgen -- redis-fill 127.0.0.1:6379 - - 0 0 10000
//! cargo run --release --example loadgen -- redis 127.0.0.1:6379 - - 50 10 10000
//! ```
//!
//! Arguments: protocol, address, user, database, connections, seconds, keys. A MySQL address
//! that starts with `/` is a Unix socket path (qcache's `server.socket`). MySQL requests
//! are `SELECT c FROM sbtest1 WHERE id=K` (sysbench's point select, table sbtest1 prepared
//! by sysbench); `mysql-ps` prepares `SELECT c FROM sbtest1 WHERE id=?` once per connection
//! and executes it with K (types sent with the first execute only, as libmysqlclient does).
//! Redis requests are `GET key:K` (`redis-fill` SETs the keys first, outside the measured
//! runs); K is uniform over 1..=keys. Every connection logs in before the measured seconds
//! start. Prints `requests seconds rate`.
//!
//! `LOADGEN_REQUESTS=N` (MySQL only) ends the run after exactly N requests over all
//! connections instead of after the seconds (`scripts/bench-callgrind` counts instructions
//! per request that way); `LOADGEN_SEQ=1` asks keys 1, 2, … in turn instead of at random
//! (with one connection and N = keys, each key once: a cache fill).

#[path = "../tests/rawclient/mod.rs"]
mod rawclient;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use qcache::protocol::packets::com;
use qcache::protocol::response::{Expect, Response, Step};

/// Splitmix64: a cheap, deterministic key stream per connection.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Connections count themselves in, then wait for the measured window to open: with
/// hundreds of connections, logging in takes seconds that must not count as load.
async fn start(ready: &Cell<u64>, go: &mut watch::Receiver<Option<Instant>>) -> Instant {
    ready.set(ready.get() + 1);
    let until = go
        .wait_for(Option::is_some)
        .await
        .expect("the run was abandoned");
    until.expect("checked")
}

/// What ends a run and which keys it asks, shared by its connections (one thread).
struct Plan {
    keys: u64,
    /// Requests still to send when the run is bounded by count (`LOADGEN_REQUESTS`).
    left: Option<Cell<u64>>,
    /// Keys in turn (`LOADGEN_SEQ`): the next one.
    seq: Option<Cell<u64>>,
}

impl Plan {
    /// Whether to send another request, taking it from the count.
    fn more(&self, until: Instant) -> bool {
        match &self.left {
            Some(left) if left.get() == 0 => false,
            Some(left) => {
                left.set(left.get() - 1);
                true
            }
            None => Instant::now() < until,
        }
    }

    fn key(&self, state: &mut u64) -> u64 {
        match &self.seq {
            Some(seq) => {
                let k = seq.get();
                seq.set(k % self.keys + 1);
                k
            }
            None => next(state) % self.keys + 1,
        }
    }
}

/// COM_STMT_EXECUTE of a one-parameter statement with a BIGINT value; `types` sends the
/// parameter's type (new-params-bound = 1).
fn execute_packet(out: &mut Vec<u8>, id: u32, k: u64, types: bool) {
    out.clear();
    out.push(com::STMT_EXECUTE);
    out.extend_from_slice(&id.to_le_bytes());
    out.push(0); // no cursor
    out.extend_from_slice(&1u32.to_le_bytes()); // iteration count
    out.push(0); // null bitmap: one parameter, not NULL
    out.push(u8::from(types));
    if types {
        out.extend_from_slice(&[0x08, 0x00]); // MYSQL_TYPE_LONGLONG, signed
    }
    out.extend_from_slice(&k.to_le_bytes());
}

#[allow(clippy::too_many_arguments)]
async fn mysql_conn(
    addr: String,
    user: String,
    db: String,
    prepared: bool,
    plan: Rc<Plan>,
    seed: u64,
    ready: Rc<Cell<u64>>,
    mut go: watch::Receiver<Option<Instant>>,
    done: Rc<Cell<u64>>,
) {
    let mut c = rawclient::Raw::connect(&addr, &user, &db, true).await;
    let stmt = if prepared {
        let mut p = vec![com::STMT_PREPARE];
        p.extend_from_slice(b"SELECT c FROM sbtest1 WHERE id=?");
        let (_, r) = c.command(&p, Expect::Prepare).await;
        let (id, _, _) = r.prepared.expect("the point select prepares");
        Some(id)
    } else {
        None
    };
    let until = start(&ready, &mut go).await;
    let mut state = seed;
    let mut sql = Vec::with_capacity(64);
    let mut first = true;
    while plan.more(until) {
        let k = plan.key(&mut state);
        match stmt {
            Some(id) => execute_packet(&mut sql, id, k, std::mem::take(&mut first)),
            None => {
                sql.clear();
                sql.push(com::QUERY);
                sql.extend_from_slice(format!("SELECT c FROM sbtest1 WHERE id={k}").as_bytes());
            }
        }
        c.send(0, &sql).await;
        let mut r = Response::new(Expect::Results, c.deprecate_eof());
        loop {
            let p = c.read().await.expect("the server closed mid-response");
            match r.feed(&p.payload).expect("well-formed response") {
                Step::More => {}
                Step::Done => break,
                Step::LocalInfile => panic!("unexpected LOCAL INFILE request"),
            }
        }
        assert!(!r.error, "the point select failed");
        done.set(done.get() + 1);
    }
}

/// Reads one RESP reply (a bulk string or a simple/error line) off `tcp`.
async fn redis_reply(tcp: &mut TcpStream, buf: &mut BytesMut) {
    loop {
        if let Some(nl) = buf.windows(2).position(|w| w == b"\r\n") {
            let need = match buf[0] {
                b'$' => {
                    let len: i64 = std::str::from_utf8(&buf[1..nl]).unwrap().parse().unwrap();
                    nl + 2 + if len < 0 { 0 } else { len as usize + 2 }
                }
                b'-' => panic!("redis error: {}", String::from_utf8_lossy(&buf[..nl])),
                _ => nl + 2,
            };
            if buf.len() >= need {
                let _ = buf.split_to(need);
                return;
            }
        }
        let n = tcp.read_buf(buf).await.expect("read");
        assert!(n > 0, "redis closed the connection");
    }
}

async fn redis_conn(
    addr: String,
    keys: u64,
    seed: u64,
    ready: Rc<Cell<u64>>,
    mut go: watch::Receiver<Option<Instant>>,
    done: Rc<Cell<u64>>,
) {
    let mut tcp = TcpStream::connect(&addr).await.expect("connect to redis");
    tcp.set_nodelay(true).unwrap();
    let until = start(&ready, &mut go).await;
    let mut buf = BytesMut::with_capacity(4096);
    let mut state = seed;
    while Instant::now() < until {
        let k = next(&mut state) % keys + 1;
        let key = format!("key:{k}");
        let cmd = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
        tcp.write_all(cmd.as_bytes()).await.expect("write");
        redis_reply(&mut tcp, &mut buf).await;
        done.set(done.get() + 1);
    }
}

async fn redis_fill(addr: &str, keys: u64) {
    let mut tcp = TcpStream::connect(addr).await.expect("connect to redis");
    let mut buf = BytesMut::with_capacity(4096);
    for k in 1..=keys {
        // A value of sysbench's `c` column's size: 119 characters.
        let cmd = format!(
            "*3\r\n$3\r\nSET\r\n${}\r\nkey:{k}\r\n$119\r\n{}\r\n",
            format!("key:{k}").len(),
            "x".repeat(119)
        );
        tcp.write_all(cmd.as_bytes()).await.expect("write");
        redis_reply(&mut tcp, &mut buf).await;
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 7 {
        eprintln!(
            "usage: loadgen mysql|mysql-ps|redis|redis-fill ADDR USER DB CONNECTIONS SECONDS KEYS"
        );
        std::process::exit(2);
    }
    let (proto, addr, user, db) = (a[0].clone(), a[1].clone(), a[2].clone(), a[3].clone());
    let conns: u64 = a[4].parse().expect("connections");
    let secs: u64 = a[5].parse().expect("seconds");
    let keys: u64 = a[6].parse().expect("keys");
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let plan = Rc::new(Plan {
        keys,
        left: env("LOADGEN_REQUESTS").map(|n| Cell::new(n.parse().expect("LOADGEN_REQUESTS"))),
        seq: env("LOADGEN_SEQ")
            .filter(|v| v != "0")
            .map(|_| Cell::new(1)),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let done = Rc::new(Cell::new(0u64));
    if proto == "redis-fill" {
        local.block_on(&rt, redis_fill(&addr, keys));
        return;
    }
    let started = local.block_on(&rt, async {
        let ready = Rc::new(Cell::new(0u64));
        let (go_tx, go) = watch::channel(None);
        let mut tasks = Vec::new();
        for i in 0..conns {
            let (addr, done, ready, go) = (addr.clone(), done.clone(), ready.clone(), go.clone());
            let seed = 0x5eed ^ (i << 32);
            tasks.push(match proto.as_str() {
                "mysql" | "mysql-ps" => tokio::task::spawn_local(mysql_conn(
                    addr,
                    user.clone(),
                    db.clone(),
                    proto == "mysql-ps",
                    plan.clone(),
                    seed,
                    ready,
                    go,
                    done,
                )),
                "redis" => tokio::task::spawn_local(redis_conn(addr, keys, seed, ready, go, done)),
                other => panic!("unknown protocol {other}"),
            });
        }
        // Every connection logged in: the measured window opens.
        while ready.get() < conns {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let started = Instant::now();
        let _ = go_tx.send(Some(started + Duration::from_secs(secs)));
        for t in tasks {
            t.await.expect("a connection failed");
        }
        started
    });
    let elapsed = started.elapsed().as_secs_f64();
    let n = done.get();
    println!("{n} {elapsed:.3} {:.0}", n as f64 / elapsed);
}
