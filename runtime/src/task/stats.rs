//! A task's statistics, kept only when the runtime records events: its counts and
//! times ([`TaskStats`]), its histograms ([`PollStats`], [`TaskHistogram`]) and its
//! wait record.

use super::header::Header;
use super::wait;
use std::ptr::NonNull;

/// The task's statistics, if its runtime records events: a `TaskStats` tail after the
/// cell, at the offset its vtable gives, present when the state word says so. (Not a
/// header field: the header's size is on the hot path; measured, 8 more bytes in it cost
/// up to 2x on `spawn_many_local`.)
///
/// `task` must be the allocation's own pointer (with provenance over the tail) of a task
/// the caller keeps alive for `'a`.
#[inline]
pub(crate) fn stats<'a>(task: NonNull<Header>) -> Option<&'a TaskStats> {
    // SAFETY: the caller keeps the task alive; the header is at the allocation's start.
    let h = unsafe { task.as_ref() };
    if !h.state.has_stats() {
        return None;
    }
    // SAFETY: the caller keeps the task alive, and HAS_STATS is set.
    Some(unsafe { stats_unchecked(task) })
}

/// [`stats`] for a task known to have them, without checking the state word: on the
/// poll path of a runtime that records events, where every task has them.
///
/// # Safety
/// As for [`stats`], and the task must have been allocated with a `TaskStats` tail
/// (`HAS_STATS` set).
#[inline(always)]
pub(crate) unsafe fn stats_unchecked<'a>(task: NonNull<Header>) -> &'a TaskStats {
    // SAFETY: the caller keeps the task alive; the header is at the allocation's start.
    let h = unsafe { task.as_ref() };
    debug_assert!(h.state.has_stats(), "a task without statistics");
    // SAFETY: the caller promises the tail is there: with HAS_STATS set, `allocate` wrote
    // a `TaskStats` at `stats_offset` in this allocation, and only `dealloc` drops it;
    // `task` has provenance over the allocation.
    unsafe { &*task.as_ptr().cast::<u8>().add(h.vtable.stats_offset).cast::<TaskStats>() }
}

/// What the event ring keeps per task (only when recording is on). The clock values are
/// raw recorder ticks; only the thread running the task writes the poll fields.
///
/// In declaration order (`repr(C)`): what every wake and every poll's end write comes
/// first, and the group, name and spawn location, which the spawner writes with them
/// (about 90 bytes); then two parts only the task's poller writes, [`PollStats`] (its
/// histograms, 64 bytes) and its [`WaitRecord`](wait::WaitRecord) (104 bytes). The
/// spawner leaves those two uninitialized, and the poller writes each when it first
/// needs it: the wait record when a leaf future first records a wait
/// ([`TaskStats::wait_writer`]), the histograms at the end of the second poll
/// ([`TaskStats::poller`]). A task polled once that waited on no leaf never touches the
/// rest, and one that waited (a join in a fork-join tree) touches the wait record only.
#[repr(C)]
pub(crate) struct TaskStats {
    pub(crate) polls: std::sync::atomic::AtomicU64,
    pub(crate) busy_ticks: std::sync::atomic::AtomicU64,
    pub(crate) scheduled_ticks: std::sync::atomic::AtomicU64,
    /// When it was last queued, or its last poll's end (0: never).
    pub(crate) scheduled_at: std::sync::atomic::AtomicU64,
    pub(crate) last_poll_end: std::sync::atomic::AtomicU64,
    /// Who woke it last (`wait::wake_source` + 1; 0: never woken) and when (raw ticks).
    pub(crate) woken_by: std::sync::atomic::AtomicU64,
    pub(crate) woken_at: std::sync::atomic::AtomicU64,
    /// Set while the task sits in the live-task change log (`telemetry::tasks`), so it is
    /// queued there once however often it changes between two reads.
    pub(crate) queued: crate::loom::AtomicBool,
    /// Set (release) once the poller has written `poll`; a reader reads `poll` only after
    /// seeing it set (acquire).
    poll_ready: std::sync::atomic::AtomicBool,
    /// The same for `wait`.
    wait_ready: std::sync::atomic::AtomicBool,
    pub(crate) name: Option<Box<str>>,
    /// Where it was spawned (the caller of `spawn`, through `#[track_caller]`).
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    /// Uninitialized until `poll_ready` is set.
    poll: std::cell::UnsafeCell<std::mem::MaybeUninit<PollStats>>,
    /// Uninitialized until `wait_ready` is set.
    wait: std::cell::UnsafeCell<std::mem::MaybeUninit<wait::WaitRecord>>,
}

