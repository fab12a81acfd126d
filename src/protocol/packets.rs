//! Generic packets: OK, ERR, EOF, length-encoded values, status and capability flags, and
//! the builders for the few result sets qcache answers itself.

use bytes::{BufMut, Bytes, BytesMut};

/// Capability flags (the ones qcache looks at).
pub mod cap {
    pub const LONG_PASSWORD: u32 = 1;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const COMPRESS: u32 = 1 << 5;
    pub const LOCAL_FILES: u32 = 1 << 7;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const SSL: u32 = 1 << 11;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_DATA: u32 = 1 << 21;
    pub const SESSION_TRACK: u32 = 1 << 23;
    pub const DEPRECATE_EOF: u32 = 1 << 24;
    pub const OPTIONAL_RESULTSET_METADATA: u32 = 1 << 25;
    pub const ZSTD_COMPRESSION: u32 = 1 << 26;
    /// MySQL 8.0.23+: COM_QUERY and COM_STMT_EXECUTE carry name/value attributes before the
    /// statement text or parameters. MariaDB does not have it.
    pub const QUERY_ATTRIBUTES: u32 = 1 << 27;
    /// Set by MariaDB clients and servers that use the extended capability bytes.
    pub const MARIADB_CLIENT_MYSQL: u32 = 1;
}

/// MariaDB's extended capabilities (the reserved bytes of the greeting and response).
pub mod mariadb_cap {
    pub const PROGRESS: u32 = 1;
    pub const COM_MULTI: u32 = 1 << 1;
    pub const STMT_BULK_OPERATIONS: u32 = 1 << 2;
    pub const EXTENDED_TYPE_INFO: u32 = 1 << 3;
    pub const CACHE_METADATA: u32 = 1 << 4;
}

/// Server status flags carried by OK and EOF.
pub mod status {
    pub const IN_TRANS: u16 = 0x0001;
    pub const AUTOCOMMIT: u16 = 0x0002;
    pub const MORE_RESULTS: u16 = 0x0008;
    pub const NO_GOOD_INDEX_USED: u16 = 0x0010;
    pub const NO_INDEX_USED: u16 = 0x0020;
    pub const CURSOR_EXISTS: u16 = 0x0040;
    pub const LAST_ROW_SENT: u16 = 0x0080;
    pub const DB_DROPPED: u16 = 0x0100;
    pub const NO_BACKSLASH_ESCAPES: u16 = 0x0200;
    pub const METADATA_CHANGED: u16 = 0x0400;
    pub const QUERY_WAS_SLOW: u16 = 0x0800;
    pub const PS_OUT_PARAMS: u16 = 0x1000;
    pub const IN_TRANS_READONLY: u16 = 0x2000;
    pub const SESSION_STATE_CHANGED: u16 = 0x4000;
    /// MariaDB's SERVER_STATUS_ANSI_QUOTES: the session's sql_mode holds ANSI_QUOTES (ANSI,
    /// ORACLE, …), set in every OK and EOF as NO_BACKSLASH_ESCAPES is for its mode (MySQL
    /// sets no such bit).
    pub const ANSI_QUOTES: u16 = 0x8000;
    /// Flags that describe the session rather than the result: a cached result's terminator
    /// takes these from the session that is served, and an OK qcache answers itself (a
    /// deferred BEGIN) carries them as the server's would.
    pub const PER_SESSION: u16 =
        IN_TRANS | AUTOCOMMIT | NO_BACKSLASH_ESCAPES | IN_TRANS_READONLY | ANSI_QUOTES;
}

/// Command bytes.
pub mod com {
    pub const SLEEP: u8 = 0x00;
    pub const QUIT: u8 = 0x01;
    pub const INIT_DB: u8 = 0x02;
    pub const QUERY: u8 = 0x03;
    pub const FIELD_LIST: u8 = 0x04;
    pub const CREATE_DB: u8 = 0x05;
    pub const DROP_DB: u8 = 0x06;
    pub const REFRESH: u8 = 0x07;
    pub const SHUTDOWN: u8 = 0x08;
    pub const STATISTICS: u8 = 0x09;
    pub const PROCESS_INFO: u8 = 0x0a;
    pub const PROCESS_KILL: u8 = 0x0c;
    pub const DEBUG: u8 = 0x0d;
    pub const PING: u8 = 0x0e;
    pub const CHANGE_USER: u8 = 0x11;
    pub const BINLOG_DUMP: u8 = 0x12;
    pub const TABLE_DUMP: u8 = 0x13;
    pub const REGISTER_SLAVE: u8 = 0x15;
    pub const STMT_PREPARE: u8 = 0x16;
    pub const STMT_EXECUTE: u8 = 0x17;
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const STMT_CLOSE: u8 = 0x19;
    pub const STMT_RESET: u8 = 0x1a;
    pub const SET_OPTION: u8 = 0x1b;
    pub const STMT_FETCH: u8 = 0x1c;
    pub const DAEMON: u8 = 0x1d;
    pub const BINLOG_DUMP_GTID: u8 = 0x1e;
    pub const RESET_CONNECTION: u8 = 0x1f;
    pub const STMT_BULK_EXECUTE: u8 = 0xfa;
}

