//! hyper on Volt (feature `hyper`): the runtime traits hyper 1.x asks of a runtime, an
//! HTTP server for any tower service, and a connector for hyper-util's client.
//!
//! * [`Io`] wraps a Volt [`TcpStream`] (or any futures-io stream) as hyper's
//!   [`Read`](hyper::rt::Read) and [`Write`](hyper::rt::Write). For a `TcpStream` a read
//!   goes straight into hyper's uninitialized buffer, with no zeroing, and writes are
//!   vectored (one `writev` for a response's head and body).
//! * [`Executor`] spawns hyper's background futures (HTTP/2 streams, client connections)
//!   as named Volt tasks, so they show in the console's task list; [`Timer`] gives hyper
//!   sleeps on Volt's timing wheel, with `reset` moving a sleep in place.
//! * [`serve`] runs an accept loop: every connection becomes a task named
//!   `hyper connection` that speaks HTTP/1.1 or HTTP/2, whichever the client's first
//!   bytes say (HTTP/2 needs prior knowledge: no TLS, so no ALPN). An axum `Router` or
//!   tonic's `Routes` is such a service.
//! * [`Connector`] lets `hyper_util::client::legacy::Client` open plain-HTTP connections
//!   on Volt (host names resolve on the blocking pool).
//!
//! # Timeouts a server keeps
//! A connection must show which protocol it speaks, and an HTTP/1 request must deliver
//! its whole head, within the header-read timeout (30 s by default,
//! [`Serve::header_read_timeout`]), counted from the connection's start or its last
//! response's end, so it also limits how long a kept-alive connection may sit idle. A
//! client that connects and says nothing, or trickles its headers, is cut when it runs
//! out. The connection task keeps this deadline with one timer per timeout period,
//! rather than hyper's own timer, which arms and disarms one for every request. The protocol sniff is done here rather
//! than with hyper-util's `auto` builder because that one waits for the first bytes with
//! no timeout at all.
//!
//! # Graceful shutdown
//! [`Serve::with_graceful_shutdown`] takes a future; when it completes the listener is
//! closed (new connections are refused), every connection is asked to finish: an idle
//! HTTP/1 connection closes at once, a busy one after its response, HTTP/2 sends `GOAWAY`
//! and finishes its open streams. Whatever is still open at the deadline
//! ([`WithGracefulShutdown::shutdown_deadline`], 30 s by default) is dropped. The
//! connection registry this needs costs each connection one lock when it opens and one
//! when it closes, and nothing per request.

use crate::net::TcpStream;
use crate::runtime::handle::Shared;
use crate::runtime::Handle;
use std::any::TypeId;
use std::future::{Future, IntoFuture};
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

pub use crate::net::TcpListener;

/// The name of every task [`serve`] spawns for a connection.
pub const CONNECTION_TASK_NAME: &str = "hyper connection";
/// The default name of the tasks [`Executor`] spawns (hyper's HTTP/2 streams and client
/// connection drivers).
pub const EXECUTOR_TASK_NAME: &str = "hyper task";

const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(30);
/// `d` from now, saturating: `Duration::MAX` and its kin mean "never".
fn deadline_after(d: Duration) -> Instant {
    crate::time::deadline_after(Instant::now(), d)
}

fn spawn_named<F>(shared: &Arc<Shared>, name: &'static str, future: F) -> crate::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // A name is only kept while the runtime records events: don't allocate one otherwise.
    let name = shared.recorder.is_some().then(|| name.to_owned());
    Shared::spawn_named(shared, future, name)
}

fn current_shared(what: &str) -> Arc<Shared> {
    crate::runtime::context::current_handle().unwrap_or_else(|| {
        panic!("volt::hyper::{what} used outside a Volt runtime: create it inside one, or pass a `Handle`")
    })
}

// ---------------------------------------------------------------------------------------
// Io

/// A stream as hyper's [`Read`](hyper::rt::Read) and [`Write`](hyper::rt::Write).
///
/// Any `futures_io::AsyncRead + AsyncWrite` stream works. For a Volt [`TcpStream`] reads
/// skip zeroing hyper's buffer and writes are vectored; other streams get a zeroed buffer
/// (futures-io reads need an initialized one) and one buffer per write.
#[derive(Debug)]
pub struct Io<T> {
    inner: T,
    /// Bytes read ahead (the protocol sniff), handed out before the stream's own.
    prefix: Option<Prefix>,
}

