//! The differential harness: multi-session SQL scenarios (`tests/scenarios/<topic>/*.test`)
//! run directly against a private server and through qcache, every answer compared.
//!
//! Each topic is one test with a private `mariadbd` of its own (ROW binlog), so a scenario
//! may change global settings without disturbing another binary's tests. Every scenario file
//! runs three times, each in a fresh schema:
//!
//! 1. every connection straight to the server: the reference;
//! 2. through a qcache with its binlog tail on;
//! 3. through a qcache whose sessions first say `SET SESSION sql_log_bin=0`, so that what
//!    qcache does for its own writes cannot lean on the binlog.
//!
//! Connections marked `via=direct` are "somebody else": they go straight to the server in
//! every run and stay binlogged, and after each of their statements a proxied run waits until
//! qcache's binlog tail has read past it (a marker commit), so a scenario never races the tail.
//!
//! A run's outcome per statement holds, for each result set, the column metadata and rows,
//! then affected rows, last insert id, warning count and info; or the error's code, state
//! and message. The run's schema and user suffix are written back as `{db}` and `{u}`.
//!
//! The file format is described in `tests/scenarios/README.md`.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use qcache::config::BinlogMode;
use qcache::faults::Fault;

use common::outcome::{self, error_text, run_prepared_with, run_statement_with, run_text};

/// One line-numbered step of a scenario.
#[derive(Debug, Clone)]
enum Step {
    Connection(ConnSpec),
    Prepared,
    /// `@prepare NAME`: the next statement is prepared (binary protocol) on the current
    /// connection and kept open under NAME; its outcome is "prepared" or the error.
    PrepareNamed(String),
    /// `@execute NAME`: executes the statement kept under NAME (no parameters).
    ExecuteNamed(String),
    /// `@params V | V …`: the values the next `@prepared` statement or `@execute` binds.
    Params(Vec<mysql_async::Value>),
    /// The next statement runs, but its outcome is not compared (timings in its output).
    Ignore,
    Sleep(u64),
    /// Through qcache, waits until no DDL's catalog reload is pending (at most 5 s): for the
    /// topic that slows reloads on purpose, where a fixed sleep is not enough on a loaded
    /// machine. Directly, nothing.
    Settle,
    Disconnect(String),
    /// Resets the current connection's session (COM_RESET_CONNECTION, as a pool does when
    /// it hands a connection back out; COM_CHANGE_USER where the server lacks it).
    Reset,
    /// COM_CHANGE_USER to the same account: the session is reset as at a new connect.
    ChangeUser,
    /// `@expect hit|miss`: the next statement is served from the cache (hit) or not (miss)
    /// in every proxied run, by the proxy's hit counter.
    Expect(bool),
    /// `@hits none`: no statement of the file is served from the cache in any proxied run;
    /// `@hits any`: hits are not counted (they differ between the proxied runs). Without
    /// either, every proxied run must serve at least one statement from the cache.
    Hits(Option<bool>),
    /// `@bytes`: the next statement is sent (text protocol) as bytes, each character of the
    /// file (U+0000 to U+00FF) one byte: for statements in a single-byte client character
    /// set (latin1, …) that are no valid UTF-8.
    Bytes,
    /// `@slow_parent_lookups`: the file's proxies run with `Fault::SlowParentLookups` (debug
    /// builds): every child write's parent lookup, asked after its OK, sleeps 200 ms first,
    /// so that the statements after the write run while its derived slices are pending.
    SlowParentLookups,
    Sql(String),
}

#[derive(Debug, Clone)]
struct ConnSpec {
    name: String,
    user: String,
    password: String,
    /// `None`: no default database (`db=none`).
    db: Option<String>,
    direct: bool,
}

impl ConnSpec {
    fn default_conn() -> ConnSpec {
        ConnSpec {
            name: "default".into(),
            user: "root".into(),
            password: String::new(),
            db: Some("{db}".into()),
            direct: false,
        }
    }
}

/// `@params`' values, `|`-separated: `int N`, `uint N`, `str TEXT` (the rest of the value,
/// trimmed), `datetime YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (sent as a DATETIME), `double X`,
/// `null`.
fn parse_params(text: &str) -> Result<Vec<mysql_async::Value>, String> {
    use mysql_async::Value as V;
    let num = |s: &str| s.parse::<u32>().map_err(|_| format!("bad number {s}"));
    text.split('|')
        .map(|v| {
            let v = v.trim();
            let (kind, rest) = v.split_once(' ').unwrap_or((v, ""));
            let rest = rest.trim();
            Ok(match kind {
                "int" => V::Int(rest.parse().map_err(|_| format!("bad int {rest}"))?),
                "uint" => V::UInt(rest.parse().map_err(|_| format!("bad uint {rest}"))?),
                "double" => V::Double(rest.parse().map_err(|_| format!("bad double {rest}"))?),
                "str" => V::Bytes(rest.as_bytes().to_vec()),
                "null" => V::NULL,
                "datetime" => {
                    let (date, time) = rest.split_once(' ').unwrap_or((rest, "00:00:00"));
                    let (time, frac) = time.split_once('.').unwrap_or((time, ""));
                    let us = format!("{frac:0<6}");
                    let d: Vec<&str> = date.split('-').collect();
                    let t: Vec<&str> = time.split(':').collect();
                    let ([y, mo, dd], [h, mi, se]) = (d.as_slice(), t.as_slice()) else {
                        return Err(format!("bad datetime {rest}"));
                    };
                    V::Date(
                        num(y)? as u16,
                        num(mo)? as u8,
                        num(dd)? as u8,
                        num(h)? as u8,
                        num(mi)? as u8,
                        num(se)? as u8,
                        num(&us)?,
                    )
                }
                _ => return Err(format!("unknown value {v}")),
            })
        })
        .collect()
}

