//! The connection-phase packets: the server greeting, the client's handshake response (and
//! SSL request), COM_CHANGE_USER, and the capability edits qcache makes while relaying them.

use bytes::{Bytes, BytesMut};

use super::packets::{cap, mariadb_cap, read_lenenc, read_nul_str};

/// What qcache learns from the server's greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    pub server_version: String,
    pub connection_id: u32,
    pub capabilities: u32,
    /// MariaDB's extended capabilities (0 when the server is MySQL).
    pub mariadb_caps: u32,
    pub charset: u8,
    pub status: u16,
    pub auth_plugin: String,
}

/// Offsets of the fields qcache edits in a greeting payload.
struct GreetingLayout {
    caps_lo: usize,
    caps_hi: Option<usize>,
    mariadb_caps: Option<usize>,
}

fn layout(p: &[u8]) -> Option<(Greeting, GreetingLayout)> {
    if p.first() != Some(&10) {
        return None;
    }
    let (version, n) = read_nul_str(p.get(1..)?)?;
    let mut at = 1 + n;
    let connection_id = u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?);
    at += 4 + 8 + 1; // auth-plugin-data part 1 and a filler
    let caps_lo = at;
    let lo = u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?) as u32;
    at += 2;
    let mut g = Greeting {
        server_version: String::from_utf8_lossy(version).into_owned(),
        connection_id,
        capabilities: lo,
        mariadb_caps: 0,
        charset: 0,
        status: 0,
        auth_plugin: String::new(),
    };
    let mut l = GreetingLayout {
        caps_lo,
        caps_hi: None,
        mariadb_caps: None,
    };
    if p.len() <= at {
        return Some((g, l));
    }
    g.charset = *p.get(at)?;
    g.status = u16::from_le_bytes(p.get(at + 1..at + 3)?.try_into().ok()?);
    l.caps_hi = Some(at + 3);
    let hi = u16::from_le_bytes(p.get(at + 3..at + 5)?.try_into().ok()?) as u32;
    g.capabilities |= hi << 16;
    let auth_len = *p.get(at + 5)? as usize;
    let reserved = at + 6;
    if g.capabilities & cap::MARIADB_CLIENT_MYSQL == 0 {
        l.mariadb_caps = Some(reserved + 6);
        g.mariadb_caps = u32::from_le_bytes(p.get(reserved + 6..reserved + 10)?.try_into().ok()?);
    }
    at = reserved + 10;
    if g.capabilities & cap::SECURE_CONNECTION != 0 {
        at += auth_len.saturating_sub(8).max(13);
    }
    if g.capabilities & cap::PLUGIN_AUTH != 0 {
        if let Some(rest) = p.get(at..) {
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            g.auth_plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
        }
    }
    Some((g, l))
}

pub fn parse_greeting(p: &[u8]) -> Option<Greeting> {
    layout(p).map(|(g, _)| g)
}

/// The greeting's 20-byte nonce (auth-plugin-data parts 1 and 2), which MySQL's RSA
/// password exchange XORs the password with.
pub fn greeting_scramble(p: &[u8]) -> Option<Vec<u8>> {
    let (_, l) = layout(p)?;
    let mut s = p.get(l.caps_lo.checked_sub(9)?..l.caps_lo - 1)?.to_vec();
    // caps_lo(2) charset(1) status(2) caps_hi(2) auth-data length(1) reserved(10)
    let part2 = p.get(l.caps_lo + 18..)?;
    let end = part2
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(part2.len())
        .min(12);
    s.extend_from_slice(&part2[..end]);
    Some(s)
}

/// An auth switch request (0xfe, plugin name NUL, plugin data): the new plugin and its
/// nonce without the trailing NUL.
pub fn parse_auth_switch(p: &[u8]) -> Option<(String, Vec<u8>)> {
    if p.first() != Some(&0xfe) {
        return None;
    }
    let (name, n) = read_nul_str(p.get(1..)?)?;
    let mut data = p.get(1 + n..)?.to_vec();
    if data.last() == Some(&0) {
        data.pop();
    }
    Some((String::from_utf8_lossy(name).into_owned(), data))
}

