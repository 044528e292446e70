//! Where a task goes when it is spawned or woken, and whom that wakes.
//!
//! # Scheduling from a worker (`schedule_local`)
//! A task spawned or woken on a worker goes into that worker's LIFO slot; the task it
//! evicts goes to the back of the ring. A task woken during its own poll (`yield_now`)
//! goes to the back of the ring instead, so a task that wakes itself forever takes turns
//! with everything else. While the worker is transitioning to park it refuses local
//! scheduling (the task goes to the global queue), so nothing lands in a slot nobody will
//! look at. Whenever the ring gets work (a yield, an evicted task) and this worker is not
//! searching, it calls `notify_parked` so an idle worker can come and steal.
//!
//! A push that only fills the empty LIFO slot wakes nobody, as in Tokio: the owner runs
//! that task next. Notifying on every local push would, in a chain of spawn-and-await,
//! wake another worker at nearly every step, each wake a futex syscall on the busy
//! worker's path, only for the woken worker to find nothing it could take. The exception
//! is a slot-only push while no parked worker watches the slots (see "Stealing from the
//! LIFO slot" in `run`): it wakes one, which then parks as the watcher.
//!
//! While a worker delivers the driver's wakes (`dispatching`), it decides whom to wake
//! once for the batch instead (see "Waking others after a dispatch" in `driver`).
//!
//! # Scheduling from elsewhere (`schedule_remote`)
//! Any other thread (a pool thread, `block_on`, another runtime's worker) pushes to the
//! global queue and wakes a parked worker through the idle protocol (`idle`).

use super::queue::Pushed;
use super::worker::Worker;
use crate::scheduler::handle::Handle;
use crate::task::notified::Notified;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl Handle {
    /// A wake (`is_yield`: a requeue of the task that was just polled).
    pub(crate) fn schedule_task(&self, task: Notified<Arc<Handle>>, is_yield: bool) {
        let worker = self.current_worker();
        // A requeue after a poll (`is_yield`) is that poll's to record: its `PollEnd`
        // says so, and `poll_end` noted the time. A wake is recorded here.
        if !is_yield {
            let global = worker.is_none_or(|w| w.transitioning_to_park.load(Relaxed));
            self.metrics.on_schedule(worker.map(|w| &w.rec), task.0.raw(), global);
        }
        match worker {
            Some(w) => self.schedule_local(w, task, is_yield),
            None => self.schedule_remote(task),
        }
    }

    /// Queue a task on the owning worker's thread: the LIFO slot, or the ring for a yield.
    pub(crate) fn schedule_local(&self, w: &Worker, task: Notified<Arc<Handle>>, is_yield: bool) {
        if w.transitioning_to_park.load(Relaxed) {
            return self.schedule_remote(task);
        }
        if is_yield {
            w.core.yielded.set(true);
            // A task that yields asked to wait. If the ring is full, it waits in the
            // global queue: overflowing would move the ring's oldest half there instead,
            // behind whatever floods the global queue, and those tasks (a task that yields
            // in a loop among them) could wait behind that flood for good.
            if w.queue.len() >= super::queue::CAPACITY {
                return self.schedule_remote(task);
            }
            self.push_local_ring(w, task);
        } else if self.current_thread {
            // A current-thread runtime runs its tasks in the order they were spawned or
            // woken, as Tokio's does (it has no LIFO slot): `#[volt::test]` runs on one,
            // and tests written for Tokio's expect that order.
            self.push_local_ring(w, task);
        } else {
            let Some(prev) = w.lifo.push(task.into_raw()) else {
                // Only the slot changed: no worker is woken for it, unless nobody
                // watches the slots.
                if self.idle.watch_missing() && !w.core.dispatching.get() {
                    self.notify_parked();
                }
                return;
            };
            // SAFETY: the slot held a queue reference, now ours.
            self.push_local_ring(w, unsafe { Notified::from_raw(prev) });
        }
        if !w.core.is_searching.get() && !w.core.dispatching.get() {
            self.notify_parked();
        }
    }

    /// The back of `w`'s ring; half of it to the global queue when full.
    pub(crate) fn push_local_ring(&self, w: &Worker, task: Notified<Arc<Handle>>) {
        match w.queue.push_back_or_overflow(task, &self.inject) {
            Pushed::Local => {}
            Pushed::Overflowed => self.metrics.on_overflow(&w.rec, super::queue::HALF as u64 + 1),
            Pushed::ToGlobal => self.metrics.on_overflow(&w.rec, 1),
        }
    }

    /// The global queue, and a parked worker woken for it.
    pub(crate) fn schedule_remote(&self, task: Notified<Arc<Handle>>) {
        if let Err(rejected) = self.inject.push(task) {
            // Shutting down: the owned-task list cancels the task; drop the entry.
            drop(rejected);
            return;
        }
        self.notify_parked();
    }

    #[inline]
    pub(crate) fn notify_parked(&self) {
        self.idle.notify_parked(|i| self.unpark_worker(i));
    }

    /// Wake worker `i` whether it sleeps on its futex or in the reactor.
    pub(crate) fn unpark_worker(&self, i: usize) {
        self.workers[i].park.unpark(|| self.driver.wake_reactor());
    }
}
