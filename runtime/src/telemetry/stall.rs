//! The stall monitor: a thread of its own (never a worker) that notices a worker stuck in
//! one poll past `Builder::stall_threshold`, takes that thread's stack while it is still
//! stuck, and keeps the report ([`Stall`], `Telemetry::stalls`).
//!
//! # Noticing a stall
//! Each worker counts its polls (`tasks_polled`) and, just before each poll, stores the
//! task's id in its slot here: one relaxed store. A sample looks at every worker: one that
//! is not parked and whose poll count (and park count) has not moved since a sample first
//! saw it at least a threshold ago is stuck in one poll (a worker between polls finds
//! work, runs the driver or parks within microseconds). Each stuck poll is reported once.
//! Its duration is the time since a sample first saw that count: a lower bound, within a
//! sampling period.
//!
//! # Who samples
//! A thread that wakes on a timer to sample disturbs what it watches: under an HTTP load
//! on two cores, a monitor waking every 5 ms put the server's p99 5% above the same
//! server's without it, at any priority the kernel gives an ordinary thread. So the
//! workers sample, at points they pass anyway: a budget tick's start once 64 polls have
//! run since their last offer, and the watcher's timed wake (a parked worker that keeps a
//! 10 ms timeout while another is out, see `scheduler::idle`). A tick pays a compare of
//! its poll counts; an offer, a load and a compare of the time; once half a threshold
//! has passed, the worker that wins a compare-and-swap on the due time takes the sample
//! (never waiting for the lock: if the monitor's thread holds it, the sample is
//! skipped). Only a stuck poll found wakes the monitor's thread, which takes the stack
//! and keeps the report.
//!
//! The monitor's thread also samples on its own: every [`NET_PERIOD`] while the workers
//! sample, and every half threshold while they do not (a runtime of one worker, every
//! worker stuck, or the others parked with nobody watching, as when the worker that held
//! the reactor wakes to run a task while the rest sleep). It runs at nice 19 on Linux
//! (not `SCHED_IDLE`, which a machine whose every core is busy starves for seconds).
//!
//! # Sleeping while every worker sleeps
//! An idle runtime must cost nothing, so the monitor's thread does not sample while every
//! worker is parked. Before sleeping with no timeout it stores `sleeping = true` and then
//! reads the parked bitmap again (both sequentially consistent); it sleeps only if every
//! worker is still parked. A worker that leaves its park (whoever cleared its bit: itself,
//! or a producer that claimed it) loads `sleeping` afterwards and, if set, takes it and
//! wakes the monitor. Either the monitor's re-read sees the worker's bit cleared, or the
//! worker's load comes after the monitor's store in the single order of sequentially
//! consistent operations and sees `sleeping`: a worker can't start a poll the monitor
//! sleeps through. It sleeps that way at most once every [`NET_PERIOD`] (until then, with
//! every worker parked, it waits on a timer without sampling), so under a load whose
//! workers are often all parked for a moment, the worker that wakes it pays that wake at
//! most a few times a second.
//!
//! # Taking the stack (Linux)
//! The monitor sends `SIGURG` to the stuck worker's thread (ignored by default, and not
//! used by Rust's runtime; the Go runtime uses it for the same purpose). The handler,
//! installed once per process, checks that a capture was asked of this very thread,
//! walks its own stack into a buffer allocated beforehand (at most [`MAX_FRAMES`]
//! instruction pointers, no allocation, no lock), and publishes the count. The walk uses
//! the unwinder's tables (`.eh_frame`, always present in Rust binaries), not frame
//! pointers; glibc 2.35 and later let libgcc's unwinder find those tables through
//! `_dl_find_object`, which takes no lock, so the walk is safe to run in a signal handler;
//! with an older glibc, or another C library, stalls come without a stack. The request
//! (the thread's id and the capture's state) is one atomic word, which the handler claims
//! for its own thread in one compare-and-swap, and the signal goes with `tgkill` to this
//! process's thread id: a late handler cannot claim a later request for another thread,
//! and a signal never reaches another process. (A thread id the kernel gave to a new
//! thread of this process after the worker's thread exited would answer; the check
//! that the worker is still in the stalled poll then throws that stack away.)
//! The monitor waits for the walk for at most [`CAPTURE_WAIT`]; if it does not come, it
//! withdraws the request with a compare-and-swap, so a late handler writes nothing. A
//! walk that had begun by then is waited for up to [`LATE_WALK_WAIT`] more; one that
//! takes longer owns the buffer until it ends, and no stack is taken in this process
//! until then. The monitor then resolves the addresses to names and lines on its own
//! thread (`backtrace`), after giving the buffer back. A stall elsewhere than on Linux
//! is reported without a stack.
//!
//! # At shutdown
//! The runtime's drop wakes the monitor, which leaves at its next look, and waits for it
//! for at most [`EXIT_WAIT`]. The monitor may be inside a report then: the first
//! symbol lookup of a process loads its debug info, which for a large binary on a busy
//! machine took more than 30 s at this thread's low priority. A drop does not wait for
//! that; the monitor finishes the report (it holds the runtime's shared state until
//! then, so the stall still counts, with its task's name, looked up before the stack)
//! and exits on its own. Once the runtime shuts down it takes no more stacks: a worker
//! leaving its loop still looks to be in its last poll, and its thread may be running
//! its stop hook, or gone.

