//! The connection phase: connect upstream, relay the greeting (capabilities edited), the
//! client's response and every authentication round until the server's OK or ERR.

use std::time::Duration;

use tokio::net::TcpStream;
use tracing::debug;

use super::SessionError;
use crate::config::{CompressionConfig, UpstreamTlsMode};
use crate::engine::state::Negotiated;
use crate::protocol::codec::Packet;
use crate::protocol::compress::Codec;
use crate::protocol::handshake::{
    self, Greeting, HandshakeResponse, CLEARED_CAPS, CLEARED_MARIADB_CAPS,
};
use crate::protocol::negotiate::{
    self, AnswerRoute, AuthLegs, ServerAuth, CR_CONN_HOST_ERROR, CR_SSL_CONNECTION_ERROR,
    ER_HANDSHAKE_ERROR, ER_NOT_SUPPORTED_AUTH_MODE, ER_SECURE_TRANSPORT_REQUIRED, ER_UNKNOWN_ERROR,
    WITHHELD_PLUGIN,
};
use crate::protocol::packets::{self, cap};
use crate::tls::sha2;
use crate::tls::Contexts;
use crate::transport::{ConnError, PacketConn};
use tokio_rustls::TlsAcceptor;

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

async fn refuse(
    client: &mut PacketConn,
    seq: u8,
    code: u16,
    state: &str,
    msg: &str,
) -> SessionError {
    let _ = client
        .send(seq, &packets::err_payload(code, state, msg))
        .await;
    SessionError::Refused
}

/// Refuses with qcache's own failure: ER_UNKNOWN_ERROR carrying the client code in `msg`
/// (see `negotiate::CR_CONN_HOST_ERROR`).
async fn refuse_unknown(client: &mut PacketConn, seq: u8, msg: &str) -> SessionError {
    refuse(client, seq, ER_UNKNOWN_ERROR, "HY000", msg).await
}

/// Relays the connection phase. On success the session may start its command loop.
///
/// The phases, in order: the server's greeting ([`read_greeting`]), relayed with qcache's
/// capabilities ([`greet_client`]); the client's response, through TLS if it asks
/// ([`read_client_response`]); the client leg's requirements ([`client_leg`]); the upstream
/// leg's TLS and compression ([`upstream_leg`]); the response forwarded with the upstream
/// leg's capabilities ([`forward_response`]); then the authentication rounds.
pub async fn relay(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    greeting_timeout: Duration,
    tls: Option<&Contexts>,
    compression: &CompressionConfig,
    upstream_addr: &str,
) -> Result<Negotiated, SessionError> {
    let greet = read_greeting(client, upstream, greeting_timeout).await?;
    // A Unix socket is local: encryption there protects nothing the kernel does not already
    // (whoever could read the bytes could read either process's memory) and would cost CPU
    // on every hit, the cost the socket exists to save. So TLS is not offered on it, and
    // tls.client.require is met by it, as MySQL's require_secure_transport counts a socket as
    // secure.
    let local = client.is_local();
    let acceptor = tls.and_then(|t| t.acceptor.as_ref()).filter(|_| !local);
    let greeted = greet_client(client, &greet, acceptor.is_some(), compression).await?;
    let (resp, parsed) = read_client_response(client, acceptor, local).await?;
    let client_tls = client.is_tls();
    let client_codec = client_leg(client, &resp, &parsed, greeted.offer, tls, compression).await?;
    let leg = upstream_leg(
        client,
        upstream,
        &resp,
        tls,
        greeted.server_caps,
        compression,
        upstream_addr,
    )
    .await?;
    let mut legs = AuthLegs {
        delta: resp.seq.wrapping_sub(leg.seq),
        plugin: parsed
            .auth_plugin
            .clone()
            .unwrap_or_else(|| greeted.greeting.auth_plugin.clone()),
        scramble: greeted.scramble,
        // A socket client counts as secure, as MySQL's own clients count it: they send a
        // caching_sha2 password in the clear over it, which qcache must encrypt for a plain
        // upstream exactly as it does for a TLS client.
        client_tls: client_tls || local,
        upstream_tls: leg.tls,
    };
    let mut withheld = None;
    if legs.leaks_cleartext() {
        // The client offered its password in the clear. The server switches a client to
        // its account's plugin when the response names another one, so the response goes
        // up without the password, under a name no account's plugin has: the server's
        // switch decides, and a switch to a cleartext plugin is refused in `auth_rounds`.
        withheld = handshake::without_auth_data(&resp.payload, WITHHELD_PLUGIN);
        if withheld.is_none() {
            return Err(refuse_cleartext(client, resp.seq.wrapping_add(1), &legs).await);
        }
        debug!(plugin = %legs.plugin, "cleartext password withheld from the plain upstream");
    }
    match withheld {
        Some(payload) => {
            let resp = Packet {
                seq: resp.seq,
                payload: payload.into(),
            };
            let parsed = handshake::parse_handshake_response(&resp.payload)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            forward_response(upstream, &resp, &parsed, &leg).await?
        }
        None => forward_response(upstream, &resp, &parsed, &leg).await?,
    }

    let greeting = greeted.greeting;
    let caps = parsed.capabilities & (greeting.capabilities | cap::MARIADB_CLIENT_MYSQL);
    match auth_rounds(client, upstream, &mut legs).await? {
        Some(status) => {
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
            Ok(Negotiated {
                greeting,
                response: parsed,
                caps,
                status,
                legs,
            })
        }
        None => Err(SessionError::AuthFailed),
    }
}