/// A handshake response `p` with its auth data emptied and its plugin renamed `plugin`, the
/// rest as it was. A server whose account uses another client plugin than the response
/// names answers with an auth switch to that plugin and ignores the data; so a password the
/// client sent in the clear can be withheld from a plain leg while the server still decides
/// how the client logs in. None when `p` is malformed or names no plugin.
pub fn without_auth_data(p: &[u8], plugin: &str) -> Option<Vec<u8>> {
    let caps = u32::from_le_bytes(p.get(0..4)?.try_into().ok()?);
    if caps & cap::PLUGIN_AUTH == 0 {
        return None;
    }
    let mut at = 32;
    let (_, n) = read_nul_str(p.get(at..)?)?;
    at += n;
    let mut out = p.get(..at)?.to_vec();
    // The data's own encoding, empty: a 0 length, or (oldest form) an empty NUL string.
    if caps & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
        let (len, n) = read_lenenc(p.get(at..)?)?;
        at = at.checked_add(n)?.checked_add(usize::try_from(len).ok()?)?;
    } else if caps & cap::SECURE_CONNECTION != 0 {
        at += 1 + usize::from(*p.get(at)?);
    } else {
        let (_, n) = read_nul_str(p.get(at..)?)?;
        at += n;
    }
    out.push(0);
    if at > p.len() {
        return None;
    }
    if caps & cap::CONNECT_WITH_DB != 0 && at < p.len() {
        let (_, n) = read_nul_str(&p[at..])?;
        out.extend_from_slice(&p[at..at + n]);
        at += n;
    }
    let (_, n) = read_nul_str(p.get(at..)?)?;
    at += n;
    out.extend_from_slice(plugin.as_bytes());
    out.push(0);
    out.extend_from_slice(&p[at..]);
    Some(out)
}

/// The capability word of a handshake response (or SSL request) with `set` added and
/// `clear` removed. What qcache never offers ([`UNOFFERED_CAPS`], [`CLEARED_MARIADB_CAPS`])
/// is removed too: a client that sets it anyway would otherwise have the server take it at
/// its word, since the server did offer it to qcache.
pub fn with_response_caps(p: &[u8], set: u32, clear: u32) -> Option<BytesMut> {
    let caps = u32::from_le_bytes(p.get(0..4)?.try_into().ok()?);
    let caps = (caps | set) & !clear & !UNOFFERED_CAPS;
    let mut out = BytesMut::from(p);
    out[0..4].copy_from_slice(&caps.to_le_bytes());
    if caps & cap::MARIADB_CLIENT_MYSQL == 0 {
        if let Some(ext) = out.get_mut(28..32) {
            let m = u32::from_le_bytes(ext.try_into().ok()?) & !CLEARED_MARIADB_CAPS;
            ext.copy_from_slice(&m.to_le_bytes());
        }
    }
    Some(out)
}

/// Capabilities qcache cannot relay as they are: TLS and compression change the framing
/// (terminated later by qcache itself); the rest are [`UNOFFERED_CAPS`].
pub const CLEARED_CAPS: u32 = cap::SSL | cap::COMPRESS | cap::ZSTD_COMPRESSION | UNOFFERED_CAPS;
/// Capabilities no client gets through qcache. Optional metadata lets a server omit column
/// definitions that a cached result needs. Query attributes put name/value pairs before
/// COM_QUERY's text and COM_STMT_EXECUTE's parameters, where qcache reads the statement and
/// the key: a write behind them would not be recognised, and invalidate nothing.
pub const UNOFFERED_CAPS: u32 = cap::OPTIONAL_RESULTSET_METADATA | cap::QUERY_ATTRIBUTES;
/// MariaDB's metadata cache lets a server omit column definitions, which a cached result
/// needs. Extended type info is relayed: the negotiated MariaDB capabilities are part of the
/// key, and the result sets qcache builds itself carry the field when it was negotiated
/// (drivers such as node-mysql2 learn from it that a LONGTEXT column holds JSON).
pub const CLEARED_MARIADB_CAPS: u32 = mariadb_cap::CACHE_METADATA;

