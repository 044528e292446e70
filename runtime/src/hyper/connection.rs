//! One connection of [`serve`](super::serve): the protocol sniff and the first request
//! head, read here (see below), then hyper's HTTP/1 or HTTP/2 connection driven to its
//! end, watching the server's shutdown. An HTTP/1 connection that waits for its next
//! request gives hyper's connection up and reads that head here too ([`serve_http1`]).
//!
//! # No buffers before a request head
//! hyper gives each HTTP/1 connection a read buffer (8 KiB, grown to 16 KiB once a
//! partial head is in it) and an 8 KiB buffer for response heads, and keeps both while
//! the hyper connection lives: 24 KiB of the 29 KiB an idle connection holds. A connection
//! that has not yet sent a whole request head (a slow client, a client that connects
//! ahead of need, a slowloris) needs neither. So the first bytes are read here, before
//! hyper sees the connection: each read lands in a buffer on the stack (for the length
//! of one poll) and is kept in a vector exactly as long as what has arrived, until the
//! bytes are the HTTP/2 preface, or a blank line ends an HTTP/1 head, or
//! [`HEAD_LIMIT`] bytes have come without one. Only then is hyper's connection made,
//! and it reads those bytes first (`Io`'s prefix). A connection waiting for the rest of
//! its head holds its socket, those bytes and a few hundred bytes of task: hyper's
//! connection future is boxed, so the task's own cell does not carry its size. (The
//! bytes are read rather than peeked at and left in the socket: a client that trickles
//! a long head in tiny segments would fill the socket's receive buffer with their
//! overhead, close its window, and stall.) The header-read timeout and a graceful
//! shutdown apply to this wait as they do to hyper's (the timeout counts from the
//! connection's start).

use super::io::{Io, PREFACE};
use super::rt::Executor;
use super::serve::{Config, ServeBody, ServeService};
use super::shutdown::{unless_shutdown, ConnGuard, Registry, FORCED, GRACEFUL, RUNNING};
use super::watch::{Activity, Counted, HeaderWatch};
use crate::net::stream::StreamSocket;
use crate::net::TcpStream;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::Poll;

/// What every connection of one server is built with: hyper's two builders and the
/// server's settings.
pub(super) struct Builders {
    pub(super) http1: hyper::server::conn::http1::Builder,
    pub(super) http2: hyper::server::conn::http2::Builder<Executor>,
    pub(super) config: Config,
}

/// Which protocol a connection's first bytes speak.
enum Sniffed {
    Http1,
    Http2,
    /// Closed, timed out or failed before saying anything usable.
    Gone,
}

/// How many bytes of an unfinished head are read here: a head not ended within them is
/// left to hyper (which enforces its own limit on a head's size).
const HEAD_LIMIT: usize = 8 * 1024;

/// Whether `bytes` (what the connection has sent so far) hold a whole HTTP/1 request
/// head: after any empty lines before it (which HTTP lets a client send and which end no
/// request), a line followed by an empty one (CRLF or bare LF line ends).
fn head_complete(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(bytes.len());
    let head = &bytes[start..];
    head.windows(2).any(|w| w == b"\n\n") || head.windows(3).any(|w| w == b"\n\r\n")
}

/// Read the connection's first bytes into `start` (see the module doc), noting how many
/// have arrived in `got`: until they are the whole HTTP/2 preface (if `sniff_h2`), or
/// stop matching it and then hold a whole HTTP/1 request head or [`HEAD_LIMIT`] bytes.
/// `start` may hold bytes already (a kept-alive connection's part of its next head).
async fn read_start(stream: &TcpStream, start: &mut Vec<u8>, got: &AtomicUsize, sniff_h2: bool) -> Sniffed {
    let is_h2 = |start: &[u8]| {
        let k = start.len().min(PREFACE.len());
        sniff_h2 && start[..k] == PREFACE[..k]
    };
    if !start.is_empty() && !is_h2(start) && (start.len() >= HEAD_LIMIT || head_complete(start)) {
        return Sniffed::Http1;
    }
    std::future::poll_fn(|cx| loop {
        let mut chunk = [0u8; HEAD_LIMIT];
        let room = HEAD_LIMIT.saturating_sub(start.len()).max(1);
        let n = match std::task::ready!(stream.poll_read_init(cx, &mut chunk[..room])) {
            Ok(0) | Err(_) => return Poll::Ready(Sniffed::Gone),
            Ok(n) => n,
        };
        // Exactly what arrived: a connection that waits holds no spare room.
        start.reserve_exact(n);
        start.extend_from_slice(&chunk[..n]);
        got.store(start.len(), Relaxed);
        if is_h2(start) {
            if start.len() >= PREFACE.len() {
                return Poll::Ready(Sniffed::Http2);
            }
        } else if start.len() >= HEAD_LIMIT || head_complete(start) {
            return Poll::Ready(Sniffed::Http1);
        }
    })
    .await
}