/// The server's greeting, within `greeting_timeout`. A server that closes or stays silent,
/// or greets with an ERR, is reported to the client as such.
async fn read_greeting(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    greeting_timeout: Duration,
) -> Result<Packet, SessionError> {
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
    Ok(greet)
}

/// The greeting as relayed, and what of the server's qcache keeps for later phases.
struct Greeted {
    /// The capability bits qcache offers the client (TLS, compression).
    offer: u32,
    greeting: Greeting,
    server_caps: u32,
    scramble: Vec<u8>,
}

/// Relays the greeting with the capabilities qcache cannot pass through cleared and its own
/// offers (TLS when `tls_offered`, the configured client compression) set.
async fn greet_client(
    client: &mut PacketConn,
    greet: &Packet,
    tls_offered: bool,
    compression: &CompressionConfig,
) -> Result<Greeted, SessionError> {
    let offer = negotiate::client_offer(tls_offered, &compression.client);
    let (payload, greeting) =
        handshake::rewrite_greeting_caps(&greet.payload, CLEARED_CAPS, offer, CLEARED_MARIADB_CAPS)
            .ok_or_else(|| SessionError::Protocol("malformed server greeting".into()))?;
    let server_caps = handshake::parse_greeting(&greet.payload).map_or(0, |g| g.capabilities);
    let scramble = handshake::greeting_scramble(&greet.payload).unwrap_or_default();
    client
        .send(greet.seq, &payload)
        .await
        .map_err(SessionError::client)?;
    Ok(Greeted {
        offer,
        greeting,
        server_caps,
        scramble,
    })
}

