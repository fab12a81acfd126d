//! The connection phase's decisions, sans IO: what qcache offers a client, which capability
//! bits each leg's response carries, what a server's authentication packet asks for, and how
//! a client's answer must travel when the two legs differ in TLS. `session::handshake` does
//! the reading and writing; everything it decides on bytes alone is here.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;

use super::compress::Algorithm;
use super::handshake;
use super::packets::{self, cap};

/// MySQL client error numbers qcache uses for its own failures: 2003 "Can't connect to MySQL
/// server" and 2026 "SSL connection error". They are client codes, which libmariadb-based
/// clients (the `mariadb` CLI) refuse to read from the wire (they report 2027 "Malformed
/// packet" and lose the text), so the wire carries ER_UNKNOWN_ERROR with the client code in
/// the message instead.
pub const CR_CONN_HOST_ERROR: u16 = 2003;
pub const ER_UNKNOWN_ERROR: u16 = 1105;
pub const CR_SSL_CONNECTION_ERROR: u16 = 2026;
pub const ER_NOT_SUPPORTED_AUTH_MODE: u16 = 1251;
pub const ER_HANDSHAKE_ERROR: u16 = 1043;
/// MySQL's error for a client without TLS under require_secure_transport.
pub const ER_SECURE_TRANSPORT_REQUIRED: u16 = 3159;

/// Auth plugins whose client sends the password in the clear when its own leg is TLS.
/// Relaying them from a TLS client to a plain upstream would expose the password, so qcache
/// refuses that combination (caching_sha2_password is handled by re-encrypting instead).
pub const CLEARTEXT_PLUGINS: &[&str] = &["mysql_clear_password", "sha256_password", "dialog"];

pub const CACHING_SHA2: &str = "caching_sha2_password";

/// The plugin a handshake response names upstream when qcache withheld a cleartext
/// password from it: no server plugin has this client side, so the server always switches.
pub const WITHHELD_PLUGIN: &str = "qcache_withheld_cleartext";

/// What the authentication rounds need to know about the two legs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthLegs {
    /// Added to an upstream sequence id to get the client's (the legs differ when only one
    /// of them had an SSL request, and by two more after qcache ran an RSA exchange).
    pub delta: u8,
    pub plugin: String,
    /// The nonce the password exchange uses: the greeting's, or an auth switch's.
    pub scramble: Vec<u8>,
    /// The client's leg is TLS or the Unix socket: its client may send passwords in the
    /// clear.
    pub client_tls: bool,
    pub upstream_tls: bool,
}

/// What a server's packet in the authentication rounds asks of the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAuth {
    /// The OK that ends authentication, with its status flags.
    Done(u16),
    /// An ERR: authentication failed (the client hears it as is).
    Refused,
    /// caching_sha2_password's "fast auth succeeded": an OK follows, the client says nothing.
    FastAuthOk,
    /// Anything else (an auth switch, more data): the client answers it.
    WantsAnswer,
}

/// How the client's answer to an authentication packet goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerRoute {
    /// As it is.
    Relay,
    /// A cleartext password from a secure client leg: RSA-encrypted under the plain
    /// upstream's public key, which qcache asks for first.
    EncryptForUpstream,
    /// A plain client must encrypt its password; qcache plays the server's RSA side and
    /// sends the cleartext inside the upstream's TLS.
    DecryptForTlsUpstream,
}

impl AuthLegs {
    /// The client would send its password in the clear to a plain upstream.
    pub fn leaks_cleartext(&self) -> bool {
        self.client_tls && !self.upstream_tls && CLEARTEXT_PLUGINS.contains(&self.plugin.as_str())
    }

    /// The server asks for caching_sha2_password's full authentication (`0x01 0x04`): the
    /// client sends the password next, in the clear on a secure leg or RSA-encrypted on a
    /// plain one, which is where the legs' difference matters.
    pub fn full_auth(&self, payload: &[u8]) -> bool {
        payload == [0x01, 0x04] && (self.plugin == CACHING_SHA2 || self.plugin.is_empty())
    }

    /// How the client's `answer` to a packet (`full_auth` when it asked for the password)
    /// goes upstream.
    pub fn answer_route(&self, full_auth: bool, answer: &[u8]) -> AnswerRoute {
        // A client on a secure leg may still ask for the server's key (0x02) rather than
        // send the password in the clear; then the plain exchange is relayed as it is.
        if full_auth && self.client_tls && !self.upstream_tls && answer != [0x02] {
            AnswerRoute::EncryptForUpstream
        } else if full_auth && !self.client_tls && self.upstream_tls {
            AnswerRoute::DecryptForTlsUpstream
        } else {
            AnswerRoute::Relay
        }
    }
}

