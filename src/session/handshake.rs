//! The connection phase: connect upstream, relay the greeting (capabilities edited), the
//! client's response and every authentication round until the server's OK or ERR. What to
//! send, and when to refuse, is decided in `protocol::negotiate` and `engine::connect`.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use super::SessionError;
use crate::config::Config;
use crate::engine::connect::{self, AuthRounds, Leg, Then};
use crate::engine::state::Negotiated;
use crate::protocol::codec::Packet;
use crate::protocol::handshake::{self, HandshakeResponse};
use crate::protocol::negotiate::{self, AuthLegs, Greeted, Halt, Refusal};
use crate::protocol::packets;
use crate::tls::{sha2, Contexts, UpstreamTlsMode};
use crate::transport::{ConnError, PacketConn};

/// Opens the upstream connection. Failure is reported to the client as MySQL does when the
/// server cannot be reached, naming qcache and the address so the operator knows which hop.
async fn connect_upstream(
    client: &mut PacketConn,
    addr: &str,
    timeout: Duration,
) -> Result<PacketConn, SessionError> {
    let error = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => return Ok(PacketConn::new(s, 1 << 30)),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {timeout:?}"),
    };
    let addr = addr.to_string();
    Err(refuse(client, 0, Refusal::Unreachable { addr, error }).await)
}

/// Sends `r` to the client, numbered `seq`, as far as it still listens; the session ends
/// with the matching error.
async fn refuse(client: &mut PacketConn, seq: u8, r: Refusal) -> SessionError {
    let _ = client.send(seq, &r.payload()).await;
    match r {
        Refusal::Unreachable { .. } | Refusal::GreetingTimeout { .. } => {
            SessionError::UpstreamUnavailable(r.error().2)
        }
        _ => SessionError::Refused,
    }
}

/// `r`'s value, or the end of the connection phase on its halt (a refusal numbered `seq`).
async fn or_halt<T>(
    client: &mut PacketConn,
    seq: u8,
    r: Result<T, impl Into<Halt>>,
) -> Result<T, SessionError> {
    match r.map_err(Into::into) {
        Ok(v) => Ok(v),
        Err(Halt::Refuse(r)) => Err(refuse(client, seq, r).await),
        Err(Halt::Malformed(m)) => Err(SessionError::Protocol(m)),
    }
}

/// Connects upstream and relays the connection phase. On success the session may start its
/// command loop.
///
/// The phases, in order: the server's greeting ([`read_greeting`]), relayed with qcache's
/// capabilities; the client's response, through TLS if it asks ([`read_client_response`]);
/// the client leg's requirements (`connect::client_leg`); the upstream leg's TLS and
/// compression (`connect::upstream_leg`); the response forwarded with the upstream leg's
/// capabilities (`negotiate::response_upstream`); then the authentication rounds.
pub async fn connect(
    client: &mut PacketConn,
    cfg: &Config,
    tls: Option<&Contexts>,
) -> Result<(PacketConn, Negotiated), SessionError> {
    let (addr, compression) = (cfg.server.upstream.as_str(), &cfg.compression);
    let mut upstream = connect_upstream(client, addr, cfg.server.connect_timeout).await?;
    let greet = read_greeting(client, &mut upstream, cfg.server.connect_timeout).await?;
    // A Unix socket is local: encryption there protects nothing the kernel does not already
    // (whoever could read the bytes could read either process's memory) and would cost CPU
    // on every hit, the cost the socket exists to save. So TLS is not offered on it, and it
    // counts as secure, as MySQL counts it: tls.client.require is met by it, and MySQL's own
    // clients send a caching_sha2 password in the clear over it, which qcache must encrypt
    // for a plain upstream exactly as it does for a TLS client.
    let local = client.is_local();
    let acceptor = tls.and_then(|t| t.acceptor.as_ref()).filter(|_| !local);
    let offer = negotiate::client_offer(acceptor.is_some(), &compression.client);
    let greeted = Greeted::from_server(&greet.payload, offer)
        .ok_or_else(|| SessionError::Protocol("malformed server greeting".into()))?;
    client
        .send(greet.seq, &greeted.payload)
        .await
        .map_err(SessionError::client)?;
    let (resp, parsed) = read_client_response(client, acceptor, local).await?;
    let at = resp.seq.wrapping_add(1);
    let client_tls = client.is_tls();
    let require = tls.is_some_and(|t| t.require_client);
    let leg = connect::client_leg(client_tls || local, require, &parsed, offer, compression);
    let client_codec = or_halt(client, at, leg).await?;
    let mode = tls.map_or(UpstreamTlsMode::Disabled, |t| t.upstream_mode);
    let connector = tls.and_then(|t| t.connector.as_ref());
    let caps = greeted.server_caps;
    let leg = connect::upstream_leg(
        mode,
        connector.is_some(),
        caps,
        compression,
        addr,
        &resp.payload,
    );
    let leg = or_halt(client, at, leg).await?;
    let mut seq = 1;
    if let (Some(req), Some(connector)) = (&leg.ssl_request, connector) {
        seq = upstream
            .send(seq, req)
            .await
            .map_err(SessionError::upstream)?;
        let name = crate::tls::upstream_name(addr);
        if let Err(e) = upstream.connect_tls(connector, name).await {
            tracing::warn!(upstream = addr, error = %e, "TLS to the server failed");
            let (addr, error) = (addr.to_string(), e.to_string());
            return Err(refuse(client, at, Refusal::UpstreamTlsFailed { addr, error }).await);
        }
    }
    let delta = resp.seq.wrapping_sub(seq);
    let mut legs = greeted.legs(&parsed, delta, client_tls || local, leg.tls);
    let compression = leg.codec.as_ref().map(|c| (c.algorithm(), c.level()));
    let zstd_at = parsed.zstd_level.map(|(_, at)| at);
    let fwd = negotiate::response_upstream(&resp.payload, zstd_at, &legs, compression);
    let fwd = or_halt(client, at, fwd).await?;
    if legs.leaks_cleartext() {
        debug!(plugin = %legs.plugin, "cleartext password withheld from the plain upstream");
    }
    upstream
        .send(seq, &fwd)
        .await
        .map_err(SessionError::upstream)?;
    let Some(status) = auth_rounds(client, &mut upstream, &mut legs).await? else {
        return Err(SessionError::AuthFailed);
    };
    debug!(
        user = %parsed.user,
        client_tls,
        upstream_tls = leg.tls,
        client_compression = ?client_codec,
        upstream_compression = ?leg.codec,
        "authenticated"
    );
    // Both ends switch right after the OK, which itself went uncompressed.
    if let Some(c) = client_codec {
        client.enable_compression(c);
    }
    if let Some(c) = leg.codec {
        upstream.enable_compression(c);
    }
    Ok((upstream, Negotiated::new(greeted, parsed, status, legs)))
}

