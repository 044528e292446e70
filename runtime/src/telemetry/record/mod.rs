//! The recording methods: one method per event, each writing everything the
//! event feeds (the counters, the histograms, the event ring, the live-task change log and
//! the `tracing` event) in one place. Nothing else in the scheduler touches those.
//!
//! # Counters
//! On a worker, an event counts in that worker's own counters (`WorkerCounters`): one
//! writer, so a relaxed load and store, no read-modify-write. Off the workers (a spawn
//! from `block_on`, a task cancelled by shutdown, a timer armed from a pool thread) it
//! counts in the runtime's `RemoteCounters` with `fetch_add`. [`Metrics::count`] makes
//! that choice, for every counter an event can bump from either side. The scheduler
//! passes the worker's own part ([`WorkerRecorder`], `None` off the workers) to each
//! method; nothing here reads the scheduler's state.
//!
//! # Timestamps
//! When the runtime times polls, each worker keeps its last clock reading
//! (`WorkerRecorder::last_ts`).
//! A poll starts where the last reading left off, and records made inside a poll carry it
//! too (their order is their position in the ring): one clock read per poll, not two.
//! Events between polls (a steal, a park, an unpark, a driver pass, a global batch whose
//! tasks other threads queued) take a fresh reading, so the time between polls is not
//! counted in the next one. Off the workers every record reads the clock.
//!
//! # The poll hooks
//! `on_poll_start`, `on_poll_end` and `on_poll_outcome` keep clock-dependent stores away
//! from the state transition that follows a poll. That transition is a locked
//! instruction, which on x86 waits until every earlier store has reached the cache; a
//! store whose value comes from the clock (through `rdtsc`'s latency, and for a histogram
//! through a multiply and a bit scan to its bucket's address) would hold it up for dozens
//! of cycles on every poll. So `on_poll_end` writes only what must be written while this
//! thread still owns the task (its stats), and the worker-owned parts (histograms, the
//! cached clock reading, the record) wait for `on_poll_outcome`, after the transition.
//!
//! The methods on the hot paths are `#[inline(always)]`: the seam adds no call and no
//! load to the paths it sits on.
//!
//! Without the event ring, one wake in eight feeds the schedule-latency histogram: see
//! `samples`.

mod poll;

use crate::task::header::Header;
use crate::task::schedule::Outcome;
use crate::telemetry::events::{self, Clock, EventKind, EventRing, SCHEDULE_GLOBAL, SCHEDULE_LIFO};
use crate::telemetry::groups::{GroupEvent, GroupId};
use crate::telemetry::metrics::Metrics;
use crate::telemetry::samples::{SCHEDULE_SAMPLE_EVERY, WAKES};
use crate::telemetry::stall::slot::Running;
use crate::telemetry::{Counter, Recorder, RemoteCounters, WorkerCounters, WorkerState};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// A worker's own part of telemetry: its index, its counters (in the runtime's
/// [`Metrics`]), and what only its thread touches: its last clock reading, the clock's
/// scale and the stall check (copies, in the worker's own line, for the compare and the
/// multiply every poll's end makes), and its event ring.
pub(crate) struct WorkerRecorder {
    pub(crate) index: usize,
    counters: NonNull<WorkerCounters>,
    /// The worker's last clock reading (when the runtime times polls): the next poll's
    /// start, and the time of records made inside it (see `telemetry::events`).
    pub(crate) last_ts: Cell<u64>,
    /// The clock's nanoseconds per tick (32.32 fixed point), for the histograms: a copy
    /// of `Metrics::clock`'s, because `on_poll_outcome` has the worker but no `&Metrics`.
    pub(crate) ns_per_tick_fp: u64,
    /// A poll at least this long (in clock ticks) is looked at as a possible stall at
    /// its end (`StallMonitor::end_check_ticks`; `u64::MAX` without a threshold).
    pub(crate) stall_check_ticks: u64,
    /// This worker's event ring (null when the ring is off): one load in `on_poll_start`
    /// instead of finding it through `Metrics::recorder` on every poll. Set by
    /// `on_worker_start`, once the runtime is in its `Arc` and the recorder's `Box`
    /// never moves again (taken before, the pointer would be invalidated by that move;
    /// Miri's Stacked Borrows check reports it).
    pub(crate) ring: Cell<*const EventRing>,
}

