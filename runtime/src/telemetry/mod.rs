//! Telemetry, the always-on layer: per-worker counters written only by their owner with
//! relaxed atomics (a load and a store, no read-modify-write, no lock, no allocation),
//! and live gauges read straight from the scheduler's own atomics.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::runtime::Builder::new()
//!     .worker_threads(2)
//!     .event_ring(1024) // per-task statistics and the event ring: off by default
//!     .build()?;
//! let telemetry = rt.handle().telemetry();
//! rt.block_on(async {
//!     let (tx, rx) = volt::sync::oneshot::channel::<u32>();
//!     let waiter = volt::task::Builder::new().name("waiter").spawn(rx);
//!     volt::time::sleep(Duration::from_millis(20)).await;
//!     // Every live task: its name, its polls, and what it waits on (`recv oneshot`).
//!     for task in telemetry.tasks() {
//!         let name = task.name.unwrap_or_default();
//!         let wait = task.waiting_on.map(|w| w.to_string()).unwrap_or_default();
//!         println!("{name}: {} polls, waiting on {wait}", task.polls);
//!     }
//!     tx.send(7).unwrap();
//!     assert_eq!(waiter.await.unwrap(), Ok(7));
//! });
//! // The counters and gauges, read from any thread without stopping a worker.
//! let snap = telemetry.snapshot();
//! assert!(snap.tasks_spawned >= 1);
//! let polls: u64 = snap.workers.iter().map(|w| w.tasks_polled).sum();
//! println!("{} workers made {polls} polls; {} tasks alive", snap.workers.len(), snap.tasks_alive);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`Telemetry::snapshot`] reads everything from any thread without blocking a worker.
//! Each value is exact on its own; values read at slightly different instants may
//! disagree a little while the runtime is busy (a "torn" snapshot), and agree when it is
//! idle.

pub(crate) mod clock;
mod counter_list;
mod counters;
pub(crate) mod deadlock;
pub mod events;
pub(crate) mod groups;
mod histogram;
pub(crate) mod metrics;
pub(crate) mod record;
mod recorder;
mod resources;
pub(crate) mod samples;
mod snapshot;
pub(crate) mod stall;
mod task_info;
mod task_watch;
pub(crate) mod tasks;
pub(crate) mod view;
mod wait;

pub use counter_list::{WorkerCounter, WORKER_COUNTERS};
pub use counters::WorkerSnapshot;
pub(crate) use counters::{Counter, WorkerCounters};
pub use deadlock::{Deadlock, DeadlockWant, DeadlockedTask, HeldResource};
pub use events::{Event, EventCursor, EventDetail, EventKind, ScheduleTarget};
pub use groups::{TaskGroup, TaskGroupKind, MAX_TASK_GROUPS, OTHER_TASK_GROUP, SLOW_POLL_THRESHOLD};
pub use histogram::Histogram;
pub(crate) use recorder::Recorder;
pub use resources::{Resource, ResourceHolder, MAX_RESOURCES};
pub use snapshot::{BridgeSnapshot, Snapshot, WorkerState};
pub use stall::{MissingStack, StackFrame, Stall, StallCursor, STALL_HISTORY, STALL_STACK_DEPTH};
use task_info::{read_task, task_info, Holder};
pub use task_info::{TaskInfo, TaskRow, TaskState};
pub use task_watch::{TaskChanges, TaskStatisticsWatch, TaskWaits, TaskWatch};
pub use wait::{SyncHolder, SyncWait, WaitReason, WakeSource};

use metrics::Metrics;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use view::RuntimeView;

/// Counts made off the workers (spawns from other threads, tasks finished by shutdown).
/// Several threads write these, so they use `fetch_add`; none of them is on a hot path.
#[derive(Default)]
pub(crate) struct RemoteCounters {
    pub(crate) tasks_spawned: AtomicU64,
    pub(crate) tasks_completed: AtomicU64,
    pub(crate) tasks_cancelled: AtomicU64,
    pub(crate) tasks_panicked: AtomicU64,
    pub(crate) timers_armed: AtomicU64,
    pub(crate) timers_cancelled: AtomicU64,
    /// Timers the runtime's shutdown fired (the workers count the rest).
    pub(crate) timers_fired: AtomicU64,
}

/// The runtime's telemetry, from [`Handle::telemetry`](crate::runtime::Handle::telemetry).
#[derive(Clone)]
pub struct Telemetry {
    metrics: Arc<Metrics>,
    /// The runtime's own state, for the gauges and the task list.
    view: Arc<dyn RuntimeView>,
}

