//! The event ring: an opt-in flight recorder (`Builder::event_ring(capacity)`).
//!
//! This module is the public event model: [`Event`], its [`EventKind`] and the kind's
//! typed argument, [`EventDetail`]. The rest is inside: `ring` (the per-worker rings, the
//! rings leased to threads outside and the shared remote ring, their write and read
//! protocols), `lease` (how a thread outside takes and gives back a ring), `codec` (how
//! an event packs into a record and decodes back) and `cursor` ([`EventCursor`], the
//! reader that merges the rings). The clock that stamps records is `telemetry::clock`, since the scheduler
//! times polls with it whether or not the ring is on.
//!
//! # Timestamps
//!
//! A record holds raw clock ticks (see `telemetry::clock`); readers convert them to
//! nanoseconds since the runtime started.
//!
//! A worker reads the clock once per poll, at its end, and when it parks, unparks, steals
//! or takes a batch from the global queue (tasks other threads queued, maybe after its
//! last reading); it keeps the last reading. A poll's start is that last reading (the end of the
//! previous poll, or the unpark), which is off only by the scheduler's own step between
//! the two; events inside a poll (spawns, wakes) carry the poll's start time. Their order
//! within a worker is exact regardless: it is their position in the ring.
//!
//! # Lazy poll starts
//! Most polls record nothing between their start and their end, so a worker does not write
//! a `PollStart` when a poll begins: it notes the task and the start's clock reading in
//! its ring (owner-only fields). If the poll's end comes first, the `PollEnd` record
//! carries the poll's length and a flag. If an event inside the poll comes first (a spawn,
//! a wake), that record carries the polled task's id in spare `meta` bits
//! (`META_STARTS_POLL`); it has the start's timestamp already, since events inside a
//! poll carry their poll's start. Either way the reader puts the `PollStart` back
//! (`implicit_poll_start`) just before the record that carries it, so order is exact.
//! Only a poll nested in another (`JoinHandle::join` helping on a worker) writes the outer
//! start as a record of its own. One record per poll instead of two halved what recording
//! cost on `yield_many`.
//!
//! # Compound records
//! To write one record where one will do, a spawn and its first queueing are one `Spawn`
//! record, and a poll's end, the task's transition out of RUNNING and (for a requeue) its
//! `Schedule`, or (for a task that returned its output) its `Complete`, are one `PollEnd`
//! record. `decode` expands them, so readers see every kind
//! listed in [`EventKind`]. Drop counts and `events_recorded` count records.

mod codec;
#[cfg(not(loom))]
mod cursor;
mod lease;
mod ring;

// The recorder's and the scheduler's view of the rings, at the paths they import.
#[cfg(not(loom))]
pub(crate) use crate::telemetry::clock::{scale_ticks, Clock};
pub(crate) use codec::{decode, implicit_poll_start, meta, POLL_BUSY_SHIFT, POLL_IMPLICIT_START};
#[cfg(not(loom))]
pub use cursor::EventCursor;
pub(crate) use lease::Leases;
#[cfg(not(loom))]
pub(crate) use lease::{held_ring, release_current};
pub(crate) use ring::{EventRing, Raw, RingCursor, Writer, OUTSIDE_RINGS, STATS_OFF};

#[cfg(not(loom))]
use crate::telemetry::TaskState;

/// What happened. The `arg` each kind's doc describes is the packed argument a record,
/// the console's wire (`Event.arg` in `telemetry.proto`) and recordings carry; in Rust,
/// [`Event::detail`] gives it typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    /// A task was spawned; `arg` 0 = from its runtime's worker (local), 1 = from elsewhere.
    Spawn = 1,
    /// A woken task was queued; `arg` 0 = LIFO slot, 1 = local ring, 2 = global queue.
    Schedule = 2,
    /// A poll began.
    PollStart = 3,
    /// A poll ended; `arg` 1 = ready, 0 = pending.
    PollEnd = 4,
    /// A lifecycle change; `arg` = `from << 8 | to` (0 idle, 1 scheduled, 2 running, 3 complete).
    Transition = 5,
    /// The worker stole from another; `arg` = `victim << 32 | count`; the task is the one
    /// it runs first.
    Steal = 6,
    /// The worker's ring overflowed to the global queue; `arg` = tasks moved.
    Overflow = 7,
    /// The worker parked; `arg` 0 = on its futex, 1 = in the reactor.
    Park = 8,
    /// The worker woke; `arg` 1 = notified, 0 = timed out (or an I/O event, in the reactor).
    Unpark = 9,
    /// A task returned its output.
    Complete = 10,
    /// A task was cancelled.
    Cancel = 11,
    /// A task panicked.
    Panic = 12,
    /// A poll of the task held its worker past the stall threshold, recorded by that
    /// worker as the poll ended (time stamp: the end); `arg` = `worker << 48 |
    /// microseconds` (the poll's whole length).
    Stall = 13,
}

