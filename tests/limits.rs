//! Memory limits measured on the real binary (a child process, so its RSS is its own):
//! a cache filled past `cache.max_bytes` with ~100 KB results stays under
//! `max_bytes × 1.15 + baseline`, and 2,000 idle client connections cost a bounded amount
//! each. The figures are printed; docs/reliability.md records them.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

/// A qcache child process; killed when dropped.
struct Qcache {
    child: Child,
    addr: String,
    _config: tempfile::NamedTempFile,
}

impl Drop for Qcache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Qcache {
    fn start(upstream: &str, max_bytes: u64, max_connections: usize) -> Qcache {
        Qcache::start_with(upstream, max_bytes, max_connections, &[])
    }

    fn start_with(
        upstream: &str,
        max_bytes: u64,
        max_connections: usize,
        extra: &[&str],
    ) -> Qcache {
        let d = common::db();
        let mut config = tempfile::NamedTempFile::new().unwrap();
        // The binlog tail and the catalog are left as in production (auto), except that a
        // binlog would invalidate on other tests' writes; it is off like in the harness.
        std::io::Write::write_all(
            &mut config,
            format!(
                "[invalidation]\nbinlog = \"off\"\nuser = \"{}\"\npassword = \"{}\"\n",
                d.user, d.password
            )
            .as_bytes(),
        )
        .unwrap();
        let port = common::free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_qcache"))
            .arg("--config")
            .arg(config.path())
            .args([
                "--listen",
                &addr,
                "--upstream",
                upstream,
                "--admin-listen",
                "",
            ])
            .args(["--max-bytes", &max_bytes.to_string()])
            .args(["--max-connections", &max_connections.to_string()])
            .args(["--log-level", "warn"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start qcache");
        let q = Qcache {
            child,
            addr,
            _config: config,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(&q.addr).is_err() {
            assert!(Instant::now() < deadline, "qcache did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        q
    }

    /// Names of the process's session threads, from /proc.
    fn session_threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with("qcache-worker-"))
            .count()
    }

    /// Resident set size in bytes, from /proc.
    fn rss(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = s
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    async fn conn(&self, db: &str, user: &str, password: &str) -> Conn {
        let url = format!(
            "mysql://{user}{}@{}/{db}?prefer_socket=false",
            if password.is_empty() {
                String::new()
            } else {
                format!(":{password}")
            },
            self.addr
        );
        let opts = mysql_async::Opts::from_url(&url).unwrap();
        tokio::time::timeout(Duration::from_secs(30), Conn::new(opts))
            .await
            .expect("connect timed out")
            .expect("connect")
    }
}

const MIB: f64 = 1024.0 * 1024.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_under_max_bytes_with_large_results() {
    let test = async {
        let max_bytes: u64 = 32 << 20;
        let schema = common::fresh_schema("lim_rss").await;
        let d = common::db();
        let mut direct = common::direct_to(&schema).await;
        direct
            .query_drop("CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(100))")
            .await
            .unwrap();
        direct
            .query_drop("INSERT INTO big SELECT seq, REPEAT('y', 100) FROM seq_1_to_1000")
            .await
            .unwrap();
        let q = Qcache::start(&d.addr(), max_bytes, 100);
        let mut c = q.conn(&schema, &d.user, &d.password).await;
        // Baseline: started, one session open, the analysis of the query shape done.
        let _: Vec<(i64, String)> = c
            .query("SELECT id, REPEAT(pad, 1000) FROM big WHERE id = 0")
            .await
            .unwrap();
        let baseline = q.rss();
        // 1,000 distinct ~100 KB results: three times what the cache may hold.
        for id in 1..=1000 {
            let rows: Vec<(i64, String)> = c
                .query(format!(
                    "SELECT id, REPEAT(pad, 1000) FROM big WHERE id = {id}"
                ))
                .await
                .unwrap();
            assert_eq!(rows.len(), 1);
        }
        let full = q.rss();
        // A second pass over the most recent queries (hits or refills) must not grow it.
        for id in 900..=1000 {
            let _: Vec<(i64, String)> = c
                .query(format!(
                    "SELECT id, REPEAT(pad, 1000) FROM big WHERE id = {id}"
                ))
                .await
                .unwrap();
        }
        let after_hits = q.rss();
        let stats: Vec<(String, String)> = c.query("SHOW STATUS LIKE 'Qcache%'").await.unwrap();
        println!(
            "baseline RSS {:.1} MiB; cache full ({} MiB max_bytes): {:.1} MiB; after a second pass {:.1} MiB; {stats:?}",
            baseline as f64 / MIB,
            max_bytes >> 20,
            full as f64 / MIB,
            after_hits as f64 / MIB
        );
        let bound = (max_bytes as f64 * 1.15) as u64 + baseline;
        assert!(full.max(after_hits) < bound, "RSS {full} over {bound}");
        let prunes = stats
            .iter()
            .find(|(k, _)| k == "Qcache_lowmem_prunes")
            .map(|(_, v)| v.parse::<u64>().unwrap())
            .unwrap_or(0);
        assert!(prunes > 0, "the cache never filled: {stats:?}");
    };
    tokio::time::timeout(Duration::from_secs(180), test)
        .await
        .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections() {
    const N: usize = 2000;
    let test = async {
        // A server of its own: 2,000 sessions would crowd the shared one's max_connections.
        let server = tokio::task::spawn_blocking(common::own_server)
            .await
            .unwrap();
        let q = Qcache::start(&server.addr(), 64 << 20, N + 100);
        let mut first = q.conn("test", &server.user, &server.password).await;
        first.query_drop("SELECT 1").await.unwrap();
        let before = q.rss();
        let started = Instant::now();
        let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(32));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..N {
            let limit = limit.clone();
            let url = format!(
                "mysql://{}@{}/test?prefer_socket=false",
                server.user, q.addr
            );
            tasks.spawn(async move {
                let _permit = limit.acquire().await.unwrap();
                let opts = mysql_async::Opts::from_url(&url).unwrap();
                let mut c = tokio::time::timeout(Duration::from_secs(60), Conn::new(opts))
                    .await
                    .expect("connect timed out")
                    .expect("connect");
                c.query_drop("SELECT 1").await.unwrap();
                c
            });
        }
        let mut conns = Vec::with_capacity(N);
        while let Some(c) = tasks.join_next().await {
            conns.push(c.unwrap());
        }
        let opened = started.elapsed();
        // Let buffers settle to their idle size.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = q.rss();
        let per = after.saturating_sub(before) / N as u64;
        println!(
            "{N} idle connections opened in {opened:?}; RSS {:.1} MiB -> {:.1} MiB: {:.1} KiB per connection",
            before as f64 / MIB,
            after as f64 / MIB,
            per as f64 / 1024.0
        );
        // Everyone still answers.
        for c in conns.iter_mut().step_by(100) {
            c.query_drop("SELECT 1").await.unwrap();
        }
        assert!(per < 256 * 1024, "{per} bytes per idle connection");
        for c in conns {
            drop(c);
        }
    };
    tokio::time::timeout(Duration::from_secs(180), test)
        .await
        .expect("test hung");
}

/// A pool opening hundreds of connections at once: every client gets its greeting. MySQL's
/// server speaks first, so a connect that overflowed the accept queue (the kernel completes
/// it with a SYN cookie and the client sees it established) would wait for a greeting
/// forever; qcache listens with a backlog of 1024 (`server.listen_backlog`), where the
/// standard bind's 128 lost about a fifth of a 512-connection burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connects_gets_every_greeting() {
    const N: usize = 400;
    let test = async {
        // A server of its own: the burst reaches it as N upstream connects.
        let server = tokio::task::spawn_blocking(common::own_server)
            .await
            .unwrap();
        let q = Qcache::start(&server.addr(), 64 << 20, N + 100);
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..N {
            let addr = q.addr.clone();
            tasks.spawn(async move {
                let mut tcp = tokio::net::TcpStream::connect(&addr)
                    .await
                    .expect("connect");
                let greeting =
                    tokio::time::timeout(Duration::from_secs(20), rawclient_greeting(&mut tcp))
                        .await
                        .expect(
                            "no greeting within 20 s: the connect was lost in the accept queue",
                        );
                (greeting, tcp)
            });
        }
        let mut open = Vec::with_capacity(N);
        while let Some(r) = tasks.join_next().await {
            let (first, tcp) = r.unwrap();
            assert_eq!(
                first, 10,
                "the first byte of a greeting is protocol version 10"
            );
            open.push(tcp);
        }
        println!(
            "{N} simultaneous connects greeted in {:?}",
            started.elapsed()
        );
    };
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("test hung");
}

/// The first payload byte of the first packet on `tcp`.
async fn rawclient_greeting(tcp: &mut tokio::net::TcpStream) -> u8 {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 5];
    tcp.read_exact(&mut head).await.expect("read greeting");
    head[4]
}

/// `--workers N` starts exactly N session threads, and sessions are served by them.
#[tokio::test]
async fn workers_sets_the_number_of_session_threads() {
    let d = common::db();
    for n in [1usize, 3] {
        let q = Qcache::start_with(&d.addr(), 1 << 20, 100, &["--workers", &n.to_string()]);
        assert_eq!(q.session_threads(), n, "--workers {n}");
        let mut conns = Vec::new();
        for _ in 0..4 {
            conns.push(q.conn("test", &d.user, &d.password).await);
        }
        for c in &mut conns {
            let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
            assert_eq!(one, Some(1));
        }
        assert_eq!(q.session_threads(), n, "sessions must not start threads");
    }
}
