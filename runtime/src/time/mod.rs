//! Timers driven by the runtime: [`sleep`], [`sleep_until`], [`timeout`], [`interval`].
//!
//! Timers live in one hierarchical timing wheel per runtime (`wheel.rs`, 1 ms resolution),
//! under a mutex that is only held for O(1) operations. A `Sleep` is armed on its first
//! poll (a sleep created and dropped unpolled costs nothing) and unlinked when dropped.
//!
//! # Who fires timers
//! The worker holding the driver (see `reactor::Driver`): a running worker checks at the start
//! of each budget tick (one atomic load when nothing is due), and the worker parked in
//! the reactor sleeps no longer than the next deadline.
//!
//! # Waking the reactor for an earlier timer
//! The worker about to park in the reactor stores `reactor_sleep_until = MAX` ("wake me for
//! anything"), *then* reads `next_deadline` and stores the tick it will wake at. Arming a
//! timer does `next_deadline.fetch_min(tick)` *then* reads `reactor_sleep_until`, and wakes
//! the reactor if its tick is earlier. All SeqCst: either the parker reads the new
//! deadline, or the armer sees the parker's store and wakes it. After the park,
//! `reactor_sleep_until` goes back to 0 ("nobody is sleeping in the reactor"), so arming a
//! timer while workers are busy costs no system call.
//!
//! # "Never"
//! `Duration::MAX` (and any duration or deadline past what `Instant` can hold) is the usual
//! way to write "no timeout", so nothing here adds durations unchecked: a deadline that
//! overflows saturates to [`FAR_FUTURE`] from now, a tick past `u64` saturates, and the
//! wheel keeps a deadline beyond its span filed at the top level until it is truly due
//! (it never fires early). Such a sleep stays pending, costs one wheel entry, and is
//! dropped like any other; or it completes when the runtime shuts down, when every timer
//! fires (nothing would fire it afterwards).

mod wheel;

use crate::runtime::handle::Shared;
use crate::task::wait;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use std::time::Instant;

pub(crate) use wheel::{TimerKey, Wheel};

/// Errors from the time API.
pub mod error {
    use std::fmt;

    /// [`timeout`](super::timeout) elapsed before the future completed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Elapsed(pub(super) ());

    impl fmt::Display for Elapsed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("deadline has elapsed")
        }
    }

    impl std::error::Error for Elapsed {}

    impl From<Elapsed> for std::io::Error {
        fn from(_: Elapsed) -> std::io::Error {
            std::io::ErrorKind::TimedOut.into()
        }
    }
}

/// How far ahead a saturated deadline lies: later than any program waits for (about a
/// century), and small enough that `Instant` holds it on every platform Volt runs on.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `now + d`, saturating: a sum `Instant` cannot hold means "never", which is
/// [`FAR_FUTURE`] from now (or the furthest fraction of it that fits).
pub(crate) fn deadline_after(now: Instant, d: Duration) -> Instant {
    if let Some(at) = now.checked_add(d) {
        return at;
    }
    let mut far = FAR_FUTURE.min(d);
    loop {
        if let Some(at) = now.checked_add(far) {
            return at;
        }
        far /= 2;
    }
}

/// The largest deadline tick: `u64::MAX` itself means "no deadline" in `next_deadline`.
const MAX_TICK: u64 = u64::MAX - 1;

/// The runtime's timer state.
pub(crate) struct TimeDriver {
    start: Instant,
    pub(crate) wheel: Mutex<Wheel>,
    /// The earliest pending deadline (ms tick), `u64::MAX` if none; may be stale-early.
    next_deadline: AtomicU64,
    /// See the module doc: 0 = nobody sleeps in the reactor, MAX = sleeping, no timeout.
    reactor_sleep_until: AtomicU64,
    /// The runtime shut down: nothing fires timers any more (see [`TimeDriver::shutdown`]).
    shut_down: AtomicBool,
}

impl TimeDriver {
    pub(crate) fn new() -> TimeDriver {
        TimeDriver {
            start: Instant::now(),
            wheel: Mutex::new(Wheel::new()),
            next_deadline: AtomicU64::new(u64::MAX),
            reactor_sleep_until: AtomicU64::new(0),
            shut_down: AtomicBool::new(false),
        }
    }

