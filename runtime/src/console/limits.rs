//! Connection limits for the console's gRPC server: a connection cap and a handshake
//! timeout, so connections that never finish cannot pile up. (The exporter's HTTP server
//! keeps the same rules with a gate of its own, `volt-exporter`'s `server/gate.rs`.)
//!
//! # The rules
//! * A connection must finish its handshake within `handshake_timeout`: send the bytes
//!   up to its first blank line (`\r\n\r\n`). That is the end of an HTTP/1 request's
//!   header, and it comes 18 bytes into the HTTP/2 preface (`PRI * HTTP/2.0\r\n\r\nSM...`),
//!   so one rule covers gRPC and plain HTTP. A connection that sends nothing, or stops
//!   partway, is closed when the time is up.
//! * At most `max_connections` are open at once. A new connection over the cap closes
//!   the oldest one that has not yet *proven* itself, to make room, so connections that
//!   never do cannot lock out a real client; when every open connection has proven
//!   itself, the new one is closed at once instead.
//! * What proves a connection: for [`Gate::new`], finishing its handshake. For
//!   [`Gate::until_called`], a call that passed the server's checks
//!   ([`Admission::prove`]): on the console's gRPC server, where the token is checked
//!   per call, not per connection, a call with the token. Otherwise a peer
//!   without the token could send the HTTP/2 preface on every place under the cap, sit
//!   idle, and lock every client out.
//!
//! Once proven, a connection costs one branch per read; idle, proven connections stay
//! (a watching console is idle between updates), under the cap.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The console server's default: at most this many connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The default time a connection has to send its request header or HTTP/2 preface.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection cap and a handshake timeout (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once (at least 1).
    pub max_connections: usize,
    /// Time from accept to the end of the request header or HTTP/2 preface.
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits { max_connections: DEFAULT_MAX_CONNECTIONS, handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT }
    }
}

/// One connection's standing, shared between it and the gate.
#[derive(Default)]
struct Slot {
    /// Its handshake is done: the handshake timeout no longer applies.
    done: AtomicBool,
    /// It proved itself (see the module doc): it can no longer be closed to make room.
    proven: AtomicBool,
    /// The gate closed it to make room for a newer connection.
    evicted: AtomicBool,
    /// It still counts in `Gate::open` (cleared once, by eviction or drop).
    counted: AtomicBool,
    /// Woken on eviction, so a connection waiting in a read closes at once.
    waker: Mutex<Option<Waker>>,
}

struct GateInner {
    limits: ConnectionLimits,
    /// The handshake proves a connection (else a call does: `Admission::prove`).
    proven_by_handshake: bool,
    open: AtomicUsize,
    /// Connections not yet proven, oldest first (proven or closed ones are removed
    /// lazily).
    handshaking: Mutex<VecDeque<Arc<Slot>>>,
}

/// Admits accepted connections under [`ConnectionLimits`]. Cheap to clone.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

impl Gate {
    /// A gate with no connection open yet, where finishing the handshake proves a
    /// connection (one request header is a whole call).
    pub fn new(limits: ConnectionLimits) -> Gate {
        Gate::with(limits, true)
    }

    /// A gate where a connection proves itself only by a call that passed the server's
    /// checks ([`Admission::prove`], from the request's extensions): until then it may
    /// be closed to make room.
    pub fn until_called(limits: ConnectionLimits) -> Gate {
        Gate::with(limits, false)
    }

    fn with(limits: ConnectionLimits, proven_by_handshake: bool) -> Gate {
        let limits = ConnectionLimits { max_connections: limits.max_connections.max(1), ..limits };
        Gate {
            inner: Arc::new(GateInner {
                limits,
                proven_by_handshake,
                open: AtomicUsize::new(0),
                handshaking: Mutex::new(VecDeque::new()),
            }),
        }
    }

    /// Connections open now (for tests and metrics).
    pub fn open_connections(&self) -> usize {
        self.inner.open.load(SeqCst)
    }

    /// Take in a connection just accepted: `Some` to serve it, or `None` when the cap is
    /// reached by connections that have all proven themselves (see the module doc: the
    /// handshake for [`Gate::new`], a call for [`Gate::until_called`]; drop it: that
    /// closes it).
    /// Must be called from within a Tokio runtime with time enabled (the timeout's timer).
    pub fn admit<IO>(&self, io: IO) -> Option<Guarded<IO>> {
        let g = &self.inner;
        let mut queue = g.handshaking.lock().unwrap_or_else(|e| e.into_inner());
        while queue.front().is_some_and(|s| s.proven.load(SeqCst) || !s.counted.load(SeqCst)) {
            queue.pop_front();
        }
        if queue.len() > 2 * g.limits.max_connections {
            queue.retain(|s| !s.proven.load(SeqCst) && s.counted.load(SeqCst));
        }
        if g.open.load(SeqCst) >= g.limits.max_connections {
            // Make room by closing the oldest connection not yet proven.
            let mut room = false;
            while let Some(old) = queue.pop_front() {
                if old.proven.load(SeqCst) || !old.counted.swap(false, SeqCst) {
                    continue;
                }
                g.open.fetch_sub(1, SeqCst);
                old.evicted.store(true, SeqCst);
                if let Some(w) = old.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    w.wake();
                }
                room = true;
                break;
            }
            if !room {
                return None;
            }
        }
        let slot = Arc::new(Slot { counted: AtomicBool::new(true), ..Slot::default() });
        g.open.fetch_add(1, SeqCst);
        queue.push_back(Arc::clone(&slot));
        drop(queue);
        Some(Guarded {
            io,
            gate: Arc::clone(g),
            slot,
            deadline: Some(Box::pin(tokio::time::sleep(g.limits.handshake_timeout))),
            matched: 0,
            settled: false,
        })
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("limits", &self.inner.limits).field("open", &self.open_connections()).finish()
    }
}

