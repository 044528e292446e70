//! [`Metrics`]: everything a runtime counts and records about itself, owned by
//! telemetry. The scheduler holds it behind an `Arc` and writes it through the recording
//! methods (`record`); [`Telemetry`](super::Telemetry), the event cursors and the stall
//! monitor's thread hold the same `Arc` and read it. Nothing here knows the scheduler:
//! what telemetry reads of the scheduler's own state (queue depths, the idle state, the
//! task list) it asks through [`RuntimeView`](super::view::RuntimeView).

use super::clock::Clock;
use super::samples::ScheduleSamples;
use super::stall::StallMonitor;
use super::{Recorder, RemoteCounters, WorkerCounters};
use crate::padded::CachePadded;
use std::time::{Duration, Instant};

/// What telemetry keeps for one runtime (see the module doc).
pub(crate) struct Metrics {
    /// When the runtime was built (`Telemetry::uptime`).
    pub(crate) started: Instant,
    /// The event ring, when `Builder::event_ring` turned it on.
    pub(crate) recorder: Option<Recorder>,
    /// The clock that times polls, when this runtime times them: for the poll-time
    /// histogram (`Builder::poll_time_histogram`, on by default), for the event ring,
    /// whose records need the times anyway, or for the stall threshold, which a poll's
    /// end compares its length with (all share the one reading per poll).
    pub(crate) clock: Option<Clock>,
    /// Counts made off the workers (each spawn from outside writes one).
    pub(crate) remote: CachePadded<RemoteCounters>,
    /// Each worker's counters: written by that worker alone, read by everyone. Each on
    /// cache lines of its own, so one worker's counting never moves another's lines.
    workers: Box<[CachePadded<WorkerCounters>]>,
    /// Sampled wakes waiting for their poll (see `samples`).
    pub(crate) schedule_samples: ScheduleSamples,
    /// Each worker's poll as the stall machinery sees it, and its stall reports.
    pub(crate) stall: StallMonitor,
}

/// How a runtime's telemetry is set up (`Builder`'s telemetry options).
pub(crate) struct MetricsConfig {
    pub(crate) workers: usize,
    /// Slots per ring of the event ring (`None`: off).
    pub(crate) event_ring: Option<usize>,
    /// With the ring: whether every task keeps its statistics, or only while a reader
    /// watches (`TaskStatistics`).
    pub(crate) stats_always: bool,
    pub(crate) poll_time_histogram: bool,
    /// The stall threshold, and whether stalled threads take their stacks.
    pub(crate) stall_threshold: Option<Duration>,
    pub(crate) stall_stacks: bool,
    /// The scheduler's first global-queue interval and task-time average, which the
    /// workers' gauges start from.
    pub(crate) interval: u32,
    pub(crate) ewma_task_ns: u64,
}

impl Metrics {
    pub(crate) fn new(c: MetricsConfig) -> Metrics {
        let timed = c.poll_time_histogram || c.event_ring.is_some() || c.stall_threshold.is_some_and(|t| !t.is_zero());
        let clock = timed.then(Clock::new);
        let task_groups = c.event_ring.is_some();
        Metrics {
            started: Instant::now(),
            recorder: c
                .event_ring
                .map(|cap| Recorder::new(c.workers, cap, clock.expect("the ring has a clock"), c.stats_always)),
            clock,
            remote: CachePadded(RemoteCounters::default()),
            workers: (0..c.workers)
                .map(|_| CachePadded(WorkerCounters::new(c.interval, c.ewma_task_ns, task_groups)))
                .collect(),
            schedule_samples: ScheduleSamples::new(),
            stall: StallMonitor::new(c.workers, c.stall_threshold, c.stall_stacks, clock),
        }
    }

    /// The number of workers counted.
    pub(crate) fn num_workers(&self) -> usize {
        self.workers.len()
    }

    /// Worker `i`'s counters.
    #[inline(always)]
    pub(crate) fn worker(&self, i: usize) -> &WorkerCounters {
        &self.workers[i]
    }

    /// Every worker's counters, by index.
    pub(crate) fn workers(&self) -> impl ExactSizeIterator<Item = &WorkerCounters> + Clone {
        self.workers.iter().map(|c| &c.0)
    }

    /// The clock's nanoseconds per tick (32.32 fixed point): 1.0 without a clock.
    pub(crate) fn ns_per_tick_fp(&self) -> u64 {
        self.clock.map_or(1 << 32, |c| c.ns_per_tick_fp())
    }
}
