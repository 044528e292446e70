//! The halves of a split `TcpStream`: borrowed (`split`) and owned (`into_split`).
//!
//! A reading half uses the socket's read waker slot and a writing half its write slot, so
//! a task reading one half and another writing the other never take each other's
//! wake-ups.

use super::stream::StreamSocket;
use super::TcpStream;
use futures_io::{AsyncRead, AsyncWrite};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The reading half of a [`TcpStream`], borrowed by [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of a [`TcpStream`], borrowed by [`TcpStream::split`]. Its
/// `poll_close`/`poll_shutdown` shut the stream's writing side down.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

/// The reading half of a [`TcpStream`], owned: from [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<TcpStream>,
}

/// The writing half of a [`TcpStream`], owned: from [`TcpStream::into_split`].
///
/// Dropping it shuts the stream's writing side down (the peer reads end of stream), unless
/// it was [`forget`](OwnedWriteHalf::forget)ten or [`reunite`](OwnedReadHalf::reunite)d.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<TcpStream>,
    shutdown_on_drop: bool,
}

/// [`OwnedReadHalf::reunite`] was given halves of two different streams; here they are
/// back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl std::fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl std::error::Error for ReuniteError {}

pub(super) fn split(stream: &mut TcpStream) -> (ReadHalf<'_>, WriteHalf<'_>) {
    (ReadHalf(stream), WriteHalf(stream))
}

pub(super) fn into_split(stream: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    let stream = Arc::new(stream);
    (OwnedReadHalf { stream: Arc::clone(&stream) }, OwnedWriteHalf { stream, shutdown_on_drop: true })
}

/// The methods each reading half shares with `TcpStream`.
macro_rules! read_half_methods {
    () => {
        /// Wait until the socket may be readable (see [`TcpStream::readable`]).
        pub async fn readable(&self) -> io::Result<()> {
            self.stream().readable().await
        }

        /// [`TcpStream::poll_read_ready`].
        pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.stream().poll_read_ready(cx)
        }

        /// Read without waiting (see [`TcpStream::try_read`]).
        pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
            self.stream().try_read(buf)
        }

        /// [`TcpStream::try_read_vectored`].
        pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
            self.stream().try_read_vectored(bufs)
        }

        /// Copy waiting data into `buf` without consuming it (see [`TcpStream::peek`]).
        pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
            self.stream().peek(buf).await
        }

        /// [`TcpStream::poll_peek`].
        pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            self.stream().poll_peek(cx, buf)
        }

        /// The local address.
        pub fn local_addr(&self) -> io::Result<SocketAddr> {
            self.stream().local_addr()
        }

        /// The remote address.
        pub fn peer_addr(&self) -> io::Result<SocketAddr> {
            self.stream().peer_addr()
        }
    };
}

/// The methods each writing half shares with `TcpStream`.
macro_rules! write_half_methods {
    () => {
        /// Wait until the socket may be writable (see [`TcpStream::writable`]).
        pub async fn writable(&self) -> io::Result<()> {
            self.stream().writable().await
        }

        /// [`TcpStream::poll_write_ready`].
        pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.stream().poll_write_ready(cx)
        }

        /// Write without waiting (see [`TcpStream::try_write`]).
        pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            self.stream().try_write(buf)
        }

        /// [`TcpStream::try_write_vectored`].
        pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            self.stream().try_write_vectored(bufs)
        }

        /// The local address.
        pub fn local_addr(&self) -> io::Result<SocketAddr> {
            self.stream().local_addr()
        }

        /// The remote address.
        pub fn peer_addr(&self) -> io::Result<SocketAddr> {
            self.stream().peer_addr()
        }
    };
}

impl ReadHalf<'_> {
    fn stream(&self) -> &TcpStream {
        self.0
    }

    read_half_methods!();
}

impl WriteHalf<'_> {
    fn stream(&self) -> &TcpStream {
        self.0
    }

    write_half_methods!();
}

impl OwnedReadHalf {
    fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Put the halves back together into the stream. Halves of different streams are
    /// handed back in the error.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.stream, &other.stream) {
            return Err(ReuniteError(self, other));
        }
        let mut write = other;
        write.shutdown_on_drop = false;
        drop(write);
        // The write half's reference is gone and the halves hold the only two.
        Ok(Arc::try_unwrap(self.stream).unwrap_or_else(|_| unreachable!("a split stream has exactly two halves")))
    }

    read_half_methods!();
}

impl OwnedWriteHalf {
    fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Put the halves back together (see [`OwnedReadHalf::reunite`]).
    pub fn reunite(self, other: OwnedReadHalf) -> Result<TcpStream, ReuniteError> {
        other.reunite(self)
    }

    /// Drop this half without shutting the writing side down: the socket closes when
    /// the read half is dropped too.
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    write_half_methods!();
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.stream.shutdown_write();
        }
    }
}

impl AsRef<TcpStream> for ReadHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}

impl AsRef<TcpStream> for WriteHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}

impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.stream
    }
}

impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.stream
    }
}

/// futures-io's `AsyncRead` (and, with `tokio-io`, Tokio's) for a reading half.
macro_rules! impl_read {
    ($half:ty) => {
        impl AsyncRead for $half {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
                self.stream().poll_read_init(cx, buf)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $half {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                self.stream().poll_read_tokio(cx, buf)
            }
        }
    };
}

impl_read!(ReadHalf<'_>);
impl_read!(OwnedReadHalf);

/// futures-io's `AsyncWrite` (and, with `tokio-io`, Tokio's) for a writing half. `$done`
/// runs after a successful shutdown of the writing side.
macro_rules! impl_write {
    ($half:ty, $done:expr) => {
        impl AsyncWrite for $half {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.stream().poll_write_buf(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.stream().poll_write_vectored_bufs(cx, bufs)
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let this = self.get_mut();
                this.stream().shutdown_write()?;
                #[allow(clippy::redundant_closure_call)]
                ($done)(this);
                Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $half {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.stream().poll_write_buf(cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.stream().poll_write_vectored_bufs(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let this = self.get_mut();
                this.stream().shutdown_write()?;
                #[allow(clippy::redundant_closure_call)]
                ($done)(this);
                Poll::Ready(Ok(()))
            }
        }
    };
}

impl_write!(WriteHalf<'_>, |_: &mut WriteHalf<'_>| {});
// Shut down already: nothing left to do when it drops.
impl_write!(OwnedWriteHalf, |h: &mut OwnedWriteHalf| h.shutdown_on_drop = false);
