//! The compressed protocol's framing, sans IO: 7-byte headers around zlib- or zstd-compressed
//! runs of plain packets, and the per-connection codec state that goes with them.
//!
//! A compressed frame is `comp_len(3) seq(1) plain_len(3)` followed by `comp_len` bytes. A
//! `plain_len` of zero means the bytes are sent as they are (servers do that for payloads
//! under 50 bytes, where compressing costs more than it saves). A frame carries any run of
//! plain packets, whole or in pieces, so frames and packets are cut independently.

use bytes::{Buf, BufMut, BytesMut};
use serde::{Deserialize, Serialize};

/// Largest plain run one frame can describe (its length field is 3 bytes).
pub const MAX_FRAME_PLAIN: usize = 0xFF_FFFF;
/// Below this many bytes a frame goes uncompressed, as MySQL's own `MIN_COMPRESS_LENGTH`.
pub const MIN_COMPRESS_LENGTH: usize = 50;
const HEADER: usize = 7;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// CLIENT_COMPRESS: zlib (RFC 1950) streams, one per frame.
    Zlib,
    /// CLIENT_ZSTD_COMPRESSION_ALGORITHM (MySQL 8.0.18+): one zstd frame per frame.
    Zstd,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompressError {
    #[error("compressed frame does not inflate: {0}")]
    Corrupt(String),
    #[error("compressed frame inflates to {got} bytes, its header says {want}")]
    Length { got: usize, want: usize },
}

/// The compression contexts of one connection leg, created on first use and reset per
/// frame: a fresh zlib deflate state is a few hundred kilobytes to allocate and clear, which
/// would cost more than a point select's frame saves.
pub struct Codec {
    algorithm: Algorithm,
    level: i32,
    zlib_c: Option<flate2::Compress>,
    zlib_d: Option<flate2::Decompress>,
    zstd_c: Option<zstd::bulk::Compressor<'static>>,
    zstd_d: Option<zstd::bulk::Decompressor<'static>>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("algorithm", &self.algorithm)
            .field("level", &self.level)
            .finish()
    }
}

