//! Fuzz target: the byte-level statement scanner, digest, hint stripping and statement split:
//! what runs on every statement before (or instead of) sqlparser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qcache::analysis;

fuzz_target!(|data: &[u8]| {
    let s = analysis::scan(data);
    let stripped = analysis::strip_hints(data, &s);
    assert!(stripped.len() <= data.len());
    let _ = analysis::digest(data);
    let _ = analysis::digest(&stripped);
    for part in analysis::split_statements(data) {
        let _ = analysis::scan(part);
    }
});
