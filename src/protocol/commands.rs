//! Client command payloads qcache reads beyond COM_QUERY's text: the parameter part of
//! COM_STMT_EXECUTE, which goes into the cache key.

use bytes::Bytes;

/// A COM_STMT_EXECUTE's parameter parts: the types in force (sent now, or remembered from
/// an earlier execute), the null bitmap and the values. None when the packet is too short
/// or no types are known for its parameters.
pub fn execute_params<'a>(
    p: &'a [u8],
    params: u16,
    remembered: Option<&Bytes>,
) -> Option<(Option<Bytes>, &'a [u8], &'a [u8])> {
    // [0x17][id:4][flags:1][iterations:4] then, with parameters, the null bitmap, the
    // new-params-bound flag, the types when bound, and the values.
    if p.len() < 10 {
        return None;
    }
    if params == 0 {
        return Some((None, &[], &p[10..]));
    }
    let n = params as usize;
    let nb = n.div_ceil(8);
    let bitmap = p.get(10..10 + nb)?;
    match p.get(10 + nb)? {
        1 => {
            let types = p.get(11 + nb..11 + nb + 2 * n)?;
            Some((
                Some(Bytes::copy_from_slice(types)),
                bitmap,
                &p[11 + nb + 2 * n..],
            ))
        }
        0 => Some((Some(remembered?.clone()), bitmap, &p[11 + nb..])),
        _ => None,
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
        let (types, bitmap, values) = execute_params(&p, 1, None).unwrap();
        assert_eq!(types.as_deref(), Some(&[8u8, 0][..]));
        assert_eq!(bitmap, &[0]);
        assert_eq!(values, &7u64.to_le_bytes());

        // The same execute without types uses the remembered ones, or fails without them.
        let mut q = p[..11].to_vec();
        q.push(0);
        q.extend_from_slice(&7u64.to_le_bytes());
        let remembered = Bytes::from_static(&[8, 0]);
        let (types, _, values) = execute_params(&q, 1, Some(&remembered)).unwrap();
        assert_eq!(types, Some(remembered));
        assert_eq!(values, &7u64.to_le_bytes());
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
}
