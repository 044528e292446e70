//! The task cell and its vtable: one allocation per task, type-erased behind a
//! [`Header`] pointer, so queues, wakers and handles deal in one pointer type whatever
//! the future's type.
//!
//! ```text
//! Cell<F, S> (repr(C), one Box)
//! +-----------------------------+
//! | Header  state word, vtable, |  <- every queue, waker and handle holds *Header
//! |         id, list pointers   |
//! | S       the scheduler       |
//! | Stage   Running(F) | Finished(Result<T, JoinError>) | Consumed
//! | join waker slot             |
//! +-----------------------------+
//! ```
//!
//! The harness (`poll`, `cancel_task`, `complete`) is the only code that touches the stage
//! while the task is RUNNING, and only the thread that won the transition to RUNNING runs it.
//! After COMPLETE, the stage belongs to whoever the state word says: the `JoinHandle` if
//! `join_interest` was set at completion, otherwise the completing thread.
//!
//! User code runs at four boundaries, each under `catch_unwind`: the poll, the drop of the
//! future, the drop of the output, and the join waker. A panic becomes a `JoinError` (or is
//! discarded when nobody can receive it); it never unwinds into a worker.

use super::header::{Header, OwnedLinks, Vtable};
use super::join::JoinError;
use super::join::JoinHandle;
use super::notified::{Notified, Task};
use super::schedule::{Outcome, PollOutcome, Schedule};
use super::state::{IdleAction, Lifecycle, State, TransitionToRunning, TransitionToScheduled};
use super::stats::NewTaskStats;
use crate::loom::UnsafeCell;
use std::any::Any;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// Where the future is in its life.
pub(crate) enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

/// The single allocation behind a task.
///
/// Nothing here requires the future or its output to be `Send`: the spawn functions do
/// (`new_task`), and a `LocalSet`'s tasks, which are not, are polled and dropped only on
/// the thread that drives the set (`new_local_task` and `task::local`).
#[repr(C)]
pub(crate) struct Cell<F: Future, S> {
    pub(crate) header: Header,
    scheduler: S,
    stage: UnsafeCell<Stage<F>>,
    /// Written by the `JoinHandle` while `JOIN_WAKER` is clear, read by the completing
    /// thread after it saw `JOIN_WAKER` set at completion. Dropped with the cell.
    join_waker: UnsafeCell<Option<Waker>>,
}

impl<F, S> Cell<F, S>
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    const VTABLE: Vtable = Vtable {
        poll: poll::<F, S>,
        schedule: schedule::<F, S>,
        dealloc: dealloc::<F, S>,
        try_read_output: try_read_output::<F, S>,
        drop_join_handle: drop_join_handle::<F, S>,
        shutdown: shutdown::<F, S>,
        runtime_shut_down: runtime_shut_down::<F, S>,
        cancel_if_shut_down: cancel_if_shut_down::<F, S>,
        stats_offset: Self::STATS_OFFSET,
        blocking: S::BLOCKING,
    };

    /// The cell's size rounded up to `TaskStats`'s alignment.
    const STATS_OFFSET: usize = {
        let a = std::mem::align_of::<super::stats::TaskStats>();
        std::mem::size_of::<Cell<F, S>>().div_ceil(a) * a
    };

    /// The allocation: the cell, plus a `TaskStats` tail when recording. Returns the
    /// layout and the tail's offset.
    fn layout(with_stats: bool) -> (std::alloc::Layout, usize) {
        let cell = std::alloc::Layout::new::<Cell<F, S>>();
        if !with_stats {
            return (cell, 0);
        }
        let (l, off) = cell.extend(std::alloc::Layout::new::<super::stats::TaskStats>()).expect("task layout");
        debug_assert_eq!(off, Self::STATS_OFFSET);
        (l.pad_to_align(), off)
    }

    /// Allocate a new task (one allocation, stats included). It starts SCHEDULED with
    /// three references (owned list, join handle, queue entry), which the caller turns
    /// into those three things.
    pub(crate) fn allocate(
        future: F,
        scheduler: S,
        id: u64,
        stats: Option<super::stats::NewTaskStats>,
    ) -> NonNull<Header> {
        let (layout, stats_offset) = Self::layout(stats.is_some());
        // The scheduler's cell cache, or the global allocator.
        let (mem, owner) = scheduler.alloc_cell(layout);
        let mem = mem.as_ptr();
        let has_stats = stats.is_some();
        let group = stats.as_ref().map_or(0, |new| new.group);
        if let Some(new) = stats {
            // SAFETY: `stats_offset` lies inside the allocation and is aligned for
            // `TaskStats` (from `Layout::extend`); the memory is fresh.
            unsafe { super::stats::TaskStats::write_new(mem.add(stats_offset).cast(), new) };
        }
        let cell = Cell {
            header: Header {
                state: State::with_stats_and_owner(has_stats, owner),
                vtable: &Self::VTABLE,
                id,
                queue_next: UnsafeCell::new(None),
                owned: UnsafeCell::new(OwnedLinks::default()),
                linked: UnsafeCell::new(false),
                group,
                polls: std::sync::atomic::AtomicU32::new(0),
            },
            scheduler,
            stage: UnsafeCell::new(Stage::Running(future)),
            join_waker: UnsafeCell::new(None),
        };
        // SAFETY: the allocation starts with room for a `Cell<F, S>`, suitably aligned.
        unsafe {
            mem.cast::<Cell<F, S>>().write(cell);
            NonNull::new_unchecked(mem.cast::<Header>())
        }
    }
}

