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
//! skipped). Only a stuck poll found wakes the monitor's thread, which
//! takes the stack and keeps the report. While a worker is stuck, either another worker
//! runs (and ticks) or one is parked as the watcher, so a stall is seen within a
//! threshold and a half, plus the watcher's 10 ms.
//!
//! The monitor's thread also samples on its own every [`NET_PERIOD`] while some worker
//! is out of its park: the net for a runtime of one worker, or one whose every worker is
//! stuck. It runs at nice 19 on Linux (not `SCHED_IDLE`, which a machine whose every core
//! is busy starves for seconds).
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
//! sleeps through. It samples at most every [`NET_PERIOD`], so a worker pays that wake
//! at most a few times a second.
//!
//! # Taking the stack (Linux)
//! The monitor sends `SIGURG` to the stuck worker's thread (ignored by default, and not
//! used by Rust's runtime; the Go runtime uses it for the same purpose). The handler,
//! installed once per process, checks that a capture was asked of this very thread,
//! walks its own stack into a buffer allocated beforehand (at most [`MAX_FRAMES`]
//! instruction pointers, no allocation, no lock), and publishes the count. The walk uses
//! the unwinder's tables (`.eh_frame`, always present in Rust binaries), not frame
//! pointers; glibc 2.35 and later let libgcc's unwinder find those tables through
//! `_dl_find_object`, which takes no lock, so the walk is safe to run in a signal handler.
//! The monitor waits for the walk for at most [`CAPTURE_WAIT`]; if it does not come, it
//! withdraws the request with a compare-and-swap, so a late handler writes nothing. It
//! then resolves the addresses to names and lines on its own thread (`backtrace`). A
//! stall elsewhere than on Linux is reported without a stack.

use crate::runtime::handle::Shared;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How many stalls `Telemetry::stalls` keeps (the newest).
pub const STALL_HISTORY: usize = 64;
/// The most frames a stack keeps.
pub(crate) const MAX_FRAMES: usize = 64;
/// How often the monitor's thread samples on its own, while some worker is out of its
/// park: the net under the workers' samples (see "Who samples").
const NET_PERIOD: Duration = Duration::from_millis(250);
/// How long the monitor waits for a stuck thread's stack.
const CAPTURE_WAIT: Duration = Duration::from_millis(100);

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
    /// How long the poll had run when it was found stuck: a lower bound, short by up to
    /// half a threshold while another worker runs or watches, by up to the monitor's own
    /// 250 ms period when none does (a runtime of one worker).
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
    /// The worker's thread (`pthread_self`) and its kernel id, set by each thread that
    /// runs the worker's loop.
    pthread: AtomicU64,
    tid: AtomicI32,
}

/// The monitor's state, in the runtime's `Shared`.
pub(crate) struct StallMonitor {
    threshold: Option<Duration>,
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
}

/// What the samples saw of each worker, and the stuck polls found for the monitor's
/// thread to report.
#[derive(Default)]
struct Sampler {
    seen: Vec<Option<Seen>>,
    /// (worker, its poll count when found, how long it had been stuck).
    found: Vec<(usize, u64, Duration)>,
}

impl Sampler {
    /// Look at every worker but `me` (the sampling worker, which is not in a poll); true
    /// if a stuck poll was found. A worker that is parked, or whose poll count or park
    /// count moved since the last sample, is not in the poll it was in then.
    fn sample(&mut self, shared: &Shared, me: Option<usize>, now: Instant, threshold: Duration) -> bool {
        let mut found = false;
        self.seen.resize(shared.workers.len(), None);
        for (i, w) in shared.workers.iter().enumerate() {
            if Some(i) == me {
                continue;
            }
            let polls = w.counters.tasks_polled.get();
            let parks = w.counters.times_parked.get();
            let parked = shared.idle.is_parked(i);
            let s = match self.seen[i] {
                Some(s) if !parked && s.polls == polls && s.parks == parks => s,
                _ => {
                    self.seen[i] = (!parked).then_some(Seen { polls, parks, since: now, reported: false });
                    continue;
                }
            };
            let stuck_for = now.saturating_duration_since(s.since);
            if s.reported || stuck_for < threshold {
                continue;
            }
            self.seen[i] = Some(Seen { reported: true, ..s });
            self.found.push((i, polls, stuck_for));
            found = true;
        }
        found
    }
}