// SAFETY: the counters are atomics behind a pointer into the runtime's `Metrics` (see
// `WorkerRecorder::counters`); the `Cell`s and the ring pointer are touched only by the
// worker's owning thread (the scheduler reaches a worker's recorder only from that
// thread, as it does the worker's `Core`), never by two threads at once.
unsafe impl Sync for WorkerRecorder {}
// SAFETY: as above; the ring pointer points into the same `Metrics` wherever the
// recorder is moved.
unsafe impl Send for WorkerRecorder {}

impl WorkerRecorder {
    /// Worker `index`'s, with its counters in `metrics`.
    pub(crate) fn new(index: usize, metrics: &Metrics) -> WorkerRecorder {
        WorkerRecorder {
            index,
            counters: NonNull::from(metrics.worker(index)),
            last_ts: Cell::new(0),
            ns_per_tick_fp: metrics.ns_per_tick_fp(),
            stall_check_ticks: metrics.stall.end_check_ticks(),
            ring: Cell::new(ptr::null()),
        }
    }

    /// This worker's counters (written by its owner, read by anyone).
    #[inline(always)]
    pub(crate) fn counters(&self) -> &WorkerCounters {
        // SAFETY: the pointer is to this worker's entry of the runtime's `Metrics`, whose
        // counters live in a boxed slice that never moves; the runtime holds that
        // `Metrics` for as long as it holds its workers (and with them this recorder).
        // The counters are atomics, used only through shared references.
        unsafe { self.counters.as_ref() }
    }
}

impl Metrics {
    // ---- Clock and ring helpers --------------------------------------------------------

    /// A fresh clock reading; on a worker it also becomes the worker's cached one.
    #[inline(always)]
    fn ts_fresh(&self, clock: &Clock, w: Option<&WorkerRecorder>) -> u64 {
        let t = clock.raw();
        if let Some(w) = w {
            w.last_ts.set(t);
        }
        t
    }

    /// The worker's cached reading, or a fresh one off the workers.
    #[inline(always)]
    fn ts_cached(&self, rec: &Recorder, w: Option<&WorkerRecorder>) -> u64 {
        match w {
            Some(w) => w.last_ts.get(),
            None => rec.clock().raw(),
        }
    }

    /// Record an event (cached timestamp on a worker; `None`: not a worker) if the ring is on.
    #[inline(always)]
    fn record_on(&self, w: Option<&WorkerRecorder>, kind: EventKind, task_id: u64, arg: u64) {
        if let Some(r) = &self.recorder {
            r.record_at(w.map(|w| w.index), kind, task_id, arg, self.ts_cached(r, w));
        }
    }

    /// Record an event between polls on worker `w` with a fresh timestamp. With polls
    /// timed but no ring, just take the fresh reading.
    #[inline(always)]
    fn record_fresh(&self, w: &WorkerRecorder, kind: EventKind, task_id: u64, arg: u64) {
        let Some(clock) = &self.clock else { return };
        let t = self.ts_fresh(clock, Some(w));
        if let Some(r) = &self.recorder {
            r.record_at(Some(w.index), kind, task_id, arg, t);
        }
    }

    /// Note in the live-task change log that `task` changed (only while a reader
    /// watches: otherwise one relaxed load). The caller holds a reference to the task.
    #[inline(always)]
    fn mark_changed(&self, r: &Recorder, task: NonNull<Header>, w: Option<&WorkerRecorder>) {
        if r.changes.watching() {
            if let Some(st) = crate::task::stats::stats(task) {
                r.changes.mark(task, &st.queued, w.map(|w| w.index));
            }
        }
    }

