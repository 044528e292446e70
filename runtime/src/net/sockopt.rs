//! Socket options set and read through `setsockopt(2)`/`getsockopt(2)` on a descriptor,
//! for `TcpSocket` and `UdpSocket`: integer options, and the device a socket is bound to.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Set an integer option.
pub(super) fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` lives for the call and the length given is its size.
    cvt(unsafe {
        libc::setsockopt(fd, level, name, (&raw const value).cast(), size_of::<libc::c_int>() as libc::socklen_t)
    })
    .map(drop)
}

/// Read an integer option.
pub(super) fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is valid for writes of `len` bytes and `len` is passed by pointer,
    // as `getsockopt(2)` expects; any bit pattern is a valid integer.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &mut len) })?;
    Ok(value)
}

/// An unsigned option given as a `u32` (`IP_TOS`, `IPV6_TCLASS`): one past `c_int::MAX`
/// is an `InvalidInput` error rather than a negative value.
pub(super) fn set_u32(fd: RawFd, level: libc::c_int, name: libc::c_int, value: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(value).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("socket option value {value} is too large"))
    })?;
    set_int(fd, level, name, value)
}

/// Read an unsigned option as a `u32`.
pub(super) fn get_u32(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<u32> {
    Ok(get_int(fd, level, name)? as u32)
}

/// Bind the socket to a network device (`SO_BINDTODEVICE`, Linux): only packets from
/// that interface are received, and packets go out through it. `None` (or an empty
/// name) removes the binding. Needs `CAP_NET_RAW` unless it only removes one.
pub(super) fn bind_device(fd: RawFd, interface: Option<&[u8]>) -> io::Result<()> {
    let name = interface.unwrap_or(&[]);
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("an interface name has at most {} bytes", libc::IFNAMSIZ - 1),
        ));
    }
    // SAFETY: `name` is valid for reads of its length for the call, the length passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// The device the socket is bound to (`SO_BINDTODEVICE`), if any.
pub(super) fn device(fd: RawFd) -> io::Result<Option<Vec<u8>>> {
    let mut buf = [0u8; libc::IFNAMSIZ];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is valid for writes of `len` bytes, and `len` is passed by pointer.
    cvt(unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_BINDTODEVICE, buf.as_mut_ptr().cast(), &mut len) })?;
    // The kernel counts the name's closing NUL; an unbound socket reads as empty.
    let name = &buf[..(len as usize).min(buf.len())];
    let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
    Ok((!name.is_empty()).then(|| name.to_vec()))
}

/// The IP-level options Tokio's `TcpSocket` and `UdpSocket` both have, as methods of a
/// type with `AsRawFd`: type of service, traffic class, and the bound device.
macro_rules! ip_options {
    () => {
        /// Set `IP_TOS`, the type-of-service field of the IPv4 packets it sends.
        pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
            super::sockopt::set_u32(self.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, tos)
        }

        /// The `IP_TOS` option.
        pub fn tos_v4(&self) -> io::Result<u32> {
            super::sockopt::get_u32(self.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS)
        }

        /// [`Self::set_tos_v4`], under its old name.
        #[deprecated(note = "renamed `set_tos_v4`: the option is IPv4's")]
        #[doc(hidden)]
        pub fn set_tos(&self, tos: u32) -> io::Result<()> {
            self.set_tos_v4(tos)
        }

        /// [`Self::tos_v4`], under its old name.
        #[deprecated(note = "renamed `tos_v4`: the option is IPv4's")]
        #[doc(hidden)]
        pub fn tos(&self) -> io::Result<u32> {
            self.tos_v4()
        }

        /// Set `IPV6_TCLASS`, the traffic class of the IPv6 packets it sends.
        pub fn set_tclass_v6(&self, tclass: u32) -> io::Result<()> {
            super::sockopt::set_u32(self.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tclass)
        }

        /// The `IPV6_TCLASS` option.
        pub fn tclass_v6(&self) -> io::Result<u32> {
            super::sockopt::get_u32(self.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
        }

        /// Bind the socket to a network interface by name (`SO_BINDTODEVICE`), or remove
        /// the binding with `None`. Binding needs `CAP_NET_RAW`; a name of `IFNAMSIZ`
        /// bytes or more is an `InvalidInput` error.
        pub fn bind_device(&self, interface: Option<&[u8]>) -> io::Result<()> {
            super::sockopt::bind_device(self.as_raw_fd(), interface)
        }

        /// The interface the socket is bound to, if any.
        pub fn device(&self) -> io::Result<Option<Vec<u8>>> {
            super::sockopt::device(self.as_raw_fd())
        }
    };
}
pub(super) use ip_options;
