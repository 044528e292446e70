//! The halves of a split `UnixStream`: borrowed (`split`) and owned (`into_split`).
//!
//! A reading half uses the socket's read waker slot and a writing half its write slot,
//! so a task reading one half and another writing the other never take each other's
//! wake-ups.

use super::{SocketAddr, UnixStream};
use crate::net::stream::StreamSocket;
use crate::net::{Interest, Ready};
use futures_io::{AsyncRead, AsyncWrite};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The reading half of a [`UnixStream`], borrowed by [`UnixStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a UnixStream);

/// The writing half of a [`UnixStream`], borrowed by [`UnixStream::split`]. Its
/// `poll_shutdown` shuts the stream's writing side down.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a UnixStream);

/// The reading half of a [`UnixStream`], owned: from [`UnixStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<UnixStream>,
}

/// The writing half of a [`UnixStream`], owned: from [`UnixStream::into_split`].
///
/// Dropping it shuts the stream's writing side down (the peer reads end of stream),
/// unless it was [`forget`](OwnedWriteHalf::forget)ten or reunited.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<UnixStream>,
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

pub(super) fn split(stream: &mut UnixStream) -> (ReadHalf<'_>, WriteHalf<'_>) {
    (ReadHalf(stream), WriteHalf(stream))
}

pub(super) fn into_split(stream: UnixStream) -> (OwnedReadHalf, OwnedWriteHalf) {
    let stream = Arc::new(stream);
    (OwnedReadHalf { stream: Arc::clone(&stream) }, OwnedWriteHalf { stream, shutdown_on_drop: true })
}

/// The methods every half shares with `UnixStream`.
macro_rules! common_methods {
    () => {
        /// Wait until the socket is ready for any part of `interest` (see
        /// [`UnixStream::ready`]).
        pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
            self.stream().ready(interest).await
        }

        /// The local address.
        pub fn local_addr(&self) -> io::Result<SocketAddr> {
            self.stream().local_addr()
        }

        /// The peer's address.
        pub fn peer_addr(&self) -> io::Result<SocketAddr> {
            self.stream().peer_addr()
        }
    };
}

/// The methods each reading half shares with `UnixStream`.
macro_rules! read_half_methods {
    () => {
        common_methods!();

        /// Wait until the socket may be readable (see [`UnixStream::readable`]).
        pub async fn readable(&self) -> io::Result<()> {
            self.stream().readable().await
        }

        /// Read without waiting (see [`UnixStream::try_read`]).
        pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
            self.stream().try_read(buf)
        }

        /// [`UnixStream::try_read_vectored`].
        pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
            self.stream().try_read_vectored(bufs)
        }
    };
}

/// The methods each writing half shares with `UnixStream`.
macro_rules! write_half_methods {
    () => {
        common_methods!();

        /// Wait until the socket may be writable (see [`UnixStream::writable`]).
        pub async fn writable(&self) -> io::Result<()> {
            self.stream().writable().await
        }

        /// Write without waiting (see [`UnixStream::try_write`]).
        pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
            self.stream().try_write(buf)
        }

        /// [`UnixStream::try_write_vectored`].
        pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            self.stream().try_write_vectored(bufs)
        }
    };
}

impl ReadHalf<'_> {
    fn stream(&self) -> &UnixStream {
        self.0
    }

    read_half_methods!();
}

impl WriteHalf<'_> {
    fn stream(&self) -> &UnixStream {
        self.0
    }

    write_half_methods!();
}

impl OwnedReadHalf {
    fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Put the halves back together into the stream. Halves of different streams are
    /// handed back in the error.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<UnixStream, ReuniteError> {
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
    fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Put the halves back together (see [`OwnedReadHalf::reunite`]).
    pub fn reunite(self, other: OwnedReadHalf) -> Result<UnixStream, ReuniteError> {
        other.reunite(self)
    }

    /// Drop this half without shutting the writing side down.
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

impl AsRef<UnixStream> for ReadHalf<'_> {
    fn as_ref(&self) -> &UnixStream {
        self.0
    }
}

impl AsRef<UnixStream> for WriteHalf<'_> {
    fn as_ref(&self) -> &UnixStream {
        self.0
    }
}

impl AsRef<UnixStream> for OwnedReadHalf {
    fn as_ref(&self) -> &UnixStream {
        &self.stream
    }
}

impl AsRef<UnixStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &UnixStream {
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