fn parse(text: &str) -> Result<Vec<(usize, Step)>, String> {
    let mut steps = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let n = i + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(d) = t.strip_prefix('@') {
            let mut words = d.split_whitespace();
            let step = match words.next() {
                Some("connection") => {
                    let mut spec = ConnSpec::default_conn();
                    spec.name = words
                        .next()
                        .ok_or(format!("line {n}: @connection needs a name"))?
                        .to_string();
                    for w in words {
                        match w.split_once('=') {
                            Some(("user", v)) => spec.user = v.into(),
                            Some(("password", v)) => spec.password = v.into(),
                            Some(("db", "none")) => spec.db = None,
                            Some(("db", v)) => spec.db = Some(v.into()),
                            Some(("via", "direct")) => spec.direct = true,
                            Some(("via", "proxy")) => spec.direct = false,
                            _ => return Err(format!("line {n}: unknown option {w}")),
                        }
                    }
                    Step::Connection(spec)
                }
                Some("prepared") => Step::Prepared,
                Some("prepare") => Step::PrepareNamed(
                    words
                        .next()
                        .ok_or(format!("line {n}: @prepare needs a name"))?
                        .to_string(),
                ),
                Some("params") => Step::Params(
                    parse_params(d.trim_start_matches("params"))
                        .map_err(|e| format!("line {n}: {e}"))?,
                ),
                Some("execute") => Step::ExecuteNamed(
                    words
                        .next()
                        .ok_or(format!("line {n}: @execute needs a name"))?
                        .to_string(),
                ),
                Some("ignore") => Step::Ignore,
                Some("bytes") => Step::Bytes,
                Some("reset") => Step::Reset,
                Some("change_user") => Step::ChangeUser,
                Some("expect") => match words.next() {
                    Some("hit") => Step::Expect(true),
                    Some("miss") => Step::Expect(false),
                    _ => return Err(format!("line {n}: @expect hit|miss")),
                },
                Some("hits") => match words.next() {
                    Some("none") => Step::Hits(Some(false)),
                    Some("any") => Step::Hits(None),
                    _ => return Err(format!("line {n}: @hits none|any")),
                },
                Some("sleep") => Step::Sleep(
                    words
                        .next()
                        .and_then(|w| w.parse().ok())
                        .ok_or(format!("line {n}: @sleep needs milliseconds"))?,
                ),
                Some("settle") => Step::Settle,
                Some("slow_parent_lookups") => Step::SlowParentLookups,
                Some("disconnect") => Step::Disconnect(
                    words
                        .next()
                        .ok_or(format!("line {n}: @disconnect needs a name"))?
                        .into(),
                ),
                other => return Err(format!("line {n}: unknown directive {other:?}")),
            };
            steps.push((n, step));
            continue;
        }
        let mut sql = String::new();
        let mut cur = line;
        loop {
            if cur.trim_end().ends_with(';') {
                let c = cur.trim_end();
                sql.push_str(&c[..c.len() - 1]);
                break;
            }
            sql.push_str(cur);
            sql.push('\n');
            match lines.next() {
                Some((_, l)) => cur = l,
                None => return Err(format!("line {n}: statement without a closing ';'")),
            }
        }
        steps.push((n, Step::Sql(sql.trim_end().to_string())));
    }
    Ok(steps)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Direct,
    Binlog,
    NoLogBin,
}

struct Run<'a> {
    mode: Mode,
    server: &'a common::TestDb,
    proxy: Option<&'a common::TestProxy>,
    schema: String,
    suffix: String,
    conns: HashMap<String, (ConnSpec, Option<Conn>)>,
    /// `@expect` directives the proxied run broke, by line.
    unmet: Vec<String>,
    /// After each statement through qcache, wait until no DDL's catalog reload is pending
    /// (`Catalog::ddl_pending_any`): a scenario then sees the catalog know what a DDL it
    /// sent changed, as before DDL stopped waiting for it. Off in the topic that runs with
    /// `Fault::SlowCatalogReload`, whose point is the window before the reload lands.
    settle_ddl: bool,
}

fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Run<'_> {
    /// The proxy's hit counter (L1 and L2 hits); 0 for a direct run.
    /// An `@expect hit|miss` before the statement at `line`: checked where the binlog carries
    /// no echo of qcache's own writes, whose arrival invalidates again at a time the scenario
    /// cannot control. `before`: the proxy's hits before the statement.
    fn check_expect(&mut self, expect: Option<bool>, before: u64, line: usize) {
        let Some(hit) = expect.filter(|_| self.mode == Mode::NoLogBin) else {
            return;
        };
        let n = self.hits() - before;
        if hit != (n > 0) {
            let want = if hit { "a hit" } else { "a miss" };
            self.unmet.push(format!(
                "line {line}: @expect {want}, but the proxy counted {n} hits"
            ));
        }
    }

    fn hits(&self) -> u64 {
        self.proxy
            .map_or(0, |p| p.running.shared.cache.stats().hits())
    }

    fn subst(&self, s: &str) -> String {
        s.replace("{db}", &self.schema).replace("{u}", &self.suffix)
    }

    fn unsubst(&self, s: &str) -> String {
        s.replace(&self.schema, "{db}").replace(&self.suffix, "{u}")
    }

    async fn open(&self, spec: &ConnSpec) -> Result<Conn, String> {
        let addr = match (spec.direct, self.proxy) {
            (false, Some(p)) => p.addr_string(),
            _ => self.server.addr(),
        };
        let user = self.subst(&spec.user);
        let pw = if spec.password.is_empty() {
            String::new()
        } else {
            format!(":{}", pct(&self.subst(&spec.password)))
        };
        let db = spec
            .db
            .as_deref()
            .map(|d| self.subst(d))
            .unwrap_or_default();
        // No statement cache: `@prepared` closes what it prepared, as a one-shot client does.
        let url = format!(
            "mysql://{}{pw}@{addr}/{db}?prefer_socket=false&stmt_cache_size=0",
            pct(&user)
        );
        let opts = mysql_async::Opts::from_url(&url).map_err(|e| e.to_string())?;
        let mut c = tokio::time::timeout(common::CONNECT_TIMEOUT, Conn::new(opts))
            .await
            .map_err(|_| format!("connect to {addr} timed out"))?
            .map_err(|e| self.unsubst(&error_text(&e)))?;
        if self.mode == Mode::NoLogBin && !spec.direct {
            // Only a privileged user may; the others' writes are logged as they would be.
            match c.query_drop("SET SESSION sql_log_bin=0").await {
                Err(mysql_async::Error::Server(e)) if e.code == 1227 => {}
                r => r.map_err(|e| format!("SET sql_log_bin=0: {e}"))?,
            }
        }
        Ok(c)
    }

    /// Waits until the proxy's binlog tail has applied everything committed so far: a marker
    /// write is the last commit, so once the tail has counted one more commit than before
    /// it, every earlier event has been applied.
    async fn sync_tail(&self) {
        let Some(p) = self.proxy else { return };
        let Some(b) = p.running.shared.binlog.clone() else {
            return;
        };
        let before = b.commits();
        let mut c = Conn::new(
            mysql_async::Opts::from_url(&format!(
                "mysql://root@{}/?prefer_socket=false",
                self.server.addr()
            ))
            .unwrap(),
        )
        .await
        .expect("marker connection");
        c.query_drop("INSERT INTO qcache_sync.marker VALUES ()")
            .await
            .expect("marker write");
        let _ = c.disconnect().await;
        let start = Instant::now();
        while b.commits() <= before {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the binlog tail did not read the marker commit within 20 s ({:?})",
                b.status()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn exec(
        &mut self,
        name: &str,
        sql: &str,
        prepared: bool,
        params: mysql_async::Params,
    ) -> String {
        let sql = self.subst(sql);
        let (spec, conn) = self.conns.get_mut(name).expect("current connection");
        let direct = spec.direct;
        let Some(conn) = conn.as_mut() else {
            return "connection not open".into();
        };
        let out = if prepared {
            run_prepared_with(conn, &sql, params).await
        } else {
            run_text(conn, &sql).await
        };
        let out = self.unsubst(&out);
        if direct && self.proxy.is_some() {
            self.sync_tail().await;
        }
        if let (false, true, Some(p)) = (direct, self.settle_ddl, self.proxy) {
            common::wait_catalog_settled(&p.running.shared).await;
        }
        // And until no child write's parent lookup asked after its OK is still running
        // (`Timing::Deferred`): a scenario's `@expect hit` after a child write then sees the
        // slices the lookup narrowed to, as before the OK stopped waiting for it. Reads made
        // while one runs are tests/fkslices.rs's.
        if let (false, Some(p)) = (direct, self.proxy) {
            p.lookups_settled().await;
        }
        out
    }

    /// [`exec`](Self::exec) of a text statement sent as bytes (`@bytes`): each character one
    /// byte.
    async fn exec_bytes(&mut self, name: &str, sql: &str) -> String {
        let sql = self.subst(sql);
        let Some(raw) = sql
            .chars()
            .map(|c| u8::try_from(u32::from(c)).ok())
            .collect::<Option<Vec<u8>>>()
        else {
            return "@bytes: a character above U+00FF".into();
        };
        let (spec, conn) = self.conns.get_mut(name).expect("current connection");
        let direct = spec.direct;
        let Some(conn) = conn.as_mut() else {
            return "connection not open".into();
        };
        let out = outcome::run_text_bytes(conn, &raw).await;
        let out = self.unsubst(&out);
        if direct && self.proxy.is_some() {
            self.sync_tail().await;
        }
        if let (false, true, Some(p)) = (direct, self.settle_ddl, self.proxy) {
            common::wait_catalog_settled(&p.running.shared).await;
        }
        // And until no child write's parent lookup asked after its OK is still running
        // (`Timing::Deferred`): a scenario's `@expect hit` after a child write then sees the
        // slices the lookup narrowed to, as before the OK stopped waiting for it. Reads made
        // while one runs are tests/fkslices.rs's.
        if let (false, Some(p)) = (direct, self.proxy) {
            p.lookups_settled().await;
        }
        out
    }

    /// Runs every step; returns (line, outcome) for each statement and connection attempt.
    async fn play(&mut self, steps: &[(usize, Step)]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut current = "default".to_string();
        let mut prepared = false;
        let mut params: Option<Vec<mysql_async::Value>> = None;
        let mut prepare_as: Option<String> = None;
        let mut stmts: std::collections::HashMap<(String, String), mysql_async::Statement> =
            Default::default();
        let mut ignore = false;
        let mut bytes = false;
        let mut expect = None;
        let first = ConnSpec::default_conn();
        let c = self.open(&first).await;
        out.push((0, outcome_of_connect(&c)));
        self.conns.insert(current.clone(), (first, c.ok()));
        for (line, step) in steps {
            match step {
                Step::Connection(spec) => {
                    current = spec.name.clone();
                    if !self.conns.contains_key(&current) {
                        let c = self.open(spec).await;
                        out.push((*line, outcome_of_connect(&c)));
                        self.conns.insert(current.clone(), (spec.clone(), c.ok()));
                    }
                }
                Step::Prepared => prepared = true,
                Step::Params(v) => params = Some(v.clone()),
                Step::PrepareNamed(name) => prepare_as = Some(name.clone()),
                Step::ExecuteNamed(name) => {
                    let before = self.hits();
                    let o = match (
                        stmts.get(&(current.clone(), name.clone())),
                        self.conns.get_mut(&current),
                    ) {
                        (Some(stmt), Some((_, Some(c)))) => {
                            let p = params.take().map_or(mysql_async::Params::Empty, Into::into);
                            let o = run_statement_with(c, stmt, p).await;
                            self.unsubst(&o)
                        }
                        _ => "no such statement".into(),
                    };
                    self.check_expect(expect.take(), before, *line);
                    if !std::mem::take(&mut ignore) {
                        out.push((*line, o));
                    }
                }
                Step::Expect(hit) => expect = Some(*hit),
                Step::Hits(_) | Step::SlowParentLookups => {}
                Step::Ignore => ignore = true,
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                Step::Settle => {
                    if let Some(p) = self.proxy {
                        p.catalog_settled().await;
                    }
                }
                Step::Disconnect(name) => {
                    if let Some((_, Some(c))) = self.conns.remove(name) {
                        let _ = c.disconnect().await;
                    }
                }
                Step::Reset | Step::ChangeUser => {
                    let nolog = self.mode == Mode::NoLogBin;
                    if let Some((spec, Some(c))) = self.conns.get_mut(&current) {
                        let r = match step {
                            Step::Reset => c.reset().await.map(drop),
                            _ => c.change_user(mysql_async::ChangeUserOpts::default()).await,
                        };
                        let o = match r {
                            Ok(()) => "reset".to_string(),
                            Err(e) => format!("reset failed: {}", error_text(&e)),
                        };
                        // The reset gave sql_log_bin its global value back.
                        if nolog && !spec.direct {
                            let _ = c.query_drop("SET SESSION sql_log_bin=0").await;
                        }
                        out.push((*line, o));
                    }
                }
                Step::Sql(sql) if prepare_as.is_some() => {
                    let name = prepare_as.take().unwrap_or_default();
                    let sql = self.subst(sql);
                    let o = match self.conns.get_mut(&current) {
                        Some((_, Some(c))) => match c.prep(&sql).await {
                            Ok(stmt) => {
                                stmts.insert((current.clone(), name), stmt);
                                "prepared".to_string()
                            }
                            Err(e) => format!("prepare: {}", self.unsubst(&error_text(&e))),
                        },
                        _ => "connection not open".into(),
                    };
                    if !std::mem::take(&mut ignore) {
                        out.push((*line, o));
                    }
                }
                Step::Bytes => bytes = true,
                Step::Sql(sql) if std::mem::take(&mut bytes) => {
                    let before = self.hits();
                    let o = self.exec_bytes(&current, sql).await;
                    self.check_expect(expect.take(), before, *line);
                    if !std::mem::take(&mut ignore) {
                        out.push((*line, o));
                    }
                }
                Step::Sql(sql) => {
                    let before = self.hits();
                    let p = params.take().map_or(mysql_async::Params::Empty, Into::into);
                    let o = self.exec(&current, sql, prepared, p).await;
                    prepared = false;
                    self.check_expect(expect.take(), before, *line);
                    if !std::mem::take(&mut ignore) {
                        out.push((*line, o));
                    }
                }
            }
        }
        for (_, (_, c)) in self.conns.drain() {
            if let Some(c) = c {
                let _ = c.disconnect().await;
            }
        }
        out
    }
}

fn outcome_of_connect(c: &Result<Conn, String>) -> String {
    match c {
        Ok(_) => "connected".into(),
        Err(e) => format!("connect failed: {e}"),
    }
}

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn scenario_files(topic: &str) -> Vec<PathBuf> {
    files_of(topic, std::env::var("QCACHE_SCENARIOS").ok().as_deref())
}

/// The topic's scenario files, those whose names `only` selects ([`selected`]) if given.
fn files_of(topic: &str, only: Option<&str>) -> Vec<PathBuf> {
    let dir = scenario_dir().join(topic);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios in {}", dir.display());
    // QCACHE_SCENARIOS=a,b runs only the files whose names contain one of the words.
    if let Some(only) = only {
        files.retain(|p| selected(p, only));
        // A topic the filter leaves empty passes, but a filter that selects nothing in any
        // topic is a typo that would pass every test.
        let anywhere = || {
            std::fs::read_dir(scenario_dir())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .flat_map(|d| std::fs::read_dir(d.path()).unwrap())
                .filter_map(|e| e.ok())
                .any(|e| {
                    e.path().extension().is_some_and(|x| x == "test") && selected(&e.path(), only)
                })
        };
        assert!(
            !files.is_empty() || anywhere(),
            "QCACHE_SCENARIOS={only:?} selects no scenario file in any topic"
        );
    }
    files
}

/// Whether the file's name contains one of the comma-separated words of `only`.
fn selected(p: &Path, only: &str) -> bool {
    let name = p.file_name().unwrap_or_default().to_string_lossy();
    only.split(',')
        .filter(|w| !w.is_empty())
        .any(|w| name.contains(w))
}

async fn create_schema(server: &common::TestDb, name: &str) {
    let mut c = Conn::new(
        mysql_async::Opts::from_url(&format!(
            "mysql://root@{}/?prefer_socket=false",
            server.addr()
        ))
        .unwrap(),
    )
    .await
    .expect("setup connection");
    c.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
        .await
        .unwrap();
    c.query_drop(format!("CREATE DATABASE `{name}`"))
        .await
        .unwrap();
    let _ = c.disconnect().await;
}

async fn start_proxy(
    server: &common::TestDb,
    server_id: u32,
    topic: &str,
    fault: Option<Fault>,
) -> common::TestProxy {
    common::init_tracing();
    let mut config = qcache::config::Config::default();
    // Patching cached aggregates is off by default (it cost throughput on the application
    // mix: docs/benchmarks.md); the `patch`, `adversary12`, `adversary19p` and `adversary21`
    // topics run with it on, the first two verifying every patch (a verifier that took a right patch for a
    // wrong one would turn patching off and miss an `@expect hit`), and
    // QCACHE_TEST_PATCH_AGGREGATES=1 every topic's. Under the corrupting fault nothing is
    // verified, so that the wrong answers themselves reach the comparison (the verifier
    // catching them is tests/patch.rs's).
    if topic == "patch"
        || topic == "adversary12"
        || topic == "adversary19p"
        || topic == "adversary21"
        || std::env::var_os("QCACHE_TEST_PATCH_AGGREGATES").is_some_and(|v| v == "1")
    {
        config.cache.patch_aggregates = true;
        config.cache.verify_patched = 1.0;
        // adversary19p: patches never verified (a share the config allows), so that a
        // wrong patch reaches the comparison instead of racing the background verifier.
        if topic == "adversary19p" || topic == "adversary21" {
            config.cache.verify_patched = 0.0;
        }
        #[cfg(debug_assertions)]
        if fault == Some(Fault::Patches) {
            config.cache.verify_patched = 0.0;
        }
    }
    let _ = fault;
    // QCACHE_TEST_SHUFFLE=1: every topic's sessions move to the other session thread after
    // every command, as the moving_sessions_* tests do for a few.
    #[cfg(debug_assertions)]
    if std::env::var_os("QCACHE_TEST_SHUFFLE").is_some_and(|v| v == "1") {
        qcache::workers::start(2, qcache::config::Placement::Load);
        qcache::workers::shuffle_sessions(true);
    }
    config.server.listen = "127.0.0.1:0".into();
    config.server.upstream = server.addr();
    config.admin.listen = String::new();
    config.invalidation.user = server.user.clone();
    config.invalidation.password = server.password.clone();
    config.invalidation.binlog = BinlogMode::On;
    config.invalidation.server_id = server_id;
    let running = qcache::server::start(config)
        .await
        .unwrap_or_else(|e| panic!("qcache::server::start failed: {e:#}"));
    let b = running.shared.binlog.clone().expect("binlog tail running");
    assert!(
        b.wait_until_connected(Duration::from_secs(20)).await,
        "binlog stream did not connect: {:?}",
        b.status()
    );
    let addr = running.addr;
    common::TestProxy { running, addr }
}

/// Runs every scenario of `tests/scenarios/<topic>/` in the three modes; panics with every
/// difference found.
async fn run_topic(topic: &str) {
    run_topic_part(topic, 0, 1).await
}

/// [`run_topic`] for the scenarios whose place in the topic's sorted list is `part` modulo
/// `parts`: a large topic split into several tests, each with its own server and well under
/// nextest's time limit. Schemas and names keep the file's place in the whole list.
async fn run_topic_part(topic: &str, part: usize, parts: usize) {
    let server = scenario_server().await;
    let mut failures = String::new();
    let mut n_runs = 0u32;
    for (i, file) in scenario_files(topic)
        .iter()
        .enumerate()
        .filter(|(i, _)| i % parts == part)
    {
        let modes = [Mode::Direct, Mode::Binlog, Mode::NoLogBin];
        let fault = topic_fault(topic);
        failures += &run_file(&server, topic, i, file, &modes, fault, &mut n_runs).await;
    }
    assert!(
        failures.is_empty(),
        "qcache answered differently:{failures}"
    );
}

/// The fault switch a whole topic runs its proxies with: `ddl` runs with every catalog reload
/// after a DDL slowed down (`Fault::SlowCatalogReload`), so that its statements run while
/// the reload is pending, as they would behind a catalog backlog on a large server.
fn topic_fault(topic: &str) -> Option<Fault> {
    #[cfg(debug_assertions)]
    if topic == "ddl" {
        return Some(Fault::SlowCatalogReload);
    }
    let _ = topic;
    None
}

/// The fault switch a file asks for (`@slow_parent_lookups`), in debug builds.
fn file_fault(steps: &[(usize, Step)]) -> Option<Fault> {
    let slow = steps
        .iter()
        .any(|(_, s)| matches!(s, Step::SlowParentLookups));
    #[cfg(debug_assertions)]
    if slow {
        return Some(Fault::SlowParentLookups);
    }
    let _ = slow;
    None
}

/// Whether `fault` is the one that slows the catalog's reloads down.
fn slow_catalog(fault: Option<Fault>) -> bool {
    #[cfg(debug_assertions)]
    return fault == Some(Fault::SlowCatalogReload);
    #[cfg(not(debug_assertions))]
    {
        let _ = fault;
        false
    }
}

/// A private server for scenario runs, with the table `via=direct` markers go to.
async fn scenario_server() -> common::TestDb {
    let server = common::own_server();
    let mut c = Conn::new(
        mysql_async::Opts::from_url(&format!(
            "mysql://root@{}/?prefer_socket=false",
            server.addr()
        ))
        .unwrap(),
    )
    .await
    .expect("setup connection");
    c.query_drop("CREATE DATABASE IF NOT EXISTS qcache_sync")
        .await
        .unwrap();
    c.query_drop(
        "CREATE TABLE IF NOT EXISTS qcache_sync.marker (id INT AUTO_INCREMENT PRIMARY KEY)",
    )
    .await
    .unwrap();
    let _ = c.disconnect().await;
    server
}

/// Runs one scenario file (its place `i` in its topic) in `modes` (the first is the
/// reference, `Mode::Direct`), the proxies with `fault` on; returns every difference and
/// every broken hit expectation, as text (empty: none).
async fn run_file(
    server: &common::TestDb,
    topic: &str,
    i: usize,
    file: &Path,
    modes: &[Mode],
    fault: Option<Fault>,
    n_runs: &mut u32,
) -> String {
    let mut failures = String::new();
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(file).unwrap();
    let steps = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    // Some(true): hits required (the default); Some(false): none allowed; None: not counted.
    let rule = steps
        .iter()
        .find_map(|(_, s)| match s {
            Step::Hits(r) => Some(*r),
            _ => None,
        })
        .unwrap_or(Some(true));
    let fault = fault.or_else(|| file_fault(&steps));
    let mut outcomes = Vec::new();
    for &mode in modes {
        *n_runs += 1;
        let schema = format!("d_{topic}_{i}_{mode:?}").to_lowercase();
        create_schema(server, &schema).await;
        let proxy = match mode {
            Mode::Direct => None,
            _ => Some(start_proxy(server, 4000 + *n_runs, topic, fault).await),
        };
        if let (Some(p), Some(f)) = (&proxy, fault) {
            p.running.shared.cache.versions().faults.set(f, true);
        }
        let mut run = Run {
            mode,
            server,
            proxy: proxy.as_ref(),
            schema,
            suffix: format!("_{}{}", i, n_runs),
            conns: HashMap::new(),
            unmet: Vec::new(),
            settle_ddl: !slow_catalog(fault),
        };
        let o = tokio::time::timeout(Duration::from_secs(60), run.play(&steps))
            .await
            .unwrap_or_else(|_| panic!("{name} ({mode:?}) did not finish within 60 s"));
        let hits = run.hits();
        for u in std::mem::take(&mut run.unmet) {
            let _ = writeln!(failures, "\n{topic}/{name} ({mode:?}): {u}");
        }
        drop(run);
        if let Some(p) = proxy {
            p.shutdown().await;
            // The cache must have been used, or the run compared the server with itself.
            // Required in the run without the binlog's echo of qcache's own writes (see
            // `play`); no hit at all, when a file says so, in every run.
            if rule == Some(false) && hits > 0 {
                let _ = writeln!(
                    failures,
                    "\n{topic}/{name} ({mode:?}): declares `@hits none` but {hits} statements were served from the cache"
                );
            } else if rule == Some(true) && hits == 0 && mode == Mode::NoLogBin {
                let _ = writeln!(
                    failures,
                    "\n{topic}/{name} ({mode:?}): no statement was served from the cache (a file that expects none says `@hits none`, and why)"
                );
            }
        }
        outcomes.push((mode, o));
    }
    let (_, reference) = &outcomes[0];
    for (mode, got) in &outcomes[1..] {
        if let Err(e) = outcome::compare(reference, got) {
            let _ = writeln!(
                failures,
                "\n{topic}/{name} ({mode:?} differs from Direct) line {e}"
            );
        }
    }
    failures
}

macro_rules! topics {
    ($($t:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $t() {
                run_topic(stringify!($t)).await;
            }
        )*

        const TOPICS: &[&str] = &[$(stringify!($t)),*];
    };
}

topics!(
    adversary2,
    adversary5,
    adversary6,
    adversary7,
    adversary8,
    adversary9,
    adversary10,
    adversary12,
    adversary13,
    adversary13b,
    adversary14,
    adversary15,
    adversary16,
    adversary17,
    adversary18,
    adversary19,
    adversary19p,
    adversary21,
    adversary22,
    adversary23,
    adversary24,
    adversary25,
    adversary26,
    adversary27,
    adversary28,
    adversary29,
    adversary30,
    basics,
    catalog,
    classification,
    code_qct,
    comments,
    context,
    ddl,
    defaults,
    diagnostics,
    lexing,
    locks,
    order,
    patch,
    privileges,
    slices,
    snapshot,
);

/// Sessions that move to the other session thread after every command
/// (`workers::shuffle_sessions`, debug builds) answer as they do in place: their legs,
/// buffers, transaction, prepared statements and owed diagnostics move with them.
#[cfg(debug_assertions)]
async fn run_topics_moving(topics: &[&str]) {
    qcache::workers::start(2, qcache::config::Placement::Load);
    qcache::workers::shuffle_sessions(true);
    let before = qcache::workers::moves();
    for topic in topics {
        run_topic(topic).await;
    }
    let moved = qcache::workers::moves() - before;
    assert!(moved > 100, "sessions moved only {moved} times");
}

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_sessions_context_and_locks() {
    run_topics_moving(&["basics", "context", "locks"]).await;
}

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_sessions_snapshot() {
    run_topics_moving(&["snapshot"]).await;
}

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_sessions_diagnostics() {
    run_topics_moving(&["diagnostics"]).await;
}

/// Topics split into parts (`run_topic_part`): the first round of adversarial scenarios took
/// 50–68 s as one test, near nextest's 120 s limit on a loaded machine; the third round's
/// lock-wait timeouts (1 s each, three runs per file) took 50–70 s; the eleventh round's
/// (metadata-lock waits in most files) took 103 s as one.
const SPLIT_TOPICS: &[&str] = &["adversary", "adversary3", "adversary4", "adversary11"];

macro_rules! topic_parts {
    ($topic:literal of $n:literal: $($name:ident = $k:literal),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                run_topic_part($topic, $k, $n).await;
            }
        )*
    };
}

