//! Packet framing: the 4-byte header, sequence ids and the 16 MiB continuation rule, sans IO.
//!
//! A *logical* packet is what the protocol talks about; on the wire a payload of 0xFFFFFF
//! bytes or more is cut into 0xFFFFFF-byte frames, each with the next sequence id, ended by a
//! shorter frame (empty when the length is an exact multiple). Decoding joins the frames and
//! encoding cuts them again the same way, so relaying a decoded packet reproduces the bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Largest payload of one frame.
pub const MAX_FRAME: usize = 0xFF_FFFF;

/// One logical packet: its first frame's sequence id and the joined payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub seq: u8,
    pub payload: Bytes,
}

impl Packet {
    pub fn new(seq: u8, payload: impl Into<Bytes>) -> Packet {
        Packet {
            seq,
            payload: payload.into(),
        }
    }

    /// How many frames (and so sequence ids) this packet takes on the wire.
    pub fn frames(&self) -> usize {
        self.payload.len() / MAX_FRAME + 1
    }

    /// Sequence id that the packet after this one carries.
    pub fn next_seq(&self) -> u8 {
        self.seq.wrapping_add(self.frames() as u8)
    }

    pub fn first(&self) -> Option<u8> {
        self.payload.first().copied()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("packet of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("packet out of order: expected sequence id {expected}, got {got}")]
    Sequence { expected: u8, got: u8 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Frames and unframes packets. `max_payload` bounds a logical packet, so that a peer cannot
/// make us buffer without limit.
#[derive(Debug, Clone)]
pub struct PacketCodec {
    pub max_payload: usize,
}

impl PacketCodec {
    pub fn new(max_payload: usize) -> PacketCodec {
        PacketCodec { max_payload }
    }
}

impl Default for PacketCodec {
    fn default() -> Self {
        // Larger than any max_allowed_packet MySQL accepts (1 GiB), plus headroom.
        PacketCodec::new(1 << 30)
    }
}

/// Reads one logical packet from `buf` if it holds one completely; `Ok(None)` means "wait for
/// more bytes". The bytes of the packet are consumed only when it is complete.
pub fn decode(buf: &mut BytesMut, max_payload: usize) -> Result<Option<Packet>, CodecError> {
    // First pass: walk the frame headers to see if the whole logical packet is here.
    let mut at = 0usize;
    let mut total = 0usize;
    let mut frames = 0usize;
    loop {
        if buf.len() < at + 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], 0]) as usize;
        let seq = buf[at + 3];
        if frames > 0 {
            let expected = buf[3].wrapping_add(frames as u8);
            if seq != expected {
                return Err(CodecError::Sequence { expected, got: seq });
            }
        }
        total += len;
        if total > max_payload {
            return Err(CodecError::TooLarge {
                size: total,
                limit: max_payload,
            });
        }
        if buf.len() < at + 4 + len {
            // Make room once so that a large frame does not reallocate repeatedly.
            buf.reserve(at + 4 + len - buf.len());
            return Ok(None);
        }
        at += 4 + len;
        frames += 1;
        if len < MAX_FRAME {
            break;
        }
    }
    let seq = buf[3];
    if frames == 1 {
        let mut frame = buf.split_to(at);
        frame.advance(4);
        return Ok(Some(Packet {
            seq,
            payload: frame.freeze(),
        }));
    }
    let mut payload = BytesMut::with_capacity(total);
    for _ in 0..frames {
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], 0]) as usize;
        buf.advance(4);
        payload.extend_from_slice(&buf[..len]);
        buf.advance(len);
    }
    Ok(Some(Packet {
        seq,
        payload: payload.freeze(),
    }))
}

/// Appends `payload` framed with sequence ids starting at `seq`; returns the next sequence id.
pub fn encode(seq: u8, payload: &[u8], out: &mut BytesMut) -> u8 {
    let mut seq = seq;
    let mut rest = payload;
    out.reserve(payload.len() + 4 * (payload.len() / MAX_FRAME + 1));
    loop {
        let n = rest.len().min(MAX_FRAME);
        out.put_slice(&(n as u32).to_le_bytes()[..3]);
        out.put_u8(seq);
        out.put_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_FRAME {
            return seq;
        }
    }
}