use crate::runtime::handle::Shared;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How many stalls `Telemetry::stalls` keeps (the newest).
pub const STALL_HISTORY: usize = 64;
/// The most frames a stack keeps.
pub(crate) const MAX_FRAMES: usize = 64;
/// How often the monitor's thread samples on its own while the workers sample: the net
/// under their samples (see "Who samples").
const NET_PERIOD: Duration = Duration::from_millis(250);
/// How long a runtime's drop waits for the monitor's thread to leave (see "At shutdown").
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(1);
/// How long the monitor waits for a stuck thread's stack.
const CAPTURE_WAIT: Duration = Duration::from_millis(100);
/// How long the monitor waits, after [`CAPTURE_WAIT`], for a walk still running then.
#[cfg(target_os = "linux")]
const LATE_WALK_WAIT: Duration = Duration::from_secs(1);

/// A poll that ran past the stall threshold, as the monitor caught it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stall {
    /// The worker that was stuck.
    pub worker: usize,
    /// The task it was polling.
    pub task_id: u64,
    /// That task's name, when the runtime records tasks and it has one.
    pub task_name: Option<String>,
    /// How long the poll had run when it was found stuck: a lower bound, short by about
    /// half a threshold (a sampling period), more when the sampling thread was itself
    /// kept off a CPU.
    pub duration: Duration,
    /// The stuck thread's stack, innermost first: function names, with ` at file:line`
    /// where the binary's debug info says. Empty where stacks are not taken (not Linux),
    /// or when the thread did not answer in time.
    pub frames: Vec<String>,
}

/// One worker, as the monitor sees it.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct WorkerSlot {
    /// The task the worker is polling (or last polled).
    pub(crate) task: AtomicU64,
    /// Times the worker went to park, counted as it goes (so a worker woken but not yet
    /// running is never taken for one stuck in the poll it was in before).
    parks: AtomicU64,
    /// The kernel id of the thread running the worker's loop, set by each thread that
    /// runs it.
    tid: AtomicI32,
}

/// The monitor's state, in the runtime's `Shared`.
pub(crate) struct StallMonitor {
    threshold: Option<Duration>,
    /// Take the stuck thread's stack (`Builder::stall_stacks`).
    stacks: bool,
    pub(crate) slots: Box<[WorkerSlot]>,
    sleeping: AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// The instant `next_sample` counts from.
    epoch: Instant,
    /// When the workers' next sample is due, in nanoseconds since `epoch` (`u64::MAX`
    /// until the monitor's thread runs, and for good without a threshold).
    next_sample: AtomicU64,
    /// What the samples saw; a worker only ever tries its lock.
    sampler: Mutex<Sampler>,
    /// The newest stalls, and how many were ever reported.
    history: Mutex<(VecDeque<Stall>, u64)>,
    /// A test's gate: the monitor's thread waits at it at the start of each report.
    #[cfg(all(test, not(loom)))]
    pub(crate) report_gate: Mutex<Option<Arc<tests::Gate>>>,
}

/// What the samples saw of each worker, and the stuck polls found for the monitor's
/// thread to report. Both vectors are sized for every worker up front and never grow,
/// so a worker that samples never allocates.
struct Sampler {
    seen: Vec<Option<Seen>>,
    found: Vec<Found>,
    /// When a worker last took a sample (the monitor's thread samples faster while the
    /// workers do not: see "Who samples").
    worker_sampled: Option<Instant>,
}

/// A stuck poll: the worker, its poll and park counts and task then, and how long it had
/// been stuck.
#[derive(Clone, Copy)]
struct Found {
    worker: usize,
    polls: u64,
    parks: u64,
    task: u64,
    stuck_for: Duration,
}

impl Sampler {
    fn new(workers: usize) -> Sampler {
        Sampler { seen: vec![None; workers], found: Vec::with_capacity(workers), worker_sampled: None }
    }

