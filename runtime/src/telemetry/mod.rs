//! Telemetry, the always-on layer: per-worker counters written only by their owner with
//! relaxed atomics (a load and a store, no read-modify-write, no lock, no allocation),
//! and live gauges read straight from the scheduler's own atomics.
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
mod resources;
pub(crate) mod stall;
mod task_watch;
pub(crate) mod tasks;
mod wait;

pub use counter_list::{WorkerCounter, WORKER_COUNTERS};
pub use counters::WorkerSnapshot;
pub(crate) use counters::{Counter, WorkerCounters};
pub use deadlock::{Deadlock, DeadlockWant, DeadlockedTask, HeldResource};
pub use events::{Event, EventCursor, EventDetail, EventKind, ScheduleTarget};
pub use groups::{TaskGroup, TaskGroupKind, MAX_TASK_GROUPS, OTHER_TASK_GROUP, SLOW_POLL_THRESHOLD};
pub use histogram::Histogram;
pub use resources::{Resource, ResourceHolder, MAX_RESOURCES};
pub use stall::{MissingStack, StackFrame, Stall, StallCursor, STALL_HISTORY, STALL_STACK_DEPTH};
pub use task_watch::{TaskChanges, TaskWaits, TaskWatch};
pub use wait::{SyncHolder, SyncWait, WaitReason, WakeSource};

use crate::runtime::handle::Shared;
use clock::Clock;
use events::{EventRing, Raw};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

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

/// What a worker is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WorkerState {
    /// Running tasks (or between tasks).
    #[default]
    Running = 0,
    /// Looking for work to steal.
    Searching = 1,
    /// Asleep on its futex.
    Parked = 2,
}

/// The whole runtime, as read by [`Telemetry::snapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerSnapshot>,
    /// Tasks in the global injection queue.
    pub global_queue_depth: u64,
    /// Workers searching for work.
    pub num_searching: u32,
    /// Workers parked.
    pub num_parked: u32,
    /// Bit `i` set while worker `i` is parked.
    pub parked_bitmap: u64,
    /// Tasks spawned.
    pub tasks_spawned: u64,
    /// Tasks spawned and not yet finished.
    pub tasks_alive: u64,
    /// Tasks that returned their output.
    pub tasks_completed: u64,
    /// Tasks aborted or dropped by shutdown.
    pub tasks_cancelled: u64,
    /// Tasks that panicked.
    pub tasks_panicked: u64,
    /// Timers armed (a `Sleep` registered with the wheel).
    pub timers_armed: u64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// Timers dropped before they fired.
    pub timers_cancelled: u64,
    /// Timers armed and neither fired nor dropped.
    pub timers_pending: u64,
    /// I/O readiness events delivered by the reactor.
    pub io_events: u64,
    /// Park durations in nanoseconds, all workers.
    pub park_duration_histogram: Histogram,
    /// Tasks per successful steal, all workers.
    pub steal_batch_histogram: Histogram,
    /// Wake-to-poll latency in nanoseconds, all workers: every wake with the event ring
    /// on; without it one wake in eight, sampled (none if polls are not timed either:
    /// `poll_time_histogram(false)`).
    pub schedule_latency_histogram: Histogram,
    /// Polls that ran past `Builder::stall_threshold`, all workers, a poll still running
    /// past it included (each worker's own count is `WorkerSnapshot::stalls`). Each
    /// counts once, and is in `Telemetry::stalls` until newer ones push it out.
    pub stalls_total: u64,
    /// Records written to the event ring (0 when it is off).
    pub events_recorded: u64,
    /// Records the event ring has overwritten to make room (it keeps the newest `capacity`
    /// per ring), whether or not a reader had read them first. This is the ring's churn,
    /// not a loss: on a busy runtime nearly every record is overwritten eventually, after
    /// every reader has read it. What a reader missed is its cursor's
    /// [`EventCursor::dropped`]. A record a writer on the shared remote ring gave up (it
    /// lapped a writer still storing its own) counts here once a later lap passes it.
    pub events_overwritten: u64,
    /// Threads in the blocking pool.
    pub blocking_threads: u64,
    /// `spawn_blocking` calls waiting for a thread.
    pub blocking_queue_depth: u64,
    /// Bytes of finished tasks' memory kept for reuse by spawns from threads outside the
    /// runtime (at most 4 MiB, though a reading taken while a spawner takes freed memory
    /// back may count it twice; each worker's own is `WorkerSnapshot::cell_cache_bytes`).
    pub outside_cell_cache_bytes: u64,
    /// Deadlocks reported so far ([`Telemetry::deadlocks`]): each cycle of tasks counts
    /// once, when a reading confirms it. Readings are taken only while someone watches
    /// (a `Telemetry::deadlocks` call, the console while a client is connected, the
    /// exporter on a scrape), so a deadlock nobody looked for is not counted yet.
    pub deadlocks_total: u64,
    /// The Tokio bridge (feature `tokio-bridge`, see `volt::bridge`), while it runs:
    /// `None` before its first use, after shutdown, and always without the feature.
    pub bridge: Option<BridgeSnapshot>,
}

