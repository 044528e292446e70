//! `JoinHandle::join`, the blocking join, on a worker and off one.
//!
//! # On a worker (`join_on_worker`)
//! A blocking join on a worker runs its target and nothing else (the rule and why:
//! `task::join`). `take_local` takes the target out of the LIFO slot (only the owner
//! fills the slot, so a slot seen holding the target holds it or nothing) or out of the
//! ring (popped whole and pushed back in order, since the ring has no removal from the
//! middle), and `run_task` polls it inline while the thread's stack has room
//! (`HELP_STACK`: half the stack, measured from where the worker loop started) and at most
//! [`MAX_INLINE_POLLS_PER_JOIN`] times. Before each `take_local` the worker flushes the
//! wakes the cooperative budget held back ("Deferred wakes" in `run`): a target
//! refused by the budget is waiting there, out of the slot and the ring.
//!
//! # Handing the worker off (`hand_off`)
//! Otherwise the join gives the worker away: the thread writes its pending poll start out
//! of the ring, clears its own context's worker (it is now a plain thread of the runtime:
//! spawns and wakes from it go to the global queue, its task frees to the remote stacks),
//! and queues `run_worker` for this worker on the blocking pool (`Pool::spawn_now`, which
//! never waits behind blocking calls). The pool's lock orders the old owner's last touch
//! of `Core`, the ring and the cell cache before the new owner's first. From then on the
//! old thread must not touch the worker: `run_tick`, `join_on_worker` and the poll hooks
//! (`on_poll_end`) check `owns(w)` after every poll and let go (`run_worker` returns
//! without counting an exit, and a handed-off pool thread goes back to the pool). The old
//! thread parks until the target completes. If no pool thread can be had at all, the join
//! keeps the worker and waits without running anything. A worker has exactly one owner at
//! a time, so `Exits` still counts each worker's exit once.
//!
//! # Off a worker
//! A thread outside the runtime has no queues of its own to help with: it parks until
//! the target's completion wakes it, looking every [`OFF_WORKER_RECHECK`] at whether the
//! target's runtime has begun to shut down. Then nothing else may ever complete the
//! target: the shutdown cancels tasks one at a time on one thread, maybe this very one
//! (a task's `Drop` that joins another, run by the shutdown), and a task polled by a
//! thread stuck in a join cycle never returns from its poll. So the join cancels a
//! target that nobody polls itself (in the target's runtime context, as the shutdown
//! would); a join made inside the poll of a task whose own runtime is shutting down gives
//! up on a target that is being polled (`join` returns a cancelled `JoinError`, as it
//! does on a worker), and any other joiner (a plain thread, a blocking closure, a task of
//! a runtime that runs on) waits for that poll to end.

use super::worker::Worker;
use crate::runtime::context::thread_waker;
use crate::scheduler::handle::Handle;
use crate::scheduler::handle::{current_shared, current_worker_ptr, hand_off_worker, owns};
use crate::task::header;
use crate::task::header::Header;
use crate::task::join::JoinError;
use crate::task::notified::Notified;
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// How many times one blocking join runs its target inline before it hands the worker
/// off instead: a target that keeps yielding must not hold the worker's other tasks.
pub(crate) const MAX_INLINE_POLLS_PER_JOIN: u32 = 16;
/// How often a join that could not hand its worker off (no thread could be started)
/// looks at the shutdown flag while it waits.
const HAND_OFF_FAILED_RECHECK: Duration = Duration::from_millis(10);
/// How often a join parked off a worker looks at whether its target's runtime has begun
/// to shut down (see "Off a worker").
const OFF_WORKER_RECHECK: Duration = Duration::from_millis(50);

thread_local! {
    /// How far from its start this thread's stack may grow while a blocking join runs
    /// its target inline: half the stack, the other half being left for the target's
    /// own frames and the rest of the poll. 0: no helping here.
    static HELP_STACK: Cell<HelpStack> = const { Cell::new(HelpStack { base: 0, budget: 0 }) };
}

#[derive(Clone, Copy)]
struct HelpStack {
    /// An address near the bottom of the worker's frames.
    base: usize,
    budget: usize,
}

/// The address of a local: where this thread's stack is now, near enough.
#[inline(always)]
fn stack_position() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Sets this thread's help budget for the life of a worker loop, and restores it after.
pub(crate) struct HelpStackGuard(HelpStack);

