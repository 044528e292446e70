//! The current-thread flavor (`Builder::new_current_thread`): one worker, no thread of its
//! own. Its loop runs on whichever thread is inside `block_on`, between polls of that
//! thread's future, so every task of the runtime runs on a `block_on` thread, and only
//! while some thread is inside `block_on` (as with Tokio's current-thread runtime).
//!
//! # Who has the worker
//! `Handle::core` says who has worker 0: nobody (`CORE_FREE`), a thread inside `block_on`
//! (`CORE_HELD`), or nobody ever again (`CORE_EXITED`: the runtime shut down and the
//! worker's exit was counted). The first `block_on` to claim it (a compare-exchange from
//! free to held) becomes worker 0 for as long as its future runs: it enters the worker's
//! context, so spawns from it and wakes on it go to the worker's own queues, and it runs
//! the worker's budget ticks (`run_tick`: timers, the reactor, the queues), polling its own
//! future whenever that future's waker has fired. With nothing to run and its future not
//! woken it parks as the worker parks, in the reactor (up to the next timer) or on the
//! worker's futex; the future's waker unparks worker 0 as well as the thread.
//!
//! Another thread calling `block_on` meanwhile polls its own future on its own thread and
//! tries to claim the worker again every [`CORE_RETRY`], so its spawned tasks still run
//! (on the holder's thread) and it takes the worker over once the holder leaves.
//!
//! # Idle between calls
//! While nobody has the worker it counts as parked in the idle protocol (`idle`): built
//! so, and parked again by each holder as it leaves. So a spawn from outside meanwhile
//! claims it as a parked worker would be claimed (its wake only leaves a token for the
//! next park), and the stall monitor, seeing every worker parked, sleeps instead of
//! sampling a worker that runs nothing. The next holder takes it out of the parked
//! bitmap as a worker leaving its park does.
//!
//! # Shutdown
//! The worker has no thread to join, so its exit (releasing its queue entries, counting it
//! in `Exits`) is done by whoever sees the shutdown with the worker free: the shutting-down
//! thread, when nobody is inside `block_on`, or the holder, as it leaves. Both sides set
//! their word (the shutdown flag; the core back to free) and then read the other's with
//! sequentially consistent ordering, so at least one of them sees both, and the
//! compare-exchange to `CORE_EXITED` lets only one of them do the exit.
//!
//! A blocking `JoinHandle::join` inside a current-thread task never hands the worker to
//! another thread: it keeps it, running the target inline when it can, else waiting.

use crate::scheduler::handle::{enter, enter_worker, Handle, CORE_EXITED, CORE_FREE, CORE_HELD};
use crate::task::coop::Budget;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire, SeqCst};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// The stack a `block_on` thread is assumed to have for a blocking join's inline help
/// (which uses at most half of it).
const CALLER_STACK: usize = 1 << 20;

/// How often a `block_on` that found the worker taken tries to claim it again.
pub(crate) const CORE_RETRY: Duration = Duration::from_millis(5);

/// The waker of a `block_on`'s own future: marks it woken and wakes whichever of its
/// thread's two sleeps it is in (worker 0's park, or the plain thread park).
struct MainWaker {
    woken: AtomicBool,
    thread: std::thread::Thread,
    /// Weak: the waker may be kept in the runtime's own timer wheel or reactor.
    shared: Weak<Handle>,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        if let Some(shared) = self.shared.upgrade() {
            shared.unpark_worker(0);
        }
        self.thread.unpark();
    }
}

/// `block_on` on a current-thread runtime (see the module doc).
pub(crate) fn block_on<F: Future>(shared: &Arc<Handle>, future: F) -> F::Output {
    // Entered first, so the future is dropped (also when its poll panics) inside the
    // runtime's context.
    let _enter = enter(shared);
    let mut future = pin!(future);
    let main = Arc::new(MainWaker {
        woken: AtomicBool::new(true),
        thread: std::thread::current(),
        shared: Arc::downgrade(shared),
    });
    let waker = Waker::from(Arc::clone(&main));
    let mut cx = Context::from_waker(&waker);
    loop {
        if shared.core.compare_exchange(CORE_FREE, CORE_HELD, Acquire, Acquire).is_ok() {
            if let Some(v) = drive(shared, &main, &mut cx, future.as_mut()) {
                return v;
            }
        }
        // The worker is another thread's, or gone with the runtime: poll on our own.
        if main.woken.swap(false, AcqRel) {
            // A budget of its own for each poll, as a task's (see `drive`).
            let _budget = Budget::enter();
            if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
        }
        if shared.core.load(Acquire) == CORE_EXITED {
            std::thread::park();
        } else {
            std::thread::park_timeout(CORE_RETRY);
        }
    }
}