/// Recover the cell from its header.
///
/// # Safety
/// `ptr` must come from `Cell::<F, S>::allocate` and the cell must be alive.
unsafe fn cell<'a, F: Future, S>(ptr: NonNull<Header>) -> &'a Cell<F, S> {
    // SAFETY: `Cell` is `repr(C)` with the header first, so the pointers coincide; the
    // caller guarantees the type and liveness.
    unsafe { ptr.cast::<Cell<F, S>>().as_ref() }
}

/// The harness entry: one run of a task taken from a queue (consumes the queue reference).
/// `cx` is the scheduler's poll context for `Schedule::poll_start` (null: none).
unsafe fn poll<F, S>(ptr: NonNull<Header>, cx: *const ())
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the queue reference we hold keeps the cell alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    let sampled = match cell.header.state.transition_to_running() {
        TransitionToRunning::Poll { sampled } => sampled,
        TransitionToRunning::Cancel => {
            // SAFETY: we own the task in RUNNING.
            unsafe { cancel_and_complete::<F, S>(ptr) };
            return;
        }
        TransitionToRunning::Failed => {
            // Completed by shutdown while it sat in a queue: drop the queue's reference.
            if cell.header.state.ref_dec() {
                // SAFETY: that was the last reference.
                unsafe { dealloc::<F, S>(ptr) };
            }
            return;
        }
    };

    let header = &cell.header;
    #[cfg(feature = "tracing")]
    let _span = tracing::trace_span!(target: "volt::task", "poll", task.id = header.id).entered();
    let mut token = cell.scheduler.poll_start(ptr, cx, sampled);
    // SAFETY: RUNNING gives this thread exclusive access to the stage.
    let polled = unsafe { poll_future::<F, S>(cell, ptr) };
    // Accounted while we still own the task; recorded below without touching it.
    cell.scheduler.poll_end(ptr, &mut token);
    let (id, ended) = (header.id, &token);
    match polled {
        Poll::Ready(output) => {
            let (polled, outcome) = match output.is_ok() {
                true => (PollOutcome::Ready, Outcome::Completed),
                false => (PollOutcome::Panicked, Outcome::Panicked),
            };
            S::poll_outcome(ended, id, polled);
            // SAFETY: still RUNNING; the future was already dropped by `poll_future`.
            unsafe { complete::<F, S>(ptr, output, outcome) };
        }
        Poll::Pending => {
            let t = cell.header.state.transition_to_idle();
            debug_assert_eq!(t.prev.lifecycle(), Lifecycle::Running);
            match t.action {
                // Now IDLE: from here another thread may run, complete and free the task,
                // so neither `cell` nor `header` is touched again.
                IdleAction::Idle => S::poll_outcome(ended, id, PollOutcome::Idle),
                // A wake came during the poll (yield_now is one): re-queue at the back.
                IdleAction::Notified => {
                    S::poll_outcome(ended, id, PollOutcome::Requeued);
                    cell.scheduler.yield_now(Notified(Task::from_raw(ptr)))
                }
                IdleAction::Cancel => {
                    S::poll_outcome(ended, id, PollOutcome::Cancelled);
                    // SAFETY: still RUNNING, so we own the stage.
                    unsafe { cancel_and_complete::<F, S>(ptr) }
                }
            }
        }
    }
}

