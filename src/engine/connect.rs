//! The connection phase's steps, sans IO: what each leg's configuration makes of the
//! client's and the server's capabilities (`client_leg`, `upstream_leg`), and the
//! authentication rounds as a machine (`AuthRounds`) that takes the packet just read and
//! returns what to send and what to read next. `session::handshake` carries the steps out.

use bytes::Bytes;

use crate::config::CompressionConfig;
use crate::protocol::codec::Packet;
use crate::protocol::compress::Codec;
use crate::protocol::handshake::{self, HandshakeResponse};
use crate::protocol::negotiate::{self, AnswerRoute, AuthLegs, Halt, Refusal, ServerAuth};
use crate::protocol::packets::cap;
use crate::tls::sha2::{self, ProxyKey};
use crate::tls::UpstreamTlsMode;

/// The client leg's compression, or why the leg is refused: a plain TCP client (not
/// `secure`) under `require_tls`, or a client asking for compression qcache did not `offer`.
pub fn client_leg(
    secure: bool,
    require_tls: bool,
    response: &HandshakeResponse,
    offer: u32,
    compression: &CompressionConfig,
) -> Result<Option<Codec>, Refusal> {
    if !secure && require_tls {
        return Err(Refusal::InsecureTransport);
    }
    let level = response.zstd_level.map(|(l, _)| l);
    let codec = compression.client_codec(response.capabilities, offer, level);
    let asks = response.capabilities & (cap::COMPRESS | cap::ZSTD_COMPRESSION) != 0;
    if codec.is_none() && asks {
        return Err(Refusal::CompressionNotOffered);
    }
    Ok(codec)
}

/// The upstream leg as chosen: TLS or not, and its compression.
pub struct UpstreamLeg {
    pub tls: bool,
    pub codec: Option<Codec>,
    /// When TLS: the SSL request that goes up first, with the capabilities the response
    /// will carry.
    pub ssl_request: Option<Vec<u8>>,
}

/// The upstream leg's TLS (`mode` against what the server at `addr` offers, when qcache
/// `has_connector`) and compression, for the client's `response`; refused when the mode
/// requires TLS the server lacks.
pub fn upstream_leg(
    mode: UpstreamTlsMode,
    has_connector: bool,
    server_caps: u32,
    compression: &CompressionConfig,
    addr: &str,
    response: &[u8],
) -> Result<UpstreamLeg, Halt> {
    let Some(tls) = mode.upstream_tls(has_connector, server_caps & cap::SSL != 0) else {
        return Err(Halt::Refuse(Refusal::UpstreamNoTls {
            addr: addr.to_string(),
            mode: format!("{mode:?}"),
        }));
    };
    let codec = compression.upstream_codec(server_caps);
    let (set, clear) = negotiate::compression_caps(codec.as_ref().map(Codec::algorithm));
    let ssl_request = match tls {
        true => Some(
            negotiate::ssl_request(response, set, clear)
                .ok_or_else(|| Halt::Malformed("short handshake response".into()))?,
        ),
        false => None,
    };
    Ok(UpstreamLeg {
        tls,
        codec,
        ssl_request,
    })
}

/// One of the two connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    Client,
    Upstream,
}

/// What the driver does after sending a step's packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Read the leg's next packet and hand it to [`AuthRounds::packet`].
    Read(Leg),
    /// Fetch qcache's RSA key (`sha2::proxy_key`) and hand it to [`AuthRounds::key`].
    ProxyKey,
    /// Authentication is over: Some(status) on the server's OK, None when it refused (the
    /// client heard it).
    Done(Option<u16>),
    /// Refuse the client with this error, numbered `seq`.
    Refuse(u8, Refusal),
}

/// The packets to send, in order, and what comes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub send: Vec<(Leg, u8, Bytes)>,
    pub then: Then,
}

impl Step {
    fn send(send: Vec<(Leg, u8, Bytes)>, then: Then) -> Step {
        Step { send, then }
    }
}

