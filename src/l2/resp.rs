//! RESP2, sans-IO, for the L2 lookup's own connections (`l2`): commands encoded into
//! a buffer, and replies read in place from the bytes received, one head at a time, without
//! building values. Only what a lookup is answered with is accepted: bulk strings (or nil),
//! integers, status and error lines, arrays of them. Anything else (a RESP3 type, a length
//! out of bounds, a line without its CRLF, a number that is not one) is malformed, and the
//! caller drops the connection and treats the lookup as a miss: fail closed.

/// The longest line a reply head may have (type byte, a number, CRLF), and the longest
/// status or error line kept.
const MAX_LINE: usize = 4096;
/// The most elements an array of a lookup's replies may have.
const MAX_ARRAY: usize = 1 << 16;

/// One reply head at the start of the bytes given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// A nil bulk string (`$-1`): a missing key or field.
    Nil,
    Bulk(&'a [u8]),
    Int(i64),
    Status(&'a [u8]),
    Error(&'a [u8]),
    /// An array's head: that many replies follow. A nil array (`*-1`) is malformed here.
    Array(usize),
}

/// Appends a command (an array of bulk strings) to `out`.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_len(out, b'*', args.len());
    for a in args {
        push_len(out, b'$', a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_len(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// The reply head at `buf[at..]` and where what follows it begins; Ok(None) when more bytes
/// are needed. A bulk string longer than `max_bulk` is malformed.
pub fn next(
    buf: &[u8],
    at: usize,
    max_bulk: usize,
) -> Result<Option<(Reply<'_>, usize)>, &'static str> {
    let Some(rest) = buf.get(at..) else {
        return Err("reply offset");
    };
    let Some(&kind) = rest.first() else {
        return Ok(None);
    };
    let scan = &rest[..rest.len().min(MAX_LINE)];
    let Some(cr) = scan.iter().position(|&b| b == b'\r') else {
        return if rest.len() >= MAX_LINE {
            Err("reply line too long")
        } else {
            Ok(None)
        };
    };
    match rest.get(cr + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err("reply line not ended by CRLF"),
    }
    let line = &rest[1..cr];
    let after = at + cr + 2;
    let reply = match kind {
        b'$' => {
            let n = number(line)?;
            if n == -1 {
                Reply::Nil
            } else {
                let n = usize::try_from(n).map_err(|_| "bulk length")?;
                if n > max_bulk {
                    return Err("bulk string too long");
                }
                let Some(body) = buf.get(after..after + n + 2) else {
                    return Ok(None);
                };
                if &body[n..] != b"\r\n" {
                    return Err("bulk string not ended by CRLF");
                }
                return Ok(Some((Reply::Bulk(&body[..n]), after + n + 2)));
            }
        }
        b'*' => {
            let n = usize::try_from(number(line)?).map_err(|_| "array length")?;
            if n > MAX_ARRAY {
                return Err("array too long");
            }
            Reply::Array(n)
        }
        b':' => Reply::Int(number(line)?),
        b'+' => Reply::Status(line),
        b'-' => Reply::Error(line),
        _ => return Err("not a RESP2 reply"),
    };
    Ok(Some((reply, after)))
}

/// A decimal integer as RESP writes it: an optional minus, then digits, nothing else.
fn number(s: &[u8]) -> Result<i64, &'static str> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err("number");
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err("number");
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or("number")?;
    }
    Ok(if neg { -v } else { v })
}

/// A version as a lookup reads it: None for a missing key or field, else a non-negative
/// integer (a bulk string of digits, or an integer reply); anything else is malformed.
pub fn version(r: Reply<'_>) -> Result<Option<u64>, &'static str> {
    match r {
        Reply::Nil => Ok(None),
        Reply::Bulk(b) => digits(b).map(Some).ok_or("version value"),
        Reply::Int(i) if i >= 0 => Ok(Some(i as u64)),
        _ => Err("version value"),
    }
}

/// Decimal digits only (what the version scripts write), below 2^64.
fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in b {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(buf: &[u8]) -> Result<Option<Vec<Reply<'_>>>, &'static str> {
        let mut at = 0;
        let mut out = Vec::new();
        while at < buf.len() {
            match next(buf, at, 1 << 20)? {
                Some((r, n)) => {
                    out.push(r);
                    at = n;
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    #[test]
    fn commands_encode() {
        let mut out = Vec::new();
        command(&mut out, &[b"GET", b"e:ab"]);
        command(&mut out, &[b"MGET", b"", b"0123456789"]);
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$4\r\ne:ab\r\n*3\r\n$4\r\nMGET\r\n$0\r\n\r\n$10\r\n0123456789\r\n"
        );
    }

    #[test]
    fn replies_read_in_place() {
        let buf =
            b"$-1\r\n$3\r\nabc\r\n*3\r\n$2\r\n17\r\n$-1\r\n:5\r\n+OK\r\n-ERR no\r\n$0\r\n\r\n";
        use Reply::*;
        assert_eq!(
            all(buf).unwrap().unwrap(),
            vec![
                Nil,
                Bulk(b"abc"),
                Array(3),
                Bulk(b"17"),
                Nil,
                Int(5),
                Status(b"OK"),
                Error(b"ERR no"),
                Bulk(b""),
            ]
        );
        // A bulk string may hold CRLF: its length decides.
        assert_eq!(
            all(b"$4\r\na\r\nb\r\n").unwrap().unwrap(),
            vec![Bulk(b"a\r\nb")]
        );
    }

    #[test]
    fn incomplete_replies_wait_for_more() {
        let whole = b"*2\r\n$3\r\nabc\r\n:12\r\n";
        let full = all(whole).unwrap().unwrap();
        let ends = [4, 13];
        for cut in 1..whole.len() {
            let got = all(&whole[..cut]).unwrap();
            match got {
                // Cut between replies: the ones before it, complete.
                Some(v) => assert!(ends.contains(&cut) && full.starts_with(&v), "cut at {cut}"),
                None => assert!(!ends.contains(&cut), "cut at {cut}"),
            }
        }
    }

    #[test]
    fn malformed_replies_are_refused() {
        for bad in [
            &b"\x00\xffnot redis at all\r\n"[..],
            b"$3\r\nabcd\r\n",
            b"$3\rxabc\r\n",
            b"$-2\r\n",
            b"$x\r\n",
            b"$\r\n",
            b"$+3\r\nabc\r\n",
            b"*-1\r\n",
            b"*99999999\r\n",
            b":1x\r\n",
            b":99999999999999999999\r\n",
            b"_\r\n",
            b"%1\r\n",
            b"$2000000\r\n",
        ] {
            assert!(all(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // A line that never ends.
        assert!(all(&[b'+'; MAX_LINE + 1]).is_err());
    }

    #[test]
    fn versions() {
        assert_eq!(version(Reply::Nil), Ok(None));
        assert_eq!(version(Reply::Bulk(b"42")), Ok(Some(42)));
        assert_eq!(
            version(Reply::Bulk(b"18446744073709551615")),
            Ok(Some(u64::MAX))
        );
        assert_eq!(version(Reply::Int(7)), Ok(Some(7)));
        for bad in [
            Reply::Bulk(b"-1"),
            Reply::Bulk(b"+1"),
            Reply::Bulk(b" 1"),
            Reply::Bulk(b"18446744073709551616"),
            Reply::Bulk(b"4x"),
            Reply::Bulk(b""),
            Reply::Int(-1),
            Reply::Status(b"1"),
            Reply::Error(b"1"),
            Reply::Array(1),
        ] {
            assert!(version(bad).is_err(), "{bad:?}");
        }
    }

    /// RESP integers: an optional minus then 1..=19 digits, within i64; nothing else.
    #[test]
    fn numbers() {
        #[rustfmt::skip]
        let rows: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"-0", Some(0)),
            (b"17", Some(17)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775807", Some(-i64::MAX)),
            (b"9223372036854775808", None), // over i64
            (b"10000000000000000000", None), // 20 digits
            (b"", None),
            (b"-", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"--1", None),
        ];
        for (raw, want) in rows {
            assert_eq!(
                number(raw).ok(),
                *want,
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}
