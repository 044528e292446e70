//! The stall monitor: a thread of its own (never a worker) that notices a worker stuck in
//! one poll past `Builder::stall_threshold`, takes that thread's stack while it is still
//! stuck, and keeps the report ([`Stall`], `Telemetry::stalls`).
//!
//! # Noticing a stall
//! Each worker counts its polls (`tasks_polled`) and, just before each poll, stores the
//! task's id in its slot here: one relaxed store. The monitor samples every worker every
//! half threshold. A worker that is not parked and whose poll count has not moved since
//! the monitor first saw it at least a threshold ago is stuck in one poll (a worker
//! between polls finds work, runs the driver or parks within microseconds). Each stuck
//! poll is reported once, keyed by the worker and its poll count. Its duration is the time
//! since the monitor first saw that count: a lower bound, within one sampling period.
//!
//! # Sleeping while every worker sleeps
//! An idle runtime must cost nothing, so the monitor does not sample while every worker is
//! parked. It goes to sleep only after [`SAMPLES_BEFORE_SLEEP`] samples in a row found
//! every worker parked (50 ms at the default threshold): under a network load the workers
//! are often all parked for a moment between two bursts, and a monitor that slept at
//! once had the next worker to wake pay a futex wake for it, on the path of the request
//! that woke it (measured: 13% on an HTTP server's p99). Before sleeping with no
//! timeout it stores `sleeping = true` and then reads the
//! parked bitmap again (both sequentially consistent); it sleeps only if every worker is
//! still parked. A worker that leaves its park (whoever cleared its bit: itself, or a
//! producer that claimed it) loads `sleeping` afterwards and, if set, takes it and wakes
//! the monitor. Either the monitor's re-read sees the worker's bit cleared, or the worker's
//! load comes after the monitor's store in the single order of sequentially consistent
//! operations and sees `sleeping`: a worker can't start a poll the monitor sleeps through.
//!
//! # Staying out of the way
//! While workers run, the monitor wakes every half threshold. At the default priority
//! the kernel lets each wake preempt whatever runs on its CPU, a worker or a client of
//! the server. On Linux the monitor lowers its own nice value to 19, so a wake of it does
//! not preempt ordinary threads and it runs at the next scheduling point instead, soon
//! enough for a threshold of milliseconds. It is not `SCHED_IDLE`, which a machine whose
//! every core is busy starves for seconds: a stall must still be caught there.
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
/// Samples in a row that must find every worker parked before the monitor sleeps with
/// no timeout (see "Sleeping while every worker sleeps").
const SAMPLES_BEFORE_SLEEP: u32 = 10;
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
    /// How long the poll had run when its stack was taken (a lower bound, within half a
    /// threshold).
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
    thread: Mutex<Option<std::thread::Thread>>,
    /// The newest stalls, and how many were ever reported.
    history: Mutex<(VecDeque<Stall>, u64)>,
}

impl StallMonitor {
    pub(crate) fn new(workers: usize, threshold: Option<Duration>) -> StallMonitor {
        StallMonitor {
            threshold: threshold.filter(|t| !t.is_zero()),
            slots: (0..workers).map(|_| WorkerSlot::default()).collect(),
            sleeping: AtomicBool::new(false),
            thread: Mutex::new(None),
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

    /// Wake the monitor (a worker woke, or the runtime shuts down).
    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            t.unpark();
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
    *shared.stall.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t.thread().clone());
    Ok(Some(t))
}

/// What the monitor last saw of one worker.
#[derive(Clone, Copy)]
struct Seen {
    polls: u64,
    since: Instant,
    reported: bool,
}

fn monitor(weak: Weak<Shared>, threshold: Duration) {
    let period = threshold / 2;
    #[cfg(target_os = "linux")]
    lowest_priority();
    let mut seen: Vec<Option<Seen>> = Vec::new();
    // Samples in a row that found every worker parked.
    let mut all_parked = 0;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.is_shutdown() {
            return;
        }
        let m = &shared.stall;
        if shared.idle.all_parked() {
            all_parked += 1;
        } else {
            all_parked = 0;
        }
        if all_parked >= SAMPLES_BEFORE_SLEEP {
            // See "Sleeping while every worker sleeps".
            m.sleeping.store(true, SeqCst);
            if shared.idle.all_parked() {
                seen.clear();
                all_parked = 0;
                drop(shared);
                std::thread::park();
                continue;
            }
            m.sleeping.store(false, SeqCst);
        }
        let now = Instant::now();
        seen.resize(shared.workers.len(), None);
        for (i, w) in shared.workers.iter().enumerate() {
            let polls = w.counters.tasks_polled.get();
            let parked = shared.idle.is_parked(i);
            let s = match seen[i] {
                Some(s) if !parked && s.polls == polls => s,
                _ => {
                    seen[i] = (!parked).then_some(Seen { polls, since: now, reported: false });
                    continue;
                }
            };
            let stuck_for = now.saturating_duration_since(s.since);
            if s.reported || stuck_for < threshold {
                continue;
            }
            seen[i] = Some(Seen { reported: true, ..s });
            report(&shared, i, stuck_for);
        }
        drop(shared);
        std::thread::park_timeout(period);
    }
}

/// Give this thread the lowest nice value, 19 (see "Staying out of the way"). Lowering
/// one's own priority needs no privilege; if it fails anyway, the monitor runs as it is.
#[cfg(target_os = "linux")]
fn lowest_priority() {
    // SAFETY: plain calls with no preconditions; on Linux the nice value of a thread id
    // (`gettid`) is that thread's alone.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, libc::gettid() as libc::id_t, 19) };
}

/// Take worker `i`'s stack and keep the report.
fn report(shared: &Arc<Shared>, i: usize, stuck_for: Duration) {
    let m = &shared.stall;
    let slot = &m.slots[i];
    let task_id = slot.task.load(Relaxed);
    #[cfg(target_os = "linux")]
    let frames = capture::stack_of(slot.pthread.load(Relaxed), slot.tid.load(Relaxed));
    #[cfg(not(target_os = "linux"))]
    let frames = Vec::new();
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