/// Where the rounds wait.
enum Wait {
    /// The server's next packet.
    Server,
    /// The client's answer (`full_auth`: to caching_sha2's request for the password).
    Answer { full_auth: bool },
    /// The plain upstream's public key, asked for to encrypt the client's `answer`.
    UpstreamKey { answer: Packet, to_upstream: u8 },
    /// qcache's own key, to decrypt the client's `answer` for a TLS upstream.
    ProxyKey { answer: Packet, to_upstream: u8 },
    /// The client's password encrypted with qcache's key, which it asked for.
    Encrypted {
        key: &'static ProxyKey,
        to_upstream: u8,
    },
}

/// The authentication rounds after the handshake response (or COM_CHANGE_USER) went
/// upstream: the server speaks, and the client answers unless the server said OK, ERR, or
/// caching_sha2_password's "fast auth succeeded" (an OK follows it). Each leg keeps its own
/// sequence ids (`AuthLegs::delta`); where the legs differ in TLS, qcache runs the RSA
/// exchange caching_sha2_password asks of a plain leg (`AnswerRoute`).
pub struct AuthRounds<'a> {
    legs: &'a mut AuthLegs,
    wait: Wait,
}

impl<'a> AuthRounds<'a> {
    /// The rounds over `legs` (which they update: plugin, scramble, delta), and their first
    /// step: the server speaks.
    pub fn start(legs: &'a mut AuthLegs) -> (AuthRounds<'a>, Step) {
        let rounds = AuthRounds {
            legs,
            wait: Wait::Server,
        };
        (rounds, Step::send(vec![], Then::Read(Leg::Upstream)))
    }

    /// The next step after the packet read for `Then::Read`. Err: bytes that cannot go on
    /// (the connection ends).
    pub fn packet(&mut self, p: Packet) -> Result<Step, String> {
        match std::mem::replace(&mut self.wait, Wait::Server) {
            Wait::Server => Ok(self.server(p)),
            Wait::Answer { full_auth } => Ok(self.answer(p, full_auth)),
            Wait::UpstreamKey {
                answer,
                to_upstream,
            } => self.upstream_key(p, answer, to_upstream),
            Wait::Encrypted { key, to_upstream } => Ok(self.decrypt(key, p, to_upstream)),
            Wait::ProxyKey { .. } => Err("a packet while qcache's key was awaited".into()),
        }
    }

    /// The next step once qcache's RSA key is at hand (after `Then::ProxyKey`).
    pub fn key(&mut self, key: &'static ProxyKey) -> Result<Step, String> {
        let Wait::ProxyKey {
            answer,
            to_upstream,
        } = std::mem::replace(&mut self.wait, Wait::Server)
        else {
            return Err("qcache's key arrived unasked".into());
        };
        if answer.payload[..] != [0x02] {
            return Ok(self.decrypt(key, answer, to_upstream));
        }
        // The client asks for the key first; its encrypted password follows.
        let mut pem = vec![0x01];
        pem.extend_from_slice(key.pem.as_bytes());
        self.wait = Wait::Encrypted { key, to_upstream };
        let to_client = (Leg::Client, answer.seq.wrapping_add(1), Bytes::from(pem));
        Ok(Step::send(vec![to_client], Then::Read(Leg::Client)))
    }

    /// A server packet: relayed in the client's numbering, then the client answers, the
    /// server goes on, or authentication is over.
    fn server(&mut self, p: Packet) -> Step {
        let legs = &mut *self.legs;
        let to_client = p.seq.wrapping_add(legs.delta);
        if let Some((plugin, data)) = handshake::parse_auth_switch(&p.payload) {
            legs.plugin = plugin;
            legs.scramble = data;
            if legs.leaks_cleartext() {
                let plugin = legs.plugin.clone();
                return Step::send(
                    vec![],
                    Then::Refuse(to_client, Refusal::Cleartext { plugin }),
                );
            }
        }
        let full_auth = legs.full_auth(&p.payload);
        let then = match negotiate::server_auth(&p.payload) {
            ServerAuth::Done(status) => Then::Done(Some(status)),
            ServerAuth::Refused => Then::Done(None),
            ServerAuth::FastAuthOk => Then::Read(Leg::Upstream),
            ServerAuth::WantsAnswer => {
                self.wait = Wait::Answer { full_auth };
                Then::Read(Leg::Client)
            }
        };
        Step::send(vec![(Leg::Client, to_client, p.payload)], then)
    }

