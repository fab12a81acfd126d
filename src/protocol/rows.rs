//! Text-protocol rows, sans IO: reading a row's columns (what qcache's private statements
//! answer) and rewriting some of its values (the rows whose values are qcache's own).

use bytes::BytesMut;

use super::packets::{self, com};

/// One text-protocol row: each column's value, NULL as None.
pub type Values = Vec<Option<String>>;

/// The COM_QUERY payload of `sql`, for a statement qcache sends for itself.
pub fn query_payload(sql: &str) -> Vec<u8> {
    query_payload_bytes(sql.as_bytes())
}

/// [`query_payload`] of statement bytes that may not be UTF-8.
pub fn query_payload_bytes(sql: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(sql.len() + 1);
    payload.push(com::QUERY);
    payload.extend_from_slice(sql);
    payload
}

/// A text-protocol row: length-encoded strings, 0xfb for NULL. None when a value is cut
/// short: a read-back of the session's settings must not act on half a row.
pub fn text_row(mut p: &[u8]) -> Option<Values> {
    let mut out = Vec::new();
    while !p.is_empty() {
        if p[0] == 0xfb {
            out.push(None);
            p = &p[1..];
            continue;
        }
        let (v, used) = packets::read_lenenc_str(p)?;
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
        p = p.get(used..)?;
    }
    Some(out)
}

/// The columns of a text-protocol row up to the first that cannot be read: an identity
/// question reads its columns by position, and a missing one counts as unknown there.
pub fn text_row_prefix(mut p: &[u8]) -> Values {
    let mut out = Vec::new();
    while let Some(&b) = p.first() {
        if b == 0xfb {
            out.push(None);
            p = &p[1..];
            continue;
        }
        match packets::read_lenenc_str(p) {
            Some((v, used)) => {
                out.push(Some(String::from_utf8_lossy(v).into_owned()));
                p = &p[used..];
            }
            None => break,
        }
    }
    out
}

/// How a relayed result's rows change where their values are qcache's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// `(Variable_name, Value)` rows: the value of each listed name (lower-case) replaced.
    Named(Vec<(String, String)>),
    /// These columns of each row replaced, by index (`SELECT @@query_cache_type, …`).
    Columns(Vec<(usize, String)>),
}

/// The row with qcache's values, or None to keep it as it is (a row of another shape than
/// the rewrite expects is the server's to answer).
pub fn rewrite_row(row: &[u8], rw: &Rewrite) -> Option<Vec<u8>> {
    let mut out = BytesMut::new();
    match rw {
        Rewrite::Named(values) => {
            let (name, n) = packets::read_lenenc_str(row)?;
            let (_, v) = packets::read_lenenc_str(&row[n..])?;
            if n + v != row.len() {
                return None;
            }
            let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
            let (_, value) = values.iter().find(|(k, _)| *k == lower)?;
            packets::put_lenenc(&mut out, name.len() as u64);
            out.extend_from_slice(name);
            packets::put_lenenc(&mut out, value.len() as u64);
            out.extend_from_slice(value.as_bytes());
        }
        Rewrite::Columns(values) => {
            let mut at = 0;
            let mut col = 0;
            while at < row.len() {
                let used = match row.get(at) {
                    Some(0xfb) => 1,
                    _ => packets::read_lenenc_str(&row[at..])?.1,
                };
                match values.iter().find(|(i, _)| *i == col) {
                    Some((_, value)) => {
                        packets::put_lenenc(&mut out, value.len() as u64);
                        out.extend_from_slice(value.as_bytes());
                    }
                    None => out.extend_from_slice(&row[at..at + used]),
                }
                at += used;
                col += 1;
            }
            // A row of another shape than the columns said: left alone.
            if at != row.len() || values.iter().any(|(i, _)| *i >= col) {
                return None;
            }
        }
    }
    Some(out.to_vec())
}

/// The type byte of a column definition (protocol 4.1); `extended_types`: the session
/// negotiated MariaDB's extended type info (a block of type details before the fixed
/// fields). None for a packet of another shape.
pub fn column_type(def: &[u8], extended_types: bool) -> Option<u8> {
    let mut at = 0;
    let strings = if extended_types { 7 } else { 6 };
    for _ in 0..strings {
        at += packets::read_lenenc_str(def.get(at..)?)?.1;
    }
    // The fixed fields' length (0x0c), charset, column length, then the type.
    if *def.get(at)? != 0x0c {
        return None;
    }
    def.get(at + 7).copied()
}