/// What a server's packet in the authentication rounds means.
pub fn server_auth(payload: &[u8]) -> ServerAuth {
    match payload.first() {
        Some(0x00) => ServerAuth::Done(packets::parse_ok(payload).map(|o| o.status).unwrap_or(0)),
        Some(0xff) => ServerAuth::Refused,
        Some(0x01) if payload.len() == 2 && payload[1] == 0x03 => ServerAuth::FastAuthOk,
        _ => ServerAuth::WantsAnswer,
    }
}

/// The capability bits qcache offers a client in the greeting: TLS when it can accept it,
/// and the compression algorithms configured for clients.
pub fn client_offer(tls_offered: bool, algorithms: &[Algorithm]) -> u32 {
    let mut offer = if tls_offered { cap::SSL } else { 0 };
    for alg in algorithms {
        offer |= match alg {
            Algorithm::Zlib => cap::COMPRESS,
            Algorithm::Zstd => cap::ZSTD_COMPRESSION,
        };
    }
    offer
}

/// The compression bits the upstream leg's response carries: (set, clear). The server sees
/// qcache's choice for its leg, never the client's.
pub fn compression_caps(alg: Option<Algorithm>) -> (u32, u32) {
    let set = match alg {
        Some(Algorithm::Zlib) => cap::COMPRESS,
        Some(Algorithm::Zstd) => cap::ZSTD_COMPRESSION,
        None => 0,
    };
    (set, (cap::COMPRESS | cap::ZSTD_COMPRESSION) & !set)
}

/// The SSL request that goes upstream before TLS: the response's first 32 bytes with the
/// capabilities the response itself will carry.
pub fn ssl_request(response: &[u8], compress_set: u32, compress_clear: u32) -> Option<Vec<u8>> {
    let head = response.get(..32)?;
    handshake::with_response_caps(head, cap::SSL | compress_set, compress_clear).map(Vec::from)
}

/// The client's handshake response as it goes upstream: CLIENT_SSL exactly when that leg is
/// TLS, the upstream leg's compression bits, and the zstd level byte (which ends a response
/// only when the zstd bit is set) replaced by the upstream leg's. `zstd_at`: where the
/// client's level byte sits, when it sent one.
pub fn forwarded_response(
    response: &[u8],
    zstd_at: Option<usize>,
    upstream_tls: bool,
    compression: Option<(Algorithm, i32)>,
) -> Option<Vec<u8>> {
    let (set, clear) = if upstream_tls {
        (cap::SSL, 0)
    } else {
        (0, cap::SSL)
    };
    let (c_set, c_clear) = compression_caps(compression.map(|(a, _)| a));
    let mut fwd = handshake::with_response_caps(response, set | c_set, clear | c_clear)?;
    if let Some(at) = zstd_at {
        fwd.truncate(at);
    }
    if let Some((Algorithm::Zstd, level)) = compression {
        fwd.extend_from_slice(&[level as u8]);
    }
    Some(fwd.to_vec())
}

/// What goes upstream for a COM_CHANGE_USER: the packet as it is, or, when it offers a
/// cleartext plugin from a TLS client to a plain upstream, without its password (as in the
/// handshake: the server switches it to the account's plugin). None when such a packet
/// cannot be rewritten: it must not go up.
pub fn change_user_upstream<'a>(
    payload: &'a [u8],
    client_caps: u32,
    legs: &AuthLegs,
) -> Option<Cow<'a, [u8]>> {
    if !legs.client_tls || legs.upstream_tls {
        return Some(Cow::Borrowed(payload));
    }
    match handshake::change_user_without_auth_data(payload, client_caps, WITHHELD_PLUGIN) {
        Some((plugin, out)) if CLEARTEXT_PLUGINS.contains(&plugin.as_str()) => {
            Some(Cow::Owned(out))
        }
        Some(_) => Some(Cow::Borrowed(payload)),
        // No plugin named: the greeting's plugin, which is never a cleartext one here.
        None if client_caps & cap::PLUGIN_AUTH == 0 => Some(Cow::Borrowed(payload)),
        None => None,
    }
}