/// A connection admitted by a [`Gate`]: reads fail (so the server closes it) if its
/// handshake does not finish in time or the gate closes it to make room.
pub struct Guarded<IO> {
    io: IO,
    gate: Arc<GateInner>,
    slot: Arc<Slot>,
    /// Proven (see the module doc): reads need no more checks.
    settled: bool,
    /// Until the handshake is done.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Bytes of `\r\n\r\n` matched so far, across reads.
    matched: u8,
}

impl<IO> Guarded<IO> {
    /// The connection inside.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// This connection's standing with its gate, for the server's call checks (a gRPC
    /// server finds it in each request's extensions: see [`GuardedInfo`]).
    pub fn admission(&self) -> Admission {
        Admission(Arc::clone(&self.slot))
    }

    /// Scan bytes just read for the end of the handshake.
    fn saw(&mut self, bytes: &[u8]) {
        const END: &[u8; 4] = b"\r\n\r\n";
        for &b in bytes {
            self.matched = if b == END[self.matched as usize] {
                self.matched + 1
            } else if b == b'\r' {
                1
            } else {
                0
            };
            if self.matched == 4 {
                self.deadline = None;
                self.slot.done.store(true, SeqCst);
                if self.gate.proven_by_handshake {
                    self.slot.proven.store(true, SeqCst);
                }
                return;
            }
        }
    }
}

impl<IO> Drop for Guarded<IO> {
    fn drop(&mut self) {
        if self.slot.counted.swap(false, SeqCst) {
            self.gate.open.fetch_sub(1, SeqCst);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.settled {
            if this.slot.evicted.load(SeqCst) {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "closed to make room: the connection cap was reached before this connection made a call",
                )));
            }
            if this.slot.proven.load(SeqCst) {
                this.settled = true;
            } else {
                *this.slot.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            }
        }
        if let Some(deadline) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request header or HTTP/2 preface within the handshake timeout",
                )));
            }
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.deadline.is_some() {
            if let Poll::Ready(Ok(())) = r {
                this.saw(&buf.filled()[before..]);
            }
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A connection's standing with its [`Gate`], for the server's call checks: a call that
/// passed them [proves](Admission::prove) the connection.
#[derive(Clone)]
pub struct Admission(Arc<Slot>);

impl Admission {
    /// The connection made a call that passed the server's checks: from now on the gate
    /// never closes it to make room.
    pub fn prove(&self) {
        self.0.proven.store(true, SeqCst);
    }

    /// Whether it has proven itself.
    pub fn is_proven(&self) -> bool {
        self.0.proven.load(SeqCst)
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").field("proven", &self.is_proven()).finish()
    }
}

/// A listener's connections, each admitted through a [`Gate`]: the console's accept
/// loop, as a stream that never ends and never yields an error.
///
/// An accept error (out of file descriptors) is followed by a 50 ms pause: the same
/// error comes back at once while a connection waits in the backlog, and retrying
/// without a pause would spin the server's thread. Accept errors and refused
/// connections are each logged at most every 10 s, with how many there were: to stderr,
/// or where [`Incoming::log_with`] says.
pub struct Incoming {
    listener: tokio::net::TcpListener,
    gate: Gate,
    /// Who is speaking in the log lines, e.g. "volt console on 127.0.0.1:6669".
    name: String,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    failed: EveryTenSeconds,
    refused: EveryTenSeconds,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

impl Incoming {
    /// Accept on `listener`, admitting each connection through `gate`; `name` begins
    /// each log line. Must be polled within a Tokio runtime with I/O and time enabled.
    pub fn new(listener: tokio::net::TcpListener, gate: Gate, name: impl Into<String>) -> Incoming {
        Incoming {
            listener,
            gate,
            name: name.into(),
            pause: None,
            failed: EveryTenSeconds::default(),
            refused: EveryTenSeconds::default(),
            log: Box::new(|line| eprintln!("{line}")),
        }
    }

    /// Send the log lines to `log` (a program's `tracing`, say) instead of stderr.
    pub fn log_with(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Incoming {
        self.log = Box::new(log);
        self
    }

    /// The next admitted connection.
    pub async fn next(&mut self) -> Guarded<tokio::net::TcpStream> {
        std::future::poll_fn(|cx| self.poll_admitted(cx)).await
    }

    fn poll_admitted(&mut self, cx: &mut Context<'_>) -> Poll<Guarded<tokio::net::TcpStream>> {
        loop {
            if let Some(pause) = &mut self.pause {
                std::task::ready!(pause.as_mut().poll(cx));
                self.pause = None;
            }
            match std::task::ready!(self.listener.poll_accept(cx)) {
                Ok((tcp, _)) => match self.gate.admit(tcp) {
                    Some(io) => return Poll::Ready(io),
                    // Dropped, which closes it.
                    None => self.refused.note(|n| {
                        (self.log)(&format!(
                            "{}: refused {n} connection(s): {} are open, each a client that made a call",
                            self.name, self.gate.inner.limits.max_connections
                        ))
                    }),
                },
                Err(e) => {
                    self.failed.note(|n| {
                        (self.log)(&format!("{}: accepting a connection failed {n} time(s): {e}", self.name))
                    });
                    self.pause = Some(Box::pin(tokio::time::sleep(Duration::from_millis(50))));
                }
            }
        }
    }
}

impl tokio_stream::Stream for Incoming {
    type Item = io::Result<Guarded<tokio::net::TcpStream>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_admitted(cx).map(|io| Some(Ok(io)))
    }
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming").field("name", &self.name).field("gate", &self.gate).finish()
    }
}

/// Counts something to log, logging at most every 10 s.
#[derive(Default)]
struct EveryTenSeconds {
    count: u64,
    logged: Option<std::time::Instant>,
}

impl EveryTenSeconds {
    fn note(&mut self, log: impl FnOnce(u64)) {
        self.count += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            log(self.count);
            self.count = 0;
            self.logged = Some(std::time::Instant::now());
        }
    }
}

