//! One client connection and its upstream connection: the handshake relay, then the command
//! loop that sends reads through the cache, bumps versions for writes, relays the rest. A
//! hit (text or prepared) that needs no await is answered in the loop itself
//! (`hit_at_once`), before any command future is built.

mod admin;
mod begin;
mod context;
mod diagnostics;
mod digests;
mod explain;
pub mod handshake;
mod l2;
mod prepared;
mod private;
mod privileges;
mod query;
mod read;
mod relay;
mod statements;
mod write;

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, Instrument};

use crate::engine::command::{route, Follow, Route};
use crate::engine::state::SessionState;
use crate::protocol::codec::Packet;
use crate::protocol::negotiate;
/// Kept at this path for `prepared.rs`, which the read-path rewrite owns.
use crate::protocol::packets::{self, status};
use crate::protocol::response::Expect;
use crate::shared::Shared;
use crate::shutdown::ShutdownSignal;
use crate::transport::{self as conn, ConnError, PacketConn};
use crate::workers::Seat;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("client: {0}")]
    Client(ConnError),
    #[error("upstream: {0}")]
    Upstream(ConnError),
    #[error("{0}")]
    UpstreamUnavailable(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("authentication failed")]
    AuthFailed,
    #[error("connection refused")]
    Refused,
    #[error("authentication timed out")]
    AuthTimeout,
}

impl SessionError {
    /// Ends that are part of normal life and need no warning in the log.
    pub fn is_quiet(&self) -> bool {
        matches!(
            self,
            SessionError::AuthFailed
                | SessionError::Refused
                | SessionError::Client(ConnError::Closed)
        )
    }
}

/// What the command loop did of a command before its future was built
/// ([`Session::hit_at_once`]).
enum Ahead {
    /// Nothing: the command runs from the start.
    Nothing,
    /// Served from the cache: the command is done.
    Served,
    /// A text read looked up under its bytes and not found (not looked up twice).
    TextMissed,
    /// An execute taken as far as `prepared::ExecuteAhead` says.
    Execute(prepared::ExecuteAhead),
}

pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) client: PacketConn,
    pub(crate) upstream: PacketConn,
    pub(crate) st: SessionState,
    /// TLS on each leg and the connection's nonce, for COM_CHANGE_USER's authentication.
    pub(crate) legs: crate::protocol::negotiate::AuthLegs,
    /// The fill buffer of the last miss, kept for the next one (see `Fill`).
    pub(crate) fill_scratch: bytes::BytesMut,
    /// Where a prepared execute's key material is assembled, reused across executes.
    pub(crate) key_scratch: Vec<u8>,
    /// What happened to the statement being answered, and to the one before it
    /// (per-digest statistics, `SHOW QCACHE LAST`).
    pub(crate) cur: crate::engine::last::Current,
    pub(crate) last: crate::engine::last::Last,
    /// Status flags of the last answer to a private statement (`context.rs`), for where no
    /// relayed OK tells the session's state (after a refused COM_CHANGE_USER).
    pub(crate) private_status: Option<u16>,
    /// The answer to the last read sent upstream: a cursor, an error, its columns. An
    /// execute follows its statement's cursor and columns by it (`after_execute`).
    pub(crate) read_answer: Option<crate::engine::prepared::ReadAnswer>,
    /// A child write's parent lookup sent beside it (`engine::fkslices::Timing::WithWrite`):
    /// what it asked, and its answers when they come.
    pub(crate) early_lookup: Option<relay::EarlyLookup>,
    /// The session thread it runs on (`workers`), which may ask it to move.
    seat: Seat,
    /// Its log span, entered around commands but not hits served at once, which log nothing:
    /// entering it per poll took the subscriber's shared locks, 270 Ir a hit at info (#36).
    span: tracing::Span,
}

