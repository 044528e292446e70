//! Unix pipes and FIFOs on the reactor (Tokio's `tokio::net::unix::pipe`): the writing
//! end [`Sender`], the reading end [`Receiver`], an anonymous [`pipe`], and
//! [`OpenOptions`] to open a named FIFO.
//!
//! ```
//! # fn main() -> std::io::Result<()> {
//! use volt::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let (mut tx, mut rx) = volt::net::unix::pipe::pipe()?;
//!     tx.write_all(b"through the pipe").await?;
//!     drop(tx);
//!     let mut got = String::new();
//!     rx.read_to_string(&mut got).await?;
//!     assert_eq!(got, "through the pipe");
//!     Ok(())
//! })
//! # }
//! ```

use crate::io::pipe_end::Pipe;
use crate::net::{Interest, Ready};
use crate::reactor::Direction;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::task::{Context, Poll};

/// A new anonymous pipe: its writing end and its reading end, both non-blocking and on
/// the current runtime's reactor.
///
/// # Errors
/// Outside a Volt runtime, or if the system is out of descriptors.
pub fn pipe() -> io::Result<(Sender, Receiver)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe2(2)` writes two descriptors into the live two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pipe2` just created both descriptors, owned by nobody else.
    let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((Sender::from_owned_fd_unchecked(tx)?, Receiver::from_owned_fd_unchecked(rx)?))
}

/// How to open a named FIFO (made with `mkfifo`) as a [`Sender`] or a [`Receiver`].
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read_write: bool,
    unchecked: bool,
}

impl OpenOptions {
    /// Read-only for a receiver, write-only for a sender, and a check that the file is a
    /// FIFO.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Open the FIFO for reading and writing (Linux): a sender then opens even with no
    /// reader, and a receiver never sees end of file while it holds the write side itself.
    pub fn read_write(&mut self, value: bool) -> &mut OpenOptions {
        self.read_write = value;
        self
    }

    /// Skip the check that the file is a FIFO (a character device, say).
    pub fn unchecked(&mut self, value: bool) -> &mut OpenOptions {
        self.unchecked = value;
        self
    }

    /// Open `path` as a [`Receiver`].
    ///
    /// # Errors
    /// The open's error; `InvalidInput` if the file is not a FIFO (unless unchecked).
    pub fn open_receiver<P: AsRef<Path>>(&self, path: P) -> io::Result<Receiver> {
        let file = self.open(path.as_ref(), libc::O_RDONLY)?;
        Receiver::from_owned_fd_unchecked(OwnedFd::from(file))
    }

    /// Open `path` as a [`Sender`].
    ///
    /// # Errors
    /// The open's error: `ENXIO` (raw OS error 6) if no process has the FIFO open for
    /// reading, unless `read_write`; `InvalidInput` if the file is not a FIFO (unless
    /// unchecked).
    pub fn open_sender<P: AsRef<Path>>(&self, path: P) -> io::Result<Sender> {
        let file = self.open(path.as_ref(), libc::O_WRONLY)?;
        Sender::from_owned_fd_unchecked(OwnedFd::from(file))
    }

    fn open(&self, path: &Path, mode: libc::c_int) -> io::Result<File> {
        let mode = if self.read_write { libc::O_RDWR } else { mode };
        let mut options = std::fs::OpenOptions::new();
        options
            .read(mode != libc::O_WRONLY)
            .write(mode != libc::O_RDONLY)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
        let file = options.open(path)?;
        if !self.unchecked && !file.metadata()?.file_type().is_fifo() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"));
        }
        Ok(file)
    }
}

/// Check that `fd` is a FIFO open for `access` (`O_WRONLY` or `O_RDONLY`; `O_RDWR`
/// serves both).
fn check(fd: BorrowedFd<'_>, access: libc::c_int) -> io::Result<()> {
    let file = File::from(fd.try_clone_to_owned()?);
    if !file.metadata()?.file_type().is_fifo() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"));
    }
    // SAFETY: `fcntl` on a descriptor the caller owns, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let mode = flags & libc::O_ACCMODE;
    if mode != access && mode != libc::O_RDWR {
        let need = if access == libc::O_WRONLY { "writing" } else { "reading" };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("the pipe is not open for {need}")));
    }
    Ok(())
}

