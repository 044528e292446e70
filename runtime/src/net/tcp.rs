//! `TcpListener` and `TcpStream`.

use super::split::{self, OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use super::stream::{impl_async_read, impl_async_write, StreamSocket};
use super::{Interest, Ready, ToSocketAddrs};
use crate::reactor::{Direction, Registration, WaitAs};
use crate::task::wait;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, RawFd};
use std::task::{ready, Context, Poll};
use std::time::Duration;

/// A TCP socket server, listening for connections.
pub struct TcpListener {
    io: mio::net::TcpListener,
    reg: Registration,
}

impl TcpListener {
    /// Bind to `addr` (the first address that works; a host name is resolved on the
    /// blocking pool). A port in use is an `io::Error` of kind `AddrInUse`.
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        super::each_addr(addr, |a| async move { TcpListener::from_std(std::net::TcpListener::bind(a)?) }).await
    }

    /// Adopt a bound std listener (it is switched to non-blocking).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        let mut io = mio::net::TcpListener::from_std(listener);
        let mut reg = Registration::new(&mut io, mio::Interest::READABLE)?;
        reg.set_wait(WaitAs { read: wait::W_ACCEPT, write: wait::W_WRITE, addr: io.local_addr().ok() });
        Ok(TcpListener { io, reg })
    }

    /// Wait for the next connection.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Accept a connection if one is waiting; otherwise arrange for `cx` to be woken when
    /// one may be. Only the waker of the last call is kept (one accepting task at a time).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (mut stream, addr) = ready!(self.reg.poll_io(cx, Direction::Read, || self.io.accept()))?;
        let reg = Registration::established(&mut stream)?;
        Poll::Ready(Ok((TcpStream::with_registration(stream, reg, Some(addr)), addr)))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Set `IP_TTL`, the time-to-live of the packets sent from accepted sockets.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.set_ttl(ttl)
    }

    /// The `IP_TTL` option.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.ttl()
    }

    /// Take the listener out of the runtime as a std listener (still non-blocking).
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let mut this = ManuallyDrop::new(self);
        let TcpListener { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::net::TcpListener::from_raw_fd(io.into_raw_fd()) })
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener").field("local_addr", &self.io.local_addr().ok()).finish()
    }
}

/// A TCP connection. Read and write it with `futures::AsyncReadExt`/`AsyncWriteExt`, or,
/// with the `tokio-io` feature, with `tokio::io::AsyncReadExt`/`AsyncWriteExt`.
///
/// The reactor keeps the wakers of the tasks waiting to read (`read`, `peek`,
/// `readable`, `poll_read_ready`) and of those waiting to write (`write`, `writable`,
/// `poll_write_ready`), and an event wakes all of either kind. So one task may read
/// while another writes (see [`split`](TcpStream::split) and
/// [`into_split`](TcpStream::into_split)), and several may wait on one side at once.
pub struct TcpStream {
    io: mio::net::TcpStream,
    reg: Registration,
}

