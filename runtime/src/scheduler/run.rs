//! The worker run loop: budget ticks, the order in which a worker looks for work, and
//! how it parks.
//!
//! # The loop
//! A worker runs *budget ticks*. Each tick polls at most [`BUDGET_PER_TICK`] (128) tasks,
//! then updates its EWMA of task time and its global-queue interval (`stats`); a tick
//! that found no work parks the worker. The LIFO slot serves at most
//! [`MAX_LIFO_POLLS_PER_TICK`] (3) polls in a row; the count restarts when a task comes
//! from any other source and at every tick. Past the cap, a task found in the slot is
//! flushed to the back of the ring so it is visible to FIFO order and to stealers, and two
//! tasks that keep waking each other can't hold the worker.
//!
//! # Finding work (`find_work`)
//! 1. the periodic global check: every `global_queue_interval` polls, fetch a batch (and
//!    right after a poll that yielded, if the global queue holds work);
//! 2. the LIFO slot;
//! 3. the local ring (FIFO);
//! 4. become a searcher (if fewer than half the workers are) and steal half of a random
//!    victim's ring (xorshift + Lemire);
//! 5. a final global check;
//! 6. flush the wakes the cooperative budget held back, and take one of those tasks;
//! 7. park.
//!
//! The periodic global check comes *before* the local sources: after them, a worker whose
//! local sources never run dry (a task that keeps waking itself always sits in the ring)
//! would never reach it, and remotely spawned tasks would starve. `tick` counts polls,
//! not budget ticks, because the EWMA gives the interval in tasks ("tasks per 1 ms").
//!
//! # Where a global batch goes
//! A fetched batch goes into the worker's ring, not a private buffer: private means no
//! other worker can take those tasks, and when the first task run from a batch takes long
//! (a CPU-heavy poll, a blocking call), up to 63 tasks would wait behind it while the
//! other workers find nothing and park (the test
//! `tasks_fetched_by_a_worker_stuck_in_a_long_poll_still_run_elsewhere`). In the ring,
//! stealers see them (and the parking re-check counts them), and the worker, unless it is
//! searching (then the last searcher's wake covers it), wakes a parked one to share them,
//! as a local spawn does. The batch still costs one lock for up to 64 tasks.
//!
//! # Yielded tasks and the global queue
//! A task that yields (or wakes itself during its poll) says it can wait. Queued at the
//! back of the ring, it still keeps the ring non-empty, so a worker with a few tasks that
//! yield in a loop would reach the global queue only on the periodic check, and tasks
//! spawned from outside would wait behind the spinners. So a poll that ends in such a
//! requeue marks the worker, and its next `find_work` fetches a global batch first if the
//! global queue holds anything (one atomic load when it does not). The yielded task keeps
//! its place in the ring, ahead of the batch's tail, so it still runs once per pass of the
//! ring: no task that yields forever starves the others, and none is starved by them.
//!
//! # Deferred wakes
//! A task the cooperative budget refuses (`task::coop`) has more to do at once, but must
//! let the worker's other tasks run first. Queued at the back of the ring, it would be in
//! view of every stealer at once, and a worker that ran out of work would take it (and
//! half the ring) and run it alongside the worker it came from. In a group of consumers
//! fed by one producer, that breaks up the shape that makes the group cheap: the producer
//! alone on one worker and the consumers on the other, each behind by a batch or more and
//! reading all it can until the budget stops it, so that none of them ever waits and no
//! wake crosses between workers. Instead the consumers, stolen mid-batch, run next to the
//! producer and follow it value by value, both cores writing the same cache lines (the
//! `broadcast` fan-out in `benches/README.md` was 1.5-1.9 times Tokio's time so).
//!
//! So a refused task's waker goes into a list of its worker's own (`coop::Deferred`,
//! owner-only, found through the context's `defer` slot), which no stealer sees, and the
//! wake waits there until the worker has run its LIFO slot and ring dry and found nothing
//! to steal and nothing global (step 6 above), or until its next budget tick starts, so a
//! busy worker holds a wake for at most one tick. The flush (`defer`) wakes them in the
//! order they were refused; each goes to the LIFO slot or the ring as any wake on the
//! worker does (so at a tick's start the last one refused runs first, ahead of older
//! tasks in the ring, which still run in that tick: the LIFO slot serves at most
//! [`MAX_LIFO_POLLS_PER_TICK`] polls in a row), and one decision for the batch wakes a parked worker if more than one
//! task waits (rule 6 in `idle`). A worker never parks with wakes held: it flushes before
//! `find_work` can come back empty; a current-thread runtime's worker flushes before its
//! thread lets it go, and a blocking join before it looks for its target or gives its
//! worker away. Flushing *before* the steal attempt instead brought the slow mode back:
//! the flushed tasks are in the ring then, for the other worker to steal. Yields are not
//! held (see "Yielded tasks and the global queue").
//!
//! What this gives up: the list is out of every other worker's reach, so if the worker
//! then gets stuck in one long poll (a CPU loop, a blocking call), the tasks it holds
//! wait for that poll to end, as Tokio's deferred tasks do, where a refused task in the
//! ring would have been stolen. A blocking join and `block_in_place` flush the list
//! first, so the common blocking calls inside a poll don't strand them.
//!
//! # Stealing from the LIFO slot
//! An owner-only slot has a flaw: a task spawned or woken just before its worker's poll
//! turns long (a CPU-heavy loop, a blocking call) waits for that poll, however long, while
//! the other workers sit idle (the test
//! `a_task_in_the_lifo_slot_of_a_worker_stuck_in_a_long_poll_runs_elsewhere`). So the slot
//! is stealable (`lifo.rs`), but only from a worker that is stuck: a worker about to park
//! (`check_stuck_lifo`) notes a task it sees in another worker's slot with that worker's
//! poll count, sleeps at most [`LIFO_STEAL_AFTER`] (100 µs), and takes the task if it is
//! still there and the count has not moved (the owner is still in the same poll). Taking
//! it at once instead would break the hand-off between two tasks on one worker, which is
//! what the slot is for. Nothing wakes a worker for a slot-only push (`schedule`) while
//! one parked worker is the *watcher* (see "Parking"): it wakes at least every
//! [`PARK_TIMEOUT`], in the reactor too, so such a task waits about 10 ms at most. A
//! slot-only push that finds nobody watching wakes a parked worker, which then parks as
//! the watcher. The owner pays one atomic swap per LIFO hit, and two loads per slot-only
//! push.
//!
//! A poll that turns long with nothing in its slot leaves nothing to rescue, but it is
//! away from the driver. If it was the reactor's holder, woken by I/O or a timer with
//! the other workers asleep and nobody watching, other tasks' timers and I/O wait for
//! that poll to end, as they do on Tokio; a worker woken for work (rule 8 in `idle`)
//! leaves the reactor's holder in place.
//!
//! # Parking (`park`)
//! Set `transitioning_to_park`, run the idle protocol's `transition_worker_to_parked`, then,
//! if no worker is searching afterwards (always so for the last searcher), re-check every
//! queue and cancel the park if anything is there. Re-checking only for the last
//! searcher is not enough: a worker that parks without having become a searcher (the
//! searcher limit refused it) could then set its bit just after a producer looked and
//! found nobody searching, and sleep through the timeout with work queued. Then park, on
//! the futex or in the reactor.
//!
//! A parked worker sleeps until work, a timer or I/O arrives: there is no periodic wake,
//! which would cost every idle worker a wakeup 100 times a second forever. Instead one
//! worker keeps a timeout, and only while it is needed (rule 7 in `idle`): while some
//! worker is out of the parked state (maybe inside a long poll), the one parked worker
//! that holds the watch (the first to claim it, futex or reactor) sleeps at most
//! [`PARK_TIMEOUT`], then looks at the other workers' LIFO slots and, if the driver is
//! free, takes it. When every worker is parked (a worker whose thread has not started yet
//! counts as parked here), nobody holds the watch: the worker in the
//! reactor sleeps until the next timer (none: until I/O or a wake) and the others until
//! they are woken. A worker that saw a task in another's LIFO slot sleeps only until that
//! watch is due.
//!
//! Elsewhere: spawning and where a task is queued (`schedule`), the worker's driver pass
//! (`driver`), the EWMA (`stats`), the `Schedule` hooks (`hooks`), the blocking join and
//! the worker's hand-off (`join`), and what each event counts and records (`metrics`).

