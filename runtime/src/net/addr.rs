//! `ToSocketAddrs`: the addresses `bind`, `connect` and `send_to` accept, and where they
//! are resolved.
//!
//! An address that is already numeric (a `SocketAddr`, an `(IpAddr, u16)` pair, or a
//! string such as `"127.0.0.1:8080"` or `"[::1]:80"` that parses as one) is used at once,
//! on the calling task. Anything else names a host, and looking a host name up
//! (`getaddrinfo`) blocks for as long as the resolver takes, so it runs on the runtime's
//! blocking pool and the task awaits the answer: the worker keeps running other tasks.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// What can be turned into socket addresses: a numeric address directly, a host name by a
/// lookup on the runtime's blocking pool.
///
/// Implemented for `SocketAddr`, `SocketAddrV4`, `SocketAddrV6`, `(IpAddr, u16)`,
/// `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`, `(&str, u16)`, `(String, u16)`, `str`
/// (`"host:port"`), `String`, `[SocketAddr]`, and `&T` for any of these. The trait is
/// sealed: the set of implementations is fixed here.
pub trait ToSocketAddrs: sealed::ToSocketAddrsPriv {}

pub(crate) mod sealed {
    use super::*;

    /// The lookup behind [`ToSocketAddrs`](super::ToSocketAddrs); not nameable outside.
    pub trait ToSocketAddrsPriv {
        /// What it takes to get the addresses.
        fn to_lookup(&self) -> Lookup;
    }

    /// Numeric addresses are known at once; a host name needs a lookup.
    pub enum Lookup {
        /// The addresses, with no lookup.
        Ready(Addrs),
        /// A host name and port, to resolve on the blocking pool.
        Host(String, u16),
        /// Malformed input (such as `"host"` without a port), with the reason.
        Invalid(&'static str),
    }
}

use sealed::{Lookup, ToSocketAddrsPriv};

/// An iterator over resolved addresses. One address (the common case) needs no allocation.
#[derive(Debug)]
pub struct Addrs(AddrsInner);

#[derive(Debug)]
enum AddrsInner {
    One(Option<SocketAddr>),
    Many(std::vec::IntoIter<SocketAddr>),
}

impl Addrs {
    fn one(addr: SocketAddr) -> Addrs {
        Addrs(AddrsInner::One(Some(addr)))
    }

    fn many(addrs: Vec<SocketAddr>) -> Addrs {
        Addrs(AddrsInner::Many(addrs.into_iter()))
    }
}

impl Iterator for Addrs {
    type Item = SocketAddr;

    fn next(&mut self) -> Option<SocketAddr> {
        match &mut self.0 {
            AddrsInner::One(a) => a.take(),
            AddrsInner::Many(it) => it.next(),
        }
    }
}

/// Resolve `addr`: at once if it is numeric, else with a lookup on the current runtime's
/// blocking pool (an error outside a Volt runtime).
pub(crate) async fn resolve<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<Addrs> {
    match addr.to_lookup() {
        Lookup::Ready(addrs) => Ok(addrs),
        Lookup::Invalid(why) => Err(io::Error::new(io::ErrorKind::InvalidInput, why)),
        Lookup::Host(host, port) => {
            let spawner = crate::blocking::Spawner::current().ok_or_else(|| {
                io::Error::other(
                    "volt: host names are resolved on the runtime's blocking pool, so only inside a Volt runtime",
                )
            })?;
            let lookup = spawner.spawn(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port)).map(|it| it.collect::<Vec<_>>())
            });
            // A cancelled lookup (the runtime shut down meanwhile) is an `io::Error` too.
            let addrs = lookup.await.map_err(io::Error::from)??;
            Ok(Addrs::many(addrs))
        }
    }
}

/// `(host, port)`: numeric hosts need no lookup.
fn host_port(host: &str, port: u16) -> Lookup {
    match host.parse::<IpAddr>() {
        Ok(ip) => Lookup::Ready(Addrs::one(SocketAddr::new(ip, port))),
        Err(_) => Lookup::Host(host.to_owned(), port),
    }
}

impl ToSocketAddrs for SocketAddr {}
impl ToSocketAddrsPriv for SocketAddr {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(*self))
    }
}

impl ToSocketAddrs for SocketAddrV4 {}
impl ToSocketAddrsPriv for SocketAddrV4 {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(SocketAddr::V4(*self)))
    }
}

