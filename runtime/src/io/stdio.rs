//! `stdin`, `stdout` and `stderr`: the process's standard streams, read and written on
//! the blocking pool (a terminal or a pipe may block, and a regular file would not
//! report readiness anyway), as Tokio's are.
//!
//! One operation is in flight at a time, owning a buffer. A write copies the caller's
//! bytes and returns once they are handed to the pool; the next write, or `flush`, waits
//! for it and reports its error. A read fills the buffer on the pool and later reads take
//! from it first. A read of stdin that is waiting for input cannot be cancelled: dropping
//! the future leaves the pool thread reading until input or end of file arrives, as in
//! Tokio (so a runtime that shuts down waits for it up to its shutdown timeout).

use super::wait_label::{join_error, poll_labelled, pool, StackLabel};
use crate::task::join::JoinHandle;
use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// The largest piece one operation hands to the pool, as Tokio's (2 MiB).
const MAX_BUF: usize = 2 * 1024 * 1024;

/// A handle to the process's standard input, from [`stdin`]: Tokio's `AsyncRead` on the
/// blocking pool. Its waits are named `read stdin`.
#[derive(Debug)]
pub struct Stdin(Blocking<std::io::Stdin>);

/// A handle to the process's standard output, from [`stdout`]: Tokio's `AsyncWrite` on
/// the blocking pool. Its waits are named `write stdout`. Each write is flushed through
/// std's line buffer on the pool, so nothing stays behind in it.
#[derive(Debug)]
pub struct Stdout(Blocking<std::io::Stdout>);

/// A handle to the process's standard error, from [`stderr`]: Tokio's `AsyncWrite` on
/// the blocking pool. Its waits are named `write stderr`.
#[derive(Debug)]
pub struct Stderr(Blocking<std::io::Stderr>);

/// The process's standard input. Several handles may exist; they share std's buffer, so
/// reading from two at once interleaves what each gets.
pub fn stdin() -> Stdin {
    Stdin(Blocking::new(std::io::stdin(), "read stdin"))
}

/// The process's standard output. Writes from several handles (or tasks) may
/// interleave; each write's bytes stay together.
pub fn stdout() -> Stdout {
    Stdout(Blocking::new(std::io::stdout(), "write stdout"))
}

/// The process's standard error.
pub fn stderr() -> Stderr {
    Stderr(Blocking::new(std::io::stderr(), "write stderr"))
}

/// A blocking stream driven from the pool.
struct Blocking<T> {
    state: State<T>,
    label: &'static str,
}

enum State<T> {
    /// The stream, and bytes read ahead (`buf[pos..]`).
    Idle(Option<(T, Vec<u8>, usize)>),
    /// An operation on the pool; it gives the stream and the buffer back.
    Busy(JoinHandle<(io::Result<usize>, T, Vec<u8>)>),
}

impl<T> std::fmt::Debug for Blocking<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocking").field("busy", &matches!(self.state, State::Busy(_))).finish()
    }
}

impl<T: Send + 'static> Blocking<T> {
    fn new(inner: T, label: &'static str) -> Blocking<T> {
        Blocking { state: State::Idle(Some((inner, Vec::new(), 0))), label }
    }

    /// Wait for the operation in flight; its result, or `None` when there was none.
    /// A job that failed (the runtime shut down) loses the stream: later calls fail.
    fn poll_busy(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<usize>>> {
        let State::Busy(handle) = &mut self.state else { return Poll::Ready(None) };
        let label = StackLabel::new(&[self.label.as_bytes()]);
        match ready!(poll_labelled(&label, cx, |cx| Pin::new(handle).poll(cx))) {
            Ok((r, inner, buf)) => {
                self.state = State::Idle(Some((inner, buf, 0)));
                Poll::Ready(Some(r))
            }
            Err(e) => {
                self.state = State::Idle(None);
                Poll::Ready(Some(Err(join_error(e))))
            }
        }
    }

    fn lost() -> io::Error {
        io::Error::other("the standard stream's handle was lost with a blocking job that did not return")
    }
}

impl<T: Read + Send + 'static> Blocking<T> {
    fn poll_read(&mut self, cx: &mut Context<'_>, dst: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            match &mut self.state {
                State::Idle(slot) => {
                    let pool = pool()?;
                    let Some((mut inner, mut buf, pos)) = slot.take() else { return Poll::Ready(Err(Self::lost())) };
                    if pos < buf.len() {
                        let n = (buf.len() - pos).min(dst.remaining());
                        dst.put_slice(&buf[pos..pos + n]);
                        *slot = Some((inner, buf, pos + n));
                        return Poll::Ready(Ok(()));
                    }
                    let want = dst.remaining().min(MAX_BUF);
                    self.state = State::Busy(pool.spawn(move || {
                        buf.clear();
                        buf.resize(want, 0);
                        let r = loop {
                            match inner.read(&mut buf) {
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                                r => break r,
                            }
                        };
                        buf.truncate(*r.as_ref().unwrap_or(&0));
                        (r, inner, buf)
                    }));
                }
                State::Busy(_) => {
                    // A read's bytes are in the buffer now, handed out by the idle arm.
                    if let Some(Err(e)) = ready!(self.poll_busy(cx)) {
                        return Poll::Ready(Err(e));
                    }
                }
            }
        }
    }
}

