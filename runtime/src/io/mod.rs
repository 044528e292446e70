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
//! need no runtime (`BufReader`, `copy`, `duplex`, `split`) are Tokio's own, re-exported
//! (feature `io-util`): Volt's sockets, files and pipes implement them, so code written
//! against `tokio::io` works unchanged. `empty`, `repeat` and `sink`, always ready, are
//! Volt's: they make a task yield when its budget is spent, as Tokio's do on Tokio. `stdin`, `stdout` and `stderr` (feature `io-std`)
//! are Volt's, on its blocking pool.

#[cfg(feature = "tokio-io")]
pub use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[cfg(feature = "io-util")]
pub use tokio::io::{
    copy, copy_bidirectional, copy_bidirectional_with_sizes, copy_buf, duplex, join, simplex, split, AsyncBufRead,
    AsyncBufReadExt, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWriteExt, BufReader, BufStream, BufWriter, Chain,
    DuplexStream, Join, Lines, ReadHalf, SimplexStream, Split, Take, WriteHalf,
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