    /// Look at every worker but `me` (the sampling worker, which is not in a poll); true
    /// if a stuck poll was found. A worker that is parked, or has never polled, or whose
    /// poll count or park count moved since the last sample, is not in the poll it was in
    /// then. A stuck poll's time counts from a reading taken after the sample that first
    /// saw its count, up to one taken before the sample that finds it: a lower bound.
    fn sample(&mut self, shared: &Shared, me: Option<usize>, threshold: Duration) -> bool {
        let before = Instant::now();
        let mut found = false;
        let mut fresh = false;
        for (i, w) in shared.workers.iter().enumerate() {
            if Some(i) == me {
                continue;
            }
            let slot = &shared.stall.slots[i];
            let polls = w.counters.tasks_polled.get();
            let parks = slot.parks.load(Relaxed);
            // A worker that has never begun a poll (task ids start at 1) is not in one: it
            // may still be in its thread's start hook.
            let parked = shared.idle.is_parked(i) || slot.task.load(Relaxed) == 0;
            let s = match self.seen[i] {
                Some(s) if !parked && s.polls == polls && s.parks == parks => s,
                _ => {
                    // `since` is set below, after every load of this sample.
                    self.seen[i] = (!parked).then_some(Seen { polls, parks, since: None, reported: false });
                    fresh |= !parked;
                    continue;
                }
            };
            let Some(since) = s.since else { continue };
            let stuck_for = before.saturating_duration_since(since);
            if s.reported || stuck_for < threshold {
                continue;
            }
            // `found` holds what the monitor has not taken yet, one per worker (no sample
            // may allocate: workers sample too). While it is full, this poll stays
            // unreported, so a later sample finds it again instead of losing it.
            if self.found.len() < self.found.capacity() {
                self.seen[i] = Some(Seen { reported: true, ..s });
                let task = slot.task.load(Relaxed);
                self.found.push(Found { worker: i, polls, parks, task, stuck_for });
                found = true;
            }
        }
        if fresh {
            let after = Instant::now();
            for s in self.seen.iter_mut().flatten().filter(|s| s.since.is_none()) {
                s.since = Some(after);
            }
        }
        found
    }
}

impl StallMonitor {
    pub(crate) fn new(workers: usize, threshold: Option<Duration>, stacks: bool) -> StallMonitor {
        StallMonitor {
            stacks,
            // Under 1 ms the monitor would sample without pause (it sleeps half a
            // threshold between samples), so shorter thresholds count as 1 ms.
            threshold: threshold.filter(|t| !t.is_zero()).map(|t| t.max(Duration::from_millis(1))),
            slots: (0..workers).map(|_| WorkerSlot::default()).collect(),
            sleeping: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            next_sample: AtomicU64::new(u64::MAX),
            sampler: Mutex::new(Sampler::new(workers)),
            history: Mutex::new((VecDeque::new(), 0)),
            #[cfg(all(test, not(loom)))]
            report_gate: Mutex::new(None),
        }
    }

    /// A worker is about to poll task `id`.
    #[inline(always)]
    pub(crate) fn polling(&self, worker: usize, id: u64) {
        debug_assert!(worker < self.slots.len());
        // SAFETY: `worker` is a worker index of this runtime, and there is a slot per
        // worker (hot path: no bounds check beyond the debug assertion above).
        unsafe { self.slots.get_unchecked(worker) }.task.store(id, Relaxed);
    }

    /// The calling thread now runs worker `index`'s loop.
    pub(crate) fn register_thread(&self, index: usize) {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a plain call with no preconditions.
            let tid = unsafe { libc::gettid() };
            self.slots[index].tid.store(tid, Relaxed);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = index;
    }

    /// A worker left its park: wake the monitor if it sleeps (see "Sleeping while every
    /// worker sleeps").
    #[inline]
    pub(crate) fn worker_woke(&self) {
        if self.sleeping.load(SeqCst) && self.sleeping.swap(false, SeqCst) {
            self.unpark();
        }
    }

    /// Wake the monitor (a worker woke, a sample found a stuck poll, or the runtime shuts
    /// down).
    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Worker `me` samples the others if a sample is due (see "Who samples"): one load
    /// and a compare when it is not. `now` is any recent reading (a tick's start).
    #[inline]
    pub(crate) fn maybe_sample(&self, shared: &Shared, me: usize, now: Instant) {
        let due = self.next_sample.load(Acquire);
        if due == u64::MAX {
            return;
        }
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        if t >= due {
            self.sample_now(shared, me, now, t, due);
        }
    }