topic_parts!("adversary" of 4: adversary_part1 = 0, adversary_part2 = 1, adversary_part3 = 2, adversary_part4 = 3);
topic_parts!("adversary3" of 2: adversary3_part1 = 0, adversary3_part2 = 1);
topic_parts!("adversary4" of 2: adversary4_part1 = 0, adversary4_part2 = 1);
topic_parts!("adversary11" of 4: adversary11_part1 = 0, adversary11_part2 = 1, adversary11_part3 = 2, adversary11_part4 = 3);

/// A topic directory without a test above would never run.
#[test]
fn every_scenario_directory_runs() {
    for e in std::fs::read_dir(scenario_dir()).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            let name = e.file_name().to_string_lossy().to_string();
            assert!(
                TOPICS.contains(&name.as_str()) || SPLIT_TOPICS.contains(&name.as_str()),
                "tests/scenarios/{name}/ has no test: add it to topics!(…) in tests/differential.rs"
            );
        }
    }
}

#[test]
fn the_format_parses() {
    let steps = parse(
        "# c\n@connection a user=x{u} password=p db=none via=direct\nSELECT 1;\n@prepared\nSELECT\n  2;\n@sleep 5\n@disconnect a\n",
    )
    .unwrap();
    assert_eq!(steps.len(), 6);
    assert!(
        matches!(&steps[0].1, Step::Connection(s) if s.direct && s.db.is_none() && s.user == "x{u}")
    );
    assert!(matches!(&steps[3].1, Step::Sql(s) if s == "SELECT\n  2"));
    let steps = parse(
        "@params int -3 | uint 7 | str 2024-01-08 | datetime 2024-01-08 10:00:01.5 | null\n@prepared\nSELECT ?, ?, ?, ?, ?;\n",
    )
    .unwrap();
    use mysql_async::Value as V;
    assert!(matches!(&steps[0].1, Step::Params(v) if v == &[
        V::Int(-3),
        V::UInt(7),
        V::Bytes(b"2024-01-08".to_vec()),
        V::Date(2024, 1, 8, 10, 0, 1, 500_000),
        V::NULL
    ]));
    assert!(parse("@params float 1\nSELECT 1;").is_err());
    assert!(parse("SELECT 1").is_err());
    assert!(parse("@bogus").is_err());
}

