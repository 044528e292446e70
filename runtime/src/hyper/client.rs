//! [`Connector`]: plain-HTTP connections for hyper-util's client.

use super::io::Io;
use crate::net::TcpStream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Opens plain-HTTP connections for `hyper_util::client::legacy::Client` on Volt.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use http_body_util::Empty;
/// use hyper::body::Bytes;
/// let client = hyper_util::client::legacy::Client::builder(volt::hyper::Executor::new())
///     .timer(volt::hyper::Timer::new())
///     .pool_timer(volt::hyper::Timer::new())
///     .build::<_, Empty<Bytes>>(volt::hyper::Connector::new());
/// let res = client.get("http://127.0.0.1:3000/".parse()?).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Connector {
    nodelay: bool,
}

impl Connector {
    /// A connector that sets `TCP_NODELAY` on its connections.
    pub fn new() -> Connector {
        Connector { nodelay: true }
    }

    /// Whether connections set `TCP_NODELAY` (default `true`).
    pub fn nodelay(mut self, nodelay: bool) -> Connector {
        self.nodelay = nodelay;
        self
    }
}

impl Default for Connector {
    fn default() -> Connector {
        Connector::new()
    }
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = Io<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Io<TcpStream>>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let nodelay = self.nodelay;
        Box::pin(async move {
            match uri.scheme_str() {
                Some("http") | None => {}
                Some(other) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("volt::hyper::Connector speaks plain HTTP only, not {other}:// ({uri})"),
                    ))
                }
            }
            let host =
                uri.host().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no host in {uri}")))?;
            // `[::1]` in a URI is `::1` to the resolver.
            let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            let port = uri.port_u16().unwrap_or(80);
            let stream = TcpStream::connect((host.as_str(), port)).await?;
            if nodelay {
                stream.set_nodelay(true)?;
            }
            Ok(Io::new(stream))
        })
    }
}