/// Why qcache ends a connection phase itself, each with the error the client hears. The
/// three before the greeting go out in the pre-handshake form (no SQLSTATE): the client has
/// not yet agreed on protocol 4.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The server at `addr` could not be reached (`error`: why, or that it did not answer).
    Unreachable { addr: String, error: String },
    /// The server closed the connection before its greeting.
    GreetingClosed { error: String },
    /// The server accepted the connection but did not greet within `within`.
    GreetingTimeout { within: Duration },
    /// The client's handshake response does not parse.
    BadHandshake,
    /// An SSL request on the Unix socket, where TLS is not offered.
    TlsOnSocket,
    /// An SSL request while qcache has no client TLS configured.
    TlsNotConfigured,
    /// A plain TCP client under `tls.client.require`.
    InsecureTransport,
    /// The client asked for a compression qcache did not offer.
    CompressionNotOffered,
    /// `tls.upstream.mode` (as `mode` names it) requires TLS the server does not offer.
    UpstreamNoTls { addr: String, mode: String },
    /// TLS to the server failed.
    UpstreamTlsFailed { addr: String, error: String },
    /// The plugin would send the password in the clear to a plain upstream.
    Cleartext { plugin: String },
    /// The client encrypted its password with another key than the one qcache sent.
    ForeignRsaKey,
    /// A COM_CHANGE_USER offering a cleartext password that cannot be rewritten.
    MalformedChangeUser,
}

impl Refusal {
    /// The error's code, SQLSTATE (None: the pre-handshake form) and message.
    pub fn error(&self) -> (u16, Option<&'static str>, String) {
        use Refusal::*;
        let ssl = CR_SSL_CONNECTION_ERROR;
        let (code, state, msg) = match self {
            Unreachable { addr, error } => (
                ER_UNKNOWN_ERROR,
                None,
                format!(
                    "qcache: Can't connect to MySQL server on '{addr}' ({error}) \
                     [{CR_CONN_HOST_ERROR}]"
                ),
            ),
            GreetingClosed { error } => (
                ER_UNKNOWN_ERROR,
                None,
                format!(
                    "qcache: the MySQL server closed the connection before its greeting ({error})"
                ),
            ),
            GreetingTimeout { within } => (
                ER_UNKNOWN_ERROR,
                None,
                format!(
                    "qcache: the MySQL server accepted the connection but sent no greeting \
                     within {within:?} (server.connect_timeout)"
                ),
            ),
            BadHandshake => (ER_HANDSHAKE_ERROR, Some("08S01"), "Bad handshake".into()),
            TlsOnSocket => (
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                format!(
                    "qcache: TLS is not offered on the Unix socket, which is local \
                     (connect without TLS, or over TCP) [{ssl}]"
                ),
            ),
            TlsNotConfigured => (
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                format!(
                    "qcache: TLS was requested but qcache has no TLS configured \
                     (connect without TLS, or configure [tls.client]) [{ssl}]"
                ),
            ),
            InsecureTransport => (
                ER_SECURE_TRANSPORT_REQUIRED,
                Some("08004"),
                "Connections using insecure transport are prohibited while \
                 --require_secure_transport=ON."
                    .into(),
            ),
            CompressionNotOffered => (
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                "qcache: protocol compression was not offered (see compression.client)".into(),
            ),
            UpstreamNoTls { addr, mode } => (
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                format!(
                    "qcache: the server at '{addr}' does not offer TLS, and \
                     tls.upstream.mode is {mode} [{ssl}]"
                ),
            ),
            UpstreamTlsFailed { addr, error } => (
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                format!("qcache: TLS to the server at '{addr}' failed: {error} [{ssl}]"),
            ),
            Cleartext { plugin } => (
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                format!(
                    "qcache: authentication plugin '{plugin}' sends the password in the clear, \
                     and the upstream leg is not encrypted (set tls.upstream.mode)"
                ),
            ),
            ForeignRsaKey => (
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("28000"),
                "qcache: the password was not encrypted with the key qcache sent (request \
                 the server's public key, do not preset it)"
                    .into(),
            ),
            MalformedChangeUser => (
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                "qcache: a malformed COM_CHANGE_USER offering a cleartext password".into(),
            ),
        };
        (code, state, msg)
    }

    /// An SSL request where qcache offered no TLS: on the Unix socket (`local`), which
    /// never offers it, or for want of a client TLS configuration.
    pub fn unoffered_tls(local: bool) -> Refusal {
        match local {
            true => Refusal::TlsOnSocket,
            false => Refusal::TlsNotConfigured,
        }
    }

    /// The ERR packet the client gets.
    pub fn payload(&self) -> Bytes {
        match self.error() {
            (code, Some(state), msg) => packets::err_payload(code, state, &msg),
            (code, None, msg) => packets::err_payload_pre_handshake(code, &msg),
        }
    }
}

/// The server's greeting as qcache relays it, and what of it later phases need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeted {
    /// The greeting the client gets: qcache's capabilities, its `offer` set.
    pub payload: Bytes,
    /// The capability bits qcache offers the client (TLS, compression).
    pub offer: u32,
    /// The server's greeting as sent.
    pub greeting: handshake::Greeting,
    /// The capabilities the server offered qcache (the upstream leg chooses among them).
    pub server_caps: u32,
    /// The nonce the password exchange starts with.
    pub scramble: Vec<u8>,
}