/// Reads a length-encoded integer at the front of `buf`: (value, bytes used).
pub fn read_lenenc(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    match first {
        0..=0xfa => Some((first as u64, 1)),
        0xfc => Some((
            u16::from_le_bytes(buf.get(1..3)?.try_into().ok()?) as u64,
            3,
        )),
        0xfd => {
            let b = buf.get(1..4)?;
            Some((u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64, 4))
        }
        0xfe => Some((u64::from_le_bytes(buf.get(1..9)?.try_into().ok()?), 9)),
        _ => None,
    }
}

/// Reads a length-encoded string at the front of `buf`: (bytes, bytes used).
pub fn read_lenenc_str(buf: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = read_lenenc(buf)?;
    let len = usize::try_from(len).ok()?;
    let end = n.checked_add(len)?;
    Some((buf.get(n..end)?, end))
}

pub fn put_lenenc(out: &mut BytesMut, v: u64) {
    if v < 251 {
        out.put_u8(v as u8);
    } else if v < 1 << 16 {
        out.put_u8(0xfc);
        out.put_u16_le(v as u16);
    } else if v < 1 << 24 {
        out.put_u8(0xfd);
        out.put_slice(&(v as u32).to_le_bytes()[..3]);
    } else {
        out.put_u8(0xfe);
        out.put_u64_le(v);
    }
}

pub fn put_lenenc_str(out: &mut BytesMut, s: &[u8]) {
    put_lenenc(out, s.len() as u64);
    out.put_slice(s);
}

/// A NUL-terminated string at the front of `buf`: (bytes, bytes used including the NUL).
pub fn read_nul_str(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.iter().position(|&b| b == 0)?;
    Some((&buf[..end], end + 1))
}

pub fn is_ok(payload: &[u8]) -> bool {
    payload.first() == Some(&0x00)
}

pub fn is_err(payload: &[u8]) -> bool {
    payload.first() == Some(&0xff)
}

/// An EOF packet, or with CLIENT_DEPRECATE_EOF the OK packet that replaces it (header 0xFE).
/// A row can begin with 0xFE only when it is 16 MiB or more, which tells them apart.
pub fn is_eof(payload: &[u8], deprecate_eof: bool) -> bool {
    payload.first() == Some(&0xfe)
        && if deprecate_eof {
            payload.len() < 0xFF_FFFF
        } else {
            payload.len() < 9
        }
}

/// Where the status flags sit in an OK (header 0x00 or 0xFE) or EOF packet, if well formed.
pub fn status_offset(payload: &[u8], eof_form: bool) -> Option<usize> {
    if eof_form {
        // 0xFE, warnings(2), status(2)
        if payload.len() >= 5 {
            Some(3)
        } else {
            None
        }
    } else {
        let (_, a) = read_lenenc(payload.get(1..)?)?;
        let (_, b) = read_lenenc(payload.get(1 + a..)?)?;
        let at = 1 + a + b;
        if payload.len() >= at + 2 {
            Some(at)
        } else {
            None
        }
    }
}

/// Status flags and warning count of a terminating packet (OK, or EOF, or OK-as-EOF).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terminator {
    pub status: u16,
    pub warnings: u16,
    /// Offset of the two status bytes within the payload.
    pub status_at: usize,
}

/// Reads the terminator of a response. `eof_form` is true for a classic EOF packet.
pub fn read_terminator(payload: &[u8], eof_form: bool) -> Option<Terminator> {
    let at = status_offset(payload, eof_form)?;
    let status = u16::from_le_bytes([payload[at], payload[at + 1]]);
    let warnings = if eof_form {
        u16::from_le_bytes([payload[1], payload[2]])
    } else if payload.len() >= at + 4 {
        u16::from_le_bytes([payload[at + 2], payload[at + 3]])
    } else {
        0
    };
    Some(Terminator {
        status,
        warnings,
        status_at: at,
    })
}

