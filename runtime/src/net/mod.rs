//! TCP, UDP and Unix sockets on the runtime's reactor.
//!
//! ```
//! use futures::{AsyncReadExt, AsyncWriteExt};
//! use volt::net::{TcpListener, TcpStream};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?; // port 0: any free port
//!     let addr = listener.local_addr()?;
//!     let server = volt::spawn(async move {
//!         let (mut conn, _peer) = listener.accept().await?;
//!         let mut buf = [0u8; 5];
//!         conn.read_exact(&mut buf).await?;
//!         conn.write_all(&buf).await // echo it back
//!     });
//!
//!     let mut client = TcpStream::connect(addr).await?;
//!     client.write_all(b"hello").await?;
//!     let mut reply = [0u8; 5];
//!     client.read_exact(&mut reply).await?;
//!     assert_eq!(&reply, b"hello");
//!     server.await.unwrap()
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The example reads and writes with the `futures` crate's `AsyncReadExt` and
//! `AsyncWriteExt`; with the `io-util` feature, `volt::io`'s (Tokio's) work the same.
//!
//! * [`TcpListener`], [`TcpStream`] and [`UdpSocket`] offer the methods Tokio users reach
//!   for, under the same names: `accept`/`poll_accept`, `peek`, `readable`/`writable`,
//!   `ready` with an [`Interest`] (answering a [`Ready`]), `try_read`/`try_write`,
//!   `try_io`/`async_io`, `poll_recv_from`/`poll_send_to` (Tokio's, filling a `ReadBuf`, with
//!   the `tokio-io` feature; `poll_recv_from_into` and the like take a slice),
//!   `set_nodelay`, `set_linger`,
//!   `set_ttl`, multicast, and the socket's fd through `AsFd`/`AsRawFd`.
//! * [`TcpSocket`] sets a socket's options (`SO_REUSEADDR`, `SO_REUSEPORT`, buffer sizes)
//!   before it binds, then connects or listens.
//! * [`UnixListener`], [`UnixStream`] and [`UnixDatagram`] are the Unix domain sockets,
//!   with the halves of a split stream, its address type and the peer's credentials in
//!   [`unix`]. A wait on one shows as `read`/`write` (or `recv`/`send`) with no address.
//! * [`lookup_host`] resolves a host name as `connect` does.
//! * `TcpStream` and its halves always implement the runtime-neutral
//!   `futures_io::AsyncRead`/`AsyncWrite`, so `futures::AsyncReadExt`/`AsyncWriteExt` (and
//!   libraries written against them) work on them. With the `tokio-io` feature they also
//!   implement `tokio::io::AsyncRead`/`AsyncWrite` (Tokio's I/O traits only; no Tokio
//!   runtime is started), so tokio-util's codecs, tokio-rustls and h2 take them as they
//!   are. Reads go straight into the caller's possibly uninitialized buffer, with no
//!   zeroing first.
//! * [`TcpStream::split`] borrows a reader and a writer half; [`TcpStream::into_split`]
//!   gives owned halves that share the socket (and can be [`reunite`](OwnedReadHalf::reunite)d).
//!   The reactor keeps the wakers of every task waiting to read a socket and of every task
//!   waiting to write it, and an event wakes them all: several tasks may accept on one
//!   listener or receive on one UDP socket (shared through an `Arc`), as with Tokio.
//! * Addresses are anything [`ToSocketAddrs`]: a numeric address is used at once, while a
//!   host name (`"localhost:8080"`, `("example.com", 443)`) is resolved on the runtime's
//!   blocking pool, so a slow resolver never stalls a worker.
//!
//! Every type must be created inside a Volt runtime; after that runtime shuts down, its
//! operations fail with an `io::Error` rather than wait forever.

mod addr;
#[cfg(feature = "io-util")]
mod buf;
mod halves;
pub(crate) mod ready;
mod socket;
mod sockopt;
mod split;
pub(crate) mod stream;
#[path = "tcp.rs"]
mod tcp_impl;
mod udp;
#[cfg(unix)]
pub mod unix;

pub use addr::ToSocketAddrs;
pub use ready::{Interest, Ready};
pub use socket::TcpSocket;
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
pub use tcp_impl::{TcpListener, TcpStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixDatagram, UnixListener, UnixSocket, UnixStream};

/// The halves of a split [`TcpStream`], at Tokio's path for them (`tokio::net::tcp`).
pub mod tcp {
    pub use super::split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
}

/// Look `host` up (`"example.com:443"`, `("localhost", 80)`, or any other
/// [`ToSocketAddrs`]): its socket addresses. A numeric address is answered at once; a
/// host name is resolved with the system's resolver on the runtime's blocking pool, so
/// only inside a Volt runtime.
pub async fn lookup_host<T: ToSocketAddrs>(host: T) -> io::Result<impl Iterator<Item = SocketAddr>> {
    addr::resolve(&host).await
}

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
