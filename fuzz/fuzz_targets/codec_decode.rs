//! Fuzz target: packet framing. Arbitrary bytes, decoded with a limit taken from the input,
//! must give packets within the limit, "need more", or an error; and whatever decodes must
//! encode back to the same bytes.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use qcache::protocol::codec;

fuzz_target!(|data: &[u8]| {
    let Some((&l, rest)) = data.split_first() else {
        return;
    };
    // Small limits reach the TooLarge path; 0xFF means "the proxy's normal limit".
    let limit = if l == 0xff { 1 << 30 } else { l as usize * 8 };
    let mut buf = BytesMut::from(rest);
    let mut consumed = 0;
    while let Ok(Some(p)) = codec::decode(&mut buf, limit) {
        assert!(p.payload.len() <= limit);
        let mut again = BytesMut::new();
        codec::encode(p.seq, &p.payload, &mut again);
        assert_eq!(&again[..], &rest[consumed..consumed + again.len()]);
        consumed += again.len();
    }
});
