//! The halves of a split `TcpStream`: borrowed (`split`) and owned (`into_split`). Their
//! code is shared with the Unix stream's halves (`halves`); the methods only a TCP half
//! has are here.

use super::halves::{stream_halves, OwnedRead, OwnedWrite};
use super::TcpStream;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

/// The reading half of a [`TcpStream`], borrowed by [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of a [`TcpStream`], borrowed by [`TcpStream::split`]. Its
/// `poll_close`/`poll_shutdown` shut the stream's writing side down.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

/// The reading half of a [`TcpStream`], owned: from [`TcpStream::into_split`].
pub struct OwnedReadHalf(OwnedRead<TcpStream>);

/// The writing half of a [`TcpStream`], owned: from [`TcpStream::into_split`].
///
/// Dropping it shuts the stream's writing side down (the peer reads end of stream), unless
/// it was [`forget`](OwnedWriteHalf::forget)ten or [`reunite`](OwnedReadHalf::reunite)d.
pub struct OwnedWriteHalf(OwnedWrite<TcpStream>);

/// [`OwnedReadHalf::reunite`] was given halves of two different streams; here they are
/// back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

stream_halves!(TcpStream, SocketAddr, read {
    /// [`TcpStream::poll_read_ready`].
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_read_ready(cx)
    }

    /// Copy waiting data into `buf` without consuming it (see [`TcpStream::peek`]).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream().peek(buf).await
    }

    /// [`TcpStream::poll_peek_into`].
    pub fn poll_peek_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stream().poll_peek_into(cx, buf)
    }

    /// [`TcpStream::poll_peek`] (Tokio's, into a `ReadBuf`).
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<usize>> {
        self.stream().poll_peek(cx, buf)
    }
} write {
    /// [`TcpStream::poll_write_ready`].
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_write_ready(cx)
    }
});
