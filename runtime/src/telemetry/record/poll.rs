//! The poll hooks (`Schedule::poll_start`, `poll_end`, `poll_outcome`): see "The poll
//! hooks" in the module above for why their stores are split as they are.

use super::WorkerRecorder;
use crate::task::header::Header;
use crate::task::schedule::{PollOutcome, PollToken};
use crate::telemetry::events::{self, EventKind, EventRing};
use crate::telemetry::groups::{self, NO_GROUP};
use crate::telemetry::metrics::Metrics;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

impl Metrics {
    // ---- The poll hooks ----------------------------------------------------------------

    /// `Schedule::poll_start`: see "The poll hooks".
    #[inline(always)]
    pub(crate) fn on_poll_start(&self, ptr: NonNull<Header>, cx: *const (), sampled: bool) -> PollToken {
        if self.clock.is_none() || cx.is_null() {
            return PollToken::NONE;
        }
        // SAFETY: only the scheduler's `run_task` passes a context: the recorder of the
        // polling worker, one of this runtime's (a worker's queues hold only its own
        // runtime's tasks), on that worker's own thread, alive while the runtime is.
        let w = unsafe { &*cx.cast::<WorkerRecorder>() };
        let now = w.last_ts.get();
        // After the transition to running: a task cancelled in its queue never shows as
        // polled. (A stall threshold always has the clock: see `Metrics::new`.)
        // SAFETY: the poller holds the task (RUNNING).
        self.stall.poll_begins(w.index, unsafe { ptr.as_ref() }.id, now);
        let ring = w.ring.get();
        if !ring.is_null() {
            // Written lazily: see "Lazy poll starts" in `telemetry::events`.
            // SAFETY: `ring` is this worker's ring in the runtime's recorder (see
            // `Core::ring`), alive with `self`; the poller holds the task (RUNNING).
            unsafe { (*ring).set_pending_start(ptr.as_ref().id, now) };
            if let Some(r) = &self.recorder {
                // Running now: a reader of the task list sees a long poll as it happens.
                self.mark_changed(r, ptr, Some(w));
            }
        }
        let ring = ring.cast();
        let mut waited = PollToken::NOT_QUEUED;
        if sampled {
            // SAFETY: the poller holds the task (RUNNING).
            let id = unsafe { ptr.as_ref() }.id;
            if let (Some(at), Some(clock)) = (self.schedule_samples.take(id), &self.clock) {
                waited = events::scale_ticks(clock.raw().saturating_sub(at), w.ns_per_tick_fp);
            }
        }
        PollToken {
            cx: (w as *const WorkerRecorder).cast(),
            ring,
            start: now,
            end: now,
            extra: 0,
            waited,
            busy_ns: PollToken::NOT_QUEUED,
            group: NO_GROUP,
        }
    }

    /// `Schedule::poll_end`: see "The poll hooks".
    #[inline(always)]
    pub(crate) fn on_poll_end(&self, ptr: NonNull<Header>, token: &mut PollToken) {
        let Some(clock) = &self.clock else { return };
        if token.cx.is_null() {
            return;
        }
        let now = clock.raw();
        token.end = now;
        // SAFETY: `token.cx` is the polling worker's recorder (`on_poll_start`), and the
        // scheduler checked that this thread still owns that worker.
        let w = unsafe { &*token.cx.cast::<WorkerRecorder>() };
        // A stall's report is written before the poll stops showing as running (or, for
        // one a reader marked as it ended, right after).
        let check = w.stall_check_ticks;
        if let Some((r, held)) = self.stall.poll_ends(w.index, now, check, |r| self.on_long_poll(w, ptr, r, now)) {
            self.on_stall(Some(w), r.task, w.index, held, now);
        }
        if token.ring.is_null() {
            // Timed for the poll-time histogram only: no ring, no task stats.
            return;
        }
        // SAFETY: `on_poll_start` set it from the recorder, alive with `self`.
        let ring = unsafe { &*token.ring.cast::<EventRing>() };
        let busy = now.saturating_sub(token.start);
        if ring.take_pending_start() {
            token.extra = events::POLL_IMPLICIT_START | (busy << events::POLL_BUSY_SHIFT);
        }
        // SAFETY: the poller holds the task (RUNNING).
        let h = unsafe { ptr.as_ref() };
        // The poll's number, for the waits it recorded and for deadlock readings: only
        // the poller writes it (RUNNING is exclusive). 0 until the first poll's end, so
        // it also tells the group's counts whether this was the task's first poll.
        let number = h.polls.load(Relaxed);
        h.polls.store(crate::task::header::next_poll_number(number), Relaxed);
        token.group = groups::poll_tag(h.group, number == 0);
        let since = ring.stats_since.load(Relaxed);
        if since == events::STATS_OFF {
            // Nobody watches (`TaskStatistics::WhileWatched`): the task's statistics are
            // left alone. The wait in a queue, if a sampled wake measured it, is in the
            // token already. (A change-log reader turns them on first, but this thread
            // may see its start before that: the task list still learns of the poll.)
            self.mark_changed_end(ptr, w);
            return;
        }
        // The task's statistics, all at once (one lookup, one cache line). Only the
        // thread running the task writes them (RUNNING is exclusive, and nothing queues a
        // RUNNING task: a wake during the poll only sets NOTIFIED), so plain loads and
        // stores suffice, and `scheduled_at` still holds what it held at the poll's start.
        // SAFETY: the poller holds the task (RUNNING), and with the ring on every
        // task of this runtime has statistics (`spawn_named` gives them to each one
        // while `self.recorder` is set, which it is for the runtime's whole life).
        let st = unsafe { crate::task::stats::stats_unchecked(ptr) };
        // Every way into a queue sets `scheduled_at` first (spawn, a wake, or the
        // store below for a requeue), so it is never stale here.
        let queued_at = st.scheduled_at.load(Relaxed);
        let polls = st.polls.load(Relaxed);
        let busy_before = st.busy_ticks.load(Relaxed);
        // Each duration is scaled to nanoseconds once, here, for the task's histograms
        // and the worker's (`on_poll_outcome`).
        let fp = clock.ns_per_tick_fp();
        let busy_ns = events::scale_ticks(busy, fp);
        token.busy_ns = busy_ns;
        let mut waited = 0;
        // A queued time from before the statistics were last turned on may be stale (the
        // task was woken again, unwatched): not a wait to count.
        if queued_at != 0 && queued_at >= since {
            waited = token.start.saturating_sub(queued_at);
            token.waited = events::scale_ticks(waited, fp);
            st.scheduled_ticks.store(st.scheduled_ticks.load(Relaxed) + waited, Relaxed);
        }
        if polls != 0 {
            // The histograms start at the second poll: until then the totals hold the
            // first poll's times (see `TaskStats::first_poll_histograms`), so a task
            // polled once, most of a spawn-heavy program's, never writes them.
            let hists = if polls == 1 {
                // SAFETY: the poller holds the task (RUNNING).
                unsafe { Self::first_histograms(st, busy_before, waited, fp) }
            } else {
                // SAFETY: the poller holds the task (RUNNING), and the end of its second
                // poll (`first_histograms`) wrote its poller part.
                unsafe { st.poller_written() }
            };
            if token.waited != PollToken::NOT_QUEUED {
                hists.schedule_hist.record(token.waited);
            }
            hists.poll_hist.record(busy_ns);
        }
        st.polls.store(polls + 1, Relaxed);
        st.busy_ticks.store(busy_before + busy, Relaxed);
        st.last_poll_end.store(now, Relaxed);
        // If the poll ends in a requeue, it was queued now; if it ends idle, the wake
        // that queues it again overwrites this (after it, through the state word).
        st.scheduled_at.store(now, Relaxed);
        self.mark_changed_end(ptr, w);
    }

