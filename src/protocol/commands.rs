//! Client command payloads qcache reads beyond COM_QUERY's text: the parameter part of
//! COM_STMT_EXECUTE, which goes into the cache key.

/// The parameter parts of one COM_STMT_EXECUTE, borrowed from its packet (or, for the
/// types, from what the session remembered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecuteParams<'a> {
    /// The types in force: sent now, or remembered from an earlier execute. None without
    /// parameters.
    pub types: Option<&'a [u8]>,
    pub null_bitmap: &'a [u8],
    pub values: &'a [u8],
}

/// Whether the server has a handler for a parameter type sent with an execute (its first
/// byte; the second holds the unsigned flag). MariaDB refuses an execute carrying any other
/// (TIMESTAMP2, DATETIME2, TIME2, JSON, 99, …) with ER_WRONG_ARGUMENTS *before* it stores
/// any of the types, and keeps those it held (checked on 10.11 for every code).
pub fn type_known(code: u8) -> bool {
    matches!(code, 0x00..=0x10 | 0xf6..=0xff)
}

/// A COM_STMT_EXECUTE's parameter parts. None when the packet is too short, no types are
/// known for its parameters, or it sends one the server has no handler for ([`type_known`]):
/// such an execute is refused before the server takes its types, so they teach nothing and
/// key nothing.
pub fn execute_params<'a>(
    p: &'a [u8],
    params: u16,
    remembered: Option<&'a [u8]>,
) -> Option<ExecuteParams<'a>> {
    // [0x17][id:4][flags:1][iterations:4] then, with parameters, the null bitmap, the
    // new-params-bound flag, the types when bound, and the values.
    if p.len() < 10 {
        return None;
    }
    if params == 0 {
        return Some(ExecuteParams {
            types: None,
            null_bitmap: &[],
            values: &p[10..],
        });
    }
    let n = params as usize;
    let nb = n.div_ceil(8);
    let bitmap = p.get(10..10 + nb)?;
    match p.get(10 + nb)? {
        1 => {
            let types = p.get(11 + nb..11 + nb + 2 * n)?;
            if !types.chunks(2).all(|t| type_known(t[0])) {
                return None;
            }
            Some(ExecuteParams {
                types: Some(types),
                null_bitmap: bitmap,
                values: &p[11 + nb + 2 * n..],
            })
        }
        0 => Some(ExecuteParams {
            types: Some(remembered?),
            null_bitmap: bitmap,
            values: &p[11 + nb..],
        }),
        _ => None,
    }
}

/// The statement id a COM_STMT_EXECUTE, _CLOSE, _RESET, _SEND_LONG_DATA or _FETCH names
/// (after its command byte); None when the packet is too short to hold one.
#[inline]
pub fn stmt_id(p: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(p.get(1..5)?.try_into().ok()?))
}

