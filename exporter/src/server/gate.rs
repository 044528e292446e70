//! The HTTP server's connection limits: a cap on open connections and a time limit on
//! each connection's first request, so connections that never make one cannot pile up.
//!
//! # The rules
//! * A connection must make its first request (send a whole request header) within
//!   `handshake_timeout` of being accepted. One that sends nothing, stops partway, or
//!   sends only blank lines (which end no request) fails its next read when the time is
//!   up, and hyper closes it. Later requests on a kept-alive connection have the same
//!   time each, idle time before them included: that is hyper's header-read timeout,
//!   which the server sets to the same value.
//! * At most `max_connections` are open at once. A new connection over the cap closes
//!   the oldest one that has not made a request yet, to make room, so connections that
//!   never do cannot lock out a real client; when every open connection has made one,
//!   the new one is closed at once instead.
//! * A connection whose writes have waited `handshake_timeout` for the client to make
//!   room (a client that pipelines requests and never reads the answers) fails that
//!   write, and hyper closes it. A client that made a request is never closed to make
//!   room, so without this one that never reads would hold its place for good.
//!
//! The timers are Volt's: a connection is made and polled on the exporter's own runtime.

use std::collections::VecDeque;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The default cap on connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The default time a connection has to send a request header, and a client to make room
/// for an answer it has not read.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP server's connection cap and header timeout (see the crate doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once (at least 1).
    pub max_connections: usize,
    /// Time from accept to the end of the first request header. Each later request on a
    /// kept-alive connection has this long too, idle time before it included, and a
    /// client this long to make room for an answer it has not read.
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
    /// It made a request: it can no longer be closed to make room.
    proven: AtomicBool,
    /// The gate closed it to make room for a newer connection.
    evicted: AtomicBool,
    /// It still counts in `Gate::open` (cleared once, by eviction or drop).
    counted: AtomicBool,
    /// Woken on eviction, so a connection waiting in a read closes at once.
    waker: Mutex<Option<Waker>>,
}

/// Admits accepted connections under [`ConnectionLimits`].
pub(crate) struct Gate {
    limits: ConnectionLimits,
    open: AtomicUsize,
    /// Connections that have not made a request yet, oldest first (proven or closed ones
    /// are removed lazily).
    waiting: Mutex<VecDeque<Arc<Slot>>>,
}

impl Gate {
    pub(crate) fn new(limits: ConnectionLimits) -> Arc<Gate> {
        let limits = ConnectionLimits { max_connections: limits.max_connections.max(1), ..limits };
        Arc::new(Gate { limits, open: AtomicUsize::new(0), waiting: Mutex::new(VecDeque::new()) })
    }

    pub(crate) fn limits(&self) -> ConnectionLimits {
        self.limits
    }

