//! The metric families: each name with its help text and kind, declared once for the
//! `metrics` side and the hand-rendered part (see the crate doc), and how each reads its
//! figure off a [`Sample`]. The per-worker counters come from the runtime's one list of
//! them (`volt::telemetry::WORKER_COUNTERS`, those with a family), read in `registry`.

use crate::sample::{BridgeSample, GroupSample, Sample, WorkerSample};
use metrics::Unit;

/// How a metric family reads its figure off `T` (a sample, or one worker's part of it).
pub(crate) enum Figure<T> {
    /// A counter: the runtime's running total, published as it is.
    Total(fn(&T) -> u64),
    /// A gauge.
    Level(fn(&T) -> f64),
}

impl<T> Clone for Figure<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Figure<T> {}

/// One metric family the `metrics` side publishes: described, registered and set from
/// its table.
pub(crate) struct Family<T> {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) unit: Option<Unit>,
    pub(crate) figure: Figure<T>,
}

const fn total<T>(name: &'static str, help: &'static str, f: fn(&T) -> u64) -> Family<T> {
    Family { name, help, unit: None, figure: Figure::Total(f) }
}

const fn level<T>(name: &'static str, help: &'static str, f: fn(&T) -> f64) -> Family<T> {
    Family { name, help, unit: None, figure: Figure::Level(f) }
}

/// The runtime-wide families.
pub(crate) const GLOBAL: &[Family<Sample>] = &[
    total("volt_tasks_spawned_total", "Tasks spawned.", |s| s.tasks_spawned),
    total("volt_tasks_completed_total", "Tasks that returned their output.", |s| s.tasks_completed),
    total("volt_tasks_cancelled_total", "Tasks aborted or dropped by shutdown.", |s| s.tasks_cancelled),
    total("volt_tasks_panicked_total", "Tasks that panicked.", |s| s.tasks_panicked),
    total("volt_events_recorded_total", "Records written to the event ring.", |s| s.events_recorded),
    total(
        "volt_events_overwritten_total",
        "Event-ring records overwritten to make room, read or not (the ring's churn, not a loss).",
        |s| s.events_overwritten,
    ),
    total("volt_timers_armed_total", "Timers registered with the timing wheel.", |s| s.timers_armed),
    total("volt_timers_fired_total", "Timers that fired.", |s| s.timers_fired),
    total("volt_timers_cancelled_total", "Timers dropped before they fired.", |s| s.timers_cancelled),
    total("volt_io_events_total", "I/O readiness events delivered by the reactor.", |s| s.io_events),
    total(
        "volt_deadlocks_total",
        "Deadlocks found: cycles of tasks each waiting on a lock or join the next holds, each counted once (looked for while scraped, or while the console is watched; 0 without an event ring).",
        |s| s.deadlocks_total,
    ),
    level("volt_global_queue_depth", "Tasks in the global injection queue.", |s| s.global_queue_depth as f64),
    level("volt_workers_searching", "Workers searching for work.", |s| s.num_searching as f64),
    level("volt_workers_parked", "Workers parked.", |s| s.num_parked as f64),
    level("volt_workers", "Worker threads.", |s| s.workers.len() as f64),
    level("volt_tasks_alive", "Tasks spawned and not yet finished.", |s| s.tasks_alive as f64),
    level("volt_timers_pending", "Timers armed that neither fired nor were dropped.", |s| s.timers_pending as f64),
    level("volt_blocking_threads", "Threads in the blocking pool.", |s| s.blocking_threads as f64),
    level("volt_blocking_queue_depth", "spawn_blocking calls waiting for a thread.", |s| s.blocking_queue_depth as f64),
];

/// The per-worker gauges (label `worker`), registered after the worker's counters.
pub(crate) const WORKER_GAUGES: &[Family<WorkerSample>] = &[
    level("volt_worker_local_queue_depth", "Tasks in the worker's local queue.", |w| w.local_queue_depth as f64),
    level("volt_worker_global_queue_interval", "Polls between the worker's global-queue checks (EWMA-tuned).", |w| {
        w.global_queue_interval as f64
    }),
    Family {
        name: "volt_worker_mean_poll_seconds",
        help: "The worker's EWMA of the time per task.",
        unit: Some(Unit::Seconds),
        figure: Figure::Level(|w| w.ewma_task_ns as f64 / 1e9),
    },
];

/// A family rendered by hand from the last sample (see the crate doc).
pub(crate) struct Rendered<T> {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    /// `counter` or `gauge`.
    pub(crate) kind: &'static str,
    pub(crate) read: fn(&T) -> f64,
}

/// The Tokio bridge's families, present while the runtime reports its bridge running.
pub(crate) const BRIDGE: &[Rendered<BridgeSample>] = &[
    Rendered {
        name: "volt_bridge_workers",
        help: "Worker threads of the Tokio bridge (not Volt workers).",
        kind: "gauge",
        read: |b| b.workers as f64,
    },
    Rendered {
        name: "volt_bridge_alive_tasks",
        help: "Tasks spawned on the Tokio bridge and not yet finished.",
        kind: "gauge",
        read: |b| b.alive_tasks as f64,
    },
    Rendered {
        name: "volt_bridge_global_queue_depth",
        help: "Tasks in the Tokio bridge's global queue.",
        kind: "gauge",
        read: |b| b.global_queue_depth as f64,
    },
    Rendered {
        name: "volt_bridge_busy_seconds_total",
        help: "Time the Tokio bridge's workers spent busy, summed over them.",
        kind: "counter",
        read: |b| b.busy_ns as f64 / 1e9,
    },
];