impl HelpStackGuard {
    pub(crate) fn start(stack_size: usize) -> HelpStackGuard {
        let new = HelpStack { base: stack_position(), budget: stack_size / 2 };
        HelpStackGuard(HELP_STACK.with(|h| h.replace(new)))
    }
}

impl Drop for HelpStackGuard {
    fn drop(&mut self) {
        HELP_STACK.with(|h| h.set(self.0));
    }
}

/// Whether a blocking join may still run its target on this thread's stack.
fn help_has_stack_room() -> bool {
    let h = HELP_STACK.with(|h| h.get());
    // `abs_diff`: right whichever way the stack grows.
    h.budget > 0 && stack_position().abs_diff(h.base) < h.budget
}

/// `JoinHandle::join`'s wait: help on a worker, park the thread elsewhere. `poll_join(waker)`
/// registers `waker` as the join waker and returns true once the output is ready. Returns
/// whether the target completed.
pub(crate) fn block_until_complete(target: NonNull<Header>, poll_join: &mut dyn FnMut(&Waker) -> bool) -> bool {
    let worker = current_worker_ptr();
    if !worker.is_null() {
        let shared = current_shared().expect("worker context");
        // SAFETY: a worker's context points at that worker of `shared`, which is alive.
        let w = unsafe { &*worker };
        Handle::join_on_worker(&shared, w, target, poll_join);
        return header::is_complete(target);
    }
    block_off_worker(target, poll_join, &thread_waker());
    true
}

/// `task::block_in_place`: if this thread is a worker, give the worker to another thread
/// (as a blocking join does: `hand_off`), so its queued tasks run on while the caller
/// blocks; the rest of the current poll then runs on this thread as a plain thread of the
/// runtime. False when this is a worker that could not be handed off (no thread could be
/// started): it stays this thread's, as a join's failed hand-off does.
pub(crate) fn hand_off_current_worker() -> bool {
    let worker = current_worker_ptr();
    if worker.is_null() {
        return true;
    }
    let shared = current_shared().expect("worker context");
    // SAFETY: a worker's context points at that worker of `shared`, which is alive.
    let w = unsafe { &*worker };
    match Handle::hand_off(&shared, w) {
        Ok(()) => true,
        Err(()) => {
            // The worker stays in this poll while `f` runs: the wakes it holds back go to
            // its queues, where thieves can take them.
            shared.flush_deferred(w);
            // SAFETY: the task being polled on this thread is alive for its poll.
            let me = crate::task::id::current_task().map_or(0, |t| unsafe { t.as_ref() }.id);
            shared.metrics.stall.enter_thread(w.index);
            shared.metrics.on_poll_resumed(&w.rec, me);
            false
        }
    }
}

/// Park this thread (not a worker, or no longer one) until the join's output is ready
/// (`waker` unparks this thread), or until the target's runtime shuts down (see "Off a
/// worker").
fn block_off_worker(target: NonNull<Header>, poll_join: &mut dyn FnMut(&Waker) -> bool, waker: &Waker) {
    // SAFETY: the joiner's `JoinHandle` holds a reference to the target.
    let vtable = unsafe { target.as_ref() }.vtable;
    while !poll_join(waker) {
        // SAFETY: as above. This claims the task (and cancels it, in its runtime's
        // context) only if nobody polls it, as the shutdown's own pass does.
        if unsafe { (vtable.cancel_if_shut_down)(target) } {
            if poll_join(waker) {
                return;
            }
            // A thread polls it, and cancels it when that poll returns. A join inside the
            // poll of a task whose own runtime is shutting down may be what that poll
            // waits for (a cycle), so it gives up: that task is being cancelled anyway.
            // Any other joiner (a plain thread, a blocking closure, a task of a runtime
            // that runs on) waits for the poll to end, as it would without the shutdown.
            if joiner_is_a_task_shutting_down() {
                return;
            }
        }
        std::thread::park_timeout(OFF_WORKER_RECHECK);
    }
}

/// Whether this thread is in the poll of a (non-blocking) task whose runtime has begun to
/// shut down.
fn joiner_is_a_task_shutting_down() -> bool {
    crate::task::id::current_task().is_some_and(|me| {
        // SAFETY: the current task's poll is running on this thread (it set itself
        // current for it), so its cell is alive.
        let vtable = unsafe { me.as_ref() }.vtable;
        // SAFETY: as above.
        !vtable.blocking && unsafe { (vtable.runtime_shut_down)(me) }
    })
}

