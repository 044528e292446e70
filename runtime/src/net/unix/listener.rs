//! `UnixListener`.

use super::{SocketAddr, UnixStream};
use crate::reactor::{Direction, Registration, WaitAs};
use crate::task::wait;
use std::future::poll_fn;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::path::Path;
use std::task::{ready, Context, Poll};

/// A Unix stream socket server, listening for connections.
///
/// Dropping it does not remove the socket's file: remove it yourself before binding the
/// same path again (`bind` fails with `AddrInUse` while it exists).
pub struct UnixListener {
    io: mio::net::UnixListener,
    reg: Registration,
}

impl UnixListener {
    /// Bind to `path` and listen. Must be called inside a Volt runtime.
    /// A path that starts with a NUL byte names an abstract socket (on Linux), as in
    /// Tokio.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::from_mio(mio::net::UnixListener::bind_addr(&super::std_addr(path.as_ref())?)?)
    }

    /// Bind to `addr` and listen: a path, or on Linux an abstract name
    /// (`std::os::linux::net::SocketAddrExt::from_abstract_name`).
    pub fn bind_addr(addr: &super::SocketAddr) -> io::Result<UnixListener> {
        UnixListener::from_mio(mio::net::UnixListener::bind_addr(&addr.0)?)
    }

    fn from_mio(mut io: mio::net::UnixListener) -> io::Result<UnixListener> {
        let mut reg = Registration::new(&mut io, mio::Interest::READABLE)?;
        reg.set_wait(WaitAs { read: wait::W_ACCEPT, write: wait::W_WRITE, addr: None });
        Ok(UnixListener { io, reg })
    }

    /// Adopt a bound std listener (it is switched to non-blocking).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        UnixListener::from_mio(mio::net::UnixListener::from_std(listener))
    }

    /// Take the listener out of the runtime as a std listener (still non-blocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        let mut this = ManuallyDrop::new(self);
        let UnixListener { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::os::unix::net::UnixListener::from_raw_fd(io.into_raw_fd()) })
    }

    /// Wait for the next connection.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Accept a connection if one is waiting; otherwise keep `cx`'s waker (one accepting
    /// task at a time).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (stream, addr) = ready!(self.reg.poll_io(cx, Direction::Read, || self.io.accept()))?;
        Poll::Ready(Ok((UnixStream::established(stream)?, SocketAddr(addr))))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr().map(SocketAddr)
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.take_error()
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixListener").field("local_addr", &self.io.local_addr().ok()).finish()
    }
}
