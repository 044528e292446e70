//! [`Instant`]: a point in time on the runtime's clock.
//!
//! It wraps `std::time::Instant`, so converting either way is free and arithmetic is
//! std's. The one difference is [`Instant::now`]: under the `test-util` feature it reads
//! the current runtime's clock, which a test may pause and move by hand (see
//! [`pause`](super::pause)); otherwise it is std's clock.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// A measurement of a monotonically nondecreasing clock, as `std::time::Instant`, read
/// from the runtime's clock: while a test has paused it (feature `test-util`),
/// [`Instant::now`] returns the paused time, which moves only by
/// `volt::time::advance` or the runtime's auto-advance.
///
/// Outside a runtime, or when its clock was never paused, `now` is std's clock.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    std: std::time::Instant,
}

impl Instant {
    /// The current time on the current runtime's clock (std's clock outside a runtime).
    pub fn now() -> Instant {
        Instant { std: super::clock::now() }
    }

    /// The instant that `std` names.
    pub fn from_std(std: std::time::Instant) -> Instant {
        Instant { std }
    }

    /// The same point in time as a `std::time::Instant`.
    pub fn into_std(self) -> std::time::Instant {
        self.std
    }

    /// Time passed from `earlier` to `self`; zero when `earlier` is later than `self`.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// Time passed from `earlier` to `self`, or `None` when `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.std.checked_duration_since(earlier.std)
    }

    /// Time passed from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// Time passed since `self`, on the runtime's clock (`Instant::now() - self`).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self + duration`, or `None` if that cannot be represented.
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_add(duration).map(Instant::from_std)
    }

    /// `self - duration`, or `None` if that cannot be represented.
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_sub(duration).map(Instant::from_std)
    }
}

impl From<std::time::Instant> for Instant {
    fn from(std: std::time::Instant) -> Instant {
        Instant::from_std(std)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(i: Instant) -> std::time::Instant {
        i.into_std()
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// If the result cannot be represented (as std's `Instant`).
    fn add(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std + rhs)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// If the result cannot be represented (as std's `Instant`).
    fn sub(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std - rhs)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// Zero when `rhs` is later than `self`, as [`Instant::saturating_duration_since`].
    fn sub(self, rhs: Instant) -> Duration {
        self.std.saturating_duration_since(rhs.std)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
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

/// [`deadline_after`] on the runtime's [`Instant`].
pub(crate) fn instant_after(now: Instant, d: Duration) -> Instant {
    Instant::from_std(deadline_after(now.into_std(), d))
}