impl Decoder for PacketCodec {
    type Item = Packet;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Packet>, CodecError> {
        decode(src, self.max_payload)
    }
}

impl Encoder<Packet> for PacketCodec {
    type Error = CodecError;

    fn encode(&mut self, item: Packet, dst: &mut BytesMut) -> Result<(), CodecError> {
        encode(item.seq, &item.payload, dst);
        Ok(())
    }
}

/// The sequence id of the last frame in `buf`, which holds whole frames only, as queued;
/// then `shift` is added to every frame's id (0 leaves them).
#[inline]
pub fn last_seq_then_shift(buf: &mut [u8], shift: u8) -> Option<u8> {
    let mut at = 0;
    let mut last = None;
    while at + 4 <= buf.len() {
        let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], 0]) as usize;
        last = Some(buf[at + 3]);
        buf[at + 3] = buf[at + 3].wrapping_add(shift);
        at += 4 + len;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(len: usize) {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut wire = BytesMut::new();
        let next = encode(7, &payload, &mut wire);
        let frames = len / MAX_FRAME + 1;
        assert_eq!(next, 7u8.wrapping_add(frames as u8));
        assert_eq!(wire.len(), len + 4 * frames);
        // Feed byte ranges in pieces to check the partial-input path.
        let mut buf = BytesMut::new();
        let mut got = None;
        for chunk in wire.chunks(1 << 20) {
            assert!(got.is_none());
            buf.extend_from_slice(chunk);
            got = decode(&mut buf, 1 << 30).unwrap();
        }
        let p = got.expect("complete packet");
        assert_eq!(p.seq, 7);
        assert_eq!(p.payload.len(), len);
        assert!(p.payload[..] == payload[..]);
        assert_eq!(p.frames(), frames);
        assert!(buf.is_empty());
        // Re-encoding gives the same bytes.
        let mut again = BytesMut::new();
        encode(p.seq, &p.payload, &mut again);
        assert_eq!(again, wire);
    }

    #[test]
    fn small_packets() {
        roundtrip(0);
        roundtrip(1);
        roundtrip(1000);
    }

    #[test]
    fn at_the_16mib_boundary() {
        roundtrip(MAX_FRAME - 1);
        roundtrip(MAX_FRAME);
        roundtrip(MAX_FRAME + 1);
        roundtrip(2 * MAX_FRAME);
    }

    #[test]
    fn exact_frame_has_empty_trailer() {
        let payload = vec![1u8; MAX_FRAME];
        let mut wire = BytesMut::new();
        encode(0, &payload, &mut wire);
        assert_eq!(&wire[wire.len() - 4..], &[0, 0, 0, 1]);
        assert_eq!(&wire[..4], &[0xff, 0xff, 0xff, 0]);
    }

    #[test]
    fn incomplete_header_waits() {
        let mut buf = BytesMut::from(&[5u8, 0, 0][..]);
        assert!(decode(&mut buf, 100).unwrap().is_none());
        buf.extend_from_slice(&[0, 1, 2]);
        assert!(decode(&mut buf, 100).unwrap().is_none());
        buf.extend_from_slice(&[3, 4, 5]);
        let p = decode(&mut buf, 100).unwrap().unwrap();
        assert_eq!(&p.payload[..], &[1, 2, 3, 4, 5]);
    }

    #[test]
    fn too_large_is_refused_before_buffering() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0x00, 0][..]);
        assert!(matches!(
            decode(&mut buf, 1024),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn continuation_with_wrong_sequence_is_an_error() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0xff, 0xff, 0xff, 3]);
        buf.extend_from_slice(&vec![0u8; MAX_FRAME]);
        buf.extend_from_slice(&[0, 0, 0, 9]);
        assert!(matches!(
            decode(&mut buf, 1 << 30),
            Err(CodecError::Sequence {
                expected: 4,
                got: 9
            })
        ));
    }

    #[test]
    fn two_packets_in_one_buffer() {
        let mut buf = BytesMut::new();
        encode(1, b"ab", &mut buf);
        encode(2, b"cde", &mut buf);
        assert_eq!(&decode(&mut buf, 10).unwrap().unwrap().payload[..], b"ab");
        let p = decode(&mut buf, 10).unwrap().unwrap();
        assert_eq!((p.seq, &p.payload[..]), (2, &b"cde"[..]));
        assert!(decode(&mut buf, 10).unwrap().is_none());
    }

    /// Payload sizes worth trying: small ones, and each side of one and two full frames.
    fn sizes() -> impl proptest::strategy::Strategy<Value = usize> {
        use proptest::prelude::*;
        prop_oneof![
            8 => 0usize..600,
            1 => (MAX_FRAME - 2)..=(MAX_FRAME + 2),
            1 => (2 * MAX_FRAME - 1)..=(2 * MAX_FRAME + 1),
        ]
    }

    proptest::proptest! {
        // Each large case moves up to 32 MiB; a few dozen cases keep this under seconds.
        #![proptest_config(proptest::test_runner::Config::with_cases(24))]

        /// Encoding then decoding returns the payload and the next sequence id, however
        /// the bytes are cut into reads.
        #[test]
        fn round_trip_any_size_any_split(len in sizes(), seq: u8, fill: u8, cut in 1000usize..70000) {
            let payload = vec![fill; len];
            let mut wire = BytesMut::new();
            let next = encode(seq, &payload, &mut wire);
            let mut buf = BytesMut::new();
            let mut got = None;
            for piece in wire.chunks(cut) {
                proptest::prop_assert!(got.is_none(), "packet complete before its last byte");
                buf.extend_from_slice(piece);
                got = decode(&mut buf, 1 << 30).unwrap();
            }
            let p = got.expect("complete after the last byte");
            proptest::prop_assert_eq!(p.seq, seq);
            proptest::prop_assert_eq!(p.next_seq(), next);
            proptest::prop_assert!(p.payload.len() == len && p.payload.iter().all(|b| *b == fill));
            proptest::prop_assert!(buf.is_empty());
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes: a packet, "need more", or an error — never a panic, and never
        /// a packet larger than the limit.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512), limit in 0usize..300) {
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(p)) = decode(&mut buf, limit) {
                proptest::prop_assert!(p.payload.len() <= limit);
            }
        }
    }

    /// The last frame's sequence id, and every frame's id moved by `shift` (wrapping).
    #[test]
    fn last_sequence_ids_and_shifts() {
        let frame = |seq: u8, body: &[u8]| {
            let mut f = (body.len() as u32).to_le_bytes()[..3].to_vec();
            f.push(seq);
            f.extend_from_slice(body);
            f
        };
        let two = [frame(1, b"abc"), frame(2, b"")].concat();
        let wraps = [frame(254, b"x"), frame(255, b"y")].concat();
        /// (queued bytes, shift, last id, every id after).
        type Case<'a> = (&'a [u8], u8, Option<u8>, &'a [u8]);
        let cases: &[Case] = &[
            (&two, 0, Some(2), &[1, 2]),
            (&two, 3, Some(2), &[4, 5]),
            (&wraps, 2, Some(255), &[0, 1]),
            (&[], 1, None, &[]),
            // A header cut short is not a frame.
            (&[1, 0, 0], 1, None, &[]),
        ];
        for (buf, shift, last, seqs) in cases {
            let mut b = buf.to_vec();
            assert_eq!(last_seq_then_shift(&mut b, *shift), *last, "{buf:?}");
            let mut at = 0;
            let mut got = Vec::new();
            while at + 4 <= b.len() {
                got.push(b[at + 3]);
                at += 4 + usize::from(b[at]);
            }
            assert_eq!(&got, seqs, "{buf:?}");
        }
    }
}
