//! [`Sleep`], [`sleep`] and [`sleep_until`].

use super::wheel::Entry;
use super::*;
use crate::driver::Handle;
use crate::task::wait;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Waker};

/// A future that completes at a deadline. See [`sleep`].
///
/// As with Tokio's, `Sleep` is not `Unpin`: its timer's place in the runtime's timing
/// wheel is inside it (so a timer costs no memory elsewhere, and a dropped sleep gives
/// its memory back at once). Pin it to poll it by reference, with `std::pin::pin!`,
/// `volt::pin!` or `Box::pin`; `.await` does that for you.
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    pub(super) deadline: Instant,
    pub(super) driver: Handle,
    /// The timer's place in the wheel, linked while `armed` (see `wheel`'s contract).
    entry: Entry,
    /// `entry` is in the wheel (pending, or fired and not yet removed).
    armed: bool,
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
        Sleep { deadline, driver, entry: Entry::new(), armed: false, fired: false, kind: wait::W_SLEEP }
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

    /// Whether the sleep has elapsed: completed by a poll, or fired by the runtime's
    /// timers since its last poll. As with Tokio's, a sleep never polled (since it was
    /// made or reset without a waker) has not elapsed, even past its deadline, and
    /// neither has a waiting one whose deadline the timers have not reached yet.
    pub fn is_elapsed(&self) -> bool {
        if self.fired {
            return true;
        }
        if !self.armed {
            return false;
        }
        let wheel = self.driver.time.lock();
        // SAFETY: armed, so the entry was linked from this pinned sleep (only a pinned
        // sleep is armed, and it stays armed until `disarm`), and it is read only under
        // the wheel's lock, held here.
        unsafe { wheel.is_fired(self.entry.key()) }
    }

    /// Move the deadline, whether or not the sleep has completed. A sleep that was waiting
    /// keeps the waker of its last poll: it wakes that task at the new deadline (or at
    /// once if that has passed), so a task may reset a sleep and wait without polling it
    /// again, as with Tokio's.
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        // SAFETY: nothing is moved out of the pinned sleep; `arm` links its entry, which
        // stays where it is until the sleep's `Drop` (or a later disarm) unlinks it.
        let this = unsafe { self.get_unchecked_mut() };
        let waker = this.disarm();
        this.deadline = deadline;
        this.fired = false;
        if let Some(w) = waker {
            // SAFETY: pinned (see above), and just disarmed.
            if !unsafe { this.arm(&w) } {
                // Due already (or the timers have shut down): elapsed, and the next poll
                // completes.
                this.fired = true;
                w.wake();
            }
        }
    }

    /// Take the timer out of the wheel; the waker of one that had not fired yet, to be
    /// dropped (or used) outside the wheel's lock.
    pub(super) fn disarm(&mut self) -> Option<Waker> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        // SAFETY: armed, so the entry was linked from a pinned sleep that has not moved
        // since, and is touched only under this wheel's lock, held here.
        let (waker, cancelled) = unsafe { self.driver.time.lock().remove(self.entry.key()) };
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
    ///
    /// # Safety
    /// `self` is pinned (it will not move until dropped), and not armed now.
    unsafe fn arm(&mut self, waker: &Waker) -> bool {
        let time = &self.driver.time;
        if time.now() >= self.deadline {
            return false;
        }
        let tick = time.deadline_tick(self.deadline.into_std());
        let armed = {
            let mut wheel = time.lock();
            // Under the wheel's lock: `shutdown` sets the flag and then fires what is
            // armed under this lock, so a timer is either armed before that (and fired
            // by it) or sees the flag here and is not armed. (A clone the wheel turns
            // down is dropped under the lock: never the waker's last reference, which
            // the caller holds.)
            // SAFETY: the caller's promise that the sleep is pinned and not armed; the
            // entry is touched only under this lock from now on, and `disarm` (which
            // `Drop` runs) takes it out before the sleep goes.
            !time.shut_down.load(SeqCst) && unsafe { wheel.insert(self.entry.key(), tick, waker.clone()) }
        };
        if !armed {
            return false;
        }
        self.armed = true;
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
        std::task::ready!(crate::task::coop::poll_budget(cx));
        let r = self.as_mut().poll_timer(cx);
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
    pub(super) fn poll_timer(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: nothing is moved out of the pinned sleep.
        let this = unsafe { self.get_unchecked_mut() };
        if this.fired {
            return Poll::Ready(());
        }
        let time = &this.driver.time;
        match this.armed {
            false => {
                // SAFETY: pinned (we came through `Pin`), and not armed.
                if unsafe { this.arm(cx.waker()) } {
                    Poll::Pending
                } else {
                    this.fired = true;
                    Poll::Ready(())
                }
            }
            true => {
                let key = this.entry.key();
                let mut wheel = time.lock();
                // SAFETY: armed, so linked from this pinned sleep, and touched only under
                // this lock, held here (the same holds for the two calls below).
                if unsafe { wheel.is_fired(key) } {
                    // SAFETY: as above.
                    let (w, _) = unsafe { wheel.remove(key) };
                    drop(wheel);
                    drop(w);
                    this.armed = false;
                    this.fired = true;
                    return Poll::Ready(());
                }
                // SAFETY: as above.
                let old = unsafe { wheel.set_waker(key, cx.waker()) };
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
        f.debug_struct("Sleep").field("deadline", &self.deadline).field("armed", &self.armed).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::future::Future;

    /// Sleeps armed side by side in the wheel's lists, one cancelled from between the
    /// others, one reset after it fired, one moved to another thread and dropped there
    /// while armed: each is unlinked or fired through its own entry, with no entry left
    /// behind (run under Miri too, which checks every pointer the wheel follows).
    #[test]
    fn sleeps_armed_fired_reset_and_dropped_through_the_wheel() {
        let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
        rt.block_on(async {
            let mut a = Box::pin(sleep(Duration::from_millis(1)));
            let mut far = Box::pin(sleep(Duration::from_secs(3600)));
            let mut c = Box::pin(sleep(Duration::from_millis(1)));
            let mut elsewhere = Box::pin(sleep(Duration::from_secs(3600)));
            std::future::poll_fn(|cx| {
                // The short ones may be due already on a slow machine (or under Miri).
                for s in [&mut a, &mut c] {
                    let _ = s.as_mut().poll(cx);
                }
                for s in [&mut far, &mut elsewhere] {
                    assert!(s.as_mut().poll(cx).is_pending());
                }
                Poll::Ready(())
            })
            .await;
            // Cancelled while linked between the others.
            drop(far);
            // Dropped on another thread while armed.
            std::thread::spawn(move || drop(elsewhere)).join().unwrap();
            a.as_mut().await;
            assert!(a.is_elapsed());
            c.as_mut().await;
            // Reset after it fired: armed again on its next poll, and fires again.
            let again = Instant::now() + Duration::from_millis(1);
            c.as_mut().reset(again);
            c.as_mut().await;
            assert!(Instant::now() >= again);
        });
        drop(rt);
    }
}
