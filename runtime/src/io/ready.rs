//! `empty`, `repeat` and `sink`: readers and writers that are always ready. Tokio's make
//! a task yield after a budget of operations, but the budget they spend is Tokio's, which
//! never runs out outside a Tokio runtime: re-exported on Volt, a task looping on one
//! never returned `Pending`, held its worker for good, and no `timeout` around it could
//! fire. These wrap Tokio's and spend Volt's budget instead, as its sockets do.

use crate::task::coop;
use std::fmt;
use std::io::{self, IoSlice, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

/// A reader at its end at once, and a writer that takes every byte: from [`empty`].
pub struct Empty(tokio::io::Empty);

/// A reader at its end at once, and a writer that takes and drops every byte (as Tokio's
/// `empty`), which makes its task yield when the task's budget is spent.
pub fn empty() -> Empty {
    Empty(tokio::io::empty())
}

impl AsyncRead for Empty {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let inner = &mut self.0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_read(cx, buf))
    }
}

impl AsyncBufRead for Empty {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let inner = &mut self.get_mut().0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_fill_buf(cx))
    }

    fn consume(mut self: Pin<&mut Self>, amt: usize) {
        Pin::new(&mut self.0).consume(amt)
    }
}

budgeted_write!(Empty, flush);

impl AsyncSeek for Empty {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.0).start_seek(position)
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let inner = &mut self.0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_complete(cx))
    }
}

impl fmt::Debug for Empty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Empty { .. }")
    }
}

/// A reader that yields one byte over and over: from [`repeat`].
pub struct Repeat(tokio::io::Repeat);

/// A reader that fills every read with `byte`, for ever (as Tokio's `repeat`), and makes
/// its task yield when the task's budget is spent.
pub fn repeat(byte: u8) -> Repeat {
    Repeat(tokio::io::repeat(byte))
}

impl AsyncRead for Repeat {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let inner = &mut self.0;
        coop::budgeted(cx, |cx| Pin::new(inner).poll_read(cx, buf))
    }
}

impl fmt::Debug for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Repeat { .. }")
    }
}

/// A writer that takes and drops every byte: from [`sink`].
pub struct Sink(tokio::io::Sink);

/// A writer that takes and drops every byte (as Tokio's `sink`), and makes its task
/// yield when the task's budget is spent.
pub fn sink() -> Sink {
    Sink(tokio::io::sink())
}

budgeted_write!(Sink, flush);

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Sink { .. }")
    }
}
