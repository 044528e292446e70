//! [`serve`]: the accept loop, the protocol sniff, graceful shutdown and its
//! connection registry, and the loop that drives one connection.

use super::io::Io;
use super::rt::{Executor, Timer};
use super::watch::{Activity, Counted, HeaderWatch};
use super::{
    current_shared, spawn_named, CONNECTION_TASK_NAME, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_SHUTDOWN_DEADLINE,
};
use crate::net::{TcpListener, TcpStream};
use crate::runtime::Handle;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The HTTP/2 client preface; a connection that starts with it speaks HTTP/2.
pub(super) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serve `service` on every connection `listener` accepts, over HTTP/1.1 or HTTP/2.
///
/// `service` is any tower service of `http::Request<hyper::body::Incoming>`, cloned per
/// connection: an axum `Router` (`Router<()>`), tonic's `Routes`, or
/// `tower::service_fn`. Await the result (`serve(listener, app).await`, a `Send`
/// future): it runs until the listener fails for good, or until the signal given to
/// [`Serve::with_graceful_shutdown`] completes.
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

#[derive(Clone, Debug)]
struct Config {
    header_read_timeout: Option<Duration>,
    nodelay: bool,
    http1: bool,
    http2: bool,
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

/// Where the server's shutdown stands, for its connections.
const RUNNING: u8 = 0;
const GRACEFUL: u8 = 1;
const FORCED: u8 = 2;

/// The open connections of one server: how many, and how to reach each one's task.
struct Registry {
    state: AtomicU8,
    open: AtomicUsize,
    inner: Mutex<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    /// The task of each open connection (its waker), by slot.
    conns: Vec<Option<Waker>>,
    free: Vec<usize>,
    /// The server's own task, waiting for the last connection to close.
    drained: Option<Waker>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, RegistryInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count a connection as open from its accept on, before its task first runs: a
    /// shutdown that begins in between must still wait for it (or force it). Its waker
    /// comes with that first poll ([`Registry::set_waker`]); until then the task needs no
    /// wake, as its first poll looks at the state.
    fn reserve(&self) -> usize {
        let mut g = self.lock();
        self.open.fetch_add(1, Release);
        match g.free.pop() {
            Some(i) => i,
            None => {
                g.conns.push(None);
                g.conns.len() - 1
            }
        }
    }

    fn set_waker(&self, slot: usize, waker: &Waker) {
        self.lock().conns[slot] = Some(waker.clone());
    }

    fn deregister(&self, slot: usize) {
        let drained = {
            let mut g = self.lock();
            g.conns[slot] = None;
            g.free.push(slot);
            let left = self.open.fetch_sub(1, Release) - 1;
            if left == 0 {
                g.drained.take()
            } else {
                None
            }
        };
        if let Some(w) = drained {
            w.wake();
        }
    }

