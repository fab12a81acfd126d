//! Fuzz target: the client commands qcache reads itself instead of relaying: its admin
//! statements, `SHOW STATUS LIKE 'qcache…'` (parse and pattern match), the session-variable
//! answers, and the parameter part of COM_STMT_EXECUTE that goes into the cache key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qcache::admin::statements;
use qcache::protocol::commands;

/// A few of the names a `SHOW STATUS LIKE` pattern is matched against.
const NAMES: [&str; 4] = [
    "qcache_hits",
    "qcache_queries_in_cache",
    "qcache_not_cached",
    "qcache_lowmem_prunes",
];

fuzz_target!(|data: &[u8]| {
    let _ = statements::parse(data);
    if let Some(pattern) = statements::status_like_pattern(data) {
        for name in NAMES {
            let _ = statements::like_match(&pattern, name);
        }
    }
    // The first two bytes pick the parameter count; the packet is the rest, with and without
    // remembered types.
    if let [a, b, packet @ ..] = data {
        let params = u16::from_le_bytes([*a, *b]);
        let remembered = bytes::Bytes::copy_from_slice(packet.get(..2 * params as usize).unwrap_or(&[]));
        if let Some((types, bitmap, _values)) = commands::execute_params(packet, params, None) {
            assert_eq!(bitmap.len(), (params as usize).div_ceil(8));
            assert!(params == 0 || types.is_some_and(|t| t.len() == 2 * params as usize));
        }
        let _ = commands::execute_params(packet, params, Some(&remembered));
    }
});