/// What tonic puts in each request's extensions for a [`Guarded`] TCP connection: the
/// peer's addresses and the connection's [`Admission`].
#[derive(Clone, Debug)]
pub struct GuardedInfo {
    /// The TCP addresses (what `Request::remote_addr` would read for a plain stream).
    pub tcp: tonic::transport::server::TcpConnectInfo,
    /// The connection's standing with its gate.
    pub admission: Admission,
}

impl tonic::transport::server::Connected for Guarded<tokio::net::TcpStream> {
    type ConnectInfo = GuardedInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        GuardedInfo { tcp: self.io.connect_info(), admission: self.admission() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// The end of the handshake is found across reads; a connection over the cap closes
    /// the oldest one still in its handshake, and is itself refused once every open
    /// connection has finished; a closed connection frees its place.
    #[test]
    fn the_cap_evicts_the_oldest_unfinished_connection_then_refuses() {
        rt().block_on(async {
            let gate = Gate::new(ConnectionLimits { max_connections: 2, handshake_timeout: Duration::from_secs(60) });
            let (mut c1, s1) = tokio::io::duplex(256);
            let (_c2, s2) = tokio::io::duplex(256);
            let mut g1 = gate.admit(s1).expect("room");
            let mut g2 = gate.admit(s2).expect("room");
            // The blank line split across two reads still ends the handshake.
            let mut buf = [0u8; 64];
            c1.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r").await.unwrap();
            let _ = g1.read(&mut buf).await.unwrap();
            assert!(!g1.slot.done.load(SeqCst));
            c1.write_all(b"\n").await.unwrap();
            let _ = g1.read(&mut buf).await.unwrap();
            assert!(g1.slot.done.load(SeqCst), "the handshake is over");
            // Full: the third evicts the second (still in its handshake), whose read fails.
            let (_c3, s3) = tokio::io::duplex(256);
            let g3 = gate.admit(s3).expect("room made by eviction");
            let err = g2.read(&mut buf).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
            assert_eq!(gate.open_connections(), 2);
            drop(g2);
            assert_eq!(gate.open_connections(), 2, "an evicted connection is counted once");
            // Finish the third: now every open connection is done, and a fourth is refused.
            let (mut c3b, s3b) = tokio::io::duplex(256);
            drop(g3);
            let mut g3 = gate.admit(s3b).expect("the dropped one freed its place");
            c3b.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
            let _ = g3.read(&mut buf).await.unwrap();
            let (_c4, s4) = tokio::io::duplex(256);
            assert!(gate.admit(s4).is_none(), "refused: no connection in its handshake to close");
            drop(g1);
            let (_c5, s5) = tokio::io::duplex(256);
            assert!(gate.admit(s5).is_some(), "a closed connection frees its place");
        });
    }

    /// A connection that sends nothing fails its read once the handshake timeout passes.
    #[test]
    fn a_silent_connection_times_out() {
        rt().block_on(async {
            let gate = Gate::new(ConnectionLimits { max_connections: 4, handshake_timeout: Duration::from_millis(50) });
            let (_c, s) = tokio::io::duplex(64);
            let mut g = gate.admit(s).unwrap();
            let mut buf = [0u8; 8];
            let r = tokio::time::timeout(Duration::from_secs(30), g.read(&mut buf)).await.expect("no hang");
            assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        });
    }
}
