//! The integration-test harness: one private `mariadbd` per test binary, the proxy started
//! in-process on a free port, and the clients the tests drive them with.
//!
//! Every integration test binary says `mod common;`. The first call to [`db`] starts a private
//! MariaDB server (temporary datadir, free port, ROW binlog, local-infile, 64 MiB packets) and
//! every test of the binary shares it; [`fresh_schema`] gives each test a database of its own.
//! Set `QCACHE_TEST_MYSQL_URL=mysql://user:pass@host:port` to use an existing server instead.
//! A server that cannot be started or reached is a test failure, never a skip.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod l2;
pub mod outcome;
pub mod redis;
pub mod steps;

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

/// The environment variable naming an existing server to test against.
pub const ENV_URL: &str = "QCACHE_TEST_MYSQL_URL";

/// How long a private server may take from `mariadb-install-db` to answering `SELECT 1`.
/// About one second is usual; the margin is for a machine busy building and testing.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a test waits for a connection (direct or through the proxy) before failing, so
/// that a proxy which never answers the handshake fails the test instead of hanging it.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The MySQL/MariaDB server the tests of this binary run against.
#[derive(Debug)]
pub struct TestDb {
    pub host: String,
    pub port: u16,
    /// A user with every privilege (root on the private server).
    pub user: String,
    pub password: String,
    /// The private server's data directory; `None` for a server from [`ENV_URL`].
    pub datadir: Option<PathBuf>,
    /// The private server's process id, for tests that need to stop or signal it.
    pub pid: Option<u32>,
}

impl TestDb {
    /// `mysql://root@127.0.0.1:PORT/db?prefer_socket=false`.
    ///
    /// `prefer_socket=false` matters: by default mysql_async asks a loopback server for
    /// `@@socket` and silently reconnects through that Unix socket, which would route a
    /// "proxied" connection around the proxy.
    pub fn url(&self, db: &str) -> String {
        format!(
            "mysql://{}@{}:{}/{}?prefer_socket=false",
            userinfo(&self.user, &self.password),
            self.host,
            self.port,
            db
        )
    }

    /// `"127.0.0.1:PORT"`: what the proxy's `server.upstream` is set to.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The private server's error log, to print when a test needs to know why it misbehaved.
    pub fn error_log(&self) -> Option<String> {
        let dir = self.datadir.as_ref()?;
        std::fs::read_to_string(dir.join("error.log")).ok()
    }

    /// Kills the private server (SIGKILL, a crash) and starts it again on the same datadir
    /// and port, with the same extra options: what a server restart with its data, binlog
    /// included, looks like to qcache. Use it on an [`own_server_with`] only.
    pub fn restart_with_data(&mut self, server_args: &[String]) {
        let pid = self.pid.expect("only a private server can be restarted");
        let dir = self
            .datadir
            .clone()
            .expect("a private server has a datadir");
        std::fs::write(dir.join(format!("handed-over.{pid}")), "")
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        self.kill();
        let mariadbd = binary(&["mariadbd", "mysqld"]).unwrap_or_else(|e| panic!("{e}"));
        let restarted = spawn_mariadbd(&mariadbd, &dir, self.port, server_args)
            .and_then(|child| supervise(child, std::process::id(), &dir, &[], self.port))
            .unwrap_or_else(|e| panic!("restarting the server on {}: {e}", dir.display()));
        self.pid = restarted.pid;
    }

