//! Bounds on the gRPC ports' connections (the Raft peer service here, the etcd client port in
//! `k3rs-server`): tonic accepts every connection and starts its TLS handshake in a task of
//! its own, without a cap. [`incoming`] caps the connections open at once; the handshake
//! timeout is tonic's (`ServerTlsConfig::timeout`, [`HANDSHAKE_TIMEOUT`]).
//!
//! # Guarantees
//! - At most `max` connections (handshaking or served) are open; a connection beyond that is
//!   closed as soon as it is accepted, so clients cannot exhaust file descriptors or memory.
//! - A connection's slot is freed when tonic drops the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a client may take to finish its TLS handshake (the API server's bound too).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once on one port (the API server's cap too).
pub const MAX_CONNECTIONS: usize = 8192;

/// An accepted connection holding one of the port's slots.
#[derive(Debug)]
pub struct Limited {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
}

/// The connections `listener` accepts (with `TCP_NODELAY`), at most `max` open at once.
pub fn incoming(
    listener: TcpListener,
    max: usize,
) -> impl Stream<Item = std::io::Result<Limited>> + Send + 'static {
    let slots = Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS)));
    tokio_stream::wrappers::TcpListenerStream::new(listener).filter_map(move |conn| {
        let io = match conn {
            Ok(io) => io,
            Err(e) => return Some(Err(e)),
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(
                peer = ?io.peer_addr().ok(),
                max,
                "too many connections; closing a new one"
            );
            return None;
        };
        // Small responses must not wait for Nagle's algorithm.
        let _ = io.set_nodelay(true);
        Some(Ok(Limited { io, _slot: slot }))
    })
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Whether the server closed `c` (EOF or reset) within `within`.
    async fn closed(c: &mut TcpStream, within: Duration) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(within, c.read(&mut b)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn connections_beyond_the_cap_are_closed_and_slots_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accepted = Box::pin(incoming(listener, 2));
        let mut clients = Vec::new();
        let mut held = Vec::new();
        for _ in 0..2 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            held.push(accepted.next().await.unwrap().unwrap());
        }
        // The third is accepted and closed at once; the stream waits for the next.
        let mut third = TcpStream::connect(addr).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(300), accepted.next()).await;
        assert!(waited.is_err(), "nothing yielded beyond the cap");
        assert!(closed(&mut third, Duration::from_secs(5)).await);
        assert!(!closed(&mut clients[0], Duration::from_millis(100)).await);
        // A served connection ending frees its slot.
        drop(held.pop());
        let _fourth = TcpStream::connect(addr).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), accepted.next()).await;
        assert!(
            matches!(next, Ok(Some(Ok(_)))),
            "a freed slot is used again"
        );
    }
}
