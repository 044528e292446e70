//! The halves of a split `UnixStream`: borrowed (`split`) and owned (`into_split`). Their
//! code is shared with the TCP stream's halves (`crate::net::halves`).

use super::{SocketAddr, UnixStream};
use crate::net::halves::{stream_halves, OwnedRead, OwnedWrite};

/// The reading half of a [`UnixStream`], borrowed by [`UnixStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a UnixStream);

/// The writing half of a [`UnixStream`], borrowed by [`UnixStream::split`]. Its
/// `poll_close`/`poll_shutdown` shut the stream's writing side down.
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a UnixStream);

/// The reading half of a [`UnixStream`], owned: from [`UnixStream::into_split`].
pub struct OwnedReadHalf(OwnedRead<UnixStream>);

/// The writing half of a [`UnixStream`], owned: from [`UnixStream::into_split`].
///
/// Dropping it shuts the stream's writing side down (the peer reads end of stream),
/// unless it was [`forget`](OwnedWriteHalf::forget)ten or
/// [`reunite`](OwnedReadHalf::reunite)d.
pub struct OwnedWriteHalf(OwnedWrite<UnixStream>);

/// [`OwnedReadHalf::reunite`] was given halves of two different streams; here they are
/// back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

stream_halves!(UnixStream, SocketAddr, read {} write {});
