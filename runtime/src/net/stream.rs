//! What the TCP and the Unix stream sockets share: the reads, writes and shutdown behind
//! their I/O traits (and their halves'), written once over the mio socket, and the
//! macros that implement those traits for a stream or a half.

use crate::reactor::{Direction, Registration};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

/// A connected mio stream socket, TCP or Unix: what the shared code does with it, each
/// a non-blocking system call on the socket (`WouldBlock` when it would wait).
pub(crate) trait MioStream: AsRawFd {
    /// `read(2)` into `buf`.
    fn read_now(&self, buf: &mut [u8]) -> io::Result<usize>;
    /// `write(2)` of `buf`.
    fn write_now(&self, buf: &[u8]) -> io::Result<usize>;
    /// `writev(2)` of `bufs`.
    fn write_vectored_now(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize>;
    /// `shutdown(2)`.
    fn shutdown_now(&self, how: Shutdown) -> io::Result<()>;
}

/// [`MioStream`] for mio's stream sockets, through their `Read` and `Write` on `&self`.
macro_rules! mio_stream {
    ($($t:ty),*) => {$(
        impl MioStream for $t {
            fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
                (&mut &*self).read(buf)
            }

            fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
                (&mut &*self).write(buf)
            }

            fn write_vectored_now(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
                (&mut &*self).write_vectored(bufs)
            }

            fn shutdown_now(&self, how: Shutdown) -> io::Result<()> {
                self.shutdown(how)
            }
        }
    )*};
}

mio_stream!(mio::net::TcpStream, mio::net::UnixStream);

/// A stream socket on the reactor (`TcpStream`, `UnixStream`): the poll functions behind
/// the I/O traits, for the stream and its halves.
pub(crate) trait StreamSocket {
    /// The mio socket.
    type Io: MioStream;

    fn io(&self) -> &Self::Io;

    /// The socket's registration with the reactor.
    fn reg(&self) -> &Registration;

    /// Read into `buf`, which need not be initialized (hyper's and Tokio's read buffers
    /// are not): the bytes go straight from the kernel, with no zeroing first. A short
    /// read clears the read readiness (see `Registration::poll_read_io`).
    #[cfg_attr(not(any(feature = "tokio-io", feature = "hyper")), allow(dead_code))]
    fn poll_read_uninit(&self, cx: &mut Context<'_>, buf: &mut [std::mem::MaybeUninit<u8>]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let fd = self.io().as_raw_fd();
        self.reg().poll_read_io(cx, buf.len(), || {
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

    /// Read into an initialized `buf` (the futures-io path). An empty `buf` reads nothing,
    /// at once, whether or not the socket is readable.
    fn poll_read_init(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.reg().poll_read_io(cx, buf.len(), || self.io().read_now(buf))
    }

    /// Tokio's `poll_read`: fill the unfilled part of `buf` straight from the kernel.
    #[cfg(feature = "tokio-io")]
    fn poll_read_tokio(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        // SAFETY: `poll_read_uninit` only writes into this memory (never de-initializes
        // any of it), and only the bytes the kernel wrote are marked initialized below.
        let unfilled = unsafe { buf.unfilled_mut() };
        let n = std::task::ready!(self.poll_read_uninit(cx, unfilled))?;
        // SAFETY: `read(2)` initialized the first `n` bytes of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    /// Write `buf`.
    fn poll_write_buf(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg().poll_io(cx, Direction::Write, || self.io().write_now(buf))
    }

    /// Write several buffers with one `writev(2)`.
    fn poll_write_vectored_bufs(&self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        self.reg().poll_io(cx, Direction::Write, || self.io().write_vectored_now(bufs))
    }

    /// `poll_close`/`poll_shutdown`: shut the writing side down (the peer reads end of
    /// stream). A socket whose peer is gone (or reset it) counts as shut down.
    fn shutdown_write(&self) -> io::Result<()> {
        match self.io().shutdown_now(Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        }
    }
}

/// futures-io's `AsyncRead` (and, with `tokio-io`, Tokio's) for `$t`, a stream or a
/// reading half, whose stream socket `|$s| $stream` finds.
macro_rules! impl_async_read {
    ($t:ty, |$s:ident| $stream:expr) => {
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_read_init(&*$stream, cx, buf)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_read_tokio(&*$stream, cx, buf)
            }
        }
    };
}

/// futures-io's `AsyncWrite` (and, with `tokio-io`, Tokio's) for `$t`, a stream or a
/// writing half, whose stream socket `|$s| $stream` finds; `|$c| $close` shuts its writing
/// side down (`poll_close`, `poll_shutdown`). Writes go straight to the socket: nothing is
/// buffered here, so a flush has nothing to do.
macro_rules! impl_async_write {
    ($t:ty, |$s:ident| $stream:expr, |$c:ident| $close:expr) => {
        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_write_buf(&*$stream, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_write_vectored_bufs(&*$stream, cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $c = self.get_mut();
                std::task::Poll::Ready($close)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_write_buf(&*$stream, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                let $s = self.get_mut();
                $crate::net::stream::StreamSocket::poll_write_vectored_bufs(&*$stream, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let $c = self.get_mut();
                std::task::Poll::Ready($close)
            }
        }
    };
}

pub(crate) use {impl_async_read, impl_async_write};