/// The greeting with `clear` removed from the advertised capabilities.
pub fn rewrite_greeting(p: &[u8], clear: u32, clear_mariadb: u32) -> Option<(Bytes, Greeting)> {
    rewrite_greeting_caps(p, clear, 0, clear_mariadb)
}

/// The greeting with `clear` removed and `set` added: CLIENT_SSL is offered when qcache
/// terminates TLS itself, whether or not the server offers it.
pub fn rewrite_greeting_caps(
    p: &[u8],
    clear: u32,
    set: u32,
    clear_mariadb: u32,
) -> Option<(Bytes, Greeting)> {
    let (mut g, l) = layout(p)?;
    let mut out = BytesMut::from(p);
    let caps = (g.capabilities & !clear) | set;
    out[l.caps_lo..l.caps_lo + 2].copy_from_slice(&(caps as u16).to_le_bytes());
    if let Some(hi_at) = l.caps_hi {
        out[hi_at..hi_at + 2].copy_from_slice(&((caps >> 16) as u16).to_le_bytes());
    }
    g.capabilities = caps;
    if let Some(m) = l.mariadb_caps {
        g.mariadb_caps &= !clear_mariadb;
        out[m..m + 4].copy_from_slice(&g.mariadb_caps.to_le_bytes());
    }
    Some((out.freeze(), g))
}

/// The client's HandshakeResponse41 (or the SSL request that precedes it under TLS).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub mariadb_caps: u32,
    pub max_packet: u32,
    pub charset: u8,
    pub user: String,
    pub database: Option<String>,
    pub auth_plugin: Option<String>,
    /// A 32-byte packet with CLIENT_SSL: the client wants TLS before it says anything else.
    pub ssl_request: bool,
    /// With CLIENT_ZSTD_COMPRESSION_ALGORITHM: the zstd level the client asked for, and the
    /// offset of that byte (the packet's last), which a leg without zstd must not carry.
    pub zstd_level: Option<(u8, usize)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandshakeError {
    #[error("malformed handshake response")]
    Malformed,
    #[error("the client does not speak protocol 4.1")]
    OldProtocol,
}

pub fn parse_handshake_response(p: &[u8]) -> Result<HandshakeResponse, HandshakeError> {
    use HandshakeError::Malformed;
    let caps_lo = p.get(0..2).ok_or(Malformed)?;
    let lo = u16::from_le_bytes([caps_lo[0], caps_lo[1]]) as u32;
    if lo & cap::PROTOCOL_41 == 0 {
        return Err(HandshakeError::OldProtocol);
    }
    let fixed = p.get(0..32).ok_or(Malformed)?;
    let capabilities = u32::from_le_bytes(fixed[0..4].try_into().map_err(|_| Malformed)?);
    let mut r = HandshakeResponse {
        capabilities,
        max_packet: u32::from_le_bytes(fixed[4..8].try_into().map_err(|_| Malformed)?),
        charset: fixed[8],
        ..Default::default()
    };
    if capabilities & cap::MARIADB_CLIENT_MYSQL == 0 {
        r.mariadb_caps = u32::from_le_bytes(fixed[28..32].try_into().map_err(|_| Malformed)?);
    }
    if p.len() == 32 {
        r.ssl_request = capabilities & cap::SSL != 0;
        if r.ssl_request {
            return Ok(r);
        }
        return Err(Malformed);
    }
    let mut at = 32;
    let (user, n) = read_nul_str(p.get(at..).ok_or(Malformed)?).ok_or(Malformed)?;
    r.user = String::from_utf8_lossy(user).into_owned();
    at += n;
    // auth response
    if capabilities & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
        let (len, n) = read_lenenc(p.get(at..).ok_or(Malformed)?).ok_or(Malformed)?;
        let len = usize::try_from(len).map_err(|_| Malformed)?;
        // A length near u64::MAX must not wrap the sum (found by the handshake fuzz target).
        at = at
            .checked_add(n)
            .and_then(|a| a.checked_add(len))
            .ok_or(Malformed)?;
    } else if capabilities & cap::SECURE_CONNECTION != 0 {
        let len = *p.get(at).ok_or(Malformed)? as usize;
        at += 1 + len;
    } else {
        let (_, n) = read_nul_str(p.get(at..).ok_or(Malformed)?).ok_or(Malformed)?;
        at += n;
    }
    if at > p.len() {
        return Err(Malformed);
    }
    if capabilities & cap::CONNECT_WITH_DB != 0 && at < p.len() {
        let (db, n) = read_nul_str(&p[at..]).ok_or(Malformed)?;
        if !db.is_empty() {
            r.database = Some(String::from_utf8_lossy(db).into_owned());
        }
        at += n;
    }
    if capabilities & cap::PLUGIN_AUTH != 0 && at < p.len() {
        let rest = &p[at..];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        r.auth_plugin = Some(String::from_utf8_lossy(&rest[..end]).into_owned());
        at += (end + 1).min(rest.len());
    }
    if capabilities & cap::CONNECT_ATTRS != 0 && at < p.len() {
        if let Some((len, n)) = read_lenenc(&p[at..]) {
            at = at
                .saturating_add(n)
                .saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        }
    }
    if capabilities & cap::ZSTD_COMPRESSION != 0 && at + 1 == p.len() {
        r.zstd_level = Some((p[at], at));
    }
    Ok(r)
}

