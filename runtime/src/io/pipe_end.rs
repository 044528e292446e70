//! A pipe end on the reactor: a non-blocking descriptor registered with Volt's reactor,
//! so a read or write waits for readiness without holding a thread. Used by a child's
//! stdio pipes (`process`) and by `net::unix::pipe`.

use crate::io::wait_label::{poll_labelled, StackLabel};
use crate::reactor::{Direction, Registration};
use mio::unix::SourceFd;
use std::io;
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::task::{ready, Context, Poll};

/// A pipe end registered with the reactor.
pub(crate) struct Pipe {
    /// `None` only after `into_owned_fd` took it (the drop then has nothing to do).
    fd: Option<OwnedFd>,
    reg: Registration,
}

impl Pipe {
    pub(crate) fn new(fd: OwnedFd, interest: mio::Interest) -> io::Result<Pipe> {
        set_nonblocking(fd.as_raw_fd(), true)?;
        let raw = fd.as_raw_fd();
        let reg = Registration::new_fd(raw, interest)?;
        Ok(Pipe { fd: Some(fd), reg })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Read into the unfilled part of `buf`, the wait named `read pipe`.
    pub(crate) fn poll_read(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let fd = self.raw();
        // SAFETY: `read(2)` below only writes into this memory and never de-initializes
        // any of it; only the bytes it wrote are marked initialized.
        let unfilled = unsafe { buf.unfilled_mut() };
        let len = unfilled.len();
        let n = ready!(poll_labelled(&StackLabel::new(&[b"read pipe"]), cx, |cx| {
            self.reg.poll_read_io(cx, len, || {
                // SAFETY: `unfilled` is valid for writes of `len` bytes for the call.
                let n = unsafe { libc::read(fd, unfilled.as_mut_ptr().cast(), len) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            })
        }))?;
        // SAFETY: `read(2)` initialized the first `n` bytes of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    /// Read everything up to end of file onto `out` (a child's output, for
    /// `Child::wait_with_output`).
    #[cfg(feature = "process")]
    pub(crate) fn poll_read_to_end(&self, cx: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<io::Result<()>> {
        loop {
            if out.capacity() - out.len() < 4096 {
                out.reserve(16 * 1024);
            }
            let mut rb = tokio::io::ReadBuf::uninit(out.spare_capacity_mut());
            ready!(self.poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            // SAFETY: the read initialized `n` bytes right after the vector's length, in
            // its spare capacity.
            unsafe { out.set_len(out.len() + n) };
        }
    }

    /// Write `buf`, the wait named `write pipe`.
    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let fd = self.raw();
        poll_labelled(&StackLabel::new(&[b"write pipe"]), cx, |cx| {
            self.reg.poll_io(cx, Direction::Write, || {
                // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
                let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            })
        })
    }

    /// Write several buffers with one `writev(2)`, the wait named `write pipe`.
    pub(crate) fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let fd = self.raw();
        // More than IOV_MAX buffers is EINVAL: the rest go in a later call.
        let n = bufs.len().min(1024);
        poll_labelled(&StackLabel::new(&[b"write pipe"]), cx, |cx| {
            self.reg.poll_io(cx, Direction::Write, || {
                // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix, and the `n`
                // slices stay valid for reads for the call.
                let r = unsafe { libc::writev(fd, bufs.as_ptr().cast(), n as libc::c_int) };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(r as usize)
                }
            })
        })
    }

    /// Take the descriptor out of the reactor, blocking again, for another process.
    pub(crate) fn into_owned_fd(mut self) -> io::Result<OwnedFd> {
        let fd = self.fd.take().expect("a pipe's descriptor is taken once");
        self.reg.deregister(&mut SourceFd(&fd.as_raw_fd()));
        set_nonblocking(fd.as_raw_fd(), false)?;
        Ok(fd)
    }
}

impl Pipe {
    /// The descriptor, borrowed.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("a pipe holds its descriptor until it is consumed").as_fd()
    }

    /// The reactor registration (for readiness waits and `try_*` operations).
    pub(crate) fn reg(&self) -> &Registration {
        &self.reg
    }

    /// Take the descriptor out of the reactor, still non-blocking.
    pub(crate) fn into_nonblocking_fd(mut self) -> OwnedFd {
        let fd = self.fd.take().expect("a pipe's descriptor is taken once");
        self.reg.deregister(&mut SourceFd(&fd.as_raw_fd()));
        fd
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        if let Some(fd) = &self.fd {
            self.reg.deregister(&mut SourceFd(&fd.as_raw_fd()));
        }
    }
}

pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: `fcntl` on a descriptor this process owns, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Tokio's `AsyncWrite` for a type wrapping a writing [`Pipe`] (`.0`): writes go straight
/// into the pipe, so flush has nothing to do, and the reader sees end of file when the
/// end is dropped, so shutdown has nothing to do either.
macro_rules! pipe_async_write {
    ($ty:ty) => {
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.0.poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.0.poll_write_vectored(cx, bufs)
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
                std::task::Poll::Ready(Ok(()))
            }
        }
    };
}
pub(crate) use pipe_async_write;

/// Tokio's `AsyncRead` for a type wrapping a reading [`Pipe`] (`.0`).
macro_rules! pipe_async_read {
    ($ty:ty) => {
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.0.poll_read(cx, buf)
            }
        }
    };
}
pub(crate) use pipe_async_read;