impl Handle {
    /// `JoinHandle::join` on worker `w`'s own thread: help with the target itself while it
    /// waits in this worker's queues and the stack has room, else hand the worker to
    /// another thread and block. Returns early (with the target maybe not complete) only
    /// on shutdown.
    fn join_on_worker(
        this: &Arc<Handle>,
        w: &Worker,
        target: NonNull<Header>,
        poll_join: &mut dyn FnMut(&Waker) -> bool,
    ) {
        // The joining task, whose poll goes on holding the worker after each task run
        // inline (see `telemetry::stall`).
        // SAFETY: the task being polled on this thread is alive for its poll.
        let me = crate::task::id::current_task().map_or(0, |t| unsafe { t.as_ref() }.id);
        let mut inline_polls = 0;
        loop {
            if header::is_complete(target) || this.is_shutdown() {
                return;
            }
            if inline_polls == MAX_INLINE_POLLS_PER_JOIN || !help_has_stack_room() {
                break;
            }
            // A target the budget refused (maybe in the last inline run) waits in the
            // worker's list of held wakes: queue it, so it runs here, or, should the join
            // keep the worker without running anything, a thief can take it.
            this.flush_deferred(w);
            let Some(task) = this.take_local(w, target) else { break };
            inline_polls += 1;
            // The joining poll stops holding the worker by itself (see `telemetry::stall`).
            this.metrics.on_poll_interrupted(&w.rec);
            this.run_task(w, task);
            if !owns(w) {
                // The target blocked in a join of its own and handed this worker off.
                return block_off_worker(target, poll_join, &thread_waker());
            }
            this.metrics.on_poll_resumed(&w.rec, me);
        }
        // Whatever the last inline run left held goes to the queues before the worker is
        // handed off or kept in a wait.
        this.flush_deferred(w);
        let waker = thread_waker();
        if poll_join(&waker) {
            return;
        }
        // SAFETY: the joiner's `JoinHandle` holds a reference to the target.
        if this.current_thread && !unsafe { target.as_ref() }.vtable.blocking {
            // The only worker is this thread, which the wait would hold: an async target
            // could never run again. A clear panic instead of a hang (Tokio's
            // `block_in_place` panics on its current-thread runtime the same way).
            panic!(
                "volt: blocking `JoinHandle::join` inside a task of a current-thread runtime, on a task that did not \
                 finish inline: it would wait for good, since the runtime's only worker is this thread; `.await` \
                 the handle instead"
            );
        }
        match Handle::hand_off(this, w) {
            Ok(()) => block_off_worker(target, poll_join, &waker),
            Err(()) => {
                // No thread could take the worker: keep it and wait without running
                // anything (the ring stays open to thieves, the LIFO slot to the rescue of
                // a stuck worker's slot), looking at the shutdown flag now and then. This
                // thread is the worker's again, stuck in this poll.
                this.metrics.stall.enter_thread(w.index);
                this.metrics.on_poll_resumed(&w.rec, me);
                while !poll_join(&waker) && !this.is_shutdown() {
                    std::thread::park_timeout(HAND_OFF_FAILED_RECHECK);
                }
            }
        }
    }

    /// Take `target` out of this worker's LIFO slot or ring, if it is there; the other
    /// tasks keep their order.
    fn take_local(&self, w: &Worker, target: NonNull<Header>) -> Option<Notified<Arc<Handle>>> {
        if !header::is_scheduled(target) {
            return None;
        }
        if w.lifo.peek() == Some(target) {
            // Only thieves touch a full slot, and they only empty it: this is `target`
            // or nothing.
            // SAFETY: the slot held a queue reference, now ours.
            return w.lifo.pop().map(|t| unsafe { Notified::from_raw(t) });
        }
        let n = w.queue.len() as usize;
        if n == 0 {
            return None;
        }
        // The ring has no removal from the middle: take it all and put back the rest, in
        // order (at most 256 entries, only on a join). Thieves see fewer tasks meanwhile.
        let mut rest = Vec::with_capacity(n);
        let mut found = None;
        while let Some(t) = w.queue.pop() {
            if found.is_none() && ptr::eq(t.header(), target.as_ptr()) {
                found = Some(t);
            } else {
                rest.push(t);
            }
        }
        for t in rest {
            self.push_local_ring(w, t);
        }
        found
    }

