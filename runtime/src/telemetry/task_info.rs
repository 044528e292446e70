//! One live task as telemetry reads it: [`TaskInfo`] (the public view), [`TaskRow`]
//! (the console's index row) and [`TaskState`], read from a task's header and
//! statistics without blocking its worker.

use super::{Histogram, WaitReason, WakeSource};
use std::sync::atomic::Ordering::Relaxed;

/// One live task, as [`Telemetry::tasks`](super::Telemetry::tasks) lists it.
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
/// ([`Telemetry::for_each_task`](super::Telemetry::for_each_task),
/// [`TaskWatch`](super::TaskWatch)). [`Telemetry::task`](super::Telemetry::task) reads
/// one task whole, as a [`TaskInfo`].
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
    /// The task's poll number (`Header::polls`: every poll that ended, watched or not,
    /// wrapping), which tells two readings whether it ran in between.
    pub(crate) poll_number: u32,
}

/// A task's histograms as [`Histogram`]s: their buckets put where the runtime-wide
/// histograms keep the same ranges, their sums the task's busy and queued time.
pub(super) fn task_histograms(st: &crate::task::stats::TaskStats, row: &TaskRow) -> (Histogram, Histogram) {
    use crate::task::stats::TASK_HIST_FIRST;
    let widen = |counts: [u16; crate::task::stats::TASK_HIST_BUCKETS], sum: u64| {
        let mut h = Histogram::default();
        for (i, c) in counts.into_iter().enumerate() {
            h.buckets[TASK_HIST_FIRST + i] = c as u64;
        }
        h.sum = sum;
        h
    };
    let (poll, schedule) = match (row.polls, st.polled()) {
        (1, _) => crate::task::stats::TaskStats::first_poll_histograms(row.busy_ns, row.scheduled_ns),
        (2.., Some(p)) => (p.poll_hist.read(), p.schedule_hist.read()),
        _ => Default::default(),
    };
    (widen(poll, row.busy_ns), widen(schedule, row.scheduled_ns))
}

/// Who holds the one reference to a task that a reader holds besides the owned list's.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Holder {
    /// A walk of the owned list (`OwnedTasks::for_each`, `with_task`).
    Walk,
    /// The change log, handing the task over (it cleared the task's `queued` flag).
    Log,
}

/// Read one task, which the caller keeps alive with one reference of its own
/// (`holder`'s). `None` if it has no statistics.
pub(super) fn read_task<'a>(
    rec: &super::recorder::Recorder,
    now: u64,
    t: std::ptr::NonNull<crate::task::header::Header>,
    holder: Holder,
) -> Option<(TaskRow, Option<&'a str>)> {
    let st = crate::task::stats::stats(t)?;
    let clock = rec.clock();
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
    // A figure that says when something happened is current only if it was written
    // while the statistics are kept, as they are now: with `TaskStatistics::WhileWatched`
    // one from an earlier watch may be stale (the task ran since, unwatched), so it reads
    // as unknown.
    let (on, since) = (rec.stats_on(), rec.stats_since());
    let fresh = |t: u64| if on && t >= since { t } else { 0 };
    let last = fresh(st.last_poll_end.load(Relaxed));
    let woken_at = fresh(st.woken_at.load(Relaxed));
    let polls = st.polls.load(Relaxed);
    let poll_number = h.polls.load(Relaxed);
    // Only the waits its latest poll named (see `task::wait`); an idle task whose latest
    // poll named none waits on something no Volt leaf names: `unknown`, never an older
    // poll's wait and never nothing. (A task that never recorded has no wait record:
    // the same.) A queued task that its own poll queued again (`yield_now`, or a wake
    // during the poll), with no wake since, waits on its yield: the poll's end stamped
    // `scheduled_at` and `last_poll_end` with the same reading, and a later wake would
    // have moved `woken_at` past it.
    //
    // The state word is read again after the stamps: a reader that loaded it before a poll
    // (queued) and the stamps after that poll's end (which stamps both, whether the task
    // goes idle or is queued again) would call a task that has just gone idle "yielded".
    // (A test saw it with the reader's thread preempted between the loads.)
    let yielded = state == TaskState::Scheduled
        && last != 0
        && st.scheduled_at.load(Relaxed) == last
        && st.woken_at.load(Relaxed) <= last
        && h.state.load().lifecycle() == Lifecycle::Scheduled;
    use crate::task::wait::WaitWords;
    let wait = if idle {
        let latest = st.wait_record().and_then(|w| w.read()).filter(|w| w.is_current(poll_number) && w.names_any());
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
        woken_by: if woken_at == 0 { 0 } else { st.woken_by.load(Relaxed) },
        woken_at_ns: if woken_at == 0 { 0 } else { clock.since_start_ns(woken_at).max(1) },
        poll_number,
    };
    Some((row, st.name.as_deref()))
}

/// A [`TaskInfo`] from a reading.
pub(super) fn task_info(
    row: &TaskRow,
    name: Option<&str>,
    st: &crate::task::stats::TaskStats,
    now_ns: u64,
) -> TaskInfo {
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
