//! The thread-local context: which runtime a thread serves, and which of its workers
//! the thread is, if any, kept as one pointer per owner.
//!
//! A worker thread sets it for the life of its loop; `block_on`, the worker and pool
//! threads' start hooks, and the blocking pool set it without a worker, so `volt::spawn`
//! and the leaf futures (`sleep`, sockets) find their runtime there. Every setter returns
//! an [`EnterGuard`] that restores what was there before, so contexts nest (a `block_on`
//! inside a pool thread, a worker's loop inside its start hook).
//!
//! # One slot per owner
//! The leaves must not depend on the scheduler, and the scheduler is built from the
//! leaves: if this file stored the scheduler's handle, a leaf that looks up its runtime
//! here would import the scheduler through it, and the scheduler would import the leaf
//! back. So the context is a row of untyped pointers, one per owner (the scheduler and
//! its worker, the driver, the clock, the blocking pool, the worker's telemetry
//! recorder, the worker's held budget wakes), and each owner reads only its own slot, casting it back to the type that
//! it alone stores there: `driver::Handle::current`, `time::clock::now`,
//! `blocking::Spawner::current`, and the scheduler's typed view in
//! `scheduler::context`. The scheduler fills the row when it enters (it holds all the
//! parts), with pointers each part hands out for its own slot.
//!
//! The pointers are borrowed: whoever enters keeps the runtime alive until its guard
//! drops. The worker is a pointer, not an index: it is read several times per poll, and
//! a pointer saves a bounds check and a multiply each time. A worker has exactly one
//! owning thread at a time; a blocking join that hands its worker to another thread
//! clears the worker slot first, so the old thread sees it no longer owns the worker.

use crate::telemetry::record::WorkerRecorder;
use std::cell::Cell;
use std::ptr;
use std::sync::Arc;
use std::task::{Wake, Waker};

/// What this thread serves: one pointer per owner, null when unset.
#[derive(Clone, Copy)]
pub(crate) struct Slots {
    /// The scheduler's handle (`scheduler::Handle`).
    pub(crate) scheduler: *const (),
    /// This thread's worker of that scheduler (null: not a worker).
    pub(crate) worker: *const (),
    /// The driver's shared part (`driver::Handle`).
    pub(crate) driver: *const (),
    /// The runtime's clock (`time::clock::Clock`; read only with `test-util`, when a
    /// clock may be paused).
    #[cfg_attr(not(feature = "test-util"), allow(dead_code))]
    pub(crate) clock: *const (),
    /// The blocking pool (`blocking::Spawner`).
    pub(crate) spawner: *const (),
    /// This thread's worker's part of telemetry (null: not a worker).
    pub(crate) rec: *const WorkerRecorder,
    /// This thread's worker's held budget wakes (`task::coop::Deferred`; null: not a
    /// worker, so a refused task is woken at once).
    pub(crate) defer: *const (),
}

impl Slots {
    /// No runtime.
    pub(crate) const EMPTY: Slots = Slots {
        scheduler: ptr::null(),
        worker: ptr::null(),
        driver: ptr::null(),
        clock: ptr::null(),
        spawner: ptr::null(),
        rec: ptr::null(),
        defer: ptr::null(),
    };

    /// The same runtime, as a thread that is not its worker.
    pub(crate) fn without_worker(self) -> Slots {
        Slots { worker: ptr::null(), rec: ptr::null(), defer: ptr::null(), ..self }
    }
}

thread_local! {
    static CONTEXT: Cell<Slots> = const { Cell::new(Slots::EMPTY) };
}

/// Restores the previous context on drop.
pub(crate) struct EnterGuard(Slots);

impl Drop for EnterGuard {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.set(self.0));
    }
}

/// Make `slots` this thread's context until the guard drops. The caller keeps every part
/// they point to alive until then.
pub(crate) fn enter(slots: Slots) -> EnterGuard {
    EnterGuard(CONTEXT.with(|c| c.replace(slots)))
}

/// This thread's context (all null outside a runtime).
#[inline(always)]
pub(crate) fn get() -> Slots {
    CONTEXT.with(|c| c.get())
}

/// Like [`get`], but `None` while the thread's locals are being torn down (a task freed
/// from a thread-local destructor).
#[inline]
pub(crate) fn try_get() -> Option<Slots> {
    CONTEXT.try_with(|c| c.get()).ok()
}

/// This thread's worker (of whichever runtime), or null.
#[inline(always)]
pub(crate) fn worker_ptr() -> *const () {
    CONTEXT.with(|c| c.get().worker)
}

/// Whether this thread is a worker of any Volt runtime.
pub(crate) fn on_worker_thread() -> bool {
    !worker_ptr().is_null()
}

std::thread_local! {
    /// How many `block_on` calls this thread is inside (0 in a `block_in_place` closure,
    /// which leaves the runtime for its duration).
    static BLOCK_ON: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread is inside a `block_on` (polling its future, or a task of a
/// current-thread runtime it drives): blocking it there would stop what it drives.
pub(crate) fn in_block_on() -> bool {
    BLOCK_ON.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Marks this thread as inside a `block_on` until dropped (or, from
/// [`InBlockOn::leave`], as outside any until dropped).
pub(crate) struct InBlockOn(u32);

impl InBlockOn {
    pub(crate) fn enter() -> InBlockOn {
        InBlockOn(BLOCK_ON.with(|d| d.replace(d.get() + 1)))
    }

    /// Out of every `block_on` until dropped: a `block_in_place` closure may block, and
    /// may start a runtime of its own, as with Tokio.
    pub(crate) fn leave() -> InBlockOn {
        InBlockOn(BLOCK_ON.with(|d| d.replace(0)))
    }
}

impl Drop for InBlockOn {
    fn drop(&mut self) {
        let _ = BLOCK_ON.try_with(|d| d.set(self.0));
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
