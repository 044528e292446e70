//! Conversions to the wire types, field for field (see `proto/volt/console/v1` in
//! `volt-console-proto`).

use super::proto;
use crate::telemetry::{
    Deadlock, DeadlockWant, Event, EventKind, Histogram, Resource, ResourceHolder, Snapshot, Stall, TaskGroup,
    TaskGroupKind, TaskInfo, TaskState, WaitReason, WakeSource, WorkerSnapshot, WorkerState, WORKER_COUNTERS,
};

/// The per-worker counters, which the wire's `WorkerSnapshot` carries under the names
/// [`WORKER_COUNTERS`] gives them: the conversion of a worker, and each counter's reader
/// on the wire, in the list's order (checked against it below, as the build runs).
macro_rules! wire_worker_counters {
    ($($name:ident)*) => {
        fn worker_to_proto(w: &WorkerSnapshot) -> proto::WorkerSnapshot {
            proto::WorkerSnapshot {
                index: w.index as u32,
                state: proto::WorkerState::from(w.state) as i32,
                local_queue_depth: w.local_queue_depth,
                lifo_occupied: w.lifo_occupied,
                $( $name: w.$name, )*
                ewma_task_ns: w.ewma_task_ns,
                global_queue_interval: w.global_queue_interval,
                poll_time_histogram: histogram(&w.poll_time_histogram),
                busy_ns: w.busy_ns,
            }
        }

        const WIRE_COUNTERS: &[(&str, fn(&proto::WorkerSnapshot) -> u64)] =
            &[ $( (stringify!($name), |w: &proto::WorkerSnapshot| w.$name), )* ];
    };
}

wire_worker_counters!(
    tasks_polled tasks_stolen steal_operations times_parked parked_ns lifo_hits global_batch_fetches overflows
    budget_yields stalls
);

/// Whether `a` and `b` are the same text (for the checks the build runs: `==` on `str`
/// is not available there).
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// The wire carries every worker counter, in the list's order: a counter added to the
// runtime fails the build here until the wire has its field and this list its name.
const _: () = {
    assert!(WIRE_COUNTERS.len() == WORKER_COUNTERS.len(), "the wire's worker counters differ from the runtime's");
    let mut i = 0;
    while i < WORKER_COUNTERS.len() {
        assert!(
            same(WIRE_COUNTERS[i].0, WORKER_COUNTERS[i].name),
            "the wire's worker counters differ from the runtime's"
        );
        i += 1;
    }
};

/// A Prometheus counter family of one worker counter: its name, its help text, and how
/// to read it off a wire snapshot.
pub type WorkerCounterFamily = (&'static str, &'static str, fn(&proto::WorkerSnapshot) -> u64);

/// The `volt_worker_*_total` families `volt-exporter` publishes, one per worker counter
/// that has one ([`WorkerCounter::family`](crate::telemetry::WorkerCounter::family)), in
/// the order of [`WORKER_COUNTERS`].
pub const WORKER_COUNTER_FAMILIES: &[WorkerCounterFamily] = &families();

/// How many worker counters have a family.
const FAMILIES: usize = {
    let (mut i, mut n) = (0, 0);
    while i < WORKER_COUNTERS.len() {
        n += WORKER_COUNTERS[i].family.is_some() as usize;
        i += 1;
    }
    n
};

/// [`WORKER_COUNTER_FAMILIES`], from the list and the wire's readers.
const fn families() -> [WorkerCounterFamily; FAMILIES] {
    let mut out: [WorkerCounterFamily; FAMILIES] = [("", "", WIRE_COUNTERS[0].1); FAMILIES];
    let (mut i, mut n) = (0, 0);
    while i < WORKER_COUNTERS.len() {
        if let Some((family, help)) = WORKER_COUNTERS[i].family {
            out[n] = (family, help, WIRE_COUNTERS[i].1);
            n += 1;
        }
        i += 1;
    }
    out
}

pub(super) fn histogram(h: &Histogram) -> Option<proto::Histogram> {
    Some(proto::Histogram { buckets: h.buckets.clone(), sum: h.sum })
}

impl From<WorkerState> for proto::WorkerState {
    fn from(s: WorkerState) -> proto::WorkerState {
        match s {
            WorkerState::Running => proto::WorkerState::Running,
            WorkerState::Searching => proto::WorkerState::Searching,
            WorkerState::Parked => proto::WorkerState::Parked,
        }
    }
}