impl Telemetry {
    pub(crate) fn new(metrics: Arc<Metrics>, view: Arc<dyn RuntimeView>) -> Telemetry {
        Telemetry { metrics, view }
    }

    /// Time since the runtime was built. Event timestamps count from (about) the same
    /// instant.
    pub fn uptime(&self) -> std::time::Duration {
        self.metrics.started.elapsed()
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.metrics.num_workers()
    }

    /// The most workers that search for work at once (about half of them).
    pub fn max_searching(&self) -> usize {
        self.metrics.num_workers().div_ceil(2)
    }

    /// Events each worker's ring keeps; 0 when the event ring is off.
    pub fn event_ring_capacity(&self) -> usize {
        self.metrics.recorder.as_ref().map_or(0, |r| r.capacity())
    }

    /// Whether the runtime has begun shutting down (it was dropped, or `shutdown_timeout`
    /// was called). Samplers holding a `Telemetry` use it to stop.
    pub fn is_shut_down(&self) -> bool {
        self.view.is_shutdown()
    }

    /// The most recent stalls (at most [`STALL_HISTORY`]), oldest first: polls that ran
    /// past `Builder::stall_threshold`, each with its true length and the stack it was
    /// stuck in (see [`Stall`]), then any poll running past the threshold now
    /// (`Stall::ongoing`). Every stall `Snapshot::stalls_total` counts is here until
    /// newer ones push it out. Stacks are turned into function names and lines here, on
    /// the calling thread: the first call that has a stack to name loads the binary's
    /// debug info, once for the process.
    pub fn stalls(&self) -> Vec<Stall> {
        self.metrics.stall.history(&self.metrics, &|id| self.task_name(id))
    }

    /// The polls running past the stall threshold now, as ongoing stalls
    /// (`Stall::ongoing`), their stacks named as [`Telemetry::stalls`] names them. With
    /// [`Telemetry::stall_cursor`], for a reader that shows each stall once as it ends
    /// and the ones still going on meanwhile.
    pub fn stalls_ongoing(&self) -> Vec<Stall> {
        self.metrics.stall.running(&self.metrics, &|id| self.task_name(id))
    }

    /// The task groups: the tasks of each name (unnamed tasks: of each spawn location)
    /// added up, at most [`MAX_TASK_GROUPS`] of them and [`OTHER_TASK_GROUP`] for the
    /// rest, in the order they were made (see [`TaskGroup`]). Empty unless the runtime
    /// keeps task statistics (`Builder::event_ring`), as for [`Telemetry::tasks`]. It
    /// reads each group's figures on each worker, whatever the number of tasks; never
    /// blocks a worker.
    ///
    /// ```
    /// let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    /// rt.block_on(async {
    ///     for _ in 0..3 {
    ///         volt::task::Builder::new().name("job").spawn(async {}).await.unwrap();
    ///     }
    /// });
    /// let groups = rt.handle().telemetry().task_groups();
    /// let job = groups.iter().find(|g| g.name == "job").unwrap();
    /// assert_eq!((job.spawned, job.completed, job.alive), (3, 3, 0));
    /// ```
    pub fn task_groups(&self) -> Vec<TaskGroup> {
        let Some(r) = &self.metrics.recorder else { return Vec::new() };
        r.groups.read(self.metrics.workers().filter_map(|c| c.groups.as_deref()))
    }