impl Greeted {
    /// The server's greeting `p` relayed with the capabilities qcache cannot pass through
    /// cleared and its own `offer` set. None when the greeting is malformed.
    pub fn from_server(p: &[u8], offer: u32) -> Option<Greeted> {
        let (payload, greeting) = handshake::rewrite_greeting_caps(
            p,
            handshake::CLEARED_CAPS,
            offer,
            handshake::CLEARED_MARIADB_CAPS,
        )?;
        Some(Greeted {
            payload,
            offer,
            server_caps: handshake::parse_greeting(p).map_or(0, |g| g.capabilities),
            scramble: handshake::greeting_scramble(p).unwrap_or_default(),
            greeting,
        })
    }
}

/// Why a connection phase's packet cannot go on: qcache refuses the client, or the bytes do
/// not parse (the connection ends without an answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Halt {
    Refuse(Refusal),
    Malformed(String),
}

impl From<Refusal> for Halt {
    fn from(r: Refusal) -> Halt {
        Halt::Refuse(r)
    }
}

impl Greeted {
    /// The legs the authentication rounds start from: `delta` between the response's
    /// sequence ids on the two legs, the plugin the response names (else the greeting's),
    /// the greeting's nonce. `client_secure`: the client leg is TLS or the Unix socket.
    pub fn legs(
        &self,
        response: &handshake::HandshakeResponse,
        delta: u8,
        client_secure: bool,
        upstream_tls: bool,
    ) -> AuthLegs {
        let named = response.auth_plugin.as_ref();
        AuthLegs {
            delta,
            plugin: named.unwrap_or(&self.greeting.auth_plugin).clone(),
            scramble: self.scramble.clone(),
            client_tls: client_secure,
            upstream_tls,
        }
    }

    /// The capabilities in force: what the client asked for out of what was offered (the
    /// MySQL bit as MariaDB clients read it).
    pub fn caps_in_force(&self, response: &handshake::HandshakeResponse) -> u32 {
        response.capabilities & (self.greeting.capabilities | cap::MARIADB_CLIENT_MYSQL)
    }
}

/// The client's handshake `response` as it goes upstream over the legs `legs` (the upstream
/// leg's `compression` included): its password withheld when it would leak in the clear
/// (the server's switch then decides the plugin, and `AuthLegs::leaks_cleartext` refuses a
/// switch to a cleartext one), and the upstream leg's capabilities
/// ([`forwarded_response`]).
pub fn response_upstream(
    response: &[u8],
    zstd_at: Option<usize>,
    legs: &AuthLegs,
    compression: Option<(Algorithm, i32)>,
) -> Result<Vec<u8>, Halt> {
    let short = || Halt::Malformed("short handshake response".into());
    if !legs.leaks_cleartext() {
        return forwarded_response(response, zstd_at, legs.upstream_tls, compression)
            .ok_or_else(short);
    }
    let Some(withheld) = handshake::without_auth_data(response, WITHHELD_PLUGIN) else {
        return Err(Halt::Refuse(Refusal::Cleartext {
            plugin: legs.plugin.clone(),
        }));
    };
    // The level byte moved with the auth data.
    let parsed = handshake::parse_handshake_response(&withheld)
        .map_err(|e| Halt::Malformed(e.to_string()))?;
    let zstd_at = parsed.zstd_level.map(|(_, at)| at);
    forwarded_response(&withheld, zstd_at, legs.upstream_tls, compression).ok_or_else(short)
}