/// Run worker 0 on this thread, polling `future` whenever it is woken, until it is ready
/// (`Some`) or the runtime shuts down (`None`).
fn drive<F: Future>(
    shared: &Arc<Handle>,
    main: &MainWaker,
    cx: &mut Context<'_>,
    mut future: Pin<&mut F>,
) -> Option<F::Output> {
    /// Gives the worker back on every way out, unwinding too.
    struct Release<'a>(&'a Arc<Handle>);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            let shared = self.0;
            let w = &shared.workers[0];
            // Wakes the budget held back go to the queues, where the next holder (and
            // every check for queued work) sees them.
            shared.flush_deferred(w);
            // Parked while nobody runs it (see "Idle between calls").
            let was_searching = w.core.is_searching.replace(false);
            let _ = shared.idle.transition_worker_to_parked(0, was_searching);
            shared.metrics.on_state(&w.rec, crate::telemetry::WorkerState::Parked);
            shared.metrics.stall.leave_thread();
            shared.core.store(CORE_FREE, SeqCst);
            if shared.shutdown.load(SeqCst) {
                exit_core(shared);
            }
        }
    }
    let w = &shared.workers[0];
    let _ctx = enter_worker(shared, w);
    shared.metrics.stall.enter_thread(0);
    let _release = Release(shared);
    // A blocking join helps inline within half of this much stack: the `block_on` thread is
    // the caller's, whose stack size we don't know, so assume the least std gives a thread
    // it spawns (2 MiB), minus room for what the caller already uses.
    let _help = crate::scheduler::join::HelpStackGuard::start(shared.stack_size.min(CALLER_STACK));
    shared.metrics.on_worker_start(&w.rec);
    if !shared.idle.unpark_self(0) {
        // A spawn from outside claimed the parked worker for its task, counting it as a
        // searcher (as for a worker woken from its park).
        w.core.is_searching.set(true);
        shared.metrics.on_state(&w.rec, crate::telemetry::WorkerState::Searching);
    }
    // Out of the parked bitmap: the stall monitor watches again.
    shared.metrics.stall.worker_woke();
    loop {
        if shared.is_shutdown() {
            return None;
        }
        if main.woken.swap(false, AcqRel) {
            // The future's spawns and wakes are recorded on the worker with its last
            // clock reading: make it a fresh one, or they would carry the time of the
            // last poll.
            shared.metrics.refresh_clock(&w.rec);
            // A budget of its own for each poll, as a task's and as Tokio's `block_on`:
            // once it is spent, the future's wake waits in the worker's held-back list,
            // which the next `run_tick` flushes first, so the future is polled again
            // after the tasks that were ready.
            let budget = Budget::enter();
            let polled = future.as_mut().poll(cx);
            drop(budget);
            if let Poll::Ready(v) = polled {
                return Some(v);
            }
            // The future's poll counts as one of the worker's: the reactor is polled
            // every so many polls, so a future that only yields (waiting, say, for a flag
            // a task sets once a socket is readable) still lets the events in. With no
            // task to run, the worker's own polls would never come due.
            w.core.tick.set(w.core.tick.get().wrapping_add(1));
            // What the future did is not part of the next task's poll.
            shared.metrics.refresh_clock(&w.rec);
        }
        match shared.run_tick(w) {
            Some(0) => {
                if !main.woken.load(Acquire) {
                    shared.park(w);
                }
            }
            Some(_) => {}
            // `hand_off` refuses on this flavor, so the worker never leaves this thread.
            None => unreachable!("volt: a current-thread runtime's worker was handed to another thread"),
        }
    }
}

/// Count worker 0's exit, if nobody has (the shutdown flag is set and the worker is free):
/// release its queue entries on this thread and tell `Exits`.
pub(crate) fn exit_core(shared: &Arc<Handle>) {
    if shared.core.compare_exchange(CORE_FREE, CORE_EXITED, SeqCst, SeqCst).is_err() {
        return;
    }
    let w = &shared.workers[0];
    {
        let _ctx = enter_worker(shared, w);
        shared.drain_local(w);
        shared.metrics.on_worker_exit(&w.rec);
    }
    Handle::worker_exited(shared);
}