/// The Tokio bridge's runtime, from Tokio's stable runtime metrics. The bridge's threads
/// are not Volt workers: they appear here, not in [`Snapshot::workers`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BridgeSnapshot {
    /// Its worker threads (`Builder::tokio_bridge_threads`).
    pub workers: u64,
    /// Tasks spawned on it and not yet finished: `volt::bridge::spawn`, and what bridged
    /// futures `tokio::spawn` (a pooled HTTP connection's task, for one).
    pub alive_tasks: u64,
    /// Tasks in its global (injection) queue.
    pub global_queue_depth: u64,
    /// Time its workers spent busy, summed over them (Tokio updates it in batches, so it
    /// trails a little).
    pub busy: std::time::Duration,
}

/// The runtime's telemetry, from [`Handle::telemetry`](crate::runtime::Handle::telemetry).
#[derive(Clone)]
pub struct Telemetry {
    shared: Arc<Shared>,
}

impl Telemetry {
    pub(crate) fn new(shared: Arc<Shared>) -> Telemetry {
        Telemetry { shared }
    }

    /// Time since the runtime was built. Event timestamps count from (about) the same
    /// instant.
    pub fn uptime(&self) -> std::time::Duration {
        self.shared.started.elapsed()
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The most workers that search for work at once (about half of them).
    pub fn max_searching(&self) -> usize {
        self.shared.workers.len().div_ceil(2)
    }

    /// Events each worker's ring keeps; 0 when the event ring is off.
    pub fn event_ring_capacity(&self) -> usize {
        self.shared.recorder.as_ref().map_or(0, |r| r.capacity())
    }

    /// Whether the runtime has begun shutting down (it was dropped, or `shutdown_timeout`
    /// was called). Samplers holding a `Telemetry` use it to stop.
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.load(Relaxed)
    }

    /// The most recent stalls (at most [`STALL_HISTORY`]), oldest first: polls that ran
    /// past `Builder::stall_threshold`, each with its true length and the stack it was
    /// stuck in (see [`Stall`]), then any poll running past the threshold now
    /// (`Stall::ongoing`). Every stall `Snapshot::stalls_total` counts is here until
    /// newer ones push it out. Stacks are turned into function names and lines here, on
    /// the calling thread: the first call that has a stack to name loads the binary's
    /// debug info, once for the process.
    pub fn stalls(&self) -> Vec<Stall> {
        self.shared.stall.history(&self.shared, &|id| self.task_name(id))
    }

    /// The polls running past the stall threshold now, as ongoing stalls
    /// (`Stall::ongoing`), their stacks named as [`Telemetry::stalls`] names them. With
    /// [`Telemetry::stall_cursor`], for a reader that shows each stall once as it ends
    /// and the ones still going on meanwhile.
    pub fn stalls_ongoing(&self) -> Vec<Stall> {
        self.shared.stall.running(&self.shared, &|id| self.task_name(id))
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
        let Some(r) = &self.shared.recorder else { return Vec::new() };
        r.groups.read(self.shared.workers.iter().filter_map(|w| w.counters.groups.as_deref()))
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
        match &self.shared.recorder {
            Some(r) => r.deadlocks.check(self),
            None => Vec::new(),
        }
    }