impl AuthLegs {
    /// The legs a COM_CHANGE_USER authenticates over: both number the command phase from 0,
    /// and the plugin is what the server names.
    pub fn for_change_user(&self) -> AuthLegs {
        AuthLegs {
            delta: 0,
            plugin: String::new(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legs(client_tls: bool, upstream_tls: bool, plugin: &str) -> AuthLegs {
        AuthLegs {
            delta: 0,
            plugin: plugin.to_string(),
            scramble: vec![1; 20],
            client_tls,
            upstream_tls,
        }
    }

    /// A minimal handshake response: capabilities, max packet, charset, filler, user,
    /// auth data, plugin.
    fn response(caps: u32) -> Vec<u8> {
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(1u32 << 24).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(b"app\0\x02pwmysql_native_password\0");
        p
    }

    fn caps_of(p: &[u8]) -> u32 {
        u32::from_le_bytes(p[..4].try_into().unwrap())
    }

    /// Only a secure client leg, a plain upstream and a cleartext plugin together leak.
    #[test]
    fn cleartext_leaks_only_from_secure_to_plain() {
        let cases = [
            (true, false, "mysql_clear_password", true),
            (true, false, "sha256_password", true),
            (true, false, "dialog", true),
            (true, false, "mysql_native_password", false),
            (true, false, CACHING_SHA2, false),
            (true, true, "mysql_clear_password", false),
            (false, false, "mysql_clear_password", false),
            (false, true, "dialog", false),
        ];
        for (c, u, plugin, want) in cases {
            assert_eq!(
                legs(c, u, plugin).leaks_cleartext(),
                want,
                "{c} {u} {plugin}"
            );
        }
    }

    /// Full authentication is `0x01 0x04` under caching_sha2_password (or a plugin not yet
    /// named, as after COM_CHANGE_USER).
    #[test]
    fn full_auth_is_caching_sha2s_request() {
        let cases: &[(&[u8], &str, bool)] = &[
            (&[0x01, 0x04], CACHING_SHA2, true),
            (&[0x01, 0x04], "", true),
            (&[0x01, 0x04], "mysql_native_password", false),
            (&[0x01, 0x03], CACHING_SHA2, false),
            (&[0x01, 0x04, 0x00], CACHING_SHA2, false),
            (&[], CACHING_SHA2, false),
        ];
        for (p, plugin, want) in cases {
            assert_eq!(
                legs(true, false, plugin).full_auth(p),
                *want,
                "{p:?} {plugin}"
            );
        }
    }

    /// One row per combination of legs and answer: where the password goes.
    #[test]
    fn answers_route_by_the_legs() {
        use AnswerRoute::*;
        let cases: &[(bool, bool, bool, &[u8], AnswerRoute)] = &[
            (true, true, false, b"secret\0", EncryptForUpstream),
            // A secure client asking for the server's key runs the plain exchange.
            (true, true, false, &[0x02], Relay),
            (true, false, true, b"\x02", DecryptForTlsUpstream),
            (true, false, true, b"rsa-bytes", DecryptForTlsUpstream),
            (true, true, true, b"secret\0", Relay),
            (true, false, false, b"rsa-bytes", Relay),
            // No full authentication asked: whatever the legs, relayed.
            (false, true, false, b"secret\0", Relay),
            (false, false, true, b"x", Relay),
        ];
        for (full, c, u, answer, want) in cases {
            let got = legs(*c, *u, CACHING_SHA2).answer_route(*full, answer);
            assert_eq!(got, *want, "full={full} client_tls={c} upstream_tls={u}");
        }
    }

    /// What each kind of server packet asks of the relay.
    #[test]
    fn server_packets_in_the_rounds() {
        use ServerAuth::*;
        let cases: &[(&[u8], ServerAuth)] = &[
            (&[0x00, 0x00, 0x00, 0x02, 0x40, 0x00, 0x00], Done(0x4002)),
            (&[0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00], Done(0x0003)),
            // An OK too short to hold its status: status 0.
            (&[0x00], Done(0)),
            (b"\xff\x15\x04#28000denied", Refused),
            (&[0x01, 0x03], FastAuthOk),
            (&[0x01, 0x04], WantsAnswer),
            (&[0x01, 0x03, 0x00], WantsAnswer),
            (b"\xfemysql_native_password\0abc\0", WantsAnswer),
            (&[], WantsAnswer),
        ];
        for (p, want) in cases {
            assert_eq!(server_auth(p), *want, "{p:?}");
        }
    }

    /// The greeting's offer: TLS when it can be accepted, one bit per configured algorithm.
    #[test]
    fn the_greeting_offers_tls_and_compression() {
        use Algorithm::{Zlib, Zstd};
        let cases: &[(bool, &[Algorithm], u32)] = &[
            (false, &[], 0),
            (true, &[], cap::SSL),
            (false, &[Zlib], cap::COMPRESS),
            (false, &[Zstd], cap::ZSTD_COMPRESSION),
            (
                true,
                &[Zlib, Zstd],
                cap::SSL | cap::COMPRESS | cap::ZSTD_COMPRESSION,
            ),
        ];
        for (tls, algs, want) in cases {
            assert_eq!(client_offer(*tls, algs), *want, "{tls} {algs:?}");
        }
    }

    /// The upstream leg sets its own algorithm's bit and clears the other (and both when
    /// uncompressed).
    #[test]
    fn compression_bits_of_the_upstream_leg() {
        let both = cap::COMPRESS | cap::ZSTD_COMPRESSION;
        let cases = [
            (None, (0, both)),
            (
                Some(Algorithm::Zlib),
                (cap::COMPRESS, cap::ZSTD_COMPRESSION),
            ),
            (
                Some(Algorithm::Zstd),
                (cap::ZSTD_COMPRESSION, cap::COMPRESS),
            ),
        ];
        for (alg, want) in cases {
            assert_eq!(compression_caps(alg), want, "{alg:?}");
        }
    }

    /// The SSL request is the response's first 32 bytes with SSL and the leg's compression;
    /// a response shorter than that makes none.
    #[test]
    fn ssl_requests_carry_the_responses_caps() {
        let base = cap::PROTOCOL_41 | cap::PLUGIN_AUTH | cap::COMPRESS;
        let p = response(base);
        let req = ssl_request(&p, cap::ZSTD_COMPRESSION, cap::COMPRESS).unwrap();
        assert_eq!(req.len(), 32);
        assert_eq!(
            caps_of(&req),
            cap::PROTOCOL_41 | cap::PLUGIN_AUTH | cap::SSL | cap::ZSTD_COMPRESSION
        );
        assert_eq!(&req[4..32], &p[4..32]);
        assert_eq!(ssl_request(&p[..31], 0, 0), None);
    }

    /// The forwarded response: SSL exactly when the upstream leg is TLS, the upstream leg's
    /// compression, the client's zstd level byte replaced by the upstream's.
    #[test]
    fn responses_go_up_with_the_upstream_legs_caps() {
        let base = cap::PROTOCOL_41 | cap::PLUGIN_AUTH;
        let plain = response(base | cap::SSL);
        let mut zstd_client = response(base | cap::ZSTD_COMPRESSION);
        zstd_client.push(11);
        let at = zstd_client.len() - 1;
        type Case<'a> = (
            &'a [u8],
            Option<usize>,
            bool,
            Option<(Algorithm, i32)>,
            u32,
            &'a [u8],
        );
        let cases: &[Case] = &[
            (&plain, None, false, None, base, b""),
            (&plain, None, true, None, base | cap::SSL, b""),
            (
                &plain,
                None,
                false,
                Some((Algorithm::Zlib, 6)),
                base | cap::COMPRESS,
                b"",
            ),
            (
                &zstd_client,
                Some(at),
                false,
                Some((Algorithm::Zstd, 7)),
                base | cap::ZSTD_COMPRESSION,
                &[7],
            ),
            // The client's zstd with an uncompressed upstream: bit and level byte go.
            (&zstd_client, Some(at), true, None, base | cap::SSL, b""),
        ];
        for (i, (p, zstd_at, tls, comp, caps, tail)) in cases.iter().enumerate() {
            let out = forwarded_response(p, *zstd_at, *tls, *comp).unwrap();
            assert_eq!(caps_of(&out), *caps, "case {i}");
            let body = zstd_at.unwrap_or(p.len());
            assert_eq!(&out[4..body], &p[4..body], "case {i}");
            assert_eq!(&out[body..], *tail, "case {i}");
        }
        assert_eq!(forwarded_response(&plain[..3], None, false, None), None);
    }

    /// COM_CHANGE_USER goes up as it is unless a cleartext password would cross to a plain
    /// upstream; then without it, or not at all when it cannot be rewritten.
    #[test]
    fn change_user_withholds_cleartext_from_a_plain_upstream() {
        let caps = cap::PROTOCOL_41 | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH;
        let mut clear = vec![0x11];
        clear.extend_from_slice(b"app\0\x06s3cretshop\0\x21\x00mysql_clear_password\0");
        let mut native = vec![0x11];
        native.extend_from_slice(b"app\0\x02pwshop\0\x21\x00mysql_native_password\0");
        let unnamed = b"\x11app\0\x02pwshop\0\x21\x00".to_vec();
        let withheld = b"\x11app\0\0shop\0\x21\x00qcache_withheld_cleartext\0".to_vec();
        /// (payload, caps, client_tls, upstream_tls, what goes up: None refused, Some(None)
        /// as it is, Some(Some(bytes)) rewritten).
        type Case<'a> = (&'a [u8], u32, bool, bool, Option<Option<&'a [u8]>>);
        let cases: &[Case] = &[
            (&clear, caps, true, false, Some(Some(&withheld))),
            (&clear, caps, false, false, Some(None)),
            (&clear, caps, true, true, Some(None)),
            (&native, caps, true, false, Some(None)),
            (&unnamed, caps, true, false, Some(None)),
            (&clear[..5], caps, true, false, None),
            (
                &clear[..5],
                caps & !cap::PLUGIN_AUTH,
                true,
                false,
                Some(None),
            ),
        ];
        for (i, (p, caps, c, u, want)) in cases.iter().enumerate() {
            let got = change_user_upstream(p, *caps, &legs(*c, *u, ""));
            match (got, want) {
                (None, None) => {}
                (Some(Cow::Borrowed(b)), Some(None)) => assert_eq!(b, *p, "case {i}"),
                (Some(Cow::Owned(o)), Some(Some(w))) => assert_eq!(&o[..], *w, "case {i}"),
                (got, _) => panic!("case {i}: {got:?}"),
            }
        }
    }

    /// One row per refusal: the code, the SQLSTATE (none before the greeting) and what the
    /// message names, as the client reads them.
    #[test]
    fn refusals_say_what_the_client_hears() {
        use Refusal::*;
        let addr = || "db:3306".to_string();
        let cases: Vec<(Refusal, u16, Option<&str>, &str)> = vec![
            (
                Unreachable {
                    addr: addr(),
                    error: "refused".into(),
                },
                ER_UNKNOWN_ERROR,
                None,
                "Can't connect to MySQL server on 'db:3306' (refused) [2003]",
            ),
            (
                GreetingClosed {
                    error: "eof".into(),
                },
                ER_UNKNOWN_ERROR,
                None,
                "closed the connection before its greeting (eof)",
            ),
            (
                GreetingTimeout {
                    within: Duration::from_secs(2),
                },
                ER_UNKNOWN_ERROR,
                None,
                "sent no greeting within 2s (server.connect_timeout)",
            ),
            (
                BadHandshake,
                ER_HANDSHAKE_ERROR,
                Some("08S01"),
                "Bad handshake",
            ),
            (
                TlsOnSocket,
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                "Unix socket, which is local",
            ),
            (
                TlsNotConfigured,
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                "configure [tls.client]) [2026]",
            ),
            (
                InsecureTransport,
                ER_SECURE_TRANSPORT_REQUIRED,
                Some("08004"),
                "insecure transport are prohibited while --require_secure_transport=ON.",
            ),
            (
                CompressionNotOffered,
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                "compression was not offered (see compression.client)",
            ),
            (
                UpstreamNoTls {
                    addr: addr(),
                    mode: "Required".into(),
                },
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                "'db:3306' does not offer TLS, and tls.upstream.mode is Required [2026]",
            ),
            (
                UpstreamTlsFailed {
                    addr: addr(),
                    error: "bad cert".into(),
                },
                ER_UNKNOWN_ERROR,
                Some("HY000"),
                "TLS to the server at 'db:3306' failed: bad cert [2026]",
            ),
            (
                Cleartext {
                    plugin: "dialog".into(),
                },
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                "plugin 'dialog' sends the password in the clear, and the upstream",
            ),
            (
                ForeignRsaKey,
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("28000"),
                "not encrypted with the key qcache sent (request the server's public key",
            ),
            (
                MalformedChangeUser,
                ER_NOT_SUPPORTED_AUTH_MODE,
                Some("08004"),
                "a malformed COM_CHANGE_USER offering a cleartext password",
            ),
        ];
        for (r, code, state, says) in cases {
            let (c, st, msg) = r.error();
            assert_eq!((c, st), (code, state), "{r:?}");
            assert!(msg.contains(says), "{r:?}: {msg}");
            assert!(!msg.contains("  "), "{r:?}: {msg}");
            let p = r.payload();
            assert_eq!((p[0], u16::from_le_bytes([p[1], p[2]])), (0xff, code));
            let body = match state {
                Some(s) => {
                    assert_eq!(&p[3..9], format!("#{s}").as_bytes(), "{r:?}");
                    &p[9..]
                }
                None => &p[3..],
            };
            assert_eq!(body, msg.as_bytes(), "{r:?}");
        }
    }

    /// TLS asked for where it was not offered: why, by where the client connected.
    #[test]
    fn unoffered_tls_says_why() {
        let cases = [
            (true, Refusal::TlsOnSocket),
            (false, Refusal::TlsNotConfigured),
        ];
        for (local, want) in cases {
            assert_eq!(Refusal::unoffered_tls(local), want, "{local}");
        }
    }

    /// A MySQL greeting offering SSL and zlib, with a 20-byte scramble.
    fn greeting() -> Vec<u8> {
        let caps = cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::MARIADB_CLIENT_MYSQL
            | cap::SSL
            | cap::COMPRESS;
        let mut p = vec![10];
        p.extend_from_slice(b"8.0.36\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"ijklmnopqrst\0caching_sha2_password\0");
        p
    }

    /// The relayed greeting carries qcache's offer in place of the server's TLS and
    /// compression bits; what later phases need is the server's.
    #[test]
    fn greetings_are_relayed_with_qcaches_offer() {
        let server = greeting();
        let server_caps = handshake::parse_greeting(&server).unwrap().capabilities;
        let both = cap::SSL | cap::COMPRESS | cap::ZSTD_COMPRESSION;
        for offer in [0, cap::SSL, cap::COMPRESS, cap::SSL | cap::ZSTD_COMPRESSION] {
            let g = Greeted::from_server(&server, offer).unwrap();
            let relayed = handshake::parse_greeting(&g.payload).unwrap();
            assert_eq!(relayed.capabilities & both, offer, "{offer:#x}");
            assert_eq!(g.greeting, relayed, "{offer:#x}");
            assert_eq!((g.offer, g.server_caps), (offer, server_caps));
            assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        }
        assert_eq!(Greeted::from_server(&server[..3], 0), None);
    }

    /// The response goes up as the legs allow: as it is (with the upstream leg's caps), or
    /// without a password that would leak, or not at all.
    #[test]
    fn responses_go_up_without_a_password_that_would_leak() {
        let base = cap::PROTOCOL_41 | cap::PLUGIN_AUTH | cap::SECURE_CONNECTION;
        let mut clear = base.to_le_bytes().to_vec();
        clear.extend_from_slice(&(1u32 << 24).to_le_bytes());
        clear.push(45);
        clear.extend_from_slice(&[0; 23]);
        clear.extend_from_slice(b"app\0\x03pw\0mysql_clear_password\0");
        let withheld_tail = b"app\0\0qcache_withheld_cleartext\0";
        let native = response(base);
        /// (response, client_tls, upstream_tls, plugin, what goes up: its tail after the
        /// fixed 32 bytes, or the refusal).
        type Case<'a> = (&'a [u8], bool, bool, &'a str, Result<&'a [u8], Halt>);
        let cleartext = Halt::Refuse(Refusal::Cleartext {
            plugin: "mysql_clear_password".into(),
        });
        let cases: &[Case] = &[
            (&clear, true, true, "mysql_clear_password", Ok(&clear[32..])),
            (
                &clear,
                false,
                false,
                "mysql_clear_password",
                Ok(&clear[32..]),
            ),
            (
                &clear,
                true,
                false,
                "mysql_clear_password",
                Ok(withheld_tail),
            ),
            (
                &native,
                true,
                false,
                "mysql_native_password",
                Ok(&native[32..]),
            ),
            // No plugin name to replace: it cannot be withheld.
            (
                &clear[..36],
                true,
                false,
                "mysql_clear_password",
                Err(cleartext),
            ),
            (
                &native[..3],
                true,
                false,
                "mysql_native_password",
                Err(Halt::Malformed("short handshake response".into())),
            ),
        ];
        for (i, (p, c, u, plugin, want)) in cases.iter().enumerate() {
            let got = response_upstream(p, None, &legs(*c, *u, plugin), None);
            match (got, want) {
                (Ok(out), Ok(tail)) => {
                    assert_eq!(&out[32..], *tail, "case {i}");
                    assert_eq!(caps_of(&out) & cap::SSL != 0, *u, "case {i}");
                }
                (got, want) => assert_eq!(got.map(|_| ()), want.clone().map(|_| ()), "case {i}"),
            }
        }
    }

    /// The rounds start under the plugin the response names, else the greeting's, with the
    /// greeting's nonce; the caps in force are the client's out of the offered ones.
    #[test]
    fn legs_and_caps_after_the_response() {
        let g = Greeted::from_server(&greeting(), cap::SSL).unwrap();
        let named = |p: Option<&str>, caps: u32| handshake::HandshakeResponse {
            auth_plugin: p.map(String::from),
            capabilities: caps,
            ..Default::default()
        };
        let cases: &[(Option<&str>, &str)] = &[
            (None, CACHING_SHA2),
            (Some("mysql_native_password"), "mysql_native_password"),
            (Some(""), ""),
        ];
        for (p, want) in cases {
            let l = g.legs(&named(*p, 0), 1, true, false);
            assert_eq!(l.plugin, *want, "{p:?}");
            assert_eq!((l.delta, l.client_tls, l.upstream_tls), (1, true, false));
            assert_eq!(l.scramble, g.scramble);
        }
        let asked = cap::PROTOCOL_41 | cap::SSL | cap::DEPRECATE_EOF | cap::MARIADB_CLIENT_MYSQL;
        assert_eq!(
            g.caps_in_force(&named(None, asked)),
            cap::PROTOCOL_41 | cap::SSL | cap::MARIADB_CLIENT_MYSQL
        );
    }

    /// A COM_CHANGE_USER authenticates over the same legs and nonce, numbered from 0, under
    /// the plugin the server will name.
    #[test]
    fn change_user_numbers_from_zero() {
        let mut l = legs(true, false, CACHING_SHA2);
        l.delta = 3;
        let cu = l.for_change_user();
        assert_eq!((cu.delta, cu.plugin.as_str()), (0, ""));
        assert_eq!(
            (cu.scramble, cu.client_tls, cu.upstream_tls),
            (l.scramble, true, false)
        );
    }
}
