//! Pausing the runtime's clock from a test (`test-util`): [`pause`], [`resume`],
//! [`advance`].

use super::*;

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
    let paused = crate::driver::Handle::with_current(|d| d.time.pause())
        .expect("volt::time::pause called outside a Volt runtime: time can only be frozen inside one");
    if let Err(e) = paused {
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
    let resumed = crate::driver::Handle::with_current(|d| d.time.clock.resume())
        .expect("volt::time::resume called outside a Volt runtime: time can only be frozen inside one");
    if let Err(e) = resumed {
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
    let driver = crate::driver::Handle::current()
        .expect("volt::time::advance called outside a Volt runtime: time can only be frozen inside one");
    let time = &driver.time;
    if let Err(e) = time.clock.advance(duration) {
        panic!("{e}");
    }
    time.fire_due();
    drop(driver);
    crate::task::yield_now().await;
}
