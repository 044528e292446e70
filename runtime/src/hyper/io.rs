//! [`Io`]: a stream as hyper's `Read` and `Write`.

use super::watch::Activity;
use crate::net::stream::StreamSocket;
use crate::net::TcpStream;
use std::any::TypeId;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The HTTP/2 client preface; a connection that starts with it speaks HTTP/2.
pub(super) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A stream as hyper's [`Read`](hyper::rt::Read) and [`Write`](hyper::rt::Write).
///
/// Any `futures_io::AsyncRead + AsyncWrite` stream works. For a Volt [`TcpStream`] reads
/// skip zeroing hyper's buffer and writes are vectored; other streams get a zeroed buffer
/// (futures-io reads need an initialized one) and one buffer per write.
#[derive(Debug)]
pub struct Io<T> {
    inner: T,
    /// Bytes read ahead (the protocol sniff and the first request head), handed out
    /// before the stream's own.
    prefix: Option<Prefix>,
    /// The connection's record of whether hyper's writes are flushed (see
    /// `Activity::unflushed`), for a connection of [`serve`](fn@super::serve).
    activity: Option<Arc<Activity>>,
}

#[derive(Debug)]
struct Prefix {
    buf: Vec<u8>,
    pos: usize,
}

impl<T> Io<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Io<T> {
        Io { inner, prefix: None, activity: None }
    }

    /// The wrapped stream.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwrap. Bytes read ahead by [`serve`](fn@super::serve) (the first request head) and not yet
    /// handed to hyper are lost; an `Io` made with [`Io::new`] has none.
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// Wrap `inner`, whose first bytes `buf` were read already: they are read first.
    /// Writes and flushes are noted in `activity`.
    pub(super) fn with_prefix(inner: T, buf: Vec<u8>, activity: Arc<Activity>) -> Io<T> {
        Io { inner, prefix: (!buf.is_empty()).then_some(Prefix { buf, pos: 0 }), activity: Some(activity) }
    }

    /// Unwrap, with the bytes read ahead that hyper has not read yet.
    pub(super) fn into_parts(self) -> (T, Vec<u8>) {
        let rest = match self.prefix {
            Some(Prefix { mut buf, pos }) => {
                buf.drain(..pos);
                buf
            }
            None => Vec::new(),
        };
        (self.inner, rest)
    }

    fn wrote(&self) {
        if let Some(a) = &self.activity {
            a.unflushed.store(true, Relaxed);
        }
    }
}

fn is_tcp<T: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<TcpStream>()
}

impl<T> hyper::rt::Read for Io<T>
where
    T: futures_io::AsyncRead + Unpin + 'static,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(p) = &mut this.prefix {
            let n = (p.buf.len() - p.pos).min(buf.remaining());
            buf.put_slice(&p.buf[p.pos..p.pos + n]);
            p.pos += n;
            if p.pos == p.buf.len() {
                // Given up in full: the bytes are hyper's now, and the vector goes.
                this.prefix = None;
            }
            return Poll::Ready(Ok(()));
        }
        if let Some(tcp) = (&this.inner as &dyn std::any::Any).downcast_ref::<TcpStream>() {
            // SAFETY: the slice is only written (by `read(2)`), never read, and only the
            // `n` bytes the kernel reports written are marked filled below.
            let dst = unsafe { buf.as_mut() };
            let n = std::task::ready!(tcp.poll_read_uninit(cx, dst))?;
            // SAFETY: `read(2)` initialized the first `n` bytes of the unfilled part.
            unsafe { buf.advance(n) };
            return Poll::Ready(Ok(()));
        }
        // SAFETY: the slice is zeroed before anything reads it, and only the bytes the
        // reader reports are marked filled.
        let dst = unsafe { buf.as_mut() };
        for b in dst.iter_mut() {
            *b = MaybeUninit::new(0);
        }
        // SAFETY: every byte of `dst` was initialized just above; `MaybeUninit<u8>` and
        // `u8` have the same layout.
        let init = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
        let len = init.len();
        let n = std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, init))?;
        if n > len {
            // The reader claims more bytes than it was given room for: a bug in that
            // reader. Marking them filled would make hyper read past its buffer.
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("volt::hyper::Io: the stream's poll_read reported {n} bytes read into a {len}-byte buffer"),
            )));
        }
        // SAFETY: the first `n` bytes were initialized (all were, above), and `n` is
        // within the unfilled part, checked just above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T> hyper::rt::Write for Io<T>
where
    T: futures_io::AsyncWrite + Unpin + 'static,
{
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.wrote();
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        if let (Poll::Ready(Ok(())), Some(a)) = (&r, &this.activity) {
            a.unflushed.store(false, Relaxed);
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }

    fn is_write_vectored(&self) -> bool {
        is_tcp::<T>()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.wrote();
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }
}

impl hyper_util::client::legacy::connect::Connection for Io<TcpStream> {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        hyper_util::client::legacy::connect::Connected::new()
    }
}
