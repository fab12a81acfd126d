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

use crate::cache::versions::Versions;
use crate::cli::Cli;
use crate::config::{Config, Conservative};
use crate::protocol::codec;
use crate::protocol::packets;
use crate::session::state::{Pending, Txn};

/// State shared by every session.
pub struct Shared {
    config: ArcSwap<Config>,
    pub versions: Arc<Versions>,
    /// Client connections open now.
    pub connections: AtomicU64,
    next_session: AtomicU64,
}

impl Shared {
    pub fn new(config: Config) -> Shared {
        Shared {
            config: ArcSwap::from_pointee(config),
            versions: Arc::new(Versions::new()),
            connections: AtomicU64::new(0),
            next_session: AtomicU64::new(1),
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    pub fn swap_config(&self, c: Config) {
        self.config.store(Arc::new(c));
    }

    /// Bumps what a statement wrote.
    pub fn apply_writes(&self, p: &Pending, db: Option<&str>) {
        for t in &p.tables {
            self.versions.bump(t);
        }
        for s in &p.schemas {
            self.versions.bump_schema(s);
        }
        if p.all {
            self.conservative(Conservative::All, db);
        }
    }

    /// Invalidation when qcache cannot tell exactly what changed.
    pub fn conservative(&self, scope: Conservative, db: Option<&str>) {
        match (scope, db) {
            (Conservative::Schema, Some(db)) => {
                self.versions.bump_schema(&db.to_lowercase());
            }
            _ => self.versions.bump_all(),
        }
    }

    /// A transaction ended: what it wrote changes for everyone now.
    pub fn invalidate_written(&self, txn: &Txn) {
        for t in &txn.written {
            self.versions.bump(t);
        }
        for s in &txn.written_schemas {
            self.versions.bump_schema(s);
        }
        if txn.written_unknown {
            self.versions.bump_all();
        }
    }

    /// Reloads the schema catalog after DDL.
    pub async fn refresh_catalog(&self) {}
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

/// Binds the listeners and starts serving in the background of the current runtime.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    config.validate()?;
    let listener = TcpListener::bind(&config.server.listen).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared::new(config));
    let (drain, drain_rx) = watch::channel(false);
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(
        listener,
        shared.clone(),
        drain_rx,
        stop_rx,
    ));
    info!(%addr, upstream = %shared.config().server.upstream, "qcache listening");
    Ok(Running {
        addr,
        admin_addr: None,
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
        sessions.spawn(async move {
            shared2.connections.fetch_add(1, Ordering::Relaxed);
            crate::session::serve(id, tcp, shared2.clone(), signal).await;
            shared2.connections.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
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
    let mut tcp = tcp;
    let mut out = bytes::BytesMut::new();
    codec::encode(
        0,
        &packets::err_payload(1040, "08004", "Too many connections"),
        &mut out,
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), tcp.write_all(&out)).await;
    let _ = tcp.shutdown().await;
}

/// Runs until SIGTERM (graceful), SIGINT (fast); SIGHUP reloads the config.
pub async fn run_until_signalled(config: Config, cli: Cli) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let running = start(config).await?;
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
            _ = hup.recv() => reload(&running.shared, &cli),
        }
    }
}

/// Re-reads the config file; an invalid one keeps the old config and says why.
pub fn reload(shared: &Shared, cli: &Cli) {
    match cli.effective_config() {
        Ok(new) => {
            let old = shared.config();
            if new.server.listen != old.server.listen {
                warn!("server.listen changed: takes effect after a restart");
            }
            shared.swap_config(new);
            info!("configuration reloaded");
        }
        Err(e) => warn!(error = %e, "reload refused; keeping the running configuration"),
    }
}
