//! A buffered packet connection over one stream (plain TCP, or TLS toward the client or the
//! server): reads whole packets, queues writes, and flushes only when the caller would
//! otherwise wait, so a result relays in few syscalls. With protocol compression on, the
//! frames are (de)compressed here, so everything above sees plain packets.

use std::future::Future;
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

/// A plain stream off every runtime's reactor, on its way to another runtime: an accepted
/// client going from the accepting runtime to a session runtime, or a session's legs moving
/// between session runtimes (`workers`).
pub enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Detached {
    /// Leaves the current runtime's reactor.
    pub fn from_stream(s: Stream) -> io::Result<Detached> {
        match s {
            Stream::Plain(s) => Ok(Detached::Tcp(s.into_std()?)),
            Stream::Unix(s) => Ok(Detached::Unix(s.into_std()?)),
            _ => Err(io::Error::other("only a plain stream leaves its runtime")),
        }
    }

    /// Joins the current runtime's reactor.
    pub fn into_stream(self) -> io::Result<Stream> {
        match self {
            Detached::Tcp(s) => Ok(Stream::Plain(TcpStream::from_std(s)?)),
            Detached::Unix(s) => Ok(Stream::Unix(UnixStream::from_std(s)?)),
        }
    }
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

/// A new read or write buffer's size, and the room a read asks for.
const BUF: usize = 16 * 1024;

/// Buffers lent to legs by the thread that runs them. A leg holds a read buffer only while
/// it holds bytes of the peer's not yet taken, and a write buffer only between its first
/// queued byte and the flush that sends it; the rest of the time both are the thread's.
///
/// Why: a hit's request is read into, and its answer copied out of, these buffers. With a
/// pair of 16 KiB buffers per leg, each hit of one connection among fifty touched its own
/// lines, cold since its previous request (and the read buffer was consumed forward, only
/// reclaimed when less than 4 KiB was left: a new line every hit or two). Lent from the
/// session thread, the same few lines serve every connection it runs and stay in cache,
/// and an idle connection holds no buffer at all.
mod spare {
    use std::cell::RefCell;
    use std::thread::LocalKey;

    use bytes::BytesMut;

    use super::{BUF, FLUSH_AT};

    /// Buffers kept per thread and kind: enough for the legs a thread has mid-packet or
    /// mid-flush at once in practice; beyond it buffers are freed as before.
    const KEEP: usize = 4;
    /// Larger buffers (a long packet's, a large result's) are freed, not kept.
    const KEEP_MAX: usize = 2 * FLUSH_AT;

    type Spares = RefCell<Vec<BytesMut>>;

    // One list per kind, each its own thread-local with a constant initializer: a hit
    // takes and gives back one of each, and both must cost little against the misses
    // they save.
    thread_local! {
        static READ: Spares = const { RefCell::new(Vec::new()) };
        static WRITE: Spares = const { RefCell::new(Vec::new()) };
    }

    /// An empty buffer with room for a read, writable from its start.
    #[inline]
    pub(super) fn take_read() -> BytesMut {
        take(&READ)
    }

    /// An empty buffer for a leg's writes.
    #[inline]
    pub(super) fn take_write() -> BytesMut {
        take(&WRITE)
    }

    /// A read buffer taken and not read into, back as it was.
    #[inline]
    pub(super) fn put_back_read(buf: BytesMut) {
        keep(buf, &READ)
    }

    /// Gives back a leg's read buffer once its bytes were all taken. A buffer still
    /// shared with a packet split off it is not read into over that packet: `BytesMut`
    /// keeps the rest of the allocation the packet's until it is dropped.
    #[inline]
    pub(super) fn give_read(mut buf: BytesMut) {
        debug_assert!(buf.is_empty());
        // Back to the allocation's start (a read buffer is consumed forward), so that the
        // next read lands on the same lines. Asking for more than the buffer has left only
        // a move back can give; it changes nothing when nothing was taken, or while a
        // packet split off it is alive.
        let _ = buf.try_reclaim(buf.capacity() + 1);
        keep(buf, &READ)
    }

    /// Gives back a leg's write buffer once flushed and cleared (writes are queued from
    /// its start and it is never consumed forward, so it needs no move back).
    #[inline]
    pub(super) fn give_write(buf: BytesMut) {
        debug_assert!(buf.is_empty());
        keep(buf, &WRITE)
    }

    #[inline]
    fn take(list: &'static LocalKey<Spares>) -> BytesMut {
        list.try_with(|l| l.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| BytesMut::with_capacity(BUF))
    }

    #[inline]
    fn keep(buf: BytesMut, list: &'static LocalKey<Spares>) {
        // Too little left to read into (the tail of a buffer still shared), or too large
        // to keep.
        if !(BUF..=KEEP_MAX).contains(&buf.capacity()) {
            return;
        }
        let _ = list.try_with(|l| {
            let mut l = l.borrow_mut();
            if l.len() < KEEP {
                l.push(buf);
            }
        });
    }
}

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
    /// the upstream's, whose idle timers run from its last command. On [`crate::clock`].
    last_flush: Option<u64>,
    /// The last [`PacketConn::watch`] left this task's waker with the reactor, and nothing
    /// has read this leg since (a read's wake takes the waker).
    parked: bool,
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
            // Lent by the thread when needed (`spare`).
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            compressed: None,
            max_payload,
            write_timeout: None,
            reset_on_close: false,
            last_flush: None,
            parked: false,
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
        self.last_flush = Some(crate::clock::now());
    }

    /// When bytes last went out, if [`PacketConn::track_writes`] was asked.
    #[inline]
    pub fn last_flush(&self) -> Option<u64> {
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
        self.parked = false;
        // A compressed leg's packets are decoded into `rbuf` from `raw`, which keeps its own
        // buffer; and bytes already here (part of a packet) are followed by the rest.
        let buf = match &mut self.compressed {
            Some(c) => Some(&mut c.raw),
            None if !self.rbuf.is_empty() => Some(&mut self.rbuf),
            None => None,
        };
        if let Some(buf) = buf {
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(BUF);
            }
            return Ok(self.io.read_buf(buf).await?);
        }
        // Nothing of the peer's is pending: the read goes into a buffer of the thread's,
        // borrowed for one poll at a time, and the leg keeps it only when bytes arrived.
        // Per poll, so that a leg waiting for its peer (most legs, most of the time) holds
        // none, and a dropped read (a `select!` that took another branch) loses nothing.
        if self.rbuf.capacity() > 0 {
            spare::give_read(std::mem::take(&mut self.rbuf));
        }
        let io = &mut self.io;
        let rbuf = &mut self.rbuf;
        let n = std::future::poll_fn(|cx| loop {
            // A plain socket says whether it has bytes before a buffer is borrowed: a leg
            // polled while its peer is silent (the upstream's, on every hit) borrows none.
            let ready = match &*io {
                Stream::Plain(s) => s.poll_read_ready(cx),
                Stream::Unix(s) => s.poll_read_ready(cx),
                _ => Poll::Ready(Ok(())),
            };
            std::task::ready!(ready)?;
            let mut buf = spare::take_read();
            let r = match &*io {
                Stream::Plain(s) => read_ready(s, &mut buf),
                Stream::Unix(s) => read_ready(s, &mut buf),
                _ => tokio_util::io::poll_read_buf(Pin::new(&mut *io), cx, &mut buf),
            };
            if buf.is_empty() {
                spare::put_back_read(buf);
            } else {
                *rbuf = buf;
            }
            match r {
                // The readiness was stale (cleared now): wait for the next.
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        })
        .await?;
        Ok(n)
    }

    /// Waits for bytes or a close from a peer that owes none (the server between
    /// commands): [`fill`](Self::fill), except that a leg whose last watch parked this
    /// task's waker with the reactor, and that nothing has read since, answers Pending from
    /// the reactor's readiness alone. The command loop asks this after every command, and on a hit nothing has
    /// touched the upstream since the last time: re-registering the same waker cost a
    /// readiness poll per hit (#36). The task must be the one that parked (a session's
    /// legs are unparked when it starts running in a task: [`unpark`](Self::unpark)).
    pub async fn watch(&mut self) -> Result<(), ConnError> {
        if self.compressed.is_none() && self.rbuf.is_empty() {
            let (io, parked) = (&self.io, &mut self.parked);
            std::future::poll_fn(|cx| {
                if *parked && !readable_now(io) {
                    // Not readable, nor closed: the parked waker is woken when it is.
                    return Poll::Pending;
                }
                // Unconstrained by tokio's budget: a Pending for want of budget leaves no
                // waker with the reactor, and a parked leg must have one.
                let ask = std::future::poll_fn(|cx| match io {
                    Stream::Plain(s) => s.poll_read_ready(cx),
                    Stream::Unix(s) => s.poll_read_ready(cx),
                    _ => Poll::Ready(Ok(())),
                });
                let r = std::pin::pin!(tokio::task::unconstrained(ask)).poll(cx);
                *parked = r.is_pending();
                r
            })
            .await?;
        }
        self.fill().await
    }

    /// Forgets a parked waker ([`watch`](Self::watch)): the leg is now read from another
    /// task.
    pub fn unpark(&mut self) {
        self.parked = false;
    }

    /// Like [`read`](Self::read), but a clean close is an error too.
    pub async fn read_some(&mut self) -> Result<Packet, ConnError> {
        self.read().await?.ok_or(ConnError::Closed)
    }

    /// Queues a packet; returns the sequence id that follows it.
    pub fn push(&mut self, seq: u8, payload: &[u8]) -> u8 {
        codec::encode(seq, payload, self.wbuf())
    }

    /// Queues bytes that are already framed.
    pub fn push_raw(&mut self, framed: &[u8]) {
        self.wbuf().extend_from_slice(framed);
    }

    /// The write queue, borrowed from the thread if the leg holds none (`spare`).
    #[inline]
    pub fn wbuf(&mut self) -> &mut BytesMut {
        if self.wbuf.capacity() == 0 {
            self.wbuf = spare::take_write();
        }
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
            release_wbuf(&mut self.wbuf);
            return Ok(());
        }
        if let Some(t) = &mut self.last_flush {
            *t = crate::clock::now();
        }
        if let Some(c) = &mut self.compressed {
            // Reads go on in the canonical numbering; the client sees the shifted one.
            if let Some(last) = codec::last_seq_then_shift(&mut self.wbuf, c.shift) {
                c.inner_seq = last.wrapping_add(1);
            }
            c.out.clear();
            c.frame_seq = c.codec.encode(&self.wbuf, c.frame_seq, &mut c.out);
            self.wbuf.clear();
            release_wbuf(&mut self.wbuf);
            write_all(&mut self.io, &c.out, self.write_timeout).await?;
            if c.out.capacity() > 4 * FLUSH_AT {
                // A large result passed; do not keep its buffer for an idle session.
                c.out = BytesMut::new();
            }
            return Ok(());
        }
        write_all(&mut self.io, &self.wbuf, self.write_timeout).await?;
        self.wbuf.clear();
        release_wbuf(&mut self.wbuf);
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

    /// Takes a plain stream off this thread's reactor, so that another session runtime can
    /// take it ([`PacketConn::attach`]); the leg's buffers stay. A TLS leg cannot (its state
    /// would have to move with it): see [`can_detach`](Self::can_detach).
    pub fn detach(&mut self) -> io::Result<Detached> {
        Detached::from_stream(std::mem::replace(&mut self.io, Stream::Upgrading))
    }

    /// Puts a detached stream on the current runtime's reactor.
    pub fn attach(&mut self, d: Detached) -> io::Result<()> {
        self.io = d.into_stream()?;
        self.parked = false;
        Ok(())
    }

    /// True when [`detach`](Self::detach) would take the stream.
    pub fn can_detach(&self) -> bool {
        matches!(self.io, Stream::Plain(_) | Stream::Unix(_))
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

/// Gives a leg's emptied write queue back to the thread (`spare`).
fn release_wbuf(wbuf: &mut BytesMut) {
    if wbuf.capacity() > 0 {
        spare::give_write(std::mem::take(wbuf));
    }
}

/// Writes all of `buf` and flushes the stream; a write that makes no progress for `timeout`
/// fails.
///
/// The flush matters for TLS: rustls accepts plaintext into its buffer and reports it
/// written even when the socket took only part of the records. Without a flush the tail of
/// a response can stay in that buffer while qcache waits for the client's next command and
/// the client waits for the rest of the response. For plain TCP the flush is a no-op.
/// Whether the reactor last saw `io` readable or closed (true for a stream it does not
/// watch alone); asks nothing of the socket and registers no waker.
fn readable_now(io: &Stream) -> bool {
    let ready = match io {
        Stream::Plain(s) => s.try_io(tokio::io::Interest::READABLE, || Ok(())),
        Stream::Unix(s) => s.try_io(tokio::io::Interest::READABLE, || Ok(())),
        _ => Ok(()),
    };
    !ready.is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock)
}

