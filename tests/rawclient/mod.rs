//! A minimal MySQL client speaking raw packets, for tests that must see exact bytes or use
//! commands real drivers rarely send (cursors, COM_FIELD_LIST, COM_STATISTICS, …).

#![allow(dead_code)]

use bytes::{BufMut, BytesMut};
use qcache::protocol::codec::{self, Packet};
use qcache::protocol::compress::{Algorithm, Codec};
use qcache::protocol::packets::{cap, com};
use qcache::protocol::response::{Expect, Response, Step};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

pub struct Raw {
    /// The connection: TCP, or a Unix socket when the address is a path (starts with `/`).
    pub tcp: Box<dyn Io>,
    buf: BytesMut,
    pub caps: u32,
    pub server_caps: u32,
    pub greeting: Packet,
    /// After login with compression: the codec, bytes not yet a whole frame, and the next
    /// frame's sequence id.
    comp: Option<(Codec, BytesMut, u8)>,
}

/// Capabilities a modern client asks for; `deprecate_eof` picks the result-set ending.
pub fn client_caps(deprecate_eof: bool) -> u32 {
    let mut c = cap::LONG_PASSWORD
        | cap::PROTOCOL_41
        | cap::SECURE_CONNECTION
        | cap::TRANSACTIONS
        | cap::MULTI_STATEMENTS
        | cap::MULTI_RESULTS
        | cap::PS_MULTI_RESULTS
        | cap::PLUGIN_AUTH
        | cap::CONNECT_WITH_DB
        | cap::LOCAL_FILES
        | cap::PLUGIN_AUTH_LENENC_DATA;
    if deprecate_eof {
        c |= cap::DEPRECATE_EOF;
    }
    c
}

/// Reads the greeting off a bare TCP connection (for tests that misbehave after it).
pub async fn read_greeting(tcp: &mut TcpStream) -> Packet {
    let mut buf = BytesMut::new();
    loop {
        if let Some(p) = codec::decode(&mut buf, 1 << 20).expect("framing") {
            return p;
        }
        let n = tcp.read_buf(&mut buf).await.expect("read greeting");
        assert!(n > 0, "closed before the greeting");
    }
}

impl Raw {
    /// Connects and logs in as `user` with an empty password (the test server's root).
    pub async fn connect(addr: &str, user: &str, db: &str, deprecate_eof: bool) -> Raw {
        Raw::connect_compressed(addr, user, db, deprecate_eof, None).await
    }

    /// Like [`connect`](Self::connect), asking for protocol compression with `alg` (the
    /// server must offer it), which then carries every command after the login.
    pub async fn connect_compressed(
        addr: &str,
        user: &str,
        db: &str,
        deprecate_eof: bool,
        alg: Option<Algorithm>,
    ) -> Raw {
        Raw::login(addr, user, db, deprecate_eof, alg, 0, 0).await
    }

    /// Like [`connect`](Self::connect) with DEPRECATE_EOF, asking for `extra` capabilities
    /// too (those the server offers), such as CLIENT_SESSION_TRACK.
    #[allow(dead_code)]
    pub async fn connect_with_caps(addr: &str, user: &str, db: &str, extra: u32) -> Raw {
        Raw::login(addr, user, db, true, None, 0, extra).await
    }

    /// Like [`connect`](Self::connect), asking for MariaDB's extended capabilities
    /// `mariadb_caps` (those the server offers), as MariaDB's own connectors do.
    #[allow(dead_code)]
    pub async fn connect_mariadb(
        addr: &str,
        user: &str,
        db: &str,
        deprecate_eof: bool,
        mariadb_caps: u32,
    ) -> Raw {
        Raw::login(addr, user, db, deprecate_eof, None, mariadb_caps, 0).await
    }