impl EventKind {
    fn from_u8(v: u8) -> Option<EventKind> {
        use EventKind::*;
        Some(match v {
            1 => Spawn,
            2 => Schedule,
            3 => PollStart,
            4 => PollEnd,
            5 => Transition,
            6 => Steal,
            7 => Overflow,
            8 => Park,
            9 => Unpark,
            10 => Complete,
            11 => Cancel,
            12 => Panic,
            13 => Stall,
            _ => return None,
        })
    }
}

/// One recorded event. What its kind says beyond the task is [`Event::detail`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds since the runtime started (monotonic).
    pub timestamp_ns: u64,
    /// The worker that recorded it, or `None` for another thread.
    pub worker: Option<usize>,
    /// What happened.
    pub kind: EventKind,
    /// The task concerned (0 when none).
    pub task_id: u64,
    /// The kind's argument in its packed form (the record's, the console wire's and
    /// recordings'); read it typed with [`Event::detail`].
    pub(crate) arg: u64,
}

/// `Schedule` targets, as packed in `arg` (see [`ScheduleTarget`]).
pub(crate) const SCHEDULE_LIFO: u64 = 0;
pub(crate) const SCHEDULE_LOCAL: u64 = 1;
pub(crate) const SCHEDULE_GLOBAL: u64 = 2;
/// A `Schedule`'s wake source (`WakeSource`, packed) sits above its target.
pub(crate) const SCHEDULE_SOURCE_SHIFT: u32 = 8;
/// A `Stall`'s worker sits above its duration in microseconds.
pub(crate) const STALL_WORKER_SHIFT: u32 = 48;
pub(crate) const STALL_US_MASK: u64 = (1 << STALL_WORKER_SHIFT) - 1;

/// Where a `Schedule` event queued its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleTarget {
    /// The worker's LIFO slot (a task woken by the task it is polling).
    Lifo,
    /// The worker's local ring.
    Local,
    /// The global (injection) queue.
    Global,
}

/// An event's argument, typed by its kind: what [`Event::detail`] returns.
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventDetail {
    /// A task was spawned: by a worker of its runtime (`remote: false`, it goes into that
    /// worker's LIFO slot) or from another thread.
    Spawn {
        /// Spawned from outside the runtime's workers.
        remote: bool,
    },
    /// A woken task was queued.
    Schedule {
        /// Where it went.
        target: ScheduleTarget,
        /// Who woke it: `Spawn` for a task's first queueing, the task itself for a
        /// requeue at a poll's end.
        source: super::WakeSource,
    },
    /// A poll began.
    PollStart,
    /// A poll ended.
    PollEnd {
        /// The task returned its output (or panicked); false: it is pending.
        ready: bool,
    },
    /// The task moved between lifecycle states.
    Transition {
        /// The state it left.
        from: TaskState,
        /// The state it entered.
        to: TaskState,
    },
    /// The worker stole tasks from another; the event's task is the one it runs first.
    Steal {
        /// The victim's worker index.
        from: usize,
        /// Tasks taken.
        count: u64,
    },
    /// The worker's ring overflowed to the global queue.
    Overflow {
        /// Tasks moved.
        count: u64,
    },
    /// The worker went to sleep.
    Park {
        /// In the I/O reactor (it drives the reactor while it sleeps); false: on its futex.
        in_reactor: bool,
    },
    /// The worker woke.
    Unpark {
        /// Another thread woke it; false: its timeout passed or an I/O event came.
        notified: bool,
    },
    /// The task returned its output.
    Complete,
    /// The task was cancelled.
    Cancel,
    /// The task panicked.
    Panic,
    /// A poll of the task held its worker past the stall threshold (recorded at its end).
    Stall {
        /// The worker it held.
        worker: usize,
        /// How long the poll held it: from the event's time stamp back to its start.
        duration: std::time::Duration,
    },
}

