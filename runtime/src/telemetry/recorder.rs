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
    /// Whether tasks keep their statistics now (`TaskStatistics`).
    stats: StatsGate,
}

/// When tasks keep their statistics: always, or while readers watch (`TaskStatistics`).
struct StatsGate {
    always: bool,
    /// Readers watching. The mutex also orders the changes of `on`.
    watchers: std::sync::Mutex<usize>,
    /// Whether they are kept now: one relaxed load for a wake. The poll path reads a copy
    /// in its worker's ring (`EventRing::stats_since`), a line it writes anyway.
    on: std::sync::atomic::AtomicBool,
    /// When they were last turned on (raw clock ticks; 0 with `always`): a figure that
    /// says when something happened, older than this, was left from an earlier watch and
    /// may be stale.
    since: std::sync::atomic::AtomicU64,
}

impl Recorder {
    /// `clock`: a copy of the runtime's (`Metrics::clock`, the same readings), so the
    /// paths that only run with the ring on take it from the recorder they already hold,
    /// without a second `Option` check.
    /// `stats_always`: every task keeps its statistics, watched or not.
    pub(crate) fn new(workers: usize, capacity: usize, clock: Clock, stats_always: bool) -> Recorder {
        let rings = (0..workers)
            .map(events::Writer::Worker)
            .chain(std::iter::repeat_n(events::Writer::Leased, events::OUTSIDE_RINGS))
            .chain([events::Writer::Shared])
            .map(|w| EventRing::new(capacity, w, stats_always))
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
            stats: StatsGate {
                always: stats_always,
                watchers: std::sync::Mutex::new(0),
                on: std::sync::atomic::AtomicBool::new(stats_always),
                since: std::sync::atomic::AtomicU64::new(0),
            },
        }
    }

    /// Whether tasks keep their statistics now (a relaxed load; a change reaches each
    /// thread soon, not at once, which a figure counted or missed at that moment allows).
    #[inline(always)]
    pub(crate) fn stats_on(&self) -> bool {
        self.stats.on.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The clock reading before which a task's "when" figures (its last poll's end, its
    /// last wake) may be stale: 0 when they are kept always.
    pub(crate) fn stats_since(&self) -> u64 {
        self.stats.since.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A reader starts watching: tasks keep their statistics until the last one stops.
    pub(crate) fn watch_stats(&self) {
        let mut n = self.stats.watchers.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        if *n == 1 && !self.stats.always {
            // Below `STATS_OFF`, which means off in the rings' copies.
            let since = self.clock.raw().clamp(1, events::STATS_OFF - 1);
            self.stats.since.store(since, std::sync::atomic::Ordering::Relaxed);
            self.set_stats_on(Some(since));
        }
    }

    /// A reader stops watching (after `watch_stats`).
    pub(crate) fn unwatch_stats(&self) {
        let mut n = self.stats.watchers.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        if *n == 0 && !self.stats.always {
            self.set_stats_on(None);
        }
    }

    /// Turn the statistics on (`Some`: since that clock reading) or off, here and in every
    /// ring's copy.
    fn set_stats_on(&self, since: Option<u64>) {
        use std::sync::atomic::Ordering::Release;
        // Release: a thread that sees the flag set also sees the new `since`.
        self.stats.on.store(since.is_some(), Release);
        for r in self.rings.iter() {
            r.stats_since.store(since.unwrap_or(events::STATS_OFF), Release);
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