/// Poll the future once. On `Ready` or a panic the future is dropped here and the result
/// returned; on `Pending` the future stays in the stage.
///
/// # Safety
/// The caller must own the task in RUNNING.
unsafe fn poll_future<F, S>(cell: &Cell<F, S>, ptr: NonNull<Header>) -> Poll<Result<F::Output, JoinError>>
where
    F: Future + 'static,
    S: Schedule,
{
    // The worker's reference stands in for the waker's: no refcount traffic per poll.
    // SAFETY: `WAKER_VTABLE` functions accept a header pointer; `ManuallyDrop` keeps
    // this borrowed waker from releasing a reference it never took.
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(ptr.as_ptr() as *const (), &WAKER_VTABLE)) });
    let mut cx = Context::from_waker(&waker);
    let _current = super::id::CurrentTaskGuard::enter(ptr);
    // A fresh cooperative budget for a task's poll; none for a blocking closure, whose
    // one poll runs it whole (see `coop`).
    let _budget = if S::BLOCKING { super::coop::Budget::unlimited() } else { super::coop::Budget::enter() };
    let res = catch_unwind(AssertUnwindSafe(|| {
        cell.stage.with_mut(|stage| {
            // SAFETY: exclusive access (RUNNING); the future is never moved out of the
            // heap cell while it is `Running`, so pinning holds.
            match unsafe { &mut *stage } {
                // SAFETY: the future lives in the heap cell and is never moved out while
                // `Running`; it is dropped in place.
                Stage::Running(fut) => unsafe { Pin::new_unchecked(fut) }.poll(&mut cx),
                _ => unreachable!("volt: task polled after it finished"),
            }
        })
    }));
    let output = match res {
        Ok(Poll::Pending) => return Poll::Pending,
        Ok(Poll::Ready(v)) => Ok(v),
        Err(payload) => Err(JoinError::panic(cell.header.id, payload)),
    };
    // SAFETY: exclusive access (RUNNING).
    match unsafe { drop_future_or_output(cell, ptr) } {
        // The future panicked as it was dropped after its last poll: the task panicked,
        // and its joiner hears of it (an output it returned is dropped here, its own
        // drop's panic caught; a second panic, after one in the poll, is dropped).
        Some(payload) if output.is_ok() => {
            drop(catch_unwind(AssertUnwindSafe(move || drop(output))));
            Poll::Ready(Err(JoinError::panic(cell.header.id, payload)))
        }
        _ => Poll::Ready(output),
    }
}

/// Replace the stage with `Consumed`, dropping whatever was there; a panic in that drop is
/// returned (the caller decides whether anyone can receive it).
///
/// # Safety
/// The caller must have exclusive access to the stage; `ptr` is the task's pointer as
/// allocated (the current task meanwhile, which a leaf may read its statistics through).
unsafe fn drop_future_or_output<F: Future, S>(cell: &Cell<F, S>, ptr: NonNull<Header>) -> Option<Box<dyn Any + Send>> {
    // The task is the current one while its future or output drops, as while it is polled:
    // `task::id()` in a destructor names it, as with Tokio.
    let _current = super::id::CurrentTaskGuard::enter(ptr);
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: guaranteed by the caller.
        cell.stage.with_mut(|stage| unsafe { *stage = Stage::Consumed });
    }))
    .err()
}