/// Writes what it can of `buf[*done..]` without waiting: true when all of it went.
#[inline]
fn write_ready(
    buf: &[u8],
    done: &mut usize,
    mut write: impl FnMut(&[u8]) -> io::Result<usize>,
) -> io::Result<bool> {
    while *done < buf.len() {
        match write(&buf[*done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// A socket the reactor said is readable, read without polling it again.
trait ReadReady {
    fn try_read_into(&self, buf: &mut BytesMut) -> io::Result<usize>;
    fn try_io_read(&self, f: impl FnOnce() -> io::Result<usize>) -> io::Result<usize>;
}

impl ReadReady for TcpStream {
    fn try_read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.try_read_buf(buf)
    }
    fn try_io_read(&self, f: impl FnOnce() -> io::Result<usize>) -> io::Result<usize> {
        self.try_io(tokio::io::Interest::READABLE, f)
    }
}

impl ReadReady for UnixStream {
    fn try_read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.try_read_buf(buf)
    }
    fn try_io_read(&self, f: impl FnOnce() -> io::Result<usize>) -> io::Result<usize> {
        self.try_io(tokio::io::Interest::READABLE, f)
    }
}

/// One read into `buf` of a socket the reactor says is readable. A read that leaves room in
/// the buffer emptied the socket: its readiness is cleared then, as tokio's own
/// `poll_read` does, so that the next wait parks instead of trying a read that would
/// find nothing (a syscall per command). WouldBlock: the readiness was stale, and is
/// cleared.
fn read_ready(s: &impl ReadReady, buf: &mut BytesMut) -> Poll<io::Result<usize>> {
    let mut got = 0;
    let r = s.try_io_read(|| {
        got = s.try_read_into(buf)?;
        if got > 0 && buf.capacity() > buf.len() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(got)
    });
    Poll::Ready(match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    })
}

async fn write_all(
    io: &mut Stream,
    buf: &[u8],
    timeout: Option<Duration>,
) -> Result<(), ConnError> {
    // Nearly every flush fits the socket buffer in one write: try that before arming a
    // timer, which costs a clock read and a timer entry per flush on the hit path. On a
    // plain socket the write goes through the reactor's last known readiness, without a
    // poll (a plain socket's flush does nothing).
    let mut done = 0;
    let tried = match &*io {
        Stream::Plain(s) => write_ready(buf, &mut done, |b| s.try_write(b)),
        Stream::Unix(s) => write_ready(buf, &mut done, |b| s.try_write(b)),
        _ => Ok(false),
    };
    if tried? {
        return Ok(());
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use tokio::io::AsyncWriteExt;

    /// A read buffer given back after its packet was taken and dropped is read into from
    /// its start again: the lines a hit's request lands on are the same every time.
    #[test]
    fn a_read_buffer_goes_back_to_its_start() {
        let mut buf = spare::take_read();
        let start = buf.as_ptr();
        buf.put_slice(&[3, 0, 0, 0, 3, b'a', b'b']);
        let packet = codec::decode(&mut buf, 1 << 20).unwrap().unwrap();
        assert_eq!(&packet.payload[..], &[3, b'a', b'b']);
        assert_ne!(buf.as_ptr(), start);
        drop(packet);
        spare::give_read(buf);
        let again = spare::take_read();
        assert_eq!(again.as_ptr(), start);
        assert!(again.is_empty() && again.capacity() >= BUF);
    }

    /// A buffer whose packet is still alive is not read into over that packet.
    #[test]
    fn a_packet_outlives_its_buffer_being_given_back() {
        let mut buf = spare::take_read();
        buf.put_slice(&[2, 0, 0, 0, 3, b'x']);
        let packet = codec::decode(&mut buf, 1 << 20).unwrap().unwrap();
        spare::give_read(buf);
        let mut next = spare::take_read();
        next.put_bytes(b'y', BUF);
        assert_eq!(&packet.payload[..], &[3, b'x']);
    }

    /// Packets cut anywhere across reads, pipelined ones, and one larger than a buffer
    /// come out whole while earlier packets are still held.
    #[tokio::test]
    async fn packets_across_reads_with_lent_buffers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut peer = TcpStream::connect(addr).await.unwrap();
        let (ours, _) = listener.accept().await.unwrap();
        let mut conn = PacketConn::new(ours, 1 << 20);

        let big = vec![7u8; 3 * BUF + 5];
        let mut wire = BytesMut::new();
        let payloads: Vec<Vec<u8>> = vec![b"\x03SELECT 1".to_vec(), big, b"\x0e".to_vec()];
        for (i, p) in payloads.iter().enumerate() {
            codec::encode(i as u8, p, &mut wire);
        }
        let writer = tokio::spawn(async move {
            // The first packet's header alone, then the rest in uneven pieces.
            for piece in [&wire[..2], &wire[2..9], &wire[9..5000], &wire[5000..]] {
                peer.write_all(piece).await.unwrap();
                peer.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peer
        });
        let mut held = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            let got = conn.read().await.unwrap().unwrap();
            assert_eq!(got.seq, i as u8);
            assert_eq!(&got.payload[..], &p[..]);
            held.push(got);
        }
        for (got, p) in held.iter().zip(&payloads) {
            assert_eq!(&got.payload[..], &p[..]);
        }
        // Writes queue in a lent buffer and go out at the flush.
        conn.push(1, b"\x00\x00\x00\x02\x00\x00\x00");
        assert_eq!(conn.pending(), 11);
        conn.flush().await.unwrap();
        assert_eq!(conn.pending(), 0);
        let mut peer = writer.await.unwrap();
        let mut ok = [0u8; 11];
        tokio::io::AsyncReadExt::read_exact(&mut peer, &mut ok)
            .await
            .unwrap();
        assert_eq!(ok, [7, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]);
        drop(peer);
        assert!(conn.read().await.unwrap().is_none());
    }
}
