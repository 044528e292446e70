//! `TcpSocket`: a TCP socket set up before it connects or listens.

use super::{TcpListener, TcpStream};
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::time::Duration;

/// A TCP socket that is not connected or listening yet: set its options, [`bind`] it,
/// then [`connect`] it (a [`TcpStream`]) or [`listen`] on it (a [`TcpListener`]).
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let socket = volt::net::TcpSocket::new_v4()?;
/// socket.set_reuseaddr(true)?;
/// socket.bind("127.0.0.1:0".parse().unwrap())?;
/// let listener = socket.listen(1024)?;
/// # drop(listener); Ok(()) }
/// ```
///
/// [`bind`]: TcpSocket::bind
/// [`connect`]: TcpSocket::connect
/// [`listen`]: TcpSocket::listen
pub struct TcpSocket {
    fd: OwnedFd,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl TcpSocket {
    /// A new IPv4 TCP socket.
    pub fn new_v4() -> io::Result<TcpSocket> {
        TcpSocket::new(libc::AF_INET)
    }

    /// A new IPv6 TCP socket.
    pub fn new_v6() -> io::Result<TcpSocket> {
        TcpSocket::new(libc::AF_INET6)
    }

    fn new(domain: libc::c_int) -> io::Result<TcpSocket> {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        let ty = libc::SOCK_STREAM;
        // SAFETY: `socket(2)` takes no pointers; a new fd is returned or -1.
        let fd = cvt(unsafe { libc::socket(domain, ty, 0) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        {
            // SAFETY: `fcntl(2)` on an fd this function owns, with integer arguments.
            unsafe {
                cvt(libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC))?;
                let fl = cvt(libc::fcntl(fd.as_raw_fd(), libc::F_GETFL))?;
                cvt(libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK))?;
            }
        }
        Ok(TcpSocket { fd })
    }

    /// Adopt a std stream's socket as a `TcpSocket` (to set options on it, say).
    pub fn from_std_stream(stream: std::net::TcpStream) -> TcpSocket {
        // SAFETY: `into_raw_fd` hands over an open fd that nobody else owns.
        TcpSocket { fd: unsafe { OwnedFd::from_raw_fd(stream.into_raw_fd()) } }
    }

    fn set_int(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        super::sockopt::set_int(self.fd.as_raw_fd(), level, name, value)
    }

    fn get_int(&self, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
        super::sockopt::get_int(self.fd.as_raw_fd(), level, name)
    }

    super::sockopt::ip_options!();

    /// Set `SO_REUSEADDR`: bind to an address a closed socket still holds in TIME_WAIT.
    pub fn set_reuseaddr(&self, reuseaddr: bool) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_REUSEADDR, reuseaddr.into())
    }

    /// The `SO_REUSEADDR` option.
    pub fn reuseaddr(&self) -> io::Result<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_REUSEADDR)? != 0)
    }

    /// Set `SO_REUSEPORT`: several sockets may bind the same address and port (the
    /// kernel spreads connections among the listeners).
    pub fn set_reuseport(&self, reuseport: bool) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_REUSEPORT, reuseport.into())
    }

    /// The `SO_REUSEPORT` option.
    pub fn reuseport(&self) -> io::Result<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_REUSEPORT)? != 0)
    }

    /// Set `SO_KEEPALIVE`.
    pub fn set_keepalive(&self, keepalive: bool) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_KEEPALIVE, keepalive.into())
    }

    /// The `SO_KEEPALIVE` option.
    pub fn keepalive(&self) -> io::Result<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_KEEPALIVE)? != 0)
    }

    /// Set `SO_SNDBUF`, the send buffer's size (the kernel may round or double it).
    /// A size beyond `c_int::MAX` is an `InvalidInput` error.
    pub fn set_send_buffer_size(&self, size: u32) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, buffer_size(size)?)
    }

    /// The `SO_SNDBUF` option.
    pub fn send_buffer_size(&self) -> io::Result<u32> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_SNDBUF)?.max(0) as u32)
    }

    /// Set `SO_RCVBUF`, the receive buffer's size (the kernel may round or double it).
    /// A size beyond `c_int::MAX` is an `InvalidInput` error.
    pub fn set_recv_buffer_size(&self, size: u32) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, buffer_size(size)?)
    }

    /// The `SO_RCVBUF` option.
    pub fn recv_buffer_size(&self) -> io::Result<u32> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_RCVBUF)?.max(0) as u32)
    }

    /// Set `TCP_NODELAY` (send small writes at once).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.set_int(libc::IPPROTO_TCP, libc::TCP_NODELAY, nodelay.into())
    }

    /// The `TCP_NODELAY` option.
    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(self.get_int(libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)
    }

    /// Set `SO_LINGER` (see [`TcpStream::set_linger`]).
    pub fn set_linger(&self, dur: Option<Duration>) -> io::Result<()> {
        super::tcp_impl::set_linger_fd(self.fd.as_raw_fd(), dur)
    }

    /// Set `SO_LINGER` to zero (see [`TcpStream::set_zero_linger`]).
    pub fn set_zero_linger(&self) -> io::Result<()> {
        self.set_linger(Some(Duration::ZERO))
    }

    /// The `SO_LINGER` option.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        super::tcp_impl::linger_fd(self.fd.as_raw_fd())
    }

    /// Bind to `addr` (port 0 picks a free port).
    pub fn bind(&self, addr: SocketAddr) -> io::Result<()> {
        let (storage, len) = to_sockaddr(&addr);
        // SAFETY: `storage` holds a valid address of `len` bytes for the call.
        cvt(unsafe { libc::bind(self.fd.as_raw_fd(), (&raw const storage).cast(), len) }).map(drop)
    }

    /// The local address (after [`bind`](Self::bind), or the one a connect chose).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `storage` is valid for writes of `len` bytes, passed by pointer as
        // `getsockname(2)` expects.
        cvt(unsafe { libc::getsockname(self.fd.as_raw_fd(), storage.as_mut_ptr().cast(), &mut len) })?;
        // SAFETY: zeroed, then partly written by the kernel: every byte is initialized.
        from_sockaddr(unsafe { &storage.assume_init() })
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let e = self.get_int(libc::SOL_SOCKET, libc::SO_ERROR)?;
        Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
    }

    /// Connect to `addr`; the socket becomes a [`TcpStream`]. A closed port gives
    /// `ConnectionRefused`. Must be called inside a Volt runtime.
    pub async fn connect(self, addr: SocketAddr) -> io::Result<TcpStream> {
        // A socket adopted from a std stream may be blocking; the connect must not be.
        // SAFETY: `fcntl(2)` on an fd this socket owns, with integer arguments.
        unsafe {
            let fl = cvt(libc::fcntl(self.fd.as_raw_fd(), libc::F_GETFL))?;
            cvt(libc::fcntl(self.fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK))?;
        }
        let (storage, len) = to_sockaddr(&addr);
        // SAFETY: `storage` holds a valid address of `len` bytes for the call.
        let rc = unsafe { libc::connect(self.fd.as_raw_fd(), (&raw const storage).cast(), len) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // A non-blocking connect goes on in the background; it ends when the socket
            // becomes writable.
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
        }
        // SAFETY: `into_raw_fd` hands over an open TCP socket nobody else owns.
        let std = unsafe { std::net::TcpStream::from_raw_fd(self.fd.into_raw_fd()) };
        TcpStream::finish_connect(mio::net::TcpStream::from_std(std), addr).await
    }

    /// Listen on the bound address, with up to `backlog` connections waiting to be
    /// accepted (the kernel caps it); the socket becomes a [`TcpListener`]. Must be called
    /// inside a Volt runtime.
    pub fn listen(self, backlog: u32) -> io::Result<TcpListener> {
        let backlog = backlog.min(libc::c_int::MAX as u32) as libc::c_int;
        // SAFETY: `listen(2)` takes no pointers.
        cvt(unsafe { libc::listen(self.fd.as_raw_fd(), backlog) })?;
        // SAFETY: `into_raw_fd` hands over an open, listening socket nobody else owns.
        let std = unsafe { std::net::TcpListener::from_raw_fd(self.fd.into_raw_fd()) };
        TcpListener::from_std(std)
    }
}