/// The client's handshake response; after an SSL request, the one that follows inside TLS
/// (refused when qcache offers no TLS on this connection).
async fn read_client_response(
    client: &mut PacketConn,
    acceptor: Option<&TlsAcceptor>,
    local: bool,
) -> Result<(Packet, HandshakeResponse), SessionError> {
    let resp = client.read_some().await.map_err(SessionError::client)?;
    let parsed = parse_response(client, &resp).await?;
    if !parsed.ssl_request {
        return Ok((resp, parsed));
    }
    let Some(acceptor) = acceptor else {
        let msg = if local {
            format!(
                "qcache: TLS is not offered on the Unix socket, which is local \
                 (connect without TLS, or over TCP) [{CR_SSL_CONNECTION_ERROR}]"
            )
        } else {
            format!(
                "qcache: TLS was requested but qcache has no TLS configured \
                 (connect without TLS, or configure [tls.client]) [{CR_SSL_CONNECTION_ERROR}]"
            )
        };
        return Err(refuse_unknown(client, resp.seq.wrapping_add(1), &msg).await);
    };
    client
        .accept_tls(acceptor)
        .await
        .map_err(SessionError::client)?;
    // The real response follows inside TLS, numbered after the SSL request.
    let resp = client.read_some().await.map_err(SessionError::client)?;
    let parsed = parse_response(client, &resp).await?;
    if parsed.ssl_request {
        return Err(SessionError::Protocol("a second SSL request".into()));
    }
    Ok((resp, parsed))
}

/// Refuses a client leg that breaks `tls.client.require` or asks for compression qcache
/// did not offer; else the client leg's compression, if any.
async fn client_leg(
    client: &mut PacketConn,
    resp: &Packet,
    parsed: &HandshakeResponse,
    offer: u32,
    tls: Option<&Contexts>,
    compression: &CompressionConfig,
) -> Result<Option<Codec>, SessionError> {
    if !client.is_tls() && !client.is_local() && tls.is_some_and(|t| t.require_client) {
        let msg = "Connections using insecure transport are prohibited while \
                   --require_secure_transport=ON.";
        return Err(refuse(
            client,
            resp.seq.wrapping_add(1),
            ER_SECURE_TRANSPORT_REQUIRED,
            "08004",
            msg,
        )
        .await);
    }
    let client_codec = compression.client_codec(
        parsed.capabilities,
        offer,
        parsed.zstd_level.map(|(l, _)| l),
    );
    if client_codec.is_none() && parsed.capabilities & (cap::COMPRESS | cap::ZSTD_COMPRESSION) != 0
    {
        let msg = "qcache: protocol compression was not offered (see compression.client)";
        return Err(refuse(
            client,
            resp.seq.wrapping_add(1),
            ER_NOT_SUPPORTED_AUTH_MODE,
            "08004",
            msg,
        )
        .await);
    }
    Ok(client_codec)
}

/// The upstream leg as negotiated: TLS, compression, and the sequence id the response goes
/// up with.
struct UpstreamLeg {
    tls: bool,
    codec: Option<Codec>,
    seq: u8,
}

/// Decides the upstream leg's TLS (`tls.upstream.mode` against what the server offers) and
/// compression, and starts TLS with the server when chosen.
async fn upstream_leg(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    resp: &Packet,
    tls: Option<&Contexts>,
    server_caps: u32,
    compression: &CompressionConfig,
    upstream_addr: &str,
) -> Result<UpstreamLeg, SessionError> {
    let server_offers_ssl = server_caps & cap::SSL != 0;
    let mode = tls.map_or(UpstreamTlsMode::Disabled, |t| t.upstream_mode);
    let connector = tls.and_then(|t| t.connector.as_ref());
    let Some(upstream_tls) = mode.upstream_tls(connector.is_some(), server_offers_ssl) else {
        let msg = format!(
            "qcache: the server at '{upstream_addr}' does not offer TLS, and \
             tls.upstream.mode is {mode:?} [{CR_SSL_CONNECTION_ERROR}]"
        );
        return Err(refuse_unknown(client, resp.seq.wrapping_add(1), &msg).await);
    };
    let codec = compression.upstream_codec(server_caps);
    let (compress_bit, compress_clear) =
        negotiate::compression_caps(codec.as_ref().map(Codec::algorithm));
    let mut seq = 1u8;
    if let (true, Some(connector)) = (upstream_tls, connector) {
        // The SSL request carries the capabilities the response will.
        let req = negotiate::ssl_request(&resp.payload, compress_bit, compress_clear)
            .ok_or_else(|| SessionError::Protocol("short handshake response".into()))?;
        seq = upstream
            .send(seq, &req)
            .await
            .map_err(SessionError::upstream)?;
        if let Err(e) = upstream
            .connect_tls(connector, crate::tls::upstream_name(upstream_addr))
            .await
        {
            let msg = format!(
                "qcache: TLS to the server at '{upstream_addr}' failed: {e} \
                 [{CR_SSL_CONNECTION_ERROR}]"
            );
            tracing::warn!(upstream = upstream_addr, error = %e, "TLS to the server failed");
            return Err(refuse_unknown(client, resp.seq.wrapping_add(1), &msg).await);
        }
    }
    Ok(UpstreamLeg {
        tls: upstream_tls,
        codec,
        seq,
    })
}

