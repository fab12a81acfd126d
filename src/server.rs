//! The listener and what all sessions share: connection limit, signals, graceful shutdown,
//! and the state (config, cache, analysis memo, catalog) that sessions consult.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::analysis::{self, Analysis, Analyzer, WriteTargets};
use crate::cache::{Cache, InvalidationSource};
use crate::cli::Cli;
use crate::config::{BinlogMode, Config, Conservative};
use crate::invalidation::binlog::{self, BinlogHandle, WriteAnalyser};
use crate::invalidation::catalog::Catalog;
use crate::protocol::codec;
use crate::protocol::packets;
use crate::session::plans::ReadPlans;
use crate::session::state::{Pending, Txn};

/// State shared by every session.
pub struct Shared {
    config: ArcSwap<Config>,
    /// Results, table versions and the counters behind Qcache_*.
    pub cache: Cache,
    /// Statement analyses memoised by digest.
    pub analyzer: Analyzer,
    /// The tables each read shape depends on, per default database.
    pub plans: ReadPlans,
    /// Views, triggers and cascading foreign keys of the upstream's schemas.
    pub catalog: Arc<Catalog>,
    /// The binlog tail, when it runs.
    pub binlog: Option<Arc<BinlogHandle>>,
    /// The shared second level (`l2.mode = "on"`); its settings need a restart.
    pub l2: Option<Arc<crate::cache::l2::L2>>,
    /// `l2.validate_hits = "remote"` with L2 on: the one flag an L1 hit reads.
    pub l2_remote: bool,
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Hit and miss timings for /metrics.
    pub latencies: crate::admin::metrics::Latencies,
    /// The command line the config came from, for SIGHUP and POST /reload; None when started
    /// from a bare `Config` (then there is nothing to re-read).
    reload_source: std::sync::Mutex<Option<Cli>>,
    next_session: AtomicU64,
}

impl Shared {
    /// Builds the shared state; the binlog tail and the first catalog load start in the
    /// background of the current runtime.
    pub fn new(config: Config) -> Shared {
        let cache = Cache::new(&config.cache);
        let analyzer = Analyzer::new(config.cache.analysis_memo_entries);
        let plans = ReadPlans::new(config.cache.analysis_memo_entries);
        let upstream = config.server.upstream.clone();
        let catalog = Catalog::new(upstream.clone(), &config.invalidation);
        let c2 = catalog.clone();
        tokio::spawn(async move {
            if let Err(e) = c2.refresh().await {
                warn!(error = %e, "schema catalog not loaded yet; reads stay uncached until it is");
            }
        });
        let binlog = (config.invalidation.binlog != BinlogMode::Off).then(|| {
            let mut inv = config.invalidation.clone();
            inv.server_id = inv.effective_server_id();
            binlog::spawn(
                upstream,
                inv,
                cache.versions_arc(),
                catalog.clone(),
                binlog_analyser(catalog.clone()),
            )
        });
        let l2 = config.l2.enabled().then(|| {
            crate::cache::l2::L2::start(config.l2.clone(), cache.versions_arc(), binlog.clone())
        });
        let l2_remote = l2.as_ref().is_some_and(|l| l.remote_validation());
        Shared {
            l2,
            l2_remote,
            config: ArcSwap::from_pointee(config),
            cache,
            analyzer,
            plans,
            catalog,
            binlog,
            connections: AtomicU64::new(0),
            latencies: Default::default(),
            reload_source: std::sync::Mutex::new(None),
            next_session: AtomicU64::new(1),
        }
    }