    /// Where a spawn or wake queues the task, as the ring records it: the worker's LIFO
    /// slot, or (`global`: off the workers, or a worker on its way to park) the global
    /// queue.
    #[inline(always)]
    fn schedule_target(global: bool) -> u64 {
        if global {
            SCHEDULE_GLOBAL
        } else {
            SCHEDULE_LIFO
        }
    }

    /// Count one event in `w`'s counter, or in the runtime's remote one off the workers.
    #[inline(always)]
    fn count(
        &self,
        w: Option<&WorkerRecorder>,
        local: fn(&WorkerCounters) -> &Counter,
        remote: fn(&RemoteCounters) -> &AtomicU64,
    ) {
        match w {
            Some(w) => local(w.counters()).inc(),
            None => {
                remote(&self.remote).fetch_add(1, Relaxed);
            }
        }
    }

    /// Count one event in a task group: in `w`'s own cells, or the runtime's remote ones
    /// off the workers (see `telemetry::groups`).
    #[inline(always)]
    fn count_in_group(&self, w: Option<&WorkerRecorder>, group: Option<GroupId>, event: GroupEvent) {
        if let (Some(r), Some(g)) = (&self.recorder, group) {
            r.groups.count(w.and_then(|w| w.counters().groups.as_deref()), g, event);
        }
    }

    /// Take a fresh clock reading on `w` (when polls are timed): what happened since the
    /// last poll (a driver pass, the start of the loop) is not part of the next one.
    #[inline(always)]
    pub(crate) fn refresh_clock(&self, w: &WorkerRecorder) {
        if let Some(c) = &self.clock {
            self.ts_fresh(c, Some(w));
        }
    }

    // ---- Tasks -------------------------------------------------------------------------

    /// The timestamp a spawn records and queues its task with (0 with the ring off).
    #[inline(always)]
    pub(crate) fn spawn_timestamp(&self, w: Option<&WorkerRecorder>) -> u64 {
        self.recorder.as_ref().map_or(0, |r| self.ts_cached(r, w))
    }

    /// A task was spawned (`now`: `spawn_timestamp`; `group`: its task group, with task
    /// statistics; `global`: it goes to the global queue).
    #[inline(always)]
    pub(crate) fn on_spawn(&self, w: Option<&WorkerRecorder>, id: u64, now: u64, group: Option<GroupId>, global: bool) {
        if let Some(r) = &self.recorder {
            // One record for the spawn and where it is queued (the reader expands it).
            let arg = w.is_none() as u64 | (Self::schedule_target(global) << 1);
            r.record_at(w.map(|w| w.index), EventKind::Spawn, id, arg, now);
        }
        #[cfg(feature = "tracing")]
        tracing::trace_span!(target: "volt::task", "spawn", task.id = id, remote = w.is_none())
            .in_scope(|| tracing::trace!(target: "volt::task", "spawned"));
        self.count(w, |c| &c.tasks_spawned, |c| &c.tasks_spawned);
        self.count_in_group(w, group, GroupEvent::Spawned);
    }

    /// `task` changed in a way a reader of the task list should see (bound, released).
    #[inline(always)]
    pub(crate) fn on_task_changed(&self, task: NonNull<Header>, w: Option<&WorkerRecorder>) {
        if let Some(r) = &self.recorder {
            self.mark_changed(r, task, w);
        }
    }

    /// A complete task leaves the owned list (`w`: this thread's worker, if it is one of
    /// this runtime's): a reader of the task list learns it is gone.
    #[inline(always)]
    pub(crate) fn on_release(&self, task: NonNull<Header>, w: Option<&WorkerRecorder>) {
        if let Some(r) = &self.recorder {
            self.mark_changed(r, task, w);
        }
    }