impl Codec {
    /// `level` is clamped to what the algorithm accepts (zlib 0–9, zstd 1–22).
    pub fn new(algorithm: Algorithm, level: i32) -> Codec {
        let level = match algorithm {
            Algorithm::Zlib => level.clamp(0, 9),
            Algorithm::Zstd => level.clamp(1, 22),
        };
        Codec {
            algorithm,
            level,
            zlib_c: None,
            zlib_d: None,
            zstd_c: None,
            zstd_d: None,
            scratch: Vec::new(),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn level(&self) -> i32 {
        self.level
    }

    /// Takes one whole frame off the front of `src`, appending its plain bytes to `dst`.
    /// Returns the frame's sequence id, or None when `src` does not hold a whole frame yet.
    pub fn decode_frame(
        &mut self,
        src: &mut BytesMut,
        dst: &mut BytesMut,
    ) -> Result<Option<u8>, CompressError> {
        if src.len() < HEADER {
            return Ok(None);
        }
        let comp_len = u32::from_le_bytes([src[0], src[1], src[2], 0]) as usize;
        let seq = src[3];
        let plain_len = u32::from_le_bytes([src[4], src[5], src[6], 0]) as usize;
        if src.len() < HEADER + comp_len {
            // Reserve once for the rest of the frame instead of growing read by read.
            src.reserve(HEADER + comp_len - src.len());
            return Ok(None);
        }
        src.advance(HEADER);
        let body = src.split_to(comp_len);
        if plain_len == 0 {
            dst.extend_from_slice(&body);
            return Ok(Some(seq));
        }
        let start = dst.len();
        dst.resize(start + plain_len, 0);
        let got = match self.algorithm {
            Algorithm::Zlib => {
                let d = self
                    .zlib_d
                    .get_or_insert_with(|| flate2::Decompress::new(true));
                d.reset(true);
                let status = d
                    .decompress(&body, &mut dst[start..], flate2::FlushDecompress::Finish)
                    .map_err(|e| CompressError::Corrupt(e.to_string()))?;
                let got = d.total_out() as usize;
                if status != flate2::Status::StreamEnd && got == plain_len {
                    // The output is full and the stream goes on: more than the header said.
                    dst.truncate(start);
                    return Err(CompressError::Length {
                        got: got + 1,
                        want: plain_len,
                    });
                }
                got
            }
            Algorithm::Zstd => {
                let d = match &mut self.zstd_d {
                    Some(d) => d,
                    None => self.zstd_d.insert(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| CompressError::Corrupt(e.to_string()))?,
                    ),
                };
                d.decompress_to_buffer(&body[..], &mut dst[start..])
                    .map_err(|e| CompressError::Corrupt(e.to_string()))?
            }
        };
        if got != plain_len {
            dst.truncate(start);
            return Err(CompressError::Length {
                got,
                want: plain_len,
            });
        }
        Ok(Some(seq))
    }

    /// Appends `plain` to `dst` as frames numbered from `seq`; returns the id after the last.
    pub fn encode(&mut self, plain: &[u8], seq: u8, dst: &mut BytesMut) -> u8 {
        let mut seq = seq;
        for chunk in plain.chunks(MAX_FRAME_PLAIN) {
            let compressed = if chunk.len() >= MIN_COMPRESS_LENGTH {
                self.compress(chunk)
            } else {
                None
            };
            match compressed {
                Some(c) => put_frame(dst, seq, c, chunk.len()),
                None => put_frame(dst, seq, chunk, 0),
            }
            seq = seq.wrapping_add(1);
        }
        seq
    }

    /// The chunk compressed, or None when that would not make it smaller (or the library
    /// fails): the chunk then goes as it is.
    fn compress(&mut self, chunk: &[u8]) -> Option<&[u8]> {
        match self.algorithm {
            Algorithm::Zlib => {
                let level = flate2::Compression::new(self.level as u32);
                let c = self
                    .zlib_c
                    .get_or_insert_with(|| flate2::Compress::new(level, true));
                c.reset();
                self.scratch.clear();
                // Room for no more than the chunk itself: a stream that does not end
                // within it is not worth sending compressed.
                self.scratch.reserve(chunk.len());
                let status = c
                    .compress_vec(chunk, &mut self.scratch, flate2::FlushCompress::Finish)
                    .ok()?;
                (status == flate2::Status::StreamEnd && self.scratch.len() < chunk.len())
                    .then_some(&self.scratch[..])
            }
            Algorithm::Zstd => {
                let level = self.level;
                let c = match &mut self.zstd_c {
                    Some(c) => c,
                    None => self.zstd_c.insert(zstd::bulk::Compressor::new(level).ok()?),
                };
                self.scratch.clear();
                self.scratch
                    .reserve(zstd::zstd_safe::compress_bound(chunk.len()));
                c.compress_to_buffer(chunk, &mut self.scratch).ok()?;
                (self.scratch.len() < chunk.len()).then_some(&self.scratch[..])
            }
        }
    }
}

fn put_frame(dst: &mut BytesMut, seq: u8, body: &[u8], plain_len: usize) {
    dst.reserve(HEADER + body.len());
    dst.put_uint_le(body.len() as u64, 3);
    dst.put_u8(seq);
    dst.put_uint_le(plain_len as u64, 3);
    dst.put_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(algorithm: Algorithm, plain: &[u8]) {
        let mut c = Codec::new(algorithm, 3);
        let mut wire = BytesMut::new();
        let next = c.encode(plain, 7, &mut wire);
        let frames = plain.len().div_ceil(MAX_FRAME_PLAIN);
        assert_eq!(next, 7u8.wrapping_add(frames as u8));
        let mut d = Codec::new(algorithm, 3);
        let mut out = BytesMut::new();
        let mut seqs = Vec::new();
        // Fed a byte at a time at first, to cross every header boundary.
        let mut feed = BytesMut::new();
        let mut at = 0;
        while at < wire.len() {
            let step = if at < 64 { 1 } else { 1 << 16 };
            let end = (at + step).min(wire.len());
            feed.extend_from_slice(&wire[at..end]);
            at = end;
            while let Some(s) = d.decode_frame(&mut feed, &mut out).unwrap() {
                seqs.push(s);
            }
        }
        assert!(feed.is_empty());
        assert_eq!(&out[..], plain);
        assert_eq!(seqs.len(), frames);
        assert!(seqs.iter().copied().eq((0..frames).map(|i| 7 + i as u8)));
    }

    #[test]
    fn round_trips_small_large_and_incompressible() {
        for alg in [Algorithm::Zlib, Algorithm::Zstd] {
            round_trip(alg, b"");
            round_trip(alg, b"short");
            round_trip(alg, &[b'a'; 1000]);
            let noise: Vec<u8> = (0..5000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect();
            round_trip(alg, &noise);
            round_trip(alg, &vec![b'x'; MAX_FRAME_PLAIN + 10]);
        }
    }

    #[test]
    fn small_frames_are_sent_as_they_are() {
        let mut c = Codec::new(Algorithm::Zlib, 6);
        let mut wire = BytesMut::new();
        c.encode(b"\x01\0\0\0\x0e", 0, &mut wire);
        assert_eq!(&wire[..], b"\x05\0\0\0\0\0\0\x01\0\0\0\x0e");
    }

    #[test]
    fn corrupt_frames_are_errors() {
        for alg in [Algorithm::Zlib, Algorithm::Zstd] {
            let mut d = Codec::new(alg, 3);
            let mut wire = BytesMut::from(&b"\x05\0\0\0\x40\0\0garbage"[..]);
            assert!(d.decode_frame(&mut wire, &mut BytesMut::new()).is_err());
            // A valid stream whose header lies about its plain length.
            let mut c = Codec::new(alg, 3);
            let mut good = BytesMut::new();
            c.encode(&[b'z'; 500], 0, &mut good);
            good[4] = 0xf0;
            good[5] = 0x01;
            let mut out = BytesMut::new();
            assert!(d.decode_frame(&mut good, &mut out).is_err());
        }
    }

    /// Levels are clamped to what each algorithm accepts: zlib 0–9, zstd 1–22.
    #[test]
    fn levels_are_clamped_per_algorithm() {
        for (alg, asked, want) in [
            (Algorithm::Zlib, -1, 0),
            (Algorithm::Zlib, 6, 6),
            (Algorithm::Zlib, 12, 9),
            (Algorithm::Zstd, 0, 1),
            (Algorithm::Zstd, 3, 3),
            (Algorithm::Zstd, 40, 22),
        ] {
            let c = Codec::new(alg, asked);
            assert_eq!((c.algorithm(), c.level()), (alg, want), "{alg:?} {asked}");
        }
    }
}
