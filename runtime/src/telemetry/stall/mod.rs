//! Stalls: polls that hold their worker past `Builder::stall_threshold`, each reported
//! once, with its true length and, where it was long enough, the stack it was stuck in.
//!
//! # The worker measures its own polls
//! Before each poll the worker advances its poll count, which numbers the poll, and
//! stores the poll's number, start (the clock reading that times the poll anyway) and
//! task in its [`WorkerSlot`]; after the poll it marks the poll ended. A stall threshold turns the
//! poll timing on, so the poll's end has its length at hand: a poll that ran past the
//! threshold is a stall, and the worker itself writes its report into a ring of its own
//! ([`record`]), with the length measured there and then. Nothing has to catch it in the
//! act: however busy the machine, and whether or not any other thread ran meanwhile, a
//! long poll is reported, once. On the hot path this is four stores, a few loads of the
//! worker's own slot, a subtraction and a compare per poll; the report is written only
//! for a stall. A poll that a blocking join interrupts (to run another task inline, or
//! to hand the worker to another thread) is measured in stretches: each stretch that
//! held the worker is judged on its own, with a number of its own.
//!
//! # A poll still running
//! A poll whose start is a threshold old is a stall already. Whoever sees that first
//! counts it (a reader taking a snapshot, a sampler, the worker at the poll's end): the
//! slot's `claimed` holds the last poll number counted, moved forward with a
//! compare-and-swap, so each poll counts once, and the counter only ever grows.
//! `Telemetry::stalls` lists such a poll as `ongoing`, with its length so far; when it
//! ends, the worker's report (its true length) takes its place, as the same stall. The
//! worker writes that report before it marks the poll ended (with release), so a reader
//! that no longer sees the poll running finds its report.
//!
//! A reader sees a poll whole: the slot's sequence word is `2n + 1` while the worker is
//! in its poll `n` and `2n + 2` after, written after the poll's task and start (release);
//! a reader keeps the task and start only if the word was odd and did not move while it
//! read them ([`slot`]).
//!
//! # Taking the stack
//! A stack must be taken while the poll is still stuck, and on a busy machine a thread
//! that watches from outside may get no CPU for seconds, exactly when stalls happen. So
//! the stuck thread takes its own stack, in a signal handler (Linux, see [`capture`]):
//! a CPU-time timer of the worker's own thread interrupts a poll that computes, and a
//! poll blocked in a system call (which uses no CPU time) is sent the signal by a
//! sampler that sees it: another worker at a point it passes anyway (a budget tick's
//! start, the watcher's timed wake), or the monitor's thread. The handler walks the stack
//! into the worker's buffer; the report copies it at the poll's end. A stall whose poll
//! ended before any signal came is reported without a stack, and says so
//! ([`MissingStack::PollEnded`]).
//!
//! # Who samples
//! A thread that wakes on a timer to sample disturbs what it watches: under an HTTP load
//! on two cores, a monitor waking every 5 ms put the server's p99 5% above the same
//! server's without it. So the workers sample, at points they pass anyway: a budget
//! tick's start once 64 polls have run since their last offer, and the watcher's timed
//! wake (a parked worker that keeps a 10 ms timeout while another is out, see
//! `scheduler::idle`). Once half a threshold has passed since the last sample, the worker
//! that wins a compare-and-swap on the due time samples: a few loads per worker, and a
//! signal for a stuck poll with no stack yet. The monitor's thread (only where stacks are
//! taken) samples every [`NET_PERIOD`] (or the threshold, if longer) while the workers
//! sample, and every half threshold while none does (one worker, every worker stuck, or the others parked with
//! nobody watching); it runs at the default priority, and it is needed only for the
//! stacks of polls blocked in a system call.
//!
//! # Sleeping while every worker sleeps
//! An idle runtime must cost nothing, so the monitor's thread does not sample while every
//! worker is parked. Before sleeping with no timeout it stores `sleeping = true` and then
//! reads the parked bitmap again (both sequentially consistent); it sleeps only if every
//! worker is still parked. A worker that leaves its park loads `sleeping` afterwards and,
//! if set, takes it and wakes the monitor: either the monitor's re-read sees the worker's
//! bit cleared, or the worker's load sees `sleeping`. It sleeps that way at most once
//! every [`NET_PERIOD`], so a worker pays that wake at most a few times a second.
//!
//! # Reports and their frames
//! A report holds the stack as addresses. Names and lines come when a reader asks
//! (`Telemetry::stalls`, the console), on the reader's thread ([`symbols`]): counting a
//! stall never waits for them, and a process nobody asks never loads its debug info.
//!
//! # At shutdown
//! The runtime's drop wakes the monitor's thread, which leaves at its next look (it holds
//! no lock and does no long work), and waits for it for at most [`EXIT_WAIT`]. Each
//! worker thread deletes its timer as it leaves the worker's loop.