    async fn login(
        addr: &str,
        user: &str,
        db: &str,
        deprecate_eof: bool,
        alg: Option<Algorithm>,
        mariadb_caps: u32,
        extra: u32,
    ) -> Raw {
        let tcp: Box<dyn Io> = if addr.starts_with('/') {
            Box::new(UnixStream::connect(addr).await.expect("connect"))
        } else {
            Box::new(TcpStream::connect(addr).await.expect("connect"))
        };
        let mut raw = Raw {
            tcp,
            buf: BytesMut::new(),
            caps: 0,
            server_caps: 0,
            greeting: Packet::new(0, Vec::new()),
            comp: None,
        };
        let g = raw.read().await.expect("greeting");
        let parsed = qcache::protocol::handshake::parse_greeting(&g.payload).expect("greeting");
        raw.server_caps = parsed.capabilities;
        let want = match alg {
            Some(Algorithm::Zlib) => cap::COMPRESS,
            Some(Algorithm::Zstd) => cap::ZSTD_COMPRESSION,
            None => 0,
        };
        assert_eq!(parsed.capabilities & want, want, "compression not offered");
        raw.caps = (client_caps(deprecate_eof) | want | extra) & parsed.capabilities;
        let mariadb_caps = mariadb_caps & parsed.mariadb_caps;
        if mariadb_caps != 0 {
            // A MariaDB client says so by not claiming CLIENT_MYSQL (bit 0).
            raw.caps &= !cap::LONG_PASSWORD;
        }
        raw.greeting = g;
        let mut p = BytesMut::new();
        p.put_u32_le(raw.caps);
        p.put_u32_le(1 << 30);
        p.put_u8(45);
        p.put_slice(&[0; 19]);
        p.put_u32_le(mariadb_caps);
        p.put_slice(user.as_bytes());
        p.put_u8(0);
        p.put_u8(0); // empty auth response
        p.put_slice(db.as_bytes());
        p.put_u8(0);
        p.put_slice(b"mysql_native_password\0");
        if want == cap::ZSTD_COMPRESSION {
            p.put_u8(3); // zstd level
        }
        raw.send(1, &p).await;
        loop {
            let r = raw.read().await.expect("auth reply");
            match r.payload.first() {
                Some(0x00) => {
                    if let Some(a) = alg {
                        raw.comp = Some((Codec::new(a, 3), raw.buf.split(), 0));
                    }
                    break;
                }
                Some(0xfe) => raw.send(r.seq.wrapping_add(1), &[]).await,
                other => panic!(
                    "login failed: {other:?} {:?}",
                    String::from_utf8_lossy(&r.payload)
                ),
            }
        }
        raw
    }

    pub fn deprecate_eof(&self) -> bool {
        self.caps & cap::DEPRECATE_EOF != 0
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) {
        let mut out = BytesMut::new();
        codec::encode(seq, payload, &mut out);
        if let Some((c, _, frame_seq)) = &mut self.comp {
            if seq == 0 {
                *frame_seq = 0;
            }
            let mut framed = BytesMut::new();
            *frame_seq = c.encode(&out, *frame_seq, &mut framed);
            out = framed;
        }
        self.tcp.write_all(&out).await.expect("write");
    }

    /// Sends a packet, handing back a failed write instead of panicking: a server closes
    /// while a packet over its `max_allowed_packet` is still being written.
    pub async fn try_send(&mut self, seq: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut out = BytesMut::new();
        codec::encode(seq, payload, &mut out);
        self.tcp.write_all(&out).await
    }

    /// Sends bytes as they are, below any compression (for malformed-frame tests).
    pub async fn send_wire(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.expect("write");
    }

    /// The next packet, or None when the server closed.
    pub async fn read(&mut self) -> Option<Packet> {
        loop {
            if let Some(p) = codec::decode(&mut self.buf, 1 << 30).expect("framing") {
                return Some(p);
            }
            if let Some((c, raw, frame_seq)) = &mut self.comp {
                if let Some(seq) = c.decode_frame(raw, &mut self.buf).expect("frame") {
                    *frame_seq = seq.wrapping_add(1);
                    continue;
                }
                let n = self.tcp.read_buf(raw).await.ok()?;
                if n == 0 {
                    return None;
                }
                continue;
            }
            let n = self.tcp.read_buf(&mut self.buf).await.ok()?;
            if n == 0 {
                return None;
            }
        }
    }

    /// Sends a command and collects the whole response.
    pub async fn command(&mut self, payload: &[u8], expect: Expect) -> (Vec<Packet>, Response) {
        self.send(0, payload).await;
        self.response(expect).await
    }

    pub async fn response(&mut self, expect: Expect) -> (Vec<Packet>, Response) {
        let mut r = Response::new(expect, self.deprecate_eof());
        let mut packets = Vec::new();
        if expect == Expect::Nothing {
            return (packets, r);
        }
        loop {
            let p = self.read().await.expect("response packet");
            let step = r.feed(&p.payload).expect("well-formed response");
            packets.push(p);
            match step {
                Step::More => {}
                Step::Done => return (packets, r),
                Step::LocalInfile => panic!("unexpected LOCAL INFILE request"),
            }
        }
    }

    pub async fn query(&mut self, sql: &str) -> (Vec<Packet>, Response) {
        let mut p = vec![com::QUERY];
        p.extend_from_slice(sql.as_bytes());
        self.command(&p, Expect::Results).await
    }

    /// The response's bytes as they came off the wire.
    pub fn wire(packets: &[Packet]) -> Vec<u8> {
        let mut out = BytesMut::new();
        for p in packets {
            codec::encode(p.seq, &p.payload, &mut out);
        }
        out.to_vec()
    }
}

