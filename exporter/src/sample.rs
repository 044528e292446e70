//! A runtime's figures as the exporter reads them: what every metric family reads its
//! value off, whichever way the figures came. In-process they come straight from
//! `volt::telemetry` (the conversions here); the sidecar makes the same from the
//! console's wire types (`sidecar::convert`). Times are whole nanoseconds on both ways,
//! so a figure renders the same from either.

use volt::telemetry::{Histogram, Snapshot, TaskGroup, WorkerSnapshot};

/// One reading of a runtime, ready to publish ([`Metrics::publish`](crate::Metrics::publish)):
/// from `volt::telemetry::Snapshot` (`Sample::from(&telemetry.snapshot())`) or, with the
/// `sidecar` feature, from the console's `volt_console_proto::Snapshot`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub(crate) workers: Vec<WorkerSample>,
    pub(crate) global_queue_depth: u64,
    pub(crate) num_searching: u64,
    pub(crate) num_parked: u64,
    pub(crate) tasks_spawned: u64,
    pub(crate) tasks_alive: u64,
    pub(crate) tasks_completed: u64,
    pub(crate) tasks_cancelled: u64,
    pub(crate) tasks_panicked: u64,
    pub(crate) timers_armed: u64,
    pub(crate) timers_fired: u64,
    pub(crate) timers_cancelled: u64,
    pub(crate) timers_pending: u64,
    pub(crate) io_events: u64,
    pub(crate) events_recorded: u64,
    pub(crate) events_overwritten: u64,
    pub(crate) blocking_threads: u64,
    pub(crate) blocking_queue_depth: u64,
    pub(crate) deadlocks_total: u64,
    /// `None`: the source sent none (a console that is not Volt's).
    pub(crate) park_duration: Option<Buckets>,
    pub(crate) schedule_latency: Option<Buckets>,
    /// Idle tasks with every waker dropped, when counted for this reading (counting walks
    /// every task, so it is done only while someone scrapes).
    pub(crate) lost_wakers: Option<u64>,
    /// The Tokio bridge, while it runs.
    pub(crate) bridge: Option<BridgeSample>,
}

impl Sample {
    /// This reading with the lost-waker count (`Telemetry::lost_wakers`), which the
    /// snapshot itself does not carry: `None` leaves the last count standing.
    pub fn with_lost_wakers(mut self, count: Option<u64>) -> Sample {
        self.lost_wakers = count;
        self
    }
}

/// One worker's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WorkerSample {
    /// Its place in the runtime's list of workers, as the source says it.
    pub(crate) index: usize,
    /// The worker counters that have a Prometheus family, in the order of
    /// `volt::telemetry::WORKER_COUNTERS`.
    pub(crate) counters: Vec<u64>,
    pub(crate) parked_ns: u64,
    pub(crate) busy_ns: u64,
    pub(crate) local_queue_depth: u64,
    pub(crate) global_queue_interval: u32,
    pub(crate) ewma_task_ns: u64,
    pub(crate) poll_time: Option<Buckets>,
}

/// A log2 histogram of nanoseconds: bucket `i` counts values below `2^(i+1)` ns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Buckets {
    pub(crate) counts: Vec<u64>,
    pub(crate) sum: u64,
}

/// The Tokio bridge's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BridgeSample {
    pub(crate) workers: u64,
    pub(crate) alive_tasks: u64,
    pub(crate) global_queue_depth: u64,
    pub(crate) busy_ns: u64,
}

/// One task group's figures ([`Metrics::publish_groups`](crate::Metrics::publish_groups)):
/// from `volt::telemetry::TaskGroup` or, with the `sidecar` feature, from the console's
/// `volt_console_proto::TaskGroup`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSample {
    pub(crate) name: String,
    pub(crate) spawned: u64,
    pub(crate) alive: u64,
    pub(crate) completed: u64,
    pub(crate) cancelled: u64,
    pub(crate) panicked: u64,
    pub(crate) polls: u64,
    pub(crate) busy_ns: u64,
    pub(crate) slow_polls: u64,
    pub(crate) slow_poll_busy_ns: u64,
    pub(crate) first_polls: u64,
    pub(crate) first_poll_delay_ns: u64,
    pub(crate) scheduled: u64,
    pub(crate) schedule_delay_ns: u64,
    /// The poll-time quantiles, once the group has been polled.
    pub(crate) poll_p50_ns: Option<u64>,
    pub(crate) poll_p99_ns: Option<u64>,
}