    /// Runtime shutdown: the workers are gone, so no timer would fire again. Every pending
    /// one fires now, and a sleep polled from here on completes at once: a task or a
    /// thread still waiting on one (a blocking task driving a sleep with another
    /// executor, say, which the shutdown then joins) ends its wait instead of waiting for
    /// good. Returns the wakers to wake (outside the lock) and how many timers fired.
    pub(crate) fn shutdown(&self) -> (Vec<Waker>, u64) {
        self.shut_down.store(true, SeqCst);
        let mut fired = Vec::new();
        let count = self.lock().fire_all(&mut fired);
        self.next_deadline.store(u64::MAX, SeqCst);
        (fired, count as u64)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Wheel> {
        self.wheel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whole ms since start, rounded down: a timer fires at the first tick at or after its
    /// deadline tick.
    fn now_tick(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_millis() as u64
    }

    /// A deadline in ms ticks, rounded up so a sleep never ends early; saturates at
    /// [`MAX_TICK`] (about 580 million years).
    fn deadline_tick(&self, deadline: Instant) -> u64 {
        let d = deadline.saturating_duration_since(self.start);
        let Ok(ms) = u64::try_from(d.as_millis()) else { return MAX_TICK };
        let ms = if d > Duration::from_millis(ms) { ms.saturating_add(1) } else { ms };
        ms.min(MAX_TICK)
    }

    /// Whether a timer may be due (one atomic load).
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        self.next_deadline.load(Relaxed) <= self.now_tick(now)
    }

    /// Fire every due timer; wakers go to `fired` to be woken outside the lock.
    pub(crate) fn process(&self, now: Instant, fired: &mut Vec<Waker>) -> usize {
        let mut wheel = self.lock();
        let n = wheel.poll(self.now_tick(now), fired);
        self.next_deadline.store(wheel.next_deadline().unwrap_or(u64::MAX), SeqCst);
        n
    }

    /// Before parking in the reactor: how long to sleep (None: until woken).
    pub(crate) fn begin_reactor_sleep(&self, now: Instant) -> Option<Duration> {
        self.reactor_sleep_until.store(u64::MAX, SeqCst);
        let next = self.next_deadline.load(SeqCst);
        if next == u64::MAX {
            return None;
        }
        self.reactor_sleep_until.store(next, SeqCst);
        // A tick beyond what `Instant` holds is a timer that never fires: sleep until woken.
        let at = self.start.checked_add(Duration::from_millis(next))?;
        Some(at.saturating_duration_since(now))
    }

    pub(crate) fn end_reactor_sleep(&self) {
        self.reactor_sleep_until.store(0, SeqCst);
    }
}

/// A future that completes at a deadline. See [`sleep`].
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    shared: Arc<Shared>,
    key: Option<TimerKey>,
    fired: bool,
    /// What a pending poll records as the task's wait (`task::wait`): a sleep, or the
    /// timer of a timeout or an interval.
    kind: u8,
}

/// Wait until `duration` has passed. A duration too large for `Instant` (such as
/// `Duration::MAX`) means "never": the sleep stays pending until dropped, or until its
/// runtime shuts down (then every sleep completes: nothing would fire it any more).
///
/// # Panics
/// Outside a Volt runtime (a task, `block_on`, or a blocking-pool thread).
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(deadline_after(Instant::now(), duration))
}

/// Wait until `deadline`. Any deadline is accepted: one decades away simply stays pending.
///
/// # Panics
/// Outside a Volt runtime.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let shared = crate::runtime::context::current_handle()
        .expect("volt::time::sleep called outside a Volt runtime: call it from a task or inside `Runtime::block_on`");
    Sleep { deadline, shared, key: None, fired: false, kind: wait::W_SLEEP }
}

impl Sleep {
    /// A sleep on `shared`'s timers, from any thread.
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn new_in(shared: Arc<Shared>, deadline: Instant) -> Sleep {
        Sleep { deadline, shared, key: None, fired: false, kind: wait::W_SLEEP }
    }

    /// When this sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached.
    pub fn is_elapsed(&self) -> bool {
        self.fired || Instant::now() >= self.deadline
    }

    /// Move the deadline. A sleep that was waiting keeps the waker of its last poll: it
    /// wakes that task at the new deadline (or at once if that has passed), so a task
    /// may reset a sleep and wait without polling it again, as with Tokio's.
    pub fn reset(&mut self, deadline: Instant) {
        let waker = self.disarm();
        self.deadline = deadline;
        self.fired = false;
        if let Some(w) = waker {
            if !self.arm(&w) {
                // Due already (or the timers have shut down): the next poll completes.
                w.wake();
            }
        }
    }

