//! [`Timeout`], [`timeout`] and [`timeout_at`].

use super::sleep::{current_for, Sleep};
use super::*;
use crate::driver::Handle;
use crate::task::wait;
use std::task::{Context, Poll};

/// Run `future` for at most `duration`: `Err(Elapsed)` if the time runs out first (the
/// future is then dropped with the `Timeout`). The future is polled before the timer,
/// so one that is ready at once completes even with a zero duration. `Duration::MAX`
/// means no time limit.
///
/// # Panics
/// Outside a Volt runtime.
#[track_caller]
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    let driver = current_for("volt::time::timeout");
    let deadline = instant_after(driver.time.now(), duration);
    Timeout::new(driver, deadline, future)
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
    fn new(driver: Handle, deadline: Instant, value: T) -> Timeout<T> {
        let mut sleep = Sleep::at(driver, deadline);
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
        // SAFETY: `value` and `sleep` are structurally pinned (never moved out of the
        // pinned `Timeout`: no method hands them out by value or `&mut` from a pinned
        // `Timeout`, and its `Drop` is the fields' own).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let future = unsafe { Pin::new_unchecked(&mut this.value) };
        // SAFETY: see above.
        let sleep = unsafe { Pin::new_unchecked(&mut this.sleep) };
        // The timeout is the task's wait unless the future named a closer one (a read,
        // a join) in this poll.
        let mark = wait::Mark::now();
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match sleep.poll_timer(cx) {
            Poll::Ready(()) => Poll::Ready(Err(error::Elapsed(()))),
            Poll::Pending => {
                if mark.unchanged() {
                    let at = this.sleep.driver.time.deadline_for_record(this.sleep.deadline);
                    wait::record_deadline(wait::W_TIMEOUT, at);
                }
                Poll::Pending
            }
        }
    }
}