/// How many bytes a non-NULL value of column type `ty` takes at the start of `v` in a
/// binary-protocol row; None for a type qcache does not know, or too few bytes.
fn binary_value_len(ty: u8, v: &[u8]) -> Option<usize> {
    let n = match ty {
        0x01 => 1,
        0x02 | 0x0d => 2,
        0x03 | 0x04 | 0x09 => 4,
        0x05 | 0x08 => 8,
        0x06 => 0,
        0x07 | 0x0a | 0x0b | 0x0c => 1 + *v.first()? as usize,
        0x00 | 0x0f | 0x10 | 0xf5..=0xff => packets::read_lenenc_str(v)?.1,
        _ => return None,
    };
    (n <= v.len()).then_some(n)
}

/// A binary-protocol row (an execute's) with the string values of the listed columns
/// replaced, given every column's type from its definition. None to keep the row as it is:
/// another shape than the types say, or a listed column NULL or not a string.
pub fn rewrite_binary_row(row: &[u8], types: &[u8], values: &[(usize, String)]) -> Option<Vec<u8>> {
    // Header 0x00, then a NULL bitmap with two reserved bits.
    let bitmap_len = (types.len() + 9) / 8;
    if row.first() != Some(&0) {
        return None;
    }
    let bitmap = row.get(1..1 + bitmap_len)?;
    let mut out = BytesMut::with_capacity(row.len() + 16);
    out.extend_from_slice(&row[..1 + bitmap_len]);
    let mut at = 1 + bitmap_len;
    for (col, &ty) in types.iter().enumerate() {
        let bit = col + 2;
        let null = bitmap[bit / 8] & (1 << (bit % 8)) != 0;
        let replaced = values.iter().find(|(i, _)| *i == col);
        if null {
            if replaced.is_some() {
                return None;
            }
            continue;
        }
        let used = binary_value_len(ty, &row[at..])?;
        match replaced {
            Some((_, value)) if matches!(ty, 0x0f | 0xfd | 0xfe) => {
                packets::put_lenenc(&mut out, value.len() as u64);
                out.extend_from_slice(value.as_bytes());
            }
            Some(_) => return None,
            None => out.extend_from_slice(&row[at..at + used]),
        }
        at += used;
    }
    if at != row.len() || values.iter().any(|(i, _)| *i >= types.len()) {
        return None;
    }
    Some(out.to_vec())
}

/// Rewrites the rows of one result as they are relayed, text or binary: a binary row is
/// rewritten only once its column count and every column's type were seen.
pub struct Rewriter {
    rw: Rewrite,
    binary: bool,
    extended_types: bool,
    columns: Option<usize>,
    types: Vec<u8>,
    packets: usize,
}

impl Rewriter {
    pub fn new(rw: Rewrite, binary: bool, extended_types: bool) -> Rewriter {
        Rewriter {
            rw,
            binary,
            extended_types,
            columns: None,
            types: Vec::new(),
            packets: 0,
        }
    }