    /// While the binlog stream has been down longer than `max_lag`, writes that bypass
    /// qcache may be missed: no hits until it is back.
    pub fn hits_suspended(&self) -> bool {
        match &self.binlog {
            Some(b) => b
                .disconnected_for()
                .is_some_and(|d| d > self.config.load().invalidation.max_lag),
            None => false,
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    pub fn swap_config(&self, c: Config) {
        self.config.store(Arc::new(c));
        // Certificates may have been replaced in place: read them again.
        crate::tls::forget();
    }

    /// Where [`Shared::reload`] re-reads the config from.
    pub fn set_reload_source(&self, cli: Cli) {
        if let Ok(mut g) = self.reload_source.lock() {
            *g = Some(cli);
        }
    }

    /// Re-reads the config (file, then flags and environment), validates it and swaps it in.
    /// Returns notes about settings that need a restart; an invalid file keeps the running
    /// config and returns why.
    pub fn reload(&self) -> Result<Vec<String>, String> {
        let r = self.try_reload();
        if let Err(e) = &r {
            warn!(error = %e, "reload refused; keeping the running configuration");
        }
        r
    }

    fn try_reload(&self) -> Result<Vec<String>, String> {
        let new = {
            let g = self
                .reload_source
                .lock()
                .map_err(|_| "reload state poisoned")?;
            let cli = g
                .as_ref()
                .ok_or("started without a config source; nothing to re-read")?;
            cli.effective_config().map_err(|e| e.to_string())?
        };
        let old = self.config();
        crate::admin::reload_log_level(&new.log.level).map_err(|e| e.to_string())?;
        let mut notes = Vec::new();
        let mut restart = |changed: bool, key: &str| {
            if changed {
                notes.push(format!("{key} changed: takes effect after a restart"));
            }
        };
        restart(new.server.listen != old.server.listen, "server.listen");
        restart(new.admin.listen != old.admin.listen, "admin.listen");
        restart(
            new.server.max_connections != old.server.max_connections,
            "server.max_connections",
        );
        restart(
            new.server.listen_backlog != old.server.listen_backlog,
            "server.listen_backlog",
        );
        restart(new.server.workers != old.server.workers, "server.workers");
        restart(
            new.cache.max_bytes != old.cache.max_bytes,
            "cache.max_bytes",
        );
        restart(
            new.cache.analysis_memo_entries != old.cache.analysis_memo_entries,
            "cache.analysis_memo_entries",
        );
        let (ni, oi) = (&new.invalidation, &old.invalidation);
        restart(
            (ni.binlog, ni.server_id, &ni.user, &ni.password)
                != (oi.binlog, oi.server_id, &oi.user, &oi.password),
            "invalidation.binlog/server_id/user/password",
        );
        restart(new.log.format != old.log.format, "log.format");
        restart(new.l2 != old.l2, "l2");
        if new.server.upstream != old.server.upstream {
            notes.push(
                "server.upstream changed: new sessions use it; the binlog tail and catalog \
                 keep the old one until a restart"
                    .into(),
            );
        }
        for n in &notes {
            warn!("{n}");
        }
        self.cache.reconfigure(&new.cache);
        self.swap_config(new);
        info!("configuration reloaded");
        Ok(notes)
    }

    /// Bumps what a statement wrote.
    pub fn apply_writes(&self, p: &Pending) {
        let source = InvalidationSource::Write;
        for t in &p.tables {
            self.cache.invalidate_table(t, source);
        }
        for s in &p.schemas {
            self.cache.invalidate_schema(s, source);
        }
        if p.all {
            self.cache.invalidate_all(InvalidationSource::Conservative);
        }
    }

    /// Invalidation when qcache cannot tell exactly what changed.
    pub fn conservative(&self, scope: Conservative, db: Option<&str>) {
        match (scope, db) {
            (Conservative::Schema, Some(db)) => {
                self.cache
                    .invalidate_schema(&db.to_lowercase(), InvalidationSource::Conservative);
            }
            _ => self.cache.invalidate_all(InvalidationSource::Conservative),
        }
    }

    /// A transaction ended: what it wrote changes for everyone now.
    pub fn invalidate_written(&self, txn: &Txn) {
        let source = InvalidationSource::TxnEnd;
        for t in &txn.written {
            self.cache.invalidate_table(t, source);
        }
        for s in &txn.written_schemas {
            self.cache.invalidate_schema(s, source);
        }
        if txn.written_unknown {
            self.cache.invalidate_all(source);
        }
    }

    /// Reloads the schema catalog after DDL, before the DDL's OK reaches the client, so that
    /// a view created a moment ago is known to the next read.
    pub async fn refresh_catalog(&self) {
        if let Err(e) = self.catalog.refresh().await {
            warn!(error = %e, "schema catalog reload failed");
            // Without a current catalog, widening may miss views and triggers.
            self.cache.invalidate_all(InvalidationSource::Catalog);
        }
    }
}

/// What the binlog tail uses for statement events: the same analysis as proxied writes.
fn binlog_analyser(catalog: Arc<Catalog>) -> WriteAnalyser {
    Arc::new(move |sql: &str, default_schema: &str| {
        let qualify = |schema: &Option<String>, name: &str| {
            let s = schema
                .clone()
                .unwrap_or_else(|| default_schema.to_lowercase());
            (s, name.to_lowercase())
        };
        match analysis::analyze(sql) {
            Analysis::Write(w) => match w.targets {
                WriteTargets::Tables(list) => {
                    Some(list.iter().map(|t| qualify(&t.schema, &t.name)).collect())
                }
                WriteTargets::Schema(s) => {
                    let s = s.to_lowercase();
                    Some(
                        catalog
                            .schema_tables(&s)
                            .into_iter()
                            .map(|n| (s.clone(), n))
                            .collect(),
                    )
                }
                WriteTargets::Unknown => None,
            },
            Analysis::Read(r) if r.may_write => None,
            _ => Some(Vec::new()),
        }
    })
}

/// Lets sessions learn that a graceful shutdown started.
#[derive(Clone)]
pub struct ShutdownSignal(watch::Receiver<bool>);

impl ShutdownSignal {
    /// Resolves once draining has begun (never, if the sender is gone without draining).
    pub async fn draining(&mut self) {
        if self.0.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A proxy started by [`start`]: where it listens, and the handle that stops it.
pub struct Running {
    /// Address clients connect to (the real port when the config said port 0).
    pub addr: SocketAddr,
    /// Address of the HTTP admin endpoint, when enabled.
    pub admin_addr: Option<SocketAddr>,
    pub shared: Arc<Shared>,
    drain: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Graceful stop: stop accepting, let sessions finish their command and transaction, up
    /// to `server.shutdown_timeout`, then close what is left.
    pub async fn shutdown(self) {
        let _ = self.drain.send(true);
        let _ = self.task.await;
    }

    /// Fast stop: every session is closed now.
    pub async fn abort(self) {
        let _ = self.stop.send(true);
        let _ = self.drain.send(true);
        let _ = self.task.await;
    }
}

/// Binds `addr` (host:port; every address it resolves to is tried in turn) with an explicit
/// accept backlog: the standard bind's 128 overflowed when 512 clients connected at once,
/// and an overflowed client of a server-speaks-first protocol hangs.
async fn bind(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = match a {
            std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // A restart must not wait for the old sockets' TIME_WAIT.
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(backlog)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr} resolves to no address"),
        )
    }))
}