fn buffer_size(size: u32) -> io::Result<libc::c_int> {
    libc::c_int::try_from(size)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "socket buffer size is larger than c_int::MAX"))
}

/// A `SocketAddr` as the C structure the socket calls take.
pub(crate) fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all zeroes is a valid `sockaddr_storage` (plain integers and arrays).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in`.
            let sin = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in6`.
            let sin6 = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The C structure a socket call filled in, as a `SocketAddr`.
pub(super) fn from_sockaddr(storage: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a `sockaddr_in`.
            let sin = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a `sockaddr_in6`.
            let sin6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket address")),
    }
}

/// The descriptor traits of a socket type that holds its `OwnedFd` in `fd` (`TcpSocket`,
/// `UnixSocket`).
macro_rules! owned_fd_traits {
    ($ty:ident, $what:literal) => {
        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.fd)
            }
        }

        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(&self.fd)
            }
        }

        impl std::os::fd::FromRawFd for $ty {
            #[doc = concat!("Adopt `fd`, ", $what, ".")]
            ///
            /// # Safety
            /// `fd` must be an open socket that nothing else owns (it is closed on drop).
            unsafe fn from_raw_fd(fd: std::os::fd::RawFd) -> $ty {
                // SAFETY: the caller hands over an open fd nothing else owns.
                $ty { fd: unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) } }
            }
        }

        impl std::os::fd::IntoRawFd for $ty {
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                std::os::fd::IntoRawFd::into_raw_fd(self.fd)
            }
        }
    };
}
pub(super) use owned_fd_traits;

owned_fd_traits!(TcpSocket, "a TCP socket");

impl std::fmt::Debug for TcpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSocket").field("fd", &self.fd.as_raw_fd()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_go_to_c_and_back() {
        for a in ["127.0.0.1:8080", "[::1]:443", "[fe80::1%2]:7", "0.0.0.0:0"] {
            let addr: SocketAddr = a.parse().unwrap();
            let (storage, _) = to_sockaddr(&addr);
            assert_eq!(from_sockaddr(&storage).unwrap(), addr);
        }
    }
}
