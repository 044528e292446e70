//! `TcpListener` and `TcpStream`.

use crate::io::{Direction, Registration};
use futures_io::{AsyncRead, AsyncWrite};
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A TCP socket server, listening for connections.
pub struct TcpListener {
    io: mio::net::TcpListener,
    reg: Registration,
}

impl TcpListener {
    /// Bind to `addr` (the first address that works). A port in use is an `io::Error`
    /// of kind `AddrInUse`.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        super::each_addr(addr, |a| async move { TcpListener::from_std(std::net::TcpListener::bind(a)?) }).await
    }

    /// Adopt a bound std listener (it is switched to non-blocking).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        let mut io = mio::net::TcpListener::from_std(listener);
        let reg = Registration::new(&mut io, mio::Interest::READABLE)?;
        Ok(TcpListener { io, reg })
    }

    /// Wait for the next connection.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, addr) = poll_fn(|cx| self.reg.poll_io(cx, Direction::Read, || self.io.accept())).await?;
        Ok((TcpStream::from_mio(stream)?, addr))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener").field("local_addr", &self.io.local_addr().ok()).finish()
    }
}

/// A TCP connection. Read and write it with `futures::AsyncReadExt`/`AsyncWriteExt`.
pub struct TcpStream {
    io: mio::net::TcpStream,
    reg: Registration,
}

impl TcpStream {
    /// Connect to `addr` (trying each resolved address). A closed port gives
    /// `ConnectionRefused`.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        super::each_addr(addr, |a| async move {
            let stream = TcpStream::from_mio(mio::net::TcpStream::connect(a)?)?;
            // The connect finishes (or fails) when the socket becomes writable.
            poll_fn(|cx| stream.reg.poll_ready(cx, Direction::Write)).await?;
            if let Some(e) = stream.io.take_error()? {
                return Err(e);
            }
            stream.io.peer_addr()?;
            Ok(stream)
        })
        .await
    }

    fn from_mio(mut io: mio::net::TcpStream) -> io::Result<TcpStream> {
        let reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        Ok(TcpStream { io, reg })
    }

    /// Adopt a connected std stream (it is switched to non-blocking).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        TcpStream::from_mio(mio::net::TcpStream::from_std(stream))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
    }

    /// Set `TCP_NODELAY`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.set_nodelay(nodelay)
    }

    /// Shut down one or both halves.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.shutdown(how)
    }
}

impl TcpStream {
    /// Read into `buf`, which need not be initialized (hyper's and Tokio's read buffers
    /// are not): the bytes go straight from the kernel, with no zeroing first. A short
    /// read clears the read readiness (see `Registration::poll_read_io`).
    pub(crate) fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        use std::os::fd::AsRawFd;
        let fd = self.io.as_raw_fd();
        self.reg.poll_read_io(cx, buf.len(), || {
            // SAFETY: `read(2)` writes at most `buf.len()` bytes into the memory `buf`
            // covers, which is valid for writes for that length; it never reads it, so
            // uninitialized bytes are fine.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })
    }

    /// Read into an initialized `buf` (the futures-io path).
    pub(crate) fn poll_read_init(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_read_io(cx, buf.len(), || (&self.io).read(buf))
    }

    /// Write `buf`.
    pub(crate) fn poll_write_buf(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Write, || (&self.io).write(buf))
    }

    /// Write several buffers with one `writev(2)`.
    pub(crate) fn poll_write_vectored_bufs(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Direction::Write, || (&self.io).write_vectored(bufs))
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_init(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_buf(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_vectored_bufs(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Writes go straight to the socket: nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(match self.io.shutdown(Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.io.local_addr().ok())
            .field("peer_addr", &self.io.peer_addr().ok())
            .finish()
    }
}