/// How long an HTTP/1 connection waits for its next request, after a response, before
/// its hyper connection is taken apart and hyper's buffers go (see "Giving hyper's
/// buffers back").
const RELEASE_IDLE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

type Service<S> = Counted<hyper_util::service::TowerToHyperService<S>>;

/// Serve one connection, from its first byte to its close, watching the server's
/// shutdown state.
pub(super) async fn serve_connection<S, B>(stream: TcpStream, service: S, builders: Arc<Builders>, guard: ConnGuard)
where
    S: ServeService<B>,
    B: ServeBody,
{
    guard.register_task().await;
    let registry = Arc::clone(guard.registry());
    if builders.config.nodelay {
        let _ = stream.set_nodelay(true);
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    // Made before the first byte is read: the header-read timeout counts from here, the
    // connection's start, through the protocol sniff and the first request's head.
    let activity = Arc::new(Activity::new());
    let mut start = Vec::new();
    let sniffed = wait_for_head(&stream, &mut start, &builders, &registry, &activity, fd, true).await;
    let service =
        Counted { inner: hyper_util::service::TowerToHyperService::new(service), activity: Arc::clone(&activity) };
    let timeout = builders.config.header_read_timeout;
    // HTTP/2: the first request must start within the timeout of the connection's start
    // (a client that sends the preface and then nothing holds no socket for long); after
    // that an idle HTTP/2 connection is a normal thing for a client to keep.
    let http2_watch = || timeout.map(|t| HeaderWatch::first_request(t, Arc::clone(&activity)));
    let http1_drain = || Http1Drain { fd, activity: Arc::clone(&activity) };
    let http1_watch = || timeout.map(|t| HeaderWatch::new(t, Arc::clone(&activity)));
    match sniffed {
        Some(Sniffed::Http1) if builders.config.http1 => {
            // Boxed, as every stage that holds hyper's connection: see `serve_http1`.
            Box::pin(serve_http1(stream, start, service, &builders, &registry, &activity, fd)).await;
        }
        Some(Sniffed::Http2) if builders.config.http2 => {
            let io = Io::with_prefix(stream, start, Arc::clone(&activity));
            let conn = builders.http2.serve_connection(io, service);
            Box::pin(drive_owned(&registry, conn, None, http2_watch(), |c| c.graceful_shutdown())).await;
        }
        Some(Sniffed::Http2) => {
            // An HTTP/1-only server: hyper's HTTP/1 side closes on the preface.
            let io = Io::with_prefix(stream, start, Arc::clone(&activity));
            let conn = builders.http1.serve_connection(io, service);
            Box::pin(drive_owned(&registry, conn, Some(http1_drain()), http1_watch(), |c| c.graceful_shutdown())).await;
        }
        Some(Sniffed::Http1) => {
            let io = Io::with_prefix(stream, start, Arc::clone(&activity));
            let conn = builders.http2.serve_connection(io, service);
            Box::pin(drive_owned(&registry, conn, None, http2_watch(), |c| c.graceful_shutdown())).await;
        }
        Some(Sniffed::Gone) | None => {}
    }
    drop(guard);
}

/// Wait for a request head (or, if `sniff_h2`, the HTTP/2 preface) in `start`, as
/// [`read_start`] reads it, within the header-read timeout of the connection going idle
/// (its start, or its last response's end). `None`: the timeout passed, or a graceful
/// shutdown found nothing of it arrived.
async fn wait_for_head(
    stream: &TcpStream,
    start: &mut Vec<u8>,
    builders: &Builders,
    registry: &Registry,
    activity: &Activity,
    fd: std::os::fd::RawFd,
    sniff_h2: bool,
) -> Option<Sniffed> {
    let got = AtomicUsize::new(start.len());
    let read = std::pin::pin!(read_start(stream, start, &got, sniff_h2));
    // At a graceful shutdown, a connection that has sent nothing closes now; one whose
    // first bytes have arrived goes on to be answered.
    let read = unless_shutdown(registry, read, || got.load(Relaxed) == 0 && !has_unread_bytes(fd));
    match builders.config.header_read_timeout {
        Some(t) => {
            let at = crate::time::deadline_after(activity.idle_since(), t);
            crate::time::timeout_at(at.into(), read).await.ok().flatten()
        }
        None => read.await,
    }
}

/// Serve an HTTP/1 connection whose first request head is in `start`: hyper's connection
/// while requests come, taken apart whenever the connection stays idle for
/// [`RELEASE_IDLE_AFTER`] between requests, and made again when the next head has come.
///
/// # Giving hyper's buffers back
/// hyper's HTTP/1 connection keeps its read buffer (8 KiB) and its buffer for response
/// heads (8 KiB) for the connection's life, so a kept-alive connection that waits for its
/// next request would hold 16 KiB it does not use. When one has waited
/// [`RELEASE_IDLE_AFTER`] after a response, hyper's connection is taken apart
/// (`into_parts`), which gives back the socket, the service and any bytes of the next
/// request hyper has read and not parsed, and frees the rest; the next head is read here,
/// as a new connection's is, and a new hyper connection takes over from it. (A busy
/// connection is never taken apart: its next request comes within the wait.)
///
/// That is done only where hyper is between requests, with nothing of its own to lose:
/// every response finished and flushed, and the last request without a body, so none of
/// it can still be on its way in. After a request with a body, the connection keeps
/// hyper's buffers until a request without one has been answered; with a response the
/// client is slow to read, until its last bytes are flushed.
async fn serve_http1<S, B>(
    mut stream: TcpStream,
    mut start: Vec<u8>,
    mut service: Service<S>,
    builders: &Builders,
    registry: &Registry,
    activity: &Arc<Activity>,
    fd: std::os::fd::RawFd,
) where
    S: ServeService<B>,
    B: ServeBody,
{
    loop {
        // Boxed: while hyper's connection lives, the task's own cell holds a pointer to
        // this stage, so that while it waits for a head it is small.
        let hyper_stage = Box::pin(http1_until_idle(stream, start, service, builders, registry, activity, fd));
        let Some(back) = hyper_stage.await else { return };
        (stream, service, start) = back;
        match wait_for_head(&stream, &mut start, builders, registry, activity, fd, false).await {
            Some(Sniffed::Http1) => {}
            _ => return,
        }
    }
}

/// One hyper connection over `stream`, whose unread bytes start with `start`: driven
/// until it ends (`None`) or has been idle long enough to be taken apart, and then
/// taken apart: the socket, the service, and the bytes hyper has read and not parsed
/// followed by those it never read.
async fn http1_until_idle<S, B>(
    stream: TcpStream,
    start: Vec<u8>,
    service: Service<S>,
    builders: &Builders,
    registry: &Registry,
    activity: &Arc<Activity>,
    fd: std::os::fd::RawFd,
) -> Option<(TcpStream, Service<S>, Vec<u8>)>
where
    S: ServeService<B>,
    B: ServeBody,
{
    let io = Io::with_prefix(stream, start, Arc::clone(activity));
    let mut conn = builders.http1.serve_connection(io, service).with_upgrades();
    // HTTP/1: every request head must arrive within the timeout of the connection going
    // idle.
    let watch = builders.config.header_read_timeout.map(|t| HeaderWatch::new(t, Arc::clone(activity)));
    let drain = Http1Drain { fd, activity: Arc::clone(activity) };
    let mut release = Release::new(Arc::clone(activity));
    let end =
        drive(registry, Pin::new(&mut conn), Some(drain), watch, Some(&mut release), |c| c.graceful_shutdown()).await;
    if end != Ended::Idle {
        return None;
    }
    // Upgraded connections end their future; this one is idle, so it is whole.
    let parts = conn.into_parts()?;
    let (stream, unread) = parts.io.into_parts();
    let mut start = Vec::with_capacity(parts.read_buf.len() + unread.len());
    start.extend_from_slice(&parts.read_buf);
    start.extend_from_slice(&unread);
    Some((stream, parts.service, start))
}

/// When an idle HTTP/1 connection's hyper connection may be taken apart (see "Giving
/// hyper's buffers back"): polled by [`drive`] after hyper's connection answers
/// `Pending`, and `Ready` once the connection has been idle for [`RELEASE_IDLE_AFTER`]
/// at a point where that loses nothing. One timer per period, as for the header-read
/// timeout ([`HeaderWatch`]), so a busy connection pays about nothing for it.
struct Release {
    activity: Arc<Activity>,
    /// Requests started before this hyper connection: nothing is released before it has
    /// taken its first.
    started_before: u64,
    watch: HeaderWatch,
    /// The connection was idle but not at a point to release, why, and how many requests
    /// had started then. A new request starts the wait over.
    held: Option<(Held, u64)>,
}

/// Why an idle connection was not released when its wait was over.
#[derive(Clone, Copy)]
enum Held {
    /// Its last request came with a body: look again once another request has started.
    Body,
    /// hyper's bytes were not all flushed (a client slow to read): released once they
    /// are. (The flush's own poll is where this is looked at: hyper flushes when the
    /// socket takes its bytes, and `drive` asks here after every poll of hyper's.)
    Flush,
}

impl Release {
    fn new(activity: Arc<Activity>) -> Release {
        let started_before = activity.started.load(Relaxed);
        let watch = HeaderWatch::new(RELEASE_IDLE_AFTER, Arc::clone(&activity));
        Release { activity, started_before, watch, held: None }
    }

    fn poll_idle(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let a = &self.activity;
        let started = a.started.load(Relaxed);
        if started == self.started_before {
            return Poll::Pending;
        }
        if let Some((why, n)) = self.held {
            if started == n {
                return match why {
                    Held::Flush if !a.unflushed.load(Relaxed) => Poll::Ready(()),
                    _ => Poll::Pending,
                };
            }
            self.held = None;
            self.watch = HeaderWatch::new(RELEASE_IDLE_AFTER, Arc::clone(a));
        }
        std::task::ready!(self.watch.poll_expired(cx));
        if a.last_had_body.load(Relaxed) {
            self.held = Some((Held::Body, started));
            return Poll::Pending;
        }
        if a.unflushed.load(Relaxed) {
            self.held = Some((Held::Flush, started));
            return Poll::Pending;
        }
        Poll::Ready(())
    }
}

/// How [`drive`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// hyper's connection finished, or was cut (the header-read timeout, a forced
    /// shutdown).
    Done,
    /// Idle for long enough to be taken apart (see [`Release`]).
    Idle,
}