/// The statement a command's id names, as the server reads it: MariaDB's -1 (0xFFFFFFFF)
/// is the statement the last COM_STMT_PREPARE created (`last`), and none when there is
/// none (that prepare failed, or its statement was closed).
#[inline]
pub fn resolve_stmt(id: u32, last: Option<u32>) -> Option<u32> {
    match id {
        u32::MAX => last,
        id => Some(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_params_with_types_remembered_and_short() {
        // id 1, flags 0, iterations 1, one parameter: bitmap 0, bound 1, LONGLONG, value 7.
        let mut p = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8, 0];
        p.extend_from_slice(&7u64.to_le_bytes());
        let e = execute_params(&p, 1, None).unwrap();
        assert_eq!(e.types, Some(&[8u8, 0][..]));
        assert_eq!(e.null_bitmap, &[0]);
        assert_eq!(e.values, &7u64.to_le_bytes());

        // The same execute without types uses the remembered ones, or fails without them.
        let mut q = p[..11].to_vec();
        q.push(0);
        q.extend_from_slice(&7u64.to_le_bytes());
        let remembered: &[u8] = &[8, 0];
        let e = execute_params(&q, 1, Some(remembered)).unwrap();
        assert_eq!(e.types, Some(remembered));
        assert_eq!(e.values, &7u64.to_le_bytes());
        assert!(execute_params(&q, 1, None).is_none());

        // Truncated packets and a bad bound flag are refused, not read past.
        for n in 0..13 {
            assert!(execute_params(&p[..n], 1, None).is_none(), "{n}");
        }
        assert!(execute_params(&p[..9], 0, None).is_none());
        let mut bad = p.clone();
        bad[11] = 2;
        assert!(execute_params(&bad, 1, None).is_none());
    }

    /// Types the server has a handler for, and an execute sending one it has none for (its
    /// types unread: the server refuses it before taking any). (rule, the type, known.)
    #[test]
    fn parameter_types_the_server_takes() {
        let rows: &[(&str, [u8; 2], bool)] = &[
            ("DECIMAL, the first", [0x00, 0], true),
            ("LONGLONG UNSIGNED", [0x08, 0x80], true),
            ("NULL: taken, then the value refused", [0x06, 0], true),
            ("BIT, the last of the low ones", [0x10, 0], true),
            ("TIMESTAMP2: the server's own, never sent", [0x11, 0], false),
            ("99", [99, 0], false),
            ("JSON (MySQL's)", [0xf5, 0], false),
            ("NEWDECIMAL", [0xf6, 0], true),
            ("STRING", [0xfe, 0], true),
            ("GEOMETRY", [0xff, 0], true),
        ];
        for (rule, t, known) in rows {
            assert_eq!(type_known(t[0]), *known, "{rule}");
            let mut p = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, t[0], t[1]];
            p.extend_from_slice(&[1, b'7']);
            assert_eq!(execute_params(&p, 1, None).is_some(), *known, "{rule}");
        }
    }

    /// The id is the four little-endian bytes after the command byte; a packet too short to
    /// hold them names none.
    #[test]
    fn statement_ids() {
        let cases: &[(&[u8], Option<u32>)] = &[
            (&[0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0], Some(1)),
            (&[0x19, 0x78, 0x56, 0x34, 0x12], Some(0x1234_5678)),
            // MariaDB's -1: the statement the last prepare made.
            (&[0x17, 0xff, 0xff, 0xff, 0xff], Some(u32::MAX)),
            (&[0x19, 1, 0, 0], None),
            (&[0x19], None),
            (&[], None),
        ];
        for (p, want) in cases {
            assert_eq!(stmt_id(p), *want, "{p:?}");
        }
    }

    /// Without parameters everything after the 10-byte header is the values part; a packet
    /// of exactly the header has none.
    #[test]
    fn executes_without_parameters() {
        let header = [0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0];
        let e = execute_params(&header, 0, None).unwrap();
        assert_eq!((e.types, e.null_bitmap, e.values), (None, &[][..], &[][..]));
        let mut more = header.to_vec();
        more.push(9);
        assert_eq!(execute_params(&more, 0, None).unwrap().values, &[9]);
    }

    /// The null bitmap takes one byte per eight parameters, and the types two bytes each.
    #[test]
    fn bitmap_and_types_scale_with_the_parameters() {
        for (params, bitmap) in [(1u16, 1usize), (8, 1), (9, 2), (16, 2), (17, 3)] {
            let mut p = vec![0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0];
            p.extend(std::iter::repeat_n(0xaa, bitmap));
            p.push(1);
            p.extend(std::iter::repeat_n(0x06, 2 * usize::from(params)));
            p.push(0x5a);
            let e = execute_params(&p, params, None).unwrap_or_else(|| panic!("{params}"));
            assert_eq!(e.null_bitmap.len(), bitmap, "{params}");
            assert_eq!(e.types.map(<[u8]>::len), Some(2 * usize::from(params)));
            assert_eq!(e.values, &[0x5a], "{params}");
        }
    }

    /// Types sent with the execute win over the remembered ones.
    #[test]
    fn types_sent_now_win() {
        let p = [0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xfd, 0, 1, b'x'];
        let remembered: &[u8] = &[0x08, 0];
        let e = execute_params(&p, 1, Some(remembered)).unwrap();
        assert_eq!(e.types, Some(&[0xfd, 0][..]));
        assert_eq!(e.values, b"\x01x");
    }

    /// -1 names the last prepared statement, or none; any other id names itself.
    #[test]
    fn minus_one_is_the_last_prepared() {
        for (id, last, want) in [
            (u32::MAX, Some(5), Some(5)),
            (u32::MAX, None, None),
            (5, None, Some(5)),
            (7, Some(5), Some(7)),
            (0, Some(5), Some(0)),
        ] {
            assert_eq!(resolve_stmt(id, last), want, "{id} {last:?}");
        }
    }
}
