//! Timers driven by the runtime, with Tokio's API: [`sleep`], [`sleep_until`],
//! [`timeout`], [`timeout_at`], [`interval`], [`interval_at`], and the runtime's
//! [`Instant`]. With the `test-util` feature, a test may stop the clock (`pause`),
//! move it by hand (`advance`) and let it run again (`resume`); while it is paused
//! and the runtime has nothing to do, the time jumps to the next timer (see `clock.rs`).
//!
//! ```
//! use std::time::Duration;
//! use volt::time::{interval, sleep, timeout, Instant};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let start = Instant::now();
//!     sleep(Duration::from_millis(20)).await;
//!     assert!(start.elapsed() >= Duration::from_millis(20)); // never early
//!
//!     // `timeout` gives up on a future that takes too long, and drops it.
//!     let late = timeout(Duration::from_millis(10), sleep(Duration::from_secs(60))).await;
//!     assert!(late.is_err());
//!     assert_eq!(timeout(Duration::from_secs(1), async { 7 }).await, Ok(7));
//!
//!     // An interval's first tick completes at once, the next ones a period apart.
//!     let mut every = interval(Duration::from_millis(5));
//!     for _ in 0..3 {
//!         every.tick().await;
//!     }
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
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
//! overflows saturates to `FAR_FUTURE` from now, a tick past `u64` saturates, and the
//! wheel keeps a deadline beyond its span filed at the top level until it is truly due
//! (it never fires early). Such a sleep stays pending, costs one wheel entry, and is
//! dropped like any other; or it completes when the runtime shuts down, when every timer
//! fires (nothing would fire it afterwards).

pub(crate) mod clock;
mod instant;
mod interval;
mod wheel;

pub use instant::Instant;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
/// std's `Duration`, re-exported here as Tokio's `time` module does.
#[doc(no_inline)]
pub use std::time::Duration;

use crate::scheduler::handle::Handle;
use crate::task::wait;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

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

    /// A timer that could not be set, as Tokio names the cases. Volt's timers report
    /// none of them (a sleep outside a runtime panics, the wheel has no capacity limit,
    /// and any duration is accepted), but code written against Tokio may name the type.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Error(Kind);

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Shutdown,
        AtCapacity,
        Invalid,
    }

    impl Error {
        /// The error for timers whose runtime has shut down.
        pub fn shutdown() -> Error {
            Error(Kind::Shutdown)
        }

        /// Whether the runtime's timers had shut down.
        pub fn is_shutdown(&self) -> bool {
            self.0 == Kind::Shutdown
        }

        /// The error for a timer refused because too many are set.
        pub fn at_capacity() -> Error {
            Error(Kind::AtCapacity)
        }

        /// Whether too many timers were set.
        pub fn is_at_capacity(&self) -> bool {
            self.0 == Kind::AtCapacity
        }

        /// The error for a timer whose duration is out of range.
        pub fn invalid() -> Error {
            Error(Kind::Invalid)
        }

        /// Whether the duration was out of range.
        pub fn is_invalid(&self) -> bool {
            self.0 == Kind::Invalid
        }
    }

    impl fmt::Display for Error {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self.0 {
                Kind::Shutdown => "the runtime's timers have shut down",
                Kind::AtCapacity => "no room for another timer",
                Kind::Invalid => "the timer's duration is out of range",
            })
        }
    }

    impl std::error::Error for Error {}
}

