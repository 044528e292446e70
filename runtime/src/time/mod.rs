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
//! The wheel's entry is inside the `Sleep` (which is therefore not `Unpin`, as Tokio's
//! is not): a timer costs its sleep's bytes and nothing else, and gives them back with
//! it.
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

pub(crate) mod block_on;
pub(crate) mod clock;
pub(crate) mod driver;
pub(crate) mod instant;
mod interval;
#[cfg(feature = "test-util")]
mod pause;
mod sleep;
mod timeout;
mod wheel;

pub use instant::Instant;
pub(crate) use instant::{deadline_after, instant_after};
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
#[cfg(feature = "test-util")]
pub use pause::{advance, pause, resume};
use sleep::current_for;
pub use sleep::{sleep, sleep_until, Sleep};
/// std's `Duration`, re-exported here as Tokio's `time` module does.
#[doc(no_inline)]
pub use std::time::Duration;
pub use timeout::{timeout, timeout_at, Timeout};

use crate::task::wait;
use std::future::Future;
use std::pin::Pin;

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
