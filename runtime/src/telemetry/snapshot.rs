//! What [`Telemetry::snapshot`](super::Telemetry::snapshot)(super::Telemetry::snapshot) returns: the runtime's
//! counters and gauges at one moment.

use super::{Histogram, WorkerSnapshot};

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

/// The whole runtime, as read by [`Telemetry::snapshot`](super::Telemetry::snapshot).
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
    /// [`EventCursor::dropped`](super::EventCursor::dropped). A record a writer on the shared remote ring gave up (it
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
    /// Deadlocks reported so far ([`Telemetry::deadlocks`](super::Telemetry::deadlocks)): each cycle of tasks counts
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