impl From<&Snapshot> for proto::Snapshot {
    fn from(s: &Snapshot) -> proto::Snapshot {
        proto::Snapshot {
            workers: s.workers.iter().map(worker_to_proto).collect(),
            global_queue_depth: s.global_queue_depth,
            num_searching: s.num_searching,
            num_parked: s.num_parked,
            parked_bitmap: s.parked_bitmap,
            tasks_spawned: s.tasks_spawned,
            tasks_alive: s.tasks_alive,
            tasks_completed: s.tasks_completed,
            tasks_cancelled: s.tasks_cancelled,
            tasks_panicked: s.tasks_panicked,
            timers_armed: s.timers_armed,
            timers_fired: s.timers_fired,
            timers_cancelled: s.timers_cancelled,
            timers_pending: s.timers_pending,
            io_events: s.io_events,
            park_duration_histogram: histogram(&s.park_duration_histogram),
            steal_batch_histogram: histogram(&s.steal_batch_histogram),
            schedule_latency_histogram: histogram(&s.schedule_latency_histogram),
            events_recorded: s.events_recorded,
            events_overwritten: s.events_overwritten,
            blocking_threads: s.blocking_threads,
            blocking_queue_depth: s.blocking_queue_depth,
            tasks_lost_waker: None,
            stalls_total: s.stalls_total,
            recent_stalls: Vec::new(),
            ongoing_stalls: Vec::new(),
            deadlocks_total: s.deadlocks_total,
            // The publisher adds the deadlocks of its latest reading.
            deadlocks: Vec::new(),
            bridge: s.bridge.as_ref().map(|b| proto::BridgeSnapshot {
                workers: b.workers,
                alive_tasks: b.alive_tasks,
                global_queue_depth: b.global_queue_depth,
                busy_ns: b.busy.as_nanos() as u64,
            }),
        }
    }
}

impl From<&Deadlock> for proto::Deadlock {
    fn from(d: &Deadlock) -> proto::Deadlock {
        proto::Deadlock {
            tasks: d
                .tasks
                .iter()
                .map(|t| {
                    let (wants_resource, wants_task) = match t.wants {
                        DeadlockWant::Sync { resource, holder, .. } => (Some(resource), holder),
                        DeadlockWant::Join { task_id } => (None, task_id),
                    };
                    proto::DeadlockedTask {
                        id: t.id,
                        name: t.name.clone(),
                        holds: t
                            .holds
                            .iter()
                            .map(|h| proto::HeldResource { primitive: h.primitive.into(), resource: h.resource })
                            .collect(),
                        wants: t.wants.to_string(),
                        wants_resource,
                        wants_task,
                    }
                })
                .collect(),
        }
    }
}

impl From<&Resource> for proto::Resource {
    fn from(r: &Resource) -> proto::Resource {
        proto::Resource {
            id: r.id,
            kind: r.kind.map(String::from),
            created_at: r.created_at.map(|l| l.to_string()),
            holder_task: match r.holder {
                Some(ResourceHolder::Task(t)) => Some(t),
                _ => None,
            },
            held_outside: r.holder == Some(ResourceHolder::Outside),
            waiters: r.waiters,
            free: r.free,
            total: r.total,
            aux: r.aux,
        }
    }
}

impl From<EventKind> for proto::EventKind {
    fn from(k: EventKind) -> proto::EventKind {
        use proto::EventKind as P;
        match k {
            EventKind::Spawn => P::Spawn,
            EventKind::Schedule => P::Schedule,
            EventKind::PollStart => P::PollStart,
            EventKind::PollEnd => P::PollEnd,
            EventKind::Transition => P::Transition,
            EventKind::Steal => P::Steal,
            EventKind::Overflow => P::Overflow,
            EventKind::Park => P::Park,
            EventKind::Unpark => P::Unpark,
            EventKind::Complete => P::Complete,
            EventKind::Cancel => P::Cancel,
            EventKind::Panic => P::Panic,
            EventKind::Stall => P::Stall,
        }
    }
}

impl From<&Event> for proto::Event {
    fn from(e: &Event) -> proto::Event {
        proto::Event {
            timestamp_ns: e.timestamp_ns,
            worker: e.worker.map(|w| w as u32),
            kind: proto::EventKind::from(e.kind) as i32,
            task_id: e.task_id,
            arg: e.arg(),
        }
    }
}