/// A MySQL 8 greeting, as a scripted server sends it: `caps` offered, the 20-byte
/// `scramble` as the nonce, `plugin` as the default authentication plugin.
pub fn mysql8_greeting(caps: u32, scramble: &[u8; 20], plugin: &str) -> Vec<u8> {
    let mut p = vec![10u8];
    p.extend_from_slice(b"8.0.36\0");
    p.extend_from_slice(&7u32.to_le_bytes());
    p.extend_from_slice(&scramble[..8]);
    p.push(0);
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(255);
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&scramble[8..]);
    p.push(0);
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p
}

/// Any byte stream a scripted peer can talk over: plain TCP or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One end of a scripted exchange (a fake server or client) speaking whole packets.
pub struct Peer {
    pub io: Box<dyn Io>,
    pub buf: BytesMut,
}

impl Peer {
    pub fn new(io: impl Io + 'static) -> Peer {
        Peer {
            io: Box::new(io),
            buf: BytesMut::new(),
        }
    }

    /// The next packet, or None when the other side closed or sent garbage.
    pub async fn read(&mut self) -> Option<Packet> {
        loop {
            if let Some(p) = codec::decode(&mut self.buf, 1 << 24).ok()? {
                return Some(p);
            }
            if self.io.read_buf(&mut self.buf).await.ok()? == 0 {
                return None;
            }
        }
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) {
        let mut out = BytesMut::new();
        codec::encode(seq, payload, &mut out);
        let _ = self.io.write_all(&out).await;
        let _ = self.io.flush().await;
    }
}

/// Whether `sql` is one of what qcache asks at connect, reset and change-user.
pub fn is_session_settings(sql: &[u8]) -> bool {
    sql == b"DO 0"
        || sql.starts_with(b"SELECT FOUND_ROWS(), @@session.")
        || sql.starts_with(b"SELECT FOUND_ROWS(), ROW_COUNT(), @@session.")
        || sql.starts_with(b"SELECT 1 FROM (SELECT 1) AS qcache_diag")
        || sql.starts_with(
            b"SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES",
        )
}

/// A scripted server's answer to what qcache asks at connect, reset and change-user (its
/// session's settings, `FOUND_ROWS()` and `ROW_COUNT()`, `SELECT FOUND_ROWS(), ROW_COUNT(),
/// @@session.…`; which optional
/// variables it has, none here; then the restorers, an empty SELECT and `DO 0`): framed
/// packets from seq 1, or None for any other statement.
pub fn session_settings_answer(
    sql: &[u8],
    format: qcache::protocol::packets::ResultFormat,
) -> Option<Vec<u8>> {
    use qcache::protocol::packets;
    if !is_session_settings(sql) {
        return None;
    }
    if sql == b"DO 0" {
        let mut ok = BytesMut::new();
        codec::encode(1, &packets::ok_payload(0, 0, 2, 0), &mut ok);
        return Some(ok.to_vec());
    }
    let s = packets::TYPE_VAR_STRING;
    if sql.starts_with(b"SELECT 1 FROM") {
        return Some(
            packets::text_result(&[("1", packets::TYPE_LONGLONG)], &[], 2, format).to_vec(),
        );
    }
    if sql.starts_with(b"SELECT VARIABLE_NAME") {
        let cols = [("VARIABLE_NAME", s), ("VARIABLE_VALUE", s)];
        return Some(packets::text_result(&cols, &[], 2, format).to_vec());
    }
    let text = std::str::from_utf8(sql).ok()?;
    let names: Vec<String> = text["SELECT ".len()..]
        .split(", ")
        .map(str::to_string)
        .collect();
    let cols: Vec<(&str, u8)> = names.iter().map(|n| (n.as_str(), s)).collect();
    let row = names
        .iter()
        .map(|n| {
            Some(
                match n.as_str() {
                    "FOUND_ROWS()" => "0",
                    "ROW_COUNT()" => "-1",
                    // The default, under which qcache may answer a plain BEGIN itself.
                    n if n.ends_with("completion_type") => "NO_CHAIN",
                    // Off, as a real server's default: qcache refuses the cache to a session
                    // whose value it cannot read as off (`policy::context::auto_is_null_on`).
                    n if n.ends_with("sql_auto_is_null") => "0",
                    // Read-write and the default idle timer, as a real server's defaults.
                    n if n.ends_with("read_only") => "0",
                    n if n.ends_with("wait_timeout") => "28800",
                    // Off, as by default: a session that traces is not served.
                    n if n.ends_with("optimizer_trace") => "enabled=off,one_line=off",
                    // Off, as by default: a session that profiles is not served either.
                    n if n.ends_with("profiling") => "0",
                    _ => "scripted",
                }
                .to_string(),
            )
        })
        .collect();
    Some(packets::text_result(&cols, &[row], 2, format).to_vec())
}
