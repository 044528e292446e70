//! `UdpSocket`.

use crate::io::{Direction, Registration};
use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// A UDP socket.
pub struct UdpSocket {
    io: mio::net::UdpSocket,
    reg: Registration,
}

impl UdpSocket {
    /// Bind to `addr`. A port in use is an `io::Error` of kind `AddrInUse`.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        super::each_addr(addr, |a| async move { UdpSocket::from_std(std::net::UdpSocket::bind(a)?) }).await
    }

    /// Adopt a bound std socket (it is switched to non-blocking).
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        let mut io = mio::net::UdpSocket::from_std(socket);
        let reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        Ok(UdpSocket { io, reg })
    }

    /// Send a datagram to `target`; returns the bytes sent.
    pub async fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let target = target
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Write, || self.io.send_to(buf, target))).await
    }

    /// Receive a datagram; returns its length and sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || self.io.recv_from(buf))).await
    }

    /// Set the default peer for `send` and `recv`, and filter datagrams from others.
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        super::each_addr(addr, |a| async move { self.io.connect(a) }).await
    }

    /// Send to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Write, || self.io.send(buf))).await
    }

    /// Receive from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || self.io.recv(buf))).await
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
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