/// Drop the future of an aborted or shut-down task and complete it as cancelled.
///
/// # Safety
/// The caller must own the task in RUNNING, holding one reference for that; `ptr` is the
/// task's pointer as allocated (it carries the provenance `dealloc` needs).
unsafe fn cancel_and_complete<F, S>(ptr: NonNull<Header>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: our reference keeps the cell alive until `complete` releases it.
    let cell = unsafe { cell::<F, S>(ptr) };
    let id = cell.header.id;
    // SAFETY: exclusive access (RUNNING).
    let (output, outcome) = match unsafe { drop_future_or_output(cell, ptr) } {
        None => (Err(JoinError::cancelled(id)), Outcome::Cancelled),
        Some(payload) => (Err(JoinError::panic(id, payload)), Outcome::Panicked),
    };
    // SAFETY: still RUNNING.
    unsafe { complete::<F, S>(ptr, output, outcome) };
}

/// Store the output, go COMPLETE, hand the output to the handle (or drop it), leave the
/// owned list and release the references this run held.
///
/// # Safety
/// The caller must own the task in RUNNING with the future already dropped; `ptr` is the
/// task's pointer as allocated. (A pointer re-derived from `&cell.header` would only cover
/// the header's bytes, not the whole cell that `dealloc` frees.) It takes the pointer,
/// not a `&Cell`: a reference argument would still be live when the cell is freed here.
unsafe fn complete<F, S>(ptr: NonNull<Header>, output: Result<F::Output, JoinError>, outcome: Outcome)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: our reference keeps the cell alive until the final `ref_dec_n` below.
    let cell = unsafe { cell::<F, S>(ptr) };
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "volt::task", { task.id = cell.header.id, outcome = ?outcome }, "complete");
    // SAFETY: exclusive access until the transition below publishes it (AcqRel).
    cell.stage.with_mut(|stage| unsafe { *stage = Stage::Finished(output) });
    // Count first, so whoever observes COMPLETE also observes the count.
    cell.scheduler.on_complete(ptr, outcome);
    let prev = cell.header.state.transition_to_complete();
    if !prev.is_join_interested() {
        // Nobody will read it. The handle is gone, so the stage is ours again.
        // SAFETY: no `JoinHandle` exists; nothing else touches a COMPLETE stage.
        let _ = unsafe { drop_future_or_output(cell, ptr) };
    } else if prev.is_join_waker_set() {
        // The joiner's wake names this task as its source (the telemetry's wake source).
        let _current = super::id::CurrentTaskGuard::enter(ptr);
        // SAFETY: JOIN_WAKER was set at completion, so the handle no longer writes the slot.
        cell.join_waker.with(|w| {
            // SAFETY: see above; a shared read of the slot.
            if let Some(w) = unsafe { &*w } {
                let _ = catch_unwind(AssertUnwindSafe(|| w.wake_by_ref()));
            }
        });
    }
    // The owned list's reference comes back to us if we were still linked.
    let from_list = cell.scheduler.release(ptr);
    if cell.header.state.ref_dec_n(1 + from_list as u64) {
        // SAFETY: that was the last reference.
        unsafe { dealloc::<F, S>(ptr) };
    }
}

/// Push a task that a waker (or an abort) moved to SCHEDULED.
unsafe fn schedule<F, S>(ptr: NonNull<Header>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the queue reference the caller transfers keeps the cell alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    cell.scheduler.schedule(Notified(Task::from_raw(ptr)));
}

