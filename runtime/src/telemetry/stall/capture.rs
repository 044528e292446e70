//! Taking a stuck worker's stack on Linux: a signal handler that runs on the stuck thread
//! itself and walks its own stack (see "Taking the stack" in the module above).
//!
//! # Who sends the signal
//! * **A CPU-time timer of the worker's own thread** (`timer_create` with
//!   `CLOCK_THREAD_CPUTIME_ID`, delivered to that thread alone). It fires every quarter
//!   threshold of CPU time the thread uses, so a poll that computes is interrupted while
//!   it runs, by the kernel, whatever else the machine does: no other thread has to be
//!   given a CPU for it. A parked thread uses no CPU time and gets no signal, so an idle
//!   runtime costs nothing, and a busy worker pays one signal per few milliseconds of
//!   work (the kernel checks CPU timers at its scheduler tick: at 250 Hz, at most 250
//!   signals a second).
//! * **A sampler** (another worker at a point it passes anyway, or the monitor's thread)
//!   that sees a poll past the threshold with no stack yet sends the signal with `tgkill`
//!   to that thread of this process: that covers a poll blocked in a system call, which
//!   uses no CPU time. The sampler marks the request in the worker's slot first, so the
//!   handler tells it from a `SIGURG` someone else sent.
//!
//! # The handler
//! `SIGURG` is ignored by default and Rust's runtime does not use it (the Go runtime uses
//! it for the same purpose). The handler, installed once per process and chained to
//! whatever handler was there before, finds its worker through a thread-local set while
//! the thread runs a worker's loop, checks that the poll it interrupted has run past the
//! threshold and has no stack yet, and walks its own stack into the worker's buffer: at
//! most [`super::WALK_FRAMES`] addresses, no allocation, no lock. The walk uses the unwinder's
//! tables (`.eh_frame`, always present in Rust binaries), which glibc 2.35 and later let
//! libgcc's unwinder find through `_dl_find_object`, without a lock: safe in a signal
//! handler. With an older glibc or another C library no handler is installed, no timer
//! made, and stalls come without a stack. The walk starts in the handler; the frames up to
//! the one the signal interrupted (its address is in the signal's context) are left out
//! of the report. The buffer is the worker's own, in its slot, so the walk needs no more
//! stack than the unwinder's own state, on the worker's own stack. The walk is lock-free
//! only with libgcc's unwinder of GCC 12 or later (which asks `_dl_find_object`) and no
//! frames registered at run time (`__register_frame`, as JIT compilers do); a program
//! with those can turn stacks off (`Builder::stall_stacks(false)`).
//!
//! A system call the thread is blocked in when the signal comes restarts, except those
//! the kernel never restarts after a handled signal (`poll`, `epoll_wait`, `nanosleep`,
//! socket calls with a timeout), which fail with `EINTR` (std's `thread::sleep`,
//! `read_exact` and `write_all` retry it; the runtime's reactor takes it as an early
//! wake). The CPU-time timer only fires while the thread runs, so a system call is
//! interrupted by it only at the moment it begins to block.

use super::StallMonitor;
use std::cell::Cell;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicUsize};
use std::time::Duration;

/// The `sigev_value` of the workers' timers, telling their signals from any other.
const TIMER_MAGIC: usize = 0x766f_6c74; // "volt"

/// What the handler needs of the worker this thread runs.
#[derive(Clone, Copy)]
struct ThreadView {
    monitor: *const StallMonitor,
    index: usize,
}

thread_local! {
    /// The worker this thread runs (null monitor: none). Constant-initialized and without
    /// a destructor, so reading it is a plain thread-local load, safe in a signal handler.
    static VIEW: Cell<ThreadView> =
        const { Cell::new(ThreadView { monitor: std::ptr::null(), index: 0 }) };
    /// This thread's CPU-time timer, while it runs a worker. (An `Option`: glibc gives the
    /// kernel's first timer id, 0, as a null `timer_t`.)
    static TIMER: Cell<Option<libc::timer_t>> = const { Cell::new(None) };
}

/// Whether this process can take a stack in a signal handler (glibc 2.35 or later: see
/// the module doc).
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

/// The handler that was installed before ours, called for a `SIGURG` that is not ours.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: std::sync::Once = std::sync::Once::new();

/// Install the handler, once per process.
pub(super) fn install() {
    INSTALL.call_once(|| {
        // The unwinder sets up its tables on its first use, through `pthread_once`, which
        // is not safe in a signal handler: use it once here first.
        backtrace::trace(|_| false);
        // SAFETY: a zeroed `sigaction` is a valid empty one; the handler has the
        // `SA_SIGINFO` signature. The previous action is read first and published (a
        // leaked box, never freed) before ours replaces it, so the handler never reads it
        // half written. An action someone else sets between the two calls is replaced
        // without being chained: a race with another library's own install, which no
        // order of calls avoids.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGURG, std::ptr::null(), &mut old) != 0 {
                return;
            }
            PREVIOUS.store(Box::into_raw(Box::new(old)), Release);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            // Not `SA_ONSTACK`: the walk runs on the worker's own stack (megabytes, with
            // half kept free by the blocking join's help), not std's small alternate
            // stack for overflow reports, which a deep walk could run past.
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut());
        }
    });
}