impl TcpStream {
    /// Connect to `addr` (trying each resolved address; a host name is resolved on the
    /// blocking pool). A closed port gives `ConnectionRefused`.
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        super::each_addr(addr, |a| async move { TcpStream::finish_connect(mio::net::TcpStream::connect(a)?, a).await })
            .await
    }

    /// Register a socket whose non-blocking connect to `peer` has begun, and wait for it
    /// to finish (or fail), which it does when the socket becomes writable.
    pub(super) async fn finish_connect(io: mio::net::TcpStream, peer: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::from_mio(io, Some(peer))?;
        poll_fn(|cx| stream.reg.poll_ready(cx, Direction::Write)).await?;
        if let Some(e) = stream.io.take_error()? {
            return Err(e);
        }
        stream.io.peer_addr()?;
        Ok(stream)
    }

    /// `peer`: the address a wait on the stream shows.
    fn from_mio(mut io: mio::net::TcpStream, peer: Option<SocketAddr>) -> io::Result<TcpStream> {
        let reg = Registration::new(&mut io, mio::Interest::READABLE | mio::Interest::WRITABLE)?;
        Ok(TcpStream::with_registration(io, reg, peer))
    }

    fn with_registration(io: mio::net::TcpStream, mut reg: Registration, peer: Option<SocketAddr>) -> TcpStream {
        reg.set_wait(WaitAs { read: wait::W_READ, write: wait::W_WRITE, addr: peer });
        TcpStream { io, reg }
    }

    /// Adopt a connected std stream (it is switched to non-blocking).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        let peer = stream.peer_addr().ok();
        let mut io = mio::net::TcpStream::from_std(stream);
        let reg = Registration::established(&mut io)?;
        Ok(TcpStream::with_registration(io, reg, peer))
    }

    /// Take the socket out of the runtime as a std stream. It stays in non-blocking mode
    /// (call `set_nonblocking(false)` for blocking reads and writes).
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let mut this = ManuallyDrop::new(self);
        let TcpStream { io, reg } = &mut *this;
        reg.deregister(io);
        // SAFETY: `this` is never used or dropped after these two reads, so each field is
        // moved out exactly once.
        let (io, reg) = unsafe { (std::ptr::read(io), std::ptr::read(reg)) };
        drop(reg);
        // SAFETY: `into_raw_fd` hands over the fd, open and owned by nobody else now.
        Ok(unsafe { std::net::TcpStream::from_raw_fd(io.into_raw_fd()) })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
    }

    /// Set `TCP_NODELAY` (send small writes at once instead of coalescing them).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.set_nodelay(nodelay)
    }

    /// The `TCP_NODELAY` option.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.nodelay()
    }

    /// Set `SO_LINGER`: with `Some(d)`, closing the socket waits up to `d` for unsent data
    /// to go out (and `Some(Duration::ZERO)` resets the connection on close); with `None`,
    /// close returns at once and the kernel sends the rest in the background.
    ///
    /// The kernel counts the wait in whole seconds: a `d` with a fraction of a second is
    /// rounded up (500 ms waits up to 1 s), so only zero resets, and a wait longer than
    /// `c_int::MAX` seconds is cut to that.
    ///
    /// The wait happens in `close(2)`, on whatever thread drops the stream; a worker
    /// blocked there runs no other task, so prefer `None` or zero in async code.
    ///
    /// Deprecated as Tokio's is: a linger above zero makes the thread that closes the
    /// socket wait. [`set_zero_linger`](Self::set_zero_linger) sets the case that does
    /// not wait.
    #[deprecated = "`SO_LINGER` causes the socket to block the thread on drop"]
    pub fn set_linger(&self, dur: Option<Duration>) -> io::Result<()> {
        set_linger_fd(self.io.as_raw_fd(), dur)
    }

    /// Set `SO_LINGER` to zero: closing the socket resets the connection at once (an
    /// `RST`), dropping unsent data, instead of closing it gracefully.
    pub fn set_zero_linger(&self) -> io::Result<()> {
        set_linger_fd(self.io.as_raw_fd(), Some(Duration::ZERO))
    }

    /// Set `TCP_QUICKACK`: acknowledge at once instead of delaying acknowledgements. The
    /// kernel may turn it off again by itself; it is not a permanent setting.
    pub fn set_quickack(&self, quickack: bool) -> io::Result<()> {
        super::sockopt::set_int(self.io.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, quickack.into())
    }

    /// The `TCP_QUICKACK` option (see [`set_quickack`](Self::set_quickack)).
    pub fn quickack(&self) -> io::Result<bool> {
        Ok(super::sockopt::get_int(self.io.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK)? != 0)
    }

    /// The `SO_LINGER` option (see [`set_linger`](Self::set_linger)).
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        linger_fd(self.io.as_raw_fd())
    }

    /// Wait until the socket is ready for any part of `interest`, and say what it found.
    /// It may wake spuriously: follow it with `try_read`/`try_write`, which answer
    /// `WouldBlock` then. A read wait and a write wait each use their list of wakers.
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        poll_fn(|cx| super::ready::poll_interest(&self.reg, cx, interest)).await
    }

    /// Wait until the socket is ready for `interest`, then run `f`, a non-blocking
    /// operation on it, again after each `WouldBlock` until it gives another answer.
    pub async fn async_io<R>(&self, interest: Interest, f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        super::ready::async_io(&self.reg, interest, f).await
    }

    /// Run `f`, a non-blocking operation on the socket (through its fd), as `try_read`
    /// does: its `WouldBlock` clears the readiness for `interest` (so the next `ready`
    /// waits for a new event) and is returned as it is.
    pub fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        let dir = if interest.is_readable() { Direction::Read } else { Direction::Write };
        self.reg.try_io(dir, f)
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.take_error()
    }

    /// Set `IP_TTL`, the time-to-live of the packets this socket sends.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.set_ttl(ttl)
    }

    /// The `IP_TTL` option.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.ttl()
    }

    /// Wait until the socket may be readable: data, end of stream or an error. It may
    /// wake spuriously; follow it with [`try_read`](Self::try_read), which answers
    /// `WouldBlock` then.
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(Interest::READABLE).await.map(|_| ())
    }

    /// Wait until the socket may be writable. It may wake spuriously; follow it with
    /// [`try_write`](Self::try_write), which answers `WouldBlock` then.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(Interest::WRITABLE).await.map(|_| ())
    }

    /// [`readable`](Self::readable) as a poll function. The waker joins the readers'
    /// list (once however often it polls); the next read event wakes the list.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Read).map_ok(|_| ())
    }

    /// [`writable`](Self::writable) as a poll function. The waker joins the writers'
    /// list; the next write event wakes the list.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reg.poll_ready(cx, Direction::Write).map_ok(|_| ())
    }

    /// Read what is there into `buf` without waiting: `Ok(0)` is end of stream (or an
    /// empty `buf`), and `WouldBlock` means nothing is there yet (await
    /// [`readable`](Self::readable) and try again).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || (&self.io).read(buf))
    }

    /// [`try_read`](Self::try_read) into the spare room of `buf` (a `BytesMut`, a
    /// `Vec<u8>`), which grows by what was read.
    #[cfg(feature = "io-util")]
    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || crate::net::buf::recv(self.io.as_raw_fd(), buf))
    }

    /// [`try_read`](Self::try_read) into several buffers with one `readv(2)`.
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.reg.try_io(Direction::Read, || (&self.io).read_vectored(bufs))
    }

    /// Write as much of `buf` as fits without waiting; `WouldBlock` means none fits now
    /// (await [`writable`](Self::writable) and try again).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || (&self.io).write(buf))
    }

    /// [`try_write`](Self::try_write) of several buffers with one `writev(2)`.
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.reg.try_io(Direction::Write, || (&self.io).write_vectored(bufs))
    }

    /// Wait for data and copy it into `buf` without taking it off the socket: the next
    /// read returns the same bytes. `Ok(0)` is end of stream.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_peek_into(cx, buf)).await
    }

    /// [`peek`](Self::peek) as a poll function, into a slice (the readers' list of
    /// wakers).
    pub fn poll_peek_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        // Not `poll_read_io`: a short peek leaves the data there, so the readiness stays.
        self.reg.poll_io(cx, Direction::Read, || self.io.peek(buf))
    }

    /// Tokio's `poll_peek`: [`peek`](Self::peek) into `buf`'s unfilled part, which the
    /// bytes then fill; how many.
    #[cfg(feature = "tokio-io")]
    pub fn poll_peek(&self, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<usize>> {
        let n = std::task::ready!(self.poll_peek_into(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(n))
    }

    /// Split into a reading and a writing half that borrow the stream, to read in one
    /// task (or branch of a `select!`) while writing in another. No allocation.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        split::split(self)
    }

    /// Split into owned halves that share the stream, to move into separate tasks.
    /// [`OwnedReadHalf::reunite`] puts them back together; dropping the
    /// [`OwnedWriteHalf`] shuts the writing side down (the peer reads end of stream).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split::into_split(self)
    }
}