    /// A woken task starts waiting in a queue: note when (schedule latency, the task's
    /// scheduled time) and record where.
    #[inline(always)]
    pub(crate) fn on_schedule(&self, w: Option<&WorkerRecorder>, task: NonNull<Header>, global: bool) {
        // Without the task's statistics (no ring, or nobody watching), a sample of the
        // wakes measures the schedule latency.
        let stats = self.recorder.as_ref().is_some_and(|r| r.stats_on());
        if !stats {
            if let Some(clock) = &self.clock {
                let n = WAKES.with(|c| {
                    let n = c.get().wrapping_add(1);
                    c.set(n);
                    n
                });
                if n % SCHEDULE_SAMPLE_EVERY == 0 {
                    // SAFETY: the caller holds a reference to the task.
                    let h = unsafe { task.as_ref() };
                    // A fresh reading: the waker may be far from its last poll.
                    self.schedule_samples.put(h.id, clock.raw());
                    h.state.set_sampled();
                }
            }
        }
        if let Some(r) = &self.recorder {
            let target = Self::schedule_target(global);
            let now = self.ts_cached(r, w);
            let source = crate::task::wait::wake_source();
            if let Some(st) = crate::task::stats::stats(task) {
                if stats {
                    st.scheduled_at.store(now.max(1), Relaxed);
                    st.woken_by.store(source + 1, Relaxed);
                    st.woken_at.store(now.max(1), Relaxed);
                }
                if r.changes.watching() {
                    r.changes.mark(task, &st.queued, w.map(|w| w.index));
                }
            }
            // SAFETY: the caller holds a reference to the task.
            let id = unsafe { task.as_ref() }.id;
            let arg = target | source << events::SCHEDULE_SOURCE_SHIFT;
            r.record_at(w.map(|w| w.index), EventKind::Schedule, id, arg, now);
        }
    }

    /// A task finished (on this thread's worker, if any); `group`: its task group, with
    /// task statistics.
    #[inline(always)]
    pub(crate) fn on_complete(&self, w: Option<&WorkerRecorder>, id: u64, outcome: Outcome, group: Option<GroupId>) {
        self.count_in_group(w, group, GroupEvent::Ended(outcome));
        match outcome {
            // Only a poll completes a task, and its `PollEnd` record (outcome ready)
            // stands for the `Complete` too: the reader expands it.
            Outcome::Completed => self.count(w, |c| &c.tasks_completed, |c| &c.tasks_completed),
            Outcome::Cancelled => {
                self.record_on(w, EventKind::Cancel, id, 0);
                self.count(w, |c| &c.tasks_cancelled, |c| &c.tasks_cancelled);
            }
            Outcome::Panicked => {
                self.record_on(w, EventKind::Panic, id, 0);
                self.count(w, |c| &c.tasks_panicked, |c| &c.tasks_panicked);
            }
        }
    }

    // ---- Timers and I/O ----------------------------------------------------------------

    /// A timer was armed (`w`: this thread's worker, if it is one of this runtime's).
    pub(crate) fn on_timer_armed(&self, w: Option<&WorkerRecorder>) {
        self.count(w, |c| &c.timers_armed, |c| &c.timers_armed);
    }

    /// A timer was dropped before it fired.
    pub(crate) fn on_timer_cancelled(&self, w: Option<&WorkerRecorder>) {
        self.count(w, |c| &c.timers_cancelled, |c| &c.timers_cancelled);
    }

    /// A driver pass on `w` delivered I/O events and fired timers.
    #[inline(always)]
    pub(crate) fn on_dispatched(&self, w: &WorkerRecorder, io_events: u64, timers_fired: u64) {
        if io_events > 0 {
            w.counters().io_events.add(io_events);
        }
        if timers_fired > 0 {
            w.counters().timers_fired.add(timers_fired);
        }
    }

    // ---- The run loop ------------------------------------------------------------------

