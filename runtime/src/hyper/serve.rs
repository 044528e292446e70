//! [`serve`]: the server's public face (its builder, the services and bodies it runs) and
//! its accept loop; one connection's life is in `connection`, graceful shutdown in
//! `shutdown`.

use super::connection::{serve_connection, Builders};
use super::rt::{Executor, Timer};
use super::shutdown::{ConnGuard, Registry, FORCED, GRACEFUL};
use super::{
    current_shared, spawn_named, CONNECTION_TASK_NAME, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_SHUTDOWN_DEADLINE,
};
use crate::net::TcpListener;
use crate::runtime::Handle;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

/// Serve `service` on every connection `listener` accepts, over HTTP/1.1 or HTTP/2.
///
/// `service` is any tower service of `http::Request<hyper::body::Incoming>`, cloned per
/// connection: an axum `Router` (`Router<()>`), tonic's `Routes`, or
/// `tower::service_fn`. Await the result (`serve(listener, app).await`, a `Send`
/// future): it runs until the listener fails for good, or until the signal given to
/// [`Serve::with_graceful_shutdown`] completes.
///
/// An HTTP/1.1 connection kept alive gives hyper's buffers back once it has waited a
/// second for its next request, and a new hyper connection reads that request. One
/// difference follows for a handler that takes `hyper::upgrade::on` and then answers
/// with something other than `101 Switching Protocols`: that upgrade future fails when
/// the connection goes idle for that second (hyper's "upgrade expected but not
/// completed"), where on a hyper connection that lives on it stays pending until the
/// connection closes. Either way it never completes.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let app = axum::Router::new().route("/", axum::routing::get(|| async { "Hello, world!" }));
/// let listener = volt::net::TcpListener::bind("127.0.0.1:3000").await?;
/// volt::hyper::serve(listener, app).await
/// # }
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: ServeService<B>,
    B: ServeBody,
{
    Serve {
        listener,
        service,
        config: Config {
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            nodelay: true,
            http1: true,
            http2: true,
        },
    }
}

/// A server's settings, which its connections read.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) header_read_timeout: Option<Duration>,
    pub(super) nodelay: bool,
    pub(super) http1: bool,
    pub(super) http2: bool,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The services [`serve`] runs: a cloneable, `Send` tower service from
/// `http::Request<Incoming>` to `http::Response<B>` (an axum `Router`, tonic's `Routes`,
/// `tower::service_fn`). Implemented for every such service.
pub trait ServeService<B>:
    tower_service::Service<
        http::Request<hyper::body::Incoming>,
        Response = http::Response<B>,
        Future: Send + 'static,
        Error: Into<BoxError>,
    > + Clone
    + Send
    + 'static
{
}

impl<S, B> ServeService<B> for S where
    S: tower_service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Future: Send + 'static,
            Error: Into<BoxError>,
        > + Clone
        + Send
        + 'static
{
}

/// The response bodies [`serve`] sends: any `Send` hyper body. Implemented for every such
/// body.
pub trait ServeBody: hyper::body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

impl<B> ServeBody for B where B: hyper::body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

/// An HTTP server in the making; see [`serve`]. Await it to run it.
#[must_use = "a server does nothing until awaited"]
pub struct Serve<S> {
    listener: TcpListener,
    service: S,
    config: Config,
}

impl<S> std::fmt::Debug for Serve<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serve").field("listener", &self.listener).field("config", &self.config).finish()
    }
}

impl<S> Serve<S> {
    /// How long a connection may take to show its protocol, and an HTTP/1 request to
    /// deliver its head (also the idle limit between kept-alive requests), counted from
    /// the connection's start or its last response's end; an HTTP/2 connection must start
    /// its first request within it. Default 30 s; `None` waits forever.
    ///
    /// The timeout does not run while a request is being answered, however long its
    /// handler takes. `Some(Duration::ZERO)` allows no waiting at all: a connection is
    /// served only if its first bytes and request head have already arrived when the
    /// server reads them, and a kept-alive connection is closed as soon as it is found
    /// idle after a response. Whatever the timeout, zero included, a connection whose
    /// handler is running is not woken for the timeout over and over.
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Serve<S> {
        self.config.header_read_timeout = timeout;
        self
    }

    /// Whether accepted connections set `TCP_NODELAY` (default `true`).
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Serve<S> {
        self.config.nodelay = nodelay;
        self
    }

    /// Serve HTTP/1.1 only: a connection that opens with the HTTP/2 preface is closed
    /// without a response (hyper's HTTP/1 server refuses it as a version error).
    pub fn http1_only(mut self) -> Serve<S> {
        self.config.http2 = false;
        self.config.http1 = true;
        self
    }

    /// Serve HTTP/2 (prior knowledge) only.
    pub fn http2_only(mut self) -> Serve<S> {
        self.config.http1 = false;
        self.config.http2 = true;
        self
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Stop accepting when `signal` completes, let open connections finish within the
    /// deadline, then return.
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<S, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown { serve: self, signal, deadline: DEFAULT_SHUTDOWN_DEADLINE }
    }
}

/// A server that shuts down gracefully; see [`Serve::with_graceful_shutdown`].
#[must_use = "a server does nothing until awaited"]
pub struct WithGracefulShutdown<S, F> {
    serve: Serve<S>,
    signal: F,
    deadline: Duration,
}

impl<S, F> std::fmt::Debug for WithGracefulShutdown<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithGracefulShutdown").field("serve", &self.serve).field("deadline", &self.deadline).finish()
    }
}