    #[cold]
    fn sample_now(&self, shared: &Shared, me: usize, now: Instant, t: u64, due: u64) {
        let Some(threshold) = self.threshold else { return };
        let half = u64::try_from((threshold / 2).as_nanos()).unwrap_or(u64::MAX);
        let next = t.saturating_add(half).min(u64::MAX - 1);
        // One sampler per period: whoever moves the due time on samples.
        if self.next_sample.compare_exchange(due, next, Relaxed, Relaxed).is_err() {
            return;
        }
        // Never wait: the monitor's thread may hold it for a moment.
        let mut sampler = match self.sampler.try_lock() {
            Ok(s) => s,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        sampler.worker_sampled = Some(now);
        if sampler.sample(shared, Some(me), threshold) {
            drop(sampler);
            self.unpark();
        }
    }

    /// Worker `index` is about to park (see `WorkerSlot::parks`).
    #[inline]
    pub(crate) fn parking(&self, index: usize) {
        let p = &self.slots[index].parks;
        p.store(p.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// The newest stalls, oldest first.
    pub(crate) fn history(&self) -> Vec<Stall> {
        self.history.lock().unwrap_or_else(|e| e.into_inner()).0.iter().cloned().collect()
    }

    /// The stalls reported after the first `seen` (at most the newest `max` of them),
    /// oldest first, and how many were reported in all: a reader that keeps the count
    /// copies each stall once.
    pub(crate) fn since(&self, seen: u64, max: usize) -> (Vec<Stall>, u64) {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let new = (h.1.saturating_sub(seen) as usize).min(max).min(h.0.len());
        (h.0.iter().skip(h.0.len() - new).cloned().collect(), h.1)
    }
}

/// Start the monitor for `shared`, if it has a threshold. The thread holds only a weak
/// reference, and leaves when the runtime is gone or shutting down.
pub(crate) fn start(shared: &Arc<Shared>, name: String) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    let Some(threshold) = shared.stall.threshold else { return Ok(None) };
    // Miri runs no signal handlers or foreign calls: no monitor there.
    if cfg!(miri) {
        return Ok(None);
    }
    // No handler at all where no stack will be taken: `SIGURG` stays the program's.
    #[cfg(target_os = "linux")]
    if shared.stall.stacks && capture::supported() {
        capture::install();
    }
    let weak = Arc::downgrade(shared);
    let t = std::thread::Builder::new().name(name).spawn(move || monitor(weak, threshold))?;
    let _ = shared.stall.thread.set(t.thread().clone());
    // The workers sample from now on: a stall they find has a thread to report it.
    shared.stall.next_sample.store(0, Release);
    Ok(Some(t))
}

/// What the samples last saw of one worker.
#[derive(Clone, Copy)]
struct Seen {
    polls: u64,
    parks: u64,
    /// When its poll was first seen (set at the end of that sample).
    since: Option<Instant>,
    reported: bool,
}

fn monitor(weak: Weak<Shared>, threshold: Duration) {
    #[cfg(target_os = "linux")]
    lowest_priority();
    let fast = threshold / 2;
    let net = NET_PERIOD.max(threshold);
    let mut found = Vec::new();
    let mut first = true;
    // When it last woke from sleeping with no timeout (see "Sleeping while every worker
    // sleeps"): it sleeps that way at most once a net period.
    let mut woke_from_sleep: Option<Instant> = None;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.is_shutdown() {
            return;
        }
        let m = &shared.stall;
        if std::mem::take(&mut first) {
            // Before any sleep below: a worker that wakes it must find its handle.
            let _ = m.thread.get_or_init(std::thread::current);
        }
        // Its own sample, then whatever any sample found.
        let workers_sampling = {
            let mut sampler = m.sampler.lock().unwrap_or_else(|e| e.into_inner());
            sampler.sample(&shared, None, threshold);
            // `append` keeps the sampler's capacity: a worker that finds a stall never allocates.
            found.append(&mut sampler.found);
            sampler.worker_sampled.is_some_and(|t| t.elapsed() < threshold)
        };
        for f in found.drain(..) {
            report(&shared, f);
        }
        let all_parked = shared.idle.all_parked();
        if all_parked && woke_from_sleep.is_none_or(|t| t.elapsed() >= net) {
            // See "Sleeping while every worker sleeps".
            m.sleeping.store(true, SeqCst);
            if shared.idle.all_parked() {
                m.sampler.lock().unwrap_or_else(|e| e.into_inner()).seen.fill(None);
                drop(shared);
                std::thread::park();
                woke_from_sleep = Some(Instant::now());
                continue;
            }
            m.sleeping.store(false, SeqCst);
        }
        // While the workers sample, this is only the net; while none does (one worker,
        // or the others parked with nobody watching), it samples every half threshold.
        // Every worker parked: nothing to sample until it may sleep again.
        let period = match woke_from_sleep {
            Some(t) if all_parked => net.saturating_sub(t.elapsed()).max(fast),
            _ if workers_sampling => net,
            _ => fast,
        };
        drop(shared);
        std::thread::park_timeout(period);
    }
}

/// Give this thread the lowest nice value, 19 (see "Who samples"). Lowering
/// one's own priority needs no privilege; if it fails anyway, the monitor runs as it is.
#[cfg(target_os = "linux")]
fn lowest_priority() {
    // SAFETY: plain calls with no preconditions; on Linux the nice value of a thread id
    // (`gettid`) is that thread's alone.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, libc::gettid() as libc::id_t, 19) };
}

/// Take the stuck worker's stack, if it is still in that poll, and keep the report.
fn report(shared: &Arc<Shared>, f: Found) {
    let m = &shared.stall;
    #[cfg(all(test, not(loom)))]
    {
        let gate = m.report_gate.lock().unwrap().clone();
        if let Some(g) = gate {
            g.wait();
        }
    }
    let i = f.worker;
    let slot = &m.slots[i];
    let task_id = f.task;
    // The sampler's rule: the same poll and park counts, and not parked. The poll count
    // alone stays put when the poll ends and the worker finds nothing more to run, and
    // the stack would then be its park's, reported as the task's.
    let in_poll = || {
        shared.workers[i].counters.tasks_polled.get() == f.polls
            && slot.parks.load(Relaxed) == f.parks
            && !shared.idle.is_parked(i)
    };
    // Looked up first: the stack's symbols may take long to resolve, and a runtime shut
    // down meanwhile has cancelled the task. (One shard of the task list, walked a batch
    // per hold of its lock: this thread runs at the lowest priority, and the workers
    // take these locks to spawn and complete tasks.)
    let task_name = crate::telemetry::Telemetry::new(Arc::clone(shared)).task_name(task_id);
    // Not once the runtime shuts down: a worker leaving its loop still looks to be in
    // its last poll, and its thread may be gone or running its stop hook.
    #[cfg(target_os = "linux")]
    let frames = if m.stacks && capture::supported() && !shared.is_shutdown() && in_poll() {
        let frames = capture::stack_of(slot.tid.load(Relaxed));
        // A poll that ended while the stack was taken: the stack may be a later one's.
        if in_poll() {
            frames
        } else {
            Vec::new()
        }
    } else {
        Vec::new()
    };
    #[cfg(not(target_os = "linux"))]
    let frames = {
        let _ = (slot, in_poll);
        Vec::new()
    };
    let stuck_for = f.stuck_for;
    // Into the history first, then counted: a reader that sees the count (a snapshot's
    // `stalls_total`) finds the stall in `stalls()` too.
    {
        let mut h = m.history.lock().unwrap_or_else(|e| e.into_inner());
        if h.0.len() == STALL_HISTORY {
            h.0.pop_front();
        }
        h.0.push_back(Stall { worker: i, task_id, task_name, duration: stuck_for, frames });
        h.1 += 1;
    }
    // The monitor is this counter's one writer.
    shared.workers[i].counters.stalls.inc_always();
    shared.on_stall(task_id, i, stuck_for);
}

#[cfg(target_os = "linux")]
mod capture {
    //! The signal handler and its buffer (see "Taking the stack").