/// A lifecycle state as packed in a `Transition`'s argument.
#[cfg(not(loom))]
fn task_state(s: u64) -> TaskState {
    match s {
        0 => TaskState::Idle,
        1 => TaskState::Scheduled,
        2 => TaskState::Running,
        _ => TaskState::Complete,
    }
}

#[cfg(not(loom))]
impl Event {
    /// The kind's argument in its packed form, as each [`EventKind`] describes its `arg`:
    /// what the console's wire and recordings carry. [`Event::detail`] reads it typed.
    pub fn arg(&self) -> u64 {
        self.arg
    }

    /// The kind's argument, typed.
    pub fn detail(&self) -> EventDetail {
        let a = self.arg;
        match self.kind {
            EventKind::Spawn => EventDetail::Spawn { remote: a != 0 },
            EventKind::Schedule => EventDetail::Schedule {
                target: match a & 0xff {
                    SCHEDULE_LIFO => ScheduleTarget::Lifo,
                    SCHEDULE_LOCAL => ScheduleTarget::Local,
                    _ => ScheduleTarget::Global,
                },
                source: super::WakeSource::from_packed(a >> SCHEDULE_SOURCE_SHIFT),
            },
            EventKind::PollStart => EventDetail::PollStart,
            EventKind::PollEnd => EventDetail::PollEnd { ready: a == 1 },
            EventKind::Transition => EventDetail::Transition { from: task_state(a >> 8), to: task_state(a & 0xff) },
            EventKind::Steal => EventDetail::Steal { from: (a >> 32) as usize, count: a & 0xffff_ffff },
            EventKind::Overflow => EventDetail::Overflow { count: a },
            EventKind::Park => EventDetail::Park { in_reactor: a == 1 },
            EventKind::Unpark => EventDetail::Unpark { notified: a == 1 },
            EventKind::Complete => EventDetail::Complete,
            EventKind::Cancel => EventDetail::Cancel,
            EventKind::Panic => EventDetail::Panic,
            EventKind::Stall => EventDetail::Stall {
                worker: (a >> STALL_WORKER_SHIFT) as usize,
                duration: std::time::Duration::from_micros(a & STALL_US_MASK),
            },
        }
    }
}

#[cfg(not(loom))]
impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.timestamp_ns;
        write!(f, "{:>6}.{:03} µs  ", t / 1_000, t % 1_000)?;
        match self.worker {
            Some(w) => write!(f, "worker {w:<2} ")?,
            None => write!(f, "remote    ")?,
        }
        let task = self.task_id;
        let state = |s: TaskState| match s {
            TaskState::Idle => "idle",
            TaskState::Scheduled => "scheduled",
            TaskState::Running => "running",
            TaskState::Complete => "complete",
        };
        match self.detail() {
            EventDetail::Spawn { remote } => {
                write!(f, "spawn      task {task} ({})", if remote { "remote" } else { "local" })
            }
            EventDetail::Schedule { target, source } => write!(
                f,
                "schedule   task {task} -> {} (woken by {source})",
                match target {
                    ScheduleTarget::Lifo => "LIFO slot",
                    ScheduleTarget::Local => "local queue",
                    ScheduleTarget::Global => "global queue",
                }
            ),
            EventDetail::PollStart => write!(f, "poll       task {task}"),
            EventDetail::PollEnd { ready } => {
                write!(f, "poll end   task {task} ({})", if ready { "ready" } else { "pending" })
            }
            EventDetail::Transition { from, to } => {
                write!(f, "state      task {task} {} -> {}", state(from), state(to))
            }
            EventDetail::Steal { from, count } => {
                write!(f, "steal      {count} tasks from worker {from} (runs task {task})")
            }
            EventDetail::Overflow { count } => write!(f, "overflow   {count} tasks to the global queue"),
            EventDetail::Park { in_reactor } => {
                write!(f, "park       ({})", if in_reactor { "in the reactor" } else { "futex" })
            }
            EventDetail::Unpark { notified } => {
                write!(f, "unpark     ({})", if notified { "notified" } else { "timeout or I/O" })
            }
            EventDetail::Complete => write!(f, "complete   task {task}"),
            EventDetail::Cancel => write!(f, "cancel     task {task}"),
            EventDetail::Panic => write!(f, "panic      task {task}"),
            EventDetail::Stall { worker, duration } => {
                write!(f, "STALL      task {task} held worker {worker} for {:.1} ms", duration.as_secs_f64() * 1e3)
            }
        }
    }
}
