//! A buffered packet connection over one TCP stream: reads whole packets, queues writes,
//! and flushes only when the caller would otherwise wait, so a result relays in few syscalls.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::protocol::codec::{self, CodecError, Packet};

/// Write buffers beyond this are flushed at once, which bounds memory per session and makes
/// a slow reader push back on the upstream.
const FLUSH_AT: usize = 256 * 1024;

pub struct PacketConn {
    io: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// Largest logical packet accepted from the peer.
    pub max_payload: usize,
    /// A flush that makes no progress for this long fails.
    pub write_timeout: Option<Duration>,
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
    Io(#[from] io::Error),
}

impl PacketConn {
    pub fn new(io: TcpStream, max_payload: usize) -> PacketConn {
        let _ = io.set_nodelay(true);
        PacketConn {
            io,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(16 * 1024),
            max_payload,
            write_timeout: None,
        }
    }

    /// A packet already in the read buffer, without touching the socket.
    pub fn try_decode(&mut self) -> Result<Option<Packet>, ConnError> {
        Ok(codec::decode(&mut self.rbuf, self.max_payload)?)
    }

    /// The next packet; `Ok(None)` when the peer closed cleanly between packets.
    pub async fn read(&mut self) -> Result<Option<Packet>, ConnError> {
        loop {
            if let Some(p) = self.try_decode()? {
                return Ok(Some(p));
            }
            if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                self.rbuf.reserve(16 * 1024);
            }
            let n = self.io.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(ConnError::Closed)
                };
            }
        }
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
        let fut = self.io.write_all(&self.wbuf);
        match self.write_timeout {
            Some(t) => tokio::time::timeout(t, fut)
                .await
                .map_err(|_| ConnError::WriteTimeout)??,
            None => fut.await?,
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Writes large framed bytes without copying them into the queue.
    pub async fn write_bytes(&mut self, parts: &[&Bytes]) -> Result<(), ConnError> {
        self.flush().await?;
        for part in parts {
            let fut = self.io.write_all(part);
            match self.write_timeout {
                Some(t) => tokio::time::timeout(t, fut)
                    .await
                    .map_err(|_| ConnError::WriteTimeout)??,
                None => fut.await?,
            }
        }
        Ok(())
    }

    pub async fn send(&mut self, seq: u8, payload: &[u8]) -> Result<u8, ConnError> {
        let next = self.push(seq, payload);
        self.flush().await?;
        Ok(next)
    }

    pub async fn shutdown(&mut self) {
        let _ = self.flush().await;
        let _ = self.io.shutdown().await;
    }

    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.io.peer_addr().ok()
    }
}