impl<S, F> WithGracefulShutdown<S, F> {
    /// How long open connections get to finish after the signal (default 30 s); those
    /// still open then are dropped.
    pub fn shutdown_deadline(mut self, deadline: Duration) -> WithGracefulShutdown<S, F> {
        self.deadline = deadline;
        self
    }
}

type ServeFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

impl<S, B> IntoFuture for Serve<S>
where
    S: ServeService<B>
        // Names `B`, the body type, for the impl.
        + tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    B: ServeBody,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        Box::pin(run(self, std::future::pending::<()>(), None))
    }
}

impl<S, B, F> IntoFuture for WithGracefulShutdown<S, F>
where
    S: ServeService<B>
        // Names `B`, the body type, for the impl.
        + tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    B: ServeBody,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        Box::pin(run(self.serve, self.signal, Some(self.deadline)))
    }
}

/// Report accept errors that pause the accept loop: through `tracing` with the feature of
/// that name, else on stderr.
fn log_accept_error(e: &io::Error, count: u64) {
    #[cfg(feature = "tracing")]
    tracing::error!(target: "volt::hyper", error = %e, count, "accept failed; retrying every 50 ms");
    #[cfg(not(feature = "tracing"))]
    eprintln!("volt::hyper::serve: accept failed ({count} since the last report): {e}; retrying every 50 ms");
}

/// Accepts in a row before the accept loop yields to its worker's other tasks.
const ACCEPTS_PER_YIELD: u32 = 64;

/// The accept loop: accept until the signal, then drain.
async fn run<S, B, F>(serve: Serve<S>, signal: F, deadline: Option<Duration>) -> io::Result<()>
where
    S: ServeService<B>,
    B: ServeBody,
    F: Future<Output = ()> + Send + 'static,
{
    let Serve { listener, service, config } = serve;
    let shared = current_shared("serve");
    let handle = Handle { shared: Arc::clone(&shared) };
    let registry = Arc::new(Registry::new());
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // hyper's own header-read timer arms and disarms a timer for every request (a wheel
    // insert and remove, a boxed sleep, clock reads, an extra read attempt after each
    // head): about a tenth of a small request's cost. The connection task keeps the
    // same deadline itself with one timer per timeout period (see `HeaderWatch`).
    http1.timer(Timer::with_handle(handle.clone())).header_read_timeout(None);
    let mut http2 = hyper::server::conn::http2::Builder::new(Executor::with_handle(handle.clone()));
    http2.timer(Timer::with_handle(handle.clone())).enable_connect_protocol();
    let builders = Arc::new(Builders { http1, http2, config });

    let mut signal = std::pin::pin!(signal);
    let mut accepted_since_yield = 0u32;
    // Accept errors that pause the loop, and when one was last logged.
    let mut unlogged_errors = 0u64;
    let mut logged: Option<std::time::Instant> = None;
    loop {
        // While connections keep arriving, `poll_accept` keeps answering at once and this
        // loop would never give its worker back: let the worker's other tasks run (the
        // connections just accepted among them) every `ACCEPTS_PER_YIELD` accepts.
        if accepted_since_yield >= ACCEPTS_PER_YIELD {
            accepted_since_yield = 0;
            crate::task::yield_now().await;
        }
        let accepted = std::future::poll_fn(|cx| {
            if signal.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        })
        .await;
        match accepted {
            None => break,
            Some(Ok((stream, _peer))) => {
                accepted_since_yield += 1;
                let conn =
                    serve_connection(stream, service.clone(), Arc::clone(&builders), ConnGuard::reserve(&registry));
                drop(spawn_named(&shared, CONNECTION_TASK_NAME, conn));
            }
            Some(Err(e)) if is_connection_error(&e) => continue,
            Some(Err(e)) if is_listener_broken(&e) => return Err(e),
            Some(Err(e)) => {
                // Out of file descriptors or memory: back off instead of spinning, as
                // the connections open now may close and free some. (After the runtime
                // shuts down, this task is cancelled with the rest.) Said at most every
                // 10 s, with how many there were, so that a server that stopped taking
                // connections says why without flooding its log.
                unlogged_errors += 1;
                if logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    log_accept_error(&e, unlogged_errors);
                    unlogged_errors = 0;
                    logged = Some(std::time::Instant::now());
                }
                crate::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // Refuse new connections from here on.
    drop(listener);
    let Some(deadline) = deadline else { return Ok(()) };
    registry.signal(GRACEFUL);
    let drained = std::future::poll_fn(|cx| registry.poll_drained(cx));
    if crate::time::timeout(deadline, drained).await.is_err() {
        registry.signal(FORCED);
        std::future::poll_fn(|cx| registry.poll_drained(cx)).await;
    }
    Ok(())
}

/// Errors that end one connection attempt, not the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) || is_pending_network_error(e)
}

/// The network errors a pending connection may report through `accept` on Linux, which
/// accept(2) says to treat like `EAGAIN` and retry (`EPERM`: a firewall refused it).
#[cfg(target_os = "linux")]
fn is_pending_network_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENETDOWN
                | libc::EPROTO
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
                | libc::EPERM
        )
    )
}

#[cfg(not(target_os = "linux"))]
fn is_pending_network_error(_: &io::Error) -> bool {
    false
}

/// Errors that say the listening socket itself is unusable: retrying can never succeed,
/// so `serve` returns them.
fn is_listener_broken(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT))
}