/// Runs one client from accept to close: the handshake here, the commands in a task this
/// one waits for, on this session thread and then on each one `workers` moves it to.
pub async fn serve(
    id: u64,
    client: conn::Stream,
    shared: Arc<Shared>,
    sd: ShutdownSignal,
    seat: Seat,
) {
    let peer = client.peer();
    let span = tracing::info_span!("session", id, client = %peer, user = tracing::field::Empty);
    async move {
        let s = match start(client, shared.clone(), seat).await {
            Ok(s) => s,
            Err(e) if e.is_quiet() => {
                return debug!(reason = %e, "connection ended during handshake")
            }
            Err(e) => return info!(error = %e, "connection ended during handshake"),
        };
        s.span.record("user", s.st.user.as_str());
        info!(db = s.st.db.as_deref().unwrap_or(""), "session started");
        // Awaited in one place only, the command loop is folded into its task's future
        // (H7 in docs/benchmarks.md). This task waits, and a fast stop's abort reaches it.
        let mut next = Some(Box::new((s, sd, None)));
        while let Some(moving) = next {
            let (s, sd, legs) = *moving;
            let there = s.seat.handle();
            let run = s.run(sd, legs);
            next = crate::workers::run_on(there, run).await.flatten();
        }
    }
    .instrument(span)
    .await
}

/// A session on its way to a session thread, its legs off every reactor (`None`: still on
/// this one's). Boxed: a task's output is copied on every poll, each hit's included (H7).
type Moving = Box<(Session, ShutdownSignal, Option<Legs>)>;
type Legs = [conn::Detached; 2];
/// How a command loop ended: the session over (`None`), or to move with its legs.
type LoopEnd = Result<Option<Legs>, SessionError>;

async fn start(
    client: conn::Stream,
    shared: Arc<Shared>,
    seat: Seat,
) -> Result<Session, SessionError> {
    let cfg = shared.config();
    let mut client = PacketConn::new(client, cfg.server.pre_auth_max_packet);
    client.write_timeout = Some(cfg.server.client_write_timeout);
    let auth_timeout = cfg.server.auth_timeout;
    // Read before the server authenticates: a privilege change after this point may or may
    // not be in the privileges the server gives the session, so it counts as after.
    let priv_baseline = shared.cache.versions().privileges.epoch();
    // Validated when the config was loaded; a file that vanished since fails here.
    let tls = crate::tls::contexts(&cfg.tls).map_err(|e| SessionError::Protocol(e.to_string()))?;
    let connected = handshake::connect(&mut client, &cfg, tls.as_deref());
    let (mut upstream, negotiated) = tokio::time::timeout(auth_timeout, connected)
        .await
        .map_err(|_| SessionError::AuthTimeout)??;
    // The server's idle timers run from its last command; hits send none (`keep_alive`).
    upstream.track_writes();
    client.max_payload = 1 << 30;
    let mut st = SessionState::new(&shared, &negotiated);
    st.priv_baseline = priv_baseline;
    let mut s = Session {
        shared,
        client,
        upstream,
        st,
        legs: negotiated.legs,
        fill_scratch: bytes::BytesMut::new(),
        key_scratch: Vec::new(),
        cur: Default::default(),
        last: Default::default(),
        private_status: None,
        read_answer: None,
        early_lookup: None,
        seat,
        span: tracing::Span::current(),
    };
    // The session's settings as it inherited them from the globals: part of the key.
    s.client.flush().await.map_err(SessionError::client)?;
    tokio::time::timeout(auth_timeout, s.read_server_context())
        .await
        .map_err(|_| SessionError::AuthTimeout)??;
    Ok(s)
}

impl Session {
    /// Runs the commands here, its legs attached first if it came from another thread,
    /// until it ends or moves again ([`end_or_move`](Self::end_or_move)).
    async fn run(mut self, mut sd: ShutdownSignal, legs: Option<Legs>) -> Option<Moving> {
        let (c, u) = (&mut self.client, &mut self.upstream);
        // A waker parked by the task that ran it before is not this task's.
        c.unpark();
        u.unpark();
        let attached = legs.map_or(Ok(()), |[l, m]| c.attach(l).and_then(|()| u.attach(m)));
        let end = match attached {
            Ok(()) => self.command_loop(&mut sd).await,
            Err(e) => Err(SessionError::Client(e.into())),
        };
        self.end_or_move(end, sd).await
    }