impl From<&TaskInfo> for proto::Task {
    fn from(t: &TaskInfo) -> proto::Task {
        proto::Task {
            id: t.id,
            name: t.name.clone(),
            spawned_at: Some(t.spawned_at.to_string()),
            state: match t.state {
                TaskState::Idle => proto::TaskState::Idle,
                TaskState::Scheduled => proto::TaskState::Scheduled,
                TaskState::Running => proto::TaskState::Running,
                TaskState::Complete => proto::TaskState::Complete,
            } as i32,
            polls: t.polls,
            busy_ns: t.busy.as_nanos() as u64,
            scheduled_ns: t.scheduled.as_nanos() as u64,
            since_last_poll_ns: t.since_last_poll.map(|d| d.as_nanos() as u64),
            waiting_on: t.waiting_on.as_ref().map(|w| w.to_string()),
            waiting_kind: t.waiting_on.as_ref().map(|w| w.kind().to_string()),
            waits: t.waits.iter().map(proto::TaskWait::from).collect(),
            more_waits: t.more_waits,
            waiting_since_ns: t.waiting_since.map(|d| d.as_nanos() as u64),
            lost_waker: t.lost_waker,
            last_woken_by: t.last_woken_by.map(|s| s.to_string()),
            last_woken_ns: t.last_woken.map(|d| d.as_nanos() as u64),
            last_woken_by_task: match t.last_woken_by {
                Some(WakeSource::Task(id)) => Some(id),
                _ => None,
            },
        }
    }
}

impl From<&WaitReason> for proto::TaskWait {
    fn from(w: &WaitReason) -> proto::TaskWait {
        proto::TaskWait { description: w.to_string(), kind: w.kind().to_string() }
    }
}

impl From<&TaskGroup> for proto::TaskGroup {
    fn from(g: &TaskGroup) -> proto::TaskGroup {
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        let quantile = |q| g.poll_time_quantile(q).map(ns);
        proto::TaskGroup {
            name: g.name.clone(),
            kind: match g.kind {
                TaskGroupKind::Named => proto::TaskGroupKind::Named,
                TaskGroupKind::SpawnLocation => proto::TaskGroupKind::SpawnLocation,
                TaskGroupKind::Other => proto::TaskGroupKind::Other,
            } as i32,
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
            poll_p50_ns: quantile(0.5),
            poll_p99_ns: quantile(0.99),
            poll_time_histogram: histogram(&g.poll_time_histogram),
        }
    }
}

impl From<&Stall> for proto::Stall {
    fn from(s: &Stall) -> proto::Stall {
        proto::Stall {
            worker: s.worker as u32,
            task_id: s.task_id,
            task_name: s.task_name.clone(),
            duration_ns: s.duration.as_nanos() as u64,
            stack: s
                .frames
                .iter()
                .map(|f| proto::StackFrame {
                    function: f.function.clone(),
                    location: f.location.clone(),
                    plumbing: f.plumbing,
                })
                .collect(),
            missing_stack: s.missing_stack.map(|m| m.to_string()),
            ongoing: s.ongoing,
            stack_taken_after_ns: s.stack_taken_after.map(|d| d.as_nanos() as u64),
            poll: s.poll,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The exporter's families are the list's, in its order, each reading its own
    /// counter off the wire.
    #[test]
    fn the_counter_families_read_their_own_counters() {
        let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
        for _ in 0..10 {
            rt.block_on(rt.spawn(async {})).unwrap();
        }
        let w = &rt.handle().telemetry().snapshot().workers[0];
        let wire = worker_to_proto(w);
        let expected: Vec<_> = w.counters().filter_map(|(c, v)| c.family.map(|(f, h)| (f, h, v))).collect();
        let families: Vec<_> = WORKER_COUNTER_FAMILIES.iter().map(|&(f, h, read)| (f, h, read(&wire))).collect();
        assert_eq!(families, expected);
        assert_eq!(families[0].0, "volt_worker_polls_total");
        assert!(families[0].2 >= 10, "{families:?}");
        assert_eq!(families.len(), WORKER_COUNTERS.len() - 1, "every counter but parked_ns");
    }
}
