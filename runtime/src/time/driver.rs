//! [`TimeDriver`]: the runtime's timers, its wheel and its clock.

use super::clock;
#[cfg(feature = "test-util")]
use super::instant::deadline_after;
use super::instant::Instant;
use super::wheel::Wheel;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::task::Waker;
use std::time::Duration;

/// The largest deadline tick: `u64::MAX` itself means "no deadline" in `next_deadline`.
const MAX_TICK: u64 = u64::MAX - 1;

/// The runtime's timer state.
pub(crate) struct TimeDriver {
    /// Where the wheel's milliseconds count from (on the clock's time line).
    pub(super) start: std::time::Instant,
    /// The runtime's clock (std's, unless a test paused it).
    pub(crate) clock: clock::Clock,
    pub(crate) wheel: Mutex<Wheel>,
    /// The earliest pending deadline (ms tick), `u64::MAX` if none; may be stale-early.
    pub(super) next_deadline: AtomicU64,
    /// See the module doc: 0 = nobody sleeps in the reactor, MAX = sleeping, no timeout.
    pub(super) reactor_sleep_until: AtomicU64,
    /// The runtime shut down: nothing fires timers any more (see [`TimeDriver::shutdown`]).
    pub(super) shut_down: AtomicBool,
}

impl TimeDriver {
    /// Pause the clock before the runtime's first task runs: where the runtime is built
    /// when `Builder::start_paused(true)` was asked for. Without `test-util` this does
    /// nothing.
    pub(crate) fn pause_at_start(&self) {
        #[cfg(feature = "test-util")]
        let _ = self.pause();
    }

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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Wheel> {
        self.wheel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whole ms since start, rounded down: a timer fires at the first tick at or after its
    /// deadline tick.
    pub(super) fn now_tick(&self, now: std::time::Instant) -> u64 {
        now.saturating_duration_since(self.start).as_millis() as u64
    }

    /// A deadline in ms ticks, rounded up so a sleep never ends early; saturates at
    /// [`MAX_TICK`] (about 580 million years).
    pub(super) fn deadline_tick(&self, deadline: std::time::Instant) -> u64 {
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
    pub(super) fn deadline_for_record(&self, deadline: Instant) -> std::time::Instant {
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
        let _source = crate::task::wait::SourceGuard::new(crate::task::wait::SRC_TIMER);
        for w in fired {
            w.wake();
        }
    }
}
