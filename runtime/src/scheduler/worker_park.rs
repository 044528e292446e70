//! What a worker does when it finds nothing to run: look for a task stuck in another
//! worker's LIFO slot, then park (see "Stealing from the LIFO slot" and "Parking" in
//! `run`).

use super::handle::Handle;
use super::park::Unparked;
use super::worker::*;
use crate::task::notified::Notified;
use crate::telemetry::WorkerState;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `check_stuck_lifo` found.
pub(super) enum LifoCheck {
    /// A task taken from a stuck worker's slot.
    Stole(Notified<Arc<Handle>>),
    /// A task is waiting in another worker's slot: look again after this long.
    Watch(Duration),
    Nothing,
}

impl Handle {
    /// For a paused clock's auto-advance: every worker parked, every queue and LIFO slot
    /// empty, the blocking pool idle, and no `block_on` caller busy. (Checked once more
    /// under the clock's lock before the time moves; a check that fails here makes the
    /// worker sleep until something wakes the reactor, instead of trying again at once.)
    #[cfg(feature = "test-util")]
    pub(super) fn runtime_idle(&self) -> bool {
        self.driver.time.clock.outside_busy() == 0
            && self.idle.all_parked()
            && !self.any_work()
            && self.workers.iter().all(|w| w.lifo.peek().is_none())
            && !self.blocking.is_busy()
    }

    /// Whether any queue holds work someone could take (the pre-sleep re-check).
    pub(super) fn any_work(&self) -> bool {
        !self.inject.is_empty() || self.workers.iter().any(|w| w.queue.is_stealable())
    }

    /// Before parking: take a task another worker has left in its LIFO slot while that
    /// worker stayed in one poll for [`LIFO_STEAL_AFTER`], or note such a task to look at
    /// again. See "Stealing from the LIFO slot".
    pub(super) fn check_stuck_lifo(&self, w: &Worker) -> LifoCheck {
        let core = &w.core;
        if let Some(watch) = core.lifo_watch.take() {
            let v = &self.workers[watch.victim];
            let same = v.lifo.peek().filter(|p| p.as_ptr() as usize == watch.task);
            if let Some(task) = same.filter(|_| v.counters().tasks_polled.get() == watch.polls) {
                let waited = watch.since.elapsed();
                if waited < LIFO_STEAL_AFTER {
                    core.lifo_watch.set(Some(watch));
                    return LifoCheck::Watch(LIFO_STEAL_AFTER - waited);
                }
                if let Some(t) = v.lifo.steal(task) {
                    // SAFETY: the slot held a queue reference, now ours.
                    let t = unsafe { Notified::<Arc<Handle>>::from_raw(t) };
                    self.metrics.on_steal(&w.rec, watch.victim, 1, t.header().id);
                    return LifoCheck::Stole(t);
                }
            }
        }
        let n = self.workers.len();
        for i in 1..n {
            let victim = (w.index + i) % n;
            let v = &self.workers[victim];
            if let Some(task) = v.lifo.peek() {
                let polls = v.counters().tasks_polled.get();
                let since = Instant::now();
                core.lifo_watch.set(Some(LifoWatch { victim, task: task.as_ptr() as usize, polls, since }));
                return LifoCheck::Watch(LIFO_STEAL_AFTER);
            }
        }
        LifoCheck::Nothing
    }

    /// Go idle until woken (see `park_idle`), running `Builder::on_thread_park` before and
    /// `on_thread_unpark` after. A task the first spawned (onto this worker's own queues)
    /// runs at once: the worker skips its park, where nothing would wake it for that task.
    pub(crate) fn park(&self, w: &Worker) {
        let Some(hooks) = self.park_hooks.get() else {
            return self.park_idle(w);
        };
        crate::blocking::ThreadHooks::call(&hooks.park);
        if w.lifo.peek().is_none() && w.queue.len() == 0 {
            self.park_idle(w);
        }
        crate::blocking::ThreadHooks::call(&hooks.unpark);
    }