    /// The client's answer, on its way up as `AuthLegs::answer_route` says.
    fn answer(&mut self, answer: Packet, full_auth: bool) -> Step {
        let to_upstream = answer.seq.wrapping_sub(self.legs.delta);
        match self.legs.answer_route(full_auth, &answer.payload) {
            AnswerRoute::Relay => {
                let up = (Leg::Upstream, to_upstream, answer.payload);
                Step::send(vec![up], Then::Read(Leg::Upstream))
            }
            // The client sent its password in the clear, as it may inside TLS; the plain
            // upstream gets it RSA-encrypted under its own public key, asked for now.
            AnswerRoute::EncryptForUpstream => {
                let ask = (Leg::Upstream, to_upstream, Bytes::from_static(&[0x02]));
                self.wait = Wait::UpstreamKey {
                    answer,
                    to_upstream,
                };
                Step::send(vec![ask], Then::Read(Leg::Upstream))
            }
            // A plain client must encrypt; over TLS the server takes only the cleartext.
            // qcache plays the server's RSA side with a key of its own.
            AnswerRoute::DecryptForTlsUpstream => {
                self.wait = Wait::ProxyKey {
                    answer,
                    to_upstream,
                };
                Step::send(vec![], Then::ProxyKey)
            }
        }
    }

    /// The plain upstream's answer to the key request: its key, or (an ERR, anything else)
    /// the end, which the client hears in its numbering.
    fn upstream_key(
        &mut self,
        key: Packet,
        answer: Packet,
        to_upstream: u8,
    ) -> Result<Step, String> {
        if key.payload.first() != Some(&0x01) {
            let to_client = (Leg::Client, answer.seq.wrapping_add(1), key.payload);
            return Ok(Step::send(vec![to_client], Then::Done(None)));
        }
        let enc = sha2::encrypt_password(&key.payload[1..], &answer.payload, &self.legs.scramble)
            .map_err(|e| e.to_string())?;
        // Two more packets went upstream than the client sent.
        self.legs.delta = self.legs.delta.wrapping_sub(2);
        let up = (Leg::Upstream, to_upstream.wrapping_add(2), Bytes::from(enc));
        Ok(Step::send(vec![up], Then::Read(Leg::Upstream)))
    }

