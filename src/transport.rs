//! A buffered packet connection over one stream (plain TCP, or TLS toward the client or the
//! server): reads whole packets, queues writes, and flushes only when the caller would
//! otherwise wait, so a result relays in few syscalls. With protocol compression on, the
//! frames are (de)compressed here, so everything above sees plain packets.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};

use crate::protocol::codec::{self, CodecError, Packet};
use crate::protocol::compress::{Codec, CompressError};

/// The byte stream under a [`PacketConn`]. An enum rather than a boxed trait object: plain
/// TCP is the hot path, and a match on a local variant costs less than a virtual call and
/// keeps the plain stream inline. The TLS variants are boxed (their state is kilobytes) so
/// that a plain connection does not carry their size.
pub enum Stream {
    Plain(TcpStream),
    /// A client on the Unix socket; never upgraded to TLS (see `session::handshake`).
    Unix(UnixStream),
    /// qcache is the TLS server: the client's leg.
    ServerTls(Box<server::TlsStream<Prefixed>>),
    /// qcache is the TLS client: the upstream leg.
    ClientTls(Box<client::TlsStream<TcpStream>>),
    /// Only while a TLS handshake owns the socket; IO on it fails.
    Upgrading,
}

/// A TCP stream with bytes already read from it in front. A client sends its TLS
/// ClientHello right after its SSL request without waiting, so one read may have taken
/// both into the packet buffer; the TLS server must see those bytes first.
pub struct Prefixed {
    prefix: BytesMut,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn upgrading() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "stream is being upgraded to TLS",
    )
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(upgrading())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(upgrading())),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Upgrading => Poll::Ready(Err(upgrading())),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Unix(s) => s.is_write_vectored(),
            Stream::ServerTls(s) => s.is_write_vectored(),
            Stream::ClientTls(s) => s.is_write_vectored(),
            Stream::Upgrading => false,
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Upgrading => Poll::Ready(Err(upgrading())),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Upgrading => Poll::Ready(Ok(())),
        }
    }
}

/// Write buffers beyond this are flushed at once, which bounds memory per session and makes
/// a slow reader push back on the upstream.
const FLUSH_AT: usize = 256 * 1024;

pub struct PacketConn {
    io: Stream,
    /// Plain packets read and not yet decoded.
    rbuf: BytesMut,
    wbuf: BytesMut,
    compressed: Option<Box<Compressed>>,
    /// Largest logical packet accepted from the peer.
    pub max_payload: usize,
    /// A flush that makes no progress for this long fails.
    pub write_timeout: Option<Duration>,
    /// Set by [`PacketConn::reset_on_close`]: the close sends RST, not FIN.
    reset_on_close: bool,
    /// When bytes last went out, on a leg that asked for it ([`PacketConn::track_writes`]):
    /// the upstream's, whose idle timers run from its last command.
    last_flush: Option<std::time::Instant>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("connection closed by peer")]
    Closed,
    #[error("write timed out")]
    WriteTimeout,
    #[error(transparent)]
    Compress(#[from] CompressError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ConnError {
    /// Whether the peer ended the connection with a reset (RST) rather than an orderly
    /// close (FIN, [`ConnError::Closed`]).
    pub fn is_reset(&self) -> bool {
        matches!(self, ConnError::Io(e) if e.kind() == io::ErrorKind::ConnectionReset)
    }
}

/// A leg in the compressed protocol. Two sequences run on it: the frames' own, and the plain
/// packets' inside them. Servers re-sync the inner one to the frame count at every flush
/// (`net_flush` in MySQL and MariaDB), so inner ids read off a compressed leg jump; qcache
/// renumbers them as a plain stream would carry them, so the rest of the session (and the
/// other leg, compressed or not) sees one canonical numbering.
struct Compressed {
    codec: Codec,
    /// Bytes off the socket that are not yet a whole frame.
    raw: BytesMut,
    /// Frames built at flush time.
    out: BytesMut,
    /// The next frame's sequence id: one past the last frame either side sent.
    frame_seq: u8,
    /// The sequence id the next plain packet read carries in a plain stream.
    inner_seq: u8,
    /// Added to the ids of packets written: the server re-syncs its plain ids to the frame
    /// count at each net_flush, which is at least at the end of every result.
    shift: u8,
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Plain(s)
    }
}