    use super::{CAPTURE_WAIT, LATE_WALK_WAIT, MAX_FRAMES};
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    // The request word: the asked thread's id in the high 32 bits, the state in the low
    // byte. One word, so a handler claims a request for its own thread in one
    // compare-and-swap: a handler that ran late, for a request already withdrawn, can
    // never claim the next request, made for another thread.
    const IDLE: u64 = 0;
    const REQUESTED: u64 = 1;
    const WRITING: u64 = 2;
    const DONE: u64 = 3;
    const STATE: u64 = 0xff;

    fn word(tid: i32, state: u64) -> u64 {
        (tid as u32 as u64) << 32 | state
    }

    /// The one capture in flight in the process, and its buffer.
    struct Capture {
        request: AtomicU64,
        len: AtomicUsize,
        ips: [AtomicUsize; MAX_FRAMES],
    }

    static CAPTURE: Capture = Capture {
        request: AtomicU64::new(IDLE),
        len: AtomicUsize::new(0),
        ips: [const { AtomicUsize::new(0) }; MAX_FRAMES],
    };

    /// Monitors of several runtimes take turns.
    static TURN: Mutex<()> = Mutex::new(());

    /// Set while a handler that began a walk has not finished it within its wait: the
    /// buffer may still be written, so no capture is asked until the walk is seen done.
    static BROKEN: AtomicBool = AtomicBool::new(false);

    /// The handler that was installed before ours, called for a `SIGURG` that is not ours.
    static mut PREVIOUS: Option<libc::sigaction> = None;
    static INSTALL: std::sync::Once = std::sync::Once::new();