// SAFETY: every field but `poll` and `wait` is `Sync`. Each of those is written once, by
// the thread that polls the task (RUNNING is exclusive, and a later poller synchronizes
// with it through the state word) before it sets its flag with release; every other
// access is a shared read of atomics after an acquire load saw the flag set, or the
// poller's own, after its own write.
unsafe impl Sync for TaskStats {}

/// The histograms of a task's poll times and of its waits in a queue (see
/// `TaskHistogram`): one cache line, written by the task's poller from the end of its
/// second poll on.
#[derive(Default)]
pub(crate) struct PollStats {
    pub(crate) poll_hist: TaskHistogram,
    pub(crate) schedule_hist: TaskHistogram,
}

/// A part of [`TaskStats`] for a reader: `None` until the poller's first use wrote it
/// and set `ready`.
#[inline]
fn lazy_read<'a, T>(
    ready: &std::sync::atomic::AtomicBool,
    part: &'a std::cell::UnsafeCell<std::mem::MaybeUninit<T>>,
) -> Option<&'a T> {
    if !ready.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    // SAFETY: set with release after the part was written, never cleared; from then on
    // the part is only accessed through shared references to its atomics.
    Some(unsafe { (*part.get()).assume_init_ref() })
}

/// A part of [`TaskStats`] for the thread polling the task (its only writer), written
/// first (zeroed) if this is its first use.
///
/// # Safety
/// The caller polls the task now (holds RUNNING).
#[inline]
unsafe fn lazy_write<'a, T: Default>(
    ready: &std::sync::atomic::AtomicBool,
    part: &'a std::cell::UnsafeCell<std::mem::MaybeUninit<T>>,
) -> &'a T {
    use std::sync::atomic::Ordering::{Relaxed, Release};
    // Relaxed suffices for the poller: the poll that set it happened before this one
    // (through the task's state word), or was this one.
    if !ready.load(Relaxed) {
        // SAFETY: not yet written, so no reader looks at it (they wait for the flag),
        // and the caller is the only thread that may write it now.
        unsafe { (*part.get()).write(T::default()) };
        ready.store(true, Release);
    }
    // SAFETY: written, by this thread or an earlier poller (see above).
    unsafe { (*part.get()).assume_init_ref() }
}

/// What a spawn gives a new task's [`TaskStats`].
pub(crate) struct NewTaskStats {
    pub(crate) name: Option<Box<str>>,
    /// When it was queued (raw ticks; 0: not yet).
    pub(crate) scheduled_at: u64,
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    /// The index of its task group (`telemetry::groups`).
    pub(crate) group: u8,
}

impl TaskStats {
    /// Write a new task's statistics at `dst`, queued at `scheduled_at` (raw ticks; 0:
    /// not yet), leaving the poller's parts for its polls.
    ///
    /// # Safety
    /// `dst` is valid for writes of a `TaskStats` and aligned for one.
    pub(crate) unsafe fn write_new(dst: *mut TaskStats, new: NewTaskStats) {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        // SAFETY: the caller's contract; each field is written in place, and `poll` and
        // `wait` stay uninitialized (they are `MaybeUninit`s).
        unsafe {
            (&raw mut (*dst).polls).write(AtomicU64::new(0));
            (&raw mut (*dst).busy_ticks).write(AtomicU64::new(0));
            (&raw mut (*dst).scheduled_ticks).write(AtomicU64::new(0));
            (&raw mut (*dst).scheduled_at).write(AtomicU64::new(new.scheduled_at));
            (&raw mut (*dst).last_poll_end).write(AtomicU64::new(0));
            (&raw mut (*dst).woken_by).write(AtomicU64::new(0));
            (&raw mut (*dst).woken_at).write(AtomicU64::new(0));
            (&raw mut (*dst).queued).write(crate::loom::AtomicBool::new(false));
            (&raw mut (*dst).poll_ready).write(AtomicBool::new(false));
            (&raw mut (*dst).wait_ready).write(AtomicBool::new(false));
            (&raw mut (*dst).name).write(new.name);
            (&raw mut (*dst).spawned_at).write(new.spawned_at);
        }
    }