#[cfg(target_os = "linux")]
mod capture;
mod cursor;
mod record;
mod report;
pub(crate) mod slot;
mod stack;
mod symbols;
mod thread;

pub use report::{MissingStack, StackFrame, Stall};
pub(crate) use stack::StackBuf;
use stack::WRITING;
pub(crate) use thread::start;

pub use cursor::StallCursor;

use crate::telemetry::clock::Clock;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::Counter;
use record::{EndedPoll, EndedRing};
use slot::{PollSlot, Running};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU64};
use std::time::{Duration, Instant};

/// How many stalls `Telemetry::stalls` returns at most (the newest).
pub const STALL_HISTORY: usize = 64;
/// The most frames a stack keeps.
pub(crate) const MAX_FRAMES: usize = 64;
/// How deep a stall's stack is taken: at most this many return addresses, innermost
/// first. [`Stall::frames`] names each, and may list more frames than this where calls
/// were inlined into one address.
pub const STALL_STACK_DEPTH: usize = MAX_FRAMES;
/// Frames a walk stores: a report's, plus the signal handler's own above them.
const WALK_FRAMES: usize = MAX_FRAMES + 32;
/// How long a runtime's drop waits for the monitor's thread to leave.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(1);

/// Whether this runtime takes stacks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stacks {
    On,
    Off,
    Unsupported,
}

/// One worker, as the stall machinery sees it. `poll` changes with every poll (the
/// worker writes it); the rest change once per stall at most.
#[repr(C, align(64))]
pub(crate) struct WorkerSlot {
    poll: PollSlot,
    /// The kernel id of the thread running the worker's loop.
    tid: AtomicI32,
    /// A sampler asked this thread for its stack (see `capture`).
    asked: AtomicBool,
    /// The last poll number a sampler sent the signal for.
    signalled: AtomicU64,
    /// The last poll number with a report in `ended`.
    recorded: AtomicU64,
    stack: StackBuf,
    ended: EndedRing,
}

impl WorkerSlot {
    fn new() -> WorkerSlot {
        WorkerSlot {
            poll: PollSlot::new(),
            tid: AtomicI32::new(0),
            asked: AtomicBool::new(false),
            signalled: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            stack: StackBuf::new(),
            ended: EndedRing::new(),
        }
    }

    /// The signal handler: whether a sampler's request is waiting (and take it).
    #[cfg(target_os = "linux")]
    fn take_request(&self) -> bool {
        self.asked.load(Relaxed) && self.asked.swap(false, Acquire)
    }
}

/// The runtime's stall machinery (in its `Metrics`).
pub(crate) struct StallMonitor {
    threshold: Option<Duration>,
    /// The threshold in clock ticks (`u64::MAX` without one).
    threshold_ticks: u64,
    stacks: Stacks,
    /// The runtime's clock (present whenever there is a threshold: see `Metrics::new`).
    clock: Option<Clock>,
    pub(crate) slots: Box<[WorkerSlot]>,
    sleeping: AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// The instant `next_sample` and `worker_sampled` count from.
    epoch: Instant,
    /// When the workers' next sample is due, in nanoseconds since `epoch` (`u64::MAX`
    /// while nobody takes stacks: sampling is only for them).
    next_sample: AtomicU64,
    /// When a worker last sampled, in nanoseconds since `epoch` plus one (0: never).
    worker_sampled: AtomicU64,
}