#[test]
fn named_statements_parse() {
    let steps = parse("@prepare s\nSELECT 1;\n@execute s\n").unwrap();
    assert!(matches!(&steps[0].1, Step::PrepareNamed(n) if n == "s"));
    assert!(matches!(&steps[1].1, Step::Sql(s) if s == "SELECT 1"));
    assert!(matches!(&steps[2].1, Step::ExecuteNamed(n) if n == "s"));
    assert!(parse("@prepare").is_err());
    assert!(parse("@execute").is_err());
}

#[test]
fn expectations_parse() {
    let steps = parse("@hits none\n@expect hit\nSELECT 1;\n@expect miss\nSELECT 2;\n").unwrap();
    assert!(matches!(steps[0].1, Step::Hits(Some(false))));
    assert!(matches!(parse("@hits any").unwrap()[0].1, Step::Hits(None)));
    assert!(matches!(steps[1].1, Step::Expect(true)));
    assert!(matches!(steps[3].1, Step::Expect(false)));
    assert!(parse("@expect maybe\nSELECT 1;").is_err());
    assert!(parse("@hits some").is_err());
}

/// The comparison fails on a differing outcome and on a differing number of outcomes (a
/// run that stopped early is not a pass over the steps both ran).
#[test]
fn comparison_counts_outcomes() {
    let a = [(1, "x".to_string()), (2, "y".to_string())];
    assert!(outcome::compare(&a, &a).is_ok());
    assert!(outcome::compare(&a, &a[..1]).is_err());
    assert!(outcome::compare(&a[..1], &a).is_err());
    assert!(outcome::compare(&a, &[(1, "x".into()), (2, "z".into())]).is_err());
}

