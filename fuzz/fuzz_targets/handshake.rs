//! Fuzz target: the connection-phase parsers, which see bytes before anyone authenticated:
//! the server greeting (parse and capability rewrite), the client's handshake response,
//! the auth switch request, COM_CHANGE_USER, and the OK/ERR/EOF readers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qcache::protocol::{handshake, packets};

fuzz_target!(|data: &[u8]| {
    let _ = handshake::parse_greeting(data);
    if let Some((rewritten, _)) = handshake::rewrite_greeting(data, 0x0000_0820, 0) {
        // A rewritten greeting must still parse.
        assert!(handshake::parse_greeting(&rewritten).is_some());
    }
    let _ = handshake::greeting_scramble(data);
    let _ = handshake::parse_auth_switch(data);
    let _ = handshake::with_response_caps(data, 0x0000_0200, 0x0000_0820);
    let _ = handshake::parse_handshake_response(data);
    let caps = data
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    let _ = handshake::parse_change_user(data, caps);
    let _ = handshake::parse_change_user(data, u32::MAX);
    let _ = packets::parse_ok(data);
    let _ = packets::parse_err(data);
    let _ = packets::read_terminator(data, true);
    let _ = packets::read_terminator(data, false);
    let _ = packets::read_lenenc_str(data);
});