    /// Whether this process can take a stack in a signal handler. The walk reads the
    /// unwinder's tables, and it takes no lock and allocates nothing only where libgcc
    /// finds them through glibc's `_dl_find_object` (glibc 2.35 and later). Elsewhere
    /// (older glibc, musl) the walk could deadlock in the handler on a lock the stuck
    /// code holds, so stalls are reported without a stack.
    pub(super) fn supported() -> bool {
        static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SUPPORTED.get_or_init(|| glibc_version().is_some_and(|v| v >= (2, 35)))
    }

    #[cfg(target_env = "gnu")]
    fn glibc_version() -> Option<(u32, u32)> {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        parse_version(v.to_str().ok()?)
    }

    #[cfg(not(target_env = "gnu"))]
    fn glibc_version() -> Option<(u32, u32)> {
        None
    }

    /// `"2.36"` (or `"2.36.1"`) -> `(2, 36)`.
    pub(super) fn parse_version(v: &str) -> Option<(u32, u32)> {
        let mut parts = v.split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    pub(super) fn install() {
        INSTALL.call_once(|| {
            // SAFETY: a zeroed `sigaction` is a valid empty one; the handler has the
            // `SA_SIGINFO` signature. `PREVIOUS` is written here, once, before the handler
            // is installed (the current action is read first, then ours replaces it), so
            // the handler never reads it while it is written. An action someone else sets
            // between the two calls is replaced without being chained: a race with
            // another library's own install, which no order of calls avoids.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGURG, std::ptr::null(), &mut old) != 0 {
                    return;
                }
                PREVIOUS = Some(old);
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = handler as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut());
            }
        });
    }

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: reading and restoring errno is what a handler must do; `gettid` is
        // async-signal-safe.
        let errno = unsafe { *libc::__errno_location() };
        // SAFETY: as above.
        let me = unsafe { libc::gettid() };
        let ours = CAPTURE.request.compare_exchange(word(me, REQUESTED), word(me, WRITING), SeqCst, SeqCst).is_ok();
        if ours {
            let mut n = 0;
            // SAFETY: the walk allocates nothing and takes no lock (see the module doc and
            // `supported`); it runs on this thread's stack, which is all it reads.
            unsafe {
                backtrace::trace_unsynchronized(|frame| {
                    CAPTURE.ips[n].store(frame.ip() as usize, Relaxed);
                    n += 1;
                    n < MAX_FRAMES
                });
            }
            CAPTURE.len.store(n, Relaxed);
            CAPTURE.request.store(word(me, DONE), Release);
        } else {
            // Not a capture of ours: hand the signal to whoever had it before.
            // SAFETY: `PREVIOUS` was written once before this handler was installed.
            let prev = unsafe { (*std::ptr::addr_of!(PREVIOUS)).as_ref().map(|p| (p.sa_sigaction, p.sa_flags)) };
            if let Some((f, flags)) = prev {
                if f != libc::SIG_DFL && f != libc::SIG_IGN && f != 0 {
                    // SAFETY: the previous handler's own signature, as its flags say.
                    unsafe {
                        if flags & libc::SA_SIGINFO != 0 {
                            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                                std::mem::transmute(f);
                            f(sig, info, ctx);
                        } else {
                            let f: extern "C" fn(libc::c_int) = std::mem::transmute(f);
                            f(sig);
                        }
                    }
                }
            }
        }
        // SAFETY: see above.
        unsafe { *libc::__errno_location() = errno };
    }

    /// The stack of this process's thread `tid` (its kernel id), resolved, innermost
    /// first; empty if it does not answer within `CAPTURE_WAIT`.
    pub(super) fn stack_of(tid: i32) -> Vec<String> {
        if tid == 0 {
            return Vec::new();
        }
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        if BROKEN.load(SeqCst) {
            // A walk outlived its wait and kept the buffer. Once it has ended (a thread
            // that was descheduled, or stopped in a debugger), the buffer is free again
            // and stacks resume; until then, none is taken.
            if CAPTURE.request.load(Acquire) & STATE != DONE {
                return Vec::new();
            }
            CAPTURE.request.store(IDLE, SeqCst);
            BROKEN.store(false, SeqCst);
        }
        CAPTURE.len.store(0, Relaxed);
        CAPTURE.request.store(word(tid, REQUESTED), SeqCst);
        // `tgkill` with this process's id: a thread that exited meanwhile makes it fail
        // (or, if the kernel gave its id to a new thread of this process, that thread's
        // handler answers, and the caller's check that the worker is still in the
        // stalled poll throws the stack away). Never a signal to another process.
        // SAFETY: a plain system call; `SIGURG` has our handler (`install`).
        let sent = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGURG) } == 0;
        let deadline = Instant::now() + CAPTURE_WAIT;
        let mut got = false;
        while sent && Instant::now() < deadline {
            if CAPTURE.request.load(Acquire) & STATE == DONE {
                got = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if !got && CAPTURE.request.compare_exchange(word(tid, REQUESTED), IDLE, SeqCst, SeqCst).is_err() {
            // The handler began the walk: wait for it, within a bound. One that takes
            // longer keeps the buffer its own; no stack is taken until it ends.
            let late = Instant::now() + LATE_WALK_WAIT;
            while CAPTURE.request.load(Acquire) & STATE != DONE {
                if Instant::now() >= late {
                    BROKEN.store(true, SeqCst);
                    return Vec::new();
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            got = true;
        }
        let ips: Vec<usize> = if got {
            (0..CAPTURE.len.load(Relaxed)).map(|i| CAPTURE.ips[i].load(Relaxed)).collect()
        } else {
            Vec::new()
        };
        CAPTURE.request.store(IDLE, SeqCst);
        // Symbols are looked up without the turn: the first lookup loads debug info and
        // may take a while, and another runtime's monitor may be waiting to take a stack.
        drop(turn);
        resolve(&ips)
    }

    /// Names and lines for the addresses, with the handler's own frames (up to and
    /// including the kernel's signal trampoline) left out.
    fn resolve(ips: &[usize]) -> Vec<String> {
        let mut frames = Vec::new();
        for &ip in ips {
            let mut names = Vec::new();
            // The address after a call: step back into the call for the lookup.
            backtrace::resolve((ip.saturating_sub(1)) as *mut std::ffi::c_void, |sym| {
                let name = sym.name().map(|n| format!("{n:#}")).unwrap_or_else(|| format!("{ip:#x}"));
                let at = match (sym.filename(), sym.lineno()) {
                    (Some(f), Some(l)) => format!(" at {}:{l}", f.display()),
                    _ => String::new(),
                };
                names.push(format!("{name}{at}"));
            });
            if names.is_empty() {
                names.push(format!("{ip:#x}"));
            }
            frames.extend(names);
        }
        // The handler's own frames, then the kernel's signal trampoline (`__restore_rt`,
        // often without a symbol: a bare address), then the interrupted code.
        let ours = |f: &String| f.contains("backtrace") || f.contains("stall::capture");
        let bare = |f: &String| f.starts_with("0x");
        match frames.iter().position(|f| f.starts_with("__restore_rt")) {
            Some(i) => frames.split_off(i + 1),
            None => frames.into_iter().skip_while(ours).skip_while(bare).collect(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Holds the monitor's thread at the start of a report until the test opens it.
    #[derive(Default)]
    pub(crate) struct Gate {
        /// (a report waits here, open)
        state: Mutex<(bool, bool)>,
        cv: std::sync::Condvar,
    }

    impl Gate {
        pub(crate) fn wait(&self) {
            let mut s = self.state.lock().unwrap();
            s.0 = true;
            self.cv.notify_all();
            while !s.1 {
                s = self.cv.wait(s).unwrap();
            }
        }

        fn open(&self) {
            self.state.lock().unwrap().1 = true;
            self.cv.notify_all();
        }

        fn is_open(&self) -> bool {
            self.state.lock().unwrap().1
        }

        /// Whether a report reached the gate within `limit`.
        fn reached_within(&self, limit: Duration) -> bool {
            let s = self.state.lock().unwrap();
            !self.cv.wait_timeout_while(s, limit, |s| !s.0).unwrap().1.timed_out()
        }
    }

    /// A runtime dropped while its monitor is inside a report (as when it resolves a
    /// stack's symbols for the first time, which took more than 30 s on a loaded
    /// machine) returns without waiting for the report, and the stall still counts
    /// once the report is done. An order, not a time: the gate opens only after the
    /// drop returned, or after 60 s if the drop waits for it, which the test then sees.
    #[test]
    fn dropping_the_runtime_does_not_wait_for_a_report_in_progress() {
        let rt = crate::runtime::Builder::new()
            .worker_threads(1)
            .stall_threshold(Some(Duration::from_millis(10)))
            .stall_stacks(false)
            .build()
            .unwrap();
        let telemetry = rt.handle().telemetry();
        let gate = Arc::new(Gate::default());
        *rt.handle().shared.stall.report_gate.lock().unwrap() = Some(Arc::clone(&gate));
        // The poll blocks its worker until the report has begun (bounded), so a monitor
        // slow to sample at its low priority still finds it stuck.
        let stuck = rt.spawn({
            let gate = Arc::clone(&gate);
            async move { gate.reached_within(Duration::from_secs(60)) }
        });
        let stuck_id = stuck.id();
        assert!(gate.reached_within(Duration::from_secs(60)), "no stall reported within 60 s");
        // Opens the gate if the drop waits for the report, so a failure ends.
        let safety = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || {
                let s = gate.state.lock().unwrap();
                drop(gate.cv.wait_timeout_while(s, Duration::from_secs(60), |s| !s.1).unwrap());
                gate.open();
            })
        };
        drop(stuck);
        drop(rt);
        let open_at_return = gate.is_open();
        gate.open();
        safety.join().unwrap();
        assert!(!open_at_return, "the runtime's drop waited for the monitor's report");
        // The report goes on after the drop, and counts.
        let start = Instant::now();
        while (telemetry.snapshot().stalls_total == 0 || telemetry.stalls().is_empty())
            && start.elapsed() < Duration::from_secs(30)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(telemetry.snapshot().stalls_total, 1);
        let stalls = telemetry.stalls();
        assert_eq!((stalls.len(), stalls[0].task_id), (1, stuck_id));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn glibc_versions_parse() {
        assert_eq!(capture::parse_version("2.36"), Some((2, 36)));
        assert_eq!(capture::parse_version("2.35.1"), Some((2, 35)));
        assert_eq!(capture::parse_version("2"), None);
        assert_eq!(capture::parse_version("x.y"), None);
        assert!((2, 34) < (2, 35) && (3, 0) > (2, 35));
    }

    /// A stuck poll found while the monitor has not yet taken the last one (its `found`
    /// list, one per worker, is full) stays unreported, and is found by a later sample
    /// once the list has room, instead of being marked reported and lost.
    #[test]
    fn a_stuck_poll_found_while_the_list_is_full_is_found_again() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        // No monitor of its own: this test is the only sampler.
        let rt = crate::runtime::Builder::new().worker_threads(1).stall_threshold(None).build().unwrap();
        let shared = Arc::clone(&rt.handle().shared);
        // Each task stays in its one poll until released.
        let stuck = |release: Arc<AtomicBool>| async move {
            while !release.load(SeqCst) {
                std::hint::spin_loop();
            }
        };
        let (first, second) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        // Releases both on the way out, a failed assertion's included (dropped before the
        // runtime, whose drop waits for its worker).
        struct Release(Arc<AtomicBool>, Arc<AtomicBool>);
        impl Drop for Release {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
                self.1.store(true, SeqCst);
            }
        }
        let _release = Release(Arc::clone(&first), Arc::clone(&second));
        let a = rt.spawn(stuck(Arc::clone(&first)));
        let b = rt.spawn(stuck(Arc::clone(&second)));
        let threshold = Duration::from_millis(1);
        let sample_until = |what: &str, done: &dyn Fn(&Sampler) -> bool| {
            let t0 = Instant::now();
            loop {
                let mut s = shared.stall.sampler.lock().unwrap();
                s.sample(&shared, None, threshold);
                if done(&s) {
                    return;
                }
                drop(s);
                assert!(t0.elapsed() < Duration::from_secs(30), "{what}: not within 30 s");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        sample_until("the first stuck poll", &|s| s.found.len() == 1);
        let found_first = shared.stall.sampler.lock().unwrap().found[0].task;
        // The first poll ends (whichever task the worker took first), the second begins,
        // and stays past the threshold while the list is still full.
        let polls_then = shared.workers[0].counters.tasks_polled.get();
        let (now, next) = if found_first == a.id() { (&first, &second) } else { (&second, &first) };
        now.store(true, SeqCst);
        sample_until("the second poll to be seen stuck", &|s| {
            shared.workers[0].counters.tasks_polled.get() > polls_then
                && s.seen[0].is_some_and(|x| x.since.is_some_and(|t| t.elapsed() > 4 * threshold))
        });
        // The monitor takes the first; the second is then found.
        shared.stall.sampler.lock().unwrap().found.clear();
        sample_until("the second stuck poll", &|s| s.found.len() == 1);
        let found_second = shared.stall.sampler.lock().unwrap().found[0].task;
        next.store(true, SeqCst);
        let mut ids = [a.id(), b.id()];
        ids.sort();
        let mut got = [found_first, found_second];
        got.sort();
        assert_eq!(got, ids);
        rt.block_on(async {
            a.await.unwrap();
            b.await.unwrap();
        });
    }

    /// A threshold under 1 ms would have the monitor sample without sleeping (it sleeps
    /// half a threshold): it counts as 1 ms; zero still turns the monitor off.
    #[test]
    fn thresholds_under_a_millisecond_count_as_one() {
        let ms = Duration::from_millis(1);
        assert_eq!(StallMonitor::new(1, Some(Duration::from_nanos(1)), true).threshold, Some(ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::from_micros(999)), true).threshold, Some(ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::from_millis(7)), true).threshold, Some(7 * ms));
        assert_eq!(StallMonitor::new(1, Some(Duration::ZERO), true).threshold, None);
        assert_eq!(StallMonitor::new(1, None, true).threshold, None);
    }
}