    /// Take in a connection just accepted: `Some` to serve it, or `None` when the cap is
    /// reached by connections that have all made a request (drop it: that closes it).
    /// Called on a Volt runtime (the first-request timer).
    pub(crate) fn admit<IO>(self: &Arc<Gate>, io: IO) -> Option<Guarded<IO>> {
        let max = self.limits.max_connections;
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let settled = |s: &Slot| s.proven.load(SeqCst) || !s.counted.load(SeqCst);
        while waiting.front().is_some_and(|s| settled(s)) {
            waiting.pop_front();
        }
        if waiting.len() > 2 * max {
            waiting.retain(|s| !settled(s));
        }
        if self.open.load(SeqCst) >= max {
            // Make room by closing the oldest connection that has not made a request.
            let mut room = false;
            while let Some(old) = waiting.pop_front() {
                if old.proven.load(SeqCst) || !old.counted.swap(false, SeqCst) {
                    continue;
                }
                self.open.fetch_sub(1, SeqCst);
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
        self.open.fetch_add(1, SeqCst);
        waiting.push_back(Arc::clone(&slot));
        drop(waiting);
        let limit = self.limits.handshake_timeout;
        Some(Guarded {
            io,
            gate: Arc::clone(self),
            slot,
            first_request: Some(Box::pin(volt::time::sleep(limit))),
            stalled: None,
            limit,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    pub(crate) fn open_connections(&self) -> usize {
        self.open.load(SeqCst)
    }
}

/// A connection's standing with its [`Gate`], for the server's request handler: a request
/// proves the connection.
#[derive(Clone)]
pub(crate) struct Admission(Arc<Slot>);

impl Admission {
    /// The connection made a request: from now on the gate never closes it to make room.
    pub(crate) fn prove(&self) {
        self.0.proven.store(true, SeqCst);
    }
}

/// A connection admitted by a [`Gate`], as hyper's I/O: reads fail (so hyper closes it)
/// if its first request does not come in time or the gate closes it to make room, and
/// writes fail once they have waited too long for the client.
pub(crate) struct Guarded<IO> {
    io: IO,
    gate: Arc<Gate>,
    slot: Arc<Slot>,
    /// Until the first request: when its time runs out. (Boxed, as the timers below: a
    /// `Sleep` is not `Unpin`, and the connection moves.)
    first_request: Option<Pin<Box<volt::time::Sleep>>>,
    /// Since when writes have been waiting, as a timer that ends the wait.
    stalled: Option<Pin<Box<volt::time::Sleep>>>,
    limit: Duration,
}

impl<IO> Guarded<IO> {
    pub(crate) fn get_ref(&self) -> &IO {
        &self.io
    }

    /// This connection's standing with its gate, for the request handler.
    pub(crate) fn admission(&self) -> Admission {
        Admission(Arc::clone(&self.slot))
    }

    /// Before a read: the error that ends a connection which had no request in time or
    /// was closed to make room, if it is one.
    fn check_read(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let deadline = self.first_request.as_mut()?;
        if self.slot.evicted.load(SeqCst) {
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room: the connection cap was reached before this connection made a request",
            ));
        }
        if self.slot.proven.load(SeqCst) {
            self.first_request = None;
            return None;
        }
        *self.slot.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Some(io::Error::new(io::ErrorKind::TimedOut, "no request header within the handshake timeout"))
            }
            Poll::Pending => None,
        }
    }

    /// Pass a write's result on, starting the stall timer when it waits and failing it
    /// once the timer has run out; any progress stops the timer.
    fn watch_write<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(volt::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?} while an answer waited"),
            ))),
            Poll::Pending => Poll::Pending,
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

impl<IO: hyper::rt::Read + Unpin> hyper::rt::Read for Guarded<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.check_read(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: hyper::rt::Write + Unpin> hyper::rt::Write for Guarded<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.watch_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch_write(cx, r)
    }
}

/// Counts something to log, logging at most every 10 s.
#[derive(Default)]
pub(crate) struct EveryTenSeconds {
    count: u64,
    logged: Option<std::time::Instant>,
}

impl EveryTenSeconds {
    pub(crate) fn note(&mut self, log: impl FnOnce(u64)) {
        self.count += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            log(self.count);
            self.count = 0;
            self.logged = Some(std::time::Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over the cap, a new connection closes the oldest one that has not made a request
    /// (whose next read fails), and is itself refused once every open connection has
    /// made one; a closed connection frees its place, and an evicted one is counted once.
    #[test]
    fn the_cap_evicts_the_oldest_connection_without_a_request_then_refuses() {
        let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let gate = Gate::new(ConnectionLimits { max_connections: 2, handshake_timeout: Duration::from_secs(60) });
            let first = gate.admit(1).expect("room");
            let mut second = gate.admit(2).expect("room");
            first.admission().prove();
            let third = gate.admit(3).expect("room made by closing the second");
            assert_eq!(*third.get_ref(), 3);
            let waker = std::task::Waker::noop();
            let err = second.check_read(&mut Context::from_waker(waker)).expect("closed to make room");
            assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
            assert_eq!(gate.open_connections(), 2);
            drop(second);
            assert_eq!(gate.open_connections(), 2, "an evicted connection is counted once");
            third.admission().prove();
            assert!(gate.admit(4).is_none(), "refused: every open connection made a request");
            drop(first);
            assert!(gate.admit(5).is_some(), "a closed connection frees its place");
        });
    }

    /// A connection that makes no request fails its read once the time is up.
    #[test]
    fn a_connection_without_a_request_times_out() {
        let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let gate = Gate::new(ConnectionLimits { max_connections: 4, handshake_timeout: Duration::from_millis(50) });
            let mut silent = gate.admit(()).unwrap();
            let err = std::future::poll_fn(|cx| match silent.check_read(cx) {
                Some(e) => Poll::Ready(e),
                None => Poll::Pending,
            });
            let err = volt::time::timeout(Duration::from_secs(30), err).await.expect("no hang");
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        });
    }
}
