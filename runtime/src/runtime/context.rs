//! The thread-local context: which runtime a thread serves, and which of its workers
//! the thread is, if any.
//!
//! A worker thread sets both for the life of its loop (`enter_worker`); `block_on`, the
//! worker and pool threads' start hooks, and the blocking pool set only the runtime
//! (`enter`), so `volt::spawn` and the leaf futures (`sleep`, sockets) find their runtime
//! there. Every setter returns an [`EnterGuard`] that restores what was there before, so
//! contexts nest (a `block_on` inside a pool thread, a worker's loop inside its start
//! hook).
//!
//! The worker is kept as a pointer, not an index: `current_worker` runs several times per
//! poll, and a pointer saves it a bounds check and a multiply each time. A worker has
//! exactly one owning thread at a time; a blocking join that hands its worker to another
//! thread clears the worker here first (`hand_off_worker`), so `owns` tells the old thread
//! to let go.

use crate::scheduler::handle::Handle;
use crate::scheduler::worker::Worker;
use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::Arc;
use std::task::{Wake, Waker};

/// What this thread serves.
#[derive(Clone, Copy)]
pub(crate) struct Ctx {
    shared: *const Handle,
    /// This thread's worker of `shared` (null: not a worker).
    worker: *const Worker,
}

const NO_WORKER: *const Worker = ptr::null();

thread_local! {
    static CONTEXT: Cell<Ctx> = const { Cell::new(Ctx { shared: ptr::null(), worker: NO_WORKER }) };
}

/// Restores the previous context on drop.
pub(crate) struct EnterGuard(Ctx);

impl Drop for EnterGuard {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.set(self.0));
    }
}

/// Make `shared` the current runtime of this (non-worker) thread, for `volt::spawn`.
pub(crate) fn enter(shared: &Arc<Handle>) -> EnterGuard {
    EnterGuard(CONTEXT.with(|c| c.replace(Ctx { shared: Arc::as_ptr(shared), worker: NO_WORKER })))
}

/// Make this thread worker `w` of `shared` (its loop's owner) until the guard drops.
pub(crate) fn enter_worker(shared: &Arc<Handle>, w: &Worker) -> EnterGuard {
    EnterGuard(CONTEXT.with(|c| c.replace(Ctx { shared: Arc::as_ptr(shared), worker: w })))
}

/// A blocking join gives this thread's worker away: from now on the thread is a plain
/// thread of `shared`. Dropping the guard takes the worker back (the hand-off failed);
/// forgetting it keeps the change (the enclosing `enter_worker` guard restores the
/// context when the thread leaves the loop).
pub(crate) fn hand_off_worker(shared: &Arc<Handle>) -> EnterGuard {
    enter(shared)
}

/// The runtime this thread is in, if any (borrowed: the caller must not outlive it).
pub(crate) fn current_shared() -> Option<ManuallyDrop<Arc<Handle>>> {
    let ctx = CONTEXT.with(|c| c.get());
    if ctx.shared.is_null() {
        return None;
    }
    // SAFETY: the pointer came from `Arc::as_ptr` of an `Arc` that the worker thread (or
    // the `block_on` caller) keeps alive while the context is set; `ManuallyDrop` keeps
    // this borrowed `Arc` from releasing a count it never took.
    Some(ManuallyDrop::new(unsafe { Arc::from_raw(ctx.shared) }))
}

/// A clone of the current runtime's `Arc`, if any.
pub(crate) fn current_handle() -> Option<Arc<Handle>> {
    current_shared().map(|s| Arc::clone(&s))
}

/// This thread's worker (of whichever runtime), or null.
#[inline(always)]
pub(crate) fn current_worker_ptr() -> *const Worker {
    CONTEXT.with(|c| c.get().worker)
}

/// Whether this thread owns worker `w` now (a blocking join may have handed it off).
#[inline(always)]
pub(crate) fn owns(w: &Worker) -> bool {
    ptr::eq(current_worker_ptr(), w)
}

/// Whether this thread is a worker of any Volt runtime.
pub(crate) fn on_worker_thread() -> bool {
    !current_worker_ptr().is_null()
}

impl Handle {
    /// This thread's worker's part of telemetry, if the thread is one of our workers.
    #[inline(always)]
    pub(crate) fn current_rec(&self) -> Option<&crate::telemetry::record::WorkerRecorder> {
        self.current_worker().map(|w| &w.rec)
    }

    /// The worker this thread is, if it is one of ours.
    #[inline(always)]
    pub(crate) fn current_worker(&self) -> Option<&Worker> {
        let ctx = CONTEXT.with(|c| c.get());
        if ptr::eq(ctx.shared, self) && !ctx.worker.is_null() {
            // SAFETY: `enter_worker` set it to one of `self.workers` (same `shared`), and
            // `self` is alive while we hold `&self`.
            Some(unsafe { &*ctx.worker })
        } else {
            None
        }
    }

    /// Like `current_worker`, but also safe while the thread's locals are being torn down
    /// (a task freed from a thread-local destructor).
    #[inline]
    pub(crate) fn current_worker_index(&self) -> Option<usize> {
        CONTEXT
            .try_with(|c| c.get())
            .ok()
            .filter(|ctx| ptr::eq(ctx.shared, self) && !ctx.worker.is_null())
            // SAFETY: set by `enter_worker` to one of `self.workers`, alive while `self` is.
            .map(|ctx| unsafe { &*ctx.worker }.index)
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the current thread.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(ThreadWaker(std::thread::current())))
}