/// Binds the listeners and starts serving in the background of the current runtime.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    config.validate()?;
    crate::workers::start(config.server.workers);
    let listener = bind(&config.server.listen, config.server.listen_backlog).await?;
    let addr = listener.local_addr()?;
    let admin_listen = config.admin.listen.clone();
    let shared = Arc::new(Shared::new(config));
    let (drain, drain_rx) = watch::channel(false);
    let (stop, stop_rx) = watch::channel(false);
    let admin_addr = if admin_listen.is_empty() {
        None
    } else {
        Some(crate::admin::http::spawn(&admin_listen, shared.clone(), drain_rx.clone()).await?)
    };
    let task = tokio::spawn(accept_loop(listener, shared.clone(), drain_rx, stop_rx));
    info!(%addr, upstream = %shared.config().server.upstream, "qcache listening");
    Ok(Running {
        addr,
        admin_addr,
        shared,
        drain,
        stop,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut drain: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let limit = Arc::new(Semaphore::new(shared.config().server.max_connections));
    let mut sessions = JoinSet::new();
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = drain.wait_for(|d| *d) => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let (tcp, _) = match accepted {
            Ok(a) => {
                backoff = Duration::from_millis(5);
                a
            }
            Err(e) => {
                // Out of file descriptors and friends: wait instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            sessions.spawn(refuse(tcp));
            continue;
        };
        let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
        let shared2 = shared.clone();
        let signal = ShutdownSignal(drain.clone());
        // The socket leaves this runtime's reactor for the session runtime's.
        let tcp = match tcp.into_std() {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot hand a connection to a session runtime");
                continue;
            }
        };
        sessions.spawn_on(
            async move {
                let Ok(tcp) = TcpStream::from_std(tcp) else {
                    return;
                };
                shared2.connections.fetch_add(1, Ordering::Relaxed);
                crate::session::serve(id, tcp, shared2.clone(), signal).await;
                shared2.connections.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            },
            crate::workers::next(),
        );
    }
    drop(listener);
    let deadline = shared.config().server.shutdown_timeout;
    info!(sessions = sessions.len(), ?deadline, "draining sessions");
    let all_done = async { while sessions.join_next().await.is_some() {} };
    tokio::select! {
        _ = all_done => {}
        _ = tokio::time::sleep(deadline) => warn!("shutdown deadline passed; closing sessions"),
        _ = stop.wait_for(|s| *s) => {}
    }
    sessions.abort_all();
    while sessions.join_next().await.is_some() {}
    info!("qcache stopped");
}

/// Over the connection limit: MySQL's own answer, sent in place of the greeting.
async fn refuse(tcp: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    info!(code = 1040, client = %peer, "refused a client: too many connections");
    let mut tcp = tcp;
    let mut out = bytes::BytesMut::new();
    codec::encode(
        0,
        &packets::err_payload_pre_handshake(1040, "Too many connections"),
        &mut out,
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), tcp.write_all(&out)).await;
    let _ = tcp.shutdown().await;
}

/// Runs until SIGTERM (graceful), SIGINT (fast); SIGHUP reloads the config.
pub async fn run_until_signalled(config: Config, cli: Cli) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let running = start(config).await?;
    running.shared.set_reload_source(cli);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    loop {
        tokio::select! {
            _ = term.recv() => {
                info!("SIGTERM: draining");
                running.shutdown().await;
                return Ok(());
            }
            _ = int.recv() => {
                info!("SIGINT: stopping now");
                running.abort().await;
                return Ok(());
            }
            _ = hup.recv() => {
                // Logged either way by reload itself.
                let _ = running.shared.reload();
            }
        }
    }
}