#[derive(Debug)]
struct Prefix {
    buf: [u8; PREFACE.len()],
    pos: usize,
    len: usize,
}

impl<T> Io<T> {
    /// Wrap `inner`.
    pub fn new(inner: T) -> Io<T> {
        Io { inner, prefix: None }
    }

    /// The wrapped stream.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwrap. Bytes read ahead by [`serve`]'s protocol sniff and not yet handed to hyper
    /// are lost; an `Io` made with [`Io::new`] has none.
    pub fn into_inner(self) -> T {
        self.inner
    }

    fn with_prefix(inner: T, buf: [u8; PREFACE.len()], len: usize) -> Io<T> {
        Io { inner, prefix: (len > 0).then_some(Prefix { buf, pos: 0, len }) }
    }
}

fn is_tcp<T: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<TcpStream>()
}

impl<T> hyper::rt::Read for Io<T>
where
    T: futures_io::AsyncRead + Unpin + 'static,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(p) = &mut this.prefix {
            let n = (p.len - p.pos).min(buf.remaining());
            buf.put_slice(&p.buf[p.pos..p.pos + n]);
            p.pos += n;
            if p.pos == p.len {
                this.prefix = None;
            }
            return Poll::Ready(Ok(()));
        }
        if let Some(tcp) = (&this.inner as &dyn std::any::Any).downcast_ref::<TcpStream>() {
            // SAFETY: the slice is only written (by `read(2)`), never read, and only the
            // `n` bytes the kernel reports written are marked filled below.
            let dst = unsafe { buf.as_mut() };
            let n = std::task::ready!(tcp.poll_read_uninit(cx, dst))?;
            // SAFETY: `read(2)` initialized the first `n` bytes of the unfilled part.
            unsafe { buf.advance(n) };
            return Poll::Ready(Ok(()));
        }
        // SAFETY: the slice is zeroed before anything reads it, and only the bytes the
        // reader reports are marked filled.
        let dst = unsafe { buf.as_mut() };
        for b in dst.iter_mut() {
            *b = MaybeUninit::new(0);
        }
        // SAFETY: every byte of `dst` was initialized just above; `MaybeUninit<u8>` and
        // `u8` have the same layout.
        let init = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
        let n = std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, init))?;
        // SAFETY: the first `n` bytes were initialized (all were, above).
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T> hyper::rt::Write for Io<T>
where
    T: futures_io::AsyncWrite + Unpin + 'static,
{
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }

    fn is_write_vectored(&self) -> bool {
        is_tcp::<T>()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
}

impl hyper_util::client::legacy::connect::Connection for Io<TcpStream> {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        hyper_util::client::legacy::connect::Connected::new()
    }
}

// ---------------------------------------------------------------------------------------
// Executor and Timer

/// hyper's [`Executor`](hyper::rt::Executor) on Volt: each future becomes a task named
/// [`EXECUTOR_TASK_NAME`] (or the name given to [`Executor::named`]).
#[derive(Clone, Debug)]
pub struct Executor {
    handle: Option<Handle>,
    name: &'static str,
}

impl Executor {
    /// Spawn onto the runtime current when the executor runs a future (panics there if
    /// none is); made inside a runtime, onto that one from any thread.
    pub fn new() -> Executor {
        Executor { handle: Handle::try_current(), name: EXECUTOR_TASK_NAME }
    }

    /// Spawn onto `handle`'s runtime.
    pub fn with_handle(handle: Handle) -> Executor {
        Executor { handle: Some(handle), name: EXECUTOR_TASK_NAME }
    }

    /// Name the tasks this executor spawns.
    pub fn named(mut self, name: &'static str) -> Executor {
        self.name = name;
        self
    }
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new()
    }
}

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let shared = match &self.handle {
            Some(h) => Arc::clone(&h.shared),
            None => current_shared("Executor"),
        };
        drop(spawn_named(&shared, self.name, future));
    }
}

