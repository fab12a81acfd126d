//! Fuzz target: statement analysis (sqlparser and the fallbacks around it) and the SET / USE
//! analysers, on arbitrary UTF-8.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qcache::analysis;

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else {
        return;
    };
    let _ = analysis::analyze(sql);
    let _ = analysis::analyze_set(sql);
    let _ = analysis::use_schema(sql);
});