/// A scenario filter that matches no file anywhere fails instead of passing every topic.
#[test]
fn a_filter_selecting_nothing_fails() {
    let none = "no-such-scenario-name-anywhere";
    let all: Vec<PathBuf> = TOPICS
        .iter()
        .chain(SPLIT_TOPICS)
        .flat_map(|t| std::fs::read_dir(scenario_dir().join(t)).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!all.is_empty());
    assert!(!all.iter().any(|p| selected(p, none)));
    assert!(all.iter().any(|p| selected(p, "one_slice,nothing")));
    // The check itself, as a topic test meets QCACHE_SCENARIOS.
    let r = std::panic::catch_unwind(|| files_of("basics", Some(none)));
    assert!(r.is_err(), "a filter selecting nothing passed");
    // Another topic's file: this topic runs nothing, and passes.
    assert!(files_of("basics", Some("one_slice_written")).is_empty());
}

/// Each fault switch (`qcache::faults`, debug builds) breaks its invariant in a proxy, and
/// a scenario of the suite that covers it must then report a difference: the suite can fail.
/// (`Fault::BinlogGaps` is shown in tests/binlog.rs, `Fault::RowOrder` has no rule yet.)
#[cfg(debug_assertions)]
async fn fault_is_caught(fault: Fault, topic: &str, file: &str) {
    let server = scenario_server().await;
    let path = scenario_dir().join(topic).join(file);
    let modes = [Mode::Direct, Mode::NoLogBin];
    let mut n = 0;
    let clean = run_file(&server, topic, 0, &path, &modes, None, &mut n).await;
    assert!(
        clean.is_empty(),
        "{topic}/{file} fails without the fault:{clean}"
    );
    let broken = run_file(&server, topic, 0, &path, &modes, Some(fault), &mut n).await;
    assert!(
        !broken.is_empty(),
        "{topic}/{file} passes with {fault:?} on: the suite cannot see that invariant broken"
    );
    println!("{fault:?} on, {topic}/{file} reports:{broken}");
}