    /// The deadlocks among the live tasks: cycles of tasks each waiting on the next
    /// (locking a `volt::sync::Mutex`, an `RwLock` or a `OnceCell` another task of the
    /// cycle holds, or joining another task of the cycle), which none of them can leave.
    /// Each is listed once, with its tasks by id, what each holds and what it wants (see
    /// [`Deadlock`]), for as long as it lasts; [`Snapshot::deadlocks_total`] counts each
    /// once.
    ///
    /// A cycle is reported only once two consecutive readings of the wait-for graph found
    /// it with none of its tasks polled in between (a false report is worse than a late
    /// one). Readings are taken by this call, on the calling thread, at most once every
    /// 250 ms (a call between them returns the last reading's answer); a call after more
    /// than a second without one takes two readings 50 ms apart, so a deadlock that has
    /// formed is reported by a single call (from inside a task, which must not sleep, by
    /// the next call). Each reading walks the task list as [`Telemetry::tasks`] does,
    /// without blocking a worker. Empty unless the runtime keeps task statistics
    /// (`Builder::event_ring`).
    ///
    /// A wait on a `Semaphore`, a `Notify`, a `Barrier`, an `RwLock` held by readers, or
    /// a lock held outside any task is never part of a cycle: nothing names which task
    /// would release it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    /// let (a, b) = (Arc::new(volt::sync::Mutex::new(())), Arc::new(volt::sync::Mutex::new(())));
    /// for (first, second) in [(a.clone(), b.clone()), (b, a)] {
    ///     rt.spawn(async move {
    ///         let _g = first.lock().await;
    ///         volt::time::sleep(Duration::from_millis(50)).await;
    ///         let _h = second.lock().await;
    ///     });
    /// }
    /// let t = rt.handle().telemetry();
    /// let start = std::time::Instant::now();
    /// while t.deadlocks().is_empty() && start.elapsed() < Duration::from_secs(10) {
    ///     std::thread::sleep(Duration::from_millis(100));
    /// }
    /// assert_eq!(t.deadlocks()[0].tasks.len(), 2);
    /// ```
    pub fn deadlocks(&self) -> Vec<Deadlock> {
        match &self.metrics.recorder {
            Some(r) => r.deadlocks.check(self),
            None => Vec::new(),
        }
    }

    /// Read every counter and gauge. Lock-free; never blocks a worker.
    pub fn snapshot(&self) -> Snapshot {
        let m = &self.metrics;
        // A poll running past the stall threshold now is a stall already: count it.
        m.stall.count_running(m);
        let mut snap = Snapshot {
            tasks_spawned: m.remote.tasks_spawned.load(Relaxed),
            tasks_completed: m.remote.tasks_completed.load(Relaxed),
            tasks_cancelled: m.remote.tasks_cancelled.load(Relaxed),
            tasks_panicked: m.remote.tasks_panicked.load(Relaxed),
            timers_armed: m.remote.timers_armed.load(Relaxed),
            timers_cancelled: m.remote.timers_cancelled.load(Relaxed),
            timers_fired: m.remote.timers_fired.load(Relaxed),
            deadlocks_total: m.recorder.as_ref().map_or(0, |r| r.deadlocks.total()),
            ..Snapshot::default()
        };
        self.view.fill_gauges(&mut snap);
        for (index, c) in m.workers().enumerate() {
            let g = self.view.worker_gauges(index);
            c.add_totals(&mut snap);
            snap.workers.push(c.snapshot(index, g.queue_depth, g.lifo_occupied, g.cell_cache_bytes));
            c.histograms.park_duration.add_to(&mut snap.park_duration_histogram);
            c.histograms.steal_batch.add_to(&mut snap.steal_batch_histogram);
            c.histograms.schedule_latency.add_to(&mut snap.schedule_latency_histogram);
        }
        if let Some(r) = &m.recorder {
            for ring in r.rings.iter() {
                let written = ring.written();
                snap.events_recorded += written;
                snap.events_overwritten += written.saturating_sub(ring.capacity());
            }
        }
        let finished = snap.tasks_completed + snap.tasks_cancelled + snap.tasks_panicked;
        snap.tasks_alive = snap.tasks_spawned.saturating_sub(finished);
        snap.stalls_total = snap.workers.iter().map(|w| w.stalls).sum();
        snap.timers_pending = snap.timers_armed.saturating_sub(snap.timers_fired + snap.timers_cancelled);
        snap
    }

    /// Worker `index`'s sleeps begun plus sleeps ended (odd while it sleeps), read
    /// without a whole snapshot; `None` past the last worker.
    pub(crate) fn worker_park_unpark_count(&self, index: usize) -> Option<u64> {
        self.metrics.workers().nth(index).map(|c| c.park_unpark_count())
    }
}

impl Telemetry {
    /// The live tasks, with their statistics; empty unless the runtime records events
    /// (`Builder::event_ring`). Takes each owned-list shard lock briefly, as spawn and
    /// completion do: a worker waits on it for at most one batch of 64 tasks, never for
    /// a whole shard's walk.
    pub fn tasks(&self) -> Vec<TaskInfo> {
        let mut out = Vec::new();
        let now_ns = self.now_ns();
        self.for_each_task_stats(|row, name, st| out.push(task_info(&row, name, st, now_ns)));
        out.sort_by_key(|t| t.id);
        wait::name_holders(&mut out);
        out
    }

