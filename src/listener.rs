//! Where clients connect: the TCP listener and the Unix socket (`server.socket`), accepted
//! into one stream type, and the socket file's life (a stale file replaced at start, a live
//! one never; the file removed at stop).

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};

use crate::transport::Stream;

/// The listeners qcache accepts on: at least one of the two is present.
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub unix: Option<UnixSocketListener>,
}

impl Listeners {
    /// The next client on either listener.
    pub async fn accept(&self) -> io::Result<Stream> {
        tokio::select! {
            r = accept_tcp(self.tcp.as_ref()) => r,
            r = accept_unix(self.unix.as_ref()) => r,
        }
    }
}

async fn accept_tcp(l: Option<&TcpListener>) -> io::Result<Stream> {
    match l {
        Some(l) => Ok(Stream::Plain(l.accept().await?.0)),
        None => std::future::pending().await,
    }
}

async fn accept_unix(l: Option<&UnixSocketListener>) -> io::Result<Stream> {
    match l {
        Some(l) => Ok(Stream::Unix(l.listener.accept().await?.0)),
        None => std::future::pending().await,
    }
}

/// The Unix socket clients on the same host (or pod, through a shared volume) connect to,
/// as mysqld's `--socket`. The file is removed when this is dropped, unless another process
/// has replaced it meanwhile.
pub struct UnixSocketListener {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the file this listener created.
    id: (u64, u64),
}

impl UnixSocketListener {
    /// Binds `path` with `backlog`. A socket file already there is replaced only when
    /// nothing answers on it (a qcache that was killed left it); a live socket or a file that
    /// is not a socket is an error, never deleted.
    pub async fn bind(path: &Path, backlog: u32) -> io::Result<UnixSocketListener> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                let probe = tokio::time::timeout(
                    Duration::from_secs(1),
                    tokio::net::UnixStream::connect(path),
                )
                .await;
                match probe {
                    Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tracing::info!(path = %path.display(), "replacing a stale socket file");
                        std::fs::remove_file(path)?;
                    }
                    Ok(Err(e)) => return Err(e),
                    // Answered, or so busy its backlog is full: someone is serving it.
                    Ok(Ok(_)) | Err(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            "another process is listening on this socket",
                        ))
                    }
                }
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the path exists and is not a socket; qcache does not replace it",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let socket = tokio::net::UnixSocket::new_stream()?;
        socket.bind(path)?;
        let listener = socket.listen(backlog)?;
        // Anyone on the host may connect, as to mysqld's socket: the MySQL login that follows
        // is the access control. Narrow it with the directory's permissions.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
        let m = std::fs::symlink_metadata(path)?;
        Ok(UnixSocketListener {
            listener,
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixSocketListener {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.id && m.file_type().is_socket());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