macro_rules! faults_caught {
    ($($name:ident: $fault:ident in $topic:literal / $file:literal),* $(,)?) => {
        $(
            #[cfg(debug_assertions)]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                fault_is_caught(Fault::$fault, $topic, $file).await;
            }
        )*
    };
}

faults_caught!(
    fault_row_slices_is_caught: RowSlices in "slices" / "one_slice_written.test",
    fault_derived_slices_is_caught: DerivedSlices in "slices" / "derived_other_customer_served.test",
    fault_privilege_stamps_is_caught: PrivilegeStamps in "privileges" / "revoke_elsewhere_after_a_hit.test",
    fault_context_keys_is_caught: ContextKeys in "context" / "session_settings_split_entries.test",
    fault_snapshot_is_caught: Snapshot in "snapshot" / "changed_since_snapshot_not_stored.test",
    fault_row_order_is_caught: RowOrder in "order" / "moved_by_update.test",
    fault_patches_is_caught: Patches in "patch" / "count_and_sum_after_inserts.test",
    fault_patches_prepared_is_caught: Patches in "patch" / "prepared_dashboard_params.test",
    fault_patches_min_max_dates_is_caught: Patches in "patch" / "min_max_decimals_and_dates.test",
    fault_patches_joined_is_caught: Patches in "patch" / "joined_product_page.test",
);