/// hyper's [`Timer`](hyper::rt::Timer) on Volt's timing wheel (1 ms resolution).
/// `Duration::MAX` and other deadlines past any real one mean "never".
#[derive(Clone, Debug)]
pub struct Timer {
    handle: Option<Handle>,
}

impl Timer {
    /// Use the runtime current when a sleep is made (panics there if none is); made
    /// inside a runtime, that one from any thread.
    pub fn new() -> Timer {
        Timer { handle: Handle::try_current() }
    }

    /// Use `handle`'s runtime.
    pub fn with_handle(handle: Handle) -> Timer {
        Timer { handle: Some(handle) }
    }

    fn shared(&self) -> Arc<Shared> {
        match &self.handle {
            Some(h) => Arc::clone(&h.shared),
            None => current_shared("Timer"),
        }
    }
}

impl Default for Timer {
    fn default() -> Timer {
        Timer::new()
    }
}

/// The sleep [`Timer`] hands hyper: a Volt [`Sleep`](crate::time::Sleep).
#[derive(Debug)]
struct TimerSleep(crate::time::Sleep);

impl Future for TimerSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl hyper::rt::Sleep for TimerSleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TimerSleep(crate::time::Sleep::new_in(self.shared(), deadline_after(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TimerSleep(crate::time::Sleep::new_in(self.shared(), deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        // A sleep of ours is moved in place (no new allocation); any other is replaced.
        match sleep.as_mut().downcast_mut_pin::<TimerSleep>() {
            Some(s) => s.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

// ---------------------------------------------------------------------------------------
// Connector

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

// ---------------------------------------------------------------------------------------
// serve

/// The HTTP/2 client preface; a connection that starts with it speaks HTTP/2.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

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
    /// deliver its head (also the idle limit between kept-alive requests). Default 30 s;
    /// `None` waits forever.
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Serve<S> {
        self.config.header_read_timeout = timeout;
        self
    }

    /// Whether accepted connections set `TCP_NODELAY` (default `true`).
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Serve<S> {
        self.config.nodelay = nodelay;
        self
    }

    /// Serve HTTP/1.1 only: a client's HTTP/2 preface is answered as a bad request.
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

    fn register(&self, waker: &Waker) -> usize {
        let mut g = self.lock();
        self.open.fetch_add(1, Release);
        match g.free.pop() {
            Some(i) => {
                g.conns[i] = Some(waker.clone());
                i
            }
            None => {
                g.conns.push(Some(waker.clone()));
                g.conns.len() - 1
            }
        }
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
    loop {
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
                let conn = serve_connection(stream, service.clone(), Arc::clone(&builders), Arc::clone(&registry));
                drop(spawn_named(&shared, CONNECTION_TASK_NAME, conn));
            }
            Some(Err(e)) if is_connection_error(&e) => continue,
            Some(Err(e)) => {
                // Out of file descriptors or memory: back off instead of spinning, as
                // the connections open now may close and free some. (After the runtime
                // shuts down, this task is cancelled with the rest.)
                let _ = e;
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
    )
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
async fn serve_connection<S, B>(stream: TcpStream, service: S, builders: Arc<Builders>, registry: Arc<Registry>)
where
    S: ServeService<B>,
    B: ServeBody,
{
    let guard = ConnGuard::new(&registry).await;
    if builders.config.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
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
    let activity = Arc::new(Activity::new());
    let service =
        Counted { inner: hyper_util::service::TowerToHyperService::new(service), activity: Arc::clone(&activity) };
    let watch = builders.config.header_read_timeout.map(|t| HeaderWatch::new(t, Arc::clone(&activity)));
    let http1_drain = Http1Drain { fd, activity, watch };
    let io = Io::with_prefix(stream, buf, len);
    match sniffed {
        Some(Sniffed::Http1) if builders.config.http1 => {
            let conn = builders.http1.serve_connection(io, service).with_upgrades();
            drive(&registry, conn, Some(http1_drain), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http2) if builders.config.http2 => {
            let conn = builders.http2.serve_connection(io, service);
            drive(&registry, conn, None, |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http2) => {
            // An HTTP/1-only server answers a preface like any malformed request.
            let conn = builders.http1.serve_connection(io, service);
            drive(&registry, conn, Some(http1_drain), |c| c.graceful_shutdown()).await;
        }
        Some(Sniffed::Http1) => {
            let conn = builders.http2.serve_connection(io, service);
            drive(&registry, conn, None, |c| c.graceful_shutdown()).await;
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

/// hyper's view of a connection's service: it counts the requests it is handed and
/// marks each one finished when its response body is dropped (sent in full, or the
/// connection gone).
struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, R, B> hyper::service::Service<R> for Counted<S>
where
    S: hyper::service::Service<R, Response = http::Response<B>>,
{
    type Response = http::Response<Tracked<B>>;
    type Error = S::Error;
    type Future = Track<S::Future>;

    fn call(&self, req: R) -> Track<S::Future> {
        self.activity.started.fetch_add(1, Relaxed);
        Track { future: self.inner.call(req), finish: Finish(Some(Arc::clone(&self.activity))) }
    }
}

/// What a connection's requests tell its task: how many started and finished, and when
/// the last one finished. An HTTP/2 stream's response may finish on another task, so the
/// counts are atomic; on HTTP/1 one task does all of it.
struct Activity {
    started: AtomicU64,
    finished: AtomicU64,
    /// When the last response finished, in nanoseconds after `base`.
    last_finished_ns: AtomicU64,
    base: Instant,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            last_finished_ns: AtomicU64::new(0),
            base: Instant::now(),
        }
    }

    fn finish(&self) {
        let at = self.base.elapsed().as_nanos() as u64;
        self.last_finished_ns.store(at, Relaxed);
        // Release: whoever sees the new count also sees the time stored before it.
        self.finished.fetch_add(1, Release);
    }

    /// When the connection last went idle: the last response's end, or the start.
    fn idle_since(&self) -> Instant {
        self.base + Duration::from_nanos(self.last_finished_ns.load(Relaxed))
    }

    fn in_flight(&self) -> bool {
        let finished = self.finished.load(Acquire);
        self.started.load(Relaxed) > finished
    }
}

/// Marks a request finished when dropped, unless it was handed on.
struct Finish(Option<Arc<Activity>>);

impl Drop for Finish {
    fn drop(&mut self) {
        if let Some(activity) = self.0.take() {
            activity.finish();
        }
    }
}

pin_project_lite::pin_project! {
    /// A service's response future, which hands back the response with its body tracked.
    /// Dropped before it answers (the connection closed), or failing, its request ends.
    struct Track<F> {
        #[pin]
        future: F,
        finish: Finish,
    }
}

impl<F, B, E> Future for Track<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<Tracked<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.future.poll(cx))?;
        let finish = Finish(this.finish.0.take());
        Poll::Ready(Ok(response.map(|body| Tracked { body, _finish: finish })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that marks its request finished when hyper drops it.
    struct Tracked<B> {
        #[pin]
        body: B,
        _finish: Finish,
    }
}

impl<B: hyper::body::Body> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The header-read timeout of an HTTP/1 connection: the connection must deliver a whole
/// request head within `timeout` of going idle (its start, or its last response's end).
///
/// hyper's own timer for this arms a timer per request. Here one timer stays armed per
/// timeout period: when it rings, the connection is cut if it has been idle for the whole
/// timeout; otherwise the timer is set again for one timeout after the last response
/// (or from now, if a request is being answered). A busy connection thus costs one timer
/// every `timeout`, and each request only two counter updates and a clock read.
struct HeaderWatch {
    timeout: Duration,
    activity: Arc<Activity>,
    alarm: Arc<Alarm>,
    sleep: Option<crate::time::Sleep>,
}

/// The waker the watch's sleep holds: it notes that the timer rang, then wakes the
/// connection's task, so the task learns it with one load instead of polling the timer
/// (a lock on the wheel) or reading the clock every time it runs.
struct Alarm {
    rang: std::sync::atomic::AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl std::task::Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Release);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(waker) = task.as_ref() {
            waker.wake_by_ref();
        }
    }
}

impl HeaderWatch {
    fn new(timeout: Duration, activity: Arc<Activity>) -> HeaderWatch {
        let alarm = Arc::new(Alarm { rang: Default::default(), task: Mutex::new(None) });
        HeaderWatch { timeout, activity, alarm, sleep: None }
    }

    /// `Ready` when the connection has waited longer than the timeout for a request head.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.sleep.is_some() && !self.alarm.rang.load(Acquire) {
            return Poll::Pending;
        }
        let from = if self.sleep.is_none() {
            self.activity.idle_since()
        } else {
            self.alarm.rang.store(false, Relaxed);
            let now = Instant::now();
            if self.activity.in_flight() {
                // A request is being answered: no head is awaited until it is done.
                now
            } else {
                let idle_since = self.activity.idle_since();
                if now.saturating_duration_since(idle_since) >= self.timeout {
                    return Poll::Ready(());
                }
                idle_since
            }
        };
        let at = crate::time::deadline_after(from, self.timeout);
        // The connection's future is its task's own (spawned by `run`), so this waker
        // stays the task's for the connection's life; it is set again at each arming.
        *self.alarm.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        let shared = crate::runtime::context::current_handle();
        let Some(shared) = shared else { return Poll::Pending };
        let mut sleep = crate::time::Sleep::new_in(shared, at);
        let waker = Waker::from(Arc::clone(&self.alarm));
        if Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker)).is_ready() {
            // Already due: look again on the next poll.
            self.alarm.rang.store(true, Release);
            cx.waker().wake_by_ref();
        }
        self.sleep = Some(sleep);
        Poll::Pending
    }
}

/// What an HTTP/1 connection needs to drain without dropping a request that has already
/// arrived (its socket, and how many requests it has started), and its header-read
/// timeout.
struct Http1Drain {
    fd: std::os::fd::RawFd,
    activity: Arc<Activity>,
    watch: Option<HeaderWatch>,
}

/// Poll a hyper connection to its end: start its graceful shutdown when the server asks,
/// and drop it when the server's deadline has passed.
///
/// hyper closes an idle HTTP/1 connection at once when asked to shut down, even if the
/// next request's bytes are already in its socket, unread. So when such bytes wait, the
/// request is let in first: the connection is asked once it has started one more
/// request (hyper then finishes that one and closes). A client that sends half a request
/// is cut by the header-read timeout, or at the deadline.
async fn drive<C, E>(registry: &Registry, conn: C, mut http1: Option<Http1Drain>, graceful: impl Fn(Pin<&mut C>))
where
    C: Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    let mut asked = false;
    // At the signal: the number of requests started, if one more must start first.
    let mut wait_for_more: Option<Option<u64>> = None;
    std::future::poll_fn(|cx| loop {
        let state = registry.state.load(Acquire);
        if state == FORCED {
            return Poll::Ready(());
        }
        if state == GRACEFUL && !asked {
            let pending = *wait_for_more.get_or_insert_with(|| {
                http1.as_ref().filter(|h| has_unread_bytes(h.fd)).map(|h| h.activity.started.load(Relaxed))
            });
            let started_more = |h: &Http1Drain| pending.is_some_and(|n| h.activity.started.load(Relaxed) > n);
            if pending.is_none() || http1.as_ref().is_some_and(started_more) {
                asked = true;
                graceful(conn.as_mut());
            }
        }
        // A connection error (a reset peer, a malformed request, a header timeout) ends
        // this connection only; hyper has answered what it could.
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        // Idle past the header-read timeout: drop the connection, as hyper does.
        if let Some(watch) = http1.as_mut().and_then(|h| h.watch.as_mut()) {
            if watch.poll_expired(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        // The awaited request has started: go round once more to ask now.
        let started =
            matches!((&wait_for_more, &http1), (Some(Some(n)), Some(h)) if h.activity.started.load(Relaxed) > *n);
        if state == GRACEFUL && !asked && started {
            continue;
        }
        return Poll::Pending;
    })
    .await
}

/// A connection's place in the registry: taken on the task's first poll (so the waker
/// stored is the task's own), given back on drop, including when the task is cancelled.
struct ConnGuard<'a> {
    registry: &'a Registry,
    slot: usize,
}

impl<'a> ConnGuard<'a> {
    async fn new(registry: &'a Registry) -> ConnGuard<'a> {
        let slot = std::future::poll_fn(|cx| Poll::Ready(registry.register(cx.waker()))).await;
        ConnGuard { registry, slot }
    }
}

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.registry.deregister(self.slot);
    }
}
