//! tokio-util's I/O adapters (its own, re-exported: they need no runtime), and
//! [`SyncIoBridge`] on Volt's runtime.

pub use tokio_util::io::{
    poll_read_buf, poll_write_buf, read_buf, read_exact_arc, write_all_vectored, CopyToBytes, InspectReader,
    InspectWriter, ReaderStream, SinkWriter, StreamReader, WriteAllVectored,
};

use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::pin::Pin;
use volt::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWrite, AsyncWriteExt,
};
use volt::runtime::Handle;

/// Blocking `std::io` traits over an asynchronous reader or writer, for synchronous code
/// (a parser, a compressor) run on the blocking pool: each call blocks its thread on the
/// operation, through a Volt runtime's [`Handle::block_on`]. As tokio-util's, it must not
/// be used on a worker thread (there a blocking call would hold the worker; use
/// `spawn_blocking`).
#[derive(Debug)]
pub struct SyncIoBridge<T> {
    src: T,
    rt: Handle,
}

impl<T: Unpin> SyncIoBridge<T> {
    /// Bridge `src` on the current Volt runtime.
    ///
    /// # Panics
    /// Outside a Volt runtime's context (as Tokio's panics outside Tokio's).
    #[track_caller]
    pub fn new(src: T) -> Self {
        Self::new_with_handle(src, Handle::current())
    }

    /// Bridge `src` on the runtime of `rt`.
    pub fn new_with_handle(src: T, rt: Handle) -> Self {
        Self { src, rt }
    }

    /// The reader or writer back.
    pub fn into_inner(self) -> T {
        self.src
    }
}

impl<T> AsRef<T> for SyncIoBridge<T> {
    fn as_ref(&self) -> &T {
        &self.src
    }
}

impl<T> AsMut<T> for SyncIoBridge<T> {
    fn as_mut(&mut self) -> &mut T {
        &mut self.src
    }
}

impl<T: AsyncWrite + Unpin> SyncIoBridge<T> {
    /// Whether the writer does vectored writes itself.
    pub fn is_write_vectored(&self) -> bool {
        self.src.is_write_vectored()
    }

    /// Shut the writer down, blocking until it has.
    pub fn shutdown(&mut self) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(src.shutdown())
    }
}

impl<T: AsyncRead + Unpin> Read for SyncIoBridge<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.read(buf))
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.read_to_end(buf))
    }

    fn read_to_string(&mut self, buf: &mut String) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.read_to_string(buf))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(src.read_exact(buf)).map(drop)
    }
}

impl<T: AsyncBufRead + Unpin> BufRead for SyncIoBridge<T> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let src = &mut self.src;
        self.rt.block_on(src.fill_buf())
    }

    fn consume(&mut self, amt: usize) {
        Pin::new(&mut self.src).consume(amt)
    }

    fn read_until(&mut self, byte: u8, buf: &mut Vec<u8>) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.read_until(byte, buf))
    }

    fn read_line(&mut self, buf: &mut String) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.read_line(buf))
    }
}

impl<T: AsyncWrite + Unpin> Write for SyncIoBridge<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(src.flush())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let src = &mut self.src;
        self.rt.block_on(src.write_all(buf))
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let src = &mut self.src;
        self.rt.block_on(src.write_vectored(bufs))
    }
}

impl<T: AsyncSeek + Unpin> Seek for SyncIoBridge<T> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let src = &mut self.src;
        self.rt.block_on(src.seek(pos))
    }
}

/// An in-memory byte pipe in one direction (tokio-util's `io::simplex`), whose reads and
/// writes spend Volt's cooperative budget (tokio-util's spend Tokio's, which never runs
/// out on Volt, so a loop on one never yielded).
pub mod simplex {
    use std::io::{self, IoSlice};
    use std::pin::Pin;
    use std::task::{ready, Context, Poll};
    use volt::io::{AsyncRead, AsyncWrite, ReadBuf};
    use volt::task::coop::poll_proceed;

    /// The reading end of a pipe from [`new`].
    #[derive(Debug)]
    pub struct Receiver(tokio_util::io::simplex::Receiver);

    /// The writing end of a pipe from [`new`].
    #[derive(Debug)]
    pub struct Sender(tokio_util::io::simplex::Sender);

    /// A pipe holding at most `capacity` bytes written and not yet read. Dropping the
    /// sender (or shutting it down) gives the receiver its end of file; dropping the
    /// receiver makes writes fail with `BrokenPipe`.
    ///
    /// # Panics
    /// If `capacity` is zero (as tokio-util's).
    #[track_caller]
    pub fn new(capacity: usize) -> (Sender, Receiver) {
        let (tx, rx) = tokio_util::io::simplex::new(capacity);
        (Sender(tx), Receiver(rx))
    }

    /// `op` with a unit of the task's budget, kept only if it completes.
    fn budgeted<T>(cx: &mut Context<'_>, op: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        let coop = ready!(poll_proceed(cx));
        let out = op(cx);
        if out.is_ready() {
            coop.made_progress();
        }
        out
    }

    impl AsyncRead for Receiver {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let inner = &mut self.get_mut().0;
            budgeted(cx, |cx| Pin::new(inner).poll_read(cx, buf))
        }
    }

    impl AsyncWrite for Sender {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let inner = &mut self.get_mut().0;
            budgeted(cx, |cx| Pin::new(inner).poll_write(cx, buf))
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let inner = &mut self.get_mut().0;
            budgeted(cx, |cx| Pin::new(inner).poll_write_vectored(cx, bufs))
        }

        fn is_write_vectored(&self) -> bool {
            self.0.is_write_vectored()
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }
}
