//! The literals an execute's binary parameters carry, for row slices: a prepared read's
//! `WHERE id = ?` names its rows through the values its COM_STMT_EXECUTE sends.

use super::slices::Lit;
use crate::protocol::commands::ExecuteParams;

/// The values of an execute's parameters that slices can use: integers and strings; None
/// for any other type, and for every parameter after one whose length cannot be read.
pub fn param_literals(p: &ExecuteParams<'_>, n: usize) -> Vec<Option<Lit>> {
    let mut out = vec![None; n];
    let Some(types) = p.types else {
        return out;
    };
    let mut v = p.values;
    for (i, slot) in out.iter_mut().enumerate() {
        let null = p
            .null_bitmap
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0);
        if null {
            *slot = Some(Lit::Null);
            continue;
        }
        let (Some(&ty), Some(&flags)) = (types.get(2 * i), types.get(2 * i + 1)) else {
            break;
        };
        let unsigned = flags & 0x80 != 0;
        let fixed = |len: usize, v: &mut &[u8]| -> Option<u64> {
            let b = v.get(..len)?;
            let mut x = [0u8; 8];
            x[..len].copy_from_slice(b);
            *v = &v[len..];
            Some(u64::from_le_bytes(x))
        };
        let int = |raw: u64, bits: u32| -> i128 {
            if unsigned {
                i128::from(raw)
            } else {
                let shift = 64 - bits;
                i128::from(((raw << shift) as i64) >> shift)
            }
        };
        match ty {
            0x01 | 0x02 | 0x03 | 0x08 | 0x09 | 0x0d => {
                let (len, bits) = match ty {
                    0x01 => (1, 8),
                    0x02 | 0x0d => (2, 16),
                    0x08 => (8, 64),
                    _ => (4, 32),
                };
                let Some(raw) = fixed(len, &mut v) else { break };
                *slot = Some(Lit::Int(int(raw, bits).to_string()));
            }
            0x04 => {
                if fixed(4, &mut v).is_none() {
                    break;
                }
            }
            0x05 => {
                if fixed(8, &mut v).is_none() {
                    break;
                }
            }
            0x06 => *slot = Some(Lit::Null),
            0x07 | 0x0a | 0x0b | 0x0c => {
                let Some(&len) = v.first() else { break };
                let (Some(body), Some(rest)) =
                    (v.get(1..1 + len as usize), v.get(1 + len as usize..))
                else {
                    break;
                };
                v = rest;
                // TIMESTAMP, DATE, DATETIME: a temporal value (TIME, 0x0b, is not).
                if ty != 0x0b {
                    *slot = binary_temporal(body).map(Lit::Time);
                }
            }
            0x0f | 0xfd | 0xfe | 0xfc | 0xf9 | 0xfa | 0xfb | 0x00 | 0xf6 | 0xf5 | 0xf7 | 0xf8
            | 0xff | 0x10 => {
                let Some((body, rest)) = lenenc_bytes(v) else {
                    break;
                };
                v = rest;
                if matches!(ty, 0x0f | 0xfd | 0xfe) {
                    if let Ok(s) = std::str::from_utf8(body) {
                        *slot = Some(Lit::Str(s.to_string()));
                    }
                }
            }
            _ => break,
        }
    }
    out
}

/// A binary DATE / DATETIME / TIMESTAMP value (0, 4, 7 or 11 bytes: year, month, day,
/// hour, minute, second, microseconds) as `YYYY-MM-DD HH:MM:SS.ffffff`; None for a zero
/// date or another length.
fn binary_temporal(b: &[u8]) -> Option<String> {
    let t = BinaryTemporal::read(b)?;
    Some(format!("{}.{:06}", t.seconds_text(), t.micros))
}

/// The parts of a binary DATE / DATETIME / TIMESTAMP value as the protocol lays them out
/// (4, 7 or 11 bytes: year, month, day, then hour, minute, second, then microseconds);
/// what is absent is 0. The one reader of that layout: keys here, patches'
/// bound values in `policy::patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryTemporal {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
    /// How many bytes it came in (4: a date only).
    pub len: usize,
}

impl BinaryTemporal {
    /// None for any other length (a zero date comes as 0 bytes).
    pub fn read(b: &[u8]) -> Option<BinaryTemporal> {
        if !matches!(b.len(), 4 | 7 | 11) {
            return None;
        }
        let (hour, minute, second) = if b.len() >= 7 {
            (b[4], b[5], b[6])
        } else {
            (0, 0, 0)
        };
        let micros = if b.len() == 11 {
            u32::from_le_bytes([b[7], b[8], b[9], b[10]])
        } else {
            0
        };
        Some(BinaryTemporal {
            year: u16::from_le_bytes([b[0], b[1]]),
            month: b[2],
            day: b[3],
            hour,
            minute,
            second,
            micros,
            len: b.len(),
        })
    }