    /// The next packet of the result, `is_row` when the response counted it as a row: the
    /// bytes that replace it, or None to relay it as it is.
    pub fn next(&mut self, payload: &[u8], is_row: bool) -> Option<Vec<u8>> {
        self.packets += 1;
        if !self.binary {
            return is_row.then(|| rewrite_row(payload, &self.rw)).flatten();
        }
        if self.packets == 1 && !matches!(payload.first(), Some(0x00 | 0xff | 0xfb)) {
            self.columns = super::packets::read_lenenc(payload)
                .map(|(n, _)| n as usize)
                .filter(|n| *n < 4096);
        } else if self.columns.is_some_and(|n| self.packets <= n + 1) {
            if let Some(t) = column_type(payload, self.extended_types) {
                self.types.push(t);
            }
        }
        match &self.rw {
            Rewrite::Columns(values) if is_row && Some(self.types.len()) == self.columns => {
                rewrite_binary_row(payload, &self.types, values)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binary row: the listed string columns take qcache's values, the others (an
    /// integer, a NULL, a DATETIME) keep theirs; a listed NULL or non-string leaves the row.
    #[test]
    fn binary_rows_rewrite_their_string_columns() {
        // Columns: VAR_STRING, LONGLONG, VAR_STRING (NULL), DATETIME.
        let types = [0xfd, 0x08, 0xfd, 0x0c];
        // Header, bitmap (column 2 NULL: bit 4), "OFF", 7, datetime of 4 bytes.
        let mut row = vec![0x00, 0b0001_0000, 3, b'O', b'F', b'F'];
        row.extend_from_slice(&7i64.to_le_bytes());
        row.extend_from_slice(&[4, 0xea, 0x07, 12, 6]);
        let mut want = vec![0x00, 0b0001_0000, 6, b'D', b'E', b'M', b'A', b'N', b'D'];
        want.extend_from_slice(&7i64.to_le_bytes());
        want.extend_from_slice(&[4, 0xea, 0x07, 12, 6]);
        /// (the columns replaced and their values, the row expected or None: kept).
        type Case<'a> = (&'a [(usize, &'a str)], Option<&'a [u8]>);
        let rows: &[Case] = &[
            (&[(0, "DEMAND")], Some(&want)),
            // A NULL column listed: the server's row.
            (&[(2, "DEMAND")], None),
            // Not a string column.
            (&[(1, "DEMAND")], None),
            // No such column.
            (&[(4, "DEMAND")], None),
        ];
        for (values, expect) in rows {
            let values: Vec<(usize, String)> =
                values.iter().map(|(i, v)| (*i, v.to_string())).collect();
            assert_eq!(
                rewrite_binary_row(&row, &types, &values).as_deref(),
                *expect,
                "{values:?}"
            );
        }
        // A row cut short.
        assert_eq!(
            rewrite_binary_row(&row[..8], &types, &[(0, "X".into())]),
            None
        );
        // A column definition's type, with and without extended type info.
        let def = packets::column_def("@@query_cache_type", 0xfd, 20, false);
        assert_eq!(column_type(&def, false), Some(0xfd));
        let def = packets::column_def("x", 0x08, 20, true);
        assert_eq!(column_type(&def, true), Some(0x08));
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    /// A binary result's rows are rewritten once its column count and every definition's
    /// type were seen, and only its rows; a text result's rows whenever they are rows.
    #[test]
    fn a_rewriter_follows_the_result_it_relays() {
        let rw = Rewrite::Columns(vec![(0, "DEMAND".into())]);
        let def = packets::column_def("@@query_cache_type", 0xfd, 20, false);
        let row = vec![0x00, 0x00, 3, b'O', b'F', b'F'];
        let want = vec![0x00, 0x00, 6, b'D', b'E', b'M', b'A', b'N', b'D'];
        let mut r = Rewriter::new(rw.clone(), true, false);
        // (packet, counted as a row, replaced by)
        type Step<'a> = (&'a [u8], bool, Option<&'a [u8]>);
        let steps: &[Step] = &[
            (&[1], false, None),
            (&def, false, None),
            (&[0xfe, 0, 0, 2, 0], false, None),
            (&row, true, Some(&want)),
            (&[0xfe, 0, 0, 2, 0], false, None),
        ];
        for (i, (p, is_row, want)) in steps.iter().enumerate() {
            assert_eq!(r.next(p, *is_row).as_deref(), *want, "binary packet {i}");
        }
        // A definition whose type was never seen (a row before it): the server's row.
        let mut r = Rewriter::new(rw.clone(), true, false);
        assert_eq!(r.next(&[1], false), None);
        assert_eq!(r.next(&row, true), None, "no type seen");
        // Text: a row whose value is qcache's.
        let named = Rewrite::Named(vec![("query_cache_type".into(), "DEMAND".into())]);
        let mut r = Rewriter::new(named.clone(), false, false);
        let text = b"\x10query_cache_type\x03OFF";
        let got = r.next(text, true);
        assert_eq!(
            got,
            rewrite_row(text, &named),
            "text rows as rewrite_row says"
        );
        assert!(got.is_some());
        assert_eq!(r.next(text, false), None, "not a row: kept");
    }

    #[test]
    fn a_query_payload_is_the_command_byte_then_the_text() {
        for sql in ["SELECT 1", "", "SELECT 'é'"] {
            let p = query_payload(sql);
            assert_eq!(p[0], com::QUERY, "{sql}");
            assert_eq!(&p[1..], sql.as_bytes(), "{sql}");
        }
    }

    /// One row per shape: values, NULLs and empty strings in order.
    #[test]
    fn text_rows_read_values_and_nulls() {
        let cases: &[(&[u8], Values)] = &[
            (b"", vec![]),
            (b"\x03abc\xfb\x00", vec![s("abc"), None, s("")]),
            (b"\xfb\xfb", vec![None, None]),
            (b"\x07alice@%\xfb", vec![s("alice@%"), None]),
            (b"\x01a\x02r1", vec![s("a"), s("r1")]),
        ];
        for (row, want) in cases {
            assert_eq!(text_row(row).as_ref(), Some(want), "{row:?}");
            assert_eq!(&text_row_prefix(row), want, "{row:?}");
        }
    }

    /// A value cut short: the strict reader gives nothing, the prefix reader what came
    /// before it.
    #[test]
    fn a_truncated_row_is_none_or_its_prefix() {
        let cases: &[(&[u8], Values)] = &[
            (b"\x05ab", vec![]),
            (b"\x01a\x05ab", vec![s("a")]),
            (b"\xfb\x03x", vec![None]),
        ];
        for (row, prefix) in cases {
            assert_eq!(text_row(row), None, "{row:?}");
            assert_eq!(&text_row_prefix(row), prefix, "{row:?}");
        }
    }

    /// A row that is not valid UTF-8 is read lossily, not refused.
    #[test]
    fn text_rows_read_bytes_lossily() {
        assert_eq!(
            text_row(b"\x02\xff\x41"),
            Some(vec![Some("\u{fffd}A".to_string())])
        );
    }

    /// `(Variable_name, Value)` rows: one row per case, None when left as it is.
    #[test]
    fn named_rows_are_rewritten_by_name() {
        let rw = Rewrite::Named(vec![
            ("query_cache_type".into(), "ON".into()),
            ("compression".into(), "OFF".into()),
        ]);
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (
                b"\x10query_cache_type\x03OFF",
                Some(b"\x10query_cache_type\x02ON"),
            ),
            // The name's spelling is kept; it matches whatever its case.
            (
                b"\x10QUERY_CACHE_TYPE\x03OFF",
                Some(b"\x10QUERY_CACHE_TYPE\x02ON"),
            ),
            (b"\x0bCompression\x02ON", Some(b"\x0bCompression\x03OFF")),
            // A name not listed, a third column, a row cut short: left alone.
            (b"\x10query_cache_size\x010", None),
            (b"\x10query_cache_type\x03OFF\x00", None),
            (b"\x10query_cache_type\x05OF", None),
        ];
        for (row, want) in cases {
            assert_eq!(rewrite_row(row, &rw).as_deref(), *want, "{row:?}");
        }
    }

    /// Columns by index: the listed ones replaced, the others (NULLs too) kept byte for byte.
    #[test]
    fn columns_are_rewritten_by_index() {
        let first = Rewrite::Columns(vec![(0, "DEMAND".into())]);
        let second = Rewrite::Columns(vec![(1, "ON".into())]);
        let both = Rewrite::Columns(vec![(0, "A".into()), (2, "C".into())]);
        /// (rewrite, row, the row rewritten or None).
        type Case<'a> = (&'a Rewrite, &'a [u8], Option<&'a [u8]>);
        let cases: &[Case] = &[
            (&first, b"\x03OFF", Some(b"\x06DEMAND")),
            (&second, b"\xfb\x03OFF\x011", Some(b"\xfb\x02ON\x011")),
            (&both, b"\x011\xfb\x013", Some(b"\x01A\xfb\x01C")),
            // A NULL in a listed column gets qcache's value too.
            (&first, b"\xfb", Some(b"\x06DEMAND")),
            // Fewer columns than the rewrite names, a value cut short: left alone.
            (&second, b"\x011", None),
            (&first, b"\x05ab", None),
        ];
        for (rw, row, want) in cases {
            assert_eq!(rewrite_row(row, rw).as_deref(), *want, "{row:?}");
        }
    }
}
