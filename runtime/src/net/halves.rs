//! The halves of a split stream socket, TCP or Unix, written once. Each kind keeps its
//! own public types (`tcp::ReadHalf` and `unix::ReadHalf` are distinct, as in Tokio):
//! its module declares them and [`stream_halves`] fills in their methods and traits. A
//! borrowed half holds `&Stream`; an owned half holds a share of the stream ([`OwnedRead`],
//! [`OwnedWrite`]).
//!
//! A reading half waits on the socket's readers' list of wakers and a writing half on
//! its writers' list, so a task reading one half and another writing the other never
//! wake each other.

use super::stream::StreamSocket;
use std::io;
use std::sync::Arc;

/// The owned reading half's share of a stream socket.
pub(crate) struct OwnedRead<S> {
    stream: Arc<S>,
}

/// The owned writing half's share of a stream socket: it shuts the writing side down
/// when it is dropped (the peer reads end of stream), unless it was forgotten, reunited,
/// or shut down already.
pub(crate) struct OwnedWrite<S: StreamSocket> {
    stream: Arc<S>,
    shutdown_on_drop: bool,
}

/// The reading and the writing share of `stream`.
pub(crate) fn split_owned<S: StreamSocket>(stream: S) -> (OwnedRead<S>, OwnedWrite<S>) {
    let stream = Arc::new(stream);
    (OwnedRead { stream: Arc::clone(&stream) }, OwnedWrite { stream, shutdown_on_drop: true })
}

impl<S: StreamSocket> OwnedRead<S> {
    pub(crate) fn stream(&self) -> &S {
        &self.stream
    }

    /// The stream back from its two shares, or both shares back when they are of two
    /// different streams.
    pub(crate) fn reunite(self, write: OwnedWrite<S>) -> Result<S, (OwnedRead<S>, OwnedWrite<S>)> {
        if !Arc::ptr_eq(&self.stream, &write.stream) {
            return Err((self, write));
        }
        write.forget();
        // The write share's reference is gone and the shares held the only two.
        Ok(Arc::try_unwrap(self.stream).unwrap_or_else(|_| unreachable!("a split stream has exactly two halves")))
    }

    /// `Debug` for the owned half named `name`.
    pub(crate) fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result
    where
        S: std::fmt::Debug,
    {
        f.debug_struct(name).field("stream", &self.stream).finish()
    }
}

impl<S: StreamSocket> OwnedWrite<S> {
    pub(crate) fn stream(&self) -> &S {
        &self.stream
    }

    /// Drop the share without shutting the writing side down.
    pub(crate) fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// Shut the writing side down now: nothing is left to do on drop.
    pub(crate) fn shutdown_write(&mut self) -> io::Result<()> {
        self.stream.shutdown_write()?;
        self.shutdown_on_drop = false;
        Ok(())
    }

    /// `Debug` for the owned half named `name`.
    pub(crate) fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result
    where
        S: std::fmt::Debug,
    {
        f.debug_struct(name).field("stream", &self.stream).field("shutdown_on_drop", &self.shutdown_on_drop).finish()
    }
}

impl<S: StreamSocket> Drop for OwnedWrite<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.stream.shutdown_write();
        }
    }
}

/// The methods a reading half shares with its stream `$stream` (addresses `$addr`).
macro_rules! read_methods {
    ($stream:ident, $addr:ty) => {
        #[doc = concat!("Wait until the socket may be readable (see [`", stringify!($stream), "::readable`]).")]
        pub async fn readable(&self) -> std::io::Result<()> {
            self.stream().readable().await
        }

        #[doc = concat!("Wait until the socket is ready for any part of `interest` (see [`", stringify!($stream), "::ready`]).")]
        pub async fn ready(&self, interest: $crate::io::Interest) -> std::io::Result<$crate::io::Ready> {
            self.stream().ready(interest).await
        }

        #[doc = concat!("Read without waiting (see [`", stringify!($stream), "::try_read`]).")]
        pub fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.stream().try_read(buf)
        }

        #[doc = concat!("[`", stringify!($stream), "::try_read_vectored`].")]
        pub fn try_read_vectored(&self, bufs: &mut [std::io::IoSliceMut<'_>]) -> std::io::Result<usize> {
            self.stream().try_read_vectored(bufs)
        }

        #[doc = concat!("Read into the spare capacity of `buf` without waiting (see [`", stringify!($stream), "::try_read_buf`]).")]
        #[cfg(feature = "io-util")]
        pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> std::io::Result<usize> {
            self.stream().try_read_buf(buf)
        }

        /// The local address.
        pub fn local_addr(&self) -> std::io::Result<$addr> {
            self.stream().local_addr()
        }

        /// The peer's address.
        pub fn peer_addr(&self) -> std::io::Result<$addr> {
            self.stream().peer_addr()
        }
    };
}