    /// Worker `w` starts its loop on this thread.
    pub(crate) fn on_worker_start(&self, w: &WorkerRecorder) {
        w.counters().set_state(WorkerState::Running);
        w.ring.set(self.recorder.as_ref().map_or(ptr::null(), |r| r.ring(w.index)));
        self.refresh_clock(w);
    }

    /// Worker `w` left its loop for good.
    pub(crate) fn on_worker_exit(&self, w: &WorkerRecorder) {
        if let Some(r) = &self.recorder {
            // The console stopped before the workers were told to exit, so no reader
            // drains this ring any more.
            r.changes.release_ring(w.index);
        }
    }

    /// Worker `w`'s state changed (running, searching, parked).
    #[inline(always)]
    pub(crate) fn on_state(&self, w: &WorkerRecorder, s: WorkerState) {
        w.counters().set_state(s);
    }

    /// `w` is about to poll a task. `tasks_polled` is counted in every build: it numbers
    /// the polls for the stall machinery, and other workers read it to tell a worker stuck
    /// in one poll. The poll's start (the worker's last clock reading, which the poll
    /// hooks take as its start too) and the task go to the worker's stall slot first.
    #[inline(always)]
    pub(crate) fn on_poll(&self, w: &WorkerRecorder) {
        w.counters().tasks_polled.inc_always();
    }

    /// A poll (or a stretch of one) on `w` of the task at `ptr`, which may be a stall,
    /// ended at clock reading `end`: its report if it is one (see `telemetry::stall`).
    /// While the poller still owns the task, so its name can be read.
    #[cold]
    #[inline(never)]
    fn on_long_poll(&self, w: &WorkerRecorder, ptr: NonNull<Header>, r: Running, end: u64) -> Option<Duration> {
        let name = crate::task::stats::stats(ptr).and_then(|st| st.name.as_deref());
        self.stall.report(w.index, r, end, name, &w.counters().stalls)
    }

    /// A poll of task `task_id` held worker `worker` for `held`, up to clock reading `at`
    /// (recorded by that worker, into its own ring, or by the thread that gave the worker
    /// away in a blocking join).
    fn on_stall(&self, w: Option<&WorkerRecorder>, task_id: u64, worker: usize, held: Duration, at: u64) {
        if let Some(r) = &self.recorder {
            let us = (held.as_micros() as u64).min(events::STALL_US_MASK);
            r.record_at(
                w.map(|w| w.index),
                EventKind::Stall,
                task_id,
                (worker as u64) << events::STALL_WORKER_SHIFT | us,
                at,
            );
        }
        #[cfg(feature = "tracing")]
        tracing::warn!(target: "volt::scheduler", worker, task.id = task_id, ?held, "stall");
    }

    /// The poll running on `w` stops holding the worker: a blocking join in it runs
    /// another task inline or gives the worker away. If it was a stall so far, it is
    /// reported now; the next poll starts from this moment, not from the last reading.
    pub(crate) fn on_poll_interrupted(&self, w: &WorkerRecorder) {
        let Some(clock) = &self.clock else { return };
        let now = self.ts_fresh(clock, Some(w));
        if let Some((task, held)) = self.stall.interrupt_poll(w.index, now, &w.counters().stalls) {
            self.on_stall(Some(w), task, w.index, held, now);
        }
    }

    /// The poll of task `task` that a blocking join interrupted on `w` goes on holding
    /// the worker (the task the join ran inline has returned, or the worker could not
    /// be handed off): from now on, a stretch of its own.
    pub(crate) fn on_poll_resumed(&self, w: &WorkerRecorder, task: u64) {
        let Some(clock) = &self.clock else { return };
        let now = self.ts_fresh(clock, Some(w));
        self.stall.poll_begins(w.index, task, now);
    }

    /// `w` took a task from its LIFO slot.
    #[inline(always)]
    pub(crate) fn on_lifo_hit(&self, w: &WorkerRecorder) {
        w.counters().lifo_hits.inc();
    }