impl Stream {
    /// Who is on the other end, for logs: `ip:port`, or `unix:<socket path>`.
    pub fn peer(&self) -> String {
        match self {
            Stream::Plain(s) => s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
            Stream::Unix(s) => s
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_else(|| "unix".into()),
            Stream::ServerTls(s) => s
                .get_ref()
                .0
                .inner
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            Stream::ClientTls(s) => s
                .get_ref()
                .0
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            Stream::Upgrading => String::new(),
        }
    }
}

impl PacketConn {
    pub fn new(io: impl Into<Stream>, max_payload: usize) -> PacketConn {
        let io = io.into();
        if let Stream::Plain(s) = &io {
            let _ = s.set_nodelay(true);
        }
        PacketConn {
            io,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(16 * 1024),
            compressed: None,
            max_payload,
            write_timeout: None,
            reset_on_close: false,
            last_flush: None,
        }
    }

    /// Makes this leg's close abortive (SO_LINGER 0: RST, not FIN), as the server closed the
    /// other: a client that sees its connection reset directly must see it reset through
    /// qcache too. A Unix socket has no reset and closes as it would.
    pub fn reset_on_close(&mut self) {
        let tcp = match &self.io {
            Stream::Plain(s) => Some(s),
            Stream::ServerTls(s) => Some(&s.get_ref().0.inner),
            Stream::ClientTls(s) => Some(s.get_ref().0),
            Stream::Unix(_) | Stream::Upgrading => None,
        };
        if let Some(tcp) = tcp {
            self.reset_on_close = tcp.set_zero_linger().is_ok();
        }
    }

    /// Switches this leg to the compressed protocol, as both ends do right after the OK
    /// that ends authentication.
    pub fn enable_compression(&mut self, codec: Codec) {
        // Anything read ahead is already the peer's first frame.
        let raw = self.rbuf.split();
        self.compressed = Some(Box::new(Compressed {
            codec,
            raw,
            out: BytesMut::new(),
            frame_seq: 0,
            inner_seq: 0,
            shift: 0,
        }));
    }

    pub fn compression(&self) -> Option<&Codec> {
        self.compressed.as_ref().map(|c| &c.codec)
    }

    /// A command starts both sequences again at 0 (MySQL's `net_new_transaction`). Call it
    /// before reading a client's command and before sending one upstream; without
    /// compression the ids travel in the packets and nothing needs resetting.
    /// Keeps the time of every flush from now on ([`PacketConn::last_flush`]).
    pub fn track_writes(&mut self) {
        self.last_flush = Some(std::time::Instant::now());
    }

    /// When bytes last went out, if [`PacketConn::track_writes`] was asked.
    #[inline]
    pub fn last_flush(&self) -> Option<std::time::Instant> {
        self.last_flush
    }

    pub fn start_command(&mut self) {
        if let Some(c) = &mut self.compressed {
            c.frame_seq = 0;
            c.inner_seq = 0;
            c.shift = 0;
        }
    }

    /// Ends a frame where a server's net_flush would (the end of a result that more results
    /// follow): the packets after it are numbered from the next frame's id, as the server does.
    /// `next` is the canonical id of the packet that follows.
    pub async fn sync_at_result_end(&mut self, next: u8) -> Result<(), ConnError> {
        if self.compressed.is_none() {
            return Ok(());
        }
        self.flush().await?;
        if let Some(c) = &mut self.compressed {
            c.shift = c.frame_seq.wrapping_sub(next);
        }
        Ok(())
    }

    /// A packet already in the read buffer, without touching the socket.
    pub fn try_decode(&mut self) -> Result<Option<Packet>, ConnError> {
        let Some(c) = &mut self.compressed else {
            return Ok(codec::decode(&mut self.rbuf, self.max_payload)?);
        };
        loop {
            if let Some(mut p) = codec::decode(&mut self.rbuf, self.max_payload)? {
                p.seq = c.inner_seq;
                c.inner_seq = p.next_seq();
                return Ok(Some(p));
            }
            match c.codec.decode_frame(&mut c.raw, &mut self.rbuf)? {
                Some(seq) => c.frame_seq = seq.wrapping_add(1),
                None => return Ok(None),
            }
        }
    }