/// A [`Sample`] of `$s` (a runtime `Snapshot` or the wire's): the figures both have
/// under the same names, then the rest (`$rest`: the fields the two give differently).
/// One list for both conversions, so a figure added to one is added to the other.
macro_rules! runtime_sample {
    ($s:ident, { $($rest:tt)* }) => {
        $crate::sample::Sample {
            global_queue_depth: $s.global_queue_depth,
            num_searching: u64::from($s.num_searching),
            num_parked: u64::from($s.num_parked),
            tasks_spawned: $s.tasks_spawned,
            tasks_alive: $s.tasks_alive,
            tasks_completed: $s.tasks_completed,
            tasks_cancelled: $s.tasks_cancelled,
            tasks_panicked: $s.tasks_panicked,
            timers_armed: $s.timers_armed,
            timers_fired: $s.timers_fired,
            timers_cancelled: $s.timers_cancelled,
            timers_pending: $s.timers_pending,
            io_events: $s.io_events,
            events_recorded: $s.events_recorded,
            events_overwritten: $s.events_overwritten,
            blocking_threads: $s.blocking_threads,
            blocking_queue_depth: $s.blocking_queue_depth,
            deadlocks_total: $s.deadlocks_total,
            $($rest)*
        }
    };
}
#[cfg(feature = "sidecar")]
pub(crate) use runtime_sample;

/// Whole nanoseconds of `d` (a `u64` holds 584 years).
fn ns(d: std::time::Duration) -> u64 {
    d.as_nanos() as u64
}

impl From<&Histogram> for Buckets {
    fn from(h: &Histogram) -> Buckets {
        Buckets { counts: h.buckets.clone(), sum: h.sum }
    }
}

impl From<&WorkerSnapshot> for WorkerSample {
    fn from(w: &WorkerSnapshot) -> WorkerSample {
        WorkerSample {
            index: w.index,
            counters: w.counters().filter_map(|(c, v)| c.family.map(|_| v)).collect(),
            parked_ns: w.parked_ns,
            busy_ns: w.busy_ns,
            local_queue_depth: w.local_queue_depth,
            global_queue_interval: w.global_queue_interval,
            ewma_task_ns: w.ewma_task_ns,
            poll_time: Some(Buckets::from(&w.poll_time_histogram)),
        }
    }
}

impl From<&Snapshot> for Sample {
    fn from(s: &Snapshot) -> Sample {
        runtime_sample!(s, {
            workers: s.workers.iter().map(WorkerSample::from).collect(),
            park_duration: Some(Buckets::from(&s.park_duration_histogram)),
            schedule_latency: Some(Buckets::from(&s.schedule_latency_histogram)),
            lost_wakers: None,
            bridge: s.bridge.as_ref().map(|b| BridgeSample {
                workers: b.workers,
                alive_tasks: b.alive_tasks,
                global_queue_depth: b.global_queue_depth,
                busy_ns: ns(b.busy),
            }),
        })
    }
}

impl From<&TaskGroup> for GroupSample {
    fn from(g: &TaskGroup) -> GroupSample {
        GroupSample {
            name: g.name.clone(),
            spawned: g.spawned,
            alive: g.alive,
            completed: g.completed,
            cancelled: g.cancelled,
            panicked: g.panicked,
            polls: g.polls,
            busy_ns: ns(g.busy),
            slow_polls: g.slow_polls,
            slow_poll_busy_ns: ns(g.slow_poll_busy),
            first_polls: g.first_polls,
            first_poll_delay_ns: ns(g.first_poll_delay),
            scheduled: g.scheduled,
            schedule_delay_ns: ns(g.schedule_delay),
            poll_p50_ns: g.poll_time_quantile(0.5).map(ns),
            poll_p99_ns: g.poll_time_quantile(0.99).map(ns),
        }
    }
}