impl StallMonitor {
    pub(crate) fn new(workers: usize, threshold: Option<Duration>) -> StallMonitor {
        StallMonitor {
            threshold: threshold.filter(|t| !t.is_zero()),
            slots: (0..workers).map(|_| WorkerSlot::default()).collect(),
            sleeping: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            next_sample: AtomicU64::new(u64::MAX),
            sampler: Mutex::new(Sampler::default()),
            history: Mutex::new((VecDeque::new(), 0)),
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
            let s = &self.slots[index];
            // SAFETY: plain calls with no preconditions.
            let (pt, tid) = unsafe { (libc::pthread_self(), libc::gettid()) };
            #[allow(clippy::unnecessary_cast)] // `pthread_t` is not `u64` on every target
            s.pthread.store(pt as u64, Relaxed);
            s.tid.store(tid, Relaxed);
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
        let due = self.next_sample.load(Relaxed);
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
        let next = t + (threshold / 2).as_nanos() as u64;
        // One sampler per period: whoever moves the due time on samples.
        if self.next_sample.compare_exchange(due, next, Relaxed, Relaxed).is_err() {
            return;
        }
        // Never wait: the monitor's thread may hold it for a moment.
        let Ok(mut sampler) = self.sampler.try_lock() else { return };
        if sampler.sample(shared, Some(me), now, threshold) {
            drop(sampler);
            self.unpark();
        }
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
    #[cfg(target_os = "linux")]
    capture::install();
    let weak = Arc::downgrade(shared);
    let t = std::thread::Builder::new().name(name).spawn(move || monitor(weak, threshold))?;
    let _ = shared.stall.thread.set(t.thread().clone());
    // The workers sample from now on: a stall they find has a thread to report it.
    shared.stall.next_sample.store(0, Relaxed);
    Ok(Some(t))
}

/// What the samples last saw of one worker.
#[derive(Clone, Copy)]
struct Seen {
    polls: u64,
    parks: u64,
    since: Instant,
    reported: bool,
}

fn monitor(weak: Weak<Shared>, threshold: Duration) {
    #[cfg(target_os = "linux")]
    lowest_priority();
    let net = NET_PERIOD.max(threshold);
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.is_shutdown() {
            return;
        }
        let m = &shared.stall;
        // Its own sample (the net), then whatever any sample found.
        let found = {
            let mut sampler = m.sampler.lock().unwrap_or_else(|e| e.into_inner());
            sampler.sample(&shared, None, Instant::now(), threshold);
            std::mem::take(&mut sampler.found)
        };
        for (i, polls, stuck_for) in found {
            // Still in that poll: its stack is the stall's. (One that ended meanwhile is
            // still counted, without a stack.)
            let still = shared.workers[i].counters.tasks_polled.get() == polls;
            report(&shared, i, stuck_for, still);
        }
        if shared.idle.all_parked() {
            // See "Sleeping while every worker sleeps".
            m.sleeping.store(true, SeqCst);
            if shared.idle.all_parked() {
                m.sampler.lock().unwrap_or_else(|e| e.into_inner()).seen.clear();
                drop(shared);
                std::thread::park();
                continue;
            }
            m.sleeping.store(false, SeqCst);
        }
        drop(shared);
        std::thread::park_timeout(net);
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

/// Take worker `i`'s stack (if it is `still` in the stuck poll) and keep the report.
fn report(shared: &Arc<Shared>, i: usize, stuck_for: Duration, still: bool) {
    let m = &shared.stall;
    let slot = &m.slots[i];
    let task_id = slot.task.load(Relaxed);
    #[cfg(target_os = "linux")]
    let frames = if still { capture::stack_of(slot.pthread.load(Relaxed), slot.tid.load(Relaxed)) } else { Vec::new() };
    #[cfg(not(target_os = "linux"))]
    let frames = {
        let _ = still;
        Vec::new()
    };
    let mut task_name = None;
    crate::telemetry::Telemetry::new(Arc::clone(shared)).for_each_task(|row, name| {
        if row.id == task_id {
            task_name = name.map(String::from);
        }
    });
    // The monitor is this counter's one writer.
    shared.workers[i].counters.stalls.inc_always();
    shared.on_stall(task_id, i, stuck_for);
    let mut h = m.history.lock().unwrap_or_else(|e| e.into_inner());
    if h.0.len() == STALL_HISTORY {
        h.0.pop_front();
    }
    h.0.push_back(Stall { worker: i, task_id, task_name, duration: stuck_for, frames });
    h.1 += 1;
}

#[cfg(target_os = "linux")]
mod capture {
    //! The signal handler and its buffer (see "Taking the stack").

    use super::{CAPTURE_WAIT, MAX_FRAMES};
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
    use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    const IDLE: u8 = 0;
    const REQUESTED: u8 = 1;
    const WRITING: u8 = 2;
    const DONE: u8 = 3;

    /// The one capture in flight in the process, and its buffer.
    struct Capture {
        state: AtomicU8,
        tid: AtomicI32,
        len: AtomicUsize,
        ips: [AtomicUsize; MAX_FRAMES],
    }

    static CAPTURE: Capture = Capture {
        state: AtomicU8::new(IDLE),
        tid: AtomicI32::new(0),
        len: AtomicUsize::new(0),
        ips: [const { AtomicUsize::new(0) }; MAX_FRAMES],
    };

    /// Monitors of several runtimes take turns.
    static TURN: Mutex<()> = Mutex::new(());

    /// The handler that was installed before ours, called for a `SIGURG` that is not ours.
    static mut PREVIOUS: Option<libc::sigaction> = None;
    static INSTALL: std::sync::Once = std::sync::Once::new();

    pub(super) fn install() {
        INSTALL.call_once(|| {
            // SAFETY: a zeroed `sigaction` is a valid empty one; the handler has the
            // `SA_SIGINFO` signature; `PREVIOUS` is written here, once, before the handler
            // can run (it is installed by this very call).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = handler as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGURG, &sa, &mut old) == 0 {
                    PREVIOUS = Some(old);
                }
            }
        });
    }

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: reading and restoring errno is what a handler must do; `gettid` is
        // async-signal-safe.
        let errno = unsafe { *libc::__errno_location() };
        // SAFETY: as above.
        let me = unsafe { libc::gettid() };
        let ours = CAPTURE.tid.load(SeqCst) == me
            && CAPTURE.state.compare_exchange(REQUESTED, WRITING, SeqCst, SeqCst).is_ok();
        if ours {
            let mut n = 0;
            // SAFETY: the walk allocates nothing and takes no lock (see the module doc);
            // it runs on this thread's stack, which is all it reads.
            unsafe {
                backtrace::trace_unsynchronized(|frame| {
                    CAPTURE.ips[n].store(frame.ip() as usize, Relaxed);
                    n += 1;
                    n < MAX_FRAMES
                });
            }
            CAPTURE.len.store(n, Relaxed);
            CAPTURE.state.store(DONE, Release);
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

    /// The stack of thread `pthread` (kernel id `tid`), resolved, innermost first; empty if
    /// it does not answer within `CAPTURE_WAIT`.
    pub(super) fn stack_of(pthread: u64, tid: i32) -> Vec<String> {
        if tid == 0 {
            return Vec::new();
        }
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        CAPTURE.len.store(0, Relaxed);
        CAPTURE.tid.store(tid, SeqCst);
        CAPTURE.state.store(REQUESTED, SeqCst);
        // SAFETY: `pthread` is the id of a worker thread of a live runtime (it was stored
        // by that thread, and the runtime outlives this call through the monitor's
        // upgraded reference). A thread that exited meanwhile gets no signal: its id is
        // not reused while the runtime's `JoinHandle` for it is alive.
        let sent = unsafe { libc::pthread_kill(pthread as libc::pthread_t, libc::SIGURG) } == 0;
        let deadline = Instant::now() + CAPTURE_WAIT;
        let mut got = false;
        while sent && Instant::now() < deadline {
            if CAPTURE.state.load(Acquire) == DONE {
                got = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if !got {
            // Withdraw the request; if the handler already began, let it finish.
            if CAPTURE.state.compare_exchange(REQUESTED, IDLE, SeqCst, SeqCst).is_err() {
                while CAPTURE.state.load(Acquire) != DONE {
                    std::thread::yield_now();
                }
                got = true;
            }
        }
        let ips: Vec<usize> = if got {
            (0..CAPTURE.len.load(Relaxed)).map(|i| CAPTURE.ips[i].load(Relaxed)).collect()
        } else {
            Vec::new()
        };
        CAPTURE.state.store(IDLE, SeqCst);
        CAPTURE.tid.store(0, SeqCst);
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
