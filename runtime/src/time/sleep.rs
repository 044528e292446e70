//! [`Sleep`], [`sleep`] and [`sleep_until`].

use super::*;
use crate::driver::Handle;
use crate::task::wait;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Waker};

/// A future that completes at a deadline. See [`sleep`].
///
/// `Sleep` is `Unpin`, so it can be polled and [`reset`](Sleep::reset) through
/// `Pin::new(&mut sleep)` as well as through a pinned box or `std::pin::pin!`.
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    pub(super) deadline: Instant,
    pub(super) driver: Handle,
    pub(super) key: Option<TimerKey>,
    pub(super) fired: bool,
    /// What a pending poll records as the task's wait (`task::wait`): a sleep, or the
    /// timer of a timeout or an interval.
    pub(super) kind: u8,
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
    let driver = current_for("volt::time::sleep");
    let deadline = instant_after(driver.time.now(), duration);
    Sleep::at(driver, deadline)
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
pub(super) fn current_for(what: &str) -> Handle {
    match Handle::current() {
        Some(s) => s,
        None => panic!("{what} called outside a Volt runtime: call it from a task or inside `Runtime::block_on`"),
    }
}

impl Sleep {
    pub(super) fn at(driver: Handle, deadline: Instant) -> Sleep {
        Sleep { deadline, driver, key: None, fired: false, kind: wait::W_SLEEP }
    }

    /// A sleep on `driver`'s timers, from any thread (hyper's timer: std's `Instant`).
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn new_in(driver: Handle, deadline: std::time::Instant) -> Sleep {
        Sleep::at(driver, Instant::from_std(deadline))
    }

    /// When this sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached (on the runtime's clock).
    pub fn is_elapsed(&self) -> bool {
        self.fired || self.driver.time.now() >= self.deadline
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
    pub(super) fn disarm(&mut self) -> Option<Waker> {
        let key = self.key.take()?;
        let (waker, cancelled) = self.driver.time.lock().remove(key);
        if cancelled {
            self.driver.metrics().on_timer_cancelled(self.driver.current_rec());
            waker
        } else {
            drop(waker);
            None
        }
    }

    /// Put `waker` in the wheel for this sleep's deadline. `false`: not armed, because
    /// the deadline has passed or the timers have shut down (so the sleep is due).
    pub(super) fn arm(&mut self, waker: &Waker) -> bool {
        let time = &self.driver.time;
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
        self.driver.metrics().on_timer_armed(self.driver.current_rec());
        time.next_deadline.fetch_min(tick, SeqCst);
        if tick < time.reactor_sleep_until.load(SeqCst) {
            self.driver.wake_reactor();
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
            wait::record_deadline(self.kind, self.driver.time.deadline_for_record(self.deadline));
        } else {
            crate::task::coop::spend();
        }
        r
    }
}

impl Sleep {
    /// Poll the timer without recording the task's wait.
    pub(super) fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let this = self;
        if this.fired {
            return Poll::Ready(());
        }
        let time = &this.driver.time;
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