    /// How many live tasks can never be woken again ([`TaskInfo::lost_waker`]): a walk
    /// of the task list reading each task's state word, so a few milliseconds at a
    /// million tasks. 0 when the runtime keeps no task statistics.
    pub fn lost_wakers(&self) -> u64 {
        let mut n = 0;
        self.for_each_lost_waker(|_| n += 1);
        n
    }

    /// The ids of the live tasks [`Telemetry::lost_wakers`] counts, by the same walk, in
    /// no particular order.
    pub fn lost_waker_ids(&self) -> Vec<u64> {
        let mut ids = Vec::new();
        self.for_each_lost_waker(|id| ids.push(id));
        ids
    }

    fn for_each_lost_waker(&self, mut f: impl FnMut(u64)) {
        self.for_each_task(|row, _| {
            if row.lost_waker {
                f(row.id);
            }
        });
    }

    /// One live task, by id (`None`: no such live task, or tasks are not recorded). It
    /// walks only the id's shard of the task list, up to the task, a batch per hold of
    /// its lock: a client asking for tasks in a loop must not hold up the workers'
    /// spawns and completions.
    pub fn task(&self, id: u64) -> Option<TaskInfo> {
        let rec = self.metrics.recorder.as_ref()?;
        let (now, now_ns) = (rec.clock.raw(), self.now_ns());
        self.view
            .tasks()
            .with_task(id, |t| {
                let (row, name) = read_task(rec, now, t, Holder::Walk)?;
                let st = crate::task::stats::stats(t)?;
                (row.state != TaskState::Complete).then(|| task_info(&row, name, st, now_ns))
            })
            .flatten()
    }

    /// How many shards the task list has: [`Telemetry::task`] walks one of them, so a
    /// lookup visits about [`Telemetry::task_list_len`] divided by this many tasks.
    pub fn task_list_shards(&self) -> usize {
        self.view.tasks().shards()
    }

    /// How many tasks the task list holds now: what a walk of it visits
    /// ([`Telemetry::tasks`], [`Telemetry::for_each_task`], [`Telemetry::lost_wakers`]).
    /// Finished tasks count until they leave the list.
    pub fn task_list_len(&self) -> u64 {
        self.view.tasks().len() as u64
    }

    /// A live task's name, by id (as [`Telemetry::task`], one shard's walk).
    pub(crate) fn task_name(&self, id: u64) -> Option<String> {
        self.task(id)?.name
    }

    /// Visit every live task (unordered) as one reading finds it, with its name: a walk of
    /// the task list that, as [`Telemetry::tasks`], holds each shard's lock for a batch of
    /// tasks at a time, never for a whole shard, and copies no name. A task that has
    /// finished but not yet left the list comes with state [`TaskState::Complete`].
    /// Nothing when the runtime keeps no task statistics (`Builder::event_ring`).
    pub fn for_each_task(&self, mut f: impl FnMut(TaskRow, Option<&str>)) {
        self.for_each_task_stats(|row, name, _| f(row, name))
    }

    fn for_each_task_stats(&self, mut f: impl FnMut(TaskRow, Option<&str>, &crate::task::stats::TaskStats)) {
        let Some(rec) = &self.metrics.recorder else { return };
        let now = rec.clock.raw();
        self.view.tasks().for_each(|t| {
            // The walk holds a reference to the task while `f` reads it.
            if let Some((row, name)) = read_task(rec, now, t, Holder::Walk) {
                if let Some(st) = crate::task::stats::stats(t) {
                    f(row, name, st);
                }
            }
        });
    }

    /// Nanoseconds since the runtime started, on the clock that stamps events
    /// ([`Event::timestamp_ns`]) and task rows ([`TaskRow::last_poll_end_ns`]): the "now"
    /// to measure those against. 0 when the runtime keeps no event ring
    /// (`Builder::event_ring`), which is when nothing carries such a stamp.
    pub fn now_ns(&self) -> u64 {
        self.metrics.recorder.as_ref().map_or(0, |r| r.clock.since_start_ns(r.clock.raw()))
    }

    /// A cursor over the event ring: each [`EventCursor::read`] returns the events since
    /// the previous one, merged across workers in time order. Its first read starts at
    /// the oldest record each ring still holds: records overwritten before the cursor
    /// existed were never its to miss, so they do not count in [`EventCursor::dropped`].
    /// Without `Builder::event_ring` it never yields anything.
    pub fn events(&self) -> EventCursor {
        EventCursor::new(Arc::clone(&self.metrics))
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("workers", &self.metrics.num_workers()).finish()
    }
}