/// The task groups' families (label `group`), one series per group.
pub(crate) const GROUP: &[Rendered<GroupSample>] = &[
    Rendered {
        name: "volt_task_group_spawned_total",
        help: "Tasks of the group spawned.",
        kind: "counter",
        read: |g| g.spawned as f64,
    },
    Rendered {
        name: "volt_task_group_alive",
        help: "Tasks of the group spawned and not yet finished.",
        kind: "gauge",
        read: |g| g.alive as f64,
    },
    Rendered {
        name: "volt_task_group_completed_total",
        help: "Tasks of the group that returned their output.",
        kind: "counter",
        read: |g| g.completed as f64,
    },
    Rendered {
        name: "volt_task_group_cancelled_total",
        help: "Tasks of the group aborted or dropped by shutdown.",
        kind: "counter",
        read: |g| g.cancelled as f64,
    },
    Rendered {
        name: "volt_task_group_panicked_total",
        help: "Tasks of the group that panicked.",
        kind: "counter",
        read: |g| g.panicked as f64,
    },
    Rendered {
        name: "volt_task_group_polls_total",
        help: "Polls of the group's tasks.",
        kind: "counter",
        read: |g| g.polls as f64,
    },
    Rendered {
        name: "volt_task_group_busy_seconds_total",
        help: "Time spent polling the group's tasks.",
        kind: "counter",
        read: |g| g.busy_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_slow_polls_total",
        help: "Polls of the group's tasks that took at least 50 microseconds.",
        kind: "counter",
        read: |g| g.slow_polls as f64,
    },
    Rendered {
        name: "volt_task_group_slow_poll_seconds_total",
        help: "Time the group's slow polls (at least 50 microseconds) took.",
        kind: "counter",
        read: |g| g.slow_poll_busy_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_first_polls_total",
        help: "Tasks of the group polled at least once.",
        kind: "counter",
        read: |g| g.first_polls as f64,
    },
    Rendered {
        name: "volt_task_group_first_poll_delay_seconds_total",
        help: "Time from spawn to first poll, summed over the group's tasks polled at least once.",
        kind: "counter",
        read: |g| g.first_poll_delay_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_scheduled_polls_total",
        help: "Polls of the group's tasks after their first (each after a wait in a run queue).",
        kind: "counter",
        read: |g| g.scheduled as f64,
    },
    Rendered {
        name: "volt_task_group_schedule_delay_seconds_total",
        help: "Time the group's tasks waited in a run queue before their polls after the first, summed.",
        kind: "counter",
        read: |g| g.schedule_delay_ns as f64 / 1e9,
    },
];

/// A gauge family read off a group when the group has the figure: name, help, reader.
pub(crate) type GroupGauge = (&'static str, &'static str, fn(&GroupSample) -> Option<u64>);

/// The groups' poll-time quantiles, present for a group once it has been polled.
pub(crate) const GROUP_QUANTILES: [GroupGauge; 2] = [
    (
        "volt_task_group_poll_p50_seconds",
        "Median poll time of the group's tasks since the runtime started (the upper bound of its log2 bucket).",
        |g| g.poll_p50_ns,
    ),
    (
        "volt_task_group_poll_p99_seconds",
        "99th percentile poll time of the group's tasks since the runtime started (the upper bound of its log2 bucket).",
        |g| g.poll_p99_ns,
    ),
];

/// The most groups a scrape shows: the runtime's bound (100 groups and `other`), kept
/// here too for a console that is not Volt's.
pub(crate) const MAX_GROUPS: usize = volt::telemetry::MAX_TASK_GROUPS + 1;

/// The histogram families, and the hand-rendered counters and gauge: name and help.
pub(crate) const POLL_HISTOGRAM: (&str, &str) =
    ("volt_task_poll_duration_seconds", "How long task polls took, all workers (empty if the runtime was built with poll_time_histogram(false) and no event ring).");
pub(crate) const PARK_HISTOGRAM: (&str, &str) =
    ("volt_worker_park_duration_seconds", "How long workers stayed parked, all workers.");
pub(crate) const SCHEDULE_HISTOGRAM: (&str, &str) = (
    "volt_task_schedule_latency_seconds",
    "How long woken tasks waited in a run queue before their poll, all workers: every wake with the event ring on, one wake in eight without it (empty with poll_time_histogram(false) and no event ring).",
);
pub(crate) const PARKED_SECONDS: (&str, &str) = ("volt_worker_parked_seconds_total", "Time the worker spent parked.");
pub(crate) const BUSY_SECONDS: (&str, &str) =
    ("volt_worker_busy_seconds_total", "Time the worker spent polling tasks.");
/// Present once counted: a walk of every task, so only while scraped (in-process) or while
/// the console counts it (the sidecar); 0 without an event ring.
pub(crate) const LOST_WAKER: (&str, &str) = (
    "volt_tasks_lost_waker",
    "Idle tasks with every waker dropped: nothing can wake them again (0 without an event ring; counted once a second while scraped).",
);

/// The sidecar's own family.
pub(crate) const CONSOLE_UP: (&str, &str) =
    ("volt_exporter_console_up", "Whether the sidecar is receiving the console stream (1) or not (0).");