    /// Move to `state` and wake every connection to see it.
    fn signal(&self, state: u8) {
        self.state.store(state, Release);
        let wakers: Vec<Waker> = self.lock().conns.iter().flatten().cloned().collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Ready once no connection is open.
    fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.open.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        let mut g = self.lock();
        if self.open.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        g.drained = Some(cx.waker().clone());
        Poll::Pending
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
    let registry =
        Arc::new(Registry { state: AtomicU8::new(RUNNING), open: AtomicUsize::new(0), inner: Default::default() });
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

struct Builders {
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<Executor>,
    config: Config,
}

/// Which protocol a connection's first bytes speak.
enum Sniffed {
    Http1,
    Http2,
    /// Closed, timed out or failed before saying anything usable.
    Gone,
}

/// Read until the bytes either match the whole HTTP/2 preface or stop matching it.
async fn sniff(stream: &TcpStream, buf: &mut [u8; PREFACE.len()], len: &mut usize) -> Sniffed {
    loop {
        let n = match std::future::poll_fn(|cx| stream.poll_read_init(cx, &mut buf[*len..])).await {
            Ok(0) | Err(_) => return Sniffed::Gone,
            Ok(n) => n,
        };
        let old = *len;
        *len += n;
        if buf[old..*len] != PREFACE[old..*len] {
            return Sniffed::Http1;
        }
        if *len == PREFACE.len() {
            return Sniffed::Http2;
        }
    }
}

/// Serve one connection, from its first byte to its close, watching the server's
/// shutdown state.
async fn serve_connection<S, B>(stream: TcpStream, service: S, builders: Arc<Builders>, guard: ConnGuard)
where
    S: ServeService<B>,
    B: ServeBody,
{
    guard.register_task().await;
    let registry = Arc::clone(&guard.registry);
    if builders.config.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    // Made before the first byte is read: the header-read timeout counts from here, the
    // connection's start, through the protocol sniff and the first request's head.
    let activity = Arc::new(Activity::new());
    let mut buf = [0u8; PREFACE.len()];
    let mut len = 0;
    let sniffed = {
        let sniff = std::pin::pin!(sniff(&stream, &mut buf, &mut len));
        // At a graceful shutdown, a connection that has sent nothing closes now; one
        // whose first bytes have arrived goes on to be answered.
        let sniff = unless_shutdown(&registry, sniff, || !has_unread_bytes(fd));
        match builders.config.header_read_timeout {
            Some(t) => crate::time::timeout(t, sniff).await.ok().flatten(),
            None => sniff.await,
        }
    };
    let service =
        Counted { inner: hyper_util::service::TowerToHyperService::new(service), activity: Arc::clone(&activity) };
    let timeout = builders.config.header_read_timeout;
    // HTTP/1: every request head must arrive within the timeout of the connection going
    // idle. HTTP/2: the first request must start within the timeout of the connection's
    // start (a client that sends the preface and then nothing holds no socket for long);
    // after that an idle HTTP/2 connection is a normal thing for a client to keep.
    let http1_watch = || timeout.map(|t| HeaderWatch::new(t, Arc::clone(&activity)));
    let http2_watch = || timeout.map(|t| HeaderWatch::first_request(t, Arc::clone(&activity)));
    let http1_drain = Http1Drain { fd, activity: Arc::clone(&activity) };
    let io = Io::with_prefix(stream, buf, len);
    match sniffed {
        Some(Sniffed::Http1) if builders.config.http1 => {
            let conn = builders.http1.serve_connection(io, service).with_upgrades();
            drive(&registry, conn, Some(http1_drain), http1_watch(), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http2) if builders.config.http2 => {
            let conn = builders.http2.serve_connection(io, service);
            drive(&registry, conn, None, http2_watch(), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http2) => {
            // An HTTP/1-only server: hyper's HTTP/1 side closes on the preface.
            let conn = builders.http1.serve_connection(io, service);
            drive(&registry, conn, Some(http1_drain), http1_watch(), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http1) => {
            let conn = builders.http2.serve_connection(io, service);
            drive(&registry, conn, None, http2_watch(), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Gone) | None => {}
    }
    drop(guard);
}

/// Whether bytes wait in the socket that the server has not read yet.
fn has_unread_bytes(fd: std::os::fd::RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `recv` writes at most one byte, into `byte`, which is valid for it;
    // `MSG_PEEK` leaves the data in the socket and `MSG_DONTWAIT` never blocks. `fd` is
    // the connection's socket, open for as long as its `Io` lives, which outlives every
    // call here.
    let n = unsafe { libc::recv(fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n > 0
}

/// Run `fut` unless a graceful shutdown begins and `give_up()` agrees (then `None`); a
/// forced one always ends it.
async fn unless_shutdown<F: Future>(registry: &Registry, fut: F, give_up: impl Fn() -> bool) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        match registry.state.load(Acquire) {
            RUNNING => {}
            GRACEFUL if !give_up() => {}
            _ => return Poll::Ready(None),
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

/// What an HTTP/1 connection needs to drain without dropping a request that has already
/// arrived: its socket, and how many requests it has started.
struct Http1Drain {
    fd: std::os::fd::RawFd,
    activity: Arc<Activity>,
}

/// Poll a hyper connection to its end: start its graceful shutdown when the server asks,
/// and drop it when the server's deadline has passed.
///
/// hyper closes an idle HTTP/1 connection at once when asked to shut down, even if the
/// next request's bytes are already in its socket, unread. So when such bytes wait on an
/// idle connection, the request is let in first: the connection is asked once it has
/// started one more request (hyper then finishes that one and closes). With a request in
/// flight and bytes unread, those may be its body (an upload still coming in) or a
/// pipelined request still in the socket: the decision waits for its response to
/// finish, and then asks at once if nothing is left unread (hyper closes the idle
/// connection) or lets the next request in first. (A pipelined request hyper has already
/// read into its buffer is hyper's: asked to shut down, it answers the current request
/// and closes.) A client that sends half a request
/// is cut by the header-read timeout (`watch`), or at the deadline.
async fn drive<C, E>(
    registry: &Registry,
    conn: C,
    http1: Option<Http1Drain>,
    mut watch: Option<HeaderWatch>,
    graceful: impl Fn(Pin<&mut C>),
) where
    C: Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    let mut asked = false;
    // Nothing is decided before hyper's first poll: until it reads them, the bytes the
    // protocol sniff took are in `Io`'s prefix, neither in the socket (where the check
    // for unread bytes looks) nor in hyper's buffer (which tells hyper a request has
    // begun), and a shutdown asked for then would close the connection on a request
    // that has wholly arrived.
    let mut polled = false;
    // At the signal: the number of requests started, if one more must start first.
    let mut wait_for_more: Option<Option<u64>> = None;
    std::future::poll_fn(|cx| loop {
        let state = registry.state.load(Acquire);
        if state == FORCED {
            return Poll::Ready(());
        }
        if state == GRACEFUL && !asked && polled {
            if wait_for_more.is_none() {
                // Unread bytes on an idle connection are the next request's, which must
                // start first. With a request in flight they may be its body or a
                // pipelined next request: decide once its response has finished (checked
                // after each poll below), when they can only be the next request's.
                let unread = http1.as_ref().is_some_and(|h| has_unread_bytes(h.fd));
                let busy = http1.as_ref().is_some_and(|h| h.activity.in_flight());
                if !(unread && busy) {
                    wait_for_more = Some(http1.as_ref().filter(|_| unread).map(|h| h.activity.started.load(Relaxed)));
                }
            }
            if let Some(pending) = wait_for_more {
                let started_more = |h: &Http1Drain| pending.is_some_and(|n| h.activity.started.load(Relaxed) > n);
                if pending.is_none() || http1.as_ref().is_some_and(started_more) {
                    asked = true;
                    graceful(conn.as_mut());
                }
            }
        }
        // A connection error (a reset peer, a malformed request, a header timeout) ends
        // this connection only; hyper has answered what it could.
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if !polled {
            polled = true;
            if state == GRACEFUL {
                // Decide now, with the sniffed bytes in hyper's hands.
                continue;
            }
        }
        // Idle past the header-read timeout: drop the connection, as hyper does.
        if let Some(watch) = watch.as_mut() {
            if watch.poll_expired(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        // The awaited request has started, or the one in flight has finished: go round
        // once more to decide and ask now.
        let started =
            matches!((&wait_for_more, &http1), (Some(Some(n)), Some(h)) if h.activity.started.load(Relaxed) > *n);
        let finished = wait_for_more.is_none() && http1.as_ref().is_some_and(|h| !h.activity.in_flight());
        if state == GRACEFUL && !asked && (started || finished) {
            continue;
        }
        return Poll::Pending;
    })
    .await
}

/// A connection's place in the registry: reserved at its accept, its waker stored on the
/// task's first poll (so it is the task's own), given back on drop, including when the
/// task is cancelled or dropped before it ever ran.
struct ConnGuard {
    registry: Arc<Registry>,
    slot: usize,
}

impl ConnGuard {
    fn reserve(registry: &Arc<Registry>) -> ConnGuard {
        ConnGuard { registry: Arc::clone(registry), slot: registry.reserve() }
    }

    async fn register_task(&self) {
        std::future::poll_fn(|cx| {
            self.registry.set_waker(self.slot, cx.waker());
            Poll::Ready(())
        })
        .await
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.registry.deregister(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection accepted but not yet polled when the shutdown begins still counts:
    /// the server waits for it (or forces it at the deadline) instead of returning while
    /// it goes on to serve a request nobody will cut.
    #[test]
    fn a_connection_not_yet_polled_keeps_the_server_draining() {
        let registry =
            Arc::new(Registry { state: AtomicU8::new(RUNNING), open: AtomicUsize::new(0), inner: Default::default() });
        let guard = ConnGuard::reserve(&registry);
        registry.signal(GRACEFUL);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(registry.poll_drained(&mut cx).is_pending(), "an accepted connection is open before its first poll");
        drop(guard);
        assert!(registry.poll_drained(&mut cx).is_ready(), "dropping it, even unpolled, drains the server");
    }
}