impl ToSocketAddrs for SocketAddrV6 {}
impl ToSocketAddrsPriv for SocketAddrV6 {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(SocketAddr::V6(*self)))
    }
}

impl ToSocketAddrs for (IpAddr, u16) {}
impl ToSocketAddrsPriv for (IpAddr, u16) {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(SocketAddr::new(self.0, self.1)))
    }
}

impl ToSocketAddrs for (Ipv4Addr, u16) {}
impl ToSocketAddrsPriv for (Ipv4Addr, u16) {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(SocketAddr::new(IpAddr::V4(self.0), self.1)))
    }
}

impl ToSocketAddrs for (Ipv6Addr, u16) {}
impl ToSocketAddrsPriv for (Ipv6Addr, u16) {
    fn to_lookup(&self) -> Lookup {
        Lookup::Ready(Addrs::one(SocketAddr::new(IpAddr::V6(self.0), self.1)))
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl ToSocketAddrsPriv for (&str, u16) {
    fn to_lookup(&self) -> Lookup {
        host_port(self.0, self.1)
    }
}

impl ToSocketAddrs for (String, u16) {}
impl ToSocketAddrsPriv for (String, u16) {
    fn to_lookup(&self) -> Lookup {
        host_port(&self.0, self.1)
    }
}

impl ToSocketAddrs for str {}
impl ToSocketAddrsPriv for str {
    fn to_lookup(&self) -> Lookup {
        if let Ok(addr) = self.parse::<SocketAddr>() {
            return Lookup::Ready(Addrs::one(addr));
        }
        // `host:port`; the port is after the last colon (a bare IPv6 host such as
        // `::1:80` then still splits as std's parser does).
        let Some((host, port)) = self.rsplit_once(':') else {
            return Lookup::Invalid("invalid socket address: expected `host:port`");
        };
        match port.parse::<u16>() {
            Ok(port) => host_port(host, port),
            Err(_) => Lookup::Invalid("invalid port value"),
        }
    }
}

impl ToSocketAddrs for String {}
impl ToSocketAddrsPriv for String {
    fn to_lookup(&self) -> Lookup {
        self.as_str().to_lookup()
    }
}

impl ToSocketAddrs for [SocketAddr] {}
impl ToSocketAddrsPriv for [SocketAddr] {
    fn to_lookup(&self) -> Lookup {
        match self {
            [one] => Lookup::Ready(Addrs::one(*one)),
            many => Lookup::Ready(Addrs::many(many.to_vec())),
        }
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrsPriv + ?Sized> ToSocketAddrsPriv for &T {
    fn to_lookup(&self) -> Lookup {
        (**self).to_lookup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(a: &(impl ToSocketAddrs + ?Sized)) -> Vec<SocketAddr> {
        match a.to_lookup() {
            Lookup::Ready(addrs) => addrs.collect(),
            Lookup::Host(h, p) => panic!("went to a lookup: {h}:{p}"),
            Lookup::Invalid(why) => panic!("invalid: {why}"),
        }
    }

    #[test]
    fn numeric_addresses_need_no_lookup() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(ready("127.0.0.1:80"), [v4]);
        assert_eq!(ready(&String::from("[::1]:80")), [v6]);
        assert_eq!(ready(&v4), [v4]);
        assert_eq!(ready(&(Ipv4Addr::LOCALHOST, 80)), [v4]);
        assert_eq!(ready(&(IpAddr::from(Ipv6Addr::LOCALHOST), 80)), [v6]);
        assert_eq!(ready(&("127.0.0.1", 80)), [v4]);
        assert_eq!(ready(&("::1".to_string(), 80)), [v6]);
        assert_eq!(ready("::1:80"), [v6]);
        assert_eq!(ready(&[v4, v6][..]), [v4, v6]);
    }

    #[test]
    fn host_names_go_to_a_lookup_and_malformed_input_is_rejected() {
        assert!(matches!("localhost:80".to_lookup(), Lookup::Host(h, 80) if h == "localhost"));
        assert!(matches!(("example.invalid", 7).to_lookup(), Lookup::Host(h, 7) if h == "example.invalid"));
        assert!(matches!("localhost".to_lookup(), Lookup::Invalid(_)));
        assert!(matches!("localhost:http".to_lookup(), Lookup::Invalid(_)));
        assert!(matches!("localhost:70000".to_lookup(), Lookup::Invalid(_)));
    }
}
