//! TCP and UDP on the runtime's reactor.
//!
//! * [`TcpListener`], [`TcpStream`] and [`UdpSocket`] offer the methods Tokio users reach
//!   for, under the same names: `accept`/`poll_accept`, `peek`, `readable`/`writable`,
//!   `try_read`/`try_write`, `poll_recv_from`/`poll_send_to`, `set_nodelay`, `set_linger`,
//!   `set_ttl`, and the socket's fd through `AsFd`/`AsRawFd`.
//! * `TcpStream` and its halves always implement the runtime-neutral
//!   `futures_io::AsyncRead`/`AsyncWrite`, so `futures::AsyncReadExt`/`AsyncWriteExt` (and
//!   libraries written against them) work on them. With the `tokio-io` feature they also
//!   implement `tokio::io::AsyncRead`/`AsyncWrite` (Tokio's I/O traits only; no Tokio
//!   runtime is started), so tokio-util's codecs, tokio-rustls and h2 take them as they
//!   are. Reads go straight into the caller's possibly uninitialized buffer, with no
//!   zeroing first.
//! * [`TcpStream::split`] borrows a reader and a writer half; [`TcpStream::into_split`]
//!   gives owned halves that share the socket (and can be [`reunite`](OwnedReadHalf::reunite)d).
//!   The reactor keeps one waker for the reading task and one for the writing task of each
//!   socket: one task reading and one task writing at a time is the contract (two tasks
//!   waiting to read the same socket would take turns stealing each other's wake-ups).
//! * Addresses are anything [`ToSocketAddrs`]: a numeric address is used at once, while a
//!   host name (`"localhost:8080"`, `("example.com", 443)`) is resolved on the runtime's
//!   blocking pool, so a slow resolver never stalls a worker.
//!
//! Every type must be created inside a Volt runtime; after that runtime shuts down, its
//! operations fail with an `io::Error` rather than wait forever.

mod addr;
mod split;
mod tcp;
mod udp;

pub use addr::ToSocketAddrs;
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;

use std::io;
use std::net::SocketAddr;

/// Resolve (see [`ToSocketAddrs`]), then try `f` on each address in turn. If all fail:
/// a port in use is the error returned, whichever address it came from (`localhost:P`
/// on a host without IPv6 whose `127.0.0.1:P` is taken fails on `::1` for another
/// reason after it), else the last error.
async fn each_addr<A, T, Fut>(addr: A, mut f: impl FnMut(SocketAddr) -> Fut) -> io::Result<T>
where
    A: ToSocketAddrs,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut err: Option<io::Error> = None;
    for a in addr::resolve(&addr).await? {
        match f(a).await {
            Ok(v) => return Ok(v),
            Err(_) if err.as_ref().is_some_and(|p| p.kind() == io::ErrorKind::AddrInUse) => {}
            Err(e) => err = Some(e),
        }
    }
    Err(err.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any address")))
}