    /// Kills the private server at once (SIGKILL), for upstream-dies tests; use it on an
    /// [`own_server`], not on the shared [`db`]. Its watchdog still removes the datadir.
    pub fn kill(&self) {
        let pid = self.pid.expect("only a private server can be killed");
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn userinfo(user: &str, password: &str) -> String {
    if password.is_empty() {
        pct(user)
    } else {
        format!("{}:{}", pct(user), pct(password))
    }
}

/// Percent-encodes what a URL's userinfo cannot carry verbatim.
fn pct(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The server of this test binary: started on first use (once, whichever thread gets there
/// first) or taken from [`ENV_URL`]. Panics with the reason when it cannot be had.
pub fn db() -> &'static TestDb {
    // The outcome is kept even when it is a failure, so that every test reports the same
    // cause at once instead of each one trying (and waiting) to start a server again.
    static DB: OnceLock<Result<TestDb, String>> = OnceLock::new();
    match DB.get_or_init(|| match std::env::var(ENV_URL) {
        Ok(url) if !url.trim().is_empty() => external(url.trim()),
        _ => match std::env::var("NEXTEST_RUN_ID") {
            Ok(run) if std::env::var("QCACHE_TEST_SHARED").as_deref() != Ok("0") => {
                shared_under_nextest(&run)
            }
            _ => start_private(std::process::id(), None, None, &[]),
        },
    }) {
        Ok(db) => db,
        Err(e) => panic!("test database unavailable: {e}"),
    }
}

/// Uses the server named by [`ENV_URL`], after checking it answers; creates `test`.
fn external(url: &str) -> Result<TestDb, String> {
    let opts = mysql_async::Opts::from_url(url).map_err(|e| format!("{ENV_URL}={url}: {e}"))?;
    let db = TestDb {
        host: opts.ip_or_hostname().to_string(),
        port: opts.tcp_port(),
        user: opts.user().unwrap_or("root").to_string(),
        password: opts.pass().unwrap_or("").to_string(),
        datadir: None,
        pid: None,
    };
    wait_ready(&db, Instant::now() + START_TIMEOUT, &mut || Ok(()))
        .map_err(|e| format!("{ENV_URL}={url} is not usable: {e}"))?;
    Ok(db)
}

/// Locates a MariaDB binary: PATH first, then where Debian puts it (sbin is often not on a
/// non-login PATH).
fn binary(names: &[&str]) -> Result<PathBuf, String> {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = path
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from));
    let dirs: Vec<PathBuf> = dirs.collect();
    for name in names {
        for d in &dirs {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "none of {names:?} found on PATH or in /usr/sbin, /usr/bin; install the MariaDB \
         server (apt-get install mariadb-server) or set {ENV_URL}"
    ))
}

/// A port nobody listens on right now. Another process may take it before mariadbd binds
/// it; [`start_private`] retries with a new port when that happens.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind 127.0.0.1:0 to find a free port")
}

/// A server of the caller's own, apart from the one [`db`] shares: for a test that must stop,
/// kill or reconfigure its server without disturbing the others. It lives until this test
/// process ends (or [`TestDb::kill`]).
pub fn own_server() -> TestDb {
    own_server_with(&[])
}