unsafe fn dealloc<F, S>(ptr: NonNull<Header>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the reference count reached zero, so this is the only pointer left; it is
    // the allocation `allocate` made, with the layout it computed from the same flag.
    unsafe {
        let (has_stats, owner) = (ptr.as_ref().state.has_stats(), ptr.as_ref().state.owner());
        let (layout, offset) = Cell::<F, S>::layout(has_stats);
        let cell = ptr.cast::<Cell<F, S>>().as_ptr();
        // The scheduler is moved out and dropped last: it may own the cell cache the
        // memory goes back to (dropping the runtime's last `Arc` frees the caches).
        let scheduler = std::ptr::read(&raw const (*cell).scheduler);
        std::ptr::drop_in_place(&raw mut (*cell).header);
        std::ptr::drop_in_place(&raw mut (*cell).stage);
        std::ptr::drop_in_place(&raw mut (*cell).join_waker);
        if has_stats {
            std::ptr::drop_in_place(ptr.cast::<u8>().as_ptr().add(offset).cast::<super::stats::TaskStats>());
        }
        scheduler.free_cell(ptr.cast::<u8>(), layout, owner);
        drop(scheduler);
    }
}

/// Poll from the `JoinHandle`: if the task is complete, move the output into `dst`
/// (a `*mut Poll<Result<T, JoinError>>`); otherwise make sure `waker` will be woken.
unsafe fn try_read_output<F, S>(ptr: NonNull<Header>, dst: *mut (), waker: &Waker, spend: bool)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the handle's reference keeps the cell alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    if can_read_output(cell, waker) {
        // Looked at here, where the output is ready, so a join that waits never looks.
        if spend && !super::coop::try_spend(waker) {
            return;
        }
        let out = cell.stage.with_mut(|stage| {
            // SAFETY: COMPLETE with join interest: the stage belongs to the handle.
            match std::mem::replace(unsafe { &mut *stage }, Stage::Consumed) {
                Stage::Finished(out) => out,
                _ => panic!("volt: JoinHandle polled after it returned Ready"),
            }
        });
        // SAFETY: the caller passes a valid `Poll<Result<F::Output, JoinError>>`.
        unsafe { *(dst as *mut Poll<Result<F::Output, JoinError>>) = Poll::Ready(out) };
    }
}

/// The join-waker protocol: returns true once the output can be read.
fn can_read_output<F: Future, S>(cell: &Cell<F, S>, waker: &Waker) -> bool {
    let state = &cell.header.state;
    let snap = state.load();
    if snap.is_complete() {
        return true;
    }
    if snap.is_join_waker_set() {
        // SAFETY: JOIN_WAKER is set, so the completer may read the slot but nobody writes
        // it; a shared read is fine.
        let same = cell.join_waker.with(|w| unsafe { &*w }.as_ref().is_some_and(|w| w.will_wake(waker)));
        if same {
            return false;
        }
        // Take the slot back before replacing the waker.
        if state.unset_join_waker().is_err() {
            return true;
        }
    }
    // SAFETY: JOIN_WAKER is clear, so the slot is the handle's alone.
    cell.join_waker.with_mut(|w| unsafe { *w = Some(waker.clone()) });
    state.set_join_waker().is_err()
}

unsafe fn drop_join_handle<F, S>(ptr: NonNull<Header>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the handle's reference keeps the cell alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    let prev = cell.header.state.unset_join_interest();
    if prev.is_complete() {
        // The completer saw our interest and left the output for us: drop it.
        // SAFETY: COMPLETE with join interest at completion: the stage is ours.
        let _ = unsafe { drop_future_or_output(cell, ptr) };
    }
    if cell.header.state.ref_dec() {
        // SAFETY: that was the last reference.
        unsafe { dealloc::<F, S>(ptr) };
    }
}

unsafe fn shutdown<F, S>(ptr: NonNull<Header>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the caller holds a reference.
    let cell = unsafe { cell::<F, S>(ptr) };
    if cell.header.state.transition_to_shutdown() {
        // SAFETY: we claimed RUNNING with a reference of our own.
        unsafe { cancel_and_complete::<F, S>(ptr) };
    }
}

