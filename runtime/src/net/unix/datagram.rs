//! `UnixDatagram`.

use super::SocketAddr;
use crate::net::{Interest, Ready};
use crate::reactor::{Direction, Registration, WaitAs};
use crate::task::wait;
use std::future::poll_fn;
use std::io;
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::path::Path;
use std::task::{Context, Poll};

/// A Unix datagram socket.
///
/// As with [`UdpSocket`](crate::net::UdpSocket), the reactor keeps one waker for
/// receiving and one for sending: one task receiving and one sending at a time.
pub struct UnixDatagram {
    io: mio::net::UnixDatagram,
    reg: Registration,
}

impl UnixDatagram {
    /// Bind to `path`. Must be called inside a Volt runtime.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::bind(path)?)
    }

    /// Two connected sockets (`socketpair(2)`).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = mio::net::UnixDatagram::pair()?;
        // Empty buffers: writable at once, readable once the peer sends (as Tokio's).
        let end = |mut io: mio::net::UnixDatagram| {
            let reg = Registration::writable(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
            UnixDatagram::with_registration(io, reg)
        };
        Ok((end(a)?, end(b)?))
    }

    /// A socket bound to no address (it can send, and receive replies sent to it once
    /// connected or through the autobind of the system).
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_mio(mio::net::UnixDatagram::unbound()?)
    }

    fn from_mio(mut io: mio::net::UnixDatagram) -> io::Result<UnixDatagram> {
        let reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        UnixDatagram::with_registration(io, reg)
    }

    fn with_registration(io: mio::net::UnixDatagram, mut reg: Registration) -> io::Result<UnixDatagram> {
        reg.set_wait(WaitAs { read: wait::W_RECV, write: wait::W_SEND, addr: None });
        Ok(UnixDatagram { io, reg })
    }

    /// Adopt a std socket (it is switched to non-blocking).
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        socket.set_nonblocking(true)?;
        UnixDatagram::from_mio(mio::net::UnixDatagram::from_std(socket))
    }

    /// Take the socket out of the runtime as a std socket (still non-blocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixDatagram> {
        let mut this = ManuallyDrop::new(self);
        let UnixDatagram { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::os::unix::net::UnixDatagram::from_raw_fd(io.into_raw_fd()) })
    }

    /// Set the default peer for `send` and `recv` (and receive only from it).
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.io.connect(path)
    }

    /// Send a datagram to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send(cx, buf)).await
    }

    /// Receive a datagram from the connected peer; a datagram longer than `buf` is cut.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv_into(cx, buf)).await
    }

    /// Send a datagram to the socket bound at `target`.
    pub async fn send_to(&self, buf: &[u8], target: impl AsRef<Path>) -> io::Result<usize> {
        let target = target.as_ref();
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Write, || self.io.send_to(buf, target))).await
    }

    /// Receive a datagram; its length and sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_recv_from_into(cx, buf)).await
    }

    /// [`send_to`](Self::send_to) as a poll function.
    pub fn poll_send_to(&self, cx: &mut Context<'_>, buf: &[u8], target: impl AsRef<Path>) -> Poll<io::Result<usize>> {
        let target = target.as_ref();
        self.reg.poll_io(cx, Direction::Write, || self.io.send_to(buf, target))
    }

    /// [`send`](Self::send) as a poll function.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Write, || self.io.send(buf))
    }

    /// [`recv`](Self::recv) as a poll function, into a slice: the datagram's length.
    pub fn poll_recv_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Read, || self.io.recv(buf))
    }

    /// Tokio's `poll_recv`: receive a datagram into `buf`'s unfilled part.
    #[cfg(feature = "tokio-io")]
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = std::task::ready!(self.poll_recv_into(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    /// [`recv_from`](Self::recv_from) as a poll function, into a slice: the datagram's
    /// length and sender.
    pub fn poll_recv_from_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.reg.poll_io(cx, Direction::Read, || self.io.recv_from(buf)).map_ok(|(n, a)| (n, SocketAddr(a)))
    }

    /// Tokio's `poll_recv_from`: receive a datagram into `buf`'s unfilled part; its
    /// sender.
    #[cfg(feature = "tokio-io")]
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let (n, from) = std::task::ready!(self.poll_recv_from_into(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(from))
    }

    /// Send to the connected peer without waiting; `WouldBlock` if the buffer is full.
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || self.io.send(buf))
    }

    /// Send to `target` without waiting.
    pub fn try_send_to(&self, buf: &[u8], target: impl AsRef<Path>) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || self.io.send_to(buf, target))
    }

    /// Receive from the connected peer without waiting; `WouldBlock` if none is there.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || self.io.recv(buf))
    }

    /// Receive a datagram from the connected peer into the spare room of `buf`, which
    /// grows by its length.
    #[cfg(feature = "io-util")]
    pub async fn recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || crate::net::buf::recv(self.io.as_raw_fd(), buf))).await
    }

    /// [`recv_buf`](Self::recv_buf) without waiting; `WouldBlock` if none is there.
    #[cfg(feature = "io-util")]
    pub fn try_recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || crate::net::buf::recv(self.io.as_raw_fd(), buf))
    }

    /// Receive a datagram into the spare room of `buf`, which grows by its length; its
    /// length and sender.
    #[cfg(feature = "io-util")]
    pub async fn recv_buf_from<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || crate::net::buf::recv_from_unix(&self.io, buf)))
            .await
            .map(|(n, a)| (n, SocketAddr(a)))
    }

    /// [`recv_buf_from`](Self::recv_buf_from) without waiting.
    #[cfg(feature = "io-util")]
    pub fn try_recv_buf_from<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        self.reg
            .try_io(Direction::Read, || crate::net::buf::recv_from_unix(&self.io, buf))
            .map(|(n, a)| (n, SocketAddr(a)))
    }

    /// Receive a datagram without waiting; `WouldBlock` if none is there.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.reg.try_io(Direction::Read, || self.io.recv_from(buf)).map(|(n, a)| (n, SocketAddr(a)))
    }

    /// Wait until the socket is ready for `interest`, then run `f`, a non-blocking
    /// operation on it, again after each `WouldBlock` until it gives another answer.
    pub async fn async_io<R>(&self, interest: Interest, f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        crate::net::ready::async_io(&self.reg, interest, f).await
    }

    /// Run `f`, a non-blocking operation on the socket, as the `try_*` methods do.
    pub fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let dir = if interest.is_readable() { Direction::Read } else { Direction::Write };
        self.reg.try_io(dir, f)
    }

    /// Wait until the socket is ready for any part of `interest`, and say what it found.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        poll_fn(|cx| crate::net::ready::poll_interest(&self.reg, cx, interest)).await
    }

    /// Wait until a datagram may be waiting.
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(|_| ())
    }

    /// Wait until a datagram may be sent.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(|_| ())
    }

    /// [`readable`](Self::readable) as a poll function.
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Read).map_ok(|_| ())
    }

    /// [`writable`](Self::writable) as a poll function.
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Write).map_ok(|_| ())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr().map(SocketAddr)
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr().map(SocketAddr)
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.take_error()
    }

    /// Shut down the receiving half, the sending half, or both (`shutdown(2)`).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.shutdown(how)
    }
}

impl AsRawFd for UnixDatagram {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for UnixDatagram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl Drop for UnixDatagram {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for UnixDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixDatagram").field("local_addr", &self.io.local_addr().ok()).finish()
    }
}