use super::join::HelpStackGuard;
use super::worker::{
    Worker, BUDGET_PER_TICK, MAX_GLOBAL_BATCH, MAX_LIFO_POLLS_PER_TICK, MIN_GLOBAL_BATCH, STALL_CHECK_POLLS,
};
use crate::scheduler::handle::{enter_worker, owns, Handle};
use crate::task::notified::Notified;
use crate::telemetry::record::WorkerRecorder;
use crate::telemetry::WorkerState;
use std::sync::Arc;
use std::time::Instant;

impl Handle {
    /// Run worker `index` on this thread until shutdown, or until a blocking join on this
    /// thread hands the worker to another thread (`join`). Worker threads
    /// start here, and so does each replacement a hand-off starts on the blocking pool.
    pub(crate) fn run_worker(this: Arc<Handle>, index: usize) {
        /// Counts the exit of the worker's owner (on unwinding too, so `shutdown` never
        /// waits for a worker that is gone); not for a thread that handed the worker off.
        struct Exit<'a> {
            shared: &'a Arc<Handle>,
            owner: bool,
        }
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                if self.owner {
                    Handle::worker_exited(self.shared);
                }
            }
        }
        /// The thread's part in the stall machinery (its timer, its signal handler's view
        /// of the worker) ends with the loop, on every way out.
        struct StallThread<'a>(&'a Handle);
        impl Drop for StallThread<'_> {
            fn drop(&mut self) {
                self.0.metrics.stall.leave_thread();
            }
        }
        let mut exit = Exit { shared: &this, owner: true };
        let w = &this.workers[index];
        let _ctx = enter_worker(&this, w);
        this.metrics.stall.enter_thread(index);
        let _stall = StallThread(&this);
        let _help = HelpStackGuard::start(this.stack_size);
        this.metrics.on_worker_start(&w.rec);
        // Running now, no longer "not started" for the watch (rule 7 in `idle`); a stall
        // monitor asleep because every worker counted as parked watches again.
        this.idle.worker_started(index);
        this.metrics.stall.worker_woke();
        while !this.is_shutdown() {
            match this.run_tick(w) {
                Some(0) => this.park(w),
                Some(_) => {}
                None => {
                    // Handed off: another thread runs this worker now; this one is done.
                    exit.owner = false;
                    return;
                }
            }
        }
        this.drain_local(w);
        this.metrics.on_worker_exit(&w.rec);
    }

    /// One budget tick. Returns how many tasks ran, or `None` when a task's blocking join
    /// handed the worker to another thread (then nothing of `w` may be touched here again).
    pub(crate) fn run_tick(&self, w: &Worker) -> Option<u32> {
        let core = &w.core;
        let start = Instant::now();
        self.maintain_driver(w, start);
        // At most once every `STALL_CHECK_POLLS` polls: a tick can be a poll or two long,
        // and even the check's clock arithmetic showed on such workloads.
        if core.tick.get().wrapping_sub(core.last_stall_check.get()) >= STALL_CHECK_POLLS {
            core.last_stall_check.set(core.tick.get());
            self.metrics.stall.maybe_sample(&self.metrics, w.index, start, self.is_shutdown());
        }
        // Held-back wakes wait at most one tick while the worker stays busy.
        self.flush_deferred(w);
        core.lifo_polls.set(0);
        let mut ran = 0;
        while ran < BUDGET_PER_TICK && !self.is_shutdown() {
            if ran > 0 && self.io_poll_due(w) {
                // A long tick polls the reactor on schedule too, not only at its start.
                self.maintain_driver(w, Instant::now());
            }
            let Some(task) = self.find_work(w) else { break };
            self.run_task(w, task);
            if !owns(w) {
                return None;
            }
            ran += 1;
        }
        if ran > 0 {
            core.stats.end_tick(ran, start.elapsed());
            self.metrics.on_interval_changed(&w.rec, core.stats.ewma_task_ns(), core.stats.interval());
        }
        if ran == BUDGET_PER_TICK {
            self.metrics.on_budget_yield(&w.rec);
        }
        Some(ran)
    }

    fn find_work(&self, w: &Worker) -> Option<Notified<Arc<Handle>>> {
        let core = &w.core;
        // Any source but the LIFO slot ends a run of consecutive LIFO polls.
        let t = self.find_work_inner(w);
        if !matches!(t, Some((_, true))) {
            core.lifo_polls.set(0);
        }
        t.map(|(t, _)| t)
    }

    /// `find_work`, also saying whether the task came from the LIFO slot.
    fn find_work_inner(&self, w: &Worker) -> Option<(Notified<Arc<Handle>>, bool)> {
        let core = &w.core;
        // 1. The periodic global check, when due (see the module doc for why it is here),
        //    or after a yield while the global queue holds work.
        let after_yield = core.yielded.replace(false) && !self.inject.is_empty();
        if after_yield || core.tick.get() % core.stats.interval() == 0 {
            if let Some(t) = self.fetch_global_batch(w) {
                return Some((t, false));
            }
        }
        // 2. The LIFO slot, at most MAX_LIFO_POLLS_PER_TICK times per tick.
        if let Some(t) = w.lifo.pop() {
            // SAFETY: the slot held a queue reference, now ours.
            let t = unsafe { Notified::from_raw(t) };
            if core.lifo_polls.get() < MAX_LIFO_POLLS_PER_TICK {
                core.lifo_polls.set(core.lifo_polls.get() + 1);
                self.metrics.on_lifo_hit(&w.rec);
                return Some((t, true));
            }
            self.push_local_ring(w, t);
        }
        // 3. The local ring.
        if let Some(t) = w.queue.pop() {
            return Some((t, false));
        }
        // 4. Steal.
        if let Some(t) = self.steal_work(w) {
            return Some((t, false));
        }
        // 5. The final global check.
        if let Some(t) = self.fetch_global_batch(w) {
            return Some((t, false));
        }
        // 6. The wakes held back (see "Deferred wakes"): their tasks land in the LIFO
        //    slot and the ring.
        if self.flush_deferred(w) {
            if let Some(t) = w.lifo.pop() {
                // SAFETY: the slot held a queue reference, now ours.
                return Some((unsafe { Notified::from_raw(t) }, false));
            }
            return w.queue.pop().map(|t| (t, false));
        }
        None
    }

    /// Take `clamp(len / workers, 4, 64)` tasks (fewer if the ring lacks room): one to run,
    /// the rest into the ring.
    fn fetch_global_batch(&self, w: &Worker) -> Option<Notified<Arc<Handle>>> {
        let len = self.inject.len();
        if len == 0 {
            // An empty queue lifts the backlog cap (`stats`).
            if w.core.stats.global_fetch(0, self.workers.len(), 0) {
                self.metrics.on_interval_changed(&w.rec, w.core.stats.ewma_task_ns(), w.core.stats.interval());
            }
            return None;
        }
        // At most what the ring has room for, keeping one slot for the task run now should
        // it yield: the periodic check can find the ring part full, and an overflow would
        // send half of it straight back to the global queue. At least one task even when
        // the ring is full, so the global queue is served. (Stealers only take from the
        // ring, so the room only grows.)
        let room = ((crate::scheduler::queue::CAPACITY - w.queue.len()) as usize).max(1);
        let n = (len / self.workers.len()).clamp(MIN_GLOBAL_BATCH, MAX_GLOBAL_BATCH).min(len).min(room);
        if w.core.stats.global_fetch(n, self.workers.len(), len - n) {
            self.metrics.on_interval_changed(&w.rec, w.core.stats.ewma_task_ns(), w.core.stats.interval());
        }
        let mut first = None;
        // `pop_n` calls this outside the global queue's lock, so an overflow of the ring
        // (which pushes to the global queue) can't deadlock.
        let got = self.inject.pop_n(n, |t| match first {
            None => first = Some(t),
            Some(_) => self.push_local_ring(w, t),
        });
        if got > 0 {
            self.metrics.on_global_batch(&w.rec);
        }
        // The rest of the batch is in the ring: see "Where a global batch goes".
        if got > 1 && !w.core.is_searching.get() {
            self.notify_parked();
        }
        first
    }

    fn steal_work(&self, w: &Worker) -> Option<Notified<Arc<Handle>>> {
        let core = &w.core;
        if !core.is_searching.get() {
            if !self.idle.transition_worker_to_searching() {
                return None;
            }
            core.is_searching.set(true);
            self.metrics.on_state(&w.rec, WorkerState::Searching);
        }
        let n = self.workers.len();
        if n == 1 {
            return None;
        }
        let mut rng = core.rng.get();
        let start = rng.fastrand_n(n as u32) as usize;
        core.rng.set(rng);
        for i in 0..n {
            let victim = (start + i) % n;
            if victim == w.index {
                continue;
            }
            if let Some((t, count)) = self.workers[victim].queue.steal_into(&w.queue) {
                self.metrics.on_steal(&w.rec, victim, count as u64, t.header().id);
                return Some(t);
            }
        }
        None
    }

    pub(super) fn run_task(&self, w: &Worker, task: Notified<Arc<Handle>>) {
        let core = &w.core;
        if core.is_searching.get() {
            // Rule 2: the last searcher to find work wakes the next one.
            core.is_searching.set(false);
            self.metrics.on_state(&w.rec, WorkerState::Running);
            if self.idle.transition_worker_from_searching() {
                self.notify_parked();
            }
        }
        core.tick.set(core.tick.get().wrapping_add(1));
        self.metrics.on_poll(&w.rec);
        // The poll hooks get the worker from here (`on_poll_start`), not from the thread-local.
        task.run_on((&w.rec as *const WorkerRecorder).cast());
    }

    /// On a worker's own thread as it exits: release the queue entries it holds. The
    /// tasks themselves are cancelled through the owned-task list.
    pub(crate) fn drain_local(&self, w: &Worker) {
        w.core.deferred.clear();
        if let Some(t) = w.lifo.pop() {
            // SAFETY: the slot held a queue reference, now ours.
            drop(unsafe { Notified::<Arc<Handle>>::from_raw(t) });
        }
        while let Some(t) = w.queue.pop() {
            drop(t);
        }
    }
}