    /// The client's password decrypted with qcache's key and sent inside the upstream's
    /// TLS as `to_upstream`; refused when the client used another key.
    fn decrypt(&mut self, key: &ProxyKey, enc: Packet, to_upstream: u8) -> Step {
        let Ok(password) = key.decrypt_password(&enc.payload, &self.legs.scramble) else {
            return Step::send(
                vec![],
                Then::Refuse(enc.seq.wrapping_add(1), Refusal::ForeignRsaKey),
            );
        };
        // The server's next packet answers `to_upstream`; the client waits after `enc`.
        self.legs.delta = enc.seq.wrapping_sub(to_upstream);
        let up = (Leg::Upstream, to_upstream, Bytes::from(password));
        Step::send(vec![up], Then::Read(Leg::Upstream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UpstreamCompression;
    use crate::protocol::compress::Algorithm::{self, Zlib, Zstd};

    fn compression(client: &[Algorithm], upstream: UpstreamCompression) -> CompressionConfig {
        CompressionConfig {
            client: client.to_vec(),
            upstream,
            ..CompressionConfig::default()
        }
    }

    fn codec(c: &Option<Codec>) -> Option<(Algorithm, i32)> {
        c.as_ref().map(|c| (c.algorithm(), c.level()))
    }

    /// One row per rule of the client leg: TLS required of TCP clients, compression only as
    /// offered (zlib at the configured level, zstd at the client's).
    #[test]
    fn client_legs() {
        let zstd = cap::ZSTD_COMPRESSION;
        type Case = (
            bool,
            bool,
            u32,
            Option<u8>,
            u32,
            Result<Option<(Algorithm, i32)>, Refusal>,
        );
        let cases: &[Case] = &[
            (false, false, 0, None, 0, Ok(None)),
            (true, true, 0, None, 0, Ok(None)),
            (false, true, 0, None, 0, Err(Refusal::InsecureTransport)),
            (
                false,
                true,
                cap::COMPRESS,
                None,
                cap::COMPRESS,
                Err(Refusal::InsecureTransport),
            ),
            (
                false,
                false,
                cap::COMPRESS,
                None,
                cap::COMPRESS,
                Ok(Some((Zlib, 6))),
            ),
            (false, false, zstd, Some(9), zstd, Ok(Some((Zstd, 9)))),
            (false, false, zstd, None, zstd, Ok(Some((Zstd, 3)))),
            (
                false,
                false,
                cap::COMPRESS,
                None,
                0,
                Err(Refusal::CompressionNotOffered),
            ),
            (
                false,
                false,
                zstd,
                Some(9),
                cap::COMPRESS,
                Err(Refusal::CompressionNotOffered),
            ),
        ];
        let cfg = compression(&[Zlib, Zstd], UpstreamCompression::Off);
        for (i, (secure, require, caps, level, offer, want)) in cases.iter().enumerate() {
            let resp = HandshakeResponse {
                capabilities: *caps,
                zstd_level: level.map(|l| (l, 40)),
                ..Default::default()
            };
            let got = client_leg(*secure, *require, &resp, *offer, &cfg);
            assert_eq!(got.map(|c| codec(&c)), *want, "case {i}");
        }
    }

    /// One row per rule of the upstream leg: the TLS mode against the server's offer, and
    /// the configured compression out of what the server offers.
    #[test]
    fn upstream_legs() {
        use UpstreamCompression as C;
        use UpstreamTlsMode::*;
        let ssl = cap::SSL;
        let both = cap::COMPRESS | cap::ZSTD_COMPRESSION;
        type Case = (
            UpstreamTlsMode,
            bool,
            u32,
            C,
            Option<(bool, Option<Algorithm>)>,
        );
        let cases: &[Case] = &[
            (Disabled, false, ssl, C::Off, Some((false, None))),
            (Required, false, 0, C::Off, Some((false, None))),
            (Preferred, true, ssl, C::Off, Some((true, None))),
            (Preferred, true, 0, C::Off, Some((false, None))),
            (Required, true, ssl, C::Off, Some((true, None))),
            (Required, true, 0, C::Off, None),
            (VerifyCa, true, 0, C::Off, None),
            (VerifyIdentity, true, ssl, C::Off, Some((true, None))),
            (Disabled, false, both, C::Auto, Some((false, Some(Zstd)))),
            (
                Disabled,
                false,
                cap::COMPRESS,
                C::Auto,
                Some((false, Some(Zlib))),
            ),
            (Disabled, false, cap::COMPRESS, C::Zstd, Some((false, None))),
            (Disabled, false, both, C::Zlib, Some((false, Some(Zlib)))),
        ];
        let response = [cap::PROTOCOL_41.to_le_bytes().as_slice(), &[0; 60]].concat();
        for (i, (mode, connector, caps, upstream, want)) in cases.iter().enumerate() {
            let cfg = compression(&[], *upstream);
            let got = upstream_leg(*mode, *connector, *caps, &cfg, "db:3306", &response);
            match (got, want) {
                (Ok(leg), Some((tls, alg))) => {
                    let got_alg = leg.codec.as_ref().map(Codec::algorithm);
                    assert_eq!((leg.tls, got_alg), (*tls, *alg), "case {i}");
                    let req = leg.ssl_request.as_deref();
                    assert_eq!(req.map(<[u8]>::len), tls.then_some(32), "case {i}");
                    let req_caps = req.map(|r| u32::from_le_bytes(r[..4].try_into().unwrap()));
                    assert!(req_caps.is_none_or(|c| c & cap::SSL != 0), "case {i}");
                }
                (Err(h), None) => assert_eq!(
                    h,
                    Halt::Refuse(Refusal::UpstreamNoTls {
                        addr: "db:3306".into(),
                        mode: format!("{mode:?}"),
                    }),
                    "case {i}"
                ),
                (got, _) => panic!("case {i}: {:?}", got.map(|l| l.tls)),
            }
        }
        // A response too short to make the SSL request from ends the connection.
        let cfg = compression(&[], C::Off);
        let short = upstream_leg(Required, true, ssl, &cfg, "db:3306", &response[..31]);
        assert!(matches!(short, Err(Halt::Malformed(_))));
        let plain = upstream_leg(Disabled, true, ssl, &cfg, "db:3306", &response[..31]);
        assert!(plain.is_ok_and(|l| l.ssl_request.is_none()));
    }

    fn legs(client_tls: bool, upstream_tls: bool, plugin: &str, delta: u8) -> AuthLegs {
        AuthLegs {
            delta,
            plugin: plugin.into(),
            scramble: b"01234567890123456789".to_vec(),
            client_tls,
            upstream_tls,
        }
    }

    fn to(leg: Leg, seq: u8, p: &[u8]) -> (Leg, u8, Bytes) {
        (leg, seq, Bytes::copy_from_slice(p))
    }

    const OK: &[u8] = &[0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00];
    const ERR: &[u8] = b"\xff\x15\x04#28000denied";
    const TO_CLEAR: &[u8] = b"\xfemysql_clear_password\0";
    const TO_NATIVE: &[u8] = b"\xfemysql_native_password\0nonce-nonce-nonce-no\0";
    const FULL: &[u8] = &[0x01, 0x04];

    /// One conversation per rule of the rounds: each packet read (from the leg the previous
    /// step named) and the step the machine answers with.
    #[test]
    fn authentication_rounds() {
        use Leg::{Client, Upstream};
        let read_up = Then::Read(Upstream);
        let read_client = Then::Read(Client);
        let clear = || Refusal::Cleartext {
            plugin: "mysql_clear_password".into(),
        };
        type Row = (
            &'static str,
            AuthLegs,
            Vec<(u8, &'static [u8], Result<Step, ()>)>,
        );
        let rows: Vec<Row> = vec![
            (
                "the server's OK ends it, in the client's numbering",
                legs(false, false, "mysql_native_password", 1),
                vec![(
                    2,
                    OK,
                    Ok(Step::send(vec![to(Client, 3, OK)], Then::Done(Some(2)))),
                )],
            ),
            (
                "the server's ERR ends it, relayed",
                legs(false, false, "mysql_native_password", 0),
                vec![(
                    2,
                    ERR,
                    Ok(Step::send(vec![to(Client, 2, ERR)], Then::Done(None))),
                )],
            ),
            (
                "fast auth: the OK follows, the client says nothing",
                legs(false, false, CACHING, 0),
                vec![
                    (
                        2,
                        &[0x01, 0x03],
                        Ok(Step::send(vec![to(Client, 2, &[1, 3])], read_up.clone())),
                    ),
                    (
                        3,
                        OK,
                        Ok(Step::send(vec![to(Client, 3, OK)], Then::Done(Some(2)))),
                    ),
                ],
            ),
            (
                "a switch to a cleartext plugin from a secure client to a plain upstream",
                legs(true, false, "mysql_native_password", 1),
                vec![(
                    2,
                    TO_CLEAR,
                    Ok(Step::send(vec![], Then::Refuse(3, clear()))),
                )],
            ),
            (
                "a switch is relayed and its answer goes up in the server's numbering",
                legs(true, true, "mysql_native_password", 1),
                vec![
                    (
                        2,
                        TO_NATIVE,
                        Ok(Step::send(
                            vec![to(Client, 3, TO_NATIVE)],
                            read_client.clone(),
                        )),
                    ),
                    (
                        4,
                        b"scrambled",
                        Ok(Step::send(
                            vec![to(Upstream, 3, b"scrambled")],
                            read_up.clone(),
                        )),
                    ),
                ],
            ),
            (
                "full auth to a plain upstream: its key is asked for; an ERR instead ends it",
                legs(true, false, CACHING, 0),
                vec![
                    (
                        2,
                        FULL,
                        Ok(Step::send(vec![to(Client, 2, FULL)], read_client.clone())),
                    ),
                    (
                        3,
                        b"secret\0",
                        Ok(Step::send(vec![to(Upstream, 3, &[0x02])], read_up.clone())),
                    ),
                    (
                        4,
                        ERR,
                        Ok(Step::send(vec![to(Client, 4, ERR)], Then::Done(None))),
                    ),
                ],
            ),
            (
                "full auth to a plain upstream whose key is no RSA key",
                legs(true, false, CACHING, 0),
                vec![
                    (
                        2,
                        FULL,
                        Ok(Step::send(vec![to(Client, 2, FULL)], read_client.clone())),
                    ),
                    (
                        3,
                        b"secret\0",
                        Ok(Step::send(vec![to(Upstream, 3, &[0x02])], read_up.clone())),
                    ),
                    (4, b"\x01not a key", Err(())),
                ],
            ),
            (
                "a secure client asking for the server's key runs the plain exchange",
                legs(true, false, CACHING, 0),
                vec![
                    (
                        2,
                        FULL,
                        Ok(Step::send(vec![to(Client, 2, FULL)], read_client.clone())),
                    ),
                    (
                        3,
                        &[0x02],
                        Ok(Step::send(vec![to(Upstream, 3, &[0x02])], read_up.clone())),
                    ),
                ],
            ),
            (
                "full auth from a plain client to a TLS upstream: qcache's key first",
                legs(false, true, CACHING, 0),
                vec![
                    (
                        2,
                        FULL,
                        Ok(Step::send(vec![to(Client, 2, FULL)], read_client.clone())),
                    ),
                    (3, &[0x02], Ok(Step::send(vec![], Then::ProxyKey))),
                    (4, OK, Err(())),
                ],
            ),
        ];
        for (what, mut l, script) in rows {
            let (mut rounds, first) = AuthRounds::start(&mut l);
            assert_eq!(first, Step::send(vec![], read_up.clone()), "{what}");
            for (i, (seq, p, want)) in script.into_iter().enumerate() {
                let got = rounds.packet(Packet::new(seq, Bytes::from_static(p)));
                assert_eq!(got.map_err(|_| ()), want, "{what}: packet {i}");
            }
        }
    }

    /// What the rounds leave in the legs: the switch's plugin and nonce, and a delta that
    /// counts the two packets of qcache's own key request.
    #[test]
    fn rounds_follow_the_switch_and_the_key_request() {
        let mut l = legs(true, true, CACHING, 1);
        let (mut rounds, _) = AuthRounds::start(&mut l);
        rounds
            .packet(Packet::new(2, Bytes::from_static(TO_NATIVE)))
            .unwrap();
        drop(rounds);
        assert_eq!(l.plugin, "mysql_native_password");
        assert_eq!(l.scramble, b"nonce-nonce-nonce-no");
        let mut l = legs(true, false, CACHING, 0);
        let (mut rounds, _) = AuthRounds::start(&mut l);
        rounds
            .packet(Packet::new(2, Bytes::from_static(FULL)))
            .unwrap();
        rounds
            .packet(Packet::new(3, Bytes::from_static(b"x\0")))
            .unwrap();
        drop(rounds);
        assert_eq!(l.delta, 0, "the delta moves only once the password went up");
    }

    const CACHING: &str = crate::protocol::negotiate::CACHING_SHA2;
}