impl StallMonitor {
    pub(crate) fn new(workers: usize, threshold: Option<Duration>, stacks: bool, clock: Option<Clock>) -> StallMonitor {
        // Under 1 ms the monitor would sample without pause (it sleeps half a threshold
        // between samples), so shorter thresholds count as 1 ms.
        let threshold = threshold.filter(|t| !t.is_zero()).map(|t| t.max(Duration::from_millis(1)));
        let threshold_ticks = match (threshold, &clock) {
            (Some(t), Some(c)) => c.ns_to_ticks(t.as_nanos().min(u64::MAX as u128) as u64).max(1),
            _ => u64::MAX,
        };
        let stacks = if !stacks {
            Stacks::Off
        } else if supported() {
            Stacks::On
        } else {
            Stacks::Unsupported
        };
        StallMonitor {
            threshold,
            threshold_ticks,
            stacks,
            clock,
            slots: (0..workers).map(|_| WorkerSlot::new()).collect(),
            sleeping: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            next_sample: AtomicU64::new(u64::MAX),
            worker_sampled: AtomicU64::new(0),
        }
    }

    /// What a poll's end compares its length (in clock ticks) with before it looks
    /// further: the threshold less an eighth, so that a poll another thread counted as
    /// a stall (by its own reading of the clock) is never missed at its end. `u64::MAX`
    /// without a threshold.
    pub(crate) fn end_check_ticks(&self) -> u64 {
        match self.threshold_ticks {
            u64::MAX => u64::MAX,
            t => t - t / 8,
        }
    }

    // ---- The worker's side ------------------------------------------------------------

    /// Worker `index` begins a poll (or a poll's next stretch) of task `id` at clock
    /// reading `start`, after the task's transition to running.
    #[inline(always)]
    pub(crate) fn poll_begins(&self, index: usize, id: u64, start: u64) {
        debug_assert!(index < self.slots.len());
        // SAFETY: `index` is a worker index of this runtime, and there is a slot per
        // worker (hot path: no bounds check beyond the debug assertion above).
        unsafe { self.slots.get_unchecked(index) }.poll.begin(id, start);
    }

    /// Worker `index`'s poll returned at clock reading `end`. A poll that ran at least
    /// `check` ticks (`end_check_ticks`, the worker's copy) goes to `long` first, which
    /// reports it if it is a stall; after the poll shows as ended, one a reader marked
    /// stuck meanwhile (whose report the worker still owes) goes to `long` too. `long`
    /// gets the poll and returns the stall's length if it reported one. One load of the
    /// slot's mark beyond the stores.
    #[inline(always)]
    pub(crate) fn poll_ends(
        &self,
        index: usize,
        end: u64,
        check: u64,
        long: impl Fn(Running) -> Option<Duration>,
    ) -> Option<(Running, Duration)> {
        // SAFETY: as in `poll_begins`.
        let slot = unsafe { self.slots.get_unchecked(index) };
        let r = slot.poll.own()?;
        let mut stalled = None;
        if end.saturating_sub(r.start) >= check {
            stalled = long(r);
        }
        slot.poll.end();
        if stalled.is_none() && slot.poll.is_marked(r.poll) {
            stalled = long(r);
        }
        stalled.map(|d| (r, d))
    }

