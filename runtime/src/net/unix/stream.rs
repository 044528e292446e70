//! `UnixStream`.

use super::split::{self, OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use super::{SocketAddr, UCred};
use crate::net::stream::{impl_async_read, impl_async_write, StreamSocket};
use crate::net::{Interest, Ready};
use crate::reactor::{Direction, Registration};
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::path::Path;
use std::task::{Context, Poll};

/// A connected Unix stream socket. Read and write it with Tokio's
/// `AsyncReadExt`/`AsyncWriteExt` (feature `tokio-io`, which `net` turns on) or with
/// futures' ones.
///
/// As with [`TcpStream`](crate::net::TcpStream), the reactor keeps one waker for reads and
/// one for writes: one task reading and one writing at a time (see
/// [`split`](UnixStream::split) and [`into_split`](UnixStream::into_split)).
pub struct UnixStream {
    io: mio::net::UnixStream,
    reg: Registration,
}

impl UnixStream {
    /// Connect to the socket bound at `path`.
    /// A path that starts with a NUL byte names an abstract socket (on Linux), as in
    /// Tokio.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        UnixStream::connecting(mio::net::UnixStream::connect_addr(&super::std_addr(path.as_ref())?)?).await
    }

    /// Connect to the socket bound at `addr`: a path, or on Linux an abstract name.
    pub async fn connect_addr(addr: &super::SocketAddr) -> io::Result<UnixStream> {
        UnixStream::connecting(mio::net::UnixStream::connect_addr(&addr.0)?).await
    }

    pub(super) async fn connecting(io: mio::net::UnixStream) -> io::Result<UnixStream> {
        let stream = UnixStream::from_mio(io)?;
        // A connect that could not finish at once finishes (or fails) when the socket
        // becomes writable.
        poll_fn(|cx| stream.reg.poll_ready(cx, Direction::Write)).await?;
        if let Some(e) = stream.io.take_error()? {
            return Err(e);
        }
        Ok(stream)
    }

    /// Two connected streams (`socketpair(2)`).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        // Empty buffers: writable at once, readable once the peer writes (as Tokio's).
        let end = |mut io: mio::net::UnixStream| {
            let reg = Registration::writable(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
            io::Result::Ok(UnixStream { io, reg })
        };
        Ok((end(a)?, end(b)?))
    }

    fn from_mio(mut io: mio::net::UnixStream) -> io::Result<UnixStream> {
        let reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        Ok(UnixStream { io, reg })
    }

    /// A stream known to be connected: its first read and write are tried at once.
    pub(super) fn established(mut io: mio::net::UnixStream) -> io::Result<UnixStream> {
        let reg = Registration::established(&mut io)?;
        Ok(UnixStream { io, reg })
    }

    /// Adopt a connected std stream (it is switched to non-blocking).
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::established(mio::net::UnixStream::from_std(stream))
    }

    /// Take the socket out of the runtime as a std stream (still non-blocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        let mut this = ManuallyDrop::new(self);
        let UnixStream { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::os::unix::net::UnixStream::from_raw_fd(io.into_raw_fd()) })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr().map(SocketAddr)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr().map(SocketAddr)
    }

    /// The credentials of the peer process.
    pub fn peer_cred(&self) -> io::Result<UCred> {
        super::peer_cred(self.io.as_raw_fd())
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.take_error()
    }

    /// Wait until the socket is ready for any part of `interest`, and say what it found
    /// (see [`TcpStream::ready`](crate::net::TcpStream::ready)).
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        poll_fn(|cx| crate::net::ready::poll_interest(&self.reg, cx, interest)).await
    }

    /// Wait until the socket may be readable; follow it with [`try_read`](Self::try_read).
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(|_| ())
    }

    /// Wait until the socket may be writable; follow it with
    /// [`try_write`](Self::try_write).
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(|_| ())
    }

    /// [`readable`](Self::readable) as a poll function (the readers' list of wakers).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Read).map_ok(|_| ())
    }

    /// [`writable`](Self::writable) as a poll function (the writers' list of wakers).
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Write).map_ok(|_| ())
    }

    /// Read what is there without waiting: `Ok(0)` is end of stream, `WouldBlock` means
    /// nothing yet.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || (&self.io).read(buf))
    }

    /// [`try_read`](Self::try_read) into the spare room of `buf` (a `BytesMut`, a
    /// `Vec<u8>`), which grows by what was read.
    #[cfg(feature = "io-util")]
    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || crate::net::buf::recv(self.io.as_raw_fd(), buf))
    }

    /// [`try_read`](Self::try_read) into several buffers.
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || (&self.io).read_vectored(bufs))
    }

    /// Write what fits without waiting; `WouldBlock` means nothing fits now.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || (&self.io).write(buf))
    }

    /// [`try_write`](Self::try_write) of several buffers.
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || (&self.io).write_vectored(bufs))
    }

    /// Wait until the socket is ready for `interest`, then run `f`, a non-blocking
    /// operation on it, again after each `WouldBlock` until it gives another answer.
    pub async fn async_io<R>(&self, interest: Interest, f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        crate::net::ready::async_io(&self.reg, interest, f).await
    }

    /// Run `f`, a non-blocking operation on the socket, as the `try_*` methods do (see
    /// [`TcpStream::try_io`](crate::net::TcpStream::try_io)).
    pub fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let dir = if interest.is_readable() { Direction::Read } else { Direction::Write };
        self.reg.try_io(dir, f)
    }

    /// Split into a reading and a writing half that borrow the stream.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        split::split(self)
    }

    /// Split into owned halves, to move into separate tasks; dropping the
    /// [`OwnedWriteHalf`] shuts the writing side down.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split::into_split(self)
    }
}

impl StreamSocket for UnixStream {
    type Io = mio::net::UnixStream;

    fn io(&self) -> &mio::net::UnixStream {
        &self.io
    }

    fn reg(&self) -> &Registration {
        &self.reg
    }
}

impl_async_read!(UnixStream, |s| s);
impl_async_write!(UnixStream, |s| s, |s| s.shutdown_write());

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl Drop for UnixStream {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixStream")
            .field("local_addr", &self.io.local_addr().ok())
            .field("peer_addr", &self.io.peer_addr().ok())
            .finish()
    }
}