macro_rules! pipe_end {
    ($name:ident, $access:expr, $interest:expr, $dir:expr, $what:literal) => {
        impl $name {
            #[doc = concat!("Take over a `File` that is a FIFO open for ", $what, " (made non-blocking and")]
            /// registered with the current runtime's reactor).
            ///
            /// # Errors
            /// `InvalidInput` if it is not such a FIFO; outside a Volt runtime.
            pub fn from_file(file: File) -> io::Result<$name> {
                $name::from_owned_fd(OwnedFd::from(file))
            }

            /// [`from_file`](Self::from_file) for an `OwnedFd`.
            ///
            /// # Errors
            /// As for [`from_file`](Self::from_file).
            pub fn from_owned_fd(fd: OwnedFd) -> io::Result<$name> {
                check(fd.as_fd(), $access)?;
                $name::from_owned_fd_unchecked(fd)
            }

            /// [`from_file`](Self::from_file) without the checks.
            ///
            /// # Errors
            /// Outside a Volt runtime, or if the reactor refuses the descriptor.
            pub fn from_file_unchecked(file: File) -> io::Result<$name> {
                $name::from_owned_fd_unchecked(OwnedFd::from(file))
            }

            /// [`from_owned_fd`](Self::from_owned_fd) without the checks.
            ///
            /// # Errors
            /// Outside a Volt runtime, or if the reactor refuses the descriptor.
            pub fn from_owned_fd_unchecked(fd: OwnedFd) -> io::Result<$name> {
                Ok($name(Pipe::new(fd, $interest)?))
            }

            /// Wait until the pipe is ready for any part of `interest`, and say what it
            /// found.
            ///
            /// # Errors
            /// When the runtime has shut down.
            pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
                std::future::poll_fn(|cx| crate::net::ready::poll_interest(self.0.reg(), cx, interest)).await
            }

            /// Run `f`, a non-blocking operation on the descriptor, if the reactor has
            /// seen the pipe ready (else `WouldBlock` without calling it, as Tokio's); a
            /// `WouldBlock` from `f` clears the readiness, so the next wait is for a new
            /// event.
            ///
            /// # Errors
            /// `f`'s error, or `WouldBlock`.
            pub fn try_io<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
                self.0.reg().try_io_if_ready($dir, f)
            }

            /// [`try_io`](Self::try_io) that always makes the attempt.
            fn attempt<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
                self.0.reg().try_io($dir, f)
            }

            /// The descriptor, out of the reactor and blocking again.
            ///
            /// # Errors
            /// If the descriptor's flags cannot be changed.
            pub fn into_blocking_fd(self) -> io::Result<OwnedFd> {
                self.0.into_owned_fd()
            }

            /// The descriptor, out of the reactor and still non-blocking.
            ///
            /// # Errors
            /// None on Linux; kept for Tokio's signature.
            pub fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
                Ok(self.0.into_nonblocking_fd())
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.0.raw()).finish()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.0.raw()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.fd()
            }
        }
    };
}

/// The writing end of a pipe or FIFO, on the reactor.
pub struct Sender(Pipe);

/// The reading end of a pipe or FIFO, on the reactor.
pub struct Receiver(Pipe);

pipe_end!(Sender, libc::O_WRONLY, mio::Interest::WRITABLE, Direction::Write, "writing");
pipe_end!(Receiver, libc::O_RDONLY, mio::Interest::READABLE, Direction::Read, "reading");

fn cvt(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl Sender {
    /// Wait until the pipe may be written.
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(|_| ())
    }

    /// [`writable`](Self::writable) as a poll function.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.reg().poll_ready(cx, Direction::Write).map_ok(|_| ())
    }

    /// Write what fits without waiting; `WouldBlock` if the pipe is full.
    ///
    /// # Errors
    /// `WouldBlock`, or the write's error (`BrokenPipe` once no reader is left).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.0.raw();
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
        self.attempt(|| cvt(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }))
    }

    /// [`try_write`](Self::try_write) of several buffers with one `writev(2)`.
    ///
    /// # Errors
    /// As for [`try_write`](Self::try_write).
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let fd = self.0.raw();
        let n = bufs.len().min(1024) as libc::c_int;
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix, and the slices stay
        // valid for reads for the call.
        self.attempt(|| cvt(unsafe { libc::writev(fd, bufs.as_ptr().cast(), n) }))
    }
}

impl Receiver {
    /// Wait until the pipe may be read (or its writers are all gone).
    ///
    /// # Errors
    /// When the runtime has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(|_| ())
    }

    /// [`readable`](Self::readable) as a poll function.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.reg().poll_ready(cx, Direction::Read).map_ok(|_| ())
    }

    /// Read what is there without waiting: `Ok(0)` is end of file (every writer gone),
    /// `WouldBlock` means nothing yet.
    ///
    /// # Errors
    /// `WouldBlock`, or the read's error.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.0.raw();
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
        self.attempt(|| cvt(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }))
    }

    /// [`try_read`](Self::try_read) into several buffers with one `readv(2)`.
    ///
    /// # Errors
    /// As for [`try_read`](Self::try_read).
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        let fd = self.0.raw();
        let n = bufs.len().min(1024) as libc::c_int;
        // SAFETY: `IoSliceMut` is ABI-compatible with `iovec` on Unix, and the slices stay
        // valid for writes for the call.
        self.attempt(|| cvt(unsafe { libc::readv(fd, bufs.as_mut_ptr().cast(), n) }))
    }

    /// [`try_read`](Self::try_read) into the spare room of `buf`, which grows by what was
    /// read.
    ///
    /// # Errors
    /// As for [`try_read`](Self::try_read).
    #[cfg(feature = "io-util")]
    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let fd = self.0.raw();
        self.attempt(|| crate::net::buf::read(fd, buf))
    }
}

crate::io::pipe_end::pipe_async_read!(Receiver);
crate::io::pipe_end::pipe_async_write!(Sender);