impl StreamSocket for TcpStream {
    type Io = mio::net::TcpStream;

    fn io(&self) -> &mio::net::TcpStream {
        &self.io
    }

    fn reg(&self) -> &Registration {
        &self.reg
    }
}

impl_async_read!(TcpStream, |s| s);
impl_async_write!(TcpStream, |s| s, |s| s.shutdown_write());

/// Set `SO_LINGER` on `fd` (see [`TcpStream::set_linger`]).
pub(super) fn set_linger_fd(fd: RawFd, dur: Option<Duration>) -> io::Result<()> {
    let linger = libc::linger { l_onoff: libc::c_int::from(dur.is_some()), l_linger: dur.map_or(0, linger_secs) };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, linger)
}

/// Read `SO_LINGER` on `fd`.
pub(super) fn linger_fd(fd: RawFd) -> io::Result<Option<Duration>> {
    let linger = getsockopt_linger(fd)?;
    Ok((linger.l_onoff != 0).then(|| Duration::from_secs(linger.l_linger.max(0) as u64)))
}

/// `SO_LINGER`'s `l_linger` for a wait of `d`: whole seconds, rounded up so that only a
/// zero wait becomes zero (which resets the connection instead of waiting), and capped at
/// `c_int::MAX`.
fn linger_secs(d: Duration) -> libc::c_int {
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    secs.min(libc::c_int::MAX as u64) as libc::c_int
}