    /// `YYYY-MM-DD HH:MM:SS`, without the microseconds.
    pub fn seconds_text(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// A length-encoded string and what follows it.
fn lenenc_bytes(v: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = v.split_first()?;
    let (len, rest) = match first {
        0..=0xfa => (u64::from(first), rest),
        0xfc => (
            u64::from(u16::from_le_bytes(rest.get(..2)?.try_into().ok()?)),
            &rest[2..],
        ),
        0xfd => {
            let b = rest.get(..3)?;
            (
                u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16,
                &rest[3..],
            )
        }
        0xfe => (
            u64::from_le_bytes(rest.get(..8)?.try_into().ok()?),
            &rest[8..],
        ),
        _ => return None,
    };
    let len = usize::try_from(len).ok()?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode() {
        // ints (signed tiny -1, unsigned long 4000000000), a NULL, a varchar, a double, then
        // a string after it.
        let types = [
            0x01, 0x00, 0x03, 0x80, 0x08, 0x00, 0xfd, 0x00, 0x05, 0x00, 0xfe, 0x00,
        ];
        let mut values = vec![0xff];
        values.extend_from_slice(&4_000_000_000u32.to_le_bytes());
        values.extend_from_slice(&[3, b'a', b'B', b'c']);
        values.extend_from_slice(&1.5f64.to_le_bytes());
        values.extend_from_slice(&[1, b'7']);
        let p = ExecuteParams {
            types: Some(&types),
            null_bitmap: &[0b0000_0100],
            values: &values,
        };
        assert_eq!(
            param_literals(&p, 6),
            vec![
                Some(Lit::Int("-1".into())),
                Some(Lit::Int("4000000000".into())),
                Some(Lit::Null),
                Some(Lit::Str("aBc".into())),
                None,
                Some(Lit::Str("7".into())),
            ]
        );
        // Truncated: what cannot be read stays unknown.
        let p = ExecuteParams {
            types: Some(&types[..4]),
            null_bitmap: &[0],
            values: &[0x05],
        };
        assert_eq!(
            param_literals(&p, 2),
            vec![Some(Lit::Int("5".into())), None]
        );
    }

    /// One parameter of type `ty` (flags 0x80 when unsigned) holding `value`.
    fn one(ty: u8, flags: u8, value: &[u8]) -> Option<Lit> {
        let types = [ty, flags];
        let p = ExecuteParams {
            types: Some(&types),
            null_bitmap: &[0],
            values: value,
        };
        param_literals(&p, 1).pop().flatten()
    }

    fn int(v: &str) -> Option<Lit> {
        Some(Lit::Int(v.to_string()))
    }

    /// Integers of every width, signed and unsigned: one row per type and sign.
    #[test]
    fn integers_of_every_width() {
        let cases: &[(u8, u8, &[u8], Option<Lit>)] = &[
            (0x01, 0x00, &[0x80], int("-128")),
            (0x01, 0x80, &[0x80], int("128")),
            (0x02, 0x00, &[0xfe, 0xff], int("-2")),
            (0x02, 0x80, &[0xfe, 0xff], int("65534")),
            (0x0d, 0x00, &[0xe9, 0x07], int("2025")),
            (0x03, 0x00, &[0xff, 0xff, 0xff, 0xff], int("-1")),
            (0x09, 0x80, &[0xff, 0xff, 0xff, 0xff], int("4294967295")),
            (0x08, 0x00, &[0xff; 8], int("-1")),
            (0x08, 0x80, &[0xff; 8], int("18446744073709551615")),
            // Too few bytes for the width: unknown.
            (0x03, 0x00, &[0x01, 0x00], None),
        ];
        for (ty, flags, value, want) in cases {
            assert_eq!(&one(*ty, *flags, value), want, "type {ty:#x} {value:?}");
        }
    }

    /// DATE, DATETIME and TIMESTAMP in their 4-, 7- and 11-byte forms; a zero date (0
    /// bytes) and TIME are no slice value.
    #[test]
    fn temporal_values() {
        let date = [4, 0xe9, 0x07, 12, 5];
        let datetime = [7, 0xe9, 0x07, 12, 5, 17, 55, 9];
        let micro = [11, 0xe9, 0x07, 1, 2, 3, 4, 5, 0x40, 0xe2, 0x01, 0x00];
        let time = [8, 0, 1, 0, 0, 0, 2, 3, 4];
        let cases: &[(u8, &[u8], Option<&str>)] = &[
            (0x0a, &date, Some("2025-12-05 00:00:00.000000")),
            (0x0c, &datetime, Some("2025-12-05 17:55:09.000000")),
            (0x07, &micro, Some("2025-01-02 03:04:05.123456")),
            (0x0c, &[0], None),
            (0x0c, &[5, 1, 2, 3, 4, 5], None),
            (0x0b, &time, None),
        ];
        for (ty, value, want) in cases {
            let want = want.map(|t| Lit::Time(t.to_string()));
            assert_eq!(one(*ty, 0, value), want, "type {ty:#x}");
        }
    }

    /// Strings are literals when they are text types and UTF-8; blobs, decimals and JSON
    /// are read past but are no literal.
    #[test]
    fn string_types() {
        let cases: &[(u8, &[u8], Option<Lit>)] = &[
            (0xfd, b"\x02ab", Some(Lit::Str("ab".into()))),
            (0xfe, b"\x00", Some(Lit::Str(String::new()))),
            (0x0f, b"\x01x", Some(Lit::Str("x".into()))),
            (0xfd, b"\x02\xff\xfe", None),
            (0xfc, b"\x02ab", None),
            (0xf6, b"\x041.50", None),
            (0xf5, b"\x02{}", None),
            // A length longer than what follows: unknown.
            (0xfd, b"\x05ab", None),
        ];
        for (ty, value, want) in cases {
            assert_eq!(&one(*ty, 0, value), want, "type {ty:#x} {value:?}");
        }
    }

    /// Length-encoded strings in all four length forms; 0xfb, 0xff and short lengths fail.
    #[test]
    fn lenenc_lengths() {
        let mut long = vec![0xfc, 0x00, 0x01];
        long.extend(std::iter::repeat_n(b'a', 256));
        long.push(b'!');
        let three = vec![0xfd, 0x01, 0x00, 0x00, b'z', b'!'];
        let eight = vec![0xfe, 1, 0, 0, 0, 0, 0, 0, 0, b'y'];
        /// (bytes, (length read, what follows) or None).
        type Case<'a> = (&'a [u8], Option<(usize, &'a [u8])>);
        let cases: &[Case] = &[
            (b"\x00", Some((0, b""))),
            (b"\x02ab!", Some((2, b"!"))),
            (&long, Some((256, b"!"))),
            (&three, Some((1, b"!"))),
            (&eight, Some((1, b""))),
            (b"\xfb", None),
            (b"\xff\x00", None),
            (b"\xfc\x01", None),
            (b"", None),
        ];
        for (v, want) in cases {
            let got = lenenc_bytes(v).map(|(b, rest)| (b.len(), rest));
            assert_eq!(got, *want, "{:?}", &v[..v.len().min(4)]);
        }
    }

    /// The null bitmap wins over the type, whatever byte of it holds the bit; a value of a
    /// type NULL (0x06) is a NULL too.
    #[test]
    fn nulls_come_from_the_bitmap() {
        let types: Vec<u8> = [0x01, 0x00].repeat(10);
        let mut values = vec![7u8; 8];
        values.push(9);
        let p = ExecuteParams {
            types: Some(&types),
            null_bitmap: &[0b0000_0000, 0b0000_0010],
            values: &values,
        };
        let got = param_literals(&p, 10);
        assert_eq!(got[9], Some(Lit::Null));
        assert_eq!(got[8], int("9"));
        assert_eq!(got[0], int("7"));
        assert_eq!(one(0x06, 0, &[]), Some(Lit::Null));
    }

    /// Without types nothing is known; an unknown type stops the reading (its length is
    /// unknown) and so do floats cut short.
    #[test]
    fn unknown_stops_the_reading() {
        let none = ExecuteParams {
            types: None,
            null_bitmap: &[],
            values: &[1, 2],
        };
        assert_eq!(param_literals(&none, 2), vec![None, None]);
        for (types, values) in [
            (&[0x42u8, 0, 0x01, 0][..], &[1u8, 1][..]),
            (&[0x04, 0, 0x01, 0][..], &[0, 0, 1][..]),
            (&[0x05, 0, 0x01, 0][..], &[0, 0, 0, 0, 1][..]),
        ] {
            let p = ExecuteParams {
                types: Some(types),
                null_bitmap: &[0],
                values,
            };
            assert_eq!(param_literals(&p, 2), vec![None, None], "{types:?}");
        }
    }
}