    /// Read every counter and gauge. Lock-free; never blocks a worker.
    pub fn snapshot(&self) -> Snapshot {
        let s = &self.shared;
        // A poll running past the stall threshold now is a stall already: count it.
        s.stall.count_running(s);
        let parked = s.idle.parked_bitmap();
        let mut snap = Snapshot {
            global_queue_depth: s.inject.len() as u64,
            num_searching: s.idle.num_searching(),
            // One reading of the bitmap for both, so they agree.
            num_parked: parked.count_ones(),
            parked_bitmap: parked,
            tasks_spawned: s.remote.tasks_spawned.load(Relaxed),
            tasks_completed: s.remote.tasks_completed.load(Relaxed),
            tasks_cancelled: s.remote.tasks_cancelled.load(Relaxed),
            tasks_panicked: s.remote.tasks_panicked.load(Relaxed),
            timers_armed: s.remote.timers_armed.load(Relaxed),
            timers_cancelled: s.remote.timers_cancelled.load(Relaxed),
            timers_fired: s.remote.timers_fired.load(Relaxed),
            blocking_threads: s.blocking.num_threads_gauge.load(Relaxed),
            blocking_queue_depth: s.blocking.queue_depth_gauge.load(Relaxed),
            outside_cell_cache_bytes: s.outside_cells.cached_bytes() as u64,
            deadlocks_total: s.recorder.as_ref().map_or(0, |r| r.deadlocks.total()),
            #[cfg(feature = "tokio-bridge")]
            bridge: s.bridge.snapshot(),
            ..Snapshot::default()
        };
        for w in s.workers.iter() {
            let c = &w.counters;
            c.add_totals(&mut snap);
            snap.workers.push(c.snapshot(
                w.index,
                w.queue.len() as u64,
                w.lifo.peek().is_some(),
                w.cache.cached_bytes() as u64,
            ));
            c.histograms.park_duration.add_to(&mut snap.park_duration_histogram);
            c.histograms.steal_batch.add_to(&mut snap.steal_batch_histogram);
            c.histograms.schedule_latency.add_to(&mut snap.schedule_latency_histogram);
        }
        if let Some(r) = &s.recorder {
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
}

/// One live task, as [`Telemetry::tasks`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The task's id.
    pub id: u64,
    /// Its name, from `volt::task::Builder::name`.
    pub name: Option<String>,
    /// Where it was spawned: the caller of `volt::spawn`, `Handle::spawn`,
    /// `task::Builder::spawn` and the like.
    pub spawned_at: &'static std::panic::Location<'static>,
    /// Where it is in its life.
    pub state: TaskState,
    /// Polls so far.
    pub polls: u64,
    /// Time spent being polled.
    pub busy: std::time::Duration,
    /// Time spent queued, between a wake and the poll that followed.
    pub scheduled: std::time::Duration,
    /// Time since its last poll ended (`None` if it was never polled).
    pub since_last_poll: Option<std::time::Duration>,
    /// What it waits on, while idle: the first of [`TaskInfo::waits`], the waits its
    /// latest poll recorded; [`WaitReason::Unknown`] when that poll recorded none (it
    /// waits on a future of another library with no label). For a task queued again by
    /// its own poll (`yield_now`), `Yield`. `None` only while it runs or sits in a run
    /// queue after a wake.
    ///
    /// The first wait, not the last: a poll that waits on several things (a `select!`,
    /// hyper polling a connection's socket while its handler waits) names them in the
    /// order it polled them, and [`TaskInfo::waits`] lists them all.
    pub waiting_on: Option<WaitReason>,
    /// Every wait its latest poll recorded, while idle, in the order they were recorded
    /// (a wait recorded twice in the poll once): up to four (an IPv6 address counts two
    /// of them), the rest counted in [`TaskInfo::more_waits`]. `[Unknown]` when that poll
    /// recorded none, `[Yield]` for a task queued again by its own poll, empty while it
    /// runs or waits in a run queue after a wake. Its first is
    /// [`TaskInfo::waiting_on`].
    pub waits: Vec<WaitReason>,
    /// How many waits its latest poll recorded past those in [`TaskInfo::waits`] (shown
    /// as "+N more").
    pub more_waits: u32,
    /// How long it has waited, while idle: the time since its last poll ended.
    pub waiting_since: Option<std::time::Duration>,
    /// It is idle and nothing but its owner and its `JoinHandle` holds a reference to
    /// it: every waker was dropped, so nothing can ever wake it again.
    pub lost_waker: bool,
    /// Who woke it last (`None`: never woken since its spawn).
    pub last_woken_by: Option<WakeSource>,
    /// How long ago that wake was.
    pub last_woken: Option<std::time::Duration>,
    /// Its poll times (log2 buckets of nanoseconds, as the runtime's histograms; only
    /// the buckets from 1 µs to 34 ms are used, the outer two holding everything below
    /// and above). Counts are exact up to 65,535 in a bucket; past that all buckets were
    /// halved, so the shape holds and `sum` is the task's busy time.
    pub poll_histogram: Histogram,
    /// Its waits in a run queue, from a wake to the poll that followed.
    pub schedule_histogram: Histogram,
}

/// One live task as a reading of the task list found it: its figures without its
/// histograms, its name apart, and its waits kept as recorded until they are asked for.
/// Small and `Copy`, for a reader that keeps a row per live task
/// ([`Telemetry::for_each_task`], [`TaskWatch`]). [`Telemetry::task`] reads one task
/// whole, as a [`TaskInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub(crate) id: u64,
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    pub(crate) state: TaskState,
    pub(crate) polls: u64,
    pub(crate) busy_ns: u64,
    pub(crate) scheduled_ns: u64,
    /// When its last poll ended, in ns since the runtime started (0: never polled).
    pub(crate) last_poll_end_ns: u64,
    /// Time since then, at the reading (`None`: never polled).
    pub(crate) since_last_poll_ns: Option<u64>,
    /// Its wait list as read: its latest poll's while it is idle (or `unknown`), a yield
    /// for a task its own poll queued again, all zero otherwise.
    pub(crate) wait: crate::task::wait::WaitWords,
    pub(crate) lost_waker: bool,
    /// Who woke it last (`wait::wake_source` + 1; 0: never) and when, in ns since the
    /// runtime started.
    pub(crate) woken_by: u64,
    pub(crate) woken_at_ns: u64,
}