    /// The length of the next packet's frame (header included) when it is whole in the read
    /// buffer and takes one frame; see [`frame`](Self::frame) and [`consume`](Self::consume).
    /// Lets a relay copy a packet straight from one buffer to the other, without splitting
    /// it off into its own `Bytes` and framing it again.
    pub fn next_frame_len(&self) -> Option<usize> {
        if self.compressed.is_some() {
            // Packets read off a compressed leg are renumbered as they are decoded
            // (see `Compressed`), so they must go through `try_decode`.
            return None;
        }
        let h = self.rbuf.get(..4)?;
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        (len < codec::MAX_FRAME && len <= self.max_payload && self.rbuf.len() >= 4 + len)
            .then_some(4 + len)
    }

    /// The first `len` buffered bytes (a frame measured by `next_frame_len`).
    pub fn frame(&self, len: usize) -> &[u8] {
        &self.rbuf[..len]
    }

    /// Drops the first `len` buffered bytes.
    pub fn consume(&mut self, len: usize) {
        self.rbuf.advance(len);
    }

    /// The next packet; `Ok(None)` when the peer closed cleanly between packets.
    pub async fn read(&mut self) -> Result<Option<Packet>, ConnError> {
        loop {
            if let Some(p) = self.try_decode()? {
                return Ok(Some(p));
            }
            if self.read_more().await? == 0 {
                let raw_empty = self.compressed.as_ref().is_none_or(|c| c.raw.is_empty());
                return if self.rbuf.is_empty() && raw_empty {
                    Ok(None)
                } else {
                    Err(ConnError::Closed)
                };
            }
        }
    }

    /// Reads more bytes off the socket without decoding them, for a caller that takes
    /// packets with [`try_decode`](Self::try_decode) or, on a plain leg, copies them with
    /// [`next_frame_len`](Self::next_frame_len) and [`frame`](Self::frame). A close is an
    /// error.
    pub async fn fill(&mut self) -> Result<(), ConnError> {
        match self.read_more().await? {
            0 => Err(ConnError::Closed),
            _ => Ok(()),
        }
    }

    /// One read into the buffer the next bytes belong to; 0 when the peer closed.
    async fn read_more(&mut self) -> Result<usize, ConnError> {
        let buf = match &mut self.compressed {
            Some(c) => &mut c.raw,
            None => &mut self.rbuf,
        };
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        Ok(self.io.read_buf(buf).await?)
    }

    /// Like [`read`](Self::read), but a clean close is an error too.
    pub async fn read_some(&mut self) -> Result<Packet, ConnError> {
        self.read().await?.ok_or(ConnError::Closed)
    }

    /// Queues a packet; returns the sequence id that follows it.
    pub fn push(&mut self, seq: u8, payload: &[u8]) -> u8 {
        codec::encode(seq, payload, &mut self.wbuf)
    }

    /// Queues bytes that are already framed.
    pub fn push_raw(&mut self, framed: &[u8]) {
        self.wbuf.extend_from_slice(framed);
    }

    pub fn wbuf(&mut self) -> &mut BytesMut {
        &mut self.wbuf
    }

    pub fn pending(&self) -> usize {
        self.wbuf.len()
    }

    /// Flushes when the queue is large; keeps small writes batched.
    pub async fn flush_if_large(&mut self) -> Result<(), ConnError> {
        if self.wbuf.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<(), ConnError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        if let Some(t) = &mut self.last_flush {
            *t = std::time::Instant::now();
        }
        if let Some(c) = &mut self.compressed {
            // Reads go on in the canonical numbering; the client sees the shifted one.
            if let Some(last) = codec::last_seq_then_shift(&mut self.wbuf, c.shift) {
                c.inner_seq = last.wrapping_add(1);
            }
            c.out.clear();
            c.frame_seq = c.codec.encode(&self.wbuf, c.frame_seq, &mut c.out);
            self.wbuf.clear();
            write_all(&mut self.io, &c.out, self.write_timeout).await?;
            if c.out.capacity() > 4 * FLUSH_AT {
                // A large result passed; do not keep its buffer for an idle session.
                c.out = BytesMut::new();
            }
            return Ok(());
        }
        write_all(&mut self.io, &self.wbuf, self.write_timeout).await?;
        self.wbuf.clear();
        Ok(())
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) -> Result<u8, ConnError> {
        let next = self.push(seq, payload);
        self.flush().await?;
        Ok(next)
    }