/// How far ahead a saturated deadline lies: later than any program waits for (about a
/// century), and small enough that `Instant` holds it on every platform Volt runs on.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `now + d`, saturating: a sum `Instant` cannot hold means "never", which is
/// [`FAR_FUTURE`] from now (or the furthest fraction of it that fits).
pub(crate) fn deadline_after(now: std::time::Instant, d: Duration) -> std::time::Instant {
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

/// [`deadline_after`] on the runtime's [`Instant`].
fn instant_after(now: Instant, d: Duration) -> Instant {
    Instant::from_std(deadline_after(now.into_std(), d))
}

/// The runtime's timer state.
pub(crate) struct TimeDriver {
    /// Where the wheel's milliseconds count from (on the clock's time line).
    start: std::time::Instant,
    /// The runtime's clock (std's, unless a test paused it).
    pub(crate) clock: clock::Clock,
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
            start: std::time::Instant::now(),
            clock: clock::Clock::default(),
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
    fn now_tick(&self, now: std::time::Instant) -> u64 {
        now.saturating_duration_since(self.start).as_millis() as u64
    }

    /// A deadline in ms ticks, rounded up so a sleep never ends early; saturates at
    /// [`MAX_TICK`] (about 580 million years).
    fn deadline_tick(&self, deadline: std::time::Instant) -> u64 {
        let d = deadline.saturating_duration_since(self.start);
        let Ok(ms) = u64::try_from(d.as_millis()) else { return MAX_TICK };
        let ms = if d > Duration::from_millis(ms) { ms.saturating_add(1) } else { ms };
        ms.min(MAX_TICK)
    }

    /// Whether a timer may be due (one atomic load). `now` is std's time, read by the
    /// caller; a paused (or once paused) clock reads its own instead.
    pub(crate) fn is_due(&self, now: std::time::Instant) -> bool {
        self.next_deadline.load(Relaxed) <= self.now_tick(self.clock.now_or(|| now))
    }

    /// Fire every due timer; wakers go to `fired` to be woken outside the lock. `now` as
    /// for [`is_due`](Self::is_due).
    pub(crate) fn process(&self, now: std::time::Instant, fired: &mut Vec<Waker>) -> usize {
        let now = self.clock.now_or(|| now);
        let mut wheel = self.lock();
        let n = wheel.poll(self.now_tick(now), fired);
        self.next_deadline.store(wheel.next_deadline().unwrap_or(u64::MAX), SeqCst);
        n
    }

    /// Before parking in the reactor: how long to sleep (None: until woken).
    pub(crate) fn begin_reactor_sleep(&self, now: std::time::Instant) -> Option<Duration> {
        let now = self.clock.now_or(|| now);
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

    /// The clock's time now.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_std(self.clock.now())
    }

    /// `deadline` on std's time line, for the task's wait record (whose reader counts
    /// the time left against std's clock): the same distance from now as on the
    /// runtime's clock, which a test may have paused or moved.
    #[inline]
    fn deadline_for_record(&self, deadline: Instant) -> std::time::Instant {
        #[cfg(feature = "test-util")]
        if self.clock.is_altered() {
            let real = std::time::Instant::now();
            let now = self.clock.now();
            return match deadline.into_std().checked_duration_since(now) {
                Some(left) => deadline_after(real, left),
                None => real.checked_sub(now - deadline.into_std()).unwrap_or(real),
            };
        }
        deadline.into_std()
    }
}

#[cfg(feature = "test-util")]
impl TimeDriver {
    /// Pause the clock (see `clock::Clock::pause_aligned`).
    pub(crate) fn pause(&self) -> Result<(), &'static str> {
        self.clock.pause_aligned(self.start)
    }

    /// Auto-advance: called by the worker about to sleep in the reactor while the clock
    /// is paused. If `idle()` holds (checked, with the `block_on` callers, under the
    /// clock's lock), move the time to the next timer's slot and return `true`; the
    /// caller's dispatch then fires what is due.
    pub(crate) fn auto_advance(&self, idle: impl FnOnce() -> bool) -> bool {
        let mut st = self.clock.lock();
        if !st.paused || self.clock.outside_busy() != 0 {
            return false;
        }
        // From the wheel itself, not `next_deadline`, which a cancelled timer leaves
        // early: the time must never jump for a timer that no longer exists. (Lock order:
        // the clock, then the wheel; nothing takes them the other way round.)
        // The shared reading is refreshed from it too, under the wheel's lock as
        // `process` does (an arm's `fetch_min` comes after its insert, so none is lost):
        // a stale one would make the parking worker try again at once, and spin.
        let next = {
            let wheel = self.lock();
            let next = wheel.next_deadline();
            self.next_deadline.store(next.unwrap_or(u64::MAX), SeqCst);
            next
        };
        let Some(next) = next else { return false };
        if next <= self.now_tick(st.now()) {
            // A slot that has begun: the caller's dispatch must pass over the wheel
            // (firing what is due, re-filing the rest lower down) before the time moves.
            return true;
        }
        // A tick beyond what `Instant` holds never comes.
        let Some(at) = self.start.checked_add(Duration::from_millis(next)) else { return false };
        if !idle() {
            return false;
        }
        if st.base.is_none_or(|b| b < at) {
            st.base = Some(at);
        }
        true
    }

    /// Fire the timers due at the clock's time from this thread (after `advance`), and
    /// wake their tasks.
    pub(crate) fn fire_due(&self) {
        let mut fired = Vec::new();
        self.process(std::time::Instant::now(), &mut fired);
        let _source = wait::SourceGuard::new(wait::SRC_TIMER);
        for w in fired {
            w.wake();
        }
    }
}

