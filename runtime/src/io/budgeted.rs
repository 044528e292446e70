//! `duplex`, `simplex` and the copies (`copy`, `copy_buf`, `copy_bidirectional`) on
//! Volt's cooperative budget.
//!
//! Tokio's versions make a task yield once it has spent its budget, but the budget they
//! look at is Tokio's, which never runs out outside a Tokio runtime. Re-exported on Volt,
//! a task that looped on an in-memory stream (two ends of a `duplex` talking to each
//! other, a `copy` out of a byte slice into a `Vec`) never returned `Pending`: it held
//! its worker for good, and a `timeout` or a `select!` branch beside it never ran. Here
//! Tokio's pipes and copy loops do the work, and each read or write that completes on a
//! stream that does not answer to Volt's budget itself spends a unit of it, as Volt's
//! sockets do; once it is spent, the next one answers `Pending` and the task is woken to
//! run again.

use crate::task::coop;
use std::fmt;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};

/// One end of an in-memory byte pipe in each direction: from [`duplex`]. What one end
/// writes, the other reads; dropping or shutting down an end gives the other end's reads
/// their end of file. Reads and writes spend the task's budget.
#[derive(Debug)]
pub struct DuplexStream(tokio::io::DuplexStream);

/// Two connected [`DuplexStream`]s, each buffering at most `max_buf_size` bytes written
/// to it and not yet read (a writer waits while the buffer is full), as Tokio's `duplex`.
#[track_caller]
pub fn duplex(max_buf_size: usize) -> (DuplexStream, DuplexStream) {
    let (a, b) = tokio::io::duplex(max_buf_size);
    (DuplexStream(a), DuplexStream(b))
}

/// An in-memory byte pipe in one direction, written at one end and read at the other:
/// [`SimplexStream::new_unsplit`] gives it whole, [`simplex`] as two halves. Reads and
/// writes spend the task's budget.
#[derive(Debug)]
pub struct SimplexStream(tokio::io::SimplexStream);

impl SimplexStream {
    /// A pipe that holds at most `max_buf_size` bytes written and not yet read.
    #[track_caller]
    pub fn new_unsplit(max_buf_size: usize) -> SimplexStream {
        SimplexStream(tokio::io::SimplexStream::new_unsplit(max_buf_size))
    }
}

/// A [`SimplexStream`] split into its reading and its writing half, as Tokio's `simplex`.
#[track_caller]
pub fn simplex(max_buf_size: usize) -> (ReadHalf<SimplexStream>, WriteHalf<SimplexStream>) {
    tokio::io::split(SimplexStream::new_unsplit(max_buf_size))
}

/// `AsyncRead` for a wrapper of one of Tokio's pipes: each read through the budget.
macro_rules! budgeted_read {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
                let inner = &mut self.get_mut().0;
                coop::budgeted(cx, |cx| Pin::new(inner).poll_read(cx, buf))
            }
        }
    };
}

budgeted_read!(DuplexStream);
budgeted_read!(SimplexStream);
// Tokio's pipes spend nothing on a flush or a shutdown.
budgeted_write!(DuplexStream, writes);
budgeted_write!(SimplexStream, writes);

/// A stream lent to one of Tokio's copy loops: its reads spend the task's budget (unless
/// the stream spent it itself, as Volt's sockets do), its writes go straight through.
struct Budgeted<'a, T: ?Sized>(&'a mut T);

impl<T: AsyncRead + Unpin + ?Sized> AsyncRead for Budgeted<'_, T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let inner = &mut *self.get_mut().0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_read(cx, buf))
    }
}

impl<T: AsyncBufRead + Unpin + ?Sized> AsyncBufRead for Budgeted<'_, T> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let inner = &mut *self.get_mut().0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_fill_buf(cx))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        Pin::new(&mut *self.get_mut().0).consume(amt)
    }
}

impl<T: AsyncWrite + Unpin + ?Sized> AsyncWrite for Budgeted<'_, T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().0).poll_shutdown(cx)
    }
}

impl<T: ?Sized> fmt::Debug for Budgeted<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Budgeted { .. }")
    }
}

/// Copy everything `reader` gives until its end of file into `writer`, and return how
/// many bytes that was (as Tokio's `copy`: through a buffer of 8 KiB, flushing `writer`
/// whenever `reader` has nothing yet). Each read spends the task's budget.
pub async fn copy<'a, R, W>(reader: &'a mut R, writer: &'a mut W) -> io::Result<u64>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    tokio::io::copy(&mut Budgeted(reader), writer).await
}

/// [`copy`] out of a buffered reader's own buffer (as Tokio's `copy_buf`). Each fill of
/// the reader's buffer spends the task's budget.
pub async fn copy_buf<'a, R, W>(reader: &'a mut R, writer: &'a mut W) -> io::Result<u64>
where
    R: AsyncBufRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    tokio::io::copy_buf(&mut Budgeted(reader), writer).await
}

/// Copy between `a` and `b` in both directions at once until both have reached their
/// end of file, shutting each one's writing side down when the other's reading side ends
/// (as Tokio's `copy_bidirectional`); returns the bytes copied from `a` to `b` and from
/// `b` to `a`. Each read spends the task's budget.
pub async fn copy_bidirectional<A, B>(a: &mut A, b: &mut B) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    tokio::io::copy_bidirectional(&mut Budgeted(a), &mut Budgeted(b)).await
}

/// [`copy_bidirectional`] with buffers of the sizes given, for each direction.
///
/// # Panics
/// If either size is zero (as Tokio's).
pub async fn copy_bidirectional_with_sizes<A, B>(
    a: &mut A,
    b: &mut B,
    a_to_b_buf_size: usize,
    b_to_a_buf_size: usize,
) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    tokio::io::copy_bidirectional_with_sizes(&mut Budgeted(a), &mut Budgeted(b), a_to_b_buf_size, b_to_a_buf_size).await
}