/// Sends the client's response upstream with the upstream leg's capabilities: CLIENT_SSL
/// exactly when that leg is TLS, and its own compression (zstd level byte included).
async fn forward_response(
    upstream: &mut PacketConn,
    resp: &Packet,
    parsed: &HandshakeResponse,
    leg: &UpstreamLeg,
) -> Result<(), SessionError> {
    let fwd = negotiate::forwarded_response(
        &resp.payload,
        parsed.zstd_level.map(|(_, at)| at),
        leg.tls,
        leg.codec.as_ref().map(|c| (c.algorithm(), c.level())),
    )
    .ok_or_else(|| SessionError::Protocol("short handshake response".into()))?;
    upstream
        .send(leg.seq, &fwd)
        .await
        .map_err(SessionError::upstream)?;
    Ok(())
}

async fn parse_response(
    client: &mut PacketConn,
    resp: &crate::protocol::codec::Packet,
) -> Result<HandshakeResponse, SessionError> {
    match handshake::parse_handshake_response(&resp.payload) {
        Ok(r) => Ok(r),
        Err(e) => {
            let _ = client
                .send(
                    resp.seq.wrapping_add(1),
                    &packets::err_payload(ER_HANDSHAKE_ERROR, "08S01", "Bad handshake"),
                )
                .await;
            Err(SessionError::Protocol(e.to_string()))
        }
    }
}

async fn refuse_cleartext(client: &mut PacketConn, seq: u8, legs: &AuthLegs) -> SessionError {
    let msg = format!(
        "qcache: authentication plugin '{}' sends the password in the clear, and the \
         upstream leg is not encrypted (set tls.upstream.mode)",
        legs.plugin
    );
    refuse(client, seq, ER_NOT_SUPPORTED_AUTH_MODE, "08004", &msg).await
}

/// Authentication rounds after the response (or COM_CHANGE_USER) went upstream: the server
/// speaks, and the client answers unless the server said OK, ERR, or caching_sha2_password's
/// "fast auth succeeded" (an OK follows it). Returns the OK's status, None on the server's
/// ERR (already relayed).
pub async fn auth_rounds(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    legs: &mut AuthLegs,
) -> Result<Option<u16>, SessionError> {
    loop {
        let p = upstream.read_some().await.map_err(SessionError::upstream)?;
        let to_client = p.seq.wrapping_add(legs.delta);
        if let Some((plugin, data)) = handshake::parse_auth_switch(&p.payload) {
            legs.plugin = plugin;
            legs.scramble = data;
            if legs.leaks_cleartext() {
                return Err(refuse_cleartext(client, to_client, legs).await);
            }
        }
        let full_auth = legs.full_auth(&p.payload);
        client
            .send(to_client, &p.payload)
            .await
            .map_err(SessionError::client)?;
        match negotiate::server_auth(&p.payload) {
            ServerAuth::Done(status) => return Ok(Some(status)),
            ServerAuth::Refused => return Ok(None),
            ServerAuth::FastAuthOk => continue,
            ServerAuth::WantsAnswer => {}
        }
        let answer = client.read_some().await.map_err(SessionError::client)?;
        let to_upstream = answer.seq.wrapping_sub(legs.delta);
        let route = legs.answer_route(full_auth, &answer.payload);
        if route == AnswerRoute::EncryptForUpstream {
            // The client sent its password in the clear, as it may inside TLS; the plain
            // upstream gets it RSA-encrypted under its own public key, fetched now.
            let mut seq = upstream
                .send(to_upstream, &[0x02])
                .await
                .map_err(SessionError::upstream)?;
            let key = upstream.read_some().await.map_err(SessionError::upstream)?;
            if key.first() != Some(0x01) {
                // An ERR (or anything else) ends it; the client hears it in its numbering.
                client
                    .send(answer.seq.wrapping_add(1), &key.payload)
                    .await
                    .map_err(SessionError::client)?;
                return Ok(None);
            }
            seq = seq.wrapping_add(1);
            let enc = sha2::encrypt_password(&key.payload[1..], &answer.payload, &legs.scramble)
                .map_err(|e| SessionError::Protocol(e.to_string()))?;
            upstream
                .send(seq, &enc)
                .await
                .map_err(SessionError::upstream)?;
            // Two more packets went upstream than the client sent.
            legs.delta = legs.delta.wrapping_sub(2);
        } else if route == AnswerRoute::DecryptForTlsUpstream {
            decrypt_for_tls_upstream(client, upstream, legs, answer, to_upstream).await?;
        } else {
            upstream
                .send(to_upstream, &answer.payload)
                .await
                .map_err(SessionError::upstream)?;
        }
    }
}