    /// The report of worker `index`'s poll `r` that ended at clock reading `end`, if it
    /// is a stall: longer than the threshold, or marked stuck by a reader while it ran.
    /// `name` is the task's name if known; `stalls` the worker's stall counter. Writes the
    /// report (once per poll) and counts it unless a reader did; returns its length.
    /// Allocates nothing and takes no lock.
    #[cold]
    #[inline(never)]
    pub(crate) fn report(
        &self,
        index: usize,
        r: Running,
        end: u64,
        name: Option<&str>,
        stalls: &Counter,
    ) -> Option<Duration> {
        let slot = &self.slots[index];
        if slot.recorded.load(Relaxed) == r.poll {
            return None;
        }
        let long = end.saturating_sub(r.start) >= self.threshold_ticks;
        if !long && !slot.poll.is_marked(r.poll) {
            return None;
        }
        let mut ips = [0usize; MAX_FRAMES];
        let (n, stack_at, missing) = match self.stacks {
            Stacks::Off => (0, 0, MissingStack::Off.code()),
            Stacks::Unsupported => (0, 0, MissingStack::Unsupported.code()),
            // Taken by this thread's own handler (the buffer is this worker's, and the
            // handler leaves it alone once the poll is no longer running, or has its
            // stack): a stack taken after the poll's end is not the poll's.
            Stacks::On => match slot.stack.read(r.poll, &mut ips) {
                Some((n, at)) if at <= end => (n, at, 0),
                _ => (0, 0, MissingStack::PollEnded.code()),
            },
        };
        let e = EndedPoll { task: r.task, poll: r.poll, start: r.start, end, stack_at, missing };
        slot.ended.push(&e, &ips[..n], name);
        slot.recorded.store(r.poll, Release);
        // Counted once the report is in: a reader that sees the count finds it.
        if slot.poll.mark(r.poll) && slot.poll.count(r.poll) {
            stalls.add_shared(1);
        }
        Some(Duration::from_nanos(self.ticks_to_ns(end.saturating_sub(r.start))))
    }

    /// The poll running on worker `index` stops holding the worker at clock reading
    /// `now`: a blocking join in it is about to run another task inline, or to hand the
    /// worker to another thread. That stretch is reported as a stall if it is one; the
    /// rest of the poll, if the worker comes back to it, is a stretch of its own
    /// ([`StallMonitor::poll_begins`] again, with a new number). Returns the task and the
    /// length if it was a stall.
    pub(crate) fn interrupt_poll(&self, index: usize, now: u64, stalls: &Counter) -> Option<(u64, Duration)> {
        self.poll_ends(index, now, 0, |r| self.report(index, r, now, None, stalls)).map(|(r, d)| (r.task, d))
    }