    pub async fn shutdown(&mut self) {
        let _ = self.flush().await;
        // An abortive close sends no FIN (nor TLS close_notify) first: the drop resets.
        if !self.reset_on_close {
            let _ = self.io.shutdown().await;
        }
    }

    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        match &self.io {
            Stream::Plain(s) => s.peer_addr().ok(),
            Stream::Unix(_) => None,
            Stream::ServerTls(s) => s.get_ref().0.inner.peer_addr().ok(),
            Stream::ClientTls(s) => s.get_ref().0.peer_addr().ok(),
            Stream::Upgrading => None,
        }
    }

    /// True for a client on the Unix socket.
    pub fn is_local(&self) -> bool {
        matches!(self.io, Stream::Unix(_))
    }

    /// The TLS version and cipher suite of a leg qcache terminates (the client's), as the
    /// server names them in `Ssl_version` and `Ssl_cipher`; None when the leg is plain.
    pub fn tls_session(&self) -> Option<(String, String)> {
        let Stream::ServerTls(s) = &self.io else {
            return None;
        };
        let conn = s.get_ref().1;
        let version = match conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
            v => format!("{v:?}"),
        };
        let suite = conn.negotiated_cipher_suite()?.suite();
        let name = suite.as_str().map(str::to_string).unwrap_or_default();
        Some((
            version,
            crate::policy::diagnostics::openssl_cipher_name(&name),
        ))
    }

    /// True once the stream is encrypted, in either direction.
    pub fn is_tls(&self) -> bool {
        matches!(self.io, Stream::ServerTls(_) | Stream::ClientTls(_))
    }

    fn take_plain(&mut self) -> io::Result<TcpStream> {
        match std::mem::replace(&mut self.io, Stream::Upgrading) {
            Stream::Plain(s) => Ok(s),
            other => {
                self.io = other;
                Err(io::Error::other("the stream is not plain TCP"))
            }
        }
    }

    /// Becomes the TLS server on this stream (after the client's SSL request). Bytes of the
    /// ClientHello that were already read stay in front of the socket. Pending writes go
    /// out in the clear first: nothing should be pending at this point.
    pub async fn accept_tls(&mut self, acceptor: &TlsAcceptor) -> Result<(), ConnError> {
        self.flush().await?;
        let inner = self.take_plain()?;
        let prefix = self.rbuf.split();
        let tls = acceptor.accept(Prefixed { prefix, inner }).await?;
        self.io = Stream::ServerTls(Box::new(tls));
        Ok(())
    }

    /// Becomes the TLS client on this stream (after sending the SSL request upstream). The
    /// server says nothing between the SSL request and the handshake, so unread bytes here
    /// would be a protocol violation.
    pub async fn connect_tls(
        &mut self,
        connector: &TlsConnector,
        name: ServerName<'static>,
    ) -> Result<(), ConnError> {
        self.flush().await?;
        if !self.rbuf.is_empty() {
            return Err(ConnError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server sent data before the TLS handshake",
            )));
        }
        let inner = self.take_plain()?;
        let tls = connector.connect(name, inner).await?;
        self.io = Stream::ClientTls(Box::new(tls));
        Ok(())
    }
}

/// Writes all of `buf` and flushes the stream; a write that makes no progress for `timeout`
/// fails.
///
/// The flush matters for TLS: rustls accepts plaintext into its buffer and reports it
/// written even when the socket took only part of the records. Without a flush the tail of
/// a response can stay in that buffer while qcache waits for the client's next command and
/// the client waits for the rest of the response. For plain TCP the flush is a no-op.
async fn write_all(
    io: &mut Stream,
    buf: &[u8],
    timeout: Option<Duration>,
) -> Result<(), ConnError> {
    // Nearly every flush fits the socket buffer in one write: try that before arming a
    // timer, which costs a clock read and a timer entry per flush on the hit path.
    let mut done = 0;
    let flushed = std::future::poll_fn(|cx| {
        while done < buf.len() {
            match Pin::new(&mut *io).poll_write(cx, &buf[done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                // The socket pushes back: the timed write below takes over.
                Poll::Pending => return Poll::Ready(Ok(false)),
            }
        }
        match Pin::new(&mut *io).poll_flush(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(true)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Ready(Ok(false)),
        }
    })
    .await?;
    if flushed {
        return Ok(());
    }
    let fut = async {
        io.write_all(&buf[done..]).await?;
        io.flush().await
    };
    match timeout {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .map_err(|_| ConnError::WriteTimeout)??,
        None => fut.await?,
    }
    Ok(())
}