/// Set a socket option from a plain C struct or integer.
fn setsockopt<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: T) -> io::Result<()> {
    // SAFETY: `value` lives for the call and the length passed is its exact size.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Read the `SO_LINGER` option.
fn getsockopt_linger(fd: RawFd) -> io::Result<libc::linger> {
    let mut value = libc::linger { l_onoff: 0, l_linger: 0 };
    let mut len = std::mem::size_of::<libc::linger>() as libc::socklen_t;
    // SAFETY: `value` is a live, initialized `linger`, valid for writes of `len` bytes,
    // and `len` is passed by pointer as `getsockopt(2)` expects; every bit pattern the
    // kernel may write is a valid `linger` (two integers).
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, (&raw mut value).cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.as_fd()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.reg.deregister(&mut self.io);
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.io.local_addr().ok())
            .field("peer_addr", &self.io.peer_addr().ok())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::linger_secs;
    use std::time::Duration;

    #[test]
    fn linger_rounds_fractions_up_so_only_zero_resets() {
        assert_eq!(linger_secs(Duration::ZERO), 0);
        assert_eq!(linger_secs(Duration::from_nanos(1)), 1);
        assert_eq!(linger_secs(Duration::from_millis(500)), 1);
        assert_eq!(linger_secs(Duration::from_secs(1)), 1);
        assert_eq!(linger_secs(Duration::from_millis(1500)), 2);
        assert_eq!(linger_secs(Duration::from_secs(libc::c_int::MAX as u64 + 5)), libc::c_int::MAX);
        assert_eq!(linger_secs(Duration::MAX), libc::c_int::MAX);
    }
}

macro_rules! try_from_std {
    ($($std:ty => $volt:ty),* $(,)?) => {$(
        /// The same as `from_std` (as Tokio's).
        impl TryFrom<$std> for $volt {
            type Error = io::Error;
            fn try_from(value: $std) -> io::Result<$volt> {
                <$volt>::from_std(value)
            }
        }
    )*};
}

try_from_std! {
    std::net::TcpStream => TcpStream,
    std::net::TcpListener => TcpListener,
    std::net::UdpSocket => super::UdpSocket,
    std::os::unix::net::UnixStream => super::UnixStream,
    std::os::unix::net::UnixListener => super::UnixListener,
    std::os::unix::net::UnixDatagram => super::UnixDatagram,
}