/// A plain client must encrypt its password; over TLS the server takes only the cleartext.
/// qcache plays the server's RSA side with a key of its own (sending it when the client asks
/// with 0x02), then forwards the password inside TLS as `to_upstream`.
async fn decrypt_for_tls_upstream(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    legs: &mut AuthLegs,
    answer: Packet,
    to_upstream: u8,
) -> Result<(), SessionError> {
    // A plain client must encrypt; over TLS the server takes only the cleartext.
    // qcache plays the server's RSA side with a key of its own, then forwards the
    // password inside TLS.
    let key = sha2::proxy_key()
        .await
        .map_err(|e| SessionError::Protocol(e.to_string()))?;
    let mut enc = answer;
    if enc.payload[..] == [0x02] {
        let mut pem = vec![0x01];
        pem.extend_from_slice(key.pem.as_bytes());
        client
            .send(enc.seq.wrapping_add(1), &pem)
            .await
            .map_err(SessionError::client)?;
        enc = client.read_some().await.map_err(SessionError::client)?;
    }
    let password = match key.decrypt_password(&enc.payload, &legs.scramble) {
        Ok(p) => p,
        Err(_) => {
            let msg = "qcache: the password was not encrypted with the key qcache \
                       sent (request the server's public key, do not preset it)";
            return Err(refuse(
                client,
                enc.seq.wrapping_add(1),
                ER_NOT_SUPPORTED_AUTH_MODE,
                "28000",
                msg,
            )
            .await);
        }
    };
    upstream
        .send(to_upstream, &password)
        .await
        .map_err(SessionError::upstream)?;
    // The server's next packet answers `to_upstream`; the client waits after `enc`.
    legs.delta = enc.seq.wrapping_sub(to_upstream);
    Ok(())
}

/// The authentication rounds of COM_CHANGE_USER, after its packet went upstream. Returns
/// the OK's status on success, None when the server refused.
pub async fn relay_auth_rounds(
    client: &mut PacketConn,
    upstream: &mut PacketConn,
    legs: &AuthLegs,
) -> Result<Option<u16>, SessionError> {
    // Both legs number the command phase from 0; the plugin is what the server names.
    let mut legs = AuthLegs {
        delta: 0,
        plugin: String::new(),
        ..legs.clone()
    };
    auth_rounds(client, upstream, &mut legs).await
}

impl SessionError {
    pub fn client(e: ConnError) -> SessionError {
        SessionError::Client(e)
    }
    pub fn upstream(e: ConnError) -> SessionError {
        SessionError::Upstream(e)
    }
}