/// The server's greeting, within `greeting_timeout`. A server that closes or stays silent,
/// or greets with an ERR, is reported to the client as such.
async fn read_greeting(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    greeting_timeout: Duration,
) -> Result<Packet, SessionError> {
    // Without an ERR the client would only see its connection drop, with no hint that the
    // server (not qcache) is the one not answering.
    let greet = match tokio::time::timeout(greeting_timeout, upstream.read_some()).await {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => {
            let error = e.to_string();
            refuse(client, 0, Refusal::GreetingClosed { error }).await;
            return Err(SessionError::upstream(e));
        }
        Err(_) => {
            let r = Refusal::GreetingTimeout {
                within: greeting_timeout,
            };
            return Err(refuse(client, 0, r).await);
        }
    };
    if packets::is_err(&greet.payload) {
        // e.g. "Too many connections" or "Host is blocked": the client should see it as is.
        client
            .send(greet.seq, &greet.payload)
            .await
            .map_err(SessionError::client)?;
        return Err(SessionError::Refused);
    }
    Ok(greet)
}

/// The client's handshake response; after an SSL request, the one that follows inside TLS
/// (refused when qcache offers no TLS on this connection).
async fn read_client_response(
    client: &mut PacketConn,
    acceptor: Option<&TlsAcceptor>,
    local: bool,
) -> Result<(Packet, HandshakeResponse), SessionError> {
    let (resp, parsed) = read_response(client).await?;
    if !parsed.ssl_request {
        return Ok((resp, parsed));
    }
    let Some(acceptor) = acceptor else {
        let r = Refusal::unoffered_tls(local);
        return Err(refuse(client, resp.seq.wrapping_add(1), r).await);
    };
    client
        .accept_tls(acceptor)
        .await
        .map_err(SessionError::client)?;
    // The real response follows inside TLS, numbered after the SSL request.
    let (resp, parsed) = read_response(client).await?;
    if parsed.ssl_request {
        return Err(SessionError::Protocol("a second SSL request".into()));
    }
    Ok((resp, parsed))
}

/// Reads and parses the client's response; one that does not parse gets "Bad handshake".
async fn read_response(
    client: &mut PacketConn,
) -> Result<(Packet, HandshakeResponse), SessionError> {
    let resp = client.read_some().await.map_err(SessionError::client)?;
    match handshake::parse_handshake_response(&resp.payload) {
        Ok(parsed) => Ok((resp, parsed)),
        Err(e) => {
            refuse(client, resp.seq.wrapping_add(1), Refusal::BadHandshake).await;
            Err(SessionError::Protocol(e.to_string()))
        }
    }
}

/// Carries out the authentication rounds (`engine::connect::AuthRounds`) after the
/// response (or COM_CHANGE_USER) went upstream. Returns the OK's status, None on the
/// server's ERR (already relayed).
pub async fn auth_rounds(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    legs: &mut AuthLegs,
) -> Result<Option<u16>, SessionError> {
    let (mut rounds, mut step) = AuthRounds::start(legs);
    loop {
        for (leg, seq, p) in step.send {
            match leg {
                Leg::Client => client.send(seq, &p).await.map_err(SessionError::client)?,
                Leg::Upstream => upstream
                    .send(seq, &p)
                    .await
                    .map_err(SessionError::upstream)?,
            };
        }
        let next = match step.then {
            Then::Read(Leg::Client) => {
                rounds.packet(client.read_some().await.map_err(SessionError::client)?)
            }
            Then::Read(Leg::Upstream) => {
                rounds.packet(upstream.read_some().await.map_err(SessionError::upstream)?)
            }
            Then::ProxyKey => {
                let key = sha2::proxy_key().await;
                rounds.key(key.map_err(|e| SessionError::Protocol(e.to_string()))?)
            }
            Then::Done(status) => return Ok(status),
            Then::Refuse(seq, r) => return Err(refuse(client, seq, r).await),
        };
        step = next.map_err(SessionError::Protocol)?;
    }
}

impl SessionError {
    pub fn client(e: ConnError) -> SessionError {
        SessionError::Client(e)
    }
    pub fn upstream(e: ConnError) -> SessionError {
        SessionError::Upstream(e)
    }
}