/// The methods a writing half shares with its stream `$stream` (addresses `$addr`).
macro_rules! write_methods {
    ($stream:ident, $addr:ty) => {
        #[doc = concat!("Wait until the socket may be writable (see [`", stringify!($stream), "::writable`]).")]
        pub async fn writable(&self) -> std::io::Result<()> {
            self.stream().writable().await
        }

        #[doc = concat!("Wait until the socket is ready for any part of `interest` (see [`", stringify!($stream), "::ready`]).")]
        pub async fn ready(&self, interest: $crate::io::Interest) -> std::io::Result<$crate::io::Ready> {
            self.stream().ready(interest).await
        }

        #[doc = concat!("Write without waiting (see [`", stringify!($stream), "::try_write`]).")]
        pub fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
            self.stream().try_write(buf)
        }

        #[doc = concat!("[`", stringify!($stream), "::try_write_vectored`].")]
        pub fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
            self.stream().try_write_vectored(bufs)
        }

        /// The local address.
        pub fn local_addr(&self) -> std::io::Result<$addr> {
            self.stream().local_addr()
        }

        /// The peer's address.
        pub fn peer_addr(&self) -> std::io::Result<$addr> {
            self.stream().peer_addr()
        }
    };
}

/// The methods, traits and constructors of one kind's split halves: `ReadHalf`,
/// `WriteHalf`, `OwnedReadHalf`, `OwnedWriteHalf` and `ReuniteError`, which the module
/// invoking it declares, over the stream `$stream` (whose addresses are `$addr`). The
/// `read { .. }` and `write { .. }` methods are that kind's own, added to both of its
/// reading (or writing) halves.
macro_rules! stream_halves {
    ($stream:ident, $addr:ty, read { $($read:tt)* } write { $($write:tt)* }) => {
        pub(super) fn split(stream: &mut $stream) -> (ReadHalf<'_>, WriteHalf<'_>) {
            (ReadHalf(stream), WriteHalf(stream))
        }

        pub(super) fn into_split(stream: $stream) -> (OwnedReadHalf, OwnedWriteHalf) {
            let (read, write) = $crate::net::halves::split_owned(stream);
            (OwnedReadHalf(read), OwnedWriteHalf(write))
        }

        impl std::fmt::Display for ReuniteError {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tried to reunite halves that are not from the same socket")
            }
        }

        impl std::error::Error for ReuniteError {}

        impl ReadHalf<'_> {
            fn stream(&self) -> &$stream {
                self.0
            }

            $crate::net::halves::read_methods!($stream, $addr);
            $($read)*
        }

        impl WriteHalf<'_> {
            fn stream(&self) -> &$stream {
                self.0
            }

            $crate::net::halves::write_methods!($stream, $addr);
            $($write)*
        }

        impl OwnedReadHalf {
            fn stream(&self) -> &$stream {
                self.0.stream()
            }

            /// Put the halves back together into the stream. Halves of different
            /// streams are handed back in the error.
            pub fn reunite(self, other: OwnedWriteHalf) -> Result<$stream, ReuniteError> {
                self.0
                    .reunite(other.0)
                    .map_err(|(read, write)| ReuniteError(OwnedReadHalf(read), OwnedWriteHalf(write)))
            }

            $crate::net::halves::read_methods!($stream, $addr);
            $($read)*
        }

        impl OwnedWriteHalf {
            fn stream(&self) -> &$stream {
                self.0.stream()
            }

            /// Put the halves back together (see [`OwnedReadHalf::reunite`]).
            pub fn reunite(self, other: OwnedReadHalf) -> Result<$stream, ReuniteError> {
                other.reunite(self)
            }

            /// Drop this half without shutting the writing side down: the socket closes
            /// when the read half is dropped too.
            pub fn forget(self) {
                self.0.forget();
            }

            $crate::net::halves::write_methods!($stream, $addr);
            $($write)*
        }

        impl std::fmt::Debug for OwnedReadHalf {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.debug("OwnedReadHalf", f)
            }
        }

        impl std::fmt::Debug for OwnedWriteHalf {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.debug("OwnedWriteHalf", f)
            }
        }

        impl AsRef<$stream> for ReadHalf<'_> {
            fn as_ref(&self) -> &$stream {
                self.0
            }
        }

        impl AsRef<$stream> for WriteHalf<'_> {
            fn as_ref(&self) -> &$stream {
                self.0
            }
        }

        impl AsRef<$stream> for OwnedReadHalf {
            fn as_ref(&self) -> &$stream {
                self.0.stream()
            }
        }

        impl AsRef<$stream> for OwnedWriteHalf {
            fn as_ref(&self) -> &$stream {
                self.0.stream()
            }
        }

        $crate::net::stream::impl_async_read!(ReadHalf<'_>, |h| h.0);
        $crate::net::stream::impl_async_read!(OwnedReadHalf, |h| h.0.stream());
        $crate::net::stream::impl_async_write!(WriteHalf<'_>, |h| h.0, |h| {
            $crate::net::stream::StreamSocket::shutdown_write(h.0)
        });
        // Shut down already: nothing is left to do when it drops.
        $crate::net::stream::impl_async_write!(OwnedWriteHalf, |h| h.0.stream(), |h| h.0.shutdown_write());
    };
}

pub(crate) use {read_methods, stream_halves, write_methods};