/// A task's histograms as [`Histogram`]s: their buckets put where the runtime-wide
/// histograms keep the same ranges, their sums the task's busy and queued time.
fn task_histograms(st: &crate::task::TaskStats, row: &TaskRow) -> (Histogram, Histogram) {
    use crate::task::TASK_HIST_FIRST;
    let widen = |counts: [u16; crate::task::TASK_HIST_BUCKETS], sum: u64| {
        let mut h = Histogram::default();
        for (i, c) in counts.into_iter().enumerate() {
            h.buckets[TASK_HIST_FIRST + i] = c as u64;
        }
        h.sum = sum;
        h
    };
    let (poll, schedule) = match (row.polls, st.polled()) {
        (1, _) => crate::task::TaskStats::first_poll_histograms(row.busy_ns, row.scheduled_ns),
        (2.., Some(p)) => (p.poll_hist.read(), p.schedule_hist.read()),
        _ => Default::default(),
    };
    (widen(poll, row.busy_ns), widen(schedule, row.scheduled_ns))
}

/// Who holds the one reference to a task that a reader holds besides the owned list's.
#[derive(Clone, Copy, PartialEq)]
enum Holder {
    /// A walk of the owned list (`OwnedTasks::for_each`, `with_task`).
    Walk,
    /// The change log, handing the task over (it cleared the task's `queued` flag).
    Log,
}