    /// The calling thread now runs worker `index`'s loop: its stack may be taken, by its
    /// own CPU-time timer among others. Until [`StallMonitor::leave_thread`], which the
    /// thread calls before it lets go of the runtime.
    pub(crate) fn enter_thread(&self, index: usize) {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a plain call with no preconditions.
            let tid = unsafe { libc::gettid() };
            self.slots[index].tid.store(tid, Relaxed);
            if self.stacks == Stacks::On && self.threshold.is_some() && !cfg!(miri) {
                // A quarter threshold of CPU time: a poll that computes is looked at about
                // four times within each threshold it runs (see `capture`).
                let period = self.threshold.map(|t| (t / 4).max(Duration::from_millis(1)));
                // SAFETY: `self` is part of the runtime's shared state, which the worker's
                // thread holds until after `leave_thread`.
                unsafe { capture::enter(self, index, period) };
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = index;
    }

    /// The calling thread no longer runs a worker's loop (see `enter_thread`).
    pub(crate) fn leave_thread(&self) {
        #[cfg(target_os = "linux")]
        if self.stacks == Stacks::On {
            capture::leave();
        }
    }

    /// The signal handler on worker `index`'s own thread, stopped at `pc`: take the stack
    /// if the poll it is in has run past the threshold and has none yet. No allocation, no
    /// lock.
    #[cfg(target_os = "linux")]
    fn capture_if_stuck(&self, index: usize, pc: Option<usize>) {
        let slot = &self.slots[index];
        // This thread's own stores, in its own order (the handler interrupted it between
        // two of its instructions).
        let Some(Running { poll, start, .. }) = slot.poll.own() else { return };
        let Some(clock) = self.clock else { return };
        let now = clock.raw();
        let buf = &slot.stack;
        if now.saturating_sub(start) < self.threshold_ticks || buf.poll.load(Relaxed) == poll {
            return;
        }
        buf.poll.store(WRITING, Relaxed);
        fence(Release);
        let (n, from) = capture::walk(pc, &buf.ips);
        buf.len.store(n, Relaxed);
        buf.from.store(from, Relaxed);
        buf.taken_at.store(now, Relaxed);
        buf.poll.store(poll, Release);
    }

    // ---- Counting -----------------------------------------------------------------------

    /// The polls running past the threshold now (marked, and counted here if the worker
    /// is still in them and nobody had yet: see `slot`), by worker. The clock is read
    /// before the slots: a poll seen running after that reading had run at least that
    /// long.
    fn stuck_now(&self, m: &Metrics) -> Vec<(usize, Running)> {
        let Some(clock) = self.clock.filter(|_| self.threshold.is_some()) else { return Vec::new() };
        let now = clock.raw();
        let mut out = Vec::new();
        for (i, c) in m.workers().enumerate() {
            if let Some(r) = self.slots[i].poll.running() {
                if now.saturating_sub(r.start) >= self.threshold_ticks {
                    if self.slots[i].poll.claim_running(r.poll) {
                        c.stalls.add_shared(1);
                    }
                    out.push((i, r));
                }
            }
        }
        out
    }

    /// Count the polls running past the threshold now (a snapshot's reading of
    /// `stalls_total` includes them).
    pub(crate) fn count_running(&self, m: &Metrics) {
        self.stuck_now(m);
    }

    // ---- Sampling (for stacks) ----------------------------------------------------------

    /// Worker `me` samples the others if a sample is due (see "Who samples"): one load
    /// and a compare when it is not. `now` is any recent reading (a tick's start).
    #[inline]
    pub(crate) fn maybe_sample(&self, m: &Metrics, me: usize, now: Instant, shutting_down: bool) {
        let due = self.next_sample.load(Acquire);
        if due == u64::MAX {
            return;
        }
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        if t >= due {
            self.sample_now(m, me, t, due, shutting_down);
        }
    }

    #[cold]
    fn sample_now(&self, m: &Metrics, me: usize, t: u64, due: u64, shutting_down: bool) {
        let Some(threshold) = self.threshold else { return };
        let half = u64::try_from((threshold / 2).as_nanos()).unwrap_or(u64::MAX);
        let next = t.saturating_add(half).min(u64::MAX - 1);
        // One sampler per period: whoever moves the due time on samples.
        if self.next_sample.compare_exchange(due, next, Relaxed, Relaxed).is_err() {
            return;
        }
        self.worker_sampled.store(t + 1, Relaxed);
        self.sample(m, Some(me), shutting_down);
    }

    /// Look at every worker but `me`: count a poll past the threshold, and ask its
    /// thread for its stack if it has none yet (not once the runtime shuts down).
    fn sample(&self, m: &Metrics, me: Option<usize>, shutting_down: bool) {
        for (i, r) in self.stuck_now(m) {
            if Some(i) != me && self.stacks == Stacks::On && !shutting_down {
                self.ask_for_stack(i, r.poll);
            }
        }
    }

    /// Send worker `index`'s thread the signal that makes it take its stack, once per
    /// poll.
    fn ask_for_stack(&self, index: usize, poll: u64) {
        let slot = &self.slots[index];
        if slot.stack.poll.load(Acquire) == poll {
            return;
        }
        let prev = slot.signalled.load(Relaxed);
        if prev >= poll || slot.signalled.compare_exchange(prev, poll, Relaxed, Relaxed).is_err() {
            return;
        }
        slot.asked.store(true, Release);
        #[cfg(target_os = "linux")]
        capture::ask(slot.tid.load(Relaxed));
    }

    /// A worker left its park: wake the monitor if it sleeps (see "Sleeping while every
    /// worker sleeps").
    #[inline]
    pub(crate) fn worker_woke(&self) {
        if self.sleeping.load(SeqCst) && self.sleeping.swap(false, SeqCst) {
            self.unpark();
        }
    }

    /// Wake the monitor (a worker woke, or the runtime shuts down).
    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    // ---- Reading ------------------------------------------------------------------------

    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.clock.map_or(ticks, |c| c.ticks_to_ns(ticks))
    }