/// Parsed OK packet fields that qcache uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkInfo {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
}

pub fn parse_ok(payload: &[u8]) -> Option<OkInfo> {
    let (affected_rows, a) = read_lenenc(payload.get(1..)?)?;
    let (last_insert_id, b) = read_lenenc(payload.get(1 + a..)?)?;
    let at = 1 + a + b;
    let s = payload.get(at..at + 2)?;
    let warnings = payload
        .get(at + 2..at + 4)
        .map(|w| u16::from_le_bytes([w[0], w[1]]))
        .unwrap_or(0);
    Some(OkInfo {
        affected_rows,
        last_insert_id,
        status: u16::from_le_bytes([s[0], s[1]]),
        warnings,
    })
}

/// An ERR packet's code, SQL state and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrInfo {
    pub code: u16,
    pub state: String,
    pub message: String,
}

pub fn parse_err(payload: &[u8]) -> Option<ErrInfo> {
    if !is_err(payload) || payload.len() < 3 {
        return None;
    }
    let code = u16::from_le_bytes([payload[1], payload[2]]);
    let rest = &payload[3..];
    let (state, msg) = if rest.first() == Some(&b'#') && rest.len() >= 6 {
        (&rest[1..6], &rest[6..])
    } else {
        (&b"HY000"[..], rest)
    };
    Some(ErrInfo {
        code,
        state: String::from_utf8_lossy(state).into_owned(),
        message: String::from_utf8_lossy(msg).into_owned(),
    })
}

/// Builds an ERR packet payload (protocol 4.1 form).
pub fn err_payload(code: u16, state: &str, message: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(9 + message.len());
    out.put_u8(0xff);
    out.put_u16_le(code);
    out.put_u8(b'#');
    let mut st = [b'H', b'Y', b'0', b'0', b'0'];
    for (d, s) in st.iter_mut().zip(state.bytes()) {
        *d = s;
    }
    out.put_slice(&st);
    out.put_slice(message.as_bytes());
    out.freeze()
}

/// An ERR sent in place of the greeting: capabilities are not agreed yet, so it has no SQL
/// state marker (clients reject one there as malformed).
pub fn err_payload_pre_handshake(code: u16, message: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(3 + message.len());
    out.put_u8(0xff);
    out.put_u16_le(code);
    out.put_slice(message.as_bytes());
    out.freeze()
}

/// Builds an OK packet payload.
pub fn ok_payload(affected: u64, insert_id: u64, status: u16, warnings: u16) -> Bytes {
    let mut out = BytesMut::with_capacity(16);
    out.put_u8(0);
    put_lenenc(&mut out, affected);
    put_lenenc(&mut out, insert_id);
    out.put_u16_le(status);
    out.put_u16_le(warnings);
    out.freeze()
}

/// Builds the packet that ends a result set: EOF, or OK with 0xFE header under
/// CLIENT_DEPRECATE_EOF.
pub fn eof_payload(status: u16, deprecate_eof: bool) -> Bytes {
    let mut out = BytesMut::with_capacity(8);
    out.put_u8(0xfe);
    if deprecate_eof {
        out.put_u8(0);
        out.put_u8(0);
        out.put_u16_le(status);
        out.put_u16_le(0);
    } else {
        out.put_u16_le(0);
        out.put_u16_le(status);
    }
    out.freeze()
}

/// Column types used in the result sets qcache builds.
pub const TYPE_LONGLONG: u8 = 0x08;
pub const TYPE_VAR_STRING: u8 = 0xfd;

/// A column definition (protocol 4.1) for a result set qcache answers itself.
/// `extended_types`: the session negotiated MariaDB's extended type info, which puts a
/// (here empty) block of type details before the fixed fields.
pub fn column_def(name: &str, col_type: u8, length: u32, extended_types: bool) -> Bytes {
    let mut out = BytesMut::with_capacity(32 + name.len());
    put_lenenc_str(&mut out, b"def");
    put_lenenc_str(&mut out, b"");
    put_lenenc_str(&mut out, b"");
    put_lenenc_str(&mut out, b"");
    put_lenenc_str(&mut out, name.as_bytes());
    put_lenenc_str(&mut out, b"");
    if extended_types {
        put_lenenc(&mut out, 0);
    }
    out.put_u8(0x0c);
    // utf8mb4_general_ci for strings, binary for numbers
    out.put_u16_le(if col_type == TYPE_LONGLONG { 63 } else { 45 });
    out.put_u32_le(length);
    out.put_u8(col_type);
    out.put_u16_le(if col_type == TYPE_LONGLONG { 0x81 } else { 0 });
    out.put_u8(0);
    out.put_u16_le(0);
    out.freeze()
}