    fn park_idle(&self, w: &Worker) {
        let core = &w.core;
        let watch = match self.check_stuck_lifo(w) {
            LifoCheck::Stole(t) => {
                // Run it next, as the thief of a ring's tasks would.
                self.push_local_ring(w, t);
                return;
            }
            LifoCheck::Watch(d) => Some(d),
            LifoCheck::Nothing => None,
        };
        w.transitioning_to_park.store(true, Relaxed);
        let was_searching = core.is_searching.replace(false);
        let last_searcher = self.idle.transition_worker_to_parked(w.index, was_searching);
        self.metrics.on_state(&w.rec, WorkerState::Parked);
        let recheck = last_searcher || self.idle.num_searching_seqcst() == 0;
        let mut driver = None;
        if !((recheck && self.any_work()) || self.is_shutdown()) {
            let t0 = Instant::now();
            // Park in the reactor if nobody else is; on the futex otherwise.
            driver = self.driver.try_lock();
            // The watch (rule 7 in `idle`): a timeout only for the one watcher while some
            // worker is out, or to look again at a task seen in a LIFO slot.
            let watching = !self.idle.all_parked() && self.idle.claim_watch(w.index);
            let cap = match watch {
                Some(d) => Some(d.min(PARK_TIMEOUT)),
                None if watching => Some(PARK_TIMEOUT),
                None => None,
            };
            self.metrics.on_park(&w.rec, driver.is_some(), watching, t0);
            let woke = match driver.as_mut() {
                Some(d) => {
                    self.idle.set_in_reactor(w.index, true);
                    // The next timer's deadline, or the watch's timeout if sooner.
                    let timer = self.driver.time.begin_reactor_sleep(t0);
                    #[allow(unused_mut)]
                    let mut timeout = match (timer, cap) {
                        (Some(t), Some(c)) => Some(t.min(c)),
                        (t, c) => t.or(c),
                    };
                    // A paused clock with nothing to do moves to the next timer instead
                    // of sleeping until it (see `time::clock`): I/O is polled without
                    // blocking first, and the time moves only if nothing came.
                    #[cfg(feature = "test-util")]
                    let auto = timer.is_some() && self.driver.time.clock.is_paused() && self.runtime_idle();
                    #[cfg(feature = "test-util")]
                    if auto {
                        timeout = Some(Duration::ZERO);
                    }
                    let woke = w.park.park_in_driver(|| self.driver.poll_io(d, timeout));
                    #[cfg(feature = "test-util")]
                    if auto && woke != Unparked::Notified && !d.has_io_events() {
                        self.driver.time.auto_advance(|| self.runtime_idle());
                    }
                    self.driver.time.end_reactor_sleep();
                    self.idle.set_in_reactor(w.index, false);
                    core.last_io_poll.set(core.tick.get());
                    woke
                }
                None => {
                    // With a paused clock, the last worker to park tells the one in the
                    // reactor, which may have found the runtime busy (this worker was
                    // out) and sleeps for a timer's real distance: the runtime may be
                    // idle now, and the time may jump (see `time::clock`).
                    #[cfg(feature = "test-util")]
                    if self.driver.time.clock.is_paused() && self.idle.all_parked() {
                        self.driver.wake_reactor();
                    }
                    w.park.park(cap)
                }
            };
            if watching {
                // Claimed again at the next park if a worker is still out; meanwhile
                // this worker looks at every LIFO slot before it parks.
                self.idle.release_watch(w.index);
                // A worker still out may be stuck in a poll (see "Who samples" in
                // `telemetry::stall`).
                self.metrics.stall.maybe_sample(&self.metrics, w.index, Instant::now(), self.is_shutdown());
            }
            self.metrics.on_unpark(&w.rec, woke == Unparked::Notified);
        }
        w.transitioning_to_park.store(false, Relaxed);
        if self.idle.unpark_self(w.index) {
            self.metrics.on_state(&w.rec, WorkerState::Running);
        } else {
            // A producer claimed us and counted us as a searcher.
            core.is_searching.set(true);
            self.metrics.on_state(&w.rec, WorkerState::Searching);
        }
        // Out of the parked bitmap: a stall monitor asleep because every worker was parked
        // must watch again (see "Sleeping while every worker sleeps" in
        // `telemetry::stall`).
        self.metrics.stall.worker_woke();
        if let Some(mut d) = driver {
            // Out of the parked state: the wakes land in our own queues.
            self.dispatch_driver(w, &mut d, Instant::now());
        }
    }
}
