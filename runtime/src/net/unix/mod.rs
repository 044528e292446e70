//! Unix domain sockets: [`UnixListener`],
//! [`UnixStream`] and [`UnixDatagram`] (at
//! `volt::net::`, as in Tokio), and the types that go with them here at
//! `volt::net::unix::` (the halves of a split stream, the socket address, the peer's
//! credentials).
//!
//! A wait on a Unix socket shows as `read` or `write` (`recv`/`send` for datagrams) with
//! no address.

mod datagram;
mod listener;
#[cfg(feature = "tokio-io")]
pub mod pipe;
mod socket;
mod split;
mod stream;

pub use datagram::UnixDatagram;
pub use listener::UnixListener;
pub use socket::UnixSocket;
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, ReuniteError, WriteHalf};
pub use stream::UnixStream;

use std::path::Path;

/// The address `path` names: on Linux a path that starts with a NUL byte is an abstract
/// name (the rest of it), as Tokio reads it.
fn std_addr(path: &Path) -> std::io::Result<std::os::unix::net::SocketAddr> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(name) = bytes.strip_prefix(b"\0") {
        #[cfg(target_os = "android")]
        use std::os::android::net::SocketAddrExt;
        #[cfg(target_os = "linux")]
        use std::os::linux::net::SocketAddrExt;
        return std::os::unix::net::SocketAddr::from_abstract_name(name);
    }
    let _ = bytes;
    std::os::unix::net::SocketAddr::from_pathname(path)
}

/// The address of a Unix socket: a path, or unnamed (a socket from `pair`, or a client
/// that never bound).
#[derive(Clone)]
pub struct SocketAddr(pub(crate) std::os::unix::net::SocketAddr);

impl SocketAddr {
    /// Whether the address has no name.
    pub fn is_unnamed(&self) -> bool {
        self.0.is_unnamed()
    }

    /// The path, if the address is one.
    pub fn as_pathname(&self) -> Option<&Path> {
        self.0.as_pathname()
    }

    /// The abstract name (without its leading NUL byte), if the address is one.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn as_abstract_name(&self) -> Option<&[u8]> {
        #[cfg(target_os = "android")]
        use std::os::android::net::SocketAddrExt;
        #[cfg(target_os = "linux")]
        use std::os::linux::net::SocketAddrExt;
        self.0.as_abstract_name()
    }
}

impl std::fmt::Debug for SocketAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<std::os::unix::net::SocketAddr> for SocketAddr {
    fn from(addr: std::os::unix::net::SocketAddr) -> SocketAddr {
        SocketAddr(addr)
    }
}

impl From<SocketAddr> for std::os::unix::net::SocketAddr {
    fn from(addr: SocketAddr) -> std::os::unix::net::SocketAddr {
        addr.0
    }
}

/// A user id, as [`UCred::uid`] gives it (the platform's `uid_t`).
#[allow(non_camel_case_types)]
pub type uid_t = libc::uid_t;
/// A group id, as [`UCred::gid`] gives it (the platform's `gid_t`).
#[allow(non_camel_case_types)]
pub type gid_t = libc::gid_t;
/// A process id, as [`UCred::pid`] gives it (the platform's `pid_t`).
#[allow(non_camel_case_types)]
pub type pid_t = libc::pid_t;

/// The credentials of the process at the other end of a [`UnixStream`]
/// ([`UnixStream::peer_cred`]), as of when it connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UCred {
    pid: Option<libc::pid_t>,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl UCred {
    /// The peer's user id.
    pub fn uid(&self) -> uid_t {
        self.uid
    }

    /// The peer's group id.
    pub fn gid(&self) -> gid_t {
        self.gid
    }

    /// The peer's process id, where the system tells it (Linux and Android).
    pub fn pid(&self) -> Option<pid_t> {
        self.pid
    }
}

/// The credentials of the peer of the Unix socket `fd`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_cred(fd: std::os::fd::RawFd) -> std::io::Result<UCred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is valid for writes of `len` bytes, passed by pointer as
    // `getsockopt(2)` expects; any bit pattern is a valid `ucred` (three integers).
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&raw mut cred).cast(), &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(UCred { pid: Some(cred.pid), uid: cred.uid, gid: cred.gid })
}

/// The credentials of the peer of the Unix socket `fd`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_cred(fd: std::os::fd::RawFd) -> std::io::Result<UCred> {
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: both out-pointers are valid for one write each.
    let rc = unsafe { libc::getpeereid(fd, &mut uid, &mut gid) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(UCred { pid: None, uid, gid })
}
