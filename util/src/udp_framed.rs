//! [`UdpFramed`]: a UDP socket as a `Stream` of decoded datagrams and a `Sink` of frames
//! to encode and send, with tokio-util's codecs.

use futures_core::Stream;
use futures_sink::Sink;
use std::borrow::Borrow;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};
use volt::net::UdpSocket;
use volt::task::coop::poll_proceed;

/// Room made for each datagram read (the largest a UDP datagram can be, near enough).
const READ_ROOM: usize = 64 * 1024;
const WRITE_CAPACITY: usize = 8 * 1024;

/// A UDP socket framed by a codec (tokio-util's `UdpFramed`, over Volt's `UdpSocket` or
/// anything that borrows one, such as an `Arc<UdpSocket>`): as a `Stream`, each datagram
/// received is decoded into frames, each with the sender's address; as a `Sink`, each
/// `(frame, address)` is encoded and sent as one datagram. Each datagram read spends the
/// task's cooperative budget, so a loop on a busy socket still yields.
#[must_use = "sinks do nothing unless polled"]
#[derive(Debug)]
pub struct UdpFramed<C, T = UdpSocket> {
    socket: T,
    codec: C,
    rd: BytesMut,
    wr: BytesMut,
    out_addr: SocketAddr,
    flushed: bool,
    /// The sender of the datagram in `rd`, while frames may be left in it.
    current_addr: Option<SocketAddr>,
}

impl<C, T> Unpin for UdpFramed<C, T> {}

impl<C, T: Borrow<UdpSocket>> UdpFramed<C, T> {
    /// Frame `socket` with `codec`.
    pub fn new(socket: T, codec: C) -> UdpFramed<C, T> {
        UdpFramed {
            socket,
            codec,
            rd: BytesMut::with_capacity(READ_ROOM),
            wr: BytesMut::with_capacity(WRITE_CAPACITY),
            out_addr: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            flushed: true,
            current_addr: None,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &T {
        &self.socket
    }

    /// The socket, to change it (reading or writing through it directly may mix with
    /// the frames').
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.socket
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }

    /// The codec, to change it.
    pub fn codec_mut(&mut self) -> &mut C {
        &mut self.codec
    }

    /// What is left of the datagram being decoded.
    pub fn read_buffer(&self) -> &BytesMut {
        &self.rd
    }

    /// What is left of the datagram being decoded, to change it.
    pub fn read_buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.rd
    }

    /// The socket back (a datagram half decoded and a frame not yet sent are dropped).
    pub fn into_inner(self) -> T {
        self.socket
    }
}

impl<C: Decoder, T: Borrow<UdpSocket>> Stream for UdpFramed<C, T> {
    type Item = Result<(C::Item, SocketAddr), C::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = self.get_mut();
        // A readiness wait that ends `Ready` spends a unit of the budget itself: the read
        // after it does not spend another.
        let mut charged = false;
        loop {
            // Frames left in the last datagram come first; a datagram is whole, so it is
            // decoded to its end.
            if let Some(addr) = me.current_addr {
                if let Some(frame) = me.codec.decode_eof(&mut me.rd)? {
                    return Poll::Ready(Some(Ok((frame, addr))));
                }
                me.current_addr = None;
                me.rd.clear();
            }
            let coop = if charged { None } else { Some(ready!(poll_proceed(cx))) };
            me.rd.reserve(READ_ROOM);
            match me.socket.borrow().try_recv_buf_from(&mut me.rd) {
                Ok((_, addr)) => {
                    if let Some(coop) = coop {
                        coop.made_progress();
                    }
                    charged = false;
                    me.current_addr = Some(addr);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drop(coop);
                    ready!(me.socket.borrow().poll_recv_ready(cx))?;
                    charged = true;
                }
                Err(e) => return Poll::Ready(Some(Err(e.into()))),
            }
        }
    }
}

impl<I, C: Encoder<I>, T: Borrow<UdpSocket>> Sink<(I, SocketAddr)> for UdpFramed<C, T> {
    type Error = C::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        if !self.flushed {
            ready!(self.poll_flush(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, (frame, addr): (I, SocketAddr)) -> Result<(), C::Error> {
        let me = self.get_mut();
        me.codec.encode(frame, &mut me.wr)?;
        me.out_addr = addr;
        me.flushed = false;
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        let me = self.get_mut();
        if me.flushed {
            return Poll::Ready(Ok(()));
        }
        let sent = ready!(me.socket.borrow().poll_send_to(cx, &me.wr, me.out_addr))?;
        let whole = sent == me.wr.len();
        me.wr.clear();
        me.flushed = true;
        Poll::Ready(if whole {
            Ok(())
        } else {
            Err(io::Error::other("failed to write entire datagram to socket").into())
        })
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.poll_flush(cx)
    }
}