    /// The histograms of a task polled once, whose poll took `busy_ns` after `queued_ns`
    /// in a queue. Its poller writes the histograms from its second poll on, and then
    /// adds the first poll's times from the totals, which held them until then: a task
    /// polled once (most tasks of a program that spawns a lot) touches only the first
    /// part of its statistics.
    pub(crate) fn first_poll_histograms(
        busy_ns: u64,
        queued_ns: u64,
    ) -> ([u16; TASK_HIST_BUCKETS], [u16; TASK_HIST_BUCKETS]) {
        let (poll, schedule) = (TaskHistogram::default(), TaskHistogram::default());
        poll.record(busy_ns);
        schedule.record(queued_ns);
        (poll.read(), schedule.read())
    }

    /// The histograms, for a reader: `None` until the poller's first use of them.
    #[inline]
    pub(crate) fn polled(&self) -> Option<&PollStats> {
        lazy_read(&self.poll_ready, &self.poll)
    }

    /// The histograms, for the thread polling the task (the only writer), written first
    /// if this is their first use.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING).
    #[inline]
    pub(crate) unsafe fn poller(&self) -> &PollStats {
        // SAFETY: the caller's contract.
        unsafe { lazy_write(&self.poll_ready, &self.poll) }
    }

    /// [`TaskStats::poller`] for a task whose histograms are surely written (the end of
    /// its second poll writes them): no check.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING), and `poller` was called before.
    #[inline(always)]
    pub(crate) unsafe fn poller_written(&self) -> &PollStats {
        debug_assert!(self.poll_ready.load(std::sync::atomic::Ordering::Relaxed));
        // SAFETY: the caller's contract: an earlier `poller` wrote it.
        unsafe { (*self.poll.get()).assume_init_ref() }
    }

    /// The wait record, for a reader: `None` until a leaf future first recorded a wait.
    #[inline]
    pub(crate) fn wait_record(&self) -> Option<&wait::WaitRecord> {
        lazy_read(&self.wait_ready, &self.wait)
    }

    /// The wait record, for the thread polling the task (the only writer), written first
    /// if this is its first use.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING).
    #[inline]
    pub(crate) unsafe fn wait_writer(&self) -> &wait::WaitRecord {
        // SAFETY: the caller's contract.
        unsafe { lazy_write(&self.wait_ready, &self.wait) }
    }
}

/// Buckets of a per-task histogram: the log2 buckets of `telemetry::Histogram` from
/// 2^10 ns (about 1 µs; shorter times count there) to 2^25 ns (about 34 ms; longer times
/// count there), 16 in all. Counts are 16 bits: a task's two histograms share one cache
/// line (64 bytes), which with a million tasks is 64 MB rather than several times that.
pub(crate) const TASK_HIST_BUCKETS: usize = 16;
/// The `telemetry::Histogram` bucket of this one's first.
pub(crate) const TASK_HIST_FIRST: usize = 10;

/// A per-task log2 histogram of durations, written by one thread (the task's poller)
/// with plain load-and-store, read by any. When a bucket would pass `u16::MAX`, every
/// bucket is halved: the shape stays, and the counts become relative.
#[derive(Default)]
pub(crate) struct TaskHistogram(pub(crate) [std::sync::atomic::AtomicU16; TASK_HIST_BUCKETS]);

impl TaskHistogram {
    /// Count one duration of `ns` nanoseconds (the single writer only).
    #[inline(always)]
    pub(crate) fn record(&self, ns: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        // log2 of `ns / 2^10` is the bucket (0 for anything under 2^11 ns), capped at the
        // last: a shift, a leading-zero count and one compare.
        let i = ((63 - ((ns >> TASK_HIST_FIRST) | 1).leading_zeros()) as usize).min(TASK_HIST_BUCKETS - 1);
        let b = &self.0[i];
        let v = b.load(Relaxed).wrapping_add(1);
        if v == 0 {
            self.halve_and_count(i);
        } else {
            b.store(v, Relaxed);
        }
    }

