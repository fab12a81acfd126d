//! The connection phase: connect upstream, relay the greeting (capabilities edited), the
//! client's response and every authentication round until the server's OK or ERR.

use std::time::Duration;

use tokio::net::TcpStream;
use tracing::debug;

use super::conn::{ConnError, PacketConn};
use super::SessionError;
use crate::protocol::handshake::{
    self, Greeting, HandshakeResponse, CLEARED_CAPS, CLEARED_MARIADB_CAPS,
};
use crate::protocol::packets::{self, cap};

/// MySQL client error numbers qcache uses for its own failures.
/// "Can't connect to MySQL server": MySQL's client code for an unreachable server, which
/// libmariadb-based clients refuse to read from the wire (they report 2027), so the wire
/// carries ER_UNKNOWN_ERROR with 2003's message text instead.
pub const CR_CONN_HOST_ERROR: u16 = 2003;
pub const ER_UNKNOWN_ERROR: u16 = 1105;
pub const CR_SSL_CONNECTION_ERROR: u16 = 2026;
pub const ER_NOT_SUPPORTED_AUTH_MODE: u16 = 1251;
pub const ER_HANDSHAKE_ERROR: u16 = 1043;

/// What both ends agreed on.
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub greeting: Greeting,
    pub response: HandshakeResponse,
    /// Capabilities in force: what the client asked for out of what was offered.
    pub caps: u32,
    /// Status flags of the OK that ended authentication.
    pub status: u16,
}

/// Opens the upstream connection. Failure is reported to the client as MySQL does when the
/// server cannot be reached, naming qcache and the address so the operator knows which hop.
pub async fn connect_upstream(
    client: &mut PacketConn,
    addr: &str,
    timeout: Duration,
) -> Result<PacketConn, SessionError> {
    let res = tokio::time::timeout(timeout, TcpStream::connect(addr)).await;
    let err = match res {
        Ok(Ok(s)) => return Ok(PacketConn::new(s, 1 << 30)),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {timeout:?}"),
    };
    let msg =
        format!("qcache: Can't connect to MySQL server on '{addr}' ({err}) [{CR_CONN_HOST_ERROR}]");
    let _ = client
        .send(
            0,
            &packets::err_payload_pre_handshake(ER_UNKNOWN_ERROR, &msg),
        )
        .await;
    Err(SessionError::UpstreamUnavailable(msg))
}

/// Relays the connection phase. On success the session may start its command loop.
pub async fn relay(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    greeting_timeout: Duration,
) -> Result<Negotiated, SessionError> {
    let greet = match tokio::time::timeout(greeting_timeout, upstream.read_some()).await {
        Ok(Ok(g)) => g,
        // Without an ERR the client would only see its connection drop, with no hint that
        // the server (not qcache) is the one not answering.
        Ok(Err(e)) => {
            let msg =
                format!("qcache: the MySQL server closed the connection before its greeting ({e})");
            let _ = client
                .send(
                    0,
                    &packets::err_payload_pre_handshake(ER_UNKNOWN_ERROR, &msg),
                )
                .await;
            return Err(SessionError::upstream(e));
        }
        Err(_) => {
            let msg = format!(
                "qcache: the MySQL server accepted the connection but sent no greeting within \
                 {greeting_timeout:?} (server.connect_timeout)"
            );
            let _ = client
                .send(
                    0,
                    &packets::err_payload_pre_handshake(ER_UNKNOWN_ERROR, &msg),
                )
                .await;
            return Err(SessionError::UpstreamUnavailable(msg));
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
    let (payload, greeting) =
        handshake::rewrite_greeting(&greet.payload, CLEARED_CAPS, CLEARED_MARIADB_CAPS)
            .ok_or_else(|| SessionError::Protocol("malformed server greeting".into()))?;
    client
        .send(greet.seq, &payload)
        .await
        .map_err(SessionError::client)?;

    let resp = client.read_some().await.map_err(SessionError::client)?;
    let parsed = match handshake::parse_handshake_response(&resp.payload) {
        Ok(r) => r,
        Err(e) => {
            let _ = client
                .send(
                    resp.seq.wrapping_add(1),
                    &packets::err_payload(ER_HANDSHAKE_ERROR, "08S01", "Bad handshake"),
                )
                .await;
            return Err(SessionError::Protocol(e.to_string()));
        }
    };
    if parsed.ssl_request {
        let msg = "qcache: TLS was requested but qcache has no TLS configured \
                   (connect without TLS, or configure [tls.client])";
        let _ = client
            .send(
                resp.seq.wrapping_add(1),
                &packets::err_payload(CR_SSL_CONNECTION_ERROR, "HY000", msg),
            )
            .await;
        return Err(SessionError::Refused);
    }
    if parsed.capabilities & (cap::COMPRESS | cap::ZSTD_COMPRESSION) != 0 {
        let _ = client
            .send(
                resp.seq.wrapping_add(1),
                &packets::err_payload(
                    ER_NOT_SUPPORTED_AUTH_MODE,
                    "08004",
                    "qcache: protocol compression was not offered",
                ),
            )
            .await;
        return Err(SessionError::Refused);
    }
    upstream
        .send(resp.seq, &resp.payload)
        .await
        .map_err(SessionError::upstream)?;

    let caps = parsed.capabilities & (greeting.capabilities | cap::MARIADB_CLIENT_MYSQL);
    // Authentication rounds: the server speaks, and the client answers unless the server
    // said OK, ERR, or caching_sha2_password's "fast auth succeeded" (an OK follows it).
    loop {
        let p = upstream.read_some().await.map_err(SessionError::upstream)?;
        client
            .send(p.seq, &p.payload)
            .await
            .map_err(SessionError::client)?;
        match p.first() {
            Some(0x00) => {
                let status = packets::parse_ok(&p.payload).map(|o| o.status).unwrap_or(0);
                debug!(user = %parsed.user, "authenticated");
                return Ok(Negotiated {
                    greeting,
                    response: parsed,
                    caps,
                    status,
                });
            }
            Some(0xff) => return Err(SessionError::AuthFailed),
            Some(0x01) if p.payload.len() == 2 && p.payload[1] == 0x03 => continue,
            _ => {
                let answer = client.read_some().await.map_err(SessionError::client)?;
                upstream
                    .send(answer.seq, &answer.payload)
                    .await
                    .map_err(SessionError::upstream)?;
            }
        }
    }
}

/// The authentication rounds of COM_CHANGE_USER, after its packet went upstream. Returns
/// the OK's status on success, None when the server refused.
pub async fn relay_auth_rounds(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
) -> Result<Option<u16>, SessionError> {
    loop {
        let p = upstream.read_some().await.map_err(SessionError::upstream)?;
        client.push(p.seq, &p.payload);
        client.flush().await.map_err(SessionError::client)?;
        match p.first() {
            Some(0x00) => {
                return Ok(Some(
                    packets::parse_ok(&p.payload).map(|o| o.status).unwrap_or(0),
                ))
            }
            Some(0xff) => return Ok(None),
            Some(0x01) if p.payload.len() == 2 && p.payload[1] == 0x03 => continue,
            _ => {
                let answer = client.read_some().await.map_err(SessionError::client)?;
                upstream
                    .send(answer.seq, &answer.payload)
                    .await
                    .map_err(SessionError::upstream)?;
            }
        }
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