/// Stop the current runtime's clock: from now on [`Instant::now`] returns the same time
/// until [`advance`] moves it, or until the runtime has nothing to do (every task waits,
/// nothing is queued, the blocking pool is idle, no `block_on` caller is busy) and a
/// timer is pending: then the time jumps to that timer's deadline ("auto-advance"), so a
/// test of a one-hour timeout takes no real hour. Real I/O still works meanwhile.
///
/// Unlike Tokio's, this works on the multi-thread runtime too: auto-advance waits for
/// every worker to be idle.
///
/// The paused time is first moved forward to a whole millisecond of the timer wheel (by
/// less than a millisecond), so a deadline a whole number of milliseconds away is reached
/// exactly by auto-advance.
///
/// # Panics
/// If the clock is already paused, or outside a Volt runtime.
#[cfg(feature = "test-util")]
#[track_caller]
pub fn pause() {
    let shared = crate::runtime::context::current_shared()
        .expect("volt::time::pause called outside a Volt runtime: time can only be frozen inside one");
    if let Err(e) = shared.driver.time.pause() {
        panic!("{e}");
    }
}

/// Let the current runtime's clock run again, at the real clock's pace, from the time it
/// shows (a paused clock that was advanced stays ahead of the real one).
///
/// # Panics
/// If the clock is not paused, or outside a Volt runtime.
#[cfg(feature = "test-util")]
#[track_caller]
pub fn resume() {
    let shared = crate::runtime::context::current_shared()
        .expect("volt::time::resume called outside a Volt runtime: time can only be frozen inside one");
    if let Err(e) = shared.driver.time.clock.resume() {
        panic!("{e}");
    }
}

/// Move the paused clock forward by `duration` in one jump: every timer whose deadline
/// is reached fires (their tasks are woken, in deadline order), then this yields once so
/// they may run. It does not wait for them to finish; to wait, `sleep` and let
/// auto-advance move the time.
///
/// # Panics
/// If the clock is not paused, or outside a Volt runtime.
#[cfg(feature = "test-util")]
pub async fn advance(duration: Duration) {
    let shared = crate::runtime::context::current_handle()
        .expect("volt::time::advance called outside a Volt runtime: time can only be frozen inside one");
    let time = &shared.driver.time;
    if let Err(e) = time.clock.advance(duration) {
        panic!("{e}");
    }
    time.fire_due();
    drop(shared);
    crate::task::yield_now().await;
}

/// A future that completes at a deadline. See [`sleep`].
///
/// `Sleep` is `Unpin`, so it can be polled and [`reset`](Sleep::reset) through
/// `Pin::new(&mut sleep)` as well as through a pinned box or `std::pin::pin!`.
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    shared: Arc<Handle>,
    key: Option<TimerKey>,
    fired: bool,
    /// What a pending poll records as the task's wait (`task::wait`): a sleep, or the
    /// timer of a timeout or an interval.
    kind: u8,
}

/// Wait until `duration` has passed on the runtime's clock. A duration too large for
/// `Instant` (such as `Duration::MAX`) means "never": the sleep stays pending until
/// dropped, or until its runtime shuts down (then every sleep completes: nothing would
/// fire it any more). The deadline has a resolution of one millisecond; the sleep never
/// ends before it.
///
/// # Panics
/// Outside a Volt runtime (a task, `block_on`, or a blocking-pool thread).
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    let shared = current_for("volt::time::sleep");
    let deadline = instant_after(shared.driver.time.now(), duration);
    Sleep::at(shared, deadline)
}