/// How a session wants the result sets qcache builds itself, from what it negotiated.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResultFormat {
    /// CLIENT_DEPRECATE_EOF: an OK ends the rows, and no EOF follows the columns.
    pub deprecate_eof: bool,
    /// MariaDB's extended type info in column definitions.
    pub extended_types: bool,
}

/// A text-protocol result set qcache answers itself: the packets in order, sequence ids
/// starting at 1, ended with EOF or OK per the negotiated flags.
pub fn text_result(
    columns: &[(&str, u8)],
    rows: &[Vec<Option<String>>],
    status: u16,
    format: ResultFormat,
) -> BytesMut {
    let deprecate_eof = format.deprecate_eof;
    let mut wire = BytesMut::new();
    let mut seq = 1u8;
    let mut count = BytesMut::new();
    put_lenenc(&mut count, columns.len() as u64);
    seq = super::codec::encode(seq, &count, &mut wire);
    for (name, ty) in columns {
        let def = column_def(name, *ty, 1024, format.extended_types);
        seq = super::codec::encode(seq, &def, &mut wire);
    }
    if !deprecate_eof {
        seq = super::codec::encode(seq, &eof_payload(status, false), &mut wire);
    }
    for row in rows {
        let mut r = BytesMut::new();
        for v in row {
            match v {
                Some(s) => put_lenenc_str(&mut r, s.as_bytes()),
                None => r.put_u8(0xfb),
            }
        }
        seq = super::codec::encode(seq, &r, &mut wire);
    }
    super::codec::encode(seq, &eof_payload(status, deprecate_eof), &mut wire);
    wire
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_roundtrip() {
        for v in [
            0u64,
            250,
            251,
            65535,
            65536,
            (1 << 24) - 1,
            1 << 24,
            u64::MAX,
        ] {
            let mut b = BytesMut::new();
            put_lenenc(&mut b, v);
            assert_eq!(read_lenenc(&b), Some((v, b.len())));
        }
        assert_eq!(read_lenenc(&[0xfc, 1]), None);
        assert_eq!(read_lenenc(&[0xff]), None);
        assert_eq!(read_lenenc(&[]), None);
    }

    #[test]
    fn lenenc_str_truncated() {
        assert_eq!(read_lenenc_str(&[3, b'a', b'b']), None);
        assert_eq!(read_lenenc_str(&[2, b'a', b'b']), Some((&b"ab"[..], 3)));
        // a length that overflows usize arithmetic must not panic
        assert_eq!(
            read_lenenc_str(&[0xfe, 255, 255, 255, 255, 255, 255, 255, 255]),
            None
        );
    }

    #[test]
    fn ok_and_terminator() {
        let ok = ok_payload(3, 700, status::AUTOCOMMIT | status::IN_TRANS, 2);
        let info = parse_ok(&ok).unwrap();
        assert_eq!(info.affected_rows, 3);
        assert_eq!(info.last_insert_id, 700);
        assert_eq!(info.status, 3);
        assert_eq!(info.warnings, 2);
        let t = read_terminator(&ok, false).unwrap();
        assert_eq!((t.status, t.warnings), (3, 2));
        let eof = eof_payload(status::AUTOCOMMIT, false);
        let t = read_terminator(&eof, true).unwrap();
        assert_eq!((t.status, t.warnings, t.status_at), (2, 0, 3));
        assert!(is_eof(&eof, false));
        let eof2 = eof_payload(status::AUTOCOMMIT, true);
        assert!(is_eof(&eof2, true));
        assert_eq!(read_terminator(&eof2, false).unwrap().status, 2);
        assert!(read_terminator(&[0x00, 1], false).is_none());
    }

    #[test]
    fn err_roundtrip() {
        let e = err_payload(1040, "08004", "Too many connections");
        let info = parse_err(&e).unwrap();
        assert_eq!(info.code, 1040);
        assert_eq!(info.state, "08004");
        assert_eq!(info.message, "Too many connections");
        assert!(parse_err(&[0xff]).is_none());
    }

    /// One row per packet shape: whether it ends a result set (EOF, or its OK replacement).
    #[test]
    fn is_eof_by_header_and_length() {
        let big = |n: usize| {
            let mut v = vec![0u8; n];
            v[0] = 0xfe;
            v
        };
        #[rustfmt::skip]
        let rows: &[(&[u8], bool, bool)] = &[
            // (payload, deprecate_eof, is_eof)
            (&[0xfe, 0, 0, 2, 0], false, true),       // classic EOF
            (&[0xfe, 0, 0, 2, 0, 0, 0, 0, 0], false, false), // 9 bytes: a row, not an EOF
            (&[0xfe, 0, 0, 2, 0, 0, 0], true, true),  // OK-as-EOF
            (&[0x00, 0, 0, 2, 0], false, false),      // OK header
            (&[0xff, 0x15, 0x04], true, false),       // ERR
            (&[], false, false),                      // empty
            (&[], true, false),
        ];
        for (i, (p, dep, want)) in rows.iter().enumerate() {
            assert_eq!(is_eof(p, *dep), *want, "row {i}");
        }
        // Under DEPRECATE_EOF only a 16 MiB row can start with 0xFE.
        assert!(is_eof(&big(0xFF_FFFE), true));
        assert!(!is_eof(&big(0xFF_FFFF), true));
    }

    #[test]
    fn status_offset_by_form() {
        #[rustfmt::skip]
        let rows: &[(&[u8], bool, Option<usize>)] = &[
            (&[0xfe, 1, 0, 2, 0], true, Some(3)),               // EOF: warnings then status
            (&[0xfe, 1, 0, 2], true, None),                     // EOF cut short
            (&[0x00, 0, 0, 2, 0], false, Some(3)),              // OK, small lenencs
            (&[0x00, 0xfc, 1, 1, 5, 2, 0], false, Some(5)),     // affected rows on 3 bytes
            (&[0x00, 0, 0xfc, 1, 1, 2, 0], false, Some(5)),     // insert id on 3 bytes
            (&[0x00, 0, 0, 2], false, None),                    // status cut short
            (&[0x00, 0xfc, 1], false, None),                    // lenenc cut short
            (&[0x00], false, None),
        ];
        for (i, (p, eof_form, want)) in rows.iter().enumerate() {
            assert_eq!(status_offset(p, *eof_form), *want, "row {i}");
        }
    }

    #[test]
    fn nul_strings() {
        #[rustfmt::skip]
        type Row<'a> = (&'a [u8], Option<(&'a [u8], usize)>);
        let rows: &[Row] = &[
            (b"abc\0rest", Some((b"abc", 4))),
            (b"\0", Some((b"", 1))),
            (b"abc", None), // no terminator: not a string
            (b"", None),
        ];
        for (i, (buf, want)) in rows.iter().enumerate() {
            assert_eq!(read_nul_str(buf), *want, "row {i}");
        }
    }

    /// An ERR without the `#` marker (pre-4.1 or before the handshake) has no SQL state: it
    /// reads as HY000 with the whole rest as its message.
    #[test]
    fn err_forms() {
        let pre = err_payload_pre_handshake(1040, "Too many connections");
        let info = parse_err(&pre).unwrap();
        assert_eq!((info.code, info.state.as_str()), (1040, "HY000"));
        assert_eq!(info.message, "Too many connections");
        // A short state is padded from HY000, a long one cut to five bytes.
        assert_eq!(
            parse_err(&err_payload(1, "42", "m")).unwrap().state,
            "42000"
        );
        assert_eq!(
            parse_err(&err_payload(1, "42S02X", "m")).unwrap().state,
            "42S02"
        );
        assert!(parse_err(&[0xff, 1]).is_none());
        assert!(parse_err(&[0x00, 1, 0]).is_none());
        // `#` with fewer than five state bytes: no state, the rest is the message.
        assert_eq!(parse_err(&[0xff, 1, 0, b'#', b'4']).unwrap().message, "#4");
    }

    #[test]
    fn ok_without_warnings_reads_zero() {
        // Pre-4.1 OK packets end after the status flags.
        let info = parse_ok(&[0x00, 1, 2, 0x02, 0x00]).unwrap();
        assert_eq!(
            (
                info.affected_rows,
                info.last_insert_id,
                info.status,
                info.warnings
            ),
            (1, 2, 2, 0)
        );
        assert!(parse_ok(&[0x00, 1, 2, 0x02]).is_none());
    }
}
