//! `UnixSocket`: a Unix socket set up before it binds, listens, connects or becomes a
//! datagram socket (Tokio's `tokio::net::UnixSocket`).

use super::{UnixDatagram, UnixListener, UnixStream};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A Unix socket, stream or datagram, not yet listening, connected or in use: bind it,
/// then [`listen`](UnixSocket::listen) or [`connect`](UnixSocket::connect) (a stream
/// socket) or make it a [`UnixDatagram`] ([`datagram`](UnixSocket::datagram)).
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let socket = volt::net::UnixSocket::new_stream()?;
/// socket.bind("/tmp/volt.sock")?;
/// let listener = socket.listen(1024)?;
/// # drop(listener); Ok(()) }
/// ```
#[derive(Debug)]
pub struct UnixSocket {
    fd: OwnedFd,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `path` as a `sockaddr_un`, and its length: a path, or (a first byte of NUL) an
/// abstract name, as the kernel reads them.
fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all zeroes is a valid `sockaddr_un` (plain integers and an array).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    let abstract_name = bytes.first() == Some(&0);
    // A path needs room for its terminating NUL; an abstract name has none.
    if bytes.len() + usize::from(!abstract_name) > addr.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a Unix socket path must be shorter than 108 bytes"));
    }
    if !abstract_name && bytes.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a Unix socket path may not contain a NUL byte"));
    }
    for (dst, &b) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = b as libc::c_char;
    }
    let base = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let len = base + bytes.len() + usize::from(!abstract_name && !bytes.is_empty());
    Ok((addr, len as libc::socklen_t))
}

impl UnixSocket {
    /// A new datagram socket.
    pub fn new_datagram() -> io::Result<UnixSocket> {
        UnixSocket::new(libc::SOCK_DGRAM)
    }

    /// A new stream socket.
    pub fn new_stream() -> io::Result<UnixSocket> {
        UnixSocket::new(libc::SOCK_STREAM)
    }

    fn new(ty: libc::c_int) -> io::Result<UnixSocket> {
        // SAFETY: `socket(2)` takes no pointers; a new fd is returned or -1.
        let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(UnixSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn ty(&self) -> io::Result<libc::c_int> {
        let mut ty: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `ty` and `len` are live locals of the sizes given.
        cvt(unsafe {
            libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TYPE, (&raw mut ty).cast(), &mut len)
        })?;
        Ok(ty)
    }

    fn refuse_unless(&self, ty: libc::c_int, what: &str) -> io::Result<()> {
        if self.ty()? != ty {
            let kind = if ty == libc::SOCK_STREAM { "datagram" } else { "stream" };
            return Err(io::Error::other(format!("{what} cannot be called on a {kind} socket")));
        }
        Ok(())
    }

    /// Bind to `path` (a leading NUL byte names an abstract socket).
    pub fn bind(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let (addr, len) = sockaddr(path.as_ref())?;
        // SAFETY: `addr` is a valid address of `len` bytes for the call.
        cvt(unsafe { libc::bind(self.fd.as_raw_fd(), (&raw const addr).cast(), len) }).map(|_| ())
    }

    /// Listen, with up to `backlog` connections waiting to be accepted (the kernel caps
    /// it); a stream socket only. Must be called inside a Volt runtime.
    pub fn listen(self, backlog: u32) -> io::Result<UnixListener> {
        self.refuse_unless(libc::SOCK_STREAM, "listen")?;
        let backlog = backlog.min(libc::c_int::MAX as u32) as libc::c_int;
        // SAFETY: `listen(2)` takes no pointers.
        cvt(unsafe { libc::listen(self.fd.as_raw_fd(), backlog) })?;
        // SAFETY: `into_raw_fd` hands over an open, listening socket nobody else owns.
        UnixListener::from_std(unsafe { std::os::unix::net::UnixListener::from_raw_fd(self.fd.into_raw_fd()) })
    }

    /// Connect to the socket bound at `path`; a stream socket only. Must be called inside
    /// a Volt runtime.
    pub async fn connect(self, path: impl AsRef<Path>) -> io::Result<UnixStream> {
        self.refuse_unless(libc::SOCK_STREAM, "connect")?;
        let (addr, len) = sockaddr(path.as_ref())?;
        // SAFETY: `addr` is a valid address of `len` bytes for the call.
        let rc = unsafe { libc::connect(self.fd.as_raw_fd(), (&raw const addr).cast(), len) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // A connect that could not finish at once ends when the socket is writable.
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
        }
        // SAFETY: `into_raw_fd` hands over an open stream socket nobody else owns.
        let std = unsafe { std::os::unix::net::UnixStream::from_raw_fd(self.fd.into_raw_fd()) };
        UnixStream::connecting(mio::net::UnixStream::from_std(std)).await
    }

    /// The socket as a [`UnixDatagram`]; a datagram socket only. Must be called inside a
    /// Volt runtime.
    pub fn datagram(self) -> io::Result<UnixDatagram> {
        self.refuse_unless(libc::SOCK_DGRAM, "datagram")?;
        // SAFETY: `into_raw_fd` hands over an open datagram socket nobody else owns.
        UnixDatagram::from_std(unsafe { std::os::unix::net::UnixDatagram::from_raw_fd(self.fd.into_raw_fd()) })
    }
}

crate::net::socket::owned_fd_traits!(UnixSocket, "a Unix socket");
