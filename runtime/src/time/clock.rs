//! The runtime's clock, and (feature `test-util`) pausing it.
//!
//! Without `test-util` the clock is std's and nothing here costs anything. With it, each
//! runtime's [`Clock`] may be paused: then its time stands still except when a test calls
//! `advance`, or when the runtime has nothing to do and a worker about to sleep until the
//! next timer moves the time to that timer's deadline instead ("auto-advance", in
//! `scheduler::worker_park`).
//!
//! # When the runtime "has nothing to do"
//! Every worker is parked, no queue holds a task (global, rings, LIFO slots), the blocking
//! pool runs and queues nothing, and no `block_on` caller is polling its future or has
//! been woken and not yet polled it ([`Clock::outside`], kept by [`BlockOnPark`]). The
//! worker that advances checks all of that while holding the clock's lock, and moves the
//! time in the same critical section. A `block_on` thread that is woken counts itself busy
//! and then takes and releases that lock before it runs, so its poll starts either
//! before an advance was decided (and the advancer saw it busy) or after the advance was
//! done: a poll never sees the time jump in the middle.
//!
//! Whatever makes the runtime idle while a worker sleeps in the reactor (a `block_on`
//! caller going back to sleep, the blocking pool running dry) wakes the reactor when the
//! clock is paused, so the worker looks again; if it still finds work, it sleeps for the
//! timer's real distance, as an unpaused runtime would, so a missed case is slow, never
//! stuck.

#[cfg(feature = "test-util")]
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
#[cfg(feature = "test-util")]
use std::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(feature = "test-util")]
use std::sync::Arc;
#[cfg(feature = "test-util")]
use std::sync::{Mutex, MutexGuard};
#[cfg(feature = "test-util")]
use std::time::Duration;

/// How many live clocks have ever been paused: while none has, `Instant::now()` reads
/// std's clock without looking for a runtime.
#[cfg(feature = "test-util")]
static ALTERED: AtomicUsize = AtomicUsize::new(0);

/// The current runtime's time (std's clock outside a runtime, or when no clock was ever
/// paused).
#[inline]
pub(crate) fn now() -> std::time::Instant {
    #[cfg(feature = "test-util")]
    if ALTERED.load(Relaxed) > 0 {
        let p = crate::runtime::context::get().clock;
        if !p.is_null() {
            // SAFETY: only `Clock::context_ptr` makes the pointers in the context's clock
            // slot: the address of a runtime's clock, which the thread that entered keeps
            // alive (through its runtime) while the context is set.
            return unsafe { &*p.cast::<Clock>() }.now();
        }
    }
    std::time::Instant::now()
}

/// Whether some live runtime's clock has been paused (it may be running again): a cheap
/// pre-check, one atomic load, for the hooks that only matter then.
#[inline]
pub(crate) fn any_paused() -> bool {
    #[cfg(feature = "test-util")]
    {
        ALTERED.load(Relaxed) > 0
    }
    #[cfg(not(feature = "test-util"))]
    {
        false
    }
}

/// A runtime's clock.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    #[cfg(feature = "test-util")]
    pub(super) inner: Arc<ClockInner>,
}

#[cfg(feature = "test-util")]
#[derive(Debug, Default)]
pub(super) struct ClockInner {
    /// Paused now (mirrors `state.paused`, for lock-free checks).
    pub(super) paused: AtomicBool,
    /// Paused at some time: `now` must read `state` from then on.
    altered: AtomicBool,
    pub(super) state: Mutex<ClockState>,
    /// `block_on` callers polling, or woken and about to poll.
    pub(super) outside: AtomicUsize,
}

#[cfg(feature = "test-util")]
#[derive(Debug, Default)]
pub(crate) struct ClockState {
    pub(crate) paused: bool,
    /// The time when paused; the time at the last resume otherwise.
    pub(crate) base: Option<std::time::Instant>,
    /// The real time of the last resume (`None` while paused).
    unfrozen: Option<std::time::Instant>,
}

#[cfg(feature = "test-util")]
impl ClockState {
    pub(crate) fn now(&self) -> std::time::Instant {
        match (self.base, self.unfrozen) {
            (Some(base), Some(since)) => base + since.elapsed(),
            (Some(base), None) => base,
            (None, _) => std::time::Instant::now(),
        }
    }
}

