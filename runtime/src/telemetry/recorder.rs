//! [`Recorder`]: the event ring's writers, the live-task change log, the task groups and
//! the deadlock detector, which exist only while the runtime records events.

use super::clock::Clock;
use super::events::{self, EventKind, EventRing, Raw};
use super::{deadlock, groups, tasks};

/// The event ring's writers: one ring per worker, then `OUTSIDE_RINGS` rings leased to
/// threads outside the runtime, then the shared one for any other thread.
pub(crate) struct Recorder {
    pub(crate) rings: Box<[EventRing]>,
    workers: usize,
    /// Who holds each leased ring (see `events::lease`).
    leases: std::sync::Arc<events::Leases>,
    pub(super) clock: Clock,
    /// Which live tasks changed, while a reader (a [`TaskWatch`](super::TaskWatch)) follows the task list.
    pub(crate) changes: tasks::TaskChangeLog,
    /// The task groups' lookup table and their figures counted off the workers.
    pub(crate) groups: groups::TaskGroups,
    /// The deadlock detector's memory between readings.
    pub(crate) deadlocks: deadlock::Detector,
}

impl Recorder {
    /// `clock`: a copy of the runtime's (`Metrics::clock`, the same readings), so the
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