    /// The newest stalls (at most [`STALL_HISTORY`]), oldest first: the ended ones by
    /// their end, then the polls still running past the threshold.
    pub(crate) fn history(&self, m: &Metrics, name_of: &dyn Fn(u64) -> Option<String>) -> Vec<Stall> {
        // Running polls first: one that ends meanwhile has its report in by the time it
        // stops showing as running, and is then shown once, ended.
        let running = self.stuck_now(m);
        let mut ended: Vec<(usize, record::Ended)> = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            ended.extend(slot.ended.read_from(0).0.into_iter().map(|e| (i, e)));
        }
        ended.sort_by_key(|(_, e)| e.poll.end);
        let running: Vec<_> =
            running.into_iter().filter(|(i, r)| !ended.iter().any(|(j, e)| j == i && e.poll.poll == r.poll)).collect();
        let keep = STALL_HISTORY.saturating_sub(running.len());
        let skip = ended.len().saturating_sub(keep);
        let mut out: Vec<Stall> = ended.into_iter().skip(skip).map(|(i, e)| self.ended_stall(i, e, name_of)).collect();
        out.extend(running.into_iter().map(|(i, r)| self.running_stall(i, r, name_of)));
        out
    }

    /// The polls running past the threshold now, as ongoing stalls.
    pub(crate) fn running(&self, m: &Metrics, name_of: &dyn Fn(u64) -> Option<String>) -> Vec<Stall> {
        self.stuck_now(m).into_iter().map(|(i, r)| self.running_stall(i, r, name_of)).collect()
    }

    /// Whether [`StallMonitor::since`] would return a stall for `cursor`, or a poll runs
    /// past the threshold now: a few loads per worker.
    pub(crate) fn anything_since(&self, m: &Metrics, cursor: &[u64]) -> bool {
        self.slots.iter().enumerate().any(|(i, s)| s.ended.written() > cursor.get(i).copied().unwrap_or(0))
            || !self.stuck_now(m).is_empty()
    }

    /// The ended stalls each worker reported since `cursor` (its workers' report counts,
    /// grown to the number of workers), the newest `max` of them, oldest first; `cursor`
    /// moves past them all.
    pub(crate) fn since(
        &self,
        cursor: &mut Vec<u64>,
        max: usize,
        name_of: &dyn Fn(u64) -> Option<String>,
    ) -> Vec<Stall> {
        cursor.resize(self.slots.len(), 0);
        let mut ended: Vec<(usize, record::Ended)> = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let (new, written) = slot.ended.read_from(cursor[i]);
            ended.extend(new.into_iter().map(|e| (i, e)));
            cursor[i] = written;
        }
        ended.sort_by_key(|(_, e)| e.poll.end);
        let skip = ended.len().saturating_sub(max);
        ended.into_iter().skip(skip).map(|(i, e)| self.ended_stall(i, e, name_of)).collect()
    }

    fn ended_stall(&self, worker: usize, e: record::Ended, name_of: &dyn Fn(u64) -> Option<String>) -> Stall {
        let p = e.poll;
        Stall {
            worker,
            poll: p.poll,
            task_id: p.task,
            task_name: e.name.or_else(|| name_of(p.task)),
            duration: Duration::from_nanos(self.ticks_to_ns(p.end.saturating_sub(p.start))),
            ongoing: false,
            frames: symbols::resolve(&e.ips),
            missing_stack: MissingStack::from_code(p.missing),
            stack_taken_after: (p.stack_at != 0)
                .then(|| Duration::from_nanos(self.ticks_to_ns(p.stack_at.saturating_sub(p.start)))),
        }
    }

    fn running_stall(&self, worker: usize, r: Running, name_of: &dyn Fn(u64) -> Option<String>) -> Stall {
        let now = self.clock.map_or(0, |c| c.raw());
        let mut ips = [0usize; MAX_FRAMES];
        let stack = match self.stacks {
            Stacks::On => self.slots[worker].stack.read(r.poll, &mut ips),
            _ => None,
        };
        let (frames, missing, after) = match (stack, self.stacks) {
            (Some((n, at)), _) => (
                symbols::resolve(&ips[..n]),
                None,
                Some(Duration::from_nanos(self.ticks_to_ns(at.saturating_sub(r.start)))),
            ),
            (None, Stacks::On) => (Vec::new(), Some(MissingStack::NotYet), None),
            (None, Stacks::Off) => (Vec::new(), Some(MissingStack::Off), None),
            (None, Stacks::Unsupported) => (Vec::new(), Some(MissingStack::Unsupported), None),
        };
        Stall {
            worker,
            poll: r.poll,
            task_id: r.task,
            task_name: name_of(r.task),
            duration: Duration::from_nanos(self.ticks_to_ns(now.saturating_sub(r.start))),
            ongoing: true,
            frames,
            missing_stack: missing,
            stack_taken_after: after,
        }
    }
}

