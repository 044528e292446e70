//! TCP and UDP on the runtime's reactor.
//!
//! `TcpStream` implements the runtime-neutral `futures_io::AsyncRead` and `AsyncWrite`, so
//! `futures::AsyncReadExt`/`AsyncWriteExt` (and libraries written against them) work on it.
//! Every type must be created inside a Volt runtime; after that runtime shuts down, its
//! operations fail with an `io::Error` rather than wait forever.

mod tcp;
mod udp;

pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// Resolve, then try `f` on each address in turn; the last error if all fail.
async fn each_addr<A, T, Fut>(addr: A, mut f: impl FnMut(SocketAddr) -> Fut) -> io::Result<T>
where
    A: ToSocketAddrs,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a).await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any address")))
}