    /// Take the timer out of the wheel; the waker of one that had not fired yet, to be
    /// dropped (or used) outside the wheel's lock.
    fn disarm(&mut self) -> Option<Waker> {
        let key = self.key.take()?;
        let (waker, cancelled) = self.shared.driver.time.lock().remove(key);
        if cancelled {
            self.shared.on_timer_cancelled();
            waker
        } else {
            drop(waker);
            None
        }
    }

    /// Put `waker` in the wheel for this sleep's deadline. `false`: not armed, because
    /// the deadline has passed or the timers have shut down (so the sleep is due).
    fn arm(&mut self, waker: &Waker) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        let time = &self.shared.driver.time;
        let tick = time.deadline_tick(self.deadline);
        let key = {
            let mut wheel = time.lock();
            // Under the wheel's lock: `shutdown` sets the flag and then fires what is
            // armed under this lock, so a timer is either armed before that (and fired
            // by it) or sees the flag here and is not armed. (A clone the wheel turns
            // down is dropped under the lock: never the waker's last reference, which
            // the caller holds.)
            if time.shut_down.load(SeqCst) {
                None
            } else {
                wheel.insert(tick, waker.clone())
            }
        };
        let Some(key) = key else { return false };
        self.key = Some(key);
        self.shared.on_timer_armed();
        time.next_deadline.fetch_min(tick, SeqCst);
        if tick < time.reactor_sleep_until.load(SeqCst) {
            self.shared.driver.wake_reactor();
        }
        true
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A task that spent its poll's budget yields here (see `task::coop`): a loop
        // over a sleep that has elapsed would otherwise never give its worker back.
        std::task::ready!(crate::task::coop::poll_proceed(cx));
        let r = self.poll_timer(cx);
        if r.is_pending() {
            wait::record_deadline(self.kind, self.deadline);
        } else {
            crate::task::coop::spend();
        }
        r
    }
}

impl Sleep {
    /// Poll the timer without recording the task's wait.
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let this = self;
        if this.fired {
            return Poll::Ready(());
        }
        let time = &this.shared.driver.time;
        match this.key {
            None => {
                if this.arm(cx.waker()) {
                    Poll::Pending
                } else {
                    this.fired = true;
                    Poll::Ready(())
                }
            }
            Some(key) => {
                let mut wheel = time.lock();
                if wheel.is_fired(key) {
                    let (w, _) = wheel.remove(key);
                    drop(wheel);
                    drop(w);
                    this.key = None;
                    this.fired = true;
                    return Poll::Ready(());
                }
                let old = wheel.set_waker(key, cx.waker());
                drop(wheel);
                drop(old);
                Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        drop(self.disarm());
    }
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep").field("deadline", &self.deadline).field("armed", &self.key.is_some()).finish()
    }
}

/// Run `future` for at most `duration`: `Err(Elapsed)` if the time runs out first (the
/// future is then dropped with the `Timeout`). `Duration::MAX` means no time limit.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout { future, sleep: sleep(duration) }
}

/// The future returned by [`timeout`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, error::Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned (never moved out of the pinned
        // `Timeout`); `sleep` is `Unpin`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        // The timeout is the task's wait unless the future named a closer one (a read,
        // a join) in this poll.
        let mark = wait::Mark::now();
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.sleep.poll_timer(cx) {
            Poll::Ready(()) => Poll::Ready(Err(error::Elapsed(()))),
            Poll::Pending => {
                if mark.unchanged() {
                    wait::record_deadline(wait::W_TIMEOUT, this.sleep.deadline);
                }
                Poll::Pending
            }
        }
    }
}

/// Ticks every `period`; the first tick completes at once. A late tick is followed by
/// the missed ones back to back ("burst"), so the ticks keep to the original schedule.
/// A period too large for `Instant` (such as `Duration::MAX`) ticks once, then never.
///
/// # Panics
/// If `period` is zero, or outside a Volt runtime.
pub fn interval(period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "volt::time::interval: the period must be non-zero");
    let mut sleep = sleep_until(Instant::now());
    sleep.kind = wait::W_INTERVAL;
    Interval { sleep, period }
}

/// See [`interval`].
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: Duration,
}

impl Interval {
    /// Wait for the next tick; returns its scheduled time.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Poll for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        match Pin::new(&mut self.sleep).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let at = self.sleep.deadline();
                self.sleep.reset(deadline_after(at, self.period));
                Poll::Ready(at)
            }
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}
