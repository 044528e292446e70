//! [`Listener`]: one trait over Volt's TCP and Unix listeners (tokio-util's `net`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio_util::either::Either;
use volt::io::{AsyncRead, AsyncWrite};

/// Something that accepts connections: Volt's `TcpListener` and `UnixListener`, or
/// either of two listeners (`Either`; there `accept` gives an `Either` of connections and
/// one of addresses, where tokio-util's `Either` has its own `accept` giving an `Either`
/// of pairs, which a crate other than tokio-util cannot add to its type).
pub trait Listener {
    /// A connection.
    type Io: AsyncRead + AsyncWrite;
    /// A connection's peer address.
    type Addr;

    /// The next connection, or a wait for one.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Self::Addr)>>;

    /// The next connection.
    fn accept(&mut self) -> ListenerAcceptFut<'_, Self>
    where
        Self: Sized,
    {
        ListenerAcceptFut { listener: self }
    }

    /// The address it listens on.
    fn local_addr(&self) -> io::Result<Self::Addr>;
}

/// The future of [`Listener::accept`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct ListenerAcceptFut<'a, L> {
    listener: &'a mut L,
}

impl<L: Listener> Future for ListenerAcceptFut<'_, L> {
    type Output = io::Result<(L::Io, L::Addr)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.listener.poll_accept(cx)
    }
}

impl Listener for volt::net::TcpListener {
    type Io = volt::net::TcpStream;
    type Addr = std::net::SocketAddr;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Self::Addr)>> {
        volt::net::TcpListener::poll_accept(self, cx)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        volt::net::TcpListener::local_addr(self)
    }
}

impl Listener for volt::net::UnixListener {
    type Io = volt::net::UnixStream;
    type Addr = volt::net::unix::SocketAddr;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Self::Addr)>> {
        volt::net::UnixListener::poll_accept(self, cx)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        volt::net::UnixListener::local_addr(self)
    }
}

impl<L: Listener, R: Listener> Listener for Either<L, R> {
    type Io = Either<L::Io, R::Io>;
    type Addr = Either<L::Addr, R::Addr>;

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Self::Addr)>> {
        match self {
            Either::Left(l) => l.poll_accept(cx).map_ok(|(io, addr)| (Either::Left(io), Either::Left(addr))),
            Either::Right(r) => r.poll_accept(cx).map_ok(|(io, addr)| (Either::Right(io), Either::Right(addr))),
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        match self {
            Either::Left(l) => l.local_addr().map(Either::Left),
            Either::Right(r) => r.local_addr().map(Either::Right),
        }
    }
}