/// Whether the task's runtime has begun to shut down.
///
/// # Safety
/// The caller holds a reference.
unsafe fn runtime_shut_down<F, S>(ptr: NonNull<Header>) -> bool
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the caller's reference keeps the cell alive.
    unsafe { cell::<F, S>(ptr) }.scheduler.is_shut_down()
}

/// If the task's runtime has begun to shut down: cancel the task if nobody polls it, in
/// the runtime's context (as the scheduler's `Handle::close_and_cancel_all` does); returns whether it had.
///
/// # Safety
/// The caller holds a reference.
unsafe fn cancel_if_shut_down<F, S>(ptr: NonNull<Header>) -> bool
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    // SAFETY: the caller's reference keeps the cell alive.
    let cell = unsafe { cell::<F, S>(ptr) };
    if !cell.scheduler.is_shut_down() {
        return false;
    }
    // SAFETY: the caller's reference, as `shutdown` requires.
    cell.scheduler.in_context(&mut || unsafe { shutdown::<F, S>(ptr) });
    true
}

// ---- wakers: a `Waker` is a header pointer plus this vtable; it owns one reference ----

pub(crate) static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

fn header<'a>(ptr: *const ()) -> &'a Header {
    // SAFETY: waker data is always a live header pointer (the waker holds a reference).
    unsafe { &*(ptr as *const Header) }
}

fn nonnull(ptr: *const ()) -> NonNull<Header> {
    // SAFETY: waker data is never null.
    unsafe { NonNull::new_unchecked(ptr as *mut Header) }
}

unsafe fn waker_clone(ptr: *const ()) -> RawWaker {
    header(ptr).state.ref_inc();
    RawWaker::new(ptr, &WAKER_VTABLE)
}

unsafe fn waker_wake(ptr: *const ()) {
    let h = header(ptr);
    match h.state.transition_to_scheduled_by_val() {
        // SAFETY: our reference became the queue entry's.
        TransitionToScheduled::Submit => unsafe { (h.vtable.schedule)(nonnull(ptr)) },
        // SAFETY: ours was the last reference.
        TransitionToScheduled::Dealloc => unsafe { (h.vtable.dealloc)(nonnull(ptr)) },
        TransitionToScheduled::DoNothing => {}
    }
}

unsafe fn waker_wake_by_ref(ptr: *const ()) {
    let h = header(ptr);
    if h.state.transition_to_scheduled_by_ref() == TransitionToScheduled::Submit {
        // SAFETY: the transition took a fresh reference for the queue entry.
        unsafe { (h.vtable.schedule)(nonnull(ptr)) };
    }
}

unsafe fn waker_drop(ptr: *const ()) {
    let h = header(ptr);
    if h.state.ref_dec() {
        // SAFETY: ours was the last reference.
        unsafe { (h.vtable.dealloc)(nonnull(ptr)) };
    }
}

/// Allocate a task, with statistics (see [`TaskStats::write_new`]) if `stats` is given.
/// Returns the owned-list reference, the queue entry and the handle.
pub(crate) fn new_task<F, S>(
    future: F,
    scheduler: S,
    id: u64,
    stats: Option<NewTaskStats>,
) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let raw = Cell::<F, S>::allocate(future, scheduler, id, stats);
    (Task::from_raw(raw), Notified(Task::from_raw(raw)), JoinHandle::new(raw))
}

/// [`new_task`] for a future that need not be `Send` (a `LocalSet`'s task).
///
/// # Safety
/// The scheduler `S` must poll the task, run its shutdown and drop its queue entries only
/// on the one thread that may touch `future`, and its `is_shut_down` must be false (so no
/// joiner on another thread cancels it); the join handle of a `!Send` output stays on
/// that thread by its own type.
pub(crate) unsafe fn new_local_task<F, S>(
    future: F,
    scheduler: S,
    id: u64,
) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    let raw = Cell::<F, S>::allocate(future, scheduler, id, None);
    (Task::from_raw(raw), Notified(Task::from_raw(raw)), JoinHandle::new(raw))
}