    /// The end of a poll of the task at `ptr` on `w`, for the live-task change log (only
    /// while a reader watches it: otherwise one relaxed load).
    #[inline(always)]
    fn mark_changed_end(&self, ptr: NonNull<Header>, w: &WorkerRecorder) {
        if let Some(r) = &self.recorder {
            if r.changes.watching() {
                // SAFETY: with the ring on every task of this runtime has statistics (see
                // `on_poll_end`), and the poller holds the task.
                let st = unsafe { crate::task::stats::stats_unchecked(ptr) };
                r.changes.mark(ptr, &st.queued, Some(w.index));
            }
        }
    }

    /// The end of a task's second poll: its histograms start, with the first poll's
    /// times, which the totals held until now. Once per task, so kept out of the poll
    /// path.
    ///
    /// # Safety
    /// The caller polls the task (holds RUNNING).
    #[cold]
    #[inline(never)]
    unsafe fn first_histograms(
        st: &crate::task::stats::TaskStats,
        busy_before: u64,
        waited_now: u64,
        fp: u64,
    ) -> &crate::task::stats::PollStats {
        // SAFETY: the caller's contract.
        let hists = unsafe { st.poller() };
        // The caller added this poll's wait (`waited_now`) to `scheduled_ticks` already:
        // the first poll's is what it held before.
        let first_wait = st.scheduled_ticks.load(Relaxed) - waited_now;
        hists.poll_hist.record(events::scale_ticks(busy_before, fp));
        hists.schedule_hist.record(events::scale_ticks(first_wait, fp));
        hists
    }

    /// `Schedule::poll_outcome`: see "The poll hooks".
    #[inline(always)]
    pub(crate) fn on_poll_outcome(token: &PollToken, id: u64, outcome: PollOutcome) {
        if token.cx.is_null() {
            return;
        }
        // SAFETY: `on_poll_start` took this from a worker of the runtime on that worker's
        // thread (the only threads that poll its tasks), and the worker thread holds an
        // `Arc` to the runtime for its whole life, so it is alive here even if the task
        // is not. This is that worker's thread, so its owner-only fields are ours.
        let w = unsafe { &*token.cx.cast::<WorkerRecorder>() };
        w.last_ts.set(token.end);
        let h = &w.counters().histograms;
        let fp = w.ns_per_tick_fp;
        let busy_ns = if !token.ring.is_null() {
            // SAFETY: as above: that worker's ring in the runtime's recorder.
            let ring = unsafe { &*token.ring.cast::<EventRing>() };
            // `on_poll_end` took the poll's start (or a record inside the poll wrote it),
            // and nothing records between `on_poll_end` and here.
            ring.write_event_no_pending(EventKind::PollEnd, id, outcome as u64 | token.extra, token.end);
            // With the ring, `on_poll_end` scaled it for the task's histogram.
            token.busy_ns
        } else {
            events::scale_ticks(token.end.saturating_sub(token.start), fp)
        };
        // Every poll's wait with the ring on; a sampled wake's without it.
        if token.waited != PollToken::NOT_QUEUED {
            h.schedule_latency.record(token.waited);
        }
        h.poll_time.record(busy_ns);
        // The task's group (`telemetry::groups`).
        w.counters().count_group_poll(busy_ns, token.group, token.waited);
    }
}