/// Read one task, which the caller keeps alive with one reference of its own
/// (`holder`'s). `None` if it has no statistics.
fn read_task<'a>(
    clock: &Clock,
    now: u64,
    t: std::ptr::NonNull<crate::task::raw::Header>,
    holder: Holder,
) -> Option<(TaskRow, Option<&'a str>)> {
    let st = crate::task::raw::stats(t)?;
    // SAFETY: the caller keeps the task alive.
    let h = unsafe { t.as_ref() };
    use crate::task::state::Lifecycle;
    let word = h.state.load();
    let state = match word.lifecycle() {
        Lifecycle::Idle => TaskState::Idle,
        Lifecycle::Scheduled => TaskState::Scheduled,
        Lifecycle::Running => TaskState::Running,
        Lifecycle::Complete => TaskState::Complete,
    };
    let idle = state == TaskState::Idle;
    // Nothing but the owned list, the join handle and the reader holds it: no waker is
    // left. Every holder this count can't see (the change log's reference, taken or
    // given back meanwhile, or another walk's) only adds references, so a race can hide
    // a lost waker, never invent one; a walk leaves a task the log holds for the next
    // reading.
    let lost_waker = idle && {
        let expected = 2 + word.is_join_interested() as u64;
        word.ref_count() <= expected && (holder == Holder::Log || !st.queued.load(Relaxed))
    };
    let last = st.last_poll_end.load(Relaxed);
    let woken_at = st.woken_at.load(Relaxed);
    let polls = st.polls.load(Relaxed);
    // Only the waits its latest poll named (see `task::wait`); an idle task whose latest
    // poll named none waits on something no Volt leaf names: `unknown`, never an older
    // poll's wait and never nothing. (A task that never recorded has no wait record:
    // the same.) A queued task that its own poll queued again (`yield_now`, or a wake
    // during the poll), with no wake since, waits on its yield: the poll's end stamped
    // `scheduled_at` and `last_poll_end` with the same reading, and a later wake would
    // have moved `woken_at` past it.
    let yielded = state == TaskState::Scheduled
        && last != 0
        && st.scheduled_at.load(Relaxed) == last
        && st.woken_at.load(Relaxed) <= last;
    use crate::task::wait::WaitWords;
    let wait = if idle {
        let latest = st.wait_record().and_then(|w| w.read()).filter(|w| w.is_current(polls) && w.names_any());
        latest.unwrap_or_else(WaitWords::unknown)
    } else if yielded {
        WaitWords::yielded()
    } else {
        WaitWords::default()
    };
    let row = TaskRow {
        id: h.id,
        spawned_at: st.spawned_at,
        state,
        polls,
        busy_ns: clock.ticks_to_ns(st.busy_ticks.load(Relaxed)),
        scheduled_ns: clock.ticks_to_ns(st.scheduled_ticks.load(Relaxed)),
        last_poll_end_ns: if last == 0 { 0 } else { clock.since_start_ns(last).max(1) },
        since_last_poll_ns: (last != 0).then(|| clock.ticks_to_ns(now.saturating_sub(last))),
        wait,
        lost_waker,
        woken_by: st.woken_by.load(Relaxed),
        woken_at_ns: if woken_at == 0 { 0 } else { clock.since_start_ns(woken_at).max(1) },
    };
    Some((row, st.name.as_deref()))
}

/// A [`TaskInfo`] from a reading.
fn task_info(row: &TaskRow, name: Option<&str>, st: &crate::task::TaskStats, now_ns: u64) -> TaskInfo {
    use std::time::Duration;
    let idle = row.state == TaskState::Idle;
    let (poll_histogram, schedule_histogram) = task_histograms(st, row);
    let (waits, more_waits) = row.waits().decode();
    TaskInfo {
        id: row.id,
        name: name.map(String::from),
        spawned_at: row.spawned_at,
        state: row.state,
        polls: row.polls,
        busy: Duration::from_nanos(row.busy_ns),
        scheduled: Duration::from_nanos(row.scheduled_ns),
        since_last_poll: row.since_last_poll_ns.map(Duration::from_nanos),
        waiting_on: waits.first().cloned(),
        waits,
        more_waits,
        waiting_since: if idle { row.since_last_poll_ns.map(Duration::from_nanos) } else { None },
        lost_waker: row.lost_waker,
        last_woken_by: row.last_woken_by(),
        last_woken: (row.woken_at_ns != 0).then(|| Duration::from_nanos(now_ns.saturating_sub(row.woken_at_ns))),
        poll_histogram,
        schedule_histogram,
    }
}