    /// Bucket `i` was full: halve every bucket, then count the one duration in `i`
    /// (rare, so kept off the recording path).
    #[cold]
    #[inline(never)]
    fn halve_and_count(&self, i: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        for b in &self.0 {
            b.store(b.load(Relaxed) / 2, Relaxed);
        }
        self.0[i].store(self.0[i].load(Relaxed) + 1, Relaxed);
    }

    /// The counts.
    pub(crate) fn read(&self) -> [u16; TASK_HIST_BUCKETS] {
        std::array::from_fn(|i| self.0[i].load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod histogram_tests {
    use super::*;

    /// The spawner's write leaves the poller's parts alone; a reader sees neither until
    /// the poller's first use of each writes it, and then sees what the poller recorded.
    /// (Under Miri: no read of an uninitialized part, and the name is dropped once.)
    #[test]
    fn the_pollers_part_is_written_at_its_first_use_and_read_only_after() {
        let mut mem = std::mem::MaybeUninit::<TaskStats>::uninit();
        let new = NewTaskStats {
            name: Some("t".into()),
            scheduled_at: 7,
            spawned_at: std::panic::Location::caller(),
            group: 0,
        };
        // SAFETY: a `MaybeUninit<TaskStats>` is valid and aligned for one.
        unsafe { TaskStats::write_new(mem.as_mut_ptr(), new) };
        // SAFETY: `write_new` initialized everything but the `MaybeUninit` part.
        let st = unsafe { mem.assume_init_ref() };
        assert_eq!(st.scheduled_at.load(std::sync::atomic::Ordering::Relaxed), 7);
        assert!(st.polled().is_none(), "nothing to read before the first poll");
        // SAFETY: this thread stands for the task's poller.
        let p = unsafe { st.poller() };
        p.poll_hist.record(3_000);
        assert!(st.wait_record().is_none(), "the wait record is written at its own first use");
        // SAFETY: as above.
        let w = unsafe { st.wait_writer() };
        assert_eq!(w.read().map(|w| w.names_any()), Some(false), "a fresh record names no wait");
        assert!(st.wait_record().is_some());
        // SAFETY: as above; the second use finds it written and keeps what it holds.
        unsafe { st.poller() }.poll_hist.record(3_000);
        let read = st.polled().expect("written by the poller").poll_hist.read();
        assert_eq!((read[1], read.iter().map(|&c| c as u32).sum::<u32>()), (2, 2), "{read:?}");
        assert_eq!(TaskStats::first_poll_histograms(3_000, 0).0, {
            let mut one = [0; TASK_HIST_BUCKETS];
            one[1] = 1;
            one
        });
        // SAFETY: initialized above, dropped once.
        unsafe { mem.assume_init_drop() };
    }

    #[test]
    #[cfg_attr(miri, ignore = "70,000 atomic adds and no unsafe code: too slow under Miri for nothing to check")]
    fn task_histograms_bucket_by_log2_and_halve_when_full() {
        let h = TaskHistogram::default();
        h.record(0); // under 1 µs: the first bucket
        h.record(1_500); // 2^10..2^11 ns
        h.record(3_000_000_000); // 3 s: the last bucket
        let c = h.read();
        assert_eq!((c[0], c[TASK_HIST_BUCKETS - 1]), (2, 1), "{c:?}");
        for _ in 0..70_000 {
            h.record(5_000); // 2^12..2^13 ns: bucket 2
        }
        let c = h.read();
        assert!(c[2] > 30_000 && c[2] < u16::MAX, "halved once it was full: {c:?}");
        assert_eq!(c[TASK_HIST_BUCKETS - 1], 0, "the others halved with it: {c:?}");
    }

    /// The sizes the docs give (`Builder::event_ring`, the design notes): 256 bytes a
    /// task, of which the spawner writes the first 88.
    #[test]
    fn the_statistics_tail_is_256_bytes_88_written_at_the_spawn() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<TaskStats>(), 256);
        assert_eq!(offset_of!(TaskStats, poll), 88);
        assert_eq!(size_of::<PollStats>(), 64);
        assert_eq!(size_of::<wait::WaitRecord>(), 104);
    }
}