/// COM_CHANGE_USER: the new user and default database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeUser {
    pub user: String,
    pub database: Option<String>,
    pub charset: Option<u8>,
}

pub fn parse_change_user(p: &[u8], client_caps: u32) -> Option<ChangeUser> {
    // 0x11, user NUL, auth (1-byte len under SECURE_CONNECTION, else NUL), db NUL, charset(2)
    let (user, n) = read_nul_str(p.get(1..)?)?;
    let mut at = 1 + n;
    if client_caps & cap::SECURE_CONNECTION != 0 {
        let len = *p.get(at)? as usize;
        at += 1 + len;
    } else {
        let (_, n) = read_nul_str(p.get(at..)?)?;
        at += n;
    }
    let (db, n) = read_nul_str(p.get(at..)?)?;
    at += n;
    let charset = p.get(at).copied();
    Some(ChangeUser {
        user: String::from_utf8_lossy(user).into_owned(),
        database: (!db.is_empty()).then(|| String::from_utf8_lossy(db).into_owned()),
        charset,
    })
}

/// COM_CHANGE_USER's auth plugin, and the packet with its auth data emptied and the plugin
/// renamed `plugin` (see [`without_auth_data`]); a packet naming no plugin comes back as it
/// is, with an empty name. None when the client has no plugin auth or it is malformed.
pub fn change_user_without_auth_data(
    p: &[u8],
    client_caps: u32,
    plugin: &str,
) -> Option<(String, Vec<u8>)> {
    if client_caps & cap::PLUGIN_AUTH == 0 {
        return None;
    }
    let (_, n) = read_nul_str(p.get(1..)?)?;
    let mut at = 1 + n;
    let mut out = p.get(..at)?.to_vec();
    if client_caps & cap::SECURE_CONNECTION != 0 {
        at += 1 + usize::from(*p.get(at)?);
    } else {
        let (_, n) = read_nul_str(p.get(at..)?)?;
        at += n;
    }
    out.push(0);
    let (_, n) = read_nul_str(p.get(at..)?)?;
    // The database, then the two charset bytes.
    out.extend_from_slice(p.get(at..at + n + 2)?);
    at += n + 2;
    if at == p.len() {
        // No plugin named (older clients): the data is for the connection's plugin.
        return Some((String::new(), p.to_vec()));
    }
    let (old, n) = read_nul_str(p.get(at..)?)?;
    let old = String::from_utf8_lossy(old).into_owned();
    at += n;
    out.extend_from_slice(plugin.as_bytes());
    out.push(0);
    out.extend_from_slice(&p[at..]);
    Some((old, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_user_auth_data_withheld() {
        let caps = cap::PROTOCOL_41 | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH;
        let mut p = vec![0x11];
        p.extend_from_slice(b"app\0\x06s3cretshop\0\x21\x00mysql_clear_password\0\x03\x01a\x00");
        let (old, out) = change_user_without_auth_data(&p, caps, "other").unwrap();
        assert_eq!(old, "mysql_clear_password");
        assert_eq!(
            out,
            b"\x11app\0\0shop\0\x21\x00other\0\x03\x01a\x00".to_vec()
        );
        let cu = parse_change_user(&out, caps).unwrap();
        assert_eq!(
            (cu.user.as_str(), cu.database.as_deref()),
            ("app", Some("shop"))
        );
        for n in 0..p.len() {
            let _ = change_user_without_auth_data(&p[..n], caps, "other");
        }
        assert_eq!(
            change_user_without_auth_data(&p, caps & !cap::PLUGIN_AUTH, "other"),
            None
        );
        // Ending after the charset: no plugin, left as it is.
        let short = b"\x11app\0\x02pwshop\0\x21\x00".to_vec();
        assert_eq!(
            change_user_without_auth_data(&short, caps, "other"),
            Some((String::new(), short.clone()))
        );
    }
    use bytes::BufMut;

    /// A MariaDB 10.11 greeting as seen on the wire (payload only).
    fn mariadb_greeting() -> Vec<u8> {
        let mut p = vec![10u8];
        p.extend_from_slice(b"5.5.5-10.11.19-MariaDB\0");
        p.extend_from_slice(&42u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh");
        p.push(0);
        let caps: u32 = 0xf7fe & !cap::MARIADB_CLIENT_MYSQL
            | cap::SSL
            | cap::COMPRESS
            | (cap::PLUGIN_AUTH
                | cap::SECURE_CONNECTION
                | cap::DEPRECATE_EOF
                | cap::PROTOCOL_41
                | cap::MULTI_RESULTS);
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 6]);
        p.extend_from_slice(&(mariadb_cap::CACHE_METADATA | mariadb_cap::PROGRESS).to_le_bytes());
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(b"mysql_native_password\0");
        p
    }

    #[test]
    fn greeting_is_parsed_and_rewritten() {
        let p = mariadb_greeting();
        let g = parse_greeting(&p).unwrap();
        assert_eq!(g.connection_id, 42);
        assert_eq!(g.auth_plugin, "mysql_native_password");
        assert!(g.capabilities & cap::SSL != 0);
        assert_eq!(
            g.mariadb_caps,
            mariadb_cap::CACHE_METADATA | mariadb_cap::PROGRESS
        );
        let (out, g2) = rewrite_greeting(&p, CLEARED_CAPS, CLEARED_MARIADB_CAPS).unwrap();
        assert_eq!(out.len(), p.len());
        let again = parse_greeting(&out).unwrap();
        assert_eq!(again, g2);
        assert_eq!(again.capabilities & (cap::SSL | cap::COMPRESS), 0);
        assert_eq!(
            again.capabilities | cap::SSL | cap::COMPRESS,
            g.capabilities
        );
        assert_eq!(again.mariadb_caps, mariadb_cap::PROGRESS);
    }

    #[test]
    fn scramble_and_ssl_offer() {
        let p = mariadb_greeting();
        assert_eq!(greeting_scramble(&p).unwrap(), b"abcdefghijklmnopqrst");
        let (out, g) = rewrite_greeting_caps(&p, CLEARED_CAPS, cap::SSL, 0).unwrap();
        assert!(g.capabilities & cap::SSL != 0);
        assert_eq!(
            parse_greeting(&out).unwrap().capabilities & cap::COMPRESS,
            0
        );
        let mut sw = vec![0xfe];
        sw.extend_from_slice(b"caching_sha2_password\0nonce\0");
        assert_eq!(
            parse_auth_switch(&sw).unwrap(),
            ("caching_sha2_password".to_string(), b"nonce".to_vec())
        );
    }

    #[test]
    fn responses_lose_what_qcache_never_offers() {
        // A MariaDB client (CLIENT_MYSQL clear) asking for the metadata cache, and a MySQL 8
        // one asking for query attributes and optional metadata, neither offered.
        let mut maria = vec![0u8; 32];
        let caps = cap::PROTOCOL_41 | cap::SECURE_CONNECTION;
        maria[0..4].copy_from_slice(&caps.to_le_bytes());
        let ext = mariadb_cap::CACHE_METADATA | mariadb_cap::PROGRESS;
        maria[28..32].copy_from_slice(&ext.to_le_bytes());
        maria.extend_from_slice(b"app\0\0");
        let out = with_response_caps(&maria, 0, 0).unwrap();
        let r = parse_handshake_response(&out).unwrap();
        assert_eq!(r.capabilities, caps);
        assert_eq!(r.mariadb_caps, mariadb_cap::PROGRESS);
        assert_eq!(r.user, "app");

        let mut mysql = maria.clone();
        let asked = caps
            | cap::MARIADB_CLIENT_MYSQL
            | cap::QUERY_ATTRIBUTES
            | cap::OPTIONAL_RESULTSET_METADATA;
        mysql[0..4].copy_from_slice(&asked.to_le_bytes());
        mysql[28..32].fill(0);
        let out = with_response_caps(&mysql, cap::SSL, 0).unwrap();
        let r = parse_handshake_response(&out).unwrap();
        assert_eq!(r.capabilities, caps | cap::MARIADB_CLIENT_MYSQL | cap::SSL);
        assert_eq!(&out[4..], &mysql[4..], "only the capability word changes");
        assert!(with_response_caps(&mysql[..3], 0, 0).is_none());
    }

    #[test]
    fn truncated_greetings_do_not_panic() {
        let p = mariadb_greeting();
        for n in 0..p.len() {
            let _ = parse_greeting(&p[..n]);
            let _ = rewrite_greeting(&p[..n], CLEARED_CAPS, 0);
            let _ = greeting_scramble(&p[..n]);
            let _ = parse_auth_switch(&p[..n]);
        }
    }

    fn response(caps: u32, user: &str, db: Option<&str>) -> Vec<u8> {
        let mut p = BytesMut::new();
        p.put_u32_le(caps);
        p.put_u32_le(1 << 24);
        p.put_u8(45);
        p.put_slice(&[0; 23]);
        p.put_slice(user.as_bytes());
        p.put_u8(0);
        p.put_u8(20);
        p.put_slice(&[7; 20]);
        if let Some(db) = db {
            p.put_slice(db.as_bytes());
            p.put_u8(0);
        }
        p.put_slice(b"mysql_native_password\0");
        p.to_vec()
    }

    #[test]
    fn handshake_response_fields() {
        let caps = cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::CONNECT_WITH_DB
            | cap::DEPRECATE_EOF;
        let r = parse_handshake_response(&response(caps, "app", Some("shop"))).unwrap();
        assert_eq!(r.user, "app");
        assert_eq!(r.database.as_deref(), Some("shop"));
        assert_eq!(r.auth_plugin.as_deref(), Some("mysql_native_password"));
        assert!(!r.ssl_request);
        let full = response(caps, "app", Some("shop"));
        for n in 0..full.len() {
            let _ = parse_handshake_response(&full[..n]);
        }
    }

    #[test]
    fn zstd_level_after_connect_attributes() {
        let caps = cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::CONNECT_WITH_DB
            | cap::CONNECT_ATTRS
            | cap::ZSTD_COMPRESSION;
        let mut p = response(caps, "app", Some("shop"));
        p.extend_from_slice(b"\x07\x02_a\x03xyz");
        p.push(11);
        let r = parse_handshake_response(&p).unwrap();
        assert_eq!(r.zstd_level, Some((11, p.len() - 1)));
        // Without the bit the same byte is not a level.
        p[3] &= !((cap::ZSTD_COMPRESSION >> 24) as u8);
        assert_eq!(parse_handshake_response(&p).unwrap().zstd_level, None);
    }

    /// The password goes, the plugin is renamed, the database and attributes stay, in each
    /// encoding of the auth data.
    #[test]
    fn auth_data_withheld() {
        let base = cap::PROTOCOL_41 | cap::PLUGIN_AUTH | cap::CONNECT_WITH_DB | cap::CONNECT_ATTRS;
        for data_cap in [cap::PLUGIN_AUTH_LENENC_DATA, cap::SECURE_CONNECTION, 0] {
            let caps = base | data_cap;
            let mut p = vec![0u8; 32];
            p[0..4].copy_from_slice(&caps.to_le_bytes());
            p.extend_from_slice(b"app\0");
            match data_cap {
                0 => p.extend_from_slice(b"s3cret\0"),
                _ => p.extend_from_slice(b"\x06s3cret"),
            }
            p.extend_from_slice(b"shop\0mysql_clear_password\0\x03\x01a\x00");
            let out = without_auth_data(&p, "other").unwrap();
            assert!(!out.windows(6).any(|w| w == b"s3cret"), "{caps:x}");
            let r = parse_handshake_response(&out).unwrap();
            assert_eq!(r.user, "app");
            assert_eq!(r.database.as_deref(), Some("shop"));
            assert_eq!(r.auth_plugin.as_deref(), Some("other"));
            assert!(out.ends_with(b"other\0\x03\x01a\x00"));
            for n in 0..p.len() {
                let _ = without_auth_data(&p[..n], "other");
            }
        }
        // No plugin named: nothing to switch from.
        let mut p = vec![0u8; 32];
        p[0..4].copy_from_slice(&(cap::PROTOCOL_41 | cap::SECURE_CONNECTION).to_le_bytes());
        p.extend_from_slice(b"app\0\x00");
        assert_eq!(without_auth_data(&p, "other"), None);
    }

    #[test]
    fn ssl_request_is_recognised() {
        let mut p = vec![0u8; 32];
        p[0..4].copy_from_slice(&(cap::PROTOCOL_41 | cap::SSL).to_le_bytes());
        assert!(parse_handshake_response(&p).unwrap().ssl_request);
    }

    #[test]
    fn old_protocol_is_refused() {
        let p = vec![0u8; 40];
        assert_eq!(
            parse_handshake_response(&p),
            Err(HandshakeError::OldProtocol)
        );
    }

    /// The fuzzer's input: an auth-response length of 2^64 - 1 overflowed the offset sum
    /// (a panic in debug builds, a wrapped offset in release) before authentication.
    #[test]
    fn huge_lenenc_auth_response_is_malformed() {
        let found: [u8; 47] = [
            0xa3, 0x63, 0x61, 0x63, 0x68, 0x69, 0x97, 0xff, 0xff, 0xff, 0xff, 0x97, 0x97, 0xb7,
            0x17, 0x6e, 0x00, 0x00, 0x73, 0x68, 0x61, 0x32, 0xe8, 0x03, 0x00, 0x00, 0x0a, 0x35,
            0x2e, 0x00, 0x01, 0x00, 0x00, 0xfe, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xf7, 0x08, 0x72, 0x64,
        ];
        assert!(matches!(
            parse_handshake_response(&found),
            Err(HandshakeError::Malformed)
        ));
        // The same, spelled out: protocol 41 with length-encoded auth data, user "u", and an
        // auth response claiming u64::MAX bytes.
        let mut p = Vec::new();
        p.put_u32_le(cap::PROTOCOL_41 | cap::PLUGIN_AUTH_LENENC_DATA);
        p.put_u32_le(1 << 24);
        p.put_u8(33);
        p.put_slice(&[0; 23]);
        p.put_slice(b"u\0");
        p.put_u8(0xfe);
        p.put_u64_le(u64::MAX);
        assert!(matches!(
            parse_handshake_response(&p),
            Err(HandshakeError::Malformed)
        ));
    }
}
