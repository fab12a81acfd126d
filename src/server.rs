//! The listener: binds, accepts under the connection limit, hands each client to a session
//! on a worker runtime, and turns signals into a reload, a drain or a stop. What sessions
//! share lives in `shared`, how they are stopped in `shutdown`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::cli::Cli;
use crate::config::Config;
use crate::listener::{Listeners, UnixSocketListener};
use crate::protocol::codec;
use crate::protocol::packets;
use crate::shutdown::{self, Shutdown};
use crate::transport::Detached;

/// Moved to `shared`; re-exported while branches that import it from here merge.
use crate::shared::Shared;

/// A proxy started by [`start`]: where it listens, and the handle that stops it.
pub struct Running {
    /// Address clients connect to over TCP (the real port when the config said port 0);
    /// the unspecified `0.0.0.0:0` when `server.listen` is empty.
    pub addr: SocketAddr,
    /// The Unix socket clients may connect to, when `server.socket` is set.
    pub socket: Option<std::path::PathBuf>,
    /// Address of the HTTP admin endpoint, when enabled.
    pub admin_addr: Option<SocketAddr>,
    pub shared: Arc<Shared>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Graceful stop: stop accepting, let sessions finish their command and transaction, up
    /// to `server.shutdown_timeout`, then close what is left.
    pub async fn shutdown(self) {
        self.shutdown.drain();
        let _ = self.task.await;
    }

    /// Fast stop: every session is closed now.
    pub async fn abort(self) {
        self.shutdown.stop();
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

/// Why qcache could not start; each message names the setting to change.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(
        "cannot listen on {addr}: {source} (server.listen, --listen or QCACHE_LISTEN: \
         choose a free address, or stop what holds this one)"
    )]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error(
        "cannot listen on the Unix socket {path}: {source} (server.socket, --socket or \
         QCACHE_SOCKET: a path in a directory qcache may write, or \"\" for none)"
    )]
    Socket {
        path: String,
        source: std::io::Error,
    },
    #[error("{0} (admin.listen, --admin-listen or QCACHE_ADMIN_LISTEN: choose a free address, or \"\" to turn the endpoint off)")]
    Admin(#[from] crate::admin::AdminError),
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
}

/// Binds the listeners and starts serving in the background of the current runtime.
pub async fn start(config: Config) -> Result<Running, StartError> {
    config.validate()?;
    crate::workers::start(config.server.workers, config.server.placement);
    let listen_err = |source| StartError::Listen {
        addr: config.server.listen.clone(),
        source,
    };
    let (tcp, addr) = if config.server.listen.is_empty() {
        (None, SocketAddr::from(([0, 0, 0, 0], 0)))
    } else {
        let l = bind(&config.server.listen, config.server.listen_backlog)
            .await
            .map_err(listen_err)?;
        let addr = l.local_addr().map_err(listen_err)?;
        (Some(l), addr)
    };
    let unix = if config.server.socket.is_empty() {
        None
    } else {
        let path = std::path::Path::new(&config.server.socket);
        let l = UnixSocketListener::bind(path, config.server.listen_backlog)
            .await
            .map_err(|source| StartError::Socket {
                path: config.server.socket.clone(),
                source,
            })?;
        Some(l)
    };
    let socket = unix.as_ref().map(|u| u.path().to_path_buf());
    let listeners = Listeners { tcp, unix };
    let admin_listen = config.admin.listen.clone();
    let shared = Arc::new(Shared::new(config));
    let shutdown = Shutdown::new();
    let (drain_rx, stop_rx) = (shutdown.draining(), shutdown.stopping());
    let admin_addr = if admin_listen.is_empty() {
        None
    } else {
        Some(crate::admin::http::spawn(&admin_listen, shared.clone(), drain_rx.clone()).await?)
    };
    let task = tokio::spawn(accept_loop(
        listeners,
        shared.clone(),
        drain_rx,
        shutdown.signals(),
        stop_rx,
    ));
    let tcp = if shared.config().server.listen.is_empty() {
        String::new()
    } else {
        addr.to_string()
    };
    let unix = socket
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    info!(addr = %tcp, socket = %unix, upstream = %shared.config().server.upstream, "qcache listening");
    Ok(Running {
        addr,
        socket,
        admin_addr,
        shared,
        shutdown,
        task,
    })
}

async fn accept_loop(
    listeners: Listeners,
    shared: Arc<Shared>,
    mut drain: watch::Receiver<bool>,
    signals: shutdown::Signals,
    stop: watch::Receiver<bool>,
) {
    let limit = Arc::new(Semaphore::new(shared.config().server.max_connections));
    let mut sessions = JoinSet::new();
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            a = listeners.accept() => a,
            _ = drain.wait_for(|d| *d) => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let client = match accepted {
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
            sessions.spawn(refuse(client));
            continue;
        };
        let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
        let shared2 = shared.clone();
        let signal = signals.session();
        // The socket leaves this runtime's reactor for the session runtime's.
        let client = match Detached::from_stream(client) {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot hand a connection to a session runtime");
                continue;
            }
        };
        let seat = crate::workers::seat();
        let runtime = seat.handle();
        sessions.spawn_on(
            async move {
                let Ok(client) = client.into_stream() else {
                    return;
                };
                shared2.connections.fetch_add(1, Ordering::Relaxed);
                crate::session::serve(id, client, shared2.clone(), signal, seat).await;
                shared2.connections.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            },
            runtime,
        );
    }
    // Closing the Unix listener removes its file: new clients get "no such file" at once
    // rather than a connection nobody accepts.
    drop(listeners);
    // A binlog tail of the fleet frees its slot now, so a standby streams within a tick
    // instead of after the lease runs out (docs/fleet.md).
    if let Some(l2) = &shared.l2 {
        l2.hand_over().await;
    }
    let deadline = shared.config().server.shutdown_timeout;
    shutdown::finish(sessions, deadline, stop).await;
    info!("qcache stopped");
}

/// Over the connection limit: MySQL's own answer, sent in place of the greeting.
async fn refuse(client: crate::transport::Stream) {
    use tokio::io::AsyncWriteExt;
    let peer = client.peer();
    info!(code = 1040, client = %peer, "refused a client: too many connections");
    let mut tcp = client;
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
pub async fn run_until_signalled(config: Config, cli: Cli) -> Result<(), StartError> {
    use tokio::signal::unix::{signal, SignalKind};
    let running = start(config).await?;
    running.shared.set_reload_source(cli);
    let mut term = signal(SignalKind::terminate()).map_err(StartError::Runtime)?;
    let mut int = signal(SignalKind::interrupt()).map_err(StartError::Runtime)?;
    let mut hup = signal(SignalKind::hangup()).map_err(StartError::Runtime)?;
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