/// A task's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Waiting for a wake.
    Idle,
    /// In a run queue.
    Scheduled,
    /// Being polled.
    Running,
    /// Finished (it leaves the list shortly).
    Complete,
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
        let rec = self.shared.recorder.as_ref()?;
        let (now, now_ns) = (rec.clock.raw(), self.now_ns());
        self.shared
            .owned
            .with_task(id, |t| {
                let (row, name) = read_task(&rec.clock, now, t, Holder::Walk)?;
                let st = crate::task::raw::stats(t)?;
                (row.state != TaskState::Complete).then(|| task_info(&row, name, st, now_ns))
            })
            .flatten()
    }

    /// How many shards the task list has: [`Telemetry::task`] walks one of them, so a
    /// lookup visits about [`Telemetry::task_list_len`] divided by this many tasks.
    pub fn task_list_shards(&self) -> usize {
        self.shared.owned.shards()
    }

    /// How many tasks the task list holds now: what a walk of it visits
    /// ([`Telemetry::tasks`], [`Telemetry::for_each_task`], [`Telemetry::lost_wakers`]).
    /// Finished tasks count until they leave the list.
    pub fn task_list_len(&self) -> u64 {
        self.shared.owned.len() as u64
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

    fn for_each_task_stats(&self, mut f: impl FnMut(TaskRow, Option<&str>, &crate::task::TaskStats)) {
        let Some(rec) = &self.shared.recorder else { return };
        let now = rec.clock.raw();
        self.shared.owned.for_each(|t| {
            // The walk holds a reference to the task while `f` reads it.
            if let Some((row, name)) = read_task(&rec.clock, now, t, Holder::Walk) {
                if let Some(st) = crate::task::raw::stats(t) {
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
        self.shared.recorder.as_ref().map_or(0, |r| r.clock.since_start_ns(r.clock.raw()))
    }

    /// A cursor over the event ring: each [`EventCursor::read`] returns the events since
    /// the previous one, merged across workers in time order. Its first read starts at
    /// the oldest record each ring still holds: records overwritten before the cursor
    /// existed were never its to miss, so they do not count in [`EventCursor::dropped`].
    /// Without `Builder::event_ring` it never yields anything.
    pub fn events(&self) -> EventCursor {
        EventCursor::new(Arc::clone(&self.shared))
    }
}

/// The event ring's writers: one ring per worker, then `OUTSIDE_RINGS` rings leased to
/// threads outside the runtime, then the shared one for any other thread.
pub(crate) struct Recorder {
    pub(crate) rings: Box<[EventRing]>,
    workers: usize,
    /// Who holds each leased ring (see `events::lease`).
    leases: std::sync::Arc<events::Leases>,
    clock: Clock,
    /// Which live tasks changed, while a reader (a [`TaskWatch`]) follows the task list.
    pub(crate) changes: tasks::TaskChangeLog,
    /// The task groups' lookup table and their figures counted off the workers.
    pub(crate) groups: groups::TaskGroups,
    /// The deadlock detector's memory between readings.
    pub(crate) deadlocks: deadlock::Detector,
}

impl Recorder {
    /// `clock`: a copy of the runtime's (`Shared::clock`, the same readings), so the
    /// paths that only run with the ring on take it from the recorder they already hold,
    /// without a second `Option` check.
    pub(crate) fn new(workers: usize, capacity: usize, clock: Clock) -> Recorder {
        let rings = (0..workers)
            .map(events::Writer::Worker)
            .chain(std::iter::repeat_n(events::Writer::Leased, events::OUTSIDE_RINGS))
            .chain([events::Writer::Shared])
            .map(|w| EventRing::new(capacity, w))
            .collect();
        let leases = events::Leases::new(events::OUTSIDE_RINGS);
        Recorder {
            rings,
            workers,
            leases,
            clock,
            changes: tasks::TaskChangeLog::new(workers),
            groups: groups::TaskGroups::new(),
            deadlocks: deadlock::Detector::new(),
        }
    }

    /// Slots per ring.
    pub(crate) fn capacity(&self) -> usize {
        self.rings[0].capacity() as usize
    }

    /// Worker `w`'s ring (`w` is a worker index of this runtime: on the hot path, so no
    /// bounds check beyond a debug assertion).
    #[inline(always)]
    pub(crate) fn ring(&self, w: usize) -> &EventRing {
        debug_assert!(w < self.workers);
        // SAFETY: the first `workers` rings are the workers', and the callers pass a
        // `Worker::index` of the runtime that built this recorder with that many workers.
        unsafe { self.rings.get_unchecked(w) }
    }

    /// The ring this thread, which is not one of the workers, writes: the outside ring it
    /// holds a lease on (taking one if one is free), else the shared one. Not inlined:
    /// the thread-local lookup would swell every spawn and wake that records, where the
    /// workers' own path is what counts.
    #[inline(never)]
    fn outside_ring(&self) -> &EventRing {
        let i = events::held_ring(&self.leases).map_or(self.rings.len() - 1, |i| self.workers + i);
        &self.rings[i]
    }

    /// `record` with a clock reading the caller already took.
    #[inline(always)]
    pub(crate) fn record_at(&self, worker: Option<usize>, kind: EventKind, task: u64, arg: u64, ts: u64) {
        match worker {
            Some(w) => self.ring(w).write_event(kind, task, arg, ts),
            None => self.outside_ring().write(Raw { ts, task, arg, meta: events::meta(kind, None) }),
        }
    }

    #[inline]
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("workers", &self.shared.workers.len()).finish()
    }
}
