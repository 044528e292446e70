//! [`Interval`]: a timer that ticks on a schedule, and what it does about ticks missed
//! while nobody polled it ([`MissedTickBehavior`]).

use super::{instant_after, wait, Instant, Sleep};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A tick that completes later than this after its scheduled time counts as missed, and
/// the next one is scheduled by the [`MissedTickBehavior`]. A smaller lateness is the
/// normal delay of waking a task, not a miss: the schedule just goes on.
const MISSED_AFTER: Duration = Duration::from_millis(5);

/// What an [`Interval`] does when a tick comes late, because the task polling it was busy
/// (or the process asleep) past one or more scheduled ticks.
///
/// Take a period of 100 ms starting at 0, polled again only at 350 ms (ticks due at 100,
/// 200, 300 were missed):
/// * [`Burst`](Self::Burst) (the default): the missed ticks complete back to back, at
///   once, reporting 100, 200 and 300; then 400, 500, ... as planned.
/// * [`Delay`](Self::Delay): one tick at 350 (reporting the 100 it was due at), then
///   one every period from there: 450, 550, ...
/// * [`Skip`](Self::Skip): one tick at 350, then the next that falls on the original
///   schedule: 400, 500, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Catch up: the missed ticks complete at once, one after another, and the schedule
    /// stays the original one.
    #[default]
    Burst,
    /// Start the schedule again from the late tick: the next tick is a period after it.
    Delay,
    /// Drop the missed ticks: the next tick is the first of the original schedule still
    /// ahead.
    Skip,
}

impl MissedTickBehavior {
    /// The deadline after a tick that was due at `due` and completed, late, at `now`.
    fn next_after_miss(self, due: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            MissedTickBehavior::Burst => instant_after(due, period),
            MissedTickBehavior::Delay => instant_after(now, period),
            MissedTickBehavior::Skip => {
                // How far past a tick of the original schedule `now` lies; the next tick of
                // that schedule is the rest of a period away.
                let late = now.saturating_duration_since(due).as_nanos();
                let into = late % period.as_nanos().max(1);
                let left = period.as_nanos() - into;
                instant_after(now, Duration::from_nanos(left.min(u64::MAX as u128) as u64))
            }
        }
    }
}

/// Ticks every `period`, starting now: the first tick completes at once. Late ticks
/// follow [`MissedTickBehavior::Burst`] unless set otherwise. A period too large for
/// `Instant` (such as `Duration::MAX`) ticks once, then never.
///
/// # Panics
/// If `period` is zero, or outside a Volt runtime.
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero.");
    let driver = super::current_for("volt::time::interval");
    let start = driver.time.now();
    Interval::new(Sleep::at(driver, start), period)
}

/// Ticks every `period`, the first tick at `start` (at once if `start` has passed).
///
/// # Panics
/// If `period` is zero, or outside a Volt runtime.
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero.");
    Interval::new(Sleep::at(super::current_for("volt::time::interval_at"), start), period)
}

/// A timer that ticks every period; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    /// Boxed, as Tokio's is, so the `Interval` itself can move (`Sleep` holds its place in
    /// the timing wheel and must stay put once armed).
    sleep: Pin<Box<Sleep>>,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    fn new(mut sleep: Sleep, period: Duration) -> Interval {
        sleep.kind = wait::W_INTERVAL;
        Interval { sleep: Box::pin(sleep), period, missed: MissedTickBehavior::default() }
    }

    /// Wait for the next tick; returns the time it was scheduled for. Cancel-safe: a
    /// `tick` dropped before it completes loses no tick.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Poll for the next tick: `Ready` with the time it was scheduled for, or `Pending`
    /// (then `cx`'s waker is woken at the tick).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        std::task::ready!(self.sleep.as_mut().poll(cx));
        let due = self.sleep.deadline();
        let now = self.sleep.driver.time.now();
        let next = if now.saturating_duration_since(due) > MISSED_AFTER {
            self.missed.next_after_miss(due, now, self.period)
        } else {
            instant_after(due, self.period)
        };
        self.sleep.as_mut().reset(next);
        Poll::Ready(due)
    }

    /// Start the schedule again: the next tick a period from now.
    pub fn reset(&mut self) {
        let now = self.sleep.driver.time.now();
        self.sleep.as_mut().reset(instant_after(now, self.period));
    }

    /// Start the schedule again: the next tick at once.
    pub fn reset_immediately(&mut self) {
        let now = self.sleep.driver.time.now();
        self.sleep.as_mut().reset(now);
    }

    /// Start the schedule again: the next tick `after` from now.
    pub fn reset_after(&mut self, after: Duration) {
        let now = self.sleep.driver.time.now();
        self.sleep.as_mut().reset(instant_after(now, after));
    }

    /// Start the schedule again: the next tick at `deadline`.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
    }

    /// What happens to missed ticks.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Choose what happens to missed ticks from now on.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}