impl<T: Write + Send + 'static> Blocking<T> {
    fn poll_write(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            match &mut self.state {
                State::Idle(slot) => {
                    let pool = pool()?;
                    let Some((mut inner, mut buf, _)) = slot.take() else { return Poll::Ready(Err(Self::lost())) };
                    let n = src.len().min(MAX_BUF);
                    buf.clear();
                    buf.extend_from_slice(&src[..n]);
                    self.state = State::Busy(pool.spawn(move || {
                        let r = inner.write_all(&buf).and_then(|()| inner.flush()).map(|()| 0);
                        buf.clear();
                        (r, inner, buf)
                    }));
                    return Poll::Ready(Ok(n));
                }
                State::Busy(_) => {
                    if let Some(Err(e)) = ready!(self.poll_busy(cx)) {
                        return Poll::Ready(Err(e));
                    }
                }
            }
        }
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match ready!(self.poll_busy(cx)) {
            Some(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

impl tokio::io::AsyncRead for Stdin {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.get_mut().0.poll_read(cx, buf)
    }
}

macro_rules! writer {
    ($t:ty) => {
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.get_mut().0.poll_write(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.get_mut().0.poll_flush(cx)
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.get_mut().0.poll_flush(cx)
            }
        }
    };
}
writer!(Stdout);
writer!(Stderr);

#[cfg(unix)]
macro_rules! raw_fd {
    ($t:ty, $fd:expr) => {
        impl std::os::unix::io::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::unix::io::RawFd {
                $fd
            }
        }
        impl std::os::unix::io::AsFd for $t {
            fn as_fd(&self) -> std::os::unix::io::BorrowedFd<'_> {
                // SAFETY: the standard streams' descriptors are open for the process's
                // life (std never closes them), so the borrow outlives `self`.
                unsafe { std::os::unix::io::BorrowedFd::borrow_raw($fd) }
            }
        }
    };
}
#[cfg(unix)]
raw_fd!(Stdin, libc::STDIN_FILENO);
#[cfg(unix)]
raw_fd!(Stdout, libc::STDOUT_FILENO);
#[cfg(unix)]
raw_fd!(Stderr, libc::STDERR_FILENO);

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::io::FromRawFd;

    /// The machinery behind `stdin()`, over a pipe nobody writes yet: the read waits on
    /// the pool, named `read stdin`, and gets the bytes once they come.
    #[test]
    fn a_blocked_read_is_named_and_completes() {
        let rt = crate::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors `pipe(2)` writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are new and owned by nothing else.
        let (rd, mut wr) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
        let reader = crate::task::Builder::new().name("stdin-reader").spawn_on(
            async move {
                let mut b = Blocking::new(rd, "read stdin");
                let mut out = [0u8; 16];
                let mut rb = tokio::io::ReadBuf::new(&mut out);
                std::future::poll_fn(|cx| b.poll_read(cx, &mut rb)).await.unwrap();
                rb.filled().to_vec()
            },
            rt.handle(),
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let tasks = rt.handle().telemetry().tasks();
            let t = tasks.iter().find(|t| t.name.as_deref() == Some("stdin-reader"));
            if t.and_then(|t| t.waiting_on.as_ref()).is_some_and(|w| w.to_string() == "read stdin") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not named: {t:?}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        wr.write_all(b"typed").unwrap();
        assert_eq!(rt.block_on(reader).unwrap(), b"typed");
    }

    /// Each write reaches the stream whole, in order, once flushed.
    #[test]
    fn writes_arrive_in_order() {
        let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();
        let mut fds = [0; 2];
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: as above.
        let (mut rd, wr) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
        rt.block_on(async move {
            let mut b = Blocking::new(wr, "write stdout");
            for part in [&b"one "[..], b"two ", b"three"] {
                let mut left = part;
                while !left.is_empty() {
                    let n = std::future::poll_fn(|cx| b.poll_write(cx, left)).await.unwrap();
                    left = &left[n..];
                }
            }
            std::future::poll_fn(|cx| b.poll_flush(cx)).await.unwrap();
        });
        let mut got = String::new();
        rd.read_to_string(&mut got).unwrap();
        assert_eq!(got, "one two three");
    }
}