/// A fresh [`own_server`] on a given port: how the fault tests "restart" an upstream that was
/// killed (the old datadir is removed by its watchdog once the old server is gone).
pub fn own_server_on(port: u16) -> TestDb {
    start_private(std::process::id(), None, Some(port), &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// [`own_server`] with extra `mariadbd` options (e.g. `--ssl-cert=…`).
pub fn own_server_with(args: &[String]) -> TestDb {
    start_private(std::process::id(), None, None, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Under nextest every test is a process of its own, so a per-process server would mean one
/// mariadbd per test. Instead the processes of one test binary within one nextest run share
/// a server: the first starts it and records it in a state file (under a file lock), the
/// others find it there, and it is stopped when the nextest runner (their parent) exits.
/// This gives the same "one server per test binary" as `cargo test`.
fn shared_under_nextest(run_id: &str) -> Result<TestDb, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let binary_name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tests".into());
    let dir = std::env::temp_dir().join("qcache-test-shared");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let key: String = format!("{run_id}-{binary_name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let lock_path = dir.join(format!("{key}.lock"));
    let state_path = dir.join(format!("{key}.state"));
    let lock = File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // Held until this function returns: concurrent first tests wait here for one start.
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;

    if let Ok(text) = std::fs::read_to_string(&state_path) {
        let mut lines = text.lines();
        let port = lines.next().and_then(|l| l.parse::<u16>().ok());
        let pid = lines.next().and_then(|l| l.parse::<u32>().ok());
        let datadir = lines.next().map(PathBuf::from);
        if let (Some(port), Some(pid), Some(datadir)) = (port, pid, datadir) {
            let db = TestDb {
                host: "127.0.0.1".into(),
                port,
                user: "root".into(),
                password: String::new(),
                datadir: Some(datadir),
                pid: Some(pid),
            };
            let alive = || {
                if process_alive(pid) {
                    Ok(())
                } else {
                    Err(format!("shared mariadbd {pid} is gone"))
                }
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            if wait_ready(&db, deadline, &mut { alive }).is_ok() {
                return Ok(db);
            }
        }
        // A server that died (or a test that killed it): start a new one below.
    }

    let owner = std::os::unix::process::parent_id();
    let cleanup = [state_path.clone(), lock_path.clone()];
    let db = start_private(owner, Some(&cleanup), None, &[])?;
    let state = format!(
        "{}\n{}\n{}\n",
        db.port,
        db.pid.unwrap_or(0),
        db.datadir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    );
    std::fs::write(&state_path, state).map_err(|e| format!("{}: {e}", state_path.display()))?;
    Ok(db)
}

/// True while `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Starts a private server that is stopped (and its datadir removed, with `extra_cleanup`)
/// once process `owner_pid` has ended.
fn start_private(
    owner_pid: u32,
    extra_cleanup: Option<&[PathBuf]>,
    port: Option<u16>,
    server_args: &[String],
) -> Result<TestDb, String> {
    let mariadbd = binary(&["mariadbd", "mysqld"])?;
    let install = binary(&["mariadb-install-db", "mysql_install_db"])?;
    let mut last = String::new();
    for _attempt in 0..3 {
        match start_once(
            &mariadbd,
            &install,
            owner_pid,
            extra_cleanup.unwrap_or(&[]),
            port,
            server_args,
        ) {
            Ok(db) => return Ok(db),
            // Most likely a port taken between free_port() and mariadbd's bind: try again.
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Small redo log and buffer pool: dozens of these may exist at once on a small machine.
const SIZING: [&str; 2] = [
    "--innodb-log-file-size=16M",
    "--innodb-buffer-pool-size=64M",
];

fn start_once(
    mariadbd: &Path,
    install: &Path,
    owner_pid: u32,
    extra_cleanup: &[PathBuf],
    port: Option<u16>,
    server_args: &[String],
) -> Result<TestDb, String> {
    // Kept (not deleted on drop): the watchdog below removes it once this process is gone,
    // because a static's destructor never runs.
    let dir = tempfile::Builder::new()
        .prefix("qcache-test-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary datadir: {e}"))?
        .keep();
    let remove = |e: String| {
        let _ = std::fs::remove_dir_all(&dir);
        e
    };
    let d = dir.display().to_string();

    let out = Command::new(install)
        .arg("--no-defaults")
        .arg(format!("--datadir={d}"))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .args(SIZING)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| remove(format!("cannot run {}: {e}", install.display())))?;
    if !out.status.success() {
        return Err(remove(format!(
            "{} failed ({}):\n{}\n{}",
            install.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }

    let port = port.unwrap_or_else(free_port);
    let child = spawn_mariadbd(mariadbd, &dir, port, server_args).map_err(remove)?;
    supervise(child, owner_pid, &dir, extra_cleanup, port).map_err(remove)
}

/// Starts `mariadbd` on an installed datadir.
fn spawn_mariadbd(
    mariadbd: &Path,
    dir: &Path,
    port: u16,
    server_args: &[String],
) -> Result<Child, String> {
    let d = dir.display().to_string();
    let log = File::options()
        .create(true)
        .append(true)
        .open(dir.join("mariadbd.out"))
        .map_err(|e| e.to_string())?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    Command::new(mariadbd)
        .arg("--no-defaults")
        .arg(format!("--datadir={d}"))
        .arg(format!("--socket={d}/sock"))
        .arg(format!("--pid-file={d}/mariadbd.pid"))
        .arg(format!("--log-error={d}/error.log"))
        // Its own directory for on-disk temporary tables: several test servers run at once.
        .arg(format!("--tmpdir={d}"))
        .arg(format!("--port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--user=root")
        .arg(format!("--log-bin={d}/binlog"))
        .arg("--binlog-format=ROW")
        .arg("--server-id=1")
        .arg("--local-infile=1")
        .arg("--max-allowed-packet=64M")
        .arg("--skip-name-resolve")
        .arg("--max-connections=3000")
        // Durability is worthless for a throwaway server; fsyncs are slow on a busy disk.
        .arg("--innodb-flush-log-at-trx-commit=2")
        .arg("--skip-innodb-doublewrite")
        .arg("--sync-binlog=0")
        .args(SIZING)
        .args(server_args)
        // Never inherit the test's stdout/stderr: a test runner that reads them through pipes
        // (nextest) would wait for a server that outlives the test to close them.
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        // Its own process group, so that a Ctrl-C or a runner killing the test's group does
        // not take the server down in a way that skips the watchdog's cleanup.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", mariadbd.display()))
}

/// Hands a started server to a watchdog and waits until it answers.
fn supervise(
    mut child: Child,
    owner_pid: u32,
    dir: &Path,
    extra_cleanup: &[PathBuf],
    port: u16,
) -> Result<TestDb, String> {
    let pid = child.id();
    spawn_watchdog(owner_pid, pid, dir, extra_cleanup).inspect_err(|_| {
        let _ = child.kill();
        let _ = child.wait();
    })?;

    let db = TestDb {
        host: "127.0.0.1".into(),
        port,
        user: "root".into(),
        password: String::new(),
        datadir: Some(dir.to_path_buf()),
        pid: Some(pid),
    };
    let mut exited = || match child.try_wait() {
        Ok(Some(status)) => Err(format!("mariadbd exited with {status}")),
        _ => Ok(()),
    };
    if let Err(e) = wait_ready(&db, Instant::now() + START_TIMEOUT, &mut exited) {
        let log = db.error_log().unwrap_or_default();
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "private mariadbd on port {port} did not become ready: {e}\n--- error log ---\n{log}"
        ));
    }
    // The child handle is dropped without killing: the server must live as long as the test
    // process does, and the watchdog stops it afterwards.
    drop(child);
    Ok(db)
}

/// A tiny shell loop, outside the test's process group, that waits for the owner (this test
/// process, or the nextest runner) to end and then stops the server and deletes its datadir
/// and `extra` files. Nothing in-process can do this: statics are never dropped and a test
/// binary may end by a signal.
fn spawn_watchdog(
    owner_pid: u32,
    mariadbd_pid: u32,
    dir: &Path,
    extra: &[PathBuf],
) -> Result<(), String> {
    const SCRIPT: &str = r#"
test_pid=$1; db_pid=$2; dir=$3; shift 3
while kill -0 "$test_pid" 2>/dev/null && kill -0 "$db_pid" 2>/dev/null; do sleep 1; done
# Restarted on the same datadir: the new server's watchdog cleans up.
[ -e "$dir/handed-over.$db_pid" ] && exit 0
kill -TERM "$db_pid" 2>/dev/null
i=0
while kill -0 "$db_pid" 2>/dev/null && [ "$i" -lt 150 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL "$db_pid" 2>/dev/null
sleep 0.2
rm -rf "$dir"
[ "$#" -gt 0 ] && rm -f "$@"
exit 0
"#;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("qcache-test-watchdog")
        .arg(owner_pid.to_string())
        .arg(mariadbd_pid.to_string())
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the cleanup watchdog (sh): {e}"))
}

/// Blocks until the server answers `SELECT 1` over TCP, then creates database `test`.
///
/// Runs on a thread of its own with a throwaway runtime: [`db`] is called from inside each
/// `#[tokio::test]`'s runtime, where blocking on another runtime would panic.
fn wait_ready(
    db: &TestDb,
    deadline: Instant,
    check_alive: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let addr = db.addr();
    let url = db.url("");
    let mut last = String::from("no attempt made");
    while Instant::now() < deadline {
        check_alive()?;
        // Cheap probe first, so that the MySQL client only runs once something listens.
        let listening = addr
            .parse::<SocketAddr>()
            .map(|a| TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok())
            .unwrap_or(true);
        if listening {
            let url = url.clone();
            let attempt = std::thread::spawn(move || -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async move {
                    let opts = mysql_async::Opts::from_url(&url).map_err(|e| e.to_string())?;
                    let mut conn =
                        tokio::time::timeout(Duration::from_secs(5), mysql_async::Conn::new(opts))
                            .await
                            .map_err(|_| "connect timed out".to_string())?
                            .map_err(|e| e.to_string())?;
                    let one: Option<i64> = conn
                        .query_first("SELECT 1")
                        .await
                        .map_err(|e| e.to_string())?;
                    if one != Some(1) {
                        return Err(format!("SELECT 1 returned {one:?}"));
                    }
                    conn.query_drop("CREATE DATABASE IF NOT EXISTS test")
                        .await
                        .map_err(|e| e.to_string())?;
                    let _ = conn.disconnect().await;
                    Ok(())
                })
            })
            .join()
            .map_err(|_| "readiness check panicked".to_string())?;
            match attempt {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        } else {
            last = format!("nothing listens on {addr}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("gave up after {START_TIMEOUT:?}: {last}"))
}

async fn connect(url: &str, what: &str) -> mysql_async::Conn {
    let opts = mysql_async::Opts::from_url(url).unwrap_or_else(|e| panic!("bad url {url}: {e}"));
    match tokio::time::timeout(CONNECT_TIMEOUT, mysql_async::Conn::new(opts)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!("cannot connect to {what} ({url}): {e}"),
        Err(_) => panic!("connecting to {what} ({url}) timed out after {CONNECT_TIMEOUT:?}"),
    }
}

/// A connection straight to the server (bypassing qcache), default database `test`.
pub async fn direct() -> mysql_async::Conn {
    direct_to("test").await
}

/// A connection straight to the server with default database `db` (may be empty).
pub async fn direct_to(db_name: &str) -> mysql_async::Conn {
    connect(&db().url(db_name), "the test database directly").await
}

/// A name no other test (in this or another test binary) has: `prefix_<pid>_<n>`,
/// cut to MySQL's 64-character identifier limit and made of identifier-safe characters.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // Fixed width: tests that compare raw column definitions (which carry the schema's
    // name) through qcache and directly must not see a name one digit longer on one side.
    format!("{clean}_{}_{n:04}", std::process::id())
}

/// Creates a database of its own for one test (directly, not through qcache) and returns its
/// name. Tests on one server run in parallel; separate databases keep them apart.
pub async fn fresh_schema(prefix: &str) -> String {
    let name = unique_name(prefix);
    let mut conn = direct_to("").await;
    conn.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
        .await
        .unwrap_or_else(|e| panic!("cannot drop {name}: {e}"));
    conn.query_drop(format!("CREATE DATABASE `{name}`"))
        .await
        .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
    let _ = conn.disconnect().await;
    name
}

/// A table with a column of every type MariaDB has (the test server is MariaDB; INET4, INET6
/// and UUID are its own), for the tests that compare qcache's bytes with the server's.
pub const TYPES_DDL: &str = "CREATE TABLE types (
    id INT PRIMARY KEY,
    ti TINYINT, tu TINYINT UNSIGNED, bo BOOLEAN, si SMALLINT, su SMALLINT UNSIGNED,
    mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
    bi BIGINT, ub BIGINT UNSIGNED,
    fl FLOAT, db DOUBLE, de DECIMAL(20,6), dn DECIMAL(65,30), bt BIT(12), b64 BIT(64),
    ch CHAR(5), vc VARCHAR(100), bn BINARY(4), vb VARBINARY(10),
    tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT CHARACTER SET utf8mb4,
    tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
    en ENUM('a','b'), st SET('x','y'), js JSON,
    dt DATE, tm TIME(3), t0 TIME, dtt DATETIME(6), d0 DATETIME, ts TIMESTAMP NULL,
    ts3 TIMESTAMP(3) NULL, yr YEAR,
    ge GEOMETRY, pt POINT, ls LINESTRING, pg POLYGON,
    i4 INET4, i6 INET6, uu UUID)";

/// Row 1 of [`TYPES_DDL`]: the edges of each type (minimums, maximums, negative TIME,
/// fractional seconds, multi-byte text). Row 2 is all NULL but its id.
pub const TYPES_ROW: &str = "INSERT INTO types VALUES (1,
    -128, 255, TRUE, -32768, 65535,
    -8388608, 16777215, -2147483648, 4294967295,
    -9223372036854775808, 18446744073709551615,
    1.5, 2.25, 12345678901234.123456, -12345678901234567890123456789012345.123456789012345678901234567891,
    b'101010101010', b'1111111111111111111111111111111111111111111111111111111111111111',
    'abc', 'héllo wörld', x'00ff10ab', x'0102',
    'tiny', REPEAT('t', 300), REPEAT('m', 70000), 'long ✓',
    x'00', x'deadbeef', REPEAT(x'ab', 70000), x'',
    'b', 'x,y', '{\"k\": [1, 2]}',
    '2024-02-29', '-838:59:59.000', '838:59:59', '2024-01-02 03:04:05.123456',
    '9999-12-31 23:59:59', '2024-01-02 03:04:05', '2030-01-19 03:14:07.999', 2024,
    ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(-1.5 20000000000.25)'),
    ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)'),
    ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 4, 0 0))'),
    '192.168.0.1', '2001:db8::ff00:42:8329', '123e4567-e89b-12d3-a456-426614174000')";

/// Creates and fills [`TYPES_DDL`] in `schema`, directly.
pub async fn setup_types(schema: &str) {
    let mut c = direct_to(schema).await;
    c.query_drop(TYPES_DDL).await.unwrap();
    c.query_drop(TYPES_ROW).await.unwrap();
    c.query_drop("INSERT INTO types (id) VALUES (2)")
        .await
        .unwrap();
}

/// Logs from the proxy appear in a failing test's output (the test writer is captured like
/// `println!`). `RUST_LOG` sets the filter; the default shows qcache's info and above.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("qcache=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The proxy under test, running in the current test's runtime.
pub struct TestProxy {
    pub running: qcache::server::Running,
    pub addr: SocketAddr,
}

impl TestProxy {
    /// `mysql://root@127.0.0.1:PROXYPORT/db?prefer_socket=false` (see [`TestDb::url`] for why
    /// `prefer_socket=false` is essential here).
    pub fn url(&self, db_name: &str) -> String {
        let d = db();
        format!(
            "mysql://{}@{}/{}?prefer_socket=false",
            userinfo(&d.user, &d.password),
            self.addr,
            db_name
        )
    }

    /// A mysql_async connection through the proxy; panics (fails the test) after
    /// [`CONNECT_TIMEOUT`] rather than hanging when the proxy never answers.
    pub async fn conn(&self, db_name: &str) -> mysql_async::Conn {
        connect(&self.url(db_name), "the proxy").await
    }

    /// `"127.0.0.1:PROXYPORT"`, for [`mariadb_cli`].
    pub fn addr_string(&self) -> String {
        self.addr.to_string()
    }

    /// Graceful stop (same as [`qcache::server::Running::shutdown`]).
    pub async fn shutdown(self) {
        self.running.shutdown().await
    }
}

/// The default config for tests: listen on a free port, relay to the test server, no admin
/// endpoint, and the test server's credentials for the binlog tail and schema catalog.
pub fn test_config(upstream: &str) -> qcache::config::Config {
    let d = db();
    let mut config = qcache::config::Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.server.upstream = upstream.to_string();
    config.admin.listen = String::new();
    config.invalidation.user = d.user.clone();
    config.invalidation.password = d.password.clone();
    // Every test of a binary shares one server, so a binlog tail would see the other tests'
    // writes and DDL and invalidate this proxy's cache at random; tests that exercise the
    // binlog turn it on.
    config.invalidation.binlog = qcache::config::BinlogMode::Off;
    config
}

/// Starts the proxy in-process on 127.0.0.1:0 in front of [`db`], after `tweak` adjusts the
/// default test config. Panics if it does not start.
pub async fn proxy(tweak: impl FnOnce(&mut qcache::config::Config)) -> TestProxy {
    proxy_to(&db().addr(), tweak).await
}

/// Like [`proxy`] but in front of any upstream address: a scripted fake server, or a port
/// where nothing listens (upstream-down tests).
pub async fn proxy_to(
    upstream: &str,
    tweak: impl FnOnce(&mut qcache::config::Config),
) -> TestProxy {
    init_tracing();
    let mut config = test_config(upstream);
    tweak(&mut config);
    // QCACHE_TEST_SHUFFLE=1 (debug builds): every session of the test moves to the other
    // session thread after every command, as the differential suite's do.
    #[cfg(debug_assertions)]
    if std::env::var_os("QCACHE_TEST_SHUFFLE").is_some_and(|v| v == "1") {
        qcache::workers::start(2, qcache::config::Placement::Load);
        qcache::workers::shuffle_sessions(true);
    }
    let running = qcache::server::start(config)
        .await
        .unwrap_or_else(|e| panic!("qcache::server::start failed: {e:#}"));
    let addr = running.addr;
    TestProxy { running, addr }
}

/// Runs the `mariadb` command-line client against `addr` ("host:port") over TCP as the test
/// server's user, with `args` after the connection options and `stdin` fed to it.
/// Later `-u`/`-p`/`-D` in `args` override the defaults. Panics if the client cannot be run.
pub fn mariadb_cli(addr: &str, args: &[&str], stdin: &str) -> Output {
    let d = db();
    let (host, port) = addr
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("mariadb_cli: {addr:?} is not host:port"));
    let client = binary(&["mariadb", "mysql"]).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(client);
    // --no-defaults must come first; it keeps /etc/mysql/*.cnf (a socket path, a default
    // user) from changing what the test asked for.
    cmd.arg("--no-defaults")
        .arg("--protocol=TCP")
        .arg(format!("--host={host}"))
        .arg(format!("--port={port}"))
        .arg(format!("--user={}", d.user))
        .arg("--connect-timeout=10");
    if !d.password.is_empty() {
        cmd.arg(format!("--password={}", d.password));
    }
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run the mariadb client: {e}"));
    let mut input = child.stdin.take().expect("piped stdin");
    let data = stdin.as_bytes().to_vec();
    // Fed from a thread so that a large stdin cannot deadlock against a full stdout pipe.
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("mariadb client failed to run: {e}"));
    let _ = feeder.join();
    out
}

/// Runs `sql` directly on the server in `schema`, one statement at a time; a failure names
/// its statement.
pub async fn setup(schema: &str, sql: &[&str]) {
    use mysql_async::prelude::Queryable;
    let mut d = direct_to(schema).await;
    for s in sql {
        d.query_drop(*s)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// A `Qcache_*` status value as the proxy reports it over the protocol.
pub async fn status(c: &mut mysql_async::Conn, name: &str) -> u64 {
    use mysql_async::prelude::Queryable;
    let rows: Vec<(String, String)> = c.query(format!("SHOW STATUS LIKE '{name}'")).await.unwrap();
    rows.first()
        .unwrap_or_else(|| panic!("{name} not reported"))
        .1
        .parse()
        .unwrap()
}

/// Waits (at most 5 s, then panics) until no DDL's catalog reload is pending in the proxy
/// whose shared state is `shared`: a DDL's OK no longer waits for the catalog, and until the
/// reload lands reads of what it named are not cached (`ddl_pending`). A test that expects a
/// hit right after a DDL waits for this first.
#[allow(dead_code)]
pub async fn wait_catalog_settled(shared: &qcache::shared::Shared) {
    let start = std::time::Instant::now();
    while shared.catalog.ddl_pending_any() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "a DDL's catalog reload did not land within 5 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

impl TestProxy {
    /// [`wait_catalog_settled`] for this proxy.
    #[allow(dead_code)]
    pub async fn catalog_settled(&self) {
        wait_catalog_settled(&self.running.shared).await
    }

    /// Waits (at most 5 s, then panics) until no child write's parent lookup asked after its
    /// OK is still running (`Qcache_parent_lookups_pending`): until then the derived slices
    /// it asks are not served, so a test that expects a hit of one (or counts lookups) right
    /// after a child write waits for this first.
    #[allow(dead_code)]
    pub async fn lookups_settled(&self) {
        let stats = &self.running.shared.cache.versions().parents.stats;
        let start = std::time::Instant::now();
        while stats.pending.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "a deferred parent lookup did not end within 5 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}