    /// After the command loop: the session with its legs detached if it is to move, else
    /// closed and its end logged.
    async fn end_or_move(mut self, end: LoopEnd, sd: ShutdownSignal) -> Option<Moving> {
        if let Ok(Some(legs)) = end {
            return Some(Box::new((self, sd, Some(legs))));
        }
        self.finish().await;
        match end {
            Ok(_) => info!(parent: &self.span, "session ended"),
            Err(e) if e.is_quiet() => info!(parent: &self.span, reason = %e, "session ended"),
            Err(e) => tracing::warn!(parent: &self.span, error = %e, "session ended with an error"),
        }
        None
    }

    /// The commands, until the session ends (`None`) or, between two commands, is asked to
    /// move to another session thread and can (plain legs, nothing owed): `Some(its legs)`,
    /// detached.
    async fn command_loop(&mut self, sd: &mut ShutdownSignal) -> LoopEnd {
        // One wait for the whole session, polled while it waits for each command (an atomic
        // load: `ShutdownSignal`).
        let draining = sd.draining();
        tokio::pin!(draining);
        // A session that just came serves a command before it may move again.
        let mut first = true;
        loop {
            self.client.flush().await.map_err(SessionError::client)?;
            let may_move = !std::mem::take(&mut first)
                && self.early_lookup.is_none()
                && self.client.can_detach()
                && self.upstream.can_detach();
            if let Some(to) = self.seat.between_commands(may_move) {
                let c = self
                    .client
                    .detach()
                    .map_err(|e| SessionError::Client(e.into()))?;
                let u = self
                    .upstream
                    .detach()
                    .map_err(|e| SessionError::Client(e.into()))?;
                self.seat.move_to(to);
                return Ok(Some([c, u]));
            }
            self.client.start_command();
            // Between commands is the one place a graceful shutdown may end a session,
            // and only outside a transaction.
            let pkt = tokio::select! {
                biased;
                p = self.client.read() => p.map_err(SessionError::client)?,
                _ = &mut draining, if !self.st.txn.in_transaction() => {
                    debug!(parent: &self.span, "closing idle session for shutdown");
                    return Ok(None);
                }
                // The server owes nothing between commands, so bytes or a close here mean
                // it ended the session (KILL, wait_timeout, a restart; MySQL 8 says why in
                // an error packet first). Pass that on and close the client as the server
                // closed us, or a pool would keep a dead connection alive on cache hits.
                r = self.upstream.watch() => {
                    let mut said = false;
                    while let Ok(Some(p)) = self.upstream.try_decode() {
                        self.client.push(p.seq, &p.payload);
                        said = true;
                    }
                    if r.is_ok() && !said {
                        continue; // part of a packet: read the rest
                    }
                    let _ = self.client.flush().await;
                    let reset = r.as_ref().is_err_and(ConnError::is_reset);
                    if reset {
                        self.client.reset_on_close();
                    }
                    debug!(parent: &self.span, closed = r.is_err(), reset, "the server ended the session between commands");
                    return Ok(None);
                }
            };
            let Some(pkt) = pkt else { return Ok(None) };
            let route = route(&mut self.st, &pkt.payload);
            let ahead = match self.hit_at_once(&pkt, &route) {
                Ahead::Served => continue,
                ahead => ahead,
            };
            let span = self.span.clone();
            match self.command(pkt, route, ahead).instrument(span).await {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(SessionError::Upstream(e)) => {
                    // The client's leg closes as the server closed qcache's: a server that
                    // closes with the command unread (its kernel resets), or that resets
                    // itself, resets; an orderly close stays orderly.
                    let reset = self.relay_farewell().await || e.is_reset();
                    if reset {
                        self.client.reset_on_close();
                    }
                    return Err(SessionError::Upstream(e));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The server may have said why before it closed: a packet over its
    /// `max_allowed_packet` gets ERR 1153 and a close while qcache is still writing it, so
    /// the write fails with the answer already on its way back. An ERR that arrives within
    /// a second is relayed, so the client hears the server's error, not a lost connection.
    /// True when the upstream's end turned out to be a reset (the client's leg is to be
    /// reset too).
    async fn relay_farewell(&mut self) -> bool {
        let mut reset = false;
        let wait = async {
            loop {
                match self.upstream.try_decode() {
                    Ok(Some(p)) => return (p.payload.first() == Some(&0xff)).then_some(p),
                    Ok(None) => {}
                    Err(_) => return None,
                }
                if let Err(e) = self.upstream.fill().await {
                    reset = e.is_reset();
                    // What was read before the close may still hold the ERR.
                    return self
                        .upstream
                        .try_decode()
                        .ok()
                        .flatten()
                        .filter(|p| p.payload.first() == Some(&0xff));
                }
            }
        };
        if let Ok(Some(p)) = tokio::time::timeout(Duration::from_secs(1), wait).await {
            self.client.push(p.seq, &p.payload);
            let _ = self.client.flush().await;
        }
        reset
    }

    /// A read served from the cache with no await, before the command's future is built:
    /// the steps `command` takes for it (a text read: `Route::Query`, the statement's start
    /// and end, `Session::hit_before_scan`; an execute: `Route::Execute` with no long data
    /// to release, `Session::stmt_execute`), for a hit that needs nothing from the server
    /// and no flush but the loop's own. A hit pays for no future, whose state in the
    /// connection's task is lines gone cold since the connection's last request (#36).
    fn hit_at_once(&mut self, pkt: &Packet, route: &Route) -> Ahead {
        match route {
            Route::Query => {
                let sql = &pkt.payload[1..];
                self.statement_start();
                match self.text_hit_at_once(sql) {
                    None => Ahead::Nothing,
                    Some(false) => Ahead::TextMissed,
                    Some(true) => {
                        self.statement_end(digests::Statement::Text(sql));
                        Ahead::Served
                    }
                }
            }
            Route::Execute { id, release: None } => {
                self.statement_start();
                match self.execute_at_once(pkt) {
                    None => Ahead::Nothing,
                    Some(prepared::ExecuteAtOnce::Ahead(a)) => Ahead::Execute(a),
                    Some(prepared::ExecuteAtOnce::Served) => {
                        if let Some(id) = *id {
                            self.statement_end(digests::Statement::Prepared(id));
                        }
                        Ahead::Served
                    }
                }
            }
            _ => Ahead::Nothing,
        }
    }

    /// Handles one command, routed (`engine::command::route`); false when the session is
    /// over. `ahead`: what [`hit_at_once`](Self::hit_at_once) did of it.
    async fn command(
        &mut self,
        pkt: Packet,
        route: Route,
        ahead: Ahead,
    ) -> Result<bool, SessionError> {
        match route {
            Route::Relay(expect) => {
                self.relay_command(&pkt, expect).await?;
            }
            Route::Quit => {
                self.upstream.start_command();
                let _ = self.upstream.send(pkt.seq, &pkt.payload).await;
                return Ok(false);
            }
            Route::Query => {
                // One view of the statement serves the command and `SHOW QCACHE LAST`.
                let sql = pkt.payload.slice(1..);
                self.statement_start();
                let looked_up = matches!(ahead, Ahead::TextMissed);
                self.query(pkt, &sql, looked_up).await?;
                self.statement_end(digests::Statement::Text(&sql));
            }
            Route::InitDb => {
                let follow = Follow::InitDb(&pkt.payload[1..]);
                self.relay_following(&pkt, Expect::OnePacket, follow)
                    .await?
            }
            Route::Prepare => self.stmt_prepare(pkt).await?,
            Route::Execute { id, release } => {
                if let Some(r) = release {
                    self.release_long_data(r).await?;
                }
                let ahead = match ahead {
                    Ahead::Execute(a) => Some(a),
                    _ => {
                        self.statement_start();
                        None
                    }
                };
                self.stmt_execute(pkt, ahead).await?;
                if let Some(id) = id {
                    self.statement_end(digests::Statement::Prepared(id));
                }
            }
            Route::BulkExecute { release } => {
                if let Some(r) = release {
                    self.release_long_data(r).await?;
                }
                self.stmt_execute(pkt, None).await?
            }
            Route::Held => {}
            Route::Unanswered => {
                self.upstream.start_command();
                self.upstream
                    .send(pkt.seq, &pkt.payload)
                    .await
                    .map_err(SessionError::upstream)?;
            }
            Route::DropDb { schema } => {
                let follow = Follow::DropDb(&schema);
                self.relay_following(&pkt, Expect::OnePacket, follow)
                    .await?
            }
            Route::ChangeUser => return self.change_user(pkt).await,
            Route::ResetConnection => {
                let resp = self.relay_command(&pkt, Expect::OnePacket).await?;
                if resp.oks > 0 {
                    self.st.reset(&self.shared, None);
                    self.client.flush().await.map_err(SessionError::client)?;
                    self.read_server_context().await?;
                }
            }
            Route::BinlogStream => {
                self.relay_stream(&pkt).await?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn change_user(&mut self, pkt: Packet) -> Result<bool, SessionError> {
        let parsed = crate::protocol::handshake::parse_change_user(&pkt.payload, self.st.caps);
        let priv_baseline = self.shared.cache.versions().privileges.epoch();
        // What a hit or qcache's own read-back owes the diagnostics is put right first, as
        // before any command (`engine::diagnostics::before_command`): FOUND_ROWS() survives
        // a change-user on MariaDB, and the read-back after it reads the server's.
        self.diagnostics_before(&pkt.payload, false).await?;
        self.end_transaction_for_reset();
        // A cleartext password from a TLS client never goes to a plain upstream.
        let up = negotiate::change_user_upstream(&pkt.payload, self.st.caps, &self.legs);
        let Some(payload) = up else {
            let err = negotiate::Refusal::MalformedChangeUser.payload();
            let _ = self.client.send(pkt.seq.wrapping_add(1), &err).await;
            return Ok(false);
        };
        self.upstream.start_command();
        self.upstream
            .send(pkt.seq, &payload)
            .await
            .map_err(SessionError::upstream)?;
        let mut legs = self.legs.for_change_user();
        let accepted = handshake::auth_rounds(&mut self.client, &mut self.upstream, &mut legs);
        let accepted = accepted.await?;
        if let (Some(_), Some(cu)) = (accepted, &parsed) {
            self.span.record("user", cu.user.as_str());
        }
        // Accepted, the server computed the new user's privileges afresh; refused, it kept
        // the old account. A server that closed instead (MariaDB after the third failure)
        // ends the read-back, and the session, as it ended the direct connection.
        let cfg = self.shared.config();
        let faults = &self.shared.cache.versions().faults;
        self.st
            .change_user_answered((&cfg, faults), accepted, priv_baseline, parsed);
        self.client.flush().await.map_err(SessionError::client)?;
        self.private_status = None;
        self.read_server_context().await?;
        if accepted.is_none() {
            // No answer told the session's flags: the transaction is gone at least.
            self.st.txn.status_after_reset(self.private_status);
        }
        Ok(true)
    }

    /// COM_RESET_CONNECTION and COM_CHANGE_USER roll back an open transaction; its writes
    /// never committed, but bumping is harmless and keeps the rule simple.
    fn end_transaction_for_reset(&mut self) {
        if let Some(txn) = self.st.txn.ended_by_reset() {
            self.shared
                .invalidate(&crate::invalidation::writes::transaction_end(&txn));
        }
    }

    async fn finish(&mut self) {
        // A connection that ends inside a transaction may have sent COMMIT whose OK never
        // arrived: treat what it wrote as changed.
        if self.st.txn.in_transaction() {
            self.end_transaction_for_reset();
        }
        self.client.shutdown().await;
        self.upstream.shutdown().await;
    }

    /// Answers with qcache's own OK a statement the server would have answered with one (a
    /// plain BEGIN, COMMIT or ROLLBACK, a SET of `query_cache_type` alone, FLUSH or RESET
    /// QUERY CACHE): with the same diagnostics too, the server's having left `ROW_COUNT()` 0
    /// (`policy::diagnostics::after_local_ok`, put right before the next command).
    pub(crate) async fn answer_ok_locally(&mut self, seq: u8) -> Result<(), SessionError> {
        self.st.after_hit = crate::policy::diagnostics::after_local_ok(self.st.after_hit);
        self.send_ok(seq).await
    }

    /// Sends qcache's own OK for a statement it answered itself.
    pub(crate) async fn send_ok(&mut self, seq: u8) -> Result<(), SessionError> {
        let st = self.st.txn.status() & status::PER_SESSION;
        self.client
            .send(seq, &packets::ok_payload(0, 0, st, 0))
            .await
            .map_err(SessionError::client)?;
        Ok(())
    }
}
