//! hyper's runtime traits on Volt: [`Executor`] and [`Timer`].

use super::{current_shared, deadline_after, spawn_named, EXECUTOR_TASK_NAME};
use crate::runtime::Handle;
use crate::scheduler::handle::Handle as Scheduler;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// hyper's [`Executor`](hyper::rt::Executor) on Volt: each future becomes a task named
/// [`EXECUTOR_TASK_NAME`] (or the name given to [`Executor::named`]).
#[derive(Clone, Debug)]
pub struct Executor {
    handle: Option<Handle>,
    name: &'static str,
}

impl Executor {
    /// Spawn onto the runtime current when the executor runs a future (panics there if
    /// none is); made inside a runtime, onto that one from any thread.
    pub fn new() -> Executor {
        Executor { handle: Handle::try_current().ok(), name: EXECUTOR_TASK_NAME }
    }

    /// Spawn onto `handle`'s runtime.
    pub fn with_handle(handle: Handle) -> Executor {
        Executor { handle: Some(handle), name: EXECUTOR_TASK_NAME }
    }

    /// Name the tasks this executor spawns.
    pub fn named(mut self, name: &'static str) -> Executor {
        self.name = name;
        self
    }
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new()
    }
}

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let shared = match &self.handle {
            Some(h) => Arc::clone(&h.shared),
            None => current_shared("Executor"),
        };
        drop(spawn_named(&shared, self.name, future));
    }
}

/// hyper's [`Timer`](hyper::rt::Timer) on Volt's timing wheel (1 ms resolution).
/// `Duration::MAX` and other deadlines past any real one mean "never".
#[derive(Clone, Debug)]
pub struct Timer {
    handle: Option<Handle>,
}

impl Timer {
    /// Use the runtime current when a sleep is made (panics there if none is); made
    /// inside a runtime, that one from any thread.
    pub fn new() -> Timer {
        Timer { handle: Handle::try_current().ok() }
    }

    /// Use `handle`'s runtime.
    pub fn with_handle(handle: Handle) -> Timer {
        Timer { handle: Some(handle) }
    }

    fn shared(&self) -> Arc<Scheduler> {
        match &self.handle {
            Some(h) => Arc::clone(&h.shared),
            None => current_shared("Timer"),
        }
    }
}

impl Default for Timer {
    fn default() -> Timer {
        Timer::new()
    }
}

/// The sleep [`Timer`] hands hyper: a Volt [`Sleep`](crate::time::Sleep).
#[derive(Debug)]
struct TimerSleep(crate::time::Sleep);

impl TimerSleep {
    fn sleep(self: Pin<&mut Self>) -> Pin<&mut crate::time::Sleep> {
        // SAFETY: the sleep is structurally pinned: `TimerSleep` never hands it out by
        // value or by `&mut`, and has no `Drop` of its own.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }
    }
}

impl Future for TimerSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.sleep().poll(cx)
    }
}

impl hyper::rt::Sleep for TimerSleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TimerSleep(crate::time::Sleep::new_in(self.shared().driver.clone(), deadline_after(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(TimerSleep(crate::time::Sleep::new_in(self.shared().driver.clone(), deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        // A sleep of ours is moved in place (no new allocation); any other is replaced.
        match sleep.as_mut().downcast_mut_pin::<TimerSleep>() {
            Some(s) => s.sleep().reset(new_deadline.into()),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }

    fn now(&self) -> Instant {
        // The runtime's clock (a paused one under `test-util`), as std's `Instant`.
        self.shared().driver.time.now().into_std()
    }
}
