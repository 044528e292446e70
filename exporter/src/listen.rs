//! Where /metrics is served: addresses resolved and the first one that binds.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// `host:port` (an `http://` prefix is allowed) to one socket address.
pub fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    Ok(resolve_all(addr)?[0])
}

/// Every address `addr` resolves to (at least one), in the resolver's order.
pub(crate) fn resolve_all(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let all: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if all.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the address resolves to nothing"));
    }
    Ok(all)
}

/// Bind the first of `addrs` that can be bound, as `std::net::TcpListener::bind` does.
/// If none can be: a port in use is the error to show (`localhost:P` on a host without
/// IPv6 whose `127.0.0.1:P` is taken fails first on `::1` for another reason), else the
/// last address's.
pub fn bind_first(addrs: &[SocketAddr]) -> io::Result<std::net::TcpListener> {
    let mut err: Option<io::Error> = None;
    for &a in addrs {
        match bind(a) {
            Ok(l) => return Ok(l),
            Err(e) if err.as_ref().is_some_and(|p| p.kind() == io::ErrorKind::AddrInUse) => drop(e),
            Err(e) => err = Some(e),
        }
    }
    Err(err.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")))
}

/// Bind the metrics listener, with an error that says which address.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("volt-exporter: cannot listen on {addr}: {e}")))?;
    l.set_nonblocking(true)?;
    if !addr.ip().is_loopback() {
        // Asked for, so allowed; but /metrics has no authentication, so say so.
        tracing::warn!(
            "volt-exporter: serving {addr}, beyond loopback: whoever can reach it reads this process's metrics (there is no authentication)"
        );
    }
    Ok(l)
}
