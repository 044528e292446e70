//! Addresses as users type them: `host:port` or `http://host:port` (a trailing `/` is
//! allowed). TLS is not spoken, so `https://` is refused with that reason rather than a
//! connection error later.
//!
//! Two checks, one error type. [`endpoint_uri`] checks the shape only (a host, a port in
//! 1-65535) and gives the URI a gRPC channel wants; the name is looked up when the
//! channel connects, so a dashboard started before its server's DNS name exists keeps
//! retrying. [`resolve_addr`] looks the name up now, for a program that needs one socket
//! address at startup (the exporter's `--console` and `--listen`).

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// What is wrong with an address a user gave.
#[derive(Debug)]
pub struct AddrError {
    /// The address as given.
    pub input: String,
    pub kind: AddrErrorKind,
}

#[derive(Debug)]
pub enum AddrErrorKind {
    /// `https://`: the console speaks plain HTTP/2 only.
    Tls,
    /// No `:port`.
    NoPort,
    /// An empty host, or a port that is not a number in 1-65535.
    BadHostOrPort,
    /// The name did not resolve (or resolved to nothing).
    Resolve(std::io::Error),
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.input;
        match &self.kind {
            AddrErrorKind::Tls => write!(f, "{a:?}: TLS is not supported; use host:port or http://host:port"),
            AddrErrorKind::NoPort => write!(f, "{a:?} is not an address: expected host:port or http://host:port"),
            AddrErrorKind::BadHostOrPort => {
                write!(f, "{a:?} is not an address: expected host:port (port 1-65535) or http://host:port")
            }
            AddrErrorKind::Resolve(e) => write!(f, "{a:?} is not a usable address (want host:port): {e}"),
        }
    }
}

impl std::error::Error for AddrError {}

impl From<AddrError> for String {
    fn from(e: AddrError) -> String {
        e.to_string()
    }
}

impl From<AddrError> for std::io::Error {
    fn from(e: AddrError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
    }
}

/// `addr` without its `http://` prefix and trailing slashes.
fn bare(addr: &str) -> &str {
    addr.strip_prefix("http://").unwrap_or(addr).trim_end_matches('/')
}

fn error(addr: &str, kind: AddrErrorKind) -> AddrError {
    AddrError { input: addr.to_string(), kind }
}

/// `host:port` or `http://host:port` to an endpoint URI (`http://host:port`), checking
/// the shape only.
pub fn endpoint_uri(addr: &str) -> Result<String, AddrError> {
    if addr.starts_with("https://") {
        return Err(error(addr, AddrErrorKind::Tls));
    }
    let bare = bare(addr);
    let (host, port) = bare.rsplit_once(':').ok_or_else(|| error(addr, AddrErrorKind::NoPort))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(error(addr, AddrErrorKind::BadHostOrPort));
    }
    Ok(format!("http://{bare}"))
}

/// `host:port` or `http://host:port` to one socket address, looking the name up now.
pub fn resolve_addr(addr: &str) -> Result<SocketAddr, AddrError> {
    Ok(resolve_addrs(addr)?[0])
}

/// `host:port` or `http://host:port` to every socket address it names (at least one),
/// in the resolver's order, looking the name up now.
pub fn resolve_addrs(addr: &str) -> Result<Vec<SocketAddr>, AddrError> {
    let found = bare(addr).to_socket_addrs().and_then(|all| {
        let all: Vec<SocketAddr> = all.collect();
        if all.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the address resolves to nothing"));
        }
        Ok(all)
    });
    found.map_err(|e| error(addr, AddrErrorKind::Resolve(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_give_the_same_uri() {
        for a in ["127.0.0.1:6670", "http://127.0.0.1:6670", "http://127.0.0.1:6670/", "127.0.0.1:6670//"] {
            assert_eq!(endpoint_uri(a).unwrap(), "http://127.0.0.1:6670", "{a}");
        }
        assert_eq!(endpoint_uri("[::1]:1").unwrap(), "http://[::1]:1");
        assert_eq!(endpoint_uri("console.internal:65535").unwrap(), "http://console.internal:65535");
    }

    #[test]
    fn bad_shapes_say_why() {
        let kind = |a: &str| endpoint_uri(a).unwrap_err().kind;
        assert!(matches!(kind("https://127.0.0.1:6670"), AddrErrorKind::Tls));
        assert!(matches!(kind("localhost"), AddrErrorKind::NoPort));
        assert!(matches!(kind("http://"), AddrErrorKind::NoPort));
        assert!(matches!(kind(":6670"), AddrErrorKind::BadHostOrPort));
        assert!(matches!(kind("localhost:65536"), AddrErrorKind::BadHostOrPort));
        assert!(matches!(kind("localhost:http"), AddrErrorKind::BadHostOrPort));
        let msg = endpoint_uri("localhost").unwrap_err().to_string();
        assert!(msg.starts_with("\"localhost\" is not an address"), "{msg}");
    }

    #[test]
    fn resolving_accepts_both_forms_and_names_the_input_on_failure() {
        let want: SocketAddr = "127.0.0.1:9671".parse().unwrap();
        assert_eq!(resolve_addr("127.0.0.1:9671").unwrap(), want);
        assert_eq!(resolve_addr("http://127.0.0.1:9671/").unwrap(), want);
        let e = resolve_addr("not an address").unwrap_err();
        assert!(matches!(e.kind, AddrErrorKind::Resolve(_)));
        let msg = e.to_string();
        assert!(msg.starts_with("\"not an address\" is not a usable address (want host:port): "), "{msg}");
    }
}