/// Wait until `deadline`. Any deadline is accepted: one decades away simply stays
/// pending, one already passed completes on the first poll.
///
/// # Panics
/// Outside a Volt runtime.
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::at(current_for("volt::time::sleep_until"), deadline)
}

#[track_caller]
fn current_for(what: &str) -> Arc<Handle> {
    match crate::runtime::context::current_handle() {
        Some(s) => s,
        None => panic!("{what} called outside a Volt runtime: call it from a task or inside `Runtime::block_on`"),
    }
}

impl Sleep {
    fn at(shared: Arc<Handle>, deadline: Instant) -> Sleep {
        Sleep { deadline, shared, key: None, fired: false, kind: wait::W_SLEEP }
    }

    /// A sleep on `shared`'s timers, from any thread (hyper's timer: std's `Instant`).
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn new_in(shared: Arc<Handle>, deadline: std::time::Instant) -> Sleep {
        Sleep::at(shared, Instant::from_std(deadline))
    }

    /// When this sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached (on the runtime's clock).
    pub fn is_elapsed(&self) -> bool {
        self.fired || self.shared.driver.time.now() >= self.deadline
    }

    /// Move the deadline, whether or not the sleep has completed. A sleep that was waiting
    /// keeps the waker of its last poll: it wakes that task at the new deadline (or at
    /// once if that has passed), so a task may reset a sleep and wait without polling it
    /// again, as with Tokio's.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        self.get_mut().reset_inner(deadline)
    }

    /// [`reset`](Self::reset) on an unpinned `&mut` (`Sleep` is `Unpin`).
    pub(crate) fn reset_inner(&mut self, deadline: Instant) {
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
            self.shared.metrics.on_timer_cancelled(self.shared.current_rec());
            waker
        } else {
            drop(waker);
            None
        }
    }

    /// Put `waker` in the wheel for this sleep's deadline. `false`: not armed, because
    /// the deadline has passed or the timers have shut down (so the sleep is due).
    fn arm(&mut self, waker: &Waker) -> bool {
        let time = &self.shared.driver.time;
        if time.now() >= self.deadline {
            return false;
        }
        let tick = time.deadline_tick(self.deadline.into_std());
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
        self.shared.metrics.on_timer_armed(self.shared.current_rec());
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
            wait::record_deadline(self.kind, self.shared.driver.time.deadline_for_record(self.deadline));
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
/// future is then dropped with the `Timeout`). The future is polled before the timer,
/// so one that is ready at once completes even with a zero duration. `Duration::MAX`
/// means no time limit.
///
/// # Panics
/// Outside a Volt runtime.
#[track_caller]
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    let shared = current_for("volt::time::timeout");
    let deadline = instant_after(shared.driver.time.now(), duration);
    Timeout::new(shared, deadline, future)
}

/// Run `future` until `deadline` at most: `Err(Elapsed)` if the deadline comes first.
/// The future is polled before the timer, so one that is ready at once completes even
/// past the deadline.
///
/// # Panics
/// Outside a Volt runtime.
#[track_caller]
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout::new(current_for("volt::time::timeout_at"), deadline, future)
}

/// The future returned by [`timeout`] and [`timeout_at`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<T> {
    value: T,
    sleep: Sleep,
}

impl<T> Timeout<T> {
    fn new(shared: Arc<Handle>, deadline: Instant, value: T) -> Timeout<T> {
        let mut sleep = Sleep::at(shared, deadline);
        sleep.kind = wait::W_TIMEOUT;
        Timeout { value, sleep }
    }

    /// The wrapped future.
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// The wrapped future, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The wrapped future, without its timeout.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, error::Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `value` is structurally pinned (never moved out of the pinned
        // `Timeout`: no method hands it out by value or `&mut` from a pinned `Timeout`);
        // `sleep` is `Unpin`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let future = unsafe { Pin::new_unchecked(&mut this.value) };
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
                    let at = this.sleep.shared.driver.time.deadline_for_record(this.sleep.deadline);
                    wait::record_deadline(wait::W_TIMEOUT, at);
                }
                Poll::Pending
            }
        }
    }
}
