//! Fuzz target: the response state machine fed arbitrary server packets. The first byte picks
//! the command kind and the EOF style; the rest is cut into packets by one-byte lengths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qcache::protocol::response::{Expect, Response};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let expect = match mode % 6 {
        0 => Expect::Results,
        1 => Expect::Prepare,
        2 => Expect::Rows,
        3 => Expect::FieldList,
        4 => Expect::OnePacket,
        _ => Expect::Nothing,
    };
    let mut r = Response::new(expect, mode & 0x80 != 0);
    while let Some((&len, tail)) = rest.split_first() {
        let len = (len as usize).min(tail.len());
        let (packet, next) = tail.split_at(len);
        rest = next;
        let was_done = r.is_done();
        match r.feed(packet) {
            Ok(_) => assert!(!was_done || r.is_done(), "left Done"),
            Err(_) => return,
        }
    }
});
