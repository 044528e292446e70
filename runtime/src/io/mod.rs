//! Tokio's I/O traits and utilities, and the process's standard streams.
//!
//! ```
//! # #[cfg(all(feature = "io-util", feature = "io-std"))]
//! # fn main() -> std::io::Result<()> {
//! use volt::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     // Whatever implements `AsyncRead` has the utilities: a socket, a file, a child's
//!     // output, or here a byte slice.
//!     let mut lines = BufReader::new(&b"first\nsecond\n"[..]).lines();
//!     let mut stdout = volt::io::stdout();
//!     while let Some(line) = lines.next_line().await? {
//!         stdout.write_all(format!("> {line}\n").as_bytes()).await?;
//!     }
//!     stdout.flush().await
//! })
//! # }
//! # #[cfg(not(all(feature = "io-util", feature = "io-std")))]
//! # fn main() {}
//! ```
//!
//! The traits (`AsyncRead`, `AsyncWrite`, their extension traits) and the utilities that
//! need no runtime (`BufReader`, `split`, `join`) are Tokio's own, re-exported (feature
//! `io-util`): Volt's sockets, files and pipes implement them, so code written against
//! `tokio::io` works unchanged. The ones that make a task yield when its budget is spent
//! are Volt's, on Volt's budget, as Tokio's are on Tokio's: `empty`, `repeat` and `sink`,
//! the in-memory pipes (`duplex`, `simplex`) and the copies (`copy`, `copy_buf`,
//! `copy_bidirectional`). `stdin`, `stdout` and `stderr` (feature `io-std`) are Volt's,
//! on its blocking pool.

/// `AsyncWrite` for a wrapper (`.0`) of one of Tokio's writers, which spend Tokio's
/// budget and not Volt's: each write goes through Volt's (`coop::budgeted`), and so do
/// flush and shutdown with `flush` (Tokio's always-ready writers spend there; its pipes,
/// given `writes`, do not).
#[cfg(feature = "io-util")]
macro_rules! budgeted_write {
    ($t:ty, $what:ident) => {
        impl AsyncWrite for $t {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                let inner = &mut self.get_mut().0;
                crate::task::coop::budgeted(cx, |cx| Pin::new(inner).poll_write(cx, buf))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let inner = &mut self.get_mut().0;
                crate::task::coop::budgeted(cx, |cx| Pin::new(inner).poll_write_vectored(cx, bufs))
            }

            fn is_write_vectored(&self) -> bool {
                self.0.is_write_vectored()
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let inner = &mut self.get_mut().0;
                budgeted_write!(@$what cx, |cx| Pin::new(inner).poll_flush(cx))
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                let inner = &mut self.get_mut().0;
                budgeted_write!(@$what cx, |cx| Pin::new(inner).poll_shutdown(cx))
            }
        }
    };
    (@flush $cx:ident, $op:expr) => {
        crate::task::coop::budgeted($cx, $op)
    };
    (@writes $cx:ident, $op:expr) => {
        ($op)($cx)
    };
}

#[cfg(feature = "tokio-io")]
pub use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[cfg(feature = "io-util")]
pub use tokio::io::{
    join, split, AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWriteExt, BufReader,
    BufStream, BufWriter, Chain, Join, Lines, ReadHalf, Split, Take, WriteHalf,
};

#[cfg(feature = "io-util")]
mod budgeted;
#[cfg(feature = "io-util")]
pub use budgeted::{
    copy, copy_bidirectional, copy_bidirectional_with_sizes, copy_buf, duplex, simplex, DuplexStream, SimplexStream,
};

#[cfg(feature = "io-util")]
mod ready;
#[cfg(feature = "io-util")]
pub use ready::{empty, repeat, sink, Empty, Repeat, Sink};

pub(crate) mod wait_label;

mod async_fd;
#[cfg(feature = "tokio-io")]
pub(crate) mod pipe_end;

/// Unix descriptors on the runtime's reactor (Tokio's `tokio::io::unix`).
pub mod unix {
    #[allow(deprecated)]
    pub use super::async_fd::AsyncFdTryNewError;
    pub use super::async_fd::{AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, AsyncFdRegisterError, TryIoError};
}

#[cfg(feature = "io-std")]
mod stdio;
#[cfg(feature = "io-std")]
pub use stdio::{stderr, stdin, stdout, Stderr, Stdin, Stdout};

pub use std::io::{Error, ErrorKind, Result, SeekFrom};

/// What a socket's `ready` waits for and what it found (Volt's own, as `volt::net` has
/// them: Tokio's are tied to Tokio's reactor).
pub use crate::net::{Interest, Ready};
