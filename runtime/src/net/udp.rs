//! `UdpSocket`.

use super::{Interest, Ready, ToSocketAddrs};
use crate::reactor::{Direction, Registration, WaitAs};
use crate::task::wait;
use std::future::poll_fn;
use std::io;
use std::mem::ManuallyDrop;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::task::{Context, Poll};

/// A UDP socket.
///
/// As with [`TcpStream`](super::TcpStream), the reactor keeps the wakers of every task
/// receiving (`recv*`, `peek_from`, `readable`, `poll_recv*`) and of every task sending
/// (`send*`, `writable`, `poll_send*`): share the socket through an `Arc`, and several
/// tasks may receive on it at once (each datagram goes to one of them).
pub struct UdpSocket {
    io: mio::net::UdpSocket,
    reg: Registration,
}

impl UdpSocket {
    /// Bind to `addr` (the first address that works; a host name is resolved on the
    /// blocking pool). A port in use is an `io::Error` of kind `AddrInUse`.
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        super::each_addr(addr, |a| async move { UdpSocket::from_std(std::net::UdpSocket::bind(a)?) }).await
    }

    /// Adopt a bound std socket (it is switched to non-blocking).
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        let mut io = mio::net::UdpSocket::from_std(socket);
        let mut reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        reg.set_wait(WaitAs { read: wait::W_RECV, write: wait::W_SEND, addr: io.local_addr().ok() });
        Ok(UdpSocket { io, reg })
    }

    /// Send a datagram to `target` (the first address it resolves to; a host name is
    /// resolved on the blocking pool); returns the bytes sent.
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let target = super::addr::resolve(&target)
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        poll_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Receive a datagram; returns its length and sender. A datagram longer than `buf`
    /// is cut to fit.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_recv_from_into(cx, buf)).await
    }

    /// Wait for a datagram and copy it into `buf` without taking it off the socket; returns
    /// its length and sender.
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_peek_from_into(cx, buf)).await
    }

    /// Set the default peer for `send` and `recv`, and filter datagrams from others.
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        super::each_addr(addr, |a| async move { self.io.connect(a) }).await
    }

    /// Send to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send(cx, buf)).await
    }

    /// Receive from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv_into(cx, buf)).await
    }

    /// Send a datagram to `target`, or arrange for `cx` to be woken when the socket may
    /// be writable.
    pub fn poll_send_to(&self, cx: &mut Context<'_>, buf: &[u8], target: SocketAddr) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Write, || self.io.send_to(buf, target))
    }

    /// Receive a datagram into `buf` (its length and sender), or arrange for `cx` to be
    /// woken when one may have arrived. (Tokio's `poll_recv_from`, which fills a
    /// `ReadBuf`, comes with the `tokio-io` feature.)
    pub fn poll_recv_from_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<(usize, SocketAddr)>> {
        // Not `poll_read_io`: a datagram shorter than `buf` says nothing about the next.
        self.reg.poll_io(cx, Direction::Read, || self.io.recv_from(buf))
    }

    /// [`peek_from`](Self::peek_from) as a poll function, into a slice.
    pub fn poll_peek_from_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.reg.poll_io(cx, Direction::Read, || self.io.peek_from(buf))
    }

    /// [`send`](Self::send) as a poll function.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Write, || self.io.send(buf))
    }

    /// [`recv`](Self::recv) as a poll function, into a slice: the datagram's length.
    pub fn poll_recv_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Read, || self.io.recv(buf))
    }

    /// Tokio's `poll_recv`: receive a datagram from the connected peer into `buf`'s
    /// unfilled part.
    #[cfg(feature = "tokio-io")]
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = std::task::ready!(self.poll_recv_into(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
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

    /// Tokio's `poll_peek_from`: copy the waiting datagram into `buf`'s unfilled part
    /// without taking it; its sender.
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let (n, from) = std::task::ready!(self.poll_peek_from_into(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(from))
    }

    /// Copy the datagram waiting from the connected peer into `buf` without taking it
    /// off the socket; its length (cut to fit `buf`).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || self.io.peek(buf))).await
    }

    /// [`peek`](Self::peek) as a poll function, into `buf`'s unfilled part (Tokio's).
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let unfilled = buf.initialize_unfilled();
        let n = std::task::ready!(self.reg.poll_io(cx, Direction::Read, || self.io.peek(unfilled)))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    /// [`peek`](Self::peek) without waiting; `WouldBlock` if nothing is waiting.
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || self.io.peek(buf))
    }

    /// Wait (as a poll function) until a datagram may be waiting.
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Read).map_ok(|_| ())
    }

    /// Wait (as a poll function) until a datagram may be sent.
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Write).map_ok(|_| ())
    }

    /// Wait until a datagram may be waiting. It may wake spuriously; follow it with
    /// [`try_recv_from`](Self::try_recv_from), which answers `WouldBlock` then.
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(|_| ())
    }

    /// Wait until a datagram may be sent. It may wake spuriously; follow it with
    /// [`try_send_to`](Self::try_send_to), which answers `WouldBlock` then.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(|_| ())
    }

    /// Send a datagram to `target` without waiting; `WouldBlock` if the send buffer is
    /// full.
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || self.io.send_to(buf, target))
    }

    /// Receive a datagram without waiting; `WouldBlock` if none is waiting.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.reg.try_io(Direction::Read, || self.io.recv_from(buf))
    }

    /// Receive a datagram from the connected peer into the spare room of `buf`, which
    /// grows by its length; a datagram longer than the room is cut to fit.
    #[cfg(feature = "io-util")]
    pub async fn recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || super::buf::recv(self.io.as_raw_fd(), buf))).await
    }

    /// [`recv_buf`](Self::recv_buf) without waiting; `WouldBlock` if none is waiting.
    #[cfg(feature = "io-util")]
    pub fn try_recv_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || super::buf::recv(self.io.as_raw_fd(), buf))
    }

    /// Receive a datagram into the spare room of `buf`, which grows by its length; its
    /// length and sender.
    #[cfg(feature = "io-util")]
    pub async fn recv_buf_from<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || super::buf::recv_from_ip(self.io.as_raw_fd(), buf))).await
    }

    /// [`recv_buf_from`](Self::recv_buf_from) without waiting.
    #[cfg(feature = "io-util")]
    pub fn try_recv_buf_from<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<(usize, SocketAddr)> {
        self.reg.try_io(Direction::Read, || super::buf::recv_from_ip(self.io.as_raw_fd(), buf))
    }

    /// Send to the connected peer without waiting.
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || self.io.send(buf))
    }

    /// Receive from the connected peer without waiting.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || self.io.recv(buf))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
    }

    /// Set `SO_BROADCAST` (allow sending to a broadcast address).
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.set_broadcast(on)
    }

    /// The `SO_BROADCAST` option.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.broadcast()
    }

    /// Set `IP_TTL`, the time-to-live of the packets this socket sends.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.set_ttl(ttl)
    }

    /// The `IP_TTL` option.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.ttl()
    }

    super::sockopt::ip_options!();

    /// Join the IPv4 multicast group `multiaddr` on the interface with address
    /// `interface` (`Ipv4Addr::UNSPECIFIED` lets the kernel choose).
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.join_multicast_v4(&multiaddr, &interface)
    }

    /// Leave an IPv4 multicast group (see [`join_multicast_v4`](Self::join_multicast_v4)).
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        self.io.leave_multicast_v4(&multiaddr, &interface)
    }

    /// Join the IPv6 multicast group `multiaddr` on interface number `interface` (0 lets
    /// the kernel choose).
    pub fn join_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.join_multicast_v6(multiaddr, interface)
    }

    /// Leave an IPv6 multicast group.
    pub fn leave_multicast_v6(&self, multiaddr: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.io.leave_multicast_v6(multiaddr, interface)
    }

    /// Set `IP_MULTICAST_LOOP`: whether this host receives its own IPv4 multicasts.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.io.set_multicast_loop_v4(on)
    }

    /// The `IP_MULTICAST_LOOP` option.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.io.multicast_loop_v4()
    }

    /// Set `IP_MULTICAST_TTL`, the time-to-live of IPv4 multicasts.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.io.set_multicast_ttl_v4(ttl)
    }

    /// The `IP_MULTICAST_TTL` option.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.io.multicast_ttl_v4()
    }

    /// Set `IPV6_MULTICAST_LOOP`: whether this host receives its own IPv6 multicasts.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.io.set_multicast_loop_v6(on)
    }

    /// The `IPV6_MULTICAST_LOOP` option.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.io.multicast_loop_v6()
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.take_error()
    }

    /// Wait until the socket is ready for any part of `interest`, and say what it found
    /// (see [`TcpStream::ready`](super::TcpStream::ready)).
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        poll_fn(|cx| super::ready::poll_interest(&self.reg, cx, interest)).await
    }

    /// Wait for a datagram and say who sent it, without taking it off the socket.
    pub async fn peek_sender(&self) -> io::Result<SocketAddr> {
        poll_fn(|cx| self.poll_peek_sender(cx)).await
    }

    /// [`peek_sender`](Self::peek_sender) as a poll function.
    pub fn poll_peek_sender(&self, cx: &mut Context<'_>) -> Poll<io::Result<SocketAddr>> {
        // An empty buffer: the kernel reports the sender and leaves the datagram whole.
        self.reg.poll_io(cx, Direction::Read, || self.io.peek_from(&mut []).map(|(_, a)| a))
    }

    /// The sender of the waiting datagram, without waiting or taking it; `WouldBlock` if
    /// none is waiting.
    pub fn try_peek_sender(&self) -> io::Result<SocketAddr> {
        self.reg.try_io(Direction::Read, || self.io.peek_from(&mut []).map(|(_, a)| a))
    }

    /// Peek at a datagram without waiting or taking it; `WouldBlock` if none is waiting.
    pub fn try_peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.reg.try_io(Direction::Read, || self.io.peek_from(buf))
    }

    /// Wait until the socket is ready for `interest`, then run `f`, a non-blocking
    /// operation on it, again after each `WouldBlock` until it gives another answer.
    pub async fn async_io<R>(&self, interest: Interest, f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        super::ready::async_io(&self.reg, interest, f).await
    }

    /// Run `f`, a non-blocking operation on the socket, as the `try_*` methods do (see
    /// [`TcpStream::try_io`](super::TcpStream::try_io)).
    pub fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let dir = if interest.is_readable() { Direction::Read } else { Direction::Write };
        self.reg.try_io(dir, f)
    }

    /// Take the socket out of the runtime as a std socket (still non-blocking).
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let mut this = ManuallyDrop::new(self);
        let UdpSocket { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::net::UdpSocket::from_raw_fd(io.into_raw_fd()) })
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket").field("local_addr", &self.io.local_addr().ok()).finish()
    }
}