impl Clock {
    /// This clock as the context's clock slot stores it (see `runtime::context`).
    pub(crate) fn context_ptr(&self) -> *const () {
        std::ptr::from_ref(self).cast()
    }

    /// The clock's time now.
    #[inline]
    pub(crate) fn now(&self) -> std::time::Instant {
        self.now_or(std::time::Instant::now)
    }

    /// The clock's time, with `real` giving std's time when the clock runs as std's (a
    /// reading the caller already took, say).
    #[inline]
    pub(crate) fn now_or(&self, real: impl FnOnce() -> std::time::Instant) -> std::time::Instant {
        #[cfg(feature = "test-util")]
        if self.inner.altered.load(Relaxed) {
            return self.lock().now();
        }
        real()
    }
}

#[cfg(feature = "test-util")]
impl Clock {
    /// Whether the clock is paused now.
    #[inline]
    pub(crate) fn is_paused(&self) -> bool {
        self.inner.paused.load(SeqCst)
    }

    /// Whether the clock was ever paused (so it may differ from std's).
    #[inline]
    pub(crate) fn is_altered(&self) -> bool {
        self.inner.altered.load(Relaxed)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ClockState> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stop the time at its current reading. `start` is where the timer wheel's whole
    /// milliseconds are counted from: the paused time is moved forward to the next one,
    /// by less than a millisecond, so that deadlines a whole number of milliseconds
    /// away fall on the wheel's ticks and auto-advance reaches them exactly.
    pub(crate) fn pause_aligned(&self, start: std::time::Instant) -> Result<(), &'static str> {
        let mut st = self.lock();
        if st.paused {
            return Err("time is already frozen");
        }
        let now = st.now().max(start);
        let since = now - start;
        let ms = since.as_millis();
        let whole = Duration::from_millis(ms as u64);
        let aligned = if since > whole { start + whole + Duration::from_millis(1) } else { now };
        st.base = Some(aligned);
        st.unfrozen = None;
        st.paused = true;
        self.inner.paused.store(true, SeqCst);
        if !self.inner.altered.swap(true, SeqCst) {
            ALTERED.fetch_add(1, SeqCst);
        }
        Ok(())
    }

    /// Let the time run again, at the real clock's pace, from where it stands.
    pub(crate) fn resume(&self) -> Result<(), &'static str> {
        let mut st = self.lock();
        if !st.paused {
            return Err("time is not frozen");
        }
        st.paused = false;
        st.unfrozen = Some(std::time::Instant::now());
        self.inner.paused.store(false, SeqCst);
        Ok(())
    }

    /// Move the paused time forward by `d`; the new time.
    pub(crate) fn advance(&self, d: Duration) -> Result<std::time::Instant, &'static str> {
        let mut st = self.lock();
        if !st.paused {
            return Err("time is not frozen");
        }
        let now = st.now();
        let to = crate::time::deadline_after(now, d);
        st.base = Some(to);
        Ok(to)
    }

    /// `block_on` callers busy (polling, or woken to poll).
    pub(crate) fn outside_busy(&self) -> usize {
        self.inner.outside.load(SeqCst)
    }
}

#[cfg(feature = "test-util")]
impl Drop for ClockInner {
    fn drop(&mut self) {
        if *self.altered.get_mut() {
            ALTERED.fetch_sub(1, SeqCst);
        }
    }
}

#[cfg(all(test, feature = "test-util", not(loom)))]
mod tests {
    use crate::time::{self, Instant};
    use std::time::Duration;

    /// The hook `Builder::start_paused(true)` calls: the clock is paused before the first
    /// task, on a whole millisecond of the wheel, so a sleep of whole milliseconds started
    /// at once ends exactly on time.
    #[test]
    fn pause_at_start_pauses_before_the_first_task() {
        let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();
        rt.handle().shared.driver.time.pause_at_start();
        let (start, end) = rt.block_on(async {
            let start = Instant::now();
            // Paused already: pausing again is the misuse Tokio reports.
            assert!(std::panic::catch_unwind(time::pause).is_err());
            time::sleep(Duration::from_millis(1_500)).await;
            (start, Instant::now())
        });
        assert_eq!(end - start, Duration::from_millis(1_500));
    }
}
