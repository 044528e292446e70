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

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.reg.poll_io(cx, Direction::Read, || (&this.io).read(buf))
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.reg.poll_io(cx, Direction::Write, || (&this.io).write(buf))
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