/// [`drive`] for a connection that is never taken apart, which it owns. (Boxed by its
/// callers, so that the connection's future is not part of every connection task's
/// cell.)
async fn drive_owned<C, E>(
    registry: &Registry,
    conn: C,
    http1: Option<Http1Drain>,
    watch: Option<HeaderWatch>,
    graceful: impl Fn(Pin<&mut C>),
) where
    C: Future<Output = Result<(), E>>,
{
    drive(registry, std::pin::pin!(conn), http1, watch, None, graceful).await;
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
///
/// With `release` (an HTTP/1 connection), it ends `Idle` when the connection has waited
/// long enough for its next request to be taken apart (see [`Release`]), unless a
/// shutdown has begun.
async fn drive<C, E>(
    registry: &Registry,
    mut conn: Pin<&mut C>,
    http1: Option<Http1Drain>,
    mut watch: Option<HeaderWatch>,
    mut release: Option<&mut Release>,
    graceful: impl Fn(Pin<&mut C>),
) -> Ended
where
    C: Future<Output = Result<(), E>>,
{
    let mut asked = false;
    // Nothing is decided before hyper's first poll: until it reads them, the bytes the
    // first read took are in `Io`'s prefix, neither in the socket (where the check
    // for unread bytes looks) nor in hyper's buffer (which tells hyper a request has
    // begun), and a shutdown asked for then would close the connection on a request
    // that has wholly arrived.
    let mut polled = false;
    // At the signal: the number of requests started, if one more must start first.
    let mut wait_for_more: Option<Option<u64>> = None;
    std::future::poll_fn(|cx| loop {
        let state = registry.state();
        if state == FORCED {
            return Poll::Ready(Ended::Done);
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
            return Poll::Ready(Ended::Done);
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
                return Poll::Ready(Ended::Done);
            }
        }
        // Idle for long enough: hyper's connection can go (a shutdown leaves it to hyper).
        if let Some(release) = release.as_mut().filter(|_| state == RUNNING && polled) {
            if release.poll_idle(cx).is_ready() {
                return Poll::Ready(Ended::Idle);
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