/// Whether stacks can be taken in this process.
fn supported() -> bool {
    #[cfg(target_os = "linux")]
    {
        !cfg!(miri) && capture::supported()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A threshold under 1 ms would have the monitor sample without sleeping (it sleeps
    /// half a threshold): it counts as 1 ms; zero turns stalls off.
    #[test]
    fn thresholds_under_a_millisecond_count_as_one() {
        let c = Some(Clock::new());
        let ms = Duration::from_millis(1);
        assert_eq!(StallMonitor::new(1, Some(Duration::from_nanos(1)), true, c).threshold, Some(ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::from_micros(999)), true, c).threshold, Some(ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::from_millis(7)), true, c).threshold, Some(7 * ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::ZERO), true, c).threshold, None);
        assert_eq!(StallMonitor::new(1, None, true, c).threshold_ticks, u64::MAX);
        assert_eq!(StallMonitor::new(1, None, true, c).end_check_ticks(), u64::MAX);
    }

    /// The end of a long poll writes one report with the poll's own length; a short one,
    /// none; a poll a reader marked stuck while it ran is reported even if its end reads
    /// it a little short of the threshold, and counted once; a stretch reported when a
    /// join interrupted it is not reported again.
    #[test]
    fn a_long_polls_end_reports_it_once_with_its_length() {
        let clock = Clock::new();
        let m = StallMonitor::new(1, Some(Duration::from_millis(10)), false, Some(clock));
        let stalls = Counter::default();
        let ms = |n: u64| clock.ns_to_ticks(n * 1_000_000);
        let check = m.end_check_ticks();
        let t0 = 1_000_000;
        let end = |at: u64, name: Option<&'static str>| {
            m.poll_ends(0, at, check, |r| m.report(0, r, at, name, &stalls)).map(|(_, d)| d)
        };
        m.poll_begins(0, 7, t0);
        let d = end(t0 + ms(600), Some("long")).expect("a stall");
        assert!(d >= Duration::from_millis(599) && d <= Duration::from_millis(601), "{d:?}");
        assert_eq!(stalls.get(), 1);
        // Short: not a stall.
        m.poll_begins(0, 8, t0);
        assert_eq!(end(t0 + ms(9), None), None);
        // Marked by a reader while it ran (and counted there), ended a little short by
        // this reading: reported, not counted again.
        m.poll_begins(0, 9, t0);
        let r = m.slots[0].poll.running().unwrap();
        assert!(m.slots[0].poll.claim_running(r.poll));
        stalls.add_shared(1);
        assert!(end(t0 + ms(9), None).is_some());
        assert_eq!(stalls.get(), 2, "the counted poll is not counted again at its end");
        // Marked by a reader that saw it end before counting it: the worker counts it.
        m.poll_begins(0, 10, t0);
        let r = m.slots[0].poll.running().unwrap();
        assert!(m.slots[0].poll.mark(r.poll));
        assert!(end(t0 + ms(3), None).is_some());
        assert_eq!(stalls.get(), 3);
        // Interrupted past the threshold (a join's help), then resumed and ended short:
        // one report, for the stretch before.
        m.poll_begins(0, 11, t0);
        assert!(m.interrupt_poll(0, t0 + ms(40), &stalls).is_some());
        m.poll_begins(0, 11, t0 + ms(41));
        assert_eq!(end(t0 + ms(42), None), None);
        assert_eq!(stalls.get(), 4);
        let reports = m.slots[0].ended.read_from(0).0;
        assert_eq!(reports.iter().map(|e| e.poll.task).collect::<Vec<_>>(), vec![7, 9, 10, 11]);
        assert_eq!(reports[0].name.as_deref(), Some("long"));
        assert_eq!(MissingStack::from_code(reports[0].poll.missing), Some(MissingStack::Off));
    }
}
