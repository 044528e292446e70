//! What a connection's requests tell its task (the request counts that graceful shutdown
//! and the header-read timeout read) and the header-read watch itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// hyper's view of a connection's service: it counts the requests it is handed and
/// marks each one finished when its response body is dropped (sent in full, or the
/// connection gone).
pub(super) struct Counted<S> {
    pub(super) inner: S,
    pub(super) activity: Arc<Activity>,
}

impl<S, RB, B> hyper::service::Service<http::Request<RB>> for Counted<S>
where
    S: hyper::service::Service<http::Request<RB>, Response = http::Response<B>>,
    RB: hyper::body::Body,
{
    type Response = http::Response<Tracked<B>>;
    type Error = S::Error;
    type Future = Track<S::Future>;

    fn call(&self, req: http::Request<RB>) -> Track<S::Future> {
        // Stored before the count, which is what a reader looks at first.
        self.activity.last_had_body.store(!req.body().is_end_stream(), Relaxed);
        self.activity.started.fetch_add(1, Relaxed);
        Track { future: self.inner.call(req), finish: Finish(Some(Arc::clone(&self.activity))) }
    }
}

/// What a connection's requests tell its task: how many started and finished, and when
/// the last one finished. An HTTP/2 stream's response may finish on another task, so the
/// counts are atomic; on HTTP/1 one task does all of it.
#[derive(Debug)]
pub(super) struct Activity {
    pub(super) started: AtomicU64,
    finished: AtomicU64,
    /// Whether the last request started came with a body (HTTP/1: hyper may still be
    /// reading it when its response has finished).
    pub(super) last_had_body: AtomicBool,
    /// Set by the connection's `Io` when hyper writes, cleared when a flush completes:
    /// whether bytes hyper has written may still sit in its buffers.
    pub(super) unflushed: AtomicBool,
    /// When the last response finished, in nanoseconds after `base`.
    last_finished_ns: AtomicU64,
    base: Instant,
}

impl Activity {
    pub(super) fn new() -> Activity {
        Activity {
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            last_had_body: AtomicBool::new(false),
            unflushed: AtomicBool::new(false),
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
    pub(super) fn idle_since(&self) -> Instant {
        self.base + Duration::from_nanos(self.last_finished_ns.load(Relaxed))
    }

    /// A request has started and its response has not finished.
    pub(super) fn in_flight(&self) -> bool {
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
    pub(super) struct Track<F> {
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
    pub(super) struct Tracked<B> {
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
/// timeout; otherwise the timer is set again for one timeout after the last response.
/// If it rings while a request is being answered, no head is awaited until that request
/// finishes, so no timer is set: the watch waits for the finish instead, which it sees on
/// the connection task's next poll (on HTTP/1 a request finishes inside the connection's
/// own poll, when hyper drops its response body or future, and `drive` polls the watch
/// right after), and then sets the timer for one timeout after that finish. A busy
/// connection thus costs at most one timer every `timeout` plus one per request still
/// running when its timer rang, and each request only two counter updates and a clock
/// read.
///
/// So the watch never wakes its task over and over, whatever the timeout, zero included:
/// a timer already due when set (a zero timeout's always is) makes the next poll either
/// cut the idle connection or find a request in flight and set no timer.
pub(super) struct HeaderWatch {
    timeout: Duration,
    /// Watch only until the first request starts (HTTP/2).
    first_only: bool,
    activity: Arc<Activity>,
    alarm: Arc<Alarm>,
    /// Boxed: an armed `Sleep` holds its place in the timing wheel and must not move.
    sleep: Option<Pin<Box<crate::time::Sleep>>>,
    /// The timer rang while a request was in flight: no timer is set until it finishes.
    awaiting_finish: bool,
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
    pub(super) fn new(timeout: Duration, activity: Arc<Activity>) -> HeaderWatch {
        let alarm = Arc::new(Alarm { rang: Default::default(), task: Mutex::new(None) });
        HeaderWatch { timeout, first_only: false, activity, alarm, sleep: None, awaiting_finish: false }
    }

    /// A watch that cuts the connection if its first request has not started within
    /// `timeout` of the connection's start, and ends there (an HTTP/2 connection's).
    pub(super) fn first_request(timeout: Duration, activity: Arc<Activity>) -> HeaderWatch {
        HeaderWatch { first_only: true, ..HeaderWatch::new(timeout, activity) }
    }

    /// `Ready` when the connection has waited longer than the timeout for a request head.
    pub(super) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.first_only && self.activity.started.load(Relaxed) > 0 {
            // Its work is done: the timer goes with the sleep.
            self.sleep = None;
            return Poll::Pending;
        }
        if self.awaiting_finish {
            if self.activity.in_flight() {
                return Poll::Pending;
            }
            // The request has finished: the head of the next one is awaited from then.
            self.awaiting_finish = false;
        } else if self.sleep.is_some() {
            if !self.alarm.rang.load(Acquire) {
                return Poll::Pending;
            }
            self.alarm.rang.store(false, Relaxed);
            if self.activity.in_flight() {
                // A request is being answered: no head is awaited until it is done, so
                // there is nothing to time until then. (Setting the timer again from now
                // would ring at once with a zero timeout, and keep the task spinning
                // while the handler runs.)
                self.sleep = None;
                self.awaiting_finish = true;
                return Poll::Pending;
            }
            let idle_since = self.activity.idle_since();
            if Instant::now().saturating_duration_since(idle_since) >= self.timeout {
                return Poll::Ready(());
            }
        } else if self.activity.in_flight() {
            // The first look, with a request already started: nothing to time yet.
            self.awaiting_finish = true;
            return Poll::Pending;
        }
        let at = crate::time::deadline_after(self.activity.idle_since(), self.timeout);
        // The connection's future is its task's own (spawned by `run`), so this waker
        // stays the task's for the connection's life; it is set again at each arming.
        *self.alarm.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        let Some(driver) = crate::driver::Handle::current() else { return Poll::Pending };
        // A sleep kept from the last arming is moved, not allocated again.
        let sleep = match &mut self.sleep {
            Some(s) => {
                s.as_mut().reset(at.into());
                s
            }
            None => self.sleep.insert(Box::pin(crate::time::Sleep::new_in(driver, at))),
        };
        let waker = Waker::from(Arc::clone(&self.alarm));
        if sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
            // Already due: look again on the next poll.
            self.alarm.rang.store(true, Release);
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