    /// A budget tick used its whole budget.
    #[inline(always)]
    pub(crate) fn on_budget_yield(&self, w: &WorkerRecorder) {
        w.counters().budget_yields.inc();
    }

    /// `w`'s ring overflowed: `moved` tasks went to the global queue.
    #[inline(always)]
    pub(crate) fn on_overflow(&self, w: &WorkerRecorder, moved: u64) {
        #[cfg(feature = "tracing")]
        tracing::debug!(target: "volt::scheduler", worker = w.index, moved, "overflow");
        w.counters().overflows.inc();
        self.record_on(Some(w), EventKind::Overflow, 0, moved);
    }

    /// `w` fetched a non-empty batch from the global queue.
    #[inline(always)]
    pub(crate) fn on_global_batch(&self, w: &WorkerRecorder) {
        w.counters().global_batch_fetches.inc();
        // These tasks were queued by other threads, maybe after this worker's last clock
        // reading, which its next poll's start would carry: read the clock now, so that
        // start never comes before the spawn or wake that queued the task.
        if let Some(r) = &self.recorder {
            self.ts_fresh(r.clock(), Some(w));
        }
    }

    /// `w` stole `count` tasks from `victim` (`task`: the one it runs first).
    pub(crate) fn on_steal(&self, w: &WorkerRecorder, victim: usize, count: u64, task: u64) {
        w.counters().steal_operations.inc();
        w.counters().tasks_stolen.add(count);
        w.counters().histograms.steal_batch.record(count);
        self.record_fresh(w, EventKind::Steal, task, (victim as u64) << 32 | count);
        #[cfg(feature = "tracing")]
        tracing::trace!(target: "volt::scheduler", worker = w.index, victim, count, "steal");
    }

    /// `w` goes to sleep at `since` (`in_reactor`: blocking in the reactor; `watching`:
    /// with the watcher's timeout).
    pub(crate) fn on_park(&self, w: &WorkerRecorder, in_reactor: bool, watching: bool, since: Instant) {
        w.counters().park_started(since);
        self.record_fresh(w, EventKind::Park, 0, in_reactor as u64);
        #[cfg(feature = "tracing")]
        tracing::trace!(target: "volt::scheduler", worker = w.index, in_reactor, watching, "park");
        #[cfg(not(feature = "tracing"))]
        let _ = watching;
    }

    /// `w` woke (`notified`: by another thread, not a timeout or I/O) from the sleep that
    /// `on_park` began.
    pub(crate) fn on_unpark(&self, w: &WorkerRecorder, notified: bool) {
        self.record_fresh(w, EventKind::Unpark, 0, notified as u64);
        #[cfg(feature = "tracing")]
        tracing::trace!(target: "volt::scheduler", worker = w.index, notified, "unpark");
        w.counters().times_parked.inc();
        let parked_ns = w.counters().park_ended();
        w.counters().histograms.park_duration.record(parked_ns);
    }

    /// Publish `w`'s EWMA and global-queue interval (the scheduler's own values, see
    /// `stats`) to its gauges.
    #[inline(always)]
    pub(crate) fn on_interval_changed(&self, w: &WorkerRecorder, ewma_task_ns: u64, interval: u32) {
        w.counters().ewma_task_ns.store(ewma_task_ns, Relaxed);
        w.counters().global_queue_interval.store(interval, Relaxed);
    }

    /// A blocking join on `w`'s thread gives the worker away: the joining poll's start
    /// goes out now, so the new owner's records follow it in the ring.
    pub(crate) fn on_hand_off(&self, w: &WorkerRecorder) {
        let ring = w.ring.get();
        if !ring.is_null() {
            // SAFETY: this worker's ring (see `Core::ring`); we are its owner.
            unsafe { (*ring).flush_pending_start() };
        }
        // The worker stops waiting in this poll, and this thread stops being its thread.
        self.on_poll_interrupted(w);
        self.stall.leave_thread();
    }
}