    /// Give worker `w` to a thread of the blocking pool (`Pool::spawn_now`), which runs
    /// its loop from where this thread left it, and make this thread a plain thread of
    /// the runtime. `Err` (and the worker kept) when no thread could be had.
    fn hand_off(this: &Arc<Handle>, w: &Worker) -> Result<(), ()> {
        // Still the owner: send the joining poll's start out now, so the new owner's
        // records follow it in the ring.
        this.metrics.on_hand_off(&w.rec);
        w.core.lifo_watch.set(None);
        // A current-thread runtime's worker belongs to the thread in `block_on`: it is
        // never handed to a pool thread (the join keeps it and waits, as when no thread
        // can be had).
        if this.current_thread {
            return Err(());
        }
        let plain = hand_off_worker();
        let handoff = HandedOff { shared: Some(Arc::clone(this)), index: w.index };
        // The pool's lock orders everything this thread did to the worker before the new
        // owner's first look at it.
        match this.blocking.spawn_now(handoff, HandedOff::run) {
            Ok(()) => {
                // This thread stays a plain one until it leaves the worker loop, whose
                // own guard restores the context then.
                std::mem::forget(plain);
                Ok(())
            }
            Err(handoff) => {
                handoff.forget();
                drop(plain);
                Err(())
            }
        }
    }
}

/// A worker handed off by a blocking join, on its way to its new thread.
struct HandedOff {
    shared: Option<Arc<Handle>>,
    index: usize,
}

impl HandedOff {
    fn run(mut self) {
        let shared = self.shared.take().expect("a hand-off runs once");
        Handle::run_worker(shared, self.index);
    }

    /// The hand-off did not happen: the closure is dropped unrun, and the worker stays.
    fn forget(mut self) {
        self.shared = None;
    }
}

impl Drop for HandedOff {
    fn drop(&mut self) {
        // Queued but never run: the pool shut down first (a `shutdown_timeout` that gave
        // up on it). Nobody owns the worker, so release its queue entries here and count
        // its exit.
        if let Some(shared) = self.shared.take() {
            shared.drain_local(&shared.workers[self.index]);
            Handle::worker_exited(&shared);
        }
    }
}

// The blocking join is the scheduler's: it runs the target or hands the worker off. It
// is a method of the task's handle, written here so that `task` never imports the
// scheduler.
impl<T> crate::task::join::JoinHandle<T> {
    /// Block the current thread until the task finishes, and return its output.
    ///
    /// On a worker thread of a Volt runtime, a target waiting in this worker's queues runs
    /// inline; otherwise the worker's queue goes to another thread and this one blocks,
    /// so no worker is lost to the wait and no other task runs under the caller's locks
    /// (see the doc of `task/join.rs`). On any other thread it parks without spinning,
    /// waking every 50 ms to see whether the target's runtime has begun to shut down.
    ///
    /// Like any blocking call inside a task, a cycle of joins between tasks deadlocks (until
    /// the runtime shuts down, which ends it: a join in the cycle returns a cancelled
    /// `JoinError`), and so does a target that needs a lock its joiner holds.
    ///
    /// # Panics
    /// When a task joins its own handle, which could never return.
    pub fn join(self) -> Result<T, JoinError> {
        let raw = self.raw();
        if crate::task::id::current_task() == Some(raw) {
            panic!("volt: task {} called `join` on its own JoinHandle, which would wait forever", self.id());
        }
        let vtable = self.header().vtable;
        let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
        let mut poll_join = |waker: &Waker| {
            if out.is_pending() {
                // SAFETY: `out` has the type the vtable writes; `self` keeps the task alive.
                // No budget: a blocking join waits for the output, however many it took.
                unsafe { (vtable.try_read_output)(raw, &mut out as *mut _ as *mut (), waker, false) };
            }
            out.is_ready()
        };
        if !self.is_finished() {
            block_until_complete(raw, &mut poll_join);
        }
        if self.is_finished() {
            poll_join(Waker::noop());
        }
        match out {
            Poll::Ready(out) => out,
            // The runtime shut down while this worker waited: the task is being cancelled.
            Poll::Pending => Err(JoinError::cancelled(self.header().id)),
        }
    }
}