/// The calling thread now runs worker `index` of `monitor`: the handler may take its
/// stack, and, with `period`, a CPU-time timer of its own asks it to look every `period`
/// of CPU time. Undone by [`leave`].
///
/// # Safety
/// `monitor` stays valid until this thread calls [`leave`].
pub(super) unsafe fn enter(monitor: *const StallMonitor, index: usize, period: Option<Duration>) {
    leave();
    VIEW.with(|v| v.set(ThreadView { monitor, index }));
    let Some(period) = period else { return };
    // SAFETY: plain calls on values built here; the timer is this thread's own
    // (`CLOCK_THREAD_CPUTIME_ID`, delivered to this thread's id), and `leave` deletes it.
    unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGURG;
        sev.sigev_value = libc::sigval { sival_ptr: TIMER_MAGIC as *mut libc::c_void };
        sev.sigev_notify_thread_id = libc::gettid();
        let mut id: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut id) != 0 {
            // No timer (a limit on timers): samplers still ask for stacks.
            return;
        }
        let ts = libc::timespec { tv_sec: period.as_secs() as _, tv_nsec: period.subsec_nanos() as _ };
        let spec = libc::itimerspec { it_interval: ts, it_value: ts };
        if libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) != 0 {
            libc::timer_delete(id);
            return;
        }
        TIMER.with(|t| t.set(Some(id)));
    }
}

/// This thread no longer runs a worker (its loop ended, or a blocking join handed the
/// worker to another thread): the handler leaves it alone, and its timer is deleted. A
/// signal of that timer still pending finds no worker and is dropped.
pub(super) fn leave() {
    VIEW.with(|v| v.set(ThreadView { monitor: std::ptr::null(), index: 0 }));
    if let Some(id) = TIMER.with(|t| t.take()) {
        // SAFETY: a timer this thread made in `enter`, deleted once.
        unsafe { libc::timer_delete(id) };
    }
}

/// Ask this process's thread `tid` to look at its poll (see "Who sends the signal").
/// False if it is gone.
pub(super) fn ask(tid: i32) -> bool {
    // `tgkill` with this process's id: a signal never reaches another process. A thread
    // id the kernel gave to a new thread of this process after the worker's exited finds
    // no worker there (or another runtime's, which looks at its own poll), and the
    // request is forwarded as not ours.
    // SAFETY: a plain system call; `SIGURG` has our handler (`install`).
    tid != 0 && unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGURG) } == 0
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: reading and restoring errno is what a handler must do.
    let errno = unsafe { *libc::__errno_location() };
    let view = VIEW.with(|v| v.get());
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler; the
    // value and pid are read only for the codes that carry them.
    let (from_timer, from_us) = unsafe {
        let code = (*info).si_code;
        (
            code == libc::SI_TIMER && (*info).si_value().sival_ptr as usize == TIMER_MAGIC,
            code == libc::SI_TKILL && (*info).si_pid() == libc::getpid(),
        )
    };
    if !view.monitor.is_null() {
        // SAFETY: `enter`'s contract: valid while the view is set, which it is.
        let m = unsafe { &*view.monitor };
        let asked = from_us && m.slots[view.index].take_request();
        if from_timer || asked {
            m.capture_if_stuck(view.index, interrupted_pc(ctx));
        } else {
            forward(sig, info, ctx);
        }
    } else if !from_timer {
        // Not a worker's thread (or no longer): a signal of a deleted timer is dropped,
        // anything else goes to whoever had the signal before.
        forward(sig, info, ctx);
    }
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = errno };
}

/// Hand a `SIGURG` that is not ours to the handler installed before ours.
fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.load(std::sync::atomic::Ordering::Acquire);
    if prev.is_null() {
        return;
    }
    // SAFETY: published once by `install` before our handler, never freed.
    let (f, flags) = unsafe { ((*prev).sa_sigaction, (*prev).sa_flags) };
    if f == libc::SIG_DFL || f == libc::SIG_IGN || f == 0 {
        return;
    }
    // SAFETY: the previous handler's own signature, as its flags say.
    unsafe {
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(f);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(f);
            f(sig);
        }
    }
}

/// The address the signal stopped the thread at, from the signal's context.
fn interrupted_pc(ctx: *mut libc::c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: an `SA_SIGINFO` handler's third argument is the thread's `ucontext_t`.
        Some(unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize] } as usize)
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above.
        Some(unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.pc } as usize)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// Walk this thread's stack (in its signal handler) into `ips`, from the innermost frame
/// outwards (the handler's own frames first). Returns how many frames it stored and the
/// index of the one at `pc` (the frame the signal interrupted; 0 if `pc` is not among
/// them).
pub(super) fn walk(pc: Option<usize>, ips: &[AtomicUsize]) -> (usize, usize) {
    let mut n = 0;
    let mut at = None;
    // SAFETY: the walk allocates nothing and takes no lock (see `supported`); it reads
    // this thread's own stack.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            if at.is_none() && Some(ip) == pc {
                at = Some(n);
            }
            ips[n].store(ip, Relaxed);
            n += 1;
            n < ips.len()
        });
    }
    (n, at.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn glibc_versions_parse() {
        assert_eq!(super::parse_version("2.36"), Some((2, 36)));
        assert_eq!(super::parse_version("2.35.1"), Some((2, 35)));
        assert_eq!(super::parse_version("2"), None);
        assert_eq!(super::parse_version("x.y"), None);
    }
}
